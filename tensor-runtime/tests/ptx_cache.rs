//! The disk cache of NVRTC's PTX (`cuda::ptx_cache`): a kernel compiled once is read back by a
//! second cache on the same folder and by a second process, and a damaged entry is compiled
//! again instead of trusted. Needs NVRTC (`scripts/cuda-tools.sh`), no GPU; without it each
//! test prints why it is skipped, and under `CI=true` it fails instead.

mod common;

use common::TempDir;
use std::process::Command;
use tensor_runtime::cuda::nvrtc;
use tensor_runtime::cuda::ptx_cache::PtxCache;

const ARCH: &str = "compute_80";
const CHILD: &str = "TENSOR_PTX_CACHE_TEST_CHILD";

fn kernel(scale: f32) -> String {
    format!(
        "extern \"C\" __global__ void scale(float* __restrict__ out, const float* __restrict__ a) \
         {{ unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < 64u) out[i] = a[i] * {scale:?}f; }}\n"
    )
}

/// True when NVRTC loads; otherwise prints why the test is skipped, or panics under CI.
fn nvrtc_ready(test: &str) -> bool {
    let Err(why) = nvrtc::nvrtc_available() else {
        return true;
    };
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: CI=true but NVRTC is missing: {why}");
    }
    println!("skipped: {test}: {why}");
    false
}

fn counts(cache: &PtxCache) -> (u64, u64) {
    let c = cache.counts();
    (c.compiler_invocations, c.disk_cache_hits)
}

#[test]
fn second_cache_on_the_folder_reads_the_ptx_back() {
    if !nvrtc_ready("second_cache_on_the_folder_reads_the_ptx_back") {
        return;
    }
    let dir = TempDir::new("ptx-hit");
    let first = PtxCache::new(Some(dir.path().to_path_buf()), 1 << 20);
    let ptx = first.ptx(&kernel(2.0), ARCH).unwrap();
    assert!(ptx.contains(".entry scale"), "{ptx}");
    assert_eq!(counts(&first), (1, 0));
    let second = PtxCache::new(Some(dir.path().to_path_buf()), 1 << 20);
    assert_eq!(second.ptx(&kernel(2.0), ARCH).unwrap(), ptx);
    assert_eq!(counts(&second), (0, 1));
    // Another source, or the same for another architecture, is another entry.
    second.ptx(&kernel(3.0), ARCH).unwrap();
    second.ptx(&kernel(2.0), "compute_90").unwrap();
    assert_eq!(counts(&second), (2, 1));
}

#[test]
fn corrupt_entry_is_compiled_again() {
    if !nvrtc_ready("corrupt_entry_is_compiled_again") {
        return;
    }
    let dir = TempDir::new("ptx-corrupt");
    let first = PtxCache::new(Some(dir.path().to_path_buf()), 1 << 20);
    let ptx = first.ptx(&kernel(2.0), ARCH).unwrap();
    let key = PtxCache::key(&kernel(2.0), ARCH).unwrap();
    let entry = std::fs::read_dir(first.dir().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "kernel"))
        .expect("one entry");
    assert!(entry.to_string_lossy().contains(&format!("{key:032x}")));
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 0x20; // flip a bit of the PTX text
    std::fs::write(&entry, &bytes).unwrap();

    let second = PtxCache::new(Some(dir.path().to_path_buf()), 1 << 20);
    assert_eq!(second.ptx(&kernel(2.0), ARCH).unwrap(), ptx);
    assert_eq!(counts(&second), (1, 0), "a damaged entry must not be a hit");
    // The rebuilt entry is intact again.
    let third = PtxCache::new(Some(dir.path().to_path_buf()), 1 << 20);
    assert_eq!(third.ptx(&kernel(2.0), ARCH).unwrap(), ptx);
    assert_eq!(counts(&third), (0, 1));
}

#[test]
fn rejected_source_is_an_error_and_not_stored() {
    if !nvrtc_ready("rejected_source_is_an_error_and_not_stored") {
        return;
    }
    let dir = TempDir::new("ptx-reject");
    let cache = PtxCache::new(Some(dir.path().to_path_buf()), 1 << 20);
    let err = cache.ptx("__global__ void broken( {", ARCH).unwrap_err();
    assert!(err.to_string().contains("NVRTC"), "{err}");
    let entries = std::fs::read_dir(dir.path().join("cuda")).map_or(0, |d| d.count());
    assert_eq!(entries, 0);
    assert_eq!(counts(&cache), (0, 0));
}

/// The child's work: one PTX through the cache of `TENSOR_CACHE_DIR`; prints its counts.
fn child_main() {
    let cache = PtxCache::from_env().unwrap();
    cache.ptx(&kernel(5.0), ARCH).unwrap();
    let (compiles, hits) = counts(&cache);
    println!("\nCOUNTS {compiles} {hits}");
}

fn run_child(cache_dir: &std::path::Path) -> (u64, u64) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "second_process_does_not_recompile",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("TENSOR_CACHE_DIR", cache_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout.lines().find_map(|l| l.strip_prefix("COUNTS "));
    let numbers: Vec<u64> = line
        .unwrap_or_else(|| panic!("no counts in {stdout}"))
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    (numbers[0], numbers[1])
}

#[test]
fn second_process_does_not_recompile() {
    if std::env::var_os(CHILD).is_some() {
        return child_main();
    }
    if !nvrtc_ready("second_process_does_not_recompile") {
        return;
    }
    let dir = TempDir::new("ptx-process");
    assert_eq!(run_child(dir.path()), (1, 0));
    assert_eq!(run_child(dir.path()), (0, 1));
}
