//! Reductions along a contiguous axis get partial accumulators (`codegen::heuristic`'s UNROLL
//! split of the reduce range, expanded by `codegen::expand`; a LANE split, an array of partial
//! maxima, for a float maximum): the kernels have them, and their
//! results agree with the reference interpreter within the float tolerance (the partial sums
//! add the terms in another order), exactly for integers and maxima. A long reduction into
//! few outputs is split by the scheduler into partial results and their reduction
//! (`schedule::split_reduce`).
mod common;

use common::tolerance::agree;
use common::{interpreted, kernel_sources as sources, values};
use tensor::prelude::*;

fn assert_agrees(t: &Tensor, is_float: bool, bound: f64) {
    let (got, want) = (values(t), interpreted(t));
    assert!(
        agree(&got, &want, is_float, bound),
        "{:?}: largest difference {}",
        t.shape(),
        common::max_abs_diff(&got, &want)
    );
}

#[test]
fn a_row_sum_has_sixteen_partial_accumulators_and_agrees() {
    let x = Tensor::rand(&[12, 4096], 1) - 0.5;
    x.realize().unwrap();
    let sum = x.sum(-1, false);
    let source = sources(&sum).join("\n");
    assert!(
        source.contains("acc15") && !source.contains("acc16"),
        "{source}"
    );
    assert_agrees(&sum, true, 64.0);
}

#[test]
fn reductions_along_contiguous_axes_agree_at_awkward_sizes() {
    for shape in [
        vec![3, 40],
        vec![5, 24],
        vec![1, 4096],
        vec![7, 1000],
        vec![2, 3, 528],
    ] {
        let x = Tensor::rand(&shape, 2) * 4.0 - 2.0;
        x.realize().unwrap();
        let n = *shape.last().unwrap() as f64;
        assert_agrees(&x.sum(-1, false), true, 2.0 * n.sqrt());
        assert_agrees(&x.max(-1, false), true, 2.0);
        assert_agrees(&x.softmax(-1), true, 1.0);
        assert_agrees(&x.logsumexp(-1, false), true, n.ln() + 2.0);
        let ints = (&x * 100.0).cast(DType::I32);
        ints.realize().unwrap();
        assert_agrees(&ints.sum(-1, false), false, 1.0);
    }
}

#[test]
fn a_long_sum_keeps_its_partial_accumulators_within_a_block_each() {
    // 2^20 terms, 2^16 per lane: `codegen::blocked_sum` still splits each lane's sum into
    // blocks of at most 4096 terms (a loop over the blocks around the lanes' loop).
    let ones = Tensor::ones(&[1 << 20], DType::F32).contiguous();
    ones.realize().unwrap();
    let sum = ones.sum(-1, false);
    let source = sources(&sum).join("\n");
    assert!(source.contains("acc15"), "{source}");
    assert!(source.matches("for (int ridx").count() >= 2, "{source}");
    assert_eq!(values(&sum), vec![(1u64 << 20) as f64]);
}

#[test]
fn a_column_sum_keeps_its_column_upcast() {
    let x = Tensor::rand(&[256, 64], 3);
    x.realize().unwrap();
    let sum = x.sum(0, false);
    let source = sources(&sum).join("\n");
    assert!(source.contains("acc15"), "16 columns at once: {source}");
    assert_agrees(&sum, true, 16.0);
}

#[test]
fn a_matmul_with_a_transposed_weight_has_lane_accumulators_and_agrees() {
    // `x @ w.T` (every `nn::linear`): the reduce is contiguous in both operands, so each output
    // gets an array of eight partial sums updated in a lane loop (`codegen::heuristic` item 6).
    for (rows, outs, k) in [(64, 32, 256), (12, 8, 64), (2, 4, 40000), (6, 12, 40)] {
        let x = Tensor::rand(&[rows, k], 4) - 0.5;
        let w = Tensor::rand(&[outs, k], 5) - 0.5;
        x.realize().unwrap();
        w.realize().unwrap();
        let y = x.matmul(&w.transpose(0, 1));
        let source = sources(&y).join("\n");
        assert!(
            source.contains("acc0[8]") && source.contains("[lane"),
            "{rows}x{outs}x{k}: {source}"
        );
        assert_agrees(&y, true, 2.0 * (k as f64).sqrt());
        let relu = y.relu() + 1.0;
        assert_agrees(&relu, true, 2.0 * (k as f64).sqrt());
    }
}

#[test]
fn an_f64_matmul_with_a_transposed_weight_agrees() {
    let x = Tensor::rand(&[16, 96], 6).cast(DType::F64);
    let w = Tensor::rand(&[8, 96], 7).cast(DType::F64);
    x.realize().unwrap();
    w.realize().unwrap();
    let y = x.matmul(&w.transpose(0, 1));
    assert!(sources(&y).join("\n").contains("double acc0[8]"));
    assert_agrees(&y, true, 16.0);
}

#[test]
fn a_row_max_has_a_lane_array_of_partial_maxima_and_propagates_nan_and_infinities() {
    // Rows: plain values; one NaN late in the row; all -inf; one +inf; NaN at both ends;
    // negative zeros next to zeros.
    let n = 4096;
    let mut data: Vec<f32> = (0..6 * n)
        .map(|i| ((i * 7919) % 1013) as f32 - 500.0)
        .collect();
    data[n + 4000] = f32::NAN;
    data[2 * n..3 * n].fill(f32::NEG_INFINITY);
    data[3 * n + 17] = f32::INFINITY;
    data[4 * n] = f32::NAN;
    data[5 * n - 1] = f32::NAN;
    for (i, v) in data[5 * n..].iter_mut().enumerate() {
        *v = if i % 2 == 0 { -0.0 } else { -1.0 };
    }
    let x = Tensor::from_vec(data, &[6, n]);
    for t in [x.max(-1, false), x.cast(DType::F64).max(-1, false)] {
        let source = sources(&t).join("\n");
        assert!(source.contains("acc0[16]"), "{source}");
        let (got, want) = (values(&t), interpreted(&t));
        let exact = got.len() == want.len()
            && got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()));
        assert!(exact, "bit for bit: {got:?} vs {want:?}");
        assert!(got[1].is_nan() && got[4].is_nan(), "{got:?}");
        assert_eq!(got[2], f64::NEG_INFINITY);
        assert_eq!(got[3], f64::INFINITY);
    }
}

#[test]
fn a_long_sum_to_one_output_is_split_into_partial_sums_and_agrees_exactly() {
    // Small integers: the split's order of additions gives the exact sum, as any order does.
    let x = ((Tensor::rand(&[1 << 20], 2) * 8.0).floor() - 4.0).contiguous();
    x.realize().unwrap();
    for (name, t, float) in [
        ("sum", x.sum_all(), true),
        ("max", x.max_all(), true),
        ("i32 sum", x.cast(DType::I32).sum_all(), false),
        ("column sums", x.reshape(&[1 << 18, 4]).sum(0, false), true),
    ] {
        // 256 partial results per output (each on a contiguous run), then their reduction.
        assert_eq!(sources(&t).len(), 2, "{name}");
        assert_agrees(&t, float, 0.0);
    }
}
