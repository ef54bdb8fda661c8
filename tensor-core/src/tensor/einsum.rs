//! Einstein summation, as NumPy's and JAX's `einsum`: every operand is permuted into one order
//! of all the subscripts (output subscripts first) with size-1 axes for the ones it lacks, the
//! operands are multiplied with broadcasting, and the subscripts missing from the output are
//! summed. A subscript repeated within one operand takes its diagonal first. `...` stands for
//! the axes an operand's letters leave unnamed: they are aligned from the right across the
//! operands and broadcast (each gets a subscript of its own, outside the letters).

use super::Tensor;
use crate::uop::Shape;

/// One operand's subscripts, as parsed.
type Subscripts = Vec<char>;

impl Tensor {
    /// `einsum(spec, &[&a, &b])` as `np.einsum(spec, a, b)`: `"ij,jk->ik"` (matmul),
    /// `"bij,bjk->bik"`, `"i,i->"` (dot), `"i,j->ij"` (outer), `"ij->ji"`, `"ii->"` (trace),
    /// `"ij->"`, and without `->` the implicit output (the subscripts used once, sorted).
    /// `...` broadcasts the unnamed axes as NumPy does: `"...ij,...jk->...ik"` (batched
    /// matmul), `"...ii->..."` (batched trace); without `->` they lead the output. Operands
    /// promote as for `*`.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![1, 2, 3, 4], &[2, 2]);
    /// let b = Tensor::from_vec(vec![5, 6, 7, 8], &[2, 2]);
    /// let c = Tensor::einsum("ij,jk->ik", &[&a, &b]);
    /// assert_eq!(evaluate(&c.uop()).to_vec::<i32>(), vec![19, 22, 43, 50]);
    /// assert_eq!(evaluate(&Tensor::einsum("ii", &[&a]).uop()).to_vec::<i32>(), vec![5]);
    /// let batch = Tensor::from_vec(vec![1, 2, 3, 4, 5, 6, 7, 8], &[2, 2, 2]);
    /// let traces = Tensor::einsum("...ii->...", &[&batch]);
    /// assert_eq!(evaluate(&traces.uop()).to_vec::<i32>(), vec![5, 13]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on a malformed spec, on a subscript count that does not match an operand's rank
    /// (more letters than axes with `...`), on one subscript bound to two sizes, on `...` axes
    /// that do not broadcast, and (as NumPy) on an explicit output without `...` where some
    /// operand has `...` axes.
    #[track_caller]
    pub fn einsum(spec: &str, operands: &[&Tensor]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("einsum");
        let (inputs, output) = parse(spec, operands);
        let mut parts: Vec<(Tensor, Subscripts)> = Vec::with_capacity(operands.len());
        for (t, subs) in operands.iter().zip(inputs) {
            parts.push(take_diagonals((*t).clone(), subs));
        }
        let sizes = subscript_sizes(spec, &parts);
        let mut order = output.clone();
        for (_, subs) in &parts {
            for &c in subs {
                if !order.contains(&c) {
                    order.push(c);
                }
            }
        }
        let product = parts
            .iter()
            .map(|(t, subs)| aligned(t, subs, &order))
            .reduce(|a, b| a.mul(&b))
            .expect("einsum has at least one operand");
        let full: Shape = order.iter().map(|c| sizes[c]).collect();
        let product = product.broadcast_to(&full);
        let summed: Vec<usize> = (output.len()..order.len()).collect();
        if summed.is_empty() {
            return product;
        }
        product.sum(&summed, false)
    }
}

/// The subscripts of each input and of the output, `...` replaced by ellipsis subscripts;
/// panics on a malformed spec.
#[track_caller]
fn parse(spec: &str, operands: &[&Tensor]) -> (Vec<Subscripts>, Subscripts) {
    let clean: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match clean.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (clean.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != operands.len() {
        panic!(
            "einsum: {spec:?} names {} operands, {} given",
            terms.len(),
            operands.len()
        );
    }
    let letters: Vec<(Subscripts, bool)> = terms.iter().map(|t| letters_of(spec, t)).collect();
    let mut widths = Vec::with_capacity(terms.len());
    for ((subs, dots), t) in letters.iter().zip(operands) {
        let shape = t.shape();
        let named = subs.len() - usize::from(*dots);
        widths.push(match shape.len().checked_sub(named) {
            Some(w) if *dots => w,
            _ if !*dots && named == shape.len() => 0,
            _ => panic!(
                "einsum: {spec:?} gives {named} subscripts{} to an operand of shape {shape:?}",
                if *dots { " and `...`" } else { "" }
            ),
        });
    }
    let width = widths.iter().copied().max().unwrap_or(0);
    let inputs: Vec<Subscripts> = letters
        .iter()
        .zip(&widths)
        .map(|((subs, _), &w)| with_ellipsis(subs, &ellipsis(width)[width - w..]))
        .collect();
    let output = output_of(spec, rhs.as_deref(), &letters, width);
    (inputs, output)
}

/// The letters of one term and whether it has `...` (at the position of `ELLIPSIS_MARK`).
#[track_caller]
fn letters_of(spec: &str, term: &str) -> (Subscripts, bool) {
    let dots = term.matches("...").count();
    if term.matches('.').count() != 3 * dots {
        panic!("einsum: {spec:?}: the term {term:?} has a `.` outside `...`");
    }
    if dots > 1 {
        panic!("einsum: {spec:?}: `...` appears {dots} times in the term {term:?}");
    }
    let subs: Subscripts = term
        .replacen("...", &ELLIPSIS_MARK.to_string(), 1)
        .chars()
        .collect();
    if let Some(bad) = subs
        .iter()
        .find(|&&c| c != ELLIPSIS_MARK && !c.is_ascii_alphabetic())
    {
        panic!("einsum: {spec:?}: subscript {bad:?} is not a letter");
    }
    (subs, dots == 1)
}

/// Stands for `...` in a parsed term until it is replaced by ellipsis subscripts.
const ELLIPSIS_MARK: char = '.';

/// The subscripts of `width` `...` axes: characters no letter can be.
fn ellipsis(width: usize) -> Subscripts {
    (0..width)
        .map(|k| char::from_u32(0xE000 + k as u32).expect("a private-use character"))
        .collect()
}

fn is_ellipsis(c: char) -> bool {
    ('\u{E000}'..='\u{F8FF}').contains(&c)
}

/// `subs` with its ellipsis mark replaced by `axes`.
fn with_ellipsis(subs: &[char], axes: &[char]) -> Subscripts {
    let mut out = Vec::with_capacity(subs.len() + axes.len());
    for &c in subs {
        if c == ELLIPSIS_MARK {
            out.extend_from_slice(axes);
        } else {
            out.push(c);
        }
    }
    out
}

/// The output subscripts: `rhs` with `...` replaced, or the implicit ones (the `...` axes,
/// then the letters used once, sorted).
#[track_caller]
fn output_of(
    spec: &str,
    rhs: Option<&str>,
    letters: &[(Subscripts, bool)],
    width: usize,
) -> Subscripts {
    let all: Vec<char> = letters
        .iter()
        .flat_map(|(s, _)| s.iter().copied())
        .filter(|&c| c != ELLIPSIS_MARK)
        .collect();
    let output: Subscripts = match rhs {
        Some(r) => {
            let (subs, dots) = letters_of(spec, r);
            if !dots && width > 0 {
                panic!(
                    "einsum: {spec:?}: the operands have {width} axes under `...`, but the \
                     output has no `...` to place them (as NumPy, write `...` in the output)"
                );
            }
            with_ellipsis(&subs, &ellipsis(width))
        }
        None => {
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|c| all.iter().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort_unstable();
            [ellipsis(width), once].concat()
        }
    };
    for (i, c) in output.iter().enumerate() {
        if (!is_ellipsis(*c) && !all.contains(c)) || output[..i].contains(c) {
            panic!("einsum: {spec:?}: output subscript {c:?} is repeated or not in any input");
        }
    }
    output
}

/// The operand with each subscript it repeats replaced by the diagonal (moved last).
fn take_diagonals(mut t: Tensor, mut subs: Subscripts) -> (Tensor, Subscripts) {
    while let Some((a, b)) = first_repeat(&subs) {
        let c = subs[a];
        t = t.diagonal(0, a as isize, b as isize);
        subs.remove(b);
        subs.remove(a);
        subs.push(c);
    }
    (t, subs)
}

fn first_repeat(subs: &[char]) -> Option<(usize, usize)> {
    (0..subs.len()).find_map(|a| {
        (a + 1..subs.len())
            .find(|&b| subs[b] == subs[a])
            .map(|b| (a, b))
    })
}

/// The size of each subscript; panics where one is bound to two sizes.
#[track_caller]
fn subscript_sizes(
    spec: &str,
    parts: &[(Tensor, Subscripts)],
) -> std::collections::HashMap<char, usize> {
    let mut sizes: std::collections::HashMap<char, usize> = std::collections::HashMap::new();
    for (t, subs) in parts {
        for (&c, &d) in subs.iter().zip(&t.shape()) {
            let d = match sizes.get(&c) {
                Some(&prev) if prev == d => d,
                Some(&prev) if is_ellipsis(c) && (prev == 1 || d == 1) => prev.max(d),
                Some(&prev) if is_ellipsis(c) => panic!(
                    "einsum: {spec:?}: the `...` axes of the operands do not broadcast (sizes \
                     {prev} and {d}; operand shapes {:?})",
                    parts.iter().map(|(t, _)| t.shape()).collect::<Vec<_>>()
                ),
                Some(&prev) => {
                    panic!("einsum: {spec:?}: subscript {c:?} is bound to sizes {prev} and {d}")
                }
                None => d,
            };
            sizes.insert(c, d);
        }
    }
    sizes
}

/// `t` permuted into `order` (restricted to its subscripts), with size-1 axes for the rest.
fn aligned(t: &Tensor, subs: &[char], order: &[char]) -> Tensor {
    let perm: Vec<usize> = order
        .iter()
        .filter_map(|c| subs.iter().position(|s| s == c))
        .collect();
    let permuted = t.permute(&perm);
    let shape = permuted.shape();
    let mut next = shape.iter();
    let spread: Shape = order
        .iter()
        .map(|c| {
            if subs.contains(c) {
                *next.next().unwrap()
            } else {
                1
            }
        })
        .collect();
    permuted.reshape(&spread)
}
