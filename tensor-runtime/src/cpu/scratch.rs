//! A private temporary directory, removed with everything in it when dropped.
//!
//! The compiler writes its source and output here, and cached objects are copied here to be
//! loaded; once `dlopen` has mapped a library its file is no longer needed.
//!
//! Directories are named `tensor-build-<pid>-<n>` after the process that made them. One left
//! behind by a process that was killed (say, `kill -9`) is removed the first time this process
//! makes a directory in the same place: when it is ours, its process no longer exists, and
//! it has not changed for a while (a process of another PID namespace sharing the directory
//! may look dead to us; it is not given a directory it is still using).

use crate::error::RuntimeError;
use crate::private_files::{create_private_dir, owned_by_current_user};
use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

const PREFIX: &str = "tensor-build-";

/// A build directory of a dead process that has not changed for this long is removed.
const STALE_AFTER: Duration = Duration::from_secs(600);

/// A fresh directory, owned by this process alone and private to its user.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Creates a directory under `base` that no other process or thread is using, after
    /// removing (once per `base`) what killed processes left there.
    pub fn new_in(base: &Path) -> io::Result<ScratchDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        sweep_once(base);
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("{PREFIX}{}-{n}", std::process::id()));
            match create_private_dir(&path) {
                Ok(()) => return Ok(ScratchDir { path }),
                // Left behind by a crashed process that had our pid; try the next name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
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
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Why `error` shows that a build directory's file system cannot hold a build's files (it is
/// full, over quota or read-only), or `None` if it is another failure: an I/O error of one of
/// those kinds, or a compiler that failed saying so.
pub fn lack_of_space(error: &RuntimeError) -> Option<String> {
    const COMPILER_SAYS: [&str; 3] = [
        "No space left on device",
        "Disk quota exceeded",
        "Read-only file system",
    ];
    match error {
        RuntimeError::Io { error, .. } => {
            use io::ErrorKind::{FileTooLarge, QuotaExceeded, ReadOnlyFilesystem, StorageFull};
            matches!(
                error.kind(),
                StorageFull | QuotaExceeded | ReadOnlyFilesystem | FileTooLarge
            )
            .then(|| error.to_string())
        }
        RuntimeError::CompileFailed { output, .. } => COMPILER_SAYS
            .into_iter()
            .find(|says| output.contains(says))
            .map(|says| format!("the compiler says: {says}")),
        _ => None,
    }
}

/// Removes stale build directories from `base`, the first time this process uses `base`.
fn sweep_once(base: &Path) {
    static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let first = SWEPT
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(base.to_path_buf());
    if first {
        remove_stale(base);
    }
}

/// Removes the build directories in `base` that are stale (best effort). Where process ids
/// cannot be checked (no `/proc`), nothing is removed.
fn remove_stale(base: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = owner_pid(&name.to_string_lossy()) else {
            continue;
        };
        // `DirEntry::metadata` does not follow symbolic links.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let unchanged = meta
            .modified()
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok());
        if meta.is_dir()
            && owned_by_current_user(&meta)
            && !process_exists(pid)
            && unchanged.is_some_and(|age| age > STALE_AFTER)
        {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// The pid in a build directory's name `tensor-build-<pid>-<n>`.
fn owner_pid(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix(PREFIX)?.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Whether a process with this id exists (Linux: has a `/proc` entry); this process counts.
fn process_exists(pid: u32) -> bool {
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_or_read_only_file_systems_are_told_from_other_failures() {
        let io = |kind: io::ErrorKind| RuntimeError::io("writing", io::Error::from(kind));
        assert!(lack_of_space(&io(io::ErrorKind::StorageFull)).is_some());
        assert!(lack_of_space(&io(io::ErrorKind::QuotaExceeded)).is_some());
        assert!(lack_of_space(&io(io::ErrorKind::ReadOnlyFilesystem)).is_some());
        assert_eq!(lack_of_space(&io(io::ErrorKind::NotFound)), None);
        let compile = |output: &str| RuntimeError::CompileFailed {
            compiler: "cc".into(),
            source: String::new(),
            output: output.into(),
        };
        let full = compile("cc1: fatal error: /tmp/x.s: No space left on device");
        assert_eq!(
            lack_of_space(&full).as_deref(),
            Some("the compiler says: No space left on device")
        );
        assert_eq!(lack_of_space(&compile("error: expected ';'")), None);
    }

    #[test]
    fn owner_pid_is_read_from_build_directory_names_only() {
        assert_eq!(owner_pid("tensor-build-123-4"), Some(123));
        assert_eq!(owner_pid("tensor-build-123"), None);
        assert_eq!(owner_pid("tensor-build-x-4"), None);
        assert_eq!(owner_pid("other-123-4"), None);
    }
}
