//! Split reduce: a reduction of many elements into few outputs (a sum of 16M floats into one)
//! is computed in two kernels, so that the first has enough outputs to spread over the CPU's
//! cores or a GPU's blocks (one kernel would run it on one core, or one block).
//!
//! With `x` reduced over the axes `A` into the outputs `O`, the first reduced axis `d` whose
//! size `n` some `s` in `[SPLIT_MIN_PARTS, SPLIT_MAX_PARTS]` divides (the largest such `s`, at
//! most [`SPLIT_MAX_PARTIALS`] partial results in all) is cut into `s` contiguous runs:
//!
//! ```text
//! reduce_A(x)  =>  reshape_O(reduce_last(contiguous(move_d_last(reduce_A'(reshape_(.., s, n/s, ..)(x))))))
//! ```
//!
//! where `A'` is `A` with `d` replaced by the run axis `n/s`. The first kernel stores `s`
//! partial results per output, each over a contiguous run of `x` (its own cache lines, its own
//! core), laid out with the parts of one output side by side; the second reduces them. Only
//! reductions of at least [`SPLIT_MIN_RATIO`] elements per output are split (below, the
//! second kernel's launch costs more than the first saves), and only outside vmap scopes and
//! loops over ranges, whose reduces the scheduler lowers with their ambient ranges. Every
//! reduce op is associative, so the result is the same up to the order of float additions.
//! The split is made once: the reduces it builds are not split again.

use crate::uop::{Arg, Op, UOp};

/// The fewest elements per output a reduction must combine to be split.
pub const SPLIT_MIN_RATIO: usize = 1 << 15;

/// The fewest partial results per output a split makes.
pub const SPLIT_MIN_PARTS: usize = 8;

/// The most partial results per output a split makes.
pub const SPLIT_MAX_PARTS: usize = 256;

/// The most partial results of all outputs together (a split's first kernel stores them).
pub const SPLIT_MAX_PARTIALS: usize = 1 << 22;

/// The graphs of `outputs` with every reduction that combines many elements into few outputs
/// split in two (see the module docs).
pub fn split_reduces(outputs: &[UOp]) -> Vec<UOp> {
    let root = UOp::sink(outputs.to_vec());
    let mut images: std::collections::HashMap<UOp, UOp> = std::collections::HashMap::new();
    for node in root.toposort() {
        let src: Vec<UOp> = node.src().iter().map(|s| images[s].clone()).collect();
        let rebuilt = match src.as_slice() == node.src() {
            true => node.clone(),
            false => node.with_src(src),
        };
        let image = split(&rebuilt).unwrap_or(rebuilt);
        images.insert(node, image);
    }
    images[&root].src().to_vec()
}

/// `reduce` split in two, if it is a reduction over axes worth splitting.
fn split(reduce: &UOp) -> Option<UOp> {
    let Arg::Reduce(op, axes) = reduce.arg() else {
        return None;
    };
    if reduce.op() != Op::Reduce || reduce.src().len() != 1 || axes.is_empty() {
        return None;
    }
    let x = reduce.s(0);
    let (shape, outputs) = (x.shape_vec(), reduce.shape_vec());
    let elements: usize = shape.iter().product();
    let outputs_count: usize = outputs.iter().product();
    if outputs_count == 0 || elements / outputs_count < SPLIT_MIN_RATIO || in_scope(x) {
        return None;
    }
    let most_parts = SPLIT_MAX_PARTS.min(SPLIT_MAX_PARTIALS / outputs_count);
    let (d, parts) = axes.iter().find_map(|&d| {
        (SPLIT_MIN_PARTS..=most_parts)
            .rev()
            .find(|s| shape[d].is_multiple_of(*s))
            .map(|s| (d, s))
    })?;
    let mut split_shape = shape.clone();
    split_shape.splice(d..=d, [parts, shape[d] / parts]);
    let run_axes: Vec<usize> = axes
        .iter()
        .map(|&a| if a < d { a } else { a + 1 })
        .collect();
    let partials = x.reshape(&split_shape).reduce(*op, &run_axes);
    let rank = split_shape.len();
    let parts_last: Vec<usize> = (0..rank).filter(|&a| a != d).chain([d]).collect();
    let stored = partials.permute(&parts_last).unary_marker(Op::Contiguous);
    Some(stored.reduce(*op, &[rank - 1]).reshape(&outputs))
}

/// True when `x` reads a vmap scope's input or a range (the scheduler lowers those with
/// ambient ranges; a split there is not made).
fn in_scope(x: &UOp) -> bool {
    x.toposort()
        .iter()
        .any(|u| matches!(u.op(), Op::Vmapin | Op::Vmapout | Op::Range))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;

    fn buffer(shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_vec((0..n).map(|i| (i % 7) as f32).collect(), shape)
    }

    fn reduces(graph: &[UOp]) -> Vec<UOp> {
        UOp::sink(graph.to_vec())
            .toposort()
            .into_iter()
            .filter(|u| u.op() == Op::Reduce)
            .collect()
    }

    #[test]
    fn a_long_sum_to_one_output_becomes_256_partial_sums_and_their_sum() {
        let x = buffer(&[1 << 16]);
        let graph = split_reduces(&[x.sum_all().uop()]);
        let shapes: Vec<(Vec<usize>, Vec<usize>)> = reduces(&graph)
            .iter()
            .map(|r| (r.s(0).shape_vec(), r.shape_vec()))
            .collect();
        assert_eq!(
            shapes,
            [(vec![256, 256], vec![256, 1]), (vec![1, 256], vec![1, 1])],
            "{graph:?}"
        );
        assert_eq!(create_schedule(&[x.sum_all().uop()]).items.len(), 2);
    }

    #[test]
    fn the_parts_of_one_output_are_side_by_side() {
        // Column sums of 2 columns of 2^16: each column's 256 runs are one row of the buffer.
        let x = buffer(&[1 << 16, 2]);
        let graph = split_reduces(&[x.sum(0, false).uop()]);
        let contiguous = UOp::sink(graph.clone())
            .toposort()
            .into_iter()
            .find(|u| u.op() == Op::Contiguous)
            .expect("the partial results are stored");
        assert_eq!(contiguous.shape_vec(), [1, 2, 256]);
        assert_eq!(reduces(&graph)[0].s(0).shape_vec(), [256, 256, 2]);
    }

    #[test]
    fn short_or_many_output_reductions_are_not_split() {
        let rows = buffer(&[64, 4096]);
        let graph = [rows.sum(1, false).uop()];
        assert_eq!(split_reduces(&graph), graph, "4096 elements per output");
        let prime = buffer(&[65537]);
        let graph = [prime.sum_all().uop()];
        assert_eq!(
            split_reduces(&graph),
            graph,
            "no divisor of 65537 to split by"
        );
    }

    #[test]
    fn split_reductions_equal_the_interpreter() {
        use crate::schedule::differential::check;
        use crate::uop::DType;
        // Small integers: every order of a sum is exact, and the split changes the order.
        let ints = |shape: &[usize]| (buffer(shape) - 3.0).floor();
        let long = ints(&[1 << 16]);
        let cases = [
            ("f32 sum", long.sum_all()),
            ("max", long.max_all()),
            ("i32 sum", long.cast(DType::I32).sum_all()),
            // Wrapping products are associative too.
            ("i32 product", (long.cast(DType::I32) + 4).prod_all()),
            ("column sums", ints(&[1 << 15, 3]).sum(0, false)),
            (
                "mean over two axes",
                ints(&[256, 4, 256]).mean([0, 2], true),
            ),
            (
                "half sum",
                Tensor::full(&[1 << 15], 1, DType::F16).sum_all(),
            ),
        ];
        for (name, out) in &cases {
            let kernels = check(name, std::slice::from_ref(out));
            assert!(kernels >= 2, "{name}: {kernels} kernels, not split");
        }
    }
}
