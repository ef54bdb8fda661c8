//! `jit`: a function compiled once per input signature and replayed, as `jax.jit` and
//! tinygrad's `TinyJit`.
//!
//! The first call with a signature (each argument's shape, dtype and device) traces the
//! function (with every transform it is made of) on a fresh stand-in buffer per argument,
//! schedules, generates and compiles its kernels, and records the graph's structure with, for
//! each buffer it reads, where it comes from: argument `i` (a stand-in), or a value the
//! function captured. Later calls with that signature take the plan of that structure from the
//! device's plan cache, bind their arguments' buffers and launch the recorded kernels; their
//! results come back computed. Which memory an argument is never matters: a captured tensor
//! passed as an argument too, one tensor passed twice, or an earlier result passed back in all
//! replay the same plan.
//!
//! A jit keeps at most as many signatures as the plan cache keeps plans
//! (`TENSOR_PLAN_CACHE_SIZE`), dropping the least recently used; it holds no plan itself, so
//! its kernels stay loaded only while the plan cache keeps them.
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
use crate::device::Device;
use crate::emulated::EmulatedGpu;
use crate::error::Result;
use crate::lru::Lru;
use crate::placement::{abstract_and_place, placement_of};
use crate::plan::Plan;
use crate::plan::PlanCache;
use crate::realize::realize;
use crate::registry::{SelectedDevice, emulated_plan_cache, shared_cuda, shared_plan_cache};
use crate::switches::codegen_options;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::transform::function::traced_once;
use tensor_core::transform::{Func, IntoFunc};
use tensor_core::uop::substitute;
use tensor_core::{Arg, DType, Op, Tensor, UOp};

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

/// A jitted function with the traced structure of each signature it was called with.
pub struct Jit {
    traced: Func,
    entries: Mutex<Lru<Signature, Arc<Entry>>>,
    traces: AtomicUsize,
}

/// Per argument its shape, dtype and device, and the device the call runs on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Signature {
    arguments: Vec<(Vec<usize>, DType, tensor_core::Device)>,
    device: SelectedDevice,
}

/// The traced graph of one signature and where each buffer it reads comes from.
struct Entry {
    /// The abstracted roots, the plan cache's key; `None` for a graph with external calls or
    /// moves, which is realized at each call.
    roots: Option<Vec<UOp>>,
    sources: Vec<Source>,
}

/// Runs the plan of `roots` on `device` (from its plan cache, built if it is not there) over
/// `inputs`.
fn run_on<D: Device>(
    device: &D,
    plans: &PlanCache<D>,
    roots: &[UOp],
    inputs: &[UOp],
) -> Result<Vec<UOp>> {
    let plan: Arc<Plan<D>> = plans.get_or_build(device, roots, &codegen_options(device))?;
    plan.run(device, inputs)
}

/// Builds the plan of `roots` on `device` into its plan cache.
fn prepare_on<D: Device>(device: &D, plans: &PlanCache<D>, roots: &[UOp]) -> Result<()> {
    plans.get_or_build(device, roots, &codegen_options(device))?;
    Ok(())
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
            entries: Mutex::new(Lru::new(shared_plan_cache().capacity())),
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
        let signature = signature_of(args, placement_of(&buffers)?.device);
        let entry = match self.entry(&signature) {
            Some(entry) => entry,
            None => self.build(signature.clone(), args, &buffers)?,
        };
        let Some(roots) = &entry.roots else {
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
        let outputs = match signature.device {
            SelectedDevice::Cpu => {
                run_on(&CpuDevice::shared()?, shared_plan_cache(), roots, &inputs)?
            }
            SelectedDevice::Emulated => run_on(
                &*EmulatedGpu::shared()?,
                emulated_plan_cache(),
                roots,
                &inputs,
            )?,
            SelectedDevice::Cuda(ordinal) => {
                let (gpu, plans) = shared_cuda(ordinal)?;
                run_on(gpu, plans, roots, &inputs)?
            }
        };
        Ok(outputs.into_iter().map(Tensor::from_uop).collect())
    }

    /// Calls the function, as [`Func::call`] on the result of [`jit`] does.
    pub fn try_call(&self, args: &[Tensor]) -> Result<Vec<Tensor>> {
        self.call(args)
    }

    /// How many signatures are kept.
    pub fn signature_count(&self) -> usize {
        self.lock().len()
    }

    fn entry(&self, signature: &Signature) -> Option<Arc<Entry>> {
        self.lock().get(signature)
    }

    /// Traces the function on stand-ins for `args`, finds or builds the plan of its graph, and
    /// records where each of the plan's buffers comes from. The trace reads a fresh buffer per
    /// argument, so an argument is told from a captured value by what the function read, not
    /// by which memory it was given: a capture that is also passed as an argument stays a
    /// capture in later calls.
    fn build(&self, signature: Signature, args: &[Tensor], buffers: &[UOp]) -> Result<Arc<Entry>> {
        self.traces.fetch_add(1, Ordering::Relaxed);
        let stand_ins: Vec<UOp> = buffers.iter().map(stand_in_for).collect();
        let traced_args: Vec<Tensor> = args
            .iter()
            .zip(buffers.iter().zip(&stand_ins))
            .map(|(arg, (buffer, stand_in))| {
                let map = HashMap::from([(buffer.clone(), stand_in.clone())]);
                Tensor::from_uop(substitute(&arg.uop(), &map))
            })
            .collect();
        let outputs: Vec<UOp> = self
            .traced
            .call(&traced_args)
            .iter()
            .map(Tensor::uop)
            .collect();
        let (abstracted, placement) = abstract_and_place(&outputs)?;
        let moves_or_calls =
            outputs.iter().any(UOp::reaches_copy) || crate::host_call::has_call(&outputs);
        // A captured value tied elsewhere than the arguments: realized at each call too, where
        // the mismatch is reported.
        if moves_or_calls || placement.device != signature.device {
            return Ok(self.insert(signature, None, Vec::new()));
        }
        let roots = &abstracted.roots;
        match signature.device {
            SelectedDevice::Cpu => prepare_on(&CpuDevice::shared()?, shared_plan_cache(), roots)?,
            SelectedDevice::Emulated => {
                prepare_on(&*EmulatedGpu::shared()?, emulated_plan_cache(), roots)?
            }
            SelectedDevice::Cuda(ordinal) => {
                let (gpu, plans) = shared_cuda(ordinal)?;
                prepare_on(gpu, plans, roots)?
            }
        }
        let sources = abstracted
            .inputs
            .into_iter()
            .map(|buffer| match stand_ins.iter().position(|s| *s == buffer) {
                Some(i) => Source::Argument(i),
                None => Source::Captured(buffer),
            })
            .collect();
        Ok(self.insert(signature, Some(abstracted.roots), sources))
    }

    /// Records `signature`'s entry, dropping the least recently used ones beyond the plan
    /// cache's capacity.
    fn insert(
        &self,
        signature: Signature,
        roots: Option<Vec<UOp>>,
        sources: Vec<Source>,
    ) -> Arc<Entry> {
        let entry = Arc::new(Entry { roots, sources });
        self.lock().insert(signature, entry.clone());
        entry
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru<Signature, Arc<Entry>>> {
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

/// A fresh buffer with `buffer`'s size, dtype and device, holding nothing: what a trace reads
/// in place of an argument.
fn stand_in_for(buffer: &UOp) -> UOp {
    match buffer.arg() {
        Arg::Buffer(arg) => UOp::new_buffer(arg.size, arg.dtype, arg.device.clone()),
        _ => unreachable!("concrete_buffers gives buffers"),
    }
}

fn signature_of(args: &[Tensor], device: SelectedDevice) -> Signature {
    Signature {
        arguments: args
            .iter()
            .map(|t| (t.shape(), t.dtype(), t.device()))
            .collect(),
        device,
    }
}
