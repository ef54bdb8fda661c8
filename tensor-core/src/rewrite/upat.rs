//! `UPat`: a pattern over UOps, and `Captures`: what a successful match binds.
//!
//! A pattern constrains a node's op, dtype, arg, constant value and operands, and may give
//! the node a name. Patterns compose with the arithmetic operators so that rules read like
//! the algebra they encode:
//!
//! ```
//! use tensor_core::rewrite::UPat;
//! let x = UPat::var("x");
//! let c = UPat::cvar("c");
//! let pattern = (x.clone() * c.clone()) + x % c; // Add(Mul(x, c), Mod(x, c))
//! ```
//!
//! Operator meanings: `+` is `Add`, `*` is `Mul`, `-` is `Sub`, unary `-` is `Neg`, `%` is
//! `Mod`, and `/` is **`Idiv`** (integer division truncating toward zero): patterns are
//! mostly written for index arithmetic, where `/` means integer division. A float division
//! pattern is spelled `UPat::alu(Op::Div, ...)`. An `i64` on either side of an operator is a
//! constant of that value (`x + 0`, `x * 1`).
//!
//! Operands of a commutative op (`Op::is_commutative`) are matched in both orders
//! automatically, so `x + c` also matches `c + x`. A name used twice binds one node: `x + x`
//! only matches when both operands are the same node.

use crate::uop::{Arg, DType, Op, UOp};
use std::fmt;
use std::ops;

/// What a pattern requires of a node's operands.
#[derive(Clone, Debug)]
enum SrcPat {
    /// Any operands.
    Any,
    /// Exactly these operands (both orders for a binary commutative op).
    Exact(Vec<UPat>),
    /// At least these leading operands; any further operands are not looked at.
    Prefix(Vec<UPat>),
}

/// A pattern over UOps. Build with the constructors and refine with the builder methods.
#[derive(Clone)]
pub struct UPat {
    ops: Option<Vec<Op>>,
    dtypes: Option<Vec<DType>>,
    arg: Option<Arg>,
    value: Option<f64>,
    name: Option<&'static str>,
    src: SrcPat,
}

/// The nodes a match bound to names, plus the node the whole pattern matched.
#[derive(Clone, Debug)]
pub struct Captures {
    root: UOp,
    bound: Vec<(&'static str, UOp)>,
}

impl Captures {
    fn new(root: &UOp) -> Captures {
        Captures {
            root: root.clone(),
            bound: Vec::new(),
        }
    }

    /// The node the whole pattern matched.
    pub fn root(&self) -> &UOp {
        &self.root
    }

    /// The node bound to `name`, if the pattern named one.
    pub fn get(&self, name: &str) -> Option<&UOp> {
        self.bound.iter().find(|(n, _)| *n == name).map(|(_, u)| u)
    }

    /// Binds `name` to `node`, or checks that an earlier binding is the same node.
    fn bind(&mut self, name: &'static str, node: &UOp) -> bool {
        match self.get(name) {
            Some(bound) => bound == node,
            None => {
                self.bound.push((name, node.clone()));
                true
            }
        }
    }
}

impl ops::Index<&str> for Captures {
    type Output = UOp;
    #[track_caller]
    fn index(&self, name: &str) -> &UOp {
        match self.get(name) {
            Some(u) => u,
            None => panic!("pattern has no capture named {name:?}"),
        }
    }
}

impl UPat {
    /// Matches any node.
    pub fn any() -> UPat {
        UPat {
            ops: None,
            dtypes: None,
            arg: None,
            value: None,
            name: None,
            src: SrcPat::Any,
        }
    }

    /// Matches any node and captures it as `name`.
    pub fn var(name: &'static str) -> UPat {
        UPat::any().named(name)
    }

    /// Matches a node of `op` with any operands.
    pub fn op(op: Op) -> UPat {
        UPat::ops(&[op])
    }

    /// Matches a node whose op is one of `ops`, with any operands.
    pub fn ops(ops: &[Op]) -> UPat {
        UPat {
            ops: Some(ops.to_vec()),
            ..UPat::any()
        }
    }

    /// Matches `op` applied to exactly these operands (see [`UPat::src`]).
    pub fn alu(op: Op, src: Vec<UPat>) -> UPat {
        UPat::op(op).src(src)
    }

    /// Matches any `Const` and captures it as `name`.
    pub fn cvar(name: &'static str) -> UPat {
        UPat::op(Op::Const).named(name)
    }

    /// Matches a `Const` whose value is numerically `v`, whatever its dtype.
    pub fn konst(v: impl Into<f64>) -> UPat {
        UPat {
            value: Some(v.into()),
            ..UPat::op(Op::Const)
        }
    }

    /// `Where(cond, a, b)`.
    pub fn where_(cond: UPat, a: UPat, b: UPat) -> UPat {
        UPat::alu(Op::Where, vec![cond, a, b])
    }

    /// Captures the matched node as `name`.
    pub fn named(mut self, name: &'static str) -> UPat {
        self.name = Some(name);
        self
    }

    /// Requires the node's dtype to be `dtype`.
    pub fn dtype(self, dtype: DType) -> UPat {
        self.dtypes(&[dtype])
    }

    /// Requires the node's dtype to be one of `dtypes`.
    pub fn dtypes(mut self, dtypes: &[DType]) -> UPat {
        self.dtypes = Some(dtypes.to_vec());
        self
    }

    /// Requires the node's arg to equal `arg`.
    pub fn arg(mut self, arg: Arg) -> UPat {
        self.arg = Some(arg);
        self
    }

    /// Requires exactly these operands. For a binary commutative op both orders are tried.
    pub fn src(mut self, src: Vec<UPat>) -> UPat {
        self.src = SrcPat::Exact(src);
        self
    }

    /// Requires at least these leading operands and ignores the rest (e.g. a kernel
    /// `Reduce(value, ranges...)` as `UPat::op(Op::Reduce).src_prefix(vec![value])`).
    pub fn src_prefix(mut self, src: Vec<UPat>) -> UPat {
        self.src = SrcPat::Prefix(src);
        self
    }

    /// The ops this pattern can match, or `None` when it matches any op.
    pub fn op_set(&self) -> Option<&[Op]> {
        self.ops.as_deref()
    }

    /// `self < other` (`CmpLt`).
    pub fn lt(self, other: impl Into<UPat>) -> UPat {
        UPat::alu(Op::CmpLt, vec![self, other.into()])
    }

    /// `self != other` (`CmpNe`).
    pub fn ne(self, other: impl Into<UPat>) -> UPat {
        UPat::alu(Op::CmpNe, vec![self, other.into()])
    }

    /// `max(self, other)` (`Max`).
    pub fn max(self, other: impl Into<UPat>) -> UPat {
        UPat::alu(Op::Max, vec![self, other.into()])
    }

    /// `self & other` (`And`).
    pub fn and(self, other: impl Into<UPat>) -> UPat {
        UPat::alu(Op::And, vec![self, other.into()])
    }

    /// `self | other` (`Or`).
    pub fn or(self, other: impl Into<UPat>) -> UPat {
        UPat::alu(Op::Or, vec![self, other.into()])
    }

    /// `Cast(self)`, with any target dtype unless refined with [`UPat::dtype`].
    pub fn cast(self) -> UPat {
        UPat::alu(Op::Cast, vec![self])
    }

    /// Every way `u` matches this pattern: one set of captures per way. More than one when a
    /// commutative op matches in both operand orders; none when it does not match.
    pub fn match_all(&self, u: &UOp) -> Vec<Captures> {
        let mut out = Vec::new();
        self.match_into(u, Captures::new(u), &mut out);
        out
    }

    /// True when `u` matches this pattern in at least one way.
    pub fn matches(&self, u: &UOp) -> bool {
        !self.match_all(u).is_empty()
    }

    /// The checks on the node itself, before any operand is looked at.
    fn node_fits(&self, u: &UOp) -> bool {
        if self.ops.as_ref().is_some_and(|ops| !ops.contains(&u.op())) {
            return false;
        }
        if self
            .dtypes
            .as_ref()
            .is_some_and(|d| !d.contains(&u.dtype()))
        {
            return false;
        }
        if self.arg.as_ref().is_some_and(|a| a != u.arg()) {
            return false;
        }
        if let Some(v) = self.value {
            match u.const_value() {
                Some(c) if c.as_f64() == v => {}
                _ => return false,
            }
        }
        match &self.src {
            SrcPat::Any => true,
            SrcPat::Exact(p) => p.len() == u.src().len(),
            SrcPat::Prefix(p) => p.len() <= u.src().len(),
        }
    }

    fn match_into(&self, u: &UOp, mut caps: Captures, out: &mut Vec<Captures>) {
        if !self.node_fits(u) {
            return;
        }
        if let Some(name) = self.name
            && !caps.bind(name, u)
        {
            return;
        }
        match &self.src {
            SrcPat::Any => out.push(caps),
            SrcPat::Exact(pats) if pats.len() == 2 && u.op().is_commutative() => {
                let (a, b) = (&u.src()[0], &u.src()[1]);
                match_list(pats, &[a.clone(), b.clone()], caps.clone(), out);
                if a != b {
                    match_list(pats, &[b.clone(), a.clone()], caps, out);
                }
            }
            SrcPat::Exact(pats) | SrcPat::Prefix(pats) => {
                match_list(pats, &u.src()[..pats.len()], caps, out)
            }
        }
    }
}

/// Matches `pats[i]` against `nodes[i]` for every `i`, threading the captures through.
fn match_list(pats: &[UPat], nodes: &[UOp], caps: Captures, out: &mut Vec<Captures>) {
    let mut states = vec![caps];
    for (pat, node) in pats.iter().zip(nodes) {
        let mut next = Vec::new();
        for state in states {
            pat.match_into(node, state, &mut next);
        }
        if next.is_empty() {
            return;
        }
        states = next;
    }
    out.extend(states);
}

impl fmt::Debug for UPat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ops {
            Some(ops) if ops.len() == 1 => write!(f, "{}", ops[0])?,
            Some(ops) => write!(f, "{ops:?}")?,
            None => write!(f, "_")?,
        }
        if let Some(name) = self.name {
            write!(f, "@{name}")?;
        }
        if let Some(d) = &self.dtypes {
            write!(f, "<{d:?}>")?;
        }
        if let Some(v) = self.value {
            write!(f, "={v}")?;
        }
        if let Some(a) = &self.arg {
            write!(f, "[{a:?}]")?;
        }
        match &self.src {
            SrcPat::Any => Ok(()),
            SrcPat::Exact(p) => write!(f, "{p:?}"),
            SrcPat::Prefix(p) => write!(f, "{p:?}.."),
        }
    }
}

impl From<i64> for UPat {
    fn from(v: i64) -> UPat {
        UPat::konst(v as f64)
    }
}

impl From<i32> for UPat {
    fn from(v: i32) -> UPat {
        UPat::konst(v)
    }
}

impl From<&UPat> for UPat {
    fn from(p: &UPat) -> UPat {
        p.clone()
    }
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl<R: Into<UPat>> ops::$trait<R> for UPat {
            type Output = UPat;
            fn $method(self, rhs: R) -> UPat {
                UPat::alu($op, vec![self, rhs.into()])
            }
        }
        impl<R: Into<UPat>> ops::$trait<R> for &UPat {
            type Output = UPat;
            fn $method(self, rhs: R) -> UPat {
                UPat::alu($op, vec![self.clone(), rhs.into()])
            }
        }
        impl ops::$trait<UPat> for i64 {
            type Output = UPat;
            fn $method(self, rhs: UPat) -> UPat {
                UPat::alu($op, vec![UPat::from(self), rhs])
            }
        }
        impl ops::$trait<UPat> for i32 {
            type Output = UPat;
            fn $method(self, rhs: UPat) -> UPat {
                UPat::alu($op, vec![UPat::from(self), rhs])
            }
        }
    };
}

binary_operator!(Add, add, Op::Add);
binary_operator!(Mul, mul, Op::Mul);
binary_operator!(Sub, sub, Op::Sub);
binary_operator!(Div, div, Op::Idiv);
binary_operator!(Rem, rem, Op::Mod);

impl ops::Neg for UPat {
    type Output = UPat;
    fn neg(self) -> UPat {
        UPat::alu(Op::Neg, vec![self])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::AxisType;

    fn idx(v: i64) -> UOp {
        UOp::index(v)
    }

    fn range(n: usize, id: usize) -> UOp {
        UOp::range(n, id, AxisType::Loop)
    }

    fn add(a: &UOp, b: &UOp) -> UOp {
        UOp::alu(Op::Add, vec![a.clone(), b.clone()])
    }

    #[test]
    fn commutative_ops_match_operands_in_either_order() {
        let pattern = UPat::var("x") + UPat::cvar("c");
        let r = range(4, 0);
        let const_first = add(&idx(3), &r);
        let caps = pattern.match_all(&const_first);
        assert_eq!(caps.len(), 1);
        assert_eq!(caps[0]["x"], r);
        assert_eq!(caps[0]["c"], idx(3));
    }

    #[test]
    fn non_commutative_ops_match_operands_in_order_only() {
        let pattern = UPat::var("x") / UPat::cvar("c");
        let r = range(4, 0);
        assert!(pattern.matches(&UOp::alu(Op::Idiv, vec![r.clone(), idx(2)])));
        assert!(!pattern.matches(&UOp::alu(Op::Idiv, vec![idx(2), r])));
    }

    #[test]
    fn named_subpatterns_capture_their_nodes() {
        let pattern = (UPat::var("x") * UPat::cvar("c")).named("prod") + UPat::var("y");
        let (a, b) = (range(4, 0), range(5, 1));
        let prod = UOp::alu(Op::Mul, vec![a.clone(), idx(5)]);
        let node = add(&prod, &b);
        let caps = &pattern.match_all(&node)[0];
        assert_eq!(caps["x"], a);
        assert_eq!(caps["c"], idx(5));
        assert_eq!(caps["prod"], prod);
        assert_eq!(caps["y"], b);
        assert_eq!(caps.root(), &node);
    }

    #[test]
    fn a_repeated_name_must_bind_the_same_node() {
        let pattern = UPat::var("x") + UPat::var("x");
        let (a, b) = (range(4, 0), range(4, 1));
        assert!(pattern.matches(&add(&a, &a)));
        assert!(!pattern.matches(&add(&a, &b)));
    }

    #[test]
    fn repeated_names_backtrack_through_commutative_orders() {
        // (x * c) + x: only the second operand order binds x consistently.
        let pattern = (UPat::var("x") * UPat::cvar("c")) + UPat::var("x");
        let a = range(4, 0);
        let node = add(&a, &UOp::alu(Op::Mul, vec![a.clone(), idx(3)]));
        let caps = pattern.match_all(&node);
        assert_eq!(caps.len(), 1);
        assert_eq!(caps[0]["x"], a);
    }

    #[test]
    fn konst_compares_values_numerically_across_dtypes() {
        assert!(UPat::konst(2).matches(&idx(2)));
        assert!(UPat::konst(2).matches(&UOp::constant(2.0, DType::F32)));
        assert!(!UPat::konst(2).matches(&idx(3)));
        assert!(!UPat::konst(0).matches(&range(3, 0)));
    }

    #[test]
    fn dtype_and_arg_restrictions_are_checked() {
        let float_var = UPat::var("x").dtype(DType::F32);
        assert!(!float_var.matches(&idx(1)));
        assert!(float_var.matches(&UOp::constant(1.0, DType::F32)));
        let r = range(4, 7);
        let arg = Arg::Range {
            id: 7,
            axis_type: AxisType::Loop,
        };
        assert!(UPat::op(Op::Range).arg(arg).matches(&r));
        assert!(!UPat::op(Op::Range).arg(Arg::None).matches(&r));
    }

    #[test]
    fn prefix_sources_ignore_trailing_operands() {
        let v = range(4, 0);
        let red = UOp::new(
            Op::Reduce,
            DType::Index,
            vec![v.clone(), range(3, 1), range(2, 2)],
            Arg::Reduce(crate::uop::ReduceOp::Add, vec![]),
        );
        let pattern = UPat::op(Op::Reduce).src_prefix(vec![UPat::var("v")]);
        assert_eq!(pattern.match_all(&red)[0]["v"], v);
        assert!(!UPat::op(Op::Reduce).src(vec![UPat::any()]).matches(&red));
    }

    #[test]
    fn operators_build_the_documented_ops() {
        let x = UPat::var("x");
        assert_eq!((&x / 2).op_set(), Some(&[Op::Idiv][..]));
        assert_eq!((&x % 2).op_set(), Some(&[Op::Mod][..]));
        assert_eq!((&x - 2).op_set(), Some(&[Op::Sub][..]));
        assert_eq!((-x.clone()).op_set(), Some(&[Op::Neg][..]));
        assert_eq!(x.clone().lt(3).op_set(), Some(&[Op::CmpLt][..]));
        assert_eq!(x.max(3).op_set(), Some(&[Op::Max][..]));
    }
}
