//! The error the fallible twins of shape-checked ops return (`try_reshape`, `try_from_vec`,
//! ...): the same message their panicking forms print, as a value.

use std::fmt;

/// A shape (or size) that does not fit the op it was given to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError {
    /// The op that refused it (`"reshape"`).
    pub op: &'static str,
    /// What was wrong, naming the op and the shapes.
    pub message: String,
}

impl ShapeError {
    pub(crate) fn new(op: &'static str, message: String) -> ShapeError {
        ShapeError { op, message }
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ShapeError {}
