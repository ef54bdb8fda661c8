//! The transforms as plain functions typed like the function they transform, for trees:
//! arguments and results may be `#[derive(Tree)]` structs, tuples, `Vec`s, maps, ... (any
//! [`Tree`]), and what comes back is shaped as JAX shapes it. `typed::grad(loss, Argnum::<0>)`
//! is `jax.grad(loss, argnums=0)`: a callable of `loss`'s arguments returning a gradient of
//! the type of argument 0. These are what the macros (`grad!(loss)`) expand to; the
//! positional transforms at the crate root (`tensor::grad`) take and return flat lists of
//! tensors ([`Func`](crate::Func)) instead.
//!
//! ```
//! use tensor::prelude::*;
//! use tensor::typed::{self, Argnum};
//!
//! #[derive(Clone, Tree)]
//! struct Linear { w: Tensor, b: Tensor }
//!
//! let loss = |p: &Linear, x: &Tensor| (x.matmul(&p.w) + &p.b).square().sum_all();
//! let p = Linear {
//!     w: Tensor::from_vec(vec![1.0f32, 2.0], &[2, 1]),
//!     b: Tensor::from_vec(vec![0.5f32], &[1]),
//! };
//! let x = Tensor::from_vec(vec![1.0f32, 1.0], &[2]);
//! // loss = (w0 + w1 + b)^2 = 3.5^2: d/dw = 2 * 3.5 * x, d/db = 2 * 3.5.
//! let g: Linear = typed::grad(loss, Argnum::<0>)(&p, &x);
//! assert_eq!(g.w.to_vec::<f32>().unwrap(), vec![7.0, 7.0]);
//! assert_eq!(g.b.to_vec::<f32>().unwrap(), vec![7.0]);
//!
//! // Per-sample gradients: vmap over x only (in_axes = (None, 0)).
//! let xs = Tensor::from_vec(vec![1.0f32, 1.0, 0.0, 0.0], &[2, 2]);
//! let per_sample = typed::vmap(typed::grad(loss, Argnum::<0>), (None, 0), 0);
//! let gs: Linear = per_sample(&p, &xs);
//! assert_eq!(gs.b.to_vec::<f32>().unwrap(), vec![7.0, 1.0]);
//!
//! // Several argnums: a tuple of Argnums gives a tuple of gradients.
//! let (gp, gx): (Linear, Tensor) = typed::grad(loss, (Argnum::<0>, Argnum::<1>))(&p, &x);
//! assert_eq!(gx.to_vec::<f32>().unwrap(), vec![7.0, 14.0]);
//! # let _ = gp;
//! ```
//!
//! Jacobians follow the output's type ([`HasJacobian`]): a tensor output gives a tree shaped
//! like the argument, tuples, `Vec`s and maps of outputs give the same container of those, and
//! a derived struct gives a [`TreeJacobian`], one argument-shaped row per tensor of the
//! struct (`j.of(|o| &o.loss).w` is JAX's `j["loss"]["w"]`). The Hessian in a struct argument
//! is such a `TreeJacobian` of the struct with respect to itself (the nested blocks).
//!
//! `has_aux` and `allow_int` change the result type or the options, so they are their own
//! functions: `grad_aux` (`f` returns `(loss, aux)`, the result is `(grads, aux)`),
//! `grad_with(f, argnums, allow_int)`, and so on for each transform, as the macros'
//! keywords.

pub use crate::__private::{Nums as Argnum, Pullback, Selection, Signature, WithAux};
pub use tensor_core::transform::VmapMethod;
pub use tensor_core::transform::tree::{AxisTree, HasJacobian, Tree, TreeJacobian};

use crate::__private::{self as private, AuxOf, Hess, Jac, JacAux, JvpAux, MainOf, Options};
use crate::__private::{PlusAux, ValueAux, VjpAux};
use tensor_core::Tensor;

/// Axes given to [`vmap`]: an integer or `None` for everything below (`0`, `None`,
/// `Some(-1)`), a tuple with one entry per argument or per child (nested to any depth), or an
/// [`AxisTree`] (see [`fields`] for a struct).
pub trait IntoAxisTree {
    /// The axes as a prefix tree.
    fn into_axis_tree(self) -> AxisTree;
}

impl IntoAxisTree for AxisTree {
    fn into_axis_tree(self) -> AxisTree {
        self
    }
}

impl IntoAxisTree for i32 {
    fn into_axis_tree(self) -> AxisTree {
        AxisTree::Axis(Some(self as isize))
    }
}

impl IntoAxisTree for Option<i32> {
    fn into_axis_tree(self) -> AxisTree {
        AxisTree::Axis(self.map(|a| a as isize))
    }
}

macro_rules! tuple_axes {
    ($($t:ident $i:tt),+) => {
        impl<$($t: IntoAxisTree),+> IntoAxisTree for ($($t,)+) {
            fn into_axis_tree(self) -> AxisTree {
                AxisTree::Each(vec![$(self.$i.into_axis_tree()),+])
            }
        }
    };
}

tuple_axes!(A 0);
tuple_axes!(A 0, B 1);
tuple_axes!(A 0, B 1, C 2);
tuple_axes!(A 0, B 1, C 2, D 3);
tuple_axes!(A 0, B 1, C 2, D 3, E 4);
tuple_axes!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_axes!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_axes!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// Axes for a struct or map, one per field by name (every field must be named):
/// `fields(&[("w", None), ("b", Some(0))])` is JAX's `Affine(w=None, b=0)`.
pub fn fields(named: &[(&str, Option<i32>)]) -> AxisTree {
    AxisTree::Fields(
        named
            .iter()
            .map(|(name, axis)| (name.to_string(), axis.into_axis_tree()))
            .collect(),
    )
}

/// `jax.vmap(f, in_axes, out_axes)`: `f` over a batch, typed like `f`. `in_axes` is one axis
/// for all arguments or a tuple with a prefix tree per argument; `out_axes` a prefix tree of
/// the result.
pub fn vmap<M, F: Signature<M>>(
    f: F,
    in_axes: impl IntoAxisTree,
    out_axes: impl IntoAxisTree,
) -> F::Callable<F::Output> {
    vmap_with(f, in_axes, out_axes, VmapMethod::Rewrite)
}

/// [`vmap`] by the given method (the batch as a graph dimension, or a loop in the kernels).
pub fn vmap_with<M, F: Signature<M>>(
    f: F,
    in_axes: impl IntoAxisTree,
    out_axes: impl IntoAxisTree,
    method: VmapMethod,
) -> F::Callable<F::Output> {
    private::vmap(
        f,
        in_axes.into_axis_tree(),
        out_axes.into_axis_tree(),
        method,
        None,
    )
}

/// [`vmap`] over chunks of at most `chunk_size` samples, one after another (torch.func's
/// `vmap(..., chunk_size=n)`): the same values, with the memory of the batched function's
/// intermediates bounded by the chunk. Each chunk's kernels read the arguments at their own
/// offsets, so a cold run compiles them once per chunk.
pub fn vmap_chunked<M, F: Signature<M>>(
    f: F,
    in_axes: impl IntoAxisTree,
    out_axes: impl IntoAxisTree,
    chunk_size: usize,
) -> F::Callable<F::Output> {
    private::vmap(
        f,
        in_axes.into_axis_tree(),
        out_axes.into_axis_tree(),
        VmapMethod::Rewrite,
        Some(chunk_size),
    )
}

fn plain(allow_int: bool) -> Options {
    Options {
        has_aux: false,
        allow_int,
        chunk_size: None,
    }
}

fn chunked(chunk_size: usize) -> Options {
    Options {
        chunk_size: Some(chunk_size),
        ..plain(false)
    }
}

const AUX: Options = Options {
    has_aux: true,
    allow_int: false,
    chunk_size: None,
};

/// `jax.grad(f, argnums)`: the gradients of a scalar `f` with respect to the arguments
/// `argnums` (`Argnum::<0>`, or a tuple of them), each shaped like its argument.
pub fn grad<M, F: Signature<M>, S: Selection<F, M>>(f: F, argnums: S) -> F::Callable<S::Out> {
    private::grad(f, argnums, plain(false))
}

/// [`grad`]; with `allow_int`, integer and bool arguments get a zero gradient instead of an
/// error.
pub fn grad_with<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
    allow_int: bool,
) -> F::Callable<S::Out> {
    private::grad(f, argnums, plain(allow_int))
}

/// `jax.grad(f, argnums, has_aux=True)`: `f` returns `(loss, aux)`; the result is
/// `(gradients, aux)`.
pub fn grad_aux<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<(S::Out, AuxOf<F::Output>)>
where
    F::Output: WithAux,
{
    private::grad_aux(f, argnums, AUX)
}

/// `jax.value_and_grad(f, argnums)`: `(f(..), gradients)`.
pub fn value_and_grad<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<(Tensor, S::Out)> {
    private::value_and_grad(f, argnums, plain(false))
}

/// [`value_and_grad`] with `allow_int`.
pub fn value_and_grad_with<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
    allow_int: bool,
) -> F::Callable<(Tensor, S::Out)> {
    private::value_and_grad(f, argnums, plain(allow_int))
}

/// `jax.value_and_grad(f, argnums, has_aux=True)`: `((value, aux), gradients)`.
pub fn value_and_grad_aux<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<(ValueAux<F::Output>, S::Out)>
where
    F::Output: WithAux,
{
    private::value_and_grad_aux(f, argnums, AUX)
}

/// `jax.jacfwd(f, argnums)`: the Jacobian of `f`'s result (shaped by [`HasJacobian`]) with
/// respect to the arguments `argnums`, by forward mode.
pub fn jacfwd<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<Jac<F::Output, S::Out>>
where
    F::Output: HasJacobian,
{
    private::jacfwd(f, argnums, plain(false))
}

/// [`jacfwd`] pushing at most `chunk_size` basis vectors through `jvp` at a time
/// (torch.func's `jacfwd(..., chunk_size=n)`): the same Jacobian in bounded memory.
pub fn jacfwd_chunked<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
    chunk_size: usize,
) -> F::Callable<Jac<F::Output, S::Out>>
where
    F::Output: HasJacobian,
{
    private::jacfwd(f, argnums, chunked(chunk_size))
}

/// `jax.jacfwd(f, argnums, has_aux=True)`: `(jacobian, aux)`.
pub fn jacfwd_aux<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<JacAux<F::Output, S::Out>>
where
    F::Output: WithAux,
    MainOf<F::Output>: HasJacobian,
{
    private::jacfwd_aux(f, argnums, AUX)
}

/// `jax.jacrev(f, argnums)`: as [`jacfwd`], by reverse mode.
pub fn jacrev<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<Jac<F::Output, S::Out>>
where
    F::Output: HasJacobian,
{
    private::jacrev(f, argnums, plain(false))
}

/// [`jacrev`] pulling at most `chunk_size` basis vectors back through `vjp` at a time
/// (torch.func's `jacrev(..., chunk_size=n)`): the same Jacobian in bounded memory.
pub fn jacrev_chunked<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
    chunk_size: usize,
) -> F::Callable<Jac<F::Output, S::Out>>
where
    F::Output: HasJacobian,
{
    private::jacrev(f, argnums, chunked(chunk_size))
}

/// `jax.jacrev(f, argnums, has_aux=True)`: `(jacobian, aux)`.
pub fn jacrev_aux<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<JacAux<F::Output, S::Out>>
where
    F::Output: WithAux,
    MainOf<F::Output>: HasJacobian,
{
    private::jacrev_aux(f, argnums, AUX)
}

/// `jax.hessian(f, argnums)`: the blocks `∂²f / ∂x_i ∂x_j` of a scalar `f`, nested as the
/// selected arguments (for a struct argument, a `TreeJacobian` of it by itself).
pub fn hessian<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<Hess<S::Out>>
where
    S::Out: HasJacobian,
{
    private::hessian(f, argnums, plain(false))
}

/// `jax.hessian(f, argnums, has_aux=True)`: `(hessian, aux)`.
pub fn hessian_aux<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    argnums: S,
) -> F::Callable<PlusAux<Hess<S::Out>, F::Output>>
where
    S::Out: HasJacobian,
    F::Output: WithAux,
{
    private::hessian_aux(f, argnums, AUX)
}

/// `jax.jvp(f, primals, tangents)`: `(f(primals), J · tangents)`, typed like `f`'s result.
/// `primals` and `tangents` are tuples of `f`'s argument types (of the same structure).
#[track_caller]
pub fn jvp<M, F: Signature<M>>(
    f: F,
    primals: F::Args,
    tangents: F::Args,
) -> (F::Output, F::Output) {
    private::jvp(f, primals, tangents)
}

/// `jax.jvp(f, primals, tangents, has_aux=True)`: `(output, J · tangents, aux)`.
#[track_caller]
pub fn jvp_aux<M, F: Signature<M>>(f: F, primals: F::Args, tangents: F::Args) -> JvpAux<F::Output>
where
    F::Output: WithAux,
{
    private::jvp_aux(f, primals, tangents)
}

/// `jax.vjp(f, *primals)`: `f(primals)` and the pullback, from a cotangent shaped like the
/// result to the cotangents of the arguments (the one argument's type, or a tuple).
#[track_caller]
pub fn vjp<M, F: Signature<M>>(
    f: F,
    primals: F::Args,
) -> (F::Output, Pullback<F::Output, F::AllArgs>) {
    private::vjp(f, primals)
}

/// `jax.vjp(f, *primals, has_aux=True)`: `(output, pullback, aux)`.
#[track_caller]
pub fn vjp_aux<M, F: Signature<M>>(f: F, primals: F::Args) -> VjpAux<F::Output, F::AllArgs>
where
    F::Output: WithAux,
{
    private::vjp_aux(f, primals)
}

/// `jax.jit(f)`: `f` compiled once per input signature and replayed, typed like `f`.
pub fn jit<M, F: Signature<M>>(f: F) -> F::Callable<F::Output> {
    private::jit(f)
}
