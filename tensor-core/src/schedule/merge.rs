//! Range merging: two nested ranges that every index of a kernel walks as one flat range
//! become one range.
//!
//! ```text
//! a < A, b < B   =>   p < A·B      a := p / B,  b := p % B
//! ```
//!
//! The substitution always holds; it is kept only when the kernel rules fold every `/` and `%`
//! of `p` away again, that is when each index reads `a` and `b` as `B·e·a + e·b` (a contiguous
//! block of rows, as the output of every kernel and the rows of an im2col buffer are), and no
//! gate or value needs them apart (a padded window compares `b` alone: its ranges stay apart).
//! A convolution's output `[b, o, 24, 24]` becomes `[b, o, 576]` and its `(c, ky, kx)` reduce
//! one range of 288: the OptOps then see the matmul they are (a 16-wide upcast of 576, where
//! 24 only took 4), and the loop nest is shorter.
//!
//! Merged are `(a, b)` with consecutive ids and the same axis type (`Loop` outputs, or `Reduce`
//! ranges that every reduce over one of them lists together, `a` right before `b`).

use super::simplify::{simplify_expression, simplify_kernel};
use crate::rewrite::{PatternMatcher, UPat, graph_rewrite};
use crate::uop::{AxisType, DType, Op, UOp};
use std::collections::HashSet;
use std::sync::OnceLock;

/// `ast` with every pair of adjacent ranges that its indices walk as one merged, repeatedly.
pub fn merge_ranges(ast: &UOp) -> UOp {
    let mut ast = ast.clone();
    // A merge removes a range, so this ends; each accepted merge restarts the scan because the
    // ranges are renumbered.
    'scan: loop {
        let ranges = ranges_by_id(&ast);
        for pair in ranges.windows(2) {
            if let Some(merged) = merged_pair(&ast, &pair[0], &pair[1]) {
                ast = merged;
                continue 'scan;
            }
        }
        return ast;
    }
}

/// The ranges of `ast` sorted by id.
fn ranges_by_id(ast: &UOp) -> Vec<UOp> {
    let mut ranges: Vec<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Range)
        .collect();
    ranges.sort_by_key(UOp::range_id);
    ranges
}

/// `ast` with `outer` and `inner` merged, when they may be and every `/` and `%` folds away.
fn merged_pair(ast: &UOp, outer: &UOp, inner: &UOp) -> Option<UOp> {
    let axis_type = outer.range_axis_type();
    if inner.range_axis_type() != axis_type
        || inner.range_id() != outer.range_id() + 1
        || !matches!(axis_type, AxisType::Loop | AxisType::Reduce)
        || !reduces_list_together(ast, outer, inner)
    {
        return None;
    }
    let (a, b) = (outer.range_size()?, inner.range_size()?);
    if a < 2 || b < 2 {
        return None; // nothing to merge (and `a·b` would be one of the two ranges itself)
    }
    let flat = UOp::range(a * b, outer.range_id(), axis_type);
    let width = UOp::index(b as i64);
    let mut ctx = MergeCtx {
        outer: outer.clone(),
        inner: inner.clone(),
        row: UOp::alu(Op::Idiv, vec![flat.clone(), width.clone()]),
        column: UOp::alu(Op::Mod, vec![flat.clone(), width]),
        flat: flat.clone(),
    };
    // The index expressions decide; trying them alone first spares a rewrite of the whole
    // kernel (a fused epilogue may hold thousands of nodes) for the pairs that do not merge.
    let indices = UOp::sink(index_roots(ast, outer, inner));
    if unfolded(
        &simplify_expression(&graph_rewrite(&indices, merge_rules(), &mut ctx)),
        &flat,
    ) {
        return None;
    }
    let merged = simplify_kernel(&graph_rewrite(ast, merge_rules(), &mut ctx));
    (!unfolded(&merged, &flat)).then_some(merged)
}

/// True when some `/` or `%` of `ast` still reads the merged range.
fn unfolded(ast: &UOp, flat: &UOp) -> bool {
    let reads = readers(&ast.toposort(), &[flat]);
    reads.iter().any(|u| matches!(u.op(), Op::Idiv | Op::Mod))
}

/// The nodes of `nodes` (a toposort) that are one of `ranges` or read one.
fn readers(nodes: &[UOp], ranges: &[&UOp]) -> HashSet<UOp> {
    let mut reads: HashSet<UOp> = HashSet::new();
    for u in nodes {
        if ranges.contains(&u) || u.src().iter().any(|s| reads.contains(s)) {
            reads.insert(u.clone());
        }
    }
    reads
}

/// The largest index expressions of `ast` that read `outer` or `inner`: the index operands of
/// nodes that are not index arithmetic themselves (addresses, gates, comparisons, casts); the
/// range lists of reduces are not read as indices.
fn index_roots(ast: &UOp, outer: &UOp, inner: &UOp) -> Vec<UOp> {
    let nodes = ast.toposort();
    let reads = readers(&nodes, &[outer, inner]);
    let mut seen: HashSet<UOp> = HashSet::new();
    let mut roots: Vec<UOp> = Vec::new();
    for u in nodes.iter().filter(|u| u.dtype() != DType::Index) {
        let operands = match u.op() {
            Op::Reduce => &u.src()[..1],
            _ => u.src(),
        };
        for s in operands {
            if s.dtype() == DType::Index && reads.contains(s) && seen.insert(s.clone()) {
                roots.push(s.clone());
            }
        }
    }
    roots
}

/// True unless some reduce lists one of the two ranges without the other right after it.
fn reduces_list_together(ast: &UOp, outer: &UOp, inner: &UOp) -> bool {
    ast.toposort()
        .iter()
        .filter(|u| u.op() == Op::Reduce)
        .all(|red| {
            let ranges = &red.src()[1..];
            match ranges.iter().position(|r| r == outer) {
                Some(k) => ranges.get(k + 1) == Some(inner),
                None => !ranges.contains(inner),
            }
        })
}

/// A merge in progress: the two ranges, the merged one, and what each old range becomes.
struct MergeCtx {
    outer: UOp,
    inner: UOp,
    flat: UOp,
    /// `flat / inner.size`, the value of `outer`.
    row: UOp,
    /// `flat % inner.size`, the value of `inner`.
    column: UOp,
}

/// The rule table of a merge, one row per fact.
fn merge_rules() -> &'static PatternMatcher<MergeCtx> {
    static TABLE: OnceLock<PatternMatcher<MergeCtx>> = OnceLock::new();
    TABLE.get_or_init(|| {
        PatternMatcher::new()
            // outer => flat / B,  inner => flat % B
            .rule(UPat::op(Op::Range), |m, ctx: &mut MergeCtx| {
                let r = m.root();
                if *r == ctx.outer {
                    Some(ctx.row.clone())
                } else if *r == ctx.inner {
                    Some(ctx.column.clone())
                } else {
                    None
                }
            })
            // Reduce(v, .., flat / B, flat % B, ..) => Reduce(v, .., flat, ..)
            .rule(UPat::op(Op::Reduce), |m, ctx: &mut MergeCtx| {
                let reduce = m.root();
                if reduce.src().len() < 2 || !reduce.src()[1..].contains(&ctx.row) {
                    return None;
                }
                let mut src = vec![reduce.s(0).clone()];
                for r in &reduce.src()[1..] {
                    if *r == ctx.row {
                        src.push(ctx.flat.clone());
                    } else if *r != ctx.column {
                        src.push(r.clone());
                    }
                }
                Some(reduce.with_src(src))
            })
    })
}

#[cfg(test)]
mod tests {
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;
    use crate::uop::{AxisType, Op, UOp};

    fn kernel_ast(t: &Tensor) -> UOp {
        let schedule = create_schedule(&[t.uop()]);
        assert_eq!(schedule.items.len(), 1, "one kernel");
        schedule.items[0].ast.clone()
    }

    /// The sizes of the kernel's ranges of `axis_type`, by id.
    fn sizes(ast: &UOp, axis_type: AxisType) -> Vec<usize> {
        super::ranges_by_id(ast)
            .iter()
            .filter(|r| r.range_axis_type() == axis_type)
            .map(|r| r.range_size().unwrap())
            .collect()
    }

    fn divides(ast: &UOp) -> usize {
        ast.toposort()
            .iter()
            .filter(|u| matches!(u.op(), Op::Idiv | Op::Mod))
            .count()
    }

    fn input(shape: &[usize]) -> Tensor {
        Tensor::from_vec(vec![0.5f32; shape.iter().product()], shape)
    }

    #[test]
    fn contiguous_outputs_are_one_loop() {
        let ast = kernel_ast(&input(&[4, 6, 5]).add(input(&[4, 6, 5])));
        assert_eq!(sizes(&ast, AxisType::Loop), vec![120]);
        assert_eq!(divides(&ast), 0);
    }

    #[test]
    fn a_transposed_read_keeps_its_axes_apart() {
        let ast = kernel_ast(&input(&[4, 6]).add(input(&[6, 4]).transpose(0, 1)));
        assert_eq!(sizes(&ast, AxisType::Loop), vec![4, 6]);
    }

    #[test]
    fn a_padded_axis_keeps_its_gate_on_its_own_range() {
        // The pad's gate compares the column alone: merged, it would need `p % 6`.
        let ast = kernel_ast(&input(&[4, 5]).pad(&[(0, 0), (1, 0)]).mul(2.0));
        assert_eq!(sizes(&ast, AxisType::Loop), vec![4, 6]);
        assert_eq!(divides(&ast), 0);
    }

    #[test]
    fn a_reduce_over_contiguous_axes_is_one_reduce_range() {
        let ast = kernel_ast(&input(&[3, 4, 5]).sum([1, 2], false));
        assert_eq!(sizes(&ast, AxisType::Loop), vec![3]);
        assert_eq!(sizes(&ast, AxisType::Reduce), vec![20]);
    }

    #[test]
    fn a_conv_forward_is_a_matmul_over_positions_and_channel_taps() {
        // out[b, o, p] = sum_(c, t) w[o, c, t] * cols[b, c, t, p] with p = (y, x) rows of 6; b
        // and o stay apart (the weight reads o alone).
        let cols = input(&[2, 3, 9, 4, 6]).reshape(&[2, 1, 3, 9, 4, 6]);
        let w = input(&[5, 3, 9]).reshape(&[1, 5, 3, 9, 1, 1]);
        let ast = kernel_ast(&cols.mul(&w).sum([2, 3], false));
        assert_eq!(sizes(&ast, AxisType::Loop), vec![2, 5, 24]);
        assert_eq!(sizes(&ast, AxisType::Reduce), vec![27]);
        assert_eq!(divides(&ast), 0);
    }
}
