//! Trees of tensors, as JAX's pytrees: a model's parameters as a struct, a `Vec` of layers,
//! a tuple or a map, flattened to a list of tensors (the leaves) and a [`TreeDef`] (the
//! structure), and rebuilt from the two. Transforms work on the flat list; the typed layer of
//! the `tensor` crate flattens arguments and rebuilds results at its boundary.
//!
//! `Tree` is implemented for `Tensor` (a leaf), tuples of up to 8 trees, arrays, `Vec`,
//! `Option` and `BTreeMap<String, _>`, and derived for structs with `#[derive(Tree)]`.
//! [`jacobian`] names the type of a Jacobian of a tree-valued function ([`HasJacobian`],
//! [`TreeJacobian`] for derived structs).

pub mod def;
pub mod jacobian;
pub mod layers;
pub mod ops;
pub mod prefix;

pub use def::{Key, NodeKind, StaticValue, TreeDef};
pub use jacobian::{HasJacobian, TreeJacobian, tree_jacobian_def};
pub use ops::{
    tree_add, tree_leaves, tree_map, tree_scale, tree_structure, tree_sub, tree_unflatten,
    tree_vdot, tree_zeros_like, tree_zip_map,
};
pub use prefix::AxisTree;

use crate::tensor::Tensor;
use std::collections::BTreeMap;

/// The leaves a tree is rebuilt from, taken in order.
pub type Leaves = std::vec::IntoIter<Tensor>;

#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tree of tensors",
    label = "not a `Tensor`, a tuple, array, `Vec`, `Option` or `BTreeMap<String, _>` of trees, or a `#[derive(Tree)]` struct",
    note = "derive `Tree` for a struct of tensors, and mark its fields that are not tensors `#[tree(static)]`"
)]
/// A value made of tensors: it flattens to its tensors (the leaves, in a fixed order) and a
/// [`TreeDef`], and is rebuilt from them. `unflatten(&t.structure(), leaves_of(t)) == t`.
pub trait Tree: Clone + Send + Sync + 'static {
    /// Appends the tensors of `self`, in order.
    fn flatten(&self, leaves: &mut Vec<Tensor>);
    /// The structure of `self`.
    fn structure(&self) -> TreeDef;
    /// A value of this type with structure `def`, its tensors taken from `leaves`. Panics when
    /// `def` is not a structure of this type, or `leaves` runs out.
    fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self;
}

/// The children of `def`, checked to be a node of `kind` (for `unflatten` implementations).
pub fn expect_node<'a>(def: &'a TreeDef, kind: &NodeKind) -> &'a [(Key, TreeDef)] {
    match def {
        TreeDef::Node {
            kind: k, children, ..
        } if k == kind => children,
        other => panic!(
            "tree: cannot rebuild a {kind:?} from the structure {}",
            other.describe()
        ),
    }
}

/// The static field values of a struct's `def` (for derived `unflatten`).
pub fn statics_of(def: &TreeDef) -> &[StaticValue] {
    match def {
        TreeDef::Node { statics, .. } => statics,
        TreeDef::Leaf => &[],
    }
}

/// The next leaf (for `unflatten` implementations).
pub fn next_leaf(leaves: &mut Leaves) -> Tensor {
    leaves
        .next()
        .expect("tree: fewer tensors than the structure holds")
}

impl Tree for Tensor {
    fn flatten(&self, leaves: &mut Vec<Tensor>) {
        leaves.push(self.clone());
    }
    fn structure(&self) -> TreeDef {
        TreeDef::Leaf
    }
    fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self {
        match def {
            TreeDef::Leaf => next_leaf(leaves),
            other => panic!(
                "tree: expected a tensor, the structure has a {}",
                other.describe()
            ),
        }
    }
}

impl Tree for () {
    fn flatten(&self, _: &mut Vec<Tensor>) {}
    fn structure(&self) -> TreeDef {
        TreeDef::tuple(Vec::new())
    }
    fn unflatten(def: &TreeDef, _: &mut Leaves) -> Self {
        expect_node(def, &NodeKind::Tuple);
    }
}

macro_rules! tuple_tree {
    ($($t:ident $v:ident $i:tt),+) => {
        impl<$($t: Tree),+> Tree for ($($t,)+) {
            fn flatten(&self, leaves: &mut Vec<Tensor>) {
                $(self.$i.flatten(leaves);)+
            }
            fn structure(&self) -> TreeDef {
                TreeDef::tuple(vec![$(self.$i.structure()),+])
            }
            fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self {
                let children = expect_node(def, &NodeKind::Tuple);
                let count = [$($i),+].len();
                assert_eq!(children.len(), count, "tree: a tuple of {count} cannot be rebuilt from {}", def.describe());
                ($($t::unflatten(&children[$i].1, leaves),)+)
            }
        }
    };
}

tuple_tree!(A a 0);
tuple_tree!(A a 0, B b 1);
tuple_tree!(A a 0, B b 1, C c 2);
tuple_tree!(A a 0, B b 1, C c 2, D d 3);
tuple_tree!(A a 0, B b 1, C c 2, D d 3, E e 4);
tuple_tree!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5);
tuple_tree!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6);
tuple_tree!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7);

fn indexed<'a, T: Tree>(items: impl Iterator<Item = &'a T>) -> Vec<(Key, TreeDef)> {
    items
        .enumerate()
        .map(|(i, t)| (Key::Index(i), t.structure()))
        .collect()
}

impl<T: Tree, const N: usize> Tree for [T; N] {
    fn flatten(&self, leaves: &mut Vec<Tensor>) {
        self.iter().for_each(|t| t.flatten(leaves));
    }
    fn structure(&self) -> TreeDef {
        TreeDef::node(NodeKind::Array, indexed(self.iter()))
    }
    fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self {
        let children = expect_node(def, &NodeKind::Array);
        assert_eq!(
            children.len(),
            N,
            "tree: an array of {N} cannot be rebuilt from {}",
            def.describe()
        );
        std::array::from_fn(|i| T::unflatten(&children[i].1, leaves))
    }
}

impl<T: Tree> Tree for Vec<T> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) {
        self.iter().for_each(|t| t.flatten(leaves));
    }
    fn structure(&self) -> TreeDef {
        TreeDef::node(NodeKind::Vec, indexed(self.iter()))
    }
    fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self {
        expect_node(def, &NodeKind::Vec)
            .iter()
            .map(|(_, d)| T::unflatten(d, leaves))
            .collect()
    }
}

impl<T: Tree> Tree for Option<T> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) {
        if let Some(t) = self {
            t.flatten(leaves);
        }
    }
    fn structure(&self) -> TreeDef {
        match self {
            Some(t) => TreeDef::node(NodeKind::Some, vec![(Key::Inner, t.structure())]),
            None => TreeDef::node(NodeKind::None, Vec::new()),
        }
    }
    fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self {
        match def {
            TreeDef::Node {
                kind: NodeKind::None,
                ..
            } => None,
            _ => Some(T::unflatten(
                &expect_node(def, &NodeKind::Some)[0].1,
                leaves,
            )),
        }
    }
}

impl<T: Tree> Tree for BTreeMap<String, T> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) {
        self.values().for_each(|t| t.flatten(leaves));
    }
    fn structure(&self) -> TreeDef {
        let children = self
            .iter()
            .map(|(k, t)| (Key::Name(k.clone()), t.structure()))
            .collect();
        TreeDef::node(NodeKind::Map, children)
    }
    fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self {
        expect_node(def, &NodeKind::Map)
            .iter()
            .map(|(key, d)| match key {
                Key::Name(name) => (name.clone(), T::unflatten(d, leaves)),
                other => panic!("tree: a map's child is named {other:?}, not by a string key"),
            })
            .collect()
    }
}
