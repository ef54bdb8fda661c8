//! `torch.var_mean` and `torch.std_mean`: the spread and the mean of one reduction, with the
//! arguments of [`Tensor::var_with`] (axes, Bessel's `correction`, `keepdim`).

use super::Tensor;
use super::broadcast::{IntoAxes, resolve_axes};

impl Tensor {
    /// `(var, mean)` over `axes` (`torch.var_mean(x, dim, correction=..., keepdim=...)`): the
    /// variance as [`Tensor::var_with`] computes it (`correction = 1` is torch's default,
    /// `0` the population variance) and the mean, both in the float type.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let (var, mean) = x.var_mean(1, 1.0, false);
    /// assert_eq!(evaluate(&var.uop()).to_vec::<f32>(), vec![0.5, 0.5]);
    /// assert_eq!(evaluate(&mean.uop()).to_vec::<f32>(), vec![1.5, 3.5]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn var_mean(
        &self,
        axes: impl IntoAxes,
        correction: f64,
        keepdim: bool,
    ) -> (Tensor, Tensor) {
        let _op = super::op_scope::OpScope::enter("var_mean");
        let axes: Vec<isize> = resolve_axes("var_mean", axes, &self.shape())
            .into_iter()
            .map(|a| a as isize)
            .collect();
        let var = self.var_with(&axes, correction, keepdim);
        (var, self.mean(&axes, keepdim))
    }

    /// `(std, mean)` over `axes` (`torch.std_mean`): the square root of
    /// [`Tensor::var_mean`]'s variance, and the mean.
    ///
    /// # Panics
    ///
    /// Panics on an axis out of range or named twice.
    #[track_caller]
    pub fn std_mean(
        &self,
        axes: impl IntoAxes,
        correction: f64,
        keepdim: bool,
    ) -> (Tensor, Tensor) {
        let _op = super::op_scope::OpScope::enter("std_mean");
        let (var, mean) = self.var_mean(axes, correction, keepdim);
        (var.sqrt(), mean)
    }
}
