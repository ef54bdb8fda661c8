//! The Jacobian of a small vector function with `jacfwd!` (forward mode) and `jacrev!`
//! (reverse mode), which agree. Run with `cargo run --example jacobian`.

use tensor::prelude::*;

/// Polar to Cartesian coordinates: (r, θ) ↦ (r cos θ, r sin θ).
#[function]
fn to_cartesian(p: &Tensor) -> Tensor {
    let r = p.slice(0, 0, 1);
    let theta = p.slice(0, 1, 2);
    Tensor::cat(&[&r * theta.cos(), &r * theta.sin()], 0)
}

fn print_matrix(name: &str, m: &Tensor) -> Result<(), Box<dyn std::error::Error>> {
    let shape = m.shape();
    let data = m.to_vec::<f32>()?;
    println!("{name} {shape:?}:");
    for row in data.chunks(shape[1]) {
        let cells: Vec<String> = row.iter().map(|v| format!("{v:8.4}")).collect();
        println!("  [{}]", cells.join(" "));
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let p = Tensor::from_vec(vec![2.0f32, std::f32::consts::FRAC_PI_6], &[2]);
    let forward = jacfwd!(to_cartesian)(&p);
    let reverse = jacrev!(to_cartesian)(&p);
    print_matrix("jacfwd!(to_cartesian) at (r=2, θ=π/6)", &forward)?;
    print_matrix("jacrev!(to_cartesian) at (r=2, θ=π/6)", &reverse)?;
    println!(
        "expected [[cos θ, -r sin θ], [sin θ, r cos θ]] = [[0.8660, -1.0000], [0.5000, 1.7321]]"
    );
    println!("|det J| = r = {:.4}", {
        let j = forward.to_vec::<f32>()?;
        (j[0] * j[3] - j[1] * j[2]).abs()
    });
    Ok(())
}
