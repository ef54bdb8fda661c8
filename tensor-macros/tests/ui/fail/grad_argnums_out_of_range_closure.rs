use tensor::prelude::*;

fn main() {
    let _ = grad!(|x, y| (x * y).sum_all(), argnums = 2);
}
