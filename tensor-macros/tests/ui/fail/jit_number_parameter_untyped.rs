use tensor::prelude::*;

fn main() {
    let _ = jit!(|p, lr: f32| p * 2.0);
}
