//! Joining and indexing: `cat` (each part padded into place, then added; many parts in
//! stored groups of [`CAT_FANOUT`]), `stack` (`cat` of unsqueezed parts), `gather`/`take` (a
//! one-hot mask from an arange compared with the indices, then a sum: tinyspec's gather),
//! `scatter_add` (the same mask, summed the other way: tinyspec's scatter_add) and `one_hot`.
//!
//! Indices are data, so they cannot be checked while the graph is built: a negative index
//! counts from the end, and an index outside the axis selects nothing (the result is 0).

use super::Tensor;
use super::broadcast::{
    addressable, axis_in, broadcast_uop, cast_uop, const_uop, normalize_axis, require_addressable,
};
use super::create::{INDEX_DTYPE, arange_uop};
use super::elementwise::{add_uop, eq_uop, lt_uop, where_uop};
use super::error::ShapeError;
use super::reduce::reduce_uop;
use crate::uop::{DType, Op, ReduceOp, Scalar, Shape, UOp};

impl Tensor {
    /// The tensors joined along the existing axis `axis` (NumPy's `concatenate`); every other
    /// axis must match. Dtypes promote to one.
    ///
    /// ```
    /// # use tensor_core::Tensor;
    /// let a = Tensor::zeros(&[2, 3], tensor_core::DType::F32);
    /// assert_eq!(Tensor::cat(&[a.clone(), a.clone()], 0).shape(), vec![4, 3]);
    /// assert_eq!(Tensor::stack(&[a.clone(), a], -1).shape(), vec![2, 3, 2]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an empty list, 0-d tensors, an axis out of range, shapes that differ off `axis` or a
    /// result with more elements than a tensor may hold; [`Tensor::try_cat`] returns the error.
    #[track_caller]
    pub fn cat(tensors: &[Tensor], axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("cat");
        match Tensor::try_cat(tensors, axis) {
            Ok(v) => v,
            Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
        }
    }

    /// [`Tensor::cat`], with tensors that cannot be joined as an error instead of a panic (the
    /// message is the one `cat` panics with).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType};
    /// let (a, b) = (Tensor::zeros(&[2, 3], DType::F32), Tensor::zeros(&[2, 4], DType::F32));
    /// assert_eq!(Tensor::try_cat(&[a.clone(), b.clone()], 1).unwrap().shape(), vec![2, 7]);
    /// let err = Tensor::try_cat(&[a, b], 0).unwrap_err();
    /// assert_eq!(err.message, "cat: shapes [2, 3] and [2, 4] differ outside axis 0");
    /// ```
    pub fn try_cat(tensors: &[Tensor], axis: isize) -> Result<Tensor, ShapeError> {
        let (ax, _) = cat_axis(tensors, axis).map_err(|m| ShapeError::new("cat", m))?;
        let dtype = tensors
            .iter()
            .map(Tensor::dtype)
            .fold(DType::Bool, DType::promote);
        if let [only] = tensors {
            return Ok(only.cast(dtype));
        }
        let parts: Vec<UOp> = tensors.iter().map(|t| cast_uop(&t.uop(), dtype)).collect();
        let joined = joined_in_groups(&parts, ax);
        Ok(Tensor::from_uop(joined))
    }

    /// The tensors (all of one shape) joined along a new axis `axis` of the result (NumPy's
    /// `stack`).
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let (a, b) = (Tensor::from_vec(vec![1, 2], &[2]), Tensor::from_vec(vec![3, 4], &[2]));
    /// let s = Tensor::stack(&[a, b], 1);
    /// assert_eq!(s.shape(), vec![2, 2]);
    /// assert_eq!(evaluate(&s.uop()).to_vec::<i32>(), vec![1, 3, 2, 4]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an empty list, shapes that differ or an axis out of range; [`Tensor::try_stack`]
    /// returns the error.
    #[track_caller]
    pub fn stack(tensors: &[Tensor], axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("stack");
        match Tensor::try_stack(tensors, axis) {
            Ok(v) => v,
            Err(e) => panic!("{}", super::op_scope::as_called(&e.to_string())),
        }
    }

    /// [`Tensor::stack`], with tensors that cannot be stacked as an error instead of a panic
    /// (the message is the one `stack` panics with).
    ///
    /// ```
    /// # use tensor_core::{Tensor, DType};
    /// let (a, b) = (Tensor::zeros(&[2], DType::F32), Tensor::zeros(&[3], DType::F32));
    /// let err = Tensor::try_stack(&[a.clone(), b], 0).unwrap_err();
    /// assert_eq!(err.message, "stack: shapes [2] and [3] differ");
    /// assert!(Tensor::try_stack(&[a.clone(), a], 2).is_err()); // axes -2..=1 only
    /// ```
    pub fn try_stack(tensors: &[Tensor], axis: isize) -> Result<Tensor, ShapeError> {
        let fail = |m: String| ShapeError::new("stack", m);
        let first = match tensors.first() {
            Some(t) => t.shape(),
            None => return Err(fail("stack: needs at least one tensor".into())),
        };
        if let Some(t) = tensors[1..].iter().find(|t| t.shape() != first) {
            return Err(fail(format!(
                "stack: shapes {first:?} and {:?} differ",
                t.shape()
            )));
        }
        let ax = axis_in("stack", axis, first.len() + 1, &first).map_err(fail)? as isize;
        let parts: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(ax)).collect();
        Tensor::try_cat(&parts, ax)
    }

    /// PyTorch's `gather`: `out[.., j, ..] = self[.., index[.., j, ..], ..]` along `axis`. The
    /// index shape is the output shape: `index` has as many axes as `self`, and on every other axis
    /// it may be shorter than `self` (the leading part of `self` is read) but not longer. For
    /// NumPy's broadcasting rule use [`Tensor::take_along_axis`].
    ///
    /// The three ways to pick along one axis, each under its library's name and argument
    /// order:
    ///
    /// | call | from | index shape | result shape |
    /// |---|---|---|---|
    /// | `x.gather(axis, &idx)` | PyTorch `torch.gather(x, axis, idx)` | as many axes as `x`, none longer than `x`'s | `idx`'s |
    /// | `x.take_along_axis(&idx, axis)` | NumPy `np.take_along_axis(x, idx, axis)` | as many axes as `x`, others broadcast | `idx`'s along `axis`, broadcast elsewhere |
    /// | `x.take(&idx, axis)` | NumPy `np.take(x, idx, axis)` | any | `x.shape[..axis] + idx.shape + x.shape[axis+1..]` |
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![10, 11, 12, 20, 21, 22], &[2, 3]);
    /// let idx = Tensor::from_vec(vec![2, 0], &[2, 1]);
    /// let g = x.gather(1, &idx);                        // torch.gather(x, 1, idx)
    /// assert_eq!(evaluate(&g.uop()).to_vec::<i32>(), vec![12, 20]);
    /// let t = x.take_along_axis(&idx, 1);               // np.take_along_axis(x, idx, 1)
    /// assert_eq!(evaluate(&t.uop()).to_vec::<i32>(), vec![12, 20]);
    /// let rows = x.take(&Tensor::from_vec(vec![1, 1, 0], &[3]), 0); // np.take(x, [1, 1, 0], 0)
    /// assert_eq!(rows.shape(), vec![3, 3]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on a non-integer index, a rank mismatch or an index axis longer than the input's.
    #[track_caller]
    pub fn gather(&self, axis: isize, index: &Tensor) -> Tensor {
        let _op = super::op_scope::OpScope::enter("gather");
        let (s, i) = (self.shape(), index.shape());
        require_int_index("gather", index);
        if s.len() != i.len() || s.is_empty() {
            panic!(
                "gather: index shape {i:?} must have as many axes as the input shape {s:?} (at least one)"
            );
        }
        let ax = normalize_axis("gather", axis, &s);
        let mut bounds = Vec::with_capacity(s.len());
        for (d, (&a, &b)) in s.iter().zip(&i).enumerate() {
            if d != ax && b > a {
                panic!(
                    "gather: index shape {i:?} does not fit input shape {s:?} outside axis {axis}: axis {d} of the index ({b}) is longer than the input's ({a})"
                );
            }
            bounds.push((0, if d == ax { a } else { b }));
        }
        self.shrink(&bounds).take_along_axis(index, axis)
    }

    /// NumPy's `take_along_axis`: `out[.., j, ..] = self[.., index[.., j, ..], ..]` along `axis`,
    /// where `index` has as many axes as `self`, its other axes broadcast against `self`'s, and the
    /// result has `index`'s size along `axis` (compared with `gather` and `take` at
    /// [`Tensor::gather`]).
    ///
    /// # Panics
    ///
    /// Panics on a non-integer index, an axis out of range, an index with another number of axes
    /// or shapes that do not broadcast.
    #[track_caller]
    pub fn take_along_axis(&self, index: &Tensor, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("take_along_axis");
        let (s, i) = (self.shape(), index.shape());
        require_int_index("take_along_axis", index);
        if s.len() != i.len() || s.is_empty() {
            panic!(
                "take_along_axis: index shape {i:?} must have as many axes as the input shape {s:?} (at least one)"
            );
        }
        let ax = normalize_axis("take_along_axis", axis, &s);
        let mut out: Shape = Vec::with_capacity(s.len());
        for (d, (&a, &b)) in s.iter().zip(&i).enumerate() {
            if d != ax && a != b && a != 1 && b != 1 {
                panic!(
                    "take_along_axis: index shape {i:?} does not broadcast with input shape {s:?} outside axis {axis}"
                );
            }
            out.push(if d == ax { b } else { a.max(b) });
        }
        require_addressable("take_along_axis", &out);
        let k = s[ax];
        // Work in ndim+1 axes: axis `ax` walks the input's K positions, `ax + 1` the index's n.
        let mut full = out.clone();
        full.insert(ax, k);
        require_addressable("take_along_axis", &full);
        let values = self.uop().reshape(&insert_at(&s, ax + 1, 1));
        let idx = wrap_negative(&index.uop(), k).reshape(&insert_at(&i, ax, 1));
        let mut along = vec![1; full.len()];
        along[ax] = k;
        let positions = positions_like(&idx, k).reshape(&along);
        let picked = select_and_sum(&values, &idx, &positions, &full, ax);
        Tensor::from_uop(picked)
    }

    /// NumPy's `take`: the slices of `self` along `axis` at each of `indices` (any shape), so the
    /// result's shape is `self.shape[..axis] + indices.shape + self.shape[axis+1..]`. An embedding
    /// lookup is `table.take(&tokens, 0)` (compared with `gather` and `take_along_axis` at
    /// [`Tensor::gather`]).
    ///
    /// # Panics
    ///
    /// Panics on a non-integer index, an axis out of range or a result with more elements than a
    /// tensor may hold.
    #[track_caller]
    pub fn take(&self, indices: &Tensor, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("take");
        let s = self.shape();
        require_int_index("take", indices);
        let ax = normalize_axis("take", axis, &s);
        let (k, p) = (s[ax], indices.numel());
        let values = self.uop().reshape(&insert_at(&s, ax + 1, 1));
        let mut idx_shape = vec![1; s.len() + 1];
        idx_shape[ax + 1] = p;
        let idx = wrap_negative(&indices.uop(), k).reshape(&idx_shape);
        let mut along = vec![1; s.len() + 1];
        along[ax] = k;
        let positions = positions_like(&idx, k).reshape(&along);
        let mut full = insert_at(&s, ax + 1, p);
        full[ax] = k;
        require_addressable("take", &full);
        let picked = select_and_sum(&values, &idx, &positions, &full, ax);
        let out: Shape = [&s[..ax], indices.shape().as_slice(), &s[ax + 1..]].concat();
        Tensor::from_uop(picked.reshape(&out))
    }

    /// `self` plus `src` added at `index` along `axis`: `out[.., index[.., j, ..], ..] +=
    /// src[.., j, ..]` (PyTorch's `scatter_add`, the adjoint of [`Tensor::gather`]), built as
    /// tinyspec's scatter_add: a one-hot mask times `src`, summed over `j`. `index` and `src`
    /// have one shape, equal to `self`'s outside `axis`; repeated indices accumulate.
    ///
    /// # Panics
    ///
    /// On an index that is not of an integer type, an index and a source of different shapes, an
    /// axis out of range, or an index shape that differs from `self`'s outside `axis`.
    #[track_caller]
    pub fn scatter_add(&self, axis: isize, index: &Tensor, src: &Tensor) -> Tensor {
        let _op = super::op_scope::OpScope::enter("scatter_add");
        let (s, i) = (self.shape(), index.shape());
        require_int_index("scatter_add", index);
        if src.shape() != i {
            panic!(
                "scatter_add: index shape {i:?} and source shape {:?} differ",
                src.shape()
            );
        }
        let ax = normalize_axis("scatter_add", axis, &s);
        let fits = i.len() == s.len()
            && s.iter()
                .zip(&i)
                .enumerate()
                .all(|(d, (a, b))| d == ax || a == b);
        if !fits {
            panic!("scatter_add: index shape {i:?} does not fit shape {s:?} outside axis {axis}");
        }
        let k = s[ax];
        let full = insert_at(&s, ax + 1, i[ax]);
        require_addressable("scatter_add", &full);
        let idx = wrap_negative(&index.uop(), k).reshape(&insert_at(&i, ax, 1));
        let mut along = vec![1; full.len()];
        along[ax] = k;
        let positions = positions_like(&idx, k).reshape(&along);
        let dtype = DType::promote(self.dtype(), src.dtype());
        let values = cast_uop(&src.uop(), dtype).reshape(&insert_at(&i, ax, 1));
        let spread = select_and_sum(&values, &idx, &positions, &full, ax + 1);
        Tensor::from_uop(cast_uop(&self.uop(), dtype)).add(Tensor::from_uop(spread))
    }

    /// The labels as one-hot rows: shape `self.shape + [num_classes]`, `i64` as in PyTorch,
    /// with a 1 where the last index equals the label (labels outside `0..num_classes` give a
    /// zero row). [`Tensor::one_hot_as`] chooses the dtype.
    ///
    /// # Panics
    ///
    /// As [`Tensor::one_hot_as`] does.
    #[track_caller]
    pub fn one_hot(&self, num_classes: usize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("one_hot");
        self.one_hot_as(num_classes, DType::I64)
    }

    /// [`Tensor::one_hot`] with the result in `dtype` (`f32` for a target of a loss, say).
    ///
    /// # Panics
    ///
    /// When the labels are not of an integer type or the result would have more elements than a
    /// tensor may hold.
    #[track_caller]
    pub fn one_hot_as(&self, num_classes: usize, dtype: DType) -> Tensor {
        let _op = super::op_scope::OpScope::enter("one_hot_as");
        require_int_index("one_hot", self);
        let s = self.shape();
        let full: Shape = [s.as_slice(), &[num_classes]].concat();
        require_addressable("one_hot", &full);
        let compare = index_compare_dtype(self.dtype(), num_classes);
        let labels = broadcast_uop(
            &cast_uop(&self.uop(), compare).reshape(&[s.as_slice(), &[1]].concat()),
            &full,
        );
        let classes = broadcast_uop(&cast_uop(&arange_uop(num_classes), compare), &full);
        Tensor::from_uop(cast_uop(&eq_uop(&labels, &classes), dtype))
    }
}

#[track_caller]
fn require_int_index(op: &str, index: &Tensor) {
    let op = super::op_scope::user_op(op);
    if !index.dtype().is_int() {
        panic!(
            "{op}: index dtype {} is not an integer type (shape {:?})",
            index.dtype(),
            index.shape()
        );
    }
}

fn insert_at(shape: &[usize], at: usize, size: usize) -> Shape {
    let mut s = shape.to_vec();
    s.insert(at, size);
    s
}

/// Indices in a dtype that holds every value of their own dtype and every position of an axis
/// of size `k` ([`index_compare_dtype`]), with negative ones counted from the end of the axis.
/// Nothing is narrowed, so an index beyond the axis (2^32 + 1 in `i64`, `u32::MAX`) matches no
/// position and selects nothing, never the position its low bits name.
fn wrap_negative(idx: &UOp, k: usize) -> UOp {
    let unsigned = !idx.dtype().is_signed_int();
    let dtype = index_compare_dtype(idx.dtype(), k);
    let idx = cast_uop(idx, dtype);
    if unsigned {
        return idx;
    }
    let shape = idx.shape_vec();
    let zero = const_uop(Scalar::Int(0), dtype, &shape);
    let wrapped = add_uop(&idx, &const_uop(Scalar::Int(k as i64), dtype, &shape));
    where_uop(&lt_uop(&idx, &zero), &wrapped, &idx)
}

/// The dtype indices of dtype `index` are compared with the positions `0..k` in: `i32` where
/// that holds every index value and `k`, else `i64` where that does, else `u64`.
fn index_compare_dtype(index: DType, k: usize) -> DType {
    let unsigned = index.is_unsigned_int();
    let fits_i32 = if unsigned {
        index.bits() < 32
    } else {
        index.bits() <= 32
    };
    if fits_i32 && i32::try_from(k).is_ok() {
        INDEX_DTYPE
    } else if !(unsigned && index.bits() == 64) {
        DType::I64
    } else {
        DType::U64
    }
}

/// `[0, 1, ..., k-1]` in the dtype `idx` holds its indices in, to compare with them.
fn positions_like(idx: &UOp, k: usize) -> UOp {
    cast_uop(&arange_uop(k), idx.dtype())
}

/// Sums over axis `ax` of `values` masked to where `positions == idx` (all broadcast to
/// `full`), dropping that axis: at most one position matches, so the sum is the pick.
fn select_and_sum(values: &UOp, idx: &UOp, positions: &UOp, full: &[usize], ax: usize) -> UOp {
    let dtype = values.dtype();
    let work = if dtype == DType::Bool {
        DType::U8
    } else {
        dtype
    };
    let mask = eq_uop(&broadcast_uop(positions, full), &broadcast_uop(idx, full));
    let values = broadcast_uop(&cast_uop(values, work), full);
    let zero = const_uop(Scalar::Int(0), work, full);
    let summed = reduce_uop(
        &where_uop(&mask, &values, &zero),
        ReduceOp::Add,
        &[ax],
        false,
    );
    cast_uop(&summed, dtype)
}

/// The most parts one kernel of a `cat` joins. Every element of a joined value is a sum over
/// all its parts, each gated to its own range, so a kernel joining `n` parts does `n` × its
/// size work, and `cc` time grows faster than `n` in the gated loads of one kernel: a cat of
/// 5,000 parts was 125 kernels over the whole result, 40 gated loads each, compiled in over a
/// minute. More parts are joined in groups of this many, each group stored (`Contiguous`),
/// then the groups likewise: about `n / (CAT_FANOUT - 1)` kernels, each over its own group
/// only, of at most this many gated loads. (5,000 parts of 3 elements: 4.3 s of `cc` at 16;
/// before [`stored_group`] stored stacks, 8 s at 16, 11 s at 8, 8.5 s at 32.) A cat of this
/// many parts or fewer stays one value that fuses into its consumer.
const CAT_FANOUT: usize = 16;

/// `parts` (of one dtype, equal off `ax`) joined along `ax`: in one sum of padded parts when
/// there are at most [`CAT_FANOUT`] or all are distinct views of one value, else as a join of
/// stored groups of that many.
///
/// Distinct views of one value are the taps of a window (a convolution's `nn::windows`): a
/// reduce over the tap axis reads each tap in place (the kernel rules collapse `Σ_t` of the
/// tap gated to `t = k` into tap `k`), while storing groups of them would copy the value once
/// per tap.
fn joined_in_groups(parts: &[UOp], ax: usize) -> UOp {
    if parts.len() <= CAT_FANOUT || views_of_one_value(parts) {
        return padded_sum(parts, ax);
    }
    let groups: Vec<UOp> = parts
        .chunks(CAT_FANOUT)
        .map(|group| match group {
            [one] => one.clone(),
            _ => stored_group(group, ax),
        })
        .collect();
    joined_in_groups(&groups, ax)
}

/// The parts of `group` joined along `ax` and stored. Parts of one shape are stored as a
/// stack (`[.., parts, len, ..]`, read back reshaped): its kernel's gates compare the parts'
/// own axis, so its copies fold them when codegen upcasts that axis, and it is not upcast
/// across the parts' boundaries (a 4-wide upcast of 16 parts of 3 was 64 gated loads).
fn stored_group(group: &[UOp], ax: usize) -> UOp {
    let shape = group[0].shape_vec();
    if group.iter().any(|part| part.shape_vec() != shape) {
        return padded_sum(group, ax).unary_marker(Op::Contiguous);
    }
    let mut row = shape.clone();
    row.insert(ax, 1);
    let rows: Vec<UOp> = group.iter().map(|part| part.reshape(&row)).collect();
    let mut joined = shape;
    joined[ax] *= group.len();
    padded_sum(&rows, ax)
        .unary_marker(Op::Contiguous)
        .reshape(&joined)
}

/// True when the parts are distinct views (movement ops) of one value: a window's taps, not
/// copies of one part.
fn views_of_one_value(parts: &[UOp]) -> bool {
    let base = |part: &UOp| {
        let mut u = part.clone();
        while u.op().is_movement() {
            u = u.s(0).clone();
        }
        u
    };
    let first = base(&parts[0]);
    let distinct: std::collections::HashSet<&UOp> = parts.iter().collect();
    distinct.len() == parts.len() && parts[1..].iter().all(|p| base(p) == first)
}

/// `Σ_k pad(parts[k])`, each part padded along `ax` to its place in the joined axis (`Or` for
/// bools): one value whose elements each read every part, gated.
fn padded_sum(parts: &[UOp], ax: usize) -> UOp {
    let lengths: Vec<usize> = parts.iter().map(|p| p.shape_vec()[ax]).collect();
    let total: usize = lengths.iter().sum();
    let ndim = parts[0].shape_vec().len();
    let mut offset = 0;
    let placed = parts.iter().zip(&lengths).map(|(part, &len)| {
        let (mut begins, mut ends) = (vec![0; ndim], vec![0; ndim]);
        begins[ax] = offset;
        ends[ax] = total - offset - len;
        offset += len;
        part.pad(&begins, &ends)
    });
    placed
        .reduce(|acc, part| match acc.dtype() {
            DType::Bool => UOp::alu(Op::Or, vec![acc, part]),
            _ => add_uop(&acc, &part),
        })
        .expect("cat: at least one part")
}

/// The axis `cat` joins along and the joined size, or the message `cat` panics with.
fn cat_axis(tensors: &[Tensor], axis: isize) -> Result<(usize, usize), String> {
    let first = match tensors.first() {
        Some(t) => t.shape(),
        None => return Err("cat: needs at least one tensor".into()),
    };
    if first.is_empty() {
        return Err("cat: 0-d tensors have no axis to join along (use stack)".into());
    }
    let ax = axis_in("cat", axis, first.len(), &first)?;
    for t in &tensors[1..] {
        let s = t.shape();
        let fits = s.len() == first.len()
            && s.iter()
                .zip(&first)
                .enumerate()
                .all(|(i, (a, b))| i == ax || a == b);
        if !fits {
            return Err(format!(
                "cat: shapes {first:?} and {s:?} differ outside axis {axis}"
            ));
        }
    }
    let total = tensors
        .iter()
        .try_fold(0usize, |n, t| n.checked_add(t.shape()[ax]))
        .unwrap_or(usize::MAX);
    let mut joined = first;
    joined[ax] = total;
    addressable("cat", &joined)?;
    Ok((ax, total))
}
