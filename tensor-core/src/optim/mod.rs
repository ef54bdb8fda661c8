//! Optimizers as pure functions of trees, with optax's shape and torch.optim's arithmetic.
//!
//! An [`Optimizer`] holds its hyper-parameters (momentum, betas, eps, weight decay) and no
//! state: [`Optimizer::init`] makes the state of a tree of parameters (a tree itself, shaped
//! like the parameters, named as torch names it: `exp_avg`, `exp_avg_sq`, `momentum_buffer`,
//! ..., with the step count `step`), and [`Optimizer::update`] maps gradients, state,
//! parameters and a learning rate to the new parameters and the new state. It builds a graph
//! and computes nothing, so it runs inside `jit!`, and the state is saved like any tree.
//!
//! The learning rate is a 0-d tensor argument, not a field, and the bias corrections
//! (`1 - beta^t`) and decays are computed in the graph from the state's step count: a
//! learning rate from a [`schedule`] that changes every step, and the step count, are values
//! bound at run time, so step 2 onwards replays the plan of step 1 and compiles nothing. The
//! hyper-parameters are code (constants of the graph), as the scalars of any library op.
//! The per-step scalars are computed in `f64` (torch computes them on the host in Python
//! floats), then cast to each parameter's dtype.
//!
//! | optimizer | torch | state |
//! |---|---|---|
//! | [`Sgd`] | `torch.optim.SGD` (momentum, dampening, Nesterov, weight decay) | [`SgdState`] |
//! | [`Adam`] | `torch.optim.Adam` (amsgrad, L2 weight decay) | [`AdamState`] |
//! | [`Adam::adamw`] | `torch.optim.AdamW` (decoupled weight decay) | [`AdamState`] |
//! | [`RmsProp`] | `torch.optim.RMSprop` (alpha, eps, centered, momentum) | [`RmsPropState`] |
//! | [`Adagrad`] | `torch.optim.Adagrad` (lr_decay, initial accumulator, eps) | [`AdagradState`] |
//!
//! [`clip_grad_norm`] is `torch.nn.utils.clip_grad_norm_` over a tree, and [`schedule`] has
//! torch.optim.lr_scheduler's schedules as functions of the step. The facade's
//! `tensor::optim::Stepper` holds an optimizer, its state and a schedule and updates realized
//! parameters in place, as a torch optimizer's `step()`.
//!
//! ```
//! use tensor_core::Tensor;
//! use tensor_core::optim::{Optimizer, Sgd};
//! # use tensor_core::interp::evaluate;
//! let params = (Tensor::from_vec(vec![1.0f32, 2.0], &[2]),);
//! let grads = (Tensor::from_vec(vec![0.5f32, -1.0], &[2]),);
//! let sgd = Sgd::new().momentum(0.9);
//! let state = sgd.init(&params);
//! let (params, _state) = sgd.update(&grads, &state, &params, &Tensor::scalar(0.1f64));
//! assert_eq!(evaluate(&params.0.uop()).to_vec::<f32>(), vec![0.95, 2.1]);
//! ```

mod adagrad;
mod adam;
mod clip;
mod leaves;
mod rmsprop;
pub mod schedule;
mod sgd;
mod state;

pub use adagrad::{Adagrad, AdagradState};
pub use adam::{Adam, AdamState};
pub use clip::clip_grad_norm;
pub use rmsprop::{RmsProp, RmsPropState};
pub use schedule::Schedule;
pub use sgd::{Sgd, SgdState};
pub use state::OptimizerState;

use crate::tensor::Tensor;
use crate::transform::tree::Tree;

/// A gradient-based optimizer: its state for a tree of parameters, and one update step as a
/// pure function (see the module docs).
pub trait Optimizer: Clone + Send + Sync + 'static {
    /// The state kept for parameters of type `P`: a tree holding the step count and buffers
    /// shaped like `P`.
    type State<P: Tree>: OptimizerState;

    /// The state before the first step (step count 0, buffers of zeros or the initial
    /// accumulator value).
    fn init<P: Tree>(&self, params: &P) -> Self::State<P>;

    /// One step: the new parameters and state from the gradients, the state and the
    /// parameters, with learning rate `lr` (a 0-d float tensor; pass a value made with
    /// `Tensor::scalar` outside any traced function, so that a new rate compiles nothing).
    ///
    /// # Panics
    ///
    /// When `grads` is not shaped like `params` (naming the path of the first difference), or
    /// `lr` is not a 0-d float tensor.
    fn update<P: Tree>(
        &self,
        grads: &P,
        state: &Self::State<P>,
        params: &P,
        lr: &Tensor,
    ) -> (P, Self::State<P>);
}
