//! The type of a Jacobian of a tree-valued function, as JAX nests them: the output tree's
//! structure, each of its leaves holding a tree shaped like the input (the blocks
//! `∂ out_leaf / ∂ in_leaf`, of shape `out_leaf.shape ++ in_leaf.shape`).
//!
//! [`HasJacobian`] names that type for each output type: a tensor's Jacobian is the input tree
//! itself, containers whose type can hold other trees (tuples, arrays, `Vec`, `Option`,
//! `BTreeMap`) hold the Jacobians of their items, and a `#[derive(Tree)]` struct, whose fields
//! are tensors and cannot hold trees, gives a [`TreeJacobian`]: one input-shaped row per
//! tensor of the struct, read by field with [`TreeJacobian::of`] and [`TreeJacobian::wrt`].
//! Leaves are in the same order in every case: output leaves outermost, input leaves inside.

use crate::tensor::Tensor;
use crate::transform::tree::{Key, Leaves, NodeKind, StaticValue, Tree, TreeDef, expect_node};
use crate::uop::DType;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

#[diagnostic::on_unimplemented(
    message = "the Jacobian of a `{Self}` has no type",
    label = "`{Self}` does not implement `HasJacobian`",
    note = "a tensor, tuples, arrays, `Vec`, `Option` and `BTreeMap<String, _>` of them and `#[derive(Tree)]` structs have one; implement `HasJacobian` next to a hand-written `Tree` (a struct's Jacobian is a `TreeJacobian<Self, T>`)"
)]
/// An output type whose Jacobian type is known: `Jacobian<T>` is the Jacobian of a value of
/// this type with respect to an argument of type `T`.
pub trait HasJacobian: Tree {
    /// The Jacobian of this type with respect to a tree of type `T`.
    type Jacobian<T: Tree>: Tree;
    /// The structure of that Jacobian, from the output's structure `out` and the argument's
    /// `wrt`.
    fn jacobian_def(out: &TreeDef, wrt: &TreeDef) -> TreeDef;
}

/// The structure of a [`TreeJacobian`] of outputs of structure `out` with respect to `wrt`:
/// a `TreeJacobian` node holding one `wrt` per leaf of `out`, and `out` as its static field.
pub fn tree_jacobian_def(out: &TreeDef, wrt: &TreeDef) -> TreeDef {
    TreeDef::Node {
        kind: NodeKind::Struct(JACOBIAN),
        children: (0..out.num_leaves())
            .map(|k| (Key::Index(k), wrt.clone()))
            .collect(),
        statics: vec![StaticValue::new(out)],
    }
}

const JACOBIAN: &str = "TreeJacobian";

/// The Jacobian of a function returning an `O` (a derived struct, say) with respect to an
/// argument of type `I`: per tensor of `O`, in leaf order, an `I` whose tensors are the blocks
/// `∂ out_leaf / ∂ in_leaf`. JAX's `J["loss"]["w"]` is `j.of(|o| &o.loss).w`, and
/// `j.wrt(|p| &p.w)` is the column of blocks `∂ · / ∂ w` shaped like `O`.
pub struct TreeJacobian<O, I> {
    out: TreeDef,
    rows: Vec<I>,
    output: PhantomData<fn() -> O>,
}

impl<O, I: Clone> Clone for TreeJacobian<O, I> {
    fn clone(&self) -> Self {
        TreeJacobian {
            out: self.out.clone(),
            rows: self.rows.clone(),
            output: PhantomData,
        }
    }
}

impl<O, I> fmt::Debug for TreeJacobian<O, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TreeJacobian {{ of: {}, rows: {} }}",
            self.out.describe(),
            self.rows.len()
        )
    }
}

impl<O: Tree, I: Tree> TreeJacobian<O, I> {
    /// The Jacobian of outputs of structure `out` whose `k`th leaf has the row `rows[k]`.
    /// Panics when there is not one row per leaf of `out`.
    #[track_caller]
    pub fn from_rows(out: TreeDef, rows: Vec<I>) -> Self {
        assert_eq!(
            rows.len(),
            out.num_leaves(),
            "TreeJacobian: one row per tensor of the output {} is needed",
            out.describe()
        );
        TreeJacobian {
            out,
            rows,
            output: PhantomData,
        }
    }

    /// The structure of the differentiated output.
    pub fn out_structure(&self) -> &TreeDef {
        &self.out
    }

    /// The rows, one per tensor of the output in leaf order, each shaped like the argument.
    pub fn rows(&self) -> &[I] {
        &self.rows
    }

    /// The rows, owned.
    pub fn into_rows(self) -> Vec<I> {
        self.rows
    }

    /// The row of the output tensor `pick` selects (`|o| &o.loss`): the derivatives of that
    /// tensor with respect to every tensor of the argument, shaped like the argument. Panics
    /// when `pick` returns a tensor that is not one of the output's.
    #[track_caller]
    pub fn of(&self, pick: impl FnOnce(&O) -> &Tensor) -> &I {
        let n = self.out.num_leaves();
        let markers: Vec<Tensor> = (0..n)
            .map(|k| Tensor::full(&[0usize; 0], k as f64, DType::I64))
            .collect();
        let probe = O::unflatten(&self.out, &mut markers.clone().into_iter());
        let picked = pick(&probe).uop();
        let k = markers
            .iter()
            .position(|m| m.uop() == picked)
            .expect("TreeJacobian::of: pick a tensor of the output (`|o| &o.field`)");
        &self.rows[k]
    }

    /// The column of the argument tensor `pick` selects (`|p| &p.w`): the derivatives of every
    /// output tensor with respect to it, shaped like the output.
    pub fn wrt(&self, mut pick: impl FnMut(&I) -> &Tensor) -> O {
        let column: Vec<Tensor> = self.rows.iter().map(|row| pick(row).clone()).collect();
        O::unflatten(&self.out, &mut column.into_iter())
    }
}

impl<O: Tree, I: Tree> Tree for TreeJacobian<O, I> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) {
        self.rows.iter().for_each(|r| r.flatten(leaves));
    }
    fn structure(&self) -> TreeDef {
        TreeDef::Node {
            kind: NodeKind::Struct(JACOBIAN),
            children: self
                .rows
                .iter()
                .enumerate()
                .map(|(k, r)| (Key::Index(k), r.structure()))
                .collect(),
            statics: vec![StaticValue::new(&self.out)],
        }
    }
    fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self {
        let children = expect_node(def, &NodeKind::Struct(JACOBIAN));
        let out: TreeDef = match def {
            TreeDef::Node { statics, .. } => statics.first().and_then(StaticValue::get),
            TreeDef::Leaf => None,
        }
        .expect("tree: a TreeJacobian structure holds the output's structure");
        let rows = children
            .iter()
            .map(|(_, d)| I::unflatten(d, leaves))
            .collect();
        TreeJacobian::from_rows(out, rows)
    }
}

impl<O: Tree, I: Tree> HasJacobian for TreeJacobian<O, I> {
    type Jacobian<T: Tree> = TreeJacobian<Self, T>;
    fn jacobian_def(out: &TreeDef, wrt: &TreeDef) -> TreeDef {
        tree_jacobian_def(out, wrt)
    }
}

impl HasJacobian for Tensor {
    type Jacobian<T: Tree> = T;
    fn jacobian_def(_: &TreeDef, wrt: &TreeDef) -> TreeDef {
        wrt.clone()
    }
}

/// `out` with each child `c` replaced by `f(c)` (containers holding Jacobians of their items).
fn map_children(out: &TreeDef, mut f: impl FnMut(usize, &TreeDef) -> TreeDef) -> TreeDef {
    match out {
        TreeDef::Leaf => panic!("tree: a container's Jacobian of a tensor's structure"),
        TreeDef::Node {
            kind,
            children,
            statics,
        } => TreeDef::Node {
            kind: kind.clone(),
            children: children
                .iter()
                .enumerate()
                .map(|(i, (k, c))| (k.clone(), f(i, c)))
                .collect(),
            statics: statics.clone(),
        },
    }
}

impl HasJacobian for () {
    type Jacobian<T: Tree> = ();
    fn jacobian_def(out: &TreeDef, _: &TreeDef) -> TreeDef {
        out.clone()
    }
}

macro_rules! tuple_jacobian {
    ($($t:ident $i:tt),+) => {
        impl<$($t: HasJacobian),+> HasJacobian for ($($t,)+) {
            type Jacobian<T: Tree> = ($($t::Jacobian<T>,)+);
            fn jacobian_def(out: &TreeDef, wrt: &TreeDef) -> TreeDef {
                let defs = [$($t::jacobian_def as fn(&TreeDef, &TreeDef) -> TreeDef),+];
                map_children(out, |i, c| defs[i](c, wrt))
            }
        }
    };
}

tuple_jacobian!(A 0);
tuple_jacobian!(A 0, B 1);
tuple_jacobian!(A 0, B 1, C 2);
tuple_jacobian!(A 0, B 1, C 2, D 3);
tuple_jacobian!(A 0, B 1, C 2, D 3, E 4);
tuple_jacobian!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_jacobian!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_jacobian!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

impl<A: HasJacobian, const N: usize> HasJacobian for [A; N] {
    type Jacobian<T: Tree> = [A::Jacobian<T>; N];
    fn jacobian_def(out: &TreeDef, wrt: &TreeDef) -> TreeDef {
        map_children(out, |_, c| A::jacobian_def(c, wrt))
    }
}

impl<A: HasJacobian> HasJacobian for Vec<A> {
    type Jacobian<T: Tree> = Vec<A::Jacobian<T>>;
    fn jacobian_def(out: &TreeDef, wrt: &TreeDef) -> TreeDef {
        map_children(out, |_, c| A::jacobian_def(c, wrt))
    }
}

impl<A: HasJacobian> HasJacobian for Option<A> {
    type Jacobian<T: Tree> = Option<A::Jacobian<T>>;
    fn jacobian_def(out: &TreeDef, wrt: &TreeDef) -> TreeDef {
        map_children(out, |_, c| A::jacobian_def(c, wrt))
    }
}

impl<A: HasJacobian> HasJacobian for BTreeMap<String, A> {
    type Jacobian<T: Tree> = BTreeMap<String, A::Jacobian<T>>;
    fn jacobian_def(out: &TreeDef, wrt: &TreeDef) -> TreeDef {
        map_children(out, |_, c| A::jacobian_def(c, wrt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct Pair {
        a: Tensor,
        b: Tensor,
    }

    impl Tree for Pair {
        fn flatten(&self, leaves: &mut Vec<Tensor>) {
            leaves.extend([self.a.clone(), self.b.clone()]);
        }
        fn structure(&self) -> TreeDef {
            TreeDef::node(
                NodeKind::Struct("Pair"),
                vec![
                    (Key::Field("a"), TreeDef::Leaf),
                    (Key::Field("b"), TreeDef::Leaf),
                ],
            )
        }
        fn unflatten(_: &TreeDef, leaves: &mut Leaves) -> Self {
            Pair {
                a: leaves.next().unwrap(),
                b: leaves.next().unwrap(),
            }
        }
    }

    fn scalar(v: f64) -> Tensor {
        Tensor::from_uop(crate::uop::UOp::constant(v, DType::F32))
    }

    #[test]
    fn rows_and_columns_are_picked_by_field() {
        let pair = |x: f64, y: f64| Pair {
            a: scalar(x),
            b: scalar(y),
        };
        let out = pair(0.0, 0.0).structure();
        // Row a: (da/da, da/db) = (1, 2); row b: (3, 4).
        let j = TreeJacobian::<Pair, Pair>::from_rows(out, vec![pair(1.0, 2.0), pair(3.0, 4.0)]);
        assert_eq!(j.of(|o| &o.b).a.uop(), scalar(3.0).uop());
        let column = j.wrt(|p| &p.b);
        assert_eq!(column.a.uop(), scalar(2.0).uop());
        assert_eq!(column.b.uop(), scalar(4.0).uop());
    }

    #[test]
    fn flatten_then_unflatten_keeps_rows_and_output_structure() {
        let out = TreeDef::tuple(vec![TreeDef::Leaf, TreeDef::Leaf]);
        let j = TreeJacobian::<(Tensor, Tensor), Tensor>::from_rows(
            out.clone(),
            vec![scalar(1.0), scalar(2.0)],
        );
        let mut leaves = Vec::new();
        j.flatten(&mut leaves);
        let def = j.structure();
        assert_eq!(def, tree_jacobian_def(&out, &TreeDef::Leaf));
        let back =
            TreeJacobian::<(Tensor, Tensor), Tensor>::unflatten(&def, &mut leaves.into_iter());
        assert_eq!(back.out_structure(), &out);
        assert_eq!(back.rows()[1].uop(), scalar(2.0).uop());
    }

    #[test]
    fn containers_hold_the_jacobians_of_their_items() {
        let wrt = TreeDef::tuple(vec![TreeDef::Leaf, TreeDef::Leaf]);
        let out = TreeDef::node(NodeKind::Vec, vec![(Key::Index(0), TreeDef::Leaf)]);
        let def = <Vec<Tensor> as HasJacobian>::jacobian_def(&out, &wrt);
        assert_eq!(
            def,
            TreeDef::node(NodeKind::Vec, vec![(Key::Index(0), wrt.clone())])
        );
        assert_eq!(def.num_leaves(), 2);
    }
}
