//! The reference interpreter: evaluates a tensor-level graph op by op on host memory.
//!
//! This is the oracle every compiled kernel is compared against, so each op is written as the
//! obvious loop over its output (see `movement` and `arith`), and every lane of arithmetic
//! goes through [`crate::uop::alu`], the one definition of scalar semantics.
//!
//! Evaluation is memoized per node, so shared subgraphs are computed once. Two things make a
//! node's value depend on more than its operands, and both are part of the memo:
//!
//! - **Ranges.** `Vmapout(inner, vargs)` evaluates `inner` once per value of its `Range`
//!   vargs, with those ranges bound; a `Vmapin` inside reads the slice at the bound values.
//!   A node's memo key holds the values of the ranges it depends on (its *free ranges*: those
//!   reachable from it and not bound by a `Vmapout` below it), so nodes independent of a range
//!   are computed once and the others once per value.
//! - **Params.** `Function(body, args...)` (and `Call`) evaluates `body` in a new frame whose
//!   `Param(k)` is the value of `args[k]`; each frame has its own memo.
//!
//! Anything the interpreter cannot evaluate (a `Buffer` without host data, codegen ops, an
//! unbound range or param) panics with a message naming the op: a test oracle must not guess.

mod arith;
mod host_array;
mod movement;

pub use host_array::HostArray;

use crate::transform::external::{self, CallInfo};
use crate::uop::dtype::{decode_scalars, encode_scalars};
use crate::uop::scope::node_free_ranges;
use crate::uop::{Arg, DType, Op, UOp};
use host_array::for_each_index;
use std::collections::HashMap;
use std::rc::Rc;

/// The value of `root`, which must not contain `Param`s outside a `Function`.
#[track_caller]
pub fn evaluate(root: &UOp) -> HostArray {
    evaluate_with_params(root, &[])
}

/// The values of several roots, computing their shared subgraphs once.
#[track_caller]
pub fn evaluate_many(roots: &[UOp]) -> Vec<HostArray> {
    evaluate_many_with_params(roots, &[])
}

/// The value of `root` where `Param(k)` outside any `Function` stands for `params[k]`.
#[track_caller]
pub fn evaluate_with_params(root: &UOp, params: &[HostArray]) -> HostArray {
    evaluate_many_with_params(std::slice::from_ref(root), params)
        .pop()
        .expect("one root, one value")
}

/// The values of several roots with `params` for their top-level `Param`s, sharing one memo.
#[track_caller]
pub fn evaluate_many_with_params(roots: &[UOp], params: &[HostArray]) -> Vec<HostArray> {
    let params = params
        .iter()
        .map(|p| Value::Array(Rc::new(p.clone())))
        .collect();
    let mut interp = Interpreter::new(params);
    roots
        .iter()
        .map(|root| match interp.eval(root) {
            Value::Array(a) => Rc::unwrap_or_clone(a),
            Value::Tuple(_) => panic!(
                "interp: the root {} is a tuple; evaluate its GetTuple elements instead",
                root.op()
            ),
        })
        .collect()
}

/// What a node evaluates to: an array, or the tuple of a `Tuple`/`Function`.
#[derive(Clone, Debug)]
enum Value {
    Array(Rc<HostArray>),
    Tuple(Rc<[Value]>),
}

/// A node under the values of the ranges it depends on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct MemoKey {
    node: UOp,
    range_values: Vec<Option<usize>>,
}

/// The params and memo of one function body being evaluated (the outermost graph is one).
struct Frame {
    params: Vec<Value>,
    memo: HashMap<MemoKey, Value>,
}

impl Frame {
    fn new(params: Vec<Value>) -> Frame {
        Frame {
            params,
            memo: HashMap::new(),
        }
    }
}

struct Interpreter {
    /// Per node, its free ranges (`uop::scope`: reached and not closed below it), sorted by id.
    free_ranges: HashMap<UOp, Rc<[UOp]>>,
    /// The current value of every range bound by an enclosing `Vmapout`.
    bindings: HashMap<UOp, usize>,
    frames: Vec<Frame>,
}

impl Interpreter {
    fn new(params: Vec<Value>) -> Interpreter {
        Interpreter {
            free_ranges: HashMap::new(),
            bindings: HashMap::new(),
            frames: vec![Frame::new(params)],
        }
    }

    fn frame(&mut self) -> &mut Frame {
        self.frames.last_mut().expect("the outermost frame")
    }

    /// The value of `root`: every node it needs that is not memoized yet is evaluated in
    /// operand order. Scope bodies (of `Vmapout`, `Function`, `Call`) are evaluated by their
    /// scope op, under its bindings or params, through a nested call.
    fn eval(&mut self, root: &UOp) -> Value {
        self.compute_free_ranges(root);
        for node in self.pending(root) {
            let value = self.eval_node(&node);
            let key = self.key(&node);
            self.frame().memo.insert(key, value);
        }
        self.lookup(root).expect("root evaluated")
    }

    /// The not-yet-memoized nodes `root` needs, operands first, not entering scope bodies.
    fn pending(&mut self, root: &UOp) -> Vec<UOp> {
        root.toposort_along(evaluated_operands, |node| self.lookup(node).is_none())
    }

    fn key(&self, node: &UOp) -> MemoKey {
        let ranges = &self.free_ranges[node];
        MemoKey {
            node: node.clone(),
            range_values: ranges
                .iter()
                .map(|r| self.bindings.get(r).copied())
                .collect(),
        }
    }

    fn lookup(&mut self, node: &UOp) -> Option<Value> {
        let key = self.key(node);
        self.frame().memo.get(&key).cloned()
    }

    /// The value of an operand evaluated earlier in this pass.
    fn value(&mut self, node: &UOp) -> Value {
        match self.lookup(node) {
            Some(v) => v,
            None => self.eval(node),
        }
    }

    #[track_caller]
    fn array(&mut self, node: &UOp) -> Rc<HostArray> {
        match self.value(node) {
            Value::Array(a) => a,
            Value::Tuple(_) => panic!(
                "interp: {} is used as an array but evaluates to a tuple (take a GetTuple)",
                node.op()
            ),
        }
    }

    /// The values of an index operand (a shape, a padding): a `Vconst`, a `Const`, or any
    /// index-valued node of shape `()` or `(k,)`.
    fn index_values(&mut self, node: &UOp) -> Vec<usize> {
        let a = self.array(node);
        a.data
            .iter()
            .map(|v| {
                usize::try_from(v.as_i64()).unwrap_or_else(|_| {
                    panic!(
                        "interp: index operand {} holds the negative value {v}",
                        node.op()
                    )
                })
            })
            .collect()
    }

    /// Fills `free_ranges` for every node reachable from `root`.
    fn compute_free_ranges(&mut self, root: &UOp) {
        if self.free_ranges.contains_key(root) {
            return;
        }
        let empty: Rc<[UOp]> = Rc::from(Vec::new());
        for node in root.toposort() {
            if self.free_ranges.contains_key(&node) {
                continue;
            }
            let operands = node.src().iter().map(|s| &self.free_ranges[s][..]);
            let mut ranges = node_free_ranges(&node, operands);
            ranges.sort_by_key(UOp::id);
            ranges.dedup();
            let set = if ranges.is_empty() {
                empty.clone()
            } else {
                Rc::from(ranges)
            };
            self.free_ranges.insert(node, set);
        }
    }

    fn eval_node(&mut self, node: &UOp) -> Value {
        let array = |a: HostArray| Value::Array(Rc::new(a));
        let value = match node.op() {
            Op::Tuple => {
                let parts: Vec<Value> = node.src().iter().map(|s| self.value(s)).collect();
                return Value::Tuple(Rc::from(parts));
            }
            Op::GetTuple => return self.get_tuple(node),
            Op::Function | Op::Call => return self.call(node),
            Op::Param => return self.param(node),
            _ => array(self.eval_array_op(node)),
        };
        if let Value::Array(a) = &value {
            check_against_node(node, a);
        }
        value
    }

    #[track_caller]
    fn eval_array_op(&mut self, node: &UOp) -> HostArray {
        let src = node.src();
        match node.op() {
            Op::Buffer => buffer(node),
            Op::Const => {
                let value = node.const_value().expect("Const carries a scalar");
                HostArray::scalar(value, node.dtype())
            }
            Op::Vconst => match node.arg() {
                Arg::Vconst(values) => {
                    HostArray::new(node.dtype(), &[values.len()], values.clone())
                }
                arg => panic!("interp Vconst: arg {arg:?} is not a list of values"),
            },
            Op::Range => self.range_value(node),
            Op::Reshape => {
                let shape = self.index_values(&src[1]);
                movement::reshape(&self.array(&src[0]), &shape)
            }
            Op::Expand => {
                let shape = self.index_values(&src[1]);
                movement::expand(&self.array(&src[0]), &shape)
            }
            Op::Permute => match node.arg() {
                Arg::Permutation(perm) => movement::permute(&self.array(&src[0]), perm),
                arg => panic!("interp Permute: arg {arg:?} is not a permutation"),
            },
            Op::Flip => match node.arg() {
                Arg::Flags(flags) => movement::flip(&self.array(&src[0]), flags),
                arg => panic!("interp Flip: arg {arg:?} is not a list of flags"),
            },
            Op::Pad | Op::Shrink => {
                let begins = self.index_values(&src[1]);
                let ends = self.index_values(&src[2]);
                let x = self.array(&src[0]);
                if node.op() == Op::Pad {
                    movement::pad(&x, &begins, &ends)
                } else {
                    movement::shrink(&x, &begins, &ends)
                }
            }
            Op::Index => {
                let indices: Vec<HostArray> =
                    src[1..].iter().map(|i| (*self.array(i)).clone()).collect();
                movement::index(&self.array(&src[0]), &indices)
            }
            Op::Stack => {
                let parts: Vec<Rc<HostArray>> = src.iter().map(|s| self.array(s)).collect();
                let refs: Vec<&HostArray> = parts.iter().map(|p| p.as_ref()).collect();
                movement::stack(&refs)
            }
            Op::Reduce if src.len() > 1 => self.reduce_over(node),
            Op::Reduce => match node.arg() {
                Arg::Reduce(op, axes) => arith::reduce(&self.array(&src[0]), *op, axes),
                arg => panic!("interp Reduce: arg {arg:?} is not (op, axes)"),
            },
            Op::Copy | Op::Contiguous | Op::ContiguousBackward | Op::Detach => {
                (*self.array(&src[0])).clone()
            }
            Op::Vmapin => self.vmapin(node),
            Op::Vmapout => self.vmapout(node),
            op if op.is_elementwise() => {
                let args: Vec<Rc<HostArray>> = src.iter().map(|s| self.array(s)).collect();
                let refs: Vec<&HostArray> = args.iter().map(|a| a.as_ref()).collect();
                let operand = if op == Op::Where {
                    src[1].dtype()
                } else {
                    src[0].dtype()
                };
                arith::elementwise(op, node.dtype(), operand, &refs)
            }
            op => {
                panic!("interp: cannot evaluate {op}: it is not a tensor-level op (node {node:?})")
            }
        }
    }

    fn get_tuple(&mut self, node: &UOp) -> Value {
        let idx = match node.arg() {
            Arg::Int(i) => *i as usize,
            arg => panic!("interp GetTuple: arg {arg:?} is not an index"),
        };
        match self.value(&node.src()[0]) {
            Value::Tuple(parts) => parts.get(idx).cloned().unwrap_or_else(|| {
                panic!(
                    "interp GetTuple: index {idx} of a tuple of {} values",
                    parts.len()
                )
            }),
            Value::Array(_) => panic!(
                "interp GetTuple: operand {} is not a tuple",
                node.src()[0].op()
            ),
        }
    }

    /// `Function`/`Call`: the body evaluated in a new frame whose params are the args.
    fn call(&mut self, node: &UOp) -> Value {
        if CallInfo::of(node).is_some() {
            return self.external_call(node);
        }
        let args: Vec<Value> = node.src()[1..].iter().map(|a| self.value(a)).collect();
        self.frames.push(Frame::new(args));
        let result = self.eval(&node.src()[0]);
        self.frames.pop();
        result
    }

    /// An external call: its host function on the operands' values (a fault of the host
    /// function panics, naming the external).
    fn external_call(&mut self, node: &UOp) -> Value {
        let operands = node.src()[1..]
            .iter()
            .map(|a| match self.value(a) {
                Value::Array(v) => external::HostArray::from_bytes(
                    encode_scalars(&v.data, v.dtype),
                    v.dtype,
                    &v.shape,
                ),
                Value::Tuple(_) => panic!("interp: an external call's operand is a tuple"),
            })
            .collect();
        let results = external::invoke(node, operands).unwrap_or_else(|e| panic!("interp: {e}"));
        let values: Vec<Value> = results
            .iter()
            .map(|r| {
                let data = decode_scalars(r.bytes(), r.dtype());
                Value::Array(Rc::new(HostArray::new(r.dtype(), r.shape(), data)))
            })
            .collect();
        Value::Tuple(values.into())
    }

    #[track_caller]
    fn param(&mut self, node: &UOp) -> Value {
        let slot = match node.arg() {
            Arg::Param { slot, .. } => *slot,
            arg => panic!("interp Param: arg {arg:?} is not a slot"),
        };
        let Some(value) = self.frame().params.get(slot).cloned() else {
            panic!(
                "interp: Param({slot}) has no value: it is outside any Function and \
                 evaluate_with_params got {} params",
                self.frame().params.len()
            );
        };
        if let Value::Array(a) = &value {
            let fits = node.shape() == Some(a.shape.as_slice()) && node.dtype() == a.dtype;
            assert!(
                fits,
                "interp: Param({slot}) is {} {:?} but was given {} {:?}",
                node.dtype(),
                node.shape(),
                a.dtype,
                a.shape
            );
        }
        value
    }

    fn range_value(&mut self, node: &UOp) -> HostArray {
        let Some(&value) = self.bindings.get(node) else {
            panic!(
                "interp: {node:?} is not bound: only a Vmapout or a Reduce over it binds a Range"
            );
        };
        HostArray::scalar(value, DType::Index)
    }

    /// `Vmapin(x, vargs)`: the slice of `x` at the current value of each `Range` varg.
    fn vmapin(&mut self, node: &UOp) -> HostArray {
        let x = self.array(&node.src()[0]);
        let vargs = &node.src()[1..];
        assert_eq!(
            x.ndim(),
            vargs.len(),
            "interp Vmapin: {} vargs for shape {:?}",
            vargs.len(),
            x.shape
        );
        let fixed: Vec<Option<usize>> = vargs
            .iter()
            .map(|a| scope_varg(a, "Vmapin").map(|_| self.range_value(a).item().as_i64() as usize))
            .collect();
        movement::select(&x, &fixed)
    }

    /// `Vmapout(inner, vargs)`: `inner` evaluated at every value of the `Range` vargs, the
    /// results placed along the axes where those vargs stand.
    fn vmapout(&mut self, node: &UOp) -> HostArray {
        let (inner, vargs) = (&node.src()[0], &node.src()[1..]);
        let bounds: Vec<Option<usize>> = vargs.iter().map(|a| scope_varg(a, "Vmapout")).collect();
        let ranges: Vec<&UOp> = vargs
            .iter()
            .zip(&bounds)
            .filter(|(_, b)| b.is_some())
            .map(|(a, _)| a)
            .collect();
        let batch_shape: Vec<usize> = bounds.iter().flatten().copied().collect();
        let slices = self.for_each_binding(&ranges, &batch_shape, inner);
        let inner_shape = match slices.first() {
            Some(s) => s.shape.clone(),
            None => inner.shape_vec(),
        };
        assemble_vmapout(node.dtype(), &bounds, &batch_shape, &inner_shape, &slices)
    }

    /// `Reduce(x, ranges...)`: `x` evaluated at every value of the ranges, combined with the
    /// reduce op as a reduction over a leading axis of those values.
    fn reduce_over(&mut self, node: &UOp) -> HostArray {
        let Arg::Reduce(op, _) = node.arg() else {
            panic!("interp Reduce: arg {:?} is not (op, axes)", node.arg());
        };
        let (inner, ranges) = (&node.src()[0], &node.src()[1..]);
        let bounds: Vec<usize> = ranges
            .iter()
            .map(|r| {
                scope_varg(r, "Reduce").expect("interp Reduce: operands after the first are Ranges")
            })
            .collect();
        let refs: Vec<&UOp> = ranges.iter().collect();
        let slices = self.for_each_binding(&refs, &bounds, inner);
        let values: Vec<&HostArray> = slices.iter().map(|s| s.as_ref()).collect();
        let shape = inner.shape_vec();
        if values.is_empty() {
            let identity = arith::identity(*op, node.dtype());
            return HostArray::new(node.dtype(), &shape, vec![identity; shape.iter().product()]);
        }
        let reduced = arith::reduce(&movement::stack(&values), *op, &[0]);
        movement::reshape(&reduced, &shape)
    }

    /// `inner` at every value of `ranges` (row-major over `bounds`), each evaluated with the
    /// ranges bound to that value; the previous bindings are restored afterwards.
    fn for_each_binding(
        &mut self,
        ranges: &[&UOp],
        bounds: &[usize],
        inner: &UOp,
    ) -> Vec<Rc<HostArray>> {
        let shadowed: Vec<Option<usize>> = ranges
            .iter()
            .map(|r| self.bindings.get(*r).copied())
            .collect();
        let mut slices = Vec::new();
        for_each_index(bounds, |values| {
            for (r, &v) in ranges.iter().zip(values) {
                self.bindings.insert((*r).clone(), v);
            }
            slices.push(self.array(inner));
            self.forget_values_depending_on(ranges);
        });
        for (r, old) in ranges.iter().zip(shadowed) {
            match old {
                Some(v) => self.bindings.insert((*r).clone(), v),
                None => self.bindings.remove(*r),
            };
        }
        slices
    }

    /// Drops memo entries of nodes that depend on `ranges`: they are stale once the ranges
    /// take their next values (keeping them would only hold memory).
    // `UOp` hashes and compares by address; its interior caches never change either.
    #[allow(clippy::mutable_key_type)]
    fn forget_values_depending_on(&mut self, ranges: &[&UOp]) {
        let free = &self.free_ranges;
        let frame = self.frames.last_mut().expect("the outermost frame");
        frame
            .memo
            .retain(|key, _| !free[&key.node].iter().any(|r| ranges.contains(&r)));
    }
}

/// The operands a node's value is computed from directly. Scope bodies are left to the scope
/// op, and vargs are read as ranges, not evaluated (a `Vmapout`'s ranges are not bound yet).
fn evaluated_operands(node: &UOp) -> &[UOp] {
    match node.op() {
        Op::Vmapout => &[],
        Op::Reduce if node.src().len() > 1 => &[],
        Op::Vmapin => &node.src()[..1],
        Op::Function | Op::Call => &node.src()[1..],
        _ => node.src(),
    }
}

/// `Some(bound)` for a `Range` varg, `None` for a `Const(0)` varg; anything else panics.
#[track_caller]
fn scope_varg(varg: &UOp, op: &str) -> Option<usize> {
    match varg.op() {
        Op::Range => {
            let bound = varg.src().first().and_then(|b| b.const_value());
            match bound {
                Some(b) => Some(b.as_i64() as usize),
                None => panic!("interp {op}: the bound of {varg:?} is not a constant"),
            }
        }
        Op::Const if varg.const_value().is_some_and(|v| v.as_i64() == 0) => None,
        _ => panic!("interp {op}: a varg must be a Range or Const(0), got {varg:?}"),
    }
}

/// The `Vmapout` result: `slices[b]` (row-major over the batch axes) placed at the batch
/// position `b`, its own axes at the `Const(0)` vargs.
fn assemble_vmapout(
    dtype: DType,
    bounds: &[Option<usize>],
    batch_shape: &[usize],
    inner_shape: &[usize],
    slices: &[Rc<HostArray>],
) -> HostArray {
    for s in slices {
        assert_eq!(
            s.shape, inner_shape,
            "interp Vmapout: the inner value changes shape between range values"
        );
    }
    let mut inner_axes = inner_shape.iter();
    let shape: Vec<usize> = bounds
        .iter()
        .map(|b| match b {
            Some(n) => *n,
            None => *inner_axes
                .next()
                .expect("interp Vmapout: more Const(0) vargs than inner axes"),
        })
        .collect();
    assert!(
        inner_axes.next().is_none(),
        "interp Vmapout: fewer Const(0) vargs than inner axes {inner_shape:?}"
    );
    let (mut batch_idx, mut inner_idx) = (Vec::new(), Vec::new());
    HostArray::from_fn(dtype, &shape, |idx| {
        batch_idx.clear();
        inner_idx.clear();
        for (&i, b) in idx.iter().zip(bounds) {
            if b.is_some() {
                batch_idx.push(i);
            } else {
                inner_idx.push(i);
            }
        }
        let b = host_array::flat_offset(&batch_idx, batch_shape);
        slices[b].get(&inner_idx)
    })
}

/// The values of a `Buffer` made from host data.
#[track_caller]
fn buffer(node: &UOp) -> HostArray {
    let Arg::Buffer(b) = node.arg() else {
        panic!("interp Buffer: arg {:?} is not a buffer", node.arg());
    };
    let Some(host) = b.storage.contents(b.dtype) else {
        panic!(
            "interp: {b:?} has no contents: the interpreter reads buffers made from host \
             values (Tensor::from_vec and friends) or computed by a runtime"
        );
    };
    let data = host.scalars();
    let shape = node.shape_vec();
    assert_eq!(
        data.len(),
        shape.iter().product::<usize>(),
        "interp: {b:?} holds {} elements of host data for shape {shape:?}",
        data.len()
    );
    HostArray {
        dtype: b.dtype,
        shape,
        data,
    }
}

/// Panics when the computed value disagrees with the node's derived shape or dtype: the
/// interpreter and the shape rules must tell the same story.
#[track_caller]
fn check_against_node(node: &UOp, value: &HostArray) {
    if let Some(shape) = node.shape() {
        assert_eq!(
            value.shape,
            shape,
            "interp: {} computed shape {:?} but its derived shape is {shape:?}",
            node.op(),
            value.shape
        );
    }
    assert_eq!(
        value.dtype,
        node.dtype(),
        "interp: {} computed dtype {} but the node's dtype is {}",
        node.op(),
        value.dtype,
        node.dtype()
    );
}

#[cfg(test)]
mod tests;
