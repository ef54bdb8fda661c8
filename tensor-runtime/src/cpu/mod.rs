//! The CPU device: kernels are C, compiled by the system C compiler into shared objects,
//! loaded with `libloading`, and run on every core.
//!
//! Configuration ([`CpuConfig::from_env`]):
//! - `CC`: the C compiler (default `cc`; may carry arguments, e.g. `ccache gcc`);
//! - `TENSOR_CACHE_DIR`: where compiled kernels are kept across processes (default
//!   `$XDG_CACHE_HOME/tensor`, else `$HOME/.cache/tensor`); entries go in its `cpu/` folder;
//! - `THREADS`: how many cores a kernel is split across (default: all available; more than
//!   that is lowered to it, with a warning);
//! - `TENSOR_COMPILE_TIMEOUT`: seconds one compiler run may take before it is killed
//!   (default 120);
//! - `TENSOR_PROGRAM_CACHE_SIZE`: how many loaded kernel libraries a device keeps in memory
//!   (default 1024; the least recently used is dropped beyond that);
//! - `TENSOR_CACHE_MAX_BYTES`: how many bytes of entries the disk cache may hold (default
//!   512 MiB; the least recently used entries are deleted beyond that);
//! - `TENSOR_PROGRESS`: whether a cold compile shows its progress on stderr once it has run
//!   for a second (`1`, the default), never (`0`), or from its start (`always`); see
//!   [`ProgressSetting`];
//! - `TMPDIR`: where private build directories are made; if none can be made there, or a
//!   build fails there for lack of space (full, over quota, read-only), a `scratch` folder in
//!   the cache directory is used.
//!
//! A malformed value of any of these is an error naming the variable.
//!
//! Requesting a program looks in memory (programs loaded by this device), then on disk (a
//! checked cache entry, copied to a private file and loaded), and only then runs the compiler.
//! Threads requesting the same program at once share one load or build (and its error).

mod batches;
pub mod beam;
mod buffer;
mod compiler;
mod compiler_identity;
pub(crate) mod compiler_process;
mod loaded;
mod memory;
mod pool;
mod program;
mod progress;
mod recycle;
pub(crate) mod scratch;
mod vector_width;

pub use buffer::{CpuBuffer, LiveBuffers};
pub use compiler::{
    CCompiler, DEFAULT_COMPILE_TIMEOUT, compile_timeout_from_env, compiler_from_env, default_flags,
    vector_lanes_of,
};
pub use loaded::DEFAULT_PROGRAM_CACHE_SIZE;
pub use program::CpuProgram;
pub use progress::{PROGRESS_DELAY, ProgressSetting, progress_setting_from_env};
pub use vector_width::{preferred_vector_width, vector_width_from_env};

use crate::cache::{
    DEFAULT_CACHE_MAX_BYTES, DiskCache, cache_max_bytes_from_env, default_cache_dir,
};
use crate::device::Device;
use crate::error::{Result, RuntimeError, positive_setting};
use crate::private_files::create_private_dir_all;
use crate::stats::{CompileCounts, CompileStats};
use crate::warn;
use batches::{balanced_groups, compiler_runs, each_on_cores};
use loaded::LoadedLibraries;
use pool::WorkerPool;
use program::{LoadedLibrary, load_library};
use recycle::Recycler;
use scratch::{ScratchDir, lack_of_space};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;
use tensor_core::render::Launch;
use tensor_core::uop::HostData;

/// How much freed buffer memory a device keeps for reuse (see `recycle`).
const RECYCLED_BYTES_LIMIT: usize = 1 << 30;

/// Everything that decides how the CPU device compiles and runs kernels.
#[derive(Clone, Debug)]
pub struct CpuConfig {
    /// The C compiler command.
    pub compiler: String,
    /// Flags passed to the compiler before the source file (`-lm` is always appended after).
    pub flags: Vec<String>,
    /// The cache directory shared with other processes (CPU entries go in its `cpu/`
    /// folder); `None` keeps compiled kernels in memory only.
    pub cache_dir: Option<PathBuf>,
    /// The default number of threads a kernel is split across (0 counts as 1); the device
    /// keeps one fewer worker thread, since the launching thread does a share of the work,
    /// and no more workers than the process has cores.
    pub threads: usize,
    /// How long one compiler run may take before it is killed.
    pub compile_timeout: Duration,
    /// Where private build directories are made (the system temp dir, `TMPDIR`, by default).
    /// Where it cannot be written, a `scratch` folder in the cache directory is used instead,
    /// so cached kernels (and builds) work without a writable temp dir.
    pub temp_dir: PathBuf,
    /// How many loaded kernel libraries the device keeps in memory; the least recently used
    /// is dropped beyond that (programs already handed out stay valid).
    pub program_cache_size: usize,
    /// How many bytes of entries the disk cache may hold; after a store beyond that, the
    /// least recently used entries are deleted.
    pub disk_cache_max_bytes: u64,
    /// The beam width of the OptOps search (`BEAM`, see [`beam`]); 0 uses the hand-coded
    /// heuristic.
    pub beam: usize,
    /// When a cold compile shows its progress on stderr (`TENSOR_PROGRESS`).
    pub progress: ProgressSetting,
}

impl Default for CpuConfig {
    /// `cc` with the default flags, no disk cache, one thread, and the default limits; tests
    /// and embedders set what they need and take the rest with `..CpuConfig::default()`.
    fn default() -> CpuConfig {
        CpuConfig {
            compiler: "cc".to_string(),
            flags: default_flags(),
            cache_dir: None,
            threads: 1,
            compile_timeout: DEFAULT_COMPILE_TIMEOUT,
            temp_dir: std::env::temp_dir(),
            program_cache_size: DEFAULT_PROGRAM_CACHE_SIZE,
            disk_cache_max_bytes: DEFAULT_CACHE_MAX_BYTES,
            beam: 0,
            progress: ProgressSetting::default(),
        }
    }
}

impl CpuConfig {
    /// The configuration the environment asks for (see the module docs).
    pub fn from_env() -> Result<CpuConfig> {
        Ok(CpuConfig {
            compiler: compiler_from_env(),
            flags: default_flags(),
            cache_dir: default_cache_dir(),
            threads: threads_from_env()?,
            compile_timeout: compile_timeout_from_env()?,
            temp_dir: std::env::temp_dir(),
            program_cache_size: program_cache_size_from_env()?,
            disk_cache_max_bytes: cache_max_bytes_from_env()?,
            beam: beam::beam_width_from_env()?,
            progress: progress_setting_from_env()?,
        })
    }
}

/// The first malformed setting of the CPU device (`THREADS`, `TENSOR_COMPILE_TIMEOUT`,
/// `TENSOR_PROGRAM_CACHE_SIZE`, `TENSOR_CACHE_MAX_BYTES`, `BEAM`, `TENSOR_PROGRESS`), read
/// without side effects, so a realize refuses it whichever device the graph runs on.
pub(crate) fn malformed_setting() -> Option<RuntimeError> {
    let threads = crate::settings::var("THREADS");
    threads_setting(threads, available_cores())
        .err()
        .or_else(|| compile_timeout_from_env().err())
        .or_else(|| program_cache_size_from_env().err())
        .or_else(|| cache_max_bytes_from_env().err())
        .or_else(|| beam::beam_width_from_env().err())
        .or_else(|| progress_setting_from_env().err())
        .or_else(|| vector_width_from_env().err())
}

/// `$TENSOR_PROGRAM_CACHE_SIZE` if set, else [`DEFAULT_PROGRAM_CACHE_SIZE`].
fn program_cache_size_from_env() -> Result<usize> {
    let value = crate::settings::var("TENSOR_PROGRAM_CACHE_SIZE");
    let default = DEFAULT_PROGRAM_CACHE_SIZE as u64;
    let size = positive_setting("TENSOR_PROGRAM_CACHE_SIZE", value, default)?;
    Ok(usize::try_from(size).unwrap_or(usize::MAX))
}

/// `$THREADS` if set, else every core the process may use.
fn threads_from_env() -> Result<usize> {
    let (threads, bounded) = threads_setting(crate::settings::var("THREADS"), available_cores())?;
    if let Some(asked) = bounded {
        warn(&format!(
            "THREADS={asked} asks for more threads than the {threads} cores this process may \
             use; using {threads}"
        ));
    }
    Ok(threads)
}

/// How many cores this process may use.
fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The thread count a `THREADS` value asks for (`None`: every one of the `cores`), at most
/// `cores`; with the count asked for when it was more than that (threads beyond the cores
/// only take turns, and thousands of them can exhaust the process's thread limit).
fn threads_setting(value: Option<String>, cores: usize) -> Result<(usize, Option<usize>)> {
    let Some(value) = value else {
        return Ok((cores, None));
    };
    let asked = value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or(RuntimeError::InvalidSetting {
            variable: "THREADS",
            value,
            expected: "a positive number of threads",
        })?;
    Ok(if asked > cores {
        (cores, Some(asked))
    } else {
        (asked, None)
    })
}

/// The host CPU as a device. Cloning shares its caches and counters.
#[derive(Clone, Debug)]
pub struct CpuDevice {
    inner: Arc<CpuDeviceState>,
}

/// The outcome of one load or build of a cache key, shared by every thread that asked for the
/// key while it was under way.
type InFlight = Arc<OnceLock<Result<Arc<LoadedLibrary>>>>;

#[derive(Debug)]
struct CpuDeviceState {
    compiler: CCompiler,
    threads: usize,
    disk: DiskCache,
    temp_dir: PathBuf,
    temp_dir_fallback_reported: AtomicBool,
    loaded: Mutex<LoadedLibraries>,
    in_flight: Mutex<HashMap<u128, InFlight>>,
    stats: CompileStats,
    live: Arc<LiveBuffers>,
    recycler: Arc<Recycler>,
    pool: WorkerPool,
    beam: usize,
    beam_cache: DiskCache,
    progress: ProgressSetting,
}

impl CpuDevice {
    /// A device with its own caches and counters, configured explicitly.
    pub fn with_config(config: CpuConfig) -> CpuDevice {
        CpuDevice {
            inner: Arc::new(CpuDeviceState {
                compiler: CCompiler::new(config.compiler, config.flags)
                    .with_timeout(config.compile_timeout),
                threads: config.threads.max(1),
                disk: DiskCache::new(
                    config.cache_dir.as_ref().map(|dir| dir.join("cpu")),
                    config.disk_cache_max_bytes,
                ),
                beam: config.beam,
                beam_cache: DiskCache::new(
                    config.cache_dir.map(|dir| dir.join("beam")),
                    config.disk_cache_max_bytes,
                ),
                progress: config.progress,
                temp_dir: config.temp_dir,
                temp_dir_fallback_reported: AtomicBool::new(false),
                loaded: Mutex::new(LoadedLibraries::new(config.program_cache_size)),
                in_flight: Mutex::new(HashMap::new()),
                stats: CompileStats::default(),
                live: Arc::new(LiveBuffers::default()),
                recycler: Arc::new(Recycler::new(RECYCLED_BYTES_LIMIT)),
                // A kernel split into more parts than there are cores runs them in turns:
                // workers beyond the cores would only wait.
                pool: WorkerPool::new(config.threads.clamp(1, available_cores()) - 1),
            }),
        }
    }

    /// A device configured from the environment (see the module docs).
    pub fn from_env() -> Result<CpuDevice> {
        Ok(CpuDevice::with_config(CpuConfig::from_env()?))
    }

    /// The process-wide CPU device, configured from the environment on first use, so every
    /// caller shares one in-memory program cache.
    pub fn shared() -> Result<CpuDevice> {
        static SHARED: OnceLock<CpuDevice> = OnceLock::new();
        if let Some(device) = SHARED.get() {
            return Ok(device.clone());
        }
        let device = CpuDevice::from_env()?;
        Ok(SHARED.get_or_init(|| device).clone())
    }

    /// Where the winners of BEAM searches are kept (`<cache dir>/beam/`).
    pub(crate) fn beam_cache(&self) -> &DiskCache {
        &self.inner.beam_cache
    }

    /// The compiler this device builds kernels with.
    pub fn compiler(&self) -> &CCompiler {
        &self.inner.compiler
    }

    /// The folder compiled kernels are cached in, if any.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.inner.disk.dir()
    }

    /// Compile work done by this device so far.
    pub fn compile_counts(&self) -> CompileCounts {
        self.inner.stats.snapshot()
    }

    /// Buffers of this device that are still alive.
    pub fn live_buffers(&self) -> &LiveBuffers {
        &self.inner.live
    }

    /// Bytes of freed buffers this device keeps to hand out again (zeroed) for allocations of
    /// the same size, sparing the page faults of fresh memory.
    pub fn recycled_bytes(&self) -> usize {
        self.inner.recycler.held_bytes()
    }

    /// How many loaded kernel libraries the device keeps in memory.
    pub fn loaded_libraries(&self) -> usize {
        self.loaded().len()
    }

    /// The loaded library for `source`: from memory, else from disk, else freshly compiled.
    /// Threads asking for the same source at once share one load or build, and its outcome.
    fn library_for(&self, source: &str, entry: &str) -> Result<Arc<LoadedLibrary>> {
        let key = self.inner.compiler.cache_key(source)?;
        let slot = match self.in_memory_or_in_flight(key) {
            Ok(library) => return Ok(library),
            Err(slot) => slot,
        };
        let mut fetched_here = false;
        let outcome = slot.get_or_init(|| {
            fetched_here = true;
            let fetched = self.fetch(source, entry, key);
            if let Ok(library) = &fetched {
                self.loaded().insert(key, library.clone());
            }
            fetched
        });
        self.finish_in_flight(key, &slot);
        match outcome {
            Ok(library) => {
                if !fetched_here {
                    self.inner.stats.record_memory_hit();
                }
                Ok(library.clone())
            }
            Err(error) => Err(error.duplicate()),
        }
    }

    /// The library for `key` if it is loaded (`Ok`), else the slot of the load or build
    /// under way for it, made if there is none (`Err`).
    fn in_memory_or_in_flight(
        &self,
        key: u128,
    ) -> std::result::Result<Arc<LoadedLibrary>, InFlight> {
        let memory_hit = |library| {
            self.inner.stats.record_memory_hit();
            Ok(library)
        };
        if let Some(library) = self.loaded().get(&key) {
            return memory_hit(library);
        }
        let mut in_flight = lock(&self.inner.in_flight);
        // Looked up again under the lock: a build that finished meanwhile is in memory now.
        if let Some(library) = self.loaded().get(&key) {
            return memory_hit(library);
        }
        Err(in_flight.entry(key).or_default().clone())
    }

    /// Forgets `slot` as the work under way for `key`, so the next request (after a failure,
    /// say) starts afresh.
    fn finish_in_flight(&self, key: u128, slot: &InFlight) {
        let mut in_flight = lock(&self.inner.in_flight);
        if in_flight
            .get(&key)
            .is_some_and(|current| Arc::ptr_eq(current, slot))
        {
            in_flight.remove(&key);
        }
    }

    /// The library for `key` from the disk cache, else freshly compiled.
    fn fetch(&self, source: &str, entry: &str, key: u128) -> Result<Arc<LoadedLibrary>> {
        self.in_scratch(|scratch| self.fetch_in(source, entry, key, scratch))
    }

    /// [`CpuDevice::fetch`] with `scratch` as the build directory.
    fn fetch_in(
        &self,
        source: &str,
        entry: &str,
        key: u128,
        scratch: &ScratchDir,
    ) -> Result<Arc<LoadedLibrary>> {
        let state = &self.inner;
        let Some(payload) = state.disk.load(key) else {
            return self.build(source, entry, &[key], scratch);
        };
        match load_library(&write_object(scratch.path(), &payload)?) {
            Ok(library) => {
                state.stats.record_disk_hit();
                Ok(library)
            }
            // An intact entry the loader still rejects (say, copied from another kind of
            // machine) must not fail every run that finds it: replace it.
            Err(e) => {
                warn(&format!(
                    "cached kernel for `{entry}` is unusable ({e}); rebuilding it"
                ));
                self.build(source, entry, &[key], scratch)
            }
        }
    }

    /// Compiles `source` in `scratch`, loads the object, and only then stores it in the disk
    /// cache, so an object the loader rejects is never cached.
    fn build(
        &self,
        source: &str,
        entry: &str,
        keys: &[u128],
        scratch: &ScratchDir,
    ) -> Result<Arc<LoadedLibrary>> {
        let state = &self.inner;
        // Counted before the outcome is known: a rejected source is still a compiler run.
        state.stats.record_compile();
        let object = state.compiler.compile(source, entry, scratch.path())?;
        let library = load_library(&object).map_err(|e| RuntimeError::BadCompilerOutput {
            compiler: state.compiler.command().to_string(),
            reason: match e {
                RuntimeError::Load { reason, .. } => reason,
                other => other.to_string(),
            },
        })?;
        let payload = std::fs::read(&object).map_err(|e| {
            RuntimeError::io(format!("reading compiled kernel `{}`", object.display()), e)
        })?;
        for &key in keys {
            state.disk.store(key, &payload);
        }
        Ok(library)
    }

    /// The libraries of several kernels at once: those neither loaded nor on disk are built
    /// together, in a few compiler runs per core ([`CpuDevice::build_missing`]); then each
    /// is found as [`CpuDevice::library_for`] finds it.
    fn libraries_for_many(&self, kernels: &[(&str, &str)]) -> Result<Vec<Arc<LoadedLibrary>>> {
        let keys = kernels
            .iter()
            .map(|(source, _)| self.inner.compiler.cache_key(source))
            .collect::<Result<Vec<u128>>>()?;
        // A kernel whose entry name another missing kernel has too is built on its own, so
        // one compiled unit never defines a name twice.
        let mut missing: Vec<usize> = Vec::new();
        for (i, &key) in keys.iter().enumerate() {
            let known = self.loaded().contains(&key)
                || missing
                    .iter()
                    .any(|&m| keys[m] == key || kernels[m].1 == kernels[i].1)
                || self.inner.disk.entry_path(key).is_some_and(|p| p.exists());
            if !known {
                missing.push(i);
            }
        }
        if !missing.is_empty() {
            self.build_missing(&missing, kernels, &keys)?;
        }
        kernels
            .iter()
            .map(|(source, entry)| self.library_for(source, entry))
            .collect()
    }

    /// Builds the kernels `missing` (indices into `kernels`) on every core the device may use
    /// (`THREADS`), a cold schedule paying the compiler's start-up and the headers a few
    /// times per core rather than once per kernel ([`batches`]), and shows the progress on
    /// stderr when it takes long ([`progress`]).
    fn build_missing(
        &self,
        missing: &[usize],
        kernels: &[(&str, &str)],
        keys: &[u128],
    ) -> Result<()> {
        let cores = self.inner.threads.min(available_cores());
        let runs = compiler_runs(missing.len(), cores);
        let groups = balanced_groups(missing, runs, |i| kernels[i].0.len());
        progress::with_progress(self.inner.progress, missing.len(), |count| {
            each_on_cores(&groups, cores, |group| {
                let built = self.build_group(group, kernels, keys);
                count.add(group.len());
                built
            })
            .into_iter()
            .collect::<Result<Vec<()>>>()
        })?;
        Ok(())
    }

    /// Builds the kernels `group` (indices into `kernels`) in one compiler run, as the one
    /// in-flight build of each of their keys, so other threads asking for them wait for it.
    fn build_group(&self, group: &[usize], kernels: &[(&str, &str)], keys: &[u128]) -> Result<()> {
        let mut claimed: Vec<(usize, InFlight)> = Vec::new();
        for &i in group {
            if let Err(slot) = self.in_memory_or_in_flight(keys[i]) {
                claimed.push((i, slot));
            }
        }
        // Claimed in the order of their keys: a thread filling the slots of its group only
        // ever waits on slots with larger keys than the one it holds, so two threads whose
        // groups overlap cannot wait on each other.
        claimed.sort_by_key(|&(i, _)| keys[i]);
        let Some((first, first_slot)) = claimed.first() else {
            return Ok(());
        };
        let outcome = first_slot.get_or_init(|| {
            let source: Vec<&str> = claimed.iter().map(|&(i, _)| kernels[i].0).collect();
            let group_keys: Vec<u128> = claimed.iter().map(|&(i, _)| keys[i]).collect();
            let built = self.in_scratch(|scratch| {
                self.build(&source.join("\n"), kernels[*first].1, &group_keys, scratch)
            });
            if let Ok(library) = &built {
                for ((i, slot), key) in claimed.iter().zip(&group_keys) {
                    self.loaded().insert(*key, library.clone());
                    if i != first {
                        let _ = slot.set(Ok(library.clone()));
                    }
                }
            }
            built
        });
        for (i, slot) in &claimed {
            self.finish_in_flight(keys[*i], slot);
        }
        outcome
            .as_ref()
            .map(|_| ())
            .map_err(RuntimeError::duplicate)
    }

    /// `work` done in a private build directory: in the temp dir, and done again in the
    /// cache directory's `scratch` folder when the temp dir cannot hold the files (full, over
    /// quota, read-only), as when no directory can be made there at all.
    fn in_scratch<T>(&self, work: impl Fn(&ScratchDir) -> Result<T>) -> Result<T> {
        let state = &self.inner;
        let scratch = self.scratch()?;
        let error = match work(&scratch) {
            Err(error) if scratch.path().starts_with(&state.temp_dir) => error,
            done => return done,
        };
        let Some(lack) = lack_of_space(&error) else {
            return Err(error);
        };
        drop(scratch);
        let Some(fallback) = self.scratch_in_cache_dir() else {
            return Err(RuntimeError::io(
                format!(
                    "building a kernel in `{}`: {lack}. Free space there or set TMPDIR to \
                     another directory",
                    state.temp_dir.display()
                ),
                std::io::Error::from(std::io::ErrorKind::StorageFull),
            ));
        };
        self.report_temp_dir_fallback(&lack, &fallback);
        work(&fallback)
    }

    /// Says once per device that builds moved from the temp dir to `fallback`, and why.
    fn report_temp_dir_fallback(&self, why: &str, fallback: &ScratchDir) {
        let state = &self.inner;
        if !state
            .temp_dir_fallback_reported
            .swap(true, Ordering::Relaxed)
        {
            warn(&format!(
                "cannot build kernels in `{}` ({why}); building in `{}` instead. Set TMPDIR \
                 to a writable directory with free space",
                state.temp_dir.display(),
                fallback
                    .path()
                    .parent()
                    .unwrap_or(fallback.path())
                    .display()
            ));
        }
    }

    /// A private build directory: in the temp dir, else in the cache directory.
    fn scratch(&self) -> Result<ScratchDir> {
        let state = &self.inner;
        let error = match ScratchDir::new_in(&state.temp_dir) {
            Ok(scratch) => return Ok(scratch),
            Err(error) => error,
        };
        if let Some(scratch) = self.scratch_in_cache_dir() {
            let why = format!("no build directory can be made there: {error}");
            self.report_temp_dir_fallback(&why, &scratch);
            return Ok(scratch);
        }
        Err(RuntimeError::io(
            format!(
                "creating a build directory in `{}` (set TMPDIR to a writable directory)",
                state.temp_dir.display()
            ),
            error,
        ))
    }

    /// A private build directory in the `scratch` folder of the cache directory, if it has a
    /// trusted one.
    fn scratch_in_cache_dir(&self) -> Option<ScratchDir> {
        let disk = &self.inner.disk;
        create_private_dir_all(disk.dir()?).ok()?;
        let base = disk.trusted_dir()?.join("scratch");
        create_private_dir_all(&base).ok()?;
        ScratchDir::new_in(&base).ok()
    }

    fn loaded(&self) -> MutexGuard<'_, LoadedLibraries> {
        lock(&self.inner.loaded)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes a cached object's bytes to a file in `dir` that can be loaded.
fn write_object(dir: &Path, payload: &[u8]) -> Result<PathBuf> {
    let path = dir.join(format!("cached.{}", std::env::consts::DLL_EXTENSION));
    std::fs::write(&path, payload)
        .map_err(|e| RuntimeError::io(format!("writing `{}`", path.display()), e))?;
    Ok(path)
}

impl Device for CpuDevice {
    type Buffer = CpuBuffer;
    type Program = CpuProgram;

    fn name(&self) -> &str {
        "CPU"
    }

    fn default_threads(&self) -> usize {
        self.inner.threads
    }

    /// As the compiler's `-mprefer-vector-width` asks.
    fn vector_lanes(&self) -> usize {
        vector_lanes_of(self.inner.compiler.flags())
    }

    /// The C renderer, with OptOps from a BEAM search when the device has a beam width.
    fn generate_kernel(
        &self,
        ast: &tensor_core::UOp,
        buffer_sizes: &[usize],
        options: &tensor_core::codegen::CodegenOptions,
        name: &str,
    ) -> tensor_core::render::Kernel {
        use tensor_core::codegen::{lower_kernel_named, lower_kernel_with_opts_named};
        use tensor_core::render::c::render_kernel;
        if self.inner.beam == 0 || !options.optimize || options.threads != self.inner.threads {
            return render_kernel(&lower_kernel_named(ast, buffer_sizes, options, name));
        }
        let opts = beam::best_opts(self, ast, buffer_sizes, self.inner.beam);
        render_kernel(&lower_kernel_with_opts_named(
            ast,
            buffer_sizes,
            &opts,
            name,
        ))
    }

    fn allocate(&self, bytes: usize) -> Result<CpuBuffer> {
        CpuBuffer::recycled(bytes, self.inner.live.clone(), &self.inner.recycler).ok_or_else(|| {
            RuntimeError::OutOfMemory {
                device: "CPU".to_string(),
                bytes,
            }
        })
    }

    fn allocate_output(&self, bytes: usize) -> Result<CpuBuffer> {
        CpuBuffer::recycled_unzeroed(bytes, self.inner.live.clone(), &self.inner.recycler)
            .ok_or_else(|| RuntimeError::OutOfMemory {
                device: "CPU".to_string(),
                bytes,
            })
    }

    fn bind_host(&self, data: Arc<dyn HostData>) -> Option<CpuBuffer> {
        CpuBuffer::over_host(data)
    }

    fn is_read_only(&self, buffer: &CpuBuffer) -> bool {
        buffer.is_read_only()
    }

    fn buffer_len(&self, buffer: &CpuBuffer) -> usize {
        buffer.len()
    }

    fn copy_in(&self, dst: &CpuBuffer, src: &[u8]) -> Result<()> {
        dst.write_bytes(src)
    }

    fn copy_out(&self, src: &CpuBuffer, dst: &mut [u8]) -> Result<()> {
        src.read_bytes(dst)
    }

    fn copy_out_elements<T: tensor_core::Element>(
        &self,
        src: &CpuBuffer,
        dtype: tensor_core::DType,
    ) -> Result<Vec<T>> {
        if T::DTYPE != dtype {
            return Err(RuntimeError::WrongElementType {
                expected: T::DTYPE,
                found: dtype,
            });
        }
        src.read_elements()
    }

    unsafe fn compile_many(&self, kernels: &[(&str, &str)]) -> Result<Vec<CpuProgram>> {
        let libraries = self.libraries_for_many(kernels)?;
        kernels
            .iter()
            .zip(libraries)
            .map(|((_, entry), library)| CpuProgram::find(library, entry))
            .collect()
    }

    unsafe fn compile(&self, source: &str, entry: &str) -> Result<CpuProgram> {
        CpuProgram::find(self.library_for(source, entry)?, entry)
    }

    unsafe fn launch_unchecked(
        &self,
        program: &CpuProgram,
        buffers: &[&CpuBuffer],
        launch: Launch,
    ) -> Result<()> {
        let Launch::Cores(cores) = launch else {
            return Err(RuntimeError::InvalidLaunch(format!(
                "`{}` is a CPU program, launched on cores, not on a GPU {launch}",
                program.entry_name()
            )));
        };
        // SAFETY: `CpuProgram::run`'s contract is this function's (see the trait).
        unsafe { program.run(buffers, cores, &self.inner.pool) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_setting_accepts_positive_counts_and_defaults_to_all_cores() {
        assert_eq!(threads_setting(Some("3".into()), 16).unwrap(), (3, None));
        assert_eq!(threads_setting(Some(" 8\n".into()), 16).unwrap(), (8, None));
        assert_eq!(threads_setting(None, 16).unwrap(), (16, None));
        assert!(available_cores() >= 1);
    }

    #[test]
    fn threads_beyond_the_cores_are_bounded_by_them() {
        assert_eq!(threads_setting(Some("16".into()), 16).unwrap(), (16, None));
        assert_eq!(
            threads_setting(Some("100000".into()), 16).unwrap(),
            (16, Some(100_000))
        );
        let huge = "18446744073709551615";
        assert_eq!(
            threads_setting(Some(huge.into()), 2).unwrap(),
            (2, Some(usize::MAX))
        );
    }

    #[test]
    fn malformed_threads_setting_is_an_error_naming_the_variable() {
        for bad in ["0", "-2", "many", "", "18446744073709551616"] {
            let err = threads_setting(Some(bad.into()), 4).unwrap_err();
            assert!(err.to_string().contains("THREADS"), "{err}");
        }
    }
}
