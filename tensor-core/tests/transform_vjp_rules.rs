//! Every gradient rule of `vjp`, checked two ways: against `jvp` by the dot-product test
//! `<vjp(u), v> == <u, jvp(v)>` for random `u`, `v`, and against central finite differences
//! of the scalar `<u, f(x)>`. Then `grad` with subsets of argnums and `value_and_grad`.

mod transform_common;

use tensor_core::transform::{Func, IntoFunc, grad, jvp, value_and_grad, vjp};
use tensor_core::{DType, Tensor};
use transform_common::*;

const EPS: f64 = 1e-6;

/// Checks the pullback of `f` at `primals` against `jvp` and finite differences.
#[track_caller]
fn check_vjp<M>(f: impl IntoFunc<M>, primals: &[Tensor]) {
    check_vjp_with(f, primals, EPS, 1e-6, 1e-7);
}

#[track_caller]
fn check_vjp_with<M>(f: impl IntoFunc<M>, primals: &[Tensor], eps: f64, rtol: f64, atol: f64) {
    let f: Func = f.into_func();
    let direct = f.call(primals);
    let (outputs, pullback) = vjp(&f, primals);
    for (k, (o, d)) in outputs.iter().zip(&direct).enumerate() {
        assert_close(&format!("vjp output {k}"), o, d, 0.0, 0.0);
    }
    for seed in [5u64, 17] {
        let u = random_like(&direct, seed);
        let v = random_like(primals, seed + 100);
        let cotangents = pullback.call(&u);
        assert_eq!(cotangents.len(), primals.len(), "one cotangent per primal");
        for (i, (c, p)) in cotangents.iter().zip(primals).enumerate() {
            assert_eq!(c.shape(), p.shape(), "cotangent {i} shape");
            assert_eq!(c.dtype(), p.dtype(), "cotangent {i} dtype");
        }
        // Dot-product test: the pullback is the transpose of the pushforward.
        let (_, tangents) = jvp(&f, primals, &v);
        let (lhs, rhs) = (inner(&cotangents, &v), inner(&u, &tangents));
        assert!(
            (lhs - rhs).abs() <= rtol.max(1e-9) * (1.0 + rhs.abs()),
            "<vjp(u), v> = {lhs} but <u, jvp(v)> = {rhs} (seed {seed})"
        );
        // Finite differences of the scalar <u, f(x)>, one coordinate at a time.
        let scalar = project(&f, &u);
        for (i, c) in cotangents.iter().enumerate() {
            let fd = fd_gradient(&scalar, primals, i, eps);
            assert_values_close(
                &format!("cotangent {i} (seed {seed})"),
                &values(c),
                &fd,
                rtol,
                atol,
            );
        }
    }
}

/// `x -> sum_k <u_k, f_k(x)>` in `f64`: a scalar function whose gradient is the pullback of `u`.
fn project(f: &Func, u: &[Tensor]) -> Func {
    let (f, u) = (f.clone(), u.to_vec());
    Func::new(None, move |args: &[Tensor]| {
        let total = f
            .call(args)
            .iter()
            .zip(&u)
            .map(|(y, u)| (y * u).cast(DType::F64).sum_all())
            .reduce(|a, b| a + b)
            .expect("at least one result");
        vec![total]
    })
}

fn x23(seed: u64) -> Tensor {
    randf64(&[2, 3], seed)
}

fn pos23(seed: u64) -> Tensor {
    uniform_f64(&[2, 3], seed, 0.5, 2.0)
}

// ---- arithmetic ----

#[test]
fn vjp_of_add_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor, y: &Tensor| x + y, &[x23(1), x23(2)]);
}

#[test]
fn vjp_of_sub_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor, y: &Tensor| x - y, &[x23(3), x23(4)]);
}

#[test]
fn vjp_of_mul_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor, y: &Tensor| x * y, &[x23(5), x23(6)]);
    check_vjp(|x: &Tensor| x * x * 3.0, &[x23(7)]);
}

#[test]
fn vjp_of_div_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor, y: &Tensor| x / y, &[x23(8), pos23(9)]);
}

#[test]
fn vjp_of_neg_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| -x, &[x23(10)]);
}

#[test]
fn vjp_of_recip_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.recip(), &[pos23(11)]);
}

#[test]
fn vjp_of_broadcasting_binary_ops_sums_over_the_broadcast_axes() {
    check_vjp(
        |x: &Tensor, y: &Tensor| x * y + y,
        &[randf64(&[3], 12), randf64(&[2, 3], 13)],
    );
    check_vjp(
        |x: &Tensor| x + randf64(&[2, 3], 14),
        &[randf64(&[2, 1], 15)],
    );
}

// ---- transcendental ----

#[test]
fn vjp_of_exp_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.exp(), &[x23(16)]);
}

#[test]
fn vjp_of_exp2_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.exp2(), &[x23(17)]);
}

#[test]
fn vjp_of_log_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.log(), &[pos23(18)]);
}

#[test]
fn vjp_of_log2_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.log2(), &[pos23(19)]);
}

#[test]
fn vjp_of_sin_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.sin(), &[x23(20)]);
}

#[test]
fn vjp_of_cos_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.cos(), &[x23(21)]);
}

#[test]
fn vjp_of_sqrt_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.sqrt(), &[pos23(22)]);
}

#[test]
#[ignore = "front end: pow_float multiplies the magnitude by a NaN sign in the lanes a where \
            discards, so the pullback gets 0 * NaN = NaN (tensor/elementwise.rs)"]
fn vjp_of_pow_with_a_tensor_exponent_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor, y: &Tensor| x.pow(y), &[pos23(23), x23(24)]);
}

#[test]
fn vjp_of_pow_with_integer_and_special_scalar_exponents_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.pow(2.0), &[x23(25)]);
    check_vjp(|x: &Tensor| x.pow(3.0), &[x23(26)]);
    check_vjp(
        |x: &Tensor| x.pow(3.0),
        &[uniform_f64(&[4], 27, -2.0, -0.5)],
    );
    check_vjp(|x: &Tensor| x.pow(0.5), &[pos23(28)]);
    check_vjp(|x: &Tensor| x.pow(-1.0), &[pos23(29)]);
    check_vjp(|x: &Tensor| x.pow(-0.5), &[pos23(30)]);
}

#[test]
#[ignore = "front end: pow_float multiplies the magnitude by a NaN sign in the lanes a where \
            discards, so the pullback gets 0 * NaN = NaN (tensor/elementwise.rs)"]
fn grad_of_pow_with_a_fractional_scalar_exponent_is_finite() {
    let x = Tensor::from_vec(vec![1.0f64, 4.0], &[2]);
    let g = grad(|x: &Tensor| x.pow(2.5).sum_all(), 0).call1(&[x]);
    // d/dx x^2.5 = 2.5 x^1.5
    assert_values_close("2.5 x^1.5", &values(&g), &[2.5, 20.0], 1e-12, 0.0);
}

#[test]
fn vjp_of_tanh_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.tanh(), &[x23(31)]);
}

#[test]
fn vjp_of_sigmoid_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.sigmoid(), &[x23(32)]);
}

#[test]
fn vjp_of_relu_agrees_with_jvp_and_finite_differences_away_from_zero() {
    check_vjp(|x: &Tensor| x.relu(), &[distinct_f64(&[2, 3], 33)]);
}

#[test]
fn vjp_of_abs_agrees_with_jvp_and_finite_differences_away_from_zero() {
    check_vjp(|x: &Tensor| x.abs(), &[distinct_f64(&[2, 3], 34)]);
}

// ---- max, where, cast ----

#[test]
fn vjp_of_maximum_and_minimum_agrees_with_jvp_and_finite_differences_away_from_ties() {
    let x = distinct_f64(&[6], 35);
    let y = distinct_f64(&[6], 36) + 0.01;
    check_vjp(
        |x: &Tensor, y: &Tensor| x.maximum(y),
        &[x.clone(), y.clone()],
    );
    check_vjp(|x: &Tensor, y: &Tensor| x.minimum(y), &[x, y]);
}

#[test]
fn vjp_of_maximum_at_a_tie_splits_the_cotangent_in_half() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
    let (_, pullback) = vjp(|x: &Tensor, y: &Tensor| x.maximum(y), &[x.clone(), x]);
    let ct = pullback.call(&[Tensor::from_vec(vec![2.0f64, 6.0], &[2])]);
    assert_values_close("share of x", &values(&ct[0]), &[1.0, 3.0], 0.0, 0.0);
    assert_values_close("share of y", &values(&ct[1]), &[1.0, 3.0], 0.0, 0.0);
}

#[test]
fn vjp_of_where_agrees_with_jvp_and_finite_differences() {
    let c = randf64(&[2, 3], 37);
    check_vjp(
        move |a: &Tensor, b: &Tensor| c.gt(0.0).where_(a * a, b.sin()),
        &[x23(38), x23(39)],
    );
}

#[test]
fn vjp_of_cast_between_f64_and_f32_returns_cotangents_in_the_input_dtype() {
    check_vjp_with(
        |x: &Tensor| (x.cast(DType::F32) * 3.0).sin(),
        &[x23(40)],
        1e-3,
        1e-3,
        1e-4,
    );
    check_vjp_with(
        |x: &Tensor| x.cast(DType::F64).exp(),
        &[randf32(&[2, 3], 41)],
        1e-3,
        1e-3,
        1e-4,
    );
}

// ---- movement ----

#[test]
fn vjp_of_reshape_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.reshape(&[3, 2]).sin(), &[x23(42)]);
}

#[test]
fn vjp_of_permute_agrees_with_jvp_and_finite_differences() {
    check_vjp(
        |x: &Tensor| x.permute(&[2, 0, 1]) * 2.0,
        &[randf64(&[2, 3, 2], 43)],
    );
}

#[test]
fn vjp_of_expand_agrees_with_jvp_and_finite_differences() {
    check_vjp(
        |x: &Tensor| x.reshape(&[2, 1, 3]).expand(&[2, 2, 3]).exp(),
        &[x23(44)],
    );
    check_vjp(|x: &Tensor| x.expand(&[2, 2, 3]).sin(), &[x23(45)]);
}

#[test]
fn vjp_of_pad_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.pad(&[(1, 0), (0, 2)]).exp(), &[x23(46)]);
}

#[test]
fn vjp_of_shrink_and_slice_agree_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.shrink(&[(0, 1), (1, 3)]).exp(), &[x23(47)]);
    check_vjp(
        |x: &Tensor| x.slice(1, -2, 3) * x.slice(1, 0, 2),
        &[x23(48)],
    );
}

#[test]
fn vjp_of_flip_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.flip(1) * x, &[x23(49)]);
}

#[test]
fn vjp_of_stack_and_cat_agree_with_jvp_and_finite_differences() {
    check_vjp(
        |x: &Tensor, y: &Tensor| Tensor::stack(&[x.clone(), y * x], 1),
        &[x23(50), x23(51)],
    );
    check_vjp(
        |x: &Tensor, y: &Tensor| Tensor::cat(&[x.clone(), y.exp()], 0),
        &[x23(52), randf64(&[1, 3], 53)],
    );
}

#[test]
fn vjp_of_contiguous_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| (x * x).contiguous(), &[x23(54)]);
}

#[test]
fn vjp_through_detach_is_zero() {
    let x = x23(55);
    let (_, pullback) = vjp(|x: &Tensor| x.detach() * x, std::slice::from_ref(&x));
    let ct = pullback.call1(&[x.ones_like()]);
    // d/dx (stop(x) * x) = stop(x): only the undetached factor contributes.
    assert_close("cotangent through detach", &ct, &x, 0.0, 0.0);
}

#[test]
fn vjp_of_take_accumulates_repeated_indices() {
    let i = Tensor::from_vec(vec![2i32, 0, 0], &[3]);
    check_vjp(move |x: &Tensor| x.take(&i, 1).sin(), &[x23(56)]);
}

#[test]
fn vjp_of_gather_agrees_with_jvp_and_finite_differences() {
    let i = Tensor::from_vec(vec![1i32, 1, 0, 2], &[2, 2]);
    check_vjp(move |x: &Tensor| x.gather(1, &i) * 2.0, &[x23(57)]);
}

#[test]
fn vjp_of_cumsum_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.cumsum(1) * x, &[x23(58)]);
}

// ---- reductions ----

#[test]
fn vjp_of_sum_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.sum(1, false), &[x23(59)]);
    check_vjp(|x: &Tensor| (x * x).sum(0, true), &[x23(60)]);
}

#[test]
fn vjp_of_max_reduce_agrees_with_jvp_and_finite_differences_away_from_ties() {
    let x = distinct_f64(&[2, 3], 61);
    check_vjp(|x: &Tensor| x.max(1, false), std::slice::from_ref(&x));
    check_vjp(|x: &Tensor| x.max(0, true), std::slice::from_ref(&x));
    check_vjp(|x: &Tensor| x.min(1, false), &[x]);
}

#[test]
fn vjp_of_max_reduce_at_a_tie_shares_the_cotangent_between_the_tied_positions() {
    let x = Tensor::from_vec(vec![1.0f64, 3.0, 3.0], &[3]);
    let g = grad(|x: &Tensor| x.max_all(), 0).call1(&[x]);
    assert_values_close(
        "gradient of max at a tie",
        &values(&g),
        &[0.0, 0.5, 0.5],
        0.0,
        0.0,
    );
}

#[test]
fn vjp_of_prod_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.prod(1, false), &[pos23(62)]);
    check_vjp(|x: &Tensor| x.prod_all(), &[pos23(63)]);
}

#[test]
fn vjp_of_mean_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.mean(0, false) * x.mean_all(), &[x23(64)]);
}

// ---- composites ----

#[test]
fn vjp_of_matmul_agrees_with_jvp_and_finite_differences() {
    check_vjp(
        |a: &Tensor, b: &Tensor| a.matmul(b),
        &[x23(65), randf64(&[3, 2], 66)],
    );
    check_vjp(
        |a: &Tensor, b: &Tensor| a.matmul(b),
        &[x23(67), randf64(&[3], 68)],
    );
    check_vjp(
        |a: &Tensor, b: &Tensor| a.matmul(b),
        &[randf64(&[2, 2, 3], 69), randf64(&[3, 2], 70)],
    );
}

#[test]
fn vjp_of_softmax_and_log_softmax_agree_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.softmax(-1), &[x23(71)]);
    check_vjp(|x: &Tensor| x.log_softmax(0), &[x23(72)]);
}

#[test]
fn vjp_of_logsumexp_agrees_with_jvp_and_finite_differences() {
    check_vjp(|x: &Tensor| x.logsumexp(1, false), &[x23(73)]);
    check_vjp(|x: &Tensor| x.logsumexp([0, 1], true), &[x23(74)]);
}

#[test]
fn vjp_of_several_results_adds_the_pullbacks_of_each() {
    check_vjp(
        |x: &Tensor, y: &Tensor| (x * y, (x + y).sum_all(), y.exp()),
        &[x23(75), x23(76)],
    );
}

#[test]
fn vjp_of_an_input_used_twice_adds_both_shares() {
    check_vjp(|x: &Tensor| x.sin() * x.exp() + x, &[x23(77)]);
}

// ---- grad and value_and_grad ----

fn three_args(x: &Tensor, y: &Tensor, z: &Tensor) -> Tensor {
    (x * y.sin()).sum_all() + (y * z).exp().sum_all() * x.sum_all()
}

#[test]
fn grad_with_each_subset_of_argnums_matches_finite_differences() {
    let args = [x23(80), x23(81), x23(82)];
    let f = three_args.into_func();
    let subsets: Vec<Vec<usize>> = vec![
        vec![0],
        vec![1],
        vec![2],
        vec![0, 2],
        vec![2, 0],
        vec![0, 1, 2],
    ];
    for argnums in subsets {
        let grads = grad(three_args, argnums.clone()).call(&args);
        assert_eq!(
            grads.len(),
            argnums.len(),
            "one gradient per argnum {argnums:?}"
        );
        for (g, &i) in grads.iter().zip(&argnums) {
            assert_eq!(g.shape(), args[i].shape());
            let fd = fd_gradient(&f, &args, i, EPS);
            assert_values_close(
                &format!("d/d arg {i} of {argnums:?}"),
                &values(g),
                &fd,
                1e-6,
                1e-7,
            );
        }
    }
}

#[test]
fn grad_with_a_single_argnum_returns_one_gradient() {
    let args = [x23(83), x23(84), x23(85)];
    let g = grad(three_args, 1).call(&args);
    assert_eq!(g.len(), 1);
    let fd = fd_gradient(&three_args.into_func(), &args, 1, EPS);
    assert_values_close("d/dy", &values(&g[0]), &fd, 1e-6, 1e-7);
}

#[test]
fn value_and_grad_returns_the_value_then_the_gradients() {
    let args = [x23(86), x23(87), x23(88)];
    let out = value_and_grad(three_args, [0, 2]).call(&args);
    assert_eq!(out.len(), 3, "the value and two gradients");
    assert_eq!(out[0].shape(), Vec::<usize>::new());
    assert_close(
        "value",
        &out[0],
        &three_args(&args[0], &args[1], &args[2]),
        0.0,
        0.0,
    );
    let g = grad(three_args, [0, 2]).call(&args);
    assert_close("gradient 0", &out[1], &g[0], 0.0, 0.0);
    assert_close("gradient 2", &out[2], &g[1], 0.0, 0.0);
}

#[test]
fn grad_of_a_function_that_ignores_an_argument_is_zero_for_it() {
    let args = [x23(89), x23(90)];
    let g = grad(|x: &Tensor, _y: &Tensor| x.exp().sum_all(), [0, 1]).call(&args);
    assert_close("unused argument", &g[1], &args[1].zeros_like(), 0.0, 0.0);
}

#[test]
fn grad_of_an_f32_function_is_f32() {
    let x = randf32(&[3], 91);
    let g = grad(|x: &Tensor| (x * x).sum_all(), 0).call1(std::slice::from_ref(&x));
    assert_eq!(g.dtype(), DType::F32);
    assert_close("2x", &g, &(&x * 2.0), 1e-6, 1e-6);
}

// ---- primitives the front end decomposes, built directly ----

mod primitives {
    use super::*;
    use tensor_core::Op;

    #[test]
    fn vjp_of_the_neg_sub_and_div_primitives_agrees_with_jvp_and_finite_differences() {
        check_vjp(|x: &Tensor| prim(Op::Neg, &[x]), &[x23(100)]);
        check_vjp(
            |x: &Tensor, y: &Tensor| prim(Op::Sub, &[x, y]),
            &[x23(101), x23(102)],
        );
        check_vjp(
            |x: &Tensor, y: &Tensor| prim(Op::Div, &[x, y]),
            &[x23(103), pos23(104)],
        );
    }

    #[test]
    fn vjp_of_the_pow_primitive_agrees_with_jvp_and_finite_differences() {
        check_vjp(
            |x: &Tensor, y: &Tensor| prim(Op::Pow, &[x, y]),
            &[pos23(105), x23(106)],
        );
    }

    #[test]
    fn vjp_of_the_max_primitive_agrees_with_jvp_and_finite_differences_away_from_ties() {
        let y = distinct_f64(&[2, 3], 108) + 0.01;
        check_vjp(
            |x: &Tensor, y: &Tensor| prim(Op::Max, &[x, y]),
            &[distinct_f64(&[2, 3], 107), y],
        );
    }

    #[test]
    fn vjp_of_the_mulacc_primitive_agrees_with_jvp_and_finite_differences() {
        check_vjp(
            |x: &Tensor, y: &Tensor, z: &Tensor| prim(Op::Mulacc, &[x, y, z]),
            &[x23(109), x23(110), x23(111)],
        );
    }

    #[test]
    fn vjp_of_the_stack_primitive_agrees_with_jvp_and_finite_differences() {
        check_vjp(
            |x: &Tensor, y: &Tensor| prim_stack(&[x, &y.sin(), x]),
            &[x23(112), x23(113)],
        );
    }

    #[test]
    fn vjp_of_contiguous_backward_agrees_with_jvp_and_finite_differences() {
        check_vjp(
            |x: &Tensor| prim_marker(Op::ContiguousBackward, &x.exp()),
            &[x23(114)],
        );
    }
}

#[test]
fn vjp_gives_an_integer_input_a_zero_cotangent_even_through_a_cast() {
    let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]);
    let x = uniform_f64(&[3], 120, 2.0, 5.0);
    let (_, pullback) = vjp(
        |x: &Tensor, i: &Tensor| x * i.cast(DType::F64),
        &[x.clone(), i.clone()],
    );
    let ct = pullback.call(&[x.ones_like()]);
    assert_close("float input", &ct[0], &i.cast(DType::F64), 0.0, 0.0);
    assert_eq!(ct[1].dtype(), DType::I32);
    assert_close("integer input", &ct[1], &i.zeros_like(), 0.0, 0.0);
}

#[test]
fn vjp_of_scatter_add_agrees_with_jvp_and_finite_differences() {
    let i = Tensor::from_vec(vec![0i32, 2, 2, 2], &[2, 2]);
    check_vjp(
        move |base: &Tensor, src: &Tensor| base.scatter_add(1, &i, &src.sin()),
        &[x23(121), randf64(&[2, 2], 122)],
    );
}
