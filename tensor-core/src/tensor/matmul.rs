//! Matrix products as tinyspec's gemm: `A[.., M, K, 1] * B[.., 1, K, N]`, summed over `K`.
//! Shapes follow NumPy's `matmul`: 1-D operands gain an axis that is removed again, and batch
//! axes broadcast.

use super::Tensor;
use super::broadcast::{addressable, broadcast_uop, cast_uop};
use super::elementwise::mul_uop;
use super::error::ShapeError;
use super::reduce::{float_accumulator, reduce_uop};
use crate::uop::shape::broadcast;
use crate::uop::{DType, Op, ReduceOp, Shape, UOp};

impl Tensor {
    /// The matrix product `self @ other` with NumPy's rules for 1-D operands and broadcast
    /// batch axes. Operands promote to one dtype; bools multiply as `i32` and the result is
    /// "non-zero".
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let v = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
    /// assert_eq!(evaluate(&a.matmul(&v).uop()).to_vec::<f32>(), vec![-1.0, -1.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// On a 0-d operand, inner sizes that differ, batch axes that do not broadcast or a product
    /// with more elements than a tensor may hold; [`Tensor::try_matmul`] returns the error.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        let _op = super::op_scope::OpScope::enter("matmul");
        match self.try_matmul(other) {
            Ok(v) => v,
            Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
        }
    }

    /// [`Tensor::matmul`], with operands whose shapes do not fit as an error instead of a
    /// panic (the message is the one `matmul` panics with).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType};
    /// let a = Tensor::zeros(&[2, 3], DType::F32);
    /// let err = a.try_matmul(&a).unwrap_err();
    /// assert!(err.message.contains("axis 1 of the left (3) must equal axis 0 of the right (2)"));
    /// assert_eq!(a.try_matmul(&a.transpose(0, 1)).unwrap().shape(), vec![2, 2]);
    /// ```
    pub fn try_matmul(&self, other: &Tensor) -> Result<Tensor, ShapeError> {
        let plan = MatmulShapes::of(&self.shape(), &other.shape())
            .map_err(|m| ShapeError::new("matmul", m))?;
        Ok(plan.build(self, other))
    }

    /// The dot product of vectors, matrix-vector or matrix-matrix product (`matmul` restricted
    /// to 1-D and 2-D operands, as NumPy's `dot` for those).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    /// assert_eq!(evaluate(&v.dot(&v).uop()).to_vec::<f32>(), vec![14.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an operand with more than two axes (use [`Tensor::matmul`] for batches) and where
    /// `matmul` panics; for 1-D and 2-D operands [`Tensor::try_matmul`] is the fallible form.
    #[track_caller]
    pub fn dot(&self, other: &Tensor) -> Tensor {
        let _op = super::op_scope::OpScope::enter("dot");
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

/// The shapes a matmul works with, once its operands are known to fit.
struct MatmulShapes {
    /// The left operand as a matrix (a 1-D one gains a leading 1).
    left: Shape,
    /// The right operand as a matrix (a 1-D one gains a trailing 1).
    right: Shape,
    /// The broadcast batch axes.
    batch: Shape,
    /// The result's shape, with the axes 1-D operands gained removed again.
    out: Shape,
}

impl MatmulShapes {
    /// The shapes of `ls @ rs`, or the message `matmul` panics with.
    fn of(ls: &[usize], rs: &[usize]) -> Result<MatmulShapes, String> {
        if ls.is_empty() || rs.is_empty() {
            return Err(format!(
                "matmul: shapes {ls:?} and {rs:?}: operands must have at least one axis (use mul for scalars)"
            ));
        }
        let left = if ls.len() == 1 {
            vec![1, ls[0]]
        } else {
            ls.to_vec()
        };
        let right = if rs.len() == 1 {
            vec![rs[0], 1]
        } else {
            rs.to_vec()
        };
        let (m, k) = (left[left.len() - 2], left[left.len() - 1]);
        let (k_right, n) = (right[right.len() - 2], right[right.len() - 1]);
        if k != k_right {
            let right_axis = if rs.len() == 1 { 0 } else { rs.len() - 2 };
            return Err(format!(
                "matmul: shapes {ls:?} and {rs:?} do not align: axis {} of the left ({k}) must equal axis {right_axis} of the right ({k_right})",
                ls.len() - 1
            ));
        }
        let (batch_a, batch_b) = (&left[..left.len() - 2], &right[..right.len() - 2]);
        let batch = broadcast(&[batch_a, batch_b]).ok_or_else(|| {
            format!(
                "matmul: batch axes {batch_a:?} and {batch_b:?} of shapes {ls:?} and {rs:?} cannot broadcast"
            )
        })?;
        addressable("matmul", &[batch.as_slice(), &[m, k, n]].concat())?;
        let mut out: Shape = [batch.as_slice(), &[m, n]].concat();
        if rs.len() == 1 {
            out.pop();
        }
        if ls.len() == 1 {
            out.remove(out.len() - if rs.len() == 1 { 1 } else { 2 });
        }
        Ok(MatmulShapes {
            left,
            right,
            batch,
            out,
        })
    }

    /// `a @ b` as a broadcast multiply summed over `K`, in the accumulator dtype.
    fn build(&self, a: &Tensor, b: &Tensor) -> Tensor {
        let dtype = DType::promote(a.dtype(), b.dtype());
        // Half floats multiply and accumulate in f32 and round once at the end, as every peer
        // does: f16 products and partial sums each lose low bits.
        let work = if dtype == DType::Bool {
            DType::I32
        } else {
            float_accumulator(dtype)
        };
        let (l, r) = (&self.left, &self.right);
        let (m, k, n) = (l[l.len() - 2], l[l.len() - 1], r[r.len() - 1]);
        let full: Shape = [self.batch.as_slice(), &[m, k, n]].concat();
        let a = cast_uop(&a.uop(), work).reshape(&[&l[..l.len() - 2], &[m, k, 1]].concat());
        let b = staggered_rows(&cast_uop(&b.uop(), work).reshape(r), r, m, work)
            .reshape(&[&r[..r.len() - 2], &[1, k, n]].concat());
        let (a, b) = (broadcast_uop(&a, &full), broadcast_uop(&b, &full));
        let mut product = reduce_uop(
            &mul_uop(&a, &b),
            ReduceOp::Add,
            &[self.batch.len() + 1],
            false,
        );
        if self.out != product.shape_vec() {
            product = product.reshape(&self.out);
        }
        Tensor::from_uop(cast_uop(&product, dtype))
    }
}
