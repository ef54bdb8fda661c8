//! Where a value lives, and moving it: `to`, as PyTorch's `Tensor.to` and tinygrad's.
//!
//! A tensor made on the host (by a constructor or from an ndarray) is not tied to a device:
//! a graph of such tensors runs on the runtime's selected device (`DEVICE`), as JAX's
//! uncommitted arrays do. `to(device)` ties a value to `device`: a graph that reads it runs
//! there, and the host tensors it also reads are copied there; a graph that reads values
//! tied to two different devices is refused when it is realized. The move is a `Copy` node,
//! lazy like every op: a runtime computes its source where that lives and hands the bytes
//! over (through the host between two devices).

use super::Tensor;
use crate::uop::fast_hash::FastSet;
use crate::uop::{Arg, Device, Op, UOp, tuple_body};

impl Tensor {
    /// This value on `device` (`"CPU"`, `"CUDA"`, `"CUDA:1"`, `"EMU"`, in any case), lazily:
    /// the graphs that read the result run on `device`. The tensor itself when it is there
    /// already.
    ///
    /// # Panics
    ///
    /// When `device` is empty. (A name the runtime does not know is an error when the graph is
    /// realized.)
    #[track_caller]
    pub fn to(&self, device: &str) -> Tensor {
        let _op = super::op_scope::OpScope::enter("to");
        let name = device.trim().to_ascii_uppercase();
        assert!(
            !name.is_empty(),
            "to: a device name is needed (\"CPU\", \"CUDA\", \"CUDA:1\", \"EMU\")"
        );
        let target = Device::Single(name);
        if self.device() == target {
            return self.clone();
        }
        Tensor::from_uop(self.uop().copy_to(target))
    }

    /// The device the value is tied to by a [`Tensor::to`] in its graph (or by being computed
    /// on that device), else `CPU`: a host value, which computes on the selected device.
    pub fn device(&self) -> Device {
        tied_device(&self.uop()).unwrap_or_else(Device::cpu)
    }
}

/// The first device other than the host that `root`'s value is tied to: a `Copy` target, or
/// the label of a buffer computed on a device (or of a traced function's parameter). A `Copy`'s
/// operand is not looked into: the copy decides where its value lives; nor are the results of
/// a function call other than the one read.
fn tied_device(root: &UOp) -> Option<Device> {
    let host = Device::cpu();
    let mut seen: FastSet<UOp> = FastSet::default();
    let mut stack = vec![root.clone()];
    while let Some(node) = stack.pop() {
        if !seen.insert(node.clone()) {
            continue;
        }
        let label = match (node.op(), node.arg()) {
            (Op::Copy, Arg::Device(device)) => Some(device),
            (Op::Buffer, Arg::Buffer(buffer)) => Some(&buffer.device),
            (Op::Param, Arg::Param { device, .. }) => Some(device.as_ref().unwrap_or(&host)),
            _ => None,
        };
        match (label, node.op(), node.arg()) {
            (Some(device), ..) if !device.is_host() => return Some(device.clone()),
            (Some(_), ..) => {}
            (None, Op::GetTuple, Arg::Int(k)) => match tuple_body(node.s(0)) {
                Some(body) => stack.extend(body.src().get(*k as usize).cloned()),
                None => stack.extend(node.src().iter().cloned()),
            },
            (None, ..) => stack.extend(node.src().iter().cloned()),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Tensor {
        Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])
    }

    #[test]
    fn a_host_value_is_on_the_cpu_and_moving_it_there_is_the_tensor_itself() {
        let x = data();
        assert_eq!(x.device(), Device::cpu());
        assert!(x.to("cpu").same_tensor(&x));
    }

    #[test]
    fn a_moved_value_and_what_is_computed_from_it_are_on_the_target_whatever_the_operand_order() {
        let x = data();
        let moved = x.to(" emu");
        let emu = Device::Single("EMU".into());
        assert_eq!(moved.device(), emu);
        assert_eq!(moved.uop().op(), Op::Copy);
        assert!(moved.to("EMU").same_tensor(&moved));
        assert_eq!((&moved * 2.0).device(), emu);
        assert_eq!((&x + &moved).device(), emu, "a host operand first");
        assert_eq!(moved.to("CPU").device(), Device::cpu());
        assert_eq!((moved.to("CPU") + &x).device(), Device::cpu());
    }

    #[test]
    #[should_panic(expected = "a device name is needed")]
    fn an_empty_device_name_is_refused() {
        let _ = data().to(" ");
    }
}
