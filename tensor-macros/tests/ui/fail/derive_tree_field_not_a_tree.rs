use tensor::prelude::*;

#[derive(Clone, Tree)]
struct Params {
    w: Tensor,
    hidden: usize,
}

fn main() {}
