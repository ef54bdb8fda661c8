//! Arithmetic on host arrays: elementwise ops with NumPy broadcasting, and reductions.

use super::host_array::{HostArray, for_each_offset, strides};
use super::movement::broadcast_strides;
use crate::uop::alu;
use crate::uop::dtype::round_to_float;
use crate::uop::shape::broadcast;
use crate::uop::{DType, Op, ReduceOp, Scalar, Shape};

/// Elementwise `op` over `args` broadcast to a common shape, each lane computed by
/// [`alu::exec_typed`] with result dtype `dtype` and operand dtype `operand`.
#[track_caller]
pub fn elementwise(op: Op, dtype: DType, operand: DType, args: &[&HostArray]) -> HostArray {
    let shapes: Vec<&[usize]> = args.iter().map(|a| a.shape.as_slice()).collect();
    let Some(shape) = broadcast(&shapes) else {
        panic!("interp {op}: operand shapes {shapes:?} do not broadcast");
    };
    let arg_strides: Vec<Vec<usize>> = args
        .iter()
        .map(|a| broadcast_strides(&a.shape, shape.len()))
        .collect();
    let mut lane = Vec::with_capacity(args.len());
    let mut data = Vec::with_capacity(shape.iter().product());
    for_each_offset(&shape, &arg_strides, |offsets| {
        lane.clear();
        lane.extend(args.iter().zip(offsets).map(|(a, &o)| a.data[o]));
        data.push(alu::exec_typed(op, dtype, operand, &lane));
    });
    HostArray { dtype, shape, data }
}

/// `x` reduced with `op` over `axes`, which are kept with size 1.
///
/// Integer and bool reductions combine with [`alu::exec_typed`] in the dtype (so sums wrap).
/// Float reductions accumulate in f64 and round to the dtype once at the end: the oracle gives
/// the mathematically closest value, and compiled kernels are compared to it with a tolerance.
/// An empty reduction gives the identity: 0 for `Add`, 1 for `Mul`, and for `Max` `-inf`
/// (floats), the dtype's minimum (integers) or `false` (bool).
#[track_caller]
pub fn reduce(x: &HostArray, op: ReduceOp, axes: &[usize]) -> HostArray {
    let mut shape: Shape = x.shape.clone();
    for &a in axes {
        assert!(
            a < x.ndim(),
            "interp Reduce: axis {a} is outside shape {:?}",
            x.shape
        );
        shape[a] = 1;
    }
    let acc_dtype = if x.dtype.is_float() {
        DType::F64
    } else {
        x.dtype
    };
    // Walk the input; each element lands on its output position (reduced axes have stride 0).
    let out_strides: Vec<usize> = strides(&shape)
        .into_iter()
        .enumerate()
        .map(|(k, s)| if axes.contains(&k) { 0 } else { s })
        .collect();
    let numel: usize = shape.iter().product();
    let mut acc = vec![identity(op, x.dtype); numel];
    let mut flat = 0;
    for_each_offset(&x.shape, &[out_strides], |o| {
        let o = o[0];
        acc[o] = alu::exec_typed(op.binary(), acc_dtype, acc_dtype, &[acc[o], x.data[flat]]);
        flat += 1;
    });
    let data = acc
        .into_iter()
        .map(|v| match v {
            Scalar::Float(f) => Scalar::Float(round_to_float(f, x.dtype)),
            v => v,
        })
        .collect();
    HostArray {
        dtype: x.dtype,
        shape,
        data,
    }
}

/// The value a reduction of no elements gives.
pub fn identity(op: ReduceOp, dtype: DType) -> Scalar {
    match op {
        ReduceOp::Add => Scalar::Int(0).cast(dtype),
        ReduceOp::Mul => Scalar::Int(1).cast(dtype),
        ReduceOp::Max => dtype.min_value(),
    }
}
