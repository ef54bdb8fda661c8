//! Laziness and fusion: `(a + 4) + 3` is one kernel that adds 7 once; `contiguous()` in
//! between splits it in two. Run with `DEBUG=2` or `DEBUG=4` to see the kernels.
//!
//! Run: `DEBUG=4 cargo run --example fusion`

use tensor::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Tensor::from_vec((0..16).map(|i| i as f32).collect(), &[4, 4]);
    let fused = (&a + 4.0) + 3.0;
    println!("(a + 4) + 3       = {:?}", fused.to_vec::<f32>()?);
    let split = (&a + 4.0).contiguous() + 3.0;
    println!("contiguous between = {:?}", split.to_vec::<f32>()?);
    Ok(())
}
