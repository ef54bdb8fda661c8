use tensor::prelude::*;

fn main() {
    let _ = grad!(|x| x.sum_all(), has_aux = 1);
}
