//! Proc macros: `#[function]`, `vmap!`, `jvp!`, `vjp!`, `grad!`, `value_and_grad!`, `jacfwd!`,
//! `jacrev!`, `hessian!`. Use them through the `tensor` crate (`use tensor::prelude::*;`):
//! every expansion refers to `::tensor::...` only.
//!
//! The transform macros return callables typed like the function they transform:
//!
//! | macro | returns |
//! |---|---|
//! | `vmap!(f, in_axes = (0, None), out_axes = 0)` | a callable of `f`'s arity returning `f`'s result type |
//! | `grad!(f, argnums = (0, 2))` | a callable of `f`'s arity returning one gradient per argnum, shaped like that argument; `has_aux = true` adds `f`'s aux, `allow_int = true` zero gradients for integers |
//! | `value_and_grad!(f, argnums = 0)` | a callable returning `(value, gradients)` |
//! | `jacfwd!(f, argnums = (0, 1))`, `jacrev!`, `hessian!` | a callable returning, per result of `f`, the Jacobians (Hessian blocks) for the argnums; for a `#[derive(Tree)]` result (or argument, for `hessian!`) a `TreeJacobian` with one argument-shaped row per tensor of it |
//! | `#[derive(Tree)]` | a struct of tensors usable as an argument or result of all of these |
//! | `jvp!(f, (x, y), (tx, ty))` | `(f(x, y), J · (tx, ty))`, each typed like `f`'s result |
//! | `vjp!(f, (x, y))` | `(f(x, y), pullback)`; `pullback(&ct)` returns one cotangent per primal |
//!
//! Rules of typing: the callables take every tensor by reference (`g(&x, &w)`); a function
//! with one result gives a `Tensor`, with several a tuple; `argnums = 0` and `argnums = (0,)`
//! both give one `Tensor`. `f` may be a closure (unannotated parameters are read as
//! `&Tensor`), a `#[function]` item or any fn of one to eight tensors (all `&Tensor` or all
//! `Tensor`), or another transform macro: `vmap!(grad!(loss, argnums = 0), in_axes = (None, 0, 0))`
//! is the per-sample gradient.
//!
//! Mistakes the macros can see are compile errors spanned on the offending token: an axis that
//! is not an integer literal or `None`, an `in_axes` whose length is not `f`'s arity, an
//! argnum out of range, tangents whose count differs from the primals', an unknown keyword
//! (with the nearest known one). For closures the arity is read from the parameter list; for
//! other functions the check is a trait bound on the function's type, reported at the
//! `in_axes` / argnum / primals it concerns.

#![warn(missing_docs)]

mod args;
mod function;
mod jit;
mod suggest;
mod transform;
mod tree;

use proc_macro::TokenStream;
use transform::Derivative;

fn emit(result: syn::Result<proc_macro2::TokenStream>) -> TokenStream {
    result.unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Captures a function of tensors as one `Function` node of the graph (tinyspec's
/// `@function`). Each call traces the body once per input signature (shapes, dtypes, devices,
/// and which arguments are the same tensor) with `Param(k)` for the inputs, caches the traced
/// body, and returns the results through `GetTuple`. Later calls with the same signature run
/// no Rust code of the body.
///
/// Parameters are trees of tensors, by reference or by value (`&Tensor`, `Tensor`, `&Params`
/// for a `#[derive(Tree)]` struct, `&Vec<Tensor>`, ...; the structure of the trees is part of
/// the signature); the result is a tree too (a `Tensor`, a tuple, a derived struct, a `Vec`,
/// ...; its structure is recorded when a signature is traced).
/// `#[function(precompile)]` marks the node to be compiled as one reusable unit instead of
/// being inlined at schedule time. The macro also emits a companion module of the same name
/// with `ARITY`, `RESULTS` (for a tensor or tuple result; `RESULT_DEFS` for any other tree),
/// the trace `CACHE` and `trace_count()`.
///
/// ```ignore
/// #[function]
/// fn affine(w: &Tensor, x: &Tensor, b: &Tensor) -> Tensor {
///     x.matmul(w) + b
/// }
/// let y = affine(&w, &x, &b);
/// assert_eq!(affine::trace_count(), 1);
/// ```
#[proc_macro_attribute]
pub fn function(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    match function::expand(attr.into(), item.clone()) {
        Ok(expanded) => expanded.into(),
        // The item stays as written, so its uses report no second error.
        Err(error) => {
            let mut out = error.into_compile_error();
            out.extend(item);
            out.into()
        }
    }
}

/// `jit!(f)`: `f` (a `#[function]`, a closure, or another transform macro's result) compiled
/// once per input signature and replayed, as a callable of `f`'s arguments and result type:
/// `let step = jit!(grad!(loss, argnums = 0)); let dw = step(&w, &x, &y);`. A closure's
/// parameters typed as Rust numbers (`lr: f32`, `step: i32`, `seed: u64`) are passed as numbers
/// and traced as abstract 0-d tensors of that dtype (a `Tensor` inside the body), so a new
/// number replays the trace and the plan: `jit!(|p: &Tensor, g: &Tensor, lr: f32| p - &(g * &lr))`.
#[proc_macro]
pub fn jit(tokens: TokenStream) -> TokenStream {
    emit(jit::jit(tokens.into()))
}

/// `vmap!(f, in_axes = (0, None), out_axes = 0)`: `f` mapped over the given axes (each an
/// integer literal or `None`; defaults 0), as `jax.vmap`. Returns a callable of `f`'s arity;
/// `chunk_size = n` maps `n` samples at a time (torch.func's `chunk_size`).
#[proc_macro]
pub fn vmap(tokens: TokenStream) -> TokenStream {
    emit(transform::vmap(tokens.into()))
}

/// `grad!(f, argnums = (0, 2))`: the gradient of a scalar function with respect to the
/// arguments `argnums` (default 0), as `jax.grad`. Returns a callable of `f`'s arity.
#[proc_macro]
pub fn grad(tokens: TokenStream) -> TokenStream {
    emit(transform::derivative(Derivative::Grad, tokens.into()))
}

/// `value_and_grad!(f, argnums = 0)`: a callable returning `(f(..), gradients)`.
#[proc_macro]
pub fn value_and_grad(tokens: TokenStream) -> TokenStream {
    emit(transform::derivative(
        Derivative::ValueAndGrad,
        tokens.into(),
    ))
}

/// `jacfwd!(f, argnums = 0)`: the Jacobian of each result of `f` with respect to one
/// argument, by forward mode. A result of shape `O` and an argument of shape `I` give `O ++ I`.
/// Results nest as in JAX: the result's structure outside, the argument's inside (a struct
/// result gives a `tensor::TreeJacobian`, read by field with `of` and `wrt`).
#[proc_macro]
pub fn jacfwd(tokens: TokenStream) -> TokenStream {
    emit(transform::derivative(Derivative::Jacfwd, tokens.into()))
}

/// `jacrev!(f, argnums = 0)`: the Jacobian of each result of `f` by reverse mode.
#[proc_macro]
pub fn jacrev(tokens: TokenStream) -> TokenStream {
    emit(transform::derivative(Derivative::Jacrev, tokens.into()))
}

/// `hessian!(f, argnums = 0)`: the Hessian of a scalar function, `jacfwd!(jacrev!(f))`.
#[proc_macro]
pub fn hessian(tokens: TokenStream) -> TokenStream {
    emit(transform::derivative(Derivative::Hessian, tokens.into()))
}

/// `jvp!(f, (x, y), (tx, ty))`: `(f(x, y), J · (tx, ty))`, as `jax.jvp`, each typed like the
/// result of `f`. Primals and tangents may be tensors or references to them.
#[proc_macro]
pub fn jvp(tokens: TokenStream) -> TokenStream {
    emit(transform::jvp(tokens.into()))
}

/// `vjp!(f, (x, y))`: `(f(x, y), pullback)`, as `jax.vjp`; `pullback(&cotangent)` (the
/// cotangent shaped like `f`'s result) returns one cotangent per primal.
#[proc_macro]
pub fn vjp(tokens: TokenStream) -> TokenStream {
    emit(transform::vjp(tokens.into()))
}

/// `#[derive(Tree)]`: the struct as a tree of tensors, so transforms take and return it
/// (`grad!(loss)(&params, &x, &y)` returns gradients shaped like `params`). Fields are
/// subtrees (`Tensor`, `Vec<Layer>`, `Option<Tensor>`, other derived structs, ...); a field
/// marked `#[tree(static)]` (a hyper-parameter) is kept in the structure instead of the
/// leaves and must be `Clone + PartialEq + Debug + Send + Sync + 'static`. The struct must
/// be `Clone`.
#[proc_macro_derive(Tree, attributes(tree))]
pub fn derive_tree(tokens: TokenStream) -> TokenStream {
    emit(tree::derive(tokens.into()))
}
