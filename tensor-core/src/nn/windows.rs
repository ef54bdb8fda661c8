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
/// Each axis is one stack of `kernel` strided views (a shrink, and for a stride above 1 a
/// reshape that keeps every `stride`-th element), so the result is a view of `x`.
#[track_caller]
pub fn windows(x: &Tensor, kernel: &[usize], stride: &[usize], dilation: &[usize]) -> Tensor {
    let dims = kernel.len();
    let lead = x.ndim().checked_sub(dims).unwrap_or_else(|| {
        panic!(
            "windows: kernel {kernel:?} has more axes than the input of shape {:?}",
            x.shape()
        )
    });
    let mut out = x.clone();
    for axis in 0..dims {
        // The spatial axis `axis` sits at `lead + axis` while the window axes of the earlier
        // spatial axes trail at the end.
        // Spatial axis `axis` is still at `lead + axis`; its window axis goes last, behind
        // those of the earlier axes.
        out = windows_along(
            &out,
            lead + axis,
            kernel[axis],
            stride[axis],
            dilation[axis],
        );
    }
    out
}

/// One spatial axis: `[.., in, ..rest]` to `[.., out, ..rest, k]`.
#[track_caller]
fn windows_along(x: &Tensor, axis: usize, k: usize, stride: usize, dilation: usize) -> Tensor {
    let size = x.shape()[axis];
    let span = dilation * (k - 1) + 1;
    if k == 0 || stride == 0 || dilation == 0 || span > size {
        panic!(
            "windows: a kernel of {k} (dilation {dilation}, stride {stride}) does not fit axis \
             {axis} of shape {:?}",
            x.shape()
        );
    }
    let out = (size - span) / stride + 1;
    let views: Vec<Tensor> = (0..k)
        .map(|j| every_nth(x, axis, j * dilation, out, stride))
        .collect();
    Tensor::stack(&views, -1)
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
