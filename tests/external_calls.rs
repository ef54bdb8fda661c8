//! External calls (issue 15, seeds/batching-strategies-tesseract.md): an opaque host function
//! inside traced graphs, batched by each vmap method and differentiated through its endpoints.
//! Every test asserts how many times each endpoint ran and the shapes it saw, and compares
//! values with the same function written in tensor ops or with a loop over samples
//! (floats within 1e-5 absolute plus 1e-5 relative).

mod common;

use common::panic_message;

use ndarray::{ArrayD, IxDyn};
use tensor::external::{
    BatchStrategy, Dims, Endpoint, ExtArg, External, HostArray, HostCall, InputSpec, OutputSpec,
};
use tensor::prelude::*;
use tensor::runtime::realize::to_vec;

const TOL: f32 = 1e-5;

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "lengths differ: {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= TOL + TOL * y.abs(), "{a:?} vs {b:?}");
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    to_vec::<f32>(t).expect("realize")
}

fn f32s(a: &HostArray) -> ArrayD<f32> {
    a.to_array::<f32>()
}

/// `a` broadcast to `shape` (the endpoints return full batched shapes, as the seed asks).
fn full(a: ArrayD<f32>, shape: &[usize]) -> HostArray {
    HostArray::from_array(a.broadcast(IxDyn(shape)).expect("broadcasts").to_owned())
}

fn common_shape(arrays: &[&ArrayD<f32>]) -> Vec<usize> {
    let rank = arrays.iter().map(|a| a.ndim()).max().unwrap_or(0);
    (0..rank)
        .map(|i| {
            arrays
                .iter()
                .filter_map(|a| (i + a.ndim()).checked_sub(rank).map(|k| a.shape()[k]))
                .max()
                .unwrap_or(1)
        })
        .collect()
}

/// `alpha * x * sin(y)` for `x`, `y` of shape `dims` (rank-polymorphic `[..., 3]` or fixed
/// `[3]`), `alpha` static, with jvp and vjp endpoints; the host code broadcasts.
fn mul_sin(name: &str, dims: Dims, method: Option<BatchStrategy>) -> External {
    let mut b = External::builder(name)
        .input(InputSpec::array(DType::F32, dims.clone()))
        .input(InputSpec::array(DType::F32, dims))
        .input(InputSpec::static_value())
        .output(OutputSpec::new(DType::F32, |s| s[0].clone()))
        .apply(|c: &HostCall| {
            let (x, y, alpha) = (f32s(c.array(0)), f32s(c.array(1)), c.static_f64(2) as f32);
            let shape = common_shape(&[&x, &y]);
            vec![full(&x * &y.mapv(f32::sin) * alpha, &shape)]
        })
        .jvp(|c: &HostCall| {
            let (x, y, alpha) = (f32s(c.array(0)), f32s(c.array(1)), c.static_f64(2) as f32);
            let (tx, ty) = (f32s(&c.tangents()[0]), f32s(&c.tangents()[1]));
            let shape = common_shape(&[&x, &y, &tx, &ty]);
            let d = (&tx * &y.mapv(f32::sin) + &(&x * &y.mapv(f32::cos)) * &ty) * alpha;
            vec![full(d, &shape)]
        })
        .vjp(|c: &HostCall| {
            let (x, y, alpha) = (f32s(c.array(0)), f32s(c.array(1)), c.static_f64(2) as f32);
            let ct = f32s(&c.cotangents()[0]);
            let shape = common_shape(&[&x, &y, &ct]);
            let dx = &ct * &y.mapv(f32::sin) * alpha;
            let dy = &ct * &x * &y.mapv(f32::cos) * alpha;
            vec![full(dx, &shape), full(dy, &shape)]
        });
    if let Some(m) = method {
        b = b.vmap_method(m);
    }
    b.build()
}

const ALPHA: f64 = 1.5;

fn call(ext: &External, x: &Tensor, y: &Tensor) -> Tensor {
    ext.call(&[x.into(), y.into(), ExtArg::from(ALPHA)])
        .remove(0)
}

/// The same function in tensor ops.
fn reference(x: &Tensor, y: &Tensor) -> Tensor {
    x * y.sin() * ALPHA
}

fn xs(n: usize) -> Tensor {
    let v: Vec<f32> = (0..n * 3).map(|i| 0.3 + 0.17 * i as f32).collect();
    Tensor::from_vec(v, &[n, 3])
}

fn y0() -> Tensor {
    Tensor::from_vec(vec![0.4f32, -1.1, 2.0], &[3])
}

fn shapes(ext: &External, e: Endpoint) -> Vec<Vec<Vec<usize>>> {
    ext.shapes(e)
}

#[test]
fn apply_runs_once_between_kernels() {
    let ext = mul_sin("mul_sin_apply", Dims::Trailing(vec![3]), None);
    let x = xs(1).reshape(&[3]);
    let y = y0();
    let out = (call(&ext, &(&x * 2.0), &y).exp() + 1.0).sum_all();
    let want = (reference(&(&x * 2.0), &y).exp() + 1.0).sum_all();
    close(&values(&out), &values(&want));
    assert_eq!(ext.count(Endpoint::Apply), 1);
    assert_eq!(shapes(&ext, Endpoint::Apply), vec![vec![vec![3], vec![3]]]);
}

/// Set in the child process of `debug_2_prints_the_host_call_among_the_kernels`.
const DEBUG_CHILD: &str = "EXTERNAL_CALLS_DEBUG_CHILD";

#[test]
fn debug_2_prints_the_host_call_among_the_kernels() {
    let ext = mul_sin("mul_sin_debug", Dims::Trailing(vec![3]), None);
    if std::env::var_os(DEBUG_CHILD).is_some() {
        // a kernel makes the call's operand, another consumes its result
        let x = xs(1).reshape(&[3]);
        values(&(call(&ext, &(&x * 2.0), &y0()).exp() + 1.0).sum_all());
        return;
    }
    // DEBUG is read from the environment, so the run happens in a child process of this test
    let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "debug_2_prints_the_host_call_among_the_kernels",
            "--nocapture",
        ])
        .env(DEBUG_CHILD, "1")
        .env("DEBUG", "2")
        .output()
        .expect("runs the test binary");
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "child failed:\n{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let call = lines
        .iter()
        .position(|l| l.starts_with("host call `mul_sin_debug` (apply)"))
        .unwrap_or_else(|| panic!("no host call line in:\n{stderr}"));
    assert!(lines[call].contains("shapes [[3], [3]]"), "{}", lines[call]);
    let kernel = |l: &&&str| l.starts_with("kernel ");
    assert!(lines[..call].iter().any(|l| kernel(&l)), "{stderr}");
    assert!(lines[call + 1..].iter().any(|l| kernel(&l)), "{stderr}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("host call")).count(),
        1,
        "{stderr}"
    );
}

/// Runs `vmap(f)(xs)` over the call with `method`, checks it equals the loop of
/// single-sample calls, and gives the apply shapes the batched run saw.
fn vmapped(name: &str, dims: Dims, method: BatchStrategy, n: usize) -> Vec<Vec<Vec<usize>>> {
    let ext = mul_sin(name, dims, Some(method));
    let y = y0();
    let e = ext.clone();
    let yy = y.clone();
    let batched = vmap(move |x: &Tensor| call(&e, x, &yy), 0, 0).call1(&[xs(n)]);
    let got = values(&batched);
    let seen = shapes(&ext, Endpoint::Apply);
    let x = xs(n);
    let looped: Vec<f32> = (0..n)
        .flat_map(|i| {
            values(&call(
                &ext,
                &x.shrink(&[(i, i + 1), (0, 3)]).reshape(&[3]),
                &y,
            ))
        })
        .collect();
    close(&got, &looped);
    close(&got, &values(&reference(&xs(n), &y)));
    seen
}

#[test]
fn sequential_calls_once_per_sample() {
    let seen = vmapped("seq", Dims::Trailing(vec![3]), BatchStrategy::Sequential, 4);
    assert_eq!(seen, vec![vec![vec![3], vec![3]]; 4]);
}

#[test]
fn expand_dims_gives_unbatched_args_a_leading_one() {
    let seen = vmapped(
        "expand",
        Dims::Trailing(vec![3]),
        BatchStrategy::ExpandDims,
        4,
    );
    assert_eq!(seen, vec![vec![vec![4, 3], vec![1, 3]]]);
}

#[test]
fn broadcast_all_broadcasts_unbatched_args_to_the_batch() {
    let seen = vmapped(
        "bcast",
        Dims::Trailing(vec![3]),
        BatchStrategy::BroadcastAll,
        4,
    );
    assert_eq!(seen, vec![vec![vec![4, 3], vec![4, 3]]]);
}

#[test]
fn auto_vectorizes_rank_polymorphic_inputs() {
    let seen = vmapped("auto_poly", Dims::Trailing(vec![3]), BatchStrategy::Auto, 4);
    assert_eq!(seen, vec![vec![vec![4, 3], vec![1, 3]]]);
}

#[test]
fn auto_falls_back_to_sequential_for_fixed_rank_inputs() {
    let seen = vmapped("auto_fixed", Dims::Fixed(vec![3]), BatchStrategy::Auto, 4);
    assert_eq!(seen, vec![vec![vec![3], vec![3]]; 4]);
}

#[test]
fn vmap_without_a_method_is_an_error_naming_the_call() {
    let ext = mul_sin("no_method", Dims::Trailing(vec![3]), None);
    let e = ext.clone();
    let msg = panic_message(move || {
        vmap(move |x: &Tensor| call(&e, x, &y0()), 0, 0).call(&[xs(2)]);
    });
    assert!(msg.contains("`no_method` (apply)"), "{msg}");
    assert!(msg.contains("no vmap method"), "{msg}");
    assert!(
        msg.contains("Sequential, ExpandDims, BroadcastAll or Auto"),
        "{msg}"
    );
    let e = ext.clone();
    let f = move |x: &Tensor| call(&e, x, &y0());
    let msg = panic_message(|| {
        jacfwd(f.clone(), 0).call(&[y0()]);
    });
    assert!(
        msg.contains("`no_method` (jvp)") && msg.contains("no vmap method"),
        "{msg}"
    );
    let msg = panic_message(|| {
        jacrev(f, 0).call(&[y0()]);
    });
    assert!(
        msg.contains("`no_method` (vjp)") && msg.contains("no vmap method"),
        "{msg}"
    );
    // grad and jvp need no vmap
    let e = ext.clone();
    let g = grad(move |x: &Tensor| call(&e, x, &y0()).sum_all(), 0).call1(&[y0()]);
    close(&values(&g), &values(&(y0().sin() * ALPHA)));
    assert_eq!(ext.count(Endpoint::Vjp), 1);
}

#[test]
fn autodiff_without_its_endpoint_is_an_error_at_transform_time() {
    let ext = External::builder("apply_only")
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])))
        .output(OutputSpec::like_input(0, DType::F32))
        .apply(|c: &HostCall| vec![c.array(0).clone()])
        .vmap_method(BatchStrategy::Auto)
        .build();
    let e = ext.clone();
    let f = move |x: &Tensor| e.call(&[x.into()]).remove(0).sum_all();
    let msg = panic_message(|| {
        grad(f.clone(), 0).call(&[y0()]);
    });
    assert!(msg.contains("`apply_only` has no vjp endpoint"), "{msg}");
    let msg = panic_message(|| {
        jvp(f.clone(), &[y0()], &[y0()]);
    });
    assert!(msg.contains("`apply_only` has no jvp endpoint"), "{msg}");
    assert!(ext.calls().is_empty(), "nothing ran: {:?}", ext.calls());
}

type HostResult = fn(&HostCall) -> Vec<HostArray>;

fn faulty(name: &str, result: HostResult) -> External {
    External::builder(name)
        .input(InputSpec::array(DType::F32, Dims::Fixed(vec![3])))
        .output(OutputSpec::like_input(0, DType::F32))
        .apply(result)
        .build()
}

#[test]
fn wrong_results_and_panics_are_errors_of_the_realize() {
    let cases: [(&str, HostResult, &str); 4] = [
        (
            "wrong_shape",
            |_| vec![HostArray::new(vec![0.0f32; 4], &[4])],
            "returned f32[4] as result 0, but f32[3] was expected",
        ),
        (
            "wrong_dtype",
            |_| vec![HostArray::new(vec![0.0f64; 3], &[3])],
            "returned f64[3] as result 0, but f32[3] was expected",
        ),
        (
            "wrong_count",
            |_| vec![],
            "returned 0 arrays, but 1 were expected",
        ),
        (
            "panicking",
            |_| panic!("the simulator diverged"),
            "panicked: the simulator diverged",
        ),
    ];
    for (name, result, expected) in cases {
        let ext = faulty(name, result);
        let out = ext.call(&[(&y0()).into()]).remove(0) + 1.0;
        let err = to_vec::<f32>(&out)
            .expect_err("the external fails")
            .to_string();
        assert!(err.contains(&format!("external `{name}` (apply)")), "{err}");
        assert!(err.contains(expected), "{err}");
    }
    // the process survives and keeps computing
    close(&values(&(y0() * 2.0)), &[0.8, -2.2, 4.0]);
}

#[test]
fn wrong_inputs_panic_at_the_call() {
    let ext = mul_sin("bad_inputs", Dims::Fixed(vec![3]), None);
    let msg = panic_message(|| {
        ext.call(&[(&xs(2)).into(), (&y0()).into(), ALPHA.into()]);
    });
    assert!(
        msg.contains("input 0 is f32[2, 3], but the schema wants f32[3]"),
        "{msg}"
    );
    let msg = panic_message(|| {
        ext.call(&[(&y0()).into(), ALPHA.into(), ALPHA.into()]);
    });
    assert!(
        msg.contains("input 1 is an array, but a number was given"),
        "{msg}"
    );
}

/// An external over a 0-d array `s` and a `[..., 3]` array `x`: `s * x`.
fn scale() -> External {
    External::builder("scale")
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![])))
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])))
        .output(OutputSpec::like_input(1, DType::F32))
        .apply(|c: &HostCall| {
            let (s, x) = (f32s(c.array(0)), f32s(c.array(1)));
            // s has the leading (batch) axes of x: one more trailing axis lines them up
            let at = s.ndim();
            let s = s.insert_axis(ndarray::Axis(at));
            let shape = common_shape(&[&s, &x]);
            vec![full(&s * &x, &shape)]
        })
        .build()
}

#[test]
fn scalar_arrays_are_batched_like_arrays() {
    // quick reference: a 0-d array becomes (1,) under expand_dims and (batch,) under
    // broadcast_all; the batched x is (4, 3)
    for (method, s_shape) in [
        (BatchStrategy::ExpandDims, vec![1]),
        (BatchStrategy::BroadcastAll, vec![4]),
    ] {
        let ext = scale();
        let e = ext.clone();
        let s = Tensor::from_vec(vec![2.5f32], &[]);
        let out = vmap(
            move |x: &Tensor| {
                e.call_with(&[(&s).into(), x.into()], Some(method))
                    .remove(0)
            },
            0,
            0,
        )
        .call1(&[xs(4)]);
        close(&values(&out), &values(&(xs(4) * 2.5)));
        assert_eq!(
            shapes(&ext, Endpoint::Apply),
            vec![vec![s_shape, vec![4, 3]]]
        );
    }
}

#[test]
fn static_values_are_never_batched() {
    let ext = mul_sin(
        "statics",
        Dims::Trailing(vec![3]),
        Some(BatchStrategy::BroadcastAll),
    );
    let e = ext.clone();
    let out = vmap(
        move |x: &Tensor| {
            e.call(&[x.into(), (&y0()).into(), ExtArg::from(-2.0f64)])
                .remove(0)
        },
        0,
        0,
    )
    .call1(&[xs(3)]);
    close(&values(&out), &values(&(xs(3) * y0().sin() * -2.0)));
    assert_eq!(ext.count(Endpoint::Apply), 1);
}

#[test]
fn nested_vmap_batches_the_call_twice() {
    for (method, expected) in [
        (
            BatchStrategy::ExpandDims,
            vec![vec![vec![2, 4, 3], vec![1, 1, 3]]],
        ),
        (BatchStrategy::Sequential, vec![vec![vec![3], vec![3]]; 8]),
    ] {
        let ext = mul_sin("nested", Dims::Trailing(vec![3]), Some(method));
        let e = ext.clone();
        let inner = vmap(move |x: &Tensor| call(&e, x, &y0()), 0, 0);
        let outer = vmap(inner, 0, 0);
        let x = xs(8).reshape(&[2, 4, 3]);
        let out = outer.call1(std::slice::from_ref(&x));
        close(&values(&out), &values(&reference(&x, &y0())));
        assert_eq!(shapes(&ext, Endpoint::Apply), expected);
    }
}

#[test]
fn grad_and_jvp_use_the_endpoints() {
    let ext = mul_sin("diff", Dims::Trailing(vec![3]), None);
    let e = ext.clone();
    let f = move |x: &Tensor, y: &Tensor| (call(&e, x, y) * x).sum_all();
    let r = |x: &Tensor, y: &Tensor| (reference(x, y) * x).sum_all();
    let (x, y) = (xs(1).reshape(&[3]), y0());
    let got = grad(f.clone(), [0, 1]).call(&[x.clone(), y.clone()]);
    let want = grad(r, [0, 1]).call(&[x.clone(), y.clone()]);
    close(&values(&got[0]), &values(&want[0]));
    close(&values(&got[1]), &values(&want[1]));
    assert_eq!(ext.count(Endpoint::Vjp), 1);
    assert_eq!(shapes(&ext, Endpoint::Vjp), vec![vec![vec![3]; 3]]);
    ext.reset_calls();
    let t = Tensor::from_vec(vec![1.0f32, 0.5, -2.0], &[3]);
    let (_, got) = jvp(f, &[x.clone(), y.clone()], &[t.clone(), t.clone()]);
    let (_, want) = jvp(r, &[x, y], &[t.clone(), t]);
    close(&values(&got[0]), &values(&want[0]));
    assert_eq!(shapes(&ext, Endpoint::Jvp), vec![vec![vec![3]; 4]]);
}

#[test]
fn vmap_of_grad_with_auto_is_one_apply_and_one_vjp() {
    // seed: "vmap(grad(f)) — per-element gradients": apply sees x=(n,3), y=(n,3), the vjp
    // sees the primals and the cotangent at (n,3)
    let n = 5;
    let ext = mul_sin(
        "vmap_grad",
        Dims::Trailing(vec![3]),
        Some(BatchStrategy::Auto),
    );
    let e = ext.clone();
    let f = move |x: &Tensor, y: &Tensor| call(&e, x, y).square().sum_all();
    let r = |x: &Tensor, y: &Tensor| reference(x, y).square().sum_all();
    let ys = xs(n) * 0.7 - 1.0;
    let got = vmap(grad(f, [0, 1]), 0, 0).call(&[xs(n), ys.clone()]);
    let want = vmap(grad(r, [0, 1]), 0, 0).call(&[xs(n), ys]);
    close(&values(&got[0]), &values(&want[0]));
    close(&values(&got[1]), &values(&want[1]));
    assert_eq!(shapes(&ext, Endpoint::Apply), vec![vec![vec![n, 3]; 2]]);
    assert_eq!(shapes(&ext, Endpoint::Vjp), vec![vec![vec![n, 3]; 3]]);
}

/// The Jacobian of `x ↦ alpha x sin(y0)` at x0: `diag(alpha sin(y0))`.
fn expected_jacobian() -> Vec<f32> {
    let s: Vec<f32> = values(&(y0().sin() * ALPHA));
    (0..9)
        .map(|i| if i / 3 == i % 3 { s[i / 3] } else { 0.0 })
        .collect()
}

#[test]
fn jacfwd_is_one_jvp_with_primals_broadcast_to_the_tangents() {
    // seed: "jacfwd(f)": the jvp sees x=(3,3) (broadcast from (3,)) and tx=(3,3) (the basis);
    // y0, unbatched with an unbatched zero tangent, gets the leading 1 of expand_dims
    let ext = mul_sin("jacfwd", Dims::Trailing(vec![3]), Some(BatchStrategy::Auto));
    let e = ext.clone();
    let j = jacfwd(move |x: &Tensor| call(&e, x, &y0()), 0).call1(&[xs(1).reshape(&[3])]);
    close(&values(&j), &expected_jacobian());
    assert_eq!(
        shapes(&ext, Endpoint::Jvp),
        vec![vec![vec![3, 3], vec![1, 3], vec![3, 3], vec![1, 3]]]
    );
}

#[test]
fn jacfwd_with_sequential_is_one_jvp_per_basis_vector() {
    let ext = mul_sin(
        "jacfwd_seq",
        Dims::Trailing(vec![3]),
        Some(BatchStrategy::Sequential),
    );
    let e = ext.clone();
    let j = jacfwd(move |x: &Tensor| call(&e, x, &y0()), 0).call1(&[xs(1).reshape(&[3])]);
    close(&values(&j), &expected_jacobian());
    assert_eq!(shapes(&ext, Endpoint::Jvp), vec![vec![vec![3]; 4]; 3]);
}

#[test]
fn jacrev_is_one_vjp_per_cotangent() {
    // seed: "jacrev(f)": batched cotangents fall back to sequential, for every method
    for method in [
        BatchStrategy::Auto,
        BatchStrategy::ExpandDims,
        BatchStrategy::BroadcastAll,
    ] {
        let ext = mul_sin("jacrev", Dims::Trailing(vec![3]), Some(method));
        let e = ext.clone();
        let j = jacrev(move |x: &Tensor| call(&e, x, &y0()), 0).call1(&[xs(1).reshape(&[3])]);
        close(&values(&j), &expected_jacobian());
        assert_eq!(shapes(&ext, Endpoint::Vjp), vec![vec![vec![3]; 3]; 3]);
    }
}

#[test]
fn gradients_of_unbatched_inputs_are_summed_over_the_batch() {
    for method in [BatchStrategy::ExpandDims, BatchStrategy::BroadcastAll] {
        let ext = mul_sin("summed", Dims::Trailing(vec![3]), Some(method));
        let e = ext.clone();
        let f = move |x: &Tensor, y: &Tensor| {
            let yy = y.clone();
            let e = e.clone();
            vmap(move |x: &Tensor| call(&e, x, &yy), 0, 0)
                .call1(std::slice::from_ref(x))
                .sum_all()
        };
        let r = |x: &Tensor, y: &Tensor| reference(x, y).sum_all();
        let got = grad(f, 1).call1(&[xs(4), y0()]);
        let want = grad(r, 1).call1(&[xs(4), y0()]);
        close(&values(&got), &values(&want));
        assert_eq!(ext.count(Endpoint::Vjp), 1);
    }
}

#[test]
fn vmap_of_jvp_broadcasts_tangents_to_batched_primals() {
    let ext = mul_sin(
        "vmap_jvp",
        Dims::Trailing(vec![3]),
        Some(BatchStrategy::ExpandDims),
    );
    let e = ext.clone();
    let t = Tensor::from_vec(vec![1.0f32, 0.5, -2.0], &[3]);
    let tt = t.clone();
    let push = move |x: &Tensor| {
        let e = e.clone();
        let f = move |x: &Tensor| call(&e, x, &y0());
        jvp(f, std::slice::from_ref(x), std::slice::from_ref(&tt)).1[0].clone()
    };
    let got = vmap(push, 0, 0).call1(&[xs(4)]);
    let want = (t * y0().sin() * ALPHA).expand(&[4, 3]);
    close(&values(&got), &values(&want));
    // x batched (4,3); y0 (1,3); x's tangent broadcast to (4,3); y0's zero tangent (1,3)
    assert_eq!(
        shapes(&ext, Endpoint::Jvp),
        vec![vec![vec![4, 3], vec![1, 3], vec![4, 3], vec![1, 3]]]
    );
}

#[test]
fn jit_runs_the_call_at_every_call_and_the_loop_methods_refuse_it() {
    let ext = mul_sin("jitted", Dims::Trailing(vec![3]), None);
    let e = ext.clone();
    let f = tensor::jit(move |x: &Tensor| call(&e, &(x + 1.0), &y0()) * 2.0);
    for k in 0..3 {
        let x = xs(1).reshape(&[3]) * (k as f64);
        let got = f.call1(std::slice::from_ref(&x));
        close(
            &values(&got),
            &values(&(reference(&(&x + 1.0), &y0()) * 2.0)),
        );
    }
    assert_eq!(ext.count(Endpoint::Apply), 3);
    let e = ext.clone();
    let msg = panic_message(move || {
        tensor::core::transform::vmap_with(
            move |x: &Tensor| call(&e, x, &y0()),
            0,
            0,
            tensor::core::transform::VmapMethod::Range,
        )
        .call(&[xs(2)]);
    });
    assert!(
        msg.contains("`jitted` (apply) depends on the batch"),
        "{msg}"
    );
}

#[test]
fn the_reference_interpreter_runs_external_calls_too() {
    let ext = mul_sin(
        "interp",
        Dims::Trailing(vec![3]),
        Some(BatchStrategy::ExpandDims),
    );
    let e = ext.clone();
    let f = move |x: &Tensor| call(&e, x, &y0()).exp();
    let out = vmap(f, 0, 0).call1(&[xs(2)]);
    let interpreted = tensor::core::interp::evaluate(&out.uop()).to_vec::<f32>();
    close(&interpreted, &values(&reference(&xs(2), &y0()).exp()));
    assert_eq!(
        shapes(&ext, Endpoint::Apply),
        vec![vec![vec![2, 3], vec![1, 3]]]
    );
}

/// `x * k` with `k` a non-differentiable `[..., 3]` input (an integer-valued float mask).
fn masked() -> External {
    External::builder("masked")
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])))
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])).non_differentiable())
        .output(OutputSpec::like_input(0, DType::F32))
        .apply(|c: &HostCall| {
            let (x, k) = (f32s(c.array(0)), f32s(c.array(1)));
            let shape = common_shape(&[&x, &k]);
            vec![full(&x * &k, &shape)]
        })
        .vjp(|c: &HostCall| {
            let (x, k) = (f32s(c.array(0)), f32s(c.array(1)));
            let ct = f32s(&c.cotangents()[0]);
            let shape = common_shape(&[&x, &k, &ct]);
            vec![full(&ct * &k, &shape)]
        })
        .vmap_method(BatchStrategy::Auto)
        .build()
}

#[test]
fn auto_falls_back_to_sequential_for_batched_non_differentiable_inputs() {
    let k = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 0.0, 1.0, 3.0], &[2, 3]);
    // only the differentiable x batched: vectorized
    let ext = masked();
    let e = ext.clone();
    let k0 = Tensor::from_vec(vec![1.0f32, 0.0, 2.0], &[3]);
    let kk = k0.clone();
    let out = vmap(
        move |x: &Tensor| e.call(&[x.into(), (&kk).into()]).remove(0),
        0,
        0,
    )
    .call1(&[xs(2)]);
    close(&values(&out), &values(&(xs(2) * &k0)));
    assert_eq!(
        shapes(&ext, Endpoint::Apply),
        vec![vec![vec![2, 3], vec![1, 3]]]
    );
    // the non-differentiable k batched too: sequential, even though its schema is [..., 3]
    let ext = masked();
    let e = ext.clone();
    let out = vmap(
        move |x: &Tensor, k: &Tensor| e.call(&[x.into(), k.into()]).remove(0),
        0,
        0,
    )
    .call1(&[xs(2), k.clone()]);
    close(&values(&out), &values(&(xs(2) * &k)));
    assert_eq!(
        shapes(&ext, Endpoint::Apply),
        vec![vec![vec![3], vec![3]]; 2]
    );
    // the gradient flows to x only (k is not differentiable): k itself
    let ext = masked();
    let e = ext.clone();
    let g = grad(
        move |x: &Tensor| e.call(&[x.into(), (&k0).into()]).remove(0).sum_all(),
        0,
    )
    .call1(&[xs(1).reshape(&[3])]);
    close(&values(&g), &[1.0, 0.0, 2.0]);
    assert_eq!(
        shapes(&ext, Endpoint::Vjp),
        vec![vec![vec![3], vec![3], vec![3]]]
    );
}
