//! Function transforms, all graph to graph and all composable: `vmap` (by rewrite), and the
//! machinery they share: [`Func`], tracing on placeholders, substitution.

pub mod func;
pub mod trace;
pub mod vmap;

pub use func::{Func, IntoFunc, IntoOutputs};
pub use vmap::{InAxes, OutAxes, vmap};
