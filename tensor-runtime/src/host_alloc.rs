//! Host vectors whose size comes from user data (a tensor's element count, an array's
//! length), allocated fallibly: where the memory cannot be had, the caller gets
//! [`RuntimeError::OutOfMemory`] to report, where `Vec::with_capacity` or `vec!` would abort
//! the process.

use crate::error::{Result, RuntimeError};

/// The name out-of-memory errors give the host (for memory that is no device's buffer).
const HOST: &str = "host";

/// An empty vector with room for exactly `len` elements of `T`.
pub(crate) fn vec_with_capacity<T>(len: usize) -> Result<Vec<T>> {
    let mut vec = Vec::new();
    vec.try_reserve_exact(len)
        .map_err(|_| out_of_memory(len.saturating_mul(std::mem::size_of::<T>())))?;
    Ok(vec)
}

/// `len` zero bytes (written, so every page is touched: for a copy's destination, which is
/// about to be written anyway).
pub(crate) fn zeroed_bytes(len: usize) -> Result<Vec<u8>> {
    let mut bytes = vec_with_capacity(len)?;
    bytes.resize(len, 0);
    Ok(bytes)
}

/// The elements of `values`, collected into a vector allocated fallibly for `len` of them
/// (the iterator's exact length).
pub(crate) fn collect_exact<T>(len: usize, values: impl Iterator<Item = T>) -> Result<Vec<T>> {
    let mut vec = vec_with_capacity(len)?;
    vec.extend(values);
    Ok(vec)
}

/// The error for a host allocation of `bytes` bytes that failed.
pub(crate) fn out_of_memory(bytes: usize) -> RuntimeError {
    RuntimeError::OutOfMemory {
        device: HOST.to_string(),
        bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_beyond_the_address_space_are_out_of_memory_errors() {
        for len in [usize::MAX, usize::MAX / 2, 1 << 60] {
            let err = vec_with_capacity::<u32>(len).unwrap_err();
            assert!(
                matches!(&err, RuntimeError::OutOfMemory { device, .. } if device == "host"),
                "{err}"
            );
            assert!(zeroed_bytes(len).is_err());
        }
        let err = vec_with_capacity::<u64>(1 << 61).unwrap_err();
        assert!(err.to_string().contains(&usize::MAX.to_string()), "{err}");
    }

    #[test]
    fn small_sizes_are_allocated_as_asked() {
        assert_eq!(zeroed_bytes(5).unwrap(), vec![0; 5]);
        let v = vec_with_capacity::<f32>(7).unwrap();
        assert!(v.is_empty() && v.capacity() >= 7);
        assert_eq!(collect_exact(3, 1..=3).unwrap(), vec![1, 2, 3]);
    }
}
