//! `torch.optim.SGD`: stochastic gradient descent with momentum, dampening, Nesterov momentum
//! and L2 weight decay.

use super::Optimizer;
use super::leaves::{buffer, learning_rate, next_step, params_and_grads, rebuild, with_decay};
use super::state::{state_struct, zero_steps};
use crate::tensor::{OpScope, Tensor};
use crate::transform::tree::{Tree, tree_zeros_like};

/// `torch.optim.SGD` (defaults: no momentum, no dampening, no Nesterov, no weight decay).
/// For each parameter `p` with gradient `g`, at step `t`:
///
/// ```text
/// g = g + weight_decay * p
/// b = g                                         (t = 1)
/// b = momentum * b + (1 - dampening) * g        (t > 1)
/// g = g + momentum * b   if nesterov   else   b     (with momentum)
/// p = p - lr * g
/// ```
///
/// ```
/// use tensor_core::Tensor;
/// use tensor_core::optim::{Optimizer, Sgd};
/// # use tensor_core::interp::evaluate;
/// let p = Tensor::from_vec(vec![1.0f32], &[1]);
/// let sgd = Sgd::new().weight_decay(0.5);
/// let (p, _) = sgd.update(&Tensor::from_vec(vec![2.0f32], &[1]), &sgd.init(&p), &p, &Tensor::scalar(0.1f64));
/// assert_eq!(evaluate(&p.uop()).to_vec::<f32>(), vec![0.75]); // 1 - 0.1 * (2 + 0.5 * 1)
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sgd {
    /// The momentum factor (0: none).
    pub momentum: f64,
    /// The dampening of the momentum (not applied at the first step, as torch).
    pub dampening: f64,
    /// Nesterov momentum (needs `momentum > 0` and `dampening == 0`).
    pub nesterov: bool,
    /// The L2 penalty added to the gradient.
    pub weight_decay: f64,
}

state_struct! {
    /// The state of [`Sgd`]: the step count and, with momentum, one buffer per parameter.
    SgdState {
        /// Steps taken.
        step: Tensor,
        /// torch's `momentum_buffer`, shaped like the parameters (`None` without momentum).
        momentum_buffer: Option<P>,
    }
}

impl Sgd {
    /// Plain SGD: no momentum, no dampening, no weight decay.
    pub fn new() -> Sgd {
        Sgd {
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }

    /// With momentum `momentum`.
    pub fn momentum(self, momentum: f64) -> Sgd {
        Sgd { momentum, ..self }
    }

    /// With dampening `dampening` of the momentum.
    pub fn dampening(self, dampening: f64) -> Sgd {
        Sgd { dampening, ..self }
    }

    /// With Nesterov momentum.
    pub fn nesterov(self, nesterov: bool) -> Sgd {
        Sgd { nesterov, ..self }
    }

    /// With L2 weight decay `weight_decay`.
    pub fn weight_decay(self, weight_decay: f64) -> Sgd {
        Sgd {
            weight_decay,
            ..self
        }
    }

    /// Panics, as torch's constructor raises, on hyper-parameters it refuses.
    #[track_caller]
    fn check(&self) {
        if self.momentum < 0.0 || self.weight_decay < 0.0 {
            panic!(
                "sgd: momentum ({}) and weight_decay ({}) must be >= 0",
                self.momentum, self.weight_decay
            );
        }
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            panic!(
                "sgd: Nesterov momentum requires a momentum > 0 and zero dampening (momentum {}, \
                 dampening {})",
                self.momentum, self.dampening
            );
        }
    }

    /// The new momentum buffer: `g` at the first step, else the damped running sum.
    fn momentum_step(&self, b: &Tensor, g: &Tensor, first: &Tensor) -> Tensor {
        let decayed = b * self.momentum;
        if self.dampening == 0.0 {
            // The buffer starts at zero, so the first step's `momentum * 0 + g` is `g`.
            return decayed + g;
        }
        let weight = first.where_(1.0, 1.0 - self.dampening).cast(g.dtype());
        decayed + g * weight
    }
}

impl Default for Sgd {
    fn default() -> Sgd {
        Sgd::new()
    }
}

impl Optimizer for Sgd {
    type State<P: Tree> = SgdState<P>;

    fn init<P: Tree>(&self, params: &P) -> SgdState<P> {
        let _op = OpScope::enter("sgd");
        SgdState {
            step: zero_steps(),
            momentum_buffer: (self.momentum != 0.0).then(|| tree_zeros_like(params)),
        }
    }

    #[track_caller]
    fn update<P: Tree>(
        &self,
        grads: &P,
        state: &SgdState<P>,
        params: &P,
        lr: &Tensor,
    ) -> (P, SgdState<P>) {
        self.check();
        let _op = OpScope::enter("sgd");
        let lr = learning_rate("sgd", lr);
        let (def, ps, gs) = params_and_grads("sgd", params, grads);
        let (step, _) = next_step(&state.step);
        let first = state.step.eq(0);
        let buffers = state.momentum_buffer.as_ref().map(buffer);
        let (mut new_ps, mut new_bs) = (Vec::new(), Vec::new());
        for (i, (p, g)) in ps.iter().zip(&gs).enumerate() {
            let mut g = with_decay(g, p, self.weight_decay);
            if let Some(bs) = &buffers {
                let b = self.momentum_step(&bs[i], &g, &first);
                g = if self.nesterov {
                    g + &(&b * self.momentum)
                } else {
                    b.clone()
                };
                new_bs.push(b);
            }
            new_ps.push(p - &(g * lr.cast(p.dtype())));
        }
        let momentum_buffer = buffers.map(|_| rebuild(&def, new_bs));
        let state = SgdState {
            step,
            momentum_buffer,
        };
        (rebuild(&def, new_ps), state)
    }
}
