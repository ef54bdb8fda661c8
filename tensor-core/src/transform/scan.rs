//! `scan`: a loop with a carry over the leading axis of its inputs, as JAX's `lax.scan`.
//!
//! The loop is unrolled while the graph is built: step `t` calls the body on the carry of
//! step `t - 1` and the `t`th slice of the inputs. Unrolling keeps `scan` an ordinary
//! composition, so every transform (the vmap methods, jvp, vjp, Jacobians) and the
//! scheduler's fusion apply with no rule of their own, and the steps of a recurrent layer
//! fuse across the time axis where the data allow. The cost is in building, scheduling and
//! compiling: the graph grows with the length, and the kernels of two steps differ in the
//! offset of the slice they read, so today each step's kernels are compiled (a kernel that
//! recurs unchanged is compiled once). A loop inside the kernels is future work.

use crate::tensor::Tensor;
use crate::transform::tree::{Tree, tree_leaves, tree_structure, tree_unflatten};

/// Runs `body(carry, x_t) -> (carry, y_t)` for each slice `x_t` of `xs` along axis 0 (of
/// every leaf of the tree `xs`), threading the carry, and returns the last carry and the
/// `y_t` stacked along a new axis 0 (leaf by leaf). As `jax.lax.scan(body, init, xs)`.
///
/// ```
/// use tensor_core::Tensor;
/// use tensor_core::transform::scan::scan;
///
/// // Running sums: the carry is the sum so far, each output the sum after the step.
/// let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]);
/// let (total, sums) = scan(
///     |acc: Tensor, x: Tensor| {
///         let acc = &acc + &x;
///         (acc.clone(), acc)
///     },
///     Tensor::scalar(0.0f32),
///     &xs,
/// );
/// assert_eq!(sums.shape(), vec![4]);
/// # let _ = total;
/// ```
///
/// # Panics
///
/// When `xs` has no tensors, when its leaves differ in their leading length, or when the
/// body returns outputs of different structures at different steps.
#[track_caller]
pub fn scan<C: Tree, X: Tree, Y: Tree>(
    body: impl FnMut(C, X) -> (C, Y),
    init: C,
    xs: &X,
) -> (C, Y) {
    run("scan", body, init, xs, false)
}

/// [`scan`] from the last slice to the first (`lax.scan(..., reverse=True)`): the outputs
/// are stacked in the inputs' order, so `ys[t]` is the output of the step that read `xs[t]`.
///
/// # Panics
///
/// As [`scan`].
#[track_caller]
pub fn scan_reverse<C: Tree, X: Tree, Y: Tree>(
    body: impl FnMut(C, X) -> (C, Y),
    init: C,
    xs: &X,
) -> (C, Y) {
    run("scan_reverse", body, init, xs, true)
}

#[track_caller]
fn run<C: Tree, X: Tree, Y: Tree>(
    op: &str,
    mut body: impl FnMut(C, X) -> (C, Y),
    init: C,
    xs: &X,
    reverse: bool,
) -> (C, Y) {
    let leaves = tree_leaves(xs);
    let length = leading_length(op, &leaves);
    let def = tree_structure(xs);
    let mut carry = init;
    let mut outputs: Vec<Option<Y>> = (0..length).map(|_| None).collect();
    let steps: Vec<usize> = if reverse {
        (0..length).rev().collect()
    } else {
        (0..length).collect()
    };
    for t in steps {
        let x_t = leaves.iter().map(|leaf| slice_at(leaf, t)).collect();
        let (next, y) = body(carry, tree_unflatten(&def, x_t));
        carry = next;
        outputs[t] = Some(y);
    }
    let outputs: Vec<Y> = outputs.into_iter().flatten().collect();
    (carry, stack_outputs(op, &outputs))
}

#[track_caller]
fn leading_length(op: &str, leaves: &[Tensor]) -> usize {
    let Some(first) = leaves.first() else {
        panic!("{op}: `xs` holds no tensor, so the number of steps is unknown")
    };
    let lengths: Vec<Vec<usize>> = leaves.iter().map(Tensor::shape).collect();
    if lengths.iter().any(|s| s.is_empty()) {
        panic!(
            "{op}: every tensor of `xs` needs a leading axis to scan over, got shapes {lengths:?}"
        );
    }
    let length = first.shape()[0];
    if lengths.iter().any(|s| s[0] != length) {
        panic!("{op}: the tensors of `xs` differ in their leading length: shapes {lengths:?}");
    }
    length
}

fn slice_at(leaf: &Tensor, t: usize) -> Tensor {
    leaf.narrow(0, t as isize, 1).squeeze(0)
}

/// The outputs of every step, stacked leaf by leaf along a new axis 0.
#[track_caller]
fn stack_outputs<Y: Tree>(op: &str, outputs: &[Y]) -> Y {
    let Some(first) = outputs.first() else {
        panic!("{op}: zero steps give no outputs to take the structure from")
    };
    let def = tree_structure(first);
    let per_step: Vec<Vec<Tensor>> = outputs.iter().map(tree_leaves).collect();
    if outputs.iter().any(|y| tree_structure(y) != def) {
        panic!("{op}: the body returned outputs of different structures at different steps");
    }
    let stacked = (0..per_step[0].len())
        .map(|leaf| {
            let column: Vec<Tensor> = per_step.iter().map(|step| step[leaf].clone()).collect();
            Tensor::stack(&column, 0)
        })
        .collect();
    tree_unflatten(&def, stacked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate;

    fn values(t: &Tensor) -> Vec<f64> {
        evaluate(&t.uop()).to_f64_vec()
    }

    #[test]
    fn running_sums_and_the_last_carry() {
        let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]);
        let step = |acc: Tensor, x: Tensor| {
            let acc = &acc + &x;
            (acc.clone(), acc)
        };
        let (total, sums) = scan(step, Tensor::scalar(0.0f32), &xs);
        assert_eq!(values(&sums), vec![1.0, 3.0, 6.0, 10.0]);
        assert_eq!(values(&total), vec![10.0]);
        let (total, sums) = scan_reverse(step, Tensor::scalar(0.0f32), &xs);
        assert_eq!(values(&sums), vec![10.0, 9.0, 7.0, 4.0]);
        assert_eq!(values(&total), vec![10.0]);
    }

    #[test]
    fn trees_in_and_out() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]);
        let b = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], &[3]);
        let (carry, (ys, zs)) = scan(
            |c: (Tensor, Tensor), (a, b): (Tensor, Tensor)| {
                let c = (&c.0 + &a, &c.1 * &b);
                (c.clone(), (a.sum_all(), &b + 1.0))
            },
            (
                Tensor::zeros(&[2], crate::uop::DType::F32),
                Tensor::scalar(1.0f32),
            ),
            &(a, b),
        );
        assert_eq!(values(&carry.0), vec![9.0, 12.0]);
        assert_eq!(values(&carry.1), vec![6000.0]);
        assert_eq!(values(&ys), vec![3.0, 7.0, 11.0]);
        assert_eq!(values(&zs), vec![11.0, 21.0, 31.0]);
    }

    #[test]
    #[should_panic(expected = "scan: the tensors of `xs` differ in their leading length")]
    fn leaves_of_different_lengths_are_refused() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
        let b = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
        let _ = scan(
            |c: Tensor, x: (Tensor, Tensor)| (c, x.0),
            Tensor::scalar(0.0f32),
            &(a, b),
        );
    }
}
