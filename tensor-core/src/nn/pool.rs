//! Pooling: the maximum or mean of each window (`max_pool*`, `avg_pool*`, torch's output sizes,
//! `ceil_mode`, `count_include_pad`, `return_indices`), and `max_unpool2d`.

use super::windows::{Spatial, pad_trailing, windows};
use crate::tensor::{OpScope, Tensor};
use crate::uop::{DType, Scalar};

/// Options of a pooling op, as torch's keyword arguments: `Pool::new(2).stride(2).padding(0)`.
#[derive(Clone, Debug)]
pub struct Pool {
    /// Window size.
    pub kernel_size: Spatial,
    /// Step between windows (default: the window size).
    pub stride: Option<Spatial>,
    /// Implicit padding on both sides (at most half the window).
    pub padding: Spatial,
    /// Step between window taps (max pooling only; default 1).
    pub dilation: Spatial,
    /// Round the output size up, so a last partial window starting inside the input counts.
    pub ceil_mode: bool,
    /// Average pooling: count the padding zeros in the divisor (default true, as torch).
    pub count_include_pad: bool,
}

impl Pool {
    /// Windows of `kernel_size`, stride equal to the window, no padding.
    pub fn new(kernel_size: impl Into<Spatial>) -> Pool {
        Pool {
            kernel_size: kernel_size.into(),
            stride: None,
            padding: Spatial::All(0),
            dilation: Spatial::All(1),
            ceil_mode: false,
            count_include_pad: true,
        }
    }
    /// With `stride`.
    pub fn stride(mut self, s: impl Into<Spatial>) -> Pool {
        self.stride = Some(s.into());
        self
    }
    /// With `padding`.
    pub fn padding(mut self, p: impl Into<Spatial>) -> Pool {
        self.padding = p.into();
        self
    }
    /// With `dilation`.
    pub fn dilation(mut self, d: impl Into<Spatial>) -> Pool {
        self.dilation = d.into();
        self
    }
    /// With `ceil_mode`.
    pub fn ceil_mode(mut self, on: bool) -> Pool {
        self.ceil_mode = on;
        self
    }
    /// With `count_include_pad`.
    pub fn count_include_pad(mut self, on: bool) -> Pool {
        self.count_include_pad = on;
        self
    }
}

/// The resolved geometry of a pooling over the last `kernel.len()` axes.
struct Geometry {
    kernel: Vec<usize>,
    stride: Vec<usize>,
    dilation: Vec<usize>,
    /// The padding given, on both sides of each axis.
    padding: Vec<usize>,
    /// Padding past `padding` on the high side, for the last window of `ceil_mode`.
    extra: Vec<usize>,
    /// The output size of each axis.
    out: Vec<usize>,
}

impl Geometry {
    #[track_caller]
    fn of(op: &str, dims: usize, x: &Tensor, opts: &Pool) -> Geometry {
        if x.ndim() < dims + 1 {
            panic!(
                "{op}: expected an input [N, C, {dims} spatial axes] or [C, ...], got {:?}",
                x.shape()
            );
        }
        let kernel = opts.kernel_size.expand(op, "kernel_size", dims);
        let stride = match &opts.stride {
            Some(s) => s.expand(op, "stride", dims),
            None => kernel.clone(),
        };
        let padding = opts.padding.expand(op, "padding", dims);
        let dilation = opts.dilation.expand(op, "dilation", dims);
        let spatial = &x.shape()[x.ndim() - dims..];
        let (mut extra, mut out) = (Vec::new(), Vec::new());
        for a in 0..dims {
            let (k, s, p, d, i) = (kernel[a], stride[a], padding[a], dilation[a], spatial[a]);
            if k == 0 || s == 0 || d == 0 || 2 * p > k {
                panic!(
                    "{op}: padding {padding:?} must be at most half of kernel_size {kernel:?}, \
                     and kernel, stride and dilation positive (stride {stride:?}, dilation \
                     {dilation:?})"
                );
            }
            let span = d * (k - 1) + 1;
            if i + 2 * p < span {
                panic!(
                    "{op}: the window {kernel:?} (dilation {dilation:?}) is larger than the \
                     padded input {:?}",
                    x.shape()
                );
            }
            let o = output_size(i, k, s, p, d, opts.ceil_mode);
            extra.push(((o - 1) * s + span).saturating_sub(i + 2 * p));
            out.push(o);
        }
        Geometry {
            kernel,
            stride,
            dilation,
            padding,
            extra,
            out,
        }
    }

    /// `(before, after)` padding of each axis: the given padding with `fill`, the extra of
    /// `ceil_mode` with `extra_fill`.
    fn pad(&self, x: &Tensor, fill: Scalar, extra_fill: Scalar) -> Tensor {
        let given: Vec<(usize, usize)> = self.padding.iter().map(|&p| (p, p)).collect();
        let extra: Vec<(usize, usize)> = self.extra.iter().map(|&e| (0, e)).collect();
        pad_trailing(&pad_trailing(x, &given, fill), &extra, extra_fill)
    }

    /// The windows `[..., *out, *kernel]` of `x` padded by `fill` (everywhere).
    fn windows(&self, x: &Tensor, fill: Scalar) -> Tensor {
        self.windows_of_padded(&self.pad(x, fill, fill))
    }

    /// The windows of an already padded `x`, cut to the output size (a padded axis may hold
    /// more whole windows than torch's floor keeps).
    fn windows_of_padded(&self, padded: &Tensor) -> Tensor {
        let w = windows(padded, &self.kernel, &self.stride, &self.dilation);
        let lead = padded.ndim() - self.kernel.len();
        let mut bounds: Vec<(usize, usize)> = w.shape().iter().map(|&n| (0, n)).collect();
        for (a, &o) in self.out.iter().enumerate() {
            bounds[lead + a].1 = o;
        }
        w.shrink(&bounds)
    }
}

/// Torch's pooling output size: `floor` (or `ceil`) of `(i + 2p - d(k-1) - 1) / s` plus one,
/// where in ceil mode a last window must start inside the input or its left padding.
fn output_size(i: usize, k: usize, s: usize, p: usize, d: usize, ceil: bool) -> usize {
    let room = i + 2 * p - (d * (k - 1) + 1);
    let mut out = if ceil { room.div_ceil(s) } else { room / s } + 1;
    if ceil && (out - 1) * s >= i + p {
        out -= 1;
    }
    out
}

/// The lowest value of `dtype`: the padding of a max pooling.
fn lowest(dtype: DType) -> Scalar {
    if dtype.is_float() {
        Scalar::Float(f64::NEG_INFINITY)
    } else {
        dtype.min_value()
    }
}

fn window_axes(x: &Tensor, dims: usize) -> Vec<isize> {
    (x.ndim() as isize..(x.ndim() + dims) as isize).collect()
}

#[track_caller]
fn max_pool_nd(op: &'static str, dims: usize, x: &Tensor, opts: &Pool) -> Tensor {
    let _op = OpScope::enter(op);
    let g = Geometry::of(op, dims, x, opts);
    g.windows(x, lowest(x.dtype()))
        .max(&window_axes(x, dims), false)
}

/// 1-d max pooling of `[N, C, L]` (or `[C, L]`).
#[track_caller]
pub fn max_pool1d(x: &Tensor, opts: &Pool) -> Tensor {
    max_pool_nd("max_pool1d", 1, x, opts)
}

/// 2-d max pooling of `[N, C, H, W]` (or `[C, H, W]`).
#[track_caller]
pub fn max_pool2d(x: &Tensor, opts: &Pool) -> Tensor {
    max_pool_nd("max_pool2d", 2, x, opts)
}

/// 3-d max pooling of `[N, C, D, H, W]` (or `[C, D, H, W]`).
#[track_caller]
pub fn max_pool3d(x: &Tensor, opts: &Pool) -> Tensor {
    max_pool_nd("max_pool3d", 3, x, opts)
}

/// Max pooling over the last `dims` axes with torch's `return_indices`: the maxima and, for
/// each, the flat position of the (first) maximum within its input plane (`h * W + w`), as
/// `i64`.
#[track_caller]
pub fn max_pool_with_indices(x: &Tensor, dims: usize, opts: &Pool) -> (Tensor, Tensor) {
    let op = "max_pool_with_indices";
    let _op = OpScope::enter(op);
    let g = Geometry::of(op, dims, x, opts);
    let win = g.windows(x, lowest(x.dtype()));
    let lead = x.ndim() - dims;
    let plane: Vec<usize> = x.shape()[lead..].to_vec();
    let count: usize = plane.iter().product();
    let positions = Tensor::arange(count)
        .cast(DType::I64)
        .reshape(&plane)
        .add(1i32);
    // Positions shifted by one so that padding (0) never names an element.
    let position_windows = g.windows(&positions, Scalar::Int(0));
    let out_shape: Vec<usize> = win.shape()[..x.ndim()].to_vec();
    let taps: usize = g.kernel.iter().product();
    let mut flat_shape = out_shape.clone();
    flat_shape.push(taps);
    let flat = win.reshape(&flat_shape);
    let values = flat.max(-1, false);
    let first = flat.argmax(-1, true);
    let mut pos_shape: Vec<usize> = out_shape[lead..].to_vec();
    pos_shape.push(taps);
    let pos = position_windows
        .reshape(&pos_shape)
        .broadcast_to(&flat_shape);
    let index = pos
        .gather(-1, &first.cast(DType::I64))
        .squeeze(-1)
        .sub(1i32);
    (values, index)
}

#[track_caller]
fn avg_pool_nd(op: &'static str, dims: usize, x: &Tensor, opts: &Pool) -> Tensor {
    let _op = OpScope::enter(op);
    let g = Geometry::of(op, dims, x, opts);
    let axes = window_axes(x, dims);
    let float = x.dtype().to_float();
    let sums = g
        .windows(&x.cast(float), Scalar::Float(0.0))
        .sum(&axes, false);
    // The divisor counts the window's elements inside the input, and with
    // `count_include_pad` also those in the given padding (never the extra of `ceil_mode`).
    let plane: Vec<usize> = x.shape()[x.ndim() - dims..].to_vec();
    let ones = Tensor::full(&plane, 1.0, float);
    let in_padding = Scalar::Float(if opts.count_include_pad { 1.0 } else { 0.0 });
    let counted = g.pad(&ones, in_padding, Scalar::Float(0.0));
    let divisor = g
        .windows_of_padded(&counted)
        .sum(&window_axes(&ones, dims), false);
    sums.div(divisor)
}

/// 1-d average pooling of `[N, C, L]` (or `[C, L]`).
#[track_caller]
pub fn avg_pool1d(x: &Tensor, opts: &Pool) -> Tensor {
    avg_pool_nd("avg_pool1d", 1, x, opts)
}

/// 2-d average pooling of `[N, C, H, W]` (or `[C, H, W]`).
#[track_caller]
pub fn avg_pool2d(x: &Tensor, opts: &Pool) -> Tensor {
    avg_pool_nd("avg_pool2d", 2, x, opts)
}

/// 3-d average pooling of `[N, C, D, H, W]` (or `[C, D, H, W]`).
#[track_caller]
pub fn avg_pool3d(x: &Tensor, opts: &Pool) -> Tensor {
    avg_pool_nd("avg_pool3d", 3, x, opts)
}

/// The inverse of a 2-d max pooling with indices: each value of `x` `[N, C, h, w]` (or `[C, h,
/// w]`) placed at
/// its index in a zero plane of `output_size` `[H, W]` (torch's default size when `None`:
/// `(h - 1) * stride - 2 * padding + kernel`).
#[track_caller]
pub fn max_unpool2d(
    x: &Tensor,
    indices: &Tensor,
    opts: &Pool,
    output_size: Option<[usize; 2]>,
) -> Tensor {
    let _op = OpScope::enter("max_unpool2d");
    let xs = x.shape();
    if xs.len() < 3 || indices.shape() != xs {
        panic!(
            "max_unpool2d: expected values [N, C, h, w] and indices of the same shape, got {xs:?} \
             and {:?}",
            indices.shape()
        );
    }
    let kernel = opts.kernel_size.expand("max_unpool2d", "kernel_size", 2);
    let stride = match &opts.stride {
        Some(s) => s.expand("max_unpool2d", "stride", 2),
        None => kernel.clone(),
    };
    let padding = opts.padding.expand("max_unpool2d", "padding", 2);
    let lead = xs.len() - 2;
    let [h, w] = output_size.unwrap_or_else(|| {
        let size = |a: usize| (xs[lead + a] - 1) * stride[a] + kernel[a] - 2 * padding[a];
        [size(0), size(1)]
    });
    let mut flat_in = xs[..lead].to_vec();
    flat_in.push(xs[lead] * xs[lead + 1]);
    let mut flat_out = xs[..lead].to_vec();
    flat_out.push(h * w);
    let mut out_shape = xs[..lead].to_vec();
    out_shape.extend([h, w]);
    Tensor::zeros(&flat_out, x.dtype())
        .scatter_add(-1, &indices.reshape(&flat_in), &x.reshape(&flat_in))
        .reshape(&out_shape)
}
