//! `torch.nn.functional`'s normalizations over an axis that `softmax` (in `nn.rs`) does not
//! cover: `softmin` and `normalize` (division by a `p`-norm clamped below by `eps`).

use super::Tensor;
use super::broadcast::{Operand, normalize_axis};
use super::value::user_operand;

impl Tensor {
    /// `softmax(-x)` along `axis` (`torch.nn.functional.softmin`), in the float type.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let p = Tensor::from_vec(vec![0.0f32, 2.0f32.ln()], &[2]).softmin(0);
    /// let p = evaluate(&p.uop()).to_vec::<f32>();
    /// assert!((p[0] - 2.0 / 3.0).abs() < 1e-6 && (p[1] - 1.0 / 3.0).abs() < 1e-6);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn softmin(&self, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("softmin");
        self.cast(self.dtype().to_float()).neg().softmax(axis)
    }

    /// `x / max(‖x‖_p, eps)` along `axis` (`torch.nn.functional.normalize`; torch's defaults
    /// are `p = 2`, `axis = 1`, `eps = 1e-12`), in the float type. `p` is any order
    /// [`Tensor::norm`] takes. A row of zeros stays zeros and its gradient is `1/eps` times the
    /// incoming one, as torch's (the norm is not differentiated where it is zero).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![3.0f32, -4.0, 0.0, 0.0], &[2, 2]);
    /// let y = evaluate(&x.normalize(2.0, 1, 1e-12).uop()).to_vec::<f32>();
    /// assert_eq!(y, vec![0.6, -0.8, 0.0, 0.0]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range.
    #[track_caller]
    pub fn normalize(&self, p: f64, axis: isize, eps: f64) -> Tensor {
        let _op = super::op_scope::OpScope::enter("normalize");
        let axis = normalize_axis("normalize", axis, &self.shape()) as isize;
        let x = self.cast(self.dtype().to_float());
        let norm = p_norm_differentiable_at_zero(&x, p, axis);
        let eps = match user_operand(Operand::from(eps), &x) {
            Operand::Tensor(t) => t,
            Operand::Scalar(_) => unreachable!("user_operand makes every scalar a tensor"),
        };
        &x / norm.maximum(&eps)
    }
}

/// `‖x‖_p` along `axis` (kept) whose derivative is finite where the norm is zero: the root of
/// `Σ|x|^p` (`p` not 0, 1 or ±inf) is taken of 1 there and replaced by 0, so no `0 · inf`
/// reaches the gradient of a zero row.
fn p_norm_differentiable_at_zero(x: &Tensor, p: f64, axis: isize) -> Tensor {
    if p == 0.0 || p == 1.0 || p.is_infinite() {
        return x.norm(p, axis, true);
    }
    let a = x.abs();
    let total = if p == 2.0 { a.square() } else { a.pow(p) }.sum(axis, true);
    let positive = total.gt(0.0);
    let safe = positive.where_(&total, 1.0);
    let root = if p == 2.0 {
        safe.sqrt()
    } else {
        safe.pow(1.0 / p)
    };
    positive.where_(root, 0.0)
}
