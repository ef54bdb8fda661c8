//! Behaviour of the scheduler: kernel counts (the fusion contract), AST structure, and the
//! values the schedules compute (run by the test executor in `exec`).

use super::exec::run;
use super::realize::as_contiguous_buffer;
use super::{Schedule, create_schedule};
use crate::tensor::Tensor;
use crate::uop::{Arg, DType, Op, ReduceOp, UOp};

// ---- graph building helpers (raw UOps, as the front end would build them) ----

fn input(data: &[f32], shape: &[usize]) -> UOp {
    Tensor::from_vec(data.to_vec(), shape).uop()
}

fn iota(shape: &[usize]) -> (UOp, Vec<f32>) {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    (input(&data, shape), data)
}

fn full(v: f32, shape: &[usize]) -> UOp {
    UOp::constant(v, DType::F32)
        .reshape(&vec![1; shape.len()])
        .expand(shape)
}

fn add(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Add, vec![a.clone(), b.clone()])
}

fn mul(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Mul, vec![a.clone(), b.clone()])
}

fn max(a: &UOp, b: &UOp) -> UOp {
    UOp::alu(Op::Max, vec![a.clone(), b.clone()])
}

fn sub(a: &UOp, b: &UOp) -> UOp {
    add(a, &mul(b, &full(-1.0, &b.shape_vec())))
}

fn exp(a: &UOp) -> UOp {
    let scaled = mul(a, &full(std::f32::consts::LOG2_E, &a.shape_vec()));
    UOp::alu(Op::Exp2, vec![scaled])
}

fn recip(a: &UOp) -> UOp {
    UOp::alu(Op::Recip, vec![a.clone()])
}

/// `x @ w` as the front end spells it: broadcast multiply, sum over K, reshape.
fn matmul(x: &UOp, w: &UOp) -> UOp {
    let (m, k) = (x.shape_vec()[0], x.shape_vec()[1]);
    let n = w.shape_vec()[1];
    let xs = x.reshape(&[m, k, 1]).expand(&[m, k, n]);
    let ws = w.reshape(&[1, k, n]).expand(&[m, k, n]);
    mul(&xs, &ws).reduce(ReduceOp::Add, &[1]).reshape(&[m, n])
}

/// Softmax over the last axis of a 2-D tensor.
fn softmax(x: &UOp) -> UOp {
    let shape = x.shape_vec();
    let m = x.reduce(ReduceOp::Max, &[1]).expand(&shape);
    let e = exp(&sub(x, &m));
    let s = e.reduce(ReduceOp::Add, &[1]).expand(&shape);
    mul(&e, &recip(&s))
}

fn schedule_and_run(outputs: &[UOp]) -> (Schedule, Vec<Vec<f32>>) {
    let schedule = create_schedule(outputs);
    let values = run(&schedule)
        .into_iter()
        .map(|v| v.into_iter().map(|s| s.as_f64() as f32).collect())
        .collect();
    (schedule, values)
}

#[track_caller]
fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "length: got {got:?}, want {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "element {i}: got {g}, want {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

fn count_ops(ast: &UOp, op: Op) -> usize {
    ast.toposort().iter().filter(|u| u.op() == op).count()
}

fn load_slots(ast: &UOp) -> Vec<i64> {
    ast.toposort()
        .iter()
        .filter(|u| u.op() == Op::Load)
        .map(|l| match l.s(0).s(0).arg() {
            Arg::Int(s) => *s,
            a => panic!("load of {a:?}"),
        })
        .collect()
}

// ---- fusion: the kernel counts ----

#[test]
fn fuses_elementwise_chain_into_one_kernel() {
    let (a, data) = iota(&[4, 4]);
    let out = add(&add(&a, &full(4.0, &[4, 4])), &full(3.0, &[4, 4]));
    let (schedule, values) = schedule_and_run(&[out]);
    assert_eq!(schedule.items.len(), 1);
    let ast = &schedule.items[0].ast;
    assert_eq!(load_slots(ast), vec![1], "one load, of the input in slot 1");
    let constants: Vec<f64> = ast
        .toposort()
        .iter()
        .filter(|u| u.op() == Op::Const && u.dtype() == DType::F32)
        .filter_map(|u| u.const_value().map(|v| v.as_f64()))
        .collect();
    assert_eq!(
        constants,
        vec![4.0, 3.0],
        "float sums are not reassociated: (a + 4) + 3 rounds twice"
    );
    assert_eq!(schedule.items[0].buffers.len(), 2);
    let want: Vec<f32> = data.iter().map(|x| x + 4.0 + 3.0).collect();
    assert_close(&values[0], &want);
}

#[test]
fn contiguous_between_two_adds_gives_two_kernels() {
    let (a, data) = iota(&[4, 4]);
    let mid = add(&a, &full(4.0, &[4, 4])).unary_marker(Op::Contiguous);
    let out = add(&mid, &full(3.0, &[4, 4]));
    let (schedule, values) = schedule_and_run(&[out]);
    assert_eq!(schedule.items.len(), 2);
    let (first, second) = (&schedule.items[0], &schedule.items[1]);
    assert_eq!(
        second.buffers[1], first.buffers[0],
        "the second kernel reads what the first one wrote"
    );
    let want: Vec<f32> = data.iter().map(|x| x + 7.0).collect();
    assert_close(&values[0], &want);
}

#[test]
fn matmul_plus_bias_then_relu_is_one_kernel() {
    let (x, xd) = iota(&[2, 3]);
    let (w, wd) = iota(&[3, 4]);
    let b = input(&[0.5, -1.0, 2.0, -3.0], &[4]);
    let bias = b.reshape(&[1, 4]).expand(&[2, 4]);
    let out = max(&add(&matmul(&x, &w), &bias), &full(0.0, &[2, 4]));
    let (schedule, values) = schedule_and_run(&[out]);
    assert_eq!(schedule.items.len(), 1);
    assert_eq!(count_ops(&schedule.items[0].ast, Op::Reduce), 1);
    let bd = [0.5, -1.0, 2.0, -3.0];
    let mut want = vec![];
    for i in 0..2 {
        for j in 0..4 {
            let dot: f32 = (0..3).map(|k| xd[i * 3 + k] * wd[k * 4 + j]).sum();
            want.push((dot + bd[j]).max(0.0));
        }
    }
    assert_close(&values[0], &want);
}

#[test]
fn sum_divided_by_count_is_one_kernel() {
    let (x, data) = iota(&[5, 3]);
    let total = x.reduce(ReduceOp::Add, &[0, 1]).reshape(&[]);
    let mean = mul(&total, &UOp::constant(1.0 / 15.0, DType::F32));
    let (schedule, values) = schedule_and_run(&[mean]);
    assert_eq!(schedule.items.len(), 1);
    let want = data.iter().sum::<f32>() / 15.0;
    assert_close(&values[0], &[want]);
}

#[test]
fn softmax_over_the_last_axis_takes_at_most_three_kernels() {
    for shape in [[2usize, 3], [3, 64]] {
        let (x, data) = iota(&shape);
        let (schedule, values) = schedule_and_run(&[softmax(&x)]);
        assert!(
            schedule.items.len() <= 3,
            "{shape:?}: {} kernels",
            schedule.items.len()
        );
        let mut want = vec![];
        for row in data.chunks(shape[1]) {
            let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let s: f32 = row.iter().map(|v| (v - m).exp()).sum();
            want.extend(row.iter().map(|v| (v - m).exp() / s));
        }
        assert_close(&values[0], &want);
    }
}

#[test]
fn a_large_reduce_consumed_through_an_expand_is_realized_once() {
    let (x, data) = iota(&[4, 64]);
    let row_sum = x.reduce(ReduceOp::Add, &[1]).expand(&[4, 64]);
    let (schedule, values) = schedule_and_run(&[sub(&x, &row_sum)]);
    assert_eq!(schedule.items.len(), 2);
    assert_eq!(count_ops(&schedule.items[1].ast, Op::Reduce), 0);
    let mut want = vec![];
    for row in data.chunks(64) {
        let s: f32 = row.iter().sum();
        want.extend(row.iter().map(|v| v - s));
    }
    assert_close(&values[0], &want);
}

#[test]
fn a_small_reduce_consumed_through_an_expand_stays_fused() {
    let (x, data) = iota(&[3, 2]);
    let row_sum = x.reduce(ReduceOp::Add, &[1]).expand(&[3, 2]);
    let (schedule, values) = schedule_and_run(&[sub(&x, &row_sum)]);
    assert_eq!(schedule.items.len(), 1);
    let mut want = vec![];
    for row in data.chunks(2) {
        let s: f32 = row.iter().sum();
        want.extend(row.iter().map(|v| v - s));
    }
    assert_close(&values[0], &want);
}

// ---- AST structure ----

#[test]
fn reduce_of_a_pad_reads_through_a_gated_load() {
    let x = input(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let out = x.pad(&[2], &[1]).reduce(ReduceOp::Add, &[0]);
    let (schedule, values) = schedule_and_run(&[out]);
    assert_eq!(schedule.items.len(), 1);
    let ast = &schedule.items[0].ast;
    let loads: Vec<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Load)
        .collect();
    assert_eq!(loads.len(), 1);
    assert_eq!(loads[0].s(0).src().len(), 3, "the Index carries a gate");
    assert_eq!(loads[0].s(0).s(2).dtype(), DType::Bool);
    assert_close(&values[0], &[10.0]);
}

#[test]
fn the_same_element_asked_twice_is_computed_once() {
    let (a, data) = iota(&[8]);
    let y = exp(&a);
    let (schedule, values) = schedule_and_run(&[mul(&y, &y)]);
    assert_eq!(schedule.items.len(), 1);
    assert_eq!(count_ops(&schedule.items[0].ast, Op::Exp2), 1);
    let want: Vec<f32> = data.iter().map(|v| v.exp() * v.exp()).collect();
    assert_close(&values[0], &want);
}

#[test]
fn equal_computations_give_equal_asts() {
    let build = || {
        let (x, _) = iota(&[3, 5]);
        let (w, _) = iota(&[5, 2]);
        create_schedule(&[softmax(&matmul(&x, &w))])
    };
    let (first, second) = (build(), build());
    assert_eq!(first.items.len(), second.items.len());
    for (a, b) in first.items.iter().zip(&second.items) {
        assert_eq!(a.ast, b.ast);
        assert_ne!(a.buffers[0], b.buffers[0], "but the buffers are distinct");
    }
}

#[test]
fn ranges_are_numbered_from_zero_output_loops_first() {
    let (x, _) = iota(&[3, 4]);
    let (w, _) = iota(&[4, 5]);
    let (schedule, _) = schedule_and_run(&[matmul(&x, &w)]);
    let ranges: Vec<(usize, crate::uop::AxisType)> = schedule.items[0]
        .ast
        .toposort()
        .iter()
        .filter_map(|u| match u.arg() {
            Arg::Range { id, axis_type } => Some((*id, *axis_type)),
            _ => None,
        })
        .collect();
    let mut sorted = ranges.clone();
    sorted.sort();
    use crate::uop::AxisType::{Loop, Reduce};
    assert_eq!(sorted, vec![(0, Loop), (1, Loop), (2, Reduce)]);
}

#[test]
fn an_output_that_is_already_a_buffer_needs_no_kernel() {
    let (x, _) = iota(&[2, 3]);
    let schedule = create_schedule(std::slice::from_ref(&x));
    assert!(schedule.items.is_empty());
    assert_eq!(schedule.outputs[0], x);
}

#[test]
fn outputs_are_their_buffers_reshaped_to_the_output_shape() {
    let (x, _) = iota(&[2, 3]);
    let y = add(&x, &full(1.0, &[2, 3]));
    let schedule = create_schedule(&[y]);
    let out = &schedule.outputs[0];
    assert_eq!(out.op(), Op::Reshape);
    assert_eq!(out.s(0), &schedule.items[0].buffers[0]);
    assert_eq!(out.shape(), Some(&[2, 3][..]));
}

#[test]
fn a_function_call_is_scheduled_as_its_inlined_body() {
    let (x, data) = iota(&[6]);
    let p = UOp::param(0, &[6], DType::F32, None);
    let body = add(&p, &full(1.0, &[6]));
    let call = UOp::function(UOp::tuple(vec![body]), vec![x]);
    let out = mul(&call.get_tuple(0), &full(2.0, &[6]));
    let (schedule, values) = schedule_and_run(&[out]);
    assert_eq!(schedule.items.len(), 1);
    let want: Vec<f32> = data.iter().map(|v| (v + 1.0) * 2.0).collect();
    assert_close(&values[0], &want);
}

#[test]
fn two_outputs_sharing_a_contiguous_intermediate_read_one_buffer() {
    let (x, data) = iota(&[4]);
    let mid = exp(&x).unary_marker(Op::Contiguous);
    let a = add(&mid, &full(1.0, &[4]));
    let b = mul(&mid, &full(2.0, &[4]));
    let (schedule, values) = schedule_and_run(&[a, b]);
    assert_eq!(schedule.items.len(), 3);
    let want_a: Vec<f32> = data.iter().map(|v| v.exp() + 1.0).collect();
    let want_b: Vec<f32> = data.iter().map(|v| v.exp() * 2.0).collect();
    assert_close(&values[0], &want_a);
    assert_close(&values[1], &want_b);
}

// ---- values of every movement op ----

/// Row-major elements of a tensor of `shape` whose value at multi-index `i` is `f(i)`.
fn tabulate(shape: &[usize], f: impl Fn(&[usize]) -> f32) -> Vec<f32> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut flat| {
            let mut idx = vec![0; shape.len()];
            for k in (0..shape.len()).rev() {
                idx[k] = flat % shape[k];
                flat /= shape[k];
            }
            f(&idx)
        })
        .collect()
}

#[test]
fn movement_ops_index_the_right_elements() {
    let (x, d) = iota(&[2, 3, 4]);
    let at = |i: usize, j: usize, k: usize| d[i * 12 + j * 4 + k];
    let cases: Vec<(UOp, Vec<f32>)> = vec![
        (
            x.permute(&[2, 0, 1]),
            tabulate(&[4, 2, 3], |i| at(i[1], i[2], i[0])),
        ),
        (
            x.flip(&[true, false, true]),
            tabulate(&[2, 3, 4], |i| at(1 - i[0], i[1], 3 - i[2])),
        ),
        (
            x.shrink(&[1, 1, 0], &[2, 3, 3]),
            tabulate(&[1, 2, 3], |i| at(1, i[1] + 1, i[2])),
        ),
        (
            x.pad(&[0, 1, 2], &[1, 0, 1]),
            tabulate(&[3, 4, 7], |i| {
                let ok = i[0] < 2 && i[1] >= 1 && i[2] >= 2 && i[2] < 6;
                if ok {
                    at(i[0], i[1] - 1, i[2] - 2)
                } else {
                    0.0
                }
            }),
        ),
        (x.reshape(&[6, 4]), d.clone()),
        (
            x.reshape(&[4, 6]).permute(&[1, 0]).reshape(&[24]),
            tabulate(&[6, 4], |i| d[i[1] * 6 + i[0]]),
        ),
        (
            x.reshape(&[2, 1, 12]).expand(&[2, 5, 12]),
            tabulate(&[2, 5, 12], |i| d[i[0] * 12 + i[2]]),
        ),
        (
            UOp::stack(vec![x.clone(), x.flip(&[true, false, false])]),
            tabulate(&[2, 2, 3, 4], |i| {
                if i[0] == 0 {
                    at(i[1], i[2], i[3])
                } else {
                    at(1 - i[1], i[2], i[3])
                }
            }),
        ),
        (
            x.index_by(vec![UOp::index(1), UOp::index(2)]),
            tabulate(&[4], |i| at(1, 2, i[0])),
        ),
        (
            x.index_by(vec![UOp::index_vec(&[1, 0, 1])]),
            tabulate(&[3, 3, 4], |i| at([1, 0, 1][i[0]], i[1], i[2])),
        ),
    ];
    for (graph, want) in cases {
        let label = format!("{:?}", graph.op());
        let kernels = usize::from(as_contiguous_buffer(&graph).is_none());
        let (schedule, values) = schedule_and_run(&[graph]);
        assert_eq!(schedule.items.len(), kernels, "{label}");
        assert_close(&values[0], &want);
    }
}

#[test]
fn reduce_over_a_permuted_padded_view_matches_the_definition() {
    let (x, d) = iota(&[3, 4]);
    let view = x.pad(&[1, 0], &[0, 2]).permute(&[1, 0]);
    let out = view.reduce(ReduceOp::Max, &[1]).reshape(&[6]);
    let (_, values) = schedule_and_run(&[out]);
    let want: Vec<f32> = (0..6)
        .map(|j| {
            (0..4)
                .map(|i| {
                    if i >= 1 && j < 4 {
                        d[(i - 1) * 4 + j]
                    } else {
                        0.0
                    }
                })
                .fold(f32::NEG_INFINITY, f32::max)
        })
        .collect();
    assert_close(&values[0], &want);
}

#[test]
fn a_long_elementwise_chain_is_scheduled_without_overflowing_the_stack() {
    let (x, data) = iota(&[4]);
    let one = full(1.0, &[4]);
    let mut y = x;
    for _ in 0..5000 {
        y = add(&y, &one);
    }
    let (schedule, values) = schedule_and_run(&[y]);
    // Cut where a path reaches the budget: a load and 2047 adds per kernel.
    let per_kernel = super::kernel_size::CHAIN_BUDGET as usize - 1;
    assert_eq!(schedule.items.len(), 5000_usize.div_ceil(per_kernel));
    let want: Vec<f32> = data.iter().map(|v| v + 5000.0).collect();
    assert_close(&values[0], &want);
}

#[test]
fn a_copy_ends_a_kernel_like_contiguous() {
    let (x, data) = iota(&[6]);
    let moved = exp(&x).copy_to(crate::uop::Device::cpu());
    let (schedule, values) = schedule_and_run(&[add(&moved, &full(1.0, &[6]))]);
    assert_eq!(schedule.items.len(), 2);
    let want: Vec<f32> = data.iter().map(|v| v.exp() + 1.0).collect();
    assert_close(&values[0], &want);
}

#[test]
fn stacking_along_a_looped_axis_selects_the_part_with_a_where_chain() {
    let (a, da) = iota(&[3]);
    let b = mul(&a, &full(2.0, &[3]));
    let (schedule, values) = schedule_and_run(&[UOp::stack(vec![a, b])]);
    assert_eq!(schedule.items.len(), 1);
    assert_eq!(count_ops(&schedule.items[0].ast, Op::Where), 1);
    let want: Vec<f32> = da
        .iter()
        .cloned()
        .chain(da.iter().map(|v| v * 2.0))
        .collect();
    assert_close(&values[0], &want);
}

#[test]
fn the_executor_evaluates_a_shared_node_once_per_element() {
    // y_{k+1} = y_k + sin(y_k): as a tree the final expression has 2^40 leaves.
    let (x, data) = iota(&[3]);
    let mut y = x;
    let mut want: Vec<f32> = data;
    for _ in 0..40 {
        y = add(&y, &UOp::alu(Op::Sin, vec![y.clone()]));
        want = want.iter().map(|v| v + v.sin()).collect();
    }
    let schedule = create_schedule(&[y]);
    // A step's path: `sin` (140 ops), the add, and `y` beside it (8); after the first load,
    // 13 steps fit `kernel_size::CHAIN_BUDGET`, so the chain is cut at `y_13`, `y_26`, `y_39`.
    let step = super::kernel_size::code_cost(Op::Sin, DType::F32) + 1 + 8;
    let per_kernel = ((super::kernel_size::CHAIN_BUDGET - 1) / step) as usize;
    assert_eq!(schedule.items.len(), 40_usize.div_ceil(per_kernel));
    let (values, evaluations) = super::exec::run_counted(&schedule);
    assert!(
        evaluations < 3 * 200,
        "{evaluations} node evaluations for 3 elements of a 40-step chain"
    );
    for (got, want) in values[0].iter().zip(&want) {
        let got = got.as_f64() as f32;
        assert!(
            (got - want).abs() <= 1e-4 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }
}
