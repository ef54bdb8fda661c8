use tensor::prelude::*;

fn main() {
    let k = 0;
    let _ = grad!(|x| x.sum_all(), argnums = k);
}
