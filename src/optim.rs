//! Optimizers, gradient clipping and learning-rate schedules with torch.optim's arithmetic
//! (the pure functions of `tensor_core::optim`, re-exported), and [`Stepper`]: an optimizer
//! with its state and schedule that updates realized parameters in place, as a torch
//! optimizer's `step()`.
//!
//! Two ways to train:
//!
//! - [`Stepper::step`] (eager): each step builds the update's graph, with the learning rate of
//!   the schedule as a value bound at run time, and realizes the new parameters and state in
//!   one plan. Step 2 onwards replays the plan of step 1 and compiles nothing.
//! - [`Optimizer::update`] inside `jit!` (optax's style): the state is a tree, so the jitted
//!   step takes and returns it, and the learning rate is an argument:
//!
//! ```
//! use tensor::prelude::*;
//! use tensor::optim::{Adam, Optimizer, Schedule, schedule::CosineAnnealingLr};
//!
//! #[derive(Clone, Tree)]
//! struct Line { w: Tensor, b: Tensor }
//! let loss = |p: &Line, x: &Tensor, y: &Tensor| (x * &p.w + &p.b - y).square().mean_all();
//! let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0], &[4]);
//! let y = Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 7.0], &[4]);
//! let mut p = Line { w: Tensor::scalar(0.0f32), b: Tensor::scalar(0.0f32) };
//!
//! let adam = Adam::new();
//! let mut state = adam.init(&p);
//! let sched = CosineAnnealingLr { base: 0.1, t_max: 200, eta_min: 0.0 };
//! let train_step = jit!(move |p: &Line, s: &tensor::optim::AdamState<Line>, lr: &Tensor| {
//!     let g = grad!(loss)(p, &x, &y);
//!     adam.update(&g, s, p, lr)
//! });
//! for k in 0..200 {
//!     (p, state) = train_step(&p, &state, &sched.value(k)); // the rate is an argument
//! }
//! let w = p.w.to_vec::<f32>().unwrap()[0];
//! assert!((w - 2.0).abs() < 0.1, "{w}");
//! ```

pub use tensor_core::optim::*;

use crate::Tensor;
use std::collections::HashSet;
use tensor_core::transform::tree::{Tree, tree_leaves, tree_unflatten};
use tensor_runtime::realize::{read_bytes, realize_tree};
use tensor_runtime::{Result, RuntimeError};

/// An optimizer, its state for parameters of type `P`, and a learning-rate schedule: torch's
/// `optimizer.step(); scheduler.step()` as one call that updates realized parameters in
/// place.
///
/// ```
/// use tensor::prelude::*;
/// use tensor::optim::{Sgd, Stepper, schedule::StepLr};
///
/// let mut p = (Tensor::from_vec(vec![1.0f32, -2.0], &[2]),);
/// let mut opt = Stepper::new(Sgd::new(), &p, StepLr { base: 0.5, step_size: 1, gamma: 0.5 }).unwrap();
/// for _ in 0..2 {
///     let g = grad!(|p: &(Tensor,)| p.0.square().sum_all() * 0.5)(&p); // g = p
///     opt.step(&mut p, &g).unwrap();
/// }
/// // p * (1 - 0.5) * (1 - 0.25)
/// assert_eq!(p.0.to_vec::<f32>().unwrap(), vec![0.375, -0.75]);
/// assert_eq!(opt.steps(), 2);
/// ```
pub struct Stepper<O: Optimizer, P: Tree> {
    optimizer: O,
    state: O::State<P>,
    schedule: Box<dyn Schedule>,
    steps: usize,
}

impl<O: Optimizer, P: Tree> Stepper<O, P> {
    /// `optimizer` for `params`, from its initial state, with learning rate `schedule` (an
    /// `f64` for a constant rate). The state is realized, so that the first step reads
    /// buffers as every later one does.
    pub fn new(optimizer: O, params: &P, schedule: impl Schedule + 'static) -> Result<Self> {
        let state = optimizer.init(params);
        Stepper::resume(optimizer, state, schedule)
    }

    /// `optimizer` from a saved `state` (say one a checkpoint loaded): the schedule goes on
    /// from the state's step count.
    pub fn resume(
        optimizer: O,
        state: O::State<P>,
        schedule: impl Schedule + 'static,
    ) -> Result<Self> {
        let state = distinct_buffers(state)?;
        let steps = steps_of(state.step_count())?;
        Ok(Stepper {
            optimizer,
            state,
            schedule: Box::new(schedule),
            steps,
        })
    }

    /// One step: `params` replaced by the updated parameters from `grads` at the schedule's
    /// current rate, computed together with the new state.
    pub fn step(&mut self, params: &mut P, grads: &P) -> Result<()> {
        let lr = self.schedule.value(self.steps);
        let (new_params, new_state) = self.optimizer.update(grads, &self.state, params, &lr);
        let both = (new_params, new_state);
        realize_tree(&both)?;
        (*params, self.state) = both;
        self.steps += 1;
        Ok(())
    }

    /// The learning rate the next step uses.
    pub fn lr(&self) -> f64 {
        self.schedule.lr(self.steps)
    }

    /// The steps taken.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The optimizer's state (a tree: save it with `tensor::checkpoint::save`).
    pub fn state(&self) -> &O::State<P> {
        &self.state
    }

    /// The optimizer.
    pub fn optimizer(&self) -> &O {
        &self.optimizer
    }
}

/// `tree` realized, each leaf in a buffer of its own: the zeros of two moments of one shape
/// are one graph, so they are computed into one buffer, and a first step that read it twice
/// would be another plan than the later steps, which read two buffers.
fn distinct_buffers<T: Tree>(tree: T) -> Result<T> {
    realize_tree(&tree)?;
    let mut seen = HashSet::new();
    let mut leaves = Vec::new();
    for leaf in tree_leaves(&tree) {
        if seen.insert(leaf.uop()) {
            leaves.push(leaf);
        } else {
            let bytes = read_bytes(&leaf)?;
            leaves.push(Tensor::from_bytes(bytes, leaf.dtype(), &leaf.shape()));
        }
    }
    Ok(tree_unflatten(&tree.structure(), leaves))
}

/// The step count held in a 0-d `i32` tensor.
fn steps_of(step: &Tensor) -> Result<usize> {
    let bytes = read_bytes(step)?;
    let count = <[u8; 4]>::try_from(bytes.as_slice())
        .map(i32::from_le_bytes)
        .map_err(|_| bad_step(step))?;
    usize::try_from(count).map_err(|_| bad_step(step))
}

fn bad_step(step: &Tensor) -> RuntimeError {
    RuntimeError::InvalidArgument(format!(
        "Stepper::resume: the state's step count must be a non-negative 0-d i32 tensor, got \
         {}{:?}; pass a state made by the optimizer's init or loaded from its checkpoint",
        step.dtype(),
        step.shape()
    ))
}
