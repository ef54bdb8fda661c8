//! End to end through C: tensor graphs scheduled into kernels (rangeify), each kernel lowered
//! to C (codegen), compiled and run, and the outputs compared with the reference interpreter.

mod common;

use common::{render_c, run};
use std::collections::HashMap;
use tensor_core::codegen::CodegenOptions;
use tensor_core::interp::evaluate;
use tensor_core::schedule::create_schedule;
use tensor_core::uop::dtype::decode_scalars;
use tensor_core::{Arg, Op, Scalar, Tensor, UOp};

fn buffer_id(b: &UOp) -> u64 {
    match b.arg() {
        Arg::Buffer(arg) => arg.id,
        other => panic!("expected a Buffer, got {:?} {other:?}", b.op()),
    }
}

fn initial_values(b: &UOp) -> Vec<Scalar> {
    let Arg::Buffer(arg) = b.arg() else {
        panic!("expected a Buffer")
    };
    match arg.storage.host_bytes() {
        Some(bytes) => decode_scalars(&bytes, arg.dtype),
        None => vec![Scalar::Int(0); arg.size],
    }
}

/// Every kernel of the schedule compiled to C and run in order; the outputs' elements.
fn run_through_c(outputs: &[UOp], options: &CodegenOptions) -> Vec<Vec<Scalar>> {
    let schedule = create_schedule(outputs);
    let mut memory: HashMap<u64, Vec<Scalar>> = HashMap::new();
    for item in &schedule.items {
        let sizes = item.buffer_sizes();
        let kernel = render_c(&item.ast, &sizes, options);
        let mut bufs: Vec<Vec<Scalar>> = item
            .buffers
            .iter()
            .map(|b| {
                memory
                    .get(&buffer_id(b))
                    .cloned()
                    .unwrap_or_else(|| initial_values(b))
            })
            .collect();
        run(&kernel, &mut bufs);
        for (b, (values, arg)) in item.buffers.iter().zip(bufs.into_iter().zip(&kernel.args)) {
            if arg.writes {
                memory.insert(buffer_id(b), values);
            }
        }
    }
    schedule
        .outputs
        .iter()
        .map(|o| {
            let mut b = o.clone();
            while b.op() != Op::Buffer {
                b = b.s(0).clone();
            }
            memory
                .get(&buffer_id(&b))
                .cloned()
                .unwrap_or_else(|| initial_values(&b))
        })
        .collect()
}

#[track_caller]
fn assert_matches_interpreter(outputs: &[Tensor]) {
    let roots: Vec<UOp> = outputs.iter().map(|t| t.uop()).collect();
    let want: Vec<Vec<f64>> = roots
        .iter()
        .map(|r| evaluate(r).data.iter().map(|v| v.as_f64()).collect())
        .collect();
    for options in [
        CodegenOptions {
            optimize: false,
            threads: 1,
            ..CodegenOptions::default()
        },
        CodegenOptions {
            optimize: true,
            threads: 3,
            ..CodegenOptions::default()
        },
    ] {
        let got = run_through_c(&roots, &options);
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.len(), w.len());
            for (k, (g, w)) in g.iter().zip(w).enumerate() {
                let g = g.as_f64();
                let close = (g - w).abs() <= 1e-5 * w.abs().max(1.0) || (g.is_nan() && w.is_nan());
                assert!(
                    close,
                    "element {k}: C gives {g}, interpreter {w} ({options:?})"
                );
            }
        }
    }
}

fn sample(shape: &[usize], scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * scale).collect();
    Tensor::from_vec(data, shape)
}

#[test]
fn fused_elementwise_chain_runs_through_c() {
    let a = sample(&[4, 4], 2.0);
    assert_matches_interpreter(&[a.add(4.0f32).add(3.0f32)]);
}

#[test]
fn matmul_runs_through_c() {
    let a = sample(&[5, 7], 1.0);
    let b = sample(&[7, 8], 0.5);
    assert_matches_interpreter(&[a.matmul(&b)]);
}

#[test]
fn softmax_runs_through_c() {
    let x = sample(&[3, 10], 4.0);
    assert_matches_interpreter(&[x.softmax(-1)]);
}

#[test]
fn pad_permute_and_sum_run_through_c() {
    let x = sample(&[3, 5], 1.5);
    let padded = x.pad(&[(1, 2), (0, 3)]);
    let y = padded.permute(&[1, 0]).sum(1, false);
    assert_matches_interpreter(&[padded.relu(), y]);
}

#[test]
fn big_elementwise_kernel_is_threaded_and_matches() {
    let x = sample(&[300, 256], 3.0);
    assert_matches_interpreter(&[x.mul(x.clone()).sqrt()]);
}
