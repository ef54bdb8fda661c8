use tensor::prelude::*;

fn main() {
    let _ = vmap!(|x| x * 2.0, in_axis = 0);
}
