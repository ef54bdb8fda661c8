//! Dense linear algebra (issue #40, item 4): `solve`, `inv`, `det`, `slogdet`, `cholesky`,
//! `qr`, `eigh` and `lstsq`, host externals in `f64`. Values against NumPy 2 (written here,
//! `float64` inputs): within 1e-12 relative plus 1e-12 absolute in `f64`, 1e-5 relative plus
//! 1e-5 absolute in `f32`. Gradients (`grad` of the sum of a fixed random projection of every
//! output) and `jvp`s against central differences in `f64` within 1e-6. Batched stacks
//! `[2, 3, ..]` against one call per matrix, `vmap` against a loop over samples, and the
//! singular and non-positive-definite cases as NumPy's `LinAlgError`s.

use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::prelude::*;

type Op = fn(&[Tensor]) -> Vec<Tensor>;
/// A NumPy case: name, op, inputs, expected values per output.
type NumpyCase = (&'static str, Op, Vec<Tensor>, Vec<Vec<f64>>);
/// An op, its inputs' per-matrix shapes and a generator of `count` stacked inputs.
type TableRow = (
    &'static str,
    Op,
    Vec<Vec<usize>>,
    fn(usize) -> Vec<Vec<f64>>,
);

/// The 3x3 general matrix most cases use.
const A: [f64; 9] = [4.0, 1.0, -2.0, 1.0, 3.0, 0.5, -1.0, 2.0, 5.0];
/// A right-hand side for `A` (3x2).
const B: [f64; 6] = [1.0, -2.0, 0.5, 3.0, 2.0, 1.0];
/// `A Aᵀ + I`: symmetric positive definite.
const S: [f64; 9] = [22.0, 6.0, -12.0, 6.0, 11.25, 7.5, -12.0, 7.5, 31.0];
/// A tall 4x3 matrix of full rank and a 4x2 right-hand side for it.
const T: [f64; 12] = [1.0, 2.0, 0.0, 0.0, 1.0, -1.0, 3.0, 0.0, 1.0, 1.0, 1.0, 1.0];
const C: [f64; 8] = [1.0, 0.0, 2.0, 1.0, 0.0, -1.0, 1.0, 3.0];

fn t64(values: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(values.to_vec(), shape)
}

fn read(t: &Tensor) -> Vec<f64> {
    match t.dtype() {
        DType::F64 => t.to_vec::<f64>().unwrap(),
        _ => t
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
    }
}

#[track_caller]
fn close(got: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(got.len(), expected.len(), "{got:?} vs {expected:?}");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        let ok = g == e || (g - e).abs() <= tol * e.abs() + tol;
        assert!(ok, "element {i}: got {g}, expected {e} (all: {got:?})");
    }
}

/// The columns of the row-major `n x n` `v`, each signed so its largest element is positive
/// (`eigh`'s convention; LAPACK's signs are arbitrary).
fn signed_columns(v: &[f64], n: usize) -> Vec<f64> {
    let mut out = v.to_vec();
    for c in 0..n {
        let big = (0..n)
            .map(|r| v[r * n + c])
            .reduce(|a, b| if b.abs() > a.abs() { b } else { a })
            .unwrap();
        for r in 0..n {
            out[r * n + c] *= big.signum();
        }
    }
    out
}

/// NumPy 2.4: `np.linalg.solve(A, B)`, `solve(A, [1, 2, 3])`, `inv(A)`, `det(A)`,
/// `slogdet(-A)`, `cholesky(S)`, `qr(T)`, `eigh(S)`, `lstsq(T, C)[0]`.
fn numpy_cases() -> Vec<NumpyCase> {
    vec![
        (
            "solve",
            |x| vec![x[0].solve(&x[1])],
            vec![t64(&A, &[3, 3]), t64(&B, &[3, 2])],
            vec![vec![
                0.5555555555555555,
                -1.1975308641975309,
                -0.11111111111111108,
                1.5061728395061729,
                0.5555555555555555,
                -0.6419753086419753,
            ]],
        ),
        (
            "solve (vector)",
            |x| vec![x[0].solve(&x[1])],
            vec![t64(&A, &[3, 3]), t64(&[1.0, 2.0, 3.0], &[3])],
            vec![vec![
                0.38271604938271603,
                0.45679012345679015,
                0.4938271604938272,
            ]],
        ),
        (
            "inv",
            |x| vec![x[0].inv()],
            vec![t64(&A, &[3, 3])],
            vec![vec![
                0.345679012345679,
                -0.2222222222222222,
                0.16049382716049382,
                -0.13580246913580246,
                0.4444444444444445,
                -0.09876543209876543,
                0.1234567901234568,
                -0.2222222222222222,
                0.2716049382716049,
            ]],
        ),
        (
            "det",
            |x| vec![x[0].det()],
            vec![t64(&A, &[3, 3])],
            vec![vec![40.500000000000014]],
        ),
        (
            "slogdet",
            |x| {
                let (s, l) = (-&x[0]).slogdet();
                vec![s, l]
            },
            vec![t64(&A, &[3, 3])],
            vec![vec![-1.0], vec![3.7013019741124937]],
        ),
        (
            "cholesky",
            |x| vec![x[0].cholesky()],
            vec![t64(&S, &[3, 3])],
            vec![vec![
                4.69041575982343,
                0.0,
                0.0,
                1.2792042981336624,
                3.1005864547914745,
                0.0,
                -2.558408596267325,
                3.474416027354985,
                3.5189456834972974,
            ]],
        ),
        (
            "qr",
            |x| {
                let (q, r) = x[0].qr();
                vec![q, r]
            },
            vec![t64(&T, &[4, 3])],
            vec![
                vec![
                    -0.3015113445777635,
                    -0.758786910639328,
                    -3.6124196539026974e-17,
                    -0.0,
                    -0.4392976851069794,
                    -0.6882472016116853,
                    -0.9045340337332909,
                    0.3594253787238922,
                    -0.2294157338705618,
                    -0.30151134457776363,
                    -0.31948922553234865,
                    0.6882472016116854,
                ],
                vec![
                    -3.3166247903554003,
                    -0.9045340337332908,
                    -1.2060453783110545,
                    0.0,
                    -2.276360731917985,
                    0.47923383829852284,
                    0.0,
                    0.0,
                    1.1470786693528088,
                ],
            ],
        ),
        (
            "eigh",
            |x| {
                let (w, v) = x[0].eigh();
                vec![w, v]
            },
            vec![t64(&S, &[3, 3])],
            vec![
                vec![3.065082292643286, 21.56830534458627, 39.61661236277044],
                signed_columns(
                    &[
                        -0.5048773217008087,
                        0.6781253817090461,
                        0.53408319269022,
                        0.7544371681215567,
                        0.6473080203440525,
                        -0.10870550195362227,
                        -0.4194322941655111,
                        0.3480492687540426,
                        -0.8384141322346805,
                    ],
                    3,
                ),
            ],
        ),
        (
            "lstsq",
            |x| vec![x[0].lstsq(&x[1])],
            vec![t64(&T, &[4, 3]), t64(&C, &[4, 2])],
            vec![vec![
                0.19999999999999993,
                -0.7999999999999998,
                0.7333333333333326,
                1.0666666666666653,
                -0.5999999999999996,
                1.4000000000000001,
            ]],
        ),
    ]
}

#[test]
fn values_match_numpy_in_f64_and_f32() {
    for (name, op, inputs, expected) in numpy_cases() {
        for (dtype, tol) in [(DType::F64, 1e-12f64), (DType::F32, 1e-5)] {
            let cast: Vec<Tensor> = inputs.iter().map(|t| t.cast(dtype)).collect();
            let outs = op(&cast);
            assert_eq!(outs.len(), expected.len(), "{name}");
            for (k, (out, want)) in outs.iter().zip(&expected).enumerate() {
                assert_eq!(out.dtype(), dtype, "{name} output {k}");
                let got = read(out);
                // absolute, for elements NumPy computes as rounding noise (qr's -3.6e-17)
                let tol = if name == "qr" { tol.max(1e-15) } else { tol };
                close(&got, want, tol);
            }
        }
    }
    // the eigenvectors of eigh are orthonormal and the integer matrices are solved in f32
    let (_, v) = t64(&S, &[3, 3]).eigh();
    let gram = read(&v.transpose(0, 1).matmul(&v));
    close(&gram, &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], 1e-14);
    let ints = Tensor::from_vec(vec![2i32, 1, 1, 3], &[2, 2]);
    assert_eq!(ints.inv().dtype(), DType::F32);
    close(&read(&ints.det()), &[5.0], 1e-6);
}

/// `count` pseudo-random values in `[-1, 1)` (a fixed LCG, so the tests are reproducible).
fn noise(count: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..count)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// `count` well-conditioned `n x n` matrices (noise plus `2n` on the diagonal), flattened.
fn general(count: usize, n: usize, seed: u64) -> Vec<f64> {
    let mut v = noise(count * n * n, seed);
    for m in 0..count {
        for i in 0..n {
            v[m * n * n + i * n + i] += 2.0 * n as f64;
        }
    }
    v
}

/// `count` symmetric positive-definite `n x n` matrices `M Mᵀ + I` with distinct eigenvalues.
fn spd(count: usize, n: usize, seed: u64) -> Vec<f64> {
    let m = noise(count * n * n, seed);
    let mut out = Vec::with_capacity(count * n * n);
    for k in 0..count {
        let x = &m[k * n * n..(k + 1) * n * n];
        for i in 0..n {
            for j in 0..n {
                let dot: f64 = (0..n).map(|l| x[i * n + l] * x[j * n + l]).sum();
                out.push(dot + f64::from(u8::from(i == j)) * (1.0 + i as f64));
            }
        }
    }
    out
}

/// The ops with inputs of the given per-matrix shapes and a generator of `count` stacked
/// inputs each (flattened).
fn op_table() -> Vec<TableRow> {
    vec![
        (
            "solve",
            |x| vec![x[0].solve(&x[1])],
            vec![vec![4, 4], vec![4, 2]],
            |c| vec![general(c, 4, 1), noise(c * 8, 2)],
        ),
        (
            "inv",
            |x| vec![x[0].inv()],
            vec![vec![4, 4]],
            |c| vec![general(c, 4, 3)],
        ),
        (
            "det",
            |x| vec![x[0].det()],
            vec![vec![4, 4]],
            |c| vec![general(c, 4, 4)],
        ),
        (
            "slogdet",
            |x| {
                let (s, l) = x[0].slogdet();
                vec![s, l]
            },
            vec![vec![4, 4]],
            |c| {
                let mut v = general(c, 4, 5);
                v.iter_mut().step_by(3).for_each(|x| *x = -*x); // some negative determinants
                vec![v]
            },
        ),
        (
            "cholesky",
            |x| vec![x[0].cholesky()],
            vec![vec![4, 4]],
            |c| vec![spd(c, 4, 6)],
        ),
        (
            "qr",
            |x| {
                let (q, r) = x[0].qr();
                vec![q, r]
            },
            vec![vec![5, 3]],
            |c| vec![noise(c * 15, 7)],
        ),
        (
            "qr (square)",
            |x| {
                let (q, r) = x[0].qr();
                vec![q, r]
            },
            vec![vec![3, 3]],
            |c| vec![noise(c * 9, 8)],
        ),
        (
            "eigh",
            |x| {
                let (w, v) = x[0].eigh();
                vec![w, v]
            },
            vec![vec![4, 4]],
            |c| vec![spd(c, 4, 9)],
        ),
        (
            "lstsq",
            |x| vec![x[0].lstsq(&x[1])],
            vec![vec![5, 3], vec![5, 2]],
            |c| vec![noise(c * 15, 10), noise(c * 10, 11)],
        ),
    ]
}

#[test]
fn batched_stacks_match_numpy_and_one_call_per_matrix() {
    // np.linalg.det / slogdet of np.array([((i*37)%23-11)/5 for i in range(96)]).reshape(2,3,4,4)
    let x: Vec<f64> = (0..96)
        .map(|i| ((i * 37 % 23) as f64 - 11.0) / 5.0)
        .collect();
    let x = t64(&x, &[2, 3, 4, 4]);
    let det = [23.6992, 12.696, -10.1568, 12.696, -10.1568, 0.0];
    close(&read(&x.det()), &det, 1e-12);
    let (sign, logabs) = x.slogdet();
    assert_eq!(sign.shape(), vec![2, 3]);
    let logs = [
        3.1654412922971025,
        2.541286983224108,
        2.3181434319098986,
        2.541286983224108,
        2.3181434319098986,
    ];
    let (sign, logabs) = (read(&sign), read(&logabs));
    close(&sign[..5], &[1.0, 1.0, -1.0, 1.0, -1.0], 0.0);
    close(&logabs[..5], &logs, 1e-12);
    // The last matrix is singular: LAPACK's rounding meets an exact zero pivot (NumPy gives
    // (0, -inf)), ours a pivot of -1.1e-16, as the row-by-row elimination rounds.
    assert!(sign[5] == 0.0 || logabs[5] < -30.0, "{sign:?} {logabs:?}");
    for (name, op, shapes, make) in op_table() {
        let data = make(6);
        let stacked: Vec<Tensor> = data
            .iter()
            .zip(&shapes)
            .map(|(d, s)| t64(d, &[vec![2, 3], s.clone()].concat()))
            .collect();
        let outs = op(&stacked);
        for (k, out) in outs.iter().enumerate() {
            let got = read(out);
            let per = got.len() / 6;
            assert_eq!(out.shape()[..2], [2, 3], "{name}");
            for m in 0..6 {
                let single: Vec<Tensor> = data
                    .iter()
                    .zip(&shapes)
                    .map(|(d, s)| {
                        let size: usize = s.iter().product();
                        t64(&d[m * size..(m + 1) * size], s)
                    })
                    .collect();
                let one = read(&op(&single)[k]);
                assert_eq!(&got[m * per..(m + 1) * per], &one[..], "{name} matrix {m}");
            }
        }
    }
}

/// The sum of every output times a fixed random projection of its shape.
fn projected(op: Op, args: &[Tensor]) -> Tensor {
    op(args)
        .iter()
        .enumerate()
        .map(|(k, out)| {
            let p = noise(out.numel(), 100 + k as u64);
            (out * &t64(&p, &out.shape())).sum_all()
        })
        .reduce(|a, b| a + b)
        .unwrap()
}

/// `f` at `inputs` with every input moved by `h` times its direction.
fn moved(
    op: Op,
    inputs: &[Vec<f64>],
    dirs: &[Vec<f64>],
    h: f64,
    shapes: &[Vec<usize>],
) -> Vec<Tensor> {
    let args: Vec<Tensor> = inputs
        .iter()
        .zip(dirs)
        .zip(shapes)
        .map(|((x, d), s)| {
            let v: Vec<f64> = x.iter().zip(d).map(|(a, b)| a + h * b).collect();
            t64(&v, s)
        })
        .collect();
    op(&args)
}

#[test]
fn gradients_match_finite_differences() {
    let h = 1e-6;
    for (name, op, shapes, make) in op_table() {
        let data = make(1);
        let args: Vec<Tensor> = data.iter().zip(&shapes).map(|(d, s)| t64(d, s)).collect();
        let argnums: Vec<usize> = (0..args.len()).collect();
        let grads = grad(move |x: &[Tensor]| projected(op, x), argnums).call(&args);
        for (j, g) in grads.iter().enumerate() {
            let g = read(g);
            for i in 0..g.len() {
                let mut dirs: Vec<Vec<f64>> = data.iter().map(|d| vec![0.0; d.len()]).collect();
                dirs[j][i] = 1.0;
                let f = |h: f64| {
                    let args: Vec<Tensor> = moved(op, &data, &dirs, h, &shapes);
                    read(&projected(|x| x.to_vec(), &args))[0]
                };
                let fd = (f(h) - f(-h)) / (2.0 * h);
                assert!(
                    (g[i] - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
                    "{name}: d/d input {j} element {i}: grad {}, differences {fd}",
                    g[i]
                );
            }
        }
    }
}

#[test]
fn jvps_match_finite_differences() {
    let h = 1e-6;
    for (name, op, shapes, make) in op_table() {
        let data = make(1);
        let dirs: Vec<Vec<f64>> = data
            .iter()
            .enumerate()
            .map(|(j, d)| noise(d.len(), 50 + j as u64))
            .collect();
        let args: Vec<Tensor> = data.iter().zip(&shapes).map(|(d, s)| t64(d, s)).collect();
        let tangents: Vec<Tensor> = dirs.iter().zip(&shapes).map(|(d, s)| t64(d, s)).collect();
        let (_, dots) = jvp(move |x: &[Tensor]| op(x), &args, &tangents);
        let (up, down) = (
            moved(op, &data, &dirs, h, &shapes),
            moved(op, &data, &dirs, -h, &shapes),
        );
        for (k, dot) in dots.iter().enumerate() {
            let fd: Vec<f64> = read(&up[k])
                .iter()
                .zip(read(&down[k]))
                .map(|(a, b)| (a - b) / (2.0 * h))
                .collect();
            let dot = read(dot);
            for (i, (d, f)) in dot.iter().zip(&fd).enumerate() {
                assert!(
                    (d - f).abs() <= 1e-6 * (1.0 + f.abs()),
                    "{name} output {k} element {i}: jvp {d}, differences {f}"
                );
            }
        }
    }
}

#[test]
fn vmap_matches_a_loop_over_samples() {
    for (_, op, shapes, make) in op_table() {
        let data = make(3);
        let stacked: Vec<Tensor> = data
            .iter()
            .zip(&shapes)
            .map(|(d, s)| t64(d, &[vec![3], s.clone()].concat()))
            .collect();
        let sample = |m: usize| -> Vec<Tensor> {
            data.iter()
                .zip(&shapes)
                .map(|(d, s)| {
                    let size: usize = s.iter().product();
                    t64(&d[m * size..(m + 1) * size], s)
                })
                .collect()
        };
        // the batch on every input, then on the first only (the others broadcast)
        for batched_inputs in [stacked.len(), 1] {
            let in_axes: Vec<Option<isize>> = (0..stacked.len())
                .map(|j| (j < batched_inputs).then_some(0))
                .collect();
            let args: Vec<Tensor> = (0..stacked.len())
                .map(|j| {
                    if j < batched_inputs {
                        stacked[j].clone()
                    } else {
                        sample(0)[j].clone()
                    }
                })
                .collect();
            let outs = vmap(move |x: &[Tensor]| op(x), in_axes.clone(), 0).call(&args);
            let grads = vmap(
                grad(move |x: &[Tensor]| projected(op, x), 0),
                in_axes.clone(),
                0,
            )
            .call(&args);
            for m in 0..3 {
                let mut one = sample(m);
                for (j, o) in one.iter_mut().enumerate().skip(batched_inputs) {
                    *o = sample(0)[j].clone();
                }
                for (k, out) in op(&one).iter().enumerate() {
                    let got = read(&outs[k]);
                    let per = got.len() / 3;
                    close(&got[m * per..(m + 1) * per], &read(out), 1e-13);
                }
                let g = grad(move |x: &[Tensor]| projected(op, x), 0).call(&one);
                let got = read(&grads[0]);
                let per = got.len() / 3;
                close(&got[m * per..(m + 1) * per], &read(&g[0]), 1e-12);
            }
        }
    }
}

#[test]
fn the_range_and_pad_reduce_methods_refuse_a_linalg_call_on_the_batch() {
    let stack = t64(&general(2, 3, 12), &[2, 3, 3]);
    for method in [VmapMethod::Range, VmapMethod::PadReduce] {
        let s = stack.clone();
        let msg = common::panic_message(move || {
            vmap_with(|a: &Tensor| a.inv(), 0, 0, method).call(&[s]);
        });
        assert!(
            msg.contains("`inv_3x3` (apply) depends on the batch"),
            "{method:?}: {msg}"
        );
    }
    let got = vmap_with(|a: &Tensor| a.inv(), 0, 0, VmapMethod::Rewrite)
        .call(std::slice::from_ref(&stack));
    assert_eq!(got[0].shape(), vec![2, 3, 3]);
}

mod common;

#[test]
fn singular_and_non_positive_definite_inputs_follow_numpy() {
    let singular = t64(&[1.0, 2.0, 2.0, 4.0], &[2, 2]);
    // NumPy: LinAlgError("Singular matrix") for inv and solve: here an error of the realize
    for (what, t) in [
        ("inv", singular.inv()),
        ("solve", singular.solve(&t64(&[1.0, 1.0], &[2]))),
    ] {
        let err = t
            .to_vec::<f64>()
            .expect_err("a singular matrix fails")
            .to_string();
        assert!(err.contains(&format!("external `{what}_2x2")), "{err}");
        assert!(
            err.contains(&format!("{what}: the 2x2 matrix is singular")),
            "{err}"
        );
    }
    // NumPy: LinAlgError("Matrix is not positive definite")
    let indefinite = t64(&[1.0, 2.0, 2.0, 1.0], &[2, 2]);
    let err = indefinite
        .cholesky()
        .to_vec::<f64>()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cholesky: the 2x2 matrix is not positive definite (its leading minor of order 2 is not)"),
        "{err}"
    );
    // np.linalg.det gives 0.0 and slogdet (0.0, -inf)
    assert_eq!(read(&singular.det()), vec![0.0]);
    let (sign, logabs) = singular.slogdet();
    assert_eq!(
        (read(&sign), read(&logabs)),
        (vec![0.0], vec![f64::NEG_INFINITY])
    );
    // the process goes on
    close(&read(&t64(&A, &[3, 3]).det()), &[40.500000000000014], 1e-12);
}

#[test]
fn misuse_panics_at_the_call() {
    let wide = t64(&T, &[3, 4]);
    let msg = common::panic_message(|| wide.inv());
    assert!(
        msg.contains("inv: the matrices of shape [3, 4] are 3x4, not square"),
        "{msg}"
    );
    let msg = common::panic_message(|| wide.lstsq(&t64(&[1.0, 2.0, 3.0], &[3])));
    assert!(
        msg.contains("lstsq: the matrix is 3x4, wider than tall"),
        "{msg}"
    );
    let msg = common::panic_message(|| t64(&A, &[3, 3]).solve(&t64(&C, &[4, 2])));
    assert!(
        msg.contains(
            "solve: the matrix is [3, 3] but the right-hand side [4, 2] has 4 rows, not 3"
        ),
        "{msg}"
    );
    let msg = common::panic_message(|| t64(&A, &[9]).det());
    assert!(
        msg.contains("det: shape [9] has fewer than the two axes of a matrix"),
        "{msg}"
    );
    // a wide QR has values but no derivative
    let (q, r) = wide.qr();
    assert_eq!((q.shape(), r.shape()), (vec![3, 3], vec![3, 4]));
    let g = grad(|a: &Tensor| a.qr().1.sum_all(), 0).call(&[wide]);
    let err = g[0].to_vec::<f64>().unwrap_err().to_string();
    assert!(
        err.contains("qr: the derivative of the QR factors of a wide 3x4 matrix"),
        "{err}"
    );
}
