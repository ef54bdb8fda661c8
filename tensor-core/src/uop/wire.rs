//! Fields written as bytes that read back the same in any process of the same build: integers
//! little-endian, strings and lists with their length first, and the IR's leaf types (op,
//! dtype, scalar, device) by fixed codes. The building block of [`super::stable_form`] and of
//! the runtime's plans kept on disk.

use super::{DType, Device, Op, Scalar};
use std::fmt;

/// Why bytes could not be read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireError(String);

impl WireError {
    /// An error saying what was found where.
    pub fn new(why: impl Into<String>) -> WireError {
        WireError(why.into())
    }
}

/// Reads as the predicate of "the bytes …": "end after 12 bytes, where a u64 was expected".
impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

/// Appends fields to a byte vector.
#[derive(Default, Debug)]
pub struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Writer {
        Writer::default()
    }

    /// The bytes written so far.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }

    /// One byte.
    pub fn u8(&mut self, value: u8) {
        self.bytes.push(value);
    }

    /// A `u64`, little-endian.
    pub fn u64(&mut self, value: u64) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    /// A `usize`, as a `u64`.
    pub fn usize(&mut self, value: usize) {
        self.u64(value as u64);
    }

    /// An `i64`, little-endian.
    pub fn i64(&mut self, value: i64) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    /// A bool, as one byte.
    pub fn bool(&mut self, value: bool) {
        self.u8(u8::from(value));
    }

    /// A string: its length, then its UTF-8 bytes.
    pub fn str(&mut self, value: &str) {
        self.usize(value.len());
        self.bytes.extend_from_slice(value.as_bytes());
    }

    /// A byte string: its length, then the bytes.
    pub fn bytes(&mut self, value: &[u8]) {
        self.usize(value.len());
        self.bytes.extend_from_slice(value);
    }

    /// An op, by its discriminant.
    pub fn op(&mut self, op: Op) {
        self.u8(op as u8);
    }

    /// A dtype, by its discriminant.
    pub fn dtype(&mut self, dtype: DType) {
        self.u8(dtype as u8);
    }

    /// A scalar: its kind, then its value (a float by its bits, so `-0.0` and NaNs survive).
    pub fn scalar(&mut self, value: Scalar) {
        match value {
            Scalar::Bool(b) => {
                self.u8(0);
                self.bool(b);
            }
            Scalar::Int(i) => {
                self.u8(1);
                self.i64(i);
            }
            Scalar::Float(x) => {
                self.u8(2);
                self.u64(x.to_bits());
            }
        }
    }

    /// A device: one name, or the names it is sharded across.
    pub fn device(&mut self, device: &Device) {
        match device {
            Device::Single(name) => {
                self.u8(0);
                self.str(name);
            }
            Device::Multi(names) => {
                self.u8(1);
                self.usize(names.len());
                names.iter().for_each(|n| self.str(n));
            }
        }
    }
}

/// Reads fields in the order a [`Writer`] wrote them, checking every length against what is
/// left.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    /// True when every byte has been read.
    pub fn is_done(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// Fails unless every byte has been read.
    pub fn expect_end(&self) -> Result<(), WireError> {
        if self.is_done() {
            Ok(())
        } else {
            Err(WireError::new(format!(
                "have {} bytes after the last field",
                self.bytes.len() - self.at
            )))
        }
    }

    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(len).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(WireError::new(format!(
                "end after {} bytes, where {what} was expected",
                self.bytes.len()
            )));
        };
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1, "a byte")?[0])
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let bytes = self.take(8, "a u64")?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }

    /// A `usize` written as a `u64`.
    pub fn usize(&mut self) -> Result<usize, WireError> {
        let value = self.u64()?;
        usize::try_from(value)
            .map_err(|_| WireError::new(format!("hold {value}, too large for a usize")))
    }

    /// A count of items that each take at least one more byte: never more than are left, so
    /// a damaged count cannot ask for a huge allocation.
    pub fn count(&mut self) -> Result<usize, WireError> {
        let count = self.usize()?;
        let left = self.bytes.len() - self.at;
        if count > left {
            return Err(WireError::new(format!(
                "count {count} items where only {left} bytes are left"
            )));
        }
        Ok(count)
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self) -> Result<i64, WireError> {
        let bytes = self.take(8, "an i64")?;
        Ok(i64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }

    /// A bool written as one byte.
    pub fn bool(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(WireError::new(format!("hold {other} where a bool was"))),
        }
    }

    /// A string: its length, then UTF-8 bytes.
    pub fn str(&mut self) -> Result<String, WireError> {
        let len = self.usize()?;
        let bytes = self.take(len, "a string")?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| WireError::new("hold a string that is not UTF-8"))
    }

    /// A byte string written by [`Writer::bytes`].
    pub fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let len = self.usize()?;
        self.take(len, "a byte string")
    }

    /// An op written by [`Writer::op`].
    pub fn op(&mut self) -> Result<Op, WireError> {
        let code = self.u8()?;
        OPS.get(usize::from(code))
            .copied()
            .flatten()
            .ok_or_else(|| WireError::new(format!("hold unknown op code {code}")))
    }

    /// A dtype written by [`Writer::dtype`].
    pub fn dtype(&mut self) -> Result<DType, WireError> {
        let code = self.u8()?;
        DTYPES
            .get(usize::from(code))
            .copied()
            .ok_or_else(|| WireError::new(format!("hold unknown dtype code {code}")))
    }

    /// A scalar written by [`Writer::scalar`].
    pub fn scalar(&mut self) -> Result<Scalar, WireError> {
        match self.u8()? {
            0 => Ok(Scalar::Bool(self.bool()?)),
            1 => Ok(Scalar::Int(self.i64()?)),
            2 => Ok(Scalar::Float(f64::from_bits(self.u64()?))),
            other => Err(WireError::new(format!("hold unknown scalar kind {other}"))),
        }
    }

    /// A device written by [`Writer::device`].
    pub fn device(&mut self) -> Result<Device, WireError> {
        match self.u8()? {
            0 => Ok(Device::Single(self.str()?)),
            1 => {
                let count = self.count()?;
                let names = (0..count).map(|_| self.str()).collect::<Result<_, _>>()?;
                Ok(Device::Multi(names))
            }
            other => Err(WireError::new(format!("hold unknown device kind {other}"))),
        }
    }
}

/// Every dtype, by discriminant.
const DTYPES: [DType; 15] = [
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
    DType::Index,
    DType::Void,
];

/// Every op, by discriminant; `None` at the discriminants of removed ops, so that their codes
/// are not read as another op. An op added to `Op` but not here fails to read back (a cache
/// entry holding it is then rebuilt), and the test below says so.
const OPS: [Option<Op>; 69] = [
    Some(Op::Buffer),
    None, // was `BufferView`
    Some(Op::Param),
    Some(Op::Const),
    Some(Op::Vconst),
    Some(Op::DefineVar),
    Some(Op::Permute),
    Some(Op::Flip),
    Some(Op::Reshape),
    Some(Op::Expand),
    Some(Op::Pad),
    Some(Op::Shrink),
    Some(Op::Index),
    Some(Op::Stack),
    None, // was `Replicated`
    Some(Op::Reduce),
    Some(Op::Function),
    Some(Op::Call),
    Some(Op::Tuple),
    Some(Op::GetTuple),
    Some(Op::Store),
    Some(Op::Range),
    None, // was `After`
    None, // was `Group`
    Some(Op::Sink),
    Some(Op::Recip),
    Some(Op::Trunc),
    Some(Op::Cast),
    Some(Op::Bitcast),
    Some(Op::Copy),
    Some(Op::Add),
    Some(Op::Mul),
    Some(Op::Max),
    Some(Op::Mod),
    Some(Op::Idiv),
    Some(Op::CmpLt),
    Some(Op::CmpNe),
    Some(Op::Xor),
    Some(Op::Or),
    Some(Op::And),
    Some(Op::Shr),
    Some(Op::Shl),
    Some(Op::Where),
    Some(Op::Neg),
    Some(Op::Sub),
    Some(Op::Div),
    Some(Op::CmpGt),
    Some(Op::CmpGe),
    Some(Op::CmpLe),
    Some(Op::CmpEq),
    None, // was `Not`
    Some(Op::Exp2),
    Some(Op::Log2),
    Some(Op::Sin),
    Some(Op::Sqrt),
    Some(Op::Pow),
    Some(Op::Mulacc),
    Some(Op::Threefry),
    Some(Op::Contiguous),
    Some(Op::ContiguousBackward),
    Some(Op::Detach),
    Some(Op::Vmapin),
    Some(Op::Vmapout),
    Some(Op::Address),
    Some(Op::Load),
    Some(Op::DefineGlobal),
    Some(Op::Cos),
    Some(Op::Erf),
    Some(Op::Erfc),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Exhaustive, so adding an op fails to compile here until this test (and [`OPS`]) list
    /// it: the table is then checked to hold every op at its discriminant.
    fn listed(op: Op) -> bool {
        match op {
            Op::Buffer | Op::Param | Op::Const | Op::Vconst | Op::DefineVar => true,
            Op::Permute | Op::Flip | Op::Reshape | Op::Expand | Op::Pad | Op::Shrink => true,
            Op::Index | Op::Stack | Op::Reduce | Op::Function | Op::Call => true,
            Op::Tuple | Op::GetTuple | Op::Store | Op::Range => true,
            Op::Sink | Op::Recip | Op::Trunc | Op::Cast | Op::Bitcast | Op::Copy => true,
            Op::Add | Op::Mul | Op::Max | Op::Mod | Op::Idiv | Op::CmpLt | Op::CmpNe => true,
            Op::Xor | Op::Or | Op::And | Op::Shr | Op::Shl | Op::Where | Op::Neg => true,
            Op::Sub | Op::Div | Op::CmpGt | Op::CmpGe | Op::CmpLe | Op::CmpEq => true,
            Op::Exp2 | Op::Log2 | Op::Sin | Op::Sqrt | Op::Pow | Op::Mulacc => true,
            Op::Threefry | Op::Contiguous | Op::ContiguousBackward | Op::Detach => true,
            Op::Vmapin | Op::Vmapout | Op::Address | Op::Load | Op::DefineGlobal => true,
            Op::Cos | Op::Erf | Op::Erfc => true,
        }
    }

    #[test]
    fn every_op_and_dtype_sits_at_its_discriminant() {
        let ops: Vec<(usize, Op)> = OPS
            .iter()
            .enumerate()
            .filter_map(|(code, op)| Some((code, (*op)?)))
            .collect();
        for &(code, op) in &ops {
            assert!(listed(op));
            assert_eq!(op as usize, code, "{op:?}");
        }
        assert_eq!(ops.len(), 64, "each of the 64 variants of `Op` once");
        for (code, dtype) in DTYPES.iter().enumerate() {
            assert_eq!(*dtype as usize, code, "{dtype:?}");
        }
    }

    #[test]
    fn fields_read_back_as_written() {
        let mut w = Writer::new();
        w.op(Op::Erfc);
        w.dtype(DType::BF16);
        w.scalar(Scalar::Float(-0.0));
        w.scalar(Scalar::Int(-7));
        w.device(&Device::Multi(vec!["CUDA:0".into(), "CUDA:1".into()]));
        w.str("é");
        w.bytes(&[1, 2]);
        let bytes = w.finish();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.op(), Ok(Op::Erfc));
        assert_eq!(r.dtype(), Ok(DType::BF16));
        let zero = r.scalar().unwrap();
        assert!(matches!(zero, Scalar::Float(x) if x.to_bits() == (-0.0f64).to_bits()));
        assert_eq!(r.scalar(), Ok(Scalar::Int(-7)));
        assert_eq!(
            r.device(),
            Ok(Device::Multi(vec!["CUDA:0".into(), "CUDA:1".into()]))
        );
        assert_eq!(r.str().as_deref(), Ok("é"));
        assert_eq!(r.bytes(), Ok(&[1u8, 2][..]));
        assert!(r.expect_end().is_ok());
    }

    #[test]
    fn damaged_bytes_are_errors_not_panics_or_huge_allocations() {
        let mut w = Writer::new();
        w.u64(u64::MAX);
        let bytes = w.finish();
        assert!(Reader::new(&bytes).count().is_err());
        assert!(Reader::new(&bytes).str().is_err());
        assert!(Reader::new(&bytes[..3]).u64().is_err());
        assert!(Reader::new(&[200]).op().is_err());
        assert!(Reader::new(&[1]).op().is_err(), "the code of a removed op");
        assert!(Reader::new(&[2]).bool().is_err());
    }
}
