//! `embedding_bag`: the rows of a table named by bags of indices, reduced per bag (torch's
//! `embedding_bag`). Offsets are run-time data, so each index's bag is computed in the graph:
//! index `n` belongs to bag `b` when `b` is the number of offsets at or before `n`, less one.
//! Every bag is then a masked reduction over all indices, which the scheduler fuses.

use crate::tensor::{OpScope, Tensor};
use crate::uop::DType;

/// How [`embedding_bag`] reduces the rows of a bag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BagMode {
    /// Their sum (weighted by `per_sample_weights` if given).
    Sum,
    /// Their mean (torch's default).
    #[default]
    Mean,
    /// Their elementwise maximum.
    Max,
}

/// Options of [`embedding_bag`], torch's keyword arguments.
#[derive(Clone, Debug, Default)]
pub struct EmbeddingBag<'a> {
    /// The start of each bag in a 1-D `input` (integer, sorted); `None` for a 2-D `input`.
    pub offsets: Option<&'a Tensor>,
    /// The reduction.
    pub mode: BagMode,
    /// A factor per index, the shape of `input` ([`BagMode::Sum`] only).
    pub per_sample_weights: Option<&'a Tensor>,
    /// An index that takes no part in its bag (nor in a mean's count); negative counts from the
    /// end of the table.
    pub padding_idx: Option<i64>,
    /// `offsets` holds one more entry, the end of the last bag.
    pub include_last_offset: bool,
}

/// The bags of `input` reduced over the rows of `weight` `[V, D]`: `[B, D]`. `input` is
/// `[B, L]` (each row a bag) or 1-D with `opts.offsets` naming where each bag starts. Empty
/// bags (and bags of padding only) give zeros. The gradient with respect to `weight` is
/// torch's: summed (scaled for a mean) into the rows used, or to each bag's maximum for a max.
///
/// ```
/// # use tensor_core::{Tensor, interp::evaluate};
/// # use tensor_core::nn::{embedding_bag, BagMode, EmbeddingBag};
/// let weight = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3, 1]);
/// let input = Tensor::from_vec(vec![0i64, 1, 2], &[3]);
/// let offsets = Tensor::from_vec(vec![0i64, 1], &[2]);
/// let opts = EmbeddingBag { offsets: Some(&offsets), mode: BagMode::Sum, ..Default::default() };
/// let y = embedding_bag(&input, &weight, &opts);
/// assert_eq!(evaluate(&y.uop()).to_vec::<f32>(), vec![1.0, 5.0]);
/// ```
///
/// # Panics
///
/// On misuse, naming `embedding_bag`: a table that is not 2-D, float indices, a 2-D input
/// with offsets or a 1-D input without, per-sample weights of another shape or with a mode
/// other than `Sum`, a padding index outside the table.
#[track_caller]
pub fn embedding_bag(input: &Tensor, weight: &Tensor, opts: &EmbeddingBag) -> Tensor {
    let _op = OpScope::enter("embedding_bag");
    check(input, weight, opts);
    let (rows, keep) = bag_rows(input, weight, opts);
    let keep_rows = keep.unsqueeze(-1);
    match opts.mode {
        BagMode::Max => {
            let max = keep_rows.where_(&rows, f64::NEG_INFINITY).max(1, false);
            keep.any(1, false).unsqueeze(-1).where_(max, 0.0)
        }
        mode => {
            let factor = match (opts.per_sample_weights, input.ndim()) {
                (Some(w), 1) => w.unsqueeze(0),
                (Some(w), _) => w.clone(),
                (None, _) => keep.full_like(1.0).cast(rows.dtype()),
            };
            let factor = keep.where_(factor.cast(rows.dtype()), 0.0);
            let sum = (rows * factor.unsqueeze(-1)).sum(1, false);
            if mode == BagMode::Sum {
                return sum;
            }
            let count = keep.cast(sum.dtype()).sum(1, true).maximum(1.0);
            sum / count
        }
    }
}

/// The rows of each bag, `[B, L', D]`, and which of them take part, `[B, L']` bool. A 2-D
/// input is its own bags; a 1-D input of `N` indices gives every bag all `N` rows, kept where
/// the index belongs to it.
fn bag_rows(input: &Tensor, weight: &Tensor, opts: &EmbeddingBag) -> (Tensor, Tensor) {
    let rows = weight.take(input, 0);
    let not_padding = match padding_row(weight, opts) {
        Some(p) => input.cast(DType::I64).ne(p),
        None => input.full_like(true).cast(DType::Bool),
    };
    let Some(offsets) = opts.offsets else {
        return (rows, not_padding);
    };
    let n = input.shape()[0];
    let bags = offsets.shape()[0] - usize::from(opts.include_last_offset);
    let position = Tensor::arange(n).cast(DType::I64).unsqueeze(0);
    let started = offsets.cast(DType::I64).unsqueeze(1).le(&position);
    let bag_of = started.cast(DType::I64).sum(0, true) - 1;
    let bag = Tensor::arange(bags).cast(DType::I64).unsqueeze(1);
    let keep = bag.eq(&bag_of).logical_and(not_padding.unsqueeze(0));
    let d = weight.shape()[1];
    (rows.unsqueeze(0).expand(&[bags, n, d]), keep)
}

/// `padding_idx` as a row of the table (a negative one counts from the end).
fn padding_row(weight: &Tensor, opts: &EmbeddingBag) -> Option<i64> {
    let v = weight.shape()[0] as i64;
    opts.padding_idx.map(|p| if p < 0 { p + v } else { p })
}

#[track_caller]
fn check(input: &Tensor, weight: &Tensor, opts: &EmbeddingBag) {
    let (is, ws) = (input.shape(), weight.shape());
    if weight.ndim() != 2 || !input.dtype().is_int() || !weight.dtype().is_float() {
        panic!(
            "embedding_bag: expected integer indices and a float [V, D] table, got {} indices \
             and a {} table of shape {ws:?}",
            input.dtype(),
            weight.dtype()
        );
    }
    match (input.ndim(), opts.offsets) {
        (2, None) => {}
        (2, Some(_)) => panic!(
            "embedding_bag: a 2-D input {is:?} is its own bags; pass offsets only with a 1-D input"
        ),
        (1, Some(o)) => {
            let min = usize::from(opts.include_last_offset);
            if o.ndim() != 1 || !o.dtype().is_int() || o.shape()[0] < min {
                panic!(
                    "embedding_bag: offsets must be a 1-D integer tensor (with at least one entry \
                     when include_last_offset), got {} of shape {:?}",
                    o.dtype(),
                    o.shape()
                );
            }
        }
        (1, None) => panic!("embedding_bag: a 1-D input {is:?} needs offsets (the bag starts)"),
        _ => panic!("embedding_bag: input must be [B, L] or 1-D with offsets, got shape {is:?}"),
    }
    if let Some(w) = opts.per_sample_weights {
        if opts.mode != BagMode::Sum {
            panic!(
                "embedding_bag: per_sample_weights are only supported with mode Sum, got {:?}",
                opts.mode
            );
        }
        if w.shape() != is || !w.dtype().is_float() {
            panic!(
                "embedding_bag: per_sample_weights must be floats of the input's shape {is:?}, \
                 got {} of shape {:?}",
                w.dtype(),
                w.shape()
            );
        }
    }
    if let Some(p) = opts.padding_idx {
        let v = ws[0] as i64;
        if p < -v || p >= v {
            panic!("embedding_bag: padding_idx {p} is outside a table of {v} rows");
        }
    }
}
