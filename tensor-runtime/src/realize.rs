//! `realize` and the reads built on it: the library's entry points for computing tensors.
//!
//! A graph runs on the device its values are tied to (`Tensor::to`), else on the selected one
//! ([`crate::registry`]: `DEVICE` or [`set_device`]); its plan comes from that device's plan
//! cache, and [`crate::execute`] runs it. A computed value stays computed for every graph that
//! holds it ([`crate::realized`]). The switches it obeys (`DEBUG`, `NOOPT`) are
//! [`crate::switches`]'.

use crate::device::Device;
use crate::error::{Result, RuntimeError};
use crate::execute::{buffer_arg, compile_all, launch_kernel, output_buffer};
use crate::plan::PlanCache;
use crate::plan::generate_kernels_for;
use crate::registry::{on_device, on_selected_device, opened_gpus};
use std::time::Instant;
use tensor_core::codegen::CodegenOptions;
use tensor_core::schedule::Schedule;
use tensor_core::schedule::placeholders::{Abstracted, abstract_buffers};
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::transform::tree::{Tree, tree_leaves};
use tensor_core::uop::WeakUOp;
use tensor_core::{Element, Op, Tensor, UOp};

// Where graphs run, how a schedule executes and the switches they obey, re-exported where
// users of `realize` look for them.
pub use crate::execute::{device_buffer, read_buffer};
pub use crate::registry::{
    SelectedDevice, cuda_device, selected_device, set_device, shared_plan_cache,
};
pub use crate::settings::debug_level;
pub use crate::switches::{DEFAULT_PLAN_CACHE_SIZE, codegen_options, plan_cache_size_from_env};

/// Computes `tensors` on the device their values are tied to (by `Tensor::to`), else on the
/// selected device (`DEVICE`, see the module docs; the CPU by default), with the other results
/// of the function calls that made them; afterwards each tensor is its result buffer, so
/// realizing it again, or using it in a later graph, runs nothing more for it.
///
/// A realized value stays realized ([`crate::realized`]): a graph built before the realize,
/// or from another handle on the same lazy value, reads the result buffer too. A view of an
/// expensive lazy value that the program still holds (a slice of a lazy gradient) computes the
/// whole value once and keeps it ([`crate::view_bases`]). With `DEBUG` ≥ 1 a loop whose graphs
/// keep growing and recomputing earlier steps is reported once ([`crate::recompute_watch`]).
///
/// The graph is looked up by its structure (buffers as placeholders) in the device's plan
/// cache: a graph of a structure run before only binds its buffers and launches the recorded
/// kernels. The moves between devices it asks for are done first (`placement`).
pub fn realize(tensors: &[&Tensor]) -> Result<()> {
    let results = compute(tensors)?;
    crate::realized::remember(results);
    Ok(())
}

/// [`realize`] of every tensor of `tree` (a struct of parameters, a tuple of gradients), in one
/// plan: `realize_tree(&params)` after an update step keeps the next step's graph small.
pub fn realize_tree<T: Tree>(tree: &T) -> Result<()> {
    let leaves = tree_leaves(tree);
    realize(&leaves.iter().collect::<Vec<_>>())
}

/// Computes `tensors` as [`realize`] does and gives each lazy graph it computed (weakly) with
/// its result: every strong handle this realize took is dropped by then, so only graphs that
/// something else still holds are remembered.
fn compute(tensors: &[&Tensor]) -> Result<Vec<(WeakUOp, UOp)>> {
    let mut targets = with_lazy_siblings(tensors);
    let mut graphs: Vec<UOp> = targets.iter().map(Tensor::uop).collect();
    crate::realized::read_kept_values(&targets);
    let computed = |all: &[Tensor]| all.iter().all(|t| as_contiguous_buffer(&t.uop()).is_some());
    if computed(&targets) {
        // Nothing to compute: every tensor already is (a view of) a buffer.
        return Ok(Vec::new());
    }
    for base in shared_bases(&targets) {
        targets.push(Tensor::from_uop(base.clone()));
        graphs.push(base);
    }
    let all: Vec<&Tensor> = targets.iter().collect();
    if crate::placement::stage_moves(&all)? && computed(&targets) {
        return Ok(Vec::new());
    }
    if debug_level() >= 1 {
        crate::recompute_watch::observe(&targets.iter().map(Tensor::uop).collect::<Vec<_>>());
    }
    let (abstracted, placement) = crate::placement::abstract_and_place(&host_calls_done(&all)?)?;
    on_device!(placement.device, |device, plans| run_abstracted(
        device,
        plans,
        &all,
        &abstracted
    ))?;
    Ok(computed_values(&graphs, &targets))
}

/// The bases of views among `targets` that are computed whole and kept, with their held
/// siblings ([`crate::view_bases`]), each once, unless a target already is one.
fn shared_bases(targets: &[Tensor]) -> Vec<UOp> {
    let mut bases: Vec<UOp> = Vec::new();
    for tensor in targets {
        let Some(base) = crate::view_bases::shared_expensive_base(&tensor.uop()) else {
            continue;
        };
        for node in crate::view_bases::with_held_siblings(base) {
            if !bases.contains(&node) && !targets.iter().any(|t| t.uop() == node) {
                bases.push(node);
            }
        }
    }
    bases
}

/// Each lazy graph of `graphs` with the value its tensor in `targets` now holds, and the base
/// of a graph that is a reshape of a lazy value with that value (the same buffer, in the base's
/// shape).
fn computed_values(graphs: &[UOp], targets: &[Tensor]) -> Vec<(WeakUOp, UOp)> {
    let mut values = Vec::new();
    for (graph, tensor) in graphs.iter().zip(targets) {
        let value = tensor.uop();
        let Some(buffer) = as_contiguous_buffer(&value) else {
            continue;
        };
        if as_contiguous_buffer(graph).is_none() && graph.reads_buffers() {
            values.push((graph.downgrade(), value));
        }
        let (base, moves) = crate::view_bases::base_of(graph);
        if !moves && base != graph && base.op() != Op::Buffer && base.reads_buffers() {
            values.push((base.downgrade(), buffer.reshape(&base.shape_vec())));
        }
    }
    values
}

/// `tensors` and the lazy results of the calls that made them (`Tensor::siblings`): the
/// other gradients of a `grad` share its backward pass, so computing them in the same pass
/// costs little, where reading them one by one later would run the pass again for each.
fn with_lazy_siblings(tensors: &[&Tensor]) -> Vec<Tensor> {
    let mut all: Vec<Tensor> = tensors.iter().map(|t| (*t).clone()).collect();
    for t in tensors {
        for sibling in t.siblings() {
            let lazy = as_contiguous_buffer(&sibling.uop()).is_none();
            if lazy && !all.iter().any(|a| a.same_tensor(&sibling)) {
                all.push(sibling);
            }
        }
    }
    all
}

/// [`realize`] on `device` with its plan cache `plans`, whatever device the values are tied to.
pub fn realize_on<D: Device>(device: &D, plans: &PlanCache<D>, tensors: &[&Tensor]) -> Result<()> {
    let roots = host_calls_done(tensors)?;
    run_abstracted(device, plans, tensors, &abstract_buffers(&roots))
}

/// The graphs of `tensors` with their external host calls run (their results in their place).
fn host_calls_done(tensors: &[&Tensor]) -> Result<Vec<UOp>> {
    let roots: Vec<UOp> = tensors.iter().map(|t| t.uop()).collect();
    Ok(crate::host_call::run_host_calls(&roots)?.unwrap_or(roots))
}

/// Runs the plan of `abstracted` (the graphs of `tensors`, buffers as placeholders) on
/// `device`, building it on first use, and points each tensor at its result.
fn run_abstracted<D: Device>(
    device: &D,
    plans: &PlanCache<D>,
    tensors: &[&Tensor],
    abstracted: &Abstracted,
) -> Result<()> {
    let debug = debug_level();
    let started = (debug >= 1).then(Instant::now);
    let options = codegen_options(device);
    let builds_before = crate::stats::pipeline_counts().schedules;
    let plan = plans.get_or_build(device, &abstracted.roots, &options)?;
    let outputs = plan.run(device, &abstracted.inputs)?;
    for (tensor, out) in tensors.iter().zip(outputs) {
        tensor.replace_uop(out);
    }
    if let Some(started) = started {
        let built = crate::stats::pipeline_counts().schedules > builds_before;
        eprintln!(
            "realize: {} kernels on {} in {:.3?} ({}; process: {} compiler runs, {} disk \
             cache hits)",
            plan.kernels().len(),
            device.name(),
            started.elapsed(),
            if built {
                "scheduled, generated and compiled"
            } else {
                "plan replayed"
            },
            crate::stats::compiler_invocations(),
            crate::stats::disk_cache_hits()
        );
    }
    Ok(())
}

/// The bytes of `tensor` (row-major, in its dtype), computing it first if needed. The
/// buffer also keeps the copy on the host, where the reference interpreter can read it.
pub fn read_bytes(tensor: &Tensor) -> Result<Vec<u8>> {
    realize(&[tensor])?;
    read_realized(&tensor.uop())
}

/// The bytes of a realized output, read from the device it is tied to (else the selected one).
pub(crate) fn read_realized(out: &UOp) -> Result<Vec<u8>> {
    on_device!(home_of(out)?, |device, _plans| read_buffer(device, out))
}

/// The device a realized output is read from: the one it is tied to, else the selected one.
fn home_of(out: &UOp) -> Result<SelectedDevice> {
    Ok(crate::placement::placement_of(&[output_buffer(out)])?.device)
}

/// Waits until everything queued on the selected device, and on every GPU opened by a value
/// tied to it (`Tensor::to`), has finished, as `torch.cuda.synchronize()` does: a GPU's
/// `realize` returns once its kernels are queued (reading a value waits for them anyway), so
/// time GPU work up to this call.
pub fn synchronize() -> Result<()> {
    on_selected_device!(|device, _plans| device.wait_idle())?;
    for (gpu, _plans) in opened_gpus() {
        gpu.wait_idle()?;
    }
    Ok(())
}

/// The bytes of `tensor` computed on the selected device by a schedule built afresh: the
/// cold path, bypassing the plan cache, which tests hold replays against.
pub fn fresh_bytes(tensor: &Tensor) -> Result<Vec<u8>> {
    let schedule = tensor_core::schedule::create_schedule(&[tensor.uop()]);
    on_selected_device!(|device, _plans| {
        run_schedule(device, &schedule, &codegen_options(device))?;
        read_buffer(device, &schedule.outputs[0])
    })
}

/// The elements of `tensor`, computed on the selected device, in row-major order; fails
/// with [`RuntimeError::WrongElementType`] unless `T` is the tensor's dtype.
pub fn to_vec<T: Element>(tensor: &Tensor) -> Result<Vec<T>> {
    if T::DTYPE != tensor.dtype() {
        return Err(RuntimeError::WrongElementType {
            expected: T::DTYPE,
            found: tensor.dtype(),
        });
    }
    realize(&[tensor])?;
    on_device!(home_of(&tensor.uop())?, |device, _plans| {
        let arg = buffer_arg(&output_buffer(&tensor.uop()));
        let memory = device_buffer(device, &arg)?;
        let mut values: Vec<T> = device.copy_out_elements(&memory, T::DTYPE)?;
        values.truncate(arg.size);
        Ok(values)
    })
}

/// Runs every kernel of `schedule` on `device`, producers first. The outputs stay in device
/// memory; [`read_buffer`] copies one back.
pub fn run_schedule<D: Device>(
    device: &D,
    schedule: &Schedule,
    options: &CodegenOptions,
) -> Result<()> {
    let debug = debug_level();
    let started = Instant::now();
    let kernels = generate_kernels_for(device, schedule, options);
    let programs = compile_all(device, kernels.iter())?;
    let compile_time = started.elapsed();
    for ((item, kernel), program) in schedule.items.iter().zip(&kernels).zip(&programs) {
        let buffers: Vec<&UOp> = item.buffers.iter().collect();
        launch_kernel(device, kernel, program, &buffers, debug)?;
    }
    if debug >= 1 {
        eprintln!(
            "realize: {} kernels on {} in {:.3?}, {:.3?} of it generating and compiling \
             (process: {} compiler runs, {} disk cache hits)",
            schedule.items.len(),
            device.name(),
            started.elapsed(),
            compile_time,
            crate::stats::compiler_invocations(),
            crate::stats::disk_cache_hits()
        );
    }
    Ok(())
}
