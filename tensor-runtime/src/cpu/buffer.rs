//! Host memory for kernels: zero-initialised, 64-byte aligned, counted while alive; or a
//! tensor's own host vector, bound read-only in place.
//!
//! Allocated bytes live in 64-byte aligned 16-byte words (`memory::AlignedWords`: the
//! alignment of a cache line and of the widest vector load, pages mapped on first touch),
//! rounded up to whole 64-byte lines; copies in and out go through
//! `u128::{from,to}_ne_bytes`, so the bytes are laid out exactly as C sees them. A mutex makes a buffer shareable between
//! threads: a launch holds it for the whole run of a kernel, so host copies never observe a
//! half-written result.
//!
//! A bound host vector (a tensor made with `Tensor::from_ndarray`) is not device memory: it
//! is not counted, never locked (nothing writes it), and refuses copies in; the launch checks
//! that no kernel stores into it.

use super::memory::{ALIGNMENT, AlignedWords, WORD};
use super::recycle::Recycler;
use crate::error::{Result, RuntimeError};
use crate::host_alloc::{vec_with_capacity, zeroed_bytes};
use std::borrow::Cow;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tensor_core::uop::HostData;

/// The bytes [`CpuBuffer::read_elements`] decodes at a time.
const PAGE_BYTES: usize = 4096;

/// The words of an allocation of `len` bytes: whole 64-byte lines, so a kernel's aligned
/// vector access of the last line stays inside the allocation.
fn words_for(len: usize) -> usize {
    len.div_ceil(ALIGNMENT) * (ALIGNMENT / WORD)
}

/// How many buffers of one device are alive, how many bytes they hold, and the high-water
/// marks since the last [`LiveBuffers::reset_peaks`]: the most bytes held at once and the
/// largest single buffer (what a test reads to prove a computation never held a buffer of
/// some size).
#[derive(Debug, Default)]
pub struct LiveBuffers {
    count: AtomicUsize,
    bytes: AtomicUsize,
    peak_bytes: AtomicUsize,
    largest: AtomicUsize,
}

impl LiveBuffers {
    /// Buffers allocated and not yet dropped.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Bytes held by live buffers.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The most bytes live buffers held at once since the last reset.
    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes.load(Ordering::Relaxed)
    }

    /// The size in bytes of the largest buffer allocated (or recycled) since the last reset.
    pub fn largest_buffer(&self) -> usize {
        self.largest.load(Ordering::Relaxed)
    }

    /// Starts both high-water marks again from what is live now.
    pub fn reset_peaks(&self) {
        self.peak_bytes.store(self.bytes(), Ordering::Relaxed);
        self.largest.store(0, Ordering::Relaxed);
    }

    fn add(&self, len: usize) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let now = self.bytes.fetch_add(len, Ordering::Relaxed) + len;
        self.peak_bytes.fetch_max(now, Ordering::Relaxed);
        self.largest.fetch_max(len, Ordering::Relaxed);
    }
}

/// A block of host memory a CPU kernel reads (and, unless it is bound host data, writes).
pub struct CpuBuffer {
    memory: Memory,
    len: usize,
}

enum Memory {
    /// Memory of the device, counted in `live` until dropped.
    Allocated {
        words: Mutex<AlignedWords>,
        live: Arc<LiveBuffers>,
        /// Where the memory goes when the buffer is dropped (`None`: back to the system).
        recycler: Option<Arc<Recycler>>,
    },
    /// A tensor's host elements in native layout, read in place.
    Host(Arc<dyn HostData>),
}

impl std::fmt::Debug for CpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.memory {
            Memory::Allocated { .. } => "allocated",
            Memory::Host(_) => "host data",
        };
        write!(f, "CpuBuffer({} bytes, {kind})", self.len)
    }
}

impl CpuBuffer {
    /// `len` zero bytes, counted in `live` until dropped, freed when dropped.
    #[cfg(test)]
    pub(crate) fn zeroed(len: usize, live: Arc<LiveBuffers>) -> CpuBuffer {
        let words = AlignedWords::zeroed(words_for(len)).expect("a test's small allocation");
        CpuBuffer::counted(words, len, live, None)
    }

    /// `len` zero bytes taken from `recycler` (reusing freed memory of the same length when
    /// it holds some) and given back to it when dropped; counted in `live` until then. `None`
    /// when the memory cannot be had.
    pub(crate) fn recycled(
        len: usize,
        live: Arc<LiveBuffers>,
        recycler: &Arc<Recycler>,
    ) -> Option<CpuBuffer> {
        let words = recycler.take(words_for(len))?;
        Some(CpuBuffer::counted(words, len, live, Some(recycler.clone())))
    }

    /// Like [`CpuBuffer::recycled`], but reused memory keeps whatever it held: for a kernel
    /// output that the kernel overwrites entirely.
    pub(crate) fn recycled_unzeroed(
        len: usize,
        live: Arc<LiveBuffers>,
        recycler: &Arc<Recycler>,
    ) -> Option<CpuBuffer> {
        let words = recycler.take_unzeroed(words_for(len))?;
        Some(CpuBuffer::counted(words, len, live, Some(recycler.clone())))
    }

    fn counted(
        words: AlignedWords,
        len: usize,
        live: Arc<LiveBuffers>,
        recycler: Option<Arc<Recycler>>,
    ) -> CpuBuffer {
        live.add(len);
        CpuBuffer {
            memory: Memory::Allocated {
                words: Mutex::new(words),
                live,
                recycler,
            },
            len,
        }
    }

    /// A read-only buffer over `data`'s own elements, if they are in native layout (a
    /// kernel then reads them where they are; nothing is allocated or copied).
    pub(crate) fn over_host(data: Arc<dyn HostData>) -> Option<CpuBuffer> {
        if !data.native_layout() {
            return None;
        }
        let len = data.len().checked_mul(data.dtype().size_bytes())?;
        Some(CpuBuffer {
            memory: Memory::Host(data),
            len,
        })
    }

    /// True for bound host data, which kernels must not write.
    pub fn is_read_only(&self) -> bool {
        matches!(self.memory, Memory::Host(_))
    }

    /// The address a kernel reading this buffer is given, without locking it (for checking
    /// where bound host data is read; an allocation's address is only stable while locked).
    pub fn data_address(&self) -> usize {
        match &self.memory {
            Memory::Allocated { .. } => self.lock().words().as_ptr() as usize,
            Memory::Host(data) => data.as_ptr() as usize,
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Overwrites the whole buffer with `src`, which must be exactly as long.
    pub fn write_bytes(&self, src: &[u8]) -> Result<()> {
        self.check_len("copy_in", src.len())?;
        let Memory::Allocated { words, .. } = &self.memory else {
            return Err(RuntimeError::InvalidLaunch(
                "copy_in into a tensor's bound host data, which is read-only".to_string(),
            ));
        };
        let mut memory = words.lock().unwrap_or_else(PoisonError::into_inner);
        for (word, chunk) in memory.words_mut().iter_mut().zip(src.chunks(WORD)) {
            let mut bytes = [0u8; WORD];
            bytes[..chunk.len()].copy_from_slice(chunk);
            *word = u128::from_ne_bytes(bytes);
        }
        Ok(())
    }

    /// Copies the whole buffer into `dst`, which must be exactly as long.
    pub fn read_bytes(&self, dst: &mut [u8]) -> Result<()> {
        self.check_len("copy_out", dst.len())?;
        let memory = match &self.memory {
            Memory::Allocated { .. } => self.lock(),
            Memory::Host(data) => {
                dst.copy_from_slice(&self.host_bytes(data.as_ref()));
                return Ok(());
            }
        };
        for (chunk, word) in dst.chunks_mut(WORD).zip(memory.words()) {
            chunk.copy_from_slice(&word.to_ne_bytes()[..chunk.len()]);
        }
        Ok(())
    }

    /// The contents as elements of `T` (the buffer's bytes read as `T`s, little-endian): one
    /// pass over the memory, no byte copy in between. Fails with
    /// [`RuntimeError::OutOfMemory`] where the host cannot hold the result.
    pub fn read_elements<T: tensor_core::Element>(&self) -> Result<Vec<T>> {
        let count = self.len / T::DTYPE.size_bytes();
        // Room for the padding of the last 64-byte line, decoded with it and cut off below.
        let mut out = vec_with_capacity(count.saturating_add(ALIGNMENT))?;
        match &self.memory {
            // A page at a time, as below: decoding some element types goes through scalars,
            // which would otherwise be a second copy of the whole contents.
            Memory::Host(data) => {
                for page in self.host_bytes(data.as_ref()).chunks(PAGE_BYTES) {
                    T::decode_into(page, &mut out);
                }
            }
            Memory::Allocated { .. } => {
                // Decoded a page at a time through a buffer on the stack: a decode per 16-byte
                // word costs more than the copy, and a heap copy of the whole buffer costs
                // its page faults.
                let mut page = [0u8; PAGE_BYTES];
                let memory = self.lock();
                for words in memory.words().chunks(PAGE_BYTES / WORD) {
                    let mut filled = 0;
                    for word in words {
                        page[filled..filled + 16].copy_from_slice(&word.to_le_bytes());
                        filled += 16;
                    }
                    T::decode_into(&page[..filled], &mut out);
                }
            }
        }
        out.truncate(count);
        Ok(out)
    }

    /// The contents as a new byte vector; fails with [`RuntimeError::OutOfMemory`] where the
    /// host cannot hold it.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut bytes = zeroed_bytes(self.len)?;
        self.read_bytes(&mut bytes)?;
        Ok(bytes)
    }

    /// Exclusive access to allocated memory, for a launch. A panic elsewhere cannot leave
    /// plain bytes in an invalid state, so a poisoned lock is simply taken over.
    ///
    /// Panics for bound host data, which has no lock: see [`CpuBuffer::host_pointer`].
    pub(crate) fn lock(&self) -> MutexGuard<'_, AlignedWords> {
        match &self.memory {
            Memory::Allocated { words, .. } => words.lock().unwrap_or_else(PoisonError::into_inner),
            Memory::Host(_) => panic!("bound host data is not locked: read it in place"),
        }
    }

    /// The encoded (little-endian) bytes of bound host `data`: its memory read in place on a
    /// little-endian machine, where the two are the same, so reading a large vector back
    /// allocates nothing; else the data's own encoding.
    fn host_bytes<'d>(&self, data: &'d dyn HostData) -> Cow<'d, [u8]> {
        if !cfg!(target_endian = "little") {
            return data.to_bytes();
        }
        // SAFETY: `over_host` binds only data whose `native_layout` is true, for which the
        // `HostData` contract promises `len()` initialised elements of `dtype()` at
        // `as_ptr()`, valid and unchanged while `data` lives; `self.len` is their byte count
        // (checked against overflow there).
        Cow::Borrowed(unsafe { std::slice::from_raw_parts(data.as_ptr(), self.len) })
    }

    /// The read-only pointer to bound host data; `None` for allocated memory.
    pub(crate) fn host_pointer(&self) -> Option<*mut c_void> {
        match &self.memory {
            Memory::Allocated { .. } => None,
            // The kernel ABI passes every buffer as `void*`; the launch checked that no
            // kernel stores into this slot, and the C source declares inputs `const`.
            Memory::Host(data) => Some(data.as_ptr().cast::<c_void>().cast_mut()),
        }
    }

    fn check_len(&self, operation: &'static str, data_bytes: usize) -> Result<()> {
        if data_bytes == self.len {
            Ok(())
        } else {
            Err(RuntimeError::SizeMismatch {
                operation,
                buffer_bytes: self.len,
                data_bytes,
            })
        }
    }
}

impl tensor_core::uop::DeviceAllocation for CpuBuffer {
    fn read_back(&self) -> Option<Vec<u8>> {
        self.to_bytes().ok()
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        if let Memory::Allocated {
            words,
            live,
            recycler,
        } = &mut self.memory
        {
            live.count.fetch_sub(1, Ordering::Relaxed);
            live.bytes.fetch_sub(self.len, Ordering::Relaxed);
            if let Some(recycler) = recycler {
                let words = words.get_mut().unwrap_or_else(PoisonError::into_inner);
                recycler.give(std::mem::replace(words, AlignedWords::EMPTY));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_including_a_partial_last_word() {
        let live = Arc::new(LiveBuffers::default());
        let buffer = CpuBuffer::zeroed(21, live.clone());
        let data: Vec<u8> = (1..=21).collect();
        buffer.write_bytes(&data).unwrap();
        assert_eq!(buffer.to_bytes().unwrap(), data);
    }

    #[test]
    fn memory_is_sixty_four_byte_aligned() {
        let live = Arc::new(LiveBuffers::default());
        let recycler = Arc::new(Recycler::new(1 << 24));
        for len in [1, 40, 1000, 1 << 20] {
            let plain = CpuBuffer::zeroed(len, live.clone());
            let recycled = CpuBuffer::recycled(len, live.clone(), &recycler).unwrap();
            for buffer in [plain, recycled] {
                assert_eq!(buffer.data_address() % ALIGNMENT, 0, "{len} bytes");
            }
        }
    }

    #[test]
    fn copy_of_wrong_length_is_an_error() {
        let buffer = CpuBuffer::zeroed(8, Arc::new(LiveBuffers::default()));
        let err = buffer.write_bytes(&[0u8; 4]).unwrap_err();
        assert!(
            err.to_string().contains("8 bytes but the data has 4"),
            "{err}"
        );
    }

    #[test]
    fn live_count_follows_allocation_and_drop() {
        let live = Arc::new(LiveBuffers::default());
        let a = CpuBuffer::zeroed(10, live.clone());
        let b = CpuBuffer::zeroed(6, live.clone());
        assert_eq!((live.count(), live.bytes()), (2, 16));
        drop(a);
        assert_eq!((live.count(), live.bytes()), (1, 6));
        drop(b);
        assert_eq!((live.count(), live.bytes()), (0, 0));
        assert_eq!((live.peak_bytes(), live.largest_buffer()), (16, 10));
        live.reset_peaks();
        let c = CpuBuffer::zeroed(4, live.clone());
        assert_eq!((live.peak_bytes(), live.largest_buffer()), (4, 4));
        drop(c);
    }
}
