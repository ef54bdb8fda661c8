//! The C compiler driver and its caches under hostile conditions (issue 36, items 7, 15, 16
//! and 18): compiler commands that differ only in their words, compilers that hang, leave
//! processes behind or lie about their success, a full `TMPDIR`, absurd `THREADS`, and
//! malformed settings.
//!
//! What must be measured in a process of its own (thread and descriptor counts, settings read
//! from the environment, a mount namespace) re-runs this test binary as a child, filtered to
//! the one test, with `COMPILER_HARDENING_CHILD` set; the child does the work and the parent
//! checks its exit status and output.

mod common;

use common::CompileTestKernel;
use tensor_core::render::Launch;

use common::{FIND_OUTPUT_PATH, TempDir, add_kernel, fake_compiler, split_kernel};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use tensor_core::{DType, Tensor};
use tensor_runtime::cpu::{CCompiler, default_flags};
use tensor_runtime::{CpuConfig, CpuDevice, Device, RuntimeError};

const CHILD: &str = "COMPILER_HARDENING_CHILD";

fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs `test` of this binary in a child process with `env` added to the environment.
fn run_child(test: &str, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A device compiling with `compiler` (a command line), caching in `cache`, with a time limit.
fn device_with(compiler: &str, cache: Option<&Path>, timeout: Duration) -> CpuDevice {
    CpuDevice::with_config(CpuConfig {
        compiler: compiler.to_string(),
        cache_dir: cache.map(Path::to_path_buf),
        compile_timeout: timeout,
        ..CpuConfig::default()
    })
}

/// `out[i] = isnan(x[i])` over 4 floats; entry `isnan_entry`, buffers (out, x).
const ISNAN_KERNEL: &str = r#"#include <math.h>
void isnan_entry(void** bufs, int core_id) {
  (void)core_id;
  float* out = (float*)bufs[0];
  const float* x = (const float*)bufs[1];
  for (int i = 0; i < 4; i++) out[i] = isnan(x[i]) ? 1.0f : 0.0f;
}
"#;

/// What [`ISNAN_KERNEL`] compiled by `device` says of `[1, NaN, inf, -NaN]`.
fn isnan_on(device: &CpuDevice) -> Vec<f32> {
    let program = device
        .compile_test_kernel(ISNAN_KERNEL, "isnan_entry")
        .unwrap();
    let out = device.allocate(16).unwrap();
    let x = device.allocate(16).unwrap();
    let input = [1.0f32, f32::NAN, f32::INFINITY, -f32::NAN];
    device.copy_in_elements(&x, &input).unwrap();
    // SAFETY: the kernel reads 4 floats of `x` and writes 4 floats of `out`, two distinct
    // 16-byte device allocations, and runs as one part.
    unsafe { device.launch_unchecked(&program, &[&out, &x], Launch::Cores(1)) }.unwrap();
    device.copy_out_elements(&out, DType::F32).unwrap()
}

#[test]
fn entries_built_with_other_compiler_words_are_never_reused() {
    let dir = TempDir::new("cc-words");
    let cache = dir.path().join("cache");
    let limit = Duration::from_secs(120);
    let fast_math = device_with("cc -ffast-math", Some(&cache), limit);
    isnan_on(&fast_math);
    assert_eq!(fast_math.compile_counts().compiler_invocations, 1);

    // A plain `cc` finds the fast-math entry in the same cache and must not take it.
    let plain = device_with("cc", Some(&cache), limit);
    assert_eq!(isnan_on(&plain), vec![0.0, 1.0, 0.0, 1.0]);
    let counts = plain.compile_counts();
    assert_eq!(
        (counts.compiler_invocations, counts.disk_cache_hits),
        (1, 0)
    );

    // Each command still hits its own entry.
    let plain_again = device_with("cc", Some(&cache), limit);
    assert_eq!(isnan_on(&plain_again), vec![0.0, 1.0, 0.0, 1.0]);
    let counts = plain_again.compile_counts();
    assert_eq!(
        (counts.compiler_invocations, counts.disk_cache_hits),
        (0, 1)
    );
    let fast_again = device_with("cc -ffast-math", Some(&cache), limit);
    isnan_on(&fast_again);
    assert_eq!(fast_again.compile_counts().disk_cache_hits, 1);
}

#[test]
fn cache_keys_tell_apart_every_flag_word_and_every_compiler_file() {
    let key = |command: &str| {
        CCompiler::new(command, default_flags())
            .cache_key(&add_kernel(4))
            .unwrap()
    };
    let plain = key("cc");
    let asan = key("cc -fsanitize=address -fno-omit-frame-pointer");
    let asan_only = key("cc -fsanitize=address");
    let fast = key("cc -ffast-math");
    let keys = [plain, asan, asan_only, fast];
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b);
        }
    }
    // Two wrappers with the same name, the same `--version` and the same words, in two
    // folders: two compilers.
    let dir = TempDir::new("cc-paths");
    let [one, two] = ["one", "two"].map(|sub| {
        let folder = dir.path().join(sub);
        std::fs::create_dir(&folder).unwrap();
        fake_compiler(&folder, "wrapped-cc", "exec cc \"$@\"")
    });
    let key_of = |script: &PathBuf| key(&script.display().to_string());
    assert_ne!(key_of(&one), key_of(&two));
    assert_eq!(key_of(&one), key_of(&one));
}

/// Whether process `pid` still runs (a zombie waiting for a parent that does not reap it
/// counts as ended).
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses.
    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
    !state.starts_with('Z') && !state.starts_with('X')
}

/// The process id a fake compiler wrote to `file`, once it is there.
fn pid_in(file: &Path) -> u32 {
    let started = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no pid in {file:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits up to 10 s for process `pid` to end; false if it is still running then.
fn ends(pid: u32) -> bool {
    let started = Instant::now();
    while running(pid) {
        if started.elapsed() > Duration::from_secs(10) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A fake compiler whose real work (the part gcc's `cc1` does) is a `sleep` it waits for,
/// writing that process's id to `pid_file`.
fn hanging_compiler(dir: &Path, pid_file: &Path) -> PathBuf {
    let body = format!("sleep 300 &\necho $! > '{}'\nwait", pid_file.display());
    fake_compiler(dir, "hanging-cc", &body)
}

#[test]
fn a_timeout_kills_every_process_the_compiler_started() {
    let dir = TempDir::new("cc-group");
    let pid_file = dir.path().join("cc1.pid");
    let compiler = hanging_compiler(dir.path(), &pid_file);
    let device = device_with(
        &compiler.display().to_string(),
        None,
        Duration::from_millis(300),
    );
    let started = Instant::now();
    let err = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    assert!(matches!(err, RuntimeError::CompileTimedOut { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let worker = pid_in(&pid_file);
    assert!(
        ends(worker),
        "the compiler's child {worker} outlived the timeout"
    );
}

#[test]
fn twenty_timeouts_leave_no_thread_and_no_descriptor_behind() {
    if !is_child() {
        let run = run_child(
            "twenty_timeouts_leave_no_thread_and_no_descriptor_behind",
            &[],
        );
        let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
        assert!(run.status.success(), "child failed\n{stdout}\n{stderr}");
        assert!(stdout.contains("TIMEOUTS 20"), "{stdout}");
        return;
    }
    let dir = TempDir::new("cc-leaks");
    let compiler = hanging_compiler(dir.path(), &dir.path().join("cc1.pid"));
    let device = device_with(
        &compiler.display().to_string(),
        None,
        Duration::from_millis(100),
    );
    let count = |what: &str| {
        std::fs::read_dir(format!("/proc/self/{what}"))
            .unwrap()
            .count()
    };
    let timeout = |n: usize| {
        let err = device
            .compile_test_kernel(&add_kernel(n), "add_entry")
            .unwrap_err();
        matches!(err, RuntimeError::CompileTimedOut { .. })
    };
    assert!(
        timeout(1),
        "the first run sets up what stays (the version query)"
    );
    let before = (count("task"), count("fd"));
    let timeouts = (2..22).filter(|&n| timeout(n)).count();
    let after = (count("task"), count("fd"));
    assert_eq!(
        after, before,
        "(threads, descriptors) after 20 timeouts vs before"
    );
    println!("TIMEOUTS {timeouts}");
}

#[test]
fn a_background_child_holding_the_compilers_output_is_no_timeout() {
    let dir = TempDir::new("cc-background");
    let pid_file = dir.path().join("leftover.pid");
    let body = format!(
        "cc \"$@\" || exit $?\nsleep 300 &\necho $! > '{}'\nexit 0",
        pid_file.display()
    );
    let compiler = fake_compiler(dir.path(), "leaving-cc", &body);
    let limit = Duration::from_secs(60);
    let device = device_with(&compiler.display().to_string(), None, limit);
    let started = Instant::now();
    device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .expect("the compiler succeeded");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let leftover = pid_in(&pid_file);
    assert!(
        ends(leftover),
        "the compiler's leftover {leftover} was not stopped"
    );
}

#[test]
fn a_compiler_that_succeeds_without_an_object_is_reported_as_such() {
    let dir = TempDir::new("cc-silent");
    let silent = fake_compiler(dir.path(), "silent-cc", "exit 0");
    let device = device_with(&silent.display().to_string(), None, Duration::from_secs(60));
    let err = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::BadCompilerOutput { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("wrote no file at all and printed nothing"),
        "{message}"
    );
    assert!(!message.contains("bug in the code generator"), "{message}");

    let chatty = fake_compiler(dir.path(), "chatty-cc", "echo 'all done'; exit 0");
    let device = device_with(&chatty.display().to_string(), None, Duration::from_secs(60));
    let message = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err()
        .to_string();
    assert!(message.contains("it printed: all done"), "{message}");

    // A compiler that writes an object it was not asked for still fails loading, as before.
    let garbage = format!("{FIND_OUTPUT_PATH}\necho garbage > \"$out\"");
    let liar = fake_compiler(dir.path(), "garbage-cc", &garbage);
    let device = device_with(&liar.display().to_string(), None, Duration::from_secs(60));
    let err = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    assert!(
        matches!(err, RuntimeError::BadCompilerOutput { .. }),
        "{err:?}"
    );
}

#[test]
fn threads_beyond_the_cores_are_bounded_by_them_with_a_warning() {
    if !is_child() {
        let run = run_child(
            "threads_beyond_the_cores_are_bounded_by_them_with_a_warning",
            &[("THREADS", "100000")],
        );
        let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
        assert!(run.status.success(), "child failed\n{stdout}\n{stderr}");
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert!(stdout.contains(&format!("THREADS {cores}\n")), "{stdout}");
        assert!(
            stderr.contains(&format!(
                "THREADS=100000 asks for more threads than the {cores}"
            )),
            "{stderr}"
        );
        return;
    }
    let device = CpuDevice::from_env().expect("a bounded thread count is no error");
    println!("THREADS {}", device.default_threads());

    // Configured explicitly, a kernel may be split into more parts than there are cores;
    // they run in turns on at most one worker per core.
    let parts = 5000;
    let tasks = || std::fs::read_dir("/proc/self/task").unwrap().count();
    let before = tasks();
    let device = CpuDevice::with_config(CpuConfig {
        threads: parts,
        ..CpuConfig::default()
    });
    let (rows, cols) = (8, 3);
    let program = device
        .compile_test_kernel(&split_kernel(rows, cols, parts), "scale_rows_entry")
        .unwrap();
    let out = device.allocate(rows * cols * 4).unwrap();
    let owner = device.allocate(rows * 4).unwrap();
    let x = device.allocate(rows * cols * 4).unwrap();
    device
        .copy_in_elements(&x, &vec![1.0f32; rows * cols])
        .unwrap();
    // SAFETY: `split_kernel` indexes `rows * cols` floats of `out` and `x` and `rows` ints of
    // `owner`, the sizes allocated, and is written for `parts` parts.
    unsafe { device.launch_unchecked(&program, &[&out, &owner, &x], Launch::Cores(parts)) }
        .unwrap();
    let values: Vec<f32> = device.copy_out_elements(&out, DType::F32).unwrap();
    let expected: Vec<f32> = (0..rows * cols).map(|i| 2.0 + (i / cols) as f32).collect();
    assert_eq!(values, expected);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let started = tasks() - before;
    assert!(started < cores, "{started} workers for {cores} cores");
}

#[test]
fn malformed_settings_are_errors_naming_the_variable() {
    if !is_child() {
        let cases = [
            ("TENSOR_PLAN_CACHE_SIZE", "0"),
            ("TENSOR_PROGRAM_CACHE_SIZE", "0"),
            ("TENSOR_PLAN_CACHE_SIZE", "many"),
            ("DEBUG", "verbose"),
            ("NOOPT", "yes"),
            ("THREADS", "-1"),
            ("TENSOR_COMPILE_TIMEOUT", "0"),
        ];
        for (variable, value) in cases {
            let run = run_child(
                "malformed_settings_are_errors_naming_the_variable",
                &[(variable, value)],
            );
            let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
            assert!(run.status.success(), "child failed\n{stdout}\n{stderr}");
            let wanted = format!("REFUSED {variable}\nREFUSED {variable}\n");
            assert!(stdout.contains(&wanted), "{variable}={value}: {stdout}");
            assert!(!stderr.contains("warning"), "{variable}={value}: {stderr}");
        }
        return;
    }
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    // On the selected device, and on one the tensor is tied to.
    for y in [&x + &x, x.to("CPU") + 1.0] {
        match tensor_runtime::realize::to_vec::<f32>(&y).unwrap_err() {
            RuntimeError::InvalidSetting { variable, .. } => println!("REFUSED {variable}"),
            other => panic!("not a setting error: {other}"),
        }
    }
}

/// What a child with a full `TMPDIR` does: build a kernel (in the cache directory, since the
/// temp dir cannot hold it) and check its value.
fn build_with_a_full_tmpdir() {
    let device = CpuDevice::from_env().unwrap();
    let program = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap();
    let buffers = [0; 3].map(|_| device.allocate(16).unwrap());
    device
        .copy_in_elements(&buffers[1], &[1.0f32, 2.0, 3.0, 4.0])
        .unwrap();
    device
        .copy_in_elements(&buffers[2], &[0.5f32, 0.25, 0.0, -4.0])
        .unwrap();
    let [out, a, b] = &buffers;
    // SAFETY: the kernel reads 4 floats of `a` and `b` and writes 4 of `out`, three distinct
    // 16-byte allocations, as one part.
    unsafe { device.launch_unchecked(&program, &[out, a, b], Launch::Cores(1)) }.unwrap();
    let sum: Vec<f32> = device.copy_out_elements(out, DType::F32).unwrap();
    assert_eq!(sum, vec![1.5, 2.25, 3.0, 0.0]);
    println!("BUILT {}", device.compile_counts().compiler_invocations);
}

#[test]
fn a_full_tmpdir_falls_back_to_the_cache_directory() {
    if is_child() {
        return build_with_a_full_tmpdir();
    }
    let dir = TempDir::new("full-tmp");
    let (tmp, cache) = (dir.path().join("tmp"), dir.path().join("cache"));
    std::fs::create_dir(&tmp).unwrap();
    // A 64 KiB file system, filled up, in a mount namespace of the child's own.
    let script = "mount -t tmpfs -o size=64k tmpfs \"$TMPDIR\" || exit 1\n\
                  head -c 1048576 /dev/zero > \"$TMPDIR/fill\" 2>/dev/null\n\
                  exec \"$@\"";
    let test = "a_full_tmpdir_falls_back_to_the_cache_directory";
    let namespace = ["--user", "--map-root-user", "--mount"];
    let probe = Command::new("unshare")
        .args(namespace)
        .args(["sh", "-c", "mount -t tmpfs -o size=64k tmpfs \"$0\""])
        .arg(&tmp)
        .output();
    if !probe.as_ref().is_ok_and(|p| p.status.success()) {
        // No user or mount namespaces here: no file system to fill without privileges.
        println!("skipped: {test}: cannot mount a small file system here ({probe:?})");
        return;
    }
    let run = Command::new("unshare")
        .args(namespace)
        .args(["sh", "-c", script, "sh"])
        .arg(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("TMPDIR", &tmp)
        .env("TENSOR_CACHE_DIR", &cache)
        .env("CC", "cc")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "child failed\n{stdout}\n{stderr}");
    // One run in the full temp dir (counted, though it failed), one in the cache directory.
    assert!(stdout.contains("BUILT 2"), "{stdout}");
    assert!(stderr.contains("cannot build kernels in"), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
}

#[test]
fn a_compiler_out_of_space_in_tmpdir_builds_in_the_cache_directory() {
    let dir = TempDir::new("cc-nospace");
    let (tmp, cache) = (dir.path().join("tmp"), dir.path().join("cache"));
    std::fs::create_dir(&tmp).unwrap();
    // Fails as gcc does when its TMPDIR is full, wherever that is the configured temp dir.
    let body = format!(
        "case \"$TMPDIR\" in '{}'*) echo 'cc1: fatal error: cannot write: No space left on \
         device' >&2; exit 1;; esac\nexec cc \"$@\"",
        tmp.display()
    );
    let compiler = fake_compiler(dir.path(), "full-tmp-cc", &body);
    let device = CpuDevice::with_config(CpuConfig {
        compiler: compiler.display().to_string(),
        cache_dir: Some(cache.clone()),
        temp_dir: tmp.clone(),
        ..CpuConfig::default()
    });
    device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap();
    assert_eq!(device.compile_counts().compiler_invocations, 2);
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "build dirs are removed"
    );

    // Without a cache directory to fall back to, the error says what is full.
    let stranded = CpuDevice::with_config(CpuConfig {
        compiler: compiler.display().to_string(),
        temp_dir: tmp.clone(),
        ..CpuConfig::default()
    });
    let message = stranded
        .compile_test_kernel(&add_kernel(5), "add_entry")
        .unwrap_err()
        .to_string();
    assert!(message.contains("No space left on device"), "{message}");
    assert!(message.contains(&tmp.display().to_string()), "{message}");
    assert!(message.contains("TMPDIR"), "{message}");
}

/// A shared object that, once loaded, creates the file `$PLANTED_MARKER`: what another user
/// could plant as `libnvrtc.so.12`.
fn planted_library(path: &Path) {
    let source = path.with_extension("c");
    std::fs::write(
        &source,
        "#include <stdio.h>\n#include <stdlib.h>\n\
         __attribute__((constructor)) static void planted(void) {\n\
           const char* marker = getenv(\"PLANTED_MARKER\");\n\
           FILE* f = marker ? fopen(marker, \"w\") : NULL;\n\
           if (f) fclose(f);\n\
         }\n",
    )
    .unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(path)
        .arg(&source)
        .status()
        .unwrap();
    assert!(built.success());
}

#[test]
fn cuda_tools_planted_around_the_working_directory_are_never_loaded() {
    if is_child() {
        let loaded = tensor_runtime::cuda::nvrtc::nvrtc_available();
        println!(
            "NVRTC {}",
            loaded.map_or_else(|e| e.to_string(), |()| "ok".into())
        );
        println!("PTXAS {:?}", tensor_runtime::cuda::nvrtc::ptxas_path());
        return;
    }
    let dir = TempDir::new("planted-cuda");
    let site = dir
        .path()
        .join(".cuda-venv/lib/python3.12/site-packages/nvidia");
    let lib_dir = site.join("cuda_nvrtc/lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    let planted = lib_dir.join("libnvrtc.so.12");
    planted_library(&planted);
    std::fs::create_dir_all(site.join("cuda_nvcc")).unwrap();
    fake_compiler(&site.join("cuda_nvcc"), "ptxas", "exit 0");
    let working_dir = dir.path().join("project/src");
    std::fs::create_dir_all(&working_dir).unwrap();
    let marker = dir.path().join("planted-code-ran");

    let run = |explicit: Option<&Path>| {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "cuda_tools_planted_around_the_working_directory_are_never_loaded",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .current_dir(&working_dir)
            .env(CHILD, "1")
            .env("PLANTED_MARKER", &marker)
            .env_remove("TENSOR_PTXAS")
            .env_remove("TENSOR_NVRTC")
            .env_remove("LD_LIBRARY_PATH");
        if let Some(path) = explicit {
            command.env("TENSOR_NVRTC", path);
        }
        let output = command.output().unwrap();
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert!(output.status.success(), "child failed\n{stdout}\n{stderr}");
        stdout
    };
    let stdout = run(None);
    assert!(!marker.exists(), "the planted library ran: {stdout}");
    let ptxas = stdout
        .lines()
        .find(|l| l.starts_with("PTXAS "))
        .unwrap_or("");
    assert!(
        ptxas.starts_with("PTXAS ") && !ptxas.contains(".cuda-venv"),
        "{stdout}"
    );

    // Named explicitly, the same file is the user's choice and is loaded.
    let stdout = run(Some(&planted));
    assert!(marker.exists(), "TENSOR_NVRTC was not loaded: {stdout}");
}

#[test]
fn broadcasting_to_size_one_is_refused_in_plain_words() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    let message = x.try_expand(&[1usize]).unwrap_err().to_string();
    assert_eq!(
        message,
        "expand: cannot expand shape [3] to [1]: axis 0 has size 3, which is not 1"
    );
    let message = x.try_expand(&[2usize]).unwrap_err().to_string();
    assert!(
        message.ends_with("axis 0 has size 3, which is neither 1 nor 2"),
        "{message}"
    );
}

#[test]
fn a_hung_ptxas_is_stopped_with_everything_it_started() {
    if is_child() {
        let err = tensor_runtime::cuda::nvrtc::assemble("// no PTX", "sm_80").unwrap_err();
        assert!(matches!(err, RuntimeError::CompileTimedOut { .. }), "{err}");
        println!("STOPPED {err}");
        return;
    }
    let dir = TempDir::new("hung-ptxas");
    let pid_file = dir.path().join("ptxas-child.pid");
    let ptxas = hanging_compiler(dir.path(), &pid_file);
    let started = Instant::now();
    let run = run_child(
        "a_hung_ptxas_is_stopped_with_everything_it_started",
        &[
            ("TENSOR_PTXAS", &ptxas.display().to_string()),
            ("TENSOR_COMPILE_TIMEOUT", "0.3"),
        ],
    );
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert!(run.status.success(), "child failed\n{stdout}\n{stderr}");
    assert!(stdout.contains("STOPPED"), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let worker = pid_in(&pid_file);
    assert!(ends(worker), "ptxas's child {worker} outlived the timeout");
}
