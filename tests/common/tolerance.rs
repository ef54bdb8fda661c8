//! How closely compiled kernels must agree with the reference interpreter (or a reference
//! loop): the one statement of the policy that the differential tests share, the facade's
//! (`compiled_ops`, `compiled_random_graphs`, `compiled_proptest`) and `tensor-core`'s C
//! codegen tests (which include this file by path). It names no crate, so both can.
//!
//! - Integers and bools: exactly.
//! - Floats: within `FLOAT_ATOL + FLOAT_RTOL * |expected|` (a test whose values are
//!   bounded by `b` scales the absolute part by `max(1, b)`), with NaN equal to NaN and
//!   infinities equal only to themselves. Kernels are compiled with `-ffp-contract=fast`,
//!   so `a*b+c` may be one FMA (one rounding where the interpreter rounds twice), and the
//!   upcast and vectorized code may add the terms of a reduction in a different order; both
//!   move a result by a few ulp of its intermediate values, far below `1e-4`. The flags keep
//!   IEEE special values, so a NaN or infinity the interpreter computes is computed too.

/// The relative part of the float tolerance.
pub const FLOAT_RTOL: f64 = 1e-4;

/// The absolute part of the float tolerance (for values of magnitude about 1).
pub const FLOAT_ATOL: f64 = 1e-4;

/// True when `got` is within the float tolerance of `want` (scaled by `bound`), NaN matching
/// NaN and an infinity matching only itself; for integer dtypes, call with exact values and
/// use `==` instead.
pub fn float_close(got: f64, want: f64, bound: f64) -> bool {
    if !want.is_finite() || !got.is_finite() {
        return got == want || (got.is_nan() && want.is_nan());
    }
    (got - want).abs() <= FLOAT_ATOL * bound.max(1.0) + FLOAT_RTOL * want.abs()
}

/// True when every compiled value `got` agrees with the reference's `want` under the policy
/// above: by [`float_close`] (scaled by `bound`) for a float dtype (`is_float`), exactly
/// otherwise.
pub fn agree(got: &[f64], want: &[f64], is_float: bool, bound: f64) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(&g, &w)| match is_float {
            true => float_close(g, w, bound),
            false => g == w,
        })
}
