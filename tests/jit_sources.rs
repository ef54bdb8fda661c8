//! `jit` tells its arguments from the values its function captured by what the trace read,
//! never by which memory a call passes: every aliasing pattern replays the right values. A
//! jit keeps a bounded number of signatures and holds no plan beyond the plan cache's.

use std::sync::{Mutex, MutexGuard};
use tensor::prelude::*;
use tensor::runtime::Jit;

/// The tests count traces and plans of shared caches: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn floats(values: &[f32]) -> Tensor {
    let t = Tensor::from_vec(values.to_vec(), &[values.len()]);
    t.realize().unwrap();
    t
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec().unwrap()
}

#[test]
fn an_argument_that_is_the_captured_tensor_stays_an_argument_later() {
    let _serial = serial();
    let w = floats(&[1.0, 2.0, 3.0]);
    let z = floats(&[10.0, 20.0, 30.0]);
    let captured = w.clone();
    let f = jit(move |a: &Tensor| a * 2.0 + &captured);
    assert_eq!(values(&f.call1(std::slice::from_ref(&w))), [3.0, 6.0, 9.0]);
    assert_eq!(
        values(&f.call1(std::slice::from_ref(&z))),
        [21.0, 42.0, 63.0]
    );
    assert_eq!(values(&f.call1(std::slice::from_ref(&w))), [3.0, 6.0, 9.0]);
}

#[test]
fn a_capture_first_seen_apart_is_still_read_when_passed_as_the_argument() {
    let _serial = serial();
    let w = floats(&[1.0, 2.0, 3.0]);
    let z = floats(&[10.0, 20.0, 30.0]);
    let captured = w.clone();
    let f = jit(move |a: &Tensor| a * 2.0 + &captured);
    assert_eq!(
        values(&f.call1(std::slice::from_ref(&z))),
        [21.0, 42.0, 63.0]
    );
    assert_eq!(values(&f.call1(std::slice::from_ref(&w))), [3.0, 6.0, 9.0]);
}

#[test]
fn one_tensor_passed_twice_and_then_two_tensors() {
    let _serial = serial();
    let f = Jit::new(Func::new(Some(2), |a: &[Tensor]| {
        vec![&a[0] - &(&a[1] * 3.0)]
    }));
    let (x, y) = (floats(&[1.0, 2.0]), floats(&[5.0, 7.0]));
    assert_eq!(
        values(&f.call(&[x.clone(), x.clone()]).unwrap()[0]),
        [-2.0, -4.0]
    );
    assert_eq!(
        values(&f.call(&[x.clone(), y.clone()]).unwrap()[0]),
        [-14.0, -19.0]
    );
    assert_eq!(
        values(&f.call(&[y.clone(), x.clone()]).unwrap()[0]),
        [2.0, 1.0]
    );
    assert_eq!(
        values(&f.call(&[y.clone(), y.clone()]).unwrap()[0]),
        [-10.0, -14.0]
    );
    assert_eq!(f.trace_count(), 1, "aliasing is not part of the signature");
}

#[test]
fn an_earlier_result_passed_back_in() {
    let _serial = serial();
    let offset = floats(&[1.0, 1.0]);
    let f = {
        let offset = offset.clone();
        Jit::new(Func::new(Some(2), move |a: &[Tensor]| {
            vec![&(&a[0] * &a[1]) + &offset, a[0].clone()]
        }))
    };
    let mut x = floats(&[2.0, 3.0]);
    let mut expected = [2.0f32, 3.0];
    for _ in 0..3 {
        let out = f.call(&[x.clone(), x.clone()]).unwrap();
        expected = expected.map(|v| v * v + 1.0);
        assert_eq!(values(&out[0]), expected);
        assert_eq!(
            values(&out[1]),
            values(&x),
            "the identity result is the argument"
        );
        // The result fed back as both arguments, and the passed-through argument as the
        // captured value's stand-in.
        x = out[0].clone();
    }
    let out = f.call(&[offset.clone(), floats(&[4.0, 5.0])]).unwrap();
    assert_eq!(
        values(&out[0]),
        [5.0, 6.0],
        "the capture passed as an argument"
    );
}

/// Runs the test named `name` again in a child process with a plan cache of 4, where its
/// body runs; true in that child.
fn in_child_with_small_plan_cache(name: &str) -> bool {
    if std::env::var_os("JIT_SOURCES_CHILD").is_some() {
        return true;
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("JIT_SOURCES_CHILD", "1")
        .env("TENSOR_PLAN_CACHE_SIZE", "4")
        .status()
        .unwrap();
    assert!(status.success(), "the child run of {name} failed");
    false
}

#[test]
fn a_jit_keeps_at_most_the_plan_caches_capacity_of_signatures() {
    if !in_child_with_small_plan_cache("a_jit_keeps_at_most_the_plan_caches_capacity_of_signatures")
    {
        return;
    }
    let plans = tensor::runtime::realize::shared_plan_cache();
    assert_eq!(plans.capacity(), 4);
    let f = Jit::new(Func::new(Some(1), |a: &[Tensor]| vec![&a[0] + 1.0]));
    for n in 1..=12 {
        let out = f.call(&[Tensor::zeros(&[n], DType::F32)]).unwrap();
        assert_eq!(values(&out[0]), vec![1.0; n]);
        assert!(
            f.signature_count() <= 4,
            "signatures beyond the bound are dropped"
        );
        assert!(plans.len() <= 4);
    }
    assert_eq!(f.signature_count(), 4);
    assert_eq!(f.trace_count(), 12);
    let again = f.call(&[Tensor::zeros(&[12], DType::F32)]).unwrap();
    assert_eq!(values(&again[0]), vec![1.0; 12]);
    assert_eq!(f.trace_count(), 12, "a kept signature replays");
    let first = f.call(&[Tensor::zeros(&[1], DType::F32)]).unwrap();
    assert_eq!(
        values(&first[0]),
        [1.0],
        "an evicted signature is traced again"
    );
    assert_eq!(f.trace_count(), 13);
}
