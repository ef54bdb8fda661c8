//! Numerically stable normalizations over an axis. Each subtracts the (detached) maximum
//! before exponentiating: the results are invariant to that shift, so detaching it changes
//! no gradient and keeps autodiff from differentiating through `max`. Over an empty axis
//! there is no maximum: `softmax` and `log_softmax` are empty there and `logsumexp` is
//! `log 0 = -inf`, as in PyTorch.

use super::Tensor;
use super::broadcast::{IntoAxes, normalize_axis, resolve_axes};

impl Tensor {
    /// `e^x / sum(e^x)` along `axis`, computed as `e^(x - max x)` normalized, in the float type.
    /// A row of `-inf` only, or one holding `inf`, is NaN, as in PyTorch and JAX.
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType, interp::evaluate};
    /// let p = Tensor::from_vec(vec![0.0f32, 0.0, 1.0, 1.0], &[2, 2]).softmax(-1);
    /// assert_eq!(evaluate(&p.uop()).to_vec::<f32>(), vec![0.5; 4]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("softmax");
        let shifted = self.minus_detached_max("softmax", axis);
        let e = shifted.exp();
        e.div(e.sum(axis, true))
    }

    /// `log(softmax(x))` along `axis`, as `(x - max) - log(sum(e^(x - max)))`. A row of `-inf`
    /// only, or one holding `inf`, is NaN, as in PyTorch and JAX.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("log_softmax");
        let shifted = self.minus_detached_max("log_softmax", axis);
        shifted.sub(shifted.exp().sum(axis, true).log())
    }

    /// `log(sum(e^x))` over `axes`, as `max + log(sum(e^(x - max)))` where the maximum is
    /// finite and `log(sum(e^x))` where it is not, as PyTorch and SciPy: a row of `-inf` gives
    /// `-inf` (a fully masked row) and a row holding `inf` gives `inf`, not `inf - inf = NaN`.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn logsumexp(&self, axes: impl IntoAxes, keepdim: bool) -> Tensor {
        let _op = super::op_scope::OpScope::enter("logsumexp");
        let axes: Vec<isize> = resolve_axes("logsumexp", axes, &self.shape())
            .into_iter()
            .map(|a| a as isize)
            .collect();
        let x = self.cast(self.dtype().to_float());
        let shape = self.shape();
        if axes.iter().any(|&a| shape[a as usize] == 0) {
            return x.exp().sum(&axes, keepdim).log();
        }
        let peak = x.max(&axes, true).detach();
        let shift = peak.isfinite().where_(&peak, 0.0);
        let out = x.sub(&shift).exp().sum(&axes, true).log().add(&shift);
        if keepdim {
            return out;
        }
        let kept: Vec<usize> = (0..self.ndim() as isize)
            .filter(|a| !axes.contains(a))
            .map(|a| out.shape()[a as usize])
            .collect();
        out.reshape(&kept)
    }

    /// `x - max(x)` along `axis` (kept), in the float type, with the maximum detached; `x`
    /// itself when the axis is empty (nothing to shift). `op` names the caller in panics.
    #[track_caller]
    fn minus_detached_max(&self, op: &str, axis: isize) -> Tensor {
        let axis = normalize_axis(op, axis, &self.shape());
        let x = self.cast(self.dtype().to_float());
        if self.shape()[axis] == 0 {
            return x;
        }
        let m = x.max(axis, true).detach();
        x.sub(&m)
    }
}
