//! The set of operations a UOp can be, as tinyspec lists them, and the groups passes match on.

use std::fmt;

/// Every operation of the IR. The doc line of each variant gives its `src` and `arg`.
///
/// The discriminants are stable: they order commutative operands (through the hashes of
/// [`super::UOp::order_key`]) and are the ops' codes on the wire (`uop::wire`). An op that is
/// removed leaves its discriminant unused (the explicit `= n` below skip past them) and a new
/// op goes last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    // ---- source ops: leaves ----
    /// `()`, arg `Buffer`: a flat device allocation of `size` elements.
    Buffer,
    // 1 was `BufferView`.
    /// `(shape,)` or `(shape, min, max)`, arg `Param`: a placeholder substituted by `Function`.
    Param = 2,
    /// `()`, arg `Const`: a scalar of shape `()`.
    Const,
    /// `()`, arg `Vconst`: a vector constant of shape `(n,)`.
    Vconst,
    /// `()`, arg `Name`: a named symbolic scalar of dtype index (a symbolic dimension).
    DefineVar,

    // ---- movement ops ----
    /// `(T,)`, arg `Permutation`.
    Permute,
    /// `(T,)`, arg `Flags`: reverse the flagged axes.
    Flip,
    /// `(T, shape)`: reinterpret in row-major order.
    Reshape,
    /// `(T, shape)`: broadcast size-1 axes.
    Expand,
    /// `(T, begins, ends)`: pad with zeros.
    Pad,
    /// `(T, begins, ends)`: keep `[b, e)` per axis.
    Shrink,
    /// `(T, i0, i1, ...)`: index from the left.
    Index,
    /// `(T0, T1, ...)`: join along a new leading axis.
    Stack,
    // 14 was `Replicated`.

    // ---- reduce ----
    /// `(T,)`, arg `Reduce(op, axes)`: collapse axes to size 1.
    Reduce = 15,

    // ---- call ops ----
    /// `(Tuple body, a0, a1, ...)`: substitute `Param(k)` with `a_k`. Differentiable.
    Function,
    /// `(body, a0, a1, ...)`, arg `Call`: opaque invocation of a compiled or custom function.
    Call,
    /// `(v0, v1, ...)`: pack values.
    Tuple,
    /// `(T,)`, arg `Int(idx)`: element `idx` of a tuple.
    GetTuple,

    // ---- store ----
    /// `(buf, val)`: write val into buf.
    Store,

    // ---- ordering ----
    /// `(bound,)`, arg `Range(id, AxisType)`: iterator from 0 to bound.
    Range,
    // 22 was `After`, 23 `Group`.
    /// `(s0, s1, ...)`: collect side effects into a root.
    Sink = 24,

    // ---- elementwise: unary ----
    /// `1/x`.
    Recip,
    /// Round toward zero.
    Trunc,
    /// Convert to the node's dtype.
    Cast,
    /// Reinterpret bits as the node's dtype.
    Bitcast,
    /// `(T,)`, arg `Device`: copy to another device.
    Copy,

    // ---- elementwise: binary ----
    /// `a + b`.
    Add,
    /// `a * b`.
    Mul,
    /// The larger of `a` and `b`.
    Max,
    /// Remainder with the sign of the dividend (C semantics).
    Mod,
    /// Integer division truncating toward zero (C semantics).
    Idiv,
    /// `a < b` (bool).
    CmpLt,
    /// `a != b` (bool).
    CmpNe,
    /// Bitwise (logical for bools) exclusive or.
    Xor,
    /// Bitwise (logical for bools) or.
    Or,
    /// Bitwise (logical for bools) and.
    And,
    /// `a >> b`.
    Shr,
    /// `a << b`.
    Shl,

    // ---- elementwise: ternary ----
    /// `(P, A, B)`: `A` where `P` else `B`.
    Where,

    // ---- decomposed elementwise ops (kept as ops; lowered by rules or renderers) ----
    /// `-a`.
    Neg,
    /// `a - b`.
    Sub,
    /// `a / b` (IEEE for floats).
    Div,
    /// `a > b` (bool).
    CmpGt,
    /// `a >= b` (bool).
    CmpGe,
    /// `a <= b` (bool).
    CmpLe,
    /// `a == b` (bool).
    CmpEq,
    // 50 was `Not` (the front end writes `!a` as `a != true`).
    /// `2^a`.
    Exp2 = 51,
    /// `log2(a)`.
    Log2,
    /// `sin(a)`.
    Sin,
    /// `sqrt(a)`.
    Sqrt,
    /// `a^b`.
    Pow,
    /// `(A, B, C)`: `A*B + C`.
    Mulacc,
    /// `(x, key)`: Threefry-2x32 of the 64-bit counter `x` under the 64-bit `key`.
    Threefry,

    // ---- markers ----
    /// Materialize the value in its own contiguous buffer (a kernel boundary).
    Contiguous,
    /// `Contiguous` applied to the gradient flowing back through this node.
    ContiguousBackward,
    /// The same value with gradients stopped.
    Detach,

    // ---- vmap scope ops (seeds/vmap-vmapin-vmapout.md) ----
    /// `(T, vargs...)`: drop every axis whose varg is a `Range`.
    Vmapin,
    /// `(T, vargs...)`: insert an axis of the range's size where the varg is a `Range`.
    Vmapout,

    // ---- codegen ops ----
    /// `(buf, flat)` or `(buf, flat, gate)`: the address of element `flat` of a kernel buffer
    /// (a `DefineGlobal`), read by `Load` and written by `Store`; under a false gate the load
    /// gives 0 and the store does not happen. (Tensor-level indexing is the movement op `Index`.)
    Address,
    /// `(address,)`: read one element.
    Load,
    /// `()`, arg `Int(slot)`: a kernel's buffer parameter.
    DefineGlobal,

    // ---- added later, last so that the other ops keep their discriminants (and so the
    // hashes that order commutative operands) ----
    /// `cos x`, a decomposed unary op like `Sin`: its own op (not `Sin(x + pi/2)`, whose
    /// rounded argument loses the accuracy of `cos` for large `x`); lowered with `Sin` by the
    /// same range reduction.
    Cos,
    /// `erf x`, the error function: a primitive so that its derivative is `2/√π e^(-x²)`
    /// rather than the derivative of an approximation's polynomials; lowered by
    /// `codegen::transcendental` like `Sin`.
    Erf,
    /// `erfc x = 1 - erf x`, accurate in relative terms where it is tiny (`erfc(9)` is about
    /// `4e-37`), which `1 - erf` in `f32` is not.
    Erfc,
}

impl Op {
    /// Unary elementwise ops.
    pub const UNARY: &'static [Op] = &[
        Op::Recip,
        Op::Trunc,
        Op::Cast,
        Op::Bitcast,
        Op::Copy,
        Op::Neg,
        Op::Exp2,
        Op::Log2,
        Op::Sin,
        Op::Cos,
        Op::Erf,
        Op::Erfc,
        Op::Sqrt,
    ];
    /// Binary elementwise ops.
    pub const BINARY: &'static [Op] = &[
        Op::Add,
        Op::Mul,
        Op::Max,
        Op::Mod,
        Op::Idiv,
        Op::CmpLt,
        Op::CmpNe,
        Op::Xor,
        Op::Or,
        Op::And,
        Op::Shr,
        Op::Shl,
        Op::Sub,
        Op::Div,
        Op::CmpGt,
        Op::CmpGe,
        Op::CmpLe,
        Op::CmpEq,
        Op::Pow,
        Op::Threefry,
    ];
    /// Ternary elementwise ops.
    pub const TERNARY: &'static [Op] = &[Op::Where, Op::Mulacc];
    /// Movement ops: no arithmetic, only a change of shape or view.
    pub const MOVEMENT: &'static [Op] = &[
        Op::Permute,
        Op::Flip,
        Op::Reshape,
        Op::Expand,
        Op::Pad,
        Op::Shrink,
        Op::Index,
        Op::Stack,
    ];
    /// Binary ops where `a op b == b op a`.
    pub const COMMUTATIVE: &'static [Op] = &[
        Op::Add,
        Op::Mul,
        Op::Max,
        Op::CmpNe,
        Op::CmpEq,
        Op::Xor,
        Op::Or,
        Op::And,
    ];
    /// Comparisons: their result is bool.
    pub const COMPARISON: &'static [Op] = &[
        Op::CmpLt,
        Op::CmpNe,
        Op::CmpGt,
        Op::CmpGe,
        Op::CmpLe,
        Op::CmpEq,
    ];
    /// Source ops: leaves of the graph.
    pub const SOURCE: &'static [Op] =
        &[Op::Buffer, Op::Param, Op::Const, Op::Vconst, Op::DefineVar];
    /// Marker ops: identity on data.
    pub const MARKER: &'static [Op] = &[Op::Contiguous, Op::ContiguousBackward, Op::Detach];
    /// The vmap scope ops.
    pub const VMAP: &'static [Op] = &[Op::Vmapin, Op::Vmapout];
    /// Ops that are decompositions of primitives (see tinyspec "Decomposed elementwise ops").
    pub const DECOMPOSED: &'static [Op] = &[
        Op::Neg,
        Op::Sub,
        Op::Div,
        Op::CmpGt,
        Op::CmpGe,
        Op::CmpLe,
        Op::CmpEq,
        Op::Exp2,
        Op::Log2,
        Op::Sin,
        Op::Cos,
        Op::Erf,
        Op::Erfc,
        Op::Sqrt,
        Op::Pow,
        Op::Mulacc,
        Op::Threefry,
    ];

    /// Every elementwise op: unary, binary and ternary.
    pub fn elementwise() -> Vec<Op> {
        [Self::UNARY, Self::BINARY, Self::TERNARY].concat()
    }

    /// True for unary elementwise ops.
    pub fn is_unary(self) -> bool {
        Self::UNARY.contains(&self)
    }
    /// True for binary elementwise ops.
    pub fn is_binary(self) -> bool {
        Self::BINARY.contains(&self)
    }
    /// True for ternary elementwise ops.
    pub fn is_ternary(self) -> bool {
        Self::TERNARY.contains(&self)
    }
    /// True for every elementwise op (unary, binary, ternary).
    pub fn is_elementwise(self) -> bool {
        self.is_unary() || self.is_binary() || self.is_ternary()
    }
    /// True for movement ops.
    pub fn is_movement(self) -> bool {
        Self::MOVEMENT.contains(&self)
    }
    /// True when operand order does not matter.
    pub fn is_commutative(self) -> bool {
        Self::COMMUTATIVE.contains(&self)
    }
    /// True for comparisons.
    pub fn is_comparison(self) -> bool {
        Self::COMPARISON.contains(&self)
    }
    /// True for leaves.
    pub fn is_source(self) -> bool {
        Self::SOURCE.contains(&self)
    }
    /// True for marker ops.
    pub fn is_marker(self) -> bool {
        Self::MARKER.contains(&self)
    }
    /// True for `Vmapin` and `Vmapout`.
    pub fn is_vmap(self) -> bool {
        Self::VMAP.contains(&self)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// The combining op of a `Reduce`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceOp {
    /// A sum.
    Add,
    /// A maximum.
    Max,
    /// A product.
    Mul,
}

impl ReduceOp {
    /// The binary op that combines two partial results.
    pub fn binary(self) -> Op {
        match self {
            ReduceOp::Add => Op::Add,
            ReduceOp::Max => Op::Max,
            ReduceOp::Mul => Op::Mul,
        }
    }

    /// The value of this reduction over no elements, in `dtype`: 0, 1, or the lowest value.
    pub fn identity(self, dtype: super::DType) -> super::Scalar {
        let value = match self {
            ReduceOp::Add => super::Scalar::Int(0),
            ReduceOp::Mul => super::Scalar::Int(1),
            ReduceOp::Max => dtype.min_value(),
        };
        value.cast(dtype)
    }
}

/// What a loop (`Range`) is used for once a kernel is optimized (tinyspec "OptOps"). The GPU
/// kinds of tinyspec's table (global, local, warp, group-reduce) join when a backend with
/// workgroups produces them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AxisType {
    /// Split across the CPU cores: each core runs a contiguous part of the range.
    Thread,
    /// A sequential loop over an output axis (the state before optimization).
    Loop,
    /// A loop accumulated into a reduction.
    Reduce,
    /// An output axis unrolled into registers (the code is repeated per value).
    Upcast,
    /// A reduce axis unrolled into the accumulation.
    Unroll,
    /// The innermost part of a split reduce axis kept as a loop over an array of partial
    /// accumulators, one per value (the C compiler turns the loop into vector operations).
    Lane,
    /// The outer part of a split reduce axis, looped over outside the output loops (cache
    /// blocking): each iteration adds its block's partial sums into the output buffer.
    ReduceBlock,
    /// A GPU thread's position in its block, when the threads of a block split a reduce or
    /// loop axis between them (the GROUP and GROUPTOP OptOps, combined by `codegen::group`),
    /// or copy a tile into shared memory together (`codegen::stage`).
    Group,
    /// A GPU output axis whose values are the threads of one block (tinygrad's LOCAL): the
    /// block computes a tile of outputs and its threads share the tile's loads
    /// (`codegen::stage`).
    Local,
}

impl AxisType {
    /// The one-letter code tinygrad prints for the axis type.
    pub fn letter(self) -> char {
        match self {
            AxisType::Thread => 't',
            AxisType::Loop => 'L',
            AxisType::Reduce => 'R',
            AxisType::Upcast => 'u',
            AxisType::Unroll => 'r',
            AxisType::Lane => 'v',
            AxisType::ReduceBlock => 'b',
            AxisType::Group => 'G',
            AxisType::Local => 'l',
        }
    }
}
