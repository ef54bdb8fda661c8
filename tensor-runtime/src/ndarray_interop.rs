//! `ndarray` arrays in and out of device buffers.
//!
//! Both directions copy: a buffer's memory belongs to its device (and, on the CPU, is held as
//! aligned words behind a lock), so an array never borrows it. To hand an owned array to a
//! tensor without a copy, use `Tensor::from_ndarray`, which keeps the array's vector as the
//! tensor's host data (read in place by CPU kernels).

use crate::device::Device;
use crate::error::{Result, RuntimeError};
use ndarray::{ArrayBase, ArrayD, Data, Dimension, IxDyn};
use tensor_core::Element;

/// A new buffer on `device` holding `array`'s elements in row-major order, whatever the
/// array's own memory layout.
pub fn buffer_from_array<D, S, E>(device: &D, array: &ArrayBase<S, E>) -> Result<D::Buffer>
where
    D: Device,
    S: Data,
    S::Elem: Element,
    E: Dimension,
{
    let values: Vec<S::Elem> = array.iter().copied().collect();
    let buffer = device.allocate(values.len() * <S::Elem as Element>::DTYPE.size_bytes())?;
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
    let elements: usize = shape.iter().product();
    let wanted = elements * T::DTYPE.size_bytes();
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
