use tensor::prelude::*;

fn main() {
    let _ = jacfwd!(|x, y| x * y, argnums = (0, 1));
}
