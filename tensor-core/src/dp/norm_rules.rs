//! The squared norm of each sample's gradient, rewritten to cost what its factors cost.
//!
//! `SumSq(z)` is `Reduce(Add, axes 1.., z · z)`: the sum of squares over every axis but the
//! batch (axis 0), kept as size 1. The rules, tried on a `SumSq` node:
//!
//! ```text
//! SumSq(permute(z)), axis 0 kept first      => SumSq(z)
//! SumSq(reshape(z)), axis 0 kept            => SumSq(z)
//! SumSq(expand(a))                          => SumSq(a) · Π(sizes a was expanded to)
//! SumSq(a · b), a and b vary on disjoint    => SumSq(a) · SumSq(b)   (every result
//!   non-batch axes                                                     reshaped to SumSq's)
//! SumSq(Σ_t a · b), a and b disjoint but     => Σ_ts (a aᵀ)_ts (b bᵀ)_ts, when
//!   on t                                        T (J + K) < J K
//! SumSq(Σ_t where(c, b, 0)), c and b         => the same, with a = c as a number
//!   disjoint but on t
//! ```
//!
//! The fourth is the norm of an outer product, `Σ_jk (a_j b_k)² = (Σ_j a_j²)(Σ_k b_k²)`: a
//! dense layer's per-sample gradient `δ_i ⊗ x_i` has its norm from `B (J + K)` products
//! instead of `B J K`. The fifth is the Gram form of a sum of outer products (a dense layer
//! over a sequence, `Σ_t δ_t ⊗ x_t`): `T² (J + K)` products instead of `T J K`, taken only
//! when that is fewer (the choice the book-keeping papers make per layer by hand). The sixth
//! is the same for a selection: an embedding's per-sample gradient is `Σ_t [tok_t = v] δ_t`, a
//! one-hot mask selecting each token's gradient, whose norm is `Σ_ts [tok_t = tok_s] ⟨δ_t,
//! δ_s⟩`. Factors are told apart by the axes they vary along, read from the expands that
//! broadcast them (`varying_axes`); a factor is sliced to one element along the axes it does
//! not vary on. Rules fire only along the spine from the norm down, on nodes the rewrite made; the
//! network's own graph (shared with the clipped sum) is never touched, so its nodes stay one.
//! A gradient no rule factors keeps its `SumSq`, which the scheduler reduces inside the kernel
//! that computes the gradient.

use crate::rewrite::{Captures, PatternMatcher, UPat};
use crate::tensor::Tensor;
use crate::uop::{Arg, Op, ReduceOp, UOp};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// `Σ_{axes 1..} z²` with every axis kept (size 1 but the batch's).
pub fn sum_sq(z: &UOp) -> UOp {
    let sq = UOp::alu(Op::Mul, vec![z.clone(), z.clone()]);
    let axes: Vec<usize> = (1..z.shape_vec().len()).collect();
    match axes.is_empty() {
        true => sq,
        false => sq.reduce(ReduceOp::Add, &axes),
    }
}

/// `sum_sq(g)` of a per-sample gradient `g` (batch on axis 0), rewritten by the rules above;
/// the result has `sum_sq(g)`'s shape.
pub fn factored_sum_sq(g: &UOp) -> UOp {
    let frozen: HashSet<UOp> = g.toposort().into_iter().collect();
    let mut memo = HashMap::new();
    spine(&sum_sq(g), &frozen, &mut memo)
}

/// `node` with the rules applied to it and to every node below it that is not `frozen`.
fn spine(node: &UOp, frozen: &HashSet<UOp>, memo: &mut HashMap<UOp, UOp>) -> UOp {
    if frozen.contains(node) {
        return node.clone();
    }
    if let Some(done) = memo.get(node) {
        return done.clone();
    }
    let src: Vec<UOp> = node.src().iter().map(|s| spine(s, frozen, memo)).collect();
    let rebuilt = if src.as_slice() == node.src() {
        node.clone()
    } else {
        UOp::new(node.op(), node.dtype(), src, node.arg().clone())
    };
    let result = match rules().rewrite(&rebuilt, &mut ()) {
        Some(next) if next != rebuilt => spine(&next, frozen, memo),
        _ => rebuilt,
    };
    memo.insert(node.clone(), result.clone());
    result
}

fn rules() -> &'static PatternMatcher<()> {
    static RULES: OnceLock<PatternMatcher<()>> = OnceLock::new();
    RULES.get_or_init(|| {
        let of = |inner: UPat| {
            UPat::op(Op::Reduce)
                .named("root")
                .src(vec![UPat::alu(Op::Mul, vec![inner.clone(), inner])])
        };
        let z = || UPat::var("z");
        PatternMatcher::new()
            .rule(
                of(UPat::op(Op::Permute).named("m").src(vec![z()])),
                |m, _| through_permute(m),
            )
            .rule(
                of(UPat::op(Op::Reshape).named("m").src_prefix(vec![z()])),
                |m, _| through_reshape(m),
            )
            .rule(
                of(UPat::op(Op::Expand).named("m").src_prefix(vec![z()])),
                |m, _| through_expand(m),
            )
            .rule(
                of(UPat::alu(Op::Mul, vec![UPat::var("a"), UPat::var("b")]).named("m")),
                |m, _| outer_product(m),
            )
            .rule(
                of(UPat::op(Op::Reduce).named("r").src(vec![
                    UPat::alu(Op::Mul, vec![UPat::var("a"), UPat::var("b")]).named("m"),
                ])),
                |m, _| gram(m),
            )
            .rule(
                of(UPat::op(Op::Reduce).named("r").src(vec![
                    UPat::op(Op::Where).named("m").src(vec![
                        UPat::var("c"),
                        UPat::var("b"),
                        UPat::var("zero"),
                    ]),
                ])),
                |m, _| gram_of_selection(m),
            )
    })
}

/// The node a rule matched is a `SumSq`: a sum over exactly the non-batch axes.
fn is_sum_sq(root: &UOp) -> bool {
    let rank = root.shape_vec().len();
    matches!(root.arg(), Arg::Reduce(ReduceOp::Add, axes) if axes.iter().copied().eq(1..rank))
}

fn through_permute(m: &Captures) -> Option<UOp> {
    let Arg::Permutation(perm) = m["m"].arg() else {
        return None;
    };
    (is_sum_sq(&m["root"]) && perm.first() == Some(&0))
        .then(|| as_shape_of(&sum_sq(&m["z"]), &m["root"]))
}

fn through_reshape(m: &Captures) -> Option<UOp> {
    let (z, y) = (&m["z"], &m["m"]);
    let keeps_batch = z.shape_vec().first() == y.shape_vec().first() && !z.shape_vec().is_empty();
    (is_sum_sq(&m["root"]) && keeps_batch).then(|| as_shape_of(&sum_sq(z), &m["root"]))
}

fn through_expand(m: &Captures) -> Option<UOp> {
    let (z, y) = (&m["z"], &m["m"]);
    let (from, to) = (z.shape_vec(), y.shape_vec());
    if !is_sum_sq(&m["root"]) || from.len() != to.len() || from.first() != to.first() {
        return None;
    }
    let copies: usize = from
        .iter()
        .zip(to.iter())
        .skip(1)
        .map(|(f, t)| t / f)
        .product();
    Some(times(&as_shape_of(&sum_sq(z), &m["root"]), copies))
}

fn outer_product(m: &Captures) -> Option<UOp> {
    let (a, b) = (unexpanded(&m["a"]), unexpanded(&m["b"]));
    let (sa, sb, full) = (a.shape_vec(), b.shape_vec(), m["m"].shape_vec());
    if !is_sum_sq(&m["root"]) || sa.len() != full.len() || sb.len() != full.len() {
        return None;
    }
    let disjoint = (1..full.len()).all(|k| sa[k] == 1 || sb[k] == 1);
    if !disjoint {
        return None;
    }
    let both_broadcast: usize = (1..full.len())
        .filter(|&k| sa[k] == 1 && sb[k] == 1)
        .map(|k| full[k])
        .product();
    let root = &m["root"];
    let product = UOp::alu(
        Op::Mul,
        vec![
            as_shape_of(&sum_sq(&a), root),
            as_shape_of(&sum_sq(&b), root),
        ],
    );
    Some(times(&product, both_broadcast))
}

fn gram(m: &Captures) -> Option<UOp> {
    let (a, b) = (unexpanded(&m["a"]), unexpanded(&m["b"]));
    gram_form(&m["root"], &m["r"], &m["m"], &a, &b)
}

/// `SumSq(Σ_t where(c, b, 0))`: the Gram form with `a = c` as a number, each factor sliced
/// to one element along the axes it does not vary on.
fn gram_of_selection(m: &Captures) -> Option<UOp> {
    if !is_zero(&m["zero"]) {
        return None;
    }
    let full = m["m"].shape_vec();
    let a = narrowed(&m["c"].cast(m["m"].dtype()), &varying_axes(&m["c"]), &full);
    let b = narrowed(&m["b"], &varying_axes(&m["b"]), &full);
    gram_form(&m["root"], &m["r"], &m["m"], &a, &b)
}

/// `Σ_ts (a aᵀ)_ts (b bᵀ)_ts` for `root = SumSq(r)`, `r = Σ_t m`, `m` the product of `a` and
/// `b` (broadcast to `m`'s shape, size 1 on the axes they do not vary on), when it is cheaper.
fn gram_form(root: &UOp, r: &UOp, m: &UOp, a: &UOp, b: &UOp) -> Option<UOp> {
    let Arg::Reduce(ReduceOp::Add, summed) = r.arg() else {
        return None;
    };
    let full = m.shape_vec();
    let (sa, sb) = (a.shape_vec(), b.shape_vec());
    if !is_sum_sq(root) || sa.len() != full.len() || sb.len() != full.len() {
        return None;
    }
    let rest: Vec<usize> = (1..full.len()).filter(|k| !summed.contains(k)).collect();
    if summed.contains(&0) || rest.iter().any(|&k| sa[k] > 1 && sb[k] > 1) {
        return None;
    }
    let size = |axes: &mut dyn Iterator<Item = usize>| axes.map(|k| full[k]).product::<usize>();
    let t = size(&mut summed.iter().copied());
    let j = size(&mut rest.iter().copied().filter(|&k| sa[k] > 1));
    let k = size(&mut rest.iter().copied().filter(|&k| sb[k] > 1));
    let copies = size(&mut rest.iter().copied().filter(|&k| sa[k] == 1 && sb[k] == 1));
    if t * (j + k) >= j * k {
        return None;
    }
    let order: Vec<usize> = std::iter::once(0)
        .chain(summed.iter().copied())
        .chain(rest.iter().copied())
        .collect();
    let products = |x: &UOp, width: usize| {
        let mut shape = x.shape_vec();
        for &axis in summed {
            shape[axis] = full[axis];
        }
        let rows =
            Tensor::from_uop(x.expand(&shape).permute(&order)).reshape(&[shape[0], t, width]);
        rows.matmul(&rows.transpose(-1, -2))
    };
    let norm = (products(a, j) * products(b, k)).sum(&[1isize, 2][..], true);
    Some(times(&as_shape_of(&norm.uop(), root), copies))
}

/// True for a zero constant, broadcast or not.
fn is_zero(u: &UOp) -> bool {
    match u.op() {
        Op::Expand | Op::Reshape => is_zero(u.s(0)),
        Op::Const => u.const_value().is_some_and(|v| v.as_f64() == 0.0),
        _ => false,
    }
}

/// Per axis of `u`, whether its value may change along that axis: false only where the
/// expands that broadcast `u`'s operands prove it constant (through reshapes that only add or
/// drop axes of size 1, and elementwise ops); true wherever that is not known.
fn varying_axes(u: &UOp) -> Vec<bool> {
    varying(u, &mut HashMap::new())
}

fn varying(u: &UOp, memo: &mut HashMap<UOp, Vec<bool>>) -> Vec<bool> {
    if let Some(known) = memo.get(u) {
        return known.clone();
    }
    let shape = u.shape_vec();
    let unknown: Vec<bool> = shape.iter().map(|&n| n > 1).collect();
    let axes = match u.op() {
        Op::Const => vec![false; shape.len()],
        Op::Expand => {
            let inner = varying(u.s(0), memo);
            match inner.len() == shape.len() {
                true => inner,
                false => unknown,
            }
        }
        Op::Reshape => through_unit_reshape(&u.s(0).shape_vec(), &shape)
            .map(|from| {
                let inner = varying(u.s(0), memo);
                from.iter().map(|f| f.is_some_and(|k| inner[k])).collect()
            })
            .unwrap_or(unknown),
        op if (op.is_elementwise() || op == Op::Cast)
            && u.src().iter().all(|s| s.shape_vec() == shape) =>
        {
            let mut axes = vec![false; shape.len()];
            for s in u.src() {
                for (k, v) in varying(s, memo).into_iter().enumerate() {
                    axes[k] |= v;
                }
            }
            axes
        }
        _ => unknown,
    };
    memo.insert(u.clone(), axes.clone());
    axes
}

/// For a reshape from `from` to `to` that only adds or drops axes of size 1: for each axis of
/// `to`, the axis of `from` it is (`None` for an added axis of size 1).
fn through_unit_reshape(from: &[usize], to: &[usize]) -> Option<Vec<Option<usize>>> {
    let real =
        |shape: &[usize]| -> Vec<usize> { (0..shape.len()).filter(|&k| shape[k] != 1).collect() };
    let (real_from, real_to) = (real(from), real(to));
    let same = real_from.len() == real_to.len()
        && real_from
            .iter()
            .zip(&real_to)
            .all(|(&f, &t)| from[f] == to[t]);
    if !same {
        return None;
    }
    let mut map = vec![None; to.len()];
    for (&f, &t) in real_from.iter().zip(&real_to) {
        map[t] = Some(f);
    }
    Some(map)
}

/// `x` sliced to its first element along every non-batch axis of `full` it does not vary on.
fn narrowed(x: &UOp, varies: &[bool], full: &[usize]) -> UOp {
    let shape = x.shape_vec();
    let ends: Vec<usize> = (0..shape.len())
        .map(|k| match k > 0 && !varies[k] && full[k] > 1 {
            true => 1,
            false => shape[k],
        })
        .collect();
    if ends == shape {
        return x.clone();
    }
    x.shrink(&vec![0; shape.len()], &ends)
}

/// `x` before an `Expand`, else `x`.
fn unexpanded(x: &UOp) -> UOp {
    match x.op() {
        Op::Expand => x.s(0).clone(),
        _ => x.clone(),
    }
}

/// A `SumSq` result (`[B or 1, 1, ..]`) reshaped and broadcast to `root`'s shape.
fn as_shape_of(sum: &UOp, root: &UOp) -> UOp {
    let target = root.shape_vec();
    let batch = sum.shape_vec().first().copied().unwrap_or(1);
    let mut shape = vec![1; target.len()];
    shape[0] = batch;
    let reshaped = if sum.shape_vec().as_slice() == shape.as_slice() {
        sum.clone()
    } else {
        sum.reshape(&shape)
    };
    if batch == target[0] {
        reshaped
    } else {
        reshaped.expand(&target)
    }
}

/// `x · n` for a count `n` (code: a count of copies, exact).
fn times(x: &UOp, n: usize) -> UOp {
    if n == 1 {
        return x.clone();
    }
    let shape = x.shape_vec();
    let count = UOp::constant(n as f64, x.dtype())
        .reshape(&vec![1; shape.len()])
        .expand(&shape);
    UOp::alu(Op::Mul, vec![x.clone(), count])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate;
    use crate::tensor::Tensor;
    use crate::uop::DType;

    fn data(shape: &[usize], seed: usize) -> UOp {
        let n: usize = shape.iter().product();
        let v = (0..n)
            .map(|i| ((i * 7919 + seed * 31) % 97) as f32 / 48.0 - 1.0)
            .collect();
        Tensor::from_vec(v, shape).uop()
    }

    /// The factored norm equals the plain one (within float rounding of another order), and
    /// `gone` no longer appears in it.
    fn check(g: &UOp, gone: impl Fn(&UOp) -> bool) -> UOp {
        let factored = factored_sum_sq(g);
        assert_eq!(factored.shape_vec(), sum_sq(g).shape_vec());
        let (want, got) = (
            evaluate(&sum_sq(g)).to_f64_vec(),
            evaluate(&factored).to_f64_vec(),
        );
        for (w, v) in want.iter().zip(&got) {
            assert!(
                (w - v).abs() <= 1e-5 * w.abs().max(1.0),
                "{got:?} != {want:?}"
            );
        }
        assert!(
            !factored.toposort().iter().any(gone),
            "the rule did not fire"
        );
        factored
    }

    #[test]
    fn a_permutation_that_keeps_the_batch_first_is_skipped() {
        let z = data(&[3, 4, 5], 1);
        check(&z.permute(&[0, 2, 1]), |u| u.op() == Op::Permute);
    }

    #[test]
    fn a_reshape_that_keeps_the_batch_is_skipped() {
        let z = data(&[3, 4, 5], 2);
        check(&z.reshape(&[3, 20]), |u| {
            u.op() == Op::Reshape && u.shape_vec() == [3, 20]
        });
    }

    #[test]
    fn an_expanded_value_counts_its_copies() {
        let z = data(&[3, 1, 4], 3);
        check(&z.expand(&[3, 5, 4]), |u| {
            u.op() == Op::Expand && u.shape_vec() == [3, 5, 4]
        });
    }

    #[test]
    fn the_norm_of_an_outer_product_is_the_product_of_norms() {
        // A dense layer's per-sample gradient: δ [B, J, 1] times x [B, 1, K], permuted and
        // reshaped as vmap(grad) leaves it.
        let delta = data(&[3, 4, 1], 4).expand(&[3, 4, 5]);
        let x = data(&[3, 1, 5], 5).expand(&[3, 4, 5]);
        let g = UOp::alu(Op::Mul, vec![delta, x]).permute(&[0, 2, 1]);
        let full = |u: &UOp| u.op() == Op::Mul && u.shape_vec().iter().product::<usize>() == 60;
        check(&g, full);
    }

    #[test]
    fn an_unbatched_factor_is_broadcast_over_the_batch() {
        let w = data(&[1, 4, 1], 6).expand(&[3, 4, 5]);
        let x = data(&[3, 1, 5], 7).expand(&[3, 4, 5]);
        let full = |u: &UOp| u.op() == Op::Mul && u.shape_vec().iter().product::<usize>() == 60;
        check(&UOp::alu(Op::Mul, vec![w, x]), full);
    }

    #[test]
    fn a_sum_of_outer_products_over_a_short_sequence_takes_the_gram_form() {
        // Σ_t δ_t ⊗ x_t with T = 2, J = 6, K = 5: T (J + K) = 22 < J K = 30.
        let delta = data(&[3, 2, 6, 1], 11).expand(&[3, 2, 6, 5]);
        let x = data(&[3, 2, 1, 5], 12).expand(&[3, 2, 6, 5]);
        let g = UOp::alu(Op::Mul, vec![delta, x]).reduce(ReduceOp::Add, &[1]);
        check(&g, |u| u.op() == Op::Mul && u.shape_vec() == [3, 2, 6, 5]);
        // A long sequence keeps the direct form: T (J + K) = 44 >= 30.
        let delta = data(&[3, 4, 6, 1], 13).expand(&[3, 4, 6, 5]);
        let x = data(&[3, 4, 1, 5], 14).expand(&[3, 4, 6, 5]);
        let g = UOp::alu(Op::Mul, vec![delta, x]).reduce(ReduceOp::Add, &[1]);
        assert_eq!(factored_sum_sq(&g), sum_sq(&g));
    }

    #[test]
    fn a_selection_by_a_one_hot_mask_takes_the_gram_form() {
        // An embedding's per-sample gradient, as `take`'s adjoint builds it: over [B, V, T, D],
        // Σ_t where(pos_v == tok_t, δ_t, 0), with the mask and δ broadcast by expands.
        let (b, v, t, d) = (3, 12, 2, 5);
        let tokens = Tensor::from_vec(vec![4i64, 4, 0, 11, 7, 4], &[b, 1, t, 1]).uop();
        let positions = Tensor::arange(v as i64).uop().reshape(&[1, v, 1, 1]);
        let full = [b, v, t, d];
        let mask = UOp::alu(
            Op::CmpNe,
            vec![positions.expand(&full), tokens.expand(&full)],
        );
        let yes = UOp::constant(true, DType::Bool)
            .reshape(&[1, 1, 1, 1])
            .expand(&full);
        let mask = UOp::alu(Op::CmpNe, vec![mask, yes]);
        let delta = data(&[b, 1, t, d], 15).expand(&full);
        let zero = UOp::constant(0.0, DType::F32)
            .reshape(&[1, 1, 1, 1])
            .expand(&full);
        let g = UOp::new(Op::Where, DType::F32, vec![mask, delta, zero], Arg::None)
            .reduce(ReduceOp::Add, &[2]);
        // T (V + D) = 34 < V D = 60: no [B, V, T, D] selection is left.
        check(&g, |u| u.op() == Op::Where && u.shape_vec() == full);
    }

    #[test]
    fn a_mask_that_varies_with_both_factors_axes_is_left_alone() {
        // A ReLU-like mask over [B, J, T, K] that varies on J and K: not a product of factors.
        let full = [2, 3, 2, 4];
        let mask = UOp::alu(Op::CmpLt, vec![data(&full, 16), data(&full, 17)]);
        let delta = data(&[2, 1, 2, 4], 18).expand(&full);
        let zero = UOp::constant(0.0, DType::F32)
            .reshape(&[1, 1, 1, 1])
            .expand(&full);
        let g = UOp::new(Op::Where, DType::F32, vec![mask, delta, zero], Arg::None)
            .reduce(ReduceOp::Add, &[2]);
        assert_eq!(factored_sum_sq(&g), sum_sq(&g));
    }

    #[test]
    fn factors_sharing_an_axis_are_left_to_the_scheduler() {
        let a = data(&[3, 4, 5], 8);
        let b = data(&[3, 1, 5], 9).expand(&[3, 4, 5]);
        let g = UOp::alu(Op::Mul, vec![a, b]);
        assert_eq!(factored_sum_sq(&g), sum_sq(&g));
    }

    #[test]
    fn the_networks_own_nodes_are_never_rewritten() {
        // g contains a SumSq of a permutation itself (as a layer's variance might): it stays.
        let inner = sum_sq(&data(&[3, 4, 5], 10).permute(&[0, 2, 1]));
        let g = UOp::alu(Op::Mul, vec![inner.clone(), inner.clone()]);
        let factored = factored_sum_sq(&g);
        assert!(factored.toposort().contains(&inner));
    }
}
