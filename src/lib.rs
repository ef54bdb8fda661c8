//! `tensor`: a tensor compiler embedded in Rust.
//!
//! This facade re-exports the compiler (`tensor-core`), the runtime (`tensor-runtime`) and the
//! proc macros (`tensor-macros`).

pub use tensor_core as core;
pub use tensor_runtime as runtime;

/// The names most programs need.
pub mod prelude {
    pub use tensor_core::{DType, Device, UOp};
}
