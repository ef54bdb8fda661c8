//! `TreeDef`: the structure of a tree without its tensors, with the names that make up the
//! path of each leaf (`layers[2].bias`) for error messages.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// How a node of a tree holds its children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A tuple `(a, b, ..)`.
    Tuple,
    /// A fixed-size array `[T; N]`.
    Array,
    /// A `Vec<T>`.
    Vec,
    /// `Some(x)`: one child.
    Some,
    /// `None`: no children.
    None,
    /// A `BTreeMap<String, T>`, children in key order.
    Map,
    /// A struct deriving `Tree`, by name.
    Struct(&'static str),
}

/// The name of a child within its node: a position, a struct field, or a map key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    /// The `i`th element of a tuple, array or `Vec` (`[i]`).
    Index(usize),
    /// A struct field (`.name`).
    Field(&'static str),
    /// A map key (`["key"]`).
    Name(String),
    /// The content of `Some` (adds nothing to the path).
    Inner,
}

impl Key {
    /// The key as it appears in a path (`[2]`, `.bias`, `["w"]`).
    pub fn segment(&self) -> String {
        match self {
            Key::Index(i) => format!("[{i}]"),
            Key::Field(name) => format!(".{name}"),
            Key::Name(name) => format!("[{name:?}]"),
            Key::Inner => String::new(),
        }
    }
}

/// The value of a field marked `#[tree(static)]`: kept in the structure, not among the leaves,
/// and compared when two structures are compared (as JAX compares static fields).
#[derive(Clone)]
pub struct StaticValue(Arc<dyn DynStatic>);

trait DynStatic: Any + Send + Sync + fmt::Debug {
    fn eq_dyn(&self, other: &dyn DynStatic) -> bool;
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any + Send + Sync + fmt::Debug + PartialEq> DynStatic for T {
    fn eq_dyn(&self, other: &dyn DynStatic) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl StaticValue {
    /// Wraps a static field's value.
    pub fn new<T: Any + Send + Sync + fmt::Debug + PartialEq + Clone>(value: &T) -> StaticValue {
        StaticValue(Arc::new(value.clone()))
    }

    /// The value, if it is a `T`.
    pub fn get<T: Any + Clone>(&self) -> Option<T> {
        self.0.as_any().downcast_ref::<T>().cloned()
    }
}

impl PartialEq for StaticValue {
    fn eq(&self, other: &StaticValue) -> bool {
        self.0.eq_dyn(&*other.0)
    }
}

impl fmt::Debug for StaticValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The structure of a tree: where its leaves (tensors) sit, and what holds them.
#[derive(Clone, Debug, PartialEq)]
pub enum TreeDef {
    /// One tensor.
    Leaf,
    /// A container of subtrees, with the static fields of a derived struct.
    Node {
        /// What kind of container.
        kind: NodeKind,
        /// The children, each with its name.
        children: Vec<(Key, TreeDef)>,
        /// The values of the `#[tree(static)]` fields of a struct, in declaration order.
        statics: Vec<StaticValue>,
    },
}

impl TreeDef {
    /// A node of `kind` without static fields.
    pub fn node(kind: NodeKind, children: Vec<(Key, TreeDef)>) -> TreeDef {
        TreeDef::Node {
            kind,
            children,
            statics: Vec::new(),
        }
    }

    /// A tuple of the given structures (the arguments of a function, say).
    pub fn tuple(items: Vec<TreeDef>) -> TreeDef {
        let children = items
            .into_iter()
            .enumerate()
            .map(|(i, d)| (Key::Index(i), d))
            .collect();
        TreeDef::node(NodeKind::Tuple, children)
    }

    /// How many tensors a tree of this structure holds.
    pub fn num_leaves(&self) -> usize {
        match self {
            TreeDef::Leaf => 1,
            TreeDef::Node { children, .. } => children.iter().map(|(_, c)| c.num_leaves()).sum(),
        }
    }

    /// The children of a node (none for a leaf).
    pub fn children(&self) -> &[(Key, TreeDef)] {
        match self {
            TreeDef::Leaf => &[],
            TreeDef::Node { children, .. } => children,
        }
    }

    /// The path of every leaf, in leaf order, each starting with `root` (`params.layers[2].bias`).
    pub fn leaf_paths(&self, root: &str) -> Vec<String> {
        let mut out = Vec::with_capacity(self.num_leaves());
        self.collect_paths(root.to_string(), &mut out);
        out
    }

    fn collect_paths(&self, path: String, out: &mut Vec<String>) {
        match self {
            TreeDef::Leaf => out.push(path),
            TreeDef::Node { children, .. } => {
                for (key, child) in children {
                    child.collect_paths(format!("{path}{}", key.segment()), out);
                }
            }
        }
    }

    /// Where `self` and `other` first differ, as a sentence naming the path from `root`;
    /// `None` when they are the same structure.
    pub fn mismatch(&self, other: &TreeDef, root: &str) -> Option<String> {
        match (self, other) {
            (TreeDef::Leaf, TreeDef::Leaf) => None,
            (TreeDef::Leaf, _) | (_, TreeDef::Leaf) => Some(format!(
                "at {root}: one tree has a tensor, the other a {}",
                if matches!(self, TreeDef::Leaf) {
                    other.describe()
                } else {
                    self.describe()
                }
            )),
            (
                TreeDef::Node {
                    kind: ka,
                    children: ca,
                    statics: sa,
                },
                TreeDef::Node {
                    kind: kb,
                    children: cb,
                    statics: sb,
                },
            ) => {
                if ka != kb || ca.len() != cb.len() {
                    return Some(format!(
                        "at {root}: {} vs {}",
                        self.describe(),
                        other.describe()
                    ));
                }
                if sa != sb {
                    return Some(format!(
                        "at {root}: static fields differ ({sa:?} vs {sb:?})"
                    ));
                }
                ca.iter().zip(cb).find_map(|((key_a, a), (key_b, b))| {
                    if key_a != key_b {
                        Some(format!(
                            "at {root}: child {} vs {}",
                            key_a.segment(),
                            key_b.segment()
                        ))
                    } else {
                        a.mismatch(b, &format!("{root}{}", key_a.segment()))
                    }
                })
            }
        }
    }

    /// A short description for error messages: `tensor`, `Vec of 3`, `struct Mlp`, ...
    pub fn describe(&self) -> String {
        match self {
            TreeDef::Leaf => "tensor".into(),
            TreeDef::Node { kind, children, .. } => match kind {
                NodeKind::Tuple => format!("tuple of {}", children.len()),
                NodeKind::Array => format!("array of {}", children.len()),
                NodeKind::Vec => format!("Vec of {}", children.len()),
                NodeKind::Some => "Some".into(),
                NodeKind::None => "None".into(),
                NodeKind::Map => {
                    let keys: Vec<String> = children.iter().map(|(k, _)| k.segment()).collect();
                    format!("map with keys {}", keys.join(""))
                }
                NodeKind::Struct(name) => format!("struct {name}"),
            },
        }
    }
}
