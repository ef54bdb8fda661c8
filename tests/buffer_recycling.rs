//! A large buffer freed by one step of a loop is handed to the next step (not zeroed again when
//! a kernel overwrites it as its output) instead of fresh memory. (Its own test binary, so no
//! other test shares the device's counters.)

use tensor::prelude::*;
use tensor::runtime::CpuDevice;

#[test]
fn a_large_buffer_freed_by_one_step_is_reused_by_the_next() {
    // The CPU's recycling pool is what is measured, whatever `DEVICE` says.
    tensor::runtime::realize::set_device(Some("CPU")).expect("the CPU is always there");
    let device = CpuDevice::shared().expect("the CPU device is available");
    let x = Tensor::from_vec(vec![1.5f32; 1 << 18], &[1 << 18]);
    x.realize().expect("the input realizes");
    let step = |k: f64| {
        let y = (&x * k).exp2();
        y.realize().expect("the step runs");
        y.to_vec::<f32>().expect("reads back")
    };
    let first = step(1.0);
    let held = device.recycled_bytes();
    assert!(
        held >= 4 << 18,
        "the 1 MiB output was kept for reuse ({held} bytes held)"
    );
    let second = step(2.0);
    assert_eq!(
        device.recycled_bytes(),
        held,
        "the next step took it and gave it back"
    );
    assert!(first.iter().all(|&v| v == 1.5f32.exp2()));
    assert!(
        second.iter().all(|&v| v == 3.0f32.exp2()),
        "reused memory holds the new values"
    );
}
