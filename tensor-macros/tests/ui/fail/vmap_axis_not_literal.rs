use tensor::prelude::*;

fn main() {
    let axis = 0;
    let _ = vmap!(|x| x * 2.0, in_axes = axis);
}
