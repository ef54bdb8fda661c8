//! Issue 36, item 14: externals and custom functions die with their owners (the handles and
//! the graph nodes that call them), and an external's call log is bounded. The counts are
//! process-wide, so the tests of this file (its own process) take turns.

use std::sync::Mutex;
use tensor::core::transform::{Custom, custom_vjp};
use tensor::external::{
    BatchStrategy, CALL_LOG_SIZE, Dims, Endpoint, External, HostCall, InputSpec, OutputSpec,
};
use tensor::prelude::*;
use tensor::runtime::host_call::REMEMBERED_CALLS;
use tensor::runtime::realize::{DEFAULT_PLAN_CACHE_SIZE, to_vec};

static TURN: Mutex<()> = Mutex::new(());

fn values(t: &Tensor) -> Vec<f32> {
    to_vec::<f32>(t).expect("realize")
}

/// `2x` on the host, with a vjp endpoint and sequential batching.
fn doubler(name: &str) -> External {
    External::builder(name)
        .input(InputSpec::array(DType::F32, Dims::Trailing(vec![2])))
        .output(OutputSpec::like_input(0, DType::F32))
        .apply(|c: &HostCall| {
            let v: Vec<f32> = c.array(0).to_vec::<f32>().iter().map(|x| x * 2.0).collect();
            vec![tensor::external::HostArray::new(v, c.array(0).shape())]
        })
        .vjp(|c: &HostCall| {
            let v: Vec<f32> = c.cotangents()[0]
                .to_vec::<f32>()
                .iter()
                .map(|x| x * 2.0)
                .collect();
            vec![tensor::external::HostArray::new(v, c.array(0).shape())]
        })
        .vmap_method(BatchStrategy::Sequential)
        .build()
}

#[test]
fn externals_die_with_their_handles_and_calls() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let before = External::live();
    let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2]);
    for i in 0..20_000 {
        let ext = doubler(&format!("doubler_{i}"));
        // a graph node of the call, differentiated, then dropped with the handle
        let e = ext.clone();
        let g = grad(move |x: &Tensor| e.call(&[x.into()]).remove(0).sum_all(), 0);
        let _ = g.call(std::slice::from_ref(&x));
    }
    assert_eq!(
        External::live(),
        before,
        "20,000 dropped externals are gone"
    );
    // a call outlives the handle it was made with: the node keeps the external alive
    let y = doubler("outlived").call(&[(&x).into()]).remove(0) + 1.0;
    assert_eq!(External::live(), before + 1);
    drop(y);
    assert_eq!(External::live(), before, "gone with its last node");
    // realized calls are held only by the runtime's bounded caches (plans, host results)
    let bound = DEFAULT_PLAN_CACHE_SIZE + REMEMBERED_CALLS;
    for i in 0..bound + 500 {
        let y = doubler(&format!("realized_{i}"))
            .call(&[(&x).into()])
            .remove(0)
            + 1.0;
        assert_eq!(values(&y), vec![3.0, -3.0]);
    }
    let kept = External::live() - before;
    assert!(
        kept <= bound,
        "{kept} realized externals kept, more than the caches hold"
    );
}

#[test]
fn custom_functions_die_with_their_funcs_and_nodes() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let before = Custom::live();
    let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2]);
    for _ in 0..20_000 {
        let f = custom_vjp(
            |x: &Tensor| x * 3.0,
            |p: &[Tensor]| vec![p[0].clone()],
            |_r: &[Tensor], ct: &[Tensor]| vec![&ct[0] * 3.0],
        );
        let _ = f.call(std::slice::from_ref(&x));
        let _ = grad(
            move |x: &Tensor| f.call1(std::slice::from_ref(x)).sum_all(),
            0,
        )
        .call(std::slice::from_ref(&x));
    }
    // vmapping a custom function makes batched ones (its body and rules vmapped): gone too
    for _ in 0..1_000 {
        let f = Custom::new("scaled", |x: &Tensor| x * 3.0)
            .jvp(|_p: &[Tensor], t: &[Tensor]| vec![&t[0] * 3.0])
            .into_func();
        let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
        let _ = vmap(f, 0, 0).call(&[xs]);
    }
    assert_eq!(
        Custom::live(),
        before,
        "21,000 dropped custom functions are gone"
    );
    // a node outlives its Func and keeps the rules its gradient needs
    let f = Custom::new("tripled", |x: &Tensor| x * 3.0)
        .vjp(
            |p: &[Tensor]| vec![p[0].clone()],
            |_r: &[Tensor], ct: &[Tensor]| vec![&ct[0] * 3.0],
        )
        .into_func();
    let y = f.call1(std::slice::from_ref(&x));
    drop(f);
    assert_eq!(Custom::live(), before + 1);
    drop(y);
    assert_eq!(Custom::live(), before, "gone with its last node");
    // realized after its Func is gone, and differentiated through the kept rules
    let f = Custom::new("tripled", |x: &Tensor| x * 3.0)
        .vjp(
            |p: &[Tensor]| vec![p[0].clone()],
            |_r: &[Tensor], ct: &[Tensor]| vec![&ct[0] * 3.0],
        )
        .into_func();
    let y = f.call1(std::slice::from_ref(&x));
    let g = grad(
        move |x: &Tensor| f.call1(std::slice::from_ref(x)).sum_all(),
        0,
    );
    let dy = g.call1(std::slice::from_ref(&x));
    drop(g);
    assert_eq!(values(&y), vec![3.0, -6.0]);
    assert_eq!(values(&dy), vec![3.0, 3.0]);
}

#[test]
fn the_call_log_is_bounded_and_the_counts_exact() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let ext = doubler("logged");
    let n = 3 * CALL_LOG_SIZE + 5;
    // one batched sequential call is n invocations of apply, on [2] each
    let xs = Tensor::from_vec(vec![1.0f32; 2 * n], &[n, 2]);
    let e = ext.clone();
    let ys = vmap(move |x: &Tensor| e.call(&[x.into()]).remove(0), 0, 0).call1(&[xs]);
    assert_eq!(values(&ys), vec![2.0; 2 * n]);
    assert_eq!(ext.count(Endpoint::Apply), n);
    assert_eq!(ext.count(Endpoint::Vjp), 0);
    assert_eq!(ext.calls().len(), CALL_LOG_SIZE);
    assert_eq!(
        ext.shapes(Endpoint::Apply),
        vec![vec![vec![2]]; CALL_LOG_SIZE]
    );
    ext.reset_calls();
    assert_eq!(ext.count(Endpoint::Apply), 0);
    assert!(ext.calls().is_empty());
}
