//! Sliding windows over the trailing spatial axes of a tensor: the one lowering convolution,
//! pooling and `unfold` share.

use crate::tensor::Tensor;
use crate::uop::Scalar;

/// A per-spatial-axis argument (kernel size, stride, padding, dilation): one number for every
/// axis, or one per axis, as torch accepts `3` or `(3, 2)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spatial {
    /// The same value on every spatial axis.
    All(usize),
    /// One value per spatial axis.
    Each(Vec<usize>),
}

impl Spatial {
    /// The values for `dims` spatial axes; panics (naming `op`) when the count differs.
    #[track_caller]
    pub fn expand(&self, op: &str, what: &str, dims: usize) -> Vec<usize> {
        match self {
            Spatial::All(v) => vec![*v; dims],
            Spatial::Each(v) if v.len() == dims => v.clone(),
            Spatial::Each(v) => panic!(
                "{op}: {what} {v:?} has {} values for {dims} spatial axes",
                v.len()
            ),
        }
    }
}

impl From<usize> for Spatial {
    fn from(v: usize) -> Spatial {
        Spatial::All(v)
    }
}
impl<const N: usize> From<[usize; N]> for Spatial {
    fn from(v: [usize; N]) -> Spatial {
        Spatial::Each(v.to_vec())
    }
}
impl From<Vec<usize>> for Spatial {
    fn from(v: Vec<usize>) -> Spatial {
        Spatial::Each(v)
    }
}
impl From<&[usize]> for Spatial {
    fn from(v: &[usize]) -> Spatial {
        Spatial::Each(v.to_vec())
    }
}

/// Padding of a convolution: explicit sizes (both sides of each axis), or torch's `"same"`
/// (the output as large as the input, stride 1) and `"valid"` (none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Padding {
    /// `padding` zeros before and after each spatial axis.
    Explicit(Spatial),
    /// Enough padding for an output of the input's size (extra on the right when odd).
    Same,
    /// No padding.
    Valid,
}

impl<T: Into<Spatial>> From<T> for Padding {
    fn from(v: T) -> Padding {
        Padding::Explicit(v.into())
    }
}
impl From<&str> for Padding {
    #[track_caller]
    fn from(v: &str) -> Padding {
        match v {
            "same" => Padding::Same,
            "valid" => Padding::Valid,
            other => panic!("padding: expected \"same\", \"valid\" or sizes, got {other:?}"),
        }
    }
}

impl Padding {
    /// `(before, after)` per spatial axis for kernels `kernel` dilated by `dilation`.
    #[track_caller]
    pub(crate) fn pairs(
        &self,
        op: &str,
        kernel: &[usize],
        dilation: &[usize],
        stride: &[usize],
    ) -> Vec<(usize, usize)> {
        match self {
            Padding::Valid => vec![(0, 0); kernel.len()],
            Padding::Explicit(p) => p
                .expand(op, "padding", kernel.len())
                .into_iter()
                .map(|p| (p, p))
                .collect(),
            Padding::Same => {
                if stride.iter().any(|&s| s != 1) {
                    panic!("{op}: padding \"same\" needs stride 1, got stride {stride:?}");
                }
                kernel
                    .iter()
                    .zip(dilation)
                    .map(|(&k, &d)| {
                        let total = d * (k - 1);
                        (total / 2, total - total / 2)
                    })
                    .collect()
            }
        }
    }
}

/// The windows of `x` over its last `kernel.len()` axes: `x` of shape `[..., *in]` (already
/// padded) becomes `[..., *out, *kernel]`, where element `[..., o, k]` is `x[..., o * stride +
/// k * dilation]` and `out = (in - dilation * (kernel - 1) - 1) / stride + 1` per axis.
///
/// A permuted view of [`windows_taps_first`].
#[track_caller]
pub fn windows(x: &Tensor, kernel: &[usize], stride: &[usize], dilation: &[usize]) -> Tensor {
    let taps_first = windows_taps_first(x, kernel, stride, dilation);
    let (lead, dims) = (x.ndim() - kernel.len(), kernel.len());
    let mut order: Vec<usize> = (0..lead).collect();
    order.extend(lead + dims..lead + 2 * dims);
    order.extend(lead..lead + dims);
    taps_first.permute(&order)
}

/// The windows of `x` with the kernel axes ahead of the window positions: `[..., *kernel,
/// *out]`, element `[..., k, o]` being `x[..., o * stride + k * dilation]`.
///
/// Every tap (one offset per spatial axis) is a strided view of `x` (a shrink, and for a stride
/// above 1 a reshape that keeps every `stride`-th element), and the taps are stacked into one
/// axis. Taps first, a realized window buffer (the im2col columns) and its gradient keep the last
/// spatial axis contiguous, so the products that read them and the gradients that write them run
/// along unit strides.
#[track_caller]
pub fn windows_taps_first(
    x: &Tensor,
    kernel: &[usize],
    stride: &[usize],
    dilation: &[usize],
) -> Tensor {
    let dims = kernel.len();
    let lead = x.ndim().checked_sub(dims).unwrap_or_else(|| {
        panic!(
            "windows: kernel {kernel:?} has more axes than the input of shape {:?}",
            x.shape()
        )
    });
    let out: Vec<usize> = (0..dims)
        .map(|axis| window_count(x, lead + axis, kernel[axis], stride[axis], dilation[axis]))
        .collect();
    let taps: Vec<Tensor> = tap_offsets(kernel)
        .iter()
        .map(|offset| {
            (0..dims).fold(x.clone(), |view, axis| {
                every_nth(
                    &view,
                    lead + axis,
                    offset[axis] * dilation[axis],
                    out[axis],
                    stride[axis],
                )
            })
        })
        .collect();
    let mut shape = x.shape()[..lead].to_vec();
    shape.extend(kernel);
    shape.extend(&out);
    Tensor::stack(&taps, lead as isize).reshape(&shape)
}

/// The number of windows along `axis`; panics when the kernel does not fit.
#[track_caller]
fn window_count(x: &Tensor, axis: usize, k: usize, stride: usize, dilation: usize) -> usize {
    let size = x.shape()[axis];
    if k == 0 || stride == 0 || dilation == 0 || dilation * (k - 1) + 1 > size {
        panic!(
            "windows: a kernel of {k} (dilation {dilation}, stride {stride}) does not fit axis \
             {axis} of shape {:?}",
            x.shape()
        );
    }
    (size - dilation * (k - 1) - 1) / stride + 1
}

/// Every tap of a kernel, in row-major order: `[0, 0], [0, 1], .., [k0 - 1, k1 - 1]`.
fn tap_offsets(kernel: &[usize]) -> Vec<Vec<usize>> {
    kernel.iter().fold(vec![vec![]], |prefixes, &k| {
        prefixes
            .iter()
            .flat_map(|p| {
                (0..k).map(move |j| {
                    let mut tap = p.clone();
                    tap.push(j);
                    tap
                })
            })
            .collect()
    })
}

/// `count` elements of `axis` starting at `start`, every `step`-th: `x[start::step][:count]`.
#[track_caller]
pub(crate) fn every_nth(
    x: &Tensor,
    axis: usize,
    start: usize,
    count: usize,
    step: usize,
) -> Tensor {
    let size = x.shape()[axis];
    let end = (start + count * step).min(size);
    let part = x.narrow(axis as isize, start as isize, end - start);
    if step == 1 {
        return part;
    }
    // Pad to `count * step`, split the axis into `[count, step]` and keep column 0.
    let mut pads = vec![(0, 0); x.ndim()];
    pads[axis] = (0, count * step - (end - start));
    let padded = part.pad(&pads);
    let mut shape = padded.shape();
    shape.splice(axis..=axis, [count, step]);
    padded
        .reshape(&shape)
        .narrow(axis as isize + 1, 0, 1)
        .squeeze(axis as isize + 1)
}

/// `x` padded by `pads` on its trailing axes with `value`.
pub(crate) fn pad_trailing(x: &Tensor, pads: &[(usize, usize)], value: Scalar) -> Tensor {
    let mut all = vec![(0, 0); x.ndim() - pads.len()];
    all.extend_from_slice(pads);
    if pads.iter().all(|&(b, e)| b == 0 && e == 0) {
        return x.clone();
    }
    match value {
        Scalar::Float(0.0) => x.pad(&all),
        Scalar::Int(0) => x.pad(&all),
        v => x.pad_value(&all, v),
    }
}
