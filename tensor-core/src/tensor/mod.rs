//! The lazy `Tensor`: a handle on a UOp graph that records operations instead of running them.
//!
//! Every operation builds UOps from tinyspec's primitives; nothing is computed until a runtime
//! realizes the graph (or the reference interpreter evaluates it). Shape and dtype errors are
//! caught here, while the graph is built, and panic with the op, the shapes and the caller's line.

mod advanced_index;
mod broadcast;
pub(crate) use broadcast::normalize_axes;
mod create;
mod cumulative;
mod diagonals;
mod einsum;
mod elementwise;
mod error;
mod float_math;
mod indexing;
mod matmul;
mod moments;
mod movement;
mod nn;
mod normalize;
mod norms;
mod op_scope;
pub(crate) use op_scope::LibraryScope;
pub(crate) use op_scope::OpScope;
mod operators;
mod padding;
mod pieces;
mod placement;
mod power;
mod products;
pub(crate) use power::{pow_base_partial, pow_exponent_partial};
mod random;
mod rearrange;
mod reduce;
mod sliding;
mod sorting;
mod special_math;
mod tiling;
mod updates;
mod value;
mod vmap_scope;

pub use advanced_index::Index;
pub use broadcast::{Dims, IntoAxes, Operand};
pub use create::{ArangeArgs, ArangeForm};
pub use error::ShapeError;
pub use norms::MatrixOrd;
pub use padding::PadMode;
pub use pieces::SplitSizes;
pub use rearrange::Indexing;
pub use reduce::{Axes, accumulated_reduce, float_accumulator};
pub use special_math::RoundingMode;
pub use updates::{At, IntoStarts, ScatterReduce};

use crate::uop::{DType, Shape, UOp};
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock, Weak};

/// A lazy n-dimensional array.
///
/// Names and signatures follow NumPy (see `docs/signatures.md`): reductions take
/// `axes` (one, several, or `None` for all) and `keepdim`; `softmax`/`log_softmax` one axis;
/// constructors a dtype; scalars mix with tensors on either side of an operator.
///
/// # Panics
///
/// Ops check their arguments while the graph is built and panic on a mistake (an axis out of
/// range, shapes that do not broadcast or fit, an empty axis where a reduction has no
/// identity, a dtype the op does not take), with the op, the shapes and the caller's line.
/// Nothing panics later: index values are data (an index out of range selects nothing) and
/// faults of the runtime are `Result`s. Where a program may want to handle a mistake there is a
/// fallible twin returning [`ShapeError`] with the message its panicking form prints:
/// [`Tensor::try_from_vec`], [`Tensor::try_reshape`], [`Tensor::try_expand`],
/// [`Tensor::try_broadcast_to`], [`Tensor::try_matmul`], [`Tensor::try_cat`] and
/// [`Tensor::try_stack`]; [`Tensor::broadcast_shapes`] checks the operands of any elementwise op
/// up front. Every method that can panic says when in its `# Panics` section.
///
/// # Scalars on the left of an operator
///
/// On the right of `+ - * / %` any primitive number or `bool` works. On the left a scalar is an
/// `f64` or an `i32`, the types unsuffixed literals take, so `2.0 - &x` and `1 - &x` work and a
/// value of another type goes on the right, through `f64::from`, or in [`Tensor::scalar`]:
///
/// ```
/// # use tensor_core::{Tensor, interp::evaluate};
/// let x = Tensor::from_vec(vec![1.0f32, 1.75], &[2]);
/// let v = 2.0f32;
/// let y = (f64::from(v) - &x).sqrt() * 3u8; // np.sqrt(v - x) * 3
/// assert_eq!(evaluate(&y.uop()).to_vec::<f32>(), vec![3.0, 1.5]);
/// assert_eq!(evaluate(&(1 - &x).uop()).to_vec::<f32>(), vec![0.0, -0.75]);
/// let y = Tensor::scalar(v) - &x; // a 0-d f32 tensor: promotes as a tensor, not a weak scalar
/// assert_eq!(evaluate(&y.uop()).to_vec::<f32>(), vec![1.0, 0.25]);
/// ```
///
/// A typed scalar of another type on the left does not compile:
///
/// ```compile_fail,E0277
/// # use tensor_core::Tensor;
/// let x = Tensor::from_vec(vec![0.25f32, 1.0], &[2]);
/// let y = 2.0f32 - &x;
/// ```
///
/// ```compile_fail,E0277
/// # use tensor_core::Tensor;
/// let x = Tensor::from_vec(vec![0.25f32, 1.0], &[2]);
/// let y = 3u8 * &x; // `&x * 3u8` works
/// ```
///
/// Implementing the operators for `f32` (or `u8`, ...) on the left too would make an unsuffixed
/// literal there ambiguous, and Rust picks a literal's type only at the end of type checking:
/// `2.0 - &x`, `2.0 - &x + 1.0` and `f(&(2.0 - &x))` would still compile, but a method call on
/// the result, `(2.0 - &x).sqrt()` or `let y = 2.0 - &x; y.sqrt()`, would fail with E0282
/// ("type annotations needed"), and that is the common form.
///
/// Clones share one cell: when a runtime realizes a tensor it swaps the graph in that cell for
/// the realized buffer, and every clone then reads the buffer instead of recomputing it.
#[derive(Clone)]
pub struct Tensor {
    cell: Arc<TensorCell>,
}

/// The shared state of a tensor and its clones.
struct TensorCell {
    uop: RwLock<UOp>,
    /// The other results of the function call that made this tensor (see
    /// [`Tensor::group_siblings`]).
    siblings: OnceLock<Vec<Weak<TensorCell>>>,
}

impl Tensor {
    /// A tensor whose value is the graph `uop`.
    pub fn from_uop(uop: UOp) -> Tensor {
        Tensor {
            cell: Arc::new(TensorCell {
                uop: RwLock::new(uop),
                siblings: OnceLock::new(),
            }),
        }
    }

    /// The graph this tensor currently stands for.
    pub fn uop(&self) -> UOp {
        self.cell
            .uop
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records that `results` came from one function call (the gradients of one `grad`, say),
    /// so that a runtime computing one of them computes the others, which share its work, in
    /// the same pass, as JAX computes every output of a call. A tensor keeps the group of the
    /// first call that returned it.
    pub fn group_siblings(results: &[Tensor]) {
        if results.len() < 2 {
            return;
        }
        for (k, t) in results.iter().enumerate() {
            let others = results
                .iter()
                .enumerate()
                .filter(|&(j, o)| j != k && !Arc::ptr_eq(&o.cell, &t.cell))
                .map(|(_, o)| Arc::downgrade(&o.cell))
                .collect();
            let _first_group_wins = t.cell.siblings.set(others);
        }
    }

    /// The other results of the call that made this tensor that are still alive (see
    /// [`Tensor::group_siblings`]).
    pub fn siblings(&self) -> Vec<Tensor> {
        self.cell
            .siblings
            .get()
            .map(|group| {
                group
                    .iter()
                    .filter_map(Weak::upgrade)
                    .map(|cell| Tensor { cell })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// True when `self` and `other` are clones of one tensor.
    pub fn same_tensor(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.cell, &other.cell)
    }

    /// Points this tensor (and its clones) at another graph of the same value, shape and dtype:
    /// how a runtime installs a realized buffer.
    ///
    /// # Panics
    ///
    /// When `uop` has another shape or dtype than the current graph (a runtime bug, not a user's
    /// mistake).
    #[track_caller]
    pub fn replace_uop(&self, uop: UOp) {
        let mut cell = self.cell.uop.write().unwrap_or_else(|e| e.into_inner());
        assert_eq!(
            cell.shape(),
            uop.shape(),
            "replace_uop: the shape must not change"
        );
        assert_eq!(
            cell.dtype(),
            uop.dtype(),
            "replace_uop: the dtype must not change"
        );
        *cell = uop;
    }

    /// The size of each axis.
    pub fn shape(&self) -> Shape {
        self.uop().shape_vec()
    }

    /// The number of axes.
    pub fn ndim(&self) -> usize {
        self.uop().ndim()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.uop().numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.uop().dtype()
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = self.uop();
        write!(
            f,
            "Tensor<{}>{:?} on {}",
            u.dtype(),
            u.shape().unwrap_or(&[]),
            self.device()
        )
    }
}
