//! Random per-sample functions under the transforms:
//!
//! - `vmap_with` by every [`VmapMethod`], at random in and out axes, equals the stack of the
//!   function applied to each sample (interpreted), both interpreted and scheduled;
//! - `jvp` and `vjp` agree: `<J t, c> = <t, Jᵀ c>` for random tangents `t` and cotangents
//!   `c`, both return `f(x)`, `grad` of `sum(f(x) * c)` is the pullback of `c`, and the
//!   tangent and cotangent graphs schedule to the interpreter's values;
//! - `vmap` of `grad` equals the loop of per-sample gradients, by every method.

use super::recipe::{FLOAT_LEAF, Graph, Options, Value, build, float_leaf, graph, input};
use super::{case_count, check_property, check_property_cases, compare};
use crate::interp::{HostArray, evaluate};
use crate::schedule::create_schedule;
use crate::schedule::exec::run;
use crate::tensor::Tensor;
use crate::transform::{VmapMethod, grad, jvp, vjp, vmap_with};
use proptest::prelude::*;

const METHODS: [VmapMethod; 3] = [
    VmapMethod::Rewrite,
    VmapMethod::Range,
    VmapMethod::PadReduce,
];

/// The per-sample function of `graph`: its steps applied to the argument, whose magnitude
/// is within the input's bound.
fn function(
    graph: &Graph,
    options: Options,
) -> impl Fn(&Tensor) -> Tensor + Clone + Send + Sync + use<> {
    let graph = graph.clone();
    let bound = input(&graph, &[]).bound;
    move |x: &Tensor| {
        build(
            &graph,
            Value {
                t: x.clone(),
                bound,
            },
            options,
        )
        .0
        .t
    }
}

/// The bound of `graph`'s result on its own input.
fn result_bound(graph: &Graph, options: Options) -> (Vec<usize>, f64) {
    let (out, _) = build(graph, input(graph, &[]), options);
    (out.t.shape(), out.bound)
}

/// The largest magnitude in `a` (at least 1): the scale of comparisons of values without a
/// recipe bound (tangents, cotangents).
fn scale(a: &HostArray) -> f64 {
    a.to_f64_vec()
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0, |m, v| m.max(v.abs()))
}

/// Schedules `outputs` together, runs the kernels, and compares each with `wants`.
fn scheduled(
    what: &str,
    outputs: &[Tensor],
    wants: &[HostArray],
    bounds: &[f64],
) -> Result<(), String> {
    let uops: Vec<_> = outputs.iter().map(Tensor::uop).collect();
    let values = run(&create_schedule(&uops));
    for (k, (u, got)) in uops.iter().zip(values).enumerate() {
        let got = HostArray::new(u.dtype(), &u.shape_vec(), got);
        compare(
            &format!("{what} (scheduled output {k})"),
            &got,
            &wants[k],
            bounds[k],
        )?;
    }
    Ok(())
}

/// A vmap case: a per-sample graph, the batch size, the batch axis of the input and of the
/// result (modulo rank + 1), and the method.
#[derive(Clone, Debug)]
struct VmapCase {
    sample: Graph,
    batch: usize,
    in_axis: u8,
    out_axis: u8,
    method: VmapMethod,
}

/// The batch sizes every vmap method is checked at: 1 (the degenerate batch, where a
/// PadReduce window once covered the whole axis), 2, and 7 (odd, more than any sample axis).
const BATCHES: [usize; 3] = [1, 2, 7];

fn vmap_case(ints: bool) -> impl Strategy<Value = VmapCase> {
    (
        proptest::sample::select(METHODS.to_vec()),
        proptest::sample::select(BATCHES.to_vec()),
    )
        .prop_flat_map(move |(method, batch)| vmap_case_at(ints, method, batch))
}

/// A vmap case of a random graph and axes with the given method and batch size.
fn vmap_case_at(ints: bool, method: VmapMethod, batch: usize) -> impl Strategy<Value = VmapCase> {
    (graph(8, ints), any::<u8>(), any::<u8>()).prop_map(move |(sample, in_axis, out_axis)| {
        VmapCase {
            sample,
            batch,
            in_axis,
            out_axis,
            method,
        }
    })
}

/// The batched input of `case` (batch at its input axis) and that axis.
fn batched_input(case: &VmapCase) -> (Tensor, usize) {
    let rank = case.sample.shape.len();
    let axis = case.in_axis as usize % (rank + 1);
    let x = input(&case.sample, &[case.batch]).t;
    let mut order: Vec<usize> = (1..=rank).collect();
    order.insert(axis, 0);
    (x.permute(&order).contiguous(), axis)
}

/// `f` applied to each sample of `x` along `axis`, stacked at `out_axis`, interpreted.
fn loop_over_samples(
    f: &dyn Fn(&Tensor) -> Tensor,
    x: &Tensor,
    axis: usize,
    batch: usize,
    out_axis: usize,
) -> HostArray {
    let samples: Vec<Tensor> = (0..batch as isize)
        .map(|i| f(&x.slice(axis as isize, i, i + 1).squeeze(axis as isize)))
        .collect();
    evaluate(&Tensor::stack(&samples, out_axis as isize).uop())
}

fn vmap_equals_loop(case: &VmapCase) -> Result<(), String> {
    let options = Options {
        ints: true,
        wild_indices: true,
        away_from_kinks: false,
    };
    let f = function(&case.sample, options);
    let (out_shape, bound) = result_bound(&case.sample, options);
    let out_axis = case.out_axis as usize % (out_shape.len() + 1);
    let (x, axis) = batched_input(case);
    let want = loop_over_samples(&f, &x, axis, case.batch, out_axis);
    let batched =
        vmap_with(f, axis as isize, out_axis as isize, case.method).call1(std::slice::from_ref(&x));
    compare(
        "vmap (interpreted)",
        &evaluate(&batched.uop()),
        &want,
        bound,
    )?;
    scheduled("vmap", &[batched], &[want], &[bound])
}

#[test]
fn vmapped_random_functions_equal_a_loop_over_samples() {
    check_property(
        "transforms::vmapped_random_functions_equal_a_loop_over_samples",
        256,
        vmap_case(true),
        vmap_equals_loop,
    );
}

#[test]
fn every_vmap_method_at_batch_sizes_1_2_and_7_equals_a_loop() {
    // The nine (method, batch) runs share one property's case budget, so that CI's 10,000
    // cases per property stay 10,000 here too.
    let runs = (METHODS.len() * BATCHES.len()) as u32;
    let cases = (case_count(16 * runs) / runs).max(1);
    for method in METHODS {
        for batch in BATCHES {
            check_property_cases(
                "transforms::every_vmap_method_at_batch_sizes_1_2_and_7_equals_a_loop",
                cases,
                vmap_case_at(true, method, batch),
                vmap_equals_loop,
            );
        }
    }
}

/// A differentiation case: a float graph and the seeds of a tangent and a cotangent.
#[derive(Clone, Debug)]
struct AdCase {
    f: Graph,
    tangent: u8,
    cotangent: u8,
}

fn ad_case() -> impl Strategy<Value = AdCase> {
    (graph(8, false), any::<u8>(), any::<u8>()).prop_map(|(f, tangent, cotangent)| AdCase {
        f,
        tangent,
        cotangent,
    })
}

/// `Σ a·b` in f64, and `Σ |a·b|` (the scale of its rounding error).
fn dot(a: &HostArray, b: &HostArray) -> (f64, f64) {
    a.to_f64_vec()
        .iter()
        .zip(b.to_f64_vec())
        .fold((0.0, 0.0), |(s, m), (x, y)| (s + x * y, m + (x * y).abs()))
}

const AD_OPTIONS: Options = Options {
    ints: false,
    wild_indices: true,
    away_from_kinks: true,
};

fn jvp_agrees_with_vjp(case: &AdCase) -> Result<(), String> {
    let f = function(&case.f, AD_OPTIONS);
    let (out_shape, bound) = result_bound(&case.f, AD_OPTIONS);
    let x = input(&case.f, &[]).t;
    let t = float_leaf(&case.f.shape, case.tangent, 11);
    let c = float_leaf(&out_shape, case.cotangent, 12);
    let value = evaluate(&f(&x).uop());

    let (ys, tys) = jvp(
        f.clone(),
        std::slice::from_ref(&x),
        std::slice::from_ref(&t),
    );
    compare("jvp value", &evaluate(&ys[0].uop()), &value, bound)?;
    let (ys, pullback) = vjp(f.clone(), std::slice::from_ref(&x));
    compare("vjp value", &evaluate(&ys[0].uop()), &value, bound)?;
    let g = pullback.call1(std::slice::from_ref(&c));

    let (jt, g_want) = (evaluate(&tys[0].uop()), evaluate(&g.uop()));
    let ((lhs, lm), (rhs, rm)) = (
        dot(&jt, &evaluate(&c.uop())),
        dot(&evaluate(&t.uop()), &g_want),
    );
    if (lhs - rhs).abs() > 1e-3 * (lm + rm) + 1e-4 {
        return Err(format!(
            "<J t, c> = {lhs} but <t, Jᵀ c> = {rhs}\n  J t = {:?}\nJᵀ c = {:?}",
            jt.to_f64_vec(),
            g_want.to_f64_vec()
        ));
    }

    let loss = {
        let (f, c) = (f.clone(), c.clone());
        move |x: &Tensor| f(x).mul(&c).sum_all()
    };
    let by_grad = evaluate(&grad(loss, 0).call1(std::slice::from_ref(&x)).uop());
    compare("grad of <f, c>", &by_grad, &g_want, scale(&g_want))?;

    scheduled(
        "jvp, vjp",
        &[tys[0].clone(), g],
        &[jt.clone(), g_want.clone()],
        &[scale(&jt), scale(&g_want)],
    )
}

#[test]
fn jvp_and_vjp_of_random_functions_agree() {
    check_property(
        "transforms::jvp_and_vjp_of_random_functions_agree",
        256,
        ad_case(),
        jvp_agrees_with_vjp,
    );
}

/// A case of `vmap(grad(<f, c>))`: the per-sample function, the cotangent seed, the batch
/// and the method.
#[derive(Clone, Debug)]
struct VmapGradCase {
    f: Graph,
    cotangent: u8,
    batch: usize,
    method: VmapMethod,
}

fn vmap_grad_case() -> impl Strategy<Value = VmapGradCase> {
    (
        graph(6, false),
        any::<u8>(),
        proptest::sample::select(BATCHES.to_vec()),
        proptest::sample::select(METHODS.to_vec()),
    )
        .prop_map(|(f, cotangent, batch, method)| VmapGradCase {
            f,
            cotangent,
            batch,
            method,
        })
}

fn vmap_of_grad_equals_loop(case: &VmapGradCase) -> Result<(), String> {
    let f = function(&case.f, AD_OPTIONS);
    let (out_shape, _) = result_bound(&case.f, AD_OPTIONS);
    let c = float_leaf(&out_shape, case.cotangent, 12);
    let loss = move |x: &Tensor| f(x).mul(&c).sum_all();
    let per_sample = grad(loss, 0);
    let x = input(&case.f, &[case.batch]).t;
    let samples: Vec<Tensor> = (0..case.batch as isize)
        .map(|i| per_sample.call1(&[x.slice(0, i, i + 1).squeeze(0)]))
        .collect();
    let want = evaluate(&Tensor::stack(&samples, 0).uop());
    let batched = vmap_with(per_sample, 0, 0, case.method).call1(std::slice::from_ref(&x));
    let s = scale(&want).max(FLOAT_LEAF);
    compare(
        "vmap of grad (interpreted)",
        &evaluate(&batched.uop()),
        &want,
        s,
    )?;
    scheduled("vmap of grad", &[batched], &[want], &[s])
}

#[test]
fn vmapped_gradients_equal_a_loop_of_gradients() {
    check_property(
        "transforms::vmapped_gradients_equal_a_loop_of_gradients",
        256,
        vmap_grad_case(),
        vmap_of_grad_equals_loop,
    );
}

#[test]
fn a_take_of_a_stacked_padded_split_vmaps_in_bounds() {
    // The recorded failure of a gate-aware offset simplification (regressions/transforms.txt):
    // a gate `r < 1` pinned a reduce range to 0 in a load's offset; the take's collapse then
    // put the gathered index for `r` and did not gate that load (its offset no longer
    // mentioned `r`), so at index -1 the offset left the buffer.
    use super::recipe::Step;
    let case = VmapCase {
        sample: Graph {
            shape: vec![1],
            int: false,
            seed: 0,
            steps: vec![
                Step::Pad {
                    axis: 0,
                    before: 1,
                    after: 0,
                    value: 0,
                },
                Step::Split { axis: 0 },
                Step::Stack {
                    axis: 221,
                    flip: false,
                },
                Step::Take {
                    axis: 32,
                    seed: 199,
                    len: 0,
                },
            ],
            also: None,
        },
        batch: 7,
        in_axis: 0,
        out_axis: 0,
        method: VmapMethod::Rewrite,
    };
    vmap_equals_loop(&case).unwrap();
}
