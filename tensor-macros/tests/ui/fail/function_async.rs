use tensor::prelude::*;

#[function]
async fn double(x: &Tensor) -> Tensor {
    x * 2.0
}

fn main() {}
