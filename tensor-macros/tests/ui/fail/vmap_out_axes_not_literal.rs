use tensor::prelude::*;

fn main() {
    let _ = vmap!(|x, y| x + y, in_axes = (0, None), out_axes = "0");
}
