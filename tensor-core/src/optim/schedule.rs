//! Learning-rate schedules: torch.optim.lr_scheduler's formulas as functions of the step
//! (`lr(k)` is the rate of the `k`-th step, counting from 0, as a torch optimizer uses it
//! after `k` calls of `scheduler.step()`).
//!
//! A schedule runs on the host and gives an `f64`; [`Schedule::value`] makes it a 0-d tensor
//! bound at run time, which is what an optimizer's `update` takes, so a rate that changes
//! every step compiles nothing. Inside a traced function (`jit!`) a scalar is code: pass the
//! rate in as an argument of the jitted function instead of making it inside.
//!
//! Torch computes most schedules recursively from the previous rate (`get_lr`); these are the
//! closed forms (`_get_closed_form_lr`), equal in exact arithmetic.
//!
//! ```
//! use tensor_core::optim::schedule::{CosineAnnealingLr, Schedule, StepLr};
//! let step = StepLr { base: 0.1, step_size: 2, gamma: 0.5 };
//! assert_eq!((0..5).map(|k| step.lr(k)).collect::<Vec<_>>(), vec![0.1, 0.1, 0.05, 0.05, 0.025]);
//! let cosine = CosineAnnealingLr { base: 1.0, t_max: 4, eta_min: 0.0 };
//! assert!((cosine.lr(2) - 0.5).abs() < 1e-12 && cosine.lr(4).abs() < 1e-12);
//! let warm = |k: usize| 0.1 * (k as f64 + 1.0).min(10.0) / 10.0; // a closure is a schedule
//! assert_eq!(warm.lr(20), 0.1);
//! ```

use crate::tensor::Tensor;
use std::f64::consts::PI;

/// A learning rate per step.
pub trait Schedule: Send + Sync {
    /// The learning rate of step `step` (0 for the first step).
    fn lr(&self, step: usize) -> f64;

    /// [`Schedule::lr`] as a 0-d `f64` tensor: a value bound at run time when called outside
    /// a traced function.
    fn value(&self, step: usize) -> Tensor {
        Tensor::scalar(self.lr(step))
    }
}

/// A constant rate.
impl Schedule for f64 {
    fn lr(&self, _: usize) -> f64 {
        *self
    }
}

/// Any function of the step (`torch.optim.lr_scheduler.LambdaLR` with the base folded in).
impl<F: Fn(usize) -> f64 + Send + Sync> Schedule for F {
    fn lr(&self, step: usize) -> f64 {
        self(step)
    }
}

/// `torch.optim.lr_scheduler.StepLR`: `base * gamma^(k / step_size)` (integer division).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepLr {
    /// The rate of the first steps.
    pub base: f64,
    /// How many steps between decays.
    pub step_size: usize,
    /// The factor of each decay.
    pub gamma: f64,
}

impl Schedule for StepLr {
    #[track_caller]
    fn lr(&self, step: usize) -> f64 {
        if self.step_size == 0 {
            panic!("StepLr: step_size must be at least 1");
        }
        self.base * self.gamma.powi((step / self.step_size) as i32)
    }
}

/// `torch.optim.lr_scheduler.ExponentialLR`: `base * gamma^k`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExponentialLr {
    /// The rate of the first step.
    pub base: f64,
    /// The factor of each step.
    pub gamma: f64,
}

impl Schedule for ExponentialLr {
    fn lr(&self, step: usize) -> f64 {
        self.base * self.gamma.powi(step as i32)
    }
}

/// `torch.optim.lr_scheduler.CosineAnnealingLR`:
/// `eta_min + (base - eta_min) * (1 + cos(pi * k / t_max)) / 2` (rising again after `t_max`,
/// as torch's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineAnnealingLr {
    /// The rate of the first step.
    pub base: f64,
    /// The steps from `base` down to `eta_min`.
    pub t_max: usize,
    /// The lowest rate.
    pub eta_min: f64,
}

impl Schedule for CosineAnnealingLr {
    #[track_caller]
    fn lr(&self, step: usize) -> f64 {
        if self.t_max == 0 {
            panic!("CosineAnnealingLr: t_max must be at least 1");
        }
        let cos = (PI * step as f64 / self.t_max as f64).cos();
        self.eta_min + (self.base - self.eta_min) * (1.0 + cos) / 2.0
    }
}

/// `torch.optim.lr_scheduler.LinearLR`, the linear warm-up: the factor of `base` goes from
/// `start_factor` to `end_factor` over `total_iters` steps, then stays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearLr {
    /// The rate the factors multiply.
    pub base: f64,
    /// The factor of the first step (torch's default 1/3).
    pub start_factor: f64,
    /// The factor from step `total_iters` on (torch's default 1).
    pub end_factor: f64,
    /// The steps of the ramp (torch's default 5).
    pub total_iters: usize,
}

impl LinearLr {
    /// A warm-up from `base * start_factor` to `base` over `total_iters` steps.
    pub fn warmup(base: f64, start_factor: f64, total_iters: usize) -> LinearLr {
        LinearLr {
            base,
            start_factor,
            end_factor: 1.0,
            total_iters,
        }
    }
}

impl Schedule for LinearLr {
    fn lr(&self, step: usize) -> f64 {
        if self.total_iters == 0 {
            return self.base * self.end_factor;
        }
        let done = step.min(self.total_iters) as f64 / self.total_iters as f64;
        self.base * (self.start_factor + (self.end_factor - self.start_factor) * done)
    }
}

/// How [`OneCycleLr`] moves between its rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anneal {
    /// Half a cosine (torch's default `'cos'`).
    Cos,
    /// A straight line (`'linear'`).
    Linear,
}

/// `torch.optim.lr_scheduler.OneCycleLR` (the learning rate; torch's `cycle_momentum`, which
/// also cycles the momentum or Adam's `beta1`, has no counterpart: pass `cycle_momentum=False`
/// to compare). From `max_lr / div_factor` up to `max_lr` over the first `pct_start` of
/// `total_steps`, then down to `max_lr / div_factor / final_div_factor`; with `three_phase`,
/// back down to the initial rate first, symmetrically, then to the minimum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OneCycleLr {
    /// The highest rate.
    pub max_lr: f64,
    /// The steps of the cycle.
    pub total_steps: usize,
    /// The part of the cycle spent rising (torch's default 0.3).
    pub pct_start: f64,
    /// The initial rate is `max_lr / div_factor` (25).
    pub div_factor: f64,
    /// The final rate is the initial one over `final_div_factor` (1e4).
    pub final_div_factor: f64,
    /// Cosine or linear moves.
    pub anneal: Anneal,
    /// Three phases instead of two.
    pub three_phase: bool,
}

impl OneCycleLr {
    /// torch's defaults for `max_lr` and `total_steps`.
    pub fn new(max_lr: f64, total_steps: usize) -> OneCycleLr {
        OneCycleLr {
            max_lr,
            total_steps,
            pct_start: 0.3,
            div_factor: 25.0,
            final_div_factor: 1e4,
            anneal: Anneal::Cos,
            three_phase: false,
        }
    }

    /// The phases: each ends at a step (as a float, as torch's), going from one rate to
    /// another.
    fn phases(&self) -> Vec<(f64, f64, f64)> {
        let initial = self.max_lr / self.div_factor;
        let min = initial / self.final_div_factor;
        let (rise, last) = (
            self.pct_start * self.total_steps as f64 - 1.0,
            self.total_steps as f64 - 1.0,
        );
        if self.three_phase {
            let fall = 2.0 * self.pct_start * self.total_steps as f64 - 2.0;
            vec![
                (rise, initial, self.max_lr),
                (fall, self.max_lr, initial),
                (last, initial, min),
            ]
        } else {
            vec![(rise, initial, self.max_lr), (last, self.max_lr, min)]
        }
    }

    fn anneal(&self, from: f64, to: f64, pct: f64) -> f64 {
        match self.anneal {
            Anneal::Cos => to + (from - to) / 2.0 * ((PI * pct).cos() + 1.0),
            Anneal::Linear => (to - from) * pct + from,
        }
    }
}

impl Schedule for OneCycleLr {
    /// # Panics
    ///
    /// Past `total_steps`, as torch raises.
    #[track_caller]
    fn lr(&self, step: usize) -> f64 {
        if step > self.total_steps {
            panic!(
                "OneCycleLr: step {step} is past the {} steps of the cycle; make the cycle as long \
                 as the training (total_steps)",
                self.total_steps
            );
        }
        let phases = self.phases();
        let mut start = 0.0;
        let k = step as f64;
        for (i, &(end, from, to)) in phases.iter().enumerate() {
            if k <= end || i == phases.len() - 1 {
                return self.anneal(from, to, (k - start) / (end - start));
            }
            start = end;
        }
        unreachable!("the last phase returns")
    }
}
