//! `BEAM=n`: kernels whose OptOps come from timing real launches. The search's winner must
//! compute what the interpreter computes, be cached on disk, and be taken from the cache by
//! the next device without searching. Times are not asserted (they vary); work is counted.

mod common;

use common::TempDir;
use std::path::Path;
use tensor_core::Tensor;
use tensor_core::interp::evaluate;
use tensor_core::schedule::placeholders::abstract_buffers;
use tensor_runtime::plan::PlanCache;
use tensor_runtime::realize::{codegen_options, read_buffer};
use tensor_runtime::stats::beam_counts;
use tensor_runtime::{CpuConfig, CpuDevice};

fn searching_device(cache: &Path) -> CpuDevice {
    CpuDevice::with_config(CpuConfig {
        cache_dir: Some(cache.to_path_buf()),
        threads: 2,
        beam: 2,
        ..CpuConfig::default()
    })
}

/// The values of `t` computed on `device` through a plan, as `realize` computes them.
fn computed(device: &CpuDevice, t: &Tensor) -> Vec<f32> {
    let abstracted = abstract_buffers(&[t.uop()]);
    let plans = PlanCache::new(4);
    let plan = plans
        .get_or_build(device, &abstracted.roots, &codegen_options(device))
        .unwrap();
    let outputs = plan.run(device, &abstracted.inputs).unwrap();
    read_buffer(device, &outputs[0])
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn matrix(rows: usize, cols: usize, seed: usize) -> Tensor {
    let values = (0..rows * cols)
        .map(|i| ((i * 31 + seed * 7) % 23) as f32 / 23.0 - 0.5)
        .collect();
    Tensor::from_vec(values, &[rows, cols])
}

#[test]
fn a_searched_kernel_computes_the_same_values_and_its_winner_is_cached() {
    let cache = TempDir::new("beam");
    let graph = (matrix(48, 64, 1).matmul(&matrix(64, 32, 2)) + 1.0).relu();
    let expected = evaluate(&graph.uop()).to_vec::<f32>();

    let (searches, hits) = beam_counts();
    let values = computed(&searching_device(cache.path()), &graph);
    let (searched, hit) = beam_counts();
    assert_eq!(
        (searched - searches, hit - hits),
        (1, 0),
        "one kernel, searched once"
    );
    assert_eq!(values.len(), expected.len());
    for (a, e) in values.iter().zip(&expected) {
        assert!((a - e).abs() <= 1e-5 + 1e-4 * e.abs(), "{a} vs {e}");
    }
    assert!(
        std::fs::read_dir(cache.path().join("beam"))
            .unwrap()
            .count()
            > 0,
        "the winner is on disk"
    );

    let again = computed(&searching_device(cache.path()), &graph);
    let (searched_again, hit_again) = beam_counts();
    assert_eq!(
        (searched_again - searched, hit_again - hit),
        (0, 1),
        "a second device takes the cached winner"
    );
    assert_eq!(again, values, "the same opts give the same values");
}
