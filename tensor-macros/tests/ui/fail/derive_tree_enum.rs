use tensor::prelude::*;

#[derive(Clone, Tree)]
enum Params {
    One(Tensor),
}

fn main() {}
