//! Small `static inline` C functions the C renderer emits on demand, each the exact C
//! counterpart of a rule of `uop::alu` that plain C operators do not give.

use crate::uop::DType;

/// The C name of a dtype's storage in memory (`bf16` is kept as its 16 bits).
pub fn storage_type(dtype: DType) -> &'static str {
    match dtype {
        DType::BF16 => "unsigned short",
        other => other.c_name(),
    }
}

/// A short tag of a dtype for helper names (`max_f32`, `idiv_i64`).
pub fn tag(dtype: DType) -> String {
    match dtype {
        DType::Index => "idx".to_string(),
        other => other.to_string(),
    }
}

/// Rounds a float to a half-precision value (kept in a `float`), as `alu` rounds every result.
pub const F16_ROUND: &str = "static inline float f16_round(float x) { return (float)(_Float16)x; }";

/// bf16 <-> float conversions and rounding (round to nearest even, NaN stays NaN).
pub const BF16: &str = "static inline float bf16_to_float(unsigned short b) {
  unsigned int u = (unsigned int)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline unsigned short float_to_bf16(float f) {
  unsigned int u;
  memcpy(&u, &f, 4);
  if (f != f) return (unsigned short)((u >> 16) | 0x40);
  return (unsigned short)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static inline float bf16_round(float x) { return bf16_to_float(float_to_bf16(x)); }";

/// Float to integer conversion as `Scalar::cast` defines it: NaN is 0, out-of-range values
/// saturate at the 64-bit limits, then the result wraps to the target width.
pub const FLOAT_TO_INT: &str = "static inline long long cast_f2i(double x) {
  if (x != x) return 0;
  if (x >= 9223372036854775807.0) return 9223372036854775807LL;
  if (x <= -9223372036854775808.0) return (-9223372036854775807LL - 1);
  return (long long)x;
}
static inline unsigned long long cast_f2u(double x) {
  if (x != x) return 0;
  if (x < 0) return (unsigned long long)cast_f2i(x);
  if (x >= 18446744073709551615.0) return 18446744073709551615ULL;
  return (unsigned long long)x;
}";

/// Threefry-2x32-20 of a 64-bit counter under a 64-bit key (`alu::threefry_u64`), its 20
/// rounds and 5 key injections written out with their constants: straight-line code, which
/// the C compiler vectorizes across the elements of a kernel's loop (a loop over a rotation
/// table it did not: 13.8 ns per number on a 2-core Xeon, session 21).
pub const THREEFRY: &str = "static inline unsigned int rotl32(unsigned int v, int r) { return (v << r) | (v >> (32 - r)); }
static inline void threefry_round(unsigned int* x0, unsigned int* x1, int r) {
  *x0 += *x1;
  *x1 = rotl32(*x1, r) ^ *x0;
}
static inline void threefry_rounds(unsigned int* x0, unsigned int* x1, int r0, int r1, int r2, int r3) {
  threefry_round(x0, x1, r0);
  threefry_round(x0, x1, r1);
  threefry_round(x0, x1, r2);
  threefry_round(x0, x1, r3);
}
static inline unsigned long long threefry2x32(unsigned long long counter, unsigned long long key) {
  unsigned int k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32);
  unsigned int k2 = 0x1BD11BDAu ^ k0 ^ k1;
  unsigned int x0 = (unsigned int)counter + k0;
  unsigned int x1 = (unsigned int)(counter >> 32) + k1;
  threefry_rounds(&x0, &x1, 13, 15, 26, 6);
  x0 += k1; x1 += k2 + 1u;
  threefry_rounds(&x0, &x1, 17, 29, 16, 24);
  x0 += k2; x1 += k0 + 2u;
  threefry_rounds(&x0, &x1, 13, 15, 26, 6);
  x0 += k0; x1 += k1 + 3u;
  threefry_rounds(&x0, &x1, 17, 29, 16, 24);
  x0 += k1; x1 += k2 + 4u;
  threefry_rounds(&x0, &x1, 13, 15, 26, 6);
  x0 += k2; x1 += k0 + 5u;
  return ((unsigned long long)x1 << 32) | x0;
}";

/// `max` that propagates NaN (floats) or compares in the dtype (ints).
pub fn max(dtype: DType, ctype: &str) -> String {
    let t = tag(dtype);
    if dtype.is_float() {
        format!(
            "static inline {ctype} max_{t}({ctype} a, {ctype} b) {{ return (a != a || b != b) ? a + b : (a > b ? a : b); }}"
        )
    } else {
        format!("static inline {ctype} max_{t}({ctype} a, {ctype} b) {{ return a > b ? a : b; }}")
    }
}

/// Integer division and remainder that give 0 for a zero divisor and wrap `MIN / -1`.
pub fn idiv_mod(dtype: DType, ctype: &str) -> String {
    let t = tag(dtype);
    let min_guard = if dtype.is_signed_int() {
        format!(
            "  if (b == -1) return ({ctype})(0 - ({unsigned})a);\n",
            unsigned = unsigned_of(dtype)
        )
    } else {
        String::new()
    };
    let mod_guard = if dtype.is_signed_int() {
        "  if (b == -1) return 0;\n"
    } else {
        ""
    };
    format!(
        "static inline {ctype} idiv_{t}({ctype} a, {ctype} b) {{\n  if (b == 0) return 0;\n{min_guard}  return a / b;\n}}\nstatic inline {ctype} mod_{t}({ctype} a, {ctype} b) {{\n  if (b == 0) return 0;\n{mod_guard}  return a % b;\n}}"
    )
}

/// Shifts that give 0 for a negative amount or one of at least the width.
pub fn shifts(dtype: DType, ctype: &str) -> String {
    let t = tag(dtype);
    let width = if dtype == DType::Bool {
        1
    } else {
        dtype.bits()
    };
    let unsigned = unsigned_of(dtype);
    format!(
        "static inline {ctype} shl_{t}({ctype} a, long long b) {{ return (b < 0 || b >= {width}) ? 0 : ({ctype})(({unsigned})a << b); }}\nstatic inline {ctype} shr_{t}({ctype} a, long long b) {{ return (b < 0 || b >= {width}) ? 0 : ({ctype})(a >> b); }}"
    )
}

/// Exact integer power with wrapping, as `alu` defines it for negative exponents.
pub fn ipow(dtype: DType, ctype: &str) -> String {
    let t = tag(dtype);
    let unsigned = unsigned_of(dtype);
    format!(
        "static inline {ctype} pow_{t}({ctype} a, {ctype} b) {{
  if (b < 0) return (long long)a == 1 ? 1 : ((long long)a == -1 ? ((b % 2 == 0) ? 1 : -1) : 0);
  {unsigned} acc = 1;
  for ({ctype} i = 0; i < b && i < 64; i++) acc *= ({unsigned})a;
  if (b > 64) return (long long)a == 1 ? 1 : ((long long)a == -1 ? ((b % 2 == 0) ? 1 : -1) : 0);
  return ({ctype})acc;
}}"
    )
}

/// The unsigned C type of the same width (for wrapping arithmetic).
pub fn unsigned_of(dtype: DType) -> &'static str {
    match dtype.size_bytes() {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        _ => "unsigned long long",
    }
}

/// `memcpy`-based reinterpretation between two same-sized C types.
pub fn bitcast(from: DType, from_c: &str, to: DType, to_c: &str) -> String {
    format!(
        "static inline {to_c} bitcast_{f}_{t}({from_c} x) {{ {to_c} y; memcpy(&y, &x, sizeof(y)); return y; }}",
        f = tag(from),
        t = tag(to)
    )
}
