//! The on-disk kernel cache across processes: reuse, damaged entries, unwritable directories.
//!
//! Each cross-process test re-runs this test binary as a child (filtered to the same test,
//! with `TENSOR_RUNTIME_TEST_CHILD` set). The child configures its device from the
//! environment the parent gives it (`CC`, `TENSOR_CACHE_DIR`, `THREADS`), compiles and runs
//! kernels, and prints its compile counts; the parent inspects its output, its warnings, the
//! cache directory, and a log of compiler invocations kept by a `CC` wrapper script.

mod common;

use common::CompileTestKernel;
use tensor_core::render::Launch;

use common::{TempDir, add_kernel, device, host_sum, ramp};
use std::path::{Path, PathBuf};
use std::process::Command;
use tensor_core::DType;
use tensor_runtime::cache::{decode_entry, encode_entry};
use tensor_runtime::{CompileCounts, CpuDevice, Device};

const CHILD: &str = "TENSOR_RUNTIME_TEST_CHILD";
const CHILD_KERNELS: &str = "TENSOR_RUNTIME_TEST_KERNELS";

/// What a child run does: compile and check `$TENSOR_RUNTIME_TEST_KERNELS` add kernels.
fn child_main() {
    let device = CpuDevice::from_env().expect("configuration from the environment");
    let kernels: usize = std::env::var(CHILD_KERNELS).map_or(1, |v| v.parse().unwrap());
    for k in 1..=kernels {
        let n = 8 * k;
        let program = device
            .compile_test_kernel(&add_kernel(n), "add_entry")
            .unwrap();
        let [out, a, b] = [0; 3].map(|_| device.allocate(n * 4).unwrap());
        device.copy_in_elements(&a, &ramp(n, 1.0)).unwrap();
        device.copy_in_elements(&b, &ramp(n, 0.5)).unwrap();
        // SAFETY: `add_kernel(n)` is one part over `n` floats of three distinct buffers.
        unsafe { device.launch_unchecked(&program, &[&out, &a, &b], Launch::Cores(1)) }.unwrap();
        let sum: Vec<f32> = device.copy_out_elements(&out, DType::F32).unwrap();
        assert_eq!(sum, host_sum(&ramp(n, 1.0), &ramp(n, 0.5)));
    }
    let counts = device.compile_counts();
    println!(
        "\nCOUNTS {} {}",
        counts.compiler_invocations, counts.disk_cache_hits
    );
}

fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// A child run's compile counts and warnings.
struct ChildRun {
    counts: CompileCounts,
    stderr: String,
}

/// Runs `test` in a child process with `CC=compiler`, `TENSOR_CACHE_DIR=cache_dir`.
fn run_child(test: &str, compiler: &Path, cache_dir: &Path, kernels: usize) -> ChildRun {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env(CHILD_KERNELS, kernels.to_string())
        .env("CC", compiler)
        .env("TENSOR_CACHE_DIR", cache_dir)
        .env("THREADS", "2")
        // A fixed vector width: the width's calibration builds with `$CC` too, which would
        // show in the wrapper's log of kernel builds.
        .env("TENSOR_VECTOR_WIDTH", "256")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "child failed\n{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("COUNTS "))
        .unwrap_or_else(|| panic!("child printed no counts:\n{stdout}\n{stderr}"));
    let numbers: Vec<u64> = line.split(' ').map(|n| n.parse().unwrap()).collect();
    ChildRun {
        counts: CompileCounts {
            compiler_invocations: numbers[0],
            disk_cache_hits: numbers[1],
            memory_cache_hits: 0,
        },
        stderr,
    }
}

/// A `CC` wrapper that appends its arguments to a log, then runs `cc`.
struct LoggingCompiler {
    script: PathBuf,
    log: PathBuf,
}

impl LoggingCompiler {
    fn new(dir: &Path) -> LoggingCompiler {
        let script = dir.join("logging-cc.sh");
        let log = dir.join("cc.log");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$*\" >> '{}'\nexec cc \"$@\"\n",
                log.display()
            ),
        )
        .unwrap();
        make_executable(&script);
        LoggingCompiler { script, log }
    }

    /// How many times the wrapper compiled something (version queries excluded).
    fn builds(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.contains("--version"))
            .count()
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The cache entries (and any other files) in a cache directory's `cpu/` folder.
fn cache_files(cache_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cache_dir.join("cpu"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn only_entry(cache_dir: &Path) -> PathBuf {
    let files = cache_files(cache_dir);
    assert_eq!(files.len(), 1, "expected one cache entry: {files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "kernel"));
    files[0].clone()
}

fn key_of(entry: &Path) -> u128 {
    let stem = entry.file_stem().unwrap().to_str().unwrap();
    u128::from_str_radix(stem, 16).unwrap()
}

#[test]
fn second_process_run_compiles_nothing() {
    if is_child() {
        return child_main();
    }
    let dir = TempDir::new("second-process");
    let cc = LoggingCompiler::new(dir.path());
    let cache = dir.path().join("cache");
    let test = "second_process_run_compiles_nothing";

    let first = run_child(test, &cc.script, &cache, 1);
    assert_eq!(first.counts.compiler_invocations, 1);
    assert_eq!(first.counts.disk_cache_hits, 0);
    assert_eq!(cc.builds(), 1);

    let second = run_child(test, &cc.script, &cache, 1);
    assert_eq!(second.counts.compiler_invocations, 0);
    assert_eq!(second.counts.disk_cache_hits, 1);
    assert_eq!(cc.builds(), 1);
    // Exactly one complete entry and no temporary files left behind.
    let entry = only_entry(&cache);
    let bytes = std::fs::read(&entry).unwrap();
    assert!(decode_entry(key_of(&entry), &bytes).is_ok());
}

#[test]
fn damaged_cache_entry_is_detected_and_rebuilt() {
    if is_child() {
        return child_main();
    }
    let dir = TempDir::new("damaged");
    let cc = LoggingCompiler::new(dir.path());
    let cache = dir.path().join("cache");
    let test = "damaged_cache_entry_is_detected_and_rebuilt";

    run_child(test, &cc.script, &cache, 1);
    let entry = only_entry(&cache);
    let full_len = std::fs::metadata(&entry).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&entry)
        .unwrap()
        .set_len(full_len / 2)
        .unwrap();

    let after_truncation = run_child(test, &cc.script, &cache, 1);
    assert!(
        after_truncation.stderr.contains("truncated"),
        "{}",
        after_truncation.stderr
    );
    assert_eq!(after_truncation.counts.compiler_invocations, 1);
    assert_eq!(std::fs::metadata(&entry).unwrap().len(), full_len);

    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let after_corruption = run_child(test, &cc.script, &cache, 1);
    assert!(
        after_corruption.stderr.contains("checksum"),
        "{}",
        after_corruption.stderr
    );
    assert_eq!(after_corruption.counts.compiler_invocations, 1);

    let healthy = run_child(test, &cc.script, &cache, 1);
    assert_eq!(healthy.counts.compiler_invocations, 0);
    assert_eq!(healthy.counts.disk_cache_hits, 1);
    assert_eq!(cc.builds(), 3);
}

#[test]
fn unwritable_cache_dir_still_compiles_with_one_warning() {
    if is_child() {
        return child_main();
    }
    let dir = TempDir::new("unwritable");
    let cc = LoggingCompiler::new(dir.path());
    let regular_file = dir.path().join("a-file");
    std::fs::write(&regular_file, "not a directory").unwrap();
    let cache = regular_file.join("cache");
    let test = "unwritable_cache_dir_still_compiles_with_one_warning";

    let run = run_child(test, &cc.script, &cache, 2);
    assert_eq!(run.counts.compiler_invocations, 2);
    assert_eq!(
        run.stderr.matches("is not writable").count(),
        1,
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("TENSOR_CACHE_DIR"), "{}", run.stderr);
}

#[test]
fn concurrent_writers_leave_one_intact_entry() {
    let dir = TempDir::new("concurrent");
    let source = add_kernel(33);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                // Separate devices share nothing in memory, so each compiles and writes.
                let device = device("cc", Some(dir.path()), 1);
                device.compile_test_kernel(&source, "add_entry").unwrap();
            });
        }
    });
    let entry = only_entry(dir.path());
    let bytes = std::fs::read(&entry).unwrap();
    assert!(decode_entry(key_of(&entry), &bytes).is_ok());
    let reader = device("cc", Some(dir.path()), 1);
    reader.compile_test_kernel(&source, "add_entry").unwrap();
    assert_eq!(reader.compile_counts().disk_cache_hits, 1);
}

#[test]
fn temporary_files_abandoned_by_crashed_writers_are_removed() {
    let dir = TempDir::new("abandoned");
    let cpu_dir = dir.path().join("cpu");
    std::fs::create_dir_all(&cpu_dir).unwrap();
    let abandoned = cpu_dir.join(".0123.kernel.999.0.tmp");
    let in_progress = cpu_dir.join(".4567.kernel.999.1.tmp");
    for path in [&abandoned, &in_progress] {
        std::fs::write(path, b"partial").unwrap();
    }
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(&abandoned)
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();

    device("cc", Some(dir.path()), 1)
        .compile_test_kernel(&add_kernel(3), "add_entry")
        .unwrap();
    assert!(!abandoned.exists());
    assert!(in_progress.exists());
}

#[test]
fn intact_entry_that_cannot_be_loaded_is_rebuilt() {
    let dir = TempDir::new("unloadable");
    let source = add_kernel(6);
    device("cc", Some(dir.path()), 1)
        .compile_test_kernel(&source, "add_entry")
        .unwrap();
    let entry = only_entry(dir.path());
    std::fs::write(&entry, encode_entry(key_of(&entry), b"not a shared object")).unwrap();

    let rebuilder = device("cc", Some(dir.path()), 1);
    rebuilder.compile_test_kernel(&source, "add_entry").unwrap();
    assert_eq!(rebuilder.compile_counts().compiler_invocations, 1);
    assert_eq!(rebuilder.compile_counts().disk_cache_hits, 0);

    let reader = device("cc", Some(dir.path()), 1);
    reader.compile_test_kernel(&source, "add_entry").unwrap();
    assert_eq!(reader.compile_counts().disk_cache_hits, 1);
}

/// `out[i] = a[i] - b[i]` under the entry name of `add_kernel`: code an attacker would plant.
fn subtracting_kernel(n: usize) -> String {
    add_kernel(n).replace("a[i] + b[i]", "a[i] - b[i]")
}

/// Runs the add kernel for `n` floats on `device` and returns what it computed.
fn run_add(device: &CpuDevice, n: usize) -> Vec<f32> {
    let program = device
        .compile_test_kernel(&add_kernel(n), "add_entry")
        .unwrap();
    let [out, a, b] = [0; 3].map(|_| device.allocate(n * 4).unwrap());
    device.copy_in_elements(&a, &ramp(n, 1.0)).unwrap();
    device.copy_in_elements(&b, &ramp(n, 0.5)).unwrap();
    // SAFETY: `add_kernel(n)` is one part over `n` floats of three distinct buffers.
    unsafe { device.launch_unchecked(&program, &[&out, &a, &b], Launch::Cores(1)) }.unwrap();
    device.copy_out_elements(&out, DType::F32).unwrap()
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A cache in `dir` whose entry for the add kernel of `n` floats holds the subtracting kernel,
/// with a valid header and checksum: what another user with write access could plant.
fn plant_subtracting_entry(dir: &Path, n: usize) -> PathBuf {
    let scratch = dir.join("scratch-cache");
    device("cc", Some(&scratch), 1)
        .compile_test_kernel(&subtracting_kernel(n), "add_entry")
        .unwrap();
    let evil = only_entry(&scratch);
    let payload = decode_entry(key_of(&evil), &std::fs::read(&evil).unwrap())
        .unwrap()
        .to_vec();
    let cache = dir.join("cache");
    device("cc", Some(&cache), 1)
        .compile_test_kernel(&add_kernel(n), "add_entry")
        .unwrap();
    let entry = only_entry(&cache);
    std::fs::write(&entry, encode_entry(key_of(&entry), &payload)).unwrap();
    entry
}

#[test]
fn fresh_cache_directory_and_entries_are_private() {
    let dir = TempDir::new("private");
    let cache = dir.path().join("new").join("cache");
    device("cc", Some(&cache), 1)
        .compile_test_kernel(&add_kernel(5), "add_entry")
        .unwrap();
    assert_eq!(mode_of(&cache), 0o700);
    assert_eq!(mode_of(&cache.join("cpu")), 0o700);
    assert_eq!(mode_of(&only_entry(&cache)), 0o600);
}

#[test]
fn entry_owned_by_another_user_is_refused_and_replaced() {
    let dir = TempDir::new("foreign-owner");
    let n = 9;
    let entry = plant_subtracting_entry(dir.path(), n);
    // As planted by our own user it would run: the test's forgery is a working one.
    let fooled = device("cc", Some(&dir.path().join("cache")), 1);
    assert_ne!(run_add(&fooled, n), host_sum(&ramp(n, 1.0), &ramp(n, 0.5)));

    std::os::unix::fs::chown(&entry, Some(65534), Some(65534)).unwrap();
    let fresh = device("cc", Some(&dir.path().join("cache")), 1);
    assert_eq!(run_add(&fresh, n), host_sum(&ramp(n, 1.0), &ramp(n, 0.5)));
    assert_eq!(fresh.compile_counts().disk_cache_hits, 0);
    assert_eq!(fresh.compile_counts().compiler_invocations, 1);
    // The rebuilt entry replaced the planted one and is ours.
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&entry).unwrap();
    assert_ne!(meta.uid(), 65534);
    assert_eq!(meta.mode() & 0o777, 0o600);
}

#[test]
fn entry_writable_by_group_or_others_is_refused() {
    let dir = TempDir::new("writable-entry");
    let n = 10;
    for mode in [0o666, 0o620] {
        let entry = plant_subtracting_entry(dir.path(), n);
        set_mode(&entry, mode);
        let fresh = device("cc", Some(&dir.path().join("cache")), 1);
        assert_eq!(run_add(&fresh, n), host_sum(&ramp(n, 1.0), &ramp(n, 0.5)));
        assert_eq!(fresh.compile_counts().disk_cache_hits, 0, "mode {mode:o}");
        assert_eq!(mode_of(&entry), 0o600);
    }
}

#[test]
fn cache_directory_others_can_write_is_not_used() {
    let dir = TempDir::new("writable-dir");
    let n = 11;
    plant_subtracting_entry(dir.path(), n);
    let cpu_dir = dir.path().join("cache").join("cpu");
    set_mode(&cpu_dir, 0o777);
    let fresh = device("cc", Some(&dir.path().join("cache")), 1);
    assert_eq!(run_add(&fresh, n), host_sum(&ramp(n, 1.0), &ramp(n, 0.5)));
    assert_eq!(fresh.compile_counts().disk_cache_hits, 0);
    // A directory owned by another user is refused the same way.
    set_mode(&cpu_dir, 0o700);
    std::os::unix::fs::chown(&cpu_dir, Some(65534), None).unwrap();
    let other = device("cc", Some(&dir.path().join("cache")), 1);
    assert_eq!(run_add(&other, n), host_sum(&ramp(n, 1.0), &ramp(n, 0.5)));
    assert_eq!(other.compile_counts().disk_cache_hits, 0);
}

#[test]
fn untrusted_cache_directory_is_reported_once() {
    if is_child() {
        return child_main();
    }
    let dir = TempDir::new("untrusted-warning");
    let cc = LoggingCompiler::new(dir.path());
    let cache = dir.path().join("cache");
    let test = "untrusted_cache_directory_is_reported_once";
    run_child(test, &cc.script, &cache, 2);
    set_mode(&cache.join("cpu"), 0o777);
    let run = run_child(test, &cc.script, &cache, 2);
    assert_eq!(run.counts.compiler_invocations, 2);
    assert_eq!(run.counts.disk_cache_hits, 0);
    assert_eq!(
        run.stderr.matches("could plant code").count(),
        1,
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("mode 0777"), "{}", run.stderr);
}

/// A device caching in `cache` whose temp dir is `temp_dir`.
fn device_with_temp_dir(cache: &Path, temp_dir: &Path) -> CpuDevice {
    CpuDevice::with_config(tensor_runtime::CpuConfig {
        cache_dir: Some(cache.to_path_buf()),
        temp_dir: temp_dir.to_path_buf(),
        ..Default::default()
    })
}

#[test]
fn cached_kernels_load_without_a_writable_temp_dir() {
    let dir = TempDir::new("no-tmpdir");
    let cache = dir.path().join("cache");
    let n = 12;
    device("cc", Some(&cache), 1)
        .compile_test_kernel(&add_kernel(n), "add_entry")
        .unwrap();
    let regular_file = dir.path().join("a-file");
    std::fs::write(&regular_file, "not a directory").unwrap();
    let unwritable = regular_file.join("tmp");

    let reader = device_with_temp_dir(&cache, &unwritable);
    assert_eq!(run_add(&reader, n), host_sum(&ramp(n, 1.0), &ramp(n, 0.5)));
    assert_eq!(reader.compile_counts().disk_cache_hits, 1);
    assert_eq!(reader.compile_counts().compiler_invocations, 0);
    // A kernel that is not cached yet is built there too (the compiler's TMPDIR included).
    assert_eq!(
        run_add(&reader, n + 1),
        host_sum(&ramp(n + 1, 1.0), &ramp(n + 1, 0.5))
    );
    assert_eq!(reader.compile_counts().compiler_invocations, 1);
    // The build directories in the cache's scratch folder are gone again.
    let scratch = std::fs::read_dir(cache.join("cpu").join("scratch")).unwrap();
    assert_eq!(scratch.count(), 0);
}

/// The id of a process that has exited.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A build directory named for `pid` in `base`, with a file in it, last changed `age` ago.
fn build_dir(base: &Path, pid: u32, n: u32, age: std::time::Duration) -> PathBuf {
    let path = base.join(format!("tensor-build-{pid}-{n}"));
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("kernel.c"), "int x;").unwrap();
    let when = std::time::SystemTime::now() - age;
    std::fs::File::open(&path)
        .unwrap()
        .set_modified(when)
        .unwrap();
    path
}

#[test]
fn build_directories_of_killed_processes_are_removed() {
    let dir = TempDir::new("stale-builds");
    let temp = dir.path().join("tmp");
    std::fs::create_dir(&temp).unwrap();
    let hour = std::time::Duration::from_secs(3600);
    let dead = dead_pid();
    let stale = build_dir(&temp, dead, 0, hour);
    let young = build_dir(&temp, dead, 1, std::time::Duration::ZERO);
    let alive = build_dir(&temp, 1, 0, hour);
    let foreign = build_dir(&temp, dead, 2, hour);
    std::os::unix::fs::chown(&foreign, Some(65534), None).unwrap();

    let device = device_with_temp_dir(&dir.path().join("cache"), &temp);
    device
        .compile_test_kernel(&add_kernel(13), "add_entry")
        .unwrap();
    assert!(!stale.exists());
    for kept in [&young, &alive, &foreign] {
        assert!(kept.exists(), "{} was removed", kept.display());
    }
    // The device's own build directory is gone once the kernel is loaded.
    assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 3);
}
