//! `torch.optim.Adagrad`: steps divided by the root of the sum of squared gradients, with a
//! decaying learning rate and L2 weight decay.

use super::Optimizer;
use super::leaves::{buffer, learning_rate, next_step, params_and_grads, rebuild, with_decay};
use super::state::{state_struct, zero_steps};
use crate::tensor::{OpScope, Tensor};
use crate::transform::tree::{Tree, tree_map};

/// `torch.optim.Adagrad` (defaults: lr_decay 0, no weight decay, initial accumulator 0, eps
/// 1e-10). For each parameter `p` with gradient `g`, at step `t`:
///
/// ```text
/// g = g + weight_decay * p
/// s = s + g²                                  (s starts at initial_accumulator_value)
/// p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)
/// ```
///
/// ```
/// use tensor_core::Tensor;
/// use tensor_core::optim::{Adagrad, Optimizer};
/// # use tensor_core::interp::evaluate;
/// let p = Tensor::from_vec(vec![1.0f32], &[1]);
/// let ada = Adagrad::new().initial_accumulator_value(5.0);
/// let (p, _) = ada.update(&Tensor::from_vec(vec![2.0f32], &[1]), &ada.init(&p), &p, &Tensor::scalar(0.3f64));
/// let p = evaluate(&p.uop()).to_vec::<f32>()[0];
/// assert!((p - 0.8).abs() < 1e-6); // 1 - 0.3 * 2 / sqrt(5 + 4)
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adagrad {
    /// The decay of the learning rate with the step count.
    pub lr_decay: f64,
    /// The L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// The starting value of the sum of squared gradients.
    pub initial_accumulator_value: f64,
    /// Added to the denominator.
    pub eps: f64,
}

state_struct! {
    /// The state of [`Adagrad`], named as torch names it.
    AdagradState {
        /// Steps taken.
        step: Tensor,
        /// The sum of squared gradients.
        sum: P,
    }
}

impl Adagrad {
    /// `torch.optim.Adagrad`'s defaults.
    pub fn new() -> Adagrad {
        Adagrad {
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
        }
    }

    /// With the learning-rate decay `lr_decay`.
    pub fn lr_decay(self, lr_decay: f64) -> Adagrad {
        Adagrad { lr_decay, ..self }
    }

    /// With L2 weight decay `weight_decay`.
    pub fn weight_decay(self, weight_decay: f64) -> Adagrad {
        Adagrad {
            weight_decay,
            ..self
        }
    }

    /// With the sum of squared gradients starting at `value`.
    pub fn initial_accumulator_value(self, value: f64) -> Adagrad {
        Adagrad {
            initial_accumulator_value: value,
            ..self
        }
    }

    /// With `eps` added to the denominator.
    pub fn eps(self, eps: f64) -> Adagrad {
        Adagrad { eps, ..self }
    }

    /// Panics, as torch's constructor raises, on hyper-parameters it refuses.
    #[track_caller]
    fn check(&self) {
        let values = [
            ("lr_decay", self.lr_decay),
            ("weight_decay", self.weight_decay),
            ("initial_accumulator_value", self.initial_accumulator_value),
            ("eps", self.eps),
        ];
        if let Some((what, v)) = values.iter().find(|(_, v)| *v < 0.0) {
            panic!("adagrad: {what} must be >= 0, got {v}");
        }
    }
}

impl Default for Adagrad {
    fn default() -> Adagrad {
        Adagrad::new()
    }
}

impl Optimizer for Adagrad {
    type State<P: Tree> = AdagradState<P>;

    fn init<P: Tree>(&self, params: &P) -> AdagradState<P> {
        let _op = OpScope::enter("adagrad");
        AdagradState {
            step: zero_steps(),
            sum: tree_map(params, |p| p.full_like(self.initial_accumulator_value)),
        }
    }

    #[track_caller]
    fn update<P: Tree>(
        &self,
        grads: &P,
        state: &AdagradState<P>,
        params: &P,
        lr: &Tensor,
    ) -> (P, AdagradState<P>) {
        self.check();
        let _op = OpScope::enter("adagrad");
        let lr = learning_rate("adagrad", lr);
        let (def, ps, gs) = params_and_grads("adagrad", params, grads);
        let (step, t64) = next_step(&state.step);
        let clr = &lr / &((t64 - 1.0) * self.lr_decay + 1.0);
        let sums = buffer(&state.sum);
        let (mut new_ps, mut new_ss) = (Vec::new(), Vec::new());
        for (i, (p, g)) in ps.iter().zip(&gs).enumerate() {
            let g = with_decay(g, p, self.weight_decay);
            let s = &sums[i] + &g.square();
            let std = s.sqrt() + self.eps;
            new_ps.push(p - &(&g / &std * &clr.cast(p.dtype())));
            new_ss.push(s);
        }
        let state = AdagradState {
            step,
            sum: rebuild(&def, new_ss),
        };
        (rebuild(&def, new_ps), state)
    }
}
