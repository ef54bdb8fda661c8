//! Recipes of random well-typed tensor graphs, and how a recipe is built into a `Tensor`.
//!
//! A [`Graph`] is an input (shape, dtype, data seed) and a list of [`Step`]s. Every step's
//! parameters are small integers read modulo what the current tensor allows (an axis is
//! `axis % rank`, a shrink's begin is `begin % size`, ...), so *every* list of steps builds a
//! graph: removing steps or shrinking numbers (what proptest's shrinking does) gives another
//! valid recipe. A step that does not apply to the current tensor (an integer-only op on
//! floats, an axis op on a 0-d tensor, a step that would exceed [`MAX_NUMEL`]) is skipped.
//!
//! Values stay small and finite: the builder keeps an upper bound of every value's magnitude
//! and, before each step, brings a float above [`FLOAT_CAP`] back down by an exact power of
//! two and an integer above [`INT_CAP`] into range by `remainder`. Divisors are `|d| + 1`,
//! logarithms and square roots read `|x| + c`, `exp` reads values scaled to `|x| <= 2`, and
//! `prod` reads values scaled to `|x| <= 1`. Comparisons (in `where` conditions) and `argmax`
//! only read integers or leaf data, so rounding cannot flip them.

// Through the parent module, so the root package's compiled property test can include this
// file (`#[path]`) with its own `Tensor` and `DType` in scope.
use super::{DType, Tensor};
use proptest::prelude::*;

/// The most elements any intermediate may have; steps that would exceed it are skipped.
pub const MAX_NUMEL: usize = 256;
/// The largest size of any axis; steps that would exceed it are skipped.
pub const MAX_AXIS: usize = 16;
/// The highest rank; steps that would exceed it are skipped.
pub const MAX_RANK: usize = 4;
/// Float values above this magnitude are scaled down (by a power of two) before a step.
pub const FLOAT_CAP: f64 = 8.0;
/// Integer values above this magnitude are reduced by `remainder` before a step.
pub const INT_CAP: f64 = 4096.0;

/// An elementwise function of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unary {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `sin(x)`.
    Sin,
    /// `cos(x)`.
    Cos,
    /// `erf(x)`.
    Erf,
    /// `tanh(x)`.
    Tanh,
    /// `sigmoid(x)`.
    Sigmoid,
    /// `max(x, 0)`.
    Relu,
    /// `exp(x)` of `x` scaled to `|x| <= 2`.
    Exp,
    /// `log(|x| + 1)`.
    Log,
    /// `sqrt(|x| + 0.25)`.
    Sqrt,
    /// `x²`.
    Square,
    /// `1 / (|x| + 1)`.
    Recip,
    /// `(|x| + 0.5) ^ 1.5`.
    Pow,
}

/// An elementwise function of two tensors (the second one a [`Rhs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `x + r`.
    Add,
    /// `x - r`.
    Sub,
    /// `x * r`.
    Mul,
    /// `x / (|r| + 1)` for floats, `floor_div(x, |r| + 1)` for integers.
    Div,
    /// `max(x, r)`.
    Maximum,
    /// `min(x, r)`.
    Minimum,
    /// `remainder(x, |r| + 1)`, integers only.
    Remainder,
    /// `x & r`, integers only.
    BitAnd,
    /// `x ^ r`, integers only.
    BitXor,
}

/// The second operand of a binary step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rhs {
    /// Fresh data of the current shape, with the axes whose bit is set in `ones` of size 1
    /// (broadcast).
    Leaf {
        /// The data's seed.
        seed: u8,
        /// Bit `i` set: axis `i` has size 1.
        ones: u8,
    },
    /// An earlier intermediate of the same shape and dtype (skipped when there is none), so
    /// graphs share nodes instead of being chains.
    Earlier {
        /// Which of them (modulo their number), the latest first.
        back: u8,
    },
    /// The constant `k / 4` (floats) or `k` (integers).
    Const(i8),
}

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The sum.
    Sum,
    /// The largest element.
    Max,
    /// The smallest element.
    Min,
    /// Of values scaled to `|x| <= 1` (integers: reduced to `|x| <= 2` first), axes of at most 4.
    Prod,
    /// The mean; integers are cast to `f32` first.
    Mean,
}

/// One op applied to the current tensor. Axis-like fields are taken modulo the rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// An elementwise function.
    Unary(Unary),
    /// An elementwise function of `x` and a second operand.
    Binary(Binary, Rhs),
    /// `where(cond, x, other)`: the condition compares `x` with integer data when `x` holds
    /// integers, and two float leaves otherwise.
    Select {
        /// The seed of the condition's data.
        seed: u8,
        /// Where the condition is false.
        other: Rhs,
    },
    /// The axes rotated left by `1 + rot % (rank - 1)`.
    Permute {
        /// The rotation.
        rot: u8,
    },
    /// Axes `a` and `b` swapped.
    Transpose {
        /// One axis.
        a: u8,
        /// The other.
        b: u8,
    },
    /// The elements reversed along `axis`.
    Flip {
        /// The axis.
        axis: u8,
    },
    /// `before % 3` and `after % 3` elements of value `value / 4` (0 uses `pad`).
    Pad {
        /// The axis.
        axis: u8,
        /// Elements before.
        before: u8,
        /// Elements after.
        after: u8,
        /// Four times the pad value.
        value: i8,
    },
    /// Keeps `1 + len % (size - begin)` elements from `begin % size`.
    Shrink {
        /// The axis.
        axis: u8,
        /// The first element kept.
        begin: u8,
        /// How many are kept, less one.
        len: u8,
    },
    /// Merges axes `axis` and `axis + 1`.
    Flatten {
        /// The first of the two axes.
        axis: u8,
    },
    /// Splits an axis into its smallest prime factor and the rest (or `1` and the size).
    Split {
        /// The axis.
        axis: u8,
    },
    /// A new axis at `axis`, expanded to `1 + size % 3`.
    Unsqueeze {
        /// Where the new axis goes (modulo rank + 1).
        axis: u8,
        /// Its size, less one.
        size: u8,
    },
    /// Removes the first axis of size 1.
    Squeeze,
    /// A reduction over `axis`.
    Reduce {
        /// The reduction.
        op: Reduce,
        /// The axis.
        axis: u8,
        /// Whether it is kept with size 1.
        keepdim: bool,
    },
    /// A reduction over every axis.
    ReduceAll(Reduce),
    /// `softmax` along `axis` (integers are cast first).
    Softmax {
        /// The axis.
        axis: u8,
    },
    /// `logsumexp` over `axis` (integers are cast first).
    LogSumExp {
        /// The axis.
        axis: u8,
    },
    /// Running sums along `axis` (at most one per graph, see the builder).
    Cumsum {
        /// The axis.
        axis: u8,
    },
    /// `x @ data[k, 1 + n % 4]`, or `data[1 + n % 4, m] @ x` when `left` (rank >= 2).
    Matmul {
        /// The new size, less one.
        n: u8,
        /// The data's seed.
        seed: u8,
        /// Data on the left.
        left: bool,
    },
    /// `x @ xᵀ` over the last two axes.
    MatmulSelf,
    /// `x.take(indices, axis)` with `1 + len % 4` indices from `seed`.
    Take {
        /// The axis.
        axis: u8,
        /// The indices' seed.
        seed: u8,
        /// How many indices, less one.
        len: u8,
    },
    /// `x.take(indices, axis)` with computed integer indices: an earlier integer intermediate
    /// of at most 8 elements, brought into `-size..size` by `remainder`.
    TakeBy {
        /// The axis.
        axis: u8,
        /// Which integer intermediate (modulo their number), the latest first.
        back: u8,
    },
    /// `x.gather(axis, index)`, the index of `x`'s shape with `1 + len % 4` along `axis`.
    Gather {
        /// The axis.
        axis: u8,
        /// The index's seed.
        seed: u8,
        /// Its size along `axis`, less one.
        len: u8,
    },
    /// `cat([x, data], axis)` with `1 + len % 3` elements of data along `axis`.
    Cat {
        /// The axis.
        axis: u8,
        /// The data's seed.
        seed: u8,
        /// Its size along `axis`, less one.
        len: u8,
    },
    /// `stack([x, x.flip(0) or -x], axis)`.
    Stack {
        /// The new axis (modulo rank + 1).
        axis: u8,
        /// The second part is `x.flip(0)` rather than `-x`.
        flip: bool,
    },
    /// Integers only (ties are exact).
    ArgMax {
        /// The axis.
        axis: u8,
    },
    /// Integers cast to `f32`.
    ToFloat,
    /// A realization boundary.
    Contiguous,
    /// No gradient flows through.
    Detach,
}

/// A random graph: an input of `shape` (integers when `int`) filled from `seed`, then `steps`.
/// With `also`, an earlier intermediate is a second output of the same schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    /// The input's shape.
    pub shape: Vec<usize>,
    /// Integer input data.
    pub int: bool,
    /// The input data's seed.
    pub seed: u8,
    /// The ops, in order.
    pub steps: Vec<Step>,
    /// Which earlier intermediate is a second output (modulo their number).
    pub also: Option<u8>,
}

// ---- strategies ----

fn rhs() -> impl Strategy<Value = Rhs> {
    prop_oneof![
        3 => (any::<u8>(), any::<u8>()).prop_map(|(seed, ones)| Rhs::Leaf { seed, ones }),
        2 => any::<u8>().prop_map(|back| Rhs::Earlier { back }),
        1 => (-8i8..=8).prop_map(Rhs::Const),
    ]
}

fn unary() -> impl Strategy<Value = Unary> {
    use Unary::*;
    proptest::sample::select(vec![
        Neg, Abs, Sin, Cos, Erf, Tanh, Sigmoid, Relu, Exp, Log, Sqrt, Square, Recip, Pow,
    ])
}

fn binary() -> impl Strategy<Value = Binary> {
    use Binary::*;
    proptest::sample::select(vec![
        Add, Sub, Mul, Div, Maximum, Minimum, Remainder, BitAnd, BitXor,
    ])
}

fn reduce() -> impl Strategy<Value = Reduce> {
    use Reduce::*;
    proptest::sample::select(vec![Sum, Max, Min, Prod, Mean])
}

/// Any step, weighted toward the common ones.
pub fn step() -> impl Strategy<Value = Step> {
    // Axes, offsets and seeds are any `u8` (read modulo what the tensor allows); counts are
    // drawn in their range so a shrunk recipe reads as it builds.
    let u = any::<u8>;
    prop_oneof![
        6 => unary().prop_map(Step::Unary),
        8 => (binary(), rhs()).prop_map(|(op, r)| Step::Binary(op, r)),
        2 => (u(), rhs()).prop_map(|(seed, other)| Step::Select { seed, other }),
        2 => u().prop_map(|rot| Step::Permute { rot }),
        1 => (u(), u()).prop_map(|(a, b)| Step::Transpose { a, b }),
        2 => u().prop_map(|axis| Step::Flip { axis }),
        3 => (u(), 0u8..3, 0u8..3, -4i8..=4).prop_map(|(axis, before, after, value)| Step::Pad {
            axis,
            before,
            after,
            value
        }),
        3 => (u(), u(), u()).prop_map(|(axis, begin, len)| Step::Shrink { axis, begin, len }),
        1 => u().prop_map(|axis| Step::Flatten { axis }),
        1 => u().prop_map(|axis| Step::Split { axis }),
        2 => (u(), 0u8..3).prop_map(|(axis, size)| Step::Unsqueeze { axis, size }),
        1 => Just(Step::Squeeze),
        5 => (reduce(), u(), any::<bool>()).prop_map(|(op, axis, keepdim)| Step::Reduce {
            op,
            axis,
            keepdim
        }),
        1 => reduce().prop_map(Step::ReduceAll),
        1 => u().prop_map(|axis| Step::Softmax { axis }),
        1 => u().prop_map(|axis| Step::LogSumExp { axis }),
        2 => u().prop_map(|axis| Step::Cumsum { axis }),
        3 => (0u8..4, u(), any::<bool>()).prop_map(|(n, seed, left)| Step::Matmul { n, seed, left }),
        1 => Just(Step::MatmulSelf),
        2 => (u(), u(), 0u8..4).prop_map(|(axis, seed, len)| Step::Take { axis, seed, len }),
        1 => (u(), u()).prop_map(|(axis, back)| Step::TakeBy { axis, back }),
        2 => (u(), u(), 0u8..4).prop_map(|(axis, seed, len)| Step::Gather { axis, seed, len }),
        1 => (u(), u(), 0u8..3).prop_map(|(axis, seed, len)| Step::Cat { axis, seed, len }),
        1 => (u(), any::<bool>()).prop_map(|(axis, flip)| Step::Stack { axis, flip }),
        1 => u().prop_map(|axis| Step::ArgMax { axis }),
        1 => Just(Step::ToFloat),
        2 => Just(Step::Contiguous),
        1 => Just(Step::Detach),
    ]
}

/// A shape of rank `0..=3` with axes of size 1 to 4 (rank 0 rarely).
pub fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        1 => Just(vec![]),
        12 => proptest::collection::vec(1usize..=4, 1..=3),
    ]
}

/// A graph of up to `max_steps` steps; integer inputs only when `ints`.
pub fn graph(max_steps: usize, ints: bool) -> impl Strategy<Value = Graph> {
    (
        shape(),
        proptest::bool::weighted(if ints { 0.3 } else { 0.0 }),
        any::<u8>(),
        proptest::collection::vec(step(), 1..=max_steps),
        proptest::option::weighted(0.2, any::<u8>()),
    )
        .prop_map(|(shape, int, seed, steps, also)| Graph {
            shape,
            int,
            seed,
            steps,
            also,
        })
}

// ---- data ----

fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(0x94D0_49BB_1331_11EB);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `n` floats in `[-2.5, 2.5]`, multiples of 1/8, from `seed` (`salt` tells uses apart).
pub fn float_values(seed: u8, salt: u64, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (mix(seed as u64 + (salt << 8), i as u64) % 41) as f32 / 8.0 - 2.5)
        .collect()
}

/// `n` integers in `lo..hi` from `seed`.
pub fn int_values(seed: u8, salt: u64, n: usize, lo: i64, hi: i64) -> Vec<i32> {
    let span = (hi - lo) as u64;
    (0..n)
        .map(|i| (lo + (mix(seed as u64 + (salt << 8), i as u64) % span) as i64) as i32)
        .collect()
}

/// Float data of `shape` (magnitude at most [`FLOAT_LEAF`]).
pub fn float_leaf(shape: &[usize], seed: u8, salt: u64) -> Tensor {
    Tensor::from_vec(float_values(seed, salt, shape.iter().product()), shape)
}

/// Integer data of `shape` in `-8..=8`.
pub fn int_leaf(shape: &[usize], seed: u8, salt: u64) -> Tensor {
    Tensor::from_vec(int_values(seed, salt, shape.iter().product(), -8, 9), shape)
}

/// The magnitude bound of [`float_leaf`] data.
pub const FLOAT_LEAF: f64 = 2.5;
/// The magnitude bound of [`int_leaf`] data.
pub const INT_LEAF: f64 = 8.0;

// ---- building ----

/// A tensor and an upper bound of the magnitude of its elements.
#[derive(Clone)]
pub struct Value {
    /// The tensor.
    pub t: Tensor,
    /// An upper bound of `|element|`.
    pub bound: f64,
}

impl Value {
    fn is_int(&self) -> bool {
        !self.t.dtype().is_float()
    }
}

/// What a recipe may use.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Integer steps (integer data, `argmax`, bitwise ops); off for differentiated graphs.
    pub ints: bool,
    /// Take/gather indices outside the axis (they select nothing), not only in `-size..size`.
    pub wild_indices: bool,
    /// Shift the operands of kinked functions (`abs`, `relu`, `maximum`, `minimum`) by
    /// [`KINK_SHIFT`], for differentiated graphs: leaves are multiples of 1/8, so sums that
    /// cancel to exactly 0 are common, and a kernel that sums in another order lands on
    /// either side of the kink, where the derivative jumps.
    pub away_from_kinks: bool,
}

/// The shift of kinked operands under [`Options::away_from_kinks`]: far from every multiple
/// of 1/8, so that exact ties need a coincidence rather than a cancellation.
pub const KINK_SHIFT: f32 = 0.0123;

/// Builds recipes, remembering every intermediate (for [`Rhs::Earlier`] and [`Step::TakeBy`]).
pub struct Builder {
    options: Options,
    history: Vec<Value>,
    cumsums: usize,
}

/// The input tensor of `graph` (its leading `batch` axes, if any, filled too).
pub fn input(graph: &Graph, batch: &[usize]) -> Value {
    let shape = [batch, graph.shape.as_slice()].concat();
    if graph.int {
        Value {
            t: int_leaf(&shape, graph.seed, 1),
            bound: INT_LEAF,
        }
    } else {
        Value {
            t: float_leaf(&shape, graph.seed, 1),
            bound: FLOAT_LEAF,
        }
    }
}

/// The steps of `graph` applied to `x`; the result and the optional second output.
pub fn build(graph: &Graph, x: Value, options: Options) -> (Value, Option<Value>) {
    let mut b = Builder {
        options,
        history: vec![],
        cumsums: 0,
    };
    let mut x = x;
    for step in &graph.steps {
        x = b.tame(x);
        b.history.push(x.clone());
        if let Some(y) = b.apply(&x, step) {
            debug_assert!(y.t.numel() <= MAX_NUMEL);
            x = y;
        }
    }
    let also = graph
        .also
        .map(|k| b.history[k as usize % b.history.len()].clone());
    (x, also)
}

fn pow2_at_most(bound: f64, cap: f64) -> f32 {
    let mut s = 1.0f64;
    while bound * s > cap {
        s *= 0.5;
    }
    s as f32
}

fn fits(shape: &[usize]) -> bool {
    shape.len() <= MAX_RANK
        && shape.iter().all(|&d| d <= MAX_AXIS)
        && shape.iter().product::<usize>() <= MAX_NUMEL
}

fn float(v: &Value) -> Value {
    if v.is_int() {
        Value {
            t: v.t.cast(DType::F32),
            bound: v.bound,
        }
    } else {
        v.clone()
    }
}

/// An operand: a tensor, or a constant of the current dtype.
enum Operand {
    T(Tensor),
    F(f32),
    I(i32),
}

impl Builder {
    /// Brings `x` back within the caps.
    fn tame(&self, x: Value) -> Value {
        if x.is_int() {
            if x.bound > INT_CAP {
                return Value {
                    t: x.t.remainder(61i32),
                    bound: 60.0,
                };
            }
        } else if x.bound > FLOAT_CAP {
            let s = pow2_at_most(x.bound, FLOAT_CAP / 2.0);
            return Value {
                t: x.t.mul(s),
                bound: x.bound * s as f64,
            };
        }
        x
    }

    /// `x` scaled (floats) or reduced (integers) to magnitude at most `cap`.
    fn within(&self, x: &Value, cap: f64) -> Value {
        if x.bound <= cap {
            return x.clone();
        }
        if x.is_int() {
            let m = cap.floor() as i32 + 1;
            Value {
                t: x.t.remainder(m),
                bound: (m - 1) as f64,
            }
        } else {
            let s = pow2_at_most(x.bound, cap);
            Value {
                t: x.t.mul(s),
                bound: x.bound * s as f64,
            }
        }
    }

    fn rhs(&self, x: &Value, rhs: Rhs, salt: u64) -> Option<(Operand, f64)> {
        let shape = x.t.shape();
        match rhs {
            Rhs::Leaf { seed, ones } => {
                let s: Vec<usize> = shape
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| if ones >> i & 1 == 1 { 1 } else { d })
                    .collect();
                Some(if x.is_int() {
                    (Operand::T(int_leaf(&s, seed, salt)), INT_LEAF)
                } else {
                    (Operand::T(float_leaf(&s, seed, salt)), FLOAT_LEAF)
                })
            }
            Rhs::Earlier { back } => {
                let same: Vec<&Value> = self
                    .history
                    .iter()
                    .rev()
                    .filter(|v| v.t.shape() == shape && v.t.dtype() == x.t.dtype())
                    .collect();
                if same.is_empty() {
                    return None;
                }
                let v = same[back as usize % same.len()];
                Some((Operand::T(v.t.clone()), v.bound))
            }
            Rhs::Const(k) => Some(if x.is_int() {
                (Operand::I(k as i32), k.unsigned_abs() as f64)
            } else {
                (Operand::F(k as f32 / 4.0), k.unsigned_abs() as f64 / 4.0)
            }),
        }
    }

    /// `op(x)` for one step, or `None` when the step does not apply.
    fn apply(&mut self, x: &Value, step: &Step) -> Option<Value> {
        let shape = x.t.shape();
        let rank = shape.len();
        let ax = |a: u8| (a as usize) % rank.max(1);
        let v = |t: Tensor, bound: f64| Some(Value { t, bound });
        let away = self.options.away_from_kinks && !x.is_int();
        let kinked = |t: &Tensor| if away { t.add(KINK_SHIFT) } else { t.clone() };
        let shifted = &kinked(&x.t);
        let slack = if away { KINK_SHIFT as f64 } else { 0.0 };
        let t = &x.t;
        match *step {
            Step::Unary(op) => {
                if x.is_int() && !matches!(op, Unary::Neg | Unary::Abs | Unary::Square) {
                    return self.apply(&float(x), step);
                }
                let b = x.bound;
                match op {
                    Unary::Neg => v(t.neg(), b),
                    Unary::Abs => v(shifted.abs(), b + slack),
                    Unary::Sin => v(t.sin(), b.min(1.0)),
                    Unary::Cos => v(t.cos(), 1.0),
                    Unary::Erf => v(t.erf(), b.min(1.0)),
                    Unary::Tanh => v(t.tanh(), b.min(1.0)),
                    Unary::Sigmoid => v(t.sigmoid(), 1.0),
                    Unary::Relu => v(shifted.relu(), b + slack),
                    Unary::Exp => {
                        let y = self.within(x, 2.0);
                        v(y.t.exp(), y.bound.exp())
                    }
                    Unary::Log => v(shifted.abs().add(1.0f32).log(), (b + slack + 1.0).ln()),
                    Unary::Sqrt => v(shifted.abs().add(0.25f32).sqrt(), (b + slack + 0.25).sqrt()),
                    Unary::Square => v(t.square(), b * b),
                    Unary::Recip => v(shifted.abs().add(1.0f32).recip(), 1.0),
                    Unary::Pow => v(
                        shifted.abs().add(0.5f32).pow(1.5f32),
                        (b + slack + 0.5).powf(1.5),
                    ),
                }
            }
            Step::Binary(op, r) => {
                let int = x.is_int();
                if !int && matches!(op, Binary::Remainder | Binary::BitAnd | Binary::BitXor) {
                    return None;
                }
                let (r, rb) = self.rhs(x, r, 2)?;
                let b = x.bound;
                // |r| + 1, a divisor that is never near zero.
                let divisor = |r: &Operand| -> Operand {
                    match r {
                        Operand::T(r) if int => Operand::T(r.abs().add(1i32)),
                        Operand::T(r) => Operand::T(kinked(r).abs().add(1.0f32)),
                        Operand::F(c) => Operand::F(c.abs() + 1.0),
                        Operand::I(c) => Operand::I(c.abs() + 1),
                    }
                };
                macro_rules! call {
                    ($method:ident, $r:expr) => {
                        call!(t, $method, $r)
                    };
                    ($x:expr, $method:ident, $r:expr) => {
                        match $r {
                            Operand::T(r) => $x.$method(&r),
                            Operand::F(c) => $x.$method(c),
                            Operand::I(c) => $x.$method(c),
                        }
                    };
                }
                match op {
                    Binary::Add => v(call!(add, r), b + rb),
                    Binary::Sub => v(call!(sub, r), b + rb),
                    Binary::Mul => v(call!(mul, r), b * rb),
                    Binary::Div if int => v(call!(floor_div, divisor(&r)), b),
                    Binary::Div => v(call!(div, divisor(&r)), b),
                    Binary::Maximum => v(call!(shifted, maximum, r), (b + slack).max(rb)),
                    Binary::Minimum => v(call!(shifted, minimum, r), (b + slack).max(rb)),
                    Binary::Remainder => v(call!(remainder, divisor(&r)), rb),
                    // Both operands within 2^k - 1 keep the result within it.
                    Binary::BitAnd | Binary::BitXor => {
                        let m = b.max(rb).max(1.0);
                        let bound = 2f64.powi(m.log2().floor() as i32 + 1) - 1.0;
                        let y = if op == Binary::BitAnd {
                            call!(bitwise_and, r)
                        } else {
                            call!(bitwise_xor, r)
                        };
                        // Negative values have all high bits set: and/xor of two negatives
                        // stays within the bound of the wider one as a two's complement.
                        v(y, bound + 1.0)
                    }
                }
            }
            Step::Select { seed, other } => {
                let cond = if x.is_int() {
                    t.lt(int_leaf(&shape, seed, 3))
                } else {
                    float_leaf(&shape, seed, 3).lt(float_leaf(&shape, seed, 4))
                };
                let (o, ob) = self.rhs(x, other, 5)?;
                let y = match o {
                    Operand::T(o) => cond.where_(t, &o),
                    Operand::F(c) => cond.where_(t, c),
                    Operand::I(c) => cond.where_(t, c),
                };
                v(y, x.bound.max(ob))
            }
            Step::Permute { rot } if rank >= 2 => {
                let mut order: Vec<usize> = (0..rank).collect();
                order.rotate_left(1 + rot as usize % (rank - 1));
                v(t.permute(&order), x.bound)
            }
            Step::Transpose { a, b } if rank >= 1 => {
                v(t.transpose(ax(a) as isize, ax(b) as isize), x.bound)
            }
            Step::Flip { axis } if rank >= 1 => v(t.flip(ax(axis) as isize), x.bound),
            Step::Pad {
                axis,
                before,
                after,
                value,
            } if rank >= 1 => {
                let mut pads = vec![(0, 0); rank];
                pads[ax(axis)] = (before as usize % 3, after as usize % 3);
                let mut s = shape.clone();
                s[ax(axis)] += pads[ax(axis)].0 + pads[ax(axis)].1;
                if !fits(&s) {
                    return None;
                }
                if value == 0 {
                    v(t.pad(&pads), x.bound)
                } else if x.is_int() {
                    v(
                        t.pad_value(&pads, value as i32),
                        x.bound.max(value.unsigned_abs() as f64),
                    )
                } else {
                    let c = value as f32 / 4.0;
                    v(t.pad_value(&pads, c), x.bound.max(c.abs() as f64))
                }
            }
            Step::Shrink { axis, begin, len } if rank >= 1 => {
                let a = ax(axis);
                let n = shape[a];
                let begin = begin as usize % n;
                let len = 1 + len as usize % (n - begin);
                let bounds: Vec<(usize, usize)> = shape
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| if i == a { (begin, begin + len) } else { (0, d) })
                    .collect();
                v(t.shrink(&bounds), x.bound)
            }
            Step::Flatten { axis } if rank >= 2 => {
                let a = axis as usize % (rank - 1);
                let mut s = shape.clone();
                let merged = s[a] * s[a + 1];
                s.splice(a..a + 2, [merged]);
                if !fits(&s) {
                    return None;
                }
                v(t.flatten(a as isize, a as isize + 1), x.bound)
            }
            Step::Split { axis } if (1..MAX_RANK).contains(&rank) => {
                let a = ax(axis);
                let n = shape[a];
                let f = (2..n).find(|&f| n.is_multiple_of(f)).unwrap_or(1);
                let mut s = shape.clone();
                s.splice(a..a + 1, [f, n / f]);
                v(t.reshape(&s), x.bound)
            }
            Step::Unsqueeze { axis, size } if rank < MAX_RANK => {
                let a = axis as usize % (rank + 1);
                let mut s = shape.clone();
                s.insert(a, 1 + size as usize % 3);
                if !fits(&s) {
                    return None;
                }
                v(t.unsqueeze(a as isize).expand(&s), x.bound)
            }
            Step::Squeeze => {
                let a = shape.iter().position(|&d| d == 1)?;
                v(t.squeeze(a as isize), x.bound)
            }
            Step::Reduce { op, axis, keepdim } if rank >= 1 => {
                self.reduce(x, op, Some(ax(axis)), keepdim)
            }
            Step::ReduceAll(op) => self.reduce(x, op, None, false),
            Step::Softmax { axis } if rank >= 1 => v(float(x).t.softmax(ax(axis) as isize), 1.0),
            Step::LogSumExp { axis } if rank >= 1 => {
                let n = shape[ax(axis)] as f64;
                v(
                    float(x).t.logsumexp(ax(axis) as isize, false),
                    x.bound + n.ln(),
                )
            }
            // At most one cumsum per graph: two cumsums and a pad make the scheduler slow
            // (tens of seconds): the vmap (Rewrite) of Graph { shape: [1, 3, 3], steps:
            // [Cumsum { axis: 79 }, Cumsum { axis: 32 }, Pad { axis: 255, before: 2,
            // after: 1, value: -4 }, Cat { axis: 254, seed: 242, len: 0 }] } with batch 2 at
            // axis 2 takes over a second to schedule, 48 s with a matmul and a take more.
            Step::Cumsum { axis } if rank >= 1 && self.cumsums == 0 => {
                self.cumsums += 1;
                let n = shape[ax(axis)] as f64;
                v(t.cumsum(ax(axis) as isize), x.bound * n)
            }
            Step::Matmul { n, seed, left } if rank >= 1 => {
                let n = 1 + n as usize % 4;
                let leaf = |s: &[usize]| {
                    if x.is_int() {
                        int_leaf(s, seed, 6)
                    } else {
                        float_leaf(s, seed, 6)
                    }
                };
                let lb = if x.is_int() { INT_LEAF } else { FLOAT_LEAF };
                if left && rank >= 2 {
                    let m = shape[rank - 2];
                    let mut s = shape.clone();
                    s[rank - 2] = n;
                    if !fits(&s) {
                        return None;
                    }
                    v(leaf(&[n, m]).matmul(t), x.bound * lb * m as f64)
                } else {
                    let k = shape[rank - 1];
                    let mut s = shape.clone();
                    s[rank - 1] = n;
                    if !fits(&s) {
                        return None;
                    }
                    v(t.matmul(&leaf(&[k, n])), x.bound * lb * k as f64)
                }
            }
            Step::MatmulSelf if rank >= 2 => {
                let (m, k) = (shape[rank - 2], shape[rank - 1]);
                let mut s = shape.clone();
                s[rank - 1] = m;
                if !fits(&s) {
                    return None;
                }
                v(t.matmul(&t.transpose(-1, -2)), x.bound * x.bound * k as f64)
            }
            Step::Take { axis, seed, len } if rank >= 1 => {
                let a = ax(axis);
                let len = 1 + len as usize % 4;
                let idx = self.indices(&[len], shape[a], seed);
                let mut s = shape.clone();
                s[a] = len;
                if !fits(&s) {
                    return None;
                }
                v(t.take(&idx, a as isize), x.bound)
            }
            Step::TakeBy { axis, back } if rank >= 1 => {
                let a = ax(axis);
                let k = shape[a] as i32;
                let ints: Vec<&Value> = self
                    .history
                    .iter()
                    .rev()
                    .filter(|v| v.is_int() && v.t.numel() <= 8 && v.t.ndim() <= 2)
                    .collect();
                if ints.is_empty() {
                    return None;
                }
                let from = ints[back as usize % ints.len()];
                let mut s = shape.clone();
                s.splice(a..a + 1, from.t.shape());
                if !fits(&s) {
                    return None;
                }
                // In -k..k: negative indices count from the end.
                let idx = from.t.cast(DType::I32).remainder(2 * k).sub(k);
                v(t.take(&idx, a as isize), x.bound)
            }
            Step::Gather { axis, seed, len } if rank >= 1 => {
                let a = ax(axis);
                let mut s = shape.clone();
                s[a] = 1 + len as usize % 4;
                if !fits(&s) {
                    return None;
                }
                let idx = self.indices(&s, shape[a], seed);
                v(t.gather(a as isize, &idx), x.bound)
            }
            Step::Cat { axis, seed, len } if rank >= 1 => {
                let a = ax(axis);
                let mut s = shape.clone();
                s[a] = 1 + len as usize % 3;
                let mut total = shape.clone();
                total[a] += s[a];
                if !fits(&total) {
                    return None;
                }
                let (other, ob) = if x.is_int() {
                    (int_leaf(&s, seed, 7), INT_LEAF)
                } else {
                    (float_leaf(&s, seed, 7), FLOAT_LEAF)
                };
                v(
                    Tensor::cat(&[t.clone(), other], a as isize),
                    x.bound.max(ob),
                )
            }
            Step::Stack { axis, flip } if rank < MAX_RANK => {
                let a = axis as usize % (rank + 1);
                let mut s = shape.clone();
                s.insert(a, 2);
                if !fits(&s) {
                    return None;
                }
                let other = if flip && rank >= 1 {
                    t.flip(0)
                } else {
                    t.neg()
                };
                v(Tensor::stack(&[t.clone(), other], a as isize), x.bound)
            }
            Step::ArgMax { axis } if rank >= 1 && x.is_int() && self.options.ints => {
                let a = ax(axis);
                v(t.argmax(a as isize, false), shape[a] as f64)
            }
            Step::ToFloat if x.is_int() => v(t.cast(DType::F32), x.bound),
            Step::Contiguous => v(t.contiguous(), x.bound),
            Step::Detach => v(t.detach(), x.bound),
            _ => None,
        }
    }

    fn reduce(&self, x: &Value, op: Reduce, axis: Option<usize>, keepdim: bool) -> Option<Value> {
        let shape = x.t.shape();
        let n = match axis {
            Some(a) => shape[a],
            None => shape.iter().product(),
        } as f64;
        let axes: Vec<usize> = match axis {
            Some(a) => vec![a],
            None => (0..shape.len()).collect(),
        };
        let v = |t: Tensor, bound: f64| Some(Value { t, bound });
        match op {
            Reduce::Sum => v(x.t.sum(&axes, keepdim), x.bound * n),
            Reduce::Max => v(x.t.max(&axes, keepdim), x.bound),
            Reduce::Min => v(x.t.min(&axes, keepdim), x.bound),
            Reduce::Prod => {
                if n > 4.0 {
                    return None;
                }
                let y = self.within(x, if x.is_int() { 2.0 } else { 1.0 });
                v(y.t.prod(&axes, keepdim), y.bound.powf(n))
            }
            Reduce::Mean => v(float(x).t.mean(&axes, keepdim), x.bound),
        }
    }

    /// Index data of `shape` for an axis of `size`: in `-size..size`, or, with wild indices,
    /// in `-size-2..size+2` (outside the axis selects nothing).
    fn indices(&self, shape: &[usize], size: usize, seed: u8) -> Tensor {
        let k = size as i64;
        let (lo, hi) = if self.options.wild_indices {
            (-k - 2, k + 2)
        } else {
            (-k, k)
        };
        Tensor::from_vec(int_values(seed, 8, shape.iter().product(), lo, hi), shape)
    }
}
