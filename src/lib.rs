//! `tensor`: a tensor compiler embedded in Rust.
//!
//! This facade re-exports the compiler (`tensor-core`), the runtime (`tensor-runtime`) and the
//! proc macros (`tensor-macros`).

#![warn(missing_docs)]

pub use tensor_core as core;
pub use tensor_runtime as runtime;

pub use tensor_core::Tensor;
pub use tensor_core::nn;
pub use tensor_core::transform::tree::{
    self, AxisTree, Tree, TreeDef, tree_add, tree_leaves, tree_map, tree_scale, tree_structure,
    tree_sub, tree_unflatten, tree_vdot, tree_zeros_like, tree_zip_map,
};
pub use tensor_core::transform::{
    ArgNums, Func, InAxes, IntoFunc, OutAxes, grad, grad_with, hessian, jacfwd, jacrev, jvp,
    value_and_grad, value_and_grad_with, vjp, vmap,
};
pub use tensor_macros::{
    Tree, function, grad, hessian, jacfwd, jacrev, jvp, value_and_grad, vjp, vmap,
};
pub use tensor_runtime::jit;

/// `jit!(f)`: `f` (a `#[function]`, a closure, or another transform macro's result) compiled
/// once per input signature and replayed, as a callable of `f`'s arity and result type:
/// `let step = jit!(grad!(loss, argnums = 0)); let dw = step(&w, &x, &y);`.
#[macro_export]
macro_rules! jit {
    ($f:expr $(,)?) => {
        $crate::__private::jit($f)
    };
}

#[doc(hidden)]
#[path = "macro_support.rs"]
pub mod __private;

/// The names most programs need.
pub mod prelude {
    pub use crate::jit;
    pub use tensor_core::transform::tree::{
        Tree, tree_add, tree_leaves, tree_map, tree_scale, tree_sub, tree_vdot, tree_zeros_like,
        tree_zip_map,
    };
    pub use tensor_core::transform::{
        Func, grad, hessian, jacfwd, jacrev, jvp, value_and_grad, vjp, vmap,
    };
    pub use tensor_core::{DType, Device, Tensor, UOp};
    pub use tensor_macros::{
        Tree, function, grad, hessian, jacfwd, jacrev, jvp, value_and_grad, vjp, vmap,
    };
    pub use tensor_runtime::Realize;
}
