//! Losses with torch's names, arguments and reductions. The class losses take torch's
//! unbatched form too: logits `[C]` with a 0-d class index (or `[C]` probabilities), the loss
//! of one sample, as a per-sample loss under `vmap` sees it.

use crate::tensor::{OpScope, Tensor};

/// How a loss reduces its per-element values (torch's `reduction`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// Keep one value per element (or per sample for class losses).
    None,
    /// The mean (for class losses with weights: the weighted mean).
    Mean,
    /// The sum.
    Sum,
    /// The sum divided by the batch size (`kl_div` only, as torch recommends).
    BatchMean,
}

fn reduce(loss: Tensor, reduction: Reduction) -> Tensor {
    match reduction {
        Reduction::None => loss,
        Reduction::Mean => loss.mean_all(),
        Reduction::Sum => loss.sum_all(),
        Reduction::BatchMean => {
            let n = loss.shape().first().copied().unwrap_or(1);
            loss.sum_all().div(n as f64)
        }
    }
}

/// The target of a class loss: class indices (`[N, *]`, integers) or class probabilities
/// (the input's shape).
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// One class index per sample (and position).
    Indices(&'a Tensor),
    /// A distribution over the classes per sample.
    Probs(&'a Tensor),
}

/// Options of the class losses (torch's keyword arguments).
#[derive(Clone, Debug)]
pub struct ClassLoss<'a> {
    /// A weight per class (`[C]`).
    pub weight: Option<&'a Tensor>,
    /// Targets equal to this index count for nothing (default -100).
    pub ignore_index: i64,
    /// How the per-sample losses are reduced (default `Mean`).
    pub reduction: Reduction,
    /// Mixes the target with the uniform distribution by this amount (default 0).
    pub label_smoothing: f64,
}

impl Default for ClassLoss<'_> {
    fn default() -> Self {
        ClassLoss {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
            label_smoothing: 0.0,
        }
    }
}

/// `[N, C, *]` input and `[N, *]` indices: the one-hot of the indices with the class axis at 1,
/// zero for ignored targets, in `dtype`; and the mask of kept targets.
#[track_caller]
fn one_hot_targets(op: &str, input: &Tensor, target: &Tensor, ignore: i64) -> (Tensor, Tensor) {
    check_class_targets(op, input, target);
    let is = input.shape();
    let keep = target.ne(ignore);
    let safe = keep.where_(target, 0i32);
    let hot = safe
        .one_hot(is[1])
        .cast(input.dtype())
        .mul(keep.unsqueeze(-1).cast(input.dtype()));
    (move_last_to_1(&hot), keep)
}

/// Panics (naming `op`) unless `input` is `[N, C, *]` and `target` integer `[N, *]`.
#[track_caller]
fn check_class_targets(op: &str, input: &Tensor, target: &Tensor) {
    let (is, ts) = (input.shape(), target.shape());
    let mut expected = is.clone();
    if is.len() >= 2 {
        expected.remove(1);
    }
    if is.len() < 2 || ts != expected || !target.dtype().is_int() {
        panic!(
            "{op}: expected input [N, C, *] and integer targets [N, *] (or one sample: input [C] \
             and a 0-d target), got input {is:?} and target {ts:?} ({})",
            target.dtype()
        );
    }
}

/// `[N, *, C]` to `[N, C, *]`.
fn move_last_to_1(x: &Tensor) -> Tensor {
    let n = x.ndim();
    let mut order: Vec<usize> = vec![0, n - 1];
    order.extend(1..n - 1);
    x.permute(&order)
}

/// `[C]` weights as `[1, C, 1, ...]` for an input of rank `rank`.
fn class_weights(w: &Tensor, rank: usize) -> Tensor {
    let mut shape = vec![1; rank];
    shape[1] = w.shape()[0];
    w.reshape(&shape)
}

/// The negative log-likelihood of class indices: `-input[n, target[n]] * weight[target[n]]`,
/// with a weighted mean for `Mean` (torch's `nll_loss`; `input` holds log-probabilities).
#[track_caller]
pub fn nll_loss(input: &Tensor, target: &Tensor, opts: &ClassLoss) -> Tensor {
    let _op = OpScope::enter("nll_loss");
    if input.ndim() == 1 && target.ndim() == 0 {
        let batched = nll_loss(&input.unsqueeze(0), &target.unsqueeze(0), opts);
        return one_sample(batched, opts.reduction);
    }
    let (hot, _) = one_hot_targets("nll_loss", input, target, opts.ignore_index);
    let weighted = match opts.weight {
        Some(w) => hot.mul(class_weights(w, input.ndim())),
        None => hot,
    };
    let per_sample = input.mul(&weighted).sum(1, false).neg();
    match opts.reduction {
        Reduction::Mean => per_sample.sum_all().div(weighted.sum_all()),
        r => reduce(per_sample, r),
    }
}

/// Cross-entropy of logits `[N, C, *]` against class indices or probabilities, with class
/// weights, `ignore_index` and label smoothing, as torch's `cross_entropy`; logits `[C]` of one
/// sample take a 0-d class index (or `[C]` probabilities) and give a 0-d loss.
///
/// ```
/// # use tensor_core::{Tensor, interp::evaluate, nn::{self, ClassLoss, Target}};
/// let logits = Tensor::from_vec(vec![2.0f32, 0.0, 0.0], &[3]);
/// let label = Tensor::from_vec(vec![0i64], &[]);
/// let loss = nn::cross_entropy(&logits, Target::Indices(&label), &ClassLoss::default());
/// let want = -(2f32.exp() / (2f32.exp() + 2.0)).ln();
/// assert!((evaluate(&loss.uop()).to_vec::<f32>()[0] - want).abs() < 1e-6);
/// ```
///
/// # Panics
///
/// Unless the input has a class axis and the target fits it (`[N, *]` indices or probabilities
/// of the input's shape), naming `cross_entropy`.
#[track_caller]
pub fn cross_entropy(input: &Tensor, target: Target, opts: &ClassLoss) -> Tensor {
    let _op = OpScope::enter("cross_entropy");
    if input.ndim() == 1 {
        return cross_entropy_of_one(input, target, opts);
    }
    if input.ndim() == 0 {
        panic!("cross_entropy: expected logits [N, C, *] or [C], got a 0-d input");
    }
    let logp = input.log_softmax(1);
    let classes = input.shape().get(1).copied().unwrap_or(0);
    let eps = opts.label_smoothing;
    let weighted = |x: Tensor| match opts.weight {
        Some(w) => x.mul(class_weights(w, input.ndim())),
        None => x,
    };
    match target {
        Target::Indices(t) => {
            check_class_targets("cross_entropy", input, t);
            let nll = nll_loss(&logp, t, opts);
            if eps == 0.0 {
                return nll;
            }
            let (hot, keep) = one_hot_targets("cross_entropy", input, t, opts.ignore_index);
            let keep = keep.cast(input.dtype());
            let smooth = weighted(logp.clone()).sum(1, false).neg().mul(&keep);
            let smooth = match opts.reduction {
                Reduction::Mean => {
                    let total = match opts.weight {
                        Some(w) => hot.mul(class_weights(w, input.ndim())).sum_all(),
                        None => keep.sum_all(),
                    };
                    smooth.sum_all().div(total)
                }
                r => reduce(smooth, r),
            };
            nll.mul(1.0 - eps).add(smooth.mul(eps / classes as f64))
        }
        Target::Probs(p) => {
            if p.shape() != input.shape() {
                panic!(
                    "cross_entropy: probabilities of shape {:?} for input {:?}",
                    p.shape(),
                    input.shape()
                );
            }
            let p = p.mul(1.0 - eps).add(eps / classes as f64);
            let per_sample = weighted(logp.mul(p)).sum(1, false).neg();
            reduce(per_sample, opts.reduction)
        }
    }
}

/// Torch's unbatched `cross_entropy`: logits `[C]` and a 0-d index or `[C]` probabilities, as
/// a batch of one.
#[track_caller]
fn cross_entropy_of_one(input: &Tensor, target: Target, opts: &ClassLoss) -> Tensor {
    let batch = input.unsqueeze(0);
    let batched = match target {
        Target::Indices(t) if t.ndim() == 0 => {
            cross_entropy(&batch, Target::Indices(&t.unsqueeze(0)), opts)
        }
        Target::Probs(p) if p.shape() == input.shape() => {
            cross_entropy(&batch, Target::Probs(&p.unsqueeze(0)), opts)
        }
        Target::Indices(t) | Target::Probs(t) => panic!(
            "cross_entropy: logits {:?} of one sample take a 0-d class index or probabilities of \
             their shape, got a target of shape {:?}",
            input.shape(),
            t.shape()
        ),
    };
    one_sample(batched, opts.reduction)
}

/// The loss of a batch of one as the loss of its sample: per-sample values lose the batch axis.
fn one_sample(batched: Tensor, reduction: Reduction) -> Tensor {
    match reduction {
        Reduction::None => batched.squeeze(0),
        _ => batched,
    }
}

fn weigh(loss: Tensor, weight: Option<&Tensor>) -> Tensor {
    match weight {
        Some(w) => loss.mul(w),
        None => loss,
    }
}

#[track_caller]
fn same_shape(op: &str, a: &Tensor, b: &Tensor) {
    if a.shape() != b.shape() {
        panic!(
            "{op}: input {:?} and target {:?} differ in shape",
            a.shape(),
            b.shape()
        );
    }
}

/// Binary cross-entropy of probabilities: `-(y log p + (1 - y) log(1 - p))`, each logarithm
/// clamped at -100 as torch does.
#[track_caller]
pub fn binary_cross_entropy(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Tensor {
    let _op = OpScope::enter("binary_cross_entropy");
    same_shape("binary_cross_entropy", input, target);
    let log_p = input.log().maximum(-100.0);
    let log_q = input.neg().add(1.0).log().maximum(-100.0);
    let loss = target
        .mul(log_p)
        .add(target.neg().add(1.0).mul(log_q))
        .neg();
    reduce(weigh(loss, weight), reduction)
}

/// Binary cross-entropy of logits, stable for every finite logit, with `pos_weight` weighting
/// the positive term (torch's `binary_cross_entropy_with_logits`).
#[track_caller]
pub fn binary_cross_entropy_with_logits(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    reduction: Reduction,
) -> Tensor {
    let _op = OpScope::enter("binary_cross_entropy_with_logits");
    same_shape("binary_cross_entropy_with_logits", input, target);
    // -log(sigmoid(x)) = max(-x, 0) + log(1 + e^-|x|)
    let neg_log_sigmoid = input
        .neg()
        .maximum(0.0)
        .add(input.abs().neg().exp().add(1.0).log());
    let positive = match pos_weight {
        Some(pw) => pw.sub(1.0).mul(target).add(1.0),
        None => target.mul(0.0).add(1.0),
    };
    let loss = target
        .neg()
        .add(1.0)
        .mul(input)
        .add(positive.mul(neg_log_sigmoid));
    reduce(weigh(loss, weight), reduction)
}

/// `(input - target)²`, reduced.
#[track_caller]
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Tensor {
    let _op = OpScope::enter("mse_loss");
    same_shape("mse_loss", input, target);
    reduce(input.sub(target).square(), reduction)
}

/// `|input - target|`, reduced.
#[track_caller]
pub fn l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Tensor {
    let _op = OpScope::enter("l1_loss");
    same_shape("l1_loss", input, target);
    reduce(input.sub(target).abs(), reduction)
}

/// `0.5 d² / beta` where `|d| < beta`, else `|d| - 0.5 beta` (torch's default beta is 1).
#[track_caller]
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction, beta: f64) -> Tensor {
    let _op = OpScope::enter("smooth_l1_loss");
    same_shape("smooth_l1_loss", input, target);
    let d = input.sub(target).abs();
    if beta == 0.0 {
        return reduce(d, reduction);
    }
    let loss = d
        .lt(beta)
        .where_(d.square().mul(0.5 / beta), d.sub(0.5 * beta));
    reduce(loss, reduction)
}

/// `0.5 d²` where `|d| <= delta`, else `delta (|d| - 0.5 delta)`.
#[track_caller]
pub fn huber_loss(input: &Tensor, target: &Tensor, reduction: Reduction, delta: f64) -> Tensor {
    let _op = OpScope::enter("huber_loss");
    same_shape("huber_loss", input, target);
    let d = input.sub(target).abs();
    let loss = d
        .le(delta)
        .where_(d.square().mul(0.5), d.sub(0.5 * delta).mul(delta));
    reduce(loss, reduction)
}

/// The Kullback–Leibler divergence `target (log target - input)` for log-probabilities
/// `input` (0 where `target` is 0); with `log_target` the target is given as a log too.
#[track_caller]
pub fn kl_div(input: &Tensor, target: &Tensor, reduction: Reduction, log_target: bool) -> Tensor {
    let _op = OpScope::enter("kl_div");
    same_shape("kl_div", input, target);
    let loss = if log_target {
        target.exp().mul(target.sub(input))
    } else {
        let positive = target.gt(0.0);
        let safe = positive.where_(target, 1.0);
        positive.where_(target.mul(safe.log().sub(input)), 0.0)
    };
    reduce(loss.cast(input.dtype().to_float()), reduction)
}
