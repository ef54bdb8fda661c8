//! `torch.optim.Adam` and `torch.optim.AdamW`: moment estimates with bias corrections, the
//! AMSGrad variant, and L2 or decoupled weight decay.

use super::Optimizer;
use super::leaves::{
    bias_correction, buffer, learning_rate, next_step, params_and_grads, rebuild, with_decay,
};
use super::state::{state_struct, zero_steps};
use crate::tensor::{OpScope, Tensor};
use crate::transform::tree::{Tree, tree_zeros_like};

/// `torch.optim.Adam` ([`Adam::new`]) and `torch.optim.AdamW` ([`Adam::adamw`]). For each
/// parameter `p` with gradient `g`, at step `t`:
///
/// ```text
/// p = p * (1 - lr * weight_decay)         (AdamW: decoupled decay)
/// g = g + weight_decay * p                (Adam: L2 penalty)
/// m = beta1 * m + (1 - beta1) * g
/// v = beta2 * v + (1 - beta2) * g²
/// v̂ = max(v̂, v)                           (amsgrad; v̂ is used below in place of v)
/// p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// ```
///
/// ```
/// use tensor_core::Tensor;
/// use tensor_core::optim::{Adam, Optimizer};
/// # use tensor_core::interp::evaluate;
/// let p = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
/// let adam = Adam::new();
/// let g = Tensor::from_vec(vec![0.3f32, -2.0], &[2]);
/// let (p, state) = adam.update(&g, &adam.init(&p), &p, &Tensor::scalar(0.1f64));
/// // The first step moves each parameter by lr against the gradient's sign.
/// let p = evaluate(&p.uop()).to_vec::<f32>();
/// assert!((p[0] - 0.9).abs() < 1e-6 && (p[1] + 0.9).abs() < 1e-6);
/// assert_eq!(evaluate(&state.step.uop()).to_vec::<i32>(), vec![1]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adam {
    /// The decay of the first moment estimate (torch's `betas[0]`, 0.9).
    pub beta1: f64,
    /// The decay of the second moment estimate (torch's `betas[1]`, 0.999).
    pub beta2: f64,
    /// Added to the denominator (1e-8).
    pub eps: f64,
    /// The weight decay: an L2 penalty for Adam (0), decoupled for AdamW (0.01).
    pub weight_decay: f64,
    /// The AMSGrad variant: the running maximum of the second moment.
    pub amsgrad: bool,
    /// Decoupled weight decay (AdamW).
    pub decoupled: bool,
}

state_struct! {
    /// The state of [`Adam`]: the step count and the moment estimates, shaped like the
    /// parameters and named as torch names them.
    AdamState {
        /// Steps taken.
        step: Tensor,
        /// The first moment estimate.
        exp_avg: P,
        /// The second moment estimate.
        exp_avg_sq: P,
        /// The running maximum of `exp_avg_sq` (`None` without amsgrad).
        max_exp_avg_sq: Option<P>,
    }
}

impl Adam {
    /// `torch.optim.Adam`'s defaults: betas (0.9, 0.999), eps 1e-8, no weight decay.
    pub fn new() -> Adam {
        Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            decoupled: false,
        }
    }

    /// `torch.optim.AdamW`'s defaults: Adam's, with decoupled weight decay 0.01.
    pub fn adamw() -> Adam {
        Adam {
            weight_decay: 0.01,
            decoupled: true,
            ..Adam::new()
        }
    }

    /// With the decays `(beta1, beta2)`.
    pub fn betas(self, beta1: f64, beta2: f64) -> Adam {
        Adam {
            beta1,
            beta2,
            ..self
        }
    }

    /// With `eps` added to the denominator.
    pub fn eps(self, eps: f64) -> Adam {
        Adam { eps, ..self }
    }

    /// With weight decay `weight_decay` (L2 for Adam, decoupled for AdamW).
    pub fn weight_decay(self, weight_decay: f64) -> Adam {
        Adam {
            weight_decay,
            ..self
        }
    }

    /// With or without AMSGrad.
    pub fn amsgrad(self, amsgrad: bool) -> Adam {
        Adam { amsgrad, ..self }
    }

    /// Panics, as torch's constructor raises, on hyper-parameters it refuses.
    #[track_caller]
    fn check(&self) {
        let name = self.name();
        for (what, beta) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&beta) {
                panic!("{name}: {what} must be in [0, 1), got {beta}");
            }
        }
        if self.eps < 0.0 || self.weight_decay < 0.0 {
            panic!(
                "{name}: eps ({}) and weight_decay ({}) must be >= 0",
                self.eps, self.weight_decay
            );
        }
    }

    fn name(&self) -> &'static str {
        if self.decoupled { "adamw" } else { "adam" }
    }
}

impl Default for Adam {
    fn default() -> Adam {
        Adam::new()
    }
}

/// The per-step scalars of Adam (0-d `f64` tensors): `lr / (1 - beta1^t)` and
/// `sqrt(1 - beta2^t)`.
struct Corrections {
    step_size: Tensor,
    bias_correction2_sqrt: Tensor,
}

impl Optimizer for Adam {
    type State<P: Tree> = AdamState<P>;

    fn init<P: Tree>(&self, params: &P) -> AdamState<P> {
        let _op = OpScope::enter(self.name());
        AdamState {
            step: zero_steps(),
            exp_avg: tree_zeros_like(params),
            exp_avg_sq: tree_zeros_like(params),
            max_exp_avg_sq: self.amsgrad.then(|| tree_zeros_like(params)),
        }
    }

    #[track_caller]
    fn update<P: Tree>(
        &self,
        grads: &P,
        state: &AdamState<P>,
        params: &P,
        lr: &Tensor,
    ) -> (P, AdamState<P>) {
        self.check();
        let name = self.name();
        let _op = OpScope::enter(name);
        let lr = learning_rate(name, lr);
        let (def, ps, gs) = params_and_grads(name, params, grads);
        let (step, t64) = next_step(&state.step);
        let c = Corrections {
            step_size: &lr / &bias_correction(self.beta1, &t64),
            bias_correction2_sqrt: bias_correction(self.beta2, &t64).sqrt(),
        };
        let (ms, vs) = (buffer(&state.exp_avg), buffer(&state.exp_avg_sq));
        let maxes = state.max_exp_avg_sq.as_ref().map(buffer);
        let mut out: [Vec<Tensor>; 4] = Default::default();
        for (i, (p, g)) in ps.iter().zip(&gs).enumerate() {
            let max = maxes.as_ref().map(|m| &m[i]);
            let leaf = self.leaf(p, g, &ms[i], &vs[i], max, &lr, &c);
            for (o, t) in out.iter_mut().zip(leaf) {
                o.extend(t);
            }
        }
        let [new_ps, new_ms, new_vs, new_maxes] = out;
        let state = AdamState {
            step,
            exp_avg: rebuild(&def, new_ms),
            exp_avg_sq: rebuild(&def, new_vs),
            max_exp_avg_sq: maxes.map(|_| rebuild(&def, new_maxes)),
        };
        (rebuild(&def, new_ps), state)
    }
}

impl Adam {
    /// One parameter's step: its new value, first and second moments, and running maximum.
    #[allow(clippy::too_many_arguments)]
    fn leaf(
        &self,
        p: &Tensor,
        g: &Tensor,
        m: &Tensor,
        v: &Tensor,
        max: Option<&Tensor>,
        lr: &Tensor,
        c: &Corrections,
    ) -> [Option<Tensor>; 4] {
        let dtype = p.dtype();
        let (p, g) = if self.decoupled {
            let keep = (1.0 - &(lr * self.weight_decay)).cast(dtype);
            (p * &keep, g.clone())
        } else {
            (p.clone(), with_decay(g, p, self.weight_decay))
        };
        let m = m * self.beta1 + &(&g * (1.0 - self.beta1));
        let v = v * self.beta2 + &(g.square() * (1.0 - self.beta2));
        let max = max.map(|max| max.maximum(&v));
        let second = max.as_ref().unwrap_or(&v);
        let denom = second.sqrt() / &c.bias_correction2_sqrt.cast(dtype) + self.eps;
        let p = &p - &(&m / &denom * &c.step_size.cast(dtype));
        [Some(p), Some(m), Some(v), max]
    }
}
