//! The vmap scope ops at the tensor level (seeds/vmap-vmapin-vmapout.md, section 3):
//! `vmapin` slices the batch axes out with a loop `Range`, `vmapout` puts them back.

use super::Tensor;
use crate::uop::{Op, UOp};

impl Tensor {
    /// Enters a vmap scope: `vargs` has one entry per axis, a `Range` for each batch axis
    /// (dropped from the shape) or an index `Const(0)` for each kept axis.
    ///
    /// # Panics
    ///
    /// Unless there is one varg per axis, on a varg that is neither a `Range` nor an index
    /// `Const(0)`, or a `Range` whose bound differs from its axis's size.
    #[track_caller]
    pub fn vmapin(&self, vargs: &[UOp]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("vmapin");
        let shape = self.shape();
        if vargs.len() != shape.len() {
            panic!(
                "vmapin: {} vargs for a tensor of shape {shape:?}; give one per axis",
                vargs.len()
            );
        }
        for (axis, (varg, size)) in vargs.iter().zip(&shape).enumerate() {
            check_varg("vmapin", varg);
            if let Some(bound) = range_bound(varg)
                && bound != *size
            {
                panic!(
                    "vmapin: the range of axis {axis} runs to {bound} but the axis has size {size}"
                );
            }
        }
        Tensor::from_uop(self.uop().vmapin(vargs))
    }

    /// Leaves a vmap scope: `vargs` has a `Range` where a batch axis is inserted and an index
    /// `Const(0)` for each axis of `self`, in the order of the result's axes.
    ///
    /// # Panics
    ///
    /// Unless there is one `Const(0)` per axis of `self`, or on a varg that is neither a `Range`
    /// nor an index `Const(0)`.
    #[track_caller]
    pub fn vmapout(&self, vargs: &[UOp]) -> Tensor {
        let _op = super::op_scope::OpScope::enter("vmapout");
        let kept = vargs.iter().filter(|v| v.op() == Op::Const).count();
        if kept != self.ndim() {
            panic!(
                "vmapout: {kept} Const(0) vargs for a tensor of shape {:?}; give one per axis plus a Range per batch axis",
                self.shape()
            );
        }
        vargs.iter().for_each(|v| check_varg("vmapout", v));
        Tensor::from_uop(self.uop().vmapout(vargs))
    }
}

#[track_caller]
fn check_varg(op: &str, varg: &UOp) {
    let is_zero = varg.op() == Op::Const && varg.const_value().is_some_and(|v| v.as_i64() == 0);
    if !is_zero && varg.op() != Op::Range {
        panic!(
            "{op}: each varg must be a Range or an index Const(0), got {}",
            varg.op()
        );
    }
}

fn range_bound(varg: &UOp) -> Option<usize> {
    (varg.op() == Op::Range)
        .then(|| varg.s(0).const_value().map(|v| v.as_i64() as usize))
        .flatten()
}
