//! Jacobians from the two modes, batched with `vmap` over a basis:
//! `jacfwd = vmap(jvp)` over the input basis, `jacrev = vmap(vjp)` over the output basis,
//! `hessian = jacfwd(jacrev)`.

use crate::tensor::Tensor;
use crate::transform::func::{Func, IntoFunc, transform_error};
use crate::transform::function::traced_once;
use crate::transform::jvp::jvp_symbolic;
use crate::transform::vjp::{ArgNums, vjp_wrt};
use crate::transform::vmap::{VmapMethod, move_axis, vmap, vmap_chunked};
use crate::transform::zero::Tangent;

/// The Jacobians of `f` with respect to the arguments `argnums` by forward mode, as
/// `jax.jacfwd`: for a result of shape `O` and an argument of shape `I`, a tensor of shape
/// `O ++ I`. The function returns, for each result in order, one Jacobian per argnum (for one
/// argnum, one per result).
pub fn jacfwd<M>(f: impl IntoFunc<M>, argnums: impl Into<ArgNums>) -> Func {
    jacfwd_with_chunks(f, argnums, None)
}

/// [`jacfwd`] computing at most `chunk_size` columns at a time (torch.func's `chunk_size`):
/// the same values, with the memory of the batched `jvp` bounded by the chunk.
#[track_caller]
pub fn jacfwd_chunked<M>(
    f: impl IntoFunc<M>,
    argnums: impl Into<ArgNums>,
    chunk_size: usize,
) -> Func {
    jacfwd_with_chunks(f, argnums, Some(chunk_size))
}

fn jacfwd_with_chunks<M>(
    f: impl IntoFunc<M>,
    argnums: impl Into<ArgNums>,
    chunk_size: Option<usize>,
) -> Func {
    let f = f.into_func();
    let argnums = argnums.into();
    traced_once(
        "jacfwd",
        Func::new(f.arity(), move |args: &[Tensor]| {
            let argnums = argnums.resolve(args.len());
            // blocks[j][k]: the Jacobian of result k with respect to argnum j.
            let blocks: Vec<Vec<Tensor>> = argnums
                .iter()
                .map(|&argnum| columns_wrt(&f, args, argnum, chunk_size))
                .collect();
            let nresults = blocks[0].len();
            (0..nresults)
                .flat_map(|k| blocks.iter().map(move |b| b[k].clone()))
                .collect()
        }),
    )
}

/// The Jacobian of each result of `f` with respect to argument `argnum`, by `vmap` of `jvp`
/// over the basis of that argument.
fn columns_wrt(f: &Func, args: &[Tensor], argnum: usize, chunk_size: Option<usize>) -> Vec<Tensor> {
    let x = &args[argnum];
    let basis = identity_basis(x);
    let column = {
        let (f, args) = (f.clone(), args.to_vec());
        move |t: &Tensor| {
            // The other arguments are held fixed: their tangents are the symbolic zero.
            let tangents: Vec<Tangent> = (0..args.len())
                .map(|i| {
                    if i == argnum {
                        Tangent::Value(t.clone())
                    } else {
                        Tangent::Zero
                    }
                })
                .collect();
            jvp_symbolic(&f, &args, &tangents).1
        }
    };
    let columns = over_basis(column, chunk_size).call(&[basis]);
    columns
        .iter()
        .map(|c| batch_axis_to_end(c, &x.shape()))
        .collect()
}

/// The Jacobians of `f` with respect to the arguments `argnums` by reverse mode, as
/// `jax.jacrev`: for a result of shape `O` and an argument of shape `I`, a tensor of shape
/// `O ++ I`; for each result in order, one Jacobian per argnum.
pub fn jacrev<M>(f: impl IntoFunc<M>, argnums: impl Into<ArgNums>) -> Func {
    jacrev_with_chunks(f, argnums, None)
}

/// [`jacrev`] computing at most `chunk_size` rows at a time (torch.func's `chunk_size`): the
/// same values, with the memory of the batched `vjp` bounded by the chunk.
#[track_caller]
pub fn jacrev_chunked<M>(
    f: impl IntoFunc<M>,
    argnums: impl Into<ArgNums>,
    chunk_size: usize,
) -> Func {
    jacrev_with_chunks(f, argnums, Some(chunk_size))
}

fn jacrev_with_chunks<M>(
    f: impl IntoFunc<M>,
    argnums: impl Into<ArgNums>,
    chunk_size: Option<usize>,
) -> Func {
    let f = f.into_func();
    let argnums = argnums.into();
    traced_once(
        "jacrev",
        Func::new(f.arity(), move |args: &[Tensor]| {
            let argnums = argnums.resolve(args.len());
            let (outputs, pullback) = vjp_wrt(&f, args, &argnums);
            (0..outputs.len())
                .flat_map(|k| {
                    let out = &outputs[k];
                    // The other results' cotangents are constant zeros, which the pullback takes
                    // for symbolic zeros (it pulls nothing back from them).
                    let others: Vec<Tensor> = outputs.iter().map(|o| o.zeros_like()).collect();
                    let pullback = pullback.clone();
                    let row = move |ct: &Tensor| {
                        let mut cts = others.clone();
                        cts[k] = ct.clone();
                        pullback.call(&cts)
                    };
                    let rows = over_basis(row, chunk_size).call(&[identity_basis(out)]);
                    rows.into_iter()
                        .zip(&argnums)
                        .map(|(r, &i)| r.reshape(&[out.shape(), args[i].shape()].concat()))
                        .collect::<Vec<_>>()
                })
                .collect()
        }),
    )
}

/// `f` mapped over the leading axis of a stacked basis, a chunk at a time when asked.
fn over_basis<M>(f: impl IntoFunc<M>, chunk_size: Option<usize>) -> Func {
    match chunk_size {
        None => vmap(f, 0, 0),
        Some(chunk) => vmap_chunked(f, 0, 0, VmapMethod::Rewrite, chunk),
    }
}

/// The Hessian of a scalar function with respect to the arguments `argnums`:
/// `jacfwd(jacrev(f))`. For several argnums, the blocks `H[i][j]` (`∂²f / ∂x_i ∂x_j`) in
/// row-major order, as the nested tuples of `jax.hessian`.
pub fn hessian<M>(f: impl IntoFunc<M>, argnums: impl Into<ArgNums>) -> Func {
    let argnums = argnums.into();
    jacfwd(jacrev(f, argnums.clone()), argnums)
}

/// The standard basis of `x`'s space: `n = x.numel()` tensors of `x`'s shape, stacked.
fn identity_basis(x: &Tensor) -> Tensor {
    if !x.dtype().is_float() {
        transform_error(&format!(
            "jacobian: the differentiated value must be a float tensor, but it is {}",
            x.dtype()
        ));
    }
    let n = x.numel();
    Tensor::eye(n, crate::uop::DType::F32)
        .cast(x.dtype())
        .reshape(&[vec![n], x.shape()].concat())
}

/// A stack of columns `[n, O...]` as the Jacobian `[O..., I...]` (where `n = prod(I)`).
fn batch_axis_to_end(columns: &Tensor, input_shape: &[usize]) -> Tensor {
    let shape = columns.shape();
    let moved = Tensor::from_uop(move_axis(&columns.uop(), 0, shape.len() - 1));
    moved.reshape(&[shape[1..].to_vec(), input_shape.to_vec()].concat())
}
