//! Replaying a plan over and over keeps the process's resident memory flat. (Its own test
//! binary: other tests' allocations would move the figure.)

use tensor::prelude::*;

/// The resident set size of this process, in bytes (Linux; `None` elsewhere).
fn rss_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn ten_thousand_replays_keep_the_resident_set_flat() {
    let x = Tensor::from_vec((0..256).map(|i| i as f32 / 256.0).collect(), &[16, 16]);
    x.realize().expect("the input realizes");
    let step = || {
        let y = ((&x * 3.0).contiguous().exp() * &x).sum(1, false);
        y.to_vec::<f32>().expect("the graph runs")
    };
    let first = step();
    for _ in 0..99 {
        step();
    }
    let Some(after_100) = rss_bytes() else {
        return;
    };
    for _ in 0..10_000 {
        assert_eq!(step(), first);
    }
    let after = rss_bytes().expect("read before");
    assert!(
        after as f64 <= after_100 as f64 * 1.05,
        "RSS grew from {after_100} to {after} bytes over 10,000 replays"
    );
}
