//! A kernel that a plan launches more than once (the same AST over buffers of the same sizes:
//! a layer applied twice, the groups of a long `cat`) is generated and compiled once, and its
//! program serves every launch. Checked on the kernels a plan is built from and on the
//! compiled values; never timed.

use tensor::core::schedule::create_schedule;
use tensor::prelude::*;
use tensor::runtime::CpuDevice;
use tensor::runtime::plan::generate_kernels_for;
use tensor::runtime::realize::codegen_options;

/// `exp` stored, `depth` times over: every kernel after the first is the first one again.
fn repeated(x: &Tensor, depth: usize) -> Tensor {
    (0..depth).fold(x.clone(), |t, _| t.exp().contiguous())
}

/// The kernels a plan of `outputs` launches, in order.
fn planned_kernels(outputs: &[&Tensor]) -> Vec<tensor::core::render::Kernel> {
    let device = CpuDevice::shared().unwrap();
    let roots: Vec<_> = outputs.iter().map(|t| t.uop()).collect();
    generate_kernels_for(&device, &create_schedule(&roots), &codegen_options(&device))
}

#[test]
fn a_kernel_launched_several_times_is_one_kernel() {
    let values = [0.0f32, -1.0, 0.5, -2.0];
    let out = repeated(&Tensor::from_vec(values.to_vec(), &[4]), 3);
    let kernels = planned_kernels(&[&out]);
    assert_eq!(kernels.len(), 3, "three launches");
    assert!(
        kernels.iter().all(|k| *k == kernels[0]),
        "one kernel, three launches"
    );
    let got: Vec<f32> = out.to_vec().unwrap();
    let want: Vec<f32> = values.iter().map(|v| v.exp().exp().exp()).collect();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * w.abs(), "{got:?} vs {want:?}");
    }
}

#[test]
fn kernels_over_buffers_of_other_sizes_stay_apart() {
    let a = Tensor::from_vec(vec![0.25f32; 4], &[4]).exp().contiguous();
    let b = Tensor::from_vec(vec![0.25f32; 8], &[8]).exp().contiguous();
    let kernels = planned_kernels(&[&a, &b]);
    assert_eq!(kernels.len(), 2);
    assert_ne!(kernels[0], kernels[1]);
    realize_tree(&(a.clone(), b.clone())).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![0.25f32.exp(); 4]);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![0.25f32.exp(); 8]);
}
