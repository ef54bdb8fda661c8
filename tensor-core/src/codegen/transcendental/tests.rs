//! Accuracy of the decomposed transcendentals: the rewritten graphs are evaluated lane by lane
//! with the exact scalar semantics of every op (`uop::alu`, what compiled kernels compute) and
//! compared with the `f64` functions, in units in the last place of the `f32` result.
//!
//! Release builds sweep 2^20 inputs per function (CI runs `cargo test --release -p
//! tensor-core --lib transcendental`); debug builds 2^14.

use super::*;
use crate::uop::{Arg, Scalar, alu};
use std::collections::HashMap;

const SWEEP: usize = if cfg!(debug_assertions) {
    1 << 14
} else {
    1 << 20
};

/// A decomposed graph of one `f32` input, flattened for evaluation lane by lane.
struct Program {
    steps: Vec<Step>,
}

enum Step {
    Input,
    Const(Scalar),
    Alu {
        op: Op,
        dtype: DType,
        operand: DType,
        args: Vec<usize>,
    },
}

impl Program {
    /// The decomposition of `op` applied to an `f32` input.
    fn of(op: Op) -> Program {
        let input = UOp::new(Op::DefineVar, DType::F32, vec![], Arg::Name("x".into()));
        let root = decompose_transcendentals(&UOp::alu(op, vec![input.clone()]));
        assert!(
            root.toposort().iter().all(|u| u.op() != op),
            "{op} was not decomposed"
        );
        let nodes = root.toposort();
        let index: HashMap<UOp, usize> = nodes.iter().cloned().zip(0..).collect();
        let steps = nodes
            .iter()
            .map(|u| match u.op() {
                _ if *u == input => Step::Input,
                Op::Const => Step::Const(u.const_value().expect("a constant")),
                op => Step::Alu {
                    op,
                    dtype: u.dtype(),
                    operand: if op == Op::Where { u.s(1) } else { u.s(0) }.dtype(),
                    args: u.src().iter().map(|s| index[s]).collect(),
                },
            })
            .collect();
        Program { steps }
    }

    fn run(&self, x: f32, values: &mut Vec<Scalar>) -> f32 {
        values.clear();
        let mut args = Vec::with_capacity(3);
        for step in &self.steps {
            let v = match step {
                Step::Input => Scalar::Float(x as f64),
                Step::Const(c) => *c,
                Step::Alu {
                    op,
                    dtype,
                    operand,
                    args: a,
                } => {
                    args.clear();
                    args.extend(a.iter().map(|&i| values[i]));
                    alu::exec_typed(*op, *dtype, *operand, &args)
                }
            };
            values.push(v);
        }
        values.last().expect("a result").as_f64() as f32
    }
}

/// The distance of `got` from `exact` in units of the spacing of `f32` at `exact` (denormal
/// spacing below the normal range); 0 when both are the same infinity, NaN, or equal.
fn ulp_error(got: f32, exact: f64) -> f64 {
    let rounded = exact as f32;
    if rounded.is_nan() || got.is_nan() {
        return if rounded.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if rounded.is_infinite() || got.is_infinite() {
        return if got == rounded { 0.0 } else { f64::INFINITY };
    }
    let magnitude = exact.abs().max(f32::MIN_POSITIVE as f64);
    let spacing = 2f64.powi(magnitude.log2().floor() as i32 - 23);
    (got as f64 - exact).abs() / spacing
}

/// A deterministic stream of 64-bit values (SplitMix64).
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f64, hi: f64) -> f32 {
        (lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64) as f32
    }
    /// A float of random bits with `|x| <= limit` (every binade equally likely).
    fn bits_up_to(&mut self, limit: f32) -> f32 {
        loop {
            let x = f32::from_bits(self.next() as u32);
            if x.is_finite() && x.abs() <= limit {
                return x;
            }
        }
    }
}

/// Counts of errors up to 0.5, 1, 2, 4 ulp and beyond, and the largest with its input.
struct Histogram {
    name: String,
    buckets: [usize; 5],
    worst: (f64, f32),
}

impl Histogram {
    fn of(
        name: &str,
        inputs: impl Iterator<Item = f32>,
        f: &Program,
        exact: fn(f64) -> f64,
    ) -> Self {
        let mut h = Histogram {
            name: name.to_string(),
            buckets: [0; 5],
            worst: (0.0, 0.0),
        };
        let mut values = Vec::new();
        for x in inputs {
            let e = ulp_error(f.run(x, &mut values), exact(x as f64));
            let bucket = [0.5, 1.0, 2.0, 4.0].iter().take_while(|&&b| e > b).count();
            h.buckets[bucket] += 1;
            if e > h.worst.0 || e.is_nan() {
                h.worst = (e, x);
            }
        }
        println!(
            "{}: {} inputs, ulp error <=0.5: {}, <=1: {}, <=2: {}, <=4: {}, >4: {}; max {:.3} ulp at x = {:e}",
            h.name,
            h.buckets.iter().sum::<usize>(),
            h.buckets[0],
            h.buckets[1],
            h.buckets[2],
            h.buckets[3],
            h.buckets[4],
            h.worst.0,
            h.worst.1
        );
        h
    }

    #[track_caller]
    fn assert_within(&self, ulps: f64) {
        assert!(
            self.worst.0 <= ulps,
            "{}: {:.3} ulp at x = {:e} ({:?}), more than {ulps}",
            self.name,
            self.worst.0,
            self.worst.1,
            self.worst.1
        );
    }
}

/// The main sweep of a function: [`SWEEP`] inputs.
fn sweep(rng: &mut Random, draw: impl Fn(&mut Random) -> f32) -> Vec<f32> {
    (0..SWEEP).map(|_| draw(rng)).collect()
}

/// A secondary sweep: a quarter of [`SWEEP`].
fn short_sweep(rng: &mut Random, draw: impl Fn(&mut Random) -> f32) -> Vec<f32> {
    (0..SWEEP / 4).map(|_| draw(rng)).collect()
}

#[test]
fn transcendental_exp2_within_2_ulp() {
    let f = Program::of(Op::Exp2);
    let mut rng = Random(1);
    let normal = sweep(&mut rng, |r| r.uniform(-126.0, 128.0));
    Histogram::of("exp2 normal results", normal.into_iter(), &f, f64::exp2).assert_within(2.0);
    let small = short_sweep(&mut rng, |r| r.bits_up_to(1.0));
    Histogram::of(
        "exp2 |x| <= 1 (all binades)",
        small.into_iter(),
        &f,
        f64::exp2,
    )
    .assert_within(2.0);
    let denormal = short_sweep(&mut rng, |r| r.uniform(-151.0, -126.0));
    Histogram::of("exp2 denormal results", denormal.into_iter(), &f, f64::exp2).assert_within(1.0);
}

#[test]
fn transcendental_log2_within_2_ulp() {
    let f = Program::of(Op::Log2);
    let mut rng = Random(2);
    let positive = sweep(&mut rng, |r| r.bits_up_to(f32::MAX).abs());
    Histogram::of(
        "log2 all positive floats",
        positive.into_iter(),
        &f,
        f64::log2,
    )
    .assert_within(2.0);
    let near_one = short_sweep(&mut rng, |r| r.uniform(0.5, 2.0));
    Histogram::of("log2 [0.5, 2)", near_one.into_iter(), &f, f64::log2).assert_within(2.0);
}

#[test]
fn transcendental_sin_cos_within_2_ulp_up_to_1e4() {
    let mut rng = Random(3);
    for (op, name, exact) in [
        (Op::Sin, "sin", f64::sin as fn(f64) -> f64),
        (Op::Cos, "cos", f64::cos),
    ] {
        let f = Program::of(op);
        let uniform = sweep(&mut rng, |r| r.uniform(-1e4, 1e4));
        Histogram::of(
            &format!("{name} |x| <= 1e4 uniform"),
            uniform.into_iter(),
            &f,
            exact,
        )
        .assert_within(2.0);
        let binades = short_sweep(&mut rng, |r| r.bits_up_to(1e4));
        Histogram::of(
            &format!("{name} |x| <= 1e4 all binades"),
            binades.into_iter(),
            &f,
            exact,
        )
        .assert_within(2.0);
    }
}

#[test]
fn transcendental_sin_cos_beyond_1e4() {
    let mut rng = Random(4);
    for (op, name, exact) in [
        (Op::Sin, "sin", f64::sin as fn(f64) -> f64),
        (Op::Cos, "cos", f64::cos),
    ] {
        let f = Program::of(op);
        let large = short_sweep(&mut rng, |r| {
            let x = r.bits_up_to(f32::MAX);
            if x.abs() < 1e4 {
                x.signum() * 1e4 + x
            } else {
                x
            }
        });
        Histogram::of(
            &format!("{name} |x| > 1e4 all binades"),
            large.into_iter(),
            &f,
            exact,
        )
        .assert_within(LARGE_ARGUMENT_ULPS);
    }
}

#[test]
fn transcendental_erf_within_4_ulp() {
    let f = Program::of(Op::Erf);
    let mut rng = Random(5);
    let core = sweep(&mut rng, |r| r.uniform(-4.0, 4.0));
    Histogram::of("erf |x| <= 4 uniform", core.into_iter(), &f, alu::erf).assert_within(4.0);
    let binades = short_sweep(&mut rng, |r| r.bits_up_to(f32::MAX));
    Histogram::of("erf all binades", binades.into_iter(), &f, alu::erf).assert_within(4.0);
}

#[test]
fn transcendental_erfc_within_8_ulp() {
    let f = Program::of(Op::Erfc);
    let mut rng = Random(6);
    // Up to 10.05, where erfc leaves the denormals and rounds to 0.
    let core = sweep(&mut rng, |r| r.uniform(-4.0, 10.05));
    Histogram::of("erfc [-4, 10.05] uniform", core.into_iter(), &f, alu::erfc).assert_within(8.0);
    let binades = short_sweep(&mut rng, |r| r.bits_up_to(f32::MAX));
    Histogram::of("erfc all binades", binades.into_iter(), &f, alu::erfc).assert_within(8.0);
}

/// The bound `sin`/`cos` keep beyond `1e4` (Payne–Hanek reduction).
const LARGE_ARGUMENT_ULPS: f64 = 3.0;

/// The special values: infinities, NaN, signed zeros, denormals, the ends of the ranges.
#[test]
fn transcendental_edge_values() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let tiny = f32::from_bits(1);
    let mut values = Vec::new();
    let mut check = |op: Op, cases: &[(f32, f32)]| {
        let f = Program::of(op);
        for &(x, want) in cases {
            let got = f.run(x, &mut values);
            let same = (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits();
            assert!(
                same,
                "{op}({x:e}) = {got:e} ({got:?}), expected {want:e} ({want:?})"
            );
        }
    };
    check(
        Op::Exp2,
        &[
            (nan, nan),
            (inf, inf),
            (-inf, 0.0),
            (0.0, 1.0),
            (-0.0, 1.0),
            (tiny, 1.0),
            (1.0, 2.0),
            (-1.0, 0.5),
            (10.0, 1024.0),
            (127.0, 2f32.powi(127)),
            (128.0, inf),
            (1000.0, inf),
            (-126.0, f32::MIN_POSITIVE),
            (-149.0, tiny),
            (-150.0, 0.0),
            (-149.5, tiny),
            (-151.0, 0.0),
            (-1000.0, 0.0),
        ],
    );
    check(
        Op::Erf,
        &[
            (nan, nan),
            (inf, 1.0),
            (-inf, -1.0),
            (0.0, 0.0),
            (-0.0, -0.0),
            (10.0, 1.0),
            (-1e30, -1.0),
            (f32::MAX, 1.0),
        ],
    );
    check(
        Op::Erfc,
        &[
            (nan, nan),
            (inf, 0.0),
            (-inf, 2.0),
            (0.0, 1.0),
            (-0.0, 1.0),
            (11.0, 0.0),
            (-1e30, 2.0),
        ],
    );
    check(
        Op::Log2,
        &[
            (nan, nan),
            (-1.0, nan),
            (-inf, nan),
            (-tiny, nan),
            (0.0, -inf),
            (-0.0, -inf),
            (inf, inf),
            (1.0, 0.0),
            (2.0, 1.0),
            (0.5, -1.0),
            (1024.0, 10.0),
            (tiny, -149.0),
            (f32::MIN_POSITIVE, -126.0),
            (2f32.powi(127), 127.0),
        ],
    );
    check(
        Op::Sin,
        &[
            (nan, nan),
            (inf, nan),
            (-inf, nan),
            (0.0, 0.0),
            (-0.0, -0.0),
            (tiny, tiny),
            (-tiny, -tiny),
            (1e-20, 1e-20),
        ],
    );
    check(
        Op::Cos,
        &[
            (nan, nan),
            (inf, nan),
            (-inf, nan),
            (0.0, 1.0),
            (-0.0, 1.0),
            (tiny, 1.0),
            (1e-20, 1.0),
        ],
    );
    // Near the switch between the two reductions, and the largest floats.
    let limit = CODY_WAITE_LIMIT;
    let around = [
        limit.next_down(),
        limit,
        limit.next_up(),
        8192.0,
        16777216.0,
        f32::MAX,
        -f32::MAX,
        3.0e38,
        1e10,
        std::f32::consts::PI,
        std::f32::consts::FRAC_PI_2,
        1e4,
        -1e4,
    ];
    for (op, exact) in [(Op::Sin, f64::sin as fn(f64) -> f64), (Op::Cos, f64::cos)] {
        let f = Program::of(op);
        for &x in &around {
            let e = ulp_error(f.run(x, &mut values), exact(x as f64));
            assert!(e <= LARGE_ARGUMENT_ULPS, "{op}({x:e}): {e} ulp");
        }
    }
}

/// `f16` and `bf16` go through `f32` and are rounded once at the end.
#[test]
fn transcendental_narrow_floats_compute_in_f32() {
    for dtype in [DType::F16, DType::BF16] {
        let input = UOp::new(Op::DefineVar, dtype, vec![], Arg::Name("x".into()));
        let root = decompose_transcendentals(&UOp::alu(Op::Sin, vec![input]));
        assert_eq!(root.op(), Op::Cast);
        assert_eq!(root.dtype(), dtype);
        assert_eq!(root.s(0).dtype(), DType::F32);
    }
    let input = UOp::new(Op::DefineVar, DType::F64, vec![], Arg::Name("x".into()));
    let f64_sin = UOp::alu(Op::Sin, vec![input]);
    assert_eq!(
        decompose_transcendentals(&f64_sin),
        f64_sin,
        "f64 keeps its Sin"
    );
}
