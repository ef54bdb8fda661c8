//! The on-disk cache of NVRTC's output: PTX keyed by a [stable hash](crate::stable_hash) of
//! the CUDA source, the architecture, the NVRTC version and its options, so that a second
//! process (or a second device) does not run NVRTC again for a kernel it has seen.
//!
//! Entries live in `<cache dir>/cuda/` (the cache dir is `TENSOR_CACHE_DIR`, as for the CPU's
//! compiled kernels) and are [`DiskCache`] entries: written atomically, checked against their
//! header and checksum, private to the user, bounded by `TENSOR_CACHE_MAX_BYTES`. A damaged
//! entry is reported as a warning and compiled again, never handed to the driver.

use super::nvrtc::{NVRTC_OPTIONS, compile_ptx, nvrtc_version};
use crate::cache::{DiskCache, cache_max_bytes_from_env, default_cache_dir};
use crate::error::Result;
use crate::stable_hash::StableHasher;
use crate::stats::{CompileCounts, CompileStats};
use std::path::{Path, PathBuf};

/// NVRTC behind a disk cache of its PTX, with counters of compiles and hits.
#[derive(Debug)]
pub struct PtxCache {
    disk: DiskCache,
    stats: CompileStats,
}

impl PtxCache {
    /// A cache whose entries live in `<cache_dir>/cuda` (`None`: nothing is kept on disk),
    /// holding at most `max_bytes`.
    pub fn new(cache_dir: Option<PathBuf>, max_bytes: u64) -> PtxCache {
        PtxCache {
            disk: DiskCache::new(cache_dir.map(|dir| dir.join("cuda")), max_bytes),
            stats: CompileStats::default(),
        }
    }

    /// The cache the environment asks for: `TENSOR_CACHE_DIR` (or its default) and
    /// `TENSOR_CACHE_MAX_BYTES`.
    pub fn from_env() -> Result<PtxCache> {
        Ok(PtxCache::new(
            default_cache_dir(),
            cache_max_bytes_from_env()?,
        ))
    }

    /// The folder entries live in, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.disk.dir()
    }

    /// NVRTC runs (`compiler_invocations`) and entries read back (`disk_cache_hits`) so far.
    pub fn counts(&self) -> CompileCounts {
        self.stats.snapshot()
    }

    /// The key of `source` compiled for `arch` by the NVRTC that is loaded.
    pub fn key(source: &str, arch: &str) -> Result<u128> {
        let mut hasher = StableHasher::new();
        hasher.write_field(source.as_bytes());
        hasher.write_field(arch.as_bytes());
        hasher.write_field(nvrtc_version()?.as_bytes());
        for option in NVRTC_OPTIONS {
            hasher.write_field(option.as_bytes());
        }
        Ok(hasher.finish())
    }

    /// The PTX of `source` for `arch`: from disk when an intact entry exists, else compiled
    /// by NVRTC and stored. A rejected source is an error and nothing is stored.
    pub fn ptx(&self, source: &str, arch: &'static str) -> Result<String> {
        let key = PtxCache::key(source, arch)?;
        let cached = self.disk.load(key).and_then(|b| String::from_utf8(b).ok());
        if let Some(ptx) = cached {
            self.stats.record_disk_hit();
            return Ok(ptx);
        }
        let ptx = compile_ptx(source, arch)?;
        self.stats.record_compile();
        self.disk.store(key, ptx.as_bytes());
        Ok(ptx)
    }
}
