//! A private temporary directory, removed with everything in it when dropped.
//!
//! The compiler writes its source and output here, and cached objects are copied here to be
//! loaded; once `dlopen` has mapped a library its file is no longer needed.

use crate::error::{Result, RuntimeError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A fresh directory under the system temp dir, owned by this process alone.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Creates a directory no other process or thread is using.
    pub fn new() -> Result<ScratchDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("tensor-build-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(ScratchDir { path }),
                // Left behind by a crashed process that had our pid; try the next name.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(RuntimeError::io(
                        format!(
                            "creating a build directory in `{}` (set TMPDIR to a writable \
                             directory)",
                            base.display()
                        ),
                        e,
                    ));
                }
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
