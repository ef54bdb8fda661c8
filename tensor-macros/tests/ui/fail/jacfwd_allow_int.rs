use tensor::prelude::*;

fn main() {
    let _ = jacfwd!(|x| x * 2.0, allow_int = true);
}
