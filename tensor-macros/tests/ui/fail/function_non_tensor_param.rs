use tensor::prelude::*;

#[function]
fn power(x: &Tensor, n: usize) -> Tensor {
    x.pow(n as f64)
}

fn main() {}
