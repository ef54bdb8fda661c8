//! `HostArray`: a dense row-major array of scalars on the host, the interpreter's value type.

use crate::uop::dtype::Element;
use crate::uop::{DType, Scalar, Shape};

/// A dense n-dimensional array in row-major order: what the interpreter computes for a node.
///
/// Every element is held as a [`Scalar`] of the variant its dtype calls for (`Bool` for bool,
/// `Int` for integers, `Float` for floats, already rounded to the dtype).
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    /// The element type.
    pub dtype: DType,
    /// The size of each axis, outermost first.
    pub shape: Shape,
    /// The elements in row-major order.
    pub data: Vec<Scalar>,
}

impl HostArray {
    /// An array of `shape` holding `data` (each value converted to `dtype` as a C cast would).
    #[track_caller]
    pub fn new(dtype: DType, shape: &[usize], data: Vec<Scalar>) -> HostArray {
        let numel: usize = shape.iter().product();
        assert_eq!(
            data.len(),
            numel,
            "HostArray: {} values do not fill shape {shape:?} ({numel} elements)",
            data.len()
        );
        let data = data.into_iter().map(|v| v.cast(dtype)).collect();
        HostArray {
            dtype,
            shape: shape.to_vec(),
            data,
        }
    }

    /// An array of `shape` holding `data` in row-major order, with the dtype of `T`.
    #[track_caller]
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> HostArray {
        let scalars = data.into_iter().map(Element::to_scalar).collect();
        HostArray::new(T::DTYPE, shape, scalars)
    }

    /// A shape-`()` array holding `value` as `dtype`.
    pub fn scalar(value: impl Into<Scalar>, dtype: DType) -> HostArray {
        HostArray::new(dtype, &[], vec![value.into()])
    }

    /// The array of `shape` whose element at each multi-index is `element(index)`.
    pub fn from_fn(
        dtype: DType,
        shape: &[usize],
        mut element: impl FnMut(&[usize]) -> Scalar,
    ) -> HostArray {
        let mut data = Vec::with_capacity(shape.iter().product());
        for_each_index(shape, |idx| data.push(element(idx)));
        HostArray {
            dtype,
            shape: shape.to_vec(),
            data,
        }
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.data.len()
    }

    /// The number of axes.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The element at a multi-index. Panics when the index is outside the shape.
    #[track_caller]
    pub fn get(&self, index: &[usize]) -> Scalar {
        self.data[flat_offset(index, &self.shape)]
    }

    /// The elements as Rust values of type `T`, in row-major order.
    ///
    /// The array's dtype must be of the same kind as `T` (bool, integer or float); widths may
    /// differ (`to_vec::<f32>()` reads an `F16` array exactly).
    #[track_caller]
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        assert_eq!(
            kind(self.dtype),
            kind(T::DTYPE),
            "HostArray::to_vec: cannot read a {} array as {}",
            self.dtype,
            T::DTYPE
        );
        self.data.iter().map(|&s| T::from_scalar(s)).collect()
    }

    /// The elements as f64 (bools are 0 or 1, `U64` values read unsigned).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.data
            .iter()
            .map(|&s| match s {
                Scalar::Int(i) if self.dtype == DType::U64 => i as u64 as f64,
                s => s.as_f64(),
            })
            .collect()
    }

    /// True when both arrays have the same shape and every pair of elements satisfies
    /// `|a - b| <= atol + rtol * |b|` (`other` is the expected value). NaNs match NaNs and
    /// infinities match infinities of the same sign.
    pub fn allclose(&self, other: &HostArray, rtol: f64, atol: f64) -> bool {
        self.first_mismatch(other, rtol, atol).is_none() && self.shape == other.shape
    }

    /// Panics, naming the first differing element, unless `self` is [`allclose`] to
    /// `expected` with the same dtype.
    ///
    /// [`allclose`]: HostArray::allclose
    #[track_caller]
    pub fn assert_close(&self, expected: &HostArray, rtol: f64, atol: f64) {
        assert_eq!(
            (self.dtype, &self.shape),
            (expected.dtype, &expected.shape),
            "assert_close: dtype and shape differ"
        );
        if let Some(i) = self.first_mismatch(expected, rtol, atol) {
            let index = unravel(i, &self.shape);
            panic!(
                "assert_close: element {index:?} is {} but {} was expected (rtol {rtol}, atol {atol})",
                self.data[i], expected.data[i]
            );
        }
    }

    fn first_mismatch(&self, other: &HostArray, rtol: f64, atol: f64) -> Option<usize> {
        let (a, b) = (self.to_f64_vec(), other.to_f64_vec());
        if a.len() != b.len() {
            return Some(0);
        }
        a.iter().zip(&b).position(|(&x, &y)| {
            let same_special = (x.is_nan() && y.is_nan()) || (x.is_infinite() && x == y);
            !(same_special || (x - y).abs() <= atol + rtol * y.abs())
        })
    }

    /// The only element of a one-element array.
    #[track_caller]
    pub fn item(&self) -> Scalar {
        assert_eq!(
            self.numel(),
            1,
            "HostArray::item: shape {:?} does not hold exactly one element",
            self.shape
        );
        self.data[0]
    }
}

fn kind(dtype: DType) -> u8 {
    if dtype == DType::Bool {
        0
    } else if dtype.is_float() {
        2
    } else {
        1
    }
}

/// The row-major position of a multi-index in `shape`.
#[track_caller]
pub(crate) fn flat_offset(index: &[usize], shape: &[usize]) -> usize {
    assert_eq!(
        index.len(),
        shape.len(),
        "index {index:?} does not address shape {shape:?}"
    );
    index.iter().zip(shape).fold(0, |acc, (&i, &d)| {
        assert!(i < d, "index {index:?} is outside shape {shape:?}");
        acc * d + i
    })
}

/// The multi-index of row-major position `flat` in `shape`.
pub(crate) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        index[k] = flat % shape[k];
        flat /= shape[k];
    }
    index
}

/// The row-major strides of `shape` (elements, not bytes).
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut out = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        out[k] = out[k + 1] * shape[k + 1];
    }
    out
}

/// Calls `visit` with every multi-index of `shape` in row-major order (once for shape `()`,
/// never when an axis has size 0).
pub(crate) fn for_each_index(shape: &[usize], visit: impl FnMut(&[usize])) {
    // One unit stride list per axis: the offsets are the multi-index itself.
    let axes: Vec<Vec<usize>> = (0..shape.len())
        .map(|k| (0..shape.len()).map(|j| usize::from(j == k)).collect())
        .collect();
    for_each_offset(shape, &axes, visit);
}

/// Walks `shape` in row-major order and calls `visit` with, for each stride list in `strides`,
/// the offset `sum_k idx[k] * strides[j][k]` of the current multi-index `idx` (kept up to date
/// incrementally, which is what makes broadcasting reads cheap).
pub(crate) fn for_each_offset(
    shape: &[usize],
    strides: &[Vec<usize>],
    mut visit: impl FnMut(&[usize]),
) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0; shape.len()];
    let mut offsets = vec![0; strides.len()];
    loop {
        visit(&offsets);
        let mut axis = shape.len();
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            idx[axis] += 1;
            if idx[axis] < shape[axis] {
                for (o, s) in offsets.iter_mut().zip(strides) {
                    *o += s[axis];
                }
                break;
            }
            for (o, s) in offsets.iter_mut().zip(strides) {
                *o -= s[axis] * (shape[axis] - 1);
            }
            idx[axis] = 0;
        }
    }
}
