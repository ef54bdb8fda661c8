//! The movement, creation, indexing and linear-algebra helpers a PyTorch/NumPy port reaches for
//! (issue 43): `squeeze_all`/`squeeze_axes`, `roll`/`roll_flat`, PyTorch's `unfold`,
//! `unflatten`, `meshgrid`, `diag`, `eye_nmk`, `empty`, `outer`, `cross`, `trace`/`trace_with`,
//! `einsum` with `...`, and `None`/`...` in `index`. Expected values were computed with NumPy
//! 2.x (the call is named above each) and written here; floats agree within 1e-6 relative
//! plus 1e-9 absolute, integers exactly. Values run compiled on the CPU; gradients are checked
//! against central differences (interpreted, f64) and vmap against a loop over the samples by
//! each `VmapMethod`.

mod common;

use common::panic_message;
use std::cell::Cell;
use std::sync::Once;
use tensor::core::Index;
use tensor::core::interp::evaluate;
use tensor::core::tensor::Indexing;
use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::prelude::*;

#[track_caller]
fn close(t: &Tensor, shape: &[usize], expected: &[f64]) {
    assert_eq!(t.shape(), shape, "shape");
    let got = common::values(t);
    assert_eq!(got.len(), expected.len(), "element count");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        assert!(
            (g - e).abs() <= 1e-6 * e.abs() + 1e-9,
            "element {i}: got {g}, NumPy gives {e} (all: {got:?})"
        );
    }
}

/// `[0, 1, ..., n)` times `scale` plus `shift`, in f32, shaped.
fn grid(shape: &[usize], scale: f32, shift: f32) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| i as f32 * scale + shift).collect(), shape)
}

#[test]
fn squeeze_all_and_squeeze_axes_follow_numpy() {
    let x = Tensor::zeros(&[1, 3, 1, 2, 1], DType::F32);
    assert_eq!(x.squeeze_all().shape(), vec![3, 2]); // np.squeeze(x)
    assert_eq!(x.squeeze_axes(&[0, -1]).shape(), vec![3, 1, 2]); // np.squeeze(x, (0, -1))
    assert_eq!(x.squeeze_axes(&[]).shape(), vec![1, 3, 1, 2, 1]);
    let v = grid(&[1, 3], 1.0, 0.0);
    close(&v.squeeze_all(), &[3], &[0.0, 1.0, 2.0]);
    assert_eq!(
        Tensor::zeros(&[1, 1], DType::F32).squeeze_all().shape(),
        Vec::<usize>::new()
    );
}

#[test]
fn roll_follows_numpy_for_negative_large_and_flat_shifts() {
    let x = grid(&[3, 4], 0.5, -1.0); // np.arange(12).reshape(3, 4) * 0.5 - 1
    // np.roll(x, (1, -5), axis=(0, 1))
    let want = [3.5, 4.0, 4.5, 3.0, -0.5, 0.0, 0.5, -1.0, 1.5, 2.0, 2.5, 1.0];
    close(&x.roll(&[1, -5], &[0, 1]), &[3, 4], &want);
    // np.roll(x, 7, axis=1)
    let want = [-0.5, 0.0, 0.5, -1.0, 1.5, 2.0, 2.5, 1.0, 3.5, 4.0, 4.5, 3.0];
    close(&x.roll(&[7], &[1]), &[3, 4], &want);
    // np.roll(x, 5)
    let want = [2.5, 3.0, 3.5, 4.0, 4.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0];
    close(&x.roll_flat(5), &[3, 4], &want);
    // np.roll(x, 2, axis=(0, 1))
    let want = [2.0, 2.5, 1.0, 1.5, 4.0, 4.5, 3.0, 3.5, 0.0, 0.5, -1.0, -0.5];
    close(&x.roll(&[2], &[0, 1]), &[3, 4], &want);
    close(&x.roll(&[3, -8], &[0, 1]), &[3, 4], &common::values(&x));
}

#[test]
fn unfold_follows_torch_on_any_axis() {
    let y = grid(&[3, 5], 1.0, 0.0);
    // torch.arange(15.).reshape(3, 5).unfold(1, 2, 2) == sliding_window_view(y, 2, axis=1)[:, ::2]
    let want = [
        0.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0, 10.0, 11.0, 12.0, 13.0,
    ];
    close(&y.unfold(1, 2, 2), &[3, 2, 2], &want);
    // y.T.unfold(0, 2, 2) == sliding_window_view(y.T, 2, axis=0)[::2]
    let want = [
        0.0, 1.0, 5.0, 6.0, 10.0, 11.0, 2.0, 3.0, 7.0, 8.0, 12.0, 13.0,
    ];
    close(&y.transpose(0, 1).unfold(0, 2, 2), &[2, 3, 2], &want);
    assert_eq!(y.unfold(-1, 5, 1).shape(), vec![3, 1, 5]);
    assert_eq!(y.unfold(0, 1, 3).shape(), vec![1, 5, 1]);
}

#[test]
fn unflatten_splits_one_axis_with_one_inferred_size() {
    let x = grid(&[2, 12], 1.0, 0.0);
    let u = x.unflatten(1, &[3, -1]);
    assert_eq!(u.shape(), vec![2, 3, 4]);
    close(&u, &[2, 3, 4], &common::values(&x));
    assert_eq!(x.unflatten(-2, &[1, 2, 1]).shape(), vec![1, 2, 1, 12]);
}

#[test]
fn meshgrid_follows_numpy_in_both_indexings() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    let b = Tensor::from_vec(vec![10.0f32, 20.0], &[2]);
    let c = Tensor::from_vec(vec![5.0f32, 6.0, 7.0, 8.0], &[4]);
    // np.meshgrid(a, b, c, indexing="xy")
    let g = Tensor::meshgrid(&[&a, &b, &c], Indexing::Xy);
    let rep = |v: &[f64], each: usize, times: usize| -> Vec<f64> {
        (0..times)
            .flat_map(|_| v.iter().flat_map(move |&x| std::iter::repeat_n(x, each)))
            .collect()
    };
    close(&g[0], &[2, 3, 4], &rep(&[1.0, 2.0, 3.0], 4, 2));
    close(&g[1], &[2, 3, 4], &rep(&[10.0, 20.0], 12, 1));
    close(&g[2], &[2, 3, 4], &rep(&[5.0, 6.0, 7.0, 8.0], 1, 6));
    // np.meshgrid(a, b, c, indexing="ij")
    let g = Tensor::meshgrid(&[&a, &b, &c], Indexing::Ij);
    close(&g[0], &[3, 2, 4], &rep(&[1.0, 2.0, 3.0], 8, 1));
    close(&g[1], &[3, 2, 4], &rep(&[10.0, 20.0], 4, 3));
    close(&g[2], &[3, 2, 4], &rep(&[5.0, 6.0, 7.0, 8.0], 1, 6));
}

#[test]
fn diag_eye_and_empty_follow_numpy() {
    let v = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3]);
    // np.diag(v, 1)
    let want = [
        0., 1., 0., 0., 0., 0., -2., 0., 0., 0., 0., 3., 0., 0., 0., 0.,
    ];
    close(&v.diag(1), &[4, 4], &want);
    // np.diag(v, -2)
    let mut want = [0.0; 25];
    (want[10], want[16], want[22]) = (1.0, -2.0, 3.0);
    close(&v.diag(-2), &[5, 5], &want);
    let m = grid(&[3, 4], 1.0, 0.0); // np.arange(12.).reshape(3, 4)
    close(&m.diag(1), &[3], &[1.0, 6.0, 11.0]); // np.diag(m, 1)
    close(&m.diag(-1), &[2], &[4.0, 9.0]); // np.diag(m, -1)
    assert_eq!(m.diag(5).shape(), vec![0]); // np.diag(m, 5)
    // np.eye(3, 4, k=1)
    let want = [0., 1., 0., 0., 0., 0., 1., 0., 0., 0., 0., 1.];
    close(&Tensor::eye_nmk(3, 4, 1, DType::F32), &[3, 4], &want);
    // np.eye(4, 2, k=-1)
    let want = [0., 0., 1., 0., 0., 1., 0., 0.];
    close(&Tensor::eye_nmk(4, 2, -1, DType::I32), &[4, 2], &want);
    let e = Tensor::empty(&[2, 3], DType::F64);
    assert_eq!((e.shape(), e.dtype()), (vec![2, 3], DType::F64));
}

#[test]
fn outer_cross_and_trace_follow_numpy() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let b = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]);
    // np.outer(a, b) (a flattened)
    let want = [0.5, -1., 2., 1., -2., 4., 1.5, -3., 6., 2., -4., 8.];
    close(&a.outer(&b), &[4, 3], &want);
    // np.cross(A, B) with B broadcast over the rows of A
    let big_a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0], &[2, 3]);
    let big_b = Tensor::from_vec(vec![0.5f32, -2.0, 1.5], &[3]);
    close(
        &big_a.cross(&big_b, -1),
        &[2, 3],
        &[9.0, 0.0, -3.0, 8.75, 3.5, 1.75],
    );
    // np.cross(np.arange(6.).reshape(3, 2) - 2, [[1], [2], [-1]], axis=0)
    let a0 = grid(&[3, 2], 1.0, -2.0);
    let b0 = Tensor::from_vec(vec![1.0f32, 2.0, -1.0], &[3, 1]);
    close(
        &a0.cross(&b0, 0),
        &[3, 2],
        &[-4.0, -7.0, 0.0, 2.0, -4.0, -3.0],
    );
    let m = grid(&[3, 4], 1.0, 0.0);
    close(&m.trace(), &[], &[15.0]); // np.trace(m)
    let t = grid(&[3, 2, 4], 1.0, 0.0); // np.arange(24.).reshape(3, 2, 4)
    close(&t.trace_with(1, 0, 2), &[2], &[30.0, 42.0]); // np.trace(t, 1, 0, 2)
    close(&t.trace_with(-1, 2, 0), &[2], &[30.0, 42.0]); // np.trace(t, -1, 2, 0)
}

#[test]
fn einsum_broadcasts_ellipsis_axes_as_numpy() {
    let ea = grid(&[2, 1, 2, 3], 0.25, 0.0);
    let eb = grid(&[4, 3, 2], 1.0, -5.0);
    // np.einsum("...ij,...jk->...ik", ea, eb): batch axes (2, 1) and (4,) broadcast to (2, 4)
    let want = [
        -1.25, -0.5, -8.0, -5.0, 3.25, 4.0, 10.0, 13.0, 7.75, 8.5, 28.0, 31.0, 12.25, 13.0, 46.0,
        49.0, -14.75, -9.5, -21.5, -14.0, 16.75, 22.0, 23.5, 31.0, 48.25, 53.5, 68.5, 76.0, 79.75,
        85.0, 113.5, 121.0,
    ];
    close(
        &Tensor::einsum("...ij,...jk->...ik", &[&ea, &eb]),
        &[2, 4, 2, 2],
        &want,
    );
    let s = grid(&[2, 3, 3], 1.0, 0.0);
    close(&Tensor::einsum("...ii->...", &[&s]), &[2], &[12.0, 39.0]);
    // np.einsum("ji...", np.arange(24.).reshape(2, 3, 4)): implicit output "...ij"
    let x = grid(&[2, 3, 4], 1.0, 0.0);
    let want: Vec<f64> = (0..4)
        .flat_map(|k| (0..3).flat_map(move |i| (0..2).map(move |j| (j * 12 + i * 4 + k) as f64)))
        .collect();
    close(&Tensor::einsum("ji...", &[&x]), &[4, 3, 2], &want);
    // np.einsum("i...->...", np.arange(6.).reshape(2, 3))
    close(
        &Tensor::einsum("i...->...", &[&grid(&[2, 3], 1.0, 0.0)]),
        &[3],
        &[3.0, 5.0, 7.0],
    );
    // np.einsum("a...b,b->...a", x, [1, -1, 2, .5])
    let w = Tensor::from_vec(vec![1.0f32, -1.0, 2.0, 0.5], &[4]);
    let want = [4.5, 34.5, 14.5, 44.5, 24.5, 54.5];
    close(&Tensor::einsum("a...b,b->...a", &[&x, &w]), &[3, 2], &want);
}

#[test]
fn index_takes_none_and_ellipsis_in_numpys_order() {
    let x = Tensor::arange(24).reshape(&[2, 3, 4]); // np.arange(24).reshape(2, 3, 4)
    let ix = |v: Vec<i64>| Index::Array(Tensor::from_vec(v, &[2]));
    let f = |from: usize, step: usize, n: usize| -> Vec<f64> {
        (0..n).map(|k| (from + k * step) as f64).collect()
    };
    // x[..., None, 1]
    let got = x.index(&[Index::Ellipsis, Index::NewAxis, Index::At(1)]);
    close(&got, &[2, 3, 1], &f(1, 4, 6));
    // x[None, :, 1:3]
    let got = x.index(&[
        Index::NewAxis,
        Index::Full,
        Index::Slice(Some(1), Some(3), 1),
    ]);
    let want = [
        4., 5., 6., 7., 8., 9., 10., 11., 16., 17., 18., 19., 20., 21., 22., 23.,
    ];
    close(&got, &[1, 2, 2, 4], &want);
    // x[[0, 1], ..., [1, 2]]
    let got = x.index(&[ix(vec![0, 1]), Index::Ellipsis, ix(vec![1, 2])]);
    close(&got, &[2, 3], &[1.0, 5.0, 9.0, 14.0, 18.0, 22.0]);
    // x[:, None, [0, 2], [1, 3]]
    let got = x.index(&[Index::Full, Index::NewAxis, ix(vec![0, 2]), ix(vec![1, 3])]);
    close(&got, &[2, 1, 2], &[1.0, 11.0, 13.0, 23.0]);
    // x[[1, 0], None, [2, 0]]: the None separates the index arrays, so their axis leads
    let got = x.index(&[ix(vec![1, 0]), Index::NewAxis, ix(vec![2, 0])]);
    close(
        &got,
        &[2, 1, 4],
        &[20.0, 21.0, 22.0, 23.0, 0.0, 1.0, 2.0, 3.0],
    );
    // x[1, ...]
    close(
        &x.index(&[Index::At(1), Index::Ellipsis]),
        &[3, 4],
        &f(12, 1, 12),
    );
    assert_eq!(x.index(&[Index::Ellipsis]).shape(), vec![2, 3, 4]);
}

thread_local! {
    static PANIC_LINE: Cell<Option<(String, u32)>> = const { Cell::new(None) };
}

/// The message of the panic `f` raises and the file and line it names (the caller's line for
/// an op with `#[track_caller]`).
fn panic_site<R>(f: impl FnOnce() -> R) -> (String, String, u32) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(l) = info.location() {
                PANIC_LINE.with(|p| p.set(Some((l.file().to_string(), l.line()))));
            }
            previous(info);
        }));
    });
    let message = panic_message(f);
    let (file, line) = PANIC_LINE
        .with(Cell::take)
        .expect("the panic named a location");
    (message, file, line)
}

#[track_caller]
fn refused<R>(f: impl FnOnce() -> R, line: u32, parts: &[&str]) {
    let (message, file, at) = panic_site(f);
    for part in parts {
        assert!(message.contains(part), "missing {part:?} in {message:?}");
    }
    assert_eq!((file.as_str(), at), (file!(), line), "{message}");
}

#[test]
fn misuse_panics_name_the_op_the_shapes_and_the_callers_line() {
    let x = Tensor::zeros(&[1, 3, 2], DType::F32);
    let v = Tensor::zeros(&[4], DType::F32);
    let l = line!() + 1;
    let f = || x.squeeze_axes(&[0, 1]);
    refused(f, l, &["squeeze_axes:", "axis 1", "[1, 3, 2]", "size 3"]);
    let l = line!() + 1;
    let f = || x.roll(&[1, 2], &[0, 1, 2]);
    refused(f, l, &["roll:", "[1, 3, 2]"]);
    let l = line!() + 1;
    let f = || x.unfold(1, 4, 1);
    refused(f, l, &["unfold:", "size 4", "[1, 3, 2]"]);
    let l = line!() + 1;
    let f = || x.unfold(1, 2, 0);
    refused(f, l, &["unfold:", "step"]);
    let l = line!() + 1;
    let f = || x.unflatten(1, &[2, -1]);
    refused(f, l, &["unflatten:", "[1, 3, 2]", "[2, -1]"]);
    let l = line!() + 1;
    let f = || Tensor::meshgrid(&[&v, &x], Indexing::Ij);
    refused(f, l, &["meshgrid:", "[1, 3, 2]"]);
    let l = line!() + 1;
    let f = || x.diag(0);
    refused(f, l, &["diag:", "[1, 3, 2]"]);
    let l = line!() + 1;
    let f = || v.cross(&v, 0);
    refused(f, l, &["cross:", "[4]", "size 3"]);
    let l = line!() + 1;
    let f = || x.trace();
    refused(f, l, &["trace:", "[1, 3, 2]"]);
    let l = line!() + 1;
    let f = || Tensor::einsum("...ij->ij", &[&x]);
    refused(f, l, &["einsum:", "`...`"]);
    let l = line!() + 1;
    let f = || Tensor::einsum("ijk...l->l", &[&x]);
    refused(f, l, &["einsum:", "4 subscripts and `...`", "[1, 3, 2]"]);
    let a = Tensor::zeros(&[2, 2, 2], DType::F32);
    let b = Tensor::zeros(&[3, 2, 2], DType::F32);
    let l = line!() + 1;
    let f = || Tensor::einsum("...ij,...jk->...ik", &[&a, &b]);
    refused(f, l, &["einsum:", "broadcast", "[2, 2, 2]", "[3, 2, 2]"]);
    let l = line!() + 1;
    let f = || x.index(&[Index::Ellipsis, Index::Ellipsis]);
    refused(f, l, &["index:", "`...`", "[1, 3, 2]"]);
}

/// Fails unless the gradient of `sum(f(x) * w)` (`w` fixed, not all ones) matches central
/// differences at `values` (f64, shape `shape`).
#[track_caller]
fn grad_matches_differences(
    what: &str,
    f: impl Fn(&Tensor) -> Tensor + Clone + Send + Sync + 'static,
    values: &[f64],
    shape: &[usize],
) {
    let out_shape = f(&Tensor::from_vec(values.to_vec(), shape)).shape();
    let n_out: usize = out_shape.iter().product();
    let w = Tensor::from_vec(
        (0..n_out).map(|i| 0.5 + (i * 7 % 5) as f64 * 0.3).collect(),
        &out_shape,
    );
    let (fw, ww) = (f.clone(), w.clone());
    let loss = move |x: &Tensor| (fw(x) * &ww).sum(None, false);
    let x = Tensor::from_vec(values.to_vec(), shape);
    let g = grad(loss.clone(), 0)
        .call(std::slice::from_ref(&x))
        .remove(0);
    let g = g.to_vec::<f64>().unwrap();
    let at = |v: Vec<f64>| evaluate(&loss(&Tensor::from_vec(v, shape)).uop()).to_f64_vec()[0];
    for (i, gi) in g.iter().enumerate() {
        let h = 1e-6;
        let (mut up, mut down) = (values.to_vec(), values.to_vec());
        up[i] += h;
        down[i] -= h;
        let fd = (at(up) - at(down)) / (2.0 * h);
        assert!(
            (gi - fd).abs() < 1e-6,
            "{what} element {i}: grad {gi}, differences {fd}"
        );
    }
}

fn ramp64(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 37 % 11) as f64 - 5.0) * 0.37)
        .collect()
}

#[test]
fn gradients_match_finite_differences() {
    let v12 = ramp64(12);
    grad_matches_differences("roll", |x| x.roll(&[1, -3], &[0, 1]), &v12, &[3, 4]);
    grad_matches_differences("roll_flat", |x| x.roll_flat(5), &v12, &[3, 4]);
    grad_matches_differences("unfold", |x| x.unfold(1, 2, 1), &v12, &[3, 4]);
    grad_matches_differences(
        "unfold step",
        |x| x.unfold(0, 2, 1).unfold(1, 3, 1),
        &v12,
        &[3, 4],
    );
    grad_matches_differences("diag of a vector", |x| x.diag(-1), &v12[..3], &[3]);
    grad_matches_differences("diag of a matrix", |x| x.diag(1), &v12, &[3, 4]);
    let b = Tensor::from_vec(vec![0.5, -2.0, 1.5], &[3]);
    grad_matches_differences("cross", move |x| x.cross(&b, -1), &v12[..6], &[2, 3]);
    grad_matches_differences("trace", |x| x.trace(), &v12[..9], &[3, 3]);
    grad_matches_differences("trace_with", |x| x.trace_with(-1, 2, 0), &v12, &[2, 3, 2]);
    let w = Tensor::from_vec(ramp64(6), &[3, 2]);
    grad_matches_differences(
        "einsum ...",
        move |x| Tensor::einsum("...ij,jk->...ik", &[x, &w]),
        &v12,
        &[2, 2, 3],
    );
    grad_matches_differences(
        "einsum ...ii",
        |x| Tensor::einsum("...ii->...", &[x]),
        &v12[..8],
        &[2, 2, 2],
    );
}

/// Fails unless `f` mapped over axis 0 of `xs` by every `VmapMethod` equals `f` on each sample
/// stacked.
#[track_caller]
fn vmap_matches_loop(
    what: &str,
    f: impl Fn(&Tensor) -> Tensor + Clone + Send + Sync + 'static,
    xs: &Tensor,
) {
    let n = xs.shape()[0] as isize;
    let looped: Vec<Tensor> = (0..n)
        .map(|i| f(&xs.slice(0, i, i + 1).squeeze(0)))
        .collect();
    let want = common::values(&Tensor::stack(&looped, 0));
    for method in [
        VmapMethod::Rewrite,
        VmapMethod::Range,
        VmapMethod::PadReduce,
    ] {
        let got = vmap_with(f.clone(), 0, 0, method).call1(std::slice::from_ref(xs));
        assert_eq!(common::values(&got), want, "{what} by {method:?}");
    }
}

#[test]
fn vmap_matches_a_loop_by_every_method() {
    let xs = grid(&[3, 2, 4], 0.5, -2.0);
    vmap_matches_loop("roll", |x| x.roll(&[1, -5], &[0, 1]), &xs);
    vmap_matches_loop("roll_flat", |x| x.roll_flat(3), &xs);
    vmap_matches_loop("unfold", |x| x.unfold(1, 3, 1), &xs);
    vmap_matches_loop("diag of a matrix", |x| x.diag(1), &xs);
    vmap_matches_loop("diag of a vector", |x| x.diag(-1), &grid(&[2, 3], 1.0, 1.0));
    let b = Tensor::from_vec(vec![0.5f32, -2.0, 1.5], &[3]);
    vmap_matches_loop(
        "cross",
        move |x| x.cross(&b, -1),
        &grid(&[4, 2, 3], 0.5, -1.0),
    );
}
