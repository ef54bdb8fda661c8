//! vmap by range (Vmapin/Vmapout through rangeify) and by pad+reduce (windows sliding with a
//! range, summed over it), compiled: every construct of the table in seeds/vmap-vmapin-vmapout.md
//! §6 against the rewrite method and against a loop over samples, the intermediate-realization
//! case of §5 (values, buffer size, generated C), kernel structure, and nesting to depth 5.

mod common;

use common::values;
use tensor::core::schedule::create_schedule;
use tensor::core::transform::{Func, InAxes, IntoFunc, VmapMethod, vmap_with};
use tensor::core::{Arg, Op, UOp};
use tensor::prelude::*;

const BATCH: usize = 3;

fn data(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n)
            .map(|i| (((i * 29 + seed * 13) % 17) as f32 - 8.0) / 4.0)
            .collect(),
        shape,
    )
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
}

/// Sample `i` of a batch stacked on axis 0.
fn sample(x: &Tensor, i: usize) -> Tensor {
    x.slice(0, i as isize, i as isize + 1).squeeze(0)
}

/// `f` vmapped over axis 0 of every argument by every method, and looped over the samples:
/// all agree.
fn assert_range_matches<M>(name: &str, f: impl IntoFunc<M>, shapes: &[&[usize]]) {
    let f: Func = f.into_func();
    let args: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| data(&[&[BATCH], *s].concat(), k))
        .collect();
    let looped: Vec<Tensor> = (0..BATCH)
        .map(|i| f.call1(&args.iter().map(|a| sample(a, i)).collect::<Vec<_>>()))
        .collect();
    let looped = Tensor::stack(&looped, 0);
    let expected = values(&looped);
    for method in METHODS {
        let batched = vmap_with(f.clone(), 0, 0, method).call1(&args);
        assert_eq!(
            batched.shape(),
            looped.shape(),
            "{name} by {method:?}: shape"
        );
        let got = values(&batched);
        assert!(
            close(&got, &expected),
            "{name}: by {method:?} {got:?} != loop {expected:?}"
        );
    }
}

/// Every vmap method.
const METHODS: [VmapMethod; 3] = [
    VmapMethod::Rewrite,
    VmapMethod::Range,
    VmapMethod::PadReduce,
];

#[test]
fn basic_operations_match() {
    assert_range_matches("x * w", |x: &Tensor, w: &Tensor| x * w, &[&[4], &[4]]);
    assert_range_matches("2 * x", |x: &Tensor| x * 2.0, &[&[4]]);
    assert_range_matches(
        "exp2 and sqrt",
        |x: &Tensor| x.exp2() + x.abs().sqrt(),
        &[&[5]],
    );
    assert_range_matches(
        "where",
        |x: &Tensor, y: &Tensor| x.gt(0.0).where_(x, y),
        &[&[4], &[4]],
    );
    assert_range_matches(
        "cast",
        |x: &Tensor| x.cast(DType::F16).cast(DType::F32),
        &[&[4]],
    );
}

#[test]
fn reductions_match() {
    assert_range_matches("sum", |x: &Tensor| x.sum_all(), &[&[2, 3]]);
    assert_range_matches("sum axis 0", |x: &Tensor| x.sum(0, false), &[&[2, 3]]);
    assert_range_matches("mean", |x: &Tensor| x.mean_all(), &[&[4]]);
    assert_range_matches("max", |x: &Tensor| x.max_all(), &[&[4]]);
    assert_range_matches(
        "x @ M",
        |x: &Tensor, m: &Tensor| x.matmul(m),
        &[&[3], &[3, 2]],
    );
    assert_range_matches(
        "row @ matrix",
        |x: &Tensor, m: &Tensor| x.matmul(m),
        &[&[1, 3], &[3, 4]],
    );
}

#[test]
fn movement_operations_match() {
    assert_range_matches("reshape", |x: &Tensor| x.reshape(&[2, 3]), &[&[6]]);
    assert_range_matches("flatten", |x: &Tensor| x.flatten(0, -1), &[&[2, 3]]);
    assert_range_matches("transpose", |x: &Tensor| x.transpose(0, 1), &[&[2, 3]]);
    assert_range_matches("permute", |x: &Tensor| x.permute(&[2, 0, 1]), &[&[2, 1, 3]]);
    assert_range_matches(
        "expand",
        |x: &Tensor| x.reshape(&[1, 3]).expand(&[2, 3]),
        &[&[3]],
    );
    assert_range_matches("shrink", |x: &Tensor| x.slice(0, 0, 2), &[&[4]]);
    assert_range_matches(
        "2-d slice",
        |x: &Tensor| x.slice(0, 1, 3).slice(1, 2, 4),
        &[&[4, 5]],
    );
    assert_range_matches("pad", |x: &Tensor| x.pad(&[(1, 0), (0, 1)]), &[&[2, 3]]);
    assert_range_matches("flip", |x: &Tensor| x.flip(0), &[&[4]]);
    assert_range_matches("unsqueeze", |x: &Tensor| x.unsqueeze(0), &[&[4]]);
}

#[test]
fn stacking_and_concatenation_match() {
    assert_range_matches(
        "stack",
        |a: &Tensor, b: &Tensor, c: &Tensor| Tensor::stack(&[a.clone(), b.clone(), c.clone()], 0),
        &[&[2], &[2], &[2]],
    );
    assert_range_matches(
        "stack of reduces",
        |x: &Tensor| Tensor::stack(&[x.slice(0, 0, 2).sum_all(), x.slice(0, 2, 4).sum_all()], 0),
        &[&[4]],
    );
    let other = data(&[2], 9);
    assert_range_matches(
        "cat with an unbatched tensor",
        move |x: &Tensor| Tensor::cat(&[x.clone(), other.clone()], 0),
        &[&[3]],
    );
}

#[test]
fn indexing_matches() {
    assert_range_matches(
        "scalar index",
        |x: &Tensor| x.flatten(0, -1).slice(0, 0, 1).squeeze(0),
        &[&[2, 2]],
    );
    assert_range_matches("slice", |x: &Tensor| x.slice(0, 0, 3), &[&[5]]);
    let idx = Tensor::from_vec(vec![0i32, 1], &[2]);
    let z = move |x: &Tensor| {
        let z = Tensor::stack(&[x.slice(0, 0, 2).sum_all(), x.slice(0, 2, 4).sum_all()], 0);
        z.take(&idx, 0)
    };
    assert_range_matches("index after reduce and stack", z, &[&[4]]);
    let idx = Tensor::from_vec(vec![1i32, 0], &[2]);
    assert_range_matches(
        "fancy index by tensor",
        move |x: &Tensor| x.take(&idx, 0),
        &[&[3]],
    );
    assert_range_matches(
        "multi-scalar stack",
        |x: &Tensor| {
            let flat = x.flatten(0, -1);
            let pick = |i: isize| flat.slice(0, i, i + 1).squeeze(0);
            Tensor::stack(&[pick(0), pick(4), pick(8)], 0)
        },
        &[&[3, 3]],
    );
}

#[test]
fn operations_after_the_vmap_match() {
    let x = data(&[BATCH, 3, 2], 1);
    let inner = |x: &Tensor| x * 2.0 + 1.0;
    let reference = &x * 2.0 + 1.0;
    let after = |t: &Tensor| {
        vec![
            t.reshape(&[BATCH * 3, 2]),
            t.transpose(0, 2),
            t.pad(&[(0, 1), (1, 0), (0, 0)]).flip(1),
            t.slice(0, 1, 3),
            t.sum_all(),
            t.sum(0, false),
            t.eq(1.0).cast(DType::F32),
            t.gt(1.0).cast(DType::F32),
            t.matmul(&data(&[2, 4], 5)),
            Tensor::cat(&[t.clone(), data(&[1, 3, 2], 6)], 0),
        ]
    };
    for method in METHODS {
        let batched = vmap_with(inner, 0, 0, method).call1(std::slice::from_ref(&x));
        for (k, (a, b)) in after(&batched).iter().zip(after(&reference)).enumerate() {
            assert!(
                close(&values(a), &values(&b)),
                "post-vmap operation {k} by {method:?}"
            );
        }
    }
}

#[test]
fn mixed_mapped_and_unmapped_inputs_match() {
    let (w, x) = (data(&[4, 3], 2), data(&[5, 3], 3));
    let f = |w: &Tensor, x: &Tensor| w.matmul(x).relu();
    let (a, b) = (data(&[3, 5], 4), data(&[5, 3], 5));
    let g = |a: &Tensor, b: &Tensor| a * b;
    let (c, d) = (data(&[5, 2], 6), data(&[5, 2], 7));
    let h = |c: &Tensor, d: &Tensor| (c - d).square().sum_all();
    let cases: [(&str, Func, InAxes, Vec<Tensor>); 3] = [
        (
            "broadcast weight",
            f.into_func(),
            [None, Some(0)].into(),
            vec![w, x],
        ),
        (
            "different axes per input",
            g.into_func(),
            [Some(1), Some(0)].into(),
            vec![a, b],
        ),
        (
            "same axis for all inputs",
            h.into_func(),
            0.into(),
            vec![c, d],
        ),
    ];
    for (name, f, in_axes, args) in cases {
        let by_rewrite =
            values(&vmap_with(f.clone(), in_axes.clone(), 0, VmapMethod::Rewrite).call1(&args));
        for method in [VmapMethod::Range, VmapMethod::PadReduce] {
            let got = values(&vmap_with(f.clone(), in_axes.clone(), 0, method).call1(&args));
            assert!(close(&got, &by_rewrite), "{name} by {method:?}");
        }
    }
}

#[test]
fn the_spjacobian_pattern_matches() {
    // Several jvps (each with a reduce) stacked, flattened and re-indexed.
    let f = |x: &Tensor| {
        let jvps: Vec<Tensor> = (0..3)
            .map(|k| (x * (k as f64 + 1.0)).sin().sum(0, false))
            .collect();
        let flat = Tensor::stack(&jvps, 0).flatten(0, -1);
        let pick = |i: isize| flat.slice(0, i, i + 1).squeeze(0);
        Tensor::stack(&[pick(0), pick(3), pick(5), pick(1)], 0)
    };
    assert_range_matches("spjacobian", f, &[&[2, 2]]);
}

/// The bound of a kernel range.
fn bound(range: &UOp) -> i64 {
    range.s(0).const_value().map(|v| v.as_i64()).unwrap_or(-1)
}

fn ranges(ast: &UOp) -> Vec<UOp> {
    let mut found: Vec<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Range)
        .collect();
    found.sort_by_key(|r| match r.arg() {
        Arg::Range { id, .. } => *id,
        _ => usize::MAX,
    });
    found
}

#[test]
fn a_vmapped_elementwise_and_reduce_function_is_one_kernel_with_the_batch_outermost() {
    let x = data(&[7, 4], 1);
    let f = |x: &Tensor| (x * 2.0).exp2().sum_all() + 1.0;
    let out = vmap_with(f, 0, 0, VmapMethod::Range).call1(&[x]);
    let schedule = create_schedule(&[out.uop()]);
    assert_eq!(schedule.items.len(), 1);
    let loops = ranges(&schedule.items[0].ast);
    assert_eq!(bound(&loops[0]), 7, "the batch is the outermost loop");
}

/// The kernel ASTs of the schedule of `out`.
fn kernel_asts(out: &Tensor) -> Vec<UOp> {
    create_schedule(&[out.uop()])
        .items
        .iter()
        .map(|item| item.ast.clone())
        .collect()
}

#[test]
fn pad_reduce_collapses_to_the_kernels_of_the_rewrite_method() {
    // Σ_r pad_at(f(x[r]), r) reads one sample per output position: the reduce collapse turns
    // the O(batch²) loop into the kernel the rewrite method builds.
    let x = data(&[7, 4], 3);
    let w = data(&[4], 4);
    let elementwise = |x: &Tensor| (x * 2.0).exp2() + 1.0;
    let reduce = |x: &Tensor| (x * 2.0).exp2().sum_all() + 1.0;
    let weighted = |x: &Tensor, w: &Tensor| (x * w).sum_all();
    let by = |f: Func, method, args: &[Tensor]| {
        let in_axes: Vec<Option<i32>> = (0..args.len()).map(|k| (k == 0).then_some(0)).collect();
        kernel_asts(&vmap_with(f, in_axes, 0, method).call1(args))
    };
    let cases: [(&str, Func, Vec<Tensor>); 3] = [
        ("elementwise", elementwise.into_func(), vec![x.clone()]),
        ("reduce", reduce.into_func(), vec![x.clone()]),
        ("unmapped weight", weighted.into_func(), vec![x.clone(), w]),
    ];
    for (name, f, args) in cases {
        let rewrite = by(f.clone(), VmapMethod::Rewrite, &args);
        let pad_reduce = by(f, VmapMethod::PadReduce, &args);
        assert_eq!(pad_reduce, rewrite, "{name}: the kernels differ");
    }
}

#[test]
fn an_intermediate_realized_inside_the_scope_is_batched() {
    let x = data(&[4, BATCH], 2);
    let idx = Tensor::from_vec(vec![0i32, 1], &[2]);
    let f = move |x: &Tensor| {
        let z = Tensor::stack(&[x.slice(0, 0, 2).sum_all(), x.slice(0, 2, 4).sum_all()], 0);
        z.take(&idx, 0)
    };
    let out = vmap_with(f, 1, 0, VmapMethod::Range).call1(std::slice::from_ref(&x));
    let got = values(&out);
    for b in 0..BATCH {
        let column = values(&x.slice(1, b as isize, b as isize + 1).squeeze(1));
        let expected = [column[0] + column[1], column[2] + column[3]];
        assert!(
            close(&got[b * 2..b * 2 + 2], &expected),
            "batch element {b}: {got:?}"
        );
    }
}

/// The element counts of the buffers the schedule of `out` writes before its last kernel.
fn intermediate_sizes(out: &Tensor) -> Vec<usize> {
    let schedule = create_schedule(&[out.uop()]);
    schedule.items[..schedule.items.len() - 1]
        .iter()
        .map(|item| match item.buffers[0].arg() {
            Arg::Buffer(b) => b.size,
            other => panic!("kernel output is not a buffer: {other:?}"),
        })
        .collect()
}

/// The seed's §5 example with the stacked sums forced into a buffer, re-indexed.
fn stacked_sums_in_a_buffer() -> Func {
    let idx = Tensor::from_vec(vec![1i32, 0], &[2]);
    (move |x: &Tensor| {
        let z = Tensor::stack(&[x.slice(0, 0, 2).sum_all(), x.slice(0, 2, 4).sum_all()], 0)
            .contiguous();
        z.take(&idx, 0)
    })
    .into_func()
}

#[test]
fn a_realized_intermediate_has_a_batch_times_two_buffer() {
    // The seed's example with the stacked sums forced into a buffer: without the vmap_map fix
    // the buffer would hold 2 values and only the last batch element would survive.
    let (x, f) = (data(&[4, BATCH], 4), stacked_sums_in_a_buffer());
    let out = vmap_with(f.clone(), 1, 0, VmapMethod::Range).call1(std::slice::from_ref(&x));
    assert_eq!(intermediate_sizes(&out), vec![BATCH * 2]);
    let reference = vmap_with(f, 1, 0, VmapMethod::Rewrite).call1(&[x]);
    assert!(close(&values(&out), &values(&reference)));
}

#[test]
fn a_reduce_read_by_every_element_is_realized_per_batch_element() {
    let x = data(&[BATCH, 64], 3);
    // The row sum is read through an expand by every element: the scheduler realizes it.
    let f = |x: &Tensor| x - x.sum_all().reshape(&[1]).expand(&[64]) / 64.0;
    let out = vmap_with(f, 0, 0, VmapMethod::Range).call1(std::slice::from_ref(&x));
    let sizes = intermediate_sizes(&out);
    assert!(
        !sizes.is_empty() && sizes.iter().all(|&s| s % BATCH == 0),
        "intermediate buffer sizes {sizes:?}"
    );
    let reference = vmap_with(f, 0, 0, VmapMethod::Rewrite).call1(&[x]);
    assert!(close(&values(&out), &values(&reference)));
}

fn nested(depth: usize, method: VmapMethod) -> Vec<f64> {
    let mut f: Func = (|x: &Tensor, y: &Tensor| (x * y).sum_all()).into_func();
    for level in 0..depth {
        let in_axes = if level % 2 == 0 {
            [Some(0), None]
        } else {
            [Some(0), Some(0)]
        };
        f = vmap_with(f, in_axes, 0, method);
    }
    let x_shape = [vec![2; depth], vec![4]].concat();
    values(&f.call1(&[data(&x_shape, 1), data(&y_shape_for(depth), 2)]))
}

/// The shape of `y` for `nested`: unmapped at even levels (counted from the innermost),
/// mapped at odd ones.
fn y_shape_for(depth: usize) -> Vec<usize> {
    let mapped = (0..depth).filter(|level| level % 2 == 1).count();
    [vec![2; mapped], vec![4]].concat()
}

#[test]
fn nesting_to_depth_five_works_with_every_method() {
    for depth in 1..=5 {
        let rewrite = nested(depth, VmapMethod::Rewrite);
        assert_eq!(rewrite.len(), 1 << depth);
        for method in [VmapMethod::Range, VmapMethod::PadReduce] {
            let got = nested(depth, method);
            assert!(
                close(&got, &rewrite),
                "depth {depth} by {method:?}: {got:?} != {rewrite:?}"
            );
        }
    }
}

#[test]
fn jvp_sees_through_the_vmap_scope_and_the_sliding_windows() {
    let x = data(&[BATCH, 4], 6);
    let t = data(&[BATCH, 4], 7);
    let per_sample = |x: &Tensor| (x.sin() * x.flip(0)).sum_all();
    let tangent = |method| {
        let f = vmap_with(per_sample, 0, 0, method);
        values(&jvp(f, std::slice::from_ref(&x), std::slice::from_ref(&t)).1[0])
    };
    let by_rewrite = tangent(VmapMethod::Rewrite);
    for method in [VmapMethod::Range, VmapMethod::PadReduce] {
        let got = tangent(method);
        assert!(
            close(&got, &by_rewrite),
            "by {method:?}: {got:?} != {by_rewrite:?}"
        );
    }
}

#[test]
fn an_unmapped_result_with_out_axes_none_stays_unbatched_with_every_method() {
    let (x, w) = (data(&[BATCH, 4], 8), data(&[4], 9));
    let f = |x: &Tensor, w: &Tensor| (x * w, w.sum_all());
    for method in METHODS {
        let out =
            vmap_with(f, [Some(0), None], [Some(0), None], method).call(&[x.clone(), w.clone()]);
        assert_eq!(out[0].shape(), vec![BATCH, 4], "by {method:?}");
        assert_eq!(out[1].shape(), Vec::<usize>::new(), "by {method:?}");
        assert!(
            close(&values(&out[1]), &values(&w.sum_all())),
            "by {method:?}"
        );
    }
}

#[test]
fn a_mapped_result_with_out_axes_none_is_an_error_with_every_method() {
    for method in METHODS {
        let outcome = std::panic::catch_unwind(|| {
            vmap_with(|x: &Tensor| x * 2.0, 0, None::<i32>, method).call1(&[data(&[BATCH, 2], 1)])
        });
        let message = outcome
            .err()
            .and_then(|e| e.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        assert!(
            message.contains(
                "out_axes is None for result 0, but that result depends on the mapped arguments"
            ),
            "by {method:?}: {message:?}"
        );
    }
}

#[function(precompile)]
fn precompiled_softplus(x: &Tensor) -> Tensor {
    (x.exp() + 1.0).log()
}

#[function]
fn traced_body(x: &Tensor, w: &Tensor) -> Tensor {
    (precompiled_softplus(x) * w).sum_all()
}

#[test]
fn functions_and_precompiled_bodies_inside_every_vmap_method_match_a_loop() {
    let w = data(&[4], 5);
    assert_range_matches(
        "#[function] with a precompiled call",
        move |x: &Tensor| traced_body(x, &w),
        &[&[4]],
    );
    assert_range_matches(
        "precompiled call alone",
        |x: &Tensor| precompiled_softplus(x),
        &[&[2, 3]],
    );
}

/// The loads of buffer `slot` in C `source`: the index expression inside each `data{slot}[..]`.
fn load_indices(source: &str, slot: usize) -> Vec<String> {
    let needle = format!("data{slot}[");
    source
        .match_indices(&needle)
        .map(|(at, _)| {
            let rest = &source[at + needle.len()..];
            let mut depth = 1;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '[' => 1,
                        ']' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(rest.len(), |(i, _)| i);
            rest[..end].to_string()
        })
        .collect()
}

/// `expr` with every integer local of `source` it mentions replaced by its definition, until
/// only loop variables and constants are left.
fn expand_locals(source: &str, expr: &str) -> String {
    let locals: Vec<(String, String)> = source
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let declaration = line
                .strip_prefix("int ")
                .or_else(|| line.strip_prefix("long long "))?;
            let (name, value) = declaration.split_once(" = ")?;
            Some((
                name.to_string(),
                format!("({})", value.trim_end_matches(';')),
            ))
        })
        .collect();
    let mut expanded = expr.to_string();
    for _ in 0..locals.len() {
        for (name, value) in &locals {
            expanded = replace_word(&expanded, name, value);
        }
    }
    expanded
}

/// `text` with the identifier `word` (not part of a longer identifier) replaced by `by`.
fn replace_word(text: &str, word: &str, by: &str) -> String {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().last();
        let after = rest[at + word.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            out.push_str(word);
        } else {
            out.push_str(by);
        }
        rest = &rest[at + word.len()..];
    }
    out + rest
}

#[test]
fn the_generated_c_indexes_the_intermediate_buffer_by_the_batch_loop() {
    // seeds/vmap-vmapin-vmapout.md §5.3: the kernel filling the intermediate stores at
    // `batch * 2 + k`, and the kernel reading it loads at its own batch loop.
    use tensor::core::codegen::{CodegenOptions, lower_kernel};
    use tensor::core::render::c::range_name;
    use tensor::core::render::c::render_kernel;
    let (x, f) = (data(&[4, BATCH], 4), stacked_sums_in_a_buffer());
    let out = vmap_with(f, 1, 0, VmapMethod::Range).call1(std::slice::from_ref(&x));
    let schedule = create_schedule(&[out.uop()]);
    let (producer, consumer) = (&schedule.items[0], &schedule.items[1]);
    let intermediate = &producer.buffers[0];
    let options = CodegenOptions {
        optimize: false,
        threads: 1,
        ..CodegenOptions::default()
    };
    let sizes = |item: &tensor::core::schedule::ScheduleItem| -> Vec<usize> {
        item.buffers.iter().map(|b| b.shape_vec()[0]).collect()
    };
    for (item, slot) in [
        (producer, 0),
        (
            consumer,
            consumer
                .buffers
                .iter()
                .position(|b| b == intermediate)
                .unwrap(),
        ),
    ] {
        let batch_loop = range_name(&ranges(&item.ast)[0]);
        let source = render_kernel(&lower_kernel(&item.ast, &sizes(item), &options)).source;
        let indices: Vec<String> = load_indices(&source, slot)
            .iter()
            .map(|i| expand_locals(&source, i))
            .collect();
        assert!(!indices.is_empty(), "no access to data{slot} in\n{source}");
        assert!(
            indices.iter().all(|i| i.contains(&batch_loop)),
            "data{slot} is not indexed by the batch loop {batch_loop}: {indices:?}\n{source}"
        );
    }
}

#[function(precompile)]
fn batched_by_range(xs: &Tensor) -> Tensor {
    vmap_with(|x: &Tensor| x.softmax(0), 0, 0, VmapMethod::Range).call1(std::slice::from_ref(xs))
}

#[function(precompile)]
fn batched_by_pad_reduce(xs: &Tensor) -> Tensor {
    vmap_with(|x: &Tensor| x.softmax(0), 0, 0, VmapMethod::PadReduce)
        .call1(std::slice::from_ref(xs))
}

#[test]
fn a_loop_vmap_inside_a_precompiled_function_matches_the_rewrite_method() {
    let xs = data(&[BATCH, 5], 6);
    let expected = values(
        &vmap_with(|x: &Tensor| x.softmax(0), 0, 0, VmapMethod::Rewrite)
            .call1(std::slice::from_ref(&xs)),
    );
    for (name, got) in [
        ("range", batched_by_range(&xs)),
        ("pad+reduce", batched_by_pad_reduce(&xs)),
    ] {
        assert!(close(&values(&got), &expected), "{name}");
        assert!(
            close(
                &values(&(got * 2.0)),
                &expected.iter().map(|v| v * 2.0).collect::<Vec<_>>()
            ),
            "{name}, used after the call"
        );
    }
}
