//! Helpers shared by the integration tests of `tensor-core`.

pub mod transform_support;
