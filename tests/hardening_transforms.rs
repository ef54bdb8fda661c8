//! Issue 36, items 5 and 17: the results of every user-supplied transform rule are checked
//! where the transform applies them (a wrong shape or dtype panics naming the rule and both
//! shapes), and every vmap method and every external batching strategy handles batch sizes 0
//! and 1 (values equal to the per-sample loop, the right empty shapes for 0). Floats within
//! 1e-5 absolute plus 1e-5 relative.

mod common;

use common::panic_message;

use tensor::core::transform::{Custom, VmapMethod, custom_jvp, custom_vjp, custom_vmap, vmap_with};
use tensor::external::OutputSpec;
use tensor::external::{BatchStrategy, Dims, Endpoint, External, HostArray, HostCall, InputSpec};
use tensor::prelude::*;
use tensor::runtime::realize::to_vec;

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5 + 1e-5 * y.abs(), "{a:?} vs {b:?}");
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    to_vec::<f32>(t).expect("realize")
}

fn t(v: &[f32]) -> Tensor {
    Tensor::from_vec(v.to_vec(), &[v.len()])
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "`{p}` missing from: {msg}");
    }
}

// ---- item 5: custom rules are checked ----

#[test]
fn a_vjp_rule_of_the_wrong_shape_is_refused_naming_the_rule() {
    let f = custom_vjp(
        |x: &Tensor| x * 2.0,
        |p: &[Tensor]| vec![p[0].clone()],
        |_r: &[Tensor], ct: &[Tensor]| vec![Tensor::cat(&[ct[0].clone(), ct[0].clone()], 0)],
    );
    let msg = panic_message(|| {
        grad(
            move |x: &Tensor| f.call1(std::slice::from_ref(x)).sum_all(),
            0,
        )
        .call(&[t(&[1.0, 2.0, 3.0])]);
    });
    assert_mentions(
        &msg,
        &["`custom_vjp`", "vjp rule", "f32[6]", "f32[3]", "argument 0"],
    );
}

#[test]
fn a_vjp_rule_of_the_wrong_dtype_is_refused() {
    let f = custom_vjp(
        |x: &Tensor| x * 2.0,
        |p: &[Tensor]| vec![p[0].clone()],
        |_r: &[Tensor], ct: &[Tensor]| vec![ct[0].cast(DType::I32)],
    );
    let msg = panic_message(|| {
        grad(
            move |x: &Tensor| f.call1(std::slice::from_ref(x)).sum_all(),
            0,
        )
        .call(&[t(&[1.0, 2.0, 3.0])]);
    });
    assert_mentions(&msg, &["`custom_vjp`", "vjp rule", "i32[3]", "f32[3]"]);
}

#[test]
fn a_jvp_rule_of_the_wrong_shape_or_dtype_is_refused() {
    let wide = custom_jvp(
        |x: &Tensor| x.sin(),
        |_p: &[Tensor], t: &[Tensor]| vec![t[0].reshape(&[3, 1]).expand(&[3, 2])],
    );
    let msg = panic_message(|| {
        jvp(wide, &[t(&[1.0, 2.0, 3.0])], &[t(&[1.0, 1.0, 1.0])]);
    });
    assert_mentions(
        &msg,
        &[
            "`custom_jvp`",
            "jvp rule",
            "f32[3, 2]",
            "f32[3]",
            "result 0",
        ],
    );
    let ints = custom_jvp(
        |x: &Tensor| x.sin(),
        |_p: &[Tensor], t: &[Tensor]| vec![t[0].cast(DType::I32)],
    );
    let msg = panic_message(|| {
        jvp(ints, &[t(&[1.0, 2.0, 3.0])], &[t(&[1.0, 1.0, 1.0])]);
    });
    assert_mentions(&msg, &["`custom_jvp`", "jvp rule", "i32[3]", "f32[3]"]);
}

#[test]
fn a_jvp_rule_transposed_for_grad_is_checked_too() {
    let f = Custom::new("softclip", |x: &Tensor| x.tanh())
        .jvp(|_p: &[Tensor], t: &[Tensor]| vec![t[0].sum(0, false)])
        .into_func();
    let msg = panic_message(|| {
        grad(
            move |x: &Tensor| f.call1(std::slice::from_ref(x)).sum_all(),
            0,
        )
        .call(&[t(&[1.0, 2.0])]);
    });
    assert_mentions(&msg, &["`softclip`", "jvp rule", "f32[]", "f32[2]"]);
}

#[test]
fn a_vmap_rule_of_the_wrong_shape_or_dtype_is_refused() {
    // forgets the batch axis
    let f = Custom::new("rowsum", |x: &Tensor| x.sum(0, false))
        .vmap(|_n: usize, a: &[Tensor], _b: &[bool]| vec![a[0].sum_all()])
        .into_func();
    let xs = Tensor::from_vec(vec![1.0f32; 6], &[2, 3]);
    let msg = panic_message(|| {
        vmap(f, 0, 0).call(std::slice::from_ref(&xs));
    });
    assert_mentions(
        &msg,
        &["`rowsum`", "vmap rule", "f32[]", "f32[2]", "result 0"],
    );
    let g = custom_vmap(
        |x: &Tensor| x * 2.0,
        |_n: usize, a: &[Tensor], _b: &[bool]| vec![a[0].cast(DType::F64)],
    );
    let msg = panic_message(|| {
        vmap(g, 0, 0).call(std::slice::from_ref(&xs));
    });
    assert_mentions(
        &msg,
        &["`custom_vmap`", "vmap rule", "f64[2, 3]", "f32[2, 3]"],
    );
    // nested: the rule runs once over both batches and must give both in front
    let h = Custom::new("flat", |x: &Tensor| x * 2.0)
        .vmap(|_n: usize, a: &[Tensor], _b: &[bool]| vec![a[0].reshape(&[-1])])
        .into_func();
    let inner = vmap(h, 0, 0);
    let xs3 = Tensor::from_vec(vec![1.0f32; 12], &[2, 2, 3]);
    let msg = panic_message(|| {
        vmap(inner, 0, 0).call(&[xs3]);
    });
    assert_mentions(&msg, &["`flat`", "vmap rule"]);
}

#[test]
fn right_rules_still_give_the_values() {
    // x^3 with its true derivative 3x^2 as the vjp rule and a batched rule that is the body
    let f = Custom::new("cube", |x: &Tensor| x * x * x)
        .vjp(
            |p: &[Tensor]| vec![p[0].clone()],
            |r: &[Tensor], ct: &[Tensor]| vec![&ct[0] * &r[0] * &r[0] * 3.0],
        )
        .jvp(|p: &[Tensor], t: &[Tensor]| vec![&t[0] * &p[0] * &p[0] * 3.0])
        .vmap(|_n: usize, a: &[Tensor], _b: &[bool]| vec![&a[0] * &a[0] * &a[0]])
        .into_func();
    let x = t(&[1.0, -2.0, 0.5]);
    let g = grad(
        {
            let f = f.clone();
            move |x: &Tensor| f.call1(std::slice::from_ref(x)).sum_all()
        },
        0,
    )
    .call1(std::slice::from_ref(&x));
    close(&values(&g), &[3.0, 12.0, 0.75]);
    let (_, tan) = jvp(f.clone(), std::slice::from_ref(&x), &[t(&[1.0, 1.0, 1.0])]);
    close(&values(&tan[0]), &[3.0, 12.0, 0.75]);
    let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, -1.0, 0.0, 2.0], &[2, 3]);
    close(
        &values(&vmap(f, 0, 0).call1(&[xs])),
        &[1.0, 8.0, 27.0, -1.0, 0.0, 8.0],
    );
}

/// An external whose endpoint `bad` returns one element too many.
fn long_endpoint(bad: Endpoint) -> External {
    let out = move |e: Endpoint, c: &HostCall, n: usize| {
        let len = if e == bad { n + 1 } else { n };
        let _ = c;
        vec![HostArray::new(vec![1.0f32; len], &[len])]
    };
    External::builder(&format!("long_{bad:?}"))
        .input(InputSpec::array(DType::F32, Dims::Fixed(vec![3])))
        .output(OutputSpec::like_input(0, DType::F32))
        .apply(move |c: &HostCall| out(Endpoint::Apply, c, 3))
        .jvp(move |c: &HostCall| out(Endpoint::Jvp, c, 3))
        .vjp(move |c: &HostCall| out(Endpoint::Vjp, c, 3))
        .vmap_method(BatchStrategy::Sequential)
        .build()
}

#[test]
fn external_endpoints_of_the_wrong_shape_are_errors_naming_them() {
    let x = t(&[1.0, 2.0, 3.0]);
    let ext = long_endpoint(Endpoint::Jvp);
    let e = ext.clone();
    let (_, tan) = jvp(
        move |x: &Tensor| e.call(&[x.into()]).remove(0),
        std::slice::from_ref(&x),
        std::slice::from_ref(&x),
    );
    let err = to_vec::<f32>(&tan[0])
        .expect_err("a long tangent")
        .to_string();
    assert_mentions(&err, &["`long_Jvp` (jvp)", "f32[4]", "f32[3]"]);
    let ext = long_endpoint(Endpoint::Vjp);
    let e = ext.clone();
    let g = grad(move |x: &Tensor| e.call(&[x.into()]).remove(0).sum_all(), 0)
        .call1(std::slice::from_ref(&x));
    let err = to_vec::<f32>(&g).expect_err("a long cotangent").to_string();
    assert_mentions(&err, &["`long_Vjp` (vjp)", "f32[4]", "f32[3]"]);
    // batched sequentially: every call is checked
    let e = ext.clone();
    let xs = Tensor::from_vec(vec![1.0f32; 6], &[2, 3]);
    let per_sample = vmap(
        grad(move |x: &Tensor| e.call(&[x.into()]).remove(0).sum_all(), 0),
        0,
        0,
    )
    .call1(&[xs]);
    let err = to_vec::<f32>(&per_sample)
        .expect_err("long cotangents")
        .to_string();
    assert_mentions(&err, &["`long_Vjp` (vjp)", "f32[4]", "f32[3]"]);
}

// ---- item 17: batch sizes 0 and 1 ----

const METHODS: [VmapMethod; 3] = [
    VmapMethod::Rewrite,
    VmapMethod::Range,
    VmapMethod::PadReduce,
];

/// `[n, 3]` samples `0.5 + 0.25 i`.
fn batch(n: usize) -> Tensor {
    let v: Vec<f32> = (0..n * 3).map(|i| 0.5 + 0.25 * i as f32).collect();
    Tensor::from_vec(v, &[n, 3])
}

fn weights() -> Tensor {
    Tensor::from_vec(vec![1.0f32, -1.0, 0.5, 2.0, 0.25, -0.5], &[3, 2])
}

/// Per-sample functions of a `[3]` sample: elementwise, a reduce, a matmul with a captured
/// weight, two results, a custom vjp, and a gradient.
fn sample_functions() -> Vec<(&'static str, Func)> {
    let w = weights();
    let cube = custom_vjp(
        |x: &Tensor| x * x * x,
        |p: &[Tensor]| vec![p[0].clone()],
        |r: &[Tensor], ct: &[Tensor]| vec![&ct[0] * &r[0] * &r[0] * 3.0],
    );
    let cube2 = cube.clone();
    vec![
        (
            "sin",
            Func::new(None, |a: &[Tensor]| vec![a[0].sin() * 2.0]),
        ),
        ("sum", Func::new(None, |a: &[Tensor]| vec![a[0].sum_all()])),
        (
            "matmul",
            Func::new(None, move |a: &[Tensor]| {
                vec![a[0].reshape(&[1, 3]).matmul(&w)]
            }),
        ),
        (
            "two",
            Func::new(None, |a: &[Tensor]| vec![a[0].exp(), a[0].max(0, false)]),
        ),
        ("custom", Func::new(None, move |a: &[Tensor]| cube.call(a))),
        (
            "grad",
            grad(move |x: &Tensor| cube2.call1(&[x.sin()]).sum_all(), 0),
        ),
    ]
}

/// The per-sample loop: `f` on each row, results stacked (the shapes of a sample's results
/// with `n` in front).
fn per_sample(f: &Func, xs: &Tensor, n: usize) -> Vec<(Vec<usize>, Vec<f32>)> {
    let probe = f.call(&[Tensor::zeros(&[3], DType::F32)]);
    (0..probe.len())
        .map(|k| {
            let mut shape = vec![n];
            shape.extend(probe[k].shape());
            let mut v = Vec::new();
            for i in 0..n {
                let row = xs.narrow(0, i as isize, 1).reshape(&[3]);
                v.extend(values(&f.call(&[row])[k]));
            }
            (shape, v)
        })
        .collect()
}

#[test]
fn every_vmap_method_handles_batches_of_zero_and_one() {
    for (name, f) in sample_functions() {
        for n in [0, 1, 2] {
            let xs = batch(n);
            let want = per_sample(&f, &xs, n);
            for method in METHODS {
                let got = vmap_with(f.clone(), 0, 0, method).call(std::slice::from_ref(&xs));
                assert_eq!(got.len(), want.len(), "{name} {method:?} n={n}");
                for (k, (g, (shape, v))) in got.iter().zip(&want).enumerate() {
                    assert_eq!(&g.shape(), shape, "{name} {method:?} n={n} result {k}");
                    close(&values(g), v);
                }
            }
        }
    }
}

#[test]
fn out_axes_and_unmapped_arguments_at_batch_zero() {
    let w = weights();
    for method in METHODS {
        let w = w.clone();
        let f = move |x: &Tensor, w: &Tensor| x.reshape(&[3, 1]) * w;
        // batch placed last; a [3, 2] per-sample result
        let got = vmap_with(f, [Some(0), None], 2, method).call1(&[batch(0), w.clone()]);
        assert_eq!(got.shape(), vec![3, 2, 0], "{method:?}");
        assert!(values(&got).is_empty());
        // mapped along axis 1 of a [3, 0] tensor
        let g = |x: &Tensor| x * 2.0;
        let xs = Tensor::zeros(&[3, 0], DType::F32);
        let got = vmap_with(g, 1, 0, method).call1(&[xs]);
        assert_eq!(got.shape(), vec![0, 3], "{method:?}");
        // a batch of one along axis 1, placed at axis 1 of a [3] result
        let xs = Tensor::from_vec(vec![0.5f32, 1.0, 1.5], &[3, 1]);
        let got = vmap_with(g, 1, 1, method).call1(&[xs]);
        assert_eq!(got.shape(), vec![3, 1], "{method:?}");
        close(&values(&got), &[1.0, 2.0, 3.0]);
        // a result that does not depend on the batch is repeated zero times
        let h = |_x: &Tensor| Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
        let got = vmap_with(h, 0, 0, method).call1(&[batch(0)]);
        assert_eq!(got.shape(), vec![0, 2], "{method:?}");
    }
}

#[test]
fn nested_vmaps_with_an_empty_batch() {
    for method in METHODS {
        let inner = vmap_with(|x: &Tensor| x.sin().sum_all(), 0, 0, method);
        for (outer, inner_n) in [(0usize, 2usize), (2, 0), (1, 1), (0, 0)] {
            let xs = Tensor::zeros(&[outer, inner_n, 3], DType::F32);
            let got = vmap_with(inner.clone(), 0, 0, method).call1(&[xs]);
            assert_eq!(got.shape(), vec![outer, inner_n], "{method:?}");
            assert_eq!(values(&got), vec![0.0; outer * inner_n], "{method:?}");
        }
    }
}

const STRATEGIES: [BatchStrategy; 4] = [
    BatchStrategy::Sequential,
    BatchStrategy::ExpandDims,
    BatchStrategy::BroadcastAll,
    BatchStrategy::Auto,
];

/// `x * sin(y)` over `[..., 3]` arrays with its endpoints, batched by `strategy`.
fn mul_sin(strategy: BatchStrategy) -> External {
    fn f32s(a: &HostArray) -> Vec<f32> {
        a.to_vec::<f32>()
    }
    /// `a` and `b` broadcast against each other (a shorter shape is a trailing part).
    fn zip(a: &HostArray, b: &HostArray, f: impl Fn(f32, f32) -> f32) -> HostArray {
        let (long, short) = if a.shape().len() >= b.shape().len() {
            (a, b)
        } else {
            (b, a)
        };
        let n = short.shape().iter().product::<usize>().max(1);
        let (va, vb) = (f32s(a), f32s(b));
        let len = long.shape().iter().product::<usize>();
        let at = |v: &Vec<f32>, i: usize| if v.len() == len { v[i] } else { v[i % n] };
        let out = (0..len).map(|i| f(at(&va, i), at(&vb, i))).collect();
        HostArray::new(out, long.shape())
    }
    External::builder(&format!("mul_sin_{strategy:?}"))
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])))
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])))
        .output(OutputSpec::like_input(0, DType::F32))
        .apply(|c: &HostCall| vec![zip(c.array(0), c.array(1), |x, y| x * y.sin())])
        .jvp(|c: &HostCall| {
            let (x, y) = (c.array(0), c.array(1));
            let (tx, ty) = (&c.tangents()[0], &c.tangents()[1]);
            let a = zip(tx, y, |t, y| t * y.sin());
            let b = zip(x, y, |x, y| x * y.cos());
            vec![zip(&a, &zip(&b, ty, |b, t| b * t), |p, q| p + q)]
        })
        .vjp(|c: &HostCall| {
            let (x, y, ct) = (c.array(0), c.array(1), &c.cotangents()[0]);
            let dx = zip(ct, y, |c, y| c * y.sin());
            let dy = zip(&zip(ct, x, |c, x| c * x), y, |p, y| p * y.cos());
            vec![dx, dy]
        })
        .vmap_method(strategy)
        .build()
}

fn y0() -> Tensor {
    t(&[0.4, -1.1, 2.0])
}

#[test]
fn every_batching_strategy_handles_batches_of_zero_and_one() {
    for strategy in STRATEGIES {
        let ext = mul_sin(strategy);
        let e = ext.clone();
        let apply = move |x: &Tensor| e.call(&[x.into(), (&y0()).into()]).remove(0);
        let e = ext.clone();
        let loss = move |x: &Tensor| e.call(&[x.into(), (&y0()).into()]).remove(0).sum_all();
        let e = ext.clone();
        let both = move |x: &Tensor| e.call(&[x.into(), (&x.cos()).into()]).remove(0);
        let cases: Vec<(&str, Func)> = vec![
            (
                "apply",
                Func::new(None, move |a: &[Tensor]| vec![apply(&a[0])]),
            ),
            ("grad", grad(loss, 0)),
            ("jacfwd", jacfwd(both.clone(), 0)),
            ("jacrev", jacrev(both, 0)),
        ];
        for (name, f) in cases {
            for n in [0, 1, 2] {
                let xs = batch(n);
                let want = per_sample(&f, &xs, n);
                let got = vmap(f.clone(), 0, 0).call(std::slice::from_ref(&xs));
                for (g, (shape, v)) in got.iter().zip(&want) {
                    assert_eq!(&g.shape(), shape, "{name} {strategy:?} n={n}");
                    close(&values(g), v);
                }
            }
        }
    }
}

#[test]
fn an_empty_batch_never_calls_the_external() {
    for strategy in STRATEGIES {
        let ext = mul_sin(strategy);
        let e = ext.clone();
        let f = move |x: &Tensor| e.call(&[x.into(), (&y0()).into()]).remove(0);
        let got = vmap(f, 0, 0).call1(&[batch(0)]);
        assert_eq!(got.shape(), vec![0, 3], "{strategy:?}");
        assert!(values(&got).is_empty());
        assert_eq!(ext.count(Endpoint::Apply), 0, "{strategy:?}");
    }
}

#[test]
fn an_empty_batch_flows_into_later_ops() {
    for method in METHODS {
        let ys = vmap_with(|x: &Tensor| x.sin() * 2.0, 0, 0, method).call1(&[batch(0)]);
        // the sum over no samples is zero; a broadcast of the empty batch stays empty
        assert_eq!(values(&ys.sum(0, false)), vec![0.0; 3], "{method:?}");
        let wide = ys.reshape(&[0, 1, 3]).expand(&[0, 4, 3]).sum(2, false);
        assert_eq!(wide.shape(), vec![0, 4], "{method:?}");
        assert!(values(&wide).is_empty());
        // out_axes None: a result that varies with the batch is refused at size 0 too
        let msg = panic_message(|| {
            vmap_with(|x: &Tensor| x * 2.0, 0, None, method).call(&[batch(0)]);
        });
        assert_mentions(
            &msg,
            &["out_axes is None for result 0", "depends on the mapped"],
        );
        let kept = vmap_with(|_x: &Tensor| t(&[1.0, 2.0]), 0, None, method).call1(&[batch(0)]);
        assert_eq!(values(&kept), vec![1.0, 2.0], "{method:?}");
    }
}

#[test]
fn a_vectorized_endpoint_that_drops_the_batch_is_an_error_naming_it() {
    for strategy in [BatchStrategy::ExpandDims, BatchStrategy::BroadcastAll] {
        let name = format!("unbatched_{strategy:?}");
        let ext = External::builder(&name)
            .input(InputSpec::array(DType::F32, Dims::Trailing(vec![3])))
            .output(OutputSpec::like_input(0, DType::F32))
            .apply(|_c: &HostCall| vec![HostArray::new(vec![1.0f32; 3], &[3])])
            .vmap_method(strategy)
            .build();
        let e = ext.clone();
        let ys = vmap(move |x: &Tensor| e.call(&[x.into()]).remove(0), 0, 0).call1(&[batch(2)]);
        let err = to_vec::<f32>(&ys)
            .expect_err("a result without its batch")
            .to_string();
        assert_mentions(&err, &[&format!("`{name}` (apply)"), "f32[3]", "f32[2, 3]"]);
    }
}

#[test]
fn jacobians_of_empty_inputs_are_empty() {
    let x = Tensor::zeros(&[0], DType::F32);
    let f = |x: &Tensor| x.sin() * 2.0;
    assert_eq!(
        jacfwd(f, 0).call1(std::slice::from_ref(&x)).shape(),
        vec![0, 0]
    );
    assert_eq!(
        jacrev(f, 0).call1(std::slice::from_ref(&x)).shape(),
        vec![0, 0]
    );
    // one input element: the 1 x 1 Jacobian 2 cos(0.5)
    let x1 = t(&[0.5]);
    let want = [2.0 * 0.5f32.cos()];
    close(
        &values(&jacfwd(f, 0).call1(std::slice::from_ref(&x1))),
        &want,
    );
    close(
        &values(&jacrev(f, 0).call1(std::slice::from_ref(&x1))),
        &want,
    );
    // a scalar function of an empty input has an empty gradient
    let g = grad(|x: &Tensor| x.sin().sum_all(), 0).call1(std::slice::from_ref(&x));
    assert_eq!(g.shape(), vec![0]);
    assert!(values(&g).is_empty());
}
