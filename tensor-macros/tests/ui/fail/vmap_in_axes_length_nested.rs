use tensor::prelude::*;

#[function]
fn loss(w: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    ((x.matmul(w) - y) * (x.matmul(w) - y)).sum_all()
}

fn main() {
    // grad! keeps loss's three arguments; in_axes names two.
    let _ = vmap!(grad!(loss, argnums = 0), in_axes = (None, 0));
}
