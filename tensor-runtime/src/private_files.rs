//! Files and directories that only the current user can change, and telling whether one found
//! on disk is such (the checks ssh applies to its keys): the kernel cache loads code from
//! disk, so it must refuse files another local user could have planted or replaced.

use std::fs::{self, File, Metadata};
use std::io;
use std::path::Path;
use std::sync::OnceLock;

/// The user id that owns the files this process creates (its filesystem uid), or `None`
/// where it cannot be found without `unsafe`.
pub fn current_uid() -> Option<u32> {
    static UID: OnceLock<Option<u32>> = OnceLock::new();
    *UID.get_or_init(|| uid_from_proc().or_else(uid_from_new_file))
}

/// The filesystem uid from `/proc/self/status` (Linux): `Uid: real effective saved fs`.
fn uid_from_proc() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let ids = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    ids.split_whitespace().nth(3)?.parse().ok()
}

/// The owner of a file this process creates (and removes again) in the temp dir.
#[cfg(unix)]
fn uid_from_new_file() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let path = std::env::temp_dir().join(format!(".tensor-uid-probe-{}", std::process::id()));
    let owner = File::create_new(&path)
        .and_then(|file| file.metadata())
        .map(|meta| meta.uid());
    let _ = fs::remove_file(&path);
    owner.ok()
}

#[cfg(not(unix))]
fn uid_from_new_file() -> Option<u32> {
    None
}

/// Why the file or directory described by `meta` may hold something this user did not write,
/// or `None` if it cannot: it is owned by the current user (or root) and neither its group nor
/// other users may write it.
#[cfg(unix)]
pub fn distrust(meta: &Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let owner = meta.uid();
    if let Some(me) = current_uid()
        && owner != me
        && owner != 0
    {
        return Some(format!(
            "owned by user id {owner}, not by you (user id {me})"
        ));
    }
    let mode = meta.mode() & 0o7777;
    (mode & 0o022 != 0).then(|| format!("writable by its group or by others (mode {mode:04o})"))
}

/// Without Unix permissions there is nothing to check.
#[cfg(not(unix))]
pub fn distrust(_meta: &Metadata) -> Option<String> {
    None
}

/// Whether the current user owns the file or directory described by `meta` (`false` where
/// the current user is unknown).
#[cfg(unix)]
pub fn owned_by_current_user(meta: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    current_uid() == Some(meta.uid())
}

/// Without Unix owners, nothing is known to be ours.
#[cfg(not(unix))]
pub fn owned_by_current_user(_meta: &Metadata) -> bool {
    false
}

/// Creates `dir` and its missing parents, readable and writable by the current user only.
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the directory `dir` (its parent must exist), private to the current user; fails if
/// it exists.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the new file `path`, readable and writable by the current user only; fails if it
/// exists.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn current_uid_owns_the_files_this_process_creates() {
        let path = std::env::temp_dir().join(format!("tensor-uid-test-{}", std::process::id()));
        let owner = File::create(&path).unwrap().metadata().unwrap().uid();
        let _ = fs::remove_file(&path);
        assert_eq!(current_uid(), Some(owner));
        assert_eq!(uid_from_new_file(), Some(owner));
    }

    #[test]
    fn private_file_is_trusted_until_others_may_write_it() {
        let path = std::env::temp_dir().join(format!("tensor-trust-test-{}", std::process::id()));
        let _ = fs::remove_file(&path);
        let file = create_private_file(&path).unwrap();
        assert_eq!(file.metadata().unwrap().mode() & 0o777, 0o600);
        assert_eq!(distrust(&file.metadata().unwrap()), None);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o620)).unwrap();
        let reason = distrust(&fs::metadata(&path).unwrap()).unwrap();
        let _ = fs::remove_file(&path);
        assert!(reason.contains("mode 0620"), "{reason}");
    }
}
