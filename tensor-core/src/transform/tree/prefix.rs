//! Prefix trees of axes, as JAX's `in_axes`/`out_axes`: one axis (or `None`) for a whole
//! subtree, or a tree of them down to any depth, expanded to one entry per leaf.

use crate::transform::func::transform_error;
use crate::transform::tree::{Key, NodeKind, TreeDef};

/// An axis for each subtree: `Axis` covers everything below it, `Each` gives one entry per
/// child in order (tuples, arrays, `Vec`s, struct fields, map entries), `Fields` names every
/// child of a struct or map (`Params { w: None, b: Some(0) }` in the macros).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AxisTree {
    /// One axis (`None`: not batched) for every leaf of the subtree.
    Axis(Option<isize>),
    /// One entry per child, in order.
    Each(Vec<AxisTree>),
    /// One entry per named child (struct field or map key), in any order.
    Fields(Vec<(String, AxisTree)>),
}

impl From<Option<isize>> for AxisTree {
    fn from(axis: Option<isize>) -> AxisTree {
        AxisTree::Axis(axis)
    }
}

impl AxisTree {
    /// One axis per leaf of `def`, in leaf order; a transform error naming the path (from
    /// `root`) where this prefix does not match the structure.
    pub fn expand(&self, def: &TreeDef, root: &str) -> Vec<Option<isize>> {
        let mut out = Vec::with_capacity(def.num_leaves());
        self.expand_into(def, root, &mut out);
        out
    }

    fn expand_into(&self, def: &TreeDef, path: &str, out: &mut Vec<Option<isize>>) {
        match self {
            AxisTree::Axis(axis) => out.extend(std::iter::repeat_n(*axis, def.num_leaves())),
            AxisTree::Each(entries) => {
                let children = def.children();
                if matches!(def, TreeDef::Leaf) || entries.len() != children.len() {
                    mismatch(path, &format!("{} entries", entries.len()), def);
                }
                for (entry, (key, child)) in entries.iter().zip(children) {
                    entry.expand_into(child, &format!("{path}{}", key.segment()), out);
                }
            }
            AxisTree::Fields(named) => {
                let children = def.children();
                let by_name = matches!(
                    def,
                    TreeDef::Node {
                        kind: NodeKind::Struct(_) | NodeKind::Map,
                        ..
                    }
                );
                if !by_name || named.len() != children.len() {
                    mismatch(path, &format!("{} named entries", named.len()), def);
                }
                for (key, child) in children {
                    let name = key_name(key);
                    let Some((_, entry)) = named.iter().find(|(n, _)| *n == name) else {
                        transform_error(&format!(
                            "vmap: the axes at {path} name no entry for {path}{}",
                            key.segment()
                        ))
                    };
                    entry.expand_into(child, &format!("{path}{}", key.segment()), out);
                }
            }
        }
    }
}

fn mismatch(path: &str, given: &str, def: &TreeDef) -> ! {
    transform_error(&format!(
        "vmap: the axes do not match the tree at {path}: the axes give {given}, the value is a {} \
         (give one axis or None for a whole subtree, or one entry per child)",
        def.describe()
    ))
}

fn key_name(key: &Key) -> String {
    match key {
        Key::Index(i) => i.to_string(),
        Key::Field(name) => name.to_string(),
        Key::Name(name) => name.clone(),
        Key::Inner => String::new(),
    }
}
