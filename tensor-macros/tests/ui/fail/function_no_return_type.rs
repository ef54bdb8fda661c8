use tensor::prelude::*;

#[function]
fn show(x: &Tensor) {
    let _ = x;
}

fn main() {}
