use tensor::prelude::*;

#[derive(Clone, Tree)]
struct Affine {
    w: Tensor,
    b: Tensor,
}

fn main() {
    let f = |p: &Affine, x: &Tensor| x.matmul(&p.w) + &p.b;
    let _ = vmap!(f, in_axes = (Affine { w: None, ..Default::default() }, 0));
}
