//! NumPy's and PyTorch's values for the ops of issue #19 (tests/data/ops.json, written by
//! tests/data/gen_ops.py), rebuilt with this crate's ops and compared twice: computed by the
//! compiled CPU path and by the reference interpreter. Integers and bools must match exactly;
//! floats within each case's `rtol`/`atol`, NaN matching NaN and infinities exactly, and the
//! sign of zero too where the case says `signed_zeros`.

mod common;

use common::json::Json;
use tensor::core::interp::evaluate;
use tensor::core::uop::Scalar;
use tensor::core::uop::dtype::decode_scalars;
use tensor::core::{Index, PadMode, ScatterReduce};
use tensor::prelude::*;

fn dtype_named(name: &str) -> DType {
    DType::ALL_VALUE_TYPES
        .into_iter()
        .find(|d| d.to_string() == name)
        .unwrap_or_else(|| panic!("unknown dtype {name}"))
}

fn scalar_of(v: &Json) -> Scalar {
    match v {
        Json::Bool(b) => Scalar::Bool(*b),
        Json::Number(n) => Scalar::Float(*n),
        Json::String(s) => match s.as_str() {
            "nan" => Scalar::Float(f64::NAN),
            "inf" => Scalar::Float(f64::INFINITY),
            "-inf" => Scalar::Float(f64::NEG_INFINITY),
            "-0" => Scalar::Float(-0.0),
            big => Scalar::Int(big[1..].parse::<i128>().expect("an integer") as i64),
        },
        other => panic!("not a value: {other:?}"),
    }
}

/// An array of the file as (dtype, shape, values in that dtype).
fn array(j: &Json) -> (DType, Vec<usize>, Vec<Scalar>) {
    let dtype = dtype_named(j.get("dtype").string());
    let shape = j
        .get("shape")
        .items()
        .iter()
        .map(|d| d.number() as usize)
        .collect();
    let data = j
        .get("data")
        .items()
        .iter()
        .map(|v| scalar_of(v).cast(dtype))
        .collect();
    (dtype, shape, data)
}

fn tensor_of(j: &Json) -> Tensor {
    let (dtype, shape, data) = array(j);
    Tensor::from_scalars(&data, dtype, &shape)
}

fn axes(p: &Json) -> Vec<isize> {
    p.get("axes")
        .items()
        .iter()
        .map(|a| a.number() as isize)
        .collect()
}

fn flag(p: &Json, key: &str) -> bool {
    p.members().get(key).is_some_and(|v| v == &Json::Bool(true))
}

fn num(p: &Json, key: &str) -> f64 {
    p.get(key).number()
}

fn axis(p: &Json) -> isize {
    num(p, "axis") as isize
}

fn pair((a, b): (Tensor, Tensor)) -> Vec<Tensor> {
    vec![a, b]
}

fn pairs(j: &Json) -> Vec<(isize, isize)> {
    j.items()
        .iter()
        .map(|q| {
            (
                q.items()[0].number() as isize,
                q.items()[1].number() as isize,
            )
        })
        .collect()
}

fn pad_mode(p: &Json) -> PadMode {
    match p.get("mode").string() {
        "constant" => PadMode::Constant(Scalar::Float(num(p, "value"))),
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        other => panic!("no pad mode {other}"),
    }
}

/// An entry of an index expression; arrays name inputs after the indexed tensor.
fn index_entry(e: &Json, x: &[Tensor]) -> Index {
    let args = e.get("args").items();
    let opt = |j: &Json| match j {
        Json::Null => None,
        n => Some(n.number() as isize),
    };
    match e.get("kind").string() {
        "slice" => Index::Slice(opt(&args[0]), opt(&args[1]), args[2].number() as isize),
        "full" => Index::Full,
        "at" => Index::At(args[0].number() as isize),
        _ => Index::Array(x[1 + args[0].number() as usize].clone()),
    }
}

/// The case's op applied to its inputs with this crate's API.
fn run(op: &str, x: &[Tensor], p: &Json) -> Vec<Tensor> {
    let one = |t: Tensor| vec![t];
    match op {
        "pow" => one(x[0].pow(&x[1])),
        "pow_scalar" => one(x[0].pow(num(p, "exponent"))),
        "matmul" => one(x[0].matmul(&x[1])),
        "sum" => one(x[0].sum(&axes(p), false)),
        "mean" => one(x[0].mean(&axes(p), false)),
        "gather" => one(x[0].gather(num(p, "axis") as isize, &x[1])),
        "round" => one(x[0].round()),
        "round_decimals" => one(x[0].round_decimals(num(p, "decimals") as i32)),
        "asin" => one(x[0].asin()),
        "acos" => one(x[0].acos()),
        "atan" => one(x[0].atan()),
        "atan2" => one(x[0].atan2(&x[1])),
        "copysign" => one(x[0].copysign(&x[1])),
        "signbit" => one(x[0].signbit()),
        "fmod" => one(x[0].fmod(&x[1])),
        "logaddexp" => one(x[0].logaddexp(&x[1])),
        "isnan" => one(x[0].isnan()),
        "isinf" => one(x[0].isinf()),
        "isfinite" => one(x[0].isfinite()),
        "isclose" => one(x[0].isclose(&x[1], num(p, "rtol"), num(p, "atol"), flag(p, "equal_nan"))),
        "allclose" => {
            one(x[0].allclose(&x[1], num(p, "rtol"), num(p, "atol"), flag(p, "equal_nan")))
        }
        "var_with" => one(x[0].var_with(&axes(p), num(p, "correction"), flag(p, "keepdim"))),
        "std_with" => one(x[0].std_with(&axes(p), num(p, "correction"), flag(p, "keepdim"))),
        "shl" => one(&x[0] << &x[1]),
        "shr" => one(&x[0] >> &x[1]),
        "bitcast" => one(x[0].bitcast(dtype_named(p.get("dtype").string()))),
        "one_hot" => {
            let n = num(p, "num_classes") as usize;
            match p.members().get("dtype") {
                Some(d) => one(x[0].one_hot_as(n, dtype_named(d.string()))),
                None => one(x[0].one_hot(n)),
            }
        }
        "cumprod" => one(x[0].cumprod(axis(p))),
        "logcumsumexp" => one(x[0].logcumsumexp(axis(p))),
        "cummax" => pair(x[0].cummax(axis(p))),
        "cummin" => pair(x[0].cummin(axis(p))),
        "pad_mode" => one(x[0].pad_mode(&pairs(p.get("pads")), pad_mode(p))),
        "pad_interior" => {
            let config: Vec<(isize, isize, usize)> = p
                .get("config")
                .items()
                .iter()
                .map(|c| {
                    let c = c.items();
                    (
                        c[0].number() as isize,
                        c[1].number() as isize,
                        c[2].number() as usize,
                    )
                })
                .collect();
            one(x[0].pad_interior(&config, num(p, "value")))
        }
        "sort" => pair(x[0].sort(axis(p), flag(p, "descending"))),
        "argsort" => one(x[0].argsort(axis(p), false)),
        "topk" => pair(x[0].topk(num(p, "k") as usize, axis(p), flag(p, "largest"))),
        "kthvalue" => pair(x[0].kthvalue(num(p, "k") as usize, axis(p))),
        "msort" => one(x[0].msort()),
        "scatter" => one(x[0].scatter(axis(p), &x[1], &x[2])),
        "scatter_reduce" => {
            let how = match p.get("reduce").string() {
                "sum" => ScatterReduce::Sum,
                "prod" => ScatterReduce::Prod,
                "mean" => ScatterReduce::Mean,
                "amax" => ScatterReduce::Amax,
                "amin" => ScatterReduce::Amin,
                other => panic!("no reduction {other}"),
            };
            one(x[0].scatter_reduce(axis(p), &x[1], &x[2], how, flag(p, "include_self")))
        }
        "at" => {
            let at = x[0].at(&x[1]);
            one(match p.get("how").string() {
                "get" => at.get(),
                "set" => at.set(&x[2]),
                "add" => at.add(&x[2]),
                "mul" => at.mul(&x[2]),
                "min" => at.min(&x[2]),
                "max" => at.max(&x[2]),
                other => panic!("no at.{other}"),
            })
        }
        "dynamic_slice" => {
            let sizes: Vec<usize> = p
                .get("sizes")
                .items()
                .iter()
                .map(|d| d.number() as usize)
                .collect();
            one(x[0].dynamic_slice(&x[1], &sizes))
        }
        "dynamic_update_slice" => one(x[0].dynamic_update_slice(&x[1], &x[2])),
        "index" => {
            let entries: Vec<Index> = p
                .get("index")
                .items()
                .iter()
                .map(|e| index_entry(e, x))
                .collect();
            one(x[0].index(&entries))
        }
        "diagonal" => one(x[0].diagonal(
            num(p, "offset") as isize,
            num(p, "axis1") as isize,
            num(p, "axis2") as isize,
        )),
        "argwhere" => one(x[0].argwhere(num(p, "size") as usize, num(p, "fill") as i64)),
        "nonzero" => x[0].nonzero(num(p, "size") as usize, num(p, "fill") as i64),
        "masked_select" => one(x[0].masked_select(&x[1], num(p, "size") as usize, num(p, "fill"))),
        other => panic!("no op {other} in this test"),
    }
}

/// Why `actual` is not `expected` (element by element), or `None` when it is.
fn mismatch(
    actual: &[Scalar],
    expected: &[Scalar],
    dtype: DType,
    rtol: f64,
    atol: f64,
    signed_zeros: bool,
) -> Option<String> {
    if actual.len() != expected.len() {
        return Some(format!(
            "{} values, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let ok = if dtype.is_float() {
            let (a, e) = (a.as_f64(), e.as_f64());
            let close = if e.is_nan() || e.is_infinite() || a.is_nan() || a.is_infinite() {
                a == e || (a.is_nan() && e.is_nan())
            } else {
                (a - e).abs() <= atol + rtol * e.abs()
            };
            let zero_sign = !(signed_zeros && e == 0.0 && a == 0.0)
                || a.is_sign_negative() == e.is_sign_negative();
            close && zero_sign
        } else {
            a == e
        };
        if !ok {
            return Some(format!("element {i} is {a:?}, expected {e:?}"));
        }
    }
    None
}

#[test]
fn ops_match_numpy_and_pytorch() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ops.json"))
        .expect("tests/data/ops.json (written by tests/data/gen_ops.py)");
    let doc = Json::parse(&text);
    let mut failures = Vec::new();
    let cases = doc.get("cases").items();
    for case in cases {
        let name = case.get("name").string();
        let inputs: Vec<Tensor> = case.get("inputs").items().iter().map(tensor_of).collect();
        let outputs = run(case.get("op").string(), &inputs, case.get("params"));
        let expected = case.get("outputs").items();
        assert_eq!(outputs.len(), expected.len(), "{name}: number of results");
        let (rtol, atol) = (case.get("rtol").number(), case.get("atol").number());
        let signed_zeros = case.get("signed_zeros") == &Json::Bool(true);
        for (k, (out, exp)) in outputs.iter().zip(expected).enumerate() {
            let (dtype, shape, want) = array(exp);
            if out.dtype() != dtype || out.shape() != shape {
                failures.push(format!(
                    "{name} result {k}: {} {:?}, expected {dtype} {shape:?}",
                    out.dtype(),
                    out.shape()
                ));
                continue;
            }
            let bytes = tensor::runtime::realize::read_bytes(out).expect("compiled on the CPU");
            let compiled = decode_scalars(&bytes, dtype);
            let interpreted = evaluate(&out.uop()).data;
            for (how, got) in [("compiled", compiled), ("interpreted", interpreted)] {
                if let Some(why) = mismatch(&got, &want, dtype, rtol, atol, signed_zeros) {
                    failures.push(format!("{name} result {k} ({how}): {why}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
