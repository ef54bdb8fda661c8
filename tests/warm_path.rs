//! The warm path: a realize of a graph whose structure was run before replays its plan —
//! no scheduling, no codegen, no compiling — and gives the values a fresh schedule gives,
//! whatever data the new buffers hold. Work is counted (process-wide counters), so the tests
//! of this binary run one at a time.

mod common;

use common::random_graph::{Rng, data, random_shape, step};
use std::sync::{Mutex, MutexGuard};
use tensor::prelude::*;
use tensor::runtime::pipeline_counts;
use tensor::runtime::realize::{codegen_options, read_buffer, run_schedule};
use tensor::runtime::{CpuDevice, compiler_invocations};

/// Serializes the tests: the counters they read are process-wide.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn floats(values: &[f32]) -> Tensor {
    Tensor::from_vec(values.to_vec(), &[values.len()])
}

/// The values of `t` from a schedule built afresh (the cold path, no plan cache).
fn fresh_values(t: &Tensor) -> Vec<f32> {
    let device = CpuDevice::shared().unwrap();
    let schedule = tensor::core::schedule::create_schedule(&[t.uop()]);
    run_schedule(&device, &schedule, &codegen_options(&device)).unwrap();
    let bytes = read_buffer(&device, &schedule.outputs[0]).unwrap();
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn a_second_realize_of_the_same_structure_schedules_generates_and_compiles_nothing() {
    let _serial = serial();
    let graph = |x: &Tensor, w: &Tensor| ((x * 2.0 + 1.0).exp() * w).sum(0, false);
    let first = graph(&floats(&[1.0, 2.0, 3.0]), &floats(&[0.5, 0.25, 0.125]));
    first.realize().unwrap();
    let (before, compiles) = (pipeline_counts(), compiler_invocations());
    let second = graph(&floats(&[-1.0, 0.0, 1.0]), &floats(&[1.0, 1.0, 1.0]));
    let got: Vec<f32> = second.to_vec().unwrap();
    let after = pipeline_counts();
    assert_eq!(after.schedules, before.schedules, "no rangeify");
    assert_eq!(
        after.kernels_generated, before.kernels_generated,
        "no codegen"
    );
    assert_eq!(compiler_invocations(), compiles, "no compiles");
    assert_eq!(after.plan_hits, before.plan_hits + 1);
    let want: f32 = [-1.0f32, 0.0, 1.0]
        .iter()
        .map(|x| (x * 2.0 + 1.0).exp())
        .sum();
    assert!((got[0] - want).abs() <= 1e-5 * want, "{got:?} vs {want}");
}

#[test]
fn a_new_shape_or_constant_builds_a_new_plan() {
    let _serial = serial();
    let a = floats(&[1.0, 2.0]);
    (&a + 3.0).realize().unwrap();
    let before = pipeline_counts().schedules;
    let b: Vec<f32> = (&floats(&[1.0, 2.0]) + 4.0).to_vec().unwrap();
    assert_eq!(
        b,
        vec![5.0, 6.0],
        "a changed constant is never a stale result"
    );
    let c: Vec<f32> = (&floats(&[1.0, 2.0, 3.0]) + 4.0).to_vec().unwrap();
    assert_eq!(c, vec![5.0, 6.0, 7.0]);
    assert_eq!(pipeline_counts().schedules, before + 2);
}

#[test]
fn replays_equal_fresh_schedules_bit_for_bit() {
    let _serial = serial();
    for seed in 0..12u64 {
        let build = |data_seed: u64| {
            let mut shape_rng = Rng(seed);
            let shape = random_shape(&mut shape_rng);
            let mut rng = Rng(seed * 1000 + data_seed);
            let mut ops = Rng(seed);
            let mut x = data(&shape, &mut rng);
            for _ in 0..4 {
                x = step(x, &mut ops);
            }
            x
        };
        build(1).realize().unwrap();
        let replayed = build(2);
        let want = fresh_values(&build(2));
        let got: Vec<f32> = replayed.to_vec().unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "seed {seed}");
    }
}

#[test]
fn aliased_inputs_are_their_own_structure() {
    let _serial = serial();
    let (x, y) = (floats(&[1.0, 2.0]), floats(&[10.0, 20.0]));
    let same: Vec<f32> = (&x * &x).to_vec().unwrap();
    let other: Vec<f32> = (&x * &y).to_vec().unwrap();
    let again: Vec<f32> = (&y * &y).to_vec().unwrap();
    assert_eq!(same, vec![1.0, 4.0]);
    assert_eq!(other, vec![10.0, 40.0]);
    assert_eq!(again, vec![100.0, 400.0]);
}

#[test]
fn an_input_realized_in_between_is_read_as_it_is_now() {
    let _serial = serial();
    let x = floats(&[1.0, 2.0]);
    let lazy = &x + 1.0;
    let first: Vec<f32> = (&lazy * 2.0).to_vec().unwrap();
    lazy.realize().unwrap();
    let second: Vec<f32> = (&lazy * 2.0).to_vec().unwrap();
    assert_eq!(first, vec![4.0, 6.0]);
    assert_eq!(second, first);
    let other = floats(&[5.0, 6.0]) + 1.0;
    other.realize().unwrap();
    let third: Vec<f32> = (&other * 2.0).to_vec().unwrap();
    assert_eq!(
        third,
        vec![12.0, 14.0],
        "the replayed plan reads the new buffer"
    );
}

#[test]
fn replayed_outputs_are_fresh_buffers() {
    let _serial = serial();
    let x = floats(&[1.0, 2.0, 3.0]);
    let a = &x * 3.0;
    let b = &x * 3.0;
    a.realize().unwrap();
    b.realize().unwrap();
    assert_ne!(
        a.uop(),
        b.uop(),
        "two realizes never share an output buffer"
    );
    assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
}
