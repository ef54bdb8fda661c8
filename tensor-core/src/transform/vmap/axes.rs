//! `in_axes` / `out_axes`: which axis of each argument and result is the batch, and the checks
//! JAX makes on them.

use crate::tensor::Tensor;
use crate::transform::func::transform_error;
use std::sync::Arc;

/// Which axis of each argument `vmap` maps over (`None`: the argument is not batched).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InAxes {
    /// The same axis (or `None`) for every argument.
    All(Option<isize>),
    /// One entry per positional argument.
    Each(Vec<Option<isize>>),
}

/// Where the batch axis goes in each result (`None`: the result is not batched).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutAxes {
    /// The same axis (or `None`) for every result.
    All(Option<isize>),
    /// One entry per result.
    Each(Vec<Option<isize>>),
    /// Entries computed once the results are known (a prefix tree of axes expanded against
    /// the structure of the results, which only tracing the function reveals).
    Deferred(DeferredAxes),
}

/// A rule giving one out axis per result from the number of results (see
/// [`OutAxes::Deferred`]). Two rules are equal when they are the same rule.
#[derive(Clone)]
pub struct DeferredAxes(pub Arc<dyn Fn(usize) -> Vec<Option<isize>> + Send + Sync>);

impl PartialEq for DeferredAxes {
    fn eq(&self, other: &DeferredAxes) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for DeferredAxes {}

impl std::fmt::Debug for DeferredAxes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeferredAxes")
    }
}

macro_rules! axes_from {
    ($ty:ident) => {
        impl From<i32> for $ty {
            fn from(axis: i32) -> Self {
                $ty::All(Some(axis as isize))
            }
        }
        impl From<isize> for $ty {
            fn from(axis: isize) -> Self {
                $ty::All(Some(axis))
            }
        }
        impl From<Option<i32>> for $ty {
            fn from(axis: Option<i32>) -> Self {
                $ty::All(axis.map(|a| a as isize))
            }
        }
        impl From<Vec<Option<isize>>> for $ty {
            fn from(axes: Vec<Option<isize>>) -> Self {
                $ty::Each(axes)
            }
        }
        impl From<Vec<Option<i32>>> for $ty {
            fn from(axes: Vec<Option<i32>>) -> Self {
                $ty::Each(axes.into_iter().map(|a| a.map(|a| a as isize)).collect())
            }
        }
        impl<const N: usize> From<[Option<i32>; N]> for $ty {
            fn from(axes: [Option<i32>; N]) -> Self {
                $ty::Each(axes.iter().map(|a| a.map(|a| a as isize)).collect())
            }
        }
        impl<const N: usize> From<[i32; N]> for $ty {
            fn from(axes: [i32; N]) -> Self {
                $ty::Each(axes.iter().map(|&a| Some(a as isize)).collect())
            }
        }
    };
}

axes_from!(InAxes);
axes_from!(OutAxes);

impl InAxes {
    /// One entry per argument; panics like JAX when a list has the wrong length.
    pub fn per_argument(&self, nargs: usize) -> Vec<Option<isize>> {
        match self {
            InAxes::All(axis) => vec![*axis; nargs],
            InAxes::Each(axes) if axes.len() == nargs => axes.clone(),
            InAxes::Each(axes) => transform_error(&format!(
                "vmap: in_axes must be an int, None, or one entry per positional argument, \
                 but got {} entries for {} arguments",
                axes.len(),
                nargs
            )),
        }
    }
}

impl OutAxes {
    /// One entry per result; panics like JAX when a list has the wrong length.
    pub fn per_result(&self, nresults: usize) -> Vec<Option<isize>> {
        match self {
            OutAxes::All(axis) => vec![*axis; nresults],
            OutAxes::Each(axes) if axes.len() == nresults => axes.clone(),
            OutAxes::Each(axes) => transform_error(&format!(
                "vmap: out_axes must be an int, None, or one entry per result, \
                 but got {} entries for {} results",
                axes.len(),
                nresults
            )),
            OutAxes::Deferred(rule) => OutAxes::Each((rule.0)(nresults)).per_result(nresults),
        }
    }
}

/// `axis` (negative counts from the end) as an index into `ndim` axes, or `None` if out of range.
pub fn normalize_axis(axis: isize, ndim: usize) -> Option<usize> {
    let resolved = if axis < 0 { axis + ndim as isize } else { axis };
    (0..ndim as isize)
        .contains(&resolved)
        .then_some(resolved as usize)
}

/// The mapped axis of each argument (normalized) and the common batch size, after JAX's checks:
/// at least one mapped argument, no 0-d mapped argument, every axis in range, equal sizes.
pub fn resolve_in_axes(args: &[Tensor], in_axes: &InAxes) -> (Vec<Option<usize>>, usize) {
    let axes = in_axes.per_argument(args.len());
    let resolved: Vec<Option<usize>> = args
        .iter()
        .zip(&axes)
        .enumerate()
        .map(|(i, (arg, axis))| axis.map(|a| resolve_one(i, arg, a)))
        .collect();
    let sizes: Vec<(usize, usize, usize)> = resolved
        .iter()
        .enumerate()
        .filter_map(|(i, axis)| axis.map(|a| (i, a, args[i].shape()[a])))
        .collect();
    let Some(&(_, _, size)) = sizes.first() else {
        transform_error(
            "vmap: at least one argument must be mapped, but in_axes is None for all of them",
        )
    };
    if sizes.iter().any(|&(_, _, s)| s != size) {
        let listing: Vec<String> = sizes
            .iter()
            .map(|(i, a, s)| format!("argument {i} has size {s} along axis {a}"))
            .collect();
        transform_error(&format!(
            "vmap: inconsistent sizes for the mapped axes: {}",
            listing.join(",\n")
        ));
    }
    (resolved, size)
}

fn resolve_one(index: usize, arg: &Tensor, axis: isize) -> usize {
    let shape = arg.shape();
    if shape.is_empty() {
        transform_error(&format!(
            "vmap: argument {index} is 0-d (a scalar) and cannot be mapped over; \
             give it in_axes None or pass an array with a batch axis"
        ));
    }
    normalize_axis(axis, shape.len()).unwrap_or_else(|| {
        transform_error(&format!(
            "vmap: in_axes asks to map argument {index} along axis {axis}, but it has rank {} \
             (shape {:?}): the axis must be in -{}..{}",
            shape.len(),
            shape,
            shape.len(),
            shape.len()
        ))
    })
}
