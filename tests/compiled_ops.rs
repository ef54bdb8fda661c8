//! Differential test: every front-end op, compiled to C and run on the CPU, equals the
//! reference interpreter, under the tolerance policy of `common::tolerance`: exactly for
//! integer and bool results, within 1e-4 for floats (kernels may fuse `a*b+c` into an FMA, and
//! compute `f32` `exp2`, `log2`, `sin` and `cos` by their decompositions, within 2 ulp of the
//! interpreter's `f64` functions).

mod common;

use common::tolerance::agree;
use common::{interpreted, values};
use tensor::prelude::*;

fn floats(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n)
            .map(|i| (((i * 37 + seed * 11) % 23) as f32 - 11.0) / 4.0)
            .collect(),
        shape,
    )
}

fn positive(shape: &[usize], seed: usize) -> Tensor {
    floats(shape, seed).abs() + 0.25
}

fn ints(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        (0..n)
            .map(|i| ((i * 13 + seed * 7) % 19) as i32 - 9)
            .collect(),
        shape,
    )
}

/// The ops under test, by name.
fn cases() -> Vec<(&'static str, Tensor)> {
    let a = floats(&[3, 4], 1);
    let b = floats(&[3, 4], 2);
    let row = floats(&[4], 3);
    let p = positive(&[3, 4], 4);
    let i = ints(&[3, 4], 5);
    let j = ints(&[3, 4], 6).abs() + 1;
    let idx = Tensor::from_vec(vec![2i32, 0, 1, 2], &[4]);
    vec![
        ("add_broadcast", &a + &row),
        ("sub", &a - &b),
        ("mul_scalar", &a * 3.5),
        ("div", &a / &p),
        ("neg", -&a),
        ("exp", a.exp()),
        ("exp2", a.exp2()),
        ("log", p.log()),
        ("log2", p.log2()),
        ("sin", a.sin()),
        ("cos", a.cos()),
        ("tanh", a.tanh()),
        ("sigmoid", a.sigmoid()),
        ("relu", a.relu()),
        ("sqrt", p.sqrt()),
        ("rsqrt", p.rsqrt()),
        ("recip", p.recip()),
        ("pow_tensor", p.pow(&b)),
        ("pow_scalar", a.pow(3.0)),
        ("abs", a.abs()),
        ("maximum", a.maximum(&b)),
        ("minimum", a.minimum(&b)),
        ("clamp", a.clamp(-1.0, 1.5)),
        ("lt", a.lt(&b)),
        ("ge", a.ge(&b)),
        ("eq", i.eq(ints(&[3, 4], 5))),
        ("where", a.gt(0.0).where_(&a, &b)),
        ("cast_to_int", a.cast(DType::I32)),
        ("cast_to_half", a.cast(DType::F16)),
        ("int_add_mul", &i * 3 + &j),
        ("int_floor_div", i.floor_div(&j)),
        ("int_remainder", i.remainder(&j)),
        ("int_bitwise", i.bitwise_and(&j).bitwise_xor(5)),
        ("reshape", a.reshape(&[2, -1])),
        ("permute", a.permute(&[1, 0])),
        ("expand", row.reshape(&[1, 4]).expand(&[3, 4])),
        ("pad", a.pad(&[(1, 0), (0, 2)])),
        ("shrink", a.shrink(&[(1, 3), (1, 4)])),
        ("slice_negative", a.slice(1, -3, -1)),
        ("flip", a.flip(1)),
        ("squeeze_unsqueeze", a.unsqueeze(0).squeeze(0).unsqueeze(-1)),
        ("flatten", a.unsqueeze(1).flatten(0, -1)),
        ("sum_axis", a.sum(1, false)),
        ("sum_keepdim", a.sum(0, true)),
        ("max_axis", a.max(-1, false)),
        ("min_all", a.min_all()),
        ("mean", a.mean(0, false)),
        ("prod", p.prod(1, false)),
        ("argmax", a.argmax(1, false)),
        ("int_sum", i.sum_all()),
        ("matmul", a.matmul(&floats(&[4, 5], 7))),
        (
            "matmul_batched",
            floats(&[2, 3, 4], 8).matmul(&floats(&[4, 2], 9)),
        ),
        ("matvec", a.matmul(&row)),
        (
            "matmul with a 4x16 register tile",
            floats(&[8, 12], 10).matmul(&floats(&[12, 48], 11)),
        ),
        (
            "batched matmul with a 4x16 register tile",
            floats(&[3, 4, 5], 12).matmul(&floats(&[5, 32], 13)),
        ),
        ("softmax", a.softmax(-1)),
        ("log_softmax", a.log_softmax(0)),
        ("logsumexp", a.logsumexp(1, false)),
        ("stack", Tensor::stack(&[a.clone(), b.clone()], 1)),
        ("cat", Tensor::cat(&[a.clone(), b.clone()], 0)),
        ("gather", a.gather(1, &ints(&[3, 2], 1).abs().remainder(4))),
        ("take", a.take(&idx, 1)),
        ("cumsum", a.cumsum(1)),
        ("one_hot", idx.one_hot(3)),
        ("arange", Tensor::arange(10)),
        ("eye", Tensor::eye(4, DType::F32)),
        ("rand", Tensor::rand(&[3, 5], 7)),
        ("randn", Tensor::randn(&[6], 9)),
        ("contiguous_then_add", a.contiguous() + 1.0),
        ("detach", a.detach() * 2.0),
    ]
}

#[test]
fn every_front_end_op_compiled_equals_the_interpreter() {
    let mut failures = Vec::new();
    for (name, tensor) in cases() {
        let expected = interpreted(&tensor);
        let got = values(&tensor);
        let agree = agree(&got, &expected, tensor.dtype().is_float(), 1.0);
        if !agree {
            failures.push(format!(
                "{name}: compiled {got:?}, interpreter {expected:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fused_float_chains_keep_ieee_special_values() {
    // The kernels' flags allow FMA contraction but no fast-math: NaN, infinities, the sign of
    // zero and overflow must come out exactly as the interpreter computes them.
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.0,
        3.0e38,
        -1.5,
        1.0e-40,
    ];
    let x = Tensor::from_vec(specials.repeat(8), &[64]);
    let chains = [
        ("mul_add", &x * 2.0 + 1.0),
        ("poly", ((&x * 2.0 + 1.0) * &x - 3.0) * 0.5 + &x),
        ("div_sqrt", (&x / &x).sqrt() * &x),
        ("signed_zero_product", &x * -0.0 + &x * 0.0),
    ];
    for (name, y) in chains {
        let (got, want) = (values(&y), interpreted(&y));
        let same = got.iter().zip(&want).all(|(g, w)| {
            (g.is_nan() && w.is_nan()) || (g == w && g.is_sign_negative() == w.is_sign_negative())
        });
        assert!(same, "{name}: compiled {got:?}, interpreter {want:?}");
    }
}
