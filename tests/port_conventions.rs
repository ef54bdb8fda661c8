//! One convention per family (issue #43), as a user porting torch, NumPy or JAX code writes
//! it: torch's `split`/`chunk` under torch's names and NumPy's `array_split`/`split_at` under
//! NumPy's; every index an op returns is `i64`; `softplus` with torch's beta and threshold;
//! `scatter` and `at[..]` with a scalar value; `dynamic_slice`/`dynamic_update_slice` with
//! plain integer starts; an optional axis list passed to a reduction as it is; and one padding
//! entry point with NumPy's modes. Every expected value was computed with torch's or NumPy's
//! documented definition (NumPy 2.4 for the numbers) and written here; floats agree within
//! 1e-5 relative plus 1e-6 absolute, integers exactly. Everything runs compiled on the CPU.

use tensor::Axes;
use tensor::core::PadMode;
use tensor::nn::{self, Pool};
use tensor::prelude::*;

#[track_caller]
fn close(t: &Tensor, shape: &[usize], expected: &[f64]) {
    assert_eq!(t.shape(), shape, "shape");
    let got: Vec<f64> = match t.dtype() {
        DType::F64 => t.to_vec::<f64>().unwrap(),
        _ => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&v| v as f64)
            .collect(),
    };
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            (g - e).abs() <= 1e-5 * e.abs() + 1e-6,
            "element {i}: got {g}, the reference gives {e} (all: {got:?})"
        );
    }
}

/// `t`'s integers, which must be `i64` (torch's index dtype), with its shape.
#[track_caller]
fn indices(t: &Tensor, shape: &[usize], expected: &[i64]) {
    assert_eq!(t.dtype(), DType::I64, "an index result is i64");
    assert_eq!(t.shape(), shape, "shape");
    assert_eq!(t.to_vec::<i64>().unwrap(), expected);
}

#[track_caller]
fn ints(t: &Tensor, shape: &[usize], expected: &[i32]) {
    assert_eq!(t.shape(), shape, "shape");
    assert_eq!(t.to_vec::<i32>().unwrap(), expected);
}

fn sizes(pieces: &[Tensor], axis: usize) -> Vec<usize> {
    pieces.iter().map(|p| p.shape()[axis]).collect()
}

#[test]
fn split_and_chunk_cut_as_torch_does() {
    let x = Tensor::arange(10);
    // torch.split(x, 3): pieces of 3, the last one shorter.
    let parts = x.split(3, 0);
    assert_eq!(sizes(&parts, 0), vec![3, 3, 3, 1]);
    ints(&parts[3], &[1], &[9]);
    // torch.split(x, [2, 5, 3]): one piece per size.
    let parts = x.split([2, 5, 3], 0);
    ints(&parts[1], &[5], &[2, 3, 4, 5, 6]);
    ints(&parts[2], &[3], &[7, 8, 9]);
    // torch.chunk: pieces of ceil(n / chunks), possibly fewer than asked for.
    assert_eq!(sizes(&x.chunk(4, 0), 0), vec![3, 3, 3, 1]);
    assert_eq!(sizes(&Tensor::arange(6).chunk(4, 0), 0), vec![2, 2, 2]);
    assert_eq!(sizes(&Tensor::arange(5).chunk(3, 0), 0), vec![2, 2, 1]);
    // On another axis: torch.arange(10).reshape(2, 5).split(2, dim=1).
    let m = x.reshape(&[2, 5]);
    let parts = m.split(2, 1);
    assert_eq!(sizes(&parts, 1), vec![2, 2, 1]);
    ints(&parts[2], &[2, 1], &[4, 9]);
    let parts = m.chunk(2, -1);
    ints(&parts[1], &[2, 2], &[3, 4, 8, 9]);
}

#[test]
fn numpys_sections_are_array_split_and_split_at() {
    let x = Tensor::arange(10);
    // np.array_split(x, 4): exactly 4 pieces, sizes differing by at most one.
    let parts = x.array_split(4, 0);
    assert_eq!(sizes(&parts, 0), vec![3, 3, 2, 2]);
    ints(&parts[3], &[2], &[8, 9]);
    // np.split(x, 5) (equal sections) is array_split when they divide.
    ints(&x.array_split(5, 0)[4], &[2], &[8, 9]);
    // np.split(x, [3, 7]).
    let parts = x.split_at(&[3, 7], 0);
    ints(&parts[1], &[4], &[3, 4, 5, 6]);
    // The same call under the two names differs, as it does between the two libraries.
    assert_ne!(sizes(&x.chunk(4, 0), 0), sizes(&x.array_split(4, 0), 0));
}

#[test]
fn split_refuses_sizes_that_do_not_cover_the_axis_as_torch_raises() {
    let message = std::panic::catch_unwind(|| Tensor::arange(10).split([3, 3], 0))
        .err()
        .and_then(|p| p.downcast_ref::<String>().cloned())
        .expect("split panics");
    assert!(message.starts_with("split: sizes [3, 3]"), "{message}");
}

#[test]
fn every_index_an_op_returns_is_i64() {
    let x = Tensor::from_vec(vec![3.0f32, 9.0, 2.0, 7.0, 1.0, 8.0], &[2, 3]);
    indices(&x.argmax(1, false), &[2], &[1, 2]);
    indices(&x.argmin(1, false), &[2], &[2, 1]);
    indices(&x.argmax(None, false), &[], &[1]);
    indices(&x.argmax_all(), &[], &[1]);
    indices(&x.sort(1, false).1, &[2, 3], &[2, 0, 1, 1, 0, 2]);
    indices(&x.argsort(1, true), &[2, 3], &[1, 0, 2, 2, 0, 1]);
    let (top, at) = x.topk(2, 1, true);
    close(&top, &[2, 2], &[9.0, 3.0, 8.0, 7.0]);
    indices(&at, &[2, 2], &[1, 0, 2, 0]);
    indices(&x.kthvalue(1, 1).1, &[2], &[2, 1]);
    indices(&x.cummax(1).1, &[2, 3], &[0, 1, 1, 0, 0, 2]);
    indices(&x.cummin(1).1, &[2, 3], &[0, 0, 2, 0, 1, 1]);
    indices(&x.gt(5.0).argwhere(3, -1), &[3, 2], &[0, 1, 1, 0, 1, 2]);
    indices(&x.gt(5.0).nonzero(3, -1)[1], &[3], &[1, 0, 2]);
    let (_, at) = nn::max_pool_with_indices(&x.unsqueeze(0), 2, &Pool::new([2, 3]));
    indices(&at, &[1, 1, 1], &[1]);
}

#[test]
fn softplus_has_torchs_beta_and_threshold() {
    let x = Tensor::from_vec(vec![-30.0f64, -1.0, 0.0, 1.0, 19.5, 20.5, 40.0], &[7]);
    // F.softplus(x): beta 1, threshold 20 (x itself where x > 20).
    close(
        &nn::softplus(&x, 1.0, 20.0),
        &[7],
        &[
            9.357622968839737e-14,
            0.31326168751822286,
            std::f64::consts::LN_2, // log(2)
            1.3132616875182228,
            19.500000003398267,
            20.5,
            40.0,
        ],
    );
    // F.softplus(x, beta=2, threshold=5): x itself where beta * x > 5.
    close(
        &nn::softplus(&x, 2.0, 5.0),
        &[7],
        &[
            4.37825538134826e-27,
            0.06346400552148625,
            0.34657359027997264,
            1.0634640055214863,
            19.5,
            20.5,
            40.0,
        ],
    );
}

#[test]
fn scatter_and_at_take_a_scalar_value() {
    let x = Tensor::zeros(&[2, 4], DType::F32);
    let index = Tensor::from_vec(vec![1i64, 3], &[2, 1]);
    // torch: x.scatter(1, index, 1.5)
    close(
        &x.scatter(1, &index, 1.5),
        &[2, 4],
        &[0.0, 1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5],
    );
    // The tensor form is unchanged: x.scatter(1, index, src).
    let src = Tensor::from_vec(vec![2.0f32, 3.0], &[2, 1]);
    close(
        &x.scatter(1, &index, &src),
        &[2, 4],
        &[0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0],
    );
    // JAX: x.at[rows].set(7.0), .add(1.0), .max(0.5)
    let rows = Tensor::from_vec(vec![1i64], &[1]);
    let ones = Tensor::ones(&[2, 2], DType::F32);
    close(&ones.at(&rows).set(7.0), &[2, 2], &[1.0, 1.0, 7.0, 7.0]);
    close(&ones.at(&rows).add(1.0), &[2, 2], &[1.0, 1.0, 2.0, 2.0]);
    close(&ones.at(&rows).max(0.5), &[2, 2], &[1.0, 1.0, 1.0, 1.0]);
    close(&ones.at(&rows).mul(2.0), &[2, 2], &[1.0, 1.0, 2.0, 2.0]);
    let row = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    close(&ones.at(&rows).add(&row), &[2, 2], &[1.0, 1.0, 2.0, 3.0]);
}

#[test]
fn dynamic_slices_take_integer_starts_as_jax_does() {
    let x = Tensor::zeros(&[3, 4], DType::F32);
    let update = Tensor::ones(&[2, 2], DType::F32);
    let expected = [0., 0., 0., 0., 0., 0., 1., 1., 0., 0., 1., 1.];
    // lax.dynamic_update_slice(x, update, (2, 3)): starts clamped to (1, 2).
    close(&x.dynamic_update_slice(&update, [2, 3]), &[3, 4], &expected);
    let starts: Vec<usize> = vec![1, 2];
    close(
        &x.dynamic_update_slice(&update, &starts),
        &[3, 4],
        &expected,
    );
    // The tensor form, and 0-d tensors one per axis, give the same.
    let as_tensor = Tensor::from_vec(vec![1i64, 2], &[2]);
    close(
        &x.dynamic_update_slice(&update, &as_tensor),
        &[3, 4],
        &expected,
    );
    let scalars = [Tensor::scalar(1i32), Tensor::scalar(2i32)];
    close(
        &x.dynamic_update_slice(&update, &scalars),
        &[3, 4],
        &expected,
    );
    // lax.dynamic_slice(arange(12).reshape(3, 4), (-1, 1), (1, 2)): row 2, columns 1..3.
    let m = Tensor::arange(12).reshape(&[3, 4]);
    ints(&m.dynamic_slice([-1, 1], &[1, 2]), &[1, 2], &[9, 10]);
}

#[test]
fn an_optional_axis_list_goes_to_a_reduction_as_it_is() {
    let y = Tensor::arange((0, 24, 1, DType::F32)).reshape(&[2, 3, 4]) * 0.5 - 3.0;
    // A port's `def total(y, axis=None): return np.sum(y, axis=axis)`.
    fn total(y: &Tensor, axes: Option<&[isize]>) -> Tensor {
        y.sum(Axes::from(axes), false)
    }
    close(&total(&y, None), &[], &[66.0]);
    close(&total(&y, Some(&[0, 2])), &[3], &[6.0, 22.0, 38.0]);
    let one: Option<usize> = Some(1);
    close(
        &y.mean(Axes::from(one), false).sum(1, false),
        &[2],
        &[-1.0, 23.0],
    );
    let owned: Option<Vec<i64>> = Some(vec![0, 2]);
    close(&y.sum(Axes::from(owned), false), &[3], &[6.0, 22.0, 38.0]);
    // The direct forms are unchanged: one axis, several, or None.
    close(&y.sum(None, false), &[], &[66.0]);
    close(&y.sum(1, false).sum(1, false), &[2], &[-3.0, 69.0]);
}

#[test]
fn padding_has_one_entry_point_with_numpys_modes() {
    let m = Tensor::from_vec(vec![3i32, 1, 2, 4, 6, 5], &[2, 3]);
    let pads = [(1, 1), (2, 0)];
    // np.pad(m, ((1, 1), (2, 0)), mode)
    let reflect = [5, 6, 4, 6, 5, 2, 1, 3, 1, 2, 5, 6, 4, 6, 5, 2, 1, 3, 1, 2];
    let edge = [3, 3, 3, 1, 2, 3, 3, 3, 1, 2, 4, 4, 4, 6, 5, 4, 4, 4, 6, 5];
    let wrap = [6, 5, 4, 6, 5, 1, 2, 3, 1, 2, 6, 5, 4, 6, 5, 1, 2, 3, 1, 2];
    let nine = [9, 9, 9, 9, 9, 9, 9, 3, 1, 2, 9, 9, 4, 6, 5, 9, 9, 9, 9, 9];
    ints(&m.pad_mode(&pads, PadMode::Reflect), &[4, 5], &reflect);
    ints(&m.pad_mode(&pads, PadMode::Replicate), &[4, 5], &edge);
    ints(&m.pad_mode(&pads, PadMode::Circular), &[4, 5], &wrap);
    ints(
        &m.pad_mode(&pads, PadMode::Constant(9.into())),
        &[4, 5],
        &nine,
    );
    // `pad_value` and `pad` are its constant case.
    let unsigned = [(1, 1), (2, 0)];
    ints(&m.pad_value(&unsigned, 9), &[4, 5], &nine);
    assert_eq!(
        m.pad(&unsigned).to_vec::<i32>().unwrap(),
        m.pad_mode(&pads, PadMode::Constant(0.into()))
            .to_vec::<i32>()
            .unwrap()
    );
}
