//! Realizing over and over leaks nothing: after 1,000 realize calls of a small graph, the
//! device holds as many buffers as before, and no graph nodes are left behind.
//! (Its own test binary, so no other test shares the device's counters.)

use tensor::prelude::*;
use tensor::runtime::CpuDevice;

fn one_step(x: &Tensor) -> Vec<f32> {
    let y = ((x * 2.0 + 1.0).exp2() - x).sum(0, false);
    y.to_vec::<f32>().expect("the graph runs")
}

#[test]
fn a_thousand_realizes_leave_memory_flat() {
    let device = CpuDevice::shared().expect("the CPU device is available");
    let x = Tensor::from_vec((0..12).map(|i| i as f32 / 12.0).collect(), &[3, 4]);
    x.realize().expect("the input realizes");
    let first = one_step(&x);
    let (buffers, nodes) = (device.live_buffers().count(), UOp::live_count());
    for _ in 0..1000 {
        assert_eq!(one_step(&x), first);
    }
    assert_eq!(
        device.live_buffers().count(),
        buffers,
        "device buffers leaked"
    );
    assert_eq!(UOp::live_count(), nodes, "graph nodes leaked");
}
