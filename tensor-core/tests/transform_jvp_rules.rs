//! Every tangent rule of `jvp`, checked against central finite differences in `f64`: the
//! directional derivative `J(x) v` must match `(f(x + eps v) - f(x - eps v)) / 2 eps`, and
//! the primal outputs must be `f(x)` itself.

mod transform_common;

use tensor_core::transform::{Func, IntoFunc, jvp};
use tensor_core::{DType, Tensor};
use transform_common::*;

const EPS: f64 = 1e-6;
const RTOL: f64 = 1e-6;
const ATOL: f64 = 1e-7;

/// Checks `jvp(f)` at `primals` along random tangents against finite differences.
#[track_caller]
fn check_jvp<M>(f: impl IntoFunc<M>, primals: &[Tensor]) {
    check_jvp_with(f, primals, EPS, RTOL, ATOL);
}

#[track_caller]
fn check_jvp_with<M>(f: impl IntoFunc<M>, primals: &[Tensor], eps: f64, rtol: f64, atol: f64) {
    let f: Func = f.into_func();
    for seed in [11u64, 23] {
        let tangents = random_like(primals, seed);
        let (outputs, tangents_out) = jvp(&f, primals, &tangents);
        let direct = f.call(primals);
        let fd = fd_directional(&f, primals, &tangents, eps);
        assert_eq!(outputs.len(), direct.len(), "number of results");
        for k in 0..outputs.len() {
            assert_close(
                &format!("primal output {k}"),
                &outputs[k],
                &direct[k],
                0.0,
                0.0,
            );
            assert_eq!(
                tangents_out[k].shape(),
                direct[k].shape(),
                "tangent {k} shape"
            );
            assert_eq!(
                tangents_out[k].dtype(),
                direct[k].dtype(),
                "tangent {k} dtype"
            );
            assert_values_close(
                &format!("tangent {k} (seed {seed})"),
                &values(&tangents_out[k]),
                &fd[k],
                rtol,
                atol,
            );
        }
    }
}

fn x23(seed: u64) -> Tensor {
    randf64(&[2, 3], seed)
}

fn pos23(seed: u64) -> Tensor {
    uniform_f64(&[2, 3], seed, 0.5, 2.0)
}

// ---- arithmetic ----

#[test]
fn jvp_of_add_matches_finite_differences() {
    check_jvp(|x: &Tensor, y: &Tensor| x + y, &[x23(1), x23(2)]);
}

#[test]
fn jvp_of_sub_matches_finite_differences() {
    check_jvp(|x: &Tensor, y: &Tensor| x - y, &[x23(3), x23(4)]);
}

#[test]
fn jvp_of_mul_matches_finite_differences() {
    check_jvp(|x: &Tensor, y: &Tensor| x * y, &[x23(5), x23(6)]);
    check_jvp(|x: &Tensor| x * x * 3.0, &[x23(7)]);
}

#[test]
fn jvp_of_div_matches_finite_differences() {
    check_jvp(|x: &Tensor, y: &Tensor| x / y, &[x23(8), pos23(9)]);
    check_jvp(|x: &Tensor| 2.0 / x, &[pos23(10)]);
}

#[test]
fn jvp_of_neg_matches_finite_differences() {
    check_jvp(|x: &Tensor| -x, &[x23(11)]);
}

#[test]
fn jvp_of_recip_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.recip(), &[pos23(12)]);
}

#[test]
fn jvp_of_broadcasting_binary_ops_matches_finite_differences() {
    check_jvp(
        |x: &Tensor, y: &Tensor| x * y + y,
        &[randf64(&[3], 13), randf64(&[2, 3], 14)],
    );
}

// ---- transcendental ----

#[test]
fn jvp_of_exp_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.exp(), &[x23(15)]);
}

#[test]
fn jvp_of_exp2_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.exp2(), &[x23(16)]);
}

#[test]
fn jvp_of_log_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.log(), &[pos23(17)]);
}

#[test]
fn jvp_of_log2_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.log2(), &[pos23(18)]);
}

#[test]
fn jvp_of_sin_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.sin(), &[x23(19)]);
}

#[test]
fn jvp_of_cos_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.cos(), &[x23(20)]);
}

#[test]
fn jvp_of_sqrt_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.sqrt(), &[pos23(21)]);
}

#[test]
fn jvp_of_pow_with_a_tensor_exponent_matches_finite_differences() {
    check_jvp(|x: &Tensor, y: &Tensor| x.pow(y), &[pos23(22), x23(23)]);
}

#[test]
fn jvp_of_pow_with_scalar_exponents_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.pow(2.0), &[x23(24)]);
    check_jvp(|x: &Tensor| x.pow(3.0), &[x23(25)]);
    check_jvp(|x: &Tensor| x.pow(0.5), &[pos23(26)]);
    check_jvp(|x: &Tensor| x.pow(-1.0), &[pos23(27)]);
    check_jvp(|x: &Tensor| x.pow(-0.5), &[pos23(28)]);
    check_jvp(|x: &Tensor| x.pow(2.5), &[pos23(29)]);
}

#[test]
fn jvp_of_pow_of_a_negative_base_to_an_integer_power_matches_finite_differences() {
    check_jvp(
        |x: &Tensor| x.pow(3.0),
        &[uniform_f64(&[4], 30, -2.0, -0.5)],
    );
}

#[test]
fn jvp_of_tanh_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.tanh(), &[x23(31)]);
}

#[test]
fn jvp_of_sigmoid_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.sigmoid(), &[x23(32)]);
}

#[test]
fn jvp_of_relu_matches_finite_differences_away_from_zero() {
    check_jvp(|x: &Tensor| x.relu(), &[distinct_f64(&[2, 3], 33)]);
}

#[test]
fn jvp_of_abs_matches_finite_differences_away_from_zero() {
    check_jvp(|x: &Tensor| x.abs(), &[distinct_f64(&[2, 3], 34)]);
}

// ---- max, where, cast ----

#[test]
fn jvp_of_maximum_and_minimum_matches_finite_differences_away_from_ties() {
    let x = distinct_f64(&[6], 35);
    let y = distinct_f64(&[6], 36) + 0.01;
    check_jvp(
        |x: &Tensor, y: &Tensor| x.maximum(y),
        &[x.clone(), y.clone()],
    );
    check_jvp(|x: &Tensor, y: &Tensor| x.minimum(y), &[x, y]);
}

#[test]
fn jvp_of_maximum_at_a_tie_is_the_mean_of_both_tangents() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
    let (dx, dy) = (
        Tensor::from_vec(vec![1.0f64, 4.0], &[2]),
        Tensor::from_vec(vec![3.0f64, 8.0], &[2]),
    );
    let (_, t) = jvp(
        |x: &Tensor, y: &Tensor| x.maximum(y),
        &[x.clone(), x],
        &[dx, dy],
    );
    assert_values_close("tangent at ties", &values(&t[0]), &[2.0, 6.0], 0.0, 0.0);
}

#[test]
fn jvp_of_where_matches_finite_differences() {
    let c = randf64(&[2, 3], 37);
    check_jvp(
        move |a: &Tensor, b: &Tensor| c.gt(0.0).where_(a * a, b.sin()),
        &[x23(38), x23(39)],
    );
}

#[test]
fn jvp_of_cast_to_f32_and_back_carries_the_cast_tangent() {
    let x = x23(40);
    let v = x23(41);
    let f = |x: &Tensor| x.cast(DType::F32);
    let (_, t) = jvp(f, std::slice::from_ref(&x), std::slice::from_ref(&v));
    assert_eq!(t[0].dtype(), DType::F32);
    assert_close("tangent of cast", &t[0], &v.cast(DType::F32), 0.0, 0.0);
    // Through an f32 section the finite difference is only as good as f32 rounding allows.
    check_jvp_with(
        |x: &Tensor| (x.cast(DType::F32) * 3.0).sin().cast(DType::F64),
        &[x],
        1e-3,
        1e-3,
        1e-4,
    );
}

#[test]
fn jvp_of_cast_from_f32_to_f64_matches_finite_differences() {
    check_jvp_with(
        |x: &Tensor| x.cast(DType::F64).exp(),
        &[randf32(&[2, 3], 42)],
        1e-3,
        1e-3,
        1e-4,
    );
}

// ---- movement ----

#[test]
fn jvp_of_reshape_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.reshape(&[3, 2]).sin(), &[x23(43)]);
}

#[test]
fn jvp_of_permute_matches_finite_differences() {
    check_jvp(
        |x: &Tensor| x.permute(&[2, 0, 1]) * 2.0,
        &[randf64(&[2, 3, 2], 44)],
    );
}

#[test]
fn jvp_of_expand_matches_finite_differences() {
    check_jvp(
        |x: &Tensor| x.reshape(&[2, 1, 3]).expand(&[2, 2, 3]).exp(),
        &[x23(45)],
    );
}

#[test]
fn jvp_of_pad_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.pad(&[(1, 0), (0, 2)]).exp(), &[x23(46)]);
}

#[test]
fn jvp_of_shrink_and_slice_match_finite_differences() {
    check_jvp(|x: &Tensor| x.shrink(&[(0, 1), (1, 3)]).exp(), &[x23(47)]);
    check_jvp(
        |x: &Tensor| x.slice(1, -2, 3) * x.slice(1, 0, 2),
        &[x23(48)],
    );
}

#[test]
fn jvp_of_flip_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.flip(1) * x, &[x23(49)]);
}

#[test]
fn jvp_of_stack_and_cat_match_finite_differences() {
    check_jvp(
        |x: &Tensor, y: &Tensor| Tensor::stack(&[x.clone(), y * x], 1),
        &[x23(50), x23(51)],
    );
    check_jvp(
        |x: &Tensor, y: &Tensor| Tensor::cat(&[x.clone(), y.exp()], 0),
        &[x23(52), randf64(&[1, 3], 53)],
    );
}

#[test]
fn jvp_of_contiguous_matches_finite_differences() {
    check_jvp(|x: &Tensor| (x * x).contiguous(), &[x23(54)]);
}

#[test]
fn jvp_through_detach_is_zero() {
    let (x, v) = (x23(55), x23(56));
    let (_, t) = jvp(
        |x: &Tensor| x.detach() * 2.0,
        &[x],
        std::slice::from_ref(&v),
    );
    assert_close("tangent through detach", &t[0], &v.zeros_like(), 0.0, 0.0);
}

#[test]
fn jvp_of_take_matches_finite_differences() {
    let i = Tensor::from_vec(vec![2i32, 0, 0], &[3]);
    check_jvp(move |x: &Tensor| x.take(&i, 1).sin(), &[x23(57)]);
}

#[test]
fn jvp_of_cumsum_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.cumsum(1) * x, &[x23(58)]);
}

// ---- reductions ----

#[test]
fn jvp_of_sum_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.sum(1, false), &[x23(59)]);
    check_jvp(|x: &Tensor| (x * x).sum_all(), &[x23(60)]);
}

#[test]
fn jvp_of_max_reduce_matches_finite_differences_away_from_ties() {
    let x = distinct_f64(&[2, 3], 61);
    check_jvp(|x: &Tensor| x.max(1, false), std::slice::from_ref(&x));
    check_jvp(|x: &Tensor| x.max(0, true), std::slice::from_ref(&x));
    check_jvp(|x: &Tensor| x.min(1, false), &[x]);
}

#[test]
fn jvp_of_max_reduce_at_a_tie_is_the_mean_over_the_tied_positions() {
    let x = Tensor::from_vec(vec![1.0f64, 3.0, 3.0], &[3]);
    let v = Tensor::from_vec(vec![5.0f64, 2.0, 4.0], &[3]);
    let (_, t) = jvp(|x: &Tensor| x.max_all(), &[x], &[v]);
    assert_values_close("tangent of max at a tie", &values(&t[0]), &[3.0], 0.0, 0.0);
}

#[test]
fn jvp_of_prod_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.prod(1, false), &[pos23(62)]);
    check_jvp(|x: &Tensor| x.prod_all(), &[pos23(63)]);
}

#[test]
fn jvp_of_mean_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.mean(0, false) * x.mean_all(), &[x23(64)]);
}

// ---- composites ----

#[test]
fn jvp_of_matmul_matches_finite_differences() {
    check_jvp(
        |a: &Tensor, b: &Tensor| a.matmul(b),
        &[x23(65), randf64(&[3, 2], 66)],
    );
    check_jvp(
        |a: &Tensor, b: &Tensor| a.matmul(b),
        &[x23(67), randf64(&[3], 68)],
    );
}

#[test]
fn jvp_of_softmax_and_log_softmax_match_finite_differences() {
    check_jvp(|x: &Tensor| x.softmax(-1), &[x23(69)]);
    check_jvp(|x: &Tensor| x.log_softmax(0), &[x23(70)]);
}

#[test]
fn jvp_of_logsumexp_matches_finite_differences() {
    check_jvp(|x: &Tensor| x.logsumexp(1, false), &[x23(71)]);
    check_jvp(|x: &Tensor| x.logsumexp([0, 1], true), &[x23(72)]);
}

#[test]
fn jvp_of_a_function_with_several_results_gives_one_tangent_per_result() {
    check_jvp(
        |x: &Tensor, y: &Tensor| (x * y, (x + y).sum_all(), y.exp()),
        &[x23(73), x23(74)],
    );
}

#[test]
fn jvp_of_a_result_that_ignores_the_inputs_is_zero() {
    let x = x23(75);
    let (_, t) = jvp(
        |x: &Tensor| (x * 2.0, Tensor::ones(&[2], DType::F64)),
        std::slice::from_ref(&x),
        std::slice::from_ref(&x),
    );
    assert_close(
        "zero tangent",
        &t[1],
        &Tensor::zeros(&[2], DType::F64),
        0.0,
        0.0,
    );
}

// ---- primitives the front end decomposes, built directly ----

mod primitives {
    use super::*;
    use tensor_core::Op;

    #[test]
    fn jvp_of_the_neg_sub_and_div_primitives_matches_finite_differences() {
        check_jvp(|x: &Tensor| prim(Op::Neg, &[x]), &[x23(80)]);
        check_jvp(
            |x: &Tensor, y: &Tensor| prim(Op::Sub, &[x, y]),
            &[x23(81), x23(82)],
        );
        check_jvp(
            |x: &Tensor, y: &Tensor| prim(Op::Div, &[x, y]),
            &[x23(83), pos23(84)],
        );
    }

    #[test]
    fn jvp_of_the_pow_primitive_matches_finite_differences() {
        check_jvp(
            |x: &Tensor, y: &Tensor| prim(Op::Pow, &[x, y]),
            &[pos23(85), x23(86)],
        );
    }

    #[test]
    fn jvp_of_the_max_primitive_matches_finite_differences_away_from_ties() {
        let y = distinct_f64(&[2, 3], 88) + 0.01;
        check_jvp(
            |x: &Tensor, y: &Tensor| prim(Op::Max, &[x, y]),
            &[distinct_f64(&[2, 3], 87), y],
        );
    }

    #[test]
    fn jvp_of_the_mulacc_primitive_matches_finite_differences() {
        check_jvp(
            |x: &Tensor, y: &Tensor, z: &Tensor| prim(Op::Mulacc, &[x, y, z]),
            &[x23(89), x23(90), x23(91)],
        );
    }

    #[test]
    fn jvp_of_the_stack_primitive_matches_finite_differences() {
        check_jvp(
            |x: &Tensor, y: &Tensor| prim_stack(&[x, &y.sin(), x]),
            &[x23(92), x23(93)],
        );
    }

    #[test]
    fn jvp_of_contiguous_backward_matches_finite_differences() {
        check_jvp(
            |x: &Tensor| prim_marker(Op::ContiguousBackward, &x.exp()),
            &[x23(94)],
        );
    }
}

#[test]
fn jvp_of_scatter_add_matches_finite_differences() {
    let i = Tensor::from_vec(vec![0i32, 2, 2, 2], &[2, 2]);
    check_jvp(
        move |base: &Tensor, src: &Tensor| base.scatter_add(1, &i, &src.sin()),
        &[x23(76), randf64(&[2, 2], 77)],
    );
}
