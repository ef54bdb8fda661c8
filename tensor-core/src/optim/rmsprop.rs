//! `torch.optim.RMSprop`: a running average of squared gradients, centered or not, with
//! momentum and L2 weight decay.

use super::Optimizer;
use super::leaves::{buffer, learning_rate, next_step, params_and_grads, rebuild, with_decay};
use super::state::{state_struct, zero_steps};
use crate::tensor::{OpScope, Tensor};
use crate::transform::tree::{Tree, tree_zeros_like};

/// `torch.optim.RMSprop` (defaults: alpha 0.99, eps 1e-8, no weight decay, no momentum, not
/// centered). For each parameter `p` with gradient `g`:
///
/// ```text
/// g = g + weight_decay * p
/// s = alpha * s + (1 - alpha) * g²
/// a = alpha * a + (1 - alpha) * g                 (centered)
/// d = sqrt(s - a²) + eps   if centered   else   sqrt(s) + eps
/// b = momentum * b + g / d;  p = p - lr * b       (momentum > 0)
/// p = p - lr * g / d                              (otherwise)
/// ```
///
/// ```
/// use tensor_core::Tensor;
/// use tensor_core::optim::{Optimizer, RmsProp};
/// # use tensor_core::interp::evaluate;
/// let p = Tensor::from_vec(vec![1.0f32], &[1]);
/// let rms = RmsProp::new().alpha(0.75);
/// let (p, _) = rms.update(&Tensor::from_vec(vec![2.0f32], &[1]), &rms.init(&p), &p, &Tensor::scalar(0.1f64));
/// let p = evaluate(&p.uop()).to_vec::<f32>()[0];
/// assert!((p - 0.8).abs() < 1e-6); // 1 - 0.1 * 2 / sqrt(0.25 * 4)
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmsProp {
    /// The decay of the running averages.
    pub alpha: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// The L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// The momentum factor (0: none).
    pub momentum: f64,
    /// Divide by an estimate of the gradient's variance rather than its second moment.
    pub centered: bool,
}

state_struct! {
    /// The state of [`RmsProp`], named as torch names it.
    RmsPropState {
        /// Steps taken.
        step: Tensor,
        /// The running average of squared gradients.
        square_avg: P,
        /// The momentum buffer (`None` without momentum).
        momentum_buffer: Option<P>,
        /// The running average of gradients (`None` unless centered).
        grad_avg: Option<P>,
    }
}

impl RmsProp {
    /// `torch.optim.RMSprop`'s defaults.
    pub fn new() -> RmsProp {
        RmsProp {
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
        }
    }

    /// With the decay `alpha`.
    pub fn alpha(self, alpha: f64) -> RmsProp {
        RmsProp { alpha, ..self }
    }

    /// With `eps` added to the denominator.
    pub fn eps(self, eps: f64) -> RmsProp {
        RmsProp { eps, ..self }
    }

    /// With L2 weight decay `weight_decay`.
    pub fn weight_decay(self, weight_decay: f64) -> RmsProp {
        RmsProp {
            weight_decay,
            ..self
        }
    }

    /// With momentum `momentum`.
    pub fn momentum(self, momentum: f64) -> RmsProp {
        RmsProp { momentum, ..self }
    }

    /// Centered or not.
    pub fn centered(self, centered: bool) -> RmsProp {
        RmsProp { centered, ..self }
    }

    /// Panics, as torch's constructor raises, on hyper-parameters it refuses.
    #[track_caller]
    fn check(&self) {
        let values = [
            ("alpha", self.alpha),
            ("eps", self.eps),
            ("weight_decay", self.weight_decay),
            ("momentum", self.momentum),
        ];
        if let Some((what, v)) = values.iter().find(|(_, v)| *v < 0.0) {
            panic!("rmsprop: {what} must be >= 0, got {v}");
        }
    }
}

impl Default for RmsProp {
    fn default() -> RmsProp {
        RmsProp::new()
    }
}

impl Optimizer for RmsProp {
    type State<P: Tree> = RmsPropState<P>;

    fn init<P: Tree>(&self, params: &P) -> RmsPropState<P> {
        let _op = OpScope::enter("rmsprop");
        RmsPropState {
            step: zero_steps(),
            square_avg: tree_zeros_like(params),
            momentum_buffer: (self.momentum > 0.0).then(|| tree_zeros_like(params)),
            grad_avg: self.centered.then(|| tree_zeros_like(params)),
        }
    }

    #[track_caller]
    fn update<P: Tree>(
        &self,
        grads: &P,
        state: &RmsPropState<P>,
        params: &P,
        lr: &Tensor,
    ) -> (P, RmsPropState<P>) {
        self.check();
        let _op = OpScope::enter("rmsprop");
        let lr = learning_rate("rmsprop", lr);
        let (def, ps, gs) = params_and_grads("rmsprop", params, grads);
        let (step, _) = next_step(&state.step);
        let squares = buffer(&state.square_avg);
        let momenta = state.momentum_buffer.as_ref().map(buffer);
        let averages = state.grad_avg.as_ref().map(buffer);
        let mut out: [Vec<Tensor>; 4] = Default::default();
        for (i, (p, g)) in ps.iter().zip(&gs).enumerate() {
            let g = with_decay(g, p, self.weight_decay);
            let s = &squares[i] * self.alpha + &(g.square() * (1.0 - self.alpha));
            let a = averages
                .as_ref()
                .map(|a| &a[i] * self.alpha + &(&g * (1.0 - self.alpha)));
            let d = match &a {
                Some(a) => (&s - &a.square()).sqrt() + self.eps,
                None => s.sqrt() + self.eps,
            };
            let lr = lr.cast(p.dtype());
            let b = momenta.as_ref().map(|b| &b[i] * self.momentum + &(&g / &d));
            let p = match &b {
                Some(b) => p - &(b * &lr),
                None => p - &(&g / &d * &lr),
            };
            out[0].push(p);
            out[1].push(s);
            out[2].extend(b);
            out[3].extend(a);
        }
        let [new_ps, new_ss, new_bs, new_as] = out;
        let state = RmsPropState {
            step,
            square_avg: rebuild(&def, new_ss),
            momentum_buffer: momenta.map(|_| rebuild(&def, new_bs)),
            grad_avg: averages.map(|_| rebuild(&def, new_as)),
        };
        (rebuild(&def, new_ps), state)
    }
}
