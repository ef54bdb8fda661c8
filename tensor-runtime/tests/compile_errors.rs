//! Compiler faults come back as errors that say what went wrong, never as crashes.

mod common;

use common::CompileTestKernel;

use common::{FIND_OUTPUT_PATH, TempDir, add_kernel, device, fake_compiler};
use std::time::{Duration, Instant};
use tensor_runtime::RuntimeError;

#[test]
fn missing_compiler_is_an_error_naming_it() {
    let device = device("/nonexistent", None, 1);
    let err = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    assert!(
        matches!(&err, RuntimeError::CompilerNotFound { compiler } if compiler == "/nonexistent"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("`/nonexistent` not found"), "{message}");
    assert!(message.contains("set CC"), "{message}");
}

#[test]
fn syntax_error_reports_the_source_and_the_compiler_output() {
    let cache = TempDir::new("syntax");
    let device = device("cc", Some(cache.path()), 1);
    let source = "void broken_entry(void** bufs, int core_id) { return 1 +; }\n";
    let err = device
        .compile_test_kernel(source, "broken_entry")
        .unwrap_err();
    let RuntimeError::CompileFailed {
        compiler, output, ..
    } = &err
    else {
        panic!("expected CompileFailed, got {err:?}");
    };
    assert_eq!(compiler, "cc");
    assert!(output.contains("broken_entry.c"), "{output}");
    assert!(output.contains("error"), "{output}");
    let message = err.to_string();
    assert!(message.contains(source), "{message}");
    assert!(message.contains(output.as_str()), "{message}");
    // Nothing was cached for a failed build.
    let cpu_dir = cache.path().join("cpu");
    let entries = std::fs::read_dir(&cpu_dir).map_or(0, |d| d.count());
    assert_eq!(entries, 0);
}

#[test]
fn unknown_entry_name_is_an_error_naming_it() {
    let device = device("cc", None, 1);
    let err = device
        .compile_test_kernel(&add_kernel(4), "missing_entry")
        .unwrap_err();
    assert!(
        matches!(&err, RuntimeError::EntryNotFound { entry, .. } if entry == "missing_entry"),
        "{err:?}"
    );
}

#[test]
fn compiler_that_fails_to_report_its_version_is_unusable() {
    let device = device("false", None, 1);
    let err = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    assert!(
        matches!(&err, RuntimeError::CompilerUnusable { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("set CC"), "{err}");
}

/// A device building with the fake compiler `compiler`, caching in `cache`.
fn fake_device(compiler: &std::path::Path, cache: &std::path::Path) -> tensor_runtime::CpuDevice {
    tensor_runtime::CpuDevice::with_config(tensor_runtime::CpuConfig {
        compiler: compiler.display().to_string(),
        cache_dir: Some(cache.to_path_buf()),
        compile_timeout: Duration::from_secs(1),
        ..Default::default()
    })
}

fn cache_entries(cache: &std::path::Path) -> usize {
    std::fs::read_dir(cache.join("cpu")).map_or(0, |d| {
        d.filter(|e| {
            let path = e.as_ref().unwrap().path();
            path.extension().is_some_and(|x| x == "kernel")
        })
        .count()
    })
}

#[test]
fn hanging_compiler_is_stopped_at_the_time_limit() {
    let dir = TempDir::new("hanging-cc");
    // Not `exec`: the orphaned `sleep` keeps the compiler's pipes open after the kill.
    let cc = fake_compiler(dir.path(), "hanging-cc", "sleep 30");
    let device = fake_device(&cc, &dir.path().join("cache"));
    let started = Instant::now();
    let err = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "waited for the orphan"
    );
    assert!(
        matches!(&err, RuntimeError::CompileTimedOut { limit, .. } if *limit == Duration::from_secs(1)),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("hanging-cc"), "{message}");
    assert!(message.contains("within 1 s"), "{message}");
    assert!(message.contains("TENSOR_COMPILE_TIMEOUT"), "{message}");
}

#[test]
fn crashing_compiler_is_blamed_not_the_code_generator() {
    let dir = TempDir::new("crashing-cc");
    let cc = fake_compiler(
        dir.path(),
        "crashing-cc",
        "echo 'about to crash' >&2\nkill -SEGV $$",
    );
    let device = fake_device(&cc, &dir.path().join("cache"));
    let err = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    let RuntimeError::CompilerCrashed { status, output, .. } = &err else {
        panic!("expected CompilerCrashed, got {err:?}");
    };
    assert!(status.contains("SIGSEGV"), "{status}");
    assert!(output.contains("about to crash"), "{output}");
    let message = err.to_string();
    assert!(message.contains("crashing-cc"), "{message}");
    assert!(message.contains("fault of the compiler"), "{message}");
    assert!(!message.contains("bug in the code generator"), "{message}");
}

#[test]
fn garbage_from_the_compiler_is_never_cached() {
    let dir = TempDir::new("garbage-cc");
    let body = format!("{FIND_OUTPUT_PATH}\necho 'not an object' > \"$out\"");
    let cc = fake_compiler(dir.path(), "garbage-cc", &body);
    let cache = dir.path().join("cache");
    let device = fake_device(&cc, &cache);
    let err = device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    assert!(
        matches!(&err, RuntimeError::BadCompilerOutput { compiler, .. } if compiler.contains("garbage-cc")),
        "{err:?}"
    );
    assert!(err.to_string().contains("nothing was cached"), "{err}");
    assert_eq!(cache_entries(&cache), 0);
    // A second attempt runs the compiler again instead of loading a cached copy.
    device
        .compile_test_kernel(&add_kernel(4), "add_entry")
        .unwrap_err();
    assert_eq!(device.compile_counts().compiler_invocations, 2);
    assert_eq!(device.compile_counts().disk_cache_hits, 0);
}
