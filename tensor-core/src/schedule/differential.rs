//! Differential tests: the values a schedule computes (kernel ASTs run by the test executor)
//! equal the reference interpreter's values of the same tensor graph.

use super::create_schedule;
use super::exec::run;
use crate::interp::{HostArray, evaluate};
use crate::tensor::Tensor;
use crate::uop::{AxisType, DType, UOp};

pub(super) fn data(shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|i| ((i as f32 + 1.0) * (0.61 + seed as f32 * 0.13)).sin() * 2.0)
        .collect();
    Tensor::from_vec(values, shape)
}

/// Schedules `outputs`, runs the kernels, and compares every output with the interpreter.
#[track_caller]
pub(super) fn check(name: &str, outputs: &[Tensor]) -> usize {
    let uops: Vec<_> = outputs.iter().map(|t| t.uop()).collect();
    let schedule = create_schedule(&uops);
    let values = run(&schedule);
    for (k, (u, got)) in uops.iter().zip(values).enumerate() {
        let got = HostArray::new(u.dtype(), &u.shape_vec(), got);
        let want = evaluate(u);
        if !got.allclose(&want, 1e-5, 1e-5) {
            panic!(
                "{name} (output {k}): scheduled values differ from the interpreter\n got {got:?}\nwant {want:?}"
            );
        }
    }
    schedule.items.len()
}

#[test]
fn elementwise_graphs_match_the_interpreter() {
    let (a, b) = (data(&[3, 4], 1), data(&[3, 4], 2));
    check("add consts", &[a.add(4.0).add(3.0)]);
    check("mul sub", &[a.mul(&b).sub(&a)]);
    check("div", &[a.div(b.abs().add(1.0))]);
    check("relu", &[a.relu()]);
    check("sigmoid tanh", &[a.sigmoid().add(b.tanh())]);
    check(
        "exp log sqrt",
        &[a.exp().add(b.abs().add(0.5).log()).add(b.abs().sqrt())],
    );
    check("where", &[a.lt(&b).where_(&a, &b)]);
    check(
        "max min clamp",
        &[a.maximum(&b).add(a.minimum(0.0)).clamp(-1.0, 1.0)],
    );
    check(
        "cast round trip",
        &[a.mul(10.0).cast(DType::I32).cast(DType::F32)],
    );
    check("pow", &[a.abs().add(0.1).pow(1.5)]);
    check("sin cos", &[a.sin().mul(b.cos())]);
}

#[test]
fn movement_graphs_match_the_interpreter() {
    let x = data(&[2, 3, 4], 3);
    check("permute", &[x.permute(&[2, 0, 1]).add(1.0)]);
    check("transpose", &[x.transpose(0, 2).mul(2.0)]);
    check("flip", &[x.flip([0, 2]).add(0.0)]);
    check("pad", &[x.pad(&[(1, 0), (0, 2), (1, 1)]).add(1.0)]);
    check("pad value", &[x.pad_value(&[(1, 1), (0, 0), (2, 0)], -3.0)]);
    check("shrink", &[x.shrink(&[(1, 2), (0, 2), (1, 4)]).mul(3.0)]);
    check("slice", &[x.slice(2, 1, 3).exp()]);
    check(
        "reshape",
        &[x.reshape(&[4, 6])
            .permute(&[1, 0])
            .reshape(&[3, 8])
            .add(1.0)],
    );
    check(
        "expand",
        &[x.reshape(&[2, 1, 12]).expand(&[2, 5, 12]).add(1.0)],
    );
    check(
        "squeeze unsqueeze",
        &[x.unsqueeze(1).squeeze(1).flatten(0, 1).neg()],
    );
    check("cat", &[Tensor::cat(&[x.clone(), x.flip(1)], 1).add(1.0)]);
    check(
        "stack",
        &[Tensor::stack(&[x.clone(), x.mul(2.0)], 1).add(1.0)],
    );
    check(
        "pad then shrink back",
        &[x.pad(&[(2, 2), (2, 2), (2, 2)])
            .shrink(&[(2, 4), (2, 5), (2, 6)])
            .add(0.5)],
    );
}

#[test]
fn reduce_graphs_match_the_interpreter() {
    let x = data(&[4, 5], 4);
    let w = data(&[5, 3], 5);
    let b = data(&[3], 6);
    check("sum axis", &[x.sum(1, false)]);
    check("sum keepdim", &[x.sum(0, true).add(1.0)]);
    check("sum all", &[x.sum_all()]);
    check("mean", &[x.mean(1, false)]);
    check("max min", &[x.max(0, false).add(x.min(0, false))]);
    check("prod", &[x.prod(1, false)]);
    check("matmul relu", &[x.matmul(&w).add(&b).relu()]);
    check("matmul chain", &[x.matmul(&w).matmul(&w.transpose(0, 1))]);
    check("softmax", &[x.softmax(-1)]);
    check("log softmax", &[x.log_softmax(0)]);
    check("logsumexp", &[x.logsumexp(1, false)]);
    check("pad reduce", &[x.pad(&[(1, 2), (0, 3)]).sum(0, false)]);
    check("reduce of reduce", &[x.sum(1, true).max(0, false)]);
    check("centered", &[x.sub(x.mean(1, true))]);
    check(
        "variance",
        &[x.sub(x.mean(1, true)).square().mean(1, false)],
    );
    check("cumsum", &[x.cumsum(1)]);
}

#[test]
fn composite_graphs_match_the_interpreter() {
    let x = data(&[4, 5], 7);
    let idx = Tensor::from_vec(vec![3i32, 0, 2], &[3]);
    check("arange", &[Tensor::arange(6).cast(DType::F32).mul(0.5)]);
    check("eye", &[Tensor::eye(4, DType::F32)]);
    check("argmax", &[x.argmax(1, false)]);
    check("take", &[x.take(&idx, 0)]);
    check("one hot", &[idx.one_hot(4)]);
    check(
        "contiguous twice",
        &[x.add(1.0).contiguous().mul(2.0).contiguous().add(3.0)],
    );
    check("detach", &[x.detach().exp()]);
    let y = x.exp();
    check("two outputs", &[y.sum(1, false), y.max(0, false)]);
}

#[test]
fn fused_kernel_counts_follow_the_fusion_contract() {
    let a = data(&[4, 4], 8);
    assert_eq!(check("a+4+3", &[a.add(4.0).add(3.0)]), 1);
    assert_eq!(check("contiguous", &[a.add(4.0).contiguous().add(3.0)]), 2);
    let (x, w, b) = (data(&[3, 5], 9), data(&[5, 2], 10), data(&[2], 11));
    assert_eq!(check("relu(x@w+b)", &[x.matmul(&w).add(&b).relu()]), 1);
    assert_eq!(check("sum / n", &[x.sum_all().div(15.0)]), 1);
    assert!(check("softmax", &[x.softmax(-1)]) <= 3);
}

// ---- vmap scopes (Vmapin / Vmapout) ----

fn batch_range(size: usize, id: usize) -> UOp {
    UOp::range(size, id, AxisType::Loop)
}

#[test]
fn a_vmapped_elementwise_body_is_one_kernel() {
    let x = data(&[3, 4], 12);
    let r = batch_range(3, 0);
    let inner = x.uop().vmapin(&[r.clone(), UOp::index(0)]);
    let body = Tensor::from_uop(inner).mul(2.0).add(1.0).exp();
    let out = body.uop().vmapout(&[r, UOp::index(0)]);
    assert_eq!(check("vmap elementwise", &[Tensor::from_uop(out)]), 1);
}

#[test]
fn a_vmapped_reduce_over_the_second_axis_matches_the_interpreter() {
    let x = data(&[4, 3], 13);
    let w = data(&[4], 14);
    let r = batch_range(3, 0);
    let column = Tensor::from_uop(x.uop().vmapin(&[UOp::index(0), r.clone()]));
    let body = column.mul(&w).sum_all().reshape(&[1]);
    let out = body.uop().vmapout(&[r, UOp::index(0)]);
    assert_eq!(check("vmap reduce", &[Tensor::from_uop(out)]), 1);
}

#[test]
fn an_intermediate_realized_inside_a_vmap_scope_gets_a_batched_buffer() {
    let x = data(&[3, 4], 15);
    let r = batch_range(3, 0);
    let inner = Tensor::from_uop(x.uop().vmapin(&[r.clone(), UOp::index(0)]));
    let mid = inner.add(1.0).contiguous();
    let body = mid.mul(mid.flip(0));
    let out = Tensor::from_uop(body.uop().vmapout(&[r, UOp::index(0)]));
    let schedule = create_schedule(&[out.uop()]);
    assert_eq!(schedule.items.len(), 2);
    let intermediate = &schedule.items[0].buffers[0];
    assert_eq!(intermediate.shape(), Some(&[12][..]), "3 batches of 4");
    check("vmap intermediate", &[out]);
}

#[test]
fn a_nested_vmap_matches_the_interpreter() {
    let x = data(&[2, 3, 4], 16);
    let (outer, inner) = (batch_range(2, 0), batch_range(3, 1));
    let zero = UOp::index(0);
    let plane = x.uop().vmapin(&[outer.clone(), zero.clone(), zero.clone()]);
    let row = plane.vmapin(&[inner.clone(), zero.clone()]);
    let row_body = Tensor::from_uop(row).softmax(0);
    let rows = row_body.uop().vmapout(&[inner, zero.clone()]);
    let plane_body = Tensor::from_uop(rows).sum(0, false);
    let out = plane_body.uop().vmapout(&[outer, zero]);
    check("nested vmap", &[Tensor::from_uop(out)]);
}

#[test]
fn the_reindexed_stack_of_sums_inside_vmap_keeps_every_batch() {
    // seeds/vmap-vmapin-vmapout.md §5: a multi-consumer node realized inside the scope.
    let x = data(&[4, 3], 17);
    let r = batch_range(3, 0);
    let column = Tensor::from_uop(x.uop().vmapin(&[UOp::index(0), r.clone()]));
    let z = Tensor::stack(
        &[
            column.slice(0, 0, 2).sum_all(),
            column.slice(0, 2, 4).sum_all(),
        ],
        0,
    )
    .contiguous();
    let picked = z
        .take(&Tensor::from_vec(vec![1i32, 0, 1], &[3]), 0)
        .add(z.flip(0).sum_all());
    let out = Tensor::from_uop(picked.uop().vmapout(&[r, UOp::index(0)]));
    check("reindexed stack of sums", &[out]);
}

// ---- generated graphs ----

/// A small deterministic generator (64-bit LCG) so failures reproduce from the seed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// One random step applied to `t`: an elementwise op, a movement op, a reduce (expanded
/// back or not), or a realization boundary.
fn random_step(t: &Tensor, rng: &mut Lcg, seed: u32) -> Tensor {
    let shape = t.shape();
    let ndim = shape.len();
    let axis = rng.below(ndim);
    match rng.below(12) {
        0 => t.exp().mul(0.5),
        1 => t.relu().sub(t.sin()),
        2 => t.mul(data(&shape, seed)),
        3 => {
            let mut perm: Vec<usize> = (0..ndim).collect();
            perm.rotate_left(1 + rng.below(ndim.max(2) - 1));
            t.permute(&perm)
        }
        4 => t.flip(axis as isize),
        5 => {
            let mut pads = vec![(0, 0); ndim];
            pads[axis] = (rng.below(3), rng.below(3));
            t.pad(&pads)
        }
        6 if shape[axis] > 1 => {
            let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
            let begin = rng.below(shape[axis] - 1);
            bounds[axis] = (begin, begin + 1 + rng.below(shape[axis] - begin));
            t.shrink(&bounds)
        }
        7 => t.sum(axis as isize, true).expand(&shape),
        8 => t.max(axis as isize, true).sub(t.clone()),
        9 if ndim > 1 => t.flatten(0, 1),
        10 => t.add(1.0).contiguous(),
        11 if ndim < 4 => t.unsqueeze(0).expand(&[[2].as_slice(), &shape].concat()),
        _ => t.neg(),
    }
}

#[test]
fn generated_graphs_match_the_interpreter() {
    let mut rng = Lcg(0x5eed);
    for case in 0..60u32 {
        let mut t = data(&[2, 3, 4], case);
        let steps = 2 + rng.below(6);
        for step in 0..steps {
            t = random_step(&t, &mut rng, case * 10 + step as u32);
        }
        if rng.below(2) == 0 {
            t = t.sum(0, false);
        }
        check(&format!("generated case {case}"), &[t]);
    }
}

#[test]
fn empty_axes_schedule_to_empty_loops() {
    let x = Tensor::from_vec(Vec::<f32>::new(), &[0, 3]);
    check("sum over an empty axis", &[x.sum(0, false).add(1.0)]);
    check("empty elementwise", &[x.exp()]);
    let y = data(&[2, 3], 18);
    check(
        "softmax next to an empty reduce",
        &[y.softmax(-1).add(x.sum(0, true).expand(&[2, 3]))],
    );
}

#[test]
fn a_reduce_over_an_empty_axis_is_its_identity_and_reads_nothing() {
    // The empty buffer must not be read: the executor panics on any out-of-bounds load
    // (a tiled empty tensor once summed to `x[0] * 0`, a read of a 0-element buffer).
    let empty = Tensor::from_vec(Vec::<f32>::new(), &[1, 0, 1]);
    let inf = Tensor::full(&[0, 3], f32::INFINITY, crate::uop::DType::F32);
    let outputs = [
        empty.tile(&[2]).mean(1, false),
        empty.expand(&[1, 0, 3]).prod(1, false),
        inf.sum(0, false),
        inf.prod(0, false),
    ];
    let uops: Vec<_> = outputs.iter().map(|t| t.uop()).collect();
    let got: Vec<Vec<f64>> = run(&create_schedule(&uops))
        .into_iter()
        .map(|v| v.into_iter().map(|s| s.as_f64()).collect())
        .collect();
    assert!(
        got[0].len() == 2 && got[0].iter().all(|v| v.is_nan()),
        "{:?}",
        got[0]
    );
    assert_eq!(got[1], [1.0; 3]);
    assert_eq!(got[2], [0.0; 3], "sum of no infinities");
    assert_eq!(got[3], [1.0; 3], "product of no infinities");
    for (t, want) in outputs.iter().zip(&got) {
        let interpreted = evaluate(&t.uop()).to_f64_vec();
        assert_eq!(format!("{interpreted:?}"), format!("{want:?}"));
    }
}

#[test]
fn a_max_over_an_empty_range_is_minus_infinity_and_reads_nothing() {
    let x = Tensor::from_vec(Vec::<f32>::new(), &[0, 3]);
    let r = batch_range(0, 0);
    let row = x.shrink_at(0, &r, 1);
    let out = row.reduce_over_ranges(crate::uop::ReduceOp::Max, std::slice::from_ref(&r));
    let got = run(&create_schedule(&[out.uop()]));
    assert_eq!(got, [vec![crate::uop::Scalar::Float(f64::NEG_INFINITY); 3]]);
}

// ---- windows sliding with a range, reductions over ranges (vmap by pad+reduce) ----

#[test]
fn a_reduce_over_a_range_of_a_sliding_window_is_one_kernel() {
    let x = data(&[5, 4], 18);
    let r = batch_range(3, 0);
    // Σ_r x[r : r + 2] * (r + 1): a window that slides down the rows, weighted by the range.
    let window = x.shrink_at(0, &r, 2);
    let weight = Tensor::from_uop(UOp::alu(
        crate::uop::Op::Add,
        vec![r.clone(), UOp::index(1)],
    ))
    .cast(DType::F32);
    let out = window
        .mul(&weight)
        .sum_over_ranges(std::slice::from_ref(&r));
    assert_eq!(check("sliding window sum", &[out]), 1);
}

#[test]
fn pad_at_a_sliding_offset_stacks_the_samples() {
    let x = data(&[3, 4], 19);
    let r = batch_range(3, 0);
    let sample = x.shrink_at(0, &r, 1).mul(2.0).exp();
    let stacked = sample
        .pad_at(0, &r, 3)
        .sum_over_ranges(std::slice::from_ref(&r));
    assert_eq!(check("pad+reduce stack", std::slice::from_ref(&stacked)), 1);
    assert!(crate::interp::evaluate(&stacked.uop()).allclose(
        &evaluate(&x.mul(2.0).exp().uop()),
        1e-6,
        1e-6
    ));
}

#[test]
fn an_intermediate_realized_under_a_sliding_range_gets_a_batched_buffer() {
    let x = data(&[3, 4], 20);
    let r = batch_range(3, 0);
    let mid = x.shrink_at(0, &r, 1).reshape(&[4]).add(1.0).contiguous();
    let body = mid.mul(mid.flip(0)).reshape(&[1, 4]);
    let out = body
        .pad_at(0, &r, 3)
        .sum_over_ranges(std::slice::from_ref(&r));
    let schedule = create_schedule(&[out.uop()]);
    assert_eq!(schedule.items.len(), 2);
    let intermediate = &schedule.items[0].buffers[0];
    assert_eq!(intermediate.shape(), Some(&[12][..]), "3 samples of 4");
    check("pad+reduce intermediate", &[out]);
}

#[test]
fn a_max_over_a_range_matches_the_interpreter() {
    let x = data(&[4, 3], 21);
    let r = batch_range(4, 0);
    let row = x.shrink_at(0, &r, 1);
    let out = row.reduce_over_ranges(crate::uop::ReduceOp::Max, std::slice::from_ref(&r));
    check("max over range", &[out]);
}

// ---- closed forms of reduces of pure index arithmetic ----

#[test]
fn an_arange_is_one_kernel_of_index_arithmetic() {
    for n in [3, 10, 16, 100] {
        let t = Tensor::arange(n);
        assert_eq!(check(&format!("arange({n})"), std::slice::from_ref(&t)), 1);
        let schedule = create_schedule(&[t.uop()]);
        let ast = &schedule.items[0].ast;
        assert!(
            ast.toposort()
                .iter()
                .all(|u| u.op() != crate::uop::Op::Reduce),
            "arange({n}) still reduces: {ast:?}"
        );
    }
    check("eye", &[Tensor::eye(5, DType::F32)]);
    check("arange_steps", &[Tensor::arange((1.0f32, 4.0, 0.5))]);
}

#[test]
fn a_gather_is_one_guarded_load_per_element() {
    let x = data(&[1000], 22);
    let idx = Tensor::from_vec(vec![3i32, 999, 0, -1, 1500, -2000, 500], &[7]);
    let picked = x.take(&idx, 0);
    assert_eq!(check("take", std::slice::from_ref(&picked)), 1);
    let schedule = create_schedule(&[picked.uop()]);
    let ast = &schedule.items[0].ast;
    assert!(
        ast.toposort()
            .iter()
            .all(|u| u.op() != crate::uop::Op::Reduce),
        "the one-hot sum is still a loop: {ast:?}"
    );
    let rows = data(&[50, 3], 23);
    let labels = Tensor::from_vec(vec![4i32, 0, 49, 7], &[4]);
    check("take rows", &[rows.take(&labels, 0)]);
    check("one_hot", &[labels.one_hot(50)]);
}

#[test]
fn a_gather_of_a_gather_gates_the_inner_index_loads() {
    // Found by the property test (proptests::graphs): the outer index 2 is outside the inner
    // gather's 2 elements, and the collapsed kernel read the inner index buffer at position 2
    // (out of bounds) in the outer load's gate and address.
    let x = Tensor::from_vec(vec![1.0f32, -2.0], &[2]);
    let inner = Tensor::from_vec(vec![3i32, -1], &[2]);
    for outer in [2i32, -3, 5, -1, 0] {
        let y = x
            .gather(0, &inner)
            .gather(0, &Tensor::from_vec(vec![outer], &[1]));
        check(&format!("gather of gather at {outer}"), &[y]);
    }
}
