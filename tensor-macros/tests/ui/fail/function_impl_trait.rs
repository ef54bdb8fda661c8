use tensor::prelude::*;

#[function]
fn norm(x: impl AsRef<Tensor>) -> Tensor {
    x.as_ref().sum_all()
}

fn main() {}
