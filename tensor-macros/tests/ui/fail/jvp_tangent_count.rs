use tensor::prelude::*;

fn main() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    let y = Tensor::from_vec(vec![3.0f32, 4.0], &[2]);
    let _ = jvp!(|x, y| x * y, (&x, &y), (&x,));
}
