use tensor::prelude::*;

#[function]
fn scaled<S: Into<f64>>(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
