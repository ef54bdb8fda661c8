//! Movement ops on host arrays: each output element is read from one input position (or is
//! the padding zero), written as the index map tinyspec states.

use super::host_array::{HostArray, for_each_offset, strides};
use crate::uop::{Scalar, Shape};

/// The same elements in row-major order under another shape.
#[track_caller]
pub fn reshape(x: &HostArray, shape: &[usize]) -> HostArray {
    let numel: usize = shape.iter().product();
    assert_eq!(
        numel,
        x.numel(),
        "interp Reshape: shape {:?} cannot become {shape:?}",
        x.shape
    );
    HostArray {
        dtype: x.dtype,
        shape: shape.to_vec(),
        data: x.data.clone(),
    }
}

/// Size-1 axes repeated to `shape`.
#[track_caller]
pub fn expand(x: &HostArray, shape: &[usize]) -> HostArray {
    let fits =
        x.ndim() == shape.len() && x.shape.iter().zip(shape).all(|(&d, &t)| d == t || d == 1);
    assert!(
        fits,
        "interp Expand: shape {:?} cannot expand to {shape:?}",
        x.shape
    );
    broadcast_to(x, shape)
}

/// `x` read at every index of `shape`, right-aligned, with size-1 axes repeated (NumPy
/// broadcasting). The caller has checked that the shapes are compatible.
pub fn broadcast_to(x: &HostArray, shape: &[usize]) -> HostArray {
    let source_strides = [broadcast_strides(&x.shape, shape.len())];
    let mut data = Vec::with_capacity(shape.iter().product());
    for_each_offset(shape, &source_strides, |offset| {
        data.push(x.data[offset[0]])
    });
    HostArray {
        dtype: x.dtype,
        shape: shape.to_vec(),
        data,
    }
}

/// Strides that read an array of `shape` right-aligned into `ndim` axes, 0 on broadcast axes.
pub fn broadcast_strides(shape: &[usize], ndim: usize) -> Vec<usize> {
    let own = strides(shape);
    let lead = ndim - shape.len();
    (0..ndim)
        .map(|k| match k.checked_sub(lead) {
            Some(j) if shape[j] != 1 => own[j],
            _ => 0,
        })
        .collect()
}

/// Axes reordered: axis `k` of the result is axis `perm[k]` of `x`.
#[track_caller]
pub fn permute(x: &HostArray, perm: &[usize]) -> HostArray {
    let mut sorted = perm.to_vec();
    sorted.sort_unstable();
    assert!(
        sorted == (0..x.ndim()).collect::<Vec<_>>(),
        "interp Permute: {perm:?} is not a permutation of the axes of shape {:?}",
        x.shape
    );
    let shape: Shape = perm.iter().map(|&p| x.shape[p]).collect();
    let mut source = vec![0; x.ndim()];
    HostArray::from_fn(x.dtype, &shape, |idx| {
        for (k, &p) in perm.iter().enumerate() {
            source[p] = idx[k];
        }
        x.get(&source)
    })
}

/// Flagged axes reversed.
#[track_caller]
pub fn flip(x: &HostArray, flags: &[bool]) -> HostArray {
    assert_eq!(
        flags.len(),
        x.ndim(),
        "interp Flip: {} flags for shape {:?}",
        flags.len(),
        x.shape
    );
    let mut source = vec![0; x.ndim()];
    HostArray::from_fn(x.dtype, &x.shape, |idx| {
        for k in 0..idx.len() {
            source[k] = if flags[k] {
                x.shape[k] - 1 - idx[k]
            } else {
                idx[k]
            };
        }
        x.get(&source)
    })
}

/// `begins[k]` zeros before and `ends[k]` zeros after each axis `k`.
#[track_caller]
pub fn pad(x: &HostArray, begins: &[usize], ends: &[usize]) -> HostArray {
    check_per_axis("Pad", x, begins, ends);
    let shape: Shape = (0..x.ndim())
        .map(|k| begins[k] + x.shape[k] + ends[k])
        .collect();
    let zero = Scalar::Int(0).cast(x.dtype);
    let mut source = vec![0; x.ndim()];
    HostArray::from_fn(x.dtype, &shape, |idx| {
        for k in 0..idx.len() {
            match idx[k].checked_sub(begins[k]) {
                Some(i) if i < x.shape[k] => source[k] = i,
                _ => return zero,
            }
        }
        x.get(&source)
    })
}

/// The window `[begins[k], ends[k])` of each axis `k`.
#[track_caller]
pub fn shrink(x: &HostArray, begins: &[usize], ends: &[usize]) -> HostArray {
    check_per_axis("Shrink", x, begins, ends);
    let fits = (0..x.ndim()).all(|k| begins[k] <= ends[k] && ends[k] <= x.shape[k]);
    assert!(
        fits,
        "interp Shrink: window {begins:?}..{ends:?} is not inside shape {:?}",
        x.shape
    );
    let shape: Shape = (0..x.ndim()).map(|k| ends[k] - begins[k]).collect();
    let mut source = vec![0; x.ndim()];
    HostArray::from_fn(x.dtype, &shape, |idx| {
        for k in 0..idx.len() {
            source[k] = begins[k] + idx[k];
        }
        x.get(&source)
    })
}

#[track_caller]
fn check_per_axis(op: &str, x: &HostArray, begins: &[usize], ends: &[usize]) {
    assert!(
        begins.len() == x.ndim() && ends.len() == x.ndim(),
        "interp {op}: begins {begins:?} and ends {ends:?} do not match shape {:?}",
        x.shape
    );
}

/// `x` indexed from the left: a shape-`()` index picks one position and removes the axis, a
/// shape-`(k,)` index gathers `k` positions along the axis. Axes past the indices are kept.
#[track_caller]
pub fn index(x: &HostArray, indices: &[HostArray]) -> HostArray {
    assert!(
        indices.len() <= x.ndim(),
        "interp Index: {} indices for shape {:?}",
        indices.len(),
        x.shape
    );
    let positions: Vec<Vec<usize>> = indices
        .iter()
        .enumerate()
        .map(|(axis, i)| index_positions(i, axis, x.shape[axis]))
        .collect();
    let mut shape = Shape::new();
    for (i, p) in indices.iter().zip(&positions) {
        if i.ndim() == 1 {
            shape.push(p.len());
        }
    }
    shape.extend_from_slice(&x.shape[indices.len()..]);
    let mut source = vec![0; x.ndim()];
    HostArray::from_fn(x.dtype, &shape, |idx| {
        let mut out_axis = 0;
        for (axis, (i, p)) in indices.iter().zip(&positions).enumerate() {
            if i.ndim() == 1 {
                source[axis] = p[idx[out_axis]];
                out_axis += 1;
            } else {
                source[axis] = p[0];
            }
        }
        source[indices.len()..].copy_from_slice(&idx[out_axis..]);
        x.get(&source)
    })
}

#[track_caller]
fn index_positions(index: &HostArray, axis: usize, size: usize) -> Vec<usize> {
    assert!(
        index.ndim() <= 1 && (index.dtype.is_int()),
        "interp Index: the index for axis {axis} must be an integer of shape () or (k,), got {} of shape {:?}",
        index.dtype,
        index.shape
    );
    index
        .data
        .iter()
        .map(|v| {
            let i = v.as_i64();
            assert!(
                (0..size as i64).contains(&i),
                "interp Index: position {i} is outside axis {axis} of size {size}"
            );
            i as usize
        })
        .collect()
}

/// The parts joined along a new leading axis.
#[track_caller]
pub fn stack(parts: &[&HostArray]) -> HostArray {
    let first = parts.first().expect("interp Stack: no parts");
    for p in parts {
        assert!(
            p.shape == first.shape && p.dtype == first.dtype,
            "interp Stack: parts differ: {} {:?} and {} {:?}",
            first.dtype,
            first.shape,
            p.dtype,
            p.shape
        );
    }
    let mut shape = vec![parts.len()];
    shape.extend_from_slice(&first.shape);
    let data = parts.iter().flat_map(|p| p.data.iter().copied()).collect();
    HostArray {
        dtype: first.dtype,
        shape,
        data,
    }
}

/// `x` with some axes fixed: `Some(i)` reads position `i` of that axis and drops it, `None`
/// keeps the axis (the slice a `Vmapin` takes at the current range values).
#[track_caller]
pub fn select(x: &HostArray, fixed: &[Option<usize>]) -> HostArray {
    assert_eq!(
        fixed.len(),
        x.ndim(),
        "interp: select on shape {:?}",
        x.shape
    );
    let shape: Shape = x
        .shape
        .iter()
        .zip(fixed)
        .filter(|(_, f)| f.is_none())
        .map(|(&d, _)| d)
        .collect();
    let mut source = vec![0; x.ndim()];
    HostArray::from_fn(x.dtype, &shape, |idx| {
        let mut kept = idx.iter();
        for (k, f) in fixed.iter().enumerate() {
            source[k] = match f {
                Some(i) => *i,
                None => *kept.next().expect("one kept index per kept axis"),
            };
        }
        x.get(&source)
    })
}
