use tensor::prelude::*;
fn loss(w: &Tensor, idx: &Tensor) -> Tensor {
    tensor::nn::embedding(idx, w).square().sum_all()
}
fn main() {
    let w = Tensor::rand(&[10, 4], 1);
    let idx = Tensor::from_vec(vec![1i64, 3, 3, 0, 2, 9], &[2, 3]);
    let g = vmap!(grad!(loss), in_axes = (None, 0))(&w, &idx);
    let s = format!("{:?}", g.uop());
    println!("{}", &s[..s.len().min(3000)]);
}
