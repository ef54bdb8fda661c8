//! Loaded kernels: a shared object kept open for as long as any program uses it, its entry
//! point, and running that entry point on every core.
//!
//! This is the FFI edge of the CPU device and the only place with `unsafe`.

use super::buffer::CpuBuffer;
use super::memory::AlignedWords;
use super::pool::WorkerPool;
use crate::error::{Result, RuntimeError};
use libloading::Library;
use std::ffi::c_void;
use std::path::Path;
use std::sync::{Arc, MutexGuard};

/// The C signature of a kernel entry point: `void name_entry(void** bufs, int core_id)`.
type KernelEntry = unsafe extern "C" fn(*const *mut c_void, i32);

/// A shared object mapped into the process.
#[derive(Debug)]
pub struct LoadedLibrary {
    library: Library,
}

/// Maps the shared object at `path` into the process.
pub fn load_library(path: &Path) -> Result<Arc<LoadedLibrary>> {
    // SAFETY: loading runs the object's initialisers. The object was built by the configured
    // C compiler from kernel source, or read back from a cache entry that only this user (or
    // root) could have written, in a directory no one else can write, whose checksum matched
    // (see `cache`); kernel sources define functions only, no initialisers.
    let library = unsafe { Library::new(path) }.map_err(|e| RuntimeError::Load {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    Ok(Arc::new(LoadedLibrary { library }))
}

/// A kernel ready to launch: its entry point and the library that holds it.
#[derive(Clone, Debug)]
pub struct CpuProgram {
    entry: KernelEntry,
    entry_name: String,
    // Keeps the code `entry` points into mapped for as long as this program exists.
    _library: Arc<LoadedLibrary>,
}

impl CpuProgram {
    /// The program whose entry point is the C function `entry_name` in `library`.
    pub fn find(library: Arc<LoadedLibrary>, entry_name: &str) -> Result<CpuProgram> {
        // SAFETY: the kernel ABI says entry points have exactly the `KernelEntry` signature;
        // the compile caller names the entry of the source it provided. The function pointer
        // copied out of the symbol stays valid because the program holds the library.
        let entry = unsafe { library.library.get::<KernelEntry>(entry_name.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|e| RuntimeError::EntryNotFound {
                entry: entry_name.to_string(),
                reason: e.to_string(),
            })?;
        Ok(CpuProgram {
            entry,
            entry_name: entry_name.to_string(),
            _library: library,
        })
    }

    /// The name of the entry point.
    pub fn entry_name(&self) -> &str {
        &self.entry_name
    }

    /// Runs the kernel over `buffers`, calling the entry once per core id in `0..threads`,
    /// in parallel on `pool`; returns when all calls have returned.
    ///
    /// # Safety
    ///
    /// As for [`crate::Device::launch_unchecked`]: the kernel, called with these buffers on
    /// core ids `0..threads`, touches only memory inside them and stores only into buffers
    /// that are writable and bound to no other slot.
    pub(crate) unsafe fn run(
        &self,
        buffers: &[&CpuBuffer],
        threads: usize,
        pool: &WorkerPool,
    ) -> Result<()> {
        let cores = i32::try_from(threads)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| {
                RuntimeError::InvalidLaunch(format!(
                    "`{}` launched with {threads} threads; use 1 to {}",
                    self.entry_name,
                    i32::MAX
                ))
            })?;
        let mut locked = LockedBuffers::lock(buffers);
        let pointers = locked.pointers(buffers);
        let call = EntryCall {
            entry: self.entry,
            buffers: pointers.as_ptr(),
        };
        if cores == 1 {
            call.run(0);
            return Ok(());
        }
        // `run` returns only after every part has returned, while `locked` and `pointers`
        // are still alive: this is what makes sharing `call` with the workers sound.
        let result = pool.run(Arc::new(move |core| call.run(core)), cores);
        drop(pointers);
        drop(locked);
        result.map_err(|e| {
            RuntimeError::io(
                format!("running `{}` on {cores} threads", self.entry_name),
                e,
            )
        })
    }
}

/// The distinct allocated buffers of a launch, locked in address order (so concurrent
/// launches sharing buffers cannot deadlock) and held until the kernel has finished. Bound
/// host data is read-only and needs no lock.
struct LockedBuffers<'a> {
    addresses: Vec<usize>,
    guards: Vec<MutexGuard<'a, AlignedWords>>,
}

impl<'a> LockedBuffers<'a> {
    fn lock(buffers: &[&'a CpuBuffer]) -> LockedBuffers<'a> {
        let mut distinct: Vec<&CpuBuffer> = buffers
            .iter()
            .copied()
            .filter(|b| !b.is_read_only())
            .collect();
        distinct.sort_by_key(|b| address(b));
        distinct.dedup_by_key(|b| address(b));
        LockedBuffers {
            addresses: distinct.iter().map(|b| address(b)).collect(),
            guards: distinct.iter().map(|b| b.lock()).collect(),
        }
    }

    /// One data pointer per argument slot; a buffer passed twice gets the same pointer.
    fn pointers(&mut self, buffers: &[&CpuBuffer]) -> Vec<*mut c_void> {
        let bases: Vec<*mut c_void> = self
            .guards
            .iter_mut()
            .map(|words| words.as_mut_ptr().cast())
            .collect();
        buffers
            .iter()
            .map(|b| {
                if let Some(pointer) = b.host_pointer() {
                    return pointer;
                }
                let slot = self
                    .addresses
                    .binary_search(&address(b))
                    .expect("every argument was locked");
                bases[slot]
            })
            .collect()
    }
}

fn address(buffer: &CpuBuffer) -> usize {
    std::ptr::from_ref(buffer) as usize
}

/// One kernel call's entry point and argument array, shared by the threads of a launch.
#[derive(Clone, Copy)]
struct EntryCall {
    entry: KernelEntry,
    buffers: *const *mut c_void,
}

// SAFETY: the argument array and the buffers it points to are owned by `CpuProgram::run`,
// which holds every buffer's lock until `WorkerPool::run` has seen every part return; no
// copy of an `EntryCall` is used after that. Sharing the pointers between the launch's
// threads is what the kernel ABI asks for: each core id writes its own part of the outputs.
unsafe impl Send for EntryCall {}
// SAFETY: as for `Send`; the call only reads its two fields.
unsafe impl Sync for EntryCall {}

impl EntryCall {
    fn run(self, core_id: i32) {
        // SAFETY: `entry` has the kernel ABI signature (see `CpuProgram::find`); `buffers`
        // holds one live pointer per argument slot of the launch, aligned for its element
        // type: a locked allocation, or bound host data that no slot of the launch writes.
        // That the kernel stays inside them for this core id is the contract of
        // `CpuProgram::run`, which `Device::launch` checks against the kernel's arguments.
        unsafe { (self.entry)(self.buffers, core_id) }
    }
}
