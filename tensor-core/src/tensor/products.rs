//! Products of vectors: `outer` (a column times a row, broadcast) and `cross` (the 3-vector
//! cross product along one axis, the other axes broadcast as NumPy does).

use super::Tensor;
use super::broadcast::{broadcast_shapes, normalize_axis};

impl Tensor {
    /// The outer product `self[i] * other[j]` of the flattened inputs (NumPy's `outer`,
    /// PyTorch's `outer`); the inputs promote as for `*`.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let a = Tensor::from_vec(vec![1, 2], &[2]);
    /// let b = Tensor::from_vec(vec![3, 4, 5], &[3]);
    /// assert_eq!(evaluate(&a.outer(&b).uop()).to_vec::<i32>(), vec![3, 4, 5, 6, 8, 10]);
    /// ```
    pub fn outer(&self, other: &Tensor) -> Tensor {
        let _op = super::op_scope::OpScope::enter("outer");
        let a = self.reshape(&[self.numel()]).unsqueeze(1);
        let b = other.reshape(&[other.numel()]).unsqueeze(0);
        a * b
    }

    /// The cross product of the 3-vectors along `axis` of `self` and `other` (NumPy's
    /// `cross(a, b, axis=axis)`, PyTorch's `linalg.cross(a, b, dim=axis)`): the other axes
    /// broadcast, and the result's vectors lie along `axis` counted in the result. NumPy's
    /// 2-vectors are not taken.
    ///
    /// ```
    /// # use tensor_core::{Tensor, interp::evaluate};
    /// let x = Tensor::from_vec(vec![1, 0, 0], &[3]);
    /// let y = Tensor::from_vec(vec![0, 1, 0], &[3]);
    /// assert_eq!(evaluate(&x.cross(&y, -1).uop()).to_vec::<i32>(), vec![0, 0, 1]);
    /// ```
    ///
    /// # Panics
    ///
    /// On an axis out of range of either input, an axis whose size is not 3, or other axes that
    /// do not broadcast.
    #[track_caller]
    pub fn cross(&self, other: &Tensor, axis: isize) -> Tensor {
        let _op = super::op_scope::OpScope::enter("cross");
        let (sa, sb) = (self.shape(), other.shape());
        let (a, b) = (vectors_last(self, axis), vectors_last(other, axis));
        let lead = |s: &[usize]| s[..s.len() - 1].to_vec();
        let (la, lb) = (lead(&a.shape()), lead(&b.shape()));
        if a.shape().last() != Some(&3) || b.shape().last() != Some(&3) {
            panic!(
                "cross: axis {axis} of shapes {sa:?} and {sb:?} must have size 3 in both (the \
                 3-vectors)"
            );
        }
        broadcast_shapes("cross", &[la, lb]);
        let part = |t: &Tensor, i: isize| t.slice(-1, i, i + 1).squeeze(-1);
        let (a0, a1, a2) = (part(&a, 0), part(&a, 1), part(&a, 2));
        let (b0, b1, b2) = (part(&b, 0), part(&b, 1), part(&b, 2));
        let c = [
            &a1 * &b2 - &a2 * &b1,
            &a2 * &b0 - &a0 * &b2,
            &a0 * &b1 - &a1 * &b0,
        ];
        let out = Tensor::stack(&c, -1);
        let last = out.ndim() - 1;
        let to = normalize_axis("cross", axis, &out.shape());
        let mut order: Vec<usize> = (0..last).collect();
        order.insert(to, last);
        out.permute(&order)
    }
}

/// `t` with its `axis` moved last.
#[track_caller]
fn vectors_last(t: &Tensor, axis: isize) -> Tensor {
    let shape = t.shape();
    let ax = normalize_axis("cross", axis, &shape);
    let order: Vec<usize> = (0..shape.len()).filter(|&d| d != ax).chain([ax]).collect();
    t.permute(&order)
}
