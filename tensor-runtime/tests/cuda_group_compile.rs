//! Group reductions (`codegen::group`: a block of threads per output, shared memory and
//! barriers) rendered as CUDA C, compiled by NVRTC and assembled by ptxas for sm_80 and
//! sm_90 with zero errors (no GPU needed), with the launch dims the runtime uses (blocks of
//! the kernel's `__launch_bounds__`). Without the
//! tools of `scripts/cuda-tools.sh` each test prints why it is skipped; under `CI=true` it
//! fails instead.

use tensor_core::codegen::LaunchDims;
use tensor_core::render::Launch;
use tensor_core::schedule::create_schedule;
use tensor_core::tensor::Tensor;
use tensor_runtime::cuda::{cuda_kernels, nvrtc};

fn data(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|i| (i as f32 * 0.37).sin()).collect(), shape)
}

#[test]
fn group_reductions_compile_for_sm_80_and_sm_90() {
    // Each case with the launch of each of its grouped kernels: (blocks, threads per block).
    let cases = [
        // The scheduler splits a long sum into 256 partial sums, then sums those.
        (
            "sum of 65536",
            data(&[65536]).sum_all(),
            vec![(256, 128), (1, 128)],
        ),
        // 5000 = 40 x 125: a block of 125 threads per row.
        (
            "max of rows of 5000",
            data(&[6, 5000]).max([1], false),
            vec![(6, 125)],
        ),
        // Rows read contiguously along the reduce are not upcast: a block per row.
        (
            "mean of rows of 4096",
            data(&[8, 4096]).mean([1], false),
            vec![(8, 128)],
        ),
        (
            "softmax rows of 4096",
            data(&[8, 4096]).softmax(-1),
            vec![(8, 128), (8, 128)],
        ),
        (
            "sum of squared row sums",
            data(&[8, 4096]).sum([1], false).square().sum_all(),
            vec![(1, 128)],
        ),
    ];
    let missing = nvrtc::tools_missing();
    if let Some(why) = &missing {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true but the CUDA tools are missing: {why}");
        }
        println!("skipped: group_reductions_compile_for_sm_80_and_sm_90 (compile part): {why}");
    }
    for (name, out, launches) in cases {
        let kernels = cuda_kernels(&create_schedule(&[out.uop()]));
        let grouped: Vec<_> = kernels
            .iter()
            .filter(|k| k.source.contains("__syncthreads()"))
            .collect();
        assert_eq!(grouped.len(), launches.len(), "{name}: grouped kernels");
        for (k, &(blocks, block)) in grouped.iter().zip(&launches) {
            assert!(k.source.contains("__shared__"), "{name}:\n{}", k.source);
            // One block per output, its size also the launch bounds.
            let dims = LaunchDims {
                grid: blocks,
                block,
            };
            assert_eq!(k.launch, Launch::Grid(dims), "{name}");
            let bounds = format!("__launch_bounds__({block})");
            assert!(
                k.source.contains(&bounds),
                "{name}:
{}",
                k.source
            );
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

#[test]
fn grouptop_and_narrower_group_splits_compile_for_sm_80_and_sm_90() {
    use tensor_core::codegen::{Opt, gpu_optimizations, lower_kernel_gpu_with_opts};
    use tensor_core::render::cuda::render_kernel;
    use tensor_core::uop::AxisType;
    let Some(why) = nvrtc::tools_missing() else {
        let schedule = create_schedule(&[data(&[16, 8192]).sum([1], false).uop()]);
        let item = &schedule.items[0];
        let heuristic = gpu_optimizations(&item.ast);
        for (lanes, top) in [(128, true), (64, false), (32, true)] {
            let opts: Vec<Opt> = heuristic
                .iter()
                .map(|opt| match *opt {
                    Opt::Split {
                        axis,
                        target: AxisType::Group,
                        ..
                    } => Opt::Split {
                        axis,
                        factor: lanes,
                        target: AxisType::Group,
                        top,
                    },
                    ref other => other.clone(),
                })
                .collect();
            let lowered = lower_kernel_gpu_with_opts(&item.ast, &item.buffer_sizes(), &opts, "k");
            let k = render_kernel(&lowered);
            assert!(
                matches!(k.launch, Launch::Grid(dims) if dims.block == lanes),
                "{opts:?}: {}",
                k.launch
            );
            if let Err(e) = nvrtc::check_kernel(&k.source, "compute_80", &["sm_80", "sm_90"]) {
                panic!("{opts:?}: {e}\n{}", k.source);
            }
        }
        return;
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but the CUDA tools are missing: {why}");
    }
    println!("skipped: grouptop_and_narrower_group_splits_compile_for_sm_80_and_sm_90: {why}");
}
