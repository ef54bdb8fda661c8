//! Compiler faults come back as errors that say what went wrong, never as crashes.

mod common;

use common::{TempDir, add_kernel, device};
use tensor_runtime::{Device, RuntimeError};

#[test]
fn missing_compiler_is_an_error_naming_it() {
    let device = device("/nonexistent", None, 1);
    let err = device.compile(&add_kernel(4), "add_entry").unwrap_err();
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
    let err = device.compile(source, "broken_entry").unwrap_err();
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
    let err = device.compile(&add_kernel(4), "missing_entry").unwrap_err();
    assert!(
        matches!(&err, RuntimeError::EntryNotFound { entry, .. } if entry == "missing_entry"),
        "{err:?}"
    );
}

#[test]
fn compiler_that_fails_to_report_its_version_is_unusable() {
    let device = device("false", None, 1);
    let err = device.compile(&add_kernel(4), "add_entry").unwrap_err();
    assert!(
        matches!(&err, RuntimeError::CompilerUnusable { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("set CC"), "{err}");
}
