//! The device registry: which device graphs run on, and the shared devices with their plan
//! caches.
//!
//! `DEVICE` (or [`set_device`], which overrides it) selects where graphs run: unset or `CPU`,
//! `CUDA` / `CUDA:<n>` (a GPU, through [`crate::cuda::CudaDevice`]; without a driver the error
//! says what is missing), or `EMU` (the GPU lowering run by an emulator on the host,
//! [`crate::emulated::EmulatedGpu`], for tests). A graph that reads values tied to a device
//! by `Tensor::to` runs on that device instead ([`crate::placement`]). Each device is opened
//! once per process and has its own plan cache; [`on_device!`] runs code generic over
//! [`crate::device::Device`] on the one a [`SelectedDevice`] names.

use crate::cpu::CpuDevice;
use crate::cuda::CudaDevice;
use crate::device::Device;
use crate::emulated::{EMULATED_GPU_NAME, EmulatedGpu};
use crate::error::{Result, RuntimeError};
use crate::plan::PlanCache;
use crate::switches::{
    DEFAULT_PLAN_CACHE_SIZE, device_switch, plan_cache_size_from_env, settings_are_valid,
};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError, RwLock};

/// Runs `$body` with `$device` bound to device `$which` (a [`SelectedDevice`]; a `&D` for its
/// `D: Device`) and `$plans` to that device's plan cache.
macro_rules! on_device {
    ($which:expr, |$device:ident, $plans:ident| $body:expr) => {
        match $which {
            $crate::registry::SelectedDevice::Cpu => {
                let cpu = $crate::cpu::CpuDevice::shared()?;
                let ($device, $plans) = (&cpu, $crate::registry::shared_plan_cache());
                $body
            }
            $crate::registry::SelectedDevice::Emulated => {
                let emulated = $crate::emulated::EmulatedGpu::shared()?;
                let ($device, $plans) = (&*emulated, $crate::registry::emulated_plan_cache());
                $body
            }
            $crate::registry::SelectedDevice::Cuda(ordinal) => {
                let (gpu, cache) = $crate::registry::shared_cuda(ordinal)?;
                let ($device, $plans) = (gpu, cache);
                $body
            }
        }
    };
}
pub(crate) use on_device;

/// [`on_device!`] on the selected device.
macro_rules! on_selected_device {
    (|$device:ident, $plans:ident| $body:expr) => {
        $crate::registry::on_device!($crate::registry::selected_device()?, |$device, $plans| {
            $body
        })
    };
}
pub(crate) use on_selected_device;

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
    parse_device_setting(chosen.as_deref().or(device_switch()))
}

fn device_setting() -> Option<String> {
    let chosen = DEVICE_OVERRIDE
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    chosen.or_else(|| device_switch().map(str::to_string))
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
pub(crate) fn opened_gpus() -> Vec<&'static (CudaDevice, PlanCache<CudaDevice>)> {
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
