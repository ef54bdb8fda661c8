//! Validity of a node: which src/arg/dtype combinations each op accepts.

use super::UOp;

/// Why a node is not valid: the op and the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The rule, in words.
    pub message: String,
}

/// Checks one node (not its operands).
pub fn check(u: &UOp) -> Result<(), SpecError> {
    let _ = u;
    Ok(())
}
