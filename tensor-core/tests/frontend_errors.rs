//! Shape and dtype errors panic while the graph is built, naming the op, the shapes, and the
//! line of the caller.

use std::cell::RefCell;
use std::panic::{self, Location};
use std::sync::Once;
use tensor_core::{DType, Tensor};

fn t(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32).contiguous()
}

#[test]
#[should_panic(
    expected = "matmul: shapes [8, 784] and [128, 784] do not align: axis 1 of the left (784) must equal axis 0 of the right (128)"
)]
fn matmul_of_misaligned_matrices_names_both_axes() {
    t(&[8, 784]).matmul(&t(&[128, 784]));
}

#[test]
#[should_panic(
    expected = "matmul: shapes [2, 3, 4] and [5] do not align: axis 2 of the left (4) must equal axis 0 of the right (5)"
)]
fn matmul_with_a_vector_reports_the_vector_axis() {
    t(&[2, 3, 4]).matmul(&t(&[5]));
}

#[test]
#[should_panic(
    expected = "matmul: batch axes [2] and [3] of shapes [2, 3, 4] and [3, 4, 5] cannot broadcast"
)]
fn matmul_batch_axes_must_broadcast() {
    t(&[2, 3, 4]).matmul(&t(&[3, 4, 5]));
}

#[test]
#[should_panic(expected = "matmul: shapes [] and [3]")]
fn matmul_rejects_scalars() {
    t(&[]).matmul(&t(&[3]));
}

#[test]
#[should_panic(expected = "add: shapes [3] and [4] cannot broadcast")]
fn adding_unbroadcastable_shapes_panics() {
    let _ = t(&[3]) + t(&[4]);
}

#[test]
#[should_panic(expected = "mul: shapes [2, 3] and [3, 2] cannot broadcast")]
fn nothing_numpy_rejects_is_broadcast() {
    let _ = &t(&[2, 3]) * &t(&[3, 2]);
}

#[test]
#[should_panic(expected = "where: shapes [2], [3] and [2] cannot broadcast")]
fn where_names_all_three_shapes() {
    t(&[2]).gt(0.0).where_(t(&[3]), t(&[2]));
}

#[test]
#[should_panic(expected = "sum: axis 2 is out of range for shape [3, 4] (valid axes are -2 to 1)")]
fn reducing_a_missing_axis_panics() {
    t(&[3, 4]).sum(2, false);
}

#[test]
#[should_panic(expected = "sum: axis -3 is out of range for shape [3, 4]")]
fn negative_axes_past_the_front_panic() {
    t(&[3, 4]).sum(-3, false);
}

#[test]
#[should_panic(expected = "max: axes [0, -2] name axis 0 twice (shape [3, 4])")]
fn repeated_axes_panic() {
    t(&[3, 4]).max([0, -2], false);
}

#[test]
#[should_panic(expected = "max: cannot reduce the empty axis 0 of shape [0, 3]")]
fn max_of_an_empty_axis_panics() {
    t(&[0, 3]).max(0, false);
}

#[test]
#[should_panic(expected = "reshape: cannot reshape [2, 3] (6 elements) to [4, 2] (8 elements)")]
fn reshape_must_keep_the_element_count() {
    t(&[2, 3]).reshape(&[4, 2]);
}

#[test]
#[should_panic(expected = "reshape: more than one -1 in [-1, -1]")]
fn reshape_infers_at_most_one_size() {
    t(&[2, 3]).reshape(&[-1, -1]);
}

#[test]
#[should_panic(expected = "reshape: cannot reshape [2, 3] (6 elements) to [4, -1]")]
fn reshape_inference_must_divide() {
    t(&[2, 3]).reshape(&[4, -1]);
}

#[test]
#[should_panic(
    expected = "expand: cannot expand shape [3, 2] to [3, 4]: axis 1 has size 2, which is neither 1 nor 4"
)]
fn expand_only_stretches_size_one_axes() {
    t(&[3, 2]).expand(&[3, 4]);
}

#[test]
#[should_panic(
    expected = "permute: order [0, 0, 1] does not name each of the 2 axes of shape [3, 2] once"
)]
fn permute_needs_every_axis_once() {
    t(&[3, 2]).permute(&[0, 0, 1]);
}

#[test]
#[should_panic(expected = "permute: axes [0, -2] name axis 0 twice (shape [3, 2])")]
fn permute_rejects_repeats() {
    t(&[3, 2]).permute(&[0, -2]);
}

#[test]
#[should_panic(expected = "squeeze: axis 0 of shape [3, 1] has size 3, not 1")]
fn squeeze_only_removes_size_one_axes() {
    t(&[3, 1]).squeeze(0);
}

#[test]
#[should_panic(expected = "shrink: bounds (1, 5) do not fit axis 0 of shape [4]")]
fn shrink_must_stay_inside() {
    t(&[4]).shrink(&[(1, 5)]);
}

#[test]
#[should_panic(expected = "narrow: 3 elements from 2 do not fit axis 0 of shape [4]")]
fn narrow_must_stay_inside() {
    t(&[4]).narrow(0, 2, 3);
}

#[test]
#[should_panic(expected = "pad: 1 (before, after) pairs given for shape [2, 2] with 2 axes")]
fn pad_needs_a_pair_per_axis() {
    t(&[2, 2]).pad(&[(1, 1)]);
}

#[test]
#[should_panic(expected = "cat: shapes [2, 3] and [3, 3] differ outside axis 1")]
fn cat_needs_matching_other_axes() {
    Tensor::cat(&[t(&[2, 3]), t(&[3, 3])], 1);
}

#[test]
#[should_panic(expected = "stack: shapes [2] and [3] differ")]
fn stack_needs_equal_shapes() {
    Tensor::stack(&[t(&[2]), t(&[3])], 0);
}

#[test]
#[should_panic(expected = "gather: index dtype f32 is not an integer type")]
fn gather_needs_integer_indices() {
    t(&[3]).gather(0, &t(&[2]));
}

#[test]
#[should_panic(
    expected = "gather: index shape [3, 2] does not fit input shape [2, 4] outside axis 1"
)]
fn gather_index_must_fit_the_other_axes() {
    t(&[2, 4]).gather(1, &Tensor::zeros(&[3, 2], DType::I32));
}

#[test]
#[should_panic(
    expected = "bitwise_and: operands f32 [2] and i32 [2] meet at f32, which is not an integer or bool type"
)]
fn bitwise_ops_reject_floats() {
    let _ = t(&[2]) & Tensor::zeros(&[2], DType::I32);
}

#[test]
#[should_panic(expected = "bitwise_not: dtype f32 is not an integer or bool type")]
fn bitwise_not_rejects_floats() {
    let _ = !t(&[2]);
}

#[test]
#[should_panic(expected = "sub: not supported for bool tensors")]
fn boolean_subtraction_panics_as_in_numpy() {
    let b = Tensor::zeros(&[2], DType::Bool);
    let _ = &b - &b;
}

#[test]
#[should_panic(
    expected = "pow: integer tensors (dtype i32) cannot be raised to the negative integer power -1"
)]
fn integer_to_negative_integer_power_panics() {
    Tensor::zeros(&[2], DType::I32).pow(-1);
}

#[test]
#[should_panic(expected = "zeros: negative size -2 in shape [3, -2]")]
fn negative_sizes_panic() {
    Tensor::zeros(&[3, -2], DType::F32);
}

#[test]
#[should_panic(expected = "from_vec: 5 values do not fill shape [2, 3] (6 elements)")]
fn data_must_fill_the_shape() {
    Tensor::from_vec(vec![1.0f32; 5], &[2, 3]);
}

thread_local! {
    /// Where the last panic on this thread happened, while a test is capturing it.
    static CAPTURED: RefCell<Option<Option<(String, u32)>>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that records the location of panics on threads that asked
/// for it and leaves every other thread's panic to the default hook, so tests running in
/// parallel keep their messages.
fn install_capturing_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let captured = CAPTURED.with(|c| {
                let mut c = c.borrow_mut();
                let capturing = c.is_some();
                if capturing {
                    *c = Some(info.location().map(|l| (l.file().to_string(), l.line())));
                }
                capturing
            });
            if !captured {
                default(info);
            }
        }));
    });
}

/// Runs `f`, which must panic, and returns the location the panic reports.
fn panic_location(f: impl FnOnce() + panic::UnwindSafe) -> (String, u32) {
    install_capturing_hook();
    CAPTURED.with(|c| *c.borrow_mut() = Some(None));
    let result = panic::catch_unwind(f);
    let location = CAPTURED.with(|c| c.borrow_mut().take()).flatten();
    assert!(result.is_err(), "expected a panic");
    location.expect("the panic reported a location")
}

#[test]
fn errors_point_at_the_callers_line() {
    let a = t(&[8, 784]);
    let b = t(&[128, 784]);
    let (file, line) = panic_location(|| drop(a.matmul(&b)));
    let expected = Location::caller();
    assert_eq!((file.as_str(), line), (expected.file(), line!() - 2));

    // Each case is one line: the panic must report that line, not one inside the library.
    macro_rules! case {
        ($e:expr) => {
            (
                Box::new(|| drop($e)) as Box<dyn FnOnce() + panic::UnwindSafe>,
                line!(),
            )
        };
    }
    let z = || Tensor::zeros(&[2], DType::F32);
    let cases = vec![
        case!(t(&[3]) + t(&[4])),
        case!(t(&[3, 4]).sum(5, false)),
        case!(t(&[3, 4]).reshape(&[5])),
        case!(t(&[3, 4]).softmax(2)),
        case!(t(&[3, 4]).logsumexp(2, true)),
        case!(t(&[3, 4]).transpose(0, 2)),
        case!(t(&[0, 4]).argmax(0, false)),
        case!(Tensor::stack(&[t(&[2]), t(&[2])], 2)),
        case!(t(&[2]).gather(0, &t(&[2]))),
        case!(2.0 - z().expand(&[3])),
        case!(t(&[2, 2]).flatten(1, 0)),
        case!(Tensor::cat(&[t(&[2]), t(&[2, 1])], 0)),
        case!(t(&[2]).one_hot(3)),
    ];
    for (f, line) in cases {
        assert_eq!(panic_location(f), (file!().to_string(), line));
    }
}
