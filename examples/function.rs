//! `#[function]`: a Rust fn of tensors captured as one `Function` node of the graph, traced
//! once per input signature. Run with `cargo run --example function`.

use tensor::core::transform::function::call_mode_of;
use tensor::prelude::*;

/// One dense layer with a tanh activation.
#[function]
fn dense(w: &Tensor, b: &Tensor, x: &Tensor) -> Tensor {
    (x.matmul(w) + b).tanh()
}

/// Two layers; each call of `dense` inside is its own `Function` node.
#[function(precompile)]
fn mlp(w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor) -> Tensor {
    dense(w2, b2, &dense(w1, b1, x))
}

fn ramp(shape: &[usize], scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n)
            .map(|i| (i as f32 - n as f32 / 2.0) * scale)
            .collect(),
        shape,
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (w1, b1) = (ramp(&[3, 4], 0.1), ramp(&[4], 0.05));
    let (w2, b2) = (ramp(&[4, 2], 0.2), ramp(&[2], 0.0));
    let x = ramp(&[5, 3], 0.3);

    let y = mlp(&w1, &b1, &w2, &b2, &x);
    let root = y.uop();
    let function = root.s(0);
    println!(
        "graph: {:?}(Function({:?} of {} result(s), {} arguments)), scheduled as {:?}",
        root.op(),
        function.s(0).op(),
        function.s(0).src().len(),
        function.src().len() - 1,
        call_mode_of(function).expect("a Function node"),
    );
    // Realizing replaces the graph by its buffer (the scheduler inlines the Function today).
    println!("mlp(x) for 5 inputs:\n{:?}", y.to_vec::<f32>()?);

    let _ = mlp(&w1, &b1, &w2, &b2, &ramp(&[5, 3], -0.1));
    println!(
        "after two calls with one signature: mlp traced {} time(s)",
        mlp::trace_count()
    );
    let _ = mlp(&w1, &b1, &w2, &b2, &ramp(&[7, 3], 0.1));
    println!(
        "after a batch of 7: mlp traced {} time(s)",
        mlp::trace_count()
    );
    println!(
        "dense traced {} time(s) (once per mlp trace and layer shape)",
        dense::trace_count()
    );

    let params = (w1.clone(), b1.clone(), w2.clone(), b2.clone());
    let g = grad!(move |x| mlp(&params.0, &params.1, &params.2, &params.3, x).sum_all())(&x);
    println!("d sum(mlp(x)) / dx:\n{:?}", g.to_vec::<f32>()?);
    Ok(())
}
