//! The golden-case harness: reads a peer's results from tests/data (JAX's transforms.json, made by the
//! shared golden folder's gen.py), runs each case through a builder, and compares the results
//! within the file's `rtol`/`atol`, reporting every case by name.

use super::json::Json;
use super::{allclose, max_abs_diff, values};
use std::collections::BTreeMap;
use tensor::prelude::*;

/// A case's inputs by name.
pub type Inputs = BTreeMap<String, Tensor>;

/// A tensor from the file's `{dtype, shape, data}` encoding.
pub fn tensor_from_json(value: &Json) -> Tensor {
    let shape = shape_of(value);
    let data = value.get("data").items().iter().map(|v| v.number());
    match value.get("dtype").string() {
        "f32" => Tensor::from_vec(data.map(|v| v as f32).collect(), &shape),
        "i32" => Tensor::from_vec(data.map(|v| v as i32).collect(), &shape),
        "i64" => Tensor::from_vec(data.map(|v| v as i64).collect(), &shape),
        "bool" => Tensor::from_vec(data.map(|v| v != 0.0).collect(), &shape),
        other => panic!("golden data: unknown dtype {other}"),
    }
}

fn shape_of(value: &Json) -> Vec<usize> {
    value
        .get("shape")
        .items()
        .iter()
        .map(|d| d.number() as usize)
        .collect()
}

/// Runs every case of tests/data/transforms.json through `build` (inputs in, results out),
/// prints `golden LABEL NAME: ok` or `FAILED (why)` for each, and panics naming the failed
/// cases.
pub fn check_all_cases(
    label: &str,
    build: impl Fn(&str, &Inputs) -> Vec<Tensor> + std::panic::RefUnwindSafe,
) {
    check_cases_in("transforms.json", label, build)
}

/// [`check_all_cases`] for the cases of `tests/data/<file>`.
pub fn check_cases_in(
    file: &str,
    label: &str,
    build: impl Fn(&str, &Inputs) -> Vec<Tensor> + std::panic::RefUnwindSafe,
) {
    check_cases_with_options(file, label, |case, inputs| {
        build(case.get("name").string(), inputs)
    });
}

/// The parsed `tests/data/<file>`.
pub fn load(file: &str) -> Json {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path} is part of the repository: {e}"));
    Json::parse(&text)
}

/// A case's named input tensors.
pub fn inputs_of(case: &Json) -> Inputs {
    case.get("inputs")
        .members()
        .iter()
        .map(|(k, v)| (k.clone(), tensor_from_json(v)))
        .collect()
}

/// Runs every case of `tests/data/<file>` (`{rtol, atol, cases: [{name, inputs, outputs,
/// ...}]}`) through `build`, which gets the whole case (for its options) and its inputs.
pub fn check_cases_with_options(
    file: &str,
    label: &str,
    build: impl Fn(&Json, &Inputs) -> Vec<Tensor> + std::panic::RefUnwindSafe,
) {
    let doc = load(file);
    let (rtol, atol) = (doc.get("rtol").number(), doc.get("atol").number());
    let cases = doc.get("cases").items();
    let mut failures = Vec::new();
    for case in cases {
        let name = case.get("name").string();
        let inputs = inputs_of(case);
        let expected = case.get("outputs").items();
        let outcome =
            std::panic::catch_unwind(|| compare(&build(case, &inputs), expected, rtol, atol));
        match outcome.unwrap_or_else(|_| Err("panicked".to_string())) {
            Ok(()) => println!("golden {label} {name}: ok"),
            Err(why) => {
                println!("golden {label} {name}: FAILED ({why})");
                failures.push(name.to_string());
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed ({label}): {failures:?}",
        failures.len(),
        cases.len()
    );
}

/// The inputs of every case of `tests/data/<file>`, by case name (to build the cases' graphs
/// without comparing them).
pub fn case_inputs(file: &str) -> Vec<(String, Inputs)> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path} is part of the repository: {e}"));
    let doc = Json::parse(&text);
    doc.get("cases")
        .items()
        .iter()
        .map(|case| {
            let inputs = case
                .get("inputs")
                .members()
                .iter()
                .map(|(k, v)| (k.clone(), tensor_from_json(v)))
                .collect();
            (case.get("name").string().to_string(), inputs)
        })
        .collect()
}

fn compare(got: &[Tensor], expected: &[Json], rtol: f64, atol: f64) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!(
            "{} outputs, the peer has {}",
            got.len(),
            expected.len()
        ));
    }
    for (k, (g, e)) in got.iter().zip(expected).enumerate() {
        let shape = shape_of(e);
        if g.shape() != shape {
            return Err(format!(
                "output {k} has shape {:?}, the peer has {shape:?}",
                g.shape()
            ));
        }
        let want: Vec<f64> = e.get("data").items().iter().map(|v| v.number()).collect();
        let have = values(g);
        if !allclose(&have, &want, rtol, atol) {
            return Err(format!(
                "output {k} differs by up to {:.3e}",
                max_abs_diff(&have, &want)
            ));
        }
    }
    Ok(())
}
