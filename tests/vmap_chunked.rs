//! `vmap` with a chunk size (torch.func's `chunk_size`): the values of the whole batch at
//! once, by every method, with in/out axes other than 0, an unbatched result and a last chunk
//! smaller than the others; under `grad`; through the macros and `tensor::typed`; the memory of
//! a plan's intermediates bounded by the chunk (allocator high-water marks); `jacfwd` and
//! `jacrev` with a chunk size equal to the unchunked transforms.

mod common;

use common::{max_abs_diff, panic_message, ramp, values};
use tensor::core::transform::{VmapMethod, vmap_chunked, vmap_with};
use tensor::prelude::*;

/// Two results from `x: [3]` (mapped) and `w: [3, 2]` (shared): one batched, one not.
fn two_results(args: &[Tensor]) -> Vec<Tensor> {
    let (x, w) = (&args[0], &args[1]);
    vec![(x.matmul(w)).tanh() * x.sum_all(), w.sum_all()]
}

#[test]
fn chunked_values_equal_the_whole_batch_by_every_method() {
    // The batch (10) on axis 1 of x, the batched result's batch on axis 1 too.
    let x = ramp(&[3, 10], 1.5);
    let w = ramp(&[3, 2], 0.7);
    for method in [
        VmapMethod::Rewrite,
        VmapMethod::Range,
        VmapMethod::PadReduce,
    ] {
        let whole = vmap_with(two_results, [Some(1), None], [Some(1), None], method)
            .call(&[x.clone(), w.clone()]);
        for chunk in [1, 3, 4, 10, 64] {
            let got = vmap_chunked(two_results, [Some(1), None], [Some(1), None], method, chunk)
                .call(&[x.clone(), w.clone()]);
            assert_eq!(got[0].shape(), vec![2, 10], "{method:?}, chunk {chunk}");
            assert_eq!(got[1].shape(), Vec::<usize>::new());
            for (g, e) in got.iter().zip(&whole) {
                let diff = max_abs_diff(&values(g), &values(e));
                assert!(diff <= 1e-6, "{method:?}, chunk {chunk}: {diff}");
            }
        }
    }
}

fn loss(w: &Tensor, x: &Tensor) -> Tensor {
    (x.matmul(w)).tanh().square().sum_all()
}

#[test]
fn per_sample_gradients_by_the_macro_and_typed_equal_the_unchunked() {
    let w = ramp(&[4, 3], 0.5);
    let x = ramp(&[13, 4], 2.0);
    let whole = vmap!(grad!(loss), in_axes = (None, 0))(&w, &x);
    let chunked = vmap!(grad!(loss), in_axes = (None, 0), chunk_size = 5)(&w, &x);
    assert_eq!(chunked.shape(), vec![13, 4, 3]);
    assert!(max_abs_diff(&values(&chunked), &values(&whole)) <= 1e-6);
    let typed = tensor::typed::vmap_chunked(
        tensor::typed::grad(loss, tensor::typed::Argnum::<0>),
        (None, 0),
        0,
        4,
    );
    assert!(max_abs_diff(&values(&typed(&w, &x)), &values(&whole)) <= 1e-6);
}

#[test]
fn gradients_flow_through_a_chunked_vmap() {
    let x = ramp(&[9, 3], 1.0);
    let w = ramp(&[3, 2], 0.4);
    let total = |chunk: Option<usize>| {
        move |w: &Tensor, x: &Tensor| {
            let f = |args: &[Tensor]| vec![(args[0].matmul(&args[1])).sin()];
            let per = match chunk {
                None => vmap_with(f, [Some(0), None], 0, VmapMethod::Rewrite),
                Some(c) => vmap_chunked(f, [Some(0), None], 0, VmapMethod::Rewrite, c),
            };
            per.call(&[x.clone(), w.clone()]).remove(0).sum_all()
        }
    };
    let whole = grad!(total(None))(&w, &x);
    let chunked = grad!(total(Some(2)))(&w, &x);
    assert!(max_abs_diff(&values(&chunked), &values(&whole)) <= 1e-6);
}

/// Self-attention of one sequence `x: [T, D]`: its `[T, T]` scores are the intermediates.
fn attention(args: &[Tensor]) -> Vec<Tensor> {
    let x = &args[0];
    let scores = x.matmul(&x.transpose(0, 1)) * 0.1;
    vec![scores.softmax(-1).matmul(x)]
}

/// The most bytes live at once while `y` is computed on the CPU (whose allocations the
/// device counts, whatever `DEVICE` says), beyond those live before, and the largest buffer
/// allocated.
fn memory_of(y: &Tensor) -> (usize, usize) {
    let device = tensor::runtime::CpuDevice::shared().unwrap();
    let live = device.live_buffers();
    live.reset_peaks();
    let before = live.bytes();
    let plans = tensor::runtime::realize::shared_plan_cache();
    tensor::runtime::realize::realize_on(&device, plans, &[y]).unwrap();
    (live.peak_bytes() - before, live.largest_buffer())
}

#[test]
fn chunks_bound_the_memory_of_the_intermediates() {
    let (b, t, d) = (64, 128, 16);
    let x = ramp(&[b, t, d], 1.0);
    x.realize().unwrap();
    let whole = vmap_with(attention, 0, 0, VmapMethod::Rewrite)
        .call(std::slice::from_ref(&x))
        .remove(0);
    let chunked = vmap_chunked(attention, 0, 0, VmapMethod::Rewrite, 8)
        .call(std::slice::from_ref(&x))
        .remove(0);
    let (whole_peak, whole_largest) = memory_of(&whole);
    let (chunk_peak, chunk_largest) = memory_of(&chunked);
    let scores = b * t * t * 4;
    assert!(
        whole_largest >= scores,
        "the whole batch's scores: {whole_largest} bytes"
    );
    assert!(
        chunk_largest <= scores / 8,
        "a chunk's buffers: {chunk_largest} bytes"
    );
    assert!(
        chunk_peak * 3 <= whole_peak,
        "peak {chunk_peak} bytes by chunks of 8, {whole_peak} for the whole batch"
    );
    assert!(max_abs_diff(&values(&chunked), &values(&whole)) <= 1e-5);
}

fn field(x: &Tensor) -> Tensor {
    // R^7 -> R^5
    let m = ramp(&[5, 7], 0.3);
    (m.matmul(x)).sin() * x.sum_all()
}

#[test]
fn chunked_jacobians_equal_the_unchunked() {
    let x = ramp(&[7], 1.2);
    let whole_fwd = jacfwd!(field)(&x);
    let whole_rev = jacrev!(field)(&x);
    assert_eq!(whole_fwd.shape(), vec![5, 7]);
    for chunk in [1, 3, 7, 20] {
        let fwd = jacfwd!(field, chunk_size = chunk)(&x);
        let rev = jacrev!(field, chunk_size = chunk)(&x);
        assert!(
            max_abs_diff(&values(&fwd), &values(&whole_fwd)) <= 1e-6,
            "jacfwd, chunk {chunk}"
        );
        assert!(
            max_abs_diff(&values(&rev), &values(&whole_rev)) <= 1e-6,
            "jacrev, chunk {chunk}"
        );
    }
    let typed = tensor::typed::jacrev_chunked(field, tensor::typed::Argnum::<0>, 2)(&x);
    assert!(max_abs_diff(&values(&typed), &values(&whole_fwd)) <= 1e-5);
}

#[test]
fn a_chunk_size_of_zero_is_refused_naming_vmap() {
    let message = panic_message(|| vmap_chunked(attention, 0, 0, VmapMethod::Rewrite, 0));
    assert!(
        message.contains("vmap: chunk_size must be at least 1"),
        "{message}"
    );
}
