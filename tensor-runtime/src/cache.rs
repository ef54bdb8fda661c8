//! The on-disk cache of compiled kernels.
//!
//! Layout: one file per compiled program, `<cache dir>/<device>/<key>.kernel`, where `key` is
//! the [stable hash](crate::stable_hash) of everything that determines the compiler's output
//! (source, flags, and the compiler's identity: every word of `CC`, the program it resolves to,
//! its version). Each file is a fixed header followed by the payload (the
//! shared object's bytes):
//!
//! ```text
//! offset  size  field
//!      0     8  magic "TNSRKRNL"
//!      8     4  format version (little-endian u32)
//!     12     4  reserved, zero
//!     16    16  key (u128 LE): the entry names the program it holds
//!     32     8  payload length in bytes (u64 LE)
//!     40    16  FNV-1a 128 checksum of the payload (u128 LE)
//!     56     …  payload
//! ```
//!
//! Entries are written to a unique temporary file in the same directory and renamed into
//! place, so readers only ever see complete files, whatever concurrent writers do. They are
//! not flushed to disk: a store sits on a first call's path, where two `fsync`s per kernel
//! cost a cold start up to 250 ms of waiting on the disk, and a cache entry needs no
//! durability. A file that is truncated or corrupt anyway (a crash before the kernel wrote
//! it back, a full disk, a copied cache, bit rot) fails the header check, is reported as a
//! warning and rebuilt, and never reaches `dlopen`. Temporary files a crashed writer left behind are removed once they are an hour
//! old. A directory that cannot be written costs the cache, not the computation: the
//! kernel is still built (in a private temporary directory) and a warning is printed once.
//!
//! Entries are code this process will run, so the cache only trusts what the current user
//! wrote: the directory is created `0700` and entries `0600`, and an entry is refused (with a
//! warning, then rebuilt) when the directory or the entry is owned by another user (root
//! excepted) or writable by its group or by others, as ssh does with its keys. A refused
//! directory is not used at all: kernels are compiled as if there were no cache.
//!
//! The cache is bounded (`TENSOR_CACHE_MAX_BYTES`, default 512 MiB): a hit marks its entry as
//! used by setting its modification time, and after a store that takes the entries past the
//! limit, the least recently used entries are deleted until they fit again.

use crate::error::positive_setting;
use crate::private_files::{create_private_dir_all, create_private_file, distrust};
use crate::stable_hash::{stable_hash, to_hex};
use crate::warn;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

const MAGIC: &[u8; 8] = b"TNSRKRNL";
const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 56;

/// How many bytes of entries a cache holds unless configured otherwise.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 512 << 20;

/// The size limit the environment asks for: `$TENSOR_CACHE_MAX_BYTES`, else
/// [`DEFAULT_CACHE_MAX_BYTES`].
pub fn cache_max_bytes_from_env() -> crate::Result<u64> {
    let value = crate::settings::var("TENSOR_CACHE_MAX_BYTES");
    positive_setting("TENSOR_CACHE_MAX_BYTES", value, DEFAULT_CACHE_MAX_BYTES)
}

/// The directory users get when they configure nothing: `$TENSOR_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/tensor`, else `$HOME/.cache/tensor`; `None` if none of these is set.
pub fn default_cache_dir() -> Option<PathBuf> {
    let non_empty = |name: &str| crate::settings::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("TENSOR_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(xdg) = non_empty("XDG_CACHE_HOME") {
        return Some(PathBuf::from(xdg).join("tensor"));
    }
    non_empty("HOME").map(|home| PathBuf::from(home).join(".cache").join("tensor"))
}

/// Why a cache file was rejected.
#[derive(Debug, PartialEq, Eq)]
pub enum EntryDefect {
    /// Shorter than the header, or than the payload length the header records.
    Truncated {
        /// The bytes the entry should have.
        expected: usize,
        /// The bytes it has.
        found: usize,
    },
    /// Longer than the header says (e.g. two writes interleaved without the rename protocol).
    TrailingBytes {
        /// The bytes the entry should have.
        expected: usize,
        /// The bytes it has.
        found: usize,
    },
    /// Not a cache entry of this format.
    BadMagic,
    /// Written by another version of the format.
    UnknownVersion(u32),
    /// A complete entry, but for a different key than its file name says.
    KeyMismatch,
    /// The payload does not match its checksum.
    ChecksumMismatch,
}

/// A defect reads as the predicate of a sentence whose subject is the entry: "kernel cache
/// entry `…` is truncated (…)".
impl std::fmt::Display for EntryDefect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntryDefect::Truncated { expected, found } => {
                write!(f, "is truncated ({found} of {expected} bytes)")
            }
            EntryDefect::TrailingBytes { expected, found } => {
                write!(f, "has {found} bytes where {expected} were written")
            }
            EntryDefect::BadMagic => write!(f, "is not a kernel cache entry"),
            EntryDefect::UnknownVersion(v) => {
                write!(f, "was written by unknown format version {v}")
            }
            EntryDefect::KeyMismatch => write!(f, "holds a different kernel than its name says"),
            EntryDefect::ChecksumMismatch => {
                write!(f, "has contents that do not match their checksum")
            }
        }
    }
}

/// A cache file's bytes: header plus payload.
pub fn encode_entry(key: u128, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&key.to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&stable_hash(payload).to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// The payload of a cache file, after checking that it is complete, intact and for `key`.
pub fn decode_entry(key: u128, bytes: &[u8]) -> Result<&[u8], EntryDefect> {
    if bytes.len() < HEADER_LEN {
        return Err(EntryDefect::Truncated {
            expected: HEADER_LEN,
            found: bytes.len(),
        });
    }
    let (header, payload) = bytes.split_at(HEADER_LEN);
    let field = |at: usize, len: usize| &header[at..at + len];
    if field(0, 8) != MAGIC {
        return Err(EntryDefect::BadMagic);
    }
    let version = u32::from_le_bytes(field(8, 4).try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(EntryDefect::UnknownVersion(version));
    }
    let stored_key = u128::from_le_bytes(field(16, 16).try_into().expect("16 bytes"));
    let length = u64::from_le_bytes(field(32, 8).try_into().expect("8 bytes"));
    let checksum = u128::from_le_bytes(field(40, 16).try_into().expect("16 bytes"));
    let expected = HEADER_LEN.saturating_add(usize::try_from(length).unwrap_or(usize::MAX));
    if bytes.len() < expected {
        return Err(EntryDefect::Truncated {
            expected,
            found: bytes.len(),
        });
    }
    if bytes.len() > expected {
        return Err(EntryDefect::TrailingBytes {
            expected,
            found: bytes.len(),
        });
    }
    if stored_key != key {
        return Err(EntryDefect::KeyMismatch);
    }
    if stable_hash(payload) != checksum {
        return Err(EntryDefect::ChecksumMismatch);
    }
    Ok(payload)
}

/// A directory of compiled kernels shared by every process of the user, or no directory.
#[derive(Debug)]
pub struct DiskCache {
    dir: Option<PathBuf>,
    max_bytes: u64,
    /// What the entries are, for warnings: "kernel", "plan".
    label: &'static str,
    writes_failed: AtomicBool,
    distrust_reported: AtomicBool,
    swept: AtomicBool,
}

/// Temporary files older than this were left by a writer that crashed before its rename.
const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

impl DiskCache {
    /// A cache in `dir` (created on first write) holding at most `max_bytes` of entries;
    /// `None` keeps nothing on disk.
    pub fn new(dir: Option<PathBuf>, max_bytes: u64) -> DiskCache {
        DiskCache {
            dir,
            max_bytes,
            label: "kernel",
            writes_failed: AtomicBool::new(false),
            distrust_reported: AtomicBool::new(false),
            swept: AtomicBool::new(false),
        }
    }

    /// The same cache, its warnings calling the entries `label` entries ("plan cache entry
    /// `…` is truncated"); a new cache's entries are kernels.
    pub fn labelled(self, label: &'static str) -> DiskCache {
        DiskCache { label, ..self }
    }

    /// The directory entries live in, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Where the entry for `key` lives, if the cache has a directory.
    pub fn entry_path(&self, key: u128) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{}.kernel", to_hex(key))))
    }

    /// The directory, if it exists and only the current user can change it. A directory
    /// others could write to is reported (once) and not used.
    pub fn trusted_dir(&self) -> Option<&Path> {
        let dir = self.dir.as_deref()?;
        // A missing directory holds nothing to load; storing creates it, or reports why not.
        let meta = fs::metadata(dir).ok()?;
        let Some(reason) = distrust(&meta) else {
            return Some(dir);
        };
        if !self.distrust_reported.swap(true, Ordering::Relaxed) {
            warn(&format!(
                "{} cache directory `{}` is {reason}, so another user could plant code \
                 in it; it is not used and its entries are rebuilt in every process. Make it \
                 yours and private (chown, chmod 700) or set TENSOR_CACHE_DIR to a private \
                 directory",
                self.label,
                dir.display()
            ));
        }
        None
    }

    /// The payload stored under `key`, if a complete, intact entry that only this user could
    /// have written exists; a hit marks the entry as recently used. A damaged or untrusted
    /// entry is reported as a warning and treated as missing, so the caller rebuilds it.
    pub fn load(&self, key: u128) -> Option<Vec<u8>> {
        self.trusted_dir()?;
        let path = self.entry_path(key)?;
        let bytes = match read_trusted(&path) {
            Ok(bytes) => bytes,
            // No entry yet.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => {
                warn(&format!(
                    "cannot use {} cache entry `{}` ({e}); rebuilding it",
                    self.label,
                    path.display()
                ));
                return None;
            }
        };
        match decode_entry(key, &bytes) {
            Ok(payload) => Some(payload.to_vec()),
            Err(defect) => {
                warn(&format!(
                    "{} cache entry `{}` {defect}; rebuilding it",
                    self.label,
                    path.display()
                ));
                None
            }
        }
    }

    /// Stores `payload` under `key`, atomically. Failure only costs the cache: it is reported
    /// once per cache as a warning, and later stores are skipped.
    pub fn store(&self, key: u128, payload: &[u8]) {
        let (Some(dir), Some(path)) = (self.dir.as_ref(), self.entry_path(key)) else {
            return;
        };
        if self.writes_failed.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = create_private_dir_all(dir) {
            self.report_write_failure(dir, &e);
            return;
        }
        if self.trusted_dir().is_none() {
            return;
        }
        if !self.swept.swap(true, Ordering::Relaxed) {
            remove_abandoned_temp_files(dir);
        }
        match write_atomically(dir, &path, &encode_entry(key, payload)) {
            Ok(()) => evict_least_recently_used(dir, self.max_bytes),
            Err(e) => self.report_write_failure(dir, &e),
        }
    }

    /// The total size in bytes of the entries in the directory.
    pub fn total_bytes(&self) -> u64 {
        let entries = self.dir.as_deref().map(entries_by_last_use);
        entries.map_or(0, |entries| entries.iter().map(|e| e.bytes).sum())
    }

    /// Reports the first failed write of this cache; later stores are skipped.
    fn report_write_failure(&self, dir: &Path, e: &io::Error) {
        if !self.writes_failed.swap(true, Ordering::Relaxed) {
            warn(&format!(
                "{} cache directory `{}` is not writable ({e}); its entries will be \
                 built again in every process. Set TENSOR_CACHE_DIR to a writable \
                 directory to keep them",
                self.label,
                dir.display()
            ));
        }
    }
}

/// The contents of the entry file at `path`, if only the current user can have written it.
/// The checks look at the opened file itself, so a file swapped in after them is not read.
/// Reading marks the entry as recently used (its modification time is the last use).
fn read_trusted(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    if let Some(reason) = distrust(&file.metadata()?) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("it is {reason}, so another user could have planted it"),
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let _ = file.set_modified(SystemTime::now());
    Ok(bytes)
}

/// Writes `bytes` to `path` so that concurrent readers see `path` absent, with its old
/// content, or with `bytes`: a uniquely named private temporary file in the same directory,
/// renamed over `path` (not synced to disk: see the module docs).
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temp = dir.join(unique_temp_name(path));
    let written = create_private_file(&temp).and_then(|mut file| file.write_all(bytes));
    let renamed = written.and_then(|()| fs::rename(&temp, path));
    if renamed.is_err() {
        let _ = fs::remove_file(&temp);
    }
    renamed
}

/// A cache entry on disk: its path, size and last use.
struct EntryFile {
    path: PathBuf,
    bytes: u64,
    last_use: SystemTime,
}

/// The entries in `dir`, least recently used first.
fn entries_by_last_use(dir: &Path) -> Vec<EntryFile> {
    let Ok(listing) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries: Vec<EntryFile> = listing
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "kernel"))
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(|m| m.is_file())?;
            Some(EntryFile {
                path: e.path(),
                bytes: meta.len(),
                last_use: meta.modified().ok()?,
            })
        })
        .collect();
    entries.sort_by_key(|e| e.last_use);
    entries
}

/// Deletes the least recently used entries of `dir` until they take at most `max_bytes`.
fn evict_least_recently_used(dir: &Path, max_bytes: u64) {
    let entries = entries_by_last_use(dir);
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    for entry in entries {
        if total <= max_bytes {
            break;
        }
        // Another process may have deleted it first; it is gone either way.
        let _ = fs::remove_file(&entry.path);
        total -= entry.bytes;
    }
}

/// Deletes temporary files that crashed writers left in `dir` (best effort; a file young
/// enough to belong to a live writer is left alone).
fn remove_abandoned_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_temp = name.starts_with('.') && name.ends_with(".tmp");
        let age = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|modified| SystemTime::now().duration_since(modified).ok());
        if is_temp && age.is_some_and(|age| age > ABANDONED_AFTER) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// `.<file name>.<pid>.<n>.tmp`: unique among the processes and threads writing one directory.
fn unique_temp_name(path: &Path) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trips_its_payload() {
        let bytes = encode_entry(7, b"shared object");
        assert_eq!(decode_entry(7, &bytes), Ok(&b"shared object"[..]));
    }

    #[test]
    fn truncated_entry_is_rejected() {
        let bytes = encode_entry(7, b"shared object");
        let cut = &bytes[..bytes.len() - 3];
        assert_eq!(
            decode_entry(7, cut),
            Err(EntryDefect::Truncated {
                expected: bytes.len(),
                found: bytes.len() - 3
            })
        );
        assert!(matches!(
            decode_entry(7, &bytes[..10]),
            Err(EntryDefect::Truncated { .. })
        ));
    }

    #[test]
    fn flipped_payload_byte_fails_the_checksum() {
        let mut bytes = encode_entry(7, b"shared object");
        *bytes.last_mut().unwrap() ^= 1;
        assert_eq!(decode_entry(7, &bytes), Err(EntryDefect::ChecksumMismatch));
    }

    #[test]
    fn entry_for_another_key_is_rejected() {
        let bytes = encode_entry(7, b"x");
        assert_eq!(decode_entry(8, &bytes), Err(EntryDefect::KeyMismatch));
    }

    #[test]
    fn every_defect_reads_as_a_predicate_of_the_entry() {
        let defects = [
            EntryDefect::Truncated {
                expected: 9,
                found: 3,
            },
            EntryDefect::TrailingBytes {
                expected: 9,
                found: 12,
            },
            EntryDefect::BadMagic,
            EntryDefect::UnknownVersion(7),
            EntryDefect::KeyMismatch,
            EntryDefect::ChecksumMismatch,
        ];
        let predicates = [
            "is truncated (3 of 9 bytes)",
            "has 12 bytes where 9 were written",
            "is not a kernel cache entry",
            "was written by unknown format version 7",
            "holds a different kernel than its name says",
            "has contents that do not match their checksum",
        ];
        for (defect, predicate) in defects.iter().zip(predicates) {
            assert_eq!(defect.to_string(), predicate);
        }
    }

    #[test]
    fn foreign_file_is_rejected() {
        let bytes = vec![0u8; 100];
        assert_eq!(decode_entry(7, &bytes), Err(EntryDefect::BadMagic));
    }
}
