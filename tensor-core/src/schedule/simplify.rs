//! The rule table applied to every kernel AST: the `symbolic` rules plus the reassociation of
//! chained float constants that `symbolic` leaves alone because it is not exact.
//!
//! ```text
//! (x + c1) + c2  =>  x + (c1 + c2)      float dtypes
//! (x * c1) * c2  =>  x * (c1 * c2)      float dtypes
//! ```
//!
//! Like tinygrad's scheduler (and C compilers under fast-math), a kernel folds `(a + 4) + 3`
//! into `a + 7`; the result may differ from the unfused graph in the last bit.

use crate::rewrite::{Captures, PatternMatcher, UPat, graph_rewrite};
use crate::symbolic::symbolic;
use crate::uop::alu::exec;
use crate::uop::{DType, Op, UOp};
use std::sync::OnceLock;

const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];

/// `ast` rewritten to a fixpoint with the kernel rule table.
pub fn simplify_kernel(ast: &UOp) -> UOp {
    graph_rewrite(ast, kernel_rules(), &mut ())
}

fn kernel_rules() -> &'static PatternMatcher<()> {
    static RULES: OnceLock<PatternMatcher<()>> = OnceLock::new();
    RULES.get_or_init(|| {
        let (x, c1, c2) = (|| UPat::var("x"), || UPat::cvar("c1"), || UPat::cvar("c2"));
        let mut rules = symbolic().clone();
        rules.extend(
            &PatternMatcher::new()
                .rule(((x() + c1()) + c2()).dtypes(FLOATS), |m, _| {
                    merge_constants(m, Op::Add)
                })
                .rule(((x() * c1()) * c2()).dtypes(FLOATS), |m, _| {
                    merge_constants(m, Op::Mul)
                }),
        );
        rules
    })
}

fn merge_constants(m: &Captures, op: Op) -> Option<UOp> {
    let dtype = m.root().dtype();
    let (a, b) = (m["c1"].const_value()?, m["c2"].const_value()?);
    let folded = exec(op, dtype, &[a, b]);
    Some(UOp::alu(
        op,
        vec![m["x"].clone(), UOp::constant(folded, dtype)],
    ))
}
