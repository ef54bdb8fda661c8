//! Einstein summation, as NumPy's and JAX's `einsum` without `...`: every operand is permuted
//! into one order of all the subscripts (output subscripts first) with size-1 axes for the ones
//! it lacks, the operands are multiplied with broadcasting, and the subscripts missing from
//! the output are summed. A subscript repeated within one operand takes its diagonal first.

use super::Tensor;
use crate::uop::Shape;

/// One operand's subscripts, as parsed.
type Subscripts = Vec<char>;

impl Tensor {
    /// `einsum(spec, &[&a, &b])` as `np.einsum(spec, a, b)`: `"ij,jk->ik"` (matmul),
    /// `"bij,bjk->bik"`, `"i,i->"` (dot), `"i,j->ij"` (outer), `"ij->ji"`, `"ii->"` (trace),
    /// `"ij->"`, and without `->` the implicit output (the subscripts used once, sorted). Operands
    /// promote as for `*`.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![1, 2, 3, 4], &[2, 2]);
    /// let b = Tensor::from_vec(vec![5, 6, 7, 8], &[2, 2]);
    /// let c = Tensor::einsum("ij,jk->ik", &[&a, &b]);
    /// assert_eq!(evaluate(&c.uop()).to_vec::<i32>(), vec![19, 22, 43, 50]);
    /// assert_eq!(evaluate(&Tensor::einsum("ii", &[&a]).uop()).to_vec::<i32>(), vec![5]);
    /// ```
    ///
    /// # Panics
    ///
    /// Panics on a malformed spec (with `...`, which is not supported, among them), on a subscript
    /// count that does not match an operand's rank, and on one subscript bound to two sizes.
    #[track_caller]
    pub fn einsum(spec: &str, operands: &[&Tensor]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("einsum");
        let (inputs, output) = parse(spec, operands.len());
        let mut parts: Vec<(Tensor, Subscripts)> = Vec::with_capacity(operands.len());
        for (t, subs) in operands.iter().zip(inputs) {
            if subs.len() != t.ndim() {
                panic!(
                    "einsum: {spec:?} gives {} subscripts to an operand of shape {:?}",
                    subs.len(),
                    t.shape()
                );
            }
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

/// The subscripts of each input and of the output; panics on a malformed spec.
#[track_caller]
fn parse(spec: &str, count: usize) -> (Vec<Subscripts>, Subscripts) {
    let clean: String = spec.chars().filter(|c| !c.is_whitespace()).collect();
    if clean.contains("...") {
        panic!("einsum: {spec:?}: `...` is not supported; name every axis");
    }
    let (lhs, rhs) = match clean.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (clean.clone(), None),
    };
    let inputs: Vec<Subscripts> = lhs.split(',').map(|s| s.chars().collect()).collect();
    if inputs.len() != count {
        panic!(
            "einsum: {spec:?} names {} operands, {count} given",
            inputs.len()
        );
    }
    let all: Vec<char> = inputs.iter().flatten().copied().collect();
    if let Some(bad) = all.iter().find(|c| !c.is_ascii_alphabetic()) {
        panic!("einsum: {spec:?}: subscript {bad:?} is not a letter");
    }
    let output: Subscripts = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|c| all.iter().filter(|d| *d == c).count() == 1)
                .collect();
            once.sort_unstable();
            once
        }
    };
    for (i, c) in output.iter().enumerate() {
        if !all.contains(c) || output[..i].contains(c) {
            panic!("einsum: {spec:?}: output subscript {c:?} is repeated or not in any input");
        }
    }
    (inputs, output)
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
    let mut sizes = std::collections::HashMap::new();
    for (t, subs) in parts {
        for (&c, &d) in subs.iter().zip(&t.shape()) {
            if let Some(&prev) = sizes.get(&c)
                && prev != d
            {
                panic!("einsum: {spec:?}: subscript {c:?} is bound to sizes {prev} and {d}");
            }
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
