//! Layers as functions: `linear`, `embedding`, `dropout` (with an explicit random key, as JAX),
//! and `scaled_dot_product_attention`.

use crate::tensor::{OpScope, Tensor};
use crate::uop::DType;

/// `x · weightᵀ + bias`, with `x` `[*, in]` (one sample: `[in]`), `weight` `[out, in]` and
/// `bias` `[out]` (torch's `linear`).
///
/// # Panics
///
/// Unless `weight` is `[out, in]` for `x`'s last axis and `bias` (if any) `[out]`, naming
/// `linear`.
#[track_caller]
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
    let _op = OpScope::enter("linear");
    let (xs, ws) = (x.shape(), weight.shape());
    let fits = ws.len() == 2 && xs.last() == Some(&ws[1]);
    if !fits || bias.is_some_and(|b| b.shape() != ws[..1]) {
        panic!(
            "linear: expected input [*, in], weight [out, in] and bias [out], got input {xs:?}, \
             weight {ws:?} and bias {:?}",
            bias.map(Tensor::shape)
        );
    }
    let y = x.matmul(&weight.transpose(0, 1));
    match bias {
        Some(b) => y.add(b),
        None => y,
    }
}

/// The rows of `weight` `[V, D]` named by integer `indices` (any shape): `[*indices, D]`. Its
/// gradient with respect to `weight` sums the cotangents of each row's uses.
#[track_caller]
pub fn embedding(indices: &Tensor, weight: &Tensor) -> Tensor {
    let _op = OpScope::enter("embedding");
    if weight.ndim() != 2 || !indices.dtype().is_int() {
        panic!(
            "embedding: expected integer indices and a [V, D] table, got {} indices and a table \
             of shape {:?}",
            indices.dtype(),
            weight.shape()
        );
    }
    weight.take(indices, 0)
}

/// Zeroes each element with probability `p` and scales the rest by `1 / (1 - p)`; the mask is
/// drawn from `key` (a 0-d `u64` tensor). Under `vmap`, a batched key draws a mask per sample
/// (functorch's `randomness="different"`), an unbatched key one mask for all (`"same"`).
/// Without `training` it is the identity.
#[track_caller]
pub fn dropout(x: &Tensor, p: f64, key: &Tensor, training: bool) -> Tensor {
    let _op = OpScope::enter("dropout");
    if !(0.0..=1.0).contains(&p) {
        panic!("dropout: probability {p} is not in [0, 1]");
    }
    if !training || p == 0.0 {
        return x.clone();
    }
    if p == 1.0 {
        return x.mul(0.0);
    }
    let keep = Tensor::rand_with_key(&x.shape(), key).ge(p);
    keep.where_(x.mul(1.0 / (1.0 - p)), 0.0)
}

/// Options of [`scaled_dot_product_attention`].
#[derive(Clone, Debug, Default)]
pub struct Attention<'a> {
    /// A boolean mask (true: the position takes part) or a float mask added to the scores,
    /// broadcast to `[.., L, S]`.
    pub mask: Option<&'a Tensor>,
    /// Attend only to positions at or before the query's (a lower-triangular mask).
    pub causal: bool,
    /// The factor of the scores (default `1 / sqrt(E)`).
    pub scale: Option<f64>,
}

/// `softmax(q kᵀ · scale + mask) v` for `q` `[.., L, E]`, `k` `[.., S, E]`, `v` `[.., S, Ev]`.
#[track_caller]
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    opts: &Attention,
) -> Tensor {
    let _op = OpScope::enter("scaled_dot_product_attention");
    let (qs, ks) = (q.shape(), k.shape());
    if qs.len() < 2 || ks.len() < 2 || qs[qs.len() - 1] != ks[ks.len() - 1] {
        panic!(
            "scaled_dot_product_attention: queries {qs:?} and keys {ks:?} must end in the same \
             embedding size"
        );
    }
    let e = qs[qs.len() - 1];
    let scale = opts.scale.unwrap_or(1.0 / (e as f64).sqrt());
    let last = k.ndim() as isize - 1;
    let mut scores = q.matmul(&k.transpose(last - 1, last)).mul(scale);
    let (l, s) = (qs[qs.len() - 2], ks[ks.len() - 2]);
    if opts.causal {
        let rows = Tensor::arange(l).reshape(&[l, 1]);
        let cols = Tensor::arange(s).reshape(&[1, s]);
        scores = cols.le(rows).where_(&scores, f64::NEG_INFINITY);
    }
    if let Some(mask) = opts.mask {
        scores = if mask.dtype() == DType::Bool {
            mask.where_(&scores, f64::NEG_INFINITY)
        } else {
            scores.add(mask)
        };
    }
    scores.softmax(-1).matmul(v)
}
