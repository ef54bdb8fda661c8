//! Index expressions as linear sums `Σ coef·term + constant`: the rules that need to see a
//! whole sum at once, whatever order its additions were built in.
//!
//! Rangeify builds flat offsets as `Σ r_i·stride_i` and unravels them with `/` and `%`; these
//! rules put such offsets back together (`c·e·(x/c) + e·(x%c) = e·x`) and divide sums term by
//! term (`(c·q + r) / c = q + r / c` when `0 <= r`).

use super::{add, hi, konst, lo, mul_c};
use crate::uop::{Op, UOp};

/// Sums with more terms than this are left alone (it bounds the work per node).
const MAX_TERMS: usize = 64;

/// `Σ coef·term + constant` over the dtype of the sum.
#[derive(Clone, Debug, PartialEq)]
struct LinearSum {
    terms: Vec<(UOp, i64)>,
    constant: i64,
}

impl LinearSum {
    /// The sum an `Add` tree stands for (`None` when it is too large or its constants are
    /// not integers).
    fn of(u: &UOp) -> Option<LinearSum> {
        let mut sum = LinearSum {
            terms: Vec::new(),
            constant: 0,
        };
        let mut stack = vec![u.clone()];
        while let Some(node) = stack.pop() {
            if node.op() == Op::Add && node.dtype() == u.dtype() {
                stack.push(node.s(1).clone());
                stack.push(node.s(0).clone());
            } else if let Some(v) = node.const_value() {
                sum.constant = sum.constant.checked_add(v.as_i64())?;
            } else {
                sum.terms.push(scaled_term(&node));
                if sum.terms.len() > MAX_TERMS {
                    return None;
                }
            }
        }
        Some(sum)
    }

    /// The sum as a node of `like`'s dtype, terms in order, the constant last.
    fn build(&self, like: &UOp) -> UOp {
        let mut parts = self
            .terms
            .iter()
            .filter(|(_, coef)| *coef != 0)
            .map(|(term, coef)| {
                if *coef == 1 {
                    term.clone()
                } else {
                    mul_c(term.clone(), *coef)
                }
            });
        let first = parts.next();
        let sum = parts.fold(first, |acc, t| Some(acc.map_or(t.clone(), |a| add(a, t))));
        match sum {
            None => konst(like, self.constant),
            Some(s) if self.constant == 0 => s,
            Some(s) => add(s, konst(like, self.constant)),
        }
    }

    /// Merges `a·x + b·x` into `(a+b)·x` and drops `0·x`; true when anything changed.
    fn merge_like_terms(&mut self) -> Option<bool> {
        let before = self.terms.len();
        let mut merged: Vec<(UOp, i64)> = Vec::with_capacity(before);
        for (term, coef) in self.terms.drain(..) {
            match merged.iter_mut().find(|(t, _)| *t == term) {
                Some((_, c)) => *c = c.checked_add(coef)?,
                None => merged.push((term, coef)),
            }
        }
        merged.retain(|(_, c)| *c != 0);
        let changed = merged.len() != before;
        self.terms = merged;
        Some(changed)
    }

    /// Finds a pair `c·e·q + e·(a%c)` where `q` is `a/c` (=> `e·a`), `(a/c)%d`
    /// (=> `e·(a%(c·d))`) or `(a%m)/c` with `c | m` (=> `e·(a%m)`), for `a >= 0`, and replaces
    /// it; true when one was found. `a/c` may be written `x/(k·c)` when `a` is `x/k`.
    fn recombine_divmod_pair(&mut self) -> bool {
        for j in 0..self.terms.len() {
            let (rem, e) = &self.terms[j];
            let Some((a, c)) = by_constant(rem, Op::Mod) else {
                continue;
            };
            for i in 0..self.terms.len() {
                let (quot, coef) = &self.terms[i];
                if i == j || c.checked_mul(*e) != Some(*coef) {
                    continue;
                }
                if let Some(whole) = recombined(quot, &a, c) {
                    let e = *e;
                    self.terms[i] = (whole, e);
                    self.terms.remove(j);
                    return true;
                }
            }
        }
        false
    }
}

/// What `c·quot + a%c` equals, when `quot` is one of the quotients that pair with `a % c`.
fn recombined(quot: &UOp, a: &UOp, c: i64) -> Option<UOp> {
    if is_quotient(quot, a, c) {
        return Some(a.clone());
    }
    if lo(a) < 0 {
        return None;
    }
    if let Some((inner, d)) = by_constant(quot, Op::Mod)
        && is_quotient(&inner, a, c)
    {
        return Some(super::mod_c(a.clone(), c.checked_mul(d)?));
    }
    let (inner, divisor) = by_constant(quot, Op::Idiv)?;
    let (x, m) = by_constant(&inner, Op::Mod)?;
    (divisor == c && &x == a && m % c == 0).then(|| inner.clone())
}

/// True when `q` is `a / c`, also when `a` is `x / k` and `q` is `x / (k·c)`.
fn is_quotient(q: &UOp, a: &UOp, c: i64) -> bool {
    let Some((x, n)) = by_constant(q, Op::Idiv) else {
        return false;
    };
    if &x == a && n == c {
        return true;
    }
    match by_constant(a, Op::Idiv) {
        Some((y, k)) => y == x && lo(&y) >= 0 && k.checked_mul(c) == Some(n),
        None => false,
    }
}

/// A node as `(term, coef)`: `x * c` is `(x, c)`, anything else is `(node, 1)`.
fn scaled_term(u: &UOp) -> (UOp, i64) {
    match by_constant(u, Op::Mul) {
        Some((x, c)) => (x, c),
        None => (u.clone(), 1),
    }
}

/// `(x, c)` when `u` is `op(x, c)` with a constant `c > 0` (any constant for `Mul`).
fn by_constant(u: &UOp, op: Op) -> Option<(UOp, i64)> {
    if u.op() != op {
        return None;
    }
    let c = u.s(1).const_value()?.as_i64();
    (op == Op::Mul || c > 0).then(|| (u.s(0).clone(), c))
}

/// A sum rebuilt with like terms merged and unravelled offsets put back together, or `None`
/// when nothing combines.
pub(super) fn fold_terms(u: &UOp) -> Option<UOp> {
    let mut sum = LinearSum::of(u)?;
    let before = sum.terms.len();
    let mut changed = false;
    loop {
        let merged = sum.merge_like_terms()?;
        let recombined = sum.recombine_divmod_pair();
        changed |= merged || recombined;
        if !recombined {
            break;
        }
    }
    (changed || sum.terms.len() < before).then(|| sum.build(u))
}

/// `x / c` or `x % c` for a sum `x = c·Q + R` (coefficients split by Euclidean division)
/// with `x >= 0` and `R >= 0`: the quotient is `Q + R / c` and the remainder `R % c`.
pub(super) fn divmod_of_linear_sum(op: Op, x: &UOp, c: i64) -> Option<UOp> {
    if c <= 0 || lo(x) < 0 {
        return None;
    }
    let sum = LinearSum::of(x)?;
    let split = |v: i64| (v.div_euclid(c), v.rem_euclid(c));
    let quotient = LinearSum {
        terms: sum
            .terms
            .iter()
            .map(|(t, a)| (t.clone(), split(*a).0))
            .collect(),
        constant: split(sum.constant).0,
    };
    let rest = LinearSum {
        terms: sum
            .terms
            .iter()
            .map(|(t, a)| (t.clone(), split(*a).1))
            .collect(),
        constant: split(sum.constant).1,
    };
    let nothing_divides = quotient.constant == 0 && quotient.terms.iter().all(|(_, q)| *q == 0);
    if nothing_divides {
        return None;
    }
    let rest = rest.build(x);
    if lo(&rest) < 0 {
        return None;
    }
    Some(match op {
        Op::Idiv => add(quotient.build(x), super::idiv_c(rest, c)),
        _ => super::mod_c(rest, c),
    })
}

/// `x % c` when every value of `x` has the same quotient `k` by `c`: `x - k·c`.
pub(super) fn remainder_in_one_bucket(x: &UOp, c: i64) -> Option<UOp> {
    if c <= 0 {
        return None;
    }
    let (q_lo, q_hi) = (lo(x) / c, hi(x) / c);
    let same_sign = lo(x) >= 0 || hi(x) <= 0;
    let offset = q_lo.checked_mul(c)?.checked_neg()?;
    (q_lo == q_hi && q_lo != 0 && same_sign).then(|| super::add_c(x.clone(), offset))
}
