//! The exact scalar semantics of every elementwise op: what one lane of a kernel computes.
//!
//! This is the single definition the reference interpreter, constant folding and the tests of
//! every backend agree on. The rules, C-like so that compiled kernels can match them bit for bit:
//!
//! - Integer results wrap to the width of the result dtype (two's complement).
//! - `Idiv` (and `Div` on integers) truncates toward zero; `Mod` has the sign of the dividend.
//!   Integer division or remainder by zero gives 0 (C leaves it undefined; a total definition
//!   keeps the oracle usable and kernels guard it the same way).
//! - Shifts by a negative amount or by at least the width of the dtype give 0; `Shr` is
//!   arithmetic on signed types and logical on unsigned ones.
//! - Float ops are computed in f64 and rounded once to the result dtype, so f32/f16/bf16
//!   results are what hardware gives (transcendentals up to their own rounding). `Mulacc`
//!   on floats is a fused multiply-add, rounded once (`fmaf`/`fma`; `f16`/`bf16` fused in f32,
//!   then rounded to their type), which is what `MULACC` means to a backend with FMA.
//! - Comparisons give `Scalar::Bool` and follow IEEE (`NaN` compares unequal and unordered,
//!   so `CmpGe(NaN, x)` is false even though the decomposition `!(a < b)` would say true).
//! - `Max` propagates `NaN`. `Pow` on floats is IEEE `pow` (a negative base with an integral
//!   exponent is fine, unlike in the `Exp2(Log2(a) * b)` decomposition).
//! - On integer dtypes, `Recip(x)` is `Idiv(1, x)`, `Pow` is exact wrapping integer power
//!   (a negative exponent truncates `1 / a^n` toward zero), and `Exp2`/`Log2`/`Sin`/`Cos`/
//!   `Erf`/`Erfc`/`Sqrt` are computed in f64 and converted to the dtype like a C cast.
//! - Bools take part in integer arithmetic as 0 and 1; a bool result is "non-zero".
//! - `Threefry(x, key)` is Threefry-2x32-20 (see [`threefry2x32`]) of the 64-bit counter `x`
//!   under the 64-bit `key`. Each u64 is split into words `(lo, hi) = (bits 0..32, bits
//!   32..64)`, word 0 being `lo`; the result is `hi << 32 | lo` of the output words.
//!
//! `Scalar` holds every integer as an i64, so a `U64` above `i64::MAX` is stored as its bit
//! pattern; the ops whose result depends on signedness (division, remainder, comparisons, `Max`,
//! `Shr`, conversion to float) read the operand dtype to interpret it.

use super::dtype::{DType, Scalar, decode_scalars, encode_scalars, round_to_float, wrap_int};
use super::op::Op;

/// The value of elementwise `op` on `args`, with `dtype` the dtype of the result.
///
/// The operand dtype is inferred from the scalars (`Bool`, `I64` for integers unless the result
/// dtype is an integer type, `F64` for floats unless the result dtype is a float type). Use
/// [`exec_typed`] when the operand dtype matters and differs from that guess: comparisons of
/// `U64` values, `Cast` from `U64`, `Bitcast` from `BF16`.
#[track_caller]
pub fn exec(op: Op, dtype: DType, args: &[Scalar]) -> Scalar {
    exec_typed(op, dtype, guess_operand_dtype(op, dtype, args), args)
}

/// The value of elementwise `op` on `args`, with `dtype` the dtype of the result and
/// `operand` the dtype of the operands (of the branches for `Where`).
#[track_caller]
pub fn exec_typed(op: Op, dtype: DType, operand: DType, args: &[Scalar]) -> Scalar {
    check_arity(op, args);
    match op {
        Op::Copy => args[0],
        Op::Cast => cast(args[0], operand, dtype),
        Op::Bitcast => bitcast(args[0], operand, dtype),
        Op::Where => {
            let chosen = if args[0].as_bool() { args[1] } else { args[2] };
            chosen.cast(dtype)
        }
        Op::Threefry => {
            let bits = threefry_u64(args[0].as_i64() as u64, args[1].as_i64() as u64);
            int_result(bits as i64, dtype)
        }
        Op::CmpLt | Op::CmpNe | Op::CmpGt | Op::CmpGe | Op::CmpLe | Op::CmpEq => {
            Scalar::Bool(compare(op, operand, args[0], args[1]))
        }
        Op::Mulacc if dtype.is_float() => {
            let [a, b, c] = [0, 1, 2].map(|i| args[i].as_f64());
            let fused = match dtype {
                DType::F64 => a.mul_add(b, c),
                _ => f64::from((a as f32).mul_add(b as f32, c as f32)),
            };
            float_result(fused, dtype)
        }
        _ if dtype.is_float() => float_result(float_op(op, args), dtype),
        _ if dtype.is_int() || dtype == DType::Bool => int_op(op, dtype, args),
        _ => panic!("alu: {op} has no value of dtype {dtype}"),
    }
}

fn guess_operand_dtype(op: Op, dtype: DType, args: &[Scalar]) -> DType {
    let sample = if op == Op::Where {
        args.get(1)
    } else {
        args.first()
    };
    match sample {
        Some(Scalar::Bool(_)) => DType::Bool,
        Some(Scalar::Int(_)) if op == Op::Bitcast => same_size_int(dtype),
        Some(Scalar::Int(_)) if dtype.is_int() && !op.is_comparison() => dtype,
        Some(Scalar::Int(_)) => DType::I64,
        Some(Scalar::Float(_)) if op == Op::Bitcast => same_size_float(dtype),
        Some(Scalar::Float(_)) if dtype.is_float() => dtype,
        _ => DType::F64,
    }
}

fn same_size_int(dtype: DType) -> DType {
    match dtype.size_bytes() {
        1 => DType::I8,
        2 => DType::I16,
        4 => DType::I32,
        _ => DType::I64,
    }
}

fn same_size_float(dtype: DType) -> DType {
    match dtype.size_bytes() {
        2 => DType::F16,
        4 => DType::F32,
        _ => DType::F64,
    }
}

#[track_caller]
fn check_arity(op: Op, args: &[Scalar]) {
    // A match rather than `Op::is_unary` and friends: this runs once per lane.
    use Op::*;
    let expected = match op {
        Recip | Trunc | Cast | Bitcast | Copy | Neg | Exp2 | Log2 | Sin | Cos | Erf | Erfc
        | Sqrt => 1,
        Add | Mul | Max | Mod | Idiv | CmpLt | CmpNe | Xor | Or | And | Shr | Shl | Sub | Div
        | CmpGt | CmpGe | CmpLe | CmpEq | Pow | Threefry => 2,
        Where | Mulacc => 3,
        _ => panic!("alu: {op} is not an elementwise op"),
    };
    assert_eq!(
        args.len(),
        expected,
        "alu: {op} takes {expected} operands, got {}",
        args.len()
    );
}

fn int_result(v: i64, dtype: DType) -> Scalar {
    if dtype == DType::Bool {
        Scalar::Bool(v != 0)
    } else {
        Scalar::Int(wrap_int(v, dtype))
    }
}

fn float_result(v: f64, dtype: DType) -> Scalar {
    Scalar::Float(round_to_float(v, dtype))
}

/// The value of `s` read as a number of dtype `from` (a `U64` bit pattern read unsigned).
fn as_f64_of(s: Scalar, from: DType) -> f64 {
    match s {
        Scalar::Int(i) if from == DType::U64 => i as u64 as f64,
        _ => s.as_f64(),
    }
}

fn cast(value: Scalar, from: DType, to: DType) -> Scalar {
    if to.is_float() {
        return float_result(as_f64_of(value, from), to);
    }
    value.cast(to)
}

#[track_caller]
fn bitcast(value: Scalar, from: DType, to: DType) -> Scalar {
    assert_eq!(
        from.size_bytes(),
        to.size_bytes(),
        "alu: Bitcast from {from} to {to} changes the size"
    );
    // The common reinterpretations without a round trip through bytes (they run per lane).
    match (from, to) {
        (DType::F32, DType::I32) => {
            return Scalar::Int((value.as_f64() as f32).to_bits() as i32 as i64);
        }
        (DType::F32, DType::U32) => return Scalar::Int((value.as_f64() as f32).to_bits() as i64),
        (DType::I32 | DType::U32, DType::F32) => {
            return Scalar::Float(f32::from_bits(value.as_i64() as u32) as f64);
        }
        (DType::F64, DType::I64 | DType::U64) => {
            return Scalar::Int(value.as_f64().to_bits() as i64);
        }
        (DType::I64 | DType::U64, DType::F64) => {
            return Scalar::Float(f64::from_bits(value.as_i64() as u64));
        }
        _ => {}
    }
    let bytes = encode_scalars(&[value], from);
    decode_scalars(&bytes, to)[0]
}

/// A comparison of two operands of dtype `operand`, IEEE for floats, unsigned for `U64`.
fn compare(op: Op, operand: DType, a: Scalar, b: Scalar) -> bool {
    if operand.is_float() || matches!(a, Scalar::Float(_)) || matches!(b, Scalar::Float(_)) {
        let (a, b) = (a.as_f64(), b.as_f64());
        return match op {
            Op::CmpLt => a < b,
            Op::CmpGt => a > b,
            Op::CmpLe => a <= b,
            Op::CmpGe => a >= b,
            Op::CmpEq => a == b,
            _ => a != b,
        };
    }
    let ordering = if operand == DType::U64 {
        (a.as_i64() as u64).cmp(&(b.as_i64() as u64))
    } else {
        a.as_i64().cmp(&b.as_i64())
    };
    match op {
        Op::CmpLt => ordering.is_lt(),
        Op::CmpGt => ordering.is_gt(),
        Op::CmpLe => ordering.is_le(),
        Op::CmpGe => ordering.is_ge(),
        Op::CmpEq => ordering.is_eq(),
        _ => ordering.is_ne(),
    }
}

/// A float op in f64; the caller rounds the result to the result dtype.
#[track_caller]
fn float_op(op: Op, args: &[Scalar]) -> f64 {
    let a = args[0].as_f64();
    let b = || args[1].as_f64();
    match op {
        Op::Recip => 1.0 / a,
        Op::Trunc => a.trunc(),
        Op::Neg => -a,
        Op::Exp2 => a.exp2(),
        Op::Log2 => a.log2(),
        Op::Sin => a.sin(),
        Op::Cos => a.cos(),
        Op::Erf => erf(a),
        Op::Erfc => erfc(a),
        Op::Sqrt => a.sqrt(),
        Op::Add => a + b(),
        Op::Sub => a - b(),
        Op::Mul => a * b(),
        Op::Div => a / b(),
        Op::Idiv => (a / b()).trunc(),
        Op::Mod => a % b(),
        Op::Pow => a.powf(b()),
        Op::Max => float_max(a, b()),
        _ => panic!("alu: {op} is not defined on floats"),
    }
}

/// The error function in `f64`, to a few ulp: `2/√π x e^(-x²) Σ (2x²)^n / (1·3·…·(2n+1))`,
/// a series of positive terms (no cancellation) that converges for every `x`; `|x| >= 6`
/// gives `±1` (`erfc(6)` is below half an ulp of 1).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.abs() >= 6.0 {
        return x.signum();
    }
    let two_x2 = 2.0 * x * x;
    let (mut term, mut sum, mut n) = (1.0_f64, 1.0_f64, 0.0_f64);
    while term > sum * 1e-18 {
        n += 1.0;
        term *= two_x2 / (2.0 * n + 1.0);
        sum += term;
    }
    std::f64::consts::FRAC_2_SQRT_PI * x * (-x * x).exp() * sum
}

/// The complementary error function in `f64`: `1 - erf x` below 3 (where `erfc` is at least
/// `2e-5`, so the subtraction keeps 11 digits), above it the continued fraction
/// `e^(-x²) / √π / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))`, accurate to a few ulp.
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() || x < 3.0 {
        return 1.0 - erf(x);
    }
    let fraction = (1..200)
        .rev()
        .fold(x, |tail, k| x + (k as f64 / 2.0) / tail);
    (-x * x).exp() / std::f64::consts::PI.sqrt() / fraction
}

fn float_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// An integer (or bool) op, wrapped to `dtype`.
#[track_caller]
fn int_op(op: Op, dtype: DType, args: &[Scalar]) -> Scalar {
    let unsigned = dtype.is_unsigned_int();
    let a = args[0].as_i64();
    let b = || args[1].as_i64();
    let v = match op {
        Op::Recip => int_div(1, a, unsigned),
        Op::Trunc => a,
        Op::Neg => a.wrapping_neg(),
        Op::Exp2 | Op::Log2 | Op::Sin | Op::Cos | Op::Erf | Op::Erfc | Op::Sqrt => {
            let x = as_f64_of(args[0], dtype);
            return Scalar::Float(float_op(op, &[Scalar::Float(x)])).cast(dtype);
        }
        Op::Add => a.wrapping_add(b()),
        Op::Sub => a.wrapping_sub(b()),
        Op::Mul => a.wrapping_mul(b()),
        Op::Div | Op::Idiv => int_div(a, b(), unsigned),
        Op::Mod => int_rem(a, b(), unsigned),
        Op::Max if unsigned => (a as u64).max(b() as u64) as i64,
        Op::Max => a.max(b()),
        Op::Pow => int_pow(a, b()),
        Op::Xor => a ^ b(),
        Op::Or => a | b(),
        Op::And => a & b(),
        Op::Shl => shift(a, b(), dtype, true),
        Op::Shr => shift(a, b(), dtype, false),
        Op::Mulacc => a.wrapping_mul(b()).wrapping_add(args[2].as_i64()),
        _ => panic!("alu: {op} is not defined on {dtype}"),
    };
    int_result(v, dtype)
}

fn int_div(a: i64, b: i64, unsigned: bool) -> i64 {
    match (b, unsigned) {
        (0, _) => 0,
        (_, true) => ((a as u64) / (b as u64)) as i64,
        (_, false) => a.wrapping_div(b),
    }
}

fn int_rem(a: i64, b: i64, unsigned: bool) -> i64 {
    match (b, unsigned) {
        (0, _) => 0,
        (_, true) => ((a as u64) % (b as u64)) as i64,
        (_, false) => a.wrapping_rem(b),
    }
}

fn int_pow(base: i64, exp: i64) -> i64 {
    if exp >= 0 {
        let mut acc = 1i64;
        for _ in 0..exp.min(64) {
            acc = acc.wrapping_mul(base);
        }
        // Beyond 64 factors only 0, 1 and -1 keep a non-zero low word; their powers cycle.
        if exp > 64 {
            return match base {
                1 => 1,
                -1 => 1 - 2 * (exp & 1),
                _ => 0,
            };
        }
        return acc;
    }
    match base {
        1 => 1,
        -1 => 1 - 2 * (exp.rem_euclid(2)),
        _ => 0,
    }
}

fn shift(a: i64, amount: i64, dtype: DType, left: bool) -> i64 {
    let width = if dtype == DType::Bool {
        1
    } else {
        dtype.bits() as i64
    };
    if amount < 0 || amount >= width {
        return 0;
    }
    let amount = amount as u32;
    match (left, dtype.is_unsigned_int()) {
        (true, _) => a.wrapping_shl(amount),
        (false, true) => ((a as u64) >> amount) as i64,
        (false, false) => a >> amount,
    }
}

/// Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
/// 3"): four rounds of add-rotate-xor per group, five groups, a key injection after each.
pub fn threefry2x32(counter: [u32; 2], key: [u32; 2]) -> [u32; 2] {
    const ROTATIONS: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];
    const PARITY: u32 = 0x1BD1_1BDA;
    let schedule = [key[0], key[1], PARITY ^ key[0] ^ key[1]];
    let mut x = [
        counter[0].wrapping_add(schedule[0]),
        counter[1].wrapping_add(schedule[1]),
    ];
    for group in 0..5 {
        for round in 0..4 {
            x[0] = x[0].wrapping_add(x[1]);
            x[1] = x[1].rotate_left(ROTATIONS[(group % 2) * 4 + round]);
            x[1] ^= x[0];
        }
        let injection = group + 1;
        x[0] = x[0].wrapping_add(schedule[injection % 3]);
        x[1] = x[1]
            .wrapping_add(schedule[(injection + 1) % 3])
            .wrapping_add(injection as u32);
    }
    x
}

/// [`threefry2x32`] on u64 counter and key, each split into words `(lo, hi)`; the result
/// packs the output words as `hi << 32 | lo`.
pub fn threefry_u64(counter: u64, key: u64) -> u64 {
    let words = |v: u64| [v as u32, (v >> 32) as u32];
    let [lo, hi] = threefry2x32(words(counter), words(key));
    (hi as u64) << 32 | lo as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use Scalar::{Bool, Float, Int};

    fn f(v: f64) -> Scalar {
        Float(v)
    }

    #[test]
    fn threefry_matches_the_published_known_answers() {
        assert_eq!(threefry2x32([0, 0], [0, 0]), [0x6b20_0159, 0x99ba_4efe]);
        let ones = [u32::MAX, u32::MAX];
        assert_eq!(threefry2x32(ones, ones), [0x1cb9_96fc, 0xbb00_2be7]);
        assert_eq!(
            threefry2x32([0x243f_6a88, 0x85a3_08d3], [0x1319_8a2e, 0x0370_7344]),
            [0xc492_3a9c, 0x483d_f7a0]
        );
    }

    #[test]
    fn threefry_op_packs_words_low_first() {
        let counter = 0x85a3_08d3_243f_6a88u64;
        let key = 0x0370_7344_1319_8a2eu64;
        let out = exec(
            Op::Threefry,
            DType::U64,
            &[Int(counter as i64), Int(key as i64)],
        );
        assert_eq!(out, Int(0x483d_f7a0_c492_3a9cu64 as i64));
        let zero = exec(Op::Threefry, DType::U64, &[Int(0), Int(0)]);
        assert_eq!(zero, Int(0x99ba_4efe_6b20_0159u64 as i64));
    }

    #[test]
    fn integer_arithmetic_wraps_to_the_dtype() {
        assert_eq!(exec(Op::Add, DType::U8, &[Int(250), Int(10)]), Int(4));
        assert_eq!(exec(Op::Add, DType::I8, &[Int(127), Int(1)]), Int(-128));
        assert_eq!(exec(Op::Mul, DType::I16, &[Int(300), Int(300)]), Int(24464));
        assert_eq!(
            exec(Op::Sub, DType::U32, &[Int(0), Int(1)]),
            Int(u32::MAX as i64)
        );
        assert_eq!(
            exec(Op::Neg, DType::I32, &[Int(i32::MIN as i64)]),
            Int(i32::MIN as i64)
        );
        assert_eq!(exec(Op::Neg, DType::U8, &[Int(1)]), Int(255));
        assert_eq!(
            exec(Op::Add, DType::I64, &[Int(i64::MAX), Int(1)]),
            Int(i64::MIN)
        );
    }

    #[test]
    fn integer_division_truncates_toward_zero_and_mod_follows_the_dividend() {
        assert_eq!(exec(Op::Idiv, DType::I32, &[Int(-7), Int(2)]), Int(-3));
        assert_eq!(exec(Op::Idiv, DType::I32, &[Int(7), Int(-2)]), Int(-3));
        assert_eq!(exec(Op::Div, DType::I32, &[Int(-7), Int(2)]), Int(-3));
        assert_eq!(exec(Op::Mod, DType::I32, &[Int(-7), Int(2)]), Int(-1));
        assert_eq!(exec(Op::Mod, DType::I32, &[Int(7), Int(-2)]), Int(1));
        assert_eq!(
            exec(Op::Idiv, DType::I32, &[Int(i32::MIN as i64), Int(-1)]),
            Int(i32::MIN as i64)
        );
    }

    #[test]
    fn integer_division_and_mod_by_zero_give_zero() {
        assert_eq!(exec(Op::Idiv, DType::I32, &[Int(5), Int(0)]), Int(0));
        assert_eq!(exec(Op::Mod, DType::U8, &[Int(5), Int(0)]), Int(0));
        assert_eq!(exec(Op::Recip, DType::I32, &[Int(0)]), Int(0));
    }

    #[test]
    fn u64_values_above_i64_max_divide_and_compare_unsigned() {
        let big = Int(u64::MAX as i64);
        assert_eq!(exec(Op::Idiv, DType::U64, &[big, Int(2)]), Int(i64::MAX));
        assert_eq!(exec(Op::Mod, DType::U64, &[big, Int(10)]), Int(5));
        assert_eq!(exec(Op::Max, DType::U64, &[big, Int(1)]), big);
        assert_eq!(exec(Op::Shr, DType::U64, &[big, Int(60)]), Int(15));
        let lt = exec_typed(Op::CmpLt, DType::Bool, DType::U64, &[Int(1), big]);
        assert_eq!(lt, Bool(true));
        let as_float = exec_typed(Op::Cast, DType::F64, DType::U64, &[big]);
        assert_eq!(as_float, f(18446744073709551615.0));
    }

    #[test]
    fn recip_and_trunc_on_floats_and_ints() {
        assert_eq!(exec(Op::Recip, DType::F32, &[f(4.0)]), f(0.25));
        assert_eq!(exec(Op::Recip, DType::F32, &[f(0.0)]), f(f64::INFINITY));
        assert_eq!(exec(Op::Recip, DType::I32, &[Int(1)]), Int(1));
        assert_eq!(exec(Op::Recip, DType::I32, &[Int(3)]), Int(0));
        assert_eq!(exec(Op::Trunc, DType::F32, &[f(-2.7)]), f(-2.0));
        assert_eq!(exec(Op::Trunc, DType::F64, &[f(2.7)]), f(2.0));
        assert_eq!(exec(Op::Trunc, DType::I32, &[Int(-5)]), Int(-5));
    }

    #[test]
    fn float_results_round_to_the_dtype() {
        let third = exec(Op::Div, DType::F32, &[f(1.0), f(3.0)]);
        assert_eq!(third, f((1.0f32 / 3.0f32) as f64));
        let tiny = 1.0 / 4096.0;
        assert_eq!(exec(Op::Add, DType::F16, &[f(1.0), f(tiny)]), f(1.0));
        assert_eq!(exec(Op::Add, DType::F32, &[f(1.0), f(tiny)]), f(1.0 + tiny));
        assert_eq!(
            exec(Op::Mul, DType::F16, &[f(300.0), f(300.0)]),
            f(f64::INFINITY)
        );
        assert_eq!(
            exec(Op::Add, DType::BF16, &[f(1.0), f(1.0 / 512.0)]),
            f(1.0)
        );
        assert_eq!(exec(Op::Sub, DType::F64, &[f(0.5), f(2.0)]), f(-1.5));
    }

    #[test]
    fn float_mod_and_idiv_follow_c() {
        assert_eq!(exec(Op::Mod, DType::F32, &[f(-7.5), f(2.0)]), f(-1.5));
        assert_eq!(exec(Op::Idiv, DType::F32, &[f(-7.5), f(2.0)]), f(-3.0));
    }

    #[test]
    fn transcendentals_round_once_to_the_dtype() {
        assert_eq!(exec(Op::Exp2, DType::F32, &[f(3.0)]), f(8.0));
        assert_eq!(exec(Op::Log2, DType::F32, &[f(0.125)]), f(-3.0));
        assert_eq!(exec(Op::Sqrt, DType::F64, &[f(2.0)]), f(2f64.sqrt()));
        assert_eq!(exec(Op::Sqrt, DType::F32, &[f(2.0)]), f(2f32.sqrt() as f64));
        assert_eq!(
            exec(Op::Sin, DType::F32, &[f(1.0)]),
            f(1f64.sin() as f32 as f64)
        );
        assert_eq!(exec(Op::Pow, DType::F32, &[f(2.0), f(-2.0)]), f(0.25));
        assert_eq!(exec(Op::Erf, DType::F32, &[f(-6.5)]), f(-1.0));
        assert!(exec(Op::Log2, DType::F32, &[f(-1.0)]).as_f64().is_nan());
        assert_eq!(exec(Op::Sqrt, DType::I32, &[Int(17)]), Int(4));
    }

    #[test]
    fn erf_matches_tabulated_values() {
        // Correctly rounded values (C's `erf`, as Python's `math.erf` prints them).
        let table = [
            (1e-8, 1.128_379_167_095_512_6e-8),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (5.0, 0.999_999_999_998_462_6),
        ];
        for (x, want) in table {
            assert!(
                (erf(x) - want).abs() <= 4.0 * f64::EPSILON * want,
                "erf({x})"
            );
            assert_eq!(erf(-x), -erf(x));
        }
        assert!(erf(f64::NAN).is_nan());
        // erfc(4) = 1.541725790028002e-8, erfc(10) = 2.088487583762545e-45.
        for (x, want) in [
            (4.0, 1.541_725_790_028_002e-8),
            (10.0, 2.088_487_583_762_545e-45),
        ] {
            assert!(
                (erfc(x) - want).abs() <= 8.0 * f64::EPSILON * want,
                "erfc({x})"
            );
        }
        assert_eq!(erfc(-1.0), 1.0 + erf(1.0));
        assert_eq!(erfc(f64::INFINITY), 0.0);
        assert_eq!(erf(f64::INFINITY), 1.0);
    }

    #[test]
    fn integer_pow_is_exact_and_wraps() {
        assert_eq!(exec(Op::Pow, DType::I32, &[Int(3), Int(4)]), Int(81));
        assert_eq!(exec(Op::Pow, DType::U8, &[Int(2), Int(9)]), Int(0));
        assert_eq!(exec(Op::Pow, DType::I32, &[Int(-1), Int(-3)]), Int(-1));
        assert_eq!(exec(Op::Pow, DType::I32, &[Int(2), Int(-1)]), Int(0));
        assert_eq!(exec(Op::Pow, DType::I64, &[Int(-1), Int(1001)]), Int(-1));
    }

    #[test]
    fn max_propagates_nan_and_picks_the_larger() {
        assert_eq!(exec(Op::Max, DType::F32, &[f(-1.0), f(2.0)]), f(2.0));
        assert!(
            exec(Op::Max, DType::F32, &[f(f64::NAN), f(2.0)])
                .as_f64()
                .is_nan()
        );
        assert_eq!(exec(Op::Max, DType::I8, &[Int(-3), Int(-4)]), Int(-3));
        assert_eq!(
            exec(Op::Max, DType::Bool, &[Bool(false), Bool(true)]),
            Bool(true)
        );
    }

    #[test]
    fn mulacc_is_a_fused_multiply_add() {
        assert_eq!(
            exec(Op::Mulacc, DType::F32, &[f(2.0), f(3.0), f(1.0)]),
            f(7.0)
        );
        // (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly; rounding the product first loses 2^-24.
        let a = 1.0 + 2f64.powi(-12);
        assert_eq!(
            exec(Op::Mulacc, DType::F32, &[f(a), f(a), f(-1.0)]),
            f(2f64.powi(-11) + 2f64.powi(-24))
        );
        assert_eq!(
            exec(Op::Mulacc, DType::U8, &[Int(16), Int(16), Int(1)]),
            Int(1)
        );
    }

    #[test]
    fn comparisons_give_bools_and_follow_ieee_for_nan() {
        let cases = [
            (Op::CmpLt, [true, false, false]),
            (Op::CmpGt, [false, false, true]),
            (Op::CmpLe, [true, true, false]),
            (Op::CmpGe, [false, true, true]),
            (Op::CmpEq, [false, true, false]),
            (Op::CmpNe, [true, false, true]),
        ];
        for (op, expected) in cases {
            for (b, want) in [2.0, 1.0, 0.0].into_iter().zip(expected) {
                assert_eq!(exec(op, DType::Bool, &[f(1.0), f(b)]), Bool(want), "{op}");
                assert_eq!(
                    exec(op, DType::Bool, &[Int(1), Int(b as i64)]),
                    Bool(want),
                    "{op} on ints"
                );
            }
            let with_nan = exec(op, DType::Bool, &[f(f64::NAN), f(1.0)]);
            assert_eq!(with_nan, Bool(op == Op::CmpNe), "{op} with NaN");
        }
        assert_eq!(exec(Op::CmpLt, DType::Bool, &[Int(-1), Int(0)]), Bool(true));
        assert_eq!(
            exec(Op::CmpLt, DType::Bool, &[Bool(false), Bool(true)]),
            Bool(true)
        );
    }

    #[test]
    fn bitwise_ops_on_ints_and_bools() {
        assert_eq!(
            exec(Op::Xor, DType::U8, &[Int(0b1100), Int(0b1010)]),
            Int(0b0110)
        );
        assert_eq!(
            exec(Op::Or, DType::U8, &[Int(0b1100), Int(0b1010)]),
            Int(0b1110)
        );
        assert_eq!(
            exec(Op::And, DType::U8, &[Int(0b1100), Int(0b1010)]),
            Int(0b1000)
        );
        assert_eq!(exec(Op::Xor, DType::I32, &[Int(-1), Int(5)]), Int(-6));
        assert_eq!(
            exec(Op::Xor, DType::Bool, &[Bool(true), Bool(true)]),
            Bool(false)
        );
        assert_eq!(
            exec(Op::Or, DType::Bool, &[Bool(false), Bool(true)]),
            Bool(true)
        );
        assert_eq!(
            exec(Op::And, DType::Bool, &[Bool(false), Bool(true)]),
            Bool(false)
        );
    }

    #[test]
    fn shifts_wrap_and_give_zero_past_the_width() {
        assert_eq!(exec(Op::Shl, DType::U8, &[Int(0x81), Int(1)]), Int(2));
        assert_eq!(
            exec(Op::Shl, DType::I32, &[Int(1), Int(31)]),
            Int(i32::MIN as i64)
        );
        assert_eq!(exec(Op::Shl, DType::I32, &[Int(1), Int(32)]), Int(0));
        assert_eq!(exec(Op::Shr, DType::I32, &[Int(-8), Int(1)]), Int(-4));
        assert_eq!(
            exec(Op::Shr, DType::U32, &[Int(0xffff_ffff), Int(4)]),
            Int(0x0fff_ffff)
        );
        assert_eq!(exec(Op::Shr, DType::I32, &[Int(-8), Int(32)]), Int(0));
        assert_eq!(exec(Op::Shl, DType::U64, &[Int(1), Int(63)]), Int(i64::MIN));
        assert_eq!(exec(Op::Shr, DType::I64, &[Int(1), Int(-1)]), Int(0));
    }

    #[test]
    fn where_picks_by_the_predicate_and_casts_to_the_result() {
        assert_eq!(
            exec(Op::Where, DType::F32, &[Bool(true), f(1.0), f(2.0)]),
            f(1.0)
        );
        assert_eq!(
            exec(Op::Where, DType::F32, &[Bool(false), f(1.0), f(2.0)]),
            f(2.0)
        );
        assert_eq!(
            exec(Op::Where, DType::I32, &[Int(3), Int(1), Int(2)]),
            Int(1)
        );
    }

    #[test]
    fn cast_converts_like_c() {
        assert_eq!(exec(Op::Cast, DType::I32, &[f(-2.9)]), Int(-2));
        assert_eq!(exec(Op::Cast, DType::U8, &[Int(-1)]), Int(255));
        assert_eq!(exec(Op::Cast, DType::Bool, &[f(0.0)]), Bool(false));
        assert_eq!(exec(Op::Cast, DType::F32, &[Bool(true)]), f(1.0));
        assert_eq!(exec(Op::Cast, DType::F16, &[f(1.0 + 1.0 / 4096.0)]), f(1.0));
        assert_eq!(exec(Op::Cast, DType::BF16, &[Int(257)]), f(256.0));
        assert_eq!(
            exec(Op::Cast, DType::U64, &[f(1.8446744073709552e19 / 2.0)]),
            Int(i64::MIN)
        );
    }

    #[test]
    fn bitcast_reinterprets_bits() {
        assert_eq!(exec(Op::Bitcast, DType::I32, &[f(1.0)]), Int(0x3f80_0000));
        assert_eq!(exec(Op::Bitcast, DType::F32, &[Int(0x4000_0000)]), f(2.0));
        assert_eq!(exec(Op::Bitcast, DType::U32, &[Int(-1)]), Int(0xffff_ffff));
        assert_eq!(exec(Op::Bitcast, DType::I16, &[f(1.0)]), Int(0x3c00));
        let bf = exec_typed(Op::Bitcast, DType::U16, DType::BF16, &[f(1.0)]);
        assert_eq!(bf, Int(0x3f80));
        assert_eq!(exec(Op::Bitcast, DType::I64, &[f(-0.0)]), Int(i64::MIN));
    }

    #[test]
    #[should_panic(expected = "Bitcast from f64 to i32 changes the size")]
    fn bitcast_between_sizes_panics() {
        exec_typed(Op::Bitcast, DType::I32, DType::F64, &[f(1.0)]);
    }

    #[test]
    fn every_elementwise_op_group_member_runs_with_its_arity() {
        for &op in Op::UNARY {
            exec(op, DType::I32, &[Int(1)]);
        }
        for &op in Op::BINARY {
            exec(op, DType::I32, &[Int(6), Int(3)]);
        }
        for &op in Op::TERNARY {
            exec(op, DType::I32, &[Int(1), Int(2), Int(3)]);
        }
    }

    #[test]
    #[should_panic(expected = "Add takes 2 operands, got 1")]
    fn a_wrong_operand_count_panics() {
        exec(Op::Add, DType::F32, &[f(1.0)]);
    }

    #[test]
    #[should_panic(expected = "Reduce is not an elementwise op")]
    fn non_elementwise_ops_panic() {
        exec(Op::Reduce, DType::F32, &[f(1.0)]);
    }
}
