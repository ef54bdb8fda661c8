//! Random graphs, scheduled and run by the test executor, equal the reference interpreter.

use super::recipe::{Graph, Options, build, graph, input};
use super::{check_property, compare, run_cases};
use crate::interp::{HostArray, evaluate};
use crate::schedule::create_schedule;
use crate::schedule::exec::run;
use crate::tensor::Tensor;
use crate::uop::Scalar;
use proptest::test_runner::TestError;

/// The outputs of `graph` (the result, and the second output when it asks for one), each
/// with its magnitude bound.
fn outputs(graph: &Graph, options: Options) -> Vec<(Tensor, f64)> {
    let (out, also) = build(graph, input(graph, &[]), options);
    let mut outs = vec![(out.t, out.bound)];
    outs.extend(also.map(|a| (a.t, a.bound)));
    outs
}

/// Schedules the outputs together, runs the kernels, and compares each with the interpreter.
fn scheduled_equals_interpreted(outs: &[(Tensor, f64)]) -> Result<(), String> {
    let uops: Vec<_> = outs.iter().map(|(t, _)| t.uop()).collect();
    let schedule = create_schedule(&uops);
    let values = run(&schedule);
    for (k, ((u, (_, bound)), got)) in uops.iter().zip(outs).zip(values).enumerate() {
        let got = HostArray::new(u.dtype(), &u.shape_vec(), got);
        compare(&format!("output {k}"), &got, &evaluate(u), *bound)?;
    }
    Ok(())
}

#[test]
fn random_graphs_scheduled_equal_the_interpreter() {
    let options = Options {
        ints: true,
        wild_indices: true,
        away_from_kinks: false,
    };
    check_property(
        "graphs::random_graphs_scheduled_equal_the_interpreter",
        256,
        graph(10, true),
        |g| scheduled_equals_interpreted(&outputs(g, options)),
    );
}

/// The comparison can fail, and a failure shrinks: a check that perturbs one element of the
/// interpreter's own values fails on the first case and shrinks to a recipe of one step.
#[test]
fn a_wrong_value_is_reported_with_a_minimal_recipe() {
    let options = Options {
        ints: true,
        wild_indices: false,
        away_from_kinks: false,
    };
    let perturbed = |g: &Graph| {
        let outs = outputs(g, options);
        let (t, bound) = &outs[0];
        let want = evaluate(&t.uop());
        let mut data = want.data.clone();
        data[0] = Scalar::Float(data[0].as_f64() + 1.0 + 2.0 * bound);
        let got = HostArray::new(want.dtype, &want.shape, data);
        compare("perturbed", &got, &want, *bound)
    };
    match run_cases(&graph(6, true), perturbed, 16, 7, None) {
        Err(TestError::Fail(reason, minimal)) => {
            assert!(reason.message().contains("values differ"), "{reason}");
            assert_eq!(minimal.steps.len(), 1, "not shrunk: {minimal:?}");
        }
        other => panic!("a perturbed value was not reported: {other:?}"),
    }
}
