//! vmap by rewrite adds a real batch axis and nothing else: a vmapped function schedules into
//! exactly as many kernels as the function itself.

use tensor_core::Tensor;
use tensor_core::schedule::create_schedule;
use tensor_core::transform::{Func, IntoFunc, vmap};

fn kernels(outputs: &[Tensor]) -> usize {
    create_schedule(&outputs.iter().map(|t| t.uop()).collect::<Vec<_>>())
        .items
        .len()
}

fn input(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n).map(|i| ((i * 7 + seed) % 13) as f32 - 6.0).collect(),
        shape,
    )
}

/// Kernel counts of `f` on `args` and of `vmap(f)` on the same args with a batch of 5 in front.
fn counts<M>(f: impl IntoFunc<M>, shapes: &[&[usize]]) -> (usize, usize) {
    let f: Func = f.into_func();
    let single: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| input(s, i))
        .collect();
    let batched: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| input(&[&[5], *s].concat(), i))
        .collect();
    (
        kernels(&f.call(&single)),
        kernels(&vmap(f, 0, 0).call(&batched)),
    )
}

#[test]
fn vmap_of_an_elementwise_function_schedules_as_many_kernels() {
    let (plain, batched) = counts(
        |x: &Tensor, y: &Tensor| (x * y + 1.0).exp(),
        &[&[4, 3], &[4, 3]],
    );
    assert_eq!(plain, 1);
    assert_eq!(batched, plain);
}

#[test]
fn vmap_of_a_reduction_schedules_as_many_kernels() {
    let (plain, batched) = counts(|x: &Tensor| x.sum(1, false) / 3.0, &[&[4, 3]]);
    assert_eq!(batched, plain);
}

#[test]
fn vmap_of_a_matmul_schedules_as_many_kernels() {
    let (plain, batched) = counts(
        |a: &Tensor, b: &Tensor| a.matmul(b).relu(),
        &[&[4, 3], &[3, 2]],
    );
    assert_eq!(plain, 1);
    assert_eq!(batched, plain);
}

#[test]
fn vmap_of_softmax_schedules_as_many_kernels() {
    let (plain, batched) = counts(|x: &Tensor| x.softmax(-1), &[&[6]]);
    assert_eq!(batched, plain);
}
