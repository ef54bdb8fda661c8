//! `nn::embedding_bag` against `torch.nn.functional.embedding_bag` (torch 2.x, float64; the
//! numbers below were printed by torch): values and `weight.grad` of `Σ y · r` for
//! `r = 0.3 + 0.1 · arange`, in every mode, with per-sample weights, padding, an empty bag,
//! `include_last_offset` and 2-D input. Per-sample gradients by each `VmapMethod` against a
//! loop of single-sample calls; misuse panics naming `embedding_bag`.

mod common;

use tensor::core::transform::{VmapMethod, vmap_with};
use tensor::nn::{self, BagMode, EmbeddingBag};
use tensor::prelude::*;

const WEIGHT: [f32; 15] = [
    0.5, -1.0, 2.0, 1.5, 0.25, -0.75, -2.0, 3.0, 0.125, 0.75, -0.5, 1.25, 1.0, 2.5, -1.5,
];
const INPUT: [i64; 7] = [0, 2, 4, 1, 3, 2, 0];
/// Four bags, the third empty.
const OFFSETS: [i64; 4] = [0, 3, 3, 5];
const PSW: [f32; 7] = [0.5, 2.0, -1.0, 1.5, 0.25, 3.0, -0.5];

fn weight() -> Tensor {
    Tensor::from_vec(WEIGHT.to_vec(), &[5, 3])
}

fn ints(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

/// `Σ y · r` with `r = 0.3 + 0.1 · arange`, as the torch script weighs its output.
fn weighted_sum(y: &Tensor) -> Tensor {
    let n = y.shape().iter().product::<usize>();
    let r = (Tensor::arange(n).cast(DType::F32) * 0.1 + 0.3).reshape(&y.shape());
    (y * &r).sum_all()
}

/// Checks the value and `weight.grad` of one call against torch's numbers.
#[track_caller]
fn check(what: &str, input: Tensor, opts: EmbeddingBag<'static>, want: &[f64], want_grad: &[f64]) {
    let opts = std::sync::Arc::new(opts);
    let y = nn::embedding_bag(&input, &weight(), &opts);
    let got = common::values(&y);
    assert!(
        common::allclose(&got, want, 1e-5, 1e-6),
        "{what}: {got:?} vs torch {want:?}"
    );
    let f = grad(
        move |w: &Tensor, i: &Tensor| weighted_sum(&nn::embedding_bag(i, w, &opts)),
        0,
    );
    let g = common::values(&f.call1(&[weight(), input]));
    assert!(
        common::allclose(&g, want_grad, 1e-5, 1e-6),
        "{what} grad: {g:?} vs torch {want_grad:?}"
    );
}

fn leak(t: Tensor) -> &'static Tensor {
    Box::leak(Box::new(t))
}

fn offsets() -> Option<&'static Tensor> {
    Some(leak(ints(&OFFSETS, &[4])))
}

#[test]
fn sum_mean_and_max_with_an_empty_bag_match_torch() {
    let input = || ints(&INPUT, &[7]);
    check(
        "sum",
        input(),
        EmbeddingBag {
            offsets: offsets(),
            mode: BagMode::Sum,
            ..Default::default()
        },
        &[
            -0.5, 4.5, 0.625, 0.0, 0.0, 0.0, 2.25, -0.25, 0.5, -1.5, 2.0, 2.125,
        ],
        &[
            1.5, 1.7, 1.9, 0.9, 1.0, 1.1, 1.5, 1.7, 1.9, 0.9, 1.0, 1.1, 0.3, 0.4, 0.5,
        ],
    );
    check(
        "mean",
        input(),
        EmbeddingBag {
            offsets: offsets(),
            mode: BagMode::Mean,
            ..Default::default()
        },
        &[
            -0.16666666666666666,
            1.5,
            0.20833333333333334,
            0.0,
            0.0,
            0.0,
            1.125,
            -0.125,
            0.25,
            -0.75,
            1.0,
            1.0625,
        ],
        &[
            0.7,
            0.7833333333333333,
            0.8666666666666667,
            0.45,
            0.5,
            0.55,
            0.7,
            0.7833333333333333,
            0.8666666666666667,
            0.45,
            0.5,
            0.55,
            0.1,
            0.13333333333333333,
            0.16666666666666666,
        ],
    );
    check(
        "max",
        input(),
        EmbeddingBag {
            offsets: offsets(),
            mode: BagMode::Max,
            ..Default::default()
        },
        &[1.0, 3.0, 2.0, 0.0, 0.0, 0.0, 1.5, 0.25, 1.25, 0.5, 3.0, 2.0],
        &[
            1.2, 0.0, 1.9, 0.9, 1.0, 0.0, 0.0, 1.7, 0.0, 0.0, 0.0, 1.1, 0.3, 0.0, 0.0,
        ],
    );
}

#[test]
fn per_sample_weights_padding_and_the_last_offset_match_torch() {
    let input = || ints(&INPUT, &[7]);
    check(
        "sum with per_sample_weights",
        input(),
        EmbeddingBag {
            offsets: offsets(),
            mode: BagMode::Sum,
            per_sample_weights: Some(leak(Tensor::from_vec(PSW.to_vec(), &[7]))),
            ..Default::default()
        },
        &[
            -4.75, 3.0, 2.75, 0.0, 0.0, 0.0, 2.4375, 0.25, -0.8125, -6.25, 9.5, -0.625,
        ],
        &[
            -0.45, -0.45, -0.45, 1.35, 1.5, 1.65, 4.2, 4.7, 5.2, 0.225, 0.25, 0.275, -0.3, -0.4,
            -0.5,
        ],
    );
    check(
        "mean with padding_idx 2",
        input(),
        EmbeddingBag {
            offsets: offsets(),
            mode: BagMode::Mean,
            padding_idx: Some(2),
            ..Default::default()
        },
        &[
            0.75, 0.75, 0.25, 0.0, 0.0, 0.0, 1.125, -0.125, 0.25, 0.5, -1.0, 2.0,
        ],
        &[
            1.35, 1.5, 1.65, 0.45, 0.5, 0.55, 0.0, 0.0, 0.0, 0.45, 0.5, 0.55, 0.15, 0.2, 0.25,
        ],
    );
    check(
        "max with padding_idx -1",
        input(),
        EmbeddingBag {
            offsets: offsets(),
            mode: BagMode::Max,
            padding_idx: Some(-1),
            ..Default::default()
        },
        &[0.5, 3.0, 2.0, 0.0, 0.0, 0.0, 1.5, 0.25, 1.25, 0.5, 3.0, 2.0],
        &[
            1.5, 0.0, 1.9, 0.9, 1.0, 0.0, 0.0, 1.7, 0.0, 0.0, 0.0, 1.1, 0.0, 0.0, 0.0,
        ],
    );
    check(
        "sum with include_last_offset",
        input(),
        EmbeddingBag {
            offsets: Some(leak(ints(&[0, 2, 6, 7], &[4]))),
            mode: BagMode::Sum,
            include_last_offset: true,
            ..Default::default()
        },
        &[-1.5, 2.0, 2.125, 1.25, 5.25, -0.875, 0.5, -1.0, 2.0],
        &[
            1.2, 1.4, 1.6, 0.6, 0.7, 0.8, 0.9, 1.1, 1.3, 0.6, 0.7, 0.8, 0.6, 0.7, 0.8,
        ],
    );
}

#[test]
fn a_2d_input_is_its_own_bags_as_in_torch() {
    check(
        "mean of [2, 3]",
        ints(&INPUT[..6], &[2, 3]),
        EmbeddingBag::default(),
        &[
            -0.16666666666666666,
            1.5,
            0.20833333333333334,
            0.08333333333333333,
            0.9166666666666666,
            0.20833333333333334,
        ],
        &[
            0.1,
            0.13333333333333333,
            0.16666666666666666,
            0.2,
            0.2333333333333333,
            0.26666666666666666,
            0.3,
            0.36666666666666664,
            0.43333333333333335,
            0.2,
            0.2333333333333333,
            0.26666666666666666,
            0.1,
            0.13333333333333333,
            0.16666666666666666,
        ],
    );
    check(
        "max of [2, 3] with padding_idx 2",
        ints(&[2, 2, 1, 4, 0, 3], &[2, 3]),
        EmbeddingBag {
            mode: BagMode::Max,
            padding_idx: Some(2),
            ..Default::default()
        },
        &[1.5, 0.25, -0.75, 1.0, 2.5, 2.0],
        &[
            0.0, 0.0, 0.8, 0.3, 0.4, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6, 0.7, 0.0,
        ],
    );
}

/// Per-sample gradients of `Σ embedding_bag(input_s, w, offsets_s) · r` with respect to the
/// shared `w`: `vmap(grad)` by each method against a loop over the samples.
#[test]
fn per_sample_gradients_by_each_vmap_method_match_a_loop() {
    let inputs = ints(
        &[
            0, 2, 4, 1, 3, 2, 0, 4, 4, 1, 0, 3, 3, 2, 1, 1, 2, 3, 0, 4, 2,
        ],
        &[3, 7],
    );
    let offsets = ints(&[0, 3, 3, 5, 0, 1, 4, 6, 0, 0, 2, 7], &[3, 4]);
    for mode in [BagMode::Sum, BagMode::Mean, BagMode::Max] {
        let loss = move |w: &Tensor, i: &Tensor, o: &Tensor| {
            let opts = EmbeddingBag {
                offsets: Some(o),
                mode,
                padding_idx: Some(1),
                ..Default::default()
            };
            weighted_sum(&nn::embedding_bag(i, w, &opts))
        };
        let looped: Vec<Tensor> = (0..3)
            .map(|s| {
                let pick = |t: &Tensor| t.narrow(0, s, 1).squeeze(0);
                grad(loss, 0).call1(&[weight(), pick(&inputs), pick(&offsets)])
            })
            .collect();
        let want = common::values(&Tensor::stack(&looped, 0));
        for method in [
            VmapMethod::Rewrite,
            VmapMethod::Range,
            VmapMethod::PadReduce,
        ] {
            let per_sample = vmap_with(grad(loss, 0), [None, Some(0), Some(0)], 0, method);
            let got =
                common::values(&per_sample.call1(&[weight(), inputs.clone(), offsets.clone()]));
            assert!(
                common::allclose(&got, &want, 1e-5, 1e-6),
                "{mode:?} {method:?}: {got:?} vs the loop {want:?}"
            );
        }
    }
}

#[test]
fn misuse_names_embedding_bag() {
    let (w, input) = (weight(), ints(&INPUT, &[7]));
    let off = ints(&OFFSETS, &[4]);
    let psw = Tensor::from_vec(PSW.to_vec(), &[7]);
    type Call<'a> = Box<dyn Fn() -> Tensor + 'a>;
    let cases: Vec<(&str, Call)> = vec![
        (
            "needs offsets",
            Box::new(|| nn::embedding_bag(&input, &w, &EmbeddingBag::default())),
        ),
        (
            "pass offsets only with a 1-D input",
            Box::new(|| {
                let opts = EmbeddingBag {
                    offsets: Some(&off),
                    ..Default::default()
                };
                nn::embedding_bag(&input.reshape(&[1, 7]), &w, &opts)
            }),
        ),
        (
            "only supported with mode Sum",
            Box::new(|| {
                let opts = EmbeddingBag {
                    offsets: Some(&off),
                    per_sample_weights: Some(&psw),
                    ..Default::default()
                };
                nn::embedding_bag(&input, &w, &opts)
            }),
        ),
        (
            "padding_idx 5 is outside",
            Box::new(|| {
                let opts = EmbeddingBag {
                    offsets: Some(&off),
                    padding_idx: Some(5),
                    ..Default::default()
                };
                nn::embedding_bag(&input, &w, &opts)
            }),
        ),
        (
            "integer indices",
            Box::new(|| {
                let opts = EmbeddingBag {
                    offsets: Some(&off),
                    ..Default::default()
                };
                nn::embedding_bag(&input.cast(DType::F32), &w, &opts)
            }),
        ),
    ];
    for (want, call) in cases {
        let message = common::panic_message(call);
        assert!(
            message.starts_with("embedding_bag: ") && message.contains(want),
            "{message:?} should name embedding_bag and say {want:?}"
        );
    }
}
