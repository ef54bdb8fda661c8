//! `a ** b` of `f32` by C99 Annex F (IEEE `pow`, as libm, NumPy and PyTorch), from `exp2` and
//! `log2`: `exp2(b * log2|a|)` signed by the exponent's parity, with the table's special rows.
//! The base's sign is its sign bit, so `-0.0` and `-inf` take the odd-exponent sign; a negative
//! base gives NaN only when it is finite, non-zero and the exponent is not an integer
//! (`(-inf) ** 0.5 = inf`, `(-0) ** 0.5 = 0`); `1 ** y = 1` and `(-1) ** ±inf = 1` (where
//! `inf * log2 1` would be NaN); `x ** 0 = 1`, NaN included.

use super::{and, bits, eq, exp2, float, from_bits, int, log2, lt, mul, select};
use crate::uop::{DType, Op, UOp};

/// `a ** b` for `f32` nodes.
pub(super) fn pow(a: &UOp, b: &UOp) -> UOp {
    let one = float(1.0);
    let inf = float(f64::INFINITY);
    let negative = lt(&bits(a), &int(0));
    let abs_a = magnitude(a);
    let magnitude_of_power = exp2(&mul(b, &log2(&abs_a)));
    let b_finite = lt(&magnitude(b), &inf);
    let unit_to_infinity = select(
        &b_finite,
        &UOp::constant(false, DType::Bool),
        &eq(&abs_a, &one),
    );
    let unsigned = select(&unit_to_infinity, &one, &magnitude_of_power);
    let signed = mul(
        &unsigned,
        &select(&negative, &sign_of_negative_base(&abs_a, b), &one),
    );
    select(&eq(b, &float(0.0)), &one, &signed)
}

/// `|x|`: `x` with its sign bit cleared (`-0.0`, `-inf` and NaN included).
fn magnitude(x: &UOp) -> UOp {
    from_bits(&and(&bits(x), &int(0x7fff_ffff)))
}

/// The factor a negative base's power takes: -1 for an odd integer exponent, 1 for an even
/// one, NaN for a fractional one unless the base is `-0` or `-inf` (1: the power is `0` or
/// `inf` either way).
fn sign_of_negative_base(abs_a: &UOp, b: &UOp) -> UOp {
    let one = float(1.0);
    let b_trunc = UOp::alu(Op::Trunc, vec![b.clone()]);
    let b_is_integer = eq(&b_trunc, b);
    let half_trunc = UOp::alu(Op::Trunc, vec![mul(b, &float(0.5))]);
    let b_is_odd = UOp::alu(Op::CmpNe, vec![mul(&half_trunc, &float(2.0)), b_trunc]);
    let odd_sign = select(&b_is_odd, &float(-1.0), &one);
    let finite = lt(abs_a, &float(f64::INFINITY));
    let nonzero = lt(&float(0.0), abs_a);
    let finite_nonzero = and(&finite, &nonzero);
    let fractional_sign = select(&finite_nonzero, &float(f64::NAN), &one);
    select(&b_is_integer, &odd_sign, &fractional_sign)
}
