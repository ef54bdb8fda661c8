//! Plans kept on disk beside the kernels, so that a new process running a graph structure an
//! earlier process ran neither schedules nor generates its kernels: it reads the plan's
//! recipe and gets each kernel's program from the kernel cache (compiling only what is not
//! there).
//!
//! An entry lives in `<cache dir>/plans/<key>.kernel`, in the kernel cache's entry format and
//! under its rules ([`crate::cache`]): a private directory, checksummed entries written
//! atomically, entries another user could have written refused, a damaged entry reported as
//! a warning and rebuilt, and the directory bounded by the cache's size limit (least recently
//! used entries deleted first).
//!
//! The key is a [stable hash](crate::stable_hash) of everything a plan depends on: the
//! abstracted graph in its stable form (`tensor_core::uop::stable_form`, never node
//! addresses), the codegen options, the device (its name, the compiler's identity and flags,
//! the BEAM width), this format's version, and the build of the program (its executable's
//! path, size and modification time): a plan is what this build's scheduler made, so a
//! rebuilt program makes its plans afresh, as it must when the scheduler has changed. A graph
//! without a stable form (one that holds a custom function's rules) is not kept.
//!
//! The recipe holds each kernel as rendered (name, source, entry, launch, arguments) with
//! its slots, each temporary's size, dtype and device, and the outputs in stable form over
//! placeholders and temporaries. The memory plan is worked out again on load.

use crate::cache::{DiskCache, cache_max_bytes_from_env};
use crate::cpu::CpuDevice;
use crate::plan::Slot;
use crate::stable_hash::StableHasher;
use crate::warn;
use std::path::PathBuf;
use std::sync::OnceLock;
use tensor_core::UOp;
use tensor_core::codegen::CodegenOptions;
use tensor_core::codegen::program::{KernelArg, LaunchDims};
use tensor_core::render::{Kernel, Launch};
use tensor_core::uop::wire::{Reader, WireError, Writer};
use tensor_core::uop::{Arg, Op, stable_form};

/// Bumped whenever the recipe's layout or meaning changes: it is part of every key.
const FORMAT_VERSION: u32 = 2;

/// Temporaries are written among the buffers of the outputs' stable form from this number
/// on; placeholders keep their own numbers, far below it.
const FIRST_TEMP: u64 = 1 << 48;

/// Where a process keeps its plans and what its plans were made for.
#[derive(Debug)]
pub struct PlanStore {
    disk: DiskCache,
    /// Everything besides the graph and the options that a plan depends on.
    identity: String,
}

/// A plan's recipe as read back: kernels as rendered with their slots, the temporaries (new
/// template buffers) and the outputs over placeholders and those temporaries.
pub struct StoredPlan {
    /// Each kernel, sealed again, with the slot of each argument.
    pub kernels: Vec<(Kernel, Vec<Slot>)>,
    /// Template buffers of the temporaries, by number.
    pub temps: Vec<UOp>,
    /// The outputs.
    pub outputs: Vec<UOp>,
}

impl PlanStore {
    /// The store beside `device`'s kernel cache (`<cache dir>/plans`), bounded by the cache
    /// size limit (`TENSOR_CACHE_MAX_BYTES`); `None` when the device keeps no kernels on disk,
    /// or when the compiler or this program cannot be identified (plans are then built in
    /// every process, as before).
    pub fn for_cpu(device: &CpuDevice) -> Option<PlanStore> {
        let dir = device.cache_dir()?.parent()?.join("plans");
        let compiler = device.compiler();
        let identity = format!(
            "device: CPU\ncompiler: {}\nflags: {:?}\nbeam: {}\nbuild: {}",
            compiler.identity().ok()?,
            compiler.flags(),
            crate::cpu::beam::beam_width_from_env().ok()?,
            build_identity()?
        );
        let max_bytes = cache_max_bytes_from_env().ok()?;
        Some(PlanStore::new(dir, max_bytes, identity))
    }

    /// A store in `dir` holding at most `max_bytes` of plans made for `identity` (everything
    /// besides the graph and the options that the plans depend on).
    pub fn new(dir: PathBuf, max_bytes: u64, identity: String) -> PlanStore {
        PlanStore {
            disk: DiskCache::new(Some(dir), max_bytes).labelled("plan"),
            identity,
        }
    }

    /// The key of the plan for `roots` (a graph over placeholders) under `options` on the
    /// device named `device`, or why the graph cannot be kept.
    pub fn key(
        &self,
        roots: &[UOp],
        options: &CodegenOptions,
        device: &str,
    ) -> Result<u128, stable_form::Unencodable> {
        let graph = stable_form::encode(roots)?;
        let mut hasher = StableHasher::new();
        hasher.write_field(b"tensor plan");
        hasher.write_field(&FORMAT_VERSION.to_le_bytes());
        hasher.write_field(env!("CARGO_PKG_VERSION").as_bytes());
        hasher.write_field(self.identity.as_bytes());
        hasher.write_field(device.as_bytes());
        hasher.write_field(format!("{options:?}").as_bytes());
        hasher.write_field(&graph);
        Ok(hasher.finish())
    }

    /// The plan stored under `key`, if an intact entry is there; a damaged one is reported
    /// and treated as missing, so the caller builds the plan again.
    pub fn load(&self, key: u128) -> Option<StoredPlan> {
        let payload = self.disk.load(key)?;
        match decode(&payload) {
            Ok(plan) => Some(plan),
            Err(e) => {
                let path = self.disk.entry_path(key).unwrap_or_default();
                warn(&format!(
                    "plan cache entry `{}` cannot be read: its bytes {e}; rebuilding it",
                    path.display()
                ));
                None
            }
        }
    }

    /// Keeps the recipe of a plan under `key` (best effort: a failure to write is reported
    /// once, as the kernel cache reports it). `kernels` are the plan's kernels with their
    /// slots; `temps` its temporaries; `outputs` its outputs over placeholders and `temps`.
    pub fn store<'k>(
        &self,
        key: u128,
        kernels: impl Iterator<Item = (&'k Kernel, &'k [Slot])>,
        temps: &[UOp],
        outputs: &[UOp],
    ) {
        if let Ok(payload) = encode(kernels, temps, outputs) {
            self.disk.store(key, &payload);
        }
    }
}

/// The program's build: its executable's path, size and modification time; `None` where it
/// cannot be found (then no plan is kept, since one from another build could be reused).
fn build_identity() -> Option<&'static str> {
    static BUILD: OnceLock<Option<String>> = OnceLock::new();
    BUILD
        .get_or_init(|| {
            let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
            let meta = std::fs::metadata(&exe).ok()?;
            let modified = meta
                .modified()
                .ok()?
                .duration_since(std::time::UNIX_EPOCH)
                .ok()?;
            Some(format!(
                "{:?} {} bytes, modified {}",
                exe.display(),
                meta.len(),
                modified.as_nanos()
            ))
        })
        .as_deref()
}

/// The recipe's bytes; fails when an output has no stable form.
fn encode<'k>(
    kernels: impl Iterator<Item = (&'k Kernel, &'k [Slot])>,
    temps: &[UOp],
    outputs: &[UOp],
) -> Result<Vec<u8>, stable_form::Unencodable> {
    let mut w = Writer::new();
    let kernels: Vec<_> = kernels.collect();
    w.usize(kernels.len());
    for (kernel, slots) in kernels {
        write_kernel(&mut w, kernel, slots);
    }
    w.usize(temps.len());
    for temp in temps {
        let arg = crate::execute::buffer_arg(temp);
        w.usize(arg.size);
        w.dtype(arg.dtype);
        w.device(&arg.device);
    }
    let form = stable_form::encode_with(outputs, |buffer| match buffer.placeholder_number() {
        Some(k) => Some(k as u64),
        None => temps
            .iter()
            .position(|t| matches!(t.arg(), Arg::Buffer(b) if b == buffer))
            .map(|j| FIRST_TEMP + j as u64),
    })?;
    w.bytes(&form);
    Ok(w.finish())
}

fn write_kernel(w: &mut Writer, kernel: &Kernel, slots: &[Slot]) {
    w.str(&kernel.name);
    w.str(&kernel.source);
    w.str(&kernel.entry);
    write_launch(w, kernel.launch);
    w.usize(kernel.args.len());
    for arg in &kernel.args {
        w.dtype(arg.dtype);
        w.usize(arg.size);
        w.bool(arg.writes);
    }
    w.usize(slots.len());
    for slot in slots {
        let (kind, index) = match *slot {
            Slot::Input(k) => (0, k),
            Slot::Temp(j) => (1, j),
        };
        w.u8(kind);
        w.usize(index);
    }
}

/// The recipe [`encode`] wrote, checked to be consistent (every slot names an argument and
/// an existing temporary).
fn decode(bytes: &[u8]) -> Result<StoredPlan, WireError> {
    let mut r = Reader::new(bytes);
    let count = r.count()?;
    let kernels = (0..count)
        .map(|_| read_kernel(&mut r))
        .collect::<Result<Vec<_>, _>>()?;
    let count = r.count()?;
    let mut temps = Vec::with_capacity(count);
    for _ in 0..count {
        let (size, dtype, device) = (r.usize()?, r.dtype()?, r.device()?);
        temps.push(UOp::new_buffer(size, dtype, device));
    }
    for (kernel, slots) in &kernels {
        check_slots(kernel, slots, temps.len())?;
    }
    let form = r.bytes()?;
    r.expect_end()?;
    let outputs = stable_form::decode_with(form, |number, size, dtype, device| {
        output_buffer(&temps, number, size, dtype, device)
    })?;
    Ok(StoredPlan {
        kernels,
        temps,
        outputs,
    })
}

fn read_kernel(r: &mut Reader<'_>) -> Result<(Kernel, Vec<Slot>), WireError> {
    let (name, source, entry) = (r.str()?, r.str()?, r.str()?);
    let launch = read_launch(r)?;
    let count = r.count()?;
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let (dtype, size, writes) = (r.dtype()?, r.usize()?, r.bool()?);
        args.push(KernelArg {
            dtype,
            size,
            writes,
        });
    }
    let count = r.count()?;
    let mut slots = Vec::with_capacity(count);
    for _ in 0..count {
        slots.push(match (r.u8()?, r.usize()?) {
            (0, k) => Slot::Input(k),
            (1, j) => Slot::Temp(j),
            (kind, _) => return Err(WireError::new(format!("hold unknown slot kind {kind}"))),
        });
    }
    // SAFETY: these fields were written by `write_kernel` from a kernel a renderer made, and
    // read back from an entry that passed the cache's checks: its checksum (so the bytes are
    // those written) and its owner and mode (so only this user can have written it, the same
    // trust the kernel cache gives the shared objects it loads and runs).
    let kernel = unsafe { Kernel::from_stored(name, source, entry, launch, args) };
    Ok((kernel, slots))
}

fn write_launch(w: &mut Writer, launch: Launch) {
    match launch {
        Launch::Cores(n) => {
            w.u8(0);
            w.usize(n);
        }
        Launch::Grid(dims) => {
            w.u8(1);
            w.usize(dims.grid);
            w.usize(dims.block);
        }
    }
}

fn read_launch(r: &mut Reader<'_>) -> Result<Launch, WireError> {
    Ok(match r.u8()? {
        0 => Launch::Cores(r.usize()?),
        1 => Launch::Grid(LaunchDims {
            grid: r.usize()?,
            block: r.usize()?,
        }),
        kind => return Err(WireError::new(format!("hold unknown launch kind {kind}"))),
    })
}

fn check_slots(kernel: &Kernel, slots: &[Slot], temps: usize) -> Result<(), WireError> {
    if slots.len() != kernel.args.len() {
        return Err(WireError::new(format!(
            "give kernel `{}` {} slots for {} arguments",
            kernel.name,
            slots.len(),
            kernel.args.len()
        )));
    }
    match slots
        .iter()
        .find(|s| matches!(s, Slot::Temp(j) if *j >= temps))
    {
        Some(slot) => Err(WireError::new(format!(
            "name {slot:?} of kernel `{}` among {temps} temporaries",
            kernel.name
        ))),
        None => Ok(()),
    }
}

/// The buffer an output names: temporary `number - FIRST_TEMP`, else a placeholder.
fn output_buffer(
    temps: &[UOp],
    number: u64,
    size: usize,
    dtype: tensor_core::DType,
    device: tensor_core::Device,
) -> Result<UOp, WireError> {
    if let Some(j) = number.checked_sub(FIRST_TEMP) {
        let temp = usize::try_from(j).ok().and_then(|j| temps.get(j));
        let arg = temp.map(crate::execute::buffer_arg);
        return match (temp, arg) {
            (Some(temp), Some(a)) if (a.size, a.dtype, &a.device) == (size, dtype, &device) => {
                Ok(temp.clone())
            }
            _ => Err(WireError::new(format!(
                "name temporary {j} as an output, which no temporary matches"
            ))),
        };
    }
    let number = usize::try_from(number)
        .map_err(|_| WireError::new(format!("name placeholder {number}")))?;
    let arg = tensor_core::uop::BufferArg::placeholder(number, size, dtype, device);
    Ok(UOp::new(Op::Buffer, dtype, vec![], Arg::Buffer(arg)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::generate_kernels;
    use tensor_core::Tensor;
    use tensor_core::schedule::create_schedule;
    use tensor_core::schedule::placeholders::{abstract_buffers, placeholder_number};

    /// The recipe of `x * 2 + 1` reshaped (an output that is a view of a temporary) over one
    /// placeholder: kernels with slots, temporaries, outputs.
    fn recipe() -> StoredPlan {
        let x = Tensor::from_vec(vec![1.0f32; 6], &[6]);
        let y = ((&x * 2.0).contiguous() + 1.0).reshape(&[2, 3]);
        let roots = abstract_buffers(&[y.uop()]).roots;
        let schedule = create_schedule(&roots);
        let kernels = generate_kernels(&schedule, &CodegenOptions::default());
        let mut temps: Vec<UOp> = Vec::new();
        let mut slot_of = |b: &UOp| match placeholder_number(b) {
            Some(k) => Slot::Input(k),
            None => Slot::Temp(temps.iter().position(|t| t == b).unwrap_or_else(|| {
                temps.push(b.clone());
                temps.len() - 1
            })),
        };
        let planned = schedule
            .items
            .iter()
            .zip(kernels)
            .map(|(item, k)| (k, item.buffers.iter().map(&mut slot_of).collect()))
            .collect();
        StoredPlan {
            kernels: planned,
            temps,
            outputs: schedule.outputs,
        }
    }

    fn encoded(kernels: &[(Kernel, Vec<Slot>)], temps: &[UOp], outputs: &[UOp]) -> Vec<u8> {
        let pairs = kernels.iter().map(|(k, s)| (k, s.as_slice()));
        encode(pairs, temps, outputs).unwrap()
    }

    #[test]
    fn a_recipe_reads_back_sealed_over_new_temporaries() {
        let StoredPlan {
            kernels,
            temps,
            outputs,
        } = recipe();
        let stored = decode(&encoded(&kernels, &temps, &outputs)).unwrap();
        assert_eq!(stored.kernels, kernels);
        assert!(stored.kernels.iter().all(|(k, _)| k.is_as_rendered()));
        assert_eq!(stored.temps.len(), temps.len());
        for (new, old) in stored.temps.iter().zip(&temps) {
            let (a, b) = (
                crate::execute::buffer_arg(new),
                crate::execute::buffer_arg(old),
            );
            assert_eq!((a.size, a.dtype, &a.device), (b.size, b.dtype, &b.device));
            assert_ne!(new, old, "a fresh template");
        }
        let over_new: Vec<UOp> = outputs
            .iter()
            .map(|o| {
                let map = temps.iter().cloned().zip(stored.temps.iter().cloned());
                tensor_core::uop::substitute(o, &map.collect())
            })
            .collect();
        assert_eq!(stored.outputs, over_new);
    }

    #[test]
    fn an_inconsistent_or_cut_recipe_is_an_error() {
        let StoredPlan {
            mut kernels,
            temps,
            outputs,
        } = recipe();
        let bytes = encoded(&kernels, &temps, &outputs);
        for cut in [0, 8, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        kernels[0].1[0] = Slot::Temp(temps.len());
        let err = decode(&encoded(&kernels, &temps, &outputs)).err().unwrap();
        assert!(err.to_string().contains("temporaries"), "{err}");
        kernels[0].1.pop();
        let err = decode(&encoded(&kernels, &temps, &outputs)).err().unwrap();
        assert!(err.to_string().contains("slots for"), "{err}");
    }

    #[test]
    fn the_key_names_the_graph_the_options_and_the_device() {
        let store = PlanStore::new(std::env::temp_dir(), 1, "cc 1".into());
        let graph = |n: usize| {
            let x = Tensor::from_vec(vec![0.0f32; n], &[n]);
            abstract_buffers(&[(&x + 1.0).uop()]).roots
        };
        let options = CodegenOptions::default();
        let key = |roots: &[UOp], options: &CodegenOptions, device: &str| {
            store.key(roots, options, device).unwrap()
        };
        let base = key(&graph(4), &options, "CPU");
        assert_eq!(
            key(&graph(4), &options, "CPU"),
            base,
            "another buffer, same key"
        );
        assert_ne!(key(&graph(5), &options, "CPU"), base);
        assert_ne!(key(&graph(4), &options, "CUDA:0"), base);
        let threads = CodegenOptions {
            threads: 2,
            ..options.clone()
        };
        assert_ne!(key(&graph(4), &threads, "CPU"), base);
        let other = PlanStore::new(std::env::temp_dir(), 1, "cc 2".into());
        assert_ne!(other.key(&graph(4), &options, "CPU").unwrap(), base);
    }
}
