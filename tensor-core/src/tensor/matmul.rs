//! Matrix products as tinyspec's gemm: `A[.., M, K, 1] * B[.., 1, K, N]`, summed over `K`.
//! Shapes follow NumPy's `matmul`: 1-D operands gain an axis that is removed again, and batch
//! axes broadcast.

use super::Tensor;
use super::broadcast::{broadcast_uop, cast_uop};
use super::elementwise::mul_uop;
use super::reduce::{float_accumulator, reduce_uop};
use crate::uop::{DType, Op, ReduceOp, Shape, UOp};

impl Tensor {
    /// The matrix product `self @ other` with NumPy's rules for 1-D operands and broadcast
    /// batch axes. Operands promote to one dtype; bools multiply as `i32` and the result is
    /// "non-zero". Panics on a 0-d operand, inner sizes that differ or batch axes that do not
    /// broadcast.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let v = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
    /// assert_eq!(evaluate(&a.matmul(&v).uop()).to_vec::<f32>(), vec![-1.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        let (ls, rs) = (self.shape(), other.shape());
        if ls.is_empty() || rs.is_empty() {
            panic!(
                "matmul: shapes {ls:?} and {rs:?}: operands must have at least one axis (use mul for scalars)"
            );
        }
        let dtype = DType::promote(self.dtype(), other.dtype());
        // Half floats multiply and accumulate in f32 and round once at the end, as every peer
        // does: f16 products and partial sums each lose low bits.
        let work = if dtype == DType::Bool {
            DType::I32
        } else {
            float_accumulator(dtype)
        };
        let a = cast_uop(&self.uop(), work);
        let b = cast_uop(&other.uop(), work);
        let (a, la) = if ls.len() == 1 {
            (a.reshape(&[1, ls[0]]), vec![1, ls[0]])
        } else {
            (a, ls.clone())
        };
        let (b, lb) = if rs.len() == 1 {
            (b.reshape(&[rs[0], 1]), vec![rs[0], 1])
        } else {
            (b, rs.clone())
        };
        let b = staggered_rows(&b, &lb, la[la.len() - 2], work);
        let (m, k) = (la[la.len() - 2], la[la.len() - 1]);
        let (k_right, n) = (lb[lb.len() - 2], lb[lb.len() - 1]);
        if k != k_right {
            let right_axis = if rs.len() == 1 { 0 } else { rs.len() - 2 };
            panic!(
                "matmul: shapes {ls:?} and {rs:?} do not align: axis {} of the left ({k}) must equal axis {right_axis} of the right ({k_right})",
                ls.len() - 1
            );
        }
        let (batch_a, batch_b) = (la[..la.len() - 2].to_vec(), lb[..lb.len() - 2].to_vec());
        let batch = if batch_a.len() + batch_b.len() == 0 {
            vec![]
        } else {
            matmul_batch(&ls, &rs, &batch_a, &batch_b)
        };
        let full: Shape = [batch.as_slice(), &[m, k, n]].concat();
        let a = broadcast_uop(
            &a.reshape(&[batch_a.as_slice(), &[m, k, 1]].concat()),
            &full,
        );
        let b = broadcast_uop(
            &b.reshape(&[batch_b.as_slice(), &[1, k, n]].concat()),
            &full,
        );
        let mut product = reduce_uop(&mul_uop(&a, &b), ReduceOp::Add, &[batch.len() + 1], false);
        let mut out: Shape = [batch.as_slice(), &[m, n]].concat();
        if rs.len() == 1 {
            out.pop();
        }
        if ls.len() == 1 {
            out.remove(out.len() - if rs.len() == 1 { 1 } else { 2 });
        }
        if out != product.shape_vec() {
            product = product.reshape(&out);
        }
        Tensor::from_uop(cast_uop(&product, dtype))
    }

    /// The dot product of vectors, matrix-vector or matrix-matrix product (`matmul` restricted
    /// to 1-D and 2-D operands, as NumPy's `dot` for those).
    #[track_caller]
    pub fn dot(&self, other: &Tensor) -> Tensor {
        if self.ndim() > 2 || other.ndim() > 2 {
            panic!(
                "dot: shapes {:?} and {:?}: only 1-D and 2-D operands (use matmul for batches)",
                self.shape(),
                other.shape()
            );
        }
        self.matmul(other)
    }
}

/// The least number of rows, of the right operand and of the left, for which
/// [`staggered_rows`] copies the right operand.
pub const STAGGER_MIN_ROWS: usize = 64;

/// Bytes between two rows at which their cache sets collide.
const STAGGER_PERIOD_BYTES: usize = 4096;

/// The bytes a staggered row is padded by: one cache line.
const CACHE_LINE_BYTES: usize = 64;

/// The right operand `b` (a `[K, N]` matrix of `dtype`) read through a copy whose rows are
/// one cache line longer, when its rows are a multiple of 4 KiB apart, K and the left
/// operand's rows `m` are at least [`STAGGER_MIN_ROWS`], and its dtype is a float; `b`
/// itself otherwise (and for batched right operands, whose copy could multiply a broadcast).
///
/// A matmul kernel walks a narrow column strip of `b` down all K rows once per tile of output
/// rows. Rows a power-of-two multiple of 4 KiB apart map to the same few cache sets, so the
/// strip cannot stay in L1 or L2 (at N = 2048 `f32` it competes for 8 of L2's 1024 sets) and
/// is fetched again from L3 or memory for every tile. In the copy the rows are staggered by
/// one line and the strip stays cached. The copy costs one pass over `b`, at most
/// 1/[`STAGGER_MIN_ROWS`] of the matmul's work; the products and their order are unchanged.
fn staggered_rows(b: &UOp, shape: &[usize], m: usize, dtype: DType) -> UOp {
    let &[k, n] = shape else {
        return b.clone();
    };
    let row_bytes = n * dtype.size_bytes();
    let collides = row_bytes > 0 && row_bytes.is_multiple_of(STAGGER_PERIOD_BYTES);
    if !dtype.is_float() || !collides || k < STAGGER_MIN_ROWS || m < STAGGER_MIN_ROWS {
        return b.clone();
    }
    let pad = CACHE_LINE_BYTES / dtype.size_bytes();
    b.pad(&[0, 0], &[0, pad])
        .unary_marker(Op::Contiguous)
        .shrink(&[0, 0], &[k, n])
}

/// The broadcast batch axes of a matmul, or a panic naming both operands.
#[track_caller]
fn matmul_batch(ls: &[usize], rs: &[usize], batch_a: &[usize], batch_b: &[usize]) -> Shape {
    let refs: [&[usize]; 2] = [batch_a, batch_b];
    match crate::uop::shape::broadcast(&refs) {
        Some(b) => b,
        None => panic!(
            "matmul: batch axes {batch_a:?} and {batch_b:?} of shapes {ls:?} and {rs:?} cannot broadcast"
        ),
    }
}
