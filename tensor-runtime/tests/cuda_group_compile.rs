//! Group reductions (`codegen::group`: a block of threads per output, shared memory and
//! barriers) rendered as CUDA C, compiled by NVRTC and assembled by ptxas for sm_80 and
//! sm_90 with zero errors (no GPU needed), with the launch dims the runtime uses. Without the
//! tools of `scripts/cuda-tools.sh` each test prints why it is skipped; under `CI=true` it
//! fails instead.

use tensor_core::codegen::LaunchDims;
use tensor_core::schedule::create_schedule;
use tensor_core::tensor::Tensor;
use tensor_runtime::cuda::{cuda_kernels, nvrtc};

fn data(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| (i as f32 * 0.37).sin()).collect(), shape)
}

#[test]
fn group_reductions_compile_for_sm_80_and_sm_90() {
    let cases = [
        ("sum of 65536", data(&[65536]).sum_all(), 1),
        ("max of rows of 5000", data(&[6, 5000]).max([1], false), 6),
        // Rows read contiguously along the reduce are not upcast: a block per row.
        ("mean of rows of 4096", data(&[8, 4096]).mean([1], false), 8),
        ("softmax rows of 4096", data(&[8, 4096]).softmax(-1), 8),
    ];
    let missing = nvrtc::tools_missing();
    if let Some(why) = &missing {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true but the CUDA tools are missing: {why}");
        }
        println!("skipped: group_reductions_compile_for_sm_80_and_sm_90 (compile part): {why}");
    }
    for (name, out, blocks) in cases {
        let kernels = cuda_kernels(&create_schedule(&[out.uop()]));
        let grouped: Vec<_> = kernels
            .iter()
            .filter(|k| k.source.contains("__syncthreads()"))
            .collect();
        assert!(!grouped.is_empty(), "{name}: no group reduction");
        for k in &grouped {
            assert!(k.source.contains("__shared__"), "{name}:\n{}", k.source);
            assert!(k.source.contains("__launch_bounds__(128)"), "{name}");
            // The runtime launches `threads` in blocks of 128: one block per output.
            let dims = LaunchDims::for_threads(k.threads);
            assert_eq!(dims.block, 128, "{name}");
            assert_eq!(dims.grid, blocks, "{name}: {dims:?}");
            println!("{name}: {} launched as {dims:?}", k.name);
        }
        if missing.is_none() {
            for k in &kernels {
                let checked = nvrtc::check_kernel(&k.source, "compute_80", &["sm_80", "sm_90"]);
                if let Err(e) = checked {
                    panic!("{name}/{}: {e}\n{}", k.name, k.source);
                }
            }
        }
    }
}
