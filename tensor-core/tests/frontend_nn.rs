//! Softmax family, joining and indexing evaluated by the reference interpreter.

mod frontend_common;

use frontend_common::*;
use tensor_core::{DType, Op, Tensor};

fn softmax_rows(x: &[f64], cols: usize) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let m = row.iter().cloned().fold(f64::MIN, f64::max);
            let total: f64 = row.iter().map(|v| (v - m).exp()).sum();
            row.iter()
                .map(move |v| (v - m).exp() / total)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn softmax_normalizes_along_the_axis_even_for_large_inputs() {
    let data = [1.0, 2.0, 3.0, 1000.0, 1001.0, 1002.0];
    let x = Tensor::from_vec(data.iter().map(|&v| v as f32).collect(), &[2, 3]);
    let want = softmax_rows(&data, 3);
    assert_close(&x.softmax(-1), &[2, 3], &want);
    assert_close(
        &x.log_softmax(1),
        &[2, 3],
        &want.iter().map(|v| v.ln()).collect::<Vec<_>>(),
    );
    let cols = x.transpose(0, 1).softmax(0).transpose(0, 1);
    assert_close(&cols, &[2, 3], &want);
}

#[test]
fn softmax_subtracts_a_detached_max() {
    let x = ramp(&[2, 3]);
    let nodes = x.softmax(1).uop().toposort();
    let detach = nodes
        .iter()
        .find(|u| u.op() == Op::Detach)
        .expect("a Detach node");
    assert_eq!(detach.s(0).op(), Op::Reduce);
}

#[test]
fn logsumexp_is_stable_and_reduces_any_axes() {
    let x = f32s(&[1.0, 2.0, 3.0, 1000.0, 1000.0, 1000.0], &[2, 3]);
    let lse = |r: &[f64]| {
        let m = r.iter().cloned().fold(f64::MIN, f64::max);
        m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
    };
    let rows = [lse(&[1.0, 2.0, 3.0]), lse(&[1000.0; 3])];
    assert_close(&x.logsumexp(1, false), &[2], &rows);
    assert_close(&x.logsumexp(-1, true), &[2, 1], &rows);
    let all = lse(&[1.0, 2.0, 3.0, 1000.0, 1000.0, 1000.0]);
    assert_close(&x.logsumexp([0, 1], false), &[], &[all]);
    let ints = Tensor::from_vec(vec![0i32, 0], &[2]);
    assert_close(&ints.logsumexp(0, false), &[], &[2f64.ln()]);
}

#[test]
fn cat_joins_along_any_axis_and_promotes() {
    let a = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let b = f32s(&[5.0, 6.0], &[2, 1]);
    assert_close(
        &Tensor::cat(&[a.clone(), b.clone()], 1),
        &[2, 3],
        &[1.0, 2.0, 5.0, 3.0, 4.0, 6.0],
    );
    assert_close(
        &Tensor::cat(&[a.clone(), a.clone()], 0),
        &[4, 2],
        &[1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 3.0, 4.0],
    );
    let empty = Tensor::zeros(&[2, 0], DType::F32);
    assert_close(
        &Tensor::cat(&[empty, b.clone(), b.clone()], -1),
        &[2, 2],
        &[5.0, 5.0, 6.0, 6.0],
    );
    let i = Tensor::from_vec(vec![7i32], &[1]);
    let mixed = Tensor::cat(&[i, f32s(&[0.5], &[1])], 0);
    assert_eq!(mixed.dtype(), DType::F32);
    assert_close(&mixed, &[2], &[7.0, 0.5]);
    let p = Tensor::from_vec(vec![true, false], &[2]);
    assert_bools(
        &Tensor::cat(&[p.clone(), p], 0),
        &[4],
        &[true, false, true, false],
    );
}

#[test]
fn stack_joins_along_a_new_axis() {
    let a = f32s(&[1.0, 2.0], &[2]);
    let b = f32s(&[3.0, 4.0], &[2]);
    assert_close(
        &Tensor::stack(&[a.clone(), b.clone()], 0),
        &[2, 2],
        &[1.0, 2.0, 3.0, 4.0],
    );
    assert_close(
        &Tensor::stack(&[a.clone(), b.clone()], 1),
        &[2, 2],
        &[1.0, 3.0, 2.0, 4.0],
    );
    assert_close(
        &Tensor::stack(&[a.clone(), b.clone(), a.clone()], -1),
        &[2, 3],
        &[1.0, 3.0, 1.0, 2.0, 4.0, 2.0],
    );
    assert_close(
        &Tensor::stack(&[Tensor::scalar(1.0f32), Tensor::scalar(2.0f32)], 0),
        &[2],
        &[1.0, 2.0],
    );
}

#[test]
fn gather_and_take_along_axis_pick_along_an_axis() {
    let x = f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let idx = Tensor::from_vec(vec![2i32, 0, 1, 1], &[2, 2]);
    assert_close(&x.gather(1, &idx), &[2, 2], &[3.0, 1.0, 5.0, 5.0]);
    let rows = Tensor::from_vec(vec![1i64, 0, 1], &[1, 3]);
    assert_close(&x.gather(0, &rows), &[1, 3], &[4.0, 2.0, 6.0]);
    let negative = Tensor::from_vec(vec![-1i32, -3], &[2, 1]);
    assert_close(&x.gather(-1, &negative), &[2, 1], &[3.0, 4.0]);
    let broadcast = Tensor::from_vec(vec![0i32, 2], &[1, 2]);
    assert_close(
        &x.take_along_axis(&broadcast, 1),
        &[2, 2],
        &[1.0, 3.0, 4.0, 6.0],
    );
    // PyTorch's rule: the index shape is the output shape, shorter axes read a leading part.
    assert_close(&x.gather(1, &broadcast), &[1, 2], &[1.0, 3.0]);
    let with_inf = f32s(&[f32::INFINITY, 1.0], &[2]);
    assert_close(
        &with_inf.gather(0, &Tensor::from_vec(vec![1i32], &[1])),
        &[1],
        &[1.0],
    );
    let b = Tensor::from_vec(vec![true, false, true], &[3]);
    assert_bools(
        &b.gather(0, &Tensor::from_vec(vec![1i32, 2], &[2])),
        &[2],
        &[false, true],
    );
}

#[test]
fn take_looks_up_slices_for_indices_of_any_shape() {
    let table = f32s(&[0.0, 0.1, 1.0, 1.1, 2.0, 2.1], &[3, 2]);
    let tokens = Tensor::from_vec(vec![2i32, 0, 1, 2], &[2, 2]);
    assert_close(
        &table.take(&tokens, 0),
        &[2, 2, 2],
        &[2.0, 2.1, 0.0, 0.1, 1.0, 1.1, 2.0, 2.1],
    );
    let cols = Tensor::from_vec(vec![1i32, 1, 0], &[3]);
    assert_close(
        &table.take(&cols, 1),
        &[3, 3],
        &[0.1, 0.1, 0.0, 1.1, 1.1, 1.0, 2.1, 2.1, 2.0],
    );
    assert_close(&table.take(&Tensor::scalar(-1i32), 0), &[2], &[2.0, 2.1]);
}

#[test]
fn one_hot_marks_the_label() {
    let labels = Tensor::from_vec(vec![0i32, 2, 1, 5], &[4]);
    assert_close(
        &labels.one_hot(3),
        &[4, 3],
        &[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
    );
    let grid = Tensor::from_vec(vec![1u8, 0], &[2, 1]);
    assert_close(&grid.one_hot(2), &[2, 1, 2], &[0.0, 1.0, 1.0, 0.0]);
}

#[test]
fn scatter_add_accumulates_at_the_indices() {
    let base = f32s(&[0.0, 0.0, 0.0, 10.0, 10.0, 10.0], &[2, 3]);
    let idx = Tensor::from_vec(vec![2i32, 2, 0, 1], &[2, 2]);
    let src = f32s(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    assert_close(
        &base.scatter_add(1, &idx, &src),
        &[2, 3],
        &[0.0, 0.0, 3.0, 13.0, 14.0, 10.0],
    );
    let rows = Tensor::from_vec(vec![1i64, -2, 1], &[1, 3]);
    let ones = f32s(&[1.0, 1.0, 1.0], &[1, 3]);
    assert_close(
        &base.scatter_add(0, &rows, &ones),
        &[2, 3],
        &[0.0, 1.0, 0.0, 11.0, 10.0, 11.0],
    );
    let counts = Tensor::zeros(&[4], DType::I32);
    let labels = Tensor::from_vec(vec![1i32, 3, 1, 1], &[4]);
    let added = counts.scatter_add(0, &labels, &Tensor::ones(&[4], DType::I32));
    assert_ints(&added, &[4], &[0, 3, 0, 1]);
}

#[test]
#[should_panic(
    expected = "scatter_add: index shape [2, 2] does not fit shape [3, 3] outside axis 1"
)]
fn scatter_add_index_must_match_outside_the_axis() {
    let idx = Tensor::zeros(&[2, 2], DType::I32);
    Tensor::zeros(&[3, 3], DType::F32).scatter_add(1, &idx, &Tensor::zeros(&[2, 2], DType::F32));
}
