//! Jacobians from the two modes, batched with `vmap` over a basis:
//! `jacfwd = vmap(jvp)` over the input basis, `jacrev = vmap(vjp)` over the output basis,
//! `hessian = jacfwd(jacrev)`.

use crate::tensor::Tensor;
use crate::transform::func::{Func, IntoFunc, transform_error};
use crate::transform::function::traced_once;
use crate::transform::jvp::jvp_symbolic;
use crate::transform::vjp::{check_argnums, vjp_wrt};
use crate::transform::vmap::{move_axis, vmap};
use crate::transform::zero::Tangent;

/// The Jacobian of `f` with respect to argument `argnum` by forward mode, as `jax.jacfwd`:
/// for a result of shape `O` and an argument of shape `I`, a tensor of shape `O ++ I`.
pub fn jacfwd<M>(f: impl IntoFunc<M>, argnum: usize) -> Func {
    let f = f.into_func();
    traced_once(
        "jacfwd",
        Func::new(f.arity(), move |args: &[Tensor]| {
            check_argnums(&[argnum], args.len());
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
            let columns = vmap(column, 0, 0).call(&[basis]);
            columns
                .iter()
                .map(|c| batch_axis_to_end(c, &x.shape()))
                .collect()
        }),
    )
}

/// The Jacobian of `f` with respect to argument `argnum` by reverse mode, as `jax.jacrev`:
/// for a result of shape `O` and an argument of shape `I`, a tensor of shape `O ++ I`.
pub fn jacrev<M>(f: impl IntoFunc<M>, argnum: usize) -> Func {
    let f = f.into_func();
    traced_once(
        "jacrev",
        Func::new(f.arity(), move |args: &[Tensor]| {
            check_argnums(&[argnum], args.len());
            let (outputs, pullback) = vjp_wrt(&f, args, &[argnum]);
            let x_shape = args[argnum].shape();
            (0..outputs.len())
                .map(|k| {
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
                    let rows = vmap(row, 0, 0).call1(&[identity_basis(out)]);
                    rows.reshape(&[out.shape(), x_shape.clone()].concat())
                })
                .collect()
        }),
    )
}

/// The Hessian of a scalar function with respect to argument `argnum`: `jacfwd(jacrev(f))`.
pub fn hessian<M>(f: impl IntoFunc<M>, argnum: usize) -> Func {
    jacfwd(jacrev(f, argnum), argnum)
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
    Tensor::eye(n)
        .cast(x.dtype())
        .reshape(&[vec![n], x.shape()].concat())
}

/// A stack of columns `[n, O...]` as the Jacobian `[O..., I...]` (where `n = prod(I)`).
fn batch_axis_to_end(columns: &Tensor, input_shape: &[usize]) -> Tensor {
    let shape = columns.shape();
    let moved = Tensor::from_uop(move_axis(&columns.uop(), 0, shape.len() - 1));
    moved.reshape(&[shape[1..].to_vec(), input_shape.to_vec()].concat())
}
