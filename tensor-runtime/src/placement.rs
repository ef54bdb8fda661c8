//! Where a realize runs (`Tensor::to`): on the device the graph's values are tied to, else on
//! the selected one (`DEVICE`, `realize::set_device`); and the moves between devices a graph
//! asks for, done before it runs.
//!
//! A buffer's label says where its value is tied: the host (`CPU`: made by a constructor or
//! from an ndarray, or computed from host values) or a device (moved there by `to`, or computed
//! there). A graph that reads buffers tied to one device runs there, its host buffers copied
//! in as its kernels read them, and the buffers it makes are tied there too; a graph that
//! reads buffers tied to two devices is refused.

use crate::error::{Result, RuntimeError};
use crate::realize::realize;
use crate::registry::{SelectedDevice, parse_device_setting, selected_device};
use std::collections::HashMap;
use std::sync::Arc;
use tensor_core::schedule::callify::callify;
use tensor_core::schedule::placeholders::{Abstracted, abstract_buffers, abstract_buffers_on};
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::uop::{BufferArg, BufferStorage, outside_bodies, substitute};
use tensor_core::{Arg, Device, Op, Tensor, UOp};

/// Where a graph runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The device its kernels run on.
    pub device: SelectedDevice,
    /// The label of the device its values are tied to, when one is (it runs on the selected
    /// device otherwise).
    pub tied: Option<Device>,
}

/// The device `label` (a buffer's, or a `to` target) names, `None` for the host.
pub fn device_named(label: &Device) -> Result<Option<SelectedDevice>> {
    if label.is_host() {
        return Ok(None);
    }
    match label {
        Device::Single(name) => match parse_device_setting(Some(name)) {
            Ok(SelectedDevice::Cpu) => Ok(None),
            Ok(device) => Ok(Some(device)),
            Err(_) => Err(RuntimeError::Placement(format!(
                "`{name}` (from `.to(\"{name}\")`) is not a device: use CPU, CUDA, \
                 CUDA:<ordinal> or EMU"
            ))),
        },
        Device::Multi(_) => Err(RuntimeError::Placement(format!(
            "a value sharded across {label} cannot be realized: sharding is not supported"
        ))),
    }
}

/// The label a value tied to `device` carries: one spelling per device, so that `CUDA` and
/// `CUDA:0` key one plan.
pub fn label_of(device: SelectedDevice) -> Device {
    Device::Single(match device {
        SelectedDevice::Cpu => "CPU".to_string(),
        SelectedDevice::Emulated => crate::emulated::EMULATED_GPU_NAME.to_string(),
        SelectedDevice::Cuda(ordinal) => format!("CUDA:{ordinal}"),
    })
}

/// Where a graph that reads `buffers` runs: the one device their labels tie it to, else the
/// selected device; an error when they name two devices, or one that does not exist.
pub fn placement_of(buffers: &[UOp]) -> Result<Placement> {
    crate::switches::settings_are_valid()?;
    let mut tied: Option<(Device, SelectedDevice)> = None;
    for buffer in buffers {
        let Arg::Buffer(arg) = buffer.arg() else {
            continue;
        };
        let Some(device) = device_named(&arg.device)? else {
            continue;
        };
        match &tied {
            None => tied = Some((arg.device.clone(), device)),
            Some((first, seen)) if *seen != device => {
                return Err(RuntimeError::Placement(format!(
                    "it reads values tied to {first} and to {}; move them to one device with \
                     `.to(...)` first",
                    arg.device
                )));
            }
            Some(_) => {}
        }
    }
    Ok(match tied {
        Some((_, device)) => Placement {
            device,
            tied: Some(label_of(device)),
        },
        None => Placement {
            device: selected_device()?,
            tied: None,
        },
    })
}

/// `roots` with their buffers as placeholders (the plan cache's key), and where they run: a
/// graph tied to a device has every placeholder labelled with it, so every buffer its
/// schedule makes is tied there too.
pub fn abstract_and_place(roots: &[UOp]) -> Result<(Abstracted, Placement)> {
    let abstracted = abstract_buffers(roots);
    let placement = placement_of(&abstracted.inputs)?;
    let relabel = placement.tied.as_ref().filter(|label| {
        abstracted
            .inputs
            .iter()
            .any(|b| !matches!(b.arg(), Arg::Buffer(arg) if arg.device == **label))
    });
    match relabel {
        Some(label) => Ok((abstract_buffers_on(roots, label), placement)),
        None => Ok((abstracted, placement)),
    }
}

/// The device whose memory holds `tensor`'s value now: `None` while it is lazy, or when its
/// value is only on the host (not yet read by a kernel).
pub fn resident_device(tensor: &Tensor) -> Option<SelectedDevice> {
    let buffer = as_contiguous_buffer(&tensor.uop())?;
    let Arg::Buffer(arg) = buffer.arg() else {
        return None;
    };
    let memory = arg.storage.device_allocation()?.as_any();
    if memory.clone().downcast::<crate::cpu::CpuBuffer>().is_ok() {
        return Some(SelectedDevice::Cpu);
    }
    if memory
        .clone()
        .downcast::<crate::emulated::EmulatedBuffer>()
        .is_ok()
    {
        return Some(SelectedDevice::Emulated);
    }
    let gpu = memory.downcast::<crate::cuda::CudaBuffer>().ok()?;
    Some(SelectedDevice::Cuda(gpu.ordinal()))
}

/// Does the moves (`Copy` nodes) in the graphs of `tensors` first: the value each moves is
/// computed where it lives and becomes a buffer tied to the move's target, holding the value
/// on the host until a kernel there reads it. Afterwards no graph of `tensors` moves a value.
/// Whether any graph had a move to do.
pub fn stage_moves(tensors: &[&Tensor]) -> Result<bool> {
    let moving: Vec<&Tensor> = tensors
        .iter()
        .copied()
        .filter(|t| t.uop().reaches_copy())
        .collect();
    if moving.is_empty() {
        return Ok(false);
    }
    // Inlined first: a move inside a traced function's body reads its parameters, which only
    // the call's arguments give values.
    let roots = callify(&moving.iter().map(|t| t.uop()).collect::<Vec<_>>());
    let mut images: HashMap<UOp, UOp> = HashMap::new();
    // Operands first: a move inside another move's operand is done before it.
    for node in UOp::sink(roots.clone()).toposort_along(outside_bodies, UOp::reaches_copy) {
        if let (Op::Copy, Arg::Device(target)) = (node.op(), node.arg()) {
            let source = substitute(node.s(0), &images);
            images.insert(node.clone(), moved(&source, target)?);
        }
    }
    for (tensor, root) in moving.iter().zip(&roots) {
        tensor.replace_uop(substitute(root, &images));
    }
    Ok(true)
}

/// A buffer tied to `target` that holds the value of `source`, computed where it lives.
fn moved(source: &UOp, target: &Device) -> Result<UOp> {
    let label = match device_named(target)? {
        Some(device) => label_of(device),
        None => Device::cpu(),
    };
    let value = Tensor::from_uop(source.clone());
    realize(&[&value])?;
    let computed = value.uop();
    let buffer = as_contiguous_buffer(&computed).expect("a realized tensor is a buffer");
    let Arg::Buffer(arg) = buffer.arg() else {
        unreachable!("as_contiguous_buffer returns a Buffer")
    };
    let contents = arg.storage.contents(arg.dtype).ok_or_else(|| {
        RuntimeError::Placement(format!(
            "the value moved to {target} could not be read back from where it was computed"
        ))
    })?;
    let storage = Arc::new(BufferStorage::with_host_data(contents));
    let arg = BufferArg::with_storage(arg.size, arg.dtype, label, storage);
    let buffer = UOp::new(Op::Buffer, arg.dtype, vec![], Arg::Buffer(arg));
    Ok(buffer.reshape(&computed.shape_vec()))
}
