use tensor::prelude::*;

#[function]
fn loss(w: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    ((x.matmul(w) - y) * (x.matmul(w) - y)).sum_all()
}

fn main() {
    let _ = vmap!(loss, in_axes = (None, 0));
}
