use tensor::prelude::*;

struct Layer {
    w: Tensor,
}

impl Layer {
    #[function]
    fn forward(&self, x: &Tensor) -> Tensor {
        x.matmul(&self.w)
    }
}

fn main() {}
