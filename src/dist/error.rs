//! [`DistError`]: every fault of a collective, with what to do about it.

use std::fmt;
use tensor_core::DType;
use tensor_runtime::RuntimeError;

/// A fault of [`Communicator`](super::Communicator): a backend this build lacks, a library
/// missing at run time, ranks that disagree on a call, or computing the values sent.
#[derive(Debug)]
pub enum DistError {
    /// The backend was not compiled in; `feature` is the cargo feature that adds it.
    NotBuilt {
        /// The backend asked for (`"mpi"`, `"nccl"`).
        backend: &'static str,
        /// The cargo feature that builds it.
        feature: &'static str,
        /// What the feature needs installed.
        needs: &'static str,
    },
    /// A shared library the backend loads at run time was not found.
    MissingLibrary {
        /// The backend.
        backend: &'static str,
        /// The library names tried.
        tried: String,
        /// How to install it.
        install: &'static str,
    },
    /// The backend reported a fault (initialization, a failed call).
    Backend {
        /// The backend.
        backend: &'static str,
        /// What failed.
        message: String,
    },
    /// The ranks did not make the same call with the same structure (shapes, dtypes, root):
    /// every rank returns this error instead of exchanging mismatched buffers.
    Mismatch {
        /// The call on this rank.
        call: &'static str,
        /// Which ranks differ.
        detail: String,
    },
    /// The dtype cannot take part in the call.
    DType {
        /// The call.
        call: &'static str,
        /// The dtype of a leaf.
        dtype: DType,
        /// Why not.
        reason: &'static str,
    },
    /// A launch setting (environment variable) is missing or malformed.
    Launch {
        /// The variable.
        variable: &'static str,
        /// What is wrong and what it should hold.
        message: String,
    },
    /// Computing the tensors to send failed.
    Runtime(RuntimeError),
}

impl DistError {
    #[cfg_attr(not(any(feature = "mpi", feature = "nccl")), allow(dead_code))]
    pub(crate) fn backend(backend: &'static str, message: impl Into<String>) -> Self {
        DistError::Backend {
            backend,
            message: message.into(),
        }
    }
}

impl fmt::Display for DistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistError::NotBuilt {
                backend,
                feature,
                needs,
            } => write!(
                f,
                "dist: this program was built without the {backend} backend; rebuild with \
                 `--features {feature}` (it needs {needs})"
            ),
            DistError::MissingLibrary {
                backend,
                tried,
                install,
            } => write!(
                f,
                "dist: the {backend} library could not be loaded (tried {tried}); {install}"
            ),
            DistError::Backend { backend, message } => write!(f, "dist ({backend}): {message}"),
            DistError::Mismatch { call, detail } => write!(
                f,
                "dist: `{call}` was called with different structures on different ranks \
                 ({detail}); every rank must make the same collective calls, in the same order, \
                 with trees of the same shapes and dtypes"
            ),
            DistError::DType {
                call,
                dtype,
                reason,
            } => write!(f, "dist: `{call}` of a {dtype:?} tensor: {reason}"),
            DistError::Launch { variable, message } => write!(f, "dist: ${variable}: {message}"),
            DistError::Runtime(e) => write!(f, "dist: computing the tensors to send failed: {e}"),
        }
    }
}

impl std::error::Error for DistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DistError::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

impl From<RuntimeError> for DistError {
    fn from(e: RuntimeError) -> Self {
        DistError::Runtime(e)
    }
}
