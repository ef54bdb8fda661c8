//! Host memory for kernels: zero-initialised, 16-byte aligned, counted while alive.
//!
//! The bytes live in a `Vec<u128>`, which gives the alignment vector loads want without any
//! `unsafe` allocation code; copies in and out go through `u128::{from,to}_ne_bytes`, so the
//! bytes are laid out exactly as C sees them. A mutex makes a buffer shareable between
//! threads: a launch holds it for the whole run of a kernel, so host copies never observe a
//! half-written result.

use crate::error::{Result, RuntimeError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

const WORD: usize = std::mem::size_of::<u128>();

/// How many buffers of one device are alive, and how many bytes they hold.
#[derive(Debug, Default)]
pub struct LiveBuffers {
    count: AtomicUsize,
    bytes: AtomicUsize,
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
}

/// A block of host memory a CPU kernel reads and writes.
#[derive(Debug)]
pub struct CpuBuffer {
    words: Mutex<Vec<u128>>,
    len: usize,
    live: Arc<LiveBuffers>,
}

impl CpuBuffer {
    /// `len` zero bytes, counted in `live` until dropped.
    pub(crate) fn zeroed(len: usize, live: Arc<LiveBuffers>) -> CpuBuffer {
        live.count.fetch_add(1, Ordering::Relaxed);
        live.bytes.fetch_add(len, Ordering::Relaxed);
        CpuBuffer {
            words: Mutex::new(vec![0u128; len.div_ceil(WORD)]),
            len,
            live,
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
        let mut words = self.lock();
        for (word, chunk) in words.iter_mut().zip(src.chunks(WORD)) {
            let mut bytes = [0u8; WORD];
            bytes[..chunk.len()].copy_from_slice(chunk);
            *word = u128::from_ne_bytes(bytes);
        }
        Ok(())
    }

    /// Copies the whole buffer into `dst`, which must be exactly as long.
    pub fn read_bytes(&self, dst: &mut [u8]) -> Result<()> {
        self.check_len("copy_out", dst.len())?;
        let words = self.lock();
        for (chunk, word) in dst.chunks_mut(WORD).zip(words.iter()) {
            chunk.copy_from_slice(&word.to_ne_bytes()[..chunk.len()]);
        }
        Ok(())
    }

    /// The contents as a new byte vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; self.len];
        self.read_bytes(&mut bytes)
            .expect("a buffer-sized vector fits the buffer");
        bytes
    }

    /// Exclusive access to the memory, for a launch. A panic elsewhere cannot leave plain
    /// bytes in an invalid state, so a poisoned lock is simply taken over.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<u128>> {
        self.words.lock().unwrap_or_else(PoisonError::into_inner)
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

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        self.live.count.fetch_sub(1, Ordering::Relaxed);
        self.live.bytes.fetch_sub(self.len, Ordering::Relaxed);
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
        assert_eq!(buffer.to_bytes(), data);
    }

    #[test]
    fn memory_is_sixteen_byte_aligned() {
        let buffer = CpuBuffer::zeroed(40, Arc::new(LiveBuffers::default()));
        assert_eq!(buffer.lock().as_ptr() as usize % 16, 0);
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
    }
}
