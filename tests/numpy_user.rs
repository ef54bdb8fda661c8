//! The front end as a NumPy/JAX user writes it (issue #16): reductions with one axis, several
//! or `None` and `keepdim`, one-axis normalizers, constructors with a dtype, one `arange`,
//! scalars on either side of operators, and the NumPy ops a port reaches for. Every expected
//! value was computed with NumPy 2.4 (`np.float32` inputs) and written here; floats agree
//! within 1e-5 relative plus 1e-6 absolute, integers and bools exactly. Everything runs
//! compiled on the CPU.

use tensor::MatrixOrd;
use tensor::prelude::*;

/// The 2x3 `float32` matrix most cases start from.
fn x() -> Tensor {
    Tensor::from_vec(vec![1.5f32, -2.0, 3.25, 0.5, 4.0, -1.0], &[2, 3])
}

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
            "element {i}: got {g}, NumPy gives {e} (all: {got:?})"
        );
    }
}

#[track_caller]
fn ints(t: &Tensor, shape: &[usize], expected: &[i64]) {
    assert_eq!(t.shape(), shape, "shape");
    let got: Vec<i64> = match t.dtype() {
        DType::I64 => t.to_vec::<i64>().unwrap(),
        DType::I32 => t
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect(),
        DType::I16 => t
            .to_vec::<i16>()
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect(),
        d => panic!("unexpected dtype {d}"),
    };
    assert_eq!(got, expected);
}

#[track_caller]
fn bools(t: &Tensor, shape: &[usize], expected: &[bool]) {
    assert_eq!(t.shape(), shape, "shape");
    assert_eq!(t.to_vec::<bool>().unwrap(), expected);
}

#[test]
fn reductions_take_one_axis_several_or_none_and_keepdim() {
    let x = x();
    let y = Tensor::arange((0, 24, 1, DType::F32)).reshape(&[2, 3, 4]) * 0.5 - 3.0;
    close(&x.sum(0, false), &[3], &[2.0, 2.0, 2.25]);
    close(&x.sum(None, true), &[1, 1], &[6.25]);
    close(&y.sum([0, 2], false), &[3], &[6.0, 22.0, 38.0]);
    close(
        &x.mean(1, true),
        &[2, 1],
        &[0.9166666865348816, 1.1666666269302368],
    );
    close(&x.max(None, false), &[], &[4.0]);
    close(&x.min(0, false), &[3], &[0.5, -2.0, -1.0]);
    close(&x.prod(1, false), &[2], &[-9.75, -2.0]);
    close(
        &x.std(1, false),
        &[2],
        &[2.182633399963379, 2.0949676036834717],
    );
    close(&x.var(None, false), &[], &[4.592013835906982]);
    close(
        &x.std_with(0, 1.0, false),
        &[3],
        &[0.7071067690849304, 4.242640495300293, 3.0052037239074707],
    );
    close(
        &x.logsumexp(1, false),
        &[2],
        &[3.414684772491455, 4.036269664764404],
    );
    close(&x.logsumexp(None, false), &[], &[4.46616228193608]);
    // The shorthands stay: `sum_all()` is `sum(None, false)`.
    close(&x.sum_all(), &[], &[6.25]);
}

#[test]
fn argmax_argmin_any_all_follow_the_same_pattern() {
    let x = x();
    ints(&x.argmax(1, false), &[2], &[2, 1]);
    ints(&x.argmin(None, false), &[], &[1]);
    ints(&x.argmax(-1, true), &[2, 1], &[2, 1]);
    // Several axes: the index into the block they span (NumPy: reshape, then argmax).
    let z: Vec<i32> = (0..24).map(|i| (i * 7) % 11).collect();
    let z = Tensor::from_vec(z, &[2, 3, 4]);
    ints(&z.argmax([1, 2], false), &[2], &[3, 2]);
    ints(&z.argmax([0, 2], false), &[3], &[3, 2, 1]);
    ints(&z.argmin([0, 2], true), &[1, 3, 1], &[0, 7, 3]);
    bools(&x.gt(3.0).any(1, false), &[2], &[true, true]);
    bools(&x.gt(0.0).all(0, false), &[3], &[true, false, false]);
    bools(&x.gt(-5.0).all(None, false), &[], &[true]);
}

#[test]
fn softmax_and_log_softmax_take_one_axis() {
    let x = x();
    close(
        &x.softmax(1),
        &[2, 3],
        &[
            0.1473882794380188,
            0.004450740292668343,
            0.848160982131958,
            0.02912176214158535,
            0.9643803238868713,
            0.006497942842543125,
        ],
    );
    close(
        &x.log_softmax(0),
        &[2, 3],
        &[
            -0.31326165795326233,
            -6.002475738525391,
            -0.01416344940662384,
            -1.31326162815094,
            -0.002475651679560542,
            -4.264163494110107,
        ],
    );
}

#[test]
fn constructors_take_a_dtype_and_arange_takes_numpys_forms() {
    ints(&Tensor::arange(5), &[5], &[0, 1, 2, 3, 4]);
    ints(&Tensor::arange((2, 10, 3)), &[3], &[2, 5, 8]);
    ints(&Tensor::arange((5, 0, -2)), &[3], &[5, 3, 1]);
    let n: usize = 3;
    ints(&Tensor::arange(n), &[3], &[0, 1, 2]);
    let f = Tensor::arange((0, 1, 0.25, DType::F32));
    assert_eq!(f.dtype(), DType::F32);
    close(&f, &[4], &[0.0, 0.25, 0.5, 0.75]);
    assert_eq!(Tensor::arange((0.0f32, 1.0, 0.25)).dtype(), DType::F32);
    let f64s = Tensor::arange((0, 1, 0.25)); // np.arange(0, 1, 0.25): float64
    assert_eq!(f64s.dtype(), DType::F64);
    close(&f64s, &[4], &[0.0, 0.25, 0.5, 0.75]);
    assert_eq!(Tensor::arange((4, DType::I64)).dtype(), DType::I64);
    close(
        &Tensor::linspace(0.0, 1.0, 5, DType::F32),
        &[5],
        &[0.0, 0.25, 0.5, 0.75, 1.0],
    );
    close(
        &Tensor::linspace(-1.0, 2.0, 7, DType::F32),
        &[7],
        &[-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0],
    );
    ints(
        &Tensor::linspace(0.0, 10.0, 4, DType::I32),
        &[4],
        &[0, 3, 6, 10],
    );
    ints(
        &Tensor::eye(3, DType::I32),
        &[3, 3],
        &[1, 0, 0, 0, 1, 0, 0, 0, 1],
    );
    ints(
        &Tensor::full(&[2, 2], 7, DType::I16),
        &[2, 2],
        &[7, 7, 7, 7],
    );
    let b = Tensor::from_vec(vec![true, false], &[2]);
    bools(&b.ones_like(), &[2], &[true, true]);
    ints(&Tensor::arange(3).full_like(9), &[3], &[9, 9, 9]);
}

#[test]
fn scalars_go_on_either_side() {
    let x = x();
    close(&(2.0 - &x), &[2, 3], &[0.5, 4.0, -1.25, 1.5, -2.0, 3.0]);
    close(
        &(1.0 / x.slice(0, 0, 1).ravel()),
        &[3],
        &[0.6666666865348816, -0.5, 0.3076923191547394],
    );
    close(
        &(1.0 - &x).abs().sqrt().max(None, false),
        &[],
        &[3.0f64.sqrt()],
    );
    let i = Tensor::from_vec(vec![1i32, 2, 3], &[3]);
    ints(&(3 * &i), &[3], &[3, 6, 9]);
    let j = Tensor::from_vec(vec![10i32, 20], &[2]);
    // Typed scalars of every primitive type on the right, weakly typed (the tensor's dtype).
    ints(&(&j - 3u8), &[2], &[7, 17]);
    ints(&(&j * 2usize), &[2], &[20, 40]);
    ints(&(&j + 1i16), &[2], &[11, 21]);
    ints(&(&j / 5u64).cast(DType::I32), &[2], &[2, 4]);
    let lr = 0.5f32;
    close(&(&x * lr).sum(None, false), &[], &[3.125]);
    assert_eq!((&j * 2.5f32).dtype(), DType::F32);
}

#[test]
fn numpy_ops_a_port_reaches_for() {
    let m = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]);
    ints(
        &m.tile(&[2, 3]),
        &[4, 6],
        &[
            1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
        ],
    );
    ints(
        &Tensor::arange((1, 4)).tile(&[2]),
        &[6],
        &[1, 2, 3, 1, 2, 3],
    );
    ints(
        &m.repeat(3, 1),
        &[2, 6],
        &[1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4],
    );
    let a = Tensor::arange(10);
    let parts = a.split_at(&[3, 7], 0);
    ints(&parts[0], &[3], &[0, 1, 2]);
    ints(&parts[1], &[4], &[3, 4, 5, 6]);
    ints(&parts[2], &[3], &[7, 8, 9]);
    let sizes: Vec<usize> = a.array_split(4, 0).iter().map(|p| p.shape()[0]).collect();
    assert_eq!(sizes, vec![3, 3, 2, 2]);
    ints(&a.array_split(5, 0)[4], &[2], &[8, 9]);
    let m4 = Tensor::arange((1, 17)).reshape(&[4, 4]);
    ints(
        &m4.triu(1),
        &[4, 4],
        &[0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12, 0, 0, 0, 0],
    );
    ints(
        &m4.tril(0),
        &[4, 4],
        &[1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0, 13, 14, 15, 16],
    );
    ints(
        &Tensor::arange((1, 13)).reshape(&[3, 4]).tril(-1),
        &[3, 4],
        &[0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0],
    );
    ints(
        &Tensor::arange(6).reshape(&[2, 3]).flip(None),
        &[2, 3],
        &[5, 4, 3, 2, 1, 0],
    );
    let x = x();
    close(&x.norm(2.0, None, false), &[], &[5.83630895614624]);
    close(&x.norm(1.0, 1, false), &[2], &[6.75, 5.5]);
    close(&x.norm(f64::INFINITY, 0, false), &[3], &[1.5, 4.0, 3.25]);
    close(&x.norm(3.0, None, false), &[], &[4.8034138679504395]);
}

/// `b`: `np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5` with `b[0, 1, 2] = 7.25`.
fn b() -> Tensor {
    let mut v: Vec<f32> = (0..24).map(|i| i as f32 - 11.5).collect();
    v[6] = 7.25;
    Tensor::from_vec(v, &[2, 3, 4])
}

#[test]
fn matrix_norms_follow_np_linalg_norm_over_two_axes() {
    let inf = f64::INFINITY;
    // np.linalg.norm(x, ord) for the 2x3 matrix, then with axis=(1, 0) (rows and columns
    // swapped, so 1 and inf trade places).
    for (ord, expected, swapped) in [
        (MatrixOrd::Fro, 5.83630895614624, 5.83630895614624),
        (1.into(), 6.0, 6.75),
        ((-1).into(), 2.0, 5.5),
        (inf.into(), 6.75, 6.0),
        ((-inf).into(), 5.5, 2.0),
    ] {
        close(&x().matrix_norm(ord, [0, 1], false), &[], &[expected]);
        close(&x().matrix_norm(ord, [1, 0], false), &[], &[swapped]);
    }
    // A batch: np.linalg.norm(b, ord, axis=(2, 0)) keeps axis 1; axis=(-2, -1) with
    // keepdims=True keeps both as size 1.
    for (ord, over_2_0, kept) in [
        (
            "fro".into(),
            [20.639766693115234, 17.897275924682617, 20.639766693115234],
            [24.439977645874023, 23.979158401489258],
        ),
        (1.into(), [40.0, 25.75, 40.0], [22.5, 22.5]),
        ((-1).into(), [8.0, 24.0, 8.0], [13.5, 13.5]),
        (inf.into(), [12.0, 13.75, 12.0], [40.0, 40.0]),
        ((-inf).into(), [12.0, 12.0, 12.0], [8.0, 8.0]),
    ] {
        let ord: MatrixOrd = ord;
        close(&b().matrix_norm(ord, [2, 0], false), &[3], &over_2_0);
        close(&b().matrix_norm(ord, [-2, -1], true), &[2, 1, 1], &kept);
    }
    // Integers are measured in f32: np.linalg.norm([[1, -7], [3, 2]], 1) == 9.0.
    let i = Tensor::from_vec(vec![1, -7, 3, 2], &[2, 2]);
    close(&i.matrix_norm(1, [0, 1], false), &[], &[9.0]);
    close(&i.matrix_norm(inf, [0, 1], false), &[], &[8.0]);
}

#[test]
fn the_svd_norms_follow_np_linalg_norm() {
    // np.linalg.norm(x, ord) for ord 2, -2 and "nuc", and over axis=(1, 0) (the transpose has
    // the same singular values).
    for (ord, expected) in [
        (MatrixOrd::from(2), 5.24724006652832),
        ((-2).into(), 2.555185317993164),
        ("nuc".into(), 7.802425384521484),
    ] {
        close(&x().matrix_norm(ord, [0, 1], false), &[], &[expected]);
        close(&x().matrix_norm(ord, [1, 0], false), &[], &[expected]);
    }
    // np.linalg.norm(b, ord, axis=(2, 0)) and axis=(-2, -1) with keepdims=True (b[1] has
    // rank 2: its smallest singular value is 0).
    for (ord, over_2_0, kept) in [
        (
            MatrixOrd::from(2),
            [20.472631454467773, 14.743788719177246, 20.472631454467773],
            [21.835702896118164, 23.909019470214844],
        ),
        (
            (-2).into(),
            [2.621335506439209, 10.145600318908691, 2.621335506439209],
            [1.6095179319381714, 0.0],
        ),
        (
            "nuc".into(),
            [23.09396743774414, 24.889389038085938, 23.09396743774414],
            [34.304500579833984, 25.741708755493164],
        ),
    ] {
        close(&b().matrix_norm(ord, [2, 0], false), &[3], &over_2_0);
        close(&b().matrix_norm(ord, [-2, -1], true), &[2, 1, 1], &kept);
    }
    // np.linalg.svd(x, compute_uv=False)
    close(&x().svdvals(), &[2], &[5.24724, 2.5551853]);
}

/// `f` at `a` with element `i` moved by `h`, in f64.
fn shifted(f: &dyn Fn(&Tensor) -> Tensor, a: &[f64], shape: &[usize], i: usize, h: f64) -> f64 {
    let mut moved = a.to_vec();
    moved[i] += h;
    f(&Tensor::from_vec(moved, shape)).to_vec::<f64>().unwrap()[0]
}

#[test]
fn singular_values_have_derivatives_and_batch_under_vmap() {
    let values = vec![1.5, -2.0, 3.25, 0.5, 4.0, -1.0];
    let a = Tensor::from_vec(values.clone(), &[2, 3]);
    for ord in [MatrixOrd::from(2), (-2).into(), "nuc".into()] {
        let f = move |a: &Tensor| a.matrix_norm(ord, [0, 1], false);
        let g = grad(f, 0).call(std::slice::from_ref(&a)).remove(0);
        let g = g.to_vec::<f64>().unwrap();
        let tangent = Tensor::from_vec(vec![0.3, -0.1, 0.7, 0.2, -0.5, 0.4], &[2, 3]);
        let (_, dot) = jvp(f, std::slice::from_ref(&a), std::slice::from_ref(&tangent));
        let mut directional = 0.0;
        for (i, gi) in g.iter().enumerate() {
            let h = 1e-6;
            let fd = (shifted(&f, &values, &[2, 3], i, h) - shifted(&f, &values, &[2, 3], i, -h))
                / (2.0 * h);
            assert!(
                (gi - fd).abs() < 1e-6,
                "{ord:?} element {i}: grad {gi}, differences {fd}"
            );
            directional += gi * [0.3, -0.1, 0.7, 0.2, -0.5, 0.4][i];
        }
        let dot = dot[0].to_vec::<f64>().unwrap()[0];
        assert!(
            (dot - directional).abs() < 1e-9,
            "{ord:?}: jvp {dot} vs grad . t {directional}"
        );
    }
    let stack = b();
    let batched = vmap(|m: &Tensor| m.svdvals(), 0, 0).call(std::slice::from_ref(&stack));
    let looped: Vec<f32> = (0..2)
        .flat_map(|i| {
            stack
                .slice(0, i, i + 1)
                .reshape(&[3, 4])
                .svdvals()
                .to_vec::<f32>()
                .unwrap()
        })
        .collect();
    assert_eq!(batched[0].to_vec::<f32>().unwrap(), looped);
}

#[test]
#[should_panic(expected = "matrix_norm: axes [0, -2] name axis 0 twice (shape [2, 3])")]
fn a_matrix_norm_needs_two_distinct_axes() {
    let _ = x().matrix_norm("fro", [0, -2], false);
}

#[test]
fn einsum_two_operand_forms() {
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = Tensor::from_vec(vec![1.0f32, 0.5, -1.0, 2.0, 0.0, 3.0], &[3, 2]);
    close(
        &Tensor::einsum("ij,jk->ik", &[&a, &b]),
        &[2, 2],
        &[-1.0, 13.5, -1.0, 30.0],
    );
    close(
        &Tensor::einsum("ij,jk", &[&a, &b]),
        &[2, 2],
        &[-1.0, 13.5, -1.0, 30.0],
    );
    let c = Tensor::arange((0, 12, 1, DType::F32)).reshape(&[2, 2, 3]);
    let d = Tensor::arange((0, 12, 1, DType::F32)).reshape(&[2, 3, 2]) * 0.5;
    close(
        &Tensor::einsum("bij,bjk->bik", &[&c, &d]),
        &[2, 2, 2],
        &[5.0, 6.5, 14.0, 20.0, 86.0, 96.5, 122.0, 137.0],
    );
    let (a0, a1) = (a.slice(0, 0, 1).ravel(), a.slice(0, 1, 2).ravel());
    close(&Tensor::einsum("i,i->", &[&a0, &a1]), &[], &[32.0]);
    let b1 = b.slice(1, 1, 2).ravel();
    close(
        &Tensor::einsum("i,j->ij", &[&a0, &b1]),
        &[3, 3],
        &[0.5, 2.0, 3.0, 1.0, 4.0, 6.0, 1.5, 6.0, 9.0],
    );
    let b0 = b.slice(1, 0, 1).ravel();
    close(&Tensor::einsum("ij,j->i", &[&a, &b0]), &[2], &[-1.0, -1.0]);
    close(
        &Tensor::einsum("ij->ji", &[&a]),
        &[3, 2],
        &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
    );
    close(&Tensor::einsum("ij->i", &[&a]), &[2], &[6.0, 15.0]);
    let m4 = Tensor::arange((1, 17)).reshape(&[4, 4]);
    ints(&Tensor::einsum("ii", &[&m4]), &[], &[34]);
}

#[test]
fn mistakes_are_errors_where_a_program_may_handle_them() {
    let err = Tensor::arange(6).try_reshape(&[4, -1]).unwrap_err();
    assert_eq!(err.op, "reshape");
    assert_eq!(
        err.to_string(),
        "reshape: cannot reshape [6] (6 elements) to [4, -1]"
    );
    let err = Tensor::try_from_vec(vec![1.0f32; 5], &[2, 3]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "from_vec: 5 values do not fill shape [2, 3] (6 elements)"
    );
    assert!(x().try_expand(&[4, 3]).is_err());
    assert_eq!(x().try_expand(&[5, 2, 3]).unwrap().shape(), vec![5, 2, 3]);

    // The shape-combining ops: np.matmul, np.concatenate, np.stack, np.broadcast_to and
    // np.broadcast_shapes raise ValueError for these; here the twins return the error.
    let err = x().try_matmul(&x()).unwrap_err();
    assert_eq!(
        (err.op, err.message.as_str()),
        (
            "matmul",
            "matmul: shapes [2, 3] and [2, 3] do not align: axis 1 of the left (3) must equal axis 0 of the right (2)"
        )
    );
    let batched = Tensor::zeros(&[4, 3, 2], DType::F32);
    let err = Tensor::zeros(&[5, 2, 3], DType::F32)
        .try_matmul(&batched)
        .unwrap_err();
    assert_eq!(
        err.message,
        "matmul: batch axes [5] and [4] of shapes [5, 2, 3] and [4, 3, 2] cannot broadcast"
    );
    close(
        &x().try_matmul(&x().transpose(0, 1)).unwrap(),
        &[2, 2],
        &[16.8125, -10.5, -10.5, 17.25],
    );
    let err = Tensor::try_cat(&[x(), Tensor::zeros(&[3, 2], DType::F32)], 0).unwrap_err();
    assert_eq!(
        err.message,
        "cat: shapes [2, 3] and [3, 2] differ outside axis 0"
    );
    assert_eq!(Tensor::try_cat(&[], 0).unwrap_err().op, "cat");
    ints(
        &Tensor::try_cat(&[Tensor::arange(2), Tensor::arange((5, 8))], 0).unwrap(),
        &[5],
        &[0, 1, 5, 6, 7],
    );
    let err = Tensor::try_stack(&[x(), x()], 3).unwrap_err();
    assert_eq!(
        err.message,
        "stack: axis 3 is out of range for shape [2, 3] (valid axes are -3 to 2)"
    );
    assert_eq!(
        Tensor::try_stack(&[x(), x()], -1).unwrap().shape(),
        vec![2, 3, 2]
    );
    let err = x().try_broadcast_to(&[2, 2]).unwrap_err();
    assert_eq!(
        err.message,
        "broadcast_to: cannot broadcast shape [2, 3] to [2, 2]: axis 1 has size 3, which is neither 1 nor 2"
    );
    assert_eq!(
        Tensor::broadcast_shapes(&[&[2, 1, 3], &[4, 1], &[]]).unwrap(),
        vec![2, 4, 3]
    );
    assert!(Tensor::broadcast_shapes(&[&[2, 3], &[3, 2]]).is_err());
}

/// The panicking form of each op with a fallible twin panics with the twin's message.
#[test]
fn panics_and_errors_carry_one_message() {
    fn panic_message(f: impl FnOnce() -> Tensor + std::panic::UnwindSafe) -> String {
        let payload = std::panic::catch_unwind(f).expect_err("the op must panic");
        match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(p) => p.downcast_ref::<&str>().unwrap_or(&"?").to_string(),
        }
    }
    let y = Tensor::zeros(&[3, 2], DType::F32);
    let pairs: Vec<(String, tensor::ShapeError)> = vec![
        (
            panic_message(|| x().matmul(&x())),
            x().try_matmul(&x()).unwrap_err(),
        ),
        (
            panic_message(|| Tensor::cat(&[x(), Tensor::zeros(&[3, 2], DType::F32)], 1)),
            Tensor::try_cat(&[x(), y.clone()], 1).unwrap_err(),
        ),
        (
            panic_message(|| Tensor::stack(&[x(), Tensor::zeros(&[3, 2], DType::F32)], 0)),
            Tensor::try_stack(&[x(), y.clone()], 0).unwrap_err(),
        ),
        (
            panic_message(|| x().broadcast_to(&[3, 2])),
            x().try_broadcast_to(&[3, 2]).unwrap_err(),
        ),
        (
            panic_message(|| x().reshape(&[4])),
            x().try_reshape(&[4]).unwrap_err(),
        ),
        (
            panic_message(|| &x() + &Tensor::zeros(&[3, 2], DType::F32)),
            Tensor::broadcast_shapes(&[&[2, 3], &[3, 2]]).unwrap_err(),
        ),
    ];
    for (panicked, err) in pairs {
        let words = err.message.split_once(": ").map_or("", |(_, rest)| rest);
        assert!(
            panicked.ends_with(words),
            "panic {panicked:?} and error {err:?} disagree"
        );
    }
}

#[test]
#[should_panic(expected = "einsum: \"ij,jk->ik\": subscript 'j' is bound to sizes 3 and 2")]
fn einsum_names_a_subscript_bound_to_two_sizes() {
    let _ = Tensor::einsum("ij,jk->ik", &[&x(), &x()]);
}

#[test]
#[should_panic(
    expected = "split: sizes [3, 3] do not sum to the 10 elements of axis 0 of shape [10]"
)]
fn split_into_sizes_that_miss_elements_panics_as_torch_raises() {
    let _ = Tensor::arange(10).split([3, 3], 0);
}

#[test]
fn the_new_ops_compose_with_the_transforms_as_a_jax_user_expects() {
    // d/dA sum(A @ B) = B.sum(1) in every row; the same through einsum.
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = Tensor::from_vec(vec![1.0f32, 0.5, -1.0, 2.0, 0.0, 3.0], &[3, 2]);
    let loss = |a: &Tensor, b: &Tensor| Tensor::einsum("ij,jk->ik", &[a, b]).sum(None, false);
    let g = grad!(loss, argnums = 0)(&a, &b);
    close(&g, &[2, 3], &[1.5, 1.0, 3.0, 1.5, 1.0, 3.0]);
    // jax.vmap(jnp.linalg.norm)(rows) and its gradient x / |x| (row norms 5 and 13).
    let rows = Tensor::from_vec(vec![3.0f32, 4.0, 5.0, 12.0], &[2, 2]);
    let norms = vmap!(|r| r.norm(2.0, None, false))(&rows);
    close(&norms, &[2], &[5.0, 13.0]);
    let unit = vmap!(grad!(|r| r.norm(2.0, None, false)))(&rows);
    close(&unit, &[2, 2], &[0.6, 0.8, 5.0 / 13.0, 12.0 / 13.0]);
    // tile and triu are views and masks, so gradients flow back summed over the kept copies:
    // np.triu(np.tile(v, (3, 1))) keeps v[0] once and v[1] twice.
    let v = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    let dv = grad!(|v| v.tile(&[3, 1]).triu(0).sum(None, false))(&v);
    close(&dv, &[2], &[1.0, 2.0]);
}
