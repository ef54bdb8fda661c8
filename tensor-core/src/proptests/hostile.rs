//! The public API under hostile arguments: random chains of calls with out-of-range and
//! extreme axes, sizes (`0`, `usize::MAX`, `1 << 62`), indices, NaN and infinite scalars,
//! integer and bool dtypes, and empty tensors. Every call gives a value or a clear error,
//! never a crash:
//!
//! - a call that refuses its arguments panics with a message that starts with the name of
//!   the op the user called (`reshape: ...`), never with an internal failure (an index out of
//!   bounds, an arithmetic overflow, an `unwrap`);
//! - a chain that was accepted is scheduled, run by the test executor and interpreted, and
//!   the two agree (NaN where the other has NaN), without a panic in either;
//! - the chain as a per-sample function, under `vmap` by every method at batch sizes 0, 1 and
//!   2, gives the stack of its per-sample values (the right empty shape at 0), or refuses
//!   clearly.
//!
//! CI runs 10,000 cases in the release profile (`PROPTEST_CASES`).

use super::check_property;
use crate::interp::{HostArray, evaluate};
use crate::schedule::create_schedule;
use crate::schedule::exec::run;
use crate::tensor::{Index, Tensor};
use crate::transform::{VmapMethod, vmap_with};
use crate::uop::DType;
use proptest::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// One call of the public API, with its raw (possibly hostile) arguments.
#[derive(Clone, Debug)]
enum Step {
    Reshape(Vec<isize>),
    ReshapeUnsigned(Vec<usize>),
    Expand(Vec<isize>),
    ExpandUnsigned(Vec<usize>),
    Permute(Vec<isize>),
    Transpose(isize, isize),
    Squeeze(isize),
    Unsqueeze(isize),
    Flatten(isize, isize),
    Flip(isize),
    Slice(isize, isize, isize),
    Narrow(isize, isize, usize),
    Pad(Vec<(usize, usize)>),
    Shrink(Vec<(usize, usize)>),
    Repeat(usize, isize),
    Tile(Vec<usize>),
    Diagonal(isize, isize, isize),
    Tril(i64),
    Reduce(Reduction, isize, bool),
    ReduceUnsigned(Reduction, usize),
    Scan(Scan, isize),
    Sort(isize, bool),
    Topk(usize, isize),
    Kthvalue(usize, isize),
    Take(Vec<i64>, isize),
    Gather(isize, Vec<i64>),
    OneHot(usize),
    IndexAt(Vec<isize>),
    Binary(Binary, f64),
    Pow(f64),
    Clamp(f64, f64),
    Cast(DType),
    MatmulSelf,
    CatSelf(isize),
    StackSelf(isize),
    Split(usize, isize),
}

/// Reductions that take an axis.
#[derive(Clone, Copy, Debug)]
enum Reduction {
    Sum,
    Max,
    Min,
    Mean,
    Prod,
    Var,
    Argmax,
    Softmax,
    LogSoftmax,
    Logsumexp,
}

/// Scans along an axis.
#[derive(Clone, Copy, Debug)]
enum Scan {
    Cumsum,
    Cumprod,
    Cummax,
    Logcumsumexp,
}

/// Binary ops with a scalar.
#[derive(Clone, Copy, Debug)]
enum Binary {
    Add,
    Mul,
    Div,
    FloorDiv,
    Remainder,
    Maximum,
}

/// An axis: mostly in range for small ranks, sometimes far out of it.
fn axis() -> impl Strategy<Value = isize> {
    prop_oneof![
        8 => -4isize..4,
        1 => Just(isize::MIN),
        1 => Just(isize::MAX),
        1 => -100isize..100,
    ]
}

/// A size: mostly small, sometimes zero or absurd.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 0usize..5,
        1 => Just(usize::MAX),
        1 => Just(1usize << 62),
        1 => Just(isize::MAX as usize + 1),
    ]
}

/// A signed dimension: small sizes, `-1` (infer), other negatives and absurd values.
fn dim() -> impl Strategy<Value = isize> {
    prop_oneof![
        8 => 0isize..5,
        2 => Just(-1isize),
        1 => -3isize..0,
        1 => Just(isize::MAX),
        1 => Just(isize::MIN),
    ]
}

/// A scalar operand: ordinary values, zero, and the IEEE specials.
fn scalar() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => -3.0f64..3.0,
        1 => Just(0.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(1e300),
        1 => (-3i32..4).prop_map(f64::from),
    ]
}

fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![
        Just(DType::F32),
        Just(DType::I32),
        Just(DType::I64),
        Just(DType::Bool),
        Just(DType::U8),
        Just(DType::F64),
    ]
}

fn reduction() -> impl Strategy<Value = Reduction> {
    prop_oneof![
        Just(Reduction::Sum),
        Just(Reduction::Max),
        Just(Reduction::Min),
        Just(Reduction::Mean),
        Just(Reduction::Prod),
        Just(Reduction::Var),
        Just(Reduction::Argmax),
        Just(Reduction::Softmax),
        Just(Reduction::LogSoftmax),
        Just(Reduction::Logsumexp),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let dims = || prop::collection::vec(dim(), 0..4);
    let sizes = || prop::collection::vec(size(), 0..4);
    let pairs = || prop::collection::vec((size(), size()), 0..4);
    let indices =
        || prop::collection::vec(prop_oneof![-4i64..6, Just(i64::MAX), Just(i64::MIN)], 0..4);
    prop_oneof![
        dims().prop_map(Step::Reshape),
        sizes().prop_map(Step::ReshapeUnsigned),
        dims().prop_map(Step::Expand),
        sizes().prop_map(Step::ExpandUnsigned),
        prop::collection::vec(axis(), 0..4).prop_map(Step::Permute),
        (axis(), axis()).prop_map(|(a, b)| Step::Transpose(a, b)),
        axis().prop_map(Step::Squeeze),
        axis().prop_map(Step::Unsqueeze),
        (axis(), axis()).prop_map(|(a, b)| Step::Flatten(a, b)),
        axis().prop_map(Step::Flip),
        (axis(), dim(), dim()).prop_map(|(a, s, e)| Step::Slice(a, s, e)),
        (axis(), dim(), size()).prop_map(|(a, s, n)| Step::Narrow(a, s, n)),
        pairs().prop_map(Step::Pad),
        pairs().prop_map(Step::Shrink),
        (size(), axis()).prop_map(|(n, a)| Step::Repeat(n, a)),
        sizes().prop_map(Step::Tile),
        (dim(), axis(), axis()).prop_map(|(o, a, b)| Step::Diagonal(o, a, b)),
        prop_oneof![-3i64..3, Just(i64::MAX), Just(i64::MIN)].prop_map(Step::Tril),
        (reduction(), axis(), any::<bool>()).prop_map(|(r, a, k)| Step::Reduce(r, a, k)),
        (reduction(), size()).prop_map(|(r, a)| Step::ReduceUnsigned(r, a)),
        (
            prop_oneof![
                Just(Scan::Cumsum),
                Just(Scan::Cumprod),
                Just(Scan::Cummax),
                Just(Scan::Logcumsumexp)
            ],
            axis()
        )
            .prop_map(|(s, a)| Step::Scan(s, a)),
        (axis(), any::<bool>()).prop_map(|(a, d)| Step::Sort(a, d)),
        (size(), axis()).prop_map(|(k, a)| Step::Topk(k, a)),
        (size(), axis()).prop_map(|(k, a)| Step::Kthvalue(k, a)),
        (indices(), axis()).prop_map(|(i, a)| Step::Take(i, a)),
        (axis(), indices()).prop_map(|(a, i)| Step::Gather(a, i)),
        size().prop_map(Step::OneHot),
        prop::collection::vec(dim(), 0..4).prop_map(Step::IndexAt),
        (
            prop_oneof![
                Just(Binary::Add),
                Just(Binary::Mul),
                Just(Binary::Div),
                Just(Binary::FloorDiv),
                Just(Binary::Remainder),
                Just(Binary::Maximum)
            ],
            scalar()
        )
            .prop_map(|(b, v)| Step::Binary(b, v)),
        scalar().prop_map(Step::Pow),
        (scalar(), scalar()).prop_map(|(lo, hi)| Step::Clamp(lo, hi)),
        dtype().prop_map(Step::Cast),
        Just(Step::MatmulSelf),
        axis().prop_map(Step::CatSelf),
        axis().prop_map(Step::StackSelf),
        (size(), axis()).prop_map(|(n, a)| Step::Split(n, a)),
    ]
}

/// A chain: the input's shape and dtype, and the calls made on it.
#[derive(Clone, Debug)]
struct Chain {
    shape: Vec<usize>,
    dtype: DType,
    steps: Vec<Step>,
}

fn chain() -> impl Strategy<Value = Chain> {
    (
        prop::collection::vec(0usize..4, 0..4),
        dtype(),
        prop::collection::vec(step(), 1..6),
    )
        .prop_map(|(shape, dtype, steps)| Chain {
            shape,
            dtype,
            steps,
        })
}

/// The input of `chain`: small values of its dtype (varied, with repeats, so sorting and
/// arg-reductions see ties).
fn input(chain: &Chain) -> Tensor {
    let n: usize = chain.shape.iter().product();
    let values: Vec<f32> = (0..n).map(|i| ((i * 7 + 3) % 5) as f32 - 2.0).collect();
    Tensor::from_vec(values, &chain.shape).cast(chain.dtype)
}

/// The op a step calls, as the user wrote it: what a refusal must name first.
fn op_name(step: &Step) -> &'static str {
    match step {
        Step::Reshape(_) | Step::ReshapeUnsigned(_) => "reshape",
        Step::Expand(_) | Step::ExpandUnsigned(_) => "expand",
        Step::Permute(_) => "permute",
        Step::Transpose(..) => "transpose",
        Step::Squeeze(_) => "squeeze",
        Step::Unsqueeze(_) => "unsqueeze",
        Step::Flatten(..) => "flatten",
        Step::Flip(_) => "flip",
        Step::Slice(..) => "slice",
        Step::Narrow(..) => "narrow",
        Step::Pad(_) => "pad",
        Step::Shrink(_) => "shrink",
        Step::Repeat(..) => "repeat",
        Step::Tile(_) => "tile",
        Step::Diagonal(..) => "diagonal",
        Step::Tril(_) => "tril",
        Step::Reduce(r, ..) => reduction_name(*r),
        Step::ReduceUnsigned(Reduction::Softmax | Reduction::LogSoftmax, _) => "logsumexp",
        Step::ReduceUnsigned(r, _) => reduction_name(*r),
        Step::Scan(s, _) => match s {
            Scan::Cumsum => "cumsum",
            Scan::Cumprod => "cumprod",
            Scan::Cummax => "cummax",
            Scan::Logcumsumexp => "logcumsumexp",
        },
        Step::Sort(..) => "sort",
        Step::Topk(..) => "topk",
        Step::Kthvalue(..) => "kthvalue",
        Step::Take(..) => "take",
        Step::Gather(..) => "gather",
        Step::OneHot(_) => "one_hot",
        Step::IndexAt(_) => "index",
        Step::Binary(b, _) => match b {
            Binary::Add => "add",
            Binary::Mul => "mul",
            Binary::Div => "div",
            Binary::FloorDiv => "floor_div",
            Binary::Remainder => "remainder",
            Binary::Maximum => "maximum",
        },
        Step::Pow(_) => "pow",
        Step::Clamp(..) => "clamp",
        Step::Cast(_) => "cast",
        Step::MatmulSelf => "matmul",
        Step::CatSelf(_) => "cat",
        Step::StackSelf(_) => "stack",
        Step::Split(..) => "split",
    }
}

fn reduction_name(r: Reduction) -> &'static str {
    match r {
        Reduction::Sum => "sum",
        Reduction::Max => "max",
        Reduction::Min => "min",
        Reduction::Mean => "mean",
        Reduction::Prod => "prod",
        Reduction::Var => "var",
        Reduction::Argmax => "argmax",
        Reduction::Softmax => "softmax",
        Reduction::LogSoftmax => "log_softmax",
        Reduction::Logsumexp => "logsumexp",
    }
}

fn reduce(t: &Tensor, r: Reduction, axis: isize, keepdim: bool) -> Tensor {
    match r {
        Reduction::Sum => t.sum(axis, keepdim),
        Reduction::Max => t.max(axis, keepdim),
        Reduction::Min => t.min(axis, keepdim),
        Reduction::Mean => t.mean(axis, keepdim),
        Reduction::Prod => t.prod(axis, keepdim),
        Reduction::Var => t.var(axis, keepdim),
        Reduction::Argmax => t.argmax(axis, keepdim),
        Reduction::Softmax => t.softmax(axis),
        Reduction::LogSoftmax => t.log_softmax(axis),
        Reduction::Logsumexp => t.logsumexp(axis, keepdim),
    }
}

/// `t` with the call of `step` applied.
fn apply(t: &Tensor, step: &Step) -> Tensor {
    match step {
        Step::Reshape(d) => t.reshape(d),
        Step::ReshapeUnsigned(d) => t.reshape(d),
        Step::Expand(d) => t.expand(d),
        Step::ExpandUnsigned(d) => t.expand(d),
        Step::Permute(order) => t.permute(order),
        Step::Transpose(a, b) => t.transpose(*a, *b),
        Step::Squeeze(a) => t.squeeze(*a),
        Step::Unsqueeze(a) => t.unsqueeze(*a),
        Step::Flatten(a, b) => t.flatten(*a, *b),
        Step::Flip(a) => t.flip(*a),
        Step::Slice(a, s, e) => t.slice(*a, *s, *e),
        Step::Narrow(a, s, n) => t.narrow(*a, *s, *n),
        Step::Pad(p) => t.pad(p),
        Step::Shrink(b) => t.shrink(b),
        Step::Repeat(n, a) => t.repeat(*n, *a),
        Step::Tile(r) => t.tile(r),
        Step::Diagonal(o, a, b) => t.diagonal(*o, *a, *b),
        Step::Tril(k) => t.tril(*k),
        Step::Reduce(r, a, k) => reduce(t, *r, *a, *k),
        Step::ReduceUnsigned(r, a) => match r {
            Reduction::Sum => t.sum(*a, false),
            Reduction::Max => t.max(*a, false),
            Reduction::Min => t.min(*a, false),
            Reduction::Mean => t.mean(*a, false),
            Reduction::Prod => t.prod(*a, false),
            Reduction::Var => t.var(*a, false),
            Reduction::Argmax => t.argmax(*a, false),
            Reduction::Softmax | Reduction::LogSoftmax => t.logsumexp(*a, false),
            Reduction::Logsumexp => t.logsumexp(*a, false),
        },
        Step::Scan(s, a) => match s {
            Scan::Cumsum => t.cumsum(*a),
            Scan::Cumprod => t.cumprod(*a),
            Scan::Cummax => t.cummax(*a).0,
            Scan::Logcumsumexp => t.logcumsumexp(*a),
        },
        Step::Sort(a, d) => t.sort(*a, *d).0,
        Step::Topk(k, a) => t.topk(*k, *a, true).1,
        Step::Kthvalue(k, a) => t.kthvalue(*k, *a).0,
        Step::Take(i, a) => t.take(&Tensor::from_vec(i.clone(), &[i.len()]), *a),
        Step::Gather(a, i) => t.gather(*a, &Tensor::from_vec(i.clone(), &[i.len()])),
        Step::OneHot(n) => t.one_hot(*n),
        Step::IndexAt(at) => {
            let index: Vec<Index> = at.iter().map(|&i| Index::At(i)).collect();
            t.index(&index)
        }
        Step::Binary(b, v) => {
            let v = *v as f32;
            match b {
                Binary::Add => t + v,
                Binary::Mul => t * v,
                Binary::Div => t / v,
                Binary::FloorDiv => t.floor_div(v),
                Binary::Remainder => t.remainder(v),
                Binary::Maximum => t.maximum(v),
            }
        }
        Step::Pow(e) => t.pow(*e as f32),
        Step::Clamp(lo, hi) => t.clamp(*lo as f32, *hi as f32),
        Step::Cast(d) => t.cast(*d),
        Step::MatmulSelf => t.matmul(t),
        Step::CatSelf(a) => Tensor::cat(&[t.clone(), t.clone()], *a),
        Step::StackSelf(a) => Tensor::stack(&[t.clone(), t.clone()], *a),
        Step::Split(n, a) => t.split(*n, *a).swap_remove(0),
    }
}

/// The message of a panic payload.
fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "<a panic without a message>".into())
}

/// `Ok(None)` when `message` is a clear refusal of `op`; an error naming what is unclear.
fn clear_refusal(op: &str, message: &str) -> Result<(), String> {
    let first_word = message.split(':').next().unwrap_or("");
    if first_word == op {
        Ok(())
    } else {
        Err(format!(
            "{op} panicked without naming itself first: {message}"
        ))
    }
}

/// Elements beyond which an accepted chain is not evaluated (its values are not the point).
const MAX_EVALUATED: usize = 4096;

/// Runs `chain`'s calls; `Ok(Some(result))` when every call was accepted, `Ok(None)` at a
/// clear refusal.
fn built(chain: &Chain, x: &Tensor) -> Result<Option<Tensor>, String> {
    let mut t = x.clone();
    for step in &chain.steps {
        match catch_unwind(AssertUnwindSafe(|| apply(&t, step))) {
            Ok(next) => t = next,
            Err(payload) => {
                clear_refusal(op_name(step), &message(&*payload))?;
                return Ok(None);
            }
        }
    }
    Ok(Some(t))
}

/// `got` equals `want`, with NaN equal to NaN and infinities exactly.
fn same_values(what: &str, got: &HostArray, want: &HostArray) -> Result<(), String> {
    let finite = |a: &HostArray| -> HostArray {
        let data = a
            .to_f64_vec()
            .into_iter()
            .map(|v| match v {
                v if v.is_nan() => crate::uop::Scalar::Float(1.5e300),
                v if v == f64::INFINITY => crate::uop::Scalar::Float(1e301),
                v if v == f64::NEG_INFINITY => crate::uop::Scalar::Float(-1e301),
                v => crate::uop::Scalar::Float(v),
            })
            .collect();
        HostArray::new(DType::F64, &a.shape, data)
    };
    if got.dtype != want.dtype {
        return Err(format!(
            "{what}: dtype {} but want {}",
            got.dtype, want.dtype
        ));
    }
    let bound = want
        .to_f64_vec()
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f64, |m, v| m.max(v.abs()));
    let tolerance = if want.dtype.is_float() {
        1e-3 * bound
    } else {
        0.0
    };
    let (got, want) = (finite(got), finite(want));
    if got.shape != want.shape || !got.allclose(&want, 1e-3, tolerance) {
        return Err(format!(
            "{what}: values differ\n got {:?} {:?}\nwant {:?} {:?}",
            got.shape,
            got.to_f64_vec(),
            want.shape,
            want.to_f64_vec()
        ));
    }
    Ok(())
}

/// Interprets `t` and runs its schedule; both must succeed and agree.
fn evaluated(what: &str, t: &Tensor) -> Result<Option<HostArray>, String> {
    if t.numel() > MAX_EVALUATED {
        return Ok(None);
    }
    let u = t.uop();
    let want = catch_unwind(AssertUnwindSafe(|| evaluate(&u)))
        .map_err(|p| format!("{what}: the interpreter panicked: {}", message(&*p)))?;
    let got = catch_unwind(AssertUnwindSafe(|| {
        run(&create_schedule(std::slice::from_ref(&u)))
    }))
    .map_err(|p| format!("{what}: the schedule panicked: {}", message(&*p)))?;
    let got = HostArray::new(
        u.dtype(),
        &u.shape_vec(),
        got.into_iter().next().unwrap_or_default(),
    );
    same_values(what, &got, &want)?;
    Ok(Some(want))
}

/// The chain as a per-sample function under `vmap` by `method` over `batch` copies of `x`
/// (each sample shifted, so they differ) equals the stack of its per-sample values.
fn batched(chain: &Chain, x: &Tensor, batch: usize, method: VmapMethod) -> Result<(), String> {
    let samples: Vec<Tensor> = (0..batch)
        .map(|b| x + b as f32)
        .map(|s| s.cast(x.dtype()))
        .collect();
    let xs = if batch == 0 {
        Tensor::zeros(&[&[0usize][..], &x.shape()[..]].concat(), x.dtype())
    } else {
        Tensor::stack(&samples, 0)
    };
    let steps = chain.clone();
    let f = move |t: &Tensor| match built(&steps, t) {
        Ok(Some(r)) => r,
        _ => panic!("the per-sample chain was accepted on its own"),
    };
    let what = format!("vmap by {method:?} at batch {batch}");
    let out = catch_unwind(AssertUnwindSafe(|| {
        vmap_with(f.clone(), 0, 0, method).call1(&[xs])
    }))
    .map_err(|p| format!("{what} panicked: {}", message(&*p)))?;
    let want: Vec<Tensor> = samples.iter().map(&f).collect();
    let single = f(x);
    let want_shape = [&[batch][..], &single.shape()[..]].concat();
    if out.shape() != want_shape {
        return Err(format!(
            "{what}: shape {:?} but want {want_shape:?}",
            out.shape()
        ));
    }
    if batch == 0 || out.numel() > MAX_EVALUATED {
        return Ok(());
    }
    let Some(got) = evaluated(&what, &out)? else {
        return Ok(());
    };
    let want = evaluate(&Tensor::stack(&want, 0).uop());
    same_values(&what, &got, &want)
}

/// Everything a chain must satisfy.
fn holds(chain: &Chain) -> Result<(), String> {
    let x = input(chain);
    let Some(result) = built(chain, &x)? else {
        return Ok(());
    };
    if evaluated("the chain", &result)?.is_none() {
        return Ok(());
    }
    for batch in [0, 1, 2] {
        for method in [
            VmapMethod::Rewrite,
            VmapMethod::Range,
            VmapMethod::PadReduce,
        ] {
            batched(chain, &x, batch, method)?;
        }
    }
    Ok(())
}

#[test]
fn hostile_calls_give_a_value_or_a_clear_refusal() {
    check_property(
        "hostile::hostile_calls_give_a_value_or_a_clear_refusal",
        256,
        chain(),
        holds,
    );
}
