//! CUDA source to PTX with NVRTC (loaded at run time by cudarc), and PTX to machine code with
//! `ptxas`: the compile checks that need no GPU.
//!
//! cudarc panics when it cannot load `libnvrtc`, so every entry point checks first that the
//! library loads and otherwise returns [`RuntimeError::DeviceUnavailable`] saying how to get
//! it (`scripts/cuda-tools.sh`).

use crate::cpu::compiler_process::run_with_limit;
use crate::cpu::scratch::ScratchDir;
use crate::error::{Result, RuntimeError};
use cudarc::nvrtc::{CompileError, CompileOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How to install the tools, for error messages.
pub const SETUP_HINT: &str = "run `eval \"$(scripts/cuda-tools.sh)\"` from the repository root (it installs NVRTC and \
     ptxas 12.9 from PyPI into .cuda-venv/ and exports TENSOR_NVRTC, TENSOR_PTXAS and \
     LD_LIBRARY_PATH; the runtime loads the tools only from these variables, the library \
     path and PATH)";

/// The NVRTC options every kernel is compiled with (besides the architecture); part of the
/// PTX cache key.
pub const NVRTC_OPTIONS: [&str; 1] = ["--std=c++17"];

/// The version of the NVRTC that is loaded, as `"major.minor"` (part of the PTX cache key).
pub fn nvrtc_version() -> Result<String> {
    nvrtc_available()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (checked above); the call only writes the two integers.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if status != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(RuntimeError::DeviceUnavailable(format!(
            "NVRTC could not report its version ({status:?}); {SETUP_HINT}"
        )));
    }
    Ok(format!("{major}.{minor}"))
}

/// Ok when NVRTC can be loaded: from the file `$TENSOR_NVRTC` names, if set (it is then kept
/// loaded, so cudarc's load by name finds it), else by the system loader under the names
/// cudarc searches (`libnvrtc.so`, `libnvrtc.so.12`: `LD_LIBRARY_PATH`, the loader's cache).
/// No other place is searched: a library found by looking around the working directory
/// could have been put there by another user, and would run inside this process.
pub fn nvrtc_available() -> Result<()> {
    if let Some(path) = crate::settings::var_os("TENSOR_NVRTC") {
        load_configured(&PathBuf::from(path))?;
    }
    // First, by our own load: cudarc's loads resolve every symbol and panic on a missing one.
    nvrtc_found_is_cuda_12()?;
    // SAFETY: loads (and drops) the shared library by name; no symbol of it is called.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(RuntimeError::DeviceUnavailable(format!(
            "NVRTC (libnvrtc.so.12) could not be loaded from the library path; {SETUP_HINT}"
        )))
    }
}

/// Loads the NVRTC at `path` (`TENSOR_NVRTC`) once and keeps it loaded for the rest of the
/// process. (The dynamic loader matches a later load by name against the libraries already
/// loaded, so cudarc then finds this one.)
fn load_configured(path: &Path) -> Result<()> {
    static LOADED: std::sync::OnceLock<std::result::Result<(), String>> =
        std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            // SAFETY: NVRTC's initialisers only set up its own state; the user named this file.
            match unsafe { libloading::Library::new(path) } {
                Ok(library) => {
                    std::mem::forget(library);
                    Ok(())
                }
                Err(e) => Err(format!(
                    "TENSOR_NVRTC={} could not be loaded ({e}); set it to CUDA 12's \
                     libnvrtc.so.12, or unset it to use the library path; {SETUP_HINT}",
                    path.display()
                )),
            }
        })
        .clone()
        .map_err(RuntimeError::DeviceUnavailable)
}

/// Ok when the NVRTC that cudarc's load by name finds first exports every function cudarc's
/// CUDA 12.9 bindings resolve: CUDA 13's lacks `nvrtcGetNVVM`, and cudarc would panic on it.
/// (`libnvrtc.so` comes before `libnvrtc.so.12` in cudarc's search, so a system CUDA 13
/// toolkit's can shadow a CUDA 12 NVRTC on the library path.)
fn nvrtc_found_is_cuda_12() -> Result<()> {
    static CHECKED: std::sync::OnceLock<std::result::Result<(), String>> =
        std::sync::OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        for name in ["libnvrtc.so", "libnvrtc.so.12"] {
            // SAFETY: loads the library by name (NVRTC's initialisers only set up its own
            // state); a symbol's address is looked up below, nothing is called.
            let Ok(library) = (unsafe { libloading::Library::new(name) }) else {
                continue;
            };
            // SAFETY: as above: the symbol is looked up, never called.
            let complete =
                unsafe { library.get::<unsafe extern "C" fn()>(b"nvrtcGetNVVM\0") }.is_ok();
            return match complete {
                true => Ok(()),
                false => Err(format!(
                    "the NVRTC found as {name} is not CUDA 12's (it lacks nvrtcGetNVVM, which \
                     this build's CUDA 12.9 bindings need): put a folder holding CUDA 12's \
                     libnvrtc.so.12, and a libnvrtc.so link to it, first on LD_LIBRARY_PATH; \
                     {SETUP_HINT}"
                )),
            };
        }
        Ok(())
    });
    checked.clone().map_err(RuntimeError::DeviceUnavailable)
}

/// The PTX of CUDA `source` for the GPU architecture `arch` (`"sm_80"`, or a virtual one such
/// as `"compute_80"`). A rejected source is
/// [`RuntimeError::CompileFailed`] with NVRTC's log.
pub fn compile_ptx(source: &str, arch: &'static str) -> Result<String> {
    nvrtc_available()?;
    let options = CompileOptions {
        arch: Some(arch),
        options: NVRTC_OPTIONS.iter().map(|o| o.to_string()).collect(),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(source, options) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(CompileError::CompileError { log, .. }) => Err(RuntimeError::CompileFailed {
            compiler: format!("NVRTC ({arch})"),
            source: source.to_string(),
            output: log.to_string_lossy().into_owned(),
        }),
        Err(other) => Err(RuntimeError::CompileFailed {
            compiler: format!("NVRTC ({arch})"),
            source: source.to_string(),
            output: format!("{other:?}"),
        }),
    }
}

/// The `ptxas` to assemble with: the file `$TENSOR_PTXAS` names, else `ptxas` on `PATH`.
pub fn ptxas_path() -> Option<PathBuf> {
    if let Some(path) = crate::settings::var_os("TENSOR_PTXAS") {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    let search = crate::settings::var_os("PATH")?;
    std::env::split_paths(&search)
        .map(|dir| dir.join("ptxas"))
        .find(|candidate| candidate.is_file())
}

/// Why the compile checks cannot run here (NVRTC or ptxas missing), or `None` when they can.
pub fn tools_missing() -> Option<String> {
    if let Err(e) = nvrtc_available() {
        return Some(e.to_string());
    }
    if ptxas_path().is_none() {
        return Some(format!("ptxas was not found; {SETUP_HINT}"));
    }
    None
}

/// Compiles a rendered CUDA kernel with NVRTC once, to PTX for the virtual architecture
/// `virtual_arch` (`"compute_80"`: what the driver JIT-compiles on that GPU and any newer),
/// and assembles that PTX with ptxas for each of `archs` (`"sm_80"`, `"sm_90"`): the check
/// that needs no GPU. `TENSOR_CUDA_TIMES=1` prints the time of each step.
pub fn check_kernel(source: &str, virtual_arch: &'static str, archs: &[&str]) -> Result<()> {
    let started = std::time::Instant::now();
    let ptx = compile_ptx(source, virtual_arch)?;
    let nvrtc = started.elapsed();
    for arch in archs {
        assemble(&ptx, arch)?;
    }
    if crate::settings::var_os("TENSOR_CUDA_TIMES").is_some() {
        eprintln!("nvrtc {nvrtc:.1?}, ptxas {:.1?}", started.elapsed() - nvrtc);
    }
    Ok(())
}

/// Assembles `ptx` for `arch` with `ptxas` (the object is thrown away): Ok when it assembles
/// with no error, else [`RuntimeError::CompileFailed`] with ptxas's output.
pub fn assemble(ptx: &str, arch: &str) -> Result<()> {
    let ptxas = ptxas_path().ok_or_else(|| {
        RuntimeError::DeviceUnavailable(format!("ptxas was not found; {SETUP_HINT}"))
    })?;
    // A private directory of its own: a predictable name in a shared temp dir could be made
    // (or replaced) by another user first.
    let temp = std::env::temp_dir();
    let scratch = ScratchDir::new_in(&temp).map_err(|e| io_error(&temp, e))?;
    let dir = scratch.path();
    let stem = crate::stable_hash::to_hex(crate::stable_hash::stable_hash(ptx.as_bytes()));
    let input = dir.join(format!("{stem}-{arch}.ptx"));
    let output = dir.join(format!("{stem}-{arch}.cubin"));
    std::fs::write(&input, ptx).map_err(|e| io_error(&input, e))?;
    let mut command = Command::new(&ptxas);
    command
        .arg(format!("--gpu-name={arch}"))
        .arg(&input)
        .arg("-o")
        .arg(&output);
    // As the C compiler: a hung ptxas is stopped, with everything it started.
    let limit = crate::cpu::compile_timeout_from_env()?;
    let run = run_with_limit(&mut command, limit)
        .map_err(|e| io_error(&ptxas, e))?
        .ok_or_else(|| RuntimeError::CompileTimedOut {
            compiler: format!("ptxas ({arch})"),
            limit,
        })?;
    drop(scratch);
    if run.status.success() {
        return Ok(());
    }
    Err(RuntimeError::CompileFailed {
        compiler: format!("ptxas ({arch})"),
        source: ptx.to_string(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        ),
    })
}

fn io_error(path: &std::path::Path, error: std::io::Error) -> RuntimeError {
    RuntimeError::Io {
        context: format!("running ptxas on {}", path.display()),
        error,
    }
}
