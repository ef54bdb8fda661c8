//! Kernel ASTs built by hand (in the form of `schedule::ScheduleItem::ast`), compiled to C and
//! built by the runtime's CPU device,
//! run, and compared with `uop::alu` or values worked out by hand (float sums of products
//! within the shared tolerance of `tests/common/tolerance.rs`, since kernels may use FMA).

mod common;

use common::{render_c, render_c_with_opts, run, tolerance};
use tensor_core::codegen::{CodegenOptions, Opt};
use tensor_core::render::Launch;
use tensor_core::uop::alu;
use tensor_core::{Arg, AxisType, DType, Op, ReduceOp, Scalar, UOp};

// ---- building kernel ASTs ----

fn global(slot: usize, dtype: DType) -> UOp {
    UOp::new(Op::DefineGlobal, dtype, vec![], Arg::Int(slot as i64))
}

fn address(buf: &UOp, idx: UOp) -> UOp {
    UOp::new(Op::Address, buf.dtype(), vec![buf.clone(), idx], Arg::None)
}

fn gated_address(buf: &UOp, idx: UOp, gate: UOp) -> UOp {
    UOp::new(
        Op::Address,
        buf.dtype(),
        vec![buf.clone(), idx, gate],
        Arg::None,
    )
}

fn load(idx: UOp) -> UOp {
    UOp::new(Op::Load, idx.dtype(), vec![idx], Arg::None)
}

fn loop_range(size: usize, id: usize) -> UOp {
    UOp::range(size, id, AxisType::Loop)
}

fn reduce_range(size: usize, id: usize) -> UOp {
    UOp::range(size, id, AxisType::Reduce)
}

fn reduce(op: ReduceOp, value: UOp, ranges: &[UOp]) -> UOp {
    let mut src = vec![value.clone()];
    src.extend(ranges.iter().cloned());
    UOp::new(Op::Reduce, value.dtype(), src, Arg::Reduce(op, vec![]))
}

fn add(a: UOp, b: UOp) -> UOp {
    UOp::alu(Op::Add, vec![a, b])
}

fn mul(a: UOp, b: UOp) -> UOp {
    UOp::alu(Op::Mul, vec![a, b])
}

fn idx(v: i64) -> UOp {
    UOp::index(v)
}

fn kernel(stores: Vec<(UOp, UOp)>) -> UOp {
    UOp::sink(stores.iter().map(|(i, v)| UOp::store(i, v)).collect())
}

// ---- compiling and running C ----

fn noopt() -> CodegenOptions {
    CodegenOptions {
        optimize: false,
        threads: 1,
        ..CodegenOptions::default()
    }
}

fn opt(threads: usize) -> CodegenOptions {
    CodegenOptions {
        optimize: true,
        threads,
        ..CodegenOptions::default()
    }
}

fn floats(values: &[f64]) -> Vec<Scalar> {
    values.iter().map(|&v| Scalar::Float(v)).collect()
}

fn zeros(n: usize) -> Vec<Scalar> {
    vec![Scalar::Int(0); n]
}

fn as_f64(values: &[Scalar]) -> Vec<f64> {
    values.iter().map(|v| v.as_f64()).collect()
}

// ---- kernels ----

/// `out[i, j] = a[i, j] + b[i, j]` over a `rows x cols` grid.
fn elementwise_add(rows: usize, cols: usize) -> UOp {
    let (i, j) = (loop_range(rows, 0), loop_range(cols, 1));
    let flat = add(mul(i, idx(cols as i64)), j);
    let a = load(address(&global(1, DType::F32), flat.clone()));
    let b = load(address(&global(2, DType::F32), flat.clone()));
    kernel(vec![(address(&global(0, DType::F32), flat), add(a, b))])
}

#[test]
fn elementwise_add_computes_the_sum_of_every_element() {
    for options in [noopt(), opt(1)] {
        let k = render_c(&elementwise_add(3, 8), &[24, 24, 24], &options);
        let a: Vec<f64> = (0..24).map(|v| v as f64 * 0.5).collect();
        let b: Vec<f64> = (0..24).map(|v| 100.0 - v as f64).collect();
        let mut bufs = vec![zeros(24), floats(&a), floats(&b)];
        run(&k, &mut bufs);
        let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(as_f64(&bufs[0]), want, "{}", k.source);
    }
}

#[test]
fn the_arms_of_a_select_are_computed_before_it_so_the_select_is_a_blend() {
    // `a < 0.5 ? a * a : a + 2`: arms written inline would be evaluated only when chosen,
    // and the C compiler would branch on data.
    let i = loop_range(8, 0);
    let a = load(address(&global(1, DType::F32), i.clone()));
    let half = UOp::constant(0.5, DType::F32);
    let two = UOp::constant(2.0, DType::F32);
    let cond = UOp::alu(Op::CmpLt, vec![a.clone(), half]);
    let select = UOp::alu(
        Op::Where,
        vec![cond, mul(a.clone(), a.clone()), add(a, two)],
    );
    let k = render_c(
        &kernel(vec![(address(&global(0, DType::F32), i), select)]),
        &[8, 8],
        &noopt(),
    );
    let store = k.source.lines().find(|l| l.contains("data0[")).unwrap();
    assert!(
        store.contains("? alu") && !store.contains('*') && !store.contains('+'),
        "{}",
        k.source
    );
    let x = [0.0, 0.25, 0.5, 1.0, -3.0, 0.375, 0.625, 7.0];
    let mut bufs = vec![zeros(8), floats(&x)];
    run(&k, &mut bufs);
    let want: Vec<f64> = x
        .iter()
        .map(|&v| if v < 0.5 { v * v } else { v + 2.0 })
        .collect();
    assert_eq!(as_f64(&bufs[0]), want, "{}", k.source);
}

#[test]
fn sum_of_rows_accumulates_over_the_reduce_range() {
    let (i, j) = (loop_range(3, 0), reduce_range(5, 1));
    let x = load(address(
        &global(1, DType::F32),
        add(mul(i.clone(), idx(5)), j.clone()),
    ));
    let ast = kernel(vec![(
        address(&global(0, DType::F32), i),
        reduce(ReduceOp::Add, x, &[j]),
    )]);
    let k = render_c(&ast, &[3, 15], &opt(1));
    assert_eq!(k.name, "r_3_5");
    let x: Vec<f64> = (0..15).map(|v| v as f64).collect();
    let mut bufs = vec![zeros(3), floats(&x)];
    run(&k, &mut bufs);
    assert_eq!(as_f64(&bufs[0]), vec![10.0, 35.0, 60.0]);
}

#[test]
fn gated_load_reads_zero_outside_the_gate_and_never_touches_memory_there() {
    // out[i] = pad(a, 2 before, 1 after)[i] for a of 4 elements.
    let i = loop_range(7, 0);
    let inside = UOp::alu(
        Op::And,
        vec![
            UOp::alu(Op::CmpLt, vec![idx(1), i.clone()]),
            UOp::alu(Op::CmpLt, vec![i.clone(), idx(6)]),
        ],
    );
    let a = load(gated_address(
        &global(1, DType::F32),
        add(i.clone(), idx(-2)),
        inside,
    ));
    let ast = kernel(vec![(address(&global(0, DType::F32), i), a)]);
    let k = render_c(&ast, &[7, 4], &opt(1));
    assert!(k.source.contains(" ? data1["), "{}", k.source);
    let mut bufs = vec![zeros(7), floats(&[1.0, 2.0, 3.0, 4.0])];
    run(&k, &mut bufs);
    assert_eq!(as_f64(&bufs[0]), vec![0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 0.0]);
}

/// `c[m, n] = sum_k a[m, k] * b[k, n]`.
fn matmul(m: usize, k: usize, n: usize) -> UOp {
    let (rm, rn, rk) = (loop_range(m, 0), loop_range(n, 1), reduce_range(k, 2));
    let a = load(address(
        &global(1, DType::F32),
        add(mul(rm.clone(), idx(k as i64)), rk.clone()),
    ));
    let b = load(address(
        &global(2, DType::F32),
        add(mul(rk.clone(), idx(n as i64)), rn.clone()),
    ));
    let out = address(&global(0, DType::F32), add(mul(rm, idx(n as i64)), rn));
    kernel(vec![(out, reduce(ReduceOp::Add, mul(a, b), &[rk]))])
}

/// Float results of a kernel against a reference loop, under the shared tolerance policy
/// (`tests/common/tolerance.rs`: the kernel may fuse `a*b+c` into one FMA).
fn assert_close(got: &[f64], want: &[f64], source: &str) {
    assert!(
        tolerance::agree(got, want, true, 1.0),
        "got {got:?}\nwant {want:?}\n{source}"
    );
}

fn matmul_reference(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            for l in 0..k {
                c[i * n + j] += a[i * k + l] as f32 * b[l * n + j] as f32;
            }
        }
    }
    c.iter().map(|&v| v as f64).collect()
}

#[test]
fn matmul_shaped_reduce_matches_the_triple_loop_with_and_without_opts() {
    let (m, k, n) = (3, 5, 8);
    let a: Vec<f64> = (0..m * k).map(|v| (v as f64 * 0.37).sin()).collect();
    let b: Vec<f64> = (0..k * n).map(|v| (v as f64 * 0.11).cos()).collect();
    let want = matmul_reference(&a, &b, m, k, n);
    for options in [noopt(), opt(1)] {
        let kern = render_c(&matmul(m, k, n), &[m * n, m * k, k * n], &options);
        let mut bufs = vec![zeros(m * n), floats(&a), floats(&b)];
        run(&kern, &mut bufs);
        assert_close(&as_f64(&bufs[0]), &want, &kern.source);
    }
}

#[test]
fn matmul_gets_a_four_by_four_register_tile_with_the_same_result() {
    // Large enough for the tile: at least 4096 iterations and a reduce of 16 steps
    // (`codegen::heuristic` item 8).
    let (m, k, n) = (32, 16, 12);
    let a: Vec<f64> = (0..m * k).map(|v| (v as f64 * 0.37).sin()).collect();
    let b: Vec<f64> = (0..k * n).map(|v| (v as f64 * 0.11).cos()).collect();
    let kern = render_c(&matmul(m, k, n), &[m * n, m * k, k * n], &opt(1));
    assert_eq!(
        kern.source.matches("float acc").count(),
        16,
        "{}",
        kern.source
    );
    assert_eq!(kern.source.matches("data1[").count(), 4, "{}", kern.source);
    assert_eq!(kern.source.matches("data2[").count(), 4, "{}", kern.source);
    let mut bufs = vec![zeros(m * n), floats(&a), floats(&b)];
    run(&kern, &mut bufs);
    let want = matmul_reference(&a, &b, m, k, n);
    assert_close(&as_f64(&bufs[0]), &want, &kern.source);
}

#[test]
fn a_wide_matmul_gets_a_four_by_sixteen_register_tile_with_the_same_result() {
    // At least 2^17 iterations, so that two threads are used, and a 16-step reduce.
    let (m, k, n) = (64, 16, 256);
    let a: Vec<f64> = (0..m * k).map(|v| (v as f64 * 0.29).sin()).collect();
    let b: Vec<f64> = (0..k * n).map(|v| (v as f64 * 0.13).cos()).collect();
    for threads in [1, 2] {
        let kern = render_c(&matmul(m, k, n), &[m * n, m * k, k * n], &opt(threads));
        assert_eq!(
            kern.source.matches("float acc").count(),
            64,
            "{}",
            kern.source
        );
        assert_eq!(kern.source.matches("data1[").count(), 4, "{}", kern.source);
        assert_eq!(kern.source.matches("data2[").count(), 16, "{}", kern.source);
        let mut bufs = vec![zeros(m * n), floats(&a), floats(&b)];
        run(&kern, &mut bufs);
        let want = matmul_reference(&a, &b, m, k, n);
        assert_close(&as_f64(&bufs[0]), &want, &kern.source);
    }
}

#[test]
fn upcast_matmul_shares_one_reduce_loop_between_the_lanes() {
    let kern = render_c(&matmul(3, 5, 8), &[24, 15, 40], &opt(1));
    assert_eq!(
        kern.source.matches("for (int ridx2").count(),
        1,
        "{}",
        kern.source
    );
    assert_eq!(
        kern.source.matches("float acc").count(),
        4,
        "{}",
        kern.source
    );
}

#[test]
fn max_reduce_starts_at_minus_infinity_and_propagates_nan() {
    let (i, j) = (loop_range(3, 0), reduce_range(4, 1));
    let x = load(address(
        &global(1, DType::F32),
        add(mul(i.clone(), idx(4)), j.clone()),
    ));
    let ast = kernel(vec![(
        address(&global(0, DType::F32), i),
        reduce(ReduceOp::Max, x, &[j]),
    )]);
    let k = render_c(&ast, &[3, 12], &opt(1));
    assert!(k.source.contains("= -INFINITY;"), "{}", k.source);
    let x = [
        -5.0,
        -7.0,
        -6.0,
        -9.0,
        1.0,
        f64::NAN,
        3.0,
        2.0,
        -1.0,
        8.0,
        8.5,
        0.0,
    ];
    let mut bufs = vec![zeros(3), floats(&x)];
    run(&k, &mut bufs);
    let got = as_f64(&bufs[0]);
    assert_eq!(got[0], -5.0);
    assert!(got[1].is_nan());
    assert_eq!(got[2], 8.5);
}

#[test]
fn integer_max_reduce_starts_at_the_dtype_minimum() {
    let j = reduce_range(3, 0);
    let x = load(address(&global(1, DType::I32), j.clone()));
    let ast = kernel(vec![(
        address(&global(0, DType::I32), idx(0)),
        reduce(ReduceOp::Max, x, &[j]),
    )]);
    let k = render_c(&ast, &[1, 3], &opt(1));
    let mut bufs = vec![
        zeros(1),
        vec![Scalar::Int(-9), Scalar::Int(-4), Scalar::Int(-7)],
    ];
    run(&k, &mut bufs);
    assert_eq!(bufs[0], vec![Scalar::Int(-4)]);
}

#[test]
fn softmax_style_kernel_runs_a_dependent_reduce_in_its_own_loop() {
    // out[i] = sum_j exp2(x[i, j] - max_k x[i, k]) over the same row.
    let (i, j, kk) = (loop_range(2, 0), reduce_range(3, 1), reduce_range(3, 2));
    let row = |r: &UOp| {
        load(address(
            &global(1, DType::F32),
            add(mul(i.clone(), idx(3)), r.clone()),
        ))
    };
    let m = reduce(ReduceOp::Max, row(&kk), &[kk]);
    let shifted = add(row(&j), mul(m, UOp::constant(-1.0, DType::F32)));
    let s = reduce(ReduceOp::Add, UOp::alu(Op::Exp2, vec![shifted]), &[j]);
    let ast = kernel(vec![(address(&global(0, DType::F32), i), s)]);
    let k = render_c(&ast, &[2, 6], &opt(1));
    let x = [0.0, 1.0, 2.0, -1.0, 5.0, 4.0];
    let mut bufs = vec![zeros(2), floats(&x)];
    run(&k, &mut bufs);
    let want = |r: &[f64]| {
        let m = r.iter().cloned().fold(f64::MIN, f64::max) as f32;
        r.iter()
            .map(|&v| ((v as f32 - m) as f64).exp2() as f32)
            .fold(0.0f32, |a, b| a + b) as f64
    };
    assert_eq!(
        as_f64(&bufs[0]),
        vec![want(&x[..3]), want(&x[3..])],
        "{}",
        k.source
    );
}

/// Equal values, bit for bit for floats except that any NaN equals any NaN.
fn same_value(want: Scalar, got: Scalar) -> bool {
    match (want, got) {
        (Scalar::Float(w), Scalar::Float(g)) => {
            w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan())
        }
        _ => want == got || want.as_f64() == got.as_f64(),
    }
}

/// `got` within 2 ulp (of `f32`) of `want`, both finite.
fn within_ulps(want: Scalar, got: Scalar, ulps: f32) -> bool {
    let (w, g) = (want.as_f64() as f32, got.as_f64() as f32);
    w.is_finite() && g.is_finite() && (w - g).abs() <= ulps * (w.abs().next_up() - w.abs())
}

// ---- every ALU op against alu::exec ----

const N: usize = 12;

fn sample_inputs(dtype: DType) -> [Vec<Scalar>; 3] {
    let ints_a: [i64; N] = [0, 1, -1, 7, -7, 100, -128, 127, 33, 5, -2, 64];
    let ints_b: [i64; N] = [3, 0, 2, -2, 5, 7, -1, 1, 31, 40, -3, 1];
    let floats_a = [
        0.0,
        1.5,
        -2.25,
        3.0,
        -0.5,
        100.0,
        1e-3,
        f64::NAN,
        f64::INFINITY,
        -7.75,
        0.3,
        65000.0,
    ];
    let floats_b = [
        2.0,
        -0.0,
        0.5,
        -3.0,
        4.0,
        0.1,
        2.0,
        1.0,
        1.0,
        f64::NAN,
        0.7,
        2.0,
    ];
    let conds = (0..N).map(|i| Scalar::Bool(i % 3 == 0)).collect();
    if dtype.is_float() {
        let a = floats(&floats_a).iter().map(|v| v.cast(dtype)).collect();
        let b = floats(&floats_b).iter().map(|v| v.cast(dtype)).collect();
        [a, b, conds]
    } else {
        let wrap = |v: &[i64; N]| v.iter().map(|&x| Scalar::Int(x).cast(dtype)).collect();
        [wrap(&ints_a), wrap(&ints_b), conds]
    }
}

fn unary_ops(dtype: DType) -> Vec<Op> {
    if dtype == DType::Bool {
        vec![] // `Not` is checked on the condition input of every dtype
    } else if dtype.is_float() {
        vec![
            Op::Recip,
            Op::Trunc,
            Op::Neg,
            Op::Exp2,
            Op::Log2,
            Op::Sin,
            Op::Cos,
            Op::Erf,
            Op::Erfc,
            Op::Sqrt,
        ]
    } else {
        vec![Op::Neg, Op::Recip, Op::Trunc, Op::Sqrt]
    }
}

fn binary_ops(dtype: DType) -> Vec<Op> {
    if dtype == DType::Bool {
        return vec![Op::Add, Op::Mul, Op::Max, Op::Xor, Op::Or, Op::And];
    }
    let mut ops = vec![
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Max,
        Op::Div,
        Op::Idiv,
        Op::Mod,
    ];
    if dtype.is_float() {
        ops.push(Op::Pow);
    } else {
        ops.extend([Op::Xor, Op::Or, Op::And, Op::Shl, Op::Shr, Op::Pow]);
    }
    ops
}

const COMPARISONS: [Op; 6] = [
    Op::CmpLt,
    Op::CmpNe,
    Op::CmpGt,
    Op::CmpGe,
    Op::CmpLe,
    Op::CmpEq,
];

/// One kernel per dtype with one output per op, all reading the same inputs.
fn check_every_op(dtype: DType) {
    /// One output of the kernel: the op, its expression, result dtype, operand dtype and which
    /// inputs (0 = a, 1 = b, 2 = the bool condition) it reads.
    struct Case {
        op: Op,
        expr: UOp,
        out: DType,
        operand: DType,
        reads: Vec<usize>,
    }
    let i = loop_range(N, 0);
    let inputs = sample_inputs(dtype);
    let first_input = unary_ops(dtype).len() + binary_ops(dtype).len() + COMPARISONS.len() + 2;
    let input = |k: usize, dt: DType| load(address(&global(first_input + k, dt), i.clone()));
    let operands = [input(0, dtype), input(1, dtype), input(2, DType::Bool)];
    let case = |op: Op, out: DType, operand: DType, reads: Vec<usize>| Case {
        op,
        expr: UOp::new(
            op,
            out,
            reads.iter().map(|&r| operands[r].clone()).collect(),
            Arg::None,
        ),
        out,
        operand,
        reads,
    };
    let mut cases: Vec<Case> = Vec::new();
    for op in unary_ops(dtype) {
        cases.push(case(op, dtype, dtype, vec![0]));
    }
    for op in binary_ops(dtype) {
        cases.push(case(op, dtype, dtype, vec![0, 1]));
    }
    for op in COMPARISONS {
        cases.push(case(op, DType::Bool, dtype, vec![0, 1]));
    }
    cases.push(case(Op::Where, dtype, dtype, vec![2, 0, 1]));
    cases.push(case(Op::Mulacc, dtype, dtype, vec![0, 1, 0]));
    assert_eq!(cases.len(), first_input);
    let stores = cases
        .iter()
        .enumerate()
        .map(|(slot, c)| (address(&global(slot, c.out), i.clone()), c.expr.clone()))
        .collect();
    let k = render_c(&kernel(stores), &vec![N; first_input + 3], &opt(1));
    let mut bufs: Vec<Vec<Scalar>> = cases.iter().map(|_| zeros(N)).collect();
    bufs.extend(inputs.iter().cloned());
    run(&k, &mut bufs);
    for (slot, c) in cases.iter().enumerate() {
        for lane in 0..N {
            let args: Vec<Scalar> = c.reads.iter().map(|&r| inputs[r][lane]).collect();
            let want = alu::exec_typed(c.op, c.out, c.operand, &args).cast(c.out);
            let got = bufs[slot][lane];
            // f32 transcendentals are decomposed (codegen::transcendental): within 2 ulp of the
            // interpreter's f64 function rounded (`erf` 3), not bit for bit; `pow` is
            // `exp2(b log2|a|)`, whose rounded exponent costs up to `|b log2|a||` ulp more.
            let ulps = match c.op {
                Op::Exp2 | Op::Log2 | Op::Sin | Op::Cos => 2.0,
                Op::Erf => 3.0,
                Op::Erfc => 8.0,
                Op::Pow => {
                    let exponent = args[1].as_f64() * args[0].as_f64().abs().log2();
                    4.0 + if exponent.is_finite() {
                        exponent.abs() as f32
                    } else {
                        0.0
                    }
                }
                _ => 0.0,
            };
            let decomposed = dtype == DType::F32 && ulps > 0.0;
            // libm's f64 `erf`/`erfc` and the interpreter's series differ in the last bits.
            let f64_erf = dtype == DType::F64 && matches!(c.op, Op::Erf | Op::Erfc);
            let close =
                (want.as_f64() - got.as_f64()).abs() <= 1e-15 * want.as_f64().abs().max(1.0);
            assert!(
                same_value(want, got)
                    || decomposed && within_ulps(want, got, ulps)
                    || f64_erf && close,
                "{} on {dtype} lane {lane} args {args:?}: C gives {got:?}, alu gives {want:?}\n{}",
                c.op,
                k.source
            );
        }
    }
}

#[test]
fn every_alu_op_on_f32_matches_alu_exec() {
    check_every_op(DType::F32);
}

#[test]
fn every_alu_op_on_f64_matches_alu_exec() {
    check_every_op(DType::F64);
}

#[test]
fn every_alu_op_on_f16_and_bf16_matches_alu_exec() {
    check_every_op(DType::F16);
    check_every_op(DType::BF16);
}

#[test]
fn every_alu_op_on_signed_ints_matches_alu_exec() {
    for dt in [DType::I8, DType::I16, DType::I32, DType::I64] {
        check_every_op(dt);
    }
}

#[test]
fn every_alu_op_on_bools_matches_alu_exec() {
    check_every_op(DType::Bool);
}

#[test]
fn every_alu_op_on_unsigned_ints_matches_alu_exec() {
    for dt in [DType::U8, DType::U16, DType::U32, DType::U64] {
        check_every_op(dt);
    }
}

#[test]
fn casts_and_bitcasts_between_dtypes_match_alu_exec() {
    let pairs = [
        (DType::F32, DType::I32),
        (DType::F32, DType::U8),
        (DType::F32, DType::F16),
        (DType::F32, DType::BF16),
        (DType::F64, DType::F32),
        (DType::I32, DType::F32),
        (DType::I64, DType::F32),
        (DType::U64, DType::F64),
        (DType::I32, DType::I8),
        (DType::F16, DType::F32),
        (DType::BF16, DType::F32),
        (DType::F32, DType::Bool),
        (DType::Bool, DType::F32),
    ];
    let bitcasts = [
        (DType::F32, DType::I32),
        (DType::I32, DType::F32),
        (DType::F16, DType::U16),
        (DType::BF16, DType::I16),
        (DType::U16, DType::BF16),
        (DType::F64, DType::U64),
    ];
    let i = loop_range(N, 0);
    let mut cases: Vec<(Op, DType, DType)> = pairs.iter().map(|&(f, t)| (Op::Cast, f, t)).collect();
    cases.extend(bitcasts.iter().map(|&(f, t)| (Op::Bitcast, f, t)));
    let first_input = cases.len();
    let stores = cases
        .iter()
        .enumerate()
        .map(|(slot, &(op, from, to))| {
            let x = load(address(&global(first_input + slot, from), i.clone()));
            let y = UOp::new(op, to, vec![x], Arg::None);
            (address(&global(slot, to), i.clone()), y)
        })
        .collect();
    let ast = kernel(stores);
    let k = render_c(&ast, &vec![N; 2 * cases.len()], &opt(1));
    let mut bufs: Vec<Vec<Scalar>> = cases.iter().map(|_| zeros(N)).collect();
    let raw = [
        0.0,
        1.5,
        -2.7,
        3e9,
        -1.0,
        255.9,
        1e-3,
        f64::NAN,
        70000.0,
        -7.75,
        0.3,
        1.0 + 1.0 / 4096.0,
    ];
    for &(_, from, _) in &cases {
        let values = if from.is_float() {
            floats(&raw).iter().map(|v| v.cast(from)).collect()
        } else {
            raw.iter()
                .map(|&v| Scalar::Float(v).cast(DType::I64).cast(from))
                .collect()
        };
        bufs.push(values);
    }
    run(&k, &mut bufs);
    for (slot, &(op, from, to)) in cases.iter().enumerate() {
        for (&x, &got) in bufs[first_input + slot].iter().zip(&bufs[slot]) {
            let want = alu::exec_typed(op, to, from, &[x]);
            assert!(
                same_value(want, got),
                "{op} {from} -> {to} of {x:?}: C gives {got:?}, alu gives {want:?}\n{}",
                k.source
            );
        }
    }
}

#[test]
fn threefry_matches_alu_exec() {
    let i = loop_range(4, 0);
    let x = load(address(&global(1, DType::U64), i.clone()));
    let key = load(address(&global(2, DType::U64), i.clone()));
    let ast = kernel(vec![(
        address(&global(0, DType::U64), i),
        UOp::alu(Op::Threefry, vec![x, key]),
    )]);
    let k = render_c(&ast, &[4, 4, 4], &opt(1));
    let xs: Vec<Scalar> = [0u64, 1, u64::MAX, 0x85a3_08d3_243f_6a88]
        .iter()
        .map(|&v| Scalar::Int(v as i64))
        .collect();
    let keys: Vec<Scalar> = [0u64, 7, u64::MAX, 0x0370_7344_1319_8a2e]
        .iter()
        .map(|&v| Scalar::Int(v as i64))
        .collect();
    let mut bufs = vec![zeros(4), xs.clone(), keys.clone()];
    run(&k, &mut bufs);
    for lane in 0..4 {
        let want = alu::exec(Op::Threefry, DType::U64, &[xs[lane], keys[lane]]);
        assert_eq!(bufs[0][lane], want, "lane {lane}");
    }
}

// ---- optimizations ----

#[test]
fn thread_split_gives_identical_results_for_any_core_count() {
    let (rows, cols) = (10, 7);
    let a: Vec<f64> = (0..rows * cols).map(|v| v as f64).collect();
    let b: Vec<f64> = (0..rows * cols).map(|v| (v * v) as f64).collect();
    let mut results = Vec::new();
    for threads in [1, 2, 3, 4] {
        let opts = if threads == 1 {
            vec![]
        } else {
            vec![Opt::Split {
                axis: 0,
                factor: threads,
                target: AxisType::Thread,
                top: true,
            }]
        };
        let k = render_c_with_opts(&elementwise_add(rows, cols), &[70, 70, 70], &opts);
        assert_eq!(k.launch, Launch::Cores(threads));
        let mut bufs = vec![zeros(70), floats(&a), floats(&b)];
        run(&k, &mut bufs);
        results.push(as_f64(&bufs[0]));
    }
    let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    for r in results {
        assert_eq!(r, want);
    }
}

#[test]
fn heuristic_threads_and_upcasts_a_big_kernel_with_the_same_results() {
    // At least `MIN_WORK_PER_THREADED_KERNEL` (2^17) elements.
    let (rows, cols) = (4001, 68);
    let n = rows * cols;
    let a: Vec<f64> = (0..n).map(|v| (v % 97) as f64).collect();
    let b: Vec<f64> = (0..n).map(|v| (v % 13) as f64 * 0.25).collect();
    let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    for threads in [1, 2, 3] {
        let k = render_c(&elementwise_add(rows, cols), &[n, n, n], &opt(threads));
        assert_eq!(k.launch, Launch::Cores(threads), "{}", k.source);
        let mut bufs = vec![zeros(n), floats(&a), floats(&b)];
        run(&k, &mut bufs);
        assert_eq!(as_f64(&bufs[0]), want);
    }
}

#[test]
fn unrolled_reduce_gives_the_same_sum() {
    let (i, j) = (loop_range(3, 0), reduce_range(8, 1));
    let x = load(address(
        &global(1, DType::F32),
        add(mul(i.clone(), idx(8)), j.clone()),
    ));
    let ast = kernel(vec![(
        address(&global(0, DType::F32), i),
        reduce(ReduceOp::Add, x, &[j]),
    )]);
    let opts = [Opt::Split {
        axis: 1,
        factor: 4,
        target: AxisType::Unroll,
        top: false,
    }];
    let k = render_c_with_opts(&ast, &[3, 24], &opts);
    assert!(k.source.contains("ridx1 < 2"), "{}", k.source);
    let x: Vec<f64> = (0..24).map(|v| v as f64).collect();
    let mut bufs = vec![zeros(3), floats(&x)];
    run(&k, &mut bufs);
    assert_eq!(as_f64(&bufs[0]), vec![28.0, 92.0, 156.0]);
}

// ---- the shape of the generated code ----

/// `out[i, j] = a[i, j] + 7` over a 4x4 grid (the fused `(a + 4) + 3` of the fusion note,
/// its constants already folded by the scheduler).
fn add_seven() -> UOp {
    let (i, j) = (loop_range(4, 0), loop_range(4, 1));
    let flat = add(mul(i, idx(4)), j);
    let a = load(address(&global(1, DType::F32), flat.clone()));
    kernel(vec![(
        address(&global(0, DType::F32), flat),
        add(a, UOp::constant(7.0, DType::F32)),
    )])
}

#[test]
fn folded_constant_renders_as_one_literal_add() {
    let k = render_c(&add_seven(), &[16, 16], &noopt());
    assert_eq!(k.source.matches(" + 7.0f").count(), 1, "{}", k.source);
    let mut bufs = vec![zeros(16), floats(&[1.0; 16])];
    run(&k, &mut bufs);
    assert_eq!(as_f64(&bufs[0]), vec![8.0; 16]);
}

#[test]
fn noopt_renders_no_thread_split_and_no_upcast() {
    let n = 4001 * 68;
    let k = render_c(
        &elementwise_add(4001, 68),
        &[n, n, n],
        &CodegenOptions {
            optimize: false,
            threads: 4,
            ..CodegenOptions::default()
        },
    );
    assert_eq!(k.launch, Launch::Cores(1));
    assert!(!k.source.contains("core_id *"), "{}", k.source);
    assert_eq!(k.source.matches("data0[").count(), 1, "{}", k.source);
    let optimized = render_c(&elementwise_add(4001, 68), &[n, n, n], &opt(4));
    assert_eq!(optimized.launch, Launch::Cores(4));
    assert_eq!(optimized.source.matches("data0[").count(), 4);
}

#[test]
fn small_elementwise_kernel_reads_like_hand_written_c() {
    let k = render_c(&add_seven(), &[16, 16], &noopt());
    println!("{}", k.source);
    assert_eq!(k.name, "E_4_4");
    assert_eq!(k.entry, "E_4_4_entry");
    for expected in [
        "#include <math.h>",
        "void E_4_4(float* restrict data0, const float* restrict data1) {",
        "  for (int gidx0 = 0; gidx0 < 4; gidx0++) {",
        "    int alu0 = gidx0 * 4;",
        "    for (int gidx1 = 0; gidx1 < 4; gidx1++) {",
        "      float val0 = data1[alu1];",
        "      data0[alu1] = val0 + 7.0f;",
        "void E_4_4_entry(void** bufs, int core_id) {",
        "  E_4_4((float*)bufs[0], (const float*)bufs[1]);",
    ] {
        assert!(
            k.source.contains(expected),
            "missing {expected:?} in\n{}",
            k.source
        );
    }
}

#[test]
fn upcast_kernel_writes_four_neighbouring_elements_per_statement_group() {
    let k = render_c(&add_seven(), &[16, 16], &opt(1));
    println!("{}", k.source);
    assert_eq!(k.source.matches(" + 7.0f;").count(), 4, "{}", k.source);
    assert!(
        !k.source.contains("gidx1"),
        "the 4-wide axis is fully upcast:\n{}",
        k.source
    );
    let mut bufs = vec![
        zeros(16),
        floats(&(0..16).map(f64::from).collect::<Vec<_>>()),
    ];
    run(&k, &mut bufs);
    assert_eq!(as_f64(&bufs[0]), (7..23).map(f64::from).collect::<Vec<_>>());
}

#[test]
fn gated_store_writes_only_where_the_gate_holds() {
    let i = loop_range(6, 0);
    let gate = UOp::alu(Op::CmpLt, vec![i.clone(), idx(4)]);
    let ast = kernel(vec![(
        gated_address(&global(0, DType::I32), i.clone(), gate),
        i.cast(DType::I32),
    )]);
    let k = render_c(&ast, &[6], &opt(1));
    let mut bufs = vec![vec![Scalar::Int(-1); 6]];
    run(&k, &mut bufs);
    let got: Vec<i64> = bufs[0].iter().map(|v| v.as_i64()).collect();
    assert_eq!(got, vec![0, 1, 2, 3, -1, -1]);
}

#[test]
fn loop_invariant_loads_are_hoisted_out_of_the_inner_loop() {
    // out[i, j] = a[i, j] * s[i]: the load of s[i] belongs to the outer loop.
    let (i, j) = (loop_range(3, 0), loop_range(5, 1));
    let flat = add(mul(i.clone(), idx(5)), j);
    let a = load(address(&global(1, DType::F32), flat.clone()));
    let s = load(address(&global(2, DType::F32), i));
    let ast = kernel(vec![(address(&global(0, DType::F32), flat), mul(a, s))]);
    let k = render_c(&ast, &[15, 15, 3], &noopt());
    let outer_load = k.source.find("data2[gidx0]").expect("load of s");
    let inner_loop = k.source.find("for (int gidx1").expect("inner loop");
    assert!(outer_load < inner_loop, "{}", k.source);
}

#[test]
fn reduce_nested_in_a_reduce_runs_inside_the_outer_reduce_loop() {
    // out[i] = sum_j a[i, j] * (sum_k b[j, k])
    let (i, j, kk) = (loop_range(2, 0), reduce_range(3, 1), reduce_range(2, 2));
    let a = load(address(
        &global(1, DType::F32),
        add(mul(i.clone(), idx(3)), j.clone()),
    ));
    let b = load(address(
        &global(2, DType::F32),
        add(mul(j.clone(), idx(2)), kk.clone()),
    ));
    let inner = reduce(ReduceOp::Add, b, &[kk]);
    let ast = kernel(vec![(
        address(&global(0, DType::F32), i),
        reduce(ReduceOp::Add, mul(a, inner), &[j]),
    )]);
    let k = render_c(&ast, &[2, 6, 6], &opt(1));
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let b = [1.0, 1.0, 2.0, 3.0, 10.0, 20.0];
    let mut bufs = vec![zeros(2), floats(&a), floats(&b)];
    run(&k, &mut bufs);
    // row sums of b: 2, 5, 30
    assert_eq!(
        as_f64(&bufs[0]),
        vec![2.0 + 10.0 + 90.0, 8.0 + 25.0 + 180.0],
        "{}",
        k.source
    );
}

#[test]
fn reduces_round_and_wrap_like_a_sequential_alu_fold_in_every_dtype() {
    let (rows, cols) = (2, 6);
    let raw = [
        1.5, -2.25, 100.0, 0.3, 7.0, -0.125, 60000.0, 9000.0, -3.0, 2.5, 1e-3, 99.0,
    ];
    let ops = [ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul];
    for dtype in [
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::U8,
        DType::I32,
        DType::U64,
    ] {
        let (i, j) = (loop_range(rows, 0), reduce_range(cols, 1));
        let flat = add(mul(i.clone(), idx(cols as i64)), j.clone());
        let x = load(address(&global(ops.len(), dtype), flat));
        let stores = ops
            .iter()
            .enumerate()
            .map(|(slot, &op)| {
                let out = address(&global(slot, dtype), i.clone());
                (out, reduce(op, x.clone(), std::slice::from_ref(&j)))
            })
            .collect();
        let k = render_c(&kernel(stores), &[rows, rows, rows, rows * cols], &opt(1));
        let input: Vec<Scalar> = raw
            .iter()
            .map(|&v| match dtype.is_float() {
                true => Scalar::Float(v).cast(dtype),
                false => Scalar::Float(v).cast(DType::I64).cast(dtype),
            })
            .collect();
        let mut bufs = vec![zeros(rows), zeros(rows), zeros(rows), input.clone()];
        run(&k, &mut bufs);
        for (slot, op) in ops.iter().enumerate() {
            for r in 0..rows {
                let identity = match op {
                    ReduceOp::Add => Scalar::Int(0).cast(dtype),
                    ReduceOp::Mul => Scalar::Int(1).cast(dtype),
                    ReduceOp::Max => dtype.min_value().cast(dtype),
                };
                let want = input[r * cols..(r + 1) * cols]
                    .iter()
                    .fold(identity, |acc, &v| {
                        alu::exec_typed(op.binary(), dtype, dtype, &[acc, v])
                    });
                let got = bufs[slot][r];
                assert!(
                    same_value(want, got),
                    "{op:?} over {dtype} row {r}: C gives {got:?}, alu gives {want:?}\n{}",
                    k.source
                );
            }
        }
    }
}

#[test]
fn compiling_the_same_kernel_twice_gives_the_same_source() {
    let build = || {
        let (i, j, kk) = (loop_range(4, 0), reduce_range(8, 1), reduce_range(8, 2));
        let row = |r: &UOp| {
            load(address(
                &global(1, DType::F32),
                add(mul(i.clone(), idx(8)), r.clone()),
            ))
        };
        let m = reduce(ReduceOp::Max, row(&kk), &[kk]);
        let s = reduce(ReduceOp::Add, add(row(&j), m), &[j]);
        kernel(vec![(address(&global(0, DType::F32), i), s)])
    };
    let first = render_c(&build(), &[4, 32], &opt(2));
    for _ in 0..5 {
        assert_eq!(render_c(&build(), &[4, 32], &opt(2)), first);
    }
    let mm = render_c(&matmul(8, 4, 8), &[64, 32, 32], &opt(2));
    assert_eq!(render_c(&matmul(8, 4, 8), &[64, 32, 32], &opt(2)), mm);
}
