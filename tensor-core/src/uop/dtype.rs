//! Element types, their ranges, and the promotion lattice used when two types meet.

use std::fmt;

/// The element type of a UOp's value.
///
/// `Index` is the type of index arithmetic (ranges, shapes, offsets); `Void` is the type of
/// nodes that produce no value (stores, sinks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Booleans, one byte each.
    Bool,
    /// 8-bit signed integers.
    I8,
    /// 16-bit signed integers.
    I16,
    /// 32-bit signed integers (the default int, as JAX's).
    I32,
    /// 64-bit signed integers.
    I64,
    /// 8-bit unsigned integers.
    U8,
    /// 16-bit unsigned integers.
    U16,
    /// 32-bit unsigned integers.
    U32,
    /// 64-bit unsigned integers.
    U64,
    /// IEEE half precision.
    F16,
    /// bfloat16 (8 exponent bits, 7 mantissa bits).
    BF16,
    /// IEEE single precision (the default float).
    F32,
    /// IEEE double precision.
    F64,
    /// Index arithmetic inside kernels (64-bit).
    Index,
    /// Nodes that produce no value (stores, sinks).
    Void,
}

impl DType {
    /// Every dtype that holds a value, for tests that sweep over types.
    pub const ALL_VALUE_TYPES: [DType; 13] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// Size of one element in bytes (`Index` is stored as 64 bits, `Void` has none).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::Index => 8,
            DType::Void => 0,
        }
    }

    /// True for the floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for the integer types, signed or not, including `Index`.
    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// True for `I8`..`I64` and `Index`.
    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::Index
        )
    }

    /// True for `U8`..`U64`.
    pub fn is_unsigned_int(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// Bit width of an integer type.
    pub fn bits(self) -> u32 {
        (self.size_bytes() * 8) as u32
    }

    /// The smallest value of the type (as f64 for floats, which are unbounded here).
    pub fn min_value(self) -> Scalar {
        match self {
            DType::Bool => Scalar::Bool(false),
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => Scalar::Int(0),
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::Index => {
                Scalar::Int(i64::MIN >> (64 - self.bits()))
            }
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Scalar::Float(f64::NEG_INFINITY),
            DType::Void => Scalar::Int(0),
        }
    }

    /// The largest value of the type (`U64` saturates at `i64::MAX`).
    pub fn max_value(self) -> Scalar {
        match self {
            DType::Bool => Scalar::Bool(true),
            DType::U64 => Scalar::Int(i64::MAX),
            DType::U8 | DType::U16 | DType::U32 => Scalar::Int((1i64 << self.bits()) - 1),
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::Index => {
                Scalar::Int(i64::MAX >> (64 - self.bits()))
            }
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Scalar::Float(f64::INFINITY),
            DType::Void => Scalar::Int(0),
        }
    }

    /// Rank in the promotion lattice: bool < ints < floats, wider above narrower.
    fn promotion_rank(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::U8 => 1,
            DType::I8 => 2,
            DType::U16 => 3,
            DType::I16 => 4,
            DType::U32 => 5,
            DType::I32 => 6,
            DType::U64 => 7,
            DType::I64 => 8,
            DType::Index => 9,
            DType::F16 => 10,
            DType::BF16 => 11,
            DType::F32 => 12,
            DType::F64 => 13,
            DType::Void => 14,
        }
    }

    /// The type two operands are converted to before a binary op, as NumPy/JAX do for
    /// tensor-tensor operands: the wider kind wins; signed and unsigned of the same width
    /// meet at the next wider signed type; `F16` and `BF16` meet at `F32`.
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        use DType::*;
        match (a, b) {
            (F16, BF16) | (BF16, F16) => return F32,
            (U8, I8) | (I8, U8) => return I16,
            (U16, I16) | (I16, U16) => return I32,
            (U32, I32) | (I32, U32) => return I64,
            (U64, I64) | (I64, U64) => return I64,
            _ => {}
        }
        if a.promotion_rank() > b.promotion_rank() {
            a
        } else {
            b
        }
    }

    /// The dtype of a float result computed from this type (ints and bools become `F32`).
    pub fn to_float(self) -> DType {
        if self.is_float() { self } else { DType::F32 }
    }

    /// The name used in C source for this type.
    pub fn c_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "signed char",
            DType::I16 => "short",
            DType::I32 => "int",
            DType::I64 | DType::Index => "long long",
            DType::U8 => "unsigned char",
            DType::U16 => "unsigned short",
            DType::U32 => "unsigned int",
            DType::U64 => "unsigned long long",
            DType::F16 => "_Float16",
            DType::BF16 => "__bf16",
            DType::F32 => "float",
            DType::F64 => "double",
            DType::Void => "void",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Index => "index",
            DType::Void => "void",
        };
        f.write_str(name)
    }
}

/// One scalar value of any dtype: the payload of `Const`, the bounds of `min_max`.
///
/// Integers of every width are held as `i64` (`u64` values above `i64::MAX` wrap), floats of
/// every width as `f64`. Equality and hashing are by bits, so `NaN == NaN` and `0.0 != -0.0`,
/// as interning needs.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    /// A boolean.
    Bool(bool),
    /// Any integer, as `i64` (`u64` values above `i64::MAX` wrap).
    Int(i64),
    /// Any float, as `f64`.
    Float(f64),
}

impl Scalar {
    /// The value as an f64 (bools are 0 or 1).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as i64 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(x) => x,
        }
    }

    /// The value as an i64 (floats truncate toward zero, saturating).
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(x) => x as i64,
        }
    }

    /// The value as a truth value (non-zero is true).
    pub fn as_bool(self) -> bool {
        match self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(x) => x != 0.0,
        }
    }

    /// The value converted to `dtype`, rounded or wrapped as a C cast to that type would.
    pub fn cast(self, dtype: DType) -> Scalar {
        if dtype == DType::Bool {
            return Scalar::Bool(self.as_bool());
        }
        if dtype.is_float() {
            return Scalar::Float(round_to_float(self.as_f64(), dtype));
        }
        let wide = match self {
            Scalar::Float(x) if x.is_nan() => 0,
            Scalar::Float(x) if dtype.is_unsigned_int() && x >= 0.0 => x as u64 as i64,
            _ => self.as_i64(),
        };
        Scalar::Int(wrap_int(wide, dtype))
    }

    /// True when this is the value `v` (compares numerically, any variant).
    pub fn is(self, v: f64) -> bool {
        self.as_f64() == v
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Scalar::Bool(a), Scalar::Bool(b)) => a == b,
            (Scalar::Int(a), Scalar::Int(b)) => a == b,
            (Scalar::Float(a), Scalar::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Scalar {}

impl std::hash::Hash for Scalar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Scalar::Bool(b) => (0u8, *b as u64).hash(state),
            Scalar::Int(i) => (1u8, *i as u64).hash(state),
            Scalar::Float(x) => (2u8, x.to_bits()).hash(state),
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x:?}"),
        }
    }
}

impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Scalar::Float(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Scalar::Float(v as f64)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Scalar::Int(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Scalar::Int(v as i64)
    }
}
impl From<usize> for Scalar {
    fn from(v: usize) -> Self {
        Scalar::Int(v as i64)
    }
}
macro_rules! int_scalar_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(v: $t) -> Self {
                Scalar::Int(v as i64)
            }
        }
    )*};
}
// `u64` values above `i64::MAX` wrap to negative `Int`s; they are cast back by the dtype.
int_scalar_from!(i8, i16, u8, u16, u32, u64, isize);
impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Scalar::Bool(v)
    }
}

/// Wraps an integer to the width and signedness of `dtype`, as two's-complement hardware does.
pub fn wrap_int(v: i64, dtype: DType) -> i64 {
    match dtype {
        DType::I8 => v as i8 as i64,
        DType::I16 => v as i16 as i64,
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::U16 => v as u16 as i64,
        DType::U32 => v as u32 as i64,
        DType::Bool => (v != 0) as i64,
        _ => v,
    }
}

/// Rounds an f64 to the nearest value representable in the float type `dtype`.
pub fn round_to_float(v: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16_bits_to_f32(f32_to_f16_bits(v as f32)) as f64,
        DType::BF16 => bf16_bits_to_f32(f32_to_bf16_bits(v as f32)) as f64,
        _ => v,
    }
}

/// IEEE half precision from f32, round to nearest even.
pub fn f32_to_f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        let nan = if man != 0 { 0x200 } else { 0 };
        return sign | 0x7c00 | nan;
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rounded = m >> shift;
        let rest = m & ((1 << shift) - 1);
        let up = rest > half || (rest == half && rounded & 1 == 1);
        return sign | (rounded + up as u32) as u16;
    }
    let rounded = (e as u32) << 10 | (man >> 13);
    let rest = man & 0x1fff;
    let up = rest > 0x1000 || (rest == 0x1000 && rounded & 1 == 1);
    sign | (rounded + up as u32) as u16
}

/// f32 from IEEE half precision bits.
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            let value = man as f32 * 2f32.powi(-24);
            return if sign != 0 { -value } else { value };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000,
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// bfloat16 from f32, round to nearest even.
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounding = 0x7fff + ((bits >> 16) & 1);
    ((bits.wrapping_add(rounding)) >> 16) as u16
}

/// f32 from bfloat16 bits.
pub fn bf16_bits_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_follows_numpy_for_common_pairs() {
        assert_eq!(DType::promote(DType::I32, DType::F32), DType::F32);
        assert_eq!(DType::promote(DType::Bool, DType::I8), DType::I8);
        assert_eq!(DType::promote(DType::U8, DType::I8), DType::I16);
        assert_eq!(DType::promote(DType::F16, DType::BF16), DType::F32);
        assert_eq!(DType::promote(DType::F32, DType::F64), DType::F64);
        assert_eq!(DType::promote(DType::U32, DType::I32), DType::I64);
    }

    #[test]
    fn half_precision_round_trips_representable_values() {
        for v in [0.0f32, 1.0, -2.5, 65504.0, 6.1035156e-5, 5.9604645e-8] {
            assert_eq!(f16_bits_to_f32(f32_to_f16_bits(v)), v);
            assert_eq!(bf16_bits_to_f32(f32_to_bf16_bits(1.0)), 1.0);
        }
        assert!(f16_bits_to_f32(f32_to_f16_bits(1e6)).is_infinite());
        assert_eq!(round_to_float(1.0 + 1.0 / 4096.0, DType::F16), 1.0);
    }

    #[test]
    fn casts_wrap_like_c() {
        assert_eq!(Scalar::Int(300).cast(DType::U8), Scalar::Int(44));
        assert_eq!(Scalar::Int(-1).cast(DType::U16), Scalar::Int(65535));
        assert_eq!(Scalar::Float(-2.7).cast(DType::I32), Scalar::Int(-2));
        assert_eq!(Scalar::Float(0.5).cast(DType::Bool), Scalar::Bool(true));
    }
}

/// A Rust scalar type that can be an element of a tensor.
pub trait Element: Copy + Send + Sync + std::fmt::Debug + 'static {
    /// The dtype this Rust type stands for.
    const DTYPE: DType;
    /// This value as a [`Scalar`].
    fn to_scalar(self) -> Scalar;
    /// The value of a [`Scalar`] of this element's dtype.
    fn from_scalar(s: Scalar) -> Self;
    /// The elements encoded little-endian in `bytes` (as [`encode_scalars`] writes them for
    /// this element's dtype).
    fn decode_all(bytes: &[u8]) -> Vec<Self> {
        let mut out = Vec::with_capacity(bytes.len() / Self::DTYPE.size_bytes());
        Self::decode_into(bytes, &mut out);
        out
    }
    /// Appends the elements encoded in `bytes` (a whole number of them) to `out`.
    fn decode_into(bytes: &[u8], out: &mut Vec<Self>) {
        out.extend(
            decode_scalars(bytes, Self::DTYPE)
                .into_iter()
                .map(Self::from_scalar),
        );
    }
}

/// `decode_into` of a primitive numeric type: its little-endian bytes, read in place.
macro_rules! decode_le {
    ($t:ty) => {
        fn decode_into(bytes: &[u8], out: &mut Vec<Self>) {
            out.extend(
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("a whole element"))),
            );
        }
    };
}

macro_rules! float_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn to_scalar(self) -> Scalar {
                Scalar::Float(self as f64)
            }
            fn from_scalar(s: Scalar) -> Self {
                s.as_f64() as $t
            }
            decode_le!($t);
        }
    };
}
macro_rules! int_element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn to_scalar(self) -> Scalar {
                Scalar::Int(self as i64)
            }
            fn from_scalar(s: Scalar) -> Self {
                s.as_i64() as $t
            }
            decode_le!($t);
        }
    };
}
float_element!(f32, DType::F32);
float_element!(f64, DType::F64);
int_element!(i8, DType::I8);
int_element!(i16, DType::I16);
int_element!(i32, DType::I32);
int_element!(i64, DType::I64);
int_element!(u8, DType::U8);
int_element!(u16, DType::U16);
int_element!(u32, DType::U32);
int_element!(u64, DType::U64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn to_scalar(self) -> Scalar {
        Scalar::Bool(self)
    }
    fn from_scalar(s: Scalar) -> Self {
        s.as_bool()
    }
}

/// Little-endian bytes of `values` stored as `dtype` (values are cast to it first).
pub fn encode_scalars(values: &[Scalar], dtype: DType) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.size_bytes());
    for v in values {
        let v = v.cast(dtype);
        match dtype {
            DType::Bool => out.push(v.as_bool() as u8),
            DType::F16 => out.extend_from_slice(&f32_to_f16_bits(v.as_f64() as f32).to_le_bytes()),
            DType::BF16 => {
                out.extend_from_slice(&f32_to_bf16_bits(v.as_f64() as f32).to_le_bytes())
            }
            DType::F32 => out.extend_from_slice(&(v.as_f64() as f32).to_le_bytes()),
            DType::F64 => out.extend_from_slice(&v.as_f64().to_le_bytes()),
            _ => {
                let bytes = v.as_i64().to_le_bytes();
                out.extend_from_slice(&bytes[..dtype.size_bytes()]);
            }
        }
    }
    out
}

/// The values stored little-endian as `dtype` in `bytes`.
pub fn decode_scalars(bytes: &[u8], dtype: DType) -> Vec<Scalar> {
    let size = dtype.size_bytes();
    bytes
        .chunks_exact(size)
        .map(|c| match dtype {
            DType::Bool => Scalar::Bool(c[0] != 0),
            DType::F16 => Scalar::Float(f16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64),
            DType::BF16 => Scalar::Float(bf16_bits_to_f32(u16::from_le_bytes([c[0], c[1]])) as f64),
            DType::F32 => Scalar::Float(f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64),
            DType::F64 => Scalar::Float(f64::from_le_bytes(c.try_into().expect("8 bytes"))),
            _ => {
                let mut wide = [0u8; 8];
                wide[..size].copy_from_slice(c);
                let raw = i64::from_le_bytes(wide);
                let signed = if dtype.is_signed_int() && size < 8 {
                    let shift = 64 - 8 * size as u32;
                    (raw << shift) >> shift
                } else {
                    raw
                };
                Scalar::Int(signed)
            }
        })
        .collect()
}
