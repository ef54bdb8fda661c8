use tensor::prelude::*;

fn main() {
    let _ = vmap!(|x| x * 2.0, in_axes = 0, method = loop_inside);
}
