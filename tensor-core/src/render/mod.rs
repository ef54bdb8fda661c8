//! Renderers: a linearized kernel printed as source text for a device's compiler.

// A UOp hashes and compares by node identity; its lazily filled caches never change that.
#![allow(clippy::mutable_key_type)]

pub mod c;
pub mod c_helpers;
