//! The range (Vmapin/Vmapout) and pad+reduce methods of vmap give the same values as the
//! rewrite method, as the reference interpreter evaluates them.

use tensor_core::Tensor;
use tensor_core::interp::evaluate;
use tensor_core::transform::{Func, InAxes, IntoFunc, VmapMethod, vmap_with};

fn input(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n)
            .map(|i| ((i * 7 + seed * 3) % 11) as f32 * 0.5 - 2.0)
            .collect(),
        shape,
    )
}

fn assert_methods_agree<M>(f: impl IntoFunc<M>, in_axes: impl Into<InAxes>, args: &[Tensor]) {
    let f: Func = f.into_func();
    let in_axes = in_axes.into();
    let by_rewrite = vmap_with(f.clone(), in_axes.clone(), 0, VmapMethod::Rewrite).call(args);
    for method in [VmapMethod::Range, VmapMethod::PadReduce] {
        let batched = vmap_with(f.clone(), in_axes.clone(), 0, method).call(args);
        assert_close(&by_rewrite, &batched);
    }
}

fn assert_close(by_rewrite: &[Tensor], batched: &[Tensor]) {
    assert_eq!(by_rewrite.len(), batched.len());
    for (a, b) in by_rewrite.iter().zip(batched) {
        assert_eq!(a.shape(), b.shape());
        let (a, b) = (
            evaluate(&a.uop()).to_f64_vec(),
            evaluate(&b.uop()).to_f64_vec(),
        );
        assert!(
            a.iter()
                .zip(&b)
                .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs())),
            "{a:?} != {b:?}"
        );
    }
}

#[test]
fn elementwise_and_reductions_agree() {
    assert_methods_agree(
        |x: &Tensor| (x * 2.0).exp2() + x.sum_all(),
        0,
        &[input(&[3, 4], 0)],
    );
}

#[test]
fn mixed_mapped_and_unmapped_inputs_agree() {
    assert_methods_agree(
        |w: &Tensor, x: &Tensor| w.matmul(x).relu(),
        [None, Some(0)],
        &[input(&[4, 3], 1), input(&[5, 3], 2)],
    );
}

#[test]
fn the_intermediate_realization_example_agrees() {
    let f = |x: &Tensor| {
        let z = Tensor::stack(&[x.slice(0, 0, 2).sum_all(), x.slice(0, 2, 4).sum_all()], 0);
        z.take(&Tensor::from_vec(vec![0i32, 1], &[2]), 0)
    };
    assert_methods_agree(f, 1, &[input(&[4, 3], 3)]);
}

#[test]
fn nested_range_vmaps_agree_with_nested_rewrites() {
    let nested = |method| {
        let inner = vmap_with(|x: &Tensor, y: &Tensor| (x * y).sum_all(), 0, 0, method);
        let outer = vmap_with(inner, [Some(0), None], 0, method);
        let out = outer.call(&[input(&[3, 4, 5], 4), input(&[4, 5], 5)]);
        evaluate(&out[0].uop()).to_f64_vec()
    };
    let by_rewrite = nested(VmapMethod::Rewrite);
    assert_eq!(nested(VmapMethod::Range), by_rewrite);
    let by_pad_reduce = nested(VmapMethod::PadReduce);
    assert!(
        by_pad_reduce
            .iter()
            .zip(&by_rewrite)
            .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs())),
        "{by_pad_reduce:?} != {by_rewrite:?}"
    );
}
