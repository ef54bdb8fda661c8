//! A UOp graph as bytes that are the same in every process for the same graph, and the graph
//! read back from them.
//!
//! Nodes are interned by address, so neither their ids nor their in-memory hashes mean
//! anything to another process. The stable form lists the nodes in topological order
//! (operands first, the order of [`UOp::toposort`]), each as its op, dtype, tag, arg and the
//! positions of its operands in the list; the roots are the operands of a final `Sink`. Equal
//! graphs give equal bytes, so a strong hash of the bytes is a key a disk cache can use.
//!
//! Buffers are written by a number the caller gives (a placeholder's own number by default),
//! never by their ids. Args that name a process's own values (a custom function's rules, an
//! external's definition) have no stable form: such a graph is [`Unencodable`].

use super::arg::BufferArg;
use super::wire::{Reader, WireError, Writer};
use super::{Arg, AxisType, DType, Device, Op, ReduceOp, UOp};
use std::collections::HashMap;
use std::fmt;

/// Why a graph has no stable form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unencodable(String);

/// Reads as the predicate of "the graph …".
impl fmt::Display for Unencodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unencodable {}

/// The stable form of the graphs under `roots`, whose buffers are all placeholders.
pub fn encode(roots: &[UOp]) -> Result<Vec<u8>, Unencodable> {
    encode_with(roots, |b| b.placeholder_number().map(|n| n as u64))
}

/// The stable form of the graphs under `roots`, each buffer written as `number(buffer)`
/// (with its size, dtype and device); a buffer without a number makes the graph unencodable.
pub fn encode_with(
    roots: &[UOp],
    number: impl Fn(&BufferArg) -> Option<u64>,
) -> Result<Vec<u8>, Unencodable> {
    let sink = UOp::sink(roots.to_vec());
    let nodes = sink.toposort();
    let position: HashMap<usize, usize> =
        nodes.iter().enumerate().map(|(i, n)| (n.id(), i)).collect();
    let mut w = Writer::new();
    w.usize(nodes.len());
    for node in &nodes {
        w.op(node.op());
        w.dtype(node.dtype());
        match node.tag() {
            Some(tag) => {
                w.bool(true);
                w.u64(u64::from(tag));
            }
            None => w.bool(false),
        }
        write_arg(&mut w, node.arg(), &number)?;
        w.usize(node.src().len());
        node.src().iter().for_each(|s| w.usize(position[&s.id()]));
    }
    Ok(w.finish())
}

/// The roots [`encode`] wrote, their buffers placeholders again.
pub fn decode(bytes: &[u8]) -> Result<Vec<UOp>, WireError> {
    decode_with(bytes, |number, size, dtype, device| {
        let number = usize::try_from(number)
            .map_err(|_| WireError::new(format!("name placeholder {number}")))?;
        let arg = BufferArg::placeholder(number, size, dtype, device);
        Ok(UOp::new(Op::Buffer, dtype, vec![], Arg::Buffer(arg)))
    })
}

/// The roots [`encode_with`] wrote, each buffer the node `buffer(number, size, dtype, device)`
/// makes.
pub fn decode_with(
    bytes: &[u8],
    mut buffer: impl FnMut(u64, usize, DType, Device) -> Result<UOp, WireError>,
) -> Result<Vec<UOp>, WireError> {
    let mut r = Reader::new(bytes);
    let count = r.count()?;
    let mut nodes: Vec<UOp> = Vec::with_capacity(count);
    for _ in 0..count {
        let node = read_node(&mut r, &nodes, &mut buffer)?;
        nodes.push(node);
    }
    r.expect_end()?;
    match nodes.last() {
        Some(sink) if sink.op() == Op::Sink => Ok(sink.src().to_vec()),
        _ => Err(WireError::new("do not end in the roots' sink")),
    }
}

fn read_node(
    r: &mut Reader<'_>,
    earlier: &[UOp],
    buffer: &mut impl FnMut(u64, usize, DType, Device) -> Result<UOp, WireError>,
) -> Result<UOp, WireError> {
    let op = r.op()?;
    let dtype = r.dtype()?;
    let tag = match r.bool()? {
        true => Some(u32::try_from(r.u64()?).map_err(|_| WireError::new("hold a tag beyond u32"))?),
        false => None,
    };
    if op == Op::Buffer {
        let node = read_buffer(r, buffer)?;
        return Ok(if tag.is_some() {
            node.with_tag(tag)
        } else {
            node
        });
    }
    let arg = read_arg(r)?;
    let operands = r.count()?;
    let mut src = Vec::with_capacity(operands);
    for _ in 0..operands {
        let at = r.usize()?;
        let operand = earlier
            .get(at)
            .ok_or_else(|| WireError::new(format!("name operand {at} before it is defined")))?;
        src.push(operand.clone());
    }
    Ok(UOp::new_tagged(op, dtype, src, arg, tag))
}

// Arg codes; the order is part of the format.
const NONE: u8 = 0;
const CONST: u8 = 1;
const VCONST: u8 = 2;
const BUFFER: u8 = 3;
// 4 was `BufferView`.
const PARAM: u8 = 5;
const NAME: u8 = 6;
const PRECOMPILE: u8 = 7;
const PERMUTATION: u8 = 8;
const FLAGS: u8 = 9;
// 10 was `Axes`.
const REDUCE: u8 = 11;
const DEVICE: u8 = 12;
const INT: u8 = 13;
const RANGE: u8 = 14;

fn write_arg(
    w: &mut Writer,
    arg: &Arg,
    number: &impl Fn(&BufferArg) -> Option<u64>,
) -> Result<(), Unencodable> {
    match arg {
        Arg::None => w.u8(NONE),
        Arg::Const(v) => {
            w.u8(CONST);
            w.scalar(*v);
        }
        Arg::Vconst(values) => {
            w.u8(VCONST);
            w.usize(values.len());
            values.iter().for_each(|v| w.scalar(*v));
        }
        Arg::Buffer(b) => {
            let n = number(b).ok_or_else(|| {
                Unencodable(format!("reads buffer {b:?}, which has no number here"))
            })?;
            w.u8(BUFFER);
            w.u64(n);
            w.usize(b.size);
            w.dtype(b.dtype);
            w.device(&b.device);
        }
        Arg::Param { slot, device } => {
            w.u8(PARAM);
            w.usize(*slot);
            w.bool(device.is_some());
            if let Some(d) = device {
                w.device(d);
            }
        }
        Arg::Name(name) => {
            w.u8(NAME);
            w.str(name);
        }
        Arg::Precompile(name) => {
            w.u8(PRECOMPILE);
            w.str(name);
        }
        Arg::Permutation(axes) => write_list(w, PERMUTATION, axes),
        Arg::Flags(flags) => {
            w.u8(FLAGS);
            w.usize(flags.len());
            flags.iter().for_each(|f| w.bool(*f));
        }
        Arg::Reduce(op, axes) => {
            w.u8(REDUCE);
            w.u8(*op as u8);
            w.usize(axes.len());
            axes.iter().for_each(|a| w.usize(*a));
        }
        Arg::Device(d) => {
            w.u8(DEVICE);
            w.device(d);
        }
        Arg::Int(i) => {
            w.u8(INT);
            w.i64(*i);
        }
        Arg::Range { id, axis_type } => {
            w.u8(RANGE);
            w.usize(*id);
            w.u8(*axis_type as u8);
        }
        Arg::Custom(handle) => {
            return Err(Unencodable(format!(
                "holds custom rules (#{}) that only this process has",
                handle.id()
            )));
        }
        Arg::Call { name, .. } => {
            return Err(Unencodable(format!(
                "calls external `{name}`, whose definition only this process has"
            )));
        }
    }
    Ok(())
}

fn write_list(w: &mut Writer, code: u8, values: &[usize]) {
    w.u8(code);
    w.usize(values.len());
    values.iter().for_each(|v| w.usize(*v));
}

fn read_buffer(
    r: &mut Reader<'_>,
    buffer: &mut impl FnMut(u64, usize, DType, Device) -> Result<UOp, WireError>,
) -> Result<UOp, WireError> {
    if r.u8()? != BUFFER {
        return Err(WireError::new("hold a Buffer node without a buffer arg"));
    }
    let number = r.u64()?;
    let size = r.usize()?;
    let dtype = r.dtype()?;
    let device = r.device()?;
    // A buffer has no operands.
    if r.usize()? != 0 {
        return Err(WireError::new("hold a Buffer node with operands"));
    }
    buffer(number, size, dtype, device)
}

fn read_arg(r: &mut Reader<'_>) -> Result<Arg, WireError> {
    let arg = match r.u8()? {
        NONE => Arg::None,
        CONST => Arg::Const(r.scalar()?),
        VCONST => {
            let count = r.count()?;
            Arg::Vconst((0..count).map(|_| r.scalar()).collect::<Result<_, _>>()?)
        }
        PARAM => Arg::Param {
            slot: r.usize()?,
            device: if r.bool()? { Some(r.device()?) } else { None },
        },
        NAME => Arg::Name(r.str()?),
        PRECOMPILE => Arg::Precompile(r.str()?),
        PERMUTATION => Arg::Permutation(read_list(r)?),
        FLAGS => {
            let count = r.count()?;
            Arg::Flags((0..count).map(|_| r.bool()).collect::<Result<_, _>>()?)
        }
        REDUCE => {
            let op = reduce_op(r.u8()?)?;
            Arg::Reduce(op, read_list(r)?)
        }
        DEVICE => Arg::Device(r.device()?),
        INT => Arg::Int(r.i64()?),
        RANGE => Arg::Range {
            id: r.usize()?,
            axis_type: axis_type(r.u8()?)?,
        },
        other => return Err(WireError::new(format!("hold unknown arg code {other}"))),
    };
    Ok(arg)
}

fn read_list(r: &mut Reader<'_>) -> Result<Vec<usize>, WireError> {
    let count = r.count()?;
    (0..count).map(|_| r.usize()).collect()
}

fn reduce_op(code: u8) -> Result<ReduceOp, WireError> {
    [ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul]
        .into_iter()
        .find(|op| *op as u8 == code)
        .ok_or_else(|| WireError::new(format!("hold unknown reduce op {code}")))
}

fn axis_type(code: u8) -> Result<AxisType, WireError> {
    use AxisType::*;
    let all = [
        Thread,
        Loop,
        Reduce,
        Upcast,
        Unroll,
        Lane,
        ReduceBlock,
        Group,
        Local,
    ];
    all.into_iter()
        .find(|t| *t as u8 == code)
        .ok_or_else(|| WireError::new(format!("hold unknown axis type {code}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholder(number: usize, size: usize) -> UOp {
        let arg = BufferArg::placeholder(number, size, DType::F32, Device::cpu());
        UOp::new(Op::Buffer, DType::F32, vec![], Arg::Buffer(arg))
    }

    /// A graph with shared operands, a reduce, a range and a permute.
    fn graph() -> Vec<UOp> {
        let (a, b) = (placeholder(0, 6), placeholder(1, 6));
        let sum = UOp::new(Op::Add, DType::F32, vec![a, b], Arg::None);
        let shaped = UOp::new(
            Op::Reshape,
            DType::F32,
            vec![sum.clone(), UOp::index_vec(&[2, 3])],
            Arg::None,
        );
        let reduced = UOp::new(
            Op::Reduce,
            DType::F32,
            vec![shaped.clone()],
            Arg::Reduce(ReduceOp::Max, vec![1]),
        );
        let range = UOp::range(4, 7, AxisType::Upcast);
        let permuted = UOp::new(
            Op::Permute,
            DType::F32,
            vec![shaped],
            Arg::Permutation(vec![1, 0]),
        );
        vec![reduced, sum.with_tag(Some(3)), range, permuted]
    }

    #[test]
    fn a_graph_reads_back_as_the_same_nodes() {
        let roots = graph();
        let bytes = encode(&roots).unwrap();
        assert_eq!(decode(&bytes).unwrap(), roots);
        assert_eq!(
            encode(&graph()).unwrap(),
            bytes,
            "equal graphs, equal bytes"
        );
    }

    #[test]
    fn other_sizes_or_constants_give_other_bytes() {
        let base = encode(&graph()).unwrap();
        let resized = UOp::new(Op::Neg, DType::F32, vec![placeholder(0, 7)], Arg::None);
        let negated = UOp::new(Op::Neg, DType::F32, vec![placeholder(0, 6)], Arg::None);
        assert_ne!(encode(&[resized]).unwrap(), encode(&[negated]).unwrap());
        let c = |v: f64| UOp::constant(v, DType::F32);
        assert_ne!(encode(&[c(1.0)]).unwrap(), encode(&[c(2.0)]).unwrap());
        assert_ne!(base, encode(&graph()[..2]).unwrap());
    }

    #[test]
    fn buffers_are_written_by_the_number_the_caller_gives() {
        let fresh = UOp::new_buffer(4, DType::F32, Device::cpu());
        let err = encode(std::slice::from_ref(&fresh)).unwrap_err();
        assert!(err.to_string().contains("no number"), "{err}");
        let bytes = encode_with(std::slice::from_ref(&fresh), |_| Some(9)).unwrap();
        let back = decode_with(&bytes, |n, size, dtype, _| {
            assert_eq!((n, size, dtype), (9, 4, DType::F32));
            Ok(fresh.clone())
        });
        assert_eq!(back.unwrap(), vec![fresh]);
    }

    #[test]
    fn damaged_bytes_are_an_error() {
        let bytes = encode(&graph()).unwrap();
        for cut in [0, 1, 9, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }
}
