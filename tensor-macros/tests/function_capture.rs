//! `#[function]` at run time: one trace per signature, the same values as the plain body, the
//! `Function`/`Tuple`/`Param`/`GetTuple` structure, and calls from several threads.

use tensor::core::interp::evaluate;
use tensor::core::schedule::create_schedule;
use tensor::core::transform::function::{CallMode, call_mode_of};
use tensor::core::{Op, UOp};
use tensor::prelude::*;

fn values(t: &Tensor) -> Vec<f64> {
    evaluate(&t.uop()).to_f64_vec()
}

fn affine_plain(w: &Tensor, x: &Tensor, b: &Tensor) -> Tensor {
    x.matmul(w) + b
}

#[function]
fn affine(w: &Tensor, x: &Tensor, b: &Tensor) -> Tensor {
    x.matmul(w) + b
}

#[function]
fn square_and_cube(x: &Tensor) -> (Tensor, Tensor) {
    (x * x, x * x * x)
}

#[function]
fn shape_probe(x: &Tensor) -> Tensor {
    x * 2.0
}

#[function]
fn twice(x: Tensor, y: Tensor) -> Tensor {
    x + y
}

#[function(precompile)]
fn precompiled(x: &Tensor) -> Tensor {
    x.exp()
}

#[function]
fn outer(x: &Tensor) -> Tensor {
    affine(x, x, x).sin()
}

fn matrix(rows: usize, cols: usize, offset: f32) -> Tensor {
    let data = (0..rows * cols).map(|i| i as f32 * 0.25 + offset).collect();
    Tensor::from_vec(data, &[rows, cols])
}

#[test]
fn results_equal_the_body_called_without_the_attribute() {
    let (w, x, b) = (matrix(3, 2, 0.5), matrix(4, 3, -1.0), matrix(4, 2, 0.1));
    assert_eq!(
        values(&affine(&w, &x, &b)),
        values(&affine_plain(&w, &x, &b))
    );
    let (sq, cube) = square_and_cube(&x);
    assert_eq!(values(&sq), values(&(&x * &x)));
    assert_eq!(values(&cube), values(&(&x * &x * &x)));
}

#[test]
fn traces_once_per_signature_and_again_for_a_new_shape() {
    let before = shape_probe::trace_count();
    let a = shape_probe(&matrix(2, 2, 0.0));
    let _ = shape_probe(&matrix(2, 2, 5.0));
    assert_eq!(
        shape_probe::trace_count(),
        before + 1,
        "same shape traced again"
    );
    let _ = shape_probe(&matrix(3, 2, 0.0));
    assert_eq!(
        shape_probe::trace_count(),
        before + 2,
        "a new shape was not traced"
    );
    let _ = shape_probe(&Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]));
    assert_eq!(
        shape_probe::trace_count(),
        before + 3,
        "a new dtype was not traced"
    );
    assert_eq!(values(&a), vec![0.0, 0.5, 1.0, 1.5]);
}

#[test]
fn call_is_a_function_of_params_read_through_get_tuple() {
    let (w, x, b) = (matrix(3, 2, 0.5), matrix(4, 3, -1.0), matrix(4, 2, 0.1));
    let y = affine(&w, &x, &b).uop();
    assert_eq!(y.op(), Op::GetTuple);
    let function = y.s(0);
    assert_eq!(function.op(), Op::Function);
    assert_eq!(function.src()[1..], [w.uop(), x.uop(), b.uop()]);
    let body = function.s(0);
    assert_eq!(body.op(), Op::Tuple);
    let params: Vec<UOp> = body
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Param)
        .collect();
    assert_eq!(params.len(), 3, "one Param per argument");
    assert!(
        !body.toposort().iter().any(|u| u.op() == Op::Buffer),
        "the body holds no concrete buffer"
    );
}

#[test]
fn the_same_tensor_passed_twice_is_one_param() {
    let x = matrix(2, 3, 1.0);
    let y = twice(x.clone(), x.clone());
    let function = y.uop().s(0).clone();
    assert_eq!(function.src().len(), 2, "Function(body, x): one argument");
    assert_eq!(values(&y), values(&(&x + &x)));
    let z = matrix(2, 3, 7.0);
    let distinct = twice(x.clone(), z.clone());
    assert_eq!(distinct.uop().s(0).src().len(), 3);
    assert_eq!(values(&distinct), values(&(&x + &z)));
}

#[test]
fn precompile_reaches_the_function_node() {
    let x = matrix(2, 2, 0.0);
    let function = precompiled(&x).uop().s(0).clone();
    assert_eq!(call_mode_of(&function), Some(CallMode::Precompile));
    let inline = square_and_cube(&x).0.uop().s(0).clone();
    assert_eq!(call_mode_of(&inline), Some(CallMode::Inline));
    assert_eq!(values(&precompiled(&x)), values(&x.exp()));
}

#[test]
fn a_precompiled_function_is_its_own_kernel_and_an_inline_one_fuses() {
    let x = matrix(2, 2, 0.0);
    let kernels = |t: &Tensor| create_schedule(&[t.uop()]).items.len();
    assert_eq!(
        kernels(&(precompiled(&x) + 1.0)),
        2,
        "the unit, then its caller"
    );
    assert_eq!(
        kernels(&(twice(x.clone(), x.clone()) + 1.0)),
        1,
        "inlined and fused"
    );
    assert_eq!(values(&(precompiled(&x) + 1.0)), values(&(x.exp() + 1.0)));
}

#[test]
fn a_function_calling_a_function_nests_function_nodes() {
    let x = matrix(2, 2, 0.5);
    let y = outer(&x);
    let nested = y
        .uop()
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Function)
        .count();
    assert_eq!(
        nested, 2,
        "outer's body calls affine through its own Function node"
    );
    assert_eq!(values(&y), values(&affine_plain(&x, &x, &x).sin()));
}

#[test]
fn is_safe_to_call_from_several_threads() {
    #[function]
    fn threaded(x: &Tensor) -> Tensor {
        x.exp() * 3.0
    }
    let results: Vec<Vec<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                s.spawn(move || {
                    let x = matrix(2, 3, i as f32);
                    let y = threaded(&x);
                    (values(&y), values(&(x.exp() * 3.0)))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let (got, want) = h.join().unwrap();
                assert_eq!(got, want);
                got
            })
            .collect()
    });
    assert_eq!(results.len(), 8);
    assert_eq!(
        threaded::trace_count(),
        1,
        "one signature, traced once across threads"
    );
}

#[test]
fn transforms_see_through_nested_function_nodes() {
    let x = matrix(2, 2, 0.5);
    let captured = |f: &dyn Fn(&Tensor) -> Tensor| values(&f(&x));
    let through_functions = captured(&grad!(|x| outer(x).sum_all()));
    let plain = captured(&grad!(|x| affine_plain(x, x, x).sin().sum_all()));
    assert_eq!(through_functions, plain, "grad");
    let stack = matrix(6, 2, -0.5).reshape(&[3, 2, 2]);
    let batched = vmap!(|m| outer(m).sum_all())(&stack);
    let batched_plain = vmap!(|m| affine_plain(m, m, m).sin().sum_all())(&stack);
    assert_eq!(values(&batched), values(&batched_plain), "vmap");
    let (_, tangent) = jvp!(outer, (&x,), (&x.ones_like(),));
    let (_, tangent_plain) = jvp!(|x| affine_plain(x, x, x).sin(), (&x,), (&x.ones_like(),));
    assert_eq!(values(&tangent), values(&tangent_plain), "jvp");
}

#[test]
fn nested_functions_compute_the_same_through_the_compiled_path() {
    let x = matrix(2, 2, 0.5);
    let y = outer(&x);
    let expected = values(&y);
    let compiled: Vec<f64> = y
        .to_vec::<f32>()
        .expect("the CPU device compiles and runs the graph")
        .into_iter()
        .map(f64::from)
        .collect();
    for (c, e) in compiled.iter().zip(&expected) {
        assert!(
            (c - e).abs() <= 1e-5 * (1.0 + e.abs()),
            "{compiled:?} != {expected:?}"
        );
    }
}
