//! Cache-blocked matmuls (`codegen::heuristic`'s REDUCEBLOCK and column-group splits, and the
//! staggered copy of a right operand whose rows are 4 KiB apart) agree with the reference
//! interpreter at sizes that do not fill the tiles, and the blocking is present in the
//! kernels that should have it.
mod common;

use common::tolerance::agree;
use common::{interpreted, kernel_sources as sources, values};
use tensor::prelude::*;
use tensor::runtime::realize::realize;

/// The number of reduce loops (`for (int ridx..`) in the kernel that reads `a` and `b`.
fn reduce_loops(source: &str) -> usize {
    source.matches("for (int ridx").count()
}

/// Realized random operands of the given shapes, centred on 0.
fn operands(a_shape: &[usize], b_shape: &[usize]) -> (Tensor, Tensor) {
    let a = Tensor::rand(a_shape, 1) - 0.5;
    let b = Tensor::rand(b_shape, 2) - 0.5;
    realize(&[&a, &b]).unwrap();
    (a, b)
}

/// `product` (a matmul with reduce length `k`) computed by the compiled kernels agrees with
/// the interpreter (the blocked sum adds the same products in another order: the float
/// tolerance of `common::tolerance`, scaled by the typical size of a sum of `k` products).
fn assert_agrees(product: &Tensor, k: usize) {
    let (got, want) = (values(product), interpreted(product));
    assert!(
        agree(&got, &want, true, (k as f64).sqrt()),
        "{:?}: largest difference {}",
        product.shape(),
        common::max_abs_diff(&got, &want)
    );
}

#[test]
fn a_matmul_with_a_long_reduce_is_blocked_and_agrees() {
    let (a, b) = operands(&[8, 768], &[768, 256]);
    let product = a.matmul(&b);
    let blocked: Vec<String> = sources(&product)
        .into_iter()
        .filter(|s| reduce_loops(s) == 2)
        .collect();
    assert_eq!(
        blocked.len(),
        1,
        "one kernel with a block loop and a reduce loop"
    );
    assert!(
        blocked[0].contains("? 0.0f : "),
        "the store adds the previous blocks' sum (zero for the first):\n{}",
        blocked[0]
    );
    assert_agrees(&product, 768);
}

#[test]
fn blocked_matmuls_at_awkward_sizes_agree() {
    // (left shape, right shape, whether the kernel is cache-blocked)
    for (a_shape, b_shape, blocked) in [
        (vec![5, 512], vec![512, 128], true),
        (vec![1, 512], vec![512, 256], false),
        (vec![6, 1280], vec![1280, 192], true),
        (vec![7, 1024], vec![1024, 144], false),
        (vec![256, 512], vec![512, 1], false),
        // The leading axes are one contiguous block of 18 rows: merged, a blocked matmul.
        (vec![3, 6, 512], vec![512, 128], true),
        (vec![2, 9, 512], vec![2, 512, 256], false),
    ] {
        let (a, b) = operands(&a_shape, &b_shape);
        let product = a.matmul(&b);
        let loops = sources(&product).iter().map(|s| reduce_loops(s)).max();
        assert_eq!(
            loops,
            Some(if blocked { 2 } else { 1 }),
            "{a_shape:?} @ {b_shape:?}"
        );
        assert_agrees(&product, a_shape[a_shape.len() - 1]);
    }
}

#[test]
fn a_short_reduce_or_an_epilogue_keeps_one_reduce_loop() {
    let a = Tensor::rand(&[64, 256], 1);
    let b = Tensor::rand(&[256, 256], 2);
    realize(&[&a, &b]).unwrap();
    for source in sources(&a.matmul(&b)) {
        assert!(reduce_loops(&source) <= 1, "{source}");
    }
    let long = Tensor::rand(&[512, 256], 3);
    realize(&[&long]).unwrap();
    let with_epilogue = (a.pad(&[(0, 0), (0, 256)]).matmul(&long) + 1.0).relu();
    for source in sources(&with_epilogue) {
        assert!(reduce_loops(&source) <= 1, "{source}");
    }
}

#[test]
fn a_right_operand_with_rows_4_kib_apart_is_read_through_a_staggered_copy() {
    let (a, b) = operands(&[64, 128], &[128, 1024]);
    let product = a.matmul(&b);
    assert_eq!(
        sources(&product).len(),
        2,
        "the copy with rows 1040 floats apart, then the matmul"
    );
    assert_agrees(&product, 128);
    let narrow = Tensor::rand(&[128, 1000], 3);
    realize(&[&narrow]).unwrap();
    assert_eq!(
        sources(&a.matmul(&narrow)).len(),
        1,
        "no copy for 4000-byte rows"
    );
}
