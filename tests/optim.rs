//! Optimizers and learning-rate schedules (issue 40): 20 steps of each torch.optim optimizer
//! on a fixed least-squares problem, with a schedule changing the rate every step, equal to
//! torch's values; steps 2..20 build no plan and run no compiler. The expected numbers come
//! from `tests/data/gen_optim.py` (torch.optim's update formulas and lr_scheduler's closed
//! forms reimplemented in NumPy); `tests/data/optim_reference.py` prints the same JSON with
//! torch itself: with torch 2.15 (2026-11-27) every number agreed within 9e-16.

mod common;

use std::sync::{Mutex, MutexGuard};
use tensor::optim::schedule::{CosineAnnealingLr, ExponentialLr, LinearLr, OneCycleLr, StepLr};
use tensor::optim::{
    Adagrad, Adam, AdamState, Optimizer, RmsProp, Schedule, Sgd, Stepper, clip_grad_norm,
};
use tensor::prelude::*;
use tensor::runtime::{compiler_invocations, pipeline_counts};

const STEPS: usize = 20;

/// `gen_optim.py`'s output (NumPy, float64), rounded to 12 digits.
mod expected {
    pub const LR_CONSTANT: [f64; 20] = [
        0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1,
        0.1, 0.1,
    ];
    pub const LR_STEP: [f64; 20] = [
        0.1, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.025,
        0.0125, 0.0125, 0.0125, 0.0125, 0.0125,
    ];
    pub const LR_EXPONENTIAL: [f64; 20] = [
        0.1,
        0.09,
        0.081,
        0.0729,
        0.06561,
        0.059049,
        0.0531441,
        0.04782969,
        0.043046721,
        0.0387420489,
        0.03486784401,
        0.031381059609,
        0.028242953648,
        0.025418658283,
        0.022876792455,
        0.020589113209,
        0.018530201889,
        0.0166771817,
        0.01500946353,
        0.013508517177,
    ];
    pub const LR_COSINE: [f64; 20] = [
        0.1,
        0.097577297557,
        0.090546341222,
        0.079595369988,
        0.065796341222,
        0.0505,
        0.035203658778,
        0.021404630012,
        0.010453658778,
        0.003422702443,
        0.001,
        0.003422702443,
        0.010453658778,
        0.021404630012,
        0.035203658778,
        0.0505,
        0.065796341222,
        0.079595369988,
        0.090546341222,
        0.097577297557,
    ];
    pub const LR_LINEAR_WARMUP: [f64; 20] = [
        0.025, 0.04, 0.055, 0.07, 0.085, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1,
        0.1, 0.1, 0.1, 0.1,
    ];
    pub const LR_ONE_CYCLE: [f64; 20] = [
        0.004,
        0.01316718427,
        0.03716718427,
        0.06683281573,
        0.09083281573,
        0.1,
        0.098746400624,
        0.095048463201,
        0.089091617757,
        0.081174565395,
        0.071694300179,
        0.061126202194,
        0.0500002,
        0.038874197806,
        0.028306099821,
        0.018825834605,
        0.010908782243,
        0.004951936799,
        0.001253999376,
        4e-07,
    ];
    pub const SGD: [f64; 8] = [
        0.559968340998,
        0.033237272785,
        -0.163789748478,
        0.467566340637,
        0.259519380073,
        0.932948867797,
        0.498746285746,
        -0.064233260007,
    ];
    pub const SGD_MOMENTUM: [f64; 8] = [
        0.68308861447,
        0.081070555278,
        -0.246840445321,
        0.434092564607,
        0.455357025944,
        0.974725220128,
        0.580208865423,
        -0.025839192,
    ];
    pub const SGD_NESTEROV: [f64; 8] = [
        0.656964187027,
        0.068776135537,
        -0.238444717896,
        0.454978541918,
        0.355537629502,
        0.971883768666,
        0.543073790017,
        -0.071206219645,
    ];
    pub const ADAM: [f64; 8] = [
        0.545788113237,
        0.053343075165,
        -0.182685164376,
        0.481132850063,
        -0.026420510602,
        0.909615045487,
        0.522272336661,
        -0.069410871621,
    ];
    pub const ADAM_AMSGRAD: [f64; 8] = [
        0.626796845549,
        0.027050174071,
        -0.375143438618,
        0.603386531617,
        0.13027013736,
        1.010750002459,
        0.69026499086,
        -0.23966880928,
    ];
    pub const ADAMW: [f64; 8] = [
        0.517698036287,
        0.109148181841,
        -0.157409988228,
        0.337507551052,
        -0.039260815674,
        0.922560438375,
        0.485575508506,
        0.102572616784,
    ];
    pub const RMSPROP: [f64; 8] = [
        0.547360351163,
        0.045371738313,
        -0.256895809671,
        0.623821782722,
        0.021088737884,
        1.065122781593,
        0.589060065392,
        -0.268668571339,
    ];
    pub const RMSPROP_CENTERED: [f64; 8] = [
        0.438764370344,
        0.022714051035,
        -0.080999906082,
        0.435022653893,
        -0.131141478829,
        0.866676800673,
        0.418983006845,
        0.003340185333,
    ];
    pub const ADAGRAD: [f64; 8] = [
        0.494090484442,
        0.034353185883,
        -0.163045772015,
        0.477625328546,
        -0.044205239418,
        0.92376320181,
        0.500341668624,
        -0.07906898235,
    ];
    pub const CLIP_GRAD_NORM: [f64; 9] = [
        2.329095854618,
        -0.151614562228,
        -0.096603968853,
        0.162348336545,
        -0.012075496107,
        -0.372998657517,
        -0.105996021381,
        -0.193207937707,
        -0.059035758744,
    ];
}

/// The counters are per process: every test of this file runs alone.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Clone, Tree)]
struct Linear {
    w: Tensor,
    b: Tensor,
}

/// The problem of `gen_optim.py`: the start `(W0, B0)` and the data `(X, Y)`.
fn problem() -> (Linear, Tensor, Tensor) {
    let p = Linear {
        w: Tensor::from_vec(vec![0.1f32, -0.2, 0.3, 0.4, -0.5, 0.6], &[3, 2]),
        b: Tensor::from_vec(vec![0.05f32, -0.05], &[2]),
    };
    let x = Tensor::from_vec(
        vec![
            1.0f32, 2.0, -1.0, 0.5, -1.0, 2.0, -1.5, 0.5, 1.0, 2.0, 1.0, 0.5,
        ],
        &[4, 3],
    );
    let y = Tensor::from_vec(vec![1.0f32, -1.0, 2.0, 0.5, -0.5, 1.5, 1.0, 2.0], &[4, 2]);
    (p, x, y)
}

/// `0.5 * sum((X w + b - Y)^2) / 4`.
fn loss(p: &Linear, x: &Tensor, y: &Tensor) -> Tensor {
    (x.matmul(&p.w) + &p.b - y).square().sum_all() * 0.125
}

fn flat(p: &Linear) -> Vec<f64> {
    tree_leaves(p)
        .iter()
        .flat_map(|t| t.to_vec::<f32>().unwrap())
        .map(f64::from)
        .collect()
}

#[track_caller]
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let diff = common::max_abs_diff(got, want);
    assert!(
        diff <= tol,
        "{what}: max |diff| {diff:e} > {tol:e}\n got {got:?}\nwant {want:?}"
    );
}

/// 20 steps of `opt` with `schedule` through a `Stepper`; asserts that steps 2..20 build no
/// plan and compile nothing, and returns the parameters.
fn train<O: Optimizer>(what: &str, opt: O, schedule: impl Schedule + 'static) -> Vec<f64> {
    let _serial = serial();
    let (mut p, x, y) = problem();
    let mut stepper = Stepper::new(opt, &p, schedule).unwrap();
    let step = |stepper: &mut Stepper<O, Linear>, p: &mut Linear| {
        let g = grad!(loss)(p, &x, &y);
        stepper.step(p, &g).unwrap();
    };
    step(&mut stepper, &mut p);
    let (plans, compiles) = (pipeline_counts().plans_made(), compiler_invocations());
    for _ in 1..STEPS {
        step(&mut stepper, &mut p);
    }
    assert_eq!(
        pipeline_counts().plans_made(),
        plans,
        "{what}: a step after the first made a plan"
    );
    assert_eq!(
        compiler_invocations(),
        compiles,
        "{what}: a step after the first compiled"
    );
    assert_eq!(stepper.steps(), STEPS);
    flat(&p)
}

#[test]
fn schedules_match_torch_lr_scheduler() {
    let cases: [(&str, Box<dyn Schedule>, &[f64; 20]); 6] = [
        ("constant", Box::new(0.1), &expected::LR_CONSTANT),
        (
            "step",
            Box::new(StepLr {
                base: 0.1,
                step_size: 5,
                gamma: 0.5,
            }),
            &expected::LR_STEP,
        ),
        (
            "exponential",
            Box::new(ExponentialLr {
                base: 0.1,
                gamma: 0.9,
            }),
            &expected::LR_EXPONENTIAL,
        ),
        (
            "cosine",
            Box::new(CosineAnnealingLr {
                base: 0.1,
                t_max: 10,
                eta_min: 0.001,
            }),
            &expected::LR_COSINE,
        ),
        (
            "linear_warmup",
            Box::new(LinearLr::warmup(0.1, 0.25, 5)),
            &expected::LR_LINEAR_WARMUP,
        ),
        (
            "one_cycle",
            Box::new(OneCycleLr::new(0.1, STEPS)),
            &expected::LR_ONE_CYCLE,
        ),
    ];
    for (what, schedule, want) in cases {
        let got: Vec<f64> = (0..STEPS).map(|k| schedule.lr(k)).collect();
        assert_close(what, &got, want, 1e-11);
    }
}

#[test]
fn sgd_matches_torch() {
    let got = train("sgd", Sgd::new(), 0.1);
    assert_close("sgd", &got, &expected::SGD, 1e-5);
}

#[test]
fn sgd_with_dampened_momentum_and_weight_decay_matches_torch() {
    let opt = Sgd::new().momentum(0.9).dampening(0.1).weight_decay(0.01);
    let got = train(
        "sgd momentum",
        opt,
        StepLr {
            base: 0.05,
            step_size: 5,
            gamma: 0.5,
        },
    );
    assert_close("sgd momentum", &got, &expected::SGD_MOMENTUM, 1e-5);
}

#[test]
fn sgd_nesterov_matches_torch() {
    let opt = Sgd::new().momentum(0.9).nesterov(true).weight_decay(0.01);
    let got = train(
        "sgd nesterov",
        opt,
        ExponentialLr {
            base: 0.05,
            gamma: 0.9,
        },
    );
    assert_close("sgd nesterov", &got, &expected::SGD_NESTEROV, 1e-5);
}

#[test]
fn adam_matches_torch() {
    let opt = Adam::new().weight_decay(0.01);
    let got = train(
        "adam",
        opt,
        CosineAnnealingLr {
            base: 0.05,
            t_max: 10,
            eta_min: 0.001,
        },
    );
    assert_close("adam", &got, &expected::ADAM, 1e-5);
}

#[test]
fn adam_amsgrad_matches_torch() {
    let opt = Adam::new().betas(0.8, 0.99).amsgrad(true);
    let got = train("amsgrad", opt, LinearLr::warmup(0.05, 0.25, 5));
    assert_close("amsgrad", &got, &expected::ADAM_AMSGRAD, 1e-5);
}

#[test]
fn adamw_matches_torch() {
    let opt = Adam::adamw().weight_decay(0.1);
    let got = train("adamw", opt, OneCycleLr::new(0.05, STEPS));
    assert_close("adamw", &got, &expected::ADAMW, 1e-5);
}

#[test]
fn rmsprop_matches_torch() {
    let got = train("rmsprop", RmsProp::new(), 0.01);
    assert_close("rmsprop", &got, &expected::RMSPROP, 1e-5);
}

#[test]
fn rmsprop_centered_with_momentum_matches_torch() {
    let opt = RmsProp::new()
        .alpha(0.9)
        .weight_decay(0.01)
        .momentum(0.5)
        .centered(true);
    let got = train(
        "rmsprop centered",
        opt,
        CosineAnnealingLr {
            base: 0.01,
            t_max: STEPS,
            eta_min: 0.0,
        },
    );
    assert_close("rmsprop centered", &got, &expected::RMSPROP_CENTERED, 1e-5);
}

#[test]
fn adagrad_matches_torch() {
    let opt = Adagrad::new()
        .lr_decay(0.01)
        .weight_decay(0.01)
        .initial_accumulator_value(0.1);
    let got = train(
        "adagrad",
        opt,
        StepLr {
            base: 0.1,
            step_size: 10,
            gamma: 0.5,
        },
    );
    assert_close("adagrad", &got, &expected::ADAGRAD, 1e-5);
}

#[test]
fn a_jitted_adam_step_replays_with_a_new_rate_each_step() {
    let _serial = serial();
    let (mut p, x, y) = problem();
    let adam = Adam::new().weight_decay(0.01);
    let mut state = adam.init(&p);
    let schedule = CosineAnnealingLr {
        base: 0.05,
        t_max: 10,
        eta_min: 0.001,
    };
    let step = jit!(move |p: &Linear, s: &AdamState<Linear>, lr: &Tensor| {
        let g = grad!(loss)(p, &x, &y);
        adam.update(&g, s, p, lr)
    });
    (p, state) = step(&p, &state, &schedule.value(0));
    let (plans, compiles) = (pipeline_counts().plans_made(), compiler_invocations());
    for k in 1..STEPS {
        (p, state) = step(&p, &state, &schedule.value(k));
    }
    assert_eq!(
        pipeline_counts().plans_made(),
        plans,
        "a jitted step after the first made a plan"
    );
    assert_eq!(
        compiler_invocations(),
        compiles,
        "a jitted step after the first compiled"
    );
    assert_close("jitted adam", &flat(&p), &expected::ADAM, 1e-5);
    assert_eq!(state.step.to_vec::<i32>().unwrap(), vec![STEPS as i32]);
}

#[test]
fn a_resumed_stepper_goes_on_from_the_state_step_count() {
    let _serial = serial();
    let (mut p, x, y) = problem();
    let opt = Adagrad::new()
        .lr_decay(0.01)
        .weight_decay(0.01)
        .initial_accumulator_value(0.1);
    let schedule = StepLr {
        base: 0.1,
        step_size: 10,
        gamma: 0.5,
    };
    let mut first = Stepper::new(opt, &p, schedule).unwrap();
    for _ in 0..12 {
        let g = grad!(loss)(&p, &x, &y);
        first.step(&mut p, &g).unwrap();
    }
    let mut second = Stepper::resume(opt, first.state().clone(), schedule).unwrap();
    assert_eq!(second.steps(), 12);
    assert_eq!(second.lr(), 0.05);
    for _ in 12..STEPS {
        let g = grad!(loss)(&p, &x, &y);
        second.step(&mut p, &g).unwrap();
    }
    assert_close("resumed adagrad", &flat(&p), &expected::ADAGRAD, 1e-5);
}

#[test]
fn clip_grad_norm_matches_torch() {
    let _serial = serial();
    let (p, x, y) = problem();
    let g = grad!(loss)(&p, &x, &y);
    let (clipped, total) = clip_grad_norm(&g, 0.5);
    let mut got = vec![f64::from(total.to_vec::<f32>().unwrap()[0])];
    got.extend(flat(&clipped));
    assert_close("clip_grad_norm", &got, &expected::CLIP_GRAD_NORM, 1e-5);
    // Under the bound, the gradients are kept (the scale clamps at 1).
    let (kept, _) = clip_grad_norm(&g, 100.0);
    assert_close(
        "clip_grad_norm under the bound",
        &flat(&kept),
        &flat(&g),
        1e-6,
    );
}

#[test]
fn misuse_panics_with_what_to_do() {
    let _serial = serial();
    let (p, _, _) = problem();
    let sgd = Sgd::new();
    let state = sgd.init(&p);
    let lr = Tensor::scalar(0.1f64);
    let wrong = Linear {
        w: p.b.clone(),
        b: p.b.clone(),
    };
    let message = common::panic_message(|| sgd.update(&wrong, &state, &p, &lr));
    assert!(
        message.contains("sgd: the gradient of params.w has shape [2]"),
        "{message}"
    );
    let message =
        common::panic_message(|| sgd.update(&p, &state, &p, &Tensor::from_vec(vec![0.1f32], &[1])));
    assert!(
        message.contains("the learning rate must be a 0-d float tensor"),
        "{message}"
    );
    let nesterov = Sgd::new().nesterov(true);
    let message = common::panic_message(|| nesterov.update(&p, &nesterov.init(&p), &p, &lr));
    assert!(
        message.contains("Nesterov momentum requires a momentum > 0"),
        "{message}"
    );
    let message = common::panic_message(|| OneCycleLr::new(0.1, 10).lr(11));
    assert!(
        message.contains("OneCycleLr: step 11 is past the 10 steps"),
        "{message}"
    );
    let message = common::panic_message(|| {
        Adam::new()
            .betas(1.0, 0.9)
            .update(&p, &Adam::new().init(&p), &p, &lr)
    });
    assert!(
        message.contains("adam: beta1 must be in [0, 1), got 1"),
        "{message}"
    );
}
