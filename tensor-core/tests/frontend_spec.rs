//! Every node the front end builds is valid by `uop::spec`.

use ndarray::Array2;
use tensor_core::uop::spec::check_graph;
use tensor_core::{DType, Tensor};

/// One result of every public op, over several dtypes and edge-case shapes.
fn every_op() -> Vec<(&'static str, Tensor)> {
    let x = Tensor::from_vec((0..12).map(|i| i as f32 - 5.0).collect(), &[3, 4]);
    let v = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]);
    let i = Tensor::from_vec(vec![3i32, -1, 0, 2], &[4]);
    let u = Tensor::from_vec(vec![3u8, 1, 0, 255], &[4]);
    let b = Tensor::from_vec(vec![true, false, true, true], &[4]);
    let h = v.cast(DType::F16);
    let idx = Tensor::from_vec(vec![0i32, 3, 1], &[3, 1]);
    let empty = Tensor::zeros(&[0, 4], DType::F32);
    vec![
        ("from_array", Tensor::from_array(&Array2::<f64>::eye(2).t())),
        ("full", Tensor::full(&[2, 3], 1.5, DType::BF16)),
        ("scalar", Tensor::scalar(7i64)),
        ("arange", Tensor::arange(37)),
        ("arange_steps", Tensor::arange((0.5, 3.0, 0.5))),
        ("eye", Tensor::eye(4, DType::F32)),
        ("rand", Tensor::rand(&[2, 3], 1)),
        ("randn", Tensor::randn(&[5], 2)),
        ("add", &x + &v),
        ("add_bool", &b + &b),
        ("sub", 2.0 - &x),
        ("mul", &i * 3),
        ("div", &i / &v),
        ("floor_div", i.floor_div(2)),
        ("remainder", &x % 3.0),
        ("pow", x.pow(&v)),
        ("pow_int", i.pow(3)),
        ("maximum", u.maximum(2)),
        ("minimum", i.minimum(&u)),
        ("minimum_f", h.minimum(1.0)),
        ("clamp", x.clamp(-1.0, 1.0)),
        (
            "comparisons",
            x.lt(&v)
                .logical_or(x.ge(0.0))
                .logical_and(x.eq(1.0).logical_not()),
        ),
        ("le_gt_ne", i.le(1).bitwise_xor(i.gt(0)).bitwise_or(i.ne(2))),
        ("where", b.where_(&v, -1.0)),
        ("where_int_cond", i.where_(1, 0)),
        ("bitwise", (&i & 6) | (&u ^ 1)),
        ("not", !&b),
        ("bitwise_not", !&i),
        (
            "unary",
            x.exp() + x.log() + x.sin() + x.cos() + x.tanh() + x.sigmoid() + x.relu(),
        ),
        (
            "more_unary",
            x.sqrt() + x.rsqrt() + x.recip() + x.abs() + x.sign() + x.exp2() + x.log2(),
        ),
        (
            "rounding",
            x.floor() + x.ceil() + x.trunc() + x.tan() + x.square(),
        ),
        ("neg", -&i),
        ("cast", u.cast(DType::F64)),
        ("reshape", x.reshape(&[2, -1])),
        ("permute", x.permute(&[1, 0])),
        ("expand", v.expand(&[3, -1])),
        ("pad", x.pad(&[(1, 2), (0, 1)])),
        ("pad_value", x.pad_value(&[(1, 0), (0, 0)], 9.0)),
        ("slice", x.slice(1, -3, -1).narrow(0, 1, 2)),
        ("flip", x.flip([0, 1])),
        ("squeeze", x.unsqueeze(1).squeeze(1).flatten(0, 1)),
        ("markers", x.contiguous().detach()),
        ("sum", x.sum(0, false) + b.sum_all()),
        ("max_min", x.max(1, true) + x.min(1, true)),
        ("mean_prod", x.mean(-1, false) + x.prod(-1, false)),
        ("var_std", x.var(0, false) + x.std(0, false)),
        ("argmax", x.argmax(1, false) + x.argmin_all()),
        ("any_all", x.any(0, false).logical_and(x.all(0, false))),
        ("empty_sum", empty.sum(0, true)),
        ("cumsum", x.cumsum(0) + x.cumsum(1)),
        ("matmul", x.matmul(&v) + v.matmul(&x.transpose(0, 1))),
        (
            "batched_matmul",
            x.reshape(&[3, 1, 4]).matmul(&x.reshape(&[4, 3])),
        ),
        ("dot", v.dot(&v)),
        ("softmax", x.softmax(-1) + x.log_softmax(0)),
        ("logsumexp", x.logsumexp([0, 1], false)),
        ("cat", Tensor::cat(&[x.clone(), x.clone()], 1)),
        ("cat_bool", Tensor::cat(&[b.clone(), b.clone()], 0)),
        ("stack", Tensor::stack(&[v.clone(), v.clone()], -1)),
        ("gather", x.gather(1, &idx)),
        ("take", x.take(&i, 1)),
        ("one_hot", i.one_hot(5)),
        (
            "scatter_add",
            x.scatter_add(1, &idx, &Tensor::ones(&[3, 1], DType::F32)),
        ),
    ]
}

#[test]
fn every_node_the_front_end_builds_passes_the_spec() {
    for (name, t) in every_op() {
        if let Err(e) = check_graph(&t.uop()) {
            panic!("{name}: {e}");
        }
    }
}

#[test]
fn elementwise_operands_are_always_made_the_same_shape_explicitly() {
    for (name, t) in every_op() {
        for node in t.uop().toposort() {
            if !node.op().is_elementwise() {
                continue;
            }
            for s in node.src() {
                assert_eq!(
                    s.shape(),
                    node.shape(),
                    "{name}: operand of {} {:?}",
                    node.op(),
                    node
                );
            }
        }
    }
}
