//! Execution plans: what the compiler made of a graph, kept so the next graph of the same
//! structure runs without compiling anything.
//!
//! A plan is built from a graph whose buffers are numbered placeholders
//! (`tensor_core::schedule::placeholders`): its kernels (compiled programs), their launch
//! order, and for each kernel argument a *slot*: input `k` (whatever buffer placeholder `k`
//! stands for in this call) or temporary `j` (a buffer the schedule created: an intermediate or
//! an output, allocated afresh for every run). Running a plan binds the call's buffers to the
//! slots and launches the recorded programs: no scheduling, no codegen, no rendering, no
//! hashing of source text.
//!
//! Memory: a temporary that is an output is allocated afresh for every run (it leaves with the
//! result, from the device's recycling pool). The other temporaries, the intermediates, live
//! only while the plan runs, so they are planned: two intermediates of the same size and dtype
//! whose lifetimes (first to last kernel that touches them) do not overlap share one buffer,
//! and the plan keeps its intermediate buffers between runs (one set per concurrent run), so a
//! replay allocates nothing for them.
//!
//! [`PlanCache`] keeps the plans of the most recently used graph structures, keyed by the
//! abstracted graph (one interned node, so a lookup is a hash of a pointer) and the codegen
//! options. A CPU plan cache made [`PlanCache::with_store`] also keeps every plan it builds
//! on disk ([`crate::plan_store`]), and on a miss reads the plan from there before building
//! it: a new process then runs a structure an earlier one ran without scheduling or
//! generating kernels, its programs coming from the kernel cache.

use crate::device::{CheckedProgram, Device};
use crate::error::Result;
use crate::execute::{buffer_arg, compile_all, launch_kernel};
use crate::lru::Lru;
use crate::plan_store::{PlanStore, StoredPlan};
use crate::settings::debug_level;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tensor_core::codegen::{CodegenOptions, kernel_name, lower_kernel_named, unique_name};
use tensor_core::render::{Kernel, c::render_kernel};
use tensor_core::schedule::placeholders::placeholder_number;
use tensor_core::schedule::{Schedule, create_schedule};
use tensor_core::uop::BufferArg;
use tensor_core::uop::fast_hash::FastBuild;
use tensor_core::{UOp, uop::substitute};

/// Where a kernel argument's buffer comes from when a plan runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The buffer the call binds to placeholder `k`.
    Input(usize),
    /// Temporary `j` of the plan: allocated for each run.
    Temp(usize),
}

/// One launch of a plan.
pub struct PlannedKernel<D: Device> {
    /// The generated kernel (name, source, threads, argument sizes).
    pub kernel: Kernel,
    /// Its compiled program, whose launches are checked against the kernel's arguments.
    pub program: CheckedProgram<D::Program>,
    /// Where each argument's buffer comes from, by slot.
    pub slots: Vec<Slot>,
}

/// The kernels of a graph structure, ready to run on any buffers of the right kinds.
pub struct Plan<D: Device> {
    kernels: Vec<PlannedKernel<D>>,
    /// The schedule's own buffers, by temporary number (templates: never given memory).
    temps: Vec<UOp>,
    /// For each temporary: `None` for an output (fresh every run), else the intermediate
    /// buffer it is planned into.
    placement: Vec<Option<usize>>,
    /// Templates of the planned intermediate buffers.
    intermediates: Vec<UOp>,
    /// Sets of intermediate buffers kept between runs.
    idle: Mutex<Vec<Vec<UOp>>>,
    /// The schedule's outputs, over placeholders and template temporaries.
    outputs: Vec<UOp>,
}

impl<D: Device> Plan<D> {
    /// Schedules `roots` (a graph over placeholders), generates and compiles its kernels.
    pub fn build(device: &D, roots: &[UOp], options: &CodegenOptions) -> Result<Plan<D>> {
        crate::stats::record_schedule();
        let started = std::time::Instant::now();
        let schedule = create_schedule(roots);
        let scheduled = started.elapsed();
        if crate::settings::debug_level() >= 3 {
            for decision in &schedule.decisions {
                eprintln!("schedule: {decision}");
            }
        }
        let kernels = generate_kernels_for(device, &schedule, options);
        let generated = started.elapsed();
        let programs = compile_all(device, kernels.iter())?;
        if debug_level() >= 1 {
            eprintln!(
                "plan: {} kernels scheduled in {scheduled:.3?}, generated in {:.3?}, compiled in \
                 {:.3?}",
                kernels.len(),
                generated - scheduled,
                started.elapsed() - generated
            );
        }
        let mut temps: Vec<UOp> = Vec::new();
        let mut slot_of = |buffer: &UOp| match placeholder_number(buffer) {
            Some(k) => Slot::Input(k),
            None => Slot::Temp(match temps.iter().position(|t| t == buffer) {
                Some(j) => j,
                None => {
                    temps.push(buffer.clone());
                    temps.len() - 1
                }
            }),
        };
        let kernels: Vec<PlannedKernel<D>> = schedule
            .items
            .iter()
            .zip(kernels)
            .zip(programs)
            .map(|((item, kernel), program)| PlannedKernel {
                slots: item.buffers.iter().map(&mut slot_of).collect(),
                kernel,
                program,
            })
            .collect();
        Ok(Plan::assemble(kernels, temps, schedule.outputs))
    }

    /// The plan a [`PlanStore`] kept: its kernels' programs from the device (the kernel
    /// cache's, or compiled where it has none), nothing scheduled or generated.
    pub fn from_stored(device: &D, stored: StoredPlan) -> Result<Plan<D>> {
        let started = std::time::Instant::now();
        let programs = compile_all(device, stored.kernels.iter().map(|(kernel, _)| kernel))?;
        if debug_level() >= 1 {
            eprintln!(
                "plan: {} kernels read from disk, programs ready in {:.3?}",
                stored.kernels.len(),
                started.elapsed()
            );
        }
        let kernels = stored
            .kernels
            .into_iter()
            .zip(programs)
            .map(|((kernel, slots), program)| PlannedKernel {
                kernel,
                program,
                slots,
            })
            .collect();
        Ok(Plan::assemble(kernels, stored.temps, stored.outputs))
    }

    /// The plan of `kernels` over `temps`, computing `outputs`, with its memory planned.
    fn assemble(kernels: Vec<PlannedKernel<D>>, temps: Vec<UOp>, outputs: Vec<UOp>) -> Plan<D> {
        let (placement, intermediates) = plan_memory(&kernels, &temps, &outputs);
        Plan {
            kernels,
            temps,
            placement,
            intermediates,
            idle: Mutex::new(Vec::new()),
            outputs,
        }
    }

    /// Keeps this plan's recipe in `store` under `key`.
    fn keep_in(&self, store: &PlanStore, key: u128) {
        let kernels = self.kernels.iter().map(|k| (&k.kernel, k.slots.as_slice()));
        store.store(key, kernels, &self.temps, &self.outputs);
    }

    /// How many distinct intermediate buffers a run uses (after sharing).
    pub fn intermediate_buffers(&self) -> usize {
        self.intermediates.len()
    }

    /// How many temporaries the schedule made (outputs and intermediates, before sharing).
    pub fn temporaries(&self) -> usize {
        self.temps.len()
    }

    /// The launches of the plan, in order.
    pub fn kernels(&self) -> &[PlannedKernel<D>] {
        &self.kernels
    }

    /// Runs the plan with placeholder `k` bound to `inputs[k]`, and returns the outputs (fresh
    /// buffers for what the plan computes, seen through the output's reshapes).
    pub fn run(&self, device: &D, inputs: &[UOp]) -> Result<Vec<UOp>> {
        let intermediates = self.take_intermediates();
        let temps: Vec<UOp> = self
            .temps
            .iter()
            .zip(&self.placement)
            .map(|(template, placed)| match placed {
                Some(i) => intermediates[*i].clone(),
                None => fresh_like(template),
            })
            .collect();
        let launched = self.launch_all(device, inputs, &temps);
        self.give_back(intermediates);
        launched?;
        Ok(self.bind_outputs(inputs, &temps))
    }

    fn launch_all(&self, device: &D, inputs: &[UOp], temps: &[UOp]) -> Result<()> {
        let debug = debug_level();
        for planned in &self.kernels {
            let buffers: Vec<&UOp> = planned
                .slots
                .iter()
                .map(|slot| match *slot {
                    Slot::Input(k) => &inputs[k],
                    Slot::Temp(j) => &temps[j],
                })
                .collect();
            launch_kernel(device, &planned.kernel, &planned.program, &buffers, debug)?;
        }
        Ok(())
    }

    /// A set of intermediate buffers no other run is using: a kept one, or a new one.
    fn take_intermediates(&self) -> Vec<UOp> {
        let kept = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        kept.unwrap_or_else(|| self.intermediates.iter().map(fresh_like).collect())
    }

    fn give_back(&self, intermediates: Vec<UOp>) {
        if !intermediates.is_empty() {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            idle.push(intermediates);
        }
    }

    /// The outputs over this run's buffers: a temporary that is an output is its new buffer
    /// as is; any other output (a view of a buffer) is rebuilt over the run's buffers.
    fn bind_outputs(&self, inputs: &[UOp], temps: &[UOp]) -> Vec<UOp> {
        let direct = |o: &UOp| self.temps.iter().position(|t| t == o);
        if let Some(all) = self.outputs.iter().map(direct).collect::<Option<Vec<_>>>() {
            return all.into_iter().map(|j| temps[j].clone()).collect();
        }
        let mut bound: HashMap<UOp, UOp> = self.temps.iter().cloned().zip(temps.to_vec()).collect();
        for output in &self.outputs {
            for node in output.toposort() {
                if let Some(k) = placeholder_number(&node) {
                    bound.insert(node, inputs[k].clone());
                }
            }
        }
        self.outputs.iter().map(|o| substitute(o, &bound)).collect()
    }
}

/// Where each temporary lives: `None` for an output, else the intermediate buffer it shares
/// with the temporaries of the same size and dtype whose lifetimes it does not overlap (a
/// greedy interval colouring by first use); and the templates of those buffers.
fn plan_memory<D: Device>(
    kernels: &[PlannedKernel<D>],
    temps: &[UOp],
    outputs: &[UOp],
) -> (Vec<Option<usize>>, Vec<UOp>) {
    let escaping: std::collections::HashSet<UOp> =
        outputs.iter().flat_map(|o| o.toposort()).collect();
    let mut lifetime: Vec<Option<(usize, usize)>> = vec![None; temps.len()];
    for (k, planned) in kernels.iter().enumerate() {
        for slot in &planned.slots {
            if let Slot::Temp(j) = *slot {
                let span = lifetime[j].get_or_insert((k, k));
                span.1 = k;
            }
        }
    }
    let mut order: Vec<usize> = (0..temps.len()).collect();
    order.sort_by_key(|&j| lifetime[j].map_or(0, |(first, _)| first));
    let mut placement = vec![None; temps.len()];
    let mut intermediates: Vec<UOp> = Vec::new();
    let mut busy_until: Vec<usize> = Vec::new();
    for j in order {
        let (Some((first, last)), false) = (lifetime[j], escaping.contains(&temps[j])) else {
            continue;
        };
        let kind = buffer_arg(&temps[j]);
        let free = (0..intermediates.len()).find(|&i| {
            let other = buffer_arg(&intermediates[i]);
            busy_until[i] < first && (other.size, other.dtype) == (kind.size, kind.dtype)
        });
        let i = free.unwrap_or_else(|| {
            intermediates.push(temps[j].clone());
            busy_until.push(0);
            intermediates.len() - 1
        });
        busy_until[i] = last;
        placement[j] = Some(i);
    }
    (placement, intermediates)
}

/// A new buffer of the kind of template `buffer` (size, dtype, device).
fn fresh_like(buffer: &UOp) -> UOp {
    let arg: BufferArg = buffer_arg(buffer);
    UOp::new_buffer(arg.size, arg.dtype, arg.device)
}

/// The kernels of `schedule` lowered and rendered as C, named as tinygrad names them (duplicates get `n1`, `n2`, ...).
pub fn generate_kernels(schedule: &Schedule, options: &CodegenOptions) -> Vec<Kernel> {
    generate_kernels_with(schedule, |ast, sizes, name| {
        render_kernel(&lower_kernel_named(ast, sizes, options, name))
    })
}

/// The kernels of `schedule` lowered and rendered by `device`'s renderer
/// ([`Device::generate_kernel`]), named as [`generate_kernels`] names them.
pub fn generate_kernels_for<D: Device>(
    device: &D,
    schedule: &Schedule,
    options: &CodegenOptions,
) -> Vec<Kernel> {
    generate_kernels_with(schedule, |ast, sizes, name| {
        device.generate_kernel(ast, sizes, options, name)
    })
}

/// The kernels of `schedule`, each made by `generate(ast, buffer_sizes, name)`, named as
/// [`generate_kernels`] names them. Items of one AST over buffers of the same sizes are one
/// kernel, generated once (and so compiled once).
pub fn generate_kernels_with(
    schedule: &Schedule,
    generate: impl Fn(&UOp, &[usize], &str) -> Kernel,
) -> Vec<Kernel> {
    let mut seen_names = HashMap::new();
    let mut made: HashMap<(UOp, Vec<usize>), Kernel> = HashMap::new();
    schedule
        .items
        .iter()
        .map(|item| {
            let key = (item.ast.clone(), item.buffer_sizes());
            if let Some(kernel) = made.get(&key) {
                return kernel.clone();
            }
            crate::stats::record_kernel_generated();
            let name = unique_name(&kernel_name(&item.ast), &mut seen_names);
            let kernel = generate(&item.ast, &key.1, &name);
            made.insert(key, kernel.clone());
            kernel
        })
        .collect()
}

/// The plans of recently run graph structures, least recently used dropped first.
pub struct PlanCache<D: Device> {
    plans: Mutex<Lru<PlanKey, Arc<Plan<D>>, FastBuild>>,
    /// Where plans are also kept between processes, if anywhere.
    store: Option<PlanStore>,
}

/// A graph structure (the sink of its abstracted roots) with the options it was built for.
type PlanKey = (UOp, CodegenOptions);

impl<D: Device> PlanCache<D> {
    /// A cache of at most `capacity` plans (at least one).
    pub fn new(capacity: usize) -> PlanCache<D> {
        PlanCache {
            plans: Mutex::new(Lru::new(capacity)),
            store: None,
        }
    }

    /// Where plans are kept between processes, if anywhere.
    pub fn store(&self) -> Option<&PlanStore> {
        self.store.as_ref()
    }

    /// The most plans kept.
    pub fn capacity(&self) -> usize {
        self.lock().limit()
    }

    /// How many plans are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no plan is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The plan for `roots` (a graph over placeholders) under `options`: the cached one, or
    /// a new one built and kept.
    pub fn get_or_build(
        &self,
        device: &D,
        roots: &[UOp],
        options: &CodegenOptions,
    ) -> Result<Arc<Plan<D>>> {
        let key = (UOp::sink(roots.to_vec()), options.clone());
        if let Some(plan) = self.touch(&key) {
            crate::stats::record_plan_hit();
            return Ok(plan);
        }
        let plan = Arc::new(self.read_or_build(device, roots, options)?);
        self.insert(key, plan.clone());
        Ok(plan)
    }

    /// The plan kept on disk for `roots`, else a new one built (and kept there).
    fn read_or_build(
        &self,
        device: &D,
        roots: &[UOp],
        options: &CodegenOptions,
    ) -> Result<Plan<D>> {
        let Some(store) = &self.store else {
            return Plan::build(device, roots, options);
        };
        let key = match store.key(roots, options, device.name()) {
            Ok(key) => key,
            Err(why) => {
                if debug_level() >= 1 {
                    eprintln!("plan: not kept on disk: the graph {why}");
                }
                return Plan::build(device, roots, options);
            }
        };
        if let Some(stored) = store.load(key) {
            let plan = Plan::from_stored(device, stored)?;
            crate::stats::record_disk_plan_hit();
            return Ok(plan);
        }
        let plan = Plan::build(device, roots, options)?;
        plan.keep_in(store, key);
        Ok(plan)
    }

    fn touch(&self, key: &PlanKey) -> Option<Arc<Plan<D>>> {
        self.lock().get(key)
    }

    fn insert(&self, key: PlanKey, plan: Arc<Plan<D>>) {
        self.lock().insert(key, plan);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru<PlanKey, Arc<Plan<D>>, FastBuild>> {
        self.plans.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PlanCache<crate::cpu::CpuDevice> {
    /// A cache of at most `capacity` plans in memory that also keeps them in `store`, read
    /// before a plan is built (`None`: memory only, as [`PlanCache::new`]). Only the CPU
    /// device's programs are made from a kernel's source alone, which a stored plan holds.
    pub fn with_store(capacity: usize, store: Option<PlanStore>) -> Self {
        PlanCache {
            store,
            ..PlanCache::new(capacity)
        }
    }
}
