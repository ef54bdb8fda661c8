//! The derived `axis`: which axis of a value is split across the devices of a multi-device
//! tuple (tinyspec "Derived Properties"). `None` means the value is not sharded.

use super::fast_hash::FastMap;
use super::{Arg, Device, Op, UOp};
use crate::uop::shape::operand_values;

/// The sharded axis of `u`, following tinyspec's rules: derived for every node below `u` it
/// depends on, operands first (a walk with an explicit stack, not a recursion per op).
pub fn derive(u: &UOp) -> Option<usize> {
    let mut axes: FastMap<UOp, Option<usize>> = FastMap::default();
    for node in u.toposort_along(inherited_from, |_| true) {
        let axis = own_axis(&node, |s| axes.get(s).copied().flatten());
        axes.insert(node, axis);
    }
    axes.get(u).copied().flatten()
}

/// The operands whose axes `u`'s axis is derived from.
fn inherited_from(u: &UOp) -> &[UOp] {
    match (u.op(), u.arg()) {
        (Op::Buffer | Op::Copy, _) => &[],
        (Op::Reshape | Op::Permute, _) | (Op::Reduce, Arg::Reduce(..)) => {
            u.src().get(..1).unwrap_or_default()
        }
        (op, _) if op.is_elementwise() || op.is_movement() || op.is_marker() => u.src(),
        _ => &[],
    }
}

/// The sharded axis of `u` given the axes of its operands (`of`).
fn own_axis(u: &UOp, of: impl Fn(&UOp) -> Option<usize>) -> Option<usize> {
    match (u.op(), u.arg()) {
        (Op::Buffer, Arg::Buffer(b)) => matches!(b.device, Device::Multi(_)).then_some(0),
        (Op::Copy, Arg::Device(Device::Multi(_))) => Some(0),
        (Op::Copy, _) => None,
        (Op::Reshape, _) => reshaped_axis(u, of(u.s(0))?),
        (Op::Permute, Arg::Permutation(p)) => {
            let from = of(u.s(0))?;
            p.iter().position(|&a| a == from)
        }
        (Op::Reduce, Arg::Reduce(_, axes)) => {
            let from = of(u.s(0))?;
            (!axes.contains(&from)).then_some(from)
        }
        (op, _) if op.is_elementwise() || op.is_movement() || op.is_marker() => {
            u.src().iter().find_map(of)
        }
        _ => None,
    }
}

/// Where the sharded axis `from` of a reshape's operand lands: the output axis that starts
/// at the same element stride, so the shard boundary is preserved; `None` if no axis does.
fn reshaped_axis(u: &UOp, from: usize) -> Option<usize> {
    let before = u.s(0).shape()?;
    let after = operand_values(u.s(1))?;
    let outer_before: usize = before[..from].iter().product();
    let mut outer_after = 1;
    for (i, &d) in after.iter().enumerate() {
        if outer_after == outer_before && d != 1 {
            return Some(i);
        }
        outer_after *= d;
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::uop::{DType, Device, ReduceOp, UOp};

    fn sharded(shape: &[usize]) -> UOp {
        let devices = Device::Multi(vec!["CPU:0".into(), "CPU:1".into()]);
        UOp::new_buffer(shape.iter().product(), DType::F32, devices).reshape(shape)
    }

    #[test]
    fn a_multi_device_buffer_is_sharded_on_axis_zero() {
        let devices = Device::Multi(vec!["CPU:0".into(), "CPU:1".into()]);
        assert_eq!(UOp::new_buffer(8, DType::F32, devices).axis(), Some(0));
        assert_eq!(UOp::new_buffer(8, DType::F32, Device::cpu()).axis(), None);
    }

    #[test]
    fn permute_follows_and_reduce_over_the_shard_axis_clears_it() {
        let x = sharded(&[4, 3]);
        assert_eq!(x.axis(), Some(0));
        assert_eq!(x.permute(&[1, 0]).axis(), Some(1));
        assert_eq!(x.reduce(ReduceOp::Add, &[1]).axis(), Some(0));
        assert_eq!(x.reduce(ReduceOp::Add, &[0]).axis(), None);
        assert_eq!(x.copy_to(Device::cpu()).axis(), None);
    }

    #[test]
    fn elementwise_ops_inherit_the_axis() {
        let x = sharded(&[4, 3]);
        let y = UOp::alu(crate::uop::Op::Add, vec![x.clone(), x]);
        assert_eq!(y.axis(), Some(0));
    }
}
