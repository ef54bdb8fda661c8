//! A reduce that folds `where(a == b, x, identity)` (a one-hot contraction: an embedding's
//! gradient, a diagonal) has its updates in an `if` block on the equality in the rendered C
//! (`codegen::linearize`), with the loads of `x` inside it; other gates keep the select. The
//! results agree with the reference interpreter on the CPU and on the emulated GPU.
mod common;

use common::tolerance::agree;
use common::{interpreted, kernel_sources, max_abs_diff, values};
use tensor::prelude::*;

const VOCAB: usize = 40;
const SEQ: usize = 24;
const DIM: usize = 16;

fn tokens() -> Tensor {
    let ids: Vec<i64> = (0..SEQ).map(|i| (i * 7 % 13) as i64).collect();
    Tensor::from_vec(ids, &[SEQ])
}

fn ramp(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let values = (0..n)
        .map(|i| (i * 7919 % 97) as f32 / 97.0 - 0.5)
        .collect();
    Tensor::from_vec(values, shape)
}

/// The gradient of `sum(embedding(tokens, table) * dy)` with respect to the table: each
/// table row the sum of the `dy` rows of the positions holding its token.
fn embedding_gradient() -> Tensor {
    let dy = ramp(&[SEQ, DIM]);
    dy.realize().unwrap();
    let table = Tensor::zeros(&[VOCAB, DIM], DType::F32);
    let tok = tokens();
    let loss = move |table: &Tensor| (tensor::nn::embedding(&tok, table) * &dy).sum_all();
    grad(loss, 0).call1(&[table])
}

/// The lines of the `if` blocks of `source`, each block's lines joined.
fn if_blocks(source: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, Vec<&str>)> = None;
    for line in source.lines() {
        let indent = line.len() - line.trim_start().len();
        match &mut current {
            Some((at, lines)) if indent == *at && line.trim() == "}" => {
                blocks.push(lines.join("\n"));
                current = None;
            }
            Some((_, lines)) => lines.push(line.trim()),
            None if line.trim_start().starts_with("if (") && line.ends_with('{') => {
                current = Some((indent, vec![line.trim()]));
            }
            None => {}
        }
    }
    blocks
}

#[track_caller]
fn assert_agrees(t: &Tensor, bound: f64) {
    let (got, want) = (values(t), interpreted(t));
    assert!(
        agree(&got, &want, true, bound),
        "{:?}: largest difference {}",
        t.shape(),
        max_abs_diff(&got, &want)
    );
}

#[test]
fn an_embedding_gradient_accumulates_inside_a_branch_on_the_token() {
    let g = embedding_gradient();
    let source = kernel_sources(&g).join("\n");
    let blocks = if_blocks(&source);
    assert!(!blocks.is_empty(), "no branch:\n{source}");
    for block in &blocks {
        assert!(block.contains("==") && block.contains("+="), "{block}");
        assert!(
            block.contains("= data"),
            "the gated loads are inside: {block}"
        );
    }
    assert!(
        !source.contains("? val"),
        "no select of a loaded value is left:\n{source}"
    );
    assert_agrees(&g, 4.0);
}

#[test]
fn the_embedding_gradient_adds_the_rows_of_repeated_tokens() {
    let g = values(&embedding_gradient());
    let dy = values(&ramp(&[SEQ, DIM]));
    let ids: Vec<usize> = (0..SEQ).map(|i| i * 7 % 13).collect();
    for v in 0..VOCAB {
        for d in 0..DIM {
            let want: f64 = (0..SEQ)
                .filter(|&s| ids[s] == v)
                .map(|s| dy[s * DIM + d])
                .sum();
            assert!((g[v * DIM + d] - want).abs() < 1e-5, "row {v}, column {d}");
        }
    }
}

#[test]
fn a_gated_maximum_and_product_branch_and_agree() {
    let x = ramp(&[SEQ, VOCAB]);
    x.realize().unwrap();
    let hot = tokens()
        .reshape(&[SEQ, 1])
        .eq(Tensor::arange(VOCAB as i64).reshape(&[1, VOCAB]));
    let max = hot.where_(&x, f32::NEG_INFINITY).max(0, false);
    let prod = hot.where_(&x + 2.0, 1.0).prod(0, false);
    for t in [&max, &prod] {
        let source = kernel_sources(t).join("\n");
        assert!(!if_blocks(&source).is_empty(), "no branch:\n{source}");
        assert_agrees(t, 2.0);
    }
}

#[test]
fn an_inequality_gate_keeps_the_select() {
    let x = ramp(&[SEQ, VOCAB]);
    x.realize().unwrap();
    let relu_sum = x.gt(0.0).where_(&x, 0.0).sum(0, false);
    let source = kernel_sources(&relu_sum).join("\n");
    assert!(if_blocks(&source).is_empty(), "{source}");
    assert_agrees(&relu_sum, 4.0);
}
