//! Per-sample gradients: `vmap!(grad!(loss, argnums = 0), in_axes = (None, 0, 0))` gives the
//! gradient of the loss of each example separately, in one batched graph.
//! Run with `cargo run --example macros_per_sample_grads`.

use tensor::prelude::*;

/// Squared error of a linear model on one example: (x · w - y)².
#[function]
fn loss(w: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let err = x.matmul(w) - y;
    (&err * &err).sum_all()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let w = Tensor::from_vec(vec![0.5f32, -0.25, 1.0], &[3]);
    let xs = Tensor::from_vec(
        vec![
            1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0,
        ],
        &[4, 3],
    );
    let ys = Tensor::from_vec(vec![1.0f32, 0.0, 1.0, 2.0], &[4]);

    let per_sample_grads = vmap!(grad!(loss, argnums = 0), in_axes = (None, 0, 0));
    let grads = per_sample_grads(&w, &xs, &ys);
    let values = grads.to_vec::<f32>()?;
    println!(
        "per-sample gradients of the loss w.r.t. w ({:?}):",
        grads.shape()
    );
    for (i, g) in values.chunks(3).enumerate() {
        println!("  example {i}: {g:?}  (2 (x·w - y) x)");
    }

    // Transformed closures own what they capture (they may be called after this scope).
    let (batch_x, batch_y) = (xs.clone(), ys.clone());
    let mean_loss = move |w: &Tensor| {
        let w = w.clone();
        vmap!(move |x, y| loss(&w, x, y))(&batch_x, &batch_y).mean_all()
    };
    let mean = grad!(mean_loss)(&w);
    let mean_of_per_sample: Vec<f32> = (0..3)
        .map(|j| values.iter().skip(j).step_by(3).sum::<f32>() / 4.0)
        .collect();
    println!(
        "gradient of the mean loss:      {:?}",
        mean.to_vec::<f32>()?
    );
    println!("mean of per-sample gradients:   {mean_of_per_sample:?}");
    Ok(())
}
