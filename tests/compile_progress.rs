//! The progress of a cold compile on stderr (`TENSOR_PROGRESS`): each test runs a small
//! graph in a child process (this test binary again) with an empty kernel cache, so its
//! kernels are compiled, and reads what the child wrote to stderr. The child's stderr is a
//! pipe, so the progress comes as plain lines. The progress is the C compiler's, so the child
//! computes on the CPU whatever `DEVICE` the suite runs with.

use std::path::PathBuf;
use std::process::Command;
use tensor::prelude::*;
use tensor::runtime::realize::to_vec;

/// Set in the child process, where the graph is computed.
const CHILD: &str = "COMPILE_PROGRESS_CHILD";

/// What the child run of `tensor_progress` wrote to stderr, and whether it succeeded.
fn child_run(tensor_progress: &str) -> (String, bool) {
    let cache = fresh_cache_dir(tensor_progress);
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["computes_a_graph_in_the_child", "--exact", "--nocapture"])
        .arg("--test-threads=1")
        .env(CHILD, "1")
        .env("TENSOR_CACHE_DIR", &cache)
        .env("TENSOR_PROGRESS", tensor_progress)
        .env("DEVICE", "CPU")
        .env_remove("DEBUG")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&cache);
    (
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.success(),
    )
}

/// An empty directory of this process for a child's kernel cache.
fn fresh_cache_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tensor-compile-progress-{}-{tag}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The lines of `stderr` that report compile progress.
fn progress_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|line| line.contains("compiling kernels"))
        .collect()
}

#[test]
fn computes_a_graph_in_the_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[4]);
    let total = x.exp().sum(0, false);
    let centred = &x - &(x.sum(0, false) / 4.0);
    let scaled = (&centred * &total).sqrt();
    scaled.realize().unwrap();
    let values = to_vec::<f32>(&scaled).unwrap();
    let sum_exp: f32 = [1.0f32, 2.0, 3.0, 4.0].iter().map(|v| v.exp()).sum();
    assert!(
        (values[3] - (1.5 * sum_exp).sqrt()).abs() < 1e-3,
        "{values:?}"
    );
}

#[test]
fn a_cold_compile_shown_from_its_start_reports_kernels_done_out_of_all() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let (stderr, ok) = child_run("always");
    assert!(ok, "the child failed:\n{stderr}");
    let lines = progress_lines(&stderr);
    let (first, last) = (lines.first().unwrap(), lines.last().unwrap());
    let counts = |line: &str| -> (usize, usize) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (done, total) = words[2].split_once('/').unwrap();
        (done.parse().unwrap(), total.parse().unwrap())
    };
    assert!(first.starts_with("compiling kernels: "), "{stderr}");
    let (done, total) = counts(last);
    assert!(total >= 1 && done == total, "{stderr}");
    assert!(last.contains(&format!("{total}/{total} in ")), "{stderr}");
    assert!(lines.iter().all(|line| counts(line).1 == total), "{stderr}");
    assert!(
        lines.len() <= 6,
        "one line to start, one a quarter and the last at most:\n{stderr}"
    );
    assert!(
        !stderr.contains('\r'),
        "no terminal redraws in a pipe:\n{stderr}"
    );
}

#[test]
fn tensor_progress_0_turns_the_progress_off() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let (stderr, ok) = child_run("0");
    assert!(ok, "the child failed:\n{stderr}");
    assert_eq!(progress_lines(&stderr), Vec::<&str>::new(), "{stderr}");
}

#[test]
fn a_malformed_tensor_progress_is_an_error_naming_it() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let (stderr, ok) = child_run("sometimes");
    assert!(
        !ok,
        "the child computed with TENSOR_PROGRESS=sometimes:\n{stderr}"
    );
    assert!(stderr.contains("TENSOR_PROGRESS"), "{stderr}");
}
