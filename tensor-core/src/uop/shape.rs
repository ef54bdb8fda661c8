//! Derived shapes (tinyspec "Derived Properties", shape column).
//!
//! `derive` never panics: a node whose operands do not fit its op has no shape, and
//! `spec::check` says what is wrong with it. Neither has a node whose element count passes
//! [`MAX_ELEMENTS`]: every size, offset and byte count computed from a derived shape is then
//! free of overflow (in `usize` and in the kernels' 64-bit index arithmetic).

use super::affine;
use super::{Arg, DType, Op, Shape, UOp, tuple_body};

/// The most elements a shape may have: 2^48 (a petabyte of `f32`), far beyond any memory,
/// and low enough that element counts times element sizes, and the index arithmetic of the
/// kernels (sums of a few products of sizes), never overflow a signed 64-bit integer.
pub const MAX_ELEMENTS: usize = 1 << 48;

/// The number of elements of `shape`, if it and every axis are at most [`MAX_ELEMENTS`] (an
/// empty tensor may not have an axis of `usize::MAX` either; computed without
/// wrapping: `[2^40, 2^40]` has no count, where a wrapping product would say 0).
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    if shape.iter().any(|&d| d > MAX_ELEMENTS) {
        return None;
    }
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
}

/// The values of a shape operand (an index `Vconst`, or an index `Const` for one axis).
pub fn operand_values(u: &UOp) -> Option<Vec<usize>> {
    match (u.op(), u.arg()) {
        (Op::Vconst, Arg::Vconst(vals)) => vals
            .iter()
            .map(|v| usize::try_from(v.as_i64()).ok())
            .collect(),
        (Op::Const, Arg::Const(v)) => usize::try_from(v.as_i64()).ok().map(|v| vec![v]),
        _ => None,
    }
}

/// The entries of a window operand (the begins or ends of a `Pad` or `Shrink`) as index
/// expressions: the values of an index `Vconst` or `Const`, or the parts of a `Stack` of index
/// scalars, which may vary with a `Range` (a window that slides with a loop).
pub fn operand_exprs(u: &UOp) -> Option<Vec<UOp>> {
    if let Some(values) = operand_values(u) {
        return Some(values.into_iter().map(|v| UOp::index(v as i64)).collect());
    }
    let scalar_index = |p: &UOp| p.dtype() == DType::Index && p.shape() == Some(&[]);
    (u.op() == Op::Stack && u.src().iter().all(scalar_index)).then(|| u.src().to_vec())
}

/// NumPy broadcasting: right-align, each axis equal or 1, take the larger.
pub fn broadcast(shapes: &[&[usize]]) -> Option<Shape> {
    let ndim = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; ndim];
    for shape in shapes {
        let offset = ndim - shape.len();
        for (i, &d) in shape.iter().enumerate() {
            let o = &mut out[offset + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

/// The shape of `u` from its op, operands and arg, or `None` where it has none (including a
/// shape of more than [`MAX_ELEMENTS`] elements).
pub fn derive(u: &UOp) -> Option<Shape> {
    derive_any_size(u).filter(|s| checked_numel(s).is_some())
}

fn derive_any_size(u: &UOp) -> Option<Shape> {
    let src_shape = |i: usize| u.src().get(i).and_then(|s| s.shape()).map(|s| s.to_vec());
    match u.op() {
        Op::Buffer => match u.arg() {
            Arg::Buffer(b) => Some(vec![b.size]),
            _ => None,
        },
        Op::Param => operand_values(u.src().first()?),
        Op::Const | Op::DefineVar | Op::Range | Op::Load => Some(vec![]),
        Op::Vconst => match u.arg() {
            Arg::Vconst(v) => Some(vec![v.len()]),
            _ => None,
        },
        Op::Reshape => reshape(&src_shape(0)?, &operand_values(u.src().get(1)?)?),
        Op::Expand => expand(&src_shape(0)?, &operand_values(u.src().get(1)?)?),
        Op::Permute => match u.arg() {
            Arg::Permutation(p) => permute(&src_shape(0)?, p),
            _ => None,
        },
        Op::Flip => match u.arg() {
            Arg::Flags(f) if f.len() == src_shape(0)?.len() => src_shape(0),
            _ => None,
        },
        Op::Pad | Op::Shrink => window(u),
        Op::Index => index(u),
        Op::Stack => {
            let first = src_shape(0)?;
            let all_equal = u.src().iter().all(|s| s.shape() == Some(first.as_slice()));
            all_equal.then(|| [vec![u.src().len()], first].concat())
        }
        Op::Reduce => match u.arg() {
            Arg::Reduce(_, axes) => {
                let mut s = src_shape(0)?;
                for &a in axes {
                    *s.get_mut(a)? = 1;
                }
                Some(s)
            }
            _ => None,
        },
        Op::GetTuple => {
            let idx = match u.arg() {
                Arg::Int(i) => usize::try_from(*i).ok()?,
                _ => return None,
            };
            tuple_body(u.src().first()?)?
                .src()
                .get(idx)?
                .shape()
                .map(|s| s.to_vec())
        }
        Op::Vmapin => vmapin(u),
        Op::Vmapout => vmapout(u),
        Op::Contiguous | Op::ContiguousBackward | Op::Detach | Op::Copy => src_shape(0),
        Op::Cast | Op::Bitcast => src_shape(0),
        op if op.is_elementwise() => {
            let shapes: Option<Vec<Shape>> = u
                .src()
                .iter()
                .map(|s| s.shape().map(|s| s.to_vec()))
                .collect();
            let shapes = shapes?;
            let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
            broadcast(&refs)
        }
        _ => None,
    }
}

/// The shape of `Pad(x, b, e)` (each axis grows by `b + e`) or `Shrink(x, b, e)` (each axis
/// keeps `[b, e)`). Entries that vary with a range must still give every value of the range
/// the same size, and stay within the axis (`Shrink`) or be non-negative (`Pad`).
fn window(u: &UOp) -> Option<Shape> {
    let from = u.src().first()?.shape()?.to_vec();
    let (Some(begins), Some(ends)) = (
        operand_values(u.src().get(1)?),
        operand_values(u.src().get(2)?),
    ) else {
        return sliding_window(u, &from);
    };
    if begins.len() != from.len() || ends.len() != from.len() {
        return None;
    }
    let axes = from.iter().zip(begins.iter().zip(&ends));
    if u.op() == Op::Pad {
        return Some(axes.map(|(d, (b, e))| d + b + e).collect());
    }
    let fits = axes.clone().all(|(d, (b, e))| b <= e && e <= d);
    fits.then(|| axes.map(|(_, (b, e))| e - b).collect())
}

/// `window` for entries that are index expressions (see [`operand_exprs`]).
fn sliding_window(u: &UOp, from: &[usize]) -> Option<Shape> {
    let begins = operand_exprs(u.src().get(1)?)?;
    let ends = operand_exprs(u.src().get(2)?)?;
    if begins.len() != from.len() || ends.len() != from.len() {
        return None;
    }
    let non_negative = |x: &UOp| x.vmin().as_i64() >= 0;
    from.iter()
        .zip(begins.iter().zip(&ends))
        .map(|(&d, (b, e))| match u.op() {
            Op::Pad => {
                let grows = constant_value(&UOp::alu(Op::Add, vec![b.clone(), e.clone()]))?;
                (non_negative(b) && non_negative(e)).then_some(d + grows)
            }
            _ => {
                let minus_b = UOp::alu(Op::Mul, vec![b.clone(), UOp::index(-1)]);
                let size = constant_value(&UOp::alu(Op::Add, vec![e.clone(), minus_b]))?;
                let inside = non_negative(b) && e.vmax().as_i64() <= d as i64;
                inside.then_some(size)
            }
        })
        .collect()
}

/// The non-negative value an index expression always has, if its affine form is a constant
/// (`uop::affine`: shape derivation uses no rewrite rules).
fn constant_value(x: &UOp) -> Option<usize> {
    affine::constant_value(x).and_then(|v| usize::try_from(v).ok())
}

fn reshape(from: &[usize], to: &[usize]) -> Option<Shape> {
    let same_count = checked_numel(to).is_some() && checked_numel(from) == checked_numel(to);
    same_count.then(|| to.to_vec())
}

fn expand(from: &[usize], to: &[usize]) -> Option<Shape> {
    let fits = from.len() == to.len() && from.iter().zip(to).all(|(&f, &t)| f == t || f == 1);
    fits.then(|| to.to_vec())
}

fn permute(from: &[usize], perm: &[usize]) -> Option<Shape> {
    let mut seen = vec![false; from.len()];
    if perm.len() != from.len() {
        return None;
    }
    for &p in perm {
        if p >= from.len() || std::mem::replace(&mut seen[p], true) {
            return None;
        }
    }
    Some(perm.iter().map(|&p| from[p]).collect())
}

fn index(u: &UOp) -> Option<Shape> {
    let base = u.src().first()?.shape()?;
    let idx = &u.src()[1..];
    if idx.len() > base.len() {
        return None;
    }
    let mut out = Vec::new();
    for i in idx {
        match i.shape()? {
            [] => {}
            [k] => out.push(*k),
            _ => return None,
        }
    }
    out.extend_from_slice(&base[idx.len()..]);
    Some(out)
}

fn is_zero_varg(a: &UOp) -> bool {
    a.op() == Op::Const && a.const_value().is_some_and(|v| v.as_i64() == 0)
}

fn range_bound(a: &UOp) -> Option<usize> {
    (a.op() == Op::Range)
        .then(|| a.src().first()?.const_value())
        .flatten()
        .and_then(|v| usize::try_from(v.as_i64()).ok())
}

fn vmapin(u: &UOp) -> Option<Shape> {
    let base = u.src().first()?.shape()?;
    let vargs = &u.src()[1..];
    if base.len() != vargs.len() {
        return None;
    }
    let mut out = Vec::new();
    for (d, a) in base.iter().zip(vargs) {
        if is_zero_varg(a) {
            out.push(*d);
        } else if range_bound(a) != Some(*d) {
            return None;
        }
    }
    Some(out)
}

fn vmapout(u: &UOp) -> Option<Shape> {
    let inner = u.src().first()?.shape()?;
    let vargs = &u.src()[1..];
    if vargs.iter().filter(|a| is_zero_varg(a)).count() != inner.len() {
        return None;
    }
    let mut inner = inner.iter();
    vargs
        .iter()
        .map(|a| {
            if is_zero_varg(a) {
                inner.next().copied()
            } else {
                range_bound(a)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::{AxisType, DType, Device};

    fn buf(shape: &[usize]) -> UOp {
        let n = shape.iter().product();
        UOp::new_buffer(n, DType::F32, Device::cpu()).reshape(shape)
    }

    #[test]
    fn broadcasting_right_aligns_and_rejects_mismatches() {
        assert_eq!(broadcast(&[&[3, 1], &[4]]), Some(vec![3, 4]));
        assert_eq!(broadcast(&[&[], &[2, 2]]), Some(vec![2, 2]));
        assert_eq!(broadcast(&[&[0, 1], &[1, 5]]), Some(vec![0, 5]));
        assert_eq!(broadcast(&[&[3], &[4]]), None);
    }

    #[test]
    fn movement_shapes_follow_tinyspec() {
        let x = buf(&[2, 3]);
        assert_eq!(x.permute(&[1, 0]).shape(), Some(&[3, 2][..]));
        assert_eq!(x.pad(&[1, 0], &[0, 2]).shape(), Some(&[3, 5][..]));
        assert_eq!(x.shrink(&[0, 1], &[1, 3]).shape(), Some(&[1, 2][..]));
        assert_eq!(
            x.reduce(crate::uop::ReduceOp::Add, &[1]).shape(),
            Some(&[2, 1][..])
        );
        assert_eq!(
            x.reshape(&[6, 1]).expand(&[6, 4]).shape(),
            Some(&[6, 4][..])
        );
        assert_eq!(x.reshape(&[5]).shape(), None);
        assert_eq!(
            UOp::stack(vec![x.clone(), x.clone()]).shape(),
            Some(&[2, 2, 3][..])
        );
    }

    #[test]
    fn vmapin_drops_and_vmapout_reinserts_the_range_axis() {
        let x = buf(&[3, 6]);
        let r = UOp::range(3, 0, AxisType::Loop);
        let inner = x.vmapin(&[r.clone(), UOp::index(0)]);
        assert_eq!(inner.shape(), Some(&[6][..]));
        let out = inner.vmapout(&[r, UOp::index(0)]);
        assert_eq!(out.shape(), Some(&[3, 6][..]));
    }
}
