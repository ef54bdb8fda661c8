//! What users do with trees: their leaves, their structure, mapping a function over the
//! leaves of one tree or of two trees of the same structure, and the arithmetic of an
//! optimizer step (`params - lr * grads` is `tree_sub(&p, &tree_scale(&g, lr))`).

use crate::tensor::Tensor;
use crate::transform::tree::{Tree, TreeDef};
use std::panic::Location;

/// The tensors of `tree`, in order.
pub fn tree_leaves<T: Tree>(tree: &T) -> Vec<Tensor> {
    let mut leaves = Vec::new();
    tree.flatten(&mut leaves);
    leaves
}

/// The structure of `tree`.
pub fn tree_structure<T: Tree>(tree: &T) -> TreeDef {
    tree.structure()
}

/// The tree of structure `def` holding `leaves` (in order). Panics, naming the counts, when
/// `leaves` does not have one tensor per leaf of `def`.
#[track_caller]
pub fn tree_unflatten<T: Tree>(def: &TreeDef, leaves: Vec<Tensor>) -> T {
    let expected = def.num_leaves();
    if leaves.len() != expected {
        panic!(
            "tree_unflatten: the structure {} has {expected} leaves, but {} tensors were given (called at {})",
            def.describe(),
            leaves.len(),
            Location::caller()
        );
    }
    T::unflatten(def, &mut leaves.into_iter())
}

/// `tree` with `f` applied to each of its tensors.
pub fn tree_map<T: Tree>(tree: &T, f: impl FnMut(&Tensor) -> Tensor) -> T {
    let leaves = tree_leaves(tree).iter().map(f).collect();
    T::unflatten(&tree.structure(), &mut Vec::into_iter(leaves))
}

/// `f` applied to the tensors of `a` and `b` pairwise, as a tree of their structure. Panics
/// with the path of the first difference when the structures differ (`tree_zip_map: the
/// trees differ at tree.layers[2]: Vec of 3 vs Vec of 2`).
#[track_caller]
pub fn tree_zip_map<T: Tree>(a: &T, b: &T, mut f: impl FnMut(&Tensor, &Tensor) -> Tensor) -> T {
    let def = a.structure();
    if let Some(why) = def.mismatch(&b.structure(), "tree") {
        panic!(
            "tree_zip_map: the trees differ {why} (called at {})",
            Location::caller()
        );
    }
    let leaves = tree_leaves(a)
        .iter()
        .zip(&tree_leaves(b))
        .map(|(x, y)| f(x, y))
        .collect();
    T::unflatten(&def, &mut Vec::into_iter(leaves))
}

/// A tree of zeros shaped like `tree`.
pub fn tree_zeros_like<T: Tree>(tree: &T) -> T {
    tree_map(tree, Tensor::zeros_like)
}

/// `a + b`, leaf by leaf.
#[track_caller]
pub fn tree_add<T: Tree>(a: &T, b: &T) -> T {
    tree_zip_map(a, b, |x, y| x + y)
}

/// `a - b`, leaf by leaf.
#[track_caller]
pub fn tree_sub<T: Tree>(a: &T, b: &T) -> T {
    tree_zip_map(a, b, |x, y| x - y)
}

/// `s * tree`, leaf by leaf.
pub fn tree_scale<T: Tree>(tree: &T, s: f64) -> T {
    tree_map(tree, |x| x * s)
}

/// The sum over all leaves of the products of `a` and `b` (a scalar): `tree_vdot(&g, &g)` is
/// the squared global norm of the gradients.
#[track_caller]
pub fn tree_vdot<T: Tree>(a: &T, b: &T) -> Tensor {
    let products = tree_leaves(&tree_zip_map(a, b, |x, y| (x * y).sum_all()));
    products
        .into_iter()
        .reduce(|acc, p| acc + p)
        .unwrap_or_else(|| Tensor::zeros(&[0usize; 0], crate::uop::DType::F32))
}
