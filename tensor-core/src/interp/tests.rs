use super::*;
use crate::Tensor;
use crate::uop::{AxisType, Device, ReduceOp, Scalar};

fn t<T: Element>(data: Vec<T>, shape: &[usize]) -> UOp {
    Tensor::from_vec(data, shape).uop()
}

fn f32s(root: &UOp) -> Vec<f32> {
    evaluate(root).to_vec::<f32>()
}

fn c(v: f64, dtype: DType) -> UOp {
    UOp::constant(v, dtype)
}

fn alu(op: Op, src: &[&UOp]) -> UOp {
    UOp::alu(op, src.iter().map(|s| (*s).clone()).collect())
}

use crate::uop::Element;

// ---- sources ----

#[test]
fn buffers_read_their_host_data_in_row_major_order() {
    let x = evaluate(&t(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]));
    assert_eq!(x.shape, vec![2, 3]);
    assert_eq!(x.dtype, DType::F32);
    assert_eq!(x.get(&[1, 0]), Scalar::Float(4.0));
    assert_eq!(x.to_vec::<f32>(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

#[test]
fn const_is_a_scalar_and_vconst_a_vector() {
    let k = evaluate(&c(2.5, DType::F32));
    assert_eq!(k.shape, Vec::<usize>::new());
    assert_eq!(k.to_vec::<f32>(), vec![2.5]);
    let v = evaluate(&UOp::index_vec(&[3, 1, 4]));
    assert_eq!(v.shape, vec![3]);
    assert_eq!(v.to_vec::<i64>(), vec![3, 1, 4]);
}

#[test]
#[should_panic(expected = "has no contents")]
fn a_buffer_without_contents_panics_naming_it() {
    evaluate(&UOp::new_buffer(4, DType::F32, Device::cpu()));
}

#[test]
#[should_panic(expected = "cannot evaluate DefineGlobal")]
fn codegen_ops_panic_naming_the_op() {
    let global = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(0));
    evaluate(&global);
}

// ---- movement ----

#[test]
fn reshape_keeps_row_major_order() {
    let x = t(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]).reshape(&[3, 2]);
    let v = evaluate(&x);
    assert_eq!(v.shape, vec![3, 2]);
    assert_eq!(v.get(&[2, 0]), Scalar::Int(5));
}

#[test]
fn permute_moves_axes() {
    let x = t(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]);
    assert_eq!(
        evaluate(&x.permute(&[1, 0])).to_vec::<i32>(),
        vec![1, 4, 2, 5, 3, 6]
    );
    let y = t((0..24).collect::<Vec<i32>>(), &[2, 3, 4]).permute(&[2, 0, 1]);
    let v = evaluate(&y);
    assert_eq!(v.shape, vec![4, 2, 3]);
    // result[k, i, j] = x[i, j, k] = 12 i + 4 j + k
    assert_eq!(v.get(&[3, 1, 2]), Scalar::Int(12 + 8 + 3));
}

#[test]
fn flip_reverses_flagged_axes_only() {
    let x = t(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]);
    assert_eq!(
        evaluate(&x.flip(&[false, true])).to_vec::<i32>(),
        vec![3, 2, 1, 6, 5, 4]
    );
    assert_eq!(
        evaluate(&x.flip(&[true, false])).to_vec::<i32>(),
        vec![4, 5, 6, 1, 2, 3]
    );
}

#[test]
fn pad_adds_zeros_and_shrink_takes_a_window() {
    let x = t(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let padded = x.pad(&[1, 0], &[0, 2]);
    assert_eq!(
        f32s(&padded),
        vec![0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0]
    );
    assert_eq!(f32s(&padded.shrink(&[1, 0], &[3, 2])), f32s(&x));
    assert_eq!(f32s(&x.shrink(&[0, 1], &[2, 2])), vec![2.0, 4.0]);
    let empty = evaluate(&x.shrink(&[1, 0], &[1, 2]));
    assert_eq!(empty.shape, vec![0, 2]);
    assert_eq!(empty.numel(), 0);
}

#[test]
fn pad_of_bools_pads_with_false() {
    let x = t(vec![true], &[1]).pad(&[1], &[1]);
    assert_eq!(evaluate(&x).to_vec::<bool>(), vec![false, true, false]);
}

#[test]
fn expand_repeats_size_one_axes() {
    let x = t(vec![1i32, 2, 3], &[3, 1]).expand(&[3, 2]);
    assert_eq!(evaluate(&x).to_vec::<i32>(), vec![1, 1, 2, 2, 3, 3]);
    let to_empty = evaluate(&t(vec![7i32], &[1]).expand(&[0]));
    assert_eq!(to_empty.shape, vec![0]);
    assert!(to_empty.data.is_empty());
}

#[test]
fn index_with_a_scalar_removes_the_axis_and_with_a_vector_gathers() {
    let x = t((0..12).collect::<Vec<i32>>(), &[3, 4]);
    let row = x.index_by(vec![UOp::constant(2, DType::I32)]);
    assert_eq!(evaluate(&row).to_vec::<i32>(), vec![8, 9, 10, 11]);
    let rows = x.index_by(vec![t(vec![2i32, 0, 2], &[3])]);
    let v = evaluate(&rows);
    assert_eq!(v.shape, vec![3, 4]);
    assert_eq!(
        v.to_vec::<i32>(),
        vec![8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11]
    );
    let element = x.index_by(vec![UOp::index(1), UOp::index(3)]);
    let e = evaluate(&element);
    assert_eq!(e.shape, Vec::<usize>::new());
    assert_eq!(e.to_vec::<i32>(), vec![7]);
    let mixed = x.index_by(vec![t(vec![0i64, 2], &[2]), UOp::index(1)]);
    assert_eq!(evaluate(&mixed).to_vec::<i32>(), vec![1, 9]);
    let both = x.index_by(vec![t(vec![1i64, 2], &[2]), t(vec![3i64, 0, 1], &[3])]);
    let b = evaluate(&both);
    assert_eq!(b.shape, vec![2, 3]);
    assert_eq!(b.to_vec::<i32>(), vec![7, 4, 5, 11, 8, 9]);
}

#[test]
#[should_panic(expected = "position 3 is outside axis 0 of size 3")]
fn index_out_of_range_panics() {
    let x = t((0..12).collect::<Vec<i32>>(), &[3, 4]);
    evaluate(&x.index_by(vec![UOp::index(3)]));
}

#[test]
fn stack_joins_along_a_new_leading_axis() {
    let a = t(vec![1i32, 2], &[2]);
    let b = t(vec![3i32, 4], &[2]);
    let s = evaluate(&UOp::stack(vec![a.clone(), b, a]));
    assert_eq!(s.shape, vec![3, 2]);
    assert_eq!(s.to_vec::<i32>(), vec![1, 2, 3, 4, 1, 2]);
}

// ---- reduce ----

#[test]
fn reduce_keeps_reduced_axes_as_size_one() {
    let x = t(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let rows = evaluate(&x.reduce(ReduceOp::Add, &[1]));
    assert_eq!(rows.shape, vec![2, 1]);
    assert_eq!(rows.to_vec::<f32>(), vec![6.0, 15.0]);
    assert_eq!(f32s(&x.reduce(ReduceOp::Add, &[0])), vec![5.0, 7.0, 9.0]);
    assert_eq!(f32s(&x.reduce(ReduceOp::Max, &[0, 1])), vec![6.0]);
    assert_eq!(f32s(&x.reduce(ReduceOp::Mul, &[1])), vec![6.0, 120.0]);
    assert_eq!(f32s(&x.reduce(ReduceOp::Add, &[])), f32s(&x));
}

#[test]
fn empty_reductions_give_the_identity() {
    let x = t(Vec::<f32>::new(), &[2, 0]);
    assert_eq!(f32s(&x.reduce(ReduceOp::Add, &[1])), vec![0.0, 0.0]);
    assert_eq!(f32s(&x.reduce(ReduceOp::Mul, &[1])), vec![1.0, 1.0]);
    assert_eq!(
        f32s(&x.reduce(ReduceOp::Max, &[1])),
        vec![f32::NEG_INFINITY; 2]
    );
    let i = t(Vec::<i8>::new(), &[0]);
    assert_eq!(
        evaluate(&i.reduce(ReduceOp::Max, &[0])).to_vec::<i8>(),
        vec![-128]
    );
    let b = t(Vec::<bool>::new(), &[0]);
    assert_eq!(
        evaluate(&b.reduce(ReduceOp::Max, &[0])).to_vec::<bool>(),
        vec![false]
    );
}

#[test]
fn integer_sums_wrap_and_bool_reductions_are_any() {
    let x = t(vec![200u8, 100, 1], &[3]);
    assert_eq!(
        evaluate(&x.reduce(ReduceOp::Add, &[0])).to_vec::<u8>(),
        vec![45]
    );
    let b = t(vec![false, true, false], &[3]);
    assert_eq!(
        evaluate(&b.reduce(ReduceOp::Add, &[0])).to_vec::<bool>(),
        vec![true]
    );
    assert_eq!(
        evaluate(&b.reduce(ReduceOp::Max, &[0])).to_vec::<bool>(),
        vec![true]
    );
}

#[test]
fn float_sums_round_once_to_the_dtype() {
    // In f32 arithmetic 1e8 + 1 + 1 - 1e8 loses the ones; summed exactly it is 2.
    let x = t(vec![1e8f32, 1.0, 1.0, -1e8], &[4]);
    assert_eq!(f32s(&x.reduce(ReduceOp::Add, &[0])), vec![2.0]);
}

// ---- elementwise ----

#[test]
fn elementwise_ops_broadcast_like_numpy() {
    let col = t(vec![10.0f32, 20.0, 30.0], &[3, 1]);
    let row = t(vec![1.0f32, 2.0], &[2]);
    let sum = evaluate(&alu(Op::Add, &[&col, &row]));
    assert_eq!(sum.shape, vec![3, 2]);
    assert_eq!(
        sum.to_vec::<f32>(),
        vec![11.0, 12.0, 21.0, 22.0, 31.0, 32.0]
    );
    let scaled = alu(Op::Mul, &[&row, &c(3.0, DType::F32)]);
    assert_eq!(f32s(&scaled), vec![3.0, 6.0]);
}

#[test]
fn elementwise_over_size_zero_and_size_one_axes() {
    let empty = t(Vec::<f32>::new(), &[0, 3]);
    let one = t(vec![1.0f32, 2.0, 3.0], &[1, 3]);
    let v = evaluate(&alu(Op::Add, &[&empty, &one]));
    assert_eq!(v.shape, vec![0, 3]);
    let single = t(vec![5.0f32], &[1, 1]);
    assert_eq!(
        f32s(&alu(Op::Sub, &[&one, &single])),
        vec![-4.0, -3.0, -2.0]
    );
}

#[test]
fn where_selects_per_element() {
    let p = t(vec![true, false, true], &[3]);
    let a = t(vec![1i32, 2, 3], &[3]);
    let b = UOp::constant(-1, DType::I32);
    let w = evaluate(&alu(Op::Where, &[&p, &a, &b]));
    assert_eq!(w.dtype, DType::I32);
    assert_eq!(w.to_vec::<i32>(), vec![1, -1, 3]);
}

#[test]
fn comparisons_give_bool_arrays() {
    let a = t(vec![1.0f32, 2.0, 3.0], &[3]);
    let b = t(vec![2.0f32, 2.0, 2.0], &[3]);
    let lt = evaluate(&alu(Op::CmpLt, &[&a, &b]));
    assert_eq!(lt.dtype, DType::Bool);
    assert_eq!(lt.to_vec::<bool>(), vec![true, false, false]);
    let eq = evaluate(&alu(Op::CmpEq, &[&a, &b]));
    assert_eq!(eq.to_vec::<bool>(), vec![false, true, false]);
}

#[test]
fn u64_comparisons_read_values_unsigned() {
    let big = t(vec![u64::MAX, 1], &[2]);
    let one = UOp::constant(1, DType::U64);
    let gt = evaluate(&alu(Op::CmpLt, &[&one, &big]));
    assert_eq!(gt.to_vec::<bool>(), vec![true, false]);
    assert_eq!(evaluate(&big).to_f64_vec(), vec![u64::MAX as f64, 1.0]);
}

#[test]
fn integer_ops_wrap_around_their_width() {
    let x = t(vec![250u8, 5], &[2]);
    let y = alu(Op::Add, &[&x, &UOp::constant(10, DType::U8)]);
    assert_eq!(evaluate(&y).to_vec::<u8>(), vec![4, 15]);
    let i = t(vec![i32::MAX, -7], &[2]);
    let j = alu(Op::Add, &[&i, &UOp::constant(1, DType::I32)]);
    assert_eq!(evaluate(&j).to_vec::<i32>(), vec![i32::MIN, -6]);
    let q = alu(Op::Idiv, &[&i, &UOp::constant(2, DType::I32)]);
    assert_eq!(evaluate(&q).to_vec::<i32>(), vec![i32::MAX / 2, -3]);
}

#[test]
fn bool_ops_are_logical() {
    let a = t(vec![false, false, true, true], &[4]);
    let b = t(vec![false, true, false, true], &[4]);
    let and = evaluate(&alu(Op::And, &[&a, &b]));
    assert_eq!(and.to_vec::<bool>(), vec![false, false, false, true]);
    let xor = evaluate(&alu(Op::Xor, &[&a, &b]));
    assert_eq!(xor.to_vec::<bool>(), vec![false, true, true, false]);
}

#[test]
fn half_precision_results_round_to_their_dtype() {
    let x = t(vec![1.0f32, 2048.0], &[2]);
    let half = x.cast(DType::F16);
    let bumped = alu(Op::Add, &[&half, &c(1.0 / 4096.0 + 1.0, DType::F16)]);
    // 1 + (1 + 2^-12 rounded to f16 = 1) = 2; 2048 + 1 is a tie that rounds to even 2048.
    let v = evaluate(&bumped);
    assert_eq!(v.dtype, DType::F16);
    assert_eq!(v.to_vec::<f32>(), vec![2.0, 2048.0]);
    let b = x.cast(DType::BF16);
    let sum = alu(Op::Add, &[&b, &c(1.0 / 256.0, DType::BF16)]);
    assert_eq!(f32s(&sum), vec![1.0, 2048.0]);
}

#[test]
fn f32_and_f64_differ_by_their_rounding() {
    let third32 = alu(Op::Div, &[&c(1.0, DType::F32), &c(3.0, DType::F32)]);
    let third64 = alu(Op::Div, &[&c(1.0, DType::F64), &c(3.0, DType::F64)]);
    assert_eq!(evaluate(&third32).to_f64_vec(), vec![(1.0f32 / 3.0) as f64]);
    assert_eq!(evaluate(&third64).to_f64_vec(), vec![1.0 / 3.0]);
}

#[test]
fn unary_math_ops_apply_per_element() {
    let x = t(vec![1.0f32, 4.0, 16.0], &[3]);
    assert_eq!(f32s(&alu(Op::Sqrt, &[&x])), vec![1.0, 2.0, 4.0]);
    assert_eq!(f32s(&alu(Op::Log2, &[&x])), vec![0.0, 2.0, 4.0]);
    assert_eq!(f32s(&alu(Op::Recip, &[&x])), vec![1.0, 0.25, 0.0625]);
    assert_eq!(f32s(&alu(Op::Neg, &[&x])), vec![-1.0, -4.0, -16.0]);
    let e = t(vec![0.0f32, 3.0, -1.0], &[3]);
    assert_eq!(f32s(&alu(Op::Exp2, &[&e])), vec![1.0, 8.0, 0.5]);
}

#[test]
fn cast_and_bitcast_convert_every_element() {
    let x = t(vec![-1.5f32, 2.7, 0.0], &[3]);
    assert_eq!(
        evaluate(&x.cast(DType::I32)).to_vec::<i32>(),
        vec![-1, 2, 0]
    );
    assert_eq!(
        evaluate(&x.cast(DType::Bool)).to_vec::<bool>(),
        vec![true, true, false]
    );
    let bits = evaluate(&t(vec![1.0f32, -2.0], &[2]).bitcast(DType::U32));
    assert_eq!(bits.to_vec::<u32>(), vec![0x3f80_0000, 0xc000_0000]);
    let back = t(vec![0x3f80_0000u32], &[1]).bitcast(DType::F32);
    assert_eq!(f32s(&back), vec![1.0]);
    let bf = t(vec![0x3f80u16], &[1]).bitcast(DType::BF16);
    assert_eq!(f32s(&bf), vec![1.0]);
    let f16_bits = t(vec![1.0f32], &[1]).cast(DType::F16).bitcast(DType::U16);
    assert_eq!(evaluate(&f16_bits).to_vec::<u16>(), vec![0x3c00]);
}

#[test]
fn threefry_runs_per_element() {
    let x = t(vec![0u64, 0x85a3_08d3_243f_6a88], &[2]);
    let key = t(vec![0u64, 0x0370_7344_1319_8a2e], &[2]);
    let r = evaluate(&alu(Op::Threefry, &[&x, &key]));
    assert_eq!(
        r.to_vec::<u64>(),
        vec![0x99ba_4efe_6b20_0159, 0x483d_f7a0_c492_3a9c]
    );
}

#[test]
fn markers_and_copy_are_identity_on_data() {
    let x = t(vec![1i32, 2, 3], &[3]);
    for op in [Op::Contiguous, Op::ContiguousBackward, Op::Detach] {
        assert_eq!(evaluate(&x.unary_marker(op)).to_vec::<i32>(), vec![1, 2, 3]);
    }
    let copied = x.copy_to(Device::Single("CPU:1".into()));
    assert_eq!(evaluate(&copied).to_vec::<i32>(), vec![1, 2, 3]);
}

// ---- functions and params ----

#[test]
fn functions_substitute_their_args_for_params() {
    let p0 = UOp::param(0, &[3], DType::F32, None);
    let p1 = UOp::param(1, &[3], DType::F32, None);
    let body = UOp::tuple(vec![
        alu(Op::Add, &[&p0, &alu(Op::Mul, &[&p1, &c(2.0, DType::F32)])]),
        alu(Op::Mul, &[&p0, &p1]),
    ]);
    let a = t(vec![1.0f32, 2.0, 3.0], &[3]);
    let b = t(vec![10.0f32, 20.0, 30.0], &[3]);
    let call_ab = UOp::function(body.clone(), vec![a.clone(), b.clone()]);
    let call_ba = UOp::function(body, vec![b, a]);
    let results = evaluate_many(&[
        call_ab.get_tuple(0),
        call_ab.get_tuple(1),
        call_ba.get_tuple(0),
    ]);
    assert_eq!(results[0].to_vec::<f32>(), vec![21.0, 42.0, 63.0]);
    assert_eq!(results[1].to_vec::<f32>(), vec![10.0, 40.0, 90.0]);
    assert_eq!(results[2].to_vec::<f32>(), vec![12.0, 24.0, 36.0]);
}

#[test]
fn nested_functions_see_their_own_params() {
    let inner_p = UOp::param(0, &[2], DType::I32, None);
    let inner = UOp::tuple(vec![alu(Op::Mul, &[&inner_p, &inner_p])]);
    let outer_p = UOp::param(0, &[2], DType::I32, None);
    let plus_one = alu(Op::Add, &[&outer_p, &UOp::constant(1, DType::I32)]);
    let squared = UOp::function(inner, vec![plus_one]).get_tuple(0);
    let outer = UOp::tuple(vec![alu(Op::Add, &[&squared, &outer_p])]);
    let x = t(vec![2i32, 3], &[2]);
    let y = UOp::function(outer, vec![x]).get_tuple(0);
    // (x + 1)^2 + x
    assert_eq!(evaluate(&y).to_vec::<i32>(), vec![11, 19]);
}

#[test]
fn call_evaluates_its_body_with_the_args() {
    let p = UOp::param(0, &[2], DType::F32, None);
    let body = UOp::tuple(vec![alu(Op::Neg, &[&p])]);
    let arg = Arg::Call {
        name: "negate".into(),
        strategy: Some(crate::uop::BatchStrategy::Sequential),
        external: crate::uop::arg::Handle::new(()),
        endpoint: crate::uop::Endpoint::Apply,
        lead: 0,
        statics: vec![],
    };
    let call = UOp::new(
        Op::Call,
        DType::Void,
        vec![body, t(vec![1.0f32, -2.0], &[2])],
        arg,
    );
    assert_eq!(f32s(&call.get_tuple(0)), vec![-1.0, 2.0]);
}

#[test]
fn top_level_params_come_from_evaluate_with_params() {
    let p = UOp::param(0, &[2], DType::F32, None);
    let y = alu(Op::Mul, &[&p, &c(3.0, DType::F32)]);
    let out = evaluate_with_params(&y, &[HostArray::from_vec(vec![1.0f32, 2.0], &[2])]);
    assert_eq!(out.to_vec::<f32>(), vec![3.0, 6.0]);
}

#[test]
#[should_panic(expected = "Param(0) has no value")]
fn a_param_without_a_value_panics() {
    evaluate(&UOp::param(0, &[2], DType::F32, None));
}

// ---- vmap scopes ----

fn loop_range(bound: usize, id: usize) -> UOp {
    UOp::range(bound, id, AxisType::Loop)
}

#[test]
fn vmap_of_an_elementwise_function_matches_a_loop() {
    let data: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let x = t(data.clone(), &[3, 4]);
    let w = t(vec![1.0f32, -1.0, 2.0, 0.5], &[4]);
    let r = loop_range(3, 0);
    let row = x.vmapin(&[r.clone(), UOp::index(0)]);
    let y = alu(Op::Add, &[&alu(Op::Mul, &[&row, &w]), &c(1.0, DType::F32)]);
    let out = evaluate(&y.vmapout(&[r, UOp::index(0)]));
    assert_eq!(out.shape, vec![3, 4]);
    let mut expected = Vec::new();
    for i in 0..3 {
        for j in 0..4 {
            expected.push(data[i * 4 + j] * [1.0, -1.0, 2.0, 0.5][j] + 1.0);
        }
    }
    assert_eq!(out.to_vec::<f32>(), expected);
}

#[test]
fn vmap_over_an_inner_axis_places_the_batch_where_the_range_stands() {
    let data: Vec<i32> = (0..6).collect();
    let x = t(data, &[2, 3]);
    let r = loop_range(3, 0);
    let column = x.vmapin(&[UOp::index(0), r.clone()]);
    let doubled = alu(Op::Mul, &[&column, &UOp::constant(2, DType::I32)]);
    let at_front = evaluate(&doubled.vmapout(&[r.clone(), UOp::index(0)]));
    assert_eq!(at_front.shape, vec![3, 2]);
    assert_eq!(at_front.to_vec::<i32>(), vec![0, 6, 2, 8, 4, 10]);
    let at_back = evaluate(&doubled.vmapout(&[UOp::index(0), r]));
    assert_eq!(at_back.shape, vec![2, 3]);
    assert_eq!(at_back.to_vec::<i32>(), vec![0, 2, 4, 6, 8, 10]);
}

#[test]
fn vmap_with_a_reduce_inside_matches_a_loop() {
    let data: Vec<f32> = (0..12).map(|v| v as f32 * 0.5).collect();
    let x = t(data.clone(), &[3, 4]);
    let r = loop_range(3, 7);
    let row = x.vmapin(&[r.clone(), UOp::index(0)]);
    let squares = alu(Op::Mul, &[&row, &row]);
    let total = squares.reduce(ReduceOp::Add, &[0]).reshape(&[]);
    let biggest = row.reduce(ReduceOp::Max, &[0]).reshape(&[]);
    let out = evaluate_many(&[
        total.vmapout(std::slice::from_ref(&r)),
        biggest.vmapout(&[r]),
    ]);
    let rows: Vec<&[f32]> = data.chunks(4).collect();
    let sums: Vec<f32> = rows.iter().map(|r| r.iter().map(|v| v * v).sum()).collect();
    let maxes: Vec<f32> = rows.iter().map(|r| r[3]).collect();
    assert_eq!(out[0].shape, vec![3]);
    assert_eq!(out[0].to_vec::<f32>(), sums);
    assert_eq!(out[1].to_vec::<f32>(), maxes);
}

#[test]
fn nested_vmaps_over_two_ranges_match_a_double_loop() {
    // out[i, j] = sum_k x[i, j, k] * v[k] + i-th bias, with i bound by the outer scope and j
    // by the inner one.
    let (n_i, n_j, n_k) = (2, 3, 4);
    let xs: Vec<f32> = (0..n_i * n_j * n_k).map(|v| v as f32 - 5.0).collect();
    let vs = vec![1.0f32, 2.0, -1.0, 0.5];
    let bias = vec![100.0f32, 200.0];
    let x = t(xs.clone(), &[n_i, n_j, n_k]);
    let v = t(vs.clone(), &[n_k]);
    let b = t(bias.clone(), &[n_i]);
    let (ri, rj) = (loop_range(n_i, 0), loop_range(n_j, 1));
    let x_i = x.vmapin(&[ri.clone(), UOp::index(0), UOp::index(0)]);
    let b_i = b.vmapin(std::slice::from_ref(&ri));
    let x_ij = x_i.vmapin(&[rj.clone(), UOp::index(0)]);
    let dot = alu(Op::Mul, &[&x_ij, &v])
        .reduce(ReduceOp::Add, &[0])
        .reshape(&[]);
    let inner = alu(Op::Add, &[&dot, &b_i]).vmapout(std::slice::from_ref(&rj));
    let out = evaluate(&inner.vmapout(&[ri, UOp::index(0)]));
    assert_eq!(out.shape, vec![n_i, n_j]);
    let mut expected = Vec::new();
    for (i, bias_i) in bias.iter().enumerate() {
        for j in 0..n_j {
            let base = (i * n_j + j) * n_k;
            let dot: f32 = (0..n_k).map(|k| xs[base + k] * vs[k]).sum();
            expected.push(dot + bias_i);
        }
    }
    assert_eq!(out.to_vec::<f32>(), expected);
}

#[test]
fn a_range_inside_a_vmap_evaluates_to_its_current_value() {
    let x = t(vec![10i64, 20, 30], &[3]);
    let r = loop_range(3, 0);
    let elem = x.vmapin(std::slice::from_ref(&r));
    let plus_i = alu(Op::Add, &[&elem, &r.cast(DType::I64)]);
    assert_eq!(
        evaluate(&plus_i.vmapout(&[r])).to_vec::<i64>(),
        vec![10, 21, 32]
    );
}

#[test]
fn a_value_shared_inside_and_outside_a_vmap_is_not_confused_between_range_values() {
    let x = t(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let r = loop_range(2, 0);
    let row = x.vmapin(&[r.clone(), UOp::index(0)]);
    let outside = x.reduce(ReduceOp::Add, &[0, 1]).reshape(&[]);
    let y = alu(Op::Add, &[&row, &outside]);
    let batched = y.vmapout(&[r, UOp::index(0)]);
    let out = evaluate_many(&[batched, outside]);
    assert_eq!(out[0].to_vec::<f32>(), vec![11.0, 12.0, 13.0, 14.0]);
    assert_eq!(out[1].to_vec::<f32>(), vec![10.0]);
}

#[test]
fn an_empty_batch_gives_an_empty_result() {
    let x = t(Vec::<f32>::new(), &[0, 2]);
    let r = loop_range(0, 0);
    let row = x.vmapin(&[r.clone(), UOp::index(0)]);
    let out = evaluate(&alu(Op::Neg, &[&row]).vmapout(&[r, UOp::index(0)]));
    assert_eq!(out.shape, vec![0, 2]);
}

#[test]
#[should_panic(expected = "is not bound")]
fn vmapin_outside_a_vmapout_panics() {
    let x = t(vec![1.0f32, 2.0], &[2]);
    evaluate(&x.vmapin(&[loop_range(2, 0)]));
}

// ---- host arrays ----

#[test]
fn host_arrays_convert_and_check_their_kind() {
    let a = HostArray::from_vec(vec![1i32, -2], &[2]);
    assert_eq!(a.to_vec::<i64>(), vec![1, -2]);
    assert_eq!(a.to_f64_vec(), vec![1.0, -2.0]);
    assert_eq!(
        HostArray::scalar(3.5, DType::F32).item(),
        Scalar::Float(3.5)
    );
    assert_eq!(HostArray::scalar(300, DType::U8).item(), Scalar::Int(44));
}

#[test]
#[should_panic(expected = "cannot read a i32 array as f32")]
fn reading_ints_as_floats_panics() {
    HostArray::from_vec(vec![1i32], &[1]).to_vec::<f32>();
}

#[test]
fn host_arrays_compare_within_a_tolerance() {
    let a = HostArray::from_vec(vec![1.0f32, f32::NAN, f32::INFINITY], &[3]);
    let b = HostArray::from_vec(vec![1.0001f32, f32::NAN, f32::INFINITY], &[3]);
    assert!(a.allclose(&b, 1e-3, 0.0));
    assert!(!a.allclose(&b, 1e-6, 0.0));
    a.assert_close(&b, 1e-3, 0.0);
    let other_shape = HostArray::from_vec(vec![1.0f32, f32::NAN, f32::INFINITY], &[3, 1]);
    assert!(!a.allclose(&other_shape, 1.0, 1.0));
}

#[test]
#[should_panic(expected = "element [1, 0] is 5 but 4 was expected")]
fn assert_close_names_the_first_differing_element() {
    let a = HostArray::from_vec(vec![1i32, 2, 5, 4], &[2, 2]);
    let b = HostArray::from_vec(vec![1i32, 2, 4, 4], &[2, 2]);
    a.assert_close(&b, 0.0, 0.0);
}

// ---- ordering, sharing, depth ----

#[test]
fn every_value_dtype_survives_a_round_trip_and_an_add() {
    for dtype in DType::ALL_VALUE_TYPES {
        let values: Vec<Scalar> = [0i64, 1, 3].iter().map(|&v| Scalar::Int(v)).collect();
        let x = Tensor::from_scalars(&values, dtype, &[3]).uop();
        let read = evaluate(&x);
        assert_eq!(read.dtype, dtype);
        let doubled = evaluate(&alu(Op::Add, &[&x, &x])).to_f64_vec();
        if dtype == DType::Bool {
            assert_eq!(read.to_vec::<bool>(), vec![false, true, true]);
            assert_eq!(doubled, vec![0.0, 1.0, 1.0], "bool addition is or");
        } else {
            assert_eq!(read.to_f64_vec(), vec![0.0, 1.0, 3.0], "{dtype}");
            assert_eq!(doubled, vec![0.0, 2.0, 6.0], "{dtype}");
        }
    }
}

#[test]
fn shared_subgraphs_are_evaluated_once() {
    // Each level uses the previous one twice: without memoization this is 2^64 evaluations.
    let mut x = t(vec![1i64], &[1]);
    for _ in 0..64 {
        x = alu(Op::Add, &[&x, &x]);
    }
    assert_eq!(evaluate(&x).to_vec::<i64>(), vec![0]);
    let mut y = t(vec![1i64], &[1]);
    for _ in 0..62 {
        y = alu(Op::Add, &[&y, &y]);
    }
    assert_eq!(evaluate(&y).to_vec::<i64>(), vec![1 << 62]);
}

#[test]
fn long_chains_do_not_overflow_the_stack() {
    let mut x = t(vec![0i32], &[1]);
    let one = UOp::constant(1, DType::I32);
    for _ in 0..50_000 {
        x = alu(Op::Add, &[&x, &one]);
    }
    assert_eq!(evaluate(&x).to_vec::<i32>(), vec![50_000]);
}

#[test]
fn gemm_as_reshape_multiply_and_sum_matches_a_triple_loop() {
    let (m, k, n) = (3, 4, 2);
    let a: Vec<f64> = (0..m * k).map(|v| v as f64 * 0.25 - 1.0).collect();
    let b: Vec<f64> = (0..k * n).map(|v| 2.0 - v as f64 * 0.5).collect();
    let lhs = t(a.clone(), &[m, k]).reshape(&[m, k, 1]).expand(&[m, k, n]);
    let rhs = t(b.clone(), &[k, n]).reshape(&[1, k, n]).expand(&[m, k, n]);
    let product = alu(Op::Mul, &[&lhs, &rhs])
        .reduce(ReduceOp::Add, &[1])
        .reshape(&[m, n]);
    let mut expected = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                expected[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    assert_eq!(evaluate(&product).to_vec::<f64>(), expected);
}

#[test]
fn a_function_called_inside_a_vmap_sees_each_slice() {
    let p = UOp::param(0, &[2], DType::F32, None);
    let body = UOp::tuple(vec![p.reduce(ReduceOp::Max, &[0]).reshape(&[])]);
    let x = t(vec![1.0f32, 5.0, -2.0, -3.0, 4.0, 0.0], &[3, 2]);
    let r = loop_range(3, 0);
    let row = x.vmapin(&[r.clone(), UOp::index(0)]);
    let row_max = UOp::function(body.clone(), vec![row]).get_tuple(0);
    let out = row_max.vmapout(std::slice::from_ref(&r));
    assert_eq!(f32s(&out), vec![5.0, -2.0, 4.0]);
    // The same body vmapped inside a function: Vmapout(Function(...)) as a function body.
    let q = UOp::param(0, &[3, 2], DType::F32, None);
    let q_row = q.vmapin(&[r.clone(), UOp::index(0)]);
    let inner = UOp::function(body, vec![q_row]).get_tuple(0).vmapout(&[r]);
    let outer = UOp::function(UOp::tuple(vec![inner]), vec![x]).get_tuple(0);
    assert_eq!(f32s(&outer), vec![5.0, -2.0, 4.0]);
}

#[test]
#[should_panic(expected = "Param(0) is f32 Some([2]) but was given i32 [2]")]
fn a_param_of_the_wrong_type_panics() {
    let p = UOp::param(0, &[2], DType::F32, None);
    evaluate_with_params(&p, &[HostArray::from_vec(vec![1i32, 2], &[2])]);
}
