//! The switches every realize obeys, parsed once per process from [`crate::settings`]:
//! `NOOPT` (no kernel optimizations), `DEVICE` (where graphs run, see [`crate::registry`]),
//! the plan cache's size, and whether any setting a realize depends on is malformed (`DEBUG`
//! among them, whose level is [`crate::settings::debug_level`]).
//!
//! `DEBUG=1` prints one line per run (kernels, compiler runs, cache hits, time) and warns once
//! about a loop whose graph keeps growing ([`crate::recompute_watch`]), `DEBUG=2` a line per
//! kernel, `DEBUG=3` each realization decision of the scheduler (the rule that realized or
//! fused a node, with its cost facts), `DEBUG=4` the source of each kernel.

use crate::device::Device;
use crate::error::{Result, RuntimeError};
use std::sync::OnceLock;
use tensor_core::codegen::CodegenOptions;

/// The settings a realize reads from the environment (`crate::settings`), parsed once per
/// process: a plan replay of a few microseconds cannot afford to parse them again.
/// A malformed value is an error at every realize (see [`crate::registry::selected_device`]), as a malformed
/// `THREADS` or `TENSOR_COMPILE_TIMEOUT` is where the CPU device is made.
struct EnvSettings {
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

/// Codegen options for kernels run on `device`: optimised unless `NOOPT=1` (as the process
/// started), split across the device's threads.
pub fn codegen_options<D: Device>(device: &D) -> CodegenOptions {
    CodegenOptions {
        optimize: !env_settings().noopt,
        threads: device.default_threads(),
        vector_lanes: device.vector_lanes(),
    }
}

/// The device `DEVICE` names (unparsed; `None` when unset), as the process started.
pub(crate) fn device_switch() -> Option<&'static str> {
    env_settings().device.as_deref()
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
