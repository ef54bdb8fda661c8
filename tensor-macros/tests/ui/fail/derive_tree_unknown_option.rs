use tensor::prelude::*;

#[derive(Clone, Tree)]
struct Params {
    w: Tensor,
    #[tree(skip)]
    lr: f32,
}

fn main() {}
