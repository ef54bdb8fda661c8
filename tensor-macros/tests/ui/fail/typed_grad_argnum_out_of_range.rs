use tensor::prelude::*;
use tensor::typed::{self, Argnum};

fn loss(w: &Tensor, x: &Tensor) -> Tensor {
    (w * x).sum_all()
}

fn main() {
    let _ = typed::grad(loss, (Argnum::<0>, Argnum::<2>));
}
