//! [`HostBuf`]: the elements of a tree's leaves gathered on the host, one buffer per dtype, so
//! that a collective over a whole tree is one call per dtype (as DDP's gradient buckets).

use super::error::DistError;
use tensor_core::{DType, Tensor};
use tensor_runtime::realize::{realize, to_vec};

/// The elements of one dtype, the unit a backend moves.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HostBuf {
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `u8` elements.
    U8(Vec<u8>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `u64` elements.
    U64(Vec<u64>),
}

/// Runs `$body` with `$v` bound to the buffer's vector, whatever its element type.
macro_rules! each_buf {
    ($buf:expr, $v:ident => $body:expr) => {
        match $buf {
            HostBuf::F32($v) => $body,
            HostBuf::F64($v) => $body,
            HostBuf::I32($v) => $body,
            HostBuf::I64($v) => $body,
            HostBuf::U8($v) => $body,
            HostBuf::U32($v) => $body,
            HostBuf::U64($v) => $body,
        }
    };
}
#[cfg_attr(not(any(feature = "mpi", feature = "nccl")), allow(unused_imports))]
pub(crate) use each_buf;

/// Builds a `HostBuf` of the same variant as `$like` from `$v` (a `Vec` of that element type),
/// with `$body` run per variant.
#[cfg_attr(not(any(feature = "mpi", feature = "nccl")), allow(unused_macros))]
macro_rules! map_buf {
    ($buf:expr, $v:ident => $body:expr) => {
        match $buf {
            HostBuf::F32($v) => HostBuf::F32($body),
            HostBuf::F64($v) => HostBuf::F64($body),
            HostBuf::I32($v) => HostBuf::I32($body),
            HostBuf::I64($v) => HostBuf::I64($body),
            HostBuf::U8($v) => HostBuf::U8($body),
            HostBuf::U32($v) => HostBuf::U32($body),
            HostBuf::U64($v) => HostBuf::U64($body),
        }
    };
}
#[cfg_attr(not(any(feature = "mpi", feature = "nccl")), allow(unused_imports))]
pub(crate) use map_buf;

impl HostBuf {
    /// An empty buffer of `dtype`, or `None` for a dtype collectives do not carry.
    pub(crate) fn empty(dtype: DType) -> Option<HostBuf> {
        Some(match dtype {
            DType::F32 => HostBuf::F32(Vec::new()),
            DType::F64 => HostBuf::F64(Vec::new()),
            DType::I32 => HostBuf::I32(Vec::new()),
            DType::I64 => HostBuf::I64(Vec::new()),
            DType::U8 => HostBuf::U8(Vec::new()),
            DType::U32 => HostBuf::U32(Vec::new()),
            DType::U64 => HostBuf::U64(Vec::new()),
            _ => return None,
        })
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        each_buf!(self, v => v.len())
    }

    /// Whether there are no elements.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the elements of `tensor` (already computed), which has this buffer's dtype.
    fn append(&mut self, tensor: &Tensor) -> Result<(), DistError> {
        match self {
            HostBuf::F32(v) => v.extend(to_vec::<f32>(tensor)?),
            HostBuf::F64(v) => v.extend(to_vec::<f64>(tensor)?),
            HostBuf::I32(v) => v.extend(to_vec::<i32>(tensor)?),
            HostBuf::I64(v) => v.extend(to_vec::<i64>(tensor)?),
            HostBuf::U8(v) => v.extend(to_vec::<u8>(tensor)?),
            HostBuf::U32(v) => v.extend(to_vec::<u32>(tensor)?),
            HostBuf::U64(v) => v.extend(to_vec::<u64>(tensor)?),
        }
        Ok(())
    }

    /// Elements `start..start + len` as a tensor of `shape`.
    fn tensor(&self, start: usize, len: usize, shape: &[usize]) -> Tensor {
        let range = start..start + len;
        each_buf!(self, v => Tensor::from_vec(v[range].to_vec(), shape))
    }

    /// Divides every element by `n` (floats only: the caller checked).
    pub(crate) fn divide(&mut self, n: usize) {
        match self {
            HostBuf::F32(v) => v.iter_mut().for_each(|x| *x /= n as f32),
            HostBuf::F64(v) => v.iter_mut().for_each(|x| *x /= n as f64),
            _ => unreachable!("a mean of integers is refused before the call"),
        }
    }
}

/// Where each leaf of a tree lies in the per-dtype buffers.
#[derive(Clone, Debug)]
pub(crate) struct Layout {
    /// Per leaf: its buffer's index, its first element there, its element count and shape.
    leaves: Vec<(usize, usize, usize, Vec<usize>)>,
    /// The dtypes of the buffers, in order.
    pub(crate) dtypes: Vec<DType>,
}

impl Layout {
    /// A short text of the shapes and dtypes, identical on ranks that agree.
    pub(crate) fn describe(&self) -> String {
        self.leaves
            .iter()
            .map(|(b, _, _, shape)| format!("{:?}{shape:?}", self.dtypes[*b]))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Fails unless every leaf has a dtype collectives carry.
pub(crate) fn check_dtypes(call: &'static str, leaves: &[Tensor]) -> Result<(), DistError> {
    match leaves.iter().find(|l| HostBuf::empty(l.dtype()).is_none()) {
        Some(leaf) => Err(unsupported(call, leaf.dtype())),
        None => Ok(()),
    }
}

fn unsupported(call: &'static str, dtype: DType) -> DistError {
    DistError::DType {
        call,
        dtype,
        reason: "collectives carry f32, f64, i32, i64, u8, u32 and u64 tensors; cast it first",
    }
}

/// The leaves' elements, computed in one plan and packed into one buffer per dtype (in the
/// order the dtypes first appear), and where each leaf lies.
pub(crate) fn pack(
    call: &'static str,
    leaves: &[Tensor],
) -> Result<(Vec<HostBuf>, Layout), DistError> {
    realize(&leaves.iter().collect::<Vec<_>>())?;
    let mut buffers: Vec<HostBuf> = Vec::new();
    let mut layout = Layout {
        leaves: Vec::with_capacity(leaves.len()),
        dtypes: Vec::new(),
    };
    for leaf in leaves {
        let dtype = leaf.dtype();
        let index = match layout.dtypes.iter().position(|&d| d == dtype) {
            Some(i) => i,
            None => {
                let empty = HostBuf::empty(dtype).ok_or_else(|| unsupported(call, dtype))?;
                buffers.push(empty);
                layout.dtypes.push(dtype);
                buffers.len() - 1
            }
        };
        let start = buffers[index].len();
        buffers[index].append(leaf)?;
        let len = buffers[index].len() - start;
        layout
            .leaves
            .push((index, start, len, leaf.shape().to_vec()));
    }
    Ok((buffers, layout))
}

/// The leaves back from buffers laid out as `layout` (after a reduction or a broadcast).
pub(crate) fn unpack(buffers: &[HostBuf], layout: &Layout) -> Vec<Tensor> {
    layout
        .leaves
        .iter()
        .map(|(b, start, len, shape)| buffers[*b].tensor(*start, *len, shape))
        .collect()
}

/// The leaves of an all-gather: buffers holding every rank's packed buffer one after another;
/// each leaf becomes the stack of its `ranks` copies along a new axis 0.
pub(crate) fn unpack_stacked(buffers: &[HostBuf], layout: &Layout, ranks: usize) -> Vec<Tensor> {
    layout
        .leaves
        .iter()
        .map(|(b, start, len, shape)| {
            let per_rank = buffers[*b].len() / ranks;
            let mut stacked = vec![ranks];
            stacked.extend(shape);
            each_buf!(&buffers[*b], v => {
                let mut out = Vec::with_capacity(ranks * len);
                for r in 0..ranks {
                    let from = r * per_rank + start;
                    out.extend_from_slice(&v[from..from + len]);
                }
                Tensor::from_vec(out, &stacked)
            })
        })
        .collect()
}
