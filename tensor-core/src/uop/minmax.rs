//! Derived bounds `[min, max]` of a node's value (tinyspec "Derived Properties", min_max column).
//!
//! The bounds are what symbolic simplification reasons with: `x % n -> x` needs `0 <= x < n`.
//! Integer bounds are exact intervals (saturating at the i64 range); float bounds are only
//! tracked for constants, everything else is the dtype's range.

use super::{Arg, DType, Op, Scalar, UOp};

/// The bounds of `u`'s value.
pub fn derive(u: &UOp) -> (Scalar, Scalar) {
    let dtype_range = (u.dtype().min_value(), u.dtype().max_value());
    if u.dtype() == DType::Void {
        return dtype_range;
    }
    if let Some(v) = u.const_value() {
        return (v, v);
    }
    let int_like = u.dtype().is_int() || u.dtype() == DType::Bool;
    let bounds = match u.op() {
        Op::Range => range_bounds(u),
        Op::DefineVar => define_var_bounds(u),
        Op::Param if u.src().len() == 3 => Some((u.s(1).vmin().as_i64(), u.s(2).vmax().as_i64())),
        op if op.is_movement() || matches!(op, Op::Copy | Op::Contiguous | Op::Detach) => {
            let s = u.src().first().filter(|s| s.dtype() == u.dtype());
            return s.map_or(dtype_range, |s| s.min_max());
        }
        Op::Vconst => match u.arg() {
            Arg::Vconst(v) if !v.is_empty() && int_like => {
                let ints = v.iter().map(|x| x.as_i64());
                Some((ints.clone().min().unwrap_or(0), ints.max().unwrap_or(0)))
            }
            _ => None,
        },
        Op::Cast if int_like && (u.s(0).dtype().is_int() || u.s(0).dtype() == DType::Bool) => {
            let (lo, hi) = (u.s(0).vmin().as_i64(), u.s(0).vmax().as_i64());
            let (dlo, dhi) = (dtype_range.0.as_i64(), dtype_range.1.as_i64());
            // A cast that can wrap gives no bounds beyond the dtype's.
            (lo >= dlo && hi <= dhi).then_some((lo, hi))
        }
        _ if int_like
            && u.src()
                .iter()
                .all(|s| s.dtype().is_int() || s.dtype() == DType::Bool) =>
        {
            alu_bounds(u)
        }
        Op::CmpLt | Op::CmpNe | Op::CmpEq | Op::CmpGt | Op::CmpGe | Op::CmpLe => alu_bounds(u),
        Op::Where if !int_like => None,
        _ => None,
    };
    match bounds {
        Some((lo, hi)) if u.dtype() == DType::Bool => {
            (Scalar::Bool(lo != 0), Scalar::Bool(hi != 0))
        }
        Some((lo, hi)) if int_like => (Scalar::Int(lo), Scalar::Int(hi)),
        _ => dtype_range,
    }
}

fn range_bounds(u: &UOp) -> Option<(i64, i64)> {
    let bound = u.src().first()?;
    Some((0, bound.vmax().as_i64().saturating_sub(1)))
}

fn define_var_bounds(u: &UOp) -> Option<(i64, i64)> {
    Some((
        u.src().first()?.vmin().as_i64(),
        u.src().get(1)?.vmax().as_i64(),
    ))
}

fn ival(u: &UOp) -> (i64, i64) {
    (u.vmin().as_i64(), u.vmax().as_i64())
}

fn span(values: &[i64]) -> (i64, i64) {
    let lo = *values.iter().min().expect("non-empty");
    let hi = *values.iter().max().expect("non-empty");
    (lo, hi)
}

/// Interval arithmetic for integer ALU ops.
fn alu_bounds(u: &UOp) -> Option<(i64, i64)> {
    let src = u.src();
    let (a, b) = (ival(src.first()?), src.get(1).map(ival).unwrap_or((0, 0)));
    let bounds = match u.op() {
        Op::Add => (a.0.saturating_add(b.0), a.1.saturating_add(b.1)),
        Op::Sub => (a.0.saturating_sub(b.1), a.1.saturating_sub(b.0)),
        Op::Neg => (a.1.saturating_neg(), a.0.saturating_neg()),
        Op::Mul => span(&[
            a.0.saturating_mul(b.0),
            a.0.saturating_mul(b.1),
            a.1.saturating_mul(b.0),
            a.1.saturating_mul(b.1),
        ]),
        Op::Max => (a.0.max(b.0), a.1.max(b.1)),
        Op::Idiv if b.0 > 0 => span(&[a.0 / b.0, a.0 / b.1, a.1 / b.0, a.1 / b.1]),
        Op::Idiv if b.1 < 0 => span(&[a.0 / b.0, a.0 / b.1, a.1 / b.0, a.1 / b.1]),
        Op::Mod if b.0 > 0 && a.0 >= 0 => (0, a.1.min(b.1 - 1)),
        Op::Mod if b.0 > 0 => ((-(b.1 - 1)).max(a.0.min(0)), a.1.clamp(0, b.1 - 1)),
        Op::CmpLt => compare(a.1 < b.0, a.0 >= b.1),
        Op::CmpGt => compare(a.0 > b.1, a.1 <= b.0),
        Op::CmpLe => compare(a.1 <= b.0, a.0 > b.1),
        Op::CmpGe => compare(a.0 >= b.1, a.1 < b.0),
        Op::CmpNe => compare(a.1 < b.0 || a.0 > b.1, a == b && a.0 == a.1),
        Op::CmpEq => compare(a == b && a.0 == a.1, a.1 < b.0 || a.0 > b.1),
        Op::Where => {
            let c = ival(src.get(2)?);
            let (t, f) = (b, c);
            match a {
                (0, 0) => f,
                (lo, _) if lo != 0 && a.0 > 0 => t,
                _ => (t.0.min(f.0), t.1.max(f.1)),
            }
        }
        Op::And if a.0 >= 0 && b.0 >= 0 => (0, a.1.min(b.1)),
        Op::Shl if a.0 >= 0 && b.0 >= 0 && b.1 < 62 => (a.0 << b.0, a.1.saturating_mul(1 << b.1)),
        Op::Shr if a.0 >= 0 && b.0 >= 0 && b.1 < 63 => (a.0 >> b.1, a.1 >> b.0),
        _ => return None,
    };
    Some(bounds)
}

fn compare(always: bool, never: bool) -> (i64, i64) {
    match (always, never) {
        (true, _) => (1, 1),
        (_, true) => (0, 0),
        _ => (0, 1),
    }
}

#[cfg(test)]
mod tests {
    use crate::uop::{AxisType, DType, Op, Scalar, UOp};

    #[test]
    fn ranges_and_arithmetic_have_interval_bounds() {
        let r = UOp::range(8, 0, AxisType::Loop);
        assert_eq!(r.min_max(), (Scalar::Int(0), Scalar::Int(7)));
        let e = UOp::alu(
            Op::Add,
            vec![
                UOp::alu(Op::Mul, vec![r.clone(), UOp::index(4)]),
                UOp::index(3),
            ],
        );
        assert_eq!(e.min_max(), (Scalar::Int(3), Scalar::Int(31)));
        let m = UOp::alu(Op::Mod, vec![e.clone(), UOp::index(5)]);
        assert_eq!(m.min_max(), (Scalar::Int(0), Scalar::Int(4)));
        let d = UOp::alu(Op::Idiv, vec![e, UOp::index(4)]);
        assert_eq!(d.min_max(), (Scalar::Int(0), Scalar::Int(7)));
        let lt = UOp::alu(Op::CmpLt, vec![r, UOp::index(8)]);
        assert_eq!(lt.min_max(), (Scalar::Bool(true), Scalar::Bool(true)));
    }

    #[test]
    fn float_values_take_the_dtype_range() {
        let x = UOp::new_buffer(3, DType::F32, crate::uop::Device::cpu());
        assert_eq!(x.vmin(), Scalar::Float(f64::NEG_INFINITY));
        assert_eq!(UOp::constant(2.5, DType::F32).vmax(), Scalar::Float(2.5));
    }
}
