//! Index arithmetic for kernel ASTs: folding constructors over `Index`-typed UOps and the
//! row-major flattening that turns per-axis indices into one buffer offset and back.
//!
//! Every constructor folds what bounds (`min_max`) decide on the spot, so the index
//! expressions movement ops produce stay small (`(i*3 + j) // 3 -> i` when `j < 3`). The
//! general `symbolic` rule table simplifies whatever is left.
//!
//! [`idiv`] and [`modulo`] fold with floor-division identities even where the bounds let the
//! dividend go negative. That is sound for the lowering's indices: an index asked of a node is
//! in range wherever its validity gate holds (that is what the gates say), so the dividend is
//! non-negative there and floor and truncating division agree; where the gate fails, the
//! value is never read (loads are gated, values are masked). So the bounds checks take the
//! dividend as at least 0 (`(i - 1) % 26` is `i - 1` for `i < 27`). Without this, every
//! padded window (`i - 1` read through a reshape) kept a chain of `/` and `%` per load.

use crate::uop::{DType, Op, UOp};

/// An index-typed constant.
pub fn int(v: i64) -> UOp {
    UOp::index(v)
}

/// A bool constant.
pub fn truth(v: bool) -> UOp {
    UOp::constant(v, DType::Bool)
}

fn int_value(u: &UOp) -> Option<i64> {
    u.const_value().map(|v| v.as_i64())
}

fn lo(u: &UOp) -> i64 {
    u.vmin().as_i64()
}

fn hi(u: &UOp) -> i64 {
    u.vmax().as_i64()
}

/// `a + b`, folding constants and zeros.
pub fn add(a: &UOp, b: &UOp) -> UOp {
    match (int_value(a), int_value(b)) {
        (Some(x), Some(y)) => int(x + y),
        (Some(0), _) => b.clone(),
        (_, Some(0)) => a.clone(),
        (Some(_), None) => add(b, a),
        (None, Some(c)) if a.op() == Op::Add && int_value(a.s(1)).is_some() => {
            add(a.s(0), &int(c + int_value(a.s(1)).unwrap_or(0)))
        }
        _ => UOp::alu(Op::Add, vec![a.clone(), b.clone()]),
    }
}

/// `a * b`, folding constants, ones and zeros.
pub fn mul(a: &UOp, b: &UOp) -> UOp {
    match (int_value(a), int_value(b)) {
        (Some(x), Some(y)) => int(x * y),
        (Some(0), _) | (_, Some(0)) => int(0),
        (Some(1), _) => b.clone(),
        (_, Some(1)) => a.clone(),
        (Some(_), None) => mul(b, a),
        _ => UOp::alu(Op::Mul, vec![a.clone(), b.clone()]),
    }
}

/// A sum `Σ term·coefficient + constant`: the shape flatten/unravel arithmetic takes.
struct Linear {
    terms: Vec<(UOp, i64)>,
    constant: i64,
}

impl Linear {
    fn of(u: &UOp) -> Linear {
        let mut lin = Linear {
            terms: Vec::new(),
            constant: 0,
        };
        lin.collect(u, 1);
        lin
    }

    /// Adds `scale * u`'s terms, left operands first (an explicit stack: a sum of any length).
    fn collect(&mut self, u: &UOp, scale: i64) {
        let mut stack = vec![(u.clone(), scale)];
        while let Some((u, scale)) = stack.pop() {
            if let Some(c) = int_value(&u) {
                self.constant += c * scale;
                continue;
            }
            match u.op() {
                Op::Add => {
                    stack.push((u.s(1).clone(), scale));
                    stack.push((u.s(0).clone(), scale));
                }
                Op::Mul if int_value(u.s(1)).is_some() => {
                    let k = int_value(u.s(1)).unwrap_or(1);
                    stack.push((u.s(0).clone(), scale * k));
                }
                _ => self.terms.push((u, scale)),
            }
        }
    }

    fn build(terms: &[(UOp, i64)], constant: i64) -> UOp {
        let sum = terms
            .iter()
            .fold(int(0), |acc, (t, k)| add(&acc, &mul(t, &int(*k))));
        add(&sum, &int(constant))
    }

    /// Splits into the part divisible by `n` (returned divided by `n`) and the rest.
    fn split(&self, n: i64) -> (UOp, UOp, bool) {
        let (whole, rest): (Vec<_>, Vec<_>) =
            self.terms.iter().cloned().partition(|t| t.1 % n == 0);
        let (cw, cr) = (self.constant.div_euclid(n), self.constant.rem_euclid(n));
        let any_whole = !whole.is_empty() || cw != 0;
        let quotient: Vec<_> = whole.into_iter().map(|(t, k)| (t, k / n)).collect();
        (
            Linear::build(&quotient, cw),
            Linear::build(&rest, cr),
            any_whole,
        )
    }
}

impl Linear {
    /// `a = g·whole + rest` for a factor `1 < g < n` of `n` that divides every coefficient
    /// but those of `rest`, with `0 <= rest < g`: then `a // n = whole // (n/g)` and
    /// `a % n = (whole % (n/g))·g + rest`, with no division of the small terms. This is the
    /// index of a window axis inside a flattened one (`(k·576 + p) // 5184 = k // 9` for a
    /// position `p < 576`). The largest such factor is taken.
    fn split_by_factor(&self, n: i64) -> Option<(i64, UOp, UOp)> {
        let mut factors: Vec<i64> = self
            .terms
            .iter()
            .map(|t| gcd(t.1.abs(), n))
            .filter(|&g| g > 1 && g < n)
            .collect();
        factors.sort_unstable_by(|a, b| b.cmp(a));
        factors.dedup();
        factors.into_iter().find_map(|g| {
            let (whole, rest): (Vec<_>, Vec<_>) =
                self.terms.iter().cloned().partition(|t| t.1 % g == 0);
            if whole.is_empty() {
                return None;
            }
            let quotient: Vec<_> = whole.into_iter().map(|(t, k)| (t, k / g)).collect();
            let whole = Linear::build(&quotient, self.constant.div_euclid(g));
            let rest = Linear::build(&rest, self.constant.rem_euclid(g));
            (lo(&rest) >= 0 && hi(&rest) < g).then_some((g, whole, rest))
        })
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `a // n` for a positive constant `n` and an index `a` that is non-negative wherever it is
/// read (see the module docs), using bounds to drop what cannot matter.
pub fn idiv(a: &UOp, n: i64) -> UOp {
    if n <= 0 {
        // A stride of an empty array: no element is read; the index keeps its ranges, so
        // the loads stay inside the loops that never run.
        return a.clone();
    }
    if n == 1 {
        return a.clone();
    }
    if let Some(c) = int_value(a) {
        return int(c.div_euclid(n));
    }
    if lo(a).max(0) / n == hi(a).max(0) / n {
        return int(hi(a).max(0) / n);
    }
    let (quotient, rest, any_whole) = Linear::of(a).split(n);
    if any_whole && lo(&rest) >= 0 && hi(&rest) < n {
        return quotient;
    }
    if let Some((g, whole, _)) = Linear::of(a).split_by_factor(n) {
        return idiv(&whole, n / g);
    }
    UOp::alu(Op::Idiv, vec![a.clone(), int(n)])
}

/// `a % n` for a positive constant `n` and an index `a` that is non-negative wherever it is
/// read (see the module docs), using bounds to drop what cannot matter.
pub fn modulo(a: &UOp, n: i64) -> UOp {
    if n <= 0 {
        // An axis of an empty array: as in `idiv`.
        return a.clone();
    }
    if n == 1 {
        return int(0);
    }
    if let Some(c) = int_value(a) {
        return int(c.rem_euclid(n));
    }
    if hi(a) < n {
        return a.clone();
    }
    let (_, rest, any_whole) = Linear::of(a).split(n);
    if any_whole && lo(&rest) >= 0 {
        return modulo(&rest, n);
    }
    if let Some((g, whole, rest)) = Linear::of(a).split_by_factor(n) {
        return add(&mul(&modulo(&whole, n / g), &int(g)), &rest);
    }
    UOp::alu(Op::Mod, vec![a.clone(), int(n)])
}

/// `a < b` as a bool, folded when the bounds decide it.
pub fn less(a: &UOp, b: &UOp) -> UOp {
    if hi(a) < lo(b) {
        truth(true)
    } else if lo(a) >= hi(b) {
        truth(false)
    } else {
        UOp::alu(Op::CmpLt, vec![a.clone(), b.clone()])
    }
}

/// `a && b` over optional gates (`None` is "always valid"), folding constant gates.
pub fn and(a: Option<UOp>, b: Option<UOp>) -> Option<UOp> {
    let is = |g: &UOp, v: bool| g.const_value().is_some_and(|c| c.as_bool() == v);
    match (a, b) {
        (None, g) | (g, None) => g.filter(|g| !is(g, true)),
        (Some(a), Some(b)) if is(&a, false) || is(&b, false) => Some(truth(false)),
        (Some(a), Some(b)) if is(&a, true) => Some(b).filter(|g| !is(g, true)),
        (Some(a), Some(b)) if is(&b, true) || a == b => Some(a),
        (Some(a), Some(b)) => Some(UOp::alu(Op::And, vec![a, b])),
    }
}

/// The clauses of a gate that is a tree of `And`s, left to right: `(a && b) && c` is
/// `[a, b, c]`. Iterative, so a gate of thousands of clauses needs no deep stack.
pub fn conjuncts(gate: &UOp) -> Vec<UOp> {
    let mut clauses = Vec::new();
    let mut pending = vec![gate.clone()];
    while let Some(g) = pending.pop() {
        if g.op() == Op::And && g.dtype() == crate::uop::DType::Bool {
            pending.push(g.s(1).clone());
            pending.push(g.s(0).clone());
        } else {
            clauses.push(g);
        }
    }
    clauses
}

/// The row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1] as i64;
    }
    strides
}

/// The offset of element `idx` of a row-major array of `shape`.
pub fn flatten(idx: &[UOp], shape: &[usize]) -> UOp {
    assert_eq!(idx.len(), shape.len(), "flatten: one index per axis");
    idx.iter()
        .zip(strides(shape))
        .fold(int(0), |acc, (i, s)| add(&acc, &mul(i, &int(s))))
}

/// The per-axis indices of offset `flat` in a row-major array of `shape`.
pub fn unravel(flat: &UOp, shape: &[usize]) -> Vec<UOp> {
    shape
        .iter()
        .zip(strides(shape))
        .map(|(&d, s)| {
            if d == 1 {
                int(0)
            } else {
                modulo(&idiv(flat, s), d as i64)
            }
        })
        .collect()
}

/// Every `Range` an index expression depends on.
pub fn ranges_in(exprs: &[UOp]) -> Vec<UOp> {
    let mut out: Vec<UOp> = Vec::new();
    for e in exprs {
        for u in e.toposort() {
            if u.op() == Op::Range && !out.contains(&u) {
                out.push(u);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clauses_of_a_long_and_chain_come_out_in_order_on_a_small_stack() {
        let r = UOp::range(100, 0, crate::uop::AxisType::Loop);
        let clauses: Vec<UOp> = (0..50_000)
            .map(|k| UOp::alu(Op::CmpLt, vec![r.clone(), int(k)]))
            .collect();
        let gate = clauses[1..].iter().fold(clauses[0].clone(), |g, c| {
            UOp::alu(Op::And, vec![g, c.clone()])
        });
        let found = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || conjuncts(&gate))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(found, clauses);
    }
    use crate::uop::AxisType;

    fn r(bound: usize, id: usize) -> UOp {
        UOp::range(bound, id, AxisType::Loop)
    }

    #[test]
    fn reshape_round_trip_folds_back_to_the_ranges() {
        let (i, j) = (r(2, 0), r(3, 1));
        let flat = flatten(&[i.clone(), j.clone()], &[2, 3]);
        assert_eq!(unravel(&flat, &[2, 3]), vec![i, j]);
    }

    #[test]
    fn splitting_an_axis_gives_division_and_remainder() {
        let k = r(6, 0);
        let parts = unravel(&k, &[2, 3]);
        assert_eq!(parts[0], UOp::alu(Op::Idiv, vec![k.clone(), int(3)]));
        assert_eq!(parts[1], UOp::alu(Op::Mod, vec![k, int(3)]));
    }

    #[test]
    fn a_window_axis_in_a_flattened_one_needs_no_division_of_the_position() {
        // The column index k of an im2col view [C*9, P] read through its [C, 9, P] source.
        let (k, p) = (r(288, 0), r(576, 1));
        let flat = add(&mul(&k, &int(576)), &p);
        assert_eq!(
            idiv(&flat, 5184),
            UOp::alu(Op::Idiv, vec![k.clone(), int(9)])
        );
        let expected = add(
            &mul(&UOp::alu(Op::Mod, vec![k.clone(), int(9)]), &int(576)),
            &p,
        );
        assert_eq!(modulo(&flat, 5184), expected);
    }

    #[test]
    fn a_padded_window_read_through_a_reshape_needs_no_division() {
        // Row i - 1 of a [26, 26] array (a pad by one, gated by 0 < i) flattened and read
        // back: the rows and columns come back without `/` or `%`, though i - 1 can be -1
        // where the gate fails.
        let (i, j) = (r(27, 0), r(26, 1));
        let row = add(&i, &int(-1));
        let flat = flatten(&[row.clone(), j.clone()], &[26, 26]);
        assert_eq!(unravel(&flat, &[26, 26]), vec![row.clone(), j.clone()]);
        // Split into [13, 2, 26]: the row's halves still need a division, the column none.
        let parts = unravel(&flat, &[13, 2, 26]);
        assert_eq!(parts[2], j);
        assert_eq!(parts[0], UOp::alu(Op::Idiv, vec![row.clone(), int(2)]));
        // Constants fold as floor division: (-27) // 26 = -2, (-27) % 26 = 25.
        assert_eq!(idiv(&int(-27), 26), int(-2));
        assert_eq!(modulo(&int(-27), 26), int(25));
    }

    #[test]
    fn constants_and_bounds_fold() {
        let i = r(4, 0);
        assert_eq!(add(&add(&i, &int(2)), &int(-2)), i);
        assert_eq!(mul(&i, &int(0)), int(0));
        assert_eq!(less(&i, &int(4)), truth(true));
        assert_eq!(less(&i, &int(0)), truth(false));
        assert_eq!(and(Some(truth(true)), None), None);
        assert_eq!(idiv(&i, 4), int(0));
        assert_eq!(modulo(&i, 4), i);
    }
}
