//! Oracles for the transform tests: deterministic inputs, evaluation through the reference
//! interpreter, loops over a batch (the meaning of `vmap`), central finite differences (the
//! meaning of `jvp` and `grad`) and tolerant comparisons that say where they fail.
#![allow(dead_code)]

use tensor_core::interp::evaluate;
use tensor_core::transform::Func;
use tensor_core::{DType, Tensor};

/// A deterministic value in `[-1, 1)` for position `i` of the tensor made with `seed`.
fn noise(seed: u64, i: usize) -> f64 {
    // SplitMix64: well spread bits from (seed, i) without any state.
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// The host values of a deterministic tensor in `[lo, hi)`.
pub fn uniform_values(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|i| lo + (hi - lo) * (noise(seed, i) + 1.0) / 2.0)
        .collect()
}

/// A deterministic `f64` tensor with values in `[-1, 1)`.
pub fn randf64(shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(uniform_values(shape, seed, -1.0, 1.0), shape)
}

/// A deterministic `f64` tensor with values in `[lo, hi)` (e.g. positive, for `log`).
pub fn uniform_f64(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    Tensor::from_vec(uniform_values(shape, seed, lo, hi), shape)
}

/// A deterministic `f32` tensor with values in `[-1, 1)`.
pub fn randf32(shape: &[usize], seed: u64) -> Tensor {
    let v = uniform_values(shape, seed, -1.0, 1.0);
    Tensor::from_vec(v.into_iter().map(|x| x as f32).collect(), shape)
}

/// An `f64` tensor whose elements are all distinct and at least 0.1 apart, shuffled: max and
/// maximum are then away from ties, so their derivatives exist.
pub fn distinct_f64(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| noise(seed, a).total_cmp(&noise(seed, b)));
    let v = order
        .iter()
        .map(|&k| (k as f64 - n as f64 / 2.0) * 0.25 + 0.05);
    Tensor::from_vec(v.collect(), shape)
}

/// The values of `t`, computed by the reference interpreter, as `f64`.
pub fn values(t: &Tensor) -> Vec<f64> {
    evaluate(&t.uop()).to_f64_vec()
}

/// Panics unless `actual` has `shape` and is within `atol + rtol * |expected|` of `expected`
/// elementwise (NaN equals NaN), naming the first position that is off.
#[track_caller]
pub fn assert_values_close(what: &str, actual: &[f64], expected: &[f64], rtol: f64, atol: f64) {
    assert_eq!(
        actual.len(),
        expected.len(),
        "{what}: {} values, expected {}",
        actual.len(),
        expected.len()
    );
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let ok = (a - e).abs() <= atol + rtol * e.abs() || (a.is_nan() && e.is_nan());
        assert!(
            ok,
            "{what}: element {i} is {a}, expected {e} (|diff| {:e})\n actual   {actual:?}\n expected {expected:?}",
            (a - e).abs()
        );
    }
}

/// Panics unless `actual` and `expected` have the same shape and close values.
#[track_caller]
pub fn assert_close(what: &str, actual: &Tensor, expected: &Tensor, rtol: f64, atol: f64) {
    assert_eq!(
        actual.shape(),
        expected.shape(),
        "{what}: shape {:?}, expected {:?}",
        actual.shape(),
        expected.shape()
    );
    assert_values_close(what, &values(actual), &values(expected), rtol, atol);
}

/// Panics unless `actual` equals `expected` exactly (same shape, same values).
#[track_caller]
pub fn assert_same(what: &str, actual: &Tensor, expected: &Tensor) {
    assert_close(what, actual, expected, 0.0, 0.0);
}

/// Slice `i` of `x` along `axis`, with that axis removed: sample `i` of a batch.
pub fn sample(x: &Tensor, axis: usize, i: usize) -> Tensor {
    let picked = x.slice(axis as isize, i as isize, i as isize + 1);
    let mut shape = picked.shape();
    shape.remove(axis);
    picked.reshape(&shape)
}

/// The per-sample results `per_sample(0..n)`, evaluated one by one and stacked on the host
/// along a new leading axis into an `f64` tensor: what `vmap` must compute, without `vmap`.
#[track_caller]
pub fn loop_stack(n: usize, per_sample: impl Fn(usize) -> Tensor) -> Tensor {
    let mut data = Vec::new();
    let mut inner: Option<Vec<usize>> = None;
    for i in 0..n {
        let r = per_sample(i);
        match &inner {
            Some(s) => assert_eq!(s, &r.shape(), "per-sample results differ in shape"),
            None => inner = Some(r.shape()),
        }
        data.extend(values(&r));
    }
    let shape: Vec<usize> = std::iter::once(n)
        .chain(inner.expect("at least one sample"))
        .collect();
    Tensor::from_vec(data, &shape)
}

/// `x` with axis 0 moved to position `to` (how `out_axes` places the batch), on the host.
pub fn batch_axis_to(x: &Tensor, to: usize) -> Tensor {
    let mut order: Vec<usize> = (1..x.ndim()).collect();
    order.insert(to, 0);
    Tensor::from_vec(values(&x.permute(&order)), &x.permute(&order).shape())
}

/// `primal + scale * direction`, in the primal's dtype.
fn nudged(primal: &Tensor, direction: &Tensor, scale: f64) -> Tensor {
    let p = values(primal);
    let d = values(direction);
    let v: Vec<f64> = p.iter().zip(&d).map(|(p, d)| p + scale * d).collect();
    host_tensor(&v, &primal.shape(), primal.dtype())
}

/// A tensor of `dtype` holding `v` (for `f32`, rounded).
pub fn host_tensor(v: &[f64], shape: &[usize], dtype: DType) -> Tensor {
    match dtype {
        DType::F32 => Tensor::from_vec(v.iter().map(|&x| x as f32).collect(), shape),
        DType::F64 => Tensor::from_vec(v.to_vec(), shape),
        other => panic!("finite differences need float inputs, got {other}"),
    }
}

/// The central difference `(f(x + eps v) - f(x - eps v)) / 2 eps` of every result of `f`
/// along the tangents `v`: the directional derivative, estimated without autodiff.
pub fn fd_directional(
    f: &Func,
    primals: &[Tensor],
    tangents: &[Tensor],
    eps: f64,
) -> Vec<Vec<f64>> {
    let plus: Vec<Tensor> = primals
        .iter()
        .zip(tangents)
        .map(|(p, t)| nudged(p, t, eps))
        .collect();
    let minus: Vec<Tensor> = primals
        .iter()
        .zip(tangents)
        .map(|(p, t)| nudged(p, t, -eps))
        .collect();
    let (hi, lo) = (f.call(&plus), f.call(&minus));
    hi.iter()
        .zip(&lo)
        .map(|(h, l)| {
            values(h)
                .iter()
                .zip(values(l))
                .map(|(h, l)| (h - l) / (2.0 * eps))
                .collect()
        })
        .collect()
}

/// The gradient of the scalar `f` with respect to argument `argnum` by central differences,
/// one coordinate at a time.
pub fn fd_gradient(f: &Func, primals: &[Tensor], argnum: usize, eps: f64) -> Vec<f64> {
    let x = &primals[argnum];
    let n = x.numel();
    (0..n)
        .map(|k| {
            let mut e = vec![0.0; n];
            e[k] = 1.0;
            let tangents: Vec<Tensor> = primals
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    if i == argnum {
                        host_tensor(&e, &p.shape(), p.dtype())
                    } else {
                        host_tensor(&vec![0.0; p.numel()], &p.shape(), p.dtype())
                    }
                })
                .collect();
            let d = fd_directional(f, primals, &tangents, eps);
            assert_eq!(d.len(), 1, "fd_gradient needs a function of one result");
            assert_eq!(d[0].len(), 1, "fd_gradient needs a scalar result");
            d[0][0]
        })
        .collect()
}

/// Random tangents (or cotangents) of the shapes and dtypes of `like`, seeded from `seed`.
pub fn random_like(like: &[Tensor], seed: u64) -> Vec<Tensor> {
    like.iter()
        .enumerate()
        .map(|(i, t)| {
            let v = uniform_values(&t.shape(), seed + 1000 * i as u64, -1.0, 1.0);
            host_tensor(&v, &t.shape(), t.dtype())
        })
        .collect()
}

/// `sum_k <a_k, b_k>` over lists of tensors, on the host.
pub fn inner(a: &[Tensor], b: &[Tensor]) -> f64 {
    assert_eq!(
        a.len(),
        b.len(),
        "inner product of lists of different lengths"
    );
    a.iter()
        .zip(b)
        .map(|(a, b)| {
            assert_eq!(a.shape(), b.shape(), "inner product of different shapes");
            values(a)
                .iter()
                .zip(values(b))
                .map(|(x, y)| x * y)
                .sum::<f64>()
        })
        .sum()
}

/// `f` applied sample by sample: for each level of `levels` (outermost first, one in_axes
/// entry per argument), the arguments are sliced along their axis and the results of the
/// inner levels stacked along a new leading axis. What nested `vmap`s with `out_axes` 0 mean.
pub fn nested_loop(f: &Func, levels: &[Vec<Option<isize>>], args: &[Tensor]) -> Vec<Tensor> {
    let Some((axes, inner)) = levels.split_first() else {
        return f.call(args);
    };
    let resolved: Vec<Option<usize>> = args
        .iter()
        .zip(axes)
        .map(|(a, axis)| axis.map(|ax| resolve_axis(ax, a.ndim())))
        .collect();
    let n = args
        .iter()
        .zip(&resolved)
        .find_map(|(a, axis)| axis.map(|ax| a.shape()[ax]))
        .expect("one argument is mapped");
    let sliced = |i: usize| -> Vec<Tensor> {
        args.iter()
            .zip(&resolved)
            .map(|(a, axis)| match axis {
                Some(ax) => sample(a, *ax, i),
                None => a.clone(),
            })
            .collect()
    };
    let nresults = nested_loop(f, inner, &sliced(0)).len();
    (0..nresults)
        .map(|k| loop_stack(n, |i| nested_loop(f, inner, &sliced(i))[k].clone()))
        .collect()
}

fn resolve_axis(axis: isize, ndim: usize) -> usize {
    if axis < 0 {
        (axis + ndim as isize) as usize
    } else {
        axis as usize
    }
}

/// Panics unless `vmap(f, in_axes, 0)` on `args` equals the stack of per-sample results.
#[track_caller]
pub fn assert_vmap_matches_loop<M>(
    f: impl tensor_core::transform::IntoFunc<M>,
    in_axes: &[Option<isize>],
    args: &[Tensor],
) {
    let f = f.into_func();
    let batched = tensor_core::transform::vmap(f.clone(), in_axes.to_vec(), 0).call(args);
    let expected = nested_loop(&f, &[in_axes.to_vec()], args);
    assert_eq!(batched.len(), expected.len(), "number of results");
    for (k, (b, e)) in batched.iter().zip(&expected).enumerate() {
        assert_close(&format!("result {k}"), b, e, 1e-12, 1e-12);
    }
}

/// The primitive `op` applied to same-shaped, same-typed operands, built directly as a UOp:
/// for the rule-table rows the front end never emits (it decomposes `Neg`, `Sub`, `Div`,
/// `Pow` and never fuses `Mulacc`), which `#[function]` bodies or rewrites may still produce.
pub fn prim(op: tensor_core::Op, operands: &[&Tensor]) -> Tensor {
    Tensor::from_uop(tensor_core::UOp::alu(
        op,
        operands.iter().map(|t| t.uop()).collect(),
    ))
}

/// The primitive `Stack(parts)` (a new leading axis), built directly as a UOp.
pub fn prim_stack(parts: &[&Tensor]) -> Tensor {
    Tensor::from_uop(tensor_core::UOp::stack(
        parts.iter().map(|t| t.uop()).collect(),
    ))
}

/// The marker `op` (`Contiguous`, `ContiguousBackward`, `Detach`) on `x`.
pub fn prim_marker(op: tensor_core::Op, x: &Tensor) -> Tensor {
    Tensor::from_uop(x.uop().unary_marker(op))
}
