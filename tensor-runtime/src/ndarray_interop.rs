//! `ndarray` arrays in and out of device buffers.
//!
//! Both directions copy: a buffer's memory belongs to its device (and, on the CPU, is held as
//! aligned words behind a lock), so an array never borrows it. To hand an owned array to a
//! tensor without a copy, use `Tensor::from_ndarray`, which keeps the array's vector as the
//! tensor's host data (read in place by CPU kernels).

use crate::device::Device;
use crate::error::{Result, RuntimeError};
use crate::host_alloc::collect_exact;
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use tensor_core::{DType, Element};

/// A new buffer on `device` holding `array`'s elements in row-major order, whatever the
/// array's own memory layout.
pub fn buffer_from_array<D, S, E>(device: &D, array: &ArrayBase<S, E>) -> Result<D::Buffer>
where
    D: Device,
    S: Data,
    S::Elem: Element,
    E: Dimension,
{
    let values = collect_exact(array.len(), array.iter().copied())?;
    let bytes = byte_len(
        values.len(),
        <S::Elem as Element>::DTYPE,
        "buffer_from_array",
    )?;
    let buffer = device.allocate(bytes)?;
    device.copy_in_elements(&buffer, &values)?;
    Ok(buffer)
}

/// The contents of `buffer`, which holds `T` elements in row-major order, as an array of
/// `shape`.
pub fn array_from_buffer<D, T>(device: &D, buffer: &D::Buffer, shape: &[usize]) -> Result<ArrayD<T>>
where
    D: Device,
    T: Element,
{
    let elements =
        element_count(shape).ok_or_else(|| too_many_elements(shape, "array_from_buffer"))?;
    let wanted = byte_len(elements, T::DTYPE, "array_from_buffer")
        .map_err(|_| too_many_elements(shape, "array_from_buffer"))?;
    let held = device.buffer_len(buffer);
    if wanted != held {
        return Err(RuntimeError::SizeMismatch {
            operation: "array_from_buffer (shape times element size)",
            buffer_bytes: held,
            data_bytes: wanted,
        });
    }
    let values = device.copy_out_elements::<T>(buffer, T::DTYPE)?;
    Ok(ArrayD::from_shape_vec(IxDyn(shape), values).expect("length checked against the shape"))
}

/// The elements of an array of `shape`, where `ndarray` can make one: the product of its
/// non-zero extents must fit in `isize` (even when another extent is zero).
fn element_count(shape: &[usize]) -> Option<usize> {
    let nonzero = shape
        .iter()
        .filter(|&&extent| extent != 0)
        .try_fold(1usize, |count, &extent| count.checked_mul(extent))
        .filter(|&count| isize::try_from(count).is_ok())?;
    Some(if shape.contains(&0) { 0 } else { nonzero })
}

/// The bytes of `elements` values of `dtype`, refused when that overflows `usize`.
fn byte_len(elements: usize, dtype: DType, operation: &str) -> Result<usize> {
    elements.checked_mul(dtype.size_bytes()).ok_or_else(|| {
        RuntimeError::InvalidArgument(format!(
            "{operation}: {elements} {dtype} elements have more bytes than memory can address"
        ))
    })
}

/// The error for a `shape` whose element or byte count overflows `usize`.
fn too_many_elements(shape: &[usize], operation: &str) -> RuntimeError {
    RuntimeError::InvalidArgument(format!(
        "{operation}: shape {shape:?} has more elements than memory can address"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{CpuConfig, CpuDevice, default_flags};
    use ndarray::{Array2, ShapeBuilder};

    fn device() -> CpuDevice {
        CpuDevice::with_config(CpuConfig {
            compiler: "cc".into(),
            flags: default_flags(),
            cache_dir: None,
            threads: 1,
            ..Default::default()
        })
    }

    #[test]
    fn column_major_array_goes_in_row_major() {
        let device = device();
        let array =
            Array2::from_shape_vec((2, 3).f(), vec![1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0]).unwrap();
        let buffer = buffer_from_array(&device, &array).unwrap();
        let flat: Vec<f32> = device
            .copy_out_elements(&buffer, tensor_core::DType::F32)
            .unwrap();
        assert_eq!(flat, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let back = array_from_buffer::<_, f32>(&device, &buffer, &[2, 3]).unwrap();
        assert_eq!(back, array.into_dyn());
    }

    #[test]
    fn shape_whose_count_wraps_around_is_an_error_not_a_panic() {
        let device = device();
        let sixteen = device.allocate(16).unwrap();
        let empty = device.allocate(0).unwrap();
        // (2^62 + 1) * 4 elements wraps to 4 (16 bytes of f32); 2^62 f32s are 2^64 bytes,
        // which wraps to 0: each would pass a wrapping size check.
        let cases: [(&[usize], &_); 4] = [
            (&[(1 << 62) + 1, 4], &sixteen),
            (&[1 << 62], &empty),
            (&[usize::MAX, 2], &sixteen),
            (&[2, usize::MAX, 0, 3], &sixteen),
        ];
        // With a zero extent there are no elements, but ndarray still needs the other
        // extents' product to fit in `isize`.
        for (shape, buffer) in cases {
            let err = array_from_buffer::<_, f32>(&device, buffer, shape).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, RuntimeError::InvalidArgument(_)), "{text}");
            assert!(
                text.contains("array_from_buffer") && text.contains(&format!("{shape:?}")),
                "{text}"
            );
        }
        let zero = array_from_buffer::<_, f32>(&device, &empty, &[0, 1 << 40]).unwrap();
        assert_eq!(zero.shape(), &[0, 1 << 40]);
        let err = array_from_buffer::<_, f32>(&device, &sixteen, &[0, 3]).unwrap_err();
        assert!(matches!(err, RuntimeError::SizeMismatch { .. }), "{err}");
    }

    #[test]
    fn shape_that_does_not_fit_the_buffer_is_an_error() {
        let device = device();
        let buffer = device.allocate(24).unwrap();
        let err = array_from_buffer::<_, f32>(&device, &buffer, &[2, 2]).unwrap_err();
        assert!(
            err.to_string().contains("24 bytes but the data has 16"),
            "{err}"
        );
    }
}
