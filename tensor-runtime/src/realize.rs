//! Running a schedule: every `Buffer` of the graph gets device memory (filled from its host
//! data, if it has any; a tensor's own typed vector is bound read-only in place where the
//! device allows, see `Tensor::from_ndarray`), each kernel is generated, compiled through the caches and launched,
//! producers first, and the outputs are copied back to the host.
//!
//! `DEVICE` (or [`set_device`], which overrides it) selects where graphs run: unset or `CPU`,
//! `CUDA` / `CUDA:<n>` (a GPU, through [`crate::cuda::CudaDevice`]; without a driver the error
//! says what is missing), or `EMU` (the GPU lowering run by an emulator on the host,
//! [`crate::emulated::EmulatedGpu`], for tests). A graph that reads values tied to a device
//! by `Tensor::to` runs on that device instead ([`crate::placement`]). Each device has its
//! own plan cache. A buffer computed on one device and read on another is copied through the
//! host.
//! A computed value stays computed for every graph that holds it ([`crate::realized`]).
//! `DEBUG=1` prints one line per run (kernels, compiler runs, cache hits, time) and warns once
//! about a loop whose graph keeps growing ([`crate::recompute_watch`]), `DEBUG=2` a
//! line per kernel, `DEBUG=3` each realization decision of the scheduler (the rule that
//! realized or fused a node, with its cost facts), `DEBUG=4` the source of each kernel. `NOOPT=1` turns kernel optimisations
//! off.

use crate::cpu::CpuDevice;
use crate::cuda::CudaDevice;
use crate::device::{CheckedProgram, Device};
use crate::emulated::{EMULATED_GPU_NAME, EmulatedGpu};
use crate::error::{Result, RuntimeError};
use crate::plan::{PlanCache, generate_kernels_for};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::Instant;
use tensor_core::codegen::CodegenOptions;
use tensor_core::render::Kernel;
use tensor_core::schedule::Schedule;
use tensor_core::schedule::placeholders::{Abstracted, abstract_buffers};
use tensor_core::schedule::realize::as_contiguous_buffer;
use tensor_core::transform::tree::{Tree, tree_leaves};
use tensor_core::uop::{BufferArg, WeakUOp};
use tensor_core::{Arg, Element, Op, Tensor, UOp};

/// Runs `$body` with `$device` bound to device `$which` (a [`SelectedDevice`]; a `&D` for its
/// `D: Device`) and `$plans` to that device's plan cache.
macro_rules! on_device {
    ($which:expr, |$device:ident, $plans:ident| $body:expr) => {
        match $which {
            SelectedDevice::Cpu => {
                let cpu = CpuDevice::shared()?;
                let ($device, $plans) = (&cpu, shared_plan_cache());
                $body
            }
            SelectedDevice::Emulated => {
                let emulated = EmulatedGpu::shared()?;
                let ($device, $plans) = (&*emulated, emulated_plan_cache());
                $body
            }
            SelectedDevice::Cuda(ordinal) => {
                let (gpu, cache) = shared_cuda(ordinal)?;
                let ($device, $plans) = (gpu, cache);
                $body
            }
        }
    };
}

/// [`on_device!`] on the selected device.
macro_rules! on_selected_device {
    (|$device:ident, $plans:ident| $body:expr) => {
        on_device!(selected_device()?, |$device, $plans| $body)
    };
}

/// The settings a realize reads from the environment (`crate::settings`), parsed once per
/// process: a plan replay of a few microseconds cannot afford to parse them again.
/// A malformed value is an error at every realize (see [`selected_device`]), as a malformed
/// `THREADS` or `TENSOR_COMPILE_TIMEOUT` is where the CPU device is made.
struct EnvSettings {
    debug: u32,
    noopt: bool,
    device: Option<String>,
    malformed: Option<RuntimeError>,
}

fn env_settings() -> &'static EnvSettings {
    static SETTINGS: OnceLock<EnvSettings> = OnceLock::new();
    SETTINGS.get_or_init(|| {
        let debug = crate::settings::var("DEBUG");
        let noopt = crate::settings::var("NOOPT");
        let malformed = [
            switch_setting(
                "DEBUG",
                &debug,
                "a whole number (0: quiet; 1 to 4: more and more detail)",
            ),
            switch_setting("NOOPT", &noopt, "0 or 1"),
            plan_cache_size_from_env().err(),
            crate::cpu::malformed_setting(),
        ];
        EnvSettings {
            debug: debug.and_then(|v| v.trim().parse().ok()).unwrap_or(0),
            noopt: noopt.is_some_and(|v| v.trim() == "1"),
            device: crate::settings::var("DEVICE"),
            malformed: malformed.into_iter().flatten().next(),
        }
    })
}

/// Ok unless one of the settings a realize reads (`DEBUG`, `NOOPT`,
/// `TENSOR_PLAN_CACHE_SIZE`) or the CPU device reads is malformed: then that error, at every
/// realize, wherever the graph runs (a GPU's graphs also run host parts on the CPU).
pub(crate) fn settings_are_valid() -> Result<()> {
    match &env_settings().malformed {
        Some(error) => Err(error.duplicate()),
        None => Ok(()),
    }
}

/// The error for a switch `variable` whose `value` is neither empty nor a whole number (for
/// NOOPT, 0 or 1; DEBUG levels above 4 print what 4 prints).
fn switch_setting(
    variable: &'static str,
    value: &Option<String>,
    expected: &'static str,
) -> Option<RuntimeError> {
    let value = value.as_ref()?;
    let top = if variable == "NOOPT" { 1 } else { u32::MAX };
    let trimmed = value.trim();
    let valid = trimmed.is_empty() || trimmed.parse::<u32>().is_ok_and(|n| n <= top);
    (!valid).then(|| RuntimeError::InvalidSetting {
        variable,
        value: value.clone(),
        expected,
    })
}

/// The verbosity `DEBUG` asks for (0 when unset), as the process started.
pub fn debug_level() -> u32 {
    env_settings().debug
}

/// Codegen options for kernels run on `device`: optimised unless `NOOPT=1` (as the process
/// started), split across the device's threads.
pub fn codegen_options<D: Device>(device: &D) -> CodegenOptions {
    CodegenOptions {
        optimize: !env_settings().noopt,
        threads: device.default_threads(),
        vector_lanes: device.vector_lanes(),
    }
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

/// Launches `program` (the compiled `kernel`) over the device memory of `buffers`, one per
/// argument slot; the launch checks that each buffer holds what the kernel addresses.
pub(crate) fn launch_kernel<D: Device>(
    device: &D,
    kernel: &Kernel,
    program: &CheckedProgram<D::Program>,
    buffers: &[&UOp],
    debug: u32,
) -> Result<()> {
    let memory = buffers
        .iter()
        .enumerate()
        .map(|(slot, b)| {
            let written = kernel.args.get(slot).is_some_and(|a| a.writes);
            memory_for(device, &buffer_arg(b), written)
        })
        .collect::<Result<Vec<_>>>()?;
    let launch_started = (debug >= 2).then(Instant::now);
    let refs: Vec<&D::Buffer> = memory.iter().map(|b| b.as_ref()).collect();
    device.launch(program, &refs)?;
    if let Some(launch_started) = launch_started {
        eprintln!(
            "kernel {:<24} {:<14} run {:>9.3?}",
            kernel.name,
            kernel.launch.to_string(),
            launch_started.elapsed()
        );
    }
    if debug >= 4 {
        eprintln!("{}", kernel.source);
    }
    Ok(())
}

/// The programs of `kernels`, compiled by the device in as few compiler runs and on as many
/// cores as it can (a cold compile takes far longer than most kernels run).
///
/// A kernel that appears more than once (a layer repeated, the groups of a long `cat`) is
/// compiled once, and its program serves every launch of it.
pub(crate) fn compile_all<'k, D: Device>(
    device: &D,
    kernels: impl Iterator<Item = &'k Kernel>,
) -> Result<Vec<CheckedProgram<D::Program>>> {
    let kernels: Vec<&Kernel> = kernels.collect();
    let mut first: HashMap<(&str, &str), usize> = HashMap::new();
    let mut unique: Vec<&Kernel> = Vec::new();
    let which: Vec<usize> = kernels
        .iter()
        .map(|k| {
            *first
                .entry((k.source.as_str(), k.entry.as_str()))
                .or_insert_with(|| {
                    unique.push(k);
                    unique.len() - 1
                })
        })
        .collect();
    let programs = device.compile_kernels(&unique)?;
    Ok(which.into_iter().map(|u| programs[u].clone()).collect())
}

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

/// How many graph structures the plan cache of the shared CPU device keeps: `$TENSOR_PLAN_CACHE_SIZE`, else
/// [`DEFAULT_PLAN_CACHE_SIZE`].
pub fn plan_cache_size_from_env() -> Result<usize> {
    let size = crate::error::positive_setting(
        "TENSOR_PLAN_CACHE_SIZE",
        crate::settings::var("TENSOR_PLAN_CACHE_SIZE"),
        DEFAULT_PLAN_CACHE_SIZE as u64,
    )?;
    Ok(usize::try_from(size).unwrap_or(usize::MAX))
}

/// The plan cache's capacity when `TENSOR_PLAN_CACHE_SIZE` is unset.
pub const DEFAULT_PLAN_CACHE_SIZE: usize = 512;

/// The plan cache of the shared CPU device.
///
/// Plans are also kept on disk beside the compiled kernels (`plan_store`), so a new process
/// with a warm cache neither schedules nor compiles a graph an earlier run of the same
/// program built.
pub fn shared_plan_cache() -> &'static PlanCache<CpuDevice> {
    static PLANS: OnceLock<PlanCache<CpuDevice>> = OnceLock::new();
    PLANS.get_or_init(|| {
        let size = plan_cache_size_from_env().unwrap_or(DEFAULT_PLAN_CACHE_SIZE);
        let store = CpuDevice::shared()
            .ok()
            .and_then(|device| crate::plan_store::PlanStore::for_cpu(&device));
        PlanCache::with_store(size, store)
    })
}

/// An empty plan cache of the size `TENSOR_PLAN_CACHE_SIZE` asks for.
fn new_plan_cache<D: Device>() -> PlanCache<D> {
    // A malformed size fails every realize first (`selected_device`).
    PlanCache::new(plan_cache_size_from_env().unwrap_or(DEFAULT_PLAN_CACHE_SIZE))
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

/// Where `realize` runs graphs (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SelectedDevice {
    /// The host's cores (`DEVICE` unset or `CPU`).
    Cpu,
    /// GPU `n` (`DEVICE=CUDA` is `CUDA:0`).
    Cuda(usize),
    /// The emulated GPU (`DEVICE=EMU`).
    Emulated,
}

static DEVICE_OVERRIDE: RwLock<Option<String>> = RwLock::new(None);

/// Makes this process compute on `name` (`"CPU"`, `"CUDA"`, `"CUDA:1"`, `"EMU"`) as if
/// `DEVICE` said so, without touching the environment; `None` goes back to `DEVICE`. The name
/// is checked, and a GPU opened, at once: an error leaves the selection as it was.
pub fn set_device(name: Option<&str>) -> Result<()> {
    if let Some(name) = name
        && let SelectedDevice::Cuda(ordinal) = parse_device_setting(Some(name))?
    {
        shared_cuda_named(ordinal, name)?;
    }
    *DEVICE_OVERRIDE
        .write()
        .unwrap_or_else(PoisonError::into_inner) = name.map(str::to_string);
    Ok(())
}

/// The device graphs run on now: [`set_device`]'s choice, else `DEVICE`'s (as the process
/// started).
pub fn selected_device() -> Result<SelectedDevice> {
    settings_are_valid()?;
    let chosen = DEVICE_OVERRIDE
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    parse_device_setting(chosen.as_deref().or(env_settings().device.as_deref()))
}

fn device_setting() -> Option<String> {
    let chosen = DEVICE_OVERRIDE
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    chosen.or_else(|| env_settings().device.clone())
}

pub(crate) fn parse_device_setting(value: Option<&str>) -> Result<SelectedDevice> {
    let name = value.map(str::trim).unwrap_or("");
    if name.is_empty() || name.eq_ignore_ascii_case("CPU") {
        return Ok(SelectedDevice::Cpu);
    }
    if name.eq_ignore_ascii_case(EMULATED_GPU_NAME) {
        return Ok(SelectedDevice::Emulated);
    }
    match crate::cuda::parse_device_name(name) {
        Some(ordinal) => Ok(SelectedDevice::Cuda(ordinal?)),
        None => Err(RuntimeError::InvalidSetting {
            variable: "DEVICE",
            value: name.to_string(),
            expected: "CPU (or unset), CUDA / CUDA:<ordinal>, or EMU (the emulated GPU)",
        }),
    }
}

/// GPU `ordinal` (selected as `name`) and its plan cache, opened on first use; an error
/// names the setting and what is missing.
pub(crate) fn shared_cuda(ordinal: usize) -> Result<&'static (CudaDevice, PlanCache<CudaDevice>)> {
    let name = device_setting().unwrap_or_else(|| format!("CUDA:{ordinal}"));
    shared_cuda_named(ordinal, &name)
}

/// GPU `ordinal`, opened on first use (the device `DEVICE=CUDA:<ordinal>` computes on), for
/// what only it can say: its name, its peak, its copy bandwidth.
pub fn cuda_device(ordinal: usize) -> Result<&'static CudaDevice> {
    Ok(&shared_cuda(ordinal)?.0)
}

/// The GPUs opened so far, by ordinal, with their plan caches.
type OpenedGpus = HashMap<usize, &'static (CudaDevice, PlanCache<CudaDevice>)>;

fn opened_gpus_lock() -> std::sync::MutexGuard<'static, OpenedGpus> {
    static OPENED: OnceLock<Mutex<OpenedGpus>> = OnceLock::new();
    OPENED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Every GPU opened so far in this process.
fn opened_gpus() -> Vec<&'static (CudaDevice, PlanCache<CudaDevice>)> {
    opened_gpus_lock().values().copied().collect()
}

fn shared_cuda_named(
    ordinal: usize,
    name: &str,
) -> Result<&'static (CudaDevice, PlanCache<CudaDevice>)> {
    let mut opened = opened_gpus_lock();
    if let Some(gpu) = opened.get(&ordinal) {
        return Ok(gpu);
    }
    let device = CudaDevice::open(ordinal).map_err(|e| match e {
        RuntimeError::DeviceUnavailable(why) => {
            RuntimeError::DeviceUnavailable(format!("DEVICE={name}: {why}"))
        }
        other => other,
    })?;
    let gpu: &'static _ = Box::leak(Box::new((device, new_plan_cache())));
    opened.insert(ordinal, gpu);
    Ok(gpu)
}

/// The plan cache of the emulated GPU.
pub(crate) fn emulated_plan_cache() -> &'static PlanCache<EmulatedGpu> {
    static PLANS: OnceLock<PlanCache<EmulatedGpu>> = OnceLock::new();
    PLANS.get_or_init(new_plan_cache)
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

/// The arg of a `Buffer` node a schedule binds to a kernel slot.
pub(crate) fn buffer_arg(buffer: &UOp) -> BufferArg {
    match buffer.arg() {
        Arg::Buffer(arg) => arg.clone(),
        other => panic!(
            "schedule bound a {} ({other:?}) to a kernel slot",
            buffer.op()
        ),
    }
}

/// The device memory of a buffer: the allocation it already has on this kind of device, its
/// host data bound in place (read-only, when the device can), or a new allocation filled
/// from its host data.
pub fn device_buffer<D: Device>(device: &D, arg: &BufferArg) -> Result<Arc<D::Buffer>> {
    memory_for(device, arg, false)
}

/// [`device_buffer`] for a kernel argument: a new allocation for a buffer the kernel stores
/// into (`written`) comes from [`Device::allocate_output`], unzeroed.
fn memory_for<D: Device>(device: &D, arg: &BufferArg, written: bool) -> Result<Arc<D::Buffer>> {
    if let Some(existing) = arg.storage.device_allocation()
        && let Ok(buffer) = existing.as_any().downcast::<D::Buffer>()
    {
        return Ok(buffer);
    }
    // Host contents, or the memory of another device read back (a value computed there).
    let host = arg.storage.contents(arg.dtype);
    let buffer = match host.clone().and_then(|data| device.bind_host(data)) {
        Some(bound) => Arc::new(bound),
        None => {
            let bytes = byte_size(arg.size, arg.dtype)?;
            let fresh = match written && host.is_none() {
                true => device.allocate_output(bytes)?,
                false => device.allocate(bytes)?,
            };
            let buffer = Arc::new(fresh);
            if let Some(host) = host {
                device.copy_in(&buffer, &host.to_bytes())?;
            }
            buffer
        }
    };
    arg.storage.set_device_allocation(buffer.clone());
    Ok(buffer)
}

/// The bytes of `elements` values of `dtype`, computed without wrapping: an element count
/// whose byte size overflows is refused, so a buffer can never be allocated smaller than the
/// kernels that address it assume.
fn byte_size(elements: usize, dtype: tensor_core::DType) -> Result<usize> {
    elements
        .checked_mul(dtype.size_bytes())
        .filter(|&bytes| bytes <= isize::MAX as usize)
        .ok_or_else(|| {
            RuntimeError::InvalidLaunch(format!(
                "a buffer of {elements} {dtype} elements has more bytes than memory can address"
            ))
        })
}

/// The bytes of a realized output (a buffer seen through reshapes). The reference interpreter
/// reads the same bytes back from the buffer's device allocation when it needs them.
pub fn read_buffer<D: Device>(device: &D, out: &UOp) -> Result<Vec<u8>> {
    copy_out(device, out)
}

/// The bytes of a realized output, copied out of the device.
fn copy_out<D: Device>(device: &D, out: &UOp) -> Result<Vec<u8>> {
    let memory = device_buffer(device, &buffer_arg(&output_buffer(out)))?;
    let mut bytes = crate::host_alloc::zeroed_bytes(device.buffer_len(&memory))?;
    device.copy_out(&memory, &mut bytes)?;
    Ok(bytes)
}

/// The buffer a realized output reads (through reshapes).
fn output_buffer(out: &UOp) -> UOp {
    as_contiguous_buffer(out)
        .unwrap_or_else(|| panic!("schedule output is a {}, not a buffer", out.op()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_setting_accepts_cpu_and_emu_explains_a_missing_cuda_driver_and_rejects_unknown_names()
    {
        let parsed = |v| parse_device_setting(v).unwrap();
        assert_eq!(parsed(None), SelectedDevice::Cpu);
        assert_eq!(parsed(Some(" cpu")), SelectedDevice::Cpu);
        assert_eq!(parsed(Some("emu")), SelectedDevice::Emulated);
        assert_eq!(parsed(Some("CUDA")), SelectedDevice::Cuda(0));
        assert_eq!(parsed(Some("CUDA:1")), SelectedDevice::Cuda(1));
        if crate::cuda::driver_available().is_err() {
            let cuda = set_device(Some("CUDA")).unwrap_err();
            assert!(matches!(cuda, RuntimeError::DeviceUnavailable(_)), "{cuda}");
            let text = cuda.to_string();
            assert!(
                text.contains(
                    "DEVICE=CUDA: the CUDA driver library libcuda.so.1 could not be loaded"
                ),
                "{text}"
            );
            assert!(text.contains("DEVICE=CPU"), "{text}");
            let cuda1 = set_device(Some("CUDA:1")).unwrap_err();
            assert!(cuda1.to_string().contains("DEVICE=CUDA:1"), "{cuda1}");
            assert_eq!(
                selected_device().unwrap(),
                SelectedDevice::Cpu,
                "a failed set_device changes nothing"
            );
        } else {
            println!("a CUDA driver is present: the missing-driver text is not checked here");
        }
        let unknown = parse_device_setting(Some("TPU")).unwrap_err();
        assert!(unknown.to_string().contains("DEVICE=`TPU`"), "{unknown}");
    }
}
