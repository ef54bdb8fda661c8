//! Normalization: `layer_norm`, `rms_norm`, `group_norm`, `batch_norm` (batch statistics in
//! training with the running statistics updated, running statistics in inference).

use crate::tensor::{OpScope, Tensor};

/// `(x - mean) / sqrt(var + eps)` over `axes` (biased variance, kept dims).
fn standardize(x: &Tensor, axes: &[isize], eps: f64) -> Tensor {
    let x = x.cast(x.dtype().to_float());
    let centered = x.sub(x.mean(axes, true));
    let var = centered.square().mean(axes, true);
    centered.mul(var.add(eps).rsqrt())
}

/// `x * weight + bias`, each broadcast from `shape` (a parameter shape aligned at `axis`).
fn affine(x: Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>, shape: &[usize]) -> Tensor {
    let x = match weight {
        Some(w) => x.mul(w.reshape(shape)),
        None => x,
    };
    match bias {
        Some(b) => x.add(b.reshape(shape)),
        None => x,
    }
}

#[track_caller]
fn trailing_axes(op: &str, x: &Tensor, normalized_shape: &[usize]) -> Vec<isize> {
    let shape = x.shape();
    if normalized_shape.is_empty()
        || normalized_shape.len() > shape.len()
        || shape[shape.len() - normalized_shape.len()..] != *normalized_shape
    {
        panic!(
            "{op}: normalized_shape {normalized_shape:?} is not the trailing shape of {shape:?}"
        );
    }
    (shape.len() - normalized_shape.len()..shape.len())
        .map(|a| a as isize)
        .collect()
}

#[track_caller]
fn check_param(op: &str, name: &str, p: Option<&Tensor>, shape: &[usize]) {
    if let Some(p) = p
        && p.shape() != shape
    {
        panic!("{op}: {name} of shape {:?}, expected {shape:?}", p.shape());
    }
}

/// Layer normalization over the trailing `normalized_shape` axes (torch's `layer_norm`).
#[track_caller]
pub fn layer_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Tensor {
    let _op = OpScope::enter("layer_norm");
    let axes = trailing_axes("layer_norm", x, normalized_shape);
    check_param("layer_norm", "weight", weight, normalized_shape);
    check_param("layer_norm", "bias", bias, normalized_shape);
    affine(standardize(x, &axes, eps), weight, bias, normalized_shape)
}

/// RMS normalization: `x / sqrt(mean(x²) + eps) * weight` over the trailing axes; `eps`
/// defaults to the dtype's machine epsilon, as torch.
#[track_caller]
pub fn rms_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Tensor {
    let _op = OpScope::enter("rms_norm");
    let axes = trailing_axes("rms_norm", x, normalized_shape);
    check_param("rms_norm", "weight", weight, normalized_shape);
    let float = x.dtype().to_float();
    let eps = eps.unwrap_or(match float {
        crate::uop::DType::F64 => f64::EPSILON,
        crate::uop::DType::F16 => 9.765_625e-4,
        crate::uop::DType::BF16 => 7.812_5e-3,
        _ => f32::EPSILON as f64,
    });
    let x = x.cast(float);
    let scaled = x.mul(x.square().mean(&axes, true).add(eps).rsqrt());
    affine(scaled, weight, None, normalized_shape)
}

/// Group normalization of `[N, C, *]`: channels split into `num_groups`, each normalized over
/// its channels and positions; `weight` and `bias` are per channel (`[C]`).
#[track_caller]
pub fn group_norm(
    x: &Tensor,
    num_groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Tensor {
    let _op = OpScope::enter("group_norm");
    let shape = x.shape();
    if shape.len() < 2 || num_groups == 0 || !shape[1].is_multiple_of(num_groups) {
        panic!(
            "group_norm: expected [N, C, *] with C divisible by num_groups = {num_groups}, got \
             {shape:?}"
        );
    }
    let c = shape[1];
    check_param("group_norm", "weight", weight, &[c]);
    check_param("group_norm", "bias", bias, &[c]);
    let per_group: usize = shape[1..].iter().product::<usize>() / num_groups;
    let grouped = x.reshape(&[shape[0], num_groups, per_group]);
    let normalized = standardize(&grouped, &[2], eps).reshape(&shape);
    affine(normalized, weight, bias, &channel_shape(&shape))
}

/// `[1, C, 1, ...]` for an input of `shape`.
fn channel_shape(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    s[1] = shape[1];
    s
}

/// What `batch_norm` gives: the normalized input and, in training with running statistics
/// given, their updated values (torch updates them in place; here they are returned).
#[derive(Clone, Debug)]
pub struct BatchNorm {
    /// The normalized input.
    pub output: Tensor,
    /// `(1 - momentum) * running_mean + momentum * batch mean`, in training.
    pub running_mean: Option<Tensor>,
    /// `(1 - momentum) * running_var + momentum * unbiased batch variance`, in training.
    pub running_var: Option<Tensor>,
}

/// Batch normalization of `[N, C, *]` per channel. In training (or without running
/// statistics) the batch's mean and biased variance normalize, and the running statistics,
/// when given, are updated with `momentum` (unbiased variance, as torch); in inference the
/// running statistics normalize.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn batch_norm(
    x: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> BatchNorm {
    let _op = OpScope::enter("batch_norm");
    let shape = x.shape();
    if shape.len() < 2 {
        panic!("batch_norm: expected [N, C, *], got {shape:?}");
    }
    let c = shape[1];
    for (name, p) in [
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ] {
        check_param("batch_norm", name, p, &[c]);
    }
    let channels = channel_shape(&shape);
    let x = x.cast(x.dtype().to_float());
    let use_batch = training || running_mean.is_none() || running_var.is_none();
    if !use_batch {
        let (m, v) = (running_mean.unwrap(), running_var.unwrap());
        let normalized = x
            .sub(m.reshape(&channels))
            .mul(v.reshape(&channels).add(eps).rsqrt());
        return BatchNorm {
            output: affine(normalized, weight, bias, &channels),
            running_mean: None,
            running_var: None,
        };
    }
    let axes: Vec<isize> = (0..shape.len() as isize).filter(|&a| a != 1).collect();
    let count = shape.iter().product::<usize>() / c;
    let mean = x.mean(&axes, true);
    let centered = x.sub(&mean);
    let var = centered.square().mean(&axes, true);
    let output = affine(centered.mul(var.add(eps).rsqrt()), weight, bias, &channels);
    let update = |old: Option<&Tensor>, stat: Tensor| {
        old.map(|o| o.mul(1.0 - momentum).add(stat.reshape(&[c]).mul(momentum)))
    };
    let unbiased = var.mul(count as f64 / (count.max(2) - 1) as f64);
    BatchNorm {
        output,
        running_mean: if training {
            update(running_mean, mean)
        } else {
            None
        },
        running_var: if training {
            update(running_var, unbiased)
        } else {
            None
        },
    }
}
