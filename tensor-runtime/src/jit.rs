//! `jit`: a function compiled once per input signature and replayed, as `jax.jit` and
//! tinygrad's `TinyJit`.
//!
//! The first call with a signature (each argument's shape, dtype and device, and which
//! arguments are the same tensor) traces the function (with every transform it is made of),
//! schedules, generates and compiles its kernels, and records the plan with, for each buffer
//! the plan reads, where it comes from: argument `i`, or a constant the function captured.
//! Later calls with that signature check it, bind their arguments' buffers and launch the
//! recorded kernels; their results come back computed.
//!
//! Arguments are computed first if they are lazy (a jitted function is a compile boundary, as
//! in JAX). A call from inside a trace (a jitted function used inside `vmap` or `grad`, whose
//! arguments are placeholders) returns the function's graph instead, so the surrounding
//! transform sees through it, as JAX inlines `jit` under other transforms.
//!
//! The device a call runs on is part of its signature: the device its arguments are tied to
//! (`Tensor::to`), else the selected one (`DEVICE`, `realize::set_device`); a plan is built
//! and replayed there. A function that moves values between devices itself is traced once
//! per signature but realized at each call, its moves done first.
//!
//! A function whose graph calls an external host function (`transform::external`) is traced
//! once per signature like any other, but each call realizes its graph: the host calls run
//! between kernels that come from the plan cache, as in an eager realize.

use crate::cpu::CpuDevice;
use crate::cuda::CudaDevice;
use crate::device::Device;
use crate::emulated::EmulatedGpu;
use crate::error::Result;
use crate::placement::{abstract_and_place, placement_of};
use crate::plan::Plan;
use crate::plan::PlanCache;
use crate::realize::{
    SelectedDevice, codegen_options, emulated_plan_cache, realize, shared_cuda, shared_plan_cache,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::transform::function::traced_once;
use tensor_core::transform::{Func, IntoFunc};
use tensor_core::{DType, Op, Tensor, UOp};

/// `f` compiled once per input signature and replayed (see the module docs). Panics, as a
/// transform does, if the device fails; use [`Jit::try_call`] to handle device errors.
pub fn jit<M>(f: impl IntoFunc<M>) -> Func {
    let jitted = Arc::new(Jit::new(f.into_func()));
    Func::new(jitted.traced.arity(), move |args: &[Tensor]| {
        jitted
            .call(args)
            .unwrap_or_else(|e| panic!("jit: running the compiled function failed: {e}"))
    })
}

/// A jitted function with its plans, one per signature.
pub struct Jit {
    traced: Func,
    entries: Mutex<HashMap<Signature, Arc<Entry>>>,
    traces: AtomicUsize,
}

/// Per argument its shape, dtype and device, for every argument the first argument holding
/// the same buffer, and the device the call runs on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Signature {
    arguments: Vec<(Vec<usize>, DType, tensor_core::Device)>,
    same_as: Vec<usize>,
    device: SelectedDevice,
}

/// The plan of one signature and where each buffer it reads comes from.
struct Entry {
    /// `None` for a graph with external calls, which is realized at each call.
    plan: Option<DevicePlan>,
    sources: Vec<Source>,
}

/// A plan on the device of its signature.
enum DevicePlan {
    Cpu(Arc<Plan<CpuDevice>>),
    Emulated(Arc<Plan<EmulatedGpu>>),
    Cuda(usize, Arc<Plan<CudaDevice>>),
}

/// The plan of `roots` on `device`, from its plan cache.
fn plan_for<D: Device>(device: &D, plans: &PlanCache<D>, roots: &[UOp]) -> Result<Arc<Plan<D>>> {
    plans.get_or_build(device, roots, &codegen_options(device))
}

/// Where the buffer bound to one placeholder of a plan comes from.
enum Source {
    /// The buffer of argument `i`.
    Argument(usize),
    /// A buffer the function captured (read once, when the signature was traced).
    Captured(UOp),
}

impl Jit {
    /// `f`, to be compiled per signature.
    pub fn new(f: Func) -> Jit {
        Jit {
            traced: traced_once("jit", f),
            entries: Mutex::new(HashMap::new()),
            traces: AtomicUsize::new(0),
        }
    }

    /// How many signatures have been traced and compiled.
    pub fn trace_count(&self) -> usize {
        self.traces.load(Ordering::Relaxed)
    }

    /// Calls the function: replays the plan of `args`' signature (building it on the first
    /// call), or returns the lazy graph when called inside a trace.
    pub fn call(&self, args: &[Tensor]) -> Result<Vec<Tensor>> {
        if args.iter().any(reads_placeholders) {
            return Ok(self.traced.call(args));
        }
        let buffers = concrete_buffers(args)?;
        let signature = signature_of(args, &buffers, placement_of(&buffers)?.device);
        let entry = match self.entry(&signature) {
            Some(entry) => entry,
            None => self.build(signature, args, &buffers)?,
        };
        let Some(plan) = &entry.plan else {
            let outputs = self.traced.call(args);
            realize(&outputs.iter().collect::<Vec<_>>())?;
            return Ok(outputs);
        };
        let inputs: Vec<UOp> = entry
            .sources
            .iter()
            .map(|source| match source {
                Source::Argument(i) => buffers[*i].clone(),
                Source::Captured(buffer) => buffer.clone(),
            })
            .collect();
        let outputs = match plan {
            DevicePlan::Cpu(plan) => plan.run(&CpuDevice::shared()?, &inputs)?,
            DevicePlan::Emulated(plan) => plan.run(&*EmulatedGpu::shared()?, &inputs)?,
            DevicePlan::Cuda(ordinal, plan) => plan.run(&shared_cuda(*ordinal)?.0, &inputs)?,
        };
        Ok(outputs.into_iter().map(Tensor::from_uop).collect())
    }

    /// Calls the function, as [`Func::call`] on the result of [`jit`] does.
    pub fn try_call(&self, args: &[Tensor]) -> Result<Vec<Tensor>> {
        self.call(args)
    }

    fn entry(&self, signature: &Signature) -> Option<Arc<Entry>> {
        self.lock().get(signature).cloned()
    }

    /// Traces the function on `args`, finds or builds the plan of its graph, and records where
    /// each of the plan's buffers comes from.
    fn build(&self, signature: Signature, args: &[Tensor], buffers: &[UOp]) -> Result<Arc<Entry>> {
        self.traces.fetch_add(1, Ordering::Relaxed);
        let outputs: Vec<UOp> = self.traced.call(args).iter().map(Tensor::uop).collect();
        let (abstracted, placement) = abstract_and_place(&outputs)?;
        let moves_or_calls =
            outputs.iter().any(UOp::reaches_copy) || crate::host_call::has_call(&outputs);
        // A captured value tied elsewhere than the arguments: realized at each call too, where
        // the mismatch is reported.
        if moves_or_calls || placement.device != signature.device {
            let entry = Arc::new(Entry {
                plan: None,
                sources: Vec::new(),
            });
            self.lock().insert(signature, entry.clone());
            return Ok(entry);
        }
        let roots = &abstracted.roots;
        let plan = match signature.device {
            SelectedDevice::Cpu => {
                DevicePlan::Cpu(plan_for(&CpuDevice::shared()?, shared_plan_cache(), roots)?)
            }
            SelectedDevice::Emulated => DevicePlan::Emulated(plan_for(
                &*EmulatedGpu::shared()?,
                emulated_plan_cache(),
                roots,
            )?),
            SelectedDevice::Cuda(ordinal) => {
                let (gpu, plans) = shared_cuda(ordinal)?;
                DevicePlan::Cuda(ordinal, plan_for(gpu, plans, roots)?)
            }
        };
        let sources = abstracted
            .inputs
            .into_iter()
            .map(|buffer| match buffers.iter().position(|b| *b == buffer) {
                Some(i) => Source::Argument(i),
                None => Source::Captured(buffer),
            })
            .collect();
        let entry = Arc::new(Entry {
            plan: Some(plan),
            sources,
        });
        self.lock().insert(signature, entry.clone());
        Ok(entry)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Signature, Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `t`'s graph reads a traced placeholder (the call is inside a transform's trace).
fn reads_placeholders(t: &Tensor) -> bool {
    let uop = t.uop();
    as_contiguous_buffer(&uop).is_none() && uop.toposort().iter().any(|u| u.op() == Op::Param)
}

/// The buffer each argument is (computing the lazy ones first).
fn concrete_buffers(args: &[Tensor]) -> Result<Vec<UOp>> {
    let lazy: Vec<&Tensor> = args
        .iter()
        .filter(|t| as_contiguous_buffer(&t.uop()).is_none())
        .collect();
    if !lazy.is_empty() {
        realize(&lazy)?;
    }
    Ok(args
        .iter()
        .map(|t| as_contiguous_buffer(&t.uop()).expect("realized tensors are buffers"))
        .collect())
}

fn signature_of(args: &[Tensor], buffers: &[UOp], device: SelectedDevice) -> Signature {
    Signature {
        arguments: args
            .iter()
            .map(|t| (t.shape(), t.dtype(), t.device()))
            .collect(),
        same_as: buffers
            .iter()
            .map(|b| buffers.iter().position(|other| other == b).unwrap_or(0))
            .collect(),
        device,
    }
}
