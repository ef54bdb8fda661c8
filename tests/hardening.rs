//! Hostile inputs: shapes whose element counts overflow, indices wider than 32 bits, float
//! division against IEEE, and long float sums. Each case was a wrong value, a wrapped size or
//! a stray write once; each is now a clear panic or the exact value, through the compiled CPU
//! path and the reference interpreter alike.

mod common;

use common::panic_message;

use common::{interpreted, values};
use tensor::prelude::*;

/// A graph-building call to try, named by the op that must refuse it.
type Build = (&'static str, Box<dyn FnOnce() -> Tensor>);

#[test]
fn shapes_whose_element_count_overflows_are_refused_when_built() {
    let cases: Vec<Build> = vec![
        (
            "zeros",
            Box::new(|| Tensor::zeros(&[1usize << 40, 1 << 40], DType::F32)),
        ),
        (
            "from_vec",
            Box::new(|| Tensor::from_vec(Vec::<f32>::new(), &[1 << 32, 1 << 32])),
        ),
        (
            "from_vec",
            Box::new(|| Tensor::from_vec(vec![1.0f32, 2.0], &[3, 6148914691236517206])),
        ),
        (
            "reshape",
            Box::new(|| {
                Tensor::from_vec(vec![1.0f32, 2.0], &[2]).reshape(&[3isize, 6148914691236517206])
            }),
        ),
        (
            "expand",
            Box::new(|| Tensor::from_vec(vec![1.0f32, 2.0], &[2, 1]).expand(&[2isize, 1 << 62])),
        ),
        (
            "add",
            Box::new(|| {
                Tensor::zeros(&[1usize << 30, 1], DType::F32)
                    + Tensor::zeros(&[1usize << 30], DType::F32)
            }),
        ),
        (
            "pad",
            Box::new(|| Tensor::from_vec(vec![1.0f32, 2.0], &[2]).pad(&[(usize::MAX, 1)])),
        ),
        (
            "cat",
            Box::new(|| {
                let big = Tensor::zeros(&[1usize << 47], DType::F32);
                Tensor::cat(&[big.clone(), big.clone(), big], 0)
            }),
        ),
        ("eye", Box::new(|| Tensor::eye(1 << 25, DType::F32))),
    ];
    for (op, build) in cases {
        let message = panic_message(build);
        assert!(
            message.starts_with(&format!("{op}:")),
            "the panic names the op `{op}`: {message}"
        );
        assert!(
            message.contains("elements") || message.contains("overflow"),
            "the panic says why: {message}"
        );
    }
}

#[test]
fn a_matmul_whose_product_would_overflow_is_refused() {
    let a = Tensor::zeros(&[1usize << 24, 1 << 20], DType::F32);
    let b = Tensor::zeros(&[1usize << 20, 1 << 10], DType::F32);
    let message = panic_message(|| a.matmul(&b));
    assert!(message.contains("elements"), "{message}");
}

#[test]
fn the_largest_shapes_are_still_accepted_lazily() {
    let t = Tensor::zeros(&[1usize << 24, 1 << 24], DType::F32);
    assert_eq!(t.shape(), vec![1 << 24, 1 << 24]);
}

#[test]
fn a_buffer_larger_than_memory_is_an_error_not_an_abort() {
    // 2^47 f32 values: a valid shape, but 512 TiB of memory.
    let t = Tensor::zeros(&[1usize << 47], DType::F32).contiguous() + 1.0;
    let err = t.to_vec::<f32>().expect_err("no machine has 512 TiB");
    assert!(err.to_string().contains("could not allocate"), "{err}");
}

/// `take` and `gather` with one index of each integer dtype, compiled and interpreted.
fn picks(index: Tensor) -> Vec<(Vec<f64>, Vec<f64>)> {
    let x = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], &[3]);
    [x.take(&index, 0), x.gather(0, &index)]
        .iter()
        .map(|t| (values(t), interpreted(t)))
        .collect()
}

#[test]
fn indices_wider_than_32_bits_are_never_narrowed() {
    let out_of_range = [
        Tensor::from_vec(vec![(1i64 << 32) + 1], &[1]),
        Tensor::from_vec(vec![1i64 << 40], &[1]),
        Tensor::from_vec(vec![-(1i64 << 32) - 1], &[1]),
        Tensor::from_vec(vec![u32::MAX], &[1]),
        Tensor::from_vec(vec![(1u64 << 32) + 2], &[1]),
        Tensor::from_vec(vec![u64::MAX], &[1]),
    ];
    for index in out_of_range {
        let dtype = index.dtype();
        for (compiled, reference) in picks(index) {
            assert_eq!(
                compiled,
                vec![0.0],
                "{dtype} index out of range picks nothing"
            );
            assert_eq!(reference, vec![0.0], "the interpreter agrees ({dtype})");
        }
    }
    let in_range = [
        (Tensor::from_vec(vec![2i64], &[1]), 30.0),
        (Tensor::from_vec(vec![-3i64], &[1]), 10.0),
        (Tensor::from_vec(vec![1u32], &[1]), 20.0),
        (Tensor::from_vec(vec![2u64], &[1]), 30.0),
        (Tensor::from_vec(vec![-1i32], &[1]), 30.0),
    ];
    for (index, want) in in_range {
        for (compiled, reference) in picks(index) {
            assert_eq!(compiled, vec![want]);
            assert_eq!(reference, vec![want]);
        }
    }
}

#[test]
fn one_hot_labels_wider_than_32_bits_are_never_narrowed() {
    let labels = Tensor::from_vec(vec![(1i64 << 32) + 1, 1, u32::MAX as i64 + 3], &[3]);
    let hot = labels.one_hot(3);
    let want = vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
    assert_eq!(values(&hot), want);
    assert_eq!(interpreted(&hot), want);
}

/// A deterministic stream of f32 bit patterns covering every exponent (SplitMix64).
fn random_floats(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            f32::from_bits((z ^ (z >> 31)) as u32)
        })
        .collect()
}

#[test]
fn float_division_is_correctly_rounded_like_ieee() {
    const N: usize = 1 << 20;
    let (a, b) = (random_floats(N, 1), random_floats(N, 2));
    let quotient = Tensor::from_vec(a.clone(), &[N]) / Tensor::from_vec(b.clone(), &[N]);
    let got: Vec<f32> = quotient.to_vec().unwrap();
    let mismatches = (0..N)
        .filter(|&i| {
            let want = a[i] / b[i];
            !(got[i].to_bits() == want.to_bits() || got[i].is_nan() && want.is_nan())
        })
        .count();
    assert_eq!(mismatches, 0, "of {N} random f32 divisions");
    let tiny = Tensor::from_vec(vec![1e-39f32, 3.0e-42], &[2]);
    assert_eq!((&tiny / &tiny).to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    assert_eq!(interpreted(&(&tiny / &tiny)), vec![1.0, 1.0]);
}

#[test]
fn a_long_float_sum_stays_accurate() {
    // Σ (k mod 10) / 8 over 2^27 terms, computed in the kernel: a single f32 accumulator
    // stalls near 2^24 and is off by orders of magnitude; blocks of 4096 terms per
    // accumulator keep the error within B·⌈log_B n⌉·ε of the sum, ~1e-4 relative at worst.
    let n = 1usize << 27;
    let terms = Tensor::arange(n).remainder(10).cast(DType::F32) * 0.125;
    let got = terms.sum_all().to_vec::<f32>().unwrap()[0] as f64;
    let exact: f64 = (0..n).map(|k| (k % 10) as f64 * 0.125).sum();
    let relative = (got - exact).abs() / exact;
    assert!(
        relative < 1e-6,
        "got {got}, exact {exact}: relative error {relative:e}"
    );
}

#[test]
fn a_sum_of_2_to_the_33_ones_is_exact() {
    let ones = Tensor::ones(&[1usize << 33], DType::F32);
    assert_eq!(
        ones.sum_all().to_vec::<f32>().unwrap(),
        vec![(1u64 << 33) as f32]
    );
}

#[test]
fn a_sum_of_2_to_the_25_stored_ones_is_exact() {
    let ones = Tensor::ones(&[1usize << 25], DType::F32).contiguous();
    assert_eq!(
        ones.sum_all().to_vec::<f32>().unwrap(),
        vec![(1u64 << 25) as f32]
    );
}
