//! Function transforms, all graph to graph and all composable: `vmap` (by rewrite), and the
//! machinery they share: [`Func`], trees of tensors ([`tree`]), tracing on placeholders,
//! substitution.

pub mod crossing;
pub mod custom;
pub mod external;
pub mod func;
pub mod function;
pub mod jacobian;
pub mod jvp;
pub mod scan;
pub mod trace;
pub mod tree;
pub mod vjp;
pub mod vmap;
pub mod zero;

pub use custom::{Custom, custom_jvp, custom_vjp, custom_vmap};
pub use external::{ExtArg, External};
pub use func::{Func, IntoFunc, IntoOutputs};
pub use function::{CallMode, FunctionCache};
pub use jacobian::{hessian, jacfwd, jacfwd_chunked, jacrev, jacrev_chunked};
pub use jvp::jvp;
pub use scan::{scan, scan_reverse};
pub use tree::{Tree, TreeDef};
pub use vjp::{ArgNums, grad, grad_with, value_and_grad, value_and_grad_with, vjp};
pub use vmap::{DeferredAxes, InAxes, OutAxes, VmapMethod, vmap, vmap_chunked, vmap_with};
