//! The device's program caches under load: concurrent requests share one build, the memory
//! cache keeps a bounded number of libraries, and the disk cache a bounded number of bytes.

mod common;

use common::CompileTestKernel;
use tensor_core::render::Launch;

use common::{TempDir, add_kernel, host_sum, ramp};
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, SystemTime};
use tensor_core::DType;
use tensor_runtime::stable_hash::to_hex;
use tensor_runtime::{CpuConfig, CpuDevice, CpuProgram, Device};

/// A device caching in `cache` with the given bounds.
fn bounded_device(cache: Option<&Path>, programs: usize, disk_bytes: u64) -> CpuDevice {
    CpuDevice::with_config(CpuConfig {
        cache_dir: cache.map(Path::to_path_buf),
        program_cache_size: programs,
        disk_cache_max_bytes: disk_bytes,
        ..CpuConfig::default()
    })
}

/// Runs `program`, an add kernel over `n` floats, and checks its result.
fn check_add(device: &CpuDevice, program: &CpuProgram, n: usize) {
    let [out, a, b] = [0; 3].map(|_| device.allocate(n * 4).unwrap());
    device.copy_in_elements(&a, &ramp(n, 1.0)).unwrap();
    device.copy_in_elements(&b, &ramp(n, 0.5)).unwrap();
    // SAFETY: `program` is an add kernel of one part over `n` floats of three distinct
    // buffers (this function's contract with its callers).
    unsafe { device.launch_unchecked(program, &[&out, &a, &b], Launch::Cores(1)) }.unwrap();
    let sum: Vec<f32> = device.copy_out_elements(&out, DType::F32).unwrap();
    assert_eq!(sum, host_sum(&ramp(n, 1.0), &ramp(n, 0.5)), "n = {n}");
}

fn compile_add(device: &CpuDevice, n: usize) -> CpuProgram {
    device
        .compile_test_kernel(&add_kernel(n), "add_entry")
        .unwrap()
}

#[test]
fn threads_requesting_the_same_kernels_share_each_build() {
    let cache = TempDir::new("in-flight");
    let device = bounded_device(Some(cache.path()), 64, u64::MAX);
    let sizes = [41, 42, 43];
    let start = Barrier::new(8);
    std::thread::scope(|s| {
        for t in 0..8 {
            let (device, start) = (&device, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..sizes.len() {
                    let n = sizes[(t + i) % sizes.len()];
                    check_add(device, &compile_add(device, n), n);
                }
            });
        }
    });
    let counts = device.compile_counts();
    assert_eq!(counts.compiler_invocations, sizes.len() as u64);
    assert_eq!(counts.disk_cache_hits, 0);
    assert_eq!(counts.memory_cache_hits, 8 * 3 - 3);
}

#[test]
fn failed_build_is_reported_to_every_waiter_and_retried_later() {
    let device = bounded_device(None, 64, u64::MAX);
    let broken = "void broken_entry(void** bufs, int core_id) { return 1 +; }\n";
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                start.wait();
                assert!(device.compile_test_kernel(broken, "broken_entry").is_err());
            });
        }
    });
    let shared = device.compile_counts().compiler_invocations;
    assert!(shared >= 1);
    // The failure is not remembered: asking again runs the compiler again.
    assert!(device.compile_test_kernel(broken, "broken_entry").is_err());
    assert_eq!(device.compile_counts().compiler_invocations, shared + 1);
}

#[test]
fn memory_cache_keeps_a_bounded_number_of_libraries() {
    let device = bounded_device(None, 2, u64::MAX);
    let programs: Vec<(usize, CpuProgram)> = (21..=25)
        .map(|n| {
            let program = compile_add(&device, n);
            assert!(device.loaded_libraries() <= 2);
            (n, program)
        })
        .collect();
    assert_eq!(device.loaded_libraries(), 2);
    // Programs handed out before their library was dropped from the cache still run.
    for (n, program) in &programs {
        check_add(&device, program, *n);
    }
    // An evicted kernel is built again, and runs.
    let before = device.compile_counts();
    check_add(&device, &compile_add(&device, 21), 21);
    let after = device.compile_counts();
    assert_eq!(after.compiler_invocations, before.compiler_invocations + 1);
    assert_eq!(after.memory_cache_hits, before.memory_cache_hits);
}

#[test]
fn memory_cache_drops_the_least_recently_used_library() {
    let device = bounded_device(None, 2, u64::MAX);
    compile_add(&device, 31); // A
    compile_add(&device, 32); // B
    compile_add(&device, 31); // A again: B is now the least recently used
    compile_add(&device, 33); // C replaces B
    let before = device.compile_counts();
    assert_eq!(before.compiler_invocations, 3);
    compile_add(&device, 31);
    assert_eq!(device.compile_counts().compiler_invocations, 3);
    compile_add(&device, 32);
    assert_eq!(device.compile_counts().compiler_invocations, 4);
}

/// Where the entry for the add kernel over `n` floats lives in `cache`.
fn entry_path(device: &CpuDevice, cache: &Path, n: usize) -> PathBuf {
    let key = device.compiler().cache_key(&add_kernel(n)).unwrap();
    cache.join("cpu").join(format!("{}.kernel", to_hex(key)))
}

/// The bytes of all entries in `cache`.
fn entry_bytes(cache: &Path) -> u64 {
    std::fs::read_dir(cache.join("cpu"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "kernel"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

fn set_last_use(path: &Path, ago: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - ago).unwrap();
}

#[test]
fn disk_cache_stays_within_its_size_and_evicts_the_least_recently_used() {
    let dir = TempDir::new("disk-lru");
    // The size of one entry, learnt from an unbounded cache.
    let probe = dir.path().join("probe");
    compile_add(&bounded_device(Some(&probe), 64, u64::MAX), 50);
    let one = entry_bytes(&probe);
    let limit = 2 * one + one / 2;

    let cache = dir.path().join("cache");
    let first = bounded_device(Some(&cache), 64, limit);
    compile_add(&first, 51); // A
    compile_add(&first, 52); // B
    let [a, b, c] = [51, 52, 53].map(|n| entry_path(&first, &cache, n));
    set_last_use(&a, Duration::from_secs(7200));
    set_last_use(&b, Duration::from_secs(3600));

    // A hit makes A the most recently used, so storing C evicts B.
    let second = bounded_device(Some(&cache), 64, limit);
    compile_add(&second, 51);
    assert_eq!(second.compile_counts().disk_cache_hits, 1);
    compile_add(&second, 53);
    assert!(a.exists() && c.exists(), "A and C are kept");
    assert!(!b.exists(), "B, the least recently used, is evicted");
    assert!(entry_bytes(&cache) <= limit);

    // The evicted kernel is rebuilt, correctly.
    let third = bounded_device(Some(&cache), 64, limit);
    check_add(&third, &compile_add(&third, 52), 52);
    assert_eq!(third.compile_counts().compiler_invocations, 1);

    for n in 54..60 {
        compile_add(&third, n);
        assert!(entry_bytes(&cache) <= limit, "after kernel {n}");
    }
}

/// `out[i] = a[i] + b[i] + k` over `n` floats, as the C function `name`, entry `<name>_entry`.
fn named_add_kernel(name: &str, n: usize, k: usize) -> String {
    format!(
        "void {name}(float* restrict out, const float* restrict a, const float* restrict b) {{\n\
         \x20 for (int i = 0; i < {n}; i++) out[i] = a[i] + b[i] + {k}.0f;\n}}\n\
         void {name}_entry(void** bufs, int core_id) {{\n\
         \x20 (void)core_id;\n  {name}((float*)bufs[0], (const float*)bufs[1], (const float*)bufs[2]);\n}}\n"
    )
}

fn five_kernels() -> Vec<(String, String)> {
    (0..5)
        .map(|k| {
            (
                named_add_kernel(&format!("k{k}"), 8 + k, k),
                format!("k{k}_entry"),
            )
        })
        .collect()
}

fn as_pairs(kernels: &[(String, String)]) -> Vec<(&str, &str)> {
    kernels
        .iter()
        .map(|(s, e)| (s.as_str(), e.as_str()))
        .collect()
}

fn two_core_device(cache: &Path) -> CpuDevice {
    CpuDevice::with_config(CpuConfig {
        cache_dir: Some(cache.to_path_buf()),
        threads: 2,
        ..CpuConfig::default()
    })
}

#[test]
fn a_cold_batch_of_kernels_takes_one_compiler_run_per_core_and_caches_each_kernel() {
    let cache = TempDir::new("batch");
    let device = two_core_device(cache.path());
    let kernels = five_kernels();
    let programs = device
        .compile_many_test_kernels(&as_pairs(&kernels))
        .unwrap();
    assert_eq!(device.compile_counts().compiler_invocations, 2);
    for (k, program) in programs.iter().enumerate() {
        let n = 8 + k;
        let [out, a, b] = [0; 3].map(|_| device.allocate(n * 4).unwrap());
        device.copy_in_elements(&a, &ramp(n, 1.0)).unwrap();
        device.copy_in_elements(&b, &ramp(n, 0.5)).unwrap();
        // SAFETY: kernel `k` of `five_kernels` is one part over `8 + k` floats of three
        // distinct buffers.
        unsafe { device.launch_unchecked(program, &[&out, &a, &b], Launch::Cores(1)) }.unwrap();
        let got: Vec<f32> = device.copy_out_elements(&out, DType::F32).unwrap();
        let want: Vec<f32> = host_sum(&ramp(n, 1.0), &ramp(n, 0.5))
            .iter()
            .map(|v| v + k as f32)
            .collect();
        assert_eq!(got, want, "kernel k{k}");
    }
    let fresh = two_core_device(cache.path());
    for (source, entry) in &kernels {
        fresh.compile_test_kernel(source, entry).unwrap();
    }
    let counts = fresh.compile_counts();
    assert_eq!(
        counts.compiler_invocations, 0,
        "every kernel has its own cache entry"
    );
    assert_eq!(counts.disk_cache_hits, 5);
}

#[test]
fn threads_compiling_the_same_batch_share_its_compiler_runs() {
    let cache = TempDir::new("batch-threads");
    let device = two_core_device(cache.path());
    let kernels = five_kernels();
    let barrier = Barrier::new(4);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                barrier.wait();
                device
                    .compile_many_test_kernels(&as_pairs(&kernels))
                    .unwrap();
            });
        }
    });
    assert_eq!(device.compile_counts().compiler_invocations, 2);
}

#[test]
fn threads_compiling_overlapping_batches_in_other_orders_do_not_wait_on_each_other() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for round in 0..5 {
            let cache = TempDir::new(&format!("batch-orders-{round}"));
            let device = two_core_device(cache.path());
            let kernels = five_kernels();
            let forward = as_pairs(&kernels);
            let backward: Vec<(&str, &str)> = forward.iter().rev().copied().collect();
            let barrier = Barrier::new(2);
            std::thread::scope(|scope| {
                for order in [&forward, &backward] {
                    let (device, barrier) = (&device, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        device.compile_many_test_kernels(order).unwrap();
                    });
                }
            });
        }
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(Duration::from_secs(120))
        .expect("two threads building overlapping batches deadlocked");
}
