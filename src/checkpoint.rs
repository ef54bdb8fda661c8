//! Checkpoints in the safetensors format (Hugging Face's, which PyTorch, JAX and most model
//! hubs read and write): [`save`] a tree of tensors, [`load`] one back into a tree of the same
//! structure, [`load_with_names`] where the file names its tensors otherwise (a PyTorch
//! `state_dict`'s `fc1.weight` for a leaf `layers.0.w`).
//!
//! A leaf is named by its path in the tree, torch's way: struct fields, `Vec`/tuple/array
//! positions and map keys joined by dots (`layers.0.weight`, `exp_avg.fc1.bias`; see
//! [`leaf_names`]); a tree that is one tensor is named `tensor`. An optimizer's state is a tree
//! too, so `save(path, &(params.clone(), stepper.state().clone()))` keeps both
//! (`0.…` and `1.…`; cloning a tree copies handles, not values).
//!
//! Every dtype of the crate is stored as itself (`bool`, `i8`..`i64`, `u8`..`u64`, `f16`,
//! `bf16`, `f32`, `f64`); a file's other dtypes (`F8_*`, complex) are refused by name.
//! Faults are [`CheckpointError`]s whose message says what to do: a missing name lists the
//! names the file holds, a shape or dtype mismatch names both sides.
//!
//! This module lives in the facade, not in `tensor-core` (which does no I/O) nor in
//! `tensor-runtime` (devices, kernels and their caches): it is file-format code built on both,
//! reading realized values through the runtime (`read_bytes`) and making tensors from bytes
//! through the core (`Tensor::from_bytes`), and the `safetensors` dependency stays out of the
//! compiler and the runtime.
//!
//! ```
//! use tensor::prelude::*;
//! use tensor::checkpoint;
//!
//! #[derive(Clone, Tree)]
//! struct Linear { weight: Tensor, bias: Tensor }
//! let p = Linear { weight: Tensor::ones(&[2, 3], DType::F32), bias: Tensor::zeros(&[2], DType::F32) };
//! let path = std::env::temp_dir().join(format!("doc_linear_{}.safetensors", std::process::id()));
//! checkpoint::save(&path, &p).unwrap();
//!
//! let mut q = Linear { weight: Tensor::zeros(&[2, 3], DType::F32), bias: Tensor::ones(&[2], DType::F32) };
//! checkpoint::load(&path, &mut q).unwrap();
//! assert_eq!(q.weight.to_vec::<f32>().unwrap(), vec![1.0; 6]);
//! assert_eq!(checkpoint::leaf_names(&q), vec!["weight", "bias"]);
//! # std::fs::remove_file(&path).unwrap();
//! ```

use crate::Tensor;
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use tensor_core::transform::tree::{Key, Tree, TreeDef, tree_leaves, tree_unflatten};
use tensor_core::{DType, Device};
use tensor_runtime::RuntimeError;
use tensor_runtime::realize::{read_bytes, realize_tree};

/// What went wrong saving or loading a checkpoint; the message says what to do.
#[derive(Debug)]
pub enum CheckpointError {
    /// The file could not be read or written.
    Io {
        /// The checkpoint's path.
        path: PathBuf,
        /// `"read"` or `"write"`.
        action: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file is not a safetensors file (or is damaged).
    Format {
        /// The checkpoint's path.
        path: PathBuf,
        /// The safetensors crate's description.
        reason: String,
    },
    /// The file has no tensor of a name the tree asks for.
    Missing {
        /// The checkpoint's path.
        path: PathBuf,
        /// The leaf's name in the tree.
        leaf: String,
        /// The name looked up in the file (the leaf's, or what the name map gave).
        name: String,
        /// The names the file holds, sorted.
        available: Vec<String>,
    },
    /// The file's tensor has another shape than the tree's leaf.
    Shape {
        /// The checkpoint's path.
        path: PathBuf,
        /// The name in the file.
        name: String,
        /// The leaf's shape.
        expected: Vec<usize>,
        /// The file's shape.
        found: Vec<usize>,
    },
    /// The file's tensor has another dtype than the tree's leaf.
    DType {
        /// The checkpoint's path.
        path: PathBuf,
        /// The name in the file.
        name: String,
        /// The leaf's dtype.
        expected: DType,
        /// The file's dtype, as safetensors names it (`F16`, `F8_E4M3`, ...).
        found: String,
    },
    /// The file's tensor has a dtype this crate has no counterpart of (`F8_E4M3`, `C64`, ...).
    UnsupportedDType {
        /// The checkpoint's path.
        path: PathBuf,
        /// The name in the file.
        name: String,
        /// The file's dtype, as safetensors names it.
        found: String,
    },
    /// Two leaves of the tree have one name (map keys with dots can collide with paths).
    DuplicateName(String),
    /// Computing a tree's values before saving it failed.
    Runtime(RuntimeError),
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Io {
                path,
                action,
                source,
            } => write!(
                f,
                "checkpoint: cannot {action} {}: {source}; check the path and its permissions",
                path.display()
            ),
            CheckpointError::Format { path, reason } => write!(
                f,
                "checkpoint: {} is not a readable safetensors file ({reason}); pass a file \
                 written by checkpoint::save or safetensors' save_file",
                path.display()
            ),
            CheckpointError::Missing {
                path,
                leaf,
                name,
                available,
            } => {
                let via = if leaf == name {
                    String::new()
                } else {
                    format!(" (for the leaf `{leaf}`)")
                };
                write!(
                    f,
                    "checkpoint: {} has no tensor named `{name}`{via}; it holds {}; map the tree's \
                     names to the file's with load_with_names",
                    path.display(),
                    listing(available)
                )
            }
            CheckpointError::Shape {
                path,
                name,
                expected,
                found,
            } => write!(
                f,
                "checkpoint: `{name}` in {} has shape {found:?}, the tree's leaf {expected:?}; \
                 build the tree with the checkpoint's shapes",
                path.display()
            ),
            CheckpointError::DType {
                path,
                name,
                expected,
                found,
            } => write!(
                f,
                "checkpoint: `{name}` in {} is {found}, the tree's leaf {expected}; make the \
                 leaf that dtype (load, then cast)",
                path.display()
            ),
            CheckpointError::UnsupportedDType { path, name, found } => write!(
                f,
                "checkpoint: `{name}` in {} is {found}, which this crate has no dtype for; \
                 convert it (to f32, say) where it was written",
                path.display()
            ),
            CheckpointError::DuplicateName(name) => write!(
                f,
                "checkpoint: two leaves of the tree are named `{name}`; rename a map key or a \
                 field so that every path is unique"
            ),
            CheckpointError::Runtime(e) => write!(f, "checkpoint: computing the tree failed: {e}"),
        }
    }
}

impl std::error::Error for CheckpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckpointError::Io { source, .. } => Some(source),
            CheckpointError::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

impl From<RuntimeError> for CheckpointError {
    fn from(e: RuntimeError) -> CheckpointError {
        CheckpointError::Runtime(e)
    }
}

/// At most 20 names, then how many more.
fn listing(names: &[String]) -> String {
    if names.is_empty() {
        return "no tensors".into();
    }
    let shown: Vec<String> = names.iter().take(20).map(|n| format!("`{n}`")).collect();
    match names.len().saturating_sub(20) {
        0 => shown.join(", "),
        more => format!("{}, and {more} more", shown.join(", ")),
    }
}

/// The checkpoint name of every leaf of `tree`, in leaf order: the path's keys joined by dots
/// (`layers.0.weight`), as PyTorch's `state_dict` names parameters.
pub fn leaf_names<T: Tree>(tree: &T) -> Vec<String> {
    let mut names = Vec::new();
    collect_names(&tree.structure(), &mut Vec::new(), &mut names);
    names
}

fn collect_names(def: &TreeDef, path: &mut Vec<String>, out: &mut Vec<String>) {
    match def {
        TreeDef::Leaf if path.is_empty() => out.push("tensor".into()),
        TreeDef::Leaf => out.push(path.join(".")),
        TreeDef::Node { children, .. } => {
            for (key, child) in children {
                let segment = match key {
                    Key::Index(i) => Some(i.to_string()),
                    Key::Field(name) => Some(name.to_string()),
                    Key::Name(name) => Some(name.clone()),
                    Key::Inner => None,
                };
                let pushed = segment.map(|s| path.push(s)).is_some();
                collect_names(child, path, out);
                if pushed {
                    path.pop();
                }
            }
        }
    }
}

/// The names of `tree`'s leaves, refused when two are the same.
fn unique_names<T: Tree>(tree: &T) -> Result<Vec<String>, CheckpointError> {
    let names = leaf_names(tree);
    let mut seen = HashSet::new();
    match names.iter().find(|n| !seen.insert(n.as_str())) {
        Some(dup) => Err(CheckpointError::DuplicateName(dup.clone())),
        None => Ok(names),
    }
}

/// Writes every tensor of `tree` to `path` in the safetensors format, named by
/// [`leaf_names`]. The tree is computed first (in one plan); the file is written whole to a
/// temporary file beside `path` and then renamed, so a crash leaves the old checkpoint.
pub fn save<T: Tree>(path: impl AsRef<Path>, tree: &T) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let names = unique_names(tree)?;
    realize_tree(tree)?;
    let leaves = tree_leaves(tree);
    let mut data = Vec::with_capacity(leaves.len());
    for leaf in &leaves {
        data.push((read_bytes(leaf)?, file_dtype(leaf.dtype()), leaf.shape()));
    }
    let views = names
        .iter()
        .zip(&data)
        .map(|(name, (bytes, dtype, shape))| {
            let view = TensorView::new(*dtype, shape.clone(), bytes)
                .expect("a realized tensor's bytes fill its shape");
            (name.as_str(), view)
        });
    let bytes = safetensors::serialize(views, None).map_err(|e| CheckpointError::Format {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    write_whole(path, &bytes)
}

fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let io = |source| CheckpointError::Io {
        path: path.to_path_buf(),
        action: "write",
        source,
    };
    let mut partial = path.as_os_str().to_owned();
    partial.push(format!(".partial-{}", std::process::id()));
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, bytes).map_err(io)?;
    std::fs::rename(&partial, path).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        io(e)
    })
}

/// Replaces every tensor of `tree` by the tensor of the same name in the safetensors file
/// `path`, checking its shape and dtype against the leaf's (a leaf tied to a device is loaded
/// onto it). Tensors of the file that no leaf names are left alone. On an error `tree` is
/// unchanged.
pub fn load<T: Tree>(path: impl AsRef<Path>, tree: &mut T) -> Result<(), CheckpointError> {
    load_with_names(path, tree, str::to_string)
}

/// [`load`], each leaf read from the file's tensor `name_in_file(leaf_name)`: a closure over
/// the names (`|n| n.replace("layers.0.", "fc1.")`) or a map
/// (`|n| map.get(n).cloned().unwrap_or_else(|| n.to_string())`).
pub fn load_with_names<T: Tree>(
    path: impl AsRef<Path>,
    tree: &mut T,
    name_in_file: impl Fn(&str) -> String,
) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| CheckpointError::Io {
        path: path.to_path_buf(),
        action: "read",
        source,
    })?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| CheckpointError::Format {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let names = unique_names(tree)?;
    let mut loaded = Vec::with_capacity(names.len());
    for (leaf_name, leaf) in names.iter().zip(tree_leaves(tree)) {
        let name = name_in_file(leaf_name);
        let view = file.tensor(&name).map_err(|_| {
            let mut available: Vec<String> = file.names().into_iter().map(String::from).collect();
            available.sort();
            CheckpointError::Missing {
                path: path.to_path_buf(),
                leaf: leaf_name.clone(),
                name: name.clone(),
                available,
            }
        })?;
        loaded.push(leaf_from(path, &name, &view, &leaf)?);
    }
    *tree = tree_unflatten(&tree.structure(), loaded);
    Ok(())
}

/// The file's tensor `view` as a tensor like `leaf`, or why it cannot be.
fn leaf_from(
    path: &Path,
    name: &str,
    view: &TensorView,
    leaf: &Tensor,
) -> Result<Tensor, CheckpointError> {
    let expected = leaf.dtype();
    if !DType::ALL_VALUE_TYPES
        .iter()
        .any(|d| file_dtype(*d) == view.dtype())
    {
        return Err(CheckpointError::UnsupportedDType {
            path: path.to_path_buf(),
            name: name.to_string(),
            found: format!("{:?}", view.dtype()),
        });
    }
    if view.dtype() != file_dtype(expected) {
        return Err(CheckpointError::DType {
            path: path.to_path_buf(),
            name: name.to_string(),
            expected,
            found: format!("{:?}", view.dtype()),
        });
    }
    if view.shape() != leaf.shape() {
        return Err(CheckpointError::Shape {
            path: path.to_path_buf(),
            name: name.to_string(),
            expected: leaf.shape(),
            found: view.shape().to_vec(),
        });
    }
    let tensor = Tensor::from_bytes(view.data().to_vec(), expected, view.shape());
    Ok(match leaf.device() {
        Device::Single(device) if Device::Single(device.clone()) != Device::cpu() => {
            tensor.to(&device)
        }
        _ => tensor,
    })
}

/// The safetensors dtype of a tensor's dtype (every element dtype has one).
fn file_dtype(dtype: DType) -> Dtype {
    match dtype {
        DType::Bool => Dtype::BOOL,
        DType::I8 => Dtype::I8,
        DType::I16 => Dtype::I16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::U8 => Dtype::U8,
        DType::U16 => Dtype::U16,
        DType::U32 => Dtype::U32,
        DType::U64 => Dtype::U64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::Index | DType::Void => unreachable!("a tensor's elements are never {dtype}"),
    }
}
