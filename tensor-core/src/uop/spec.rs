//! Validity of a node: which src/arg/dtype combinations each op accepts (tinyspec, plus the
//! vmap scope ops of `seeds/vmap-vmapin-vmapout.md` and the kernel-level forms of
//! `schedule::ScheduleItem::ast`).
//!
//! `check` looks at one node and its direct operands; `check_graph` checks every node of a
//! graph. An error names the op and the rule it breaks, e.g.
//! `Reshape: element counts differ: [2, 3] (6) -> [5] (5)`.
//!
//! Of tinyspec's codegen ops ("not part of the core specification") the IR has only those a
//! pass produces: `DefineGlobal`, `Address`, `Load`.

use super::shape::{broadcast, operand_exprs, operand_values};
use super::{Arg, DType, Op, Scalar, UOp, tuple_body};
use std::fmt;

/// Why a node is not valid: the op and the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The rule, in words, starting with the op.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SpecError {}

type Check = Result<(), SpecError>;

/// Fails with `"{op}: {rule}"`.
fn fail<T>(u: &UOp, rule: impl fmt::Display) -> Result<T, SpecError> {
    Err(SpecError {
        message: format!("{}: {rule}", u.op()),
    })
}

/// Fails unless `ok`.
fn require(u: &UOp, ok: bool, rule: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { fail(u, rule()) }
}

/// Checks every node reachable from `root`, operands first; the first broken rule.
pub fn check_graph(root: &UOp) -> Check {
    root.toposort().iter().try_for_each(check)
}

/// Checks one node against the rules of its op (its operands are not checked themselves).
pub fn check(u: &UOp) -> Check {
    match u.op() {
        Op::Buffer | Op::Param | Op::Const | Op::Vconst | Op::DefineVar => source(u),
        op if op.is_movement() => movement(u),
        Op::Reduce => reduce(u),
        Op::Function | Op::Call | Op::Tuple | Op::GetTuple => call(u),
        Op::Store => store(u),
        Op::Range | Op::Sink => ordering(u),
        Op::Cast | Op::Bitcast | Op::Copy => conversion(u),
        op if op.is_unary() => unary(u),
        op if op.is_binary() => binary(u),
        op if op.is_ternary() => ternary(u),
        op if op.is_marker() => marker(u),
        Op::Vmapin => vmapin(u),
        Op::Vmapout => vmapout(u),
        _ => codegen(u),
    }
}

// ---- shared conditions ----

fn src_count(u: &UOp, allowed: &[usize]) -> Check {
    let n = u.src().len();
    require(u, allowed.contains(&n), || {
        let allowed: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
        format!("takes {} operands, got {n}", allowed.join(" or "))
    })
}

fn src_at_least(u: &UOp, min: usize) -> Check {
    let n = u.src().len();
    require(u, n >= min, || {
        format!("takes at least {min} operands, got {n}")
    })
}

fn dtype_is(u: &UOp, dtype: DType) -> Check {
    require(u, u.dtype() == dtype, || {
        format!("dtype must be {dtype}, got {}", u.dtype())
    })
}

fn dtype_of_operand(u: &UOp, i: usize) -> Check {
    let want = u.s(i).dtype();
    require(u, u.dtype() == want, || {
        format!("dtype {} differs from operand {i}'s {want}", u.dtype())
    })
}

fn has_value(u: &UOp) -> Check {
    require(u, u.dtype() != DType::Void, || {
        "dtype must not be void".into()
    })
}

fn arg_is(u: &UOp, ok: bool, variant: &str) -> Check {
    require(u, ok, || {
        format!("arg must be {variant}, got {:?}", u.arg())
    })
}

fn no_arg(u: &UOp) -> Check {
    arg_is(u, matches!(u.arg(), Arg::None), "None")
}

fn shape_of<'a>(u: &UOp, operand: &'a UOp, what: &str) -> Result<&'a [usize], SpecError> {
    match operand.shape() {
        Some(s) => Ok(s),
        None => fail(u, format!("{what} ({}) has no shape", operand.op())),
    }
}

/// The values of a shape-like operand (an index `Vconst`, or an index `Const`).
fn shape_operand(u: &UOp, i: usize, what: &str) -> Result<Vec<usize>, SpecError> {
    let operand = u.s(i);
    let values = (operand.dtype() == DType::Index)
        .then(|| operand_values(operand))
        .flatten();
    match values {
        Some(v) => Ok(v),
        None => fail(
            u,
            format!(
                "{what} (operand {i}) must be an index Vconst of non-negative values, got {}<{}>",
                operand.op(),
                operand.dtype()
            ),
        ),
    }
}

fn index_scalar(u: &UOp, i: usize, what: &str) -> Check {
    let s = u.s(i);
    require(
        u,
        s.dtype() == DType::Index && s.shape() == Some(&[]),
        || {
            format!(
                "{what} (operand {i}) must be an index scalar, got {}<{}>",
                s.op(),
                s.dtype()
            )
        },
    )
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// True when a const's scalar has the variant its dtype stores.
fn scalar_fits(value: Scalar, dtype: DType) -> bool {
    match value {
        Scalar::Bool(_) => dtype == DType::Bool,
        Scalar::Int(_) => dtype.is_int(),
        Scalar::Float(_) => dtype.is_float(),
    }
}

// ---- source ops ----

fn source(u: &UOp) -> Check {
    match (u.op(), u.arg()) {
        (Op::Buffer, Arg::Buffer(b)) => {
            src_count(u, &[0])?;
            require(u, b.dtype == u.dtype(), || {
                format!("dtype {} differs from the buffer's {}", u.dtype(), b.dtype)
            })
        }
        (Op::Param, Arg::Param { .. }) => {
            src_count(u, &[1, 3])?;
            has_value(u)?;
            shape_operand(u, 0, "shape")?;
            (1..u.src().len()).try_for_each(|i| index_scalar(u, i, "bound"))
        }
        (Op::Const, Arg::Const(v)) => {
            src_count(u, &[0])?;
            has_value(u)?;
            require(u, scalar_fits(*v, u.dtype()), || {
                format!("value {v:?} is not a {} value", u.dtype())
            })
        }
        (Op::Vconst, Arg::Vconst(values)) => {
            src_count(u, &[0])?;
            has_value(u)?;
            match values.iter().find(|v| !scalar_fits(**v, u.dtype())) {
                Some(v) => fail(u, format!("value {v:?} is not a {} value", u.dtype())),
                None => Ok(()),
            }
        }
        (Op::DefineVar, Arg::Name(_)) => {
            src_count(u, &[0, 2])?;
            dtype_is(u, DType::Index)?;
            (0..u.src().len()).try_for_each(|i| index_scalar(u, i, "bound"))
        }
        (op, _) => {
            let variant = match op {
                Op::Buffer => "Buffer",
                Op::Param => "Param",
                Op::Const => "Const",
                Op::Vconst => "Vconst",
                _ => "Name",
            };
            arg_is(u, false, variant)
        }
    }
}

// ---- movement ops ----

fn movement(u: &UOp) -> Check {
    match u.op() {
        Op::Index => return index(u),
        Op::Stack => return stack(u),
        _ => {}
    }
    src_at_least(u, 1)?;
    dtype_of_operand(u, 0)?;
    let from = shape_of(u, u.s(0), "operand 0")?.to_vec();
    match u.op() {
        Op::Permute => permute(u, &from),
        Op::Flip => {
            src_count(u, &[1])?;
            let Arg::Flags(flags) = u.arg() else {
                return arg_is(u, false, "Flags");
            };
            require(u, flags.len() == from.len(), || {
                format!("{} flags for {} axes {from:?}", flags.len(), from.len())
            })
        }
        Op::Reshape => {
            src_count(u, &[2])?;
            no_arg(u)?;
            let to = shape_operand(u, 1, "new shape")?;
            require(u, numel(&from) == numel(&to), || {
                format!(
                    "element counts differ: {from:?} ({}) -> {to:?} ({})",
                    numel(&from),
                    numel(&to)
                )
            })
        }
        Op::Expand => expand(u, &from),
        Op::Pad | Op::Shrink => pad_or_shrink(u, &from),
        _ => unreachable!("every movement op is dispatched above"),
    }
}

fn permute(u: &UOp, from: &[usize]) -> Check {
    src_count(u, &[1])?;
    let Arg::Permutation(perm) = u.arg() else {
        return arg_is(u, false, "Permutation");
    };
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    let is_permutation = sorted.iter().copied().eq(0..from.len());
    require(u, is_permutation, || {
        format!(
            "{perm:?} is not a permutation of the {} axes of {from:?}",
            from.len()
        )
    })
}

fn expand(u: &UOp, from: &[usize]) -> Check {
    src_count(u, &[2])?;
    no_arg(u)?;
    let to = shape_operand(u, 1, "new shape")?;
    require(u, to.len() == from.len(), || {
        format!(
            "{from:?} has {} axes, target {to:?} has {}",
            from.len(),
            to.len()
        )
    })?;
    match from.iter().zip(&to).position(|(&f, &t)| f != t && f != 1) {
        Some(i) => fail(
            u,
            format!(
                "axis {i} of {from:?} is {}, can only expand from 1 (target {to:?})",
                from[i]
            ),
        ),
        None => Ok(()),
    }
}

fn pad_or_shrink(u: &UOp, from: &[usize]) -> Check {
    src_count(u, &[3])?;
    no_arg(u)?;
    let sliding = |i: usize| operand_values(u.s(i)).is_none() && operand_exprs(u.s(i)).is_some();
    if sliding(1) || sliding(2) {
        return sliding_window(u, from);
    }
    let begins = shape_operand(u, 1, "begins")?;
    let ends = shape_operand(u, 2, "ends")?;
    require(
        u,
        begins.len() == from.len() && ends.len() == from.len(),
        || {
            format!(
                "{} begins and {} ends for the {} axes of {from:?}",
                begins.len(),
                ends.len(),
                from.len()
            )
        },
    )?;
    if u.op() == Op::Pad {
        return Ok(());
    }
    let outside = (0..from.len()).find(|&i| !(begins[i] <= ends[i] && ends[i] <= from[i]));
    match outside {
        Some(i) => fail(
            u,
            format!(
                "axis {i}: [{}, {}) is not within [0, {}] of {from:?}",
                begins[i], ends[i], from[i]
            ),
        ),
        None => Ok(()),
    }
}

/// A `Pad`/`Shrink` whose begins or ends vary with a range (`shape::operand_exprs`): one entry
/// per axis, and a window of the same size for every value of the range inside the axis.
fn sliding_window(u: &UOp, from: &[usize]) -> Check {
    let entries = |i: usize| operand_exprs(u.s(i)).map_or(0, |e| e.len());
    require(
        u,
        entries(1) == from.len() && entries(2) == from.len(),
        || {
            format!(
                "{} begins and {} ends for the {} axes of {from:?}",
                entries(1),
                entries(2),
                from.len()
            )
        },
    )?;
    require(u, u.shape().is_some(), || {
        let what = if u.op() == Op::Pad {
            "padding is negative or its total varies with the range"
        } else {
            "window leaves the axis or its size varies with the range"
        };
        format!("the {what} (input {from:?})")
    })
}

/// Tensor-level `Index(T, i...)`: index from the left.
fn index(u: &UOp) -> Check {
    src_at_least(u, 1)?;
    no_arg(u)?;
    dtype_of_operand(u, 0)?;
    let base = shape_of(u, u.s(0), "operand 0")?;
    let idx = &u.src()[1..];
    require(u, idx.len() <= base.len(), || {
        format!(
            "{} indices for the {} axes of {base:?}",
            idx.len(),
            base.len()
        )
    })?;
    for (k, i) in idx.iter().enumerate() {
        let ok = i.dtype() == DType::Index && matches!(i.shape(), Some(s) if s.len() <= 1);
        require(u, ok, || {
            format!(
                "index {k} must be an index scalar or vector, got {}<{}> of shape {:?}",
                i.op(),
                i.dtype(),
                i.shape()
            )
        })?;
    }
    Ok(())
}

fn stack(u: &UOp) -> Check {
    src_at_least(u, 1)?;
    no_arg(u)?;
    let first = shape_of(u, u.s(0), "operand 0")?;
    for (i, s) in u.src().iter().enumerate() {
        let shape = shape_of(u, s, &format!("operand {i}"))?;
        require(u, shape == first, || {
            format!("operand {i} has shape {shape:?}, operand 0 has {first:?}")
        })?;
        dtype_of_operand(u, i)?;
    }
    Ok(())
}

// ---- reduce ----

/// `Reduce(T)` over axes, or `Reduce(value, ranges...)` over every value of its ranges (in a
/// kernel, or at the tensor level where the value varies with a vmap range).
fn reduce(u: &UOp) -> Check {
    src_at_least(u, 1)?;
    dtype_of_operand(u, 0)?;
    let Arg::Reduce(_, axes) = u.arg() else {
        return arg_is(u, false, "Reduce");
    };
    if u.src().len() > 1 {
        require(u, axes.is_empty(), || {
            format!("a reduce over ranges takes no axes, got {axes:?}")
        })?;
        return match u.src()[1..].iter().position(|r| r.op() != Op::Range) {
            Some(i) => fail(
                u,
                format!("operand {} must be a Range, got {}", i + 1, u.s(i + 1).op()),
            ),
            None => Ok(()),
        };
    }
    let shape = shape_of(u, u.s(0), "operand 0")?;
    if let Some(a) = axes.iter().find(|&&a| a >= shape.len()) {
        return fail(u, format!("axis {a} out of range for {shape:?}"));
    }
    let mut sorted = axes.clone();
    sorted.sort_unstable();
    sorted.dedup();
    require(u, sorted.len() == axes.len(), || {
        format!("axes {axes:?} repeat an axis")
    })
}

// ---- call ops ----

fn call(u: &UOp) -> Check {
    match u.op() {
        Op::Function => {
            src_at_least(u, 1)?;
            require(u, u.s(0).op() == Op::Tuple, || {
                format!("body must be a Tuple, got {}", u.s(0).op())
            })
        }
        Op::Call => src_at_least(u, 1),
        Op::Tuple => dtype_is(u, DType::Void),
        _ => {
            src_count(u, &[1])?;
            let Arg::Int(idx) = u.arg() else {
                return arg_is(u, false, "Int");
            };
            let Some(body) = tuple_body(u.s(0)) else {
                return fail(
                    u,
                    format!(
                        "operand must be a Tuple or a Function/Call with a Tuple body, got {}",
                        u.s(0).op()
                    ),
                );
            };
            let Some(element) = usize::try_from(*idx).ok().and_then(|i| body.src().get(i)) else {
                return fail(
                    u,
                    format!(
                        "index {idx} out of range for a tuple of {}",
                        body.src().len()
                    ),
                );
            };
            require(u, u.dtype() == element.dtype(), || {
                format!(
                    "dtype {} differs from element {idx}'s {}",
                    u.dtype(),
                    element.dtype()
                )
            })
        }
    }
}

// ---- store and ordering ----

fn store(u: &UOp) -> Check {
    src_count(u, &[2])?;
    dtype_is(u, DType::Void)?;
    let (buf, val) = (u.s(0), u.s(1));
    require(u, buf.dtype() == val.dtype(), || {
        format!(
            "value dtype {} differs from buffer dtype {}",
            val.dtype(),
            buf.dtype()
        )
    })?;
    if buf.op() == Op::Address {
        // Kernel level: one scalar element at an address.
        return require(u, val.shape() == Some(&[]), || {
            format!(
                "a store to a kernel address takes a scalar value, got shape {:?}",
                val.shape()
            )
        });
    }
    let buf_shape = shape_of(u, buf, "buffer")?;
    let val_shape = shape_of(u, val, "value")?;
    require(u, buf_shape == val_shape, || {
        format!("buffer shape {buf_shape:?} differs from value shape {val_shape:?}")
    })
}

fn ordering(u: &UOp) -> Check {
    match u.op() {
        Op::Range => {
            src_count(u, &[1])?;
            arg_is(u, matches!(u.arg(), Arg::Range { .. }), "Range")?;
            dtype_is(u, DType::Index)?;
            index_scalar(u, 0, "bound")
        }
        _ => dtype_is(u, DType::Void),
    }
}

// ---- elementwise ----

fn conversion(u: &UOp) -> Check {
    src_count(u, &[1])?;
    has_value(u)?;
    let from = u.s(0).dtype();
    match u.op() {
        Op::Cast => {
            no_arg(u)?;
            require(u, from != DType::Void, || "cannot cast a void value".into())
        }
        Op::Bitcast => {
            no_arg(u)?;
            require(u, from.size_bytes() == u.dtype().size_bytes(), || {
                format!(
                    "sizes differ: {from} ({} bytes) -> {} ({} bytes)",
                    from.size_bytes(),
                    u.dtype(),
                    u.dtype().size_bytes()
                )
            })
        }
        _ => {
            arg_is(u, matches!(u.arg(), Arg::Device(_)), "Device")?;
            dtype_of_operand(u, 0)
        }
    }
}

fn unary(u: &UOp) -> Check {
    src_count(u, &[1])?;
    no_arg(u)?;
    shape_of(u, u.s(0), "operand 0")?;
    has_value(u)?;
    dtype_of_operand(u, 0)
}

/// Operand shapes broadcast (right-aligned, each axis equal or 1).
fn broadcastable(u: &UOp, operands: &[UOp]) -> Check {
    let shapes: Vec<&[usize]> = operands
        .iter()
        .enumerate()
        .map(|(i, s)| shape_of(u, s, &format!("operand {i}")))
        .collect::<Result<_, _>>()?;
    require(u, broadcast(&shapes).is_some(), || {
        let listed: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
        format!("shapes {} do not broadcast", listed.join(" and "))
    })
}

fn binary(u: &UOp) -> Check {
    src_count(u, &[2])?;
    no_arg(u)?;
    broadcastable(u, u.src())?;
    let (a, b) = (u.s(0).dtype(), u.s(1).dtype());
    require(u, a == b, || format!("operand dtypes differ: {a} and {b}"))?;
    require(u, a != DType::Void, || {
        "operands must have values, got void".into()
    })?;
    let bitwise = matches!(
        u.op(),
        Op::Xor | Op::Or | Op::And | Op::Shr | Op::Shl | Op::Threefry
    );
    require(u, !(bitwise && a.is_float()), || {
        format!("needs int or bool operands, got {a}")
    })?;
    if u.op().is_comparison() {
        dtype_is(u, DType::Bool)
    } else {
        dtype_of_operand(u, 0)
    }
}

fn ternary(u: &UOp) -> Check {
    src_count(u, &[3])?;
    no_arg(u)?;
    broadcastable(u, u.src())?;
    if u.op() == Op::Where {
        let cond = u.s(0).dtype();
        require(u, cond == DType::Bool, || {
            format!("condition must be bool, got {cond}")
        })?;
        let (a, b) = (u.s(1).dtype(), u.s(2).dtype());
        require(u, a == b, || format!("branch dtypes differ: {a} and {b}"))?;
        return dtype_of_operand(u, 1);
    }
    for i in 0..3 {
        dtype_of_operand(u, i)?;
    }
    has_value(u)
}

fn marker(u: &UOp) -> Check {
    src_count(u, &[1])?;
    no_arg(u)?;
    shape_of(u, u.s(0), "operand 0")?;
    dtype_of_operand(u, 0)
}

// ---- vmap scope ops ----

/// A varg is the batch `Range`, or the index constant 0 for an axis that stays.
fn is_zero_varg(a: &UOp) -> bool {
    a.op() == Op::Const && a.dtype() == DType::Index && a.const_value() == Some(Scalar::Int(0))
}

fn check_vargs(u: &UOp) -> Check {
    for (k, a) in u.src()[1..].iter().enumerate() {
        require(u, a.op() == Op::Range || is_zero_varg(a), || {
            format!(
                "varg {k} must be a Range or the index Const 0, got {}<{}>",
                a.op(),
                a.dtype()
            )
        })?;
    }
    Ok(())
}

fn range_size(r: &UOp) -> Option<usize> {
    r.s(0)
        .const_value()
        .and_then(|v| usize::try_from(v.as_i64()).ok())
}

fn vmapin(u: &UOp) -> Check {
    src_at_least(u, 1)?;
    no_arg(u)?;
    dtype_of_operand(u, 0)?;
    check_vargs(u)?;
    let input = shape_of(u, u.s(0), "input")?;
    let vargs = &u.src()[1..];
    require(u, input.len() == vargs.len(), || {
        format!(
            "input {input:?} has {} axes but there are {} vargs",
            input.len(),
            vargs.len()
        )
    })?;
    for (axis, (d, r)) in input.iter().zip(vargs).enumerate() {
        if r.op() == Op::Range {
            require(u, range_size(r) == Some(*d), || {
                format!(
                    "axis {axis} of {input:?} has size {d}, its Range has bound {:?}",
                    range_size(r)
                )
            })?;
        }
    }
    Ok(())
}

fn vmapout(u: &UOp) -> Check {
    src_at_least(u, 1)?;
    no_arg(u)?;
    dtype_of_operand(u, 0)?;
    check_vargs(u)?;
    let inner = shape_of(u, u.s(0), "result")?;
    let kept = u.src()[1..].iter().filter(|a| is_zero_varg(a)).count();
    require(u, inner.len() == kept, || {
        format!(
            "result {inner:?} has {} axes but {kept} vargs are Const 0",
            inner.len()
        )
    })?;
    match u.src()[1..]
        .iter()
        .find(|a| a.op() == Op::Range && range_size(a).is_none())
    {
        Some(_) => fail(u, "a batch Range must have a constant bound"),
        None => Ok(()),
    }
}

// ---- codegen ops ----

fn codegen(u: &UOp) -> Check {
    match u.op() {
        Op::DefineGlobal => {
            src_count(u, &[0])?;
            has_value(u)?;
            arg_is(
                u,
                matches!(u.arg(), Arg::Int(slot) if *slot >= 0),
                "Int(slot >= 0)",
            )
        }
        Op::Address => address(u),
        Op::Load => {
            src_count(u, &[1])?;
            has_value(u)?;
            let addr = u.s(0);
            require(u, addr.op() == Op::Address, || {
                format!("operand must be an Address, got {}", addr.op())
            })?;
            dtype_of_operand(u, 0)
        }
        op => fail(u, format!("{op} is not an op of this IR's kernels")),
    }
}

/// `Address(DefineGlobal, flat [, gate])`: element `flat` of a kernel buffer.
fn address(u: &UOp) -> Check {
    src_count(u, &[2, 3])?;
    no_arg(u)?;
    require(u, u.s(0).op() == Op::DefineGlobal, || {
        format!("operand 0 must be a DefineGlobal, got {}", u.s(0).op())
    })?;
    dtype_of_operand(u, 0)?;
    index_scalar(u, 1, "flat index")?;
    match u.src().get(2) {
        Some(gate) => require(u, gate.dtype() == DType::Bool, || {
            format!("gate (operand 2) must be bool, got {}", gate.dtype())
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::{AxisType, Device, ReduceOp};

    fn buf(shape: &[usize]) -> UOp {
        UOp::new_buffer(shape.iter().product(), DType::F32, Device::cpu()).reshape(shape)
    }
    fn raw(op: Op, dtype: DType, src: Vec<UOp>, arg: Arg) -> UOp {
        UOp::new(op, dtype, src, arg)
    }
    #[track_caller]
    fn rejects(u: &UOp, message: &str) {
        assert_eq!(check(u).map_err(|e| e.message), Err(message.to_string()));
    }
    #[track_caller]
    fn accepts(u: &UOp) {
        assert_eq!(check_graph(u), Ok(()));
    }

    #[test]
    fn reshape_must_keep_the_element_count() {
        rejects(
            &buf(&[2, 3]).reshape(&[5]),
            "Reshape: element counts differ: [2, 3] (6) -> [5] (5)",
        );
        accepts(&buf(&[2, 3]).reshape(&[3, 2]));
    }

    #[test]
    fn reshape_needs_an_index_shape_operand() {
        let bad = raw(
            Op::Reshape,
            DType::F32,
            vec![buf(&[2]), UOp::constant(2.0, DType::F32)],
            Arg::None,
        );
        rejects(
            &bad,
            "Reshape: new shape (operand 1) must be an index Vconst of non-negative values, got Const<f32>",
        );
    }

    #[test]
    fn expand_only_grows_axes_of_size_one() {
        rejects(
            &buf(&[2, 3]).expand(&[4, 3]),
            "Expand: axis 0 of [2, 3] is 2, can only expand from 1 (target [4, 3])",
        );
        rejects(
            &buf(&[2, 1]).expand(&[2, 1, 3]),
            "Expand: [2, 1] has 2 axes, target [2, 1, 3] has 3",
        );
        accepts(&buf(&[2, 1]).expand(&[2, 5]));
    }

    #[test]
    fn permute_must_be_a_permutation() {
        rejects(
            &buf(&[2, 3]).permute(&[1, 1]),
            "Permute: [1, 1] is not a permutation of the 2 axes of [2, 3]",
        );
        rejects(
            &buf(&[2, 3]).permute(&[0]),
            "Permute: [0] is not a permutation of the 2 axes of [2, 3]",
        );
        accepts(&buf(&[2, 3]).permute(&[1, 0]));
    }

    #[test]
    fn flip_takes_one_flag_per_axis() {
        rejects(
            &buf(&[2, 3]).flip(&[true]),
            "Flip: 1 flags for 2 axes [2, 3]",
        );
        accepts(&buf(&[2, 3]).flip(&[true, false]));
    }

    #[test]
    fn pad_and_shrink_take_one_begin_and_end_per_axis() {
        rejects(
            &buf(&[2, 3]).pad(&[1], &[1]),
            "Pad: 1 begins and 1 ends for the 2 axes of [2, 3]",
        );
        rejects(
            &buf(&[2, 3]).shrink(&[0, 2], &[2, 1]),
            "Shrink: axis 1: [2, 1) is not within [0, 3] of [2, 3]",
        );
        rejects(
            &buf(&[2, 3]).shrink(&[0, 0], &[2, 4]),
            "Shrink: axis 1: [0, 4) is not within [0, 3] of [2, 3]",
        );
        accepts(&buf(&[2, 3]).pad(&[1, 0], &[0, 2]).shrink(&[1, 0], &[3, 3]));
    }

    #[test]
    fn index_takes_at_most_one_index_per_axis() {
        let x = buf(&[2, 3]);
        let i = UOp::index(1);
        rejects(
            &x.index_by(vec![i.clone(), i.clone(), i.clone()]),
            "Index: 3 indices for the 2 axes of [2, 3]",
        );
        rejects(
            &x.index_by(vec![UOp::constant(1.0, DType::F32)]),
            "Index: index 0 must be an index scalar or vector, got Const<f32> of shape Some([])",
        );
        accepts(&x.index_by(vec![i, UOp::index_vec(&[0, 2])]));
    }

    #[test]
    fn stack_operands_share_one_shape() {
        rejects(
            &UOp::stack(vec![buf(&[2]), buf(&[3])]),
            "Stack: operand 1 has shape [3], operand 0 has [2]",
        );
        accepts(&UOp::stack(vec![buf(&[2]), buf(&[2])]));
    }

    #[test]
    fn reduce_axes_are_in_range() {
        rejects(
            &buf(&[2, 3]).reduce(ReduceOp::Add, &[2]),
            "Reduce: axis 2 out of range for [2, 3]",
        );
        let no_arg = raw(Op::Reduce, DType::F32, vec![buf(&[2])], Arg::None);
        rejects(&no_arg, "Reduce: arg must be Reduce, got None");
        accepts(&buf(&[2, 3]).reduce(ReduceOp::Max, &[0, 1]));
    }

    #[test]
    fn binary_operands_broadcast_and_share_a_dtype() {
        let add = |a: UOp, b: UOp| UOp::alu(Op::Add, vec![a, b]);
        rejects(
            &add(buf(&[2, 3]), buf(&[4])),
            "Add: shapes [2, 3] and [4] do not broadcast",
        );
        rejects(
            &add(buf(&[2]), UOp::constant(1, DType::I32)),
            "Add: operand dtypes differ: f32 and i32",
        );
        accepts(&add(buf(&[2, 3]), buf(&[3])));
    }

    #[test]
    fn comparisons_output_bool() {
        let lt = raw(Op::CmpLt, DType::F32, vec![buf(&[2]), buf(&[2])], Arg::None);
        rejects(&lt, "CmpLt: dtype must be bool, got f32");
        accepts(&UOp::alu(Op::CmpLt, vec![buf(&[2]), buf(&[2])]));
    }

    #[test]
    fn bitwise_ops_need_int_or_bool_operands() {
        rejects(
            &UOp::alu(Op::Xor, vec![buf(&[2]), buf(&[2])]),
            "Xor: needs int or bool operands, got f32",
        );
    }

    #[test]
    fn where_condition_is_bool_and_branches_agree() {
        let x = buf(&[2]);
        let cond = UOp::alu(Op::CmpLt, vec![x.clone(), x.clone()]);
        let where_ =
            |c: &UOp, a: &UOp, b: &UOp| UOp::alu(Op::Where, vec![c.clone(), a.clone(), b.clone()]);
        rejects(
            &where_(&x, &x, &x),
            "Where: condition must be bool, got f32",
        );
        let ints = UOp::constant(0, DType::I32);
        rejects(
            &where_(&cond, &x, &ints),
            "Where: branch dtypes differ: f32 and i32",
        );
        accepts(&where_(&cond, &x, &x));
    }

    #[test]
    fn unary_ops_keep_their_operand_dtype() {
        let bad = raw(Op::Sqrt, DType::F64, vec![buf(&[2])], Arg::None);
        rejects(&bad, "Sqrt: dtype f64 differs from operand 0's f32");
        accepts(&UOp::alu(Op::Sqrt, vec![buf(&[2])]));
    }

    #[test]
    fn bitcast_keeps_the_size() {
        rejects(
            &buf(&[2]).bitcast(DType::I16),
            "Bitcast: sizes differ: f32 (4 bytes) -> i16 (2 bytes)",
        );
        accepts(&buf(&[2]).bitcast(DType::I32));
        accepts(&buf(&[2]).cast(DType::I16));
    }

    #[test]
    fn copy_names_its_target_device() {
        let bad = raw(Op::Copy, DType::F32, vec![buf(&[2])], Arg::None);
        rejects(&bad, "Copy: arg must be Device, got None");
        accepts(&buf(&[2]).copy_to(Device::Single("CUDA:0".into())));
    }

    #[test]
    fn store_buffer_and_value_agree() {
        rejects(
            &UOp::store(&buf(&[2, 3]), &buf(&[3, 2])),
            "Store: buffer shape [2, 3] differs from value shape [3, 2]",
        );
        let ints = UOp::new_buffer(6, DType::I32, Device::cpu()).reshape(&[2, 3]);
        rejects(
            &UOp::store(&buf(&[2, 3]), &ints),
            "Store: value dtype i32 differs from buffer dtype f32",
        );
        accepts(&UOp::store(&buf(&[2, 3]), &buf(&[2, 3])));
    }

    #[test]
    fn consts_hold_a_value_of_their_dtype() {
        let bad = raw(Op::Const, DType::F32, vec![], Arg::Const(Scalar::Int(1)));
        rejects(&bad, "Const: value Int(1) is not a f32 value");
        let void = raw(Op::Const, DType::Void, vec![], Arg::Const(Scalar::Int(1)));
        rejects(&void, "Const: dtype must not be void");
        accepts(&UOp::constant(1, DType::F32));
    }

    #[test]
    fn ranges_are_index_valued_with_an_index_bound() {
        let bad = raw(
            Op::Range,
            DType::Index,
            vec![UOp::constant(4, DType::I32)],
            Arg::Range {
                id: 0,
                axis_type: AxisType::Loop,
            },
        );
        rejects(
            &bad,
            "Range: bound (operand 0) must be an index scalar, got Const<i32>",
        );
        accepts(&UOp::range(4, 0, AxisType::Loop));
    }

    #[test]
    fn get_tuple_reads_an_existing_element() {
        let t = UOp::tuple(vec![buf(&[2])]);
        let bad = raw(Op::GetTuple, DType::F32, vec![t.clone()], Arg::Int(1));
        rejects(&bad, "GetTuple: index 1 out of range for a tuple of 1");
        accepts(&t.get_tuple(0));
    }

    #[test]
    fn functions_have_a_tuple_body() {
        let bad = UOp::function(buf(&[2]), vec![]);
        rejects(&bad, "Function: body must be a Tuple, got Reshape");
        let p = UOp::param(0, &[2], DType::F32, None);
        accepts(&UOp::function(UOp::tuple(vec![p]), vec![buf(&[2])]).get_tuple(0));
    }

    #[test]
    fn vmapin_vargs_are_ranges_or_zero_one_per_input_axis() {
        let x = buf(&[3, 6]);
        let r = UOp::range(3, 0, AxisType::Loop);
        rejects(
            &x.vmapin(std::slice::from_ref(&r)),
            "Vmapin: input [3, 6] has 2 axes but there are 1 vargs",
        );
        rejects(
            &x.vmapin(&[r.clone(), UOp::index(1)]),
            "Vmapin: varg 1 must be a Range or the index Const 0, got Const<index>",
        );
        rejects(
            &x.vmapin(&[UOp::index(0), r.clone()]),
            "Vmapin: axis 1 of [3, 6] has size 6, its Range has bound Some(3)",
        );
        accepts(&x.vmapin(&[r, UOp::index(0)]));
    }

    #[test]
    fn vmapout_inner_rank_equals_the_zero_vargs() {
        let r = UOp::range(3, 0, AxisType::Loop);
        let inner = buf(&[3, 6]).vmapin(&[r.clone(), UOp::index(0)]);
        rejects(
            &inner.vmapout(std::slice::from_ref(&r)),
            "Vmapout: result [6] has 1 axes but 0 vargs are Const 0",
        );
        accepts(&inner.vmapout(&[r, UOp::index(0)]));
    }

    #[test]
    fn wrong_operand_counts_are_named() {
        let bad = raw(Op::Reshape, DType::F32, vec![buf(&[2])], Arg::None);
        rejects(&bad, "Reshape: takes 2 operands, got 1");
        let bad = raw(Op::Where, DType::F32, vec![buf(&[2]), buf(&[2])], Arg::None);
        rejects(&bad, "Where: takes 3 operands, got 2");
    }

    #[test]
    fn check_graph_finds_a_bad_node_below_the_root() {
        let bad = buf(&[2, 3]).reshape(&[5]);
        let root = UOp::alu(Op::Sqrt, vec![bad]);
        assert_eq!(
            check_graph(&root).map_err(|e| e.to_string()),
            Err("Reshape: element counts differ: [2, 3] (6) -> [5] (5)".to_string())
        );
    }

    /// The kernel of `out[i] = sum_j in[i*4 + j] * 2` in the form `create_schedule` gives kernels.
    fn kernel_ast(gate: Option<UOp>) -> UOp {
        let out = raw(Op::DefineGlobal, DType::F32, vec![], Arg::Int(0));
        let inp = raw(Op::DefineGlobal, DType::F32, vec![], Arg::Int(1));
        let i = UOp::range(3, 0, AxisType::Loop);
        let j = UOp::range(4, 1, AxisType::Reduce);
        let flat = UOp::alu(
            Op::Add,
            vec![UOp::alu(Op::Mul, vec![i.clone(), UOp::index(4)]), j.clone()],
        );
        let mut addr = vec![inp, flat];
        addr.extend(gate);
        let load = raw(
            Op::Load,
            DType::F32,
            vec![raw(Op::Address, DType::F32, addr, Arg::None)],
            Arg::None,
        );
        let value = UOp::alu(Op::Mul, vec![load, UOp::constant(2.0, DType::F32)]);
        let acc = raw(
            Op::Reduce,
            DType::F32,
            vec![value, j],
            Arg::Reduce(ReduceOp::Add, vec![]),
        );
        let dst = raw(Op::Address, DType::F32, vec![out, i], Arg::None);
        UOp::sink(vec![UOp::store(&dst, &acc)])
    }

    #[test]
    fn kernel_asts_pass() {
        accepts(&kernel_ast(None));
        let gate = UOp::alu(
            Op::CmpLt,
            vec![UOp::range(3, 0, AxisType::Loop), UOp::index(2)],
        );
        accepts(&kernel_ast(Some(gate)));
    }

    #[test]
    fn kernel_reduce_accumulates_over_ranges_only() {
        let v = UOp::constant(1.0, DType::F32);
        let bad = raw(
            Op::Reduce,
            DType::F32,
            vec![v.clone(), UOp::index(3)],
            Arg::Reduce(ReduceOp::Add, vec![]),
        );
        rejects(&bad, "Reduce: operand 1 must be a Range, got Const");
    }

    #[test]
    fn kernel_index_gate_is_bool() {
        let g = raw(Op::DefineGlobal, DType::F32, vec![], Arg::Int(0));
        let bad = raw(
            Op::Address,
            DType::F32,
            vec![g, UOp::index(0), UOp::index(1)],
            Arg::None,
        );
        rejects(&bad, "Address: gate (operand 2) must be bool, got index");
    }

    #[test]
    fn front_end_graphs_pass() {
        use crate::Tensor;
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let b = Tensor::from_vec(vec![1.0f32, 0.5, 2.0], &[3]);
        let graph = a
            .add(&b)
            .mul(2.0)
            .relu()
            .matmul(&a.transpose(0, 1))
            .where_(1.0, 0.0);
        accepts(&graph.uop());
        let reduced = a.sum(1, true).exp().sub(a.max(0, false).sum_all());
        accepts(&reduced.uop());
        let g = a.gather(1, &Tensor::from_vec(vec![0i32, 2, 1, 0], &[2, 2]));
        accepts(&g.uop());
        accepts(&Tensor::cat(&[a.clone(), a.clone()], 0).cumsum(1).uop());
        accepts(&Tensor::randn(&[4, 3], 7).softmax(-1).log_softmax(0).uop());
        accepts(
            &a.cast(DType::I32)
                .floor_div(2)
                .remainder(3)
                .bitwise_and(1)
                .lt(1)
                .uop(),
        );
        accepts(&Tensor::arange(5).one_hot(5).uop());
    }

    #[test]
    fn scheduled_kernel_asts_pass() {
        use crate::Tensor;
        use crate::schedule::create_schedule;
        let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let outputs = [
            a.add(1.0).mul(&a).uop(),
            a.matmul(&a.transpose(0, 1)).uop(),
            a.pad(&[(1, 0), (0, 2)]).sum(0, false).uop(),
            a.reshape(&[3, 2]).permute(&[1, 0]).softmax(-1).uop(),
        ];
        let schedule = create_schedule(&outputs);
        assert!(!schedule.items.is_empty());
        for item in &schedule.items {
            assert_eq!(check_graph(&item.ast), Ok(()), "{:?}", item.ast);
        }
    }
}
