//! The rewrite engine: every compiler pass is a table of rules applied to a graph.
//!
//! - [`UPat`] describes the nodes a rule applies to (op, dtype, arg, constant value, named
//!   captures, operand patterns; commutative ops match in either order).
//! - [`PatternMatcher`] is an ordered table of `(pattern, function)` rules, indexed by op.
//! - [`graph_rewrite`] / [`graph_rewrite_top_down`] apply a table to a whole graph until no
//!   rule fires, memoized per node.
//!
//! ```
//! use tensor_core::rewrite::{PatternMatcher, UPat, graph_rewrite};
//! use tensor_core::{AxisType, Op, UOp};
//!
//! let x = || UPat::var("x");
//! let rules = PatternMatcher::<()>::new()
//!     .rule(x() + 0, |m, _| Some(m["x"].clone()))
//!     .rule(x() * 1, |m, _| Some(m["x"].clone()));
//! let r = UOp::range(4, 0, AxisType::Loop);
//! let e = UOp::alu(Op::Add, vec![UOp::alu(Op::Mul, vec![r.clone(), UOp::index(1)]), UOp::index(0)]);
//! assert_eq!(graph_rewrite(&e, &rules, &mut ()), r);
//! ```

mod graph;
mod matcher;
mod upat;

pub use graph::{graph_rewrite, graph_rewrite_top_down};
pub use matcher::{PatternMatcher, RuleFn};
pub use upat::{Captures, UPat};

#[cfg(test)]
mod tests;
