//! Settings: the one door through which the library reads its environment.
//!
//! Every variable the library (this crate and the `tensor` facade) reads is named in
//! [`OURS`], [`COMPILER`] or [`FOREIGN`], and read here alone: the first read takes one snapshot of all of
//! them, so a setting never changes under a running program, a plan replay pays no lock or
//! allocation for it, and the table users read (`docs/environment.md`, which a test keeps
//! in step with [`OURS`]) is the whole list. What a value means, and the error for a
//! malformed one, stay with the module that uses it (`THREADS` in `cpu`, `DEVICE` in
//! `realize`, ...).

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::OnceLock;

/// The variables that are the library's own switches, each with a row in
/// `docs/environment.md`.
pub const OURS: &[&str] = &[
    "DEBUG",
    "DEVICE",
    "NOOPT",
    "BEAM",
    "THREADS",
    "CC",
    "TENSOR_CACHE_DIR",
    "TENSOR_CACHE_MAX_BYTES",
    "TENSOR_PROGRAM_CACHE_SIZE",
    "TENSOR_PLAN_CACHE_SIZE",
    "TENSOR_DEVICE_POOL_BYTES",
    "TENSOR_COMPILE_TIMEOUT",
    "TENSOR_PROGRESS",
    "TENSOR_VECTOR_WIDTH",
    "TENSOR_NVRTC",
    "TENSOR_PTXAS",
    "TENSOR_CUDA_TIMES",
    "TENSOR_DIST",
    "TENSOR_NCCL_ID_FILE",
];

/// The C compiler's own search variables, which change what it builds from the same
/// command: part of the kernel cache key (`cpu::compiler_identity`).
pub const COMPILER: &[&str] = &[
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
    "CPATH",
    "C_INCLUDE_PATH",
    "LIBRARY_PATH",
    "SDKROOT",
];

/// Other variables other programs define that the library consults: where the user's cache
/// and programs are, and the ranks that MPI launchers and `torchrun` set.
pub const FOREIGN: &[&str] = &[
    "HOME",
    "XDG_CACHE_HOME",
    "PATH",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_SIZE",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
];

/// The value of `name` as the process had it at the first read of any setting; `None` when
/// unset or not valid Unicode.
///
/// # Panics
///
/// When `name` is in none of [`OURS`], [`COMPILER`] and [`FOREIGN`]: a variable is added to a table (and
/// to `docs/environment.md`) before the code reads it.
#[track_caller]
pub fn var(name: &str) -> Option<String> {
    var_os(name).and_then(|v| v.into_string().ok())
}

/// [`var`] as the operating system holds it (paths need not be Unicode).
///
/// # Panics
///
/// As [`var`].
#[track_caller]
pub fn var_os(name: &str) -> Option<OsString> {
    assert!(
        [OURS, COMPILER, FOREIGN]
            .iter()
            .any(|table| table.contains(&name)),
        "settings: `{name}` is read but in no table of tensor_runtime::settings; add it there \
         (and to docs/environment.md)"
    );
    snapshot().get(name).cloned()
}

/// The verbosity `DEBUG` asks for (0 when unset or malformed; a malformed value is an error
/// at every realize, `crate::switches`), parsed once.
pub fn debug_level() -> u32 {
    static LEVEL: OnceLock<u32> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        var("DEBUG")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    })
}

fn snapshot() -> &'static HashMap<&'static str, OsString> {
    static SNAPSHOT: OnceLock<HashMap<&'static str, OsString>> = OnceLock::new();
    SNAPSHOT.get_or_init(|| {
        OURS.iter()
            .chain(COMPILER)
            .chain(FOREIGN)
            .filter_map(|&name| std::env::var_os(name).map(|value| (name, value)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_variable_is_in_both_tables_or_twice() {
        let mut all: Vec<&str> = OURS
            .iter()
            .chain(COMPILER)
            .chain(FOREIGN)
            .copied()
            .collect();
        all.sort_unstable();
        let before = all.len();
        all.dedup();
        assert_eq!(all.len(), before);
    }

    #[test]
    fn a_variable_outside_the_tables_is_refused() {
        let refused = std::panic::catch_unwind(|| var("TENSOR_NO_SUCH_SETTING"));
        assert!(refused.is_err());
        assert_eq!(var("PATH"), std::env::var("PATH").ok());
    }
}
