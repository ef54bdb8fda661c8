//! Resampling as one matrix per spatial axis: `adaptive_avg_pool*` (the mean of torch's
//! variable windows) and `interpolate` (nearest, nearest-exact, linear, bilinear, trilinear).
//! Both are separable, so each axis is a contraction with a constant `[out, in]` matrix.

use crate::tensor::{OpScope, Tensor};

/// `x` with its axis `axis` contracted with `matrix` (`[out, in]` row-major, `f64` weights):
/// `y[.., o, ..] = Σ_i matrix[o][i] · x[.., i, ..]`.
fn contract_axis(x: &Tensor, axis: usize, matrix: &[Vec<f64>]) -> Tensor {
    let (out, inp) = (matrix.len(), matrix[0].len());
    let flat: Vec<f64> = matrix.iter().flatten().copied().collect();
    let float = x.dtype().to_float();
    let m = Tensor::from_vec(flat, &[out, inp]).cast(float);
    let last = x.ndim() as isize - 1;
    x.cast(float)
        .transpose(axis as isize, last)
        .matmul(&m.transpose(0, 1))
        .transpose(axis as isize, last)
}

#[track_caller]
fn spatial_axes(op: &str, x: &Tensor, dims: usize, size: &[usize]) -> usize {
    if x.ndim() < dims + 1 || size.len() != dims || size.contains(&0) {
        panic!(
            "{op}: expected an input with {dims} trailing spatial axes and {dims} positive output \
             sizes, got input {:?} and size {size:?}",
            x.shape()
        );
    }
    x.ndim() - dims
}

/// torch's adaptive windows: output `o` averages input `[floor(o·in/out), ceil((o+1)·in/out))`.
fn adaptive_matrix(inp: usize, out: usize) -> Vec<Vec<f64>> {
    (0..out)
        .map(|o| {
            let start = o * inp / out;
            let end = ((o + 1) * inp).div_ceil(out);
            let w = 1.0 / (end - start) as f64;
            (0..inp)
                .map(|i| if (start..end).contains(&i) { w } else { 0.0 })
                .collect()
        })
        .collect()
}

fn adaptive_avg_pool_nd(op: &'static str, x: &Tensor, size: &[usize]) -> Tensor {
    let _op = OpScope::enter(op);
    let lead = spatial_axes(op, x, size.len(), size);
    size.iter().enumerate().fold(x.clone(), |y, (a, &out)| {
        let inp = x.shape()[lead + a];
        contract_axis(&y, lead + a, &adaptive_matrix(inp, out))
    })
}

/// Adaptive 1-d average pooling of `[N, C, L]` to `[N, C, size]`.
#[track_caller]
pub fn adaptive_avg_pool1d(x: &Tensor, size: usize) -> Tensor {
    adaptive_avg_pool_nd("adaptive_avg_pool1d", x, &[size])
}

/// Adaptive 2-d average pooling of `[N, C, H, W]` to `[N, C, *size]`.
#[track_caller]
pub fn adaptive_avg_pool2d(x: &Tensor, size: [usize; 2]) -> Tensor {
    adaptive_avg_pool_nd("adaptive_avg_pool2d", x, &size)
}

/// Adaptive 3-d average pooling of `[N, C, D, H, W]` to `[N, C, *size]`.
#[track_caller]
pub fn adaptive_avg_pool3d(x: &Tensor, size: [usize; 3]) -> Tensor {
    adaptive_avg_pool_nd("adaptive_avg_pool3d", x, &size)
}

/// How `interpolate` computes an output element from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The input element at `floor(dst · in / out)` (torch's `"nearest"`).
    Nearest,
    /// The input element at `floor((dst + 0.5) · in / out)` (`"nearest-exact"`).
    NearestExact,
    /// Linear interpolation on each spatial axis (`"linear"`, `"bilinear"`, `"trilinear"`).
    Linear,
}

/// Resizes the trailing `size.len()` axes of `x` (`[N, C, *spatial]`) to `size`. With
/// `align_corners` (linear mode only) the corner elements of input and output coincide;
/// without, their areas do (torch's default).
#[track_caller]
pub fn interpolate(x: &Tensor, size: &[usize], mode: Mode, align_corners: bool) -> Tensor {
    let _op = OpScope::enter("interpolate");
    let lead = spatial_axes("interpolate", x, size.len(), size);
    if align_corners && mode != Mode::Linear {
        panic!("interpolate: align_corners only applies to the linear modes, not {mode:?}");
    }
    size.iter().enumerate().fold(x.clone(), |y, (a, &out)| {
        let inp = x.shape()[lead + a];
        let matrix = match mode {
            Mode::Nearest => nearest_matrix(inp, out, 0.0),
            Mode::NearestExact => nearest_matrix(inp, out, 0.5),
            Mode::Linear => linear_matrix(inp, out, align_corners),
        };
        contract_axis(&y, lead + a, &matrix)
    })
}

/// Upsamples or downsamples `x` by `scale` per spatial axis (output `floor(in · scale)`),
/// mapping coordinates by `1 / scale` as torch does when a scale factor is given.
#[track_caller]
pub fn interpolate_scale(x: &Tensor, scale: &[f64], mode: Mode, align_corners: bool) -> Tensor {
    let _op = OpScope::enter("interpolate_scale");
    let lead = x.ndim().saturating_sub(scale.len());
    let size: Vec<usize> = scale
        .iter()
        .enumerate()
        .map(|(a, &s)| (x.shape()[lead + a] as f64 * s).floor() as usize)
        .collect();
    let lead = spatial_axes("interpolate_scale", x, size.len(), &size);
    size.iter().enumerate().fold(x.clone(), |y, (a, &out)| {
        let inp = x.shape()[lead + a];
        let ratio = 1.0 / scale[a];
        let matrix = match mode {
            Mode::Nearest => nearest_with_ratio(inp, out, 0.0, ratio),
            Mode::NearestExact => nearest_with_ratio(inp, out, 0.5, ratio),
            Mode::Linear if align_corners => linear_matrix(inp, out, true),
            Mode::Linear => linear_with_ratio(inp, out, ratio),
        };
        contract_axis(&y, lead + a, &matrix)
    })
}

fn nearest_matrix(inp: usize, out: usize, offset: f64) -> Vec<Vec<f64>> {
    nearest_with_ratio(inp, out, offset, inp as f64 / out as f64)
}

fn nearest_with_ratio(inp: usize, out: usize, offset: f64, ratio: f64) -> Vec<Vec<f64>> {
    (0..out)
        .map(|o| {
            // torch computes the source index in f32.
            let src = (((o as f64 + offset) as f32) * ratio as f32).floor() as usize;
            one_at(inp, src.min(inp - 1))
        })
        .collect()
}

fn one_at(n: usize, at: usize) -> Vec<f64> {
    (0..n).map(|i| if i == at { 1.0 } else { 0.0 }).collect()
}

fn linear_matrix(inp: usize, out: usize, align_corners: bool) -> Vec<Vec<f64>> {
    if align_corners {
        let ratio = if out > 1 {
            (inp - 1) as f64 / (out - 1) as f64
        } else {
            0.0
        };
        return (0..out)
            .map(|o| linear_row(inp, o as f64 * ratio))
            .collect();
    }
    linear_with_ratio(inp, out, inp as f64 / out as f64)
}

fn linear_with_ratio(inp: usize, out: usize, ratio: f64) -> Vec<Vec<f64>> {
    (0..out)
        .map(|o| linear_row(inp, ((o as f64 + 0.5) * ratio - 0.5).max(0.0)))
        .collect()
}

/// The weights that interpolate position `src` between its two neighbours.
fn linear_row(inp: usize, src: f64) -> Vec<f64> {
    let i0 = (src.floor() as usize).min(inp - 1);
    let i1 = (i0 + 1).min(inp - 1);
    let t = src - i0 as f64;
    let mut row = vec![0.0; inp];
    row[i0] += 1.0 - t;
    row[i1] += t;
    row
}
