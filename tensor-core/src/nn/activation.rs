//! Activations under their usual names, and `erf`/`erfc`.

use crate::tensor::{OpScope, Tensor};

/// `min(max(x, 0), 6)`.
pub fn relu6(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("relu6");
    x.clamp(0.0, 6.0)
}

/// `x` where positive, else `negative_slope * x` (torch's default slope is 0.01).
pub fn leaky_relu(x: &Tensor, negative_slope: f64) -> Tensor {
    let _op = OpScope::enter("leaky_relu");
    x.gt(0.0).where_(x, x.mul(negative_slope))
}

/// `x` where positive, else `alpha * (e^x - 1)` (by `expm1`, accurate for tiny `x`).
pub fn elu(x: &Tensor, alpha: f64) -> Tensor {
    let _op = OpScope::enter("elu");
    negative_branch(x, |n| n.expm1().mul(alpha))
}

/// `x` where `x > 0`, else `f(x)`; `f` sees 0 where `x > 0`, so no overflow of the unused
/// branch reaches the gradient.
fn negative_branch(x: &Tensor, f: impl Fn(&Tensor) -> Tensor) -> Tensor {
    let positive = x.gt(0.0);
    positive.where_(x, f(&positive.where_(0.0, x)))
}

/// Scaled ELU with the constants of Klambauer et al.
pub fn selu(x: &Tensor) -> Tensor {
    const ALPHA: f64 = 1.673_263_242_354_377_3;
    const SCALE: f64 = 1.050_700_987_355_480_5;
    let _op = OpScope::enter("selu");
    elu(x, ALPHA).mul(SCALE)
}

/// `max(0, x) + min(0, alpha * (e^(x / alpha) - 1))` (by `expm1`).
pub fn celu(x: &Tensor, alpha: f64) -> Tensor {
    let _op = OpScope::enter("celu");
    negative_branch(x, |n| n.div(alpha).expm1().mul(alpha))
}

/// Which form of GELU to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gelu {
    /// `x · Φ(x)` with the exact normal CDF (through [`erf`]); torch's `approximate="none"`.
    Exact,
    /// `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`; torch's `approximate="tanh"`.
    Tanh,
}

/// The Gaussian error linear unit.
pub fn gelu(x: &Tensor, approximate: Gelu) -> Tensor {
    let _op = OpScope::enter("gelu");
    match approximate {
        Gelu::Exact => x
            .mul(0.5)
            .mul(erf(&x.mul(std::f64::consts::FRAC_1_SQRT_2)).add(1.0)),
        Gelu::Tanh => {
            let k = (2.0 / std::f64::consts::PI).sqrt();
            let inner = x.add(x.mul(x).mul(x).mul(0.044715)).mul(k);
            x.mul(0.5).mul(inner.tanh().add(1.0))
        }
    }
}

/// `x · sigmoid(x)` (also called swish).
pub fn silu(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("silu");
    x.mul(x.sigmoid())
}

/// `x · sigmoid(1.702 x)`, the sigmoid approximation of GELU (CLIP's `QuickGELU`).
pub fn quick_gelu(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("quick_gelu");
    x.mul(x.mul(1.702).sigmoid())
}

/// `x · tanh(softplus(x))`.
pub fn mish(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("mish");
    x.mul(softplus(x, 1.0, 20.0).tanh())
}

/// `log(1 + e^(beta x)) / beta`, and `x` itself where `beta x > threshold` (torch's defaults:
/// beta 1, threshold 20). Computed as `max(y, 0) + log(1 + e^(-|y|))` so it never overflows.
pub fn softplus(x: &Tensor, beta: f64, threshold: f64) -> Tensor {
    let _op = OpScope::enter("softplus");
    let y = x.mul(beta);
    let smooth = y
        .maximum(0.0)
        .add(y.abs().neg().exp().add(1.0).log())
        .div(beta);
    y.gt(threshold).where_(x, smooth)
}

/// `x / (1 + |x|)`.
pub fn softsign(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("softsign");
    x.div(x.abs().add(1.0))
}

/// `x` clamped to `[min_val, max_val]` (torch's defaults: -1, 1).
pub fn hardtanh(x: &Tensor, min_val: f64, max_val: f64) -> Tensor {
    let _op = OpScope::enter("hardtanh");
    x.clamp(min_val, max_val)
}

/// `clamp(x / 6 + 1/2, 0, 1)`.
pub fn hardsigmoid(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("hardsigmoid");
    x.div(6.0).add(0.5).clamp(0.0, 1.0)
}

/// `x · hardsigmoid(x)`.
pub fn hardswish(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("hardswish");
    x.mul(hardsigmoid(x))
}

/// `log(sigmoid(x))`, as `min(x, 0) - log(1 + e^(-|x|))` (finite for every finite `x`).
pub fn logsigmoid(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("logsigmoid");
    x.minimum(0.0).sub(x.abs().neg().exp().add(1.0).log())
}

/// The error function ([`Tensor::erf`], the op `Erf`: within 3 ulp in `f32`, and its
/// derivative is `2/√π e^(-x²)`).
pub fn erf(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("erf");
    x.erf()
}

/// The complementary error function `1 - erf(x)` ([`Tensor::erfc`], the op `Erfc`), accurate
/// in relative terms for large `x` (no cancellation: `erfc(10)` is about `2e-45`, not 0 from
/// `1 - 1`); its derivative is `-2/√π e^(-x²)`.
pub fn erfc(x: &Tensor) -> Tensor {
    let _op = OpScope::enter("erfc");
    x.erfc()
}
