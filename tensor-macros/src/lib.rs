//! Proc macros: `#[function]`, `vmap!`, `jvp!`, `grad!` and friends.
