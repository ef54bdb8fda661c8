//! The one error type of the runtime: every device, compiler, cache and I/O fault, each with a
//! message that says what happened and what the user can do about it.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;
use tensor_core::DType;

/// Every fault the runtime reports instead of crashing.
#[derive(Debug)]
pub enum RuntimeError {
    /// The C compiler could not be started because no such program exists.
    CompilerNotFound {
        /// The command that was tried.
        compiler: String,
    },
    /// The C compiler exists but does not work (e.g. `--version` fails).
    CompilerUnusable {
        /// The command that was tried.
        compiler: String,
        /// What it printed.
        output: String,
    },
    /// The C compiler ran and rejected the generated source.
    CompileFailed {
        /// The command that ran.
        compiler: String,
        /// The generated C source.
        source: String,
        /// The compiler's messages.
        output: String,
    },
    /// The C compiler did not finish within the compile time limit and was stopped.
    CompileTimedOut {
        /// The command that ran.
        compiler: String,
        /// The limit it ran past (`TENSOR_COMPILE_TIMEOUT`).
        limit: Duration,
    },
    /// The C compiler crashed (killed by a signal, or an internal compiler error): a fault of
    /// the compiler, not of the kernel it was given.
    CompilerCrashed {
        /// The command that ran.
        compiler: String,
        /// How it ended (the signal or exit status).
        status: String,
        /// What it printed.
        output: String,
    },
    /// The C compiler reported success but wrote something that cannot be loaded.
    BadCompilerOutput {
        /// The command that ran.
        compiler: String,
        /// What is wrong with its output.
        reason: String,
    },
    /// The on-disk kernel cache could not be used (only reported where no fallback exists).
    Cache {
        /// The cache file or directory.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// An operating-system I/O call failed; `context` says what the runtime was doing.
    Io {
        /// What the runtime was doing.
        context: String,
        /// The operating system's error.
        error: std::io::Error,
    },
    /// A compiled shared object could not be loaded.
    Load {
        /// The shared object.
        path: PathBuf,
        /// The loader's message.
        reason: String,
    },
    /// A compiled program has no function with the requested entry name.
    EntryNotFound {
        /// The function name looked up.
        entry: String,
        /// The loader's message.
        reason: String,
    },
    /// Typed data was requested as one element type from a buffer holding another.
    WrongElementType {
        /// The element type asked for.
        expected: DType,
        /// The buffer's element type.
        found: DType,
    },
    /// A copy or launch did not fit the buffer it addressed.
    SizeMismatch {
        /// The copy or launch.
        operation: &'static str,
        /// The buffer's size.
        buffer_bytes: usize,
        /// The size the operation needed.
        data_bytes: usize,
    },
    /// A launch asked for something the device cannot do (e.g. zero threads).
    InvalidLaunch(String),
    /// An argument of a runtime call cannot be served (a shape whose element count or byte
    /// size overflows the address space, for one); the message names the call.
    InvalidArgument(String),
    /// A setting read from the environment is malformed.
    InvalidSetting {
        /// The environment variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What it should look like.
        expected: &'static str,
    },
    /// The device (or its driver) is not present on this machine.
    DeviceUnavailable(String),
    /// A graph cannot run on one device: it reads values tied to two (`Tensor::to`), or names
    /// a device that does not exist.
    Placement(String),
    /// An external host function panicked or returned results that do not match its call.
    External(String),
    /// The device could not allocate a buffer of this many bytes.
    OutOfMemory {
        /// The device's name.
        device: String,
        /// The size of the allocation that failed.
        bytes: usize,
    },
}

/// The result of every fallible runtime call.
pub type Result<T> = std::result::Result<T, RuntimeError>;

impl RuntimeError {
    /// An I/O error with a description of the operation that failed.
    pub fn io(context: impl Into<String>, error: std::io::Error) -> RuntimeError {
        RuntimeError::Io {
            context: context.into(),
            error,
        }
    }

    /// A copy of this error for another caller that waited on the same work (an I/O error is
    /// copied as its kind and message).
    pub(crate) fn duplicate(&self) -> RuntimeError {
        use RuntimeError as E;
        match self {
            E::Io { context, error } => E::Io {
                context: context.clone(),
                error: std::io::Error::new(error.kind(), error.to_string()),
            },
            E::CompilerNotFound { compiler } => E::CompilerNotFound {
                compiler: compiler.clone(),
            },
            E::CompilerUnusable { compiler, output } => E::CompilerUnusable {
                compiler: compiler.clone(),
                output: output.clone(),
            },
            E::CompileFailed {
                compiler,
                source,
                output,
            } => E::CompileFailed {
                compiler: compiler.clone(),
                source: source.clone(),
                output: output.clone(),
            },
            E::CompileTimedOut { compiler, limit } => E::CompileTimedOut {
                compiler: compiler.clone(),
                limit: *limit,
            },
            E::CompilerCrashed {
                compiler,
                status,
                output,
            } => E::CompilerCrashed {
                compiler: compiler.clone(),
                status: status.clone(),
                output: output.clone(),
            },
            E::BadCompilerOutput { compiler, reason } => E::BadCompilerOutput {
                compiler: compiler.clone(),
                reason: reason.clone(),
            },
            E::Cache { path, reason } => E::Cache {
                path: path.clone(),
                reason: reason.clone(),
            },
            E::Load { path, reason } => E::Load {
                path: path.clone(),
                reason: reason.clone(),
            },
            E::EntryNotFound { entry, reason } => E::EntryNotFound {
                entry: entry.clone(),
                reason: reason.clone(),
            },
            E::WrongElementType { expected, found } => E::WrongElementType {
                expected: *expected,
                found: *found,
            },
            E::SizeMismatch {
                operation,
                buffer_bytes,
                data_bytes,
            } => E::SizeMismatch {
                operation,
                buffer_bytes: *buffer_bytes,
                data_bytes: *data_bytes,
            },
            E::InvalidLaunch(why) => E::InvalidLaunch(why.clone()),
            E::InvalidArgument(why) => E::InvalidArgument(why.clone()),
            E::External(why) => E::External(why.clone()),
            E::InvalidSetting {
                variable,
                value,
                expected,
            } => E::InvalidSetting {
                variable,
                value: value.clone(),
                expected,
            },
            E::DeviceUnavailable(why) => E::DeviceUnavailable(why.clone()),
            E::Placement(why) => E::Placement(why.clone()),
            E::OutOfMemory { device, bytes } => E::OutOfMemory {
                device: device.clone(),
                bytes: *bytes,
            },
        }
    }
}

/// The positive integer an environment variable's `value` holds, `default` if it is unset,
/// and [`RuntimeError::InvalidSetting`] if it is anything else.
pub(crate) fn positive_setting(
    variable: &'static str,
    value: Option<String>,
    default: u64,
) -> Result<u64> {
    let Some(value) = value else {
        return Ok(default);
    };
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or(RuntimeError::InvalidSetting {
            variable,
            value,
            expected: "a positive whole number",
        })
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::CompilerNotFound { compiler } => write!(
                f,
                "C compiler `{compiler}` not found: install gcc or clang, or set CC to a C compiler"
            ),
            RuntimeError::CompilerUnusable { compiler, output } => write!(
                f,
                "C compiler `{compiler}` does not work (`{compiler} --version` failed): \
                 {output}\nset CC to a working C compiler"
            ),
            RuntimeError::CompileFailed {
                compiler,
                source,
                output,
            } => write!(
                f,
                "C compiler `{compiler}` rejected a generated kernel; this is a bug in the code \
                 generator, please report it with the text below\n\
                 --- compiler output ---\n{output}\n--- kernel source ---\n{source}"
            ),
            RuntimeError::CompileTimedOut { compiler, limit } => write!(
                f,
                "C compiler `{compiler}` did not finish within {} s and was stopped; if it is \
                 only slow (a large kernel, a busy machine), raise the limit with \
                 TENSOR_COMPILE_TIMEOUT=<seconds>; if it hangs, set CC to a working compiler",
                limit.as_secs_f64()
            ),
            RuntimeError::CompilerCrashed {
                compiler,
                status,
                output,
            } => write!(
                f,
                "C compiler `{compiler}` crashed ({status}); this is a fault of the compiler, \
                 not of the generated kernel: check its installation and the free memory, or \
                 set CC to another C compiler\n--- compiler output ---\n{output}"
            ),
            RuntimeError::BadCompilerOutput { compiler, reason } => write!(
                f,
                "C compiler `{compiler}` reported success but wrote no loadable shared object \
                 ({reason}); nothing was cached. Check that CC builds shared objects for this \
                 machine (it is run with -fPIC -shared), or set CC to another C compiler"
            ),
            RuntimeError::Cache { path, reason } => write!(
                f,
                "kernel cache at `{}` is unusable: {reason}; set TENSOR_CACHE_DIR to a writable \
                 directory",
                path.display()
            ),
            RuntimeError::Io { context, error } => write!(f, "{context}: {error}"),
            RuntimeError::Load { path, reason } => write!(
                f,
                "could not load compiled kernel `{}`: {reason}; clear the kernel cache \
                 (TENSOR_CACHE_DIR) and retry",
                path.display()
            ),
            RuntimeError::EntryNotFound { entry, reason } => write!(
                f,
                "compiled kernel has no entry point `{entry}` ({reason}); the entry name given \
                 to compile must be the name of the C function `void {entry}(void**, int)`"
            ),
            RuntimeError::WrongElementType { expected, found } => write!(
                f,
                "buffer holds {found:?} elements but {expected:?} were requested; read it as \
                 {found:?} or cast the tensor first"
            ),
            RuntimeError::SizeMismatch {
                operation,
                buffer_bytes,
                data_bytes,
            } => write!(
                f,
                "{operation}: buffer has {buffer_bytes} bytes but the data has {data_bytes} bytes"
            ),
            RuntimeError::InvalidLaunch(why) => write!(f, "invalid kernel launch: {why}"),
            RuntimeError::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            RuntimeError::External(why) => write!(f, "{why}"),
            RuntimeError::InvalidSetting {
                variable,
                value,
                expected,
            } => write!(
                f,
                "environment variable {variable}=`{value}` is invalid: expected {expected}"
            ),
            RuntimeError::DeviceUnavailable(why) => write!(f, "device unavailable: {why}"),
            RuntimeError::Placement(why) => write!(f, "cannot place the graph on a device: {why}"),
            RuntimeError::OutOfMemory { device, bytes } => write!(
                f,
                "{device} could not allocate a buffer of {bytes} bytes: the computation needs \
                 more memory than is available; use smaller tensors or fewer at once"
            ),
        }
    }
}

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RuntimeError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_compiler_message_names_it_and_the_fix() {
        let msg = RuntimeError::CompilerNotFound {
            compiler: "/nonexistent".into(),
        }
        .to_string();
        assert!(msg.contains("`/nonexistent` not found"), "{msg}");
        assert!(msg.contains("set CC"), "{msg}");
    }

    #[test]
    fn positive_setting_reads_whole_numbers_and_names_the_variable_otherwise() {
        assert_eq!(positive_setting("X", None, 7).unwrap(), 7);
        assert_eq!(positive_setting("X", Some(" 12\n".into()), 7).unwrap(), 12);
        for bad in ["0", "-3", "1.5", "lots", ""] {
            let err = positive_setting("TENSOR_X", Some(bad.into()), 7).unwrap_err();
            assert!(err.to_string().contains("TENSOR_X"), "{err}");
        }
    }

    #[test]
    fn duplicated_error_reads_the_same() {
        let error = RuntimeError::io("reading `x`", std::io::Error::other("disk on fire"));
        assert_eq!(error.duplicate().to_string(), error.to_string());
        let timed_out = RuntimeError::CompileTimedOut {
            compiler: "cc".into(),
            limit: Duration::from_secs(2),
        };
        assert_eq!(timed_out.duplicate().to_string(), timed_out.to_string());
    }

    #[test]
    fn wrong_element_type_message_names_both_types() {
        let msg = RuntimeError::WrongElementType {
            expected: DType::F32,
            found: DType::I32,
        }
        .to_string();
        assert!(msg.contains("I32 elements but F32 were requested"), "{msg}");
    }
}
