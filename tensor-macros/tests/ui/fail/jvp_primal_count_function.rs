use tensor::prelude::*;

#[function]
fn scale(x: &Tensor, s: &Tensor) -> Tensor {
    x * s
}

fn main() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    let _ = jvp!(scale, (&x,), (&x,));
}
