//! Convolutions as windows times weights summed: `conv1d/2d/3d` (stride, padding, dilation,
//! groups, bias), their transposes (an input dilated by the stride, convolved with the flipped
//! kernel), and `unfold` (im2col). Convolutions take torch's unbatched input `[C, *spatial]`
//! too (a batch of one, its batch axis removed from the output).

use super::unbatched::as_batch_of_one;
use super::windows::{Padding, Spatial, pad_trailing, windows_taps_first};
use crate::tensor::{OpScope, Tensor};
use crate::uop::Scalar;

/// Options of a convolution, as torch's keyword arguments: `Conv::default().stride(2)
/// .padding(1).dilation(1).groups(1)`.
#[derive(Clone, Debug)]
pub struct Conv {
    /// Step between windows (default 1).
    pub stride: Spatial,
    /// Zeros around the input (default none).
    pub padding: Padding,
    /// Step between kernel taps (default 1).
    pub dilation: Spatial,
    /// Channel groups: input and output channels are split into `groups` independent
    /// convolutions (default 1; `groups == C` is depthwise).
    pub groups: usize,
}

impl Default for Conv {
    fn default() -> Conv {
        Conv {
            stride: Spatial::All(1),
            padding: Padding::Valid,
            dilation: Spatial::All(1),
            groups: 1,
        }
    }
}

impl Conv {
    /// With `stride`.
    pub fn stride(mut self, s: impl Into<Spatial>) -> Conv {
        self.stride = s.into();
        self
    }
    /// With `padding` (sizes, `"same"` or `"valid"`).
    pub fn padding(mut self, p: impl Into<Padding>) -> Conv {
        self.padding = p.into();
        self
    }
    /// With `dilation`.
    pub fn dilation(mut self, d: impl Into<Spatial>) -> Conv {
        self.dilation = d.into();
        self
    }
    /// With `groups`.
    pub fn groups(mut self, g: usize) -> Conv {
        self.groups = g;
        self
    }
}

/// 1-d convolution: `x` `[N, C, L]` (or `[C, L]`), `weight` `[O, C / groups, k]`, `bias` `[O]`.
#[track_caller]
pub fn conv1d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv) -> Tensor {
    conv_nd("conv1d", 1, x, weight, bias, opts)
}

/// 2-d convolution: `x` `[N, C, H, W]`, `weight` `[O, C / groups, kh, kw]`, `bias` `[O]`;
/// the output is `[N, O, H', W']` (torch's `conv2d`, a cross-correlation). One image `[C, H, W]`
/// gives `[O, H', W']`.
#[track_caller]
pub fn conv2d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv) -> Tensor {
    conv_nd("conv2d", 2, x, weight, bias, opts)
}

/// 3-d convolution: `x` `[N, C, D, H, W]` (or `[C, D, H, W]`), `weight` `[O, C / groups, kd,
/// kh, kw]`.
#[track_caller]
pub fn conv3d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: &Conv) -> Tensor {
    conv_nd("conv3d", 3, x, weight, bias, opts)
}

#[track_caller]
fn conv_nd(
    op: &'static str,
    dims: usize,
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: &Conv,
) -> Tensor {
    let _op = OpScope::enter(op);
    if x.ndim() == dims + 1 {
        return as_batch_of_one(x, |b| conv_nd(op, dims, b, weight, bias, opts));
    }
    check_conv_operands(op, dims, x, weight, opts.groups);
    let kernel = weight.shape()[2..].to_vec();
    let stride = opts.stride.expand(op, "stride", dims);
    let dilation = opts.dilation.expand(op, "dilation", dims);
    let pads = opts.padding.pairs(op, &kernel, &dilation, &stride);
    let padded = pad_trailing(x, &pads, Scalar::Float(0.0));
    let out = correlate(&padded, weight, &stride, &dilation, opts.groups);
    add_bias(op, out, bias)
}

/// Panics unless `x` is `[N, C, *dims]` and `weight` `[O, C / groups, *kernel]`.
#[track_caller]
fn check_conv_operands(op: &str, dims: usize, x: &Tensor, weight: &Tensor, groups: usize) {
    let (xs, ws) = (x.shape(), weight.shape());
    if xs.len() != dims + 2 || ws.len() != dims + 2 {
        panic!(
            "{op}: expected input [N, C, {dims} spatial axes] (or [C, {dims} spatial axes]) and \
             weight [O, C/groups, {dims} kernel axes], got input {xs:?} and weight {ws:?}"
        );
    }
    if groups == 0
        || !xs[1].is_multiple_of(groups)
        || !ws[0].is_multiple_of(groups)
        || ws[1] * groups != xs[1]
    {
        panic!(
            "{op}: input {xs:?} has {} channels and weight {ws:?} takes {} per group; with \
             groups = {groups} both channel counts must divide and match",
            xs[1], ws[1]
        );
    }
}

/// The cross-correlation of a padded `x` `[N, C, *in]` with `weight` `[O, C/g, *k]`:
/// `[N, O, *out]`, as windows `[N, g, 1, C/g, *k, *out]` times weights `[1, g, O/g, C/g, *k, 1..]`
/// summed over `(C/g, *k)`. With the positions last, the realized columns and their gradient
/// run along the output's rows.
#[track_caller]
fn correlate(
    x: &Tensor,
    weight: &Tensor,
    stride: &[usize],
    dilation: &[usize],
    groups: usize,
) -> Tensor {
    let (xs, ws) = (x.shape(), weight.shape());
    let dims = ws.len() - 2;
    let kernel = &ws[2..];
    let win = windows_taps_first(x, kernel, stride, dilation); // [N, C, *k, *out]
    let out: Vec<usize> = win.shape()[2 + dims..].to_vec();
    let (n, c, o) = (xs[0], xs[1], ws[0]);
    let (cg, og) = (c / groups, o / groups);
    let mut win_shape = vec![n, groups, 1, cg];
    win_shape.extend(kernel);
    win_shape.extend(&out);
    let mut w_shape = vec![1, groups, og, cg];
    w_shape.extend(kernel);
    w_shape.extend(std::iter::repeat_n(1, dims));
    let product = win.reshape(&win_shape).mul(weight.reshape(&w_shape));
    let summed: Vec<isize> = (3..4 + dims).map(|a| a as isize).collect();
    let mut result_shape = vec![n, o];
    result_shape.extend(&out);
    product.sum(&summed, false).reshape(&result_shape)
}

#[track_caller]
fn add_bias(op: &str, out: Tensor, bias: Option<&Tensor>) -> Tensor {
    let Some(b) = bias else { return out };
    let channels = out.shape()[1];
    if b.shape() != [channels] {
        panic!(
            "{op}: bias of shape {:?} for {channels} output channels (expected [{channels}])",
            b.shape()
        );
    }
    let mut shape = vec![1, channels];
    shape.extend(std::iter::repeat_n(1, out.ndim() - 2));
    out.add(b.reshape(&shape))
}

/// Options of a transposed convolution: those of [`Conv`] (padding as explicit sizes) and
/// `output_padding`, extra size on the high side of each output axis.
#[derive(Clone, Debug)]
pub struct ConvTranspose {
    /// Step between the input's elements in the output (default 1).
    pub stride: Spatial,
    /// Removed from both sides of the output (default 0).
    pub padding: Spatial,
    /// Added to the high side of the output (default 0; below the stride or dilation).
    pub output_padding: Spatial,
    /// Step between kernel taps (default 1).
    pub dilation: Spatial,
    /// Channel groups (default 1).
    pub groups: usize,
}

impl Default for ConvTranspose {
    fn default() -> ConvTranspose {
        ConvTranspose {
            stride: Spatial::All(1),
            padding: Spatial::All(0),
            output_padding: Spatial::All(0),
            dilation: Spatial::All(1),
            groups: 1,
        }
    }
}

impl ConvTranspose {
    /// With `stride`.
    pub fn stride(mut self, s: impl Into<Spatial>) -> ConvTranspose {
        self.stride = s.into();
        self
    }
    /// With `padding`.
    pub fn padding(mut self, p: impl Into<Spatial>) -> ConvTranspose {
        self.padding = p.into();
        self
    }
    /// With `output_padding`.
    pub fn output_padding(mut self, p: impl Into<Spatial>) -> ConvTranspose {
        self.output_padding = p.into();
        self
    }
    /// With `dilation`.
    pub fn dilation(mut self, d: impl Into<Spatial>) -> ConvTranspose {
        self.dilation = d.into();
        self
    }
    /// With `groups`.
    pub fn groups(mut self, g: usize) -> ConvTranspose {
        self.groups = g;
        self
    }
}

/// 1-d transposed convolution: `x` `[N, C, L]` (or `[C, L]`), `weight` `[C, O / groups, k]`.
#[track_caller]
pub fn conv_transpose1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvTranspose,
) -> Tensor {
    conv_transpose_nd("conv_transpose1d", 1, x, weight, bias, opts)
}

/// 2-d transposed convolution: `x` `[N, C, H, W]` (or `[C, H, W]`), `weight` `[C, O / groups,
/// kh, kw]`; the
/// output is `[N, O, (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1, ..]`.
#[track_caller]
pub fn conv_transpose2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvTranspose,
) -> Tensor {
    conv_transpose_nd("conv_transpose2d", 2, x, weight, bias, opts)
}

/// 3-d transposed convolution: `x` `[N, C, D, H, W]` (or `[C, D, H, W]`), `weight` `[C, O /
/// groups, kd, kh, kw]`.
#[track_caller]
pub fn conv_transpose3d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvTranspose,
) -> Tensor {
    conv_transpose_nd("conv_transpose3d", 3, x, weight, bias, opts)
}

/// The gradient of a convolution with respect to its input: the input spread out by the stride
/// (`stride - 1` zeros between elements), padded by `dilation * (k - 1) - padding` (plus
/// `output_padding` on the high side), and correlated with the kernel flipped on its spatial
/// axes and with its two channel axes swapped per group.
#[track_caller]
fn conv_transpose_nd(
    op: &'static str,
    dims: usize,
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: &ConvTranspose,
) -> Tensor {
    let _op = OpScope::enter(op);
    if x.ndim() == dims + 1 {
        return as_batch_of_one(x, |b| conv_transpose_nd(op, dims, b, weight, bias, opts));
    }
    let (xs, ws) = (x.shape(), weight.shape());
    let g = opts.groups;
    if xs.len() != dims + 2
        || ws.len() != dims + 2
        || g == 0
        || ws[0] != xs[1]
        || !xs[1].is_multiple_of(g)
    {
        panic!(
            "{op}: expected input [N, C, {dims} spatial axes] (or [C, ...]) and weight [C, O/groups, \
             {dims} kernel axes] with C divisible by groups = {g}, got input {xs:?} and weight {ws:?}"
        );
    }
    let kernel = ws[2..].to_vec();
    let stride = opts.stride.expand(op, "stride", dims);
    let padding = opts.padding.expand(op, "padding", dims);
    let output_padding = opts.output_padding.expand(op, "output_padding", dims);
    let dilation = opts.dilation.expand(op, "dilation", dims);
    let mut pads = Vec::with_capacity(dims);
    for a in 0..dims {
        let full = dilation[a] * (kernel[a] - 1);
        if padding[a] > full || output_padding[a] >= stride[a].max(dilation[a]) {
            panic!(
                "{op}: padding {padding:?} must be at most dilation * (kernel - 1) and \
                 output_padding {output_padding:?} below the stride or dilation (axis {a})"
            );
        }
        pads.push((full - padding[a], full - padding[a] + output_padding[a]));
    }
    let spread = spread_out(x, &stride);
    let padded = pad_trailing(&spread, &pads, Scalar::Float(0.0));
    let out = correlate(
        &padded,
        &transposed_kernel(weight, g),
        &vec![1; dims],
        &dilation,
        g,
    );
    add_bias(op, out, bias)
}

/// `x` with `stride - 1` zeros between neighbours on each trailing spatial axis.
fn spread_out(x: &Tensor, stride: &[usize]) -> Tensor {
    let lead = x.ndim() - stride.len();
    let mut out = x.clone();
    for (a, &s) in stride.iter().enumerate() {
        if s == 1 {
            continue;
        }
        let axis = lead + a;
        let n = out.shape()[axis];
        // [.., n, ..] -> [.., n, 1, ..] -> pad to [.., n, s, ..] -> [.., n * s, ..] -> keep (n-1)*s+1.
        let mut pads = vec![(0, 0); out.ndim() + 1];
        pads[axis + 1] = (0, s - 1);
        let mut merged = out.shape();
        merged[axis] = n * s;
        out = out
            .unsqueeze(axis as isize + 1)
            .pad(&pads)
            .reshape(&merged)
            .narrow(axis as isize, 0, (n - 1) * s + 1);
    }
    out
}

/// `[C, O/g, *k]` to the correlation kernel `[O, C/g, *k]` flipped on the spatial axes.
fn transposed_kernel(weight: &Tensor, groups: usize) -> Tensor {
    let ws = weight.shape();
    let dims = ws.len() - 2;
    let (c, og) = (ws[0], ws[1]);
    let cg = c / groups;
    let mut split = vec![groups, cg, og];
    split.extend(&ws[2..]);
    let mut order = vec![0, 2, 1];
    order.extend(3..3 + dims);
    let mut merged = vec![groups * og, cg];
    merged.extend(&ws[2..]);
    let spatial: Vec<isize> = (2..2 + dims as isize).collect();
    weight
        .reshape(&split)
        .permute(&order)
        .reshape(&merged)
        .flip(&spatial)
}

/// im2col: the windows of `x` `[N, C, *in]` as columns, `[N, C * prod(kernel), L]` where `L`
/// counts the window positions (torch's `unfold`).
#[track_caller]
pub fn unfold(
    x: &Tensor,
    kernel_size: impl Into<Spatial>,
    dilation: impl Into<Spatial>,
    padding: impl Into<Spatial>,
    stride: impl Into<Spatial>,
) -> Tensor {
    let _op = OpScope::enter("unfold");
    let dims = x.ndim().saturating_sub(2);
    if dims == 0 {
        panic!(
            "unfold: expected input [N, C, *spatial], got {:?}",
            x.shape()
        );
    }
    let kernel = kernel_size.into().expand("unfold", "kernel_size", dims);
    let dilation = dilation.into().expand("unfold", "dilation", dims);
    let padding = padding.into().expand("unfold", "padding", dims);
    let stride = stride.into().expand("unfold", "stride", dims);
    let pads: Vec<(usize, usize)> = padding.iter().map(|&p| (p, p)).collect();
    let win = windows_taps_first(
        &pad_trailing(x, &pads, Scalar::Float(0.0)),
        &kernel,
        &stride,
        &dilation,
    );
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let positions: usize = win.shape()[2 + dims..].iter().product();
    let taps: usize = kernel.iter().product();
    // [N, C, *k, *out] -> [N, C*K, L]
    win.reshape(&[n, c * taps, positions])
}
