//! The system C compiler: which one, with which flags, its version, and running it.
//!
//! Flags (see [`default_flags`]): `-O2 -march=native` for speed on the machine at hand;
//! `-std=c11` because kernels are C11; `-fPIC -shared` to build a loadable object;
//! `-ffp-contract=off` so `a*b+c` is never fused into an FMA, and no `-ffast-math`, so
//! compiled kernels round exactly like the reference interpreter; `-fno-math-errno` lets
//! `sqrtf` compile to one instruction without changing any result (only `errno` is lost).
//! `-lm` is appended after the source. Because `-march=native` means different code on
//! different CPUs, the cache key then also covers the host CPU's model and feature list.

use crate::error::{Result, RuntimeError};
use crate::stable_hash::StableHasher;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// The flags kernels are compiled with unless configured otherwise.
pub fn default_flags() -> Vec<String> {
    [
        "-O2",
        "-march=native",
        "-std=c11",
        "-fPIC",
        "-shared",
        "-ffp-contract=off",
        "-fno-math-errno",
    ]
    .map(String::from)
    .to_vec()
}

/// The compiler the environment asks for: `$CC` if set and non-empty, else `cc`.
pub fn compiler_from_env() -> String {
    std::env::var("CC")
        .ok()
        .filter(|cc| !cc.trim().is_empty())
        .unwrap_or_else(|| "cc".to_string())
}

/// A C compiler command (a program, possibly followed by arguments, like `CC="ccache gcc"`)
/// and the flags it builds kernels with.
#[derive(Clone, Debug)]
pub struct CCompiler {
    command: String,
    flags: Vec<String>,
}

impl CCompiler {
    /// A compiler run as `command` (split at whitespace) with `flags`.
    pub fn new(command: impl Into<String>, flags: Vec<String>) -> CCompiler {
        CCompiler {
            command: command.into(),
            flags,
        }
    }

    /// The command as configured.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The flags passed before the source file.
    pub fn flags(&self) -> &[String] {
        &self.flags
    }

    /// The compiler's `--version` output, queried once per process and command.
    pub fn version(&self) -> Result<String> {
        static VERSIONS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
        let versions = VERSIONS.get_or_init(Default::default);
        if let Some(version) = lock(versions).get(&self.command) {
            return Ok(version.clone());
        }
        let output = self.run(&["--version".to_string()])?;
        if !output.status.success() {
            return Err(RuntimeError::CompilerUnusable {
                compiler: self.command.clone(),
                output: format!("{}\n{}", output.status, combined_output(&output)),
            });
        }
        let version = String::from_utf8_lossy(&output.stdout).into_owned();
        lock(versions).insert(self.command.clone(), version.clone());
        Ok(version)
    }

    /// The cache key of `source` built by this compiler: a stable hash of the source, the
    /// flags and the compiler's version, i.e. of everything that decides the object code.
    pub fn cache_key(&self, source: &str) -> Result<u128> {
        let mut hasher = StableHasher::new();
        hasher.write_field(source.as_bytes());
        hasher.write_field(&(self.flags.len() as u64).to_le_bytes());
        for flag in &self.flags {
            hasher.write_field(flag.as_bytes());
        }
        hasher.write_field(self.version()?.as_bytes());
        if self.flags.iter().any(|f| f.contains("=native")) {
            hasher.write_field(host_cpu_identity().as_bytes());
        }
        Ok(hasher.finish())
    }

    /// Compiles `source` into a shared object in `dir` and returns its path. The files are
    /// named after `name`, so compiler messages point at `<name>.c`.
    pub fn compile(&self, source: &str, name: &str, dir: &Path) -> Result<PathBuf> {
        let stem = file_stem(name);
        let source_path = dir.join(format!("{stem}.c"));
        let object_path = dir.join(format!("{stem}.{}", std::env::consts::DLL_EXTENSION));
        std::fs::write(&source_path, source).map_err(|e| {
            RuntimeError::io(
                format!("writing kernel source `{}`", source_path.display()),
                e,
            )
        })?;
        let mut args = self.flags.clone();
        args.extend([
            "-o".to_string(),
            object_path.to_string_lossy().into_owned(),
            source_path.to_string_lossy().into_owned(),
            "-lm".to_string(),
        ]);
        let output = self.run(&args)?;
        if !output.status.success() || !object_path.is_file() {
            let mut log = combined_output(&output);
            if output.status.success() {
                log.push_str("(the compiler reported success but wrote no shared object)");
            }
            return Err(RuntimeError::CompileFailed {
                compiler: self.command.clone(),
                source: source.to_string(),
                output: log,
            });
        }
        Ok(object_path)
    }

    /// Runs the compiler with `args` after the command's own arguments.
    fn run(&self, args: &[String]) -> Result<Output> {
        let mut words = self.command.split_whitespace();
        let program = words.next().unwrap_or("cc");
        Command::new(program)
            .args(words)
            .args(args)
            .output()
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => RuntimeError::CompilerNotFound {
                    compiler: self.command.clone(),
                },
                _ => RuntimeError::io(format!("running C compiler `{}`", self.command), e),
            })
    }
}

/// What `-march=native` resolves to on this machine, so that a cache directory shared
/// between machines (say, a home directory on NFS) never hands one CPU an object built for
/// another: the architecture plus, on Linux, the CPU model and feature list.
fn host_cpu_identity() -> &'static str {
    static IDENTITY: OnceLock<String> = OnceLock::new();
    IDENTITY.get_or_init(|| {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let mut identity = std::env::consts::ARCH.to_string();
        for prefix in ["model name", "flags", "Features", "CPU part"] {
            if let Some(line) = cpuinfo.lines().find(|l| l.starts_with(prefix)) {
                identity.push('\n');
                identity.push_str(line);
            }
        }
        identity
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The compiler's stderr followed by its stdout, as text.
fn combined_output(output: &Output) -> String {
    let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    text
}

/// `name` reduced to characters that are safe in a file name.
fn file_stem(name: &str) -> String {
    let stem: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() {
        "kernel".to_string()
    } else {
        stem
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_flags_never_relax_floating_point() {
        let flags = default_flags();
        assert!(flags.iter().any(|f| f == "-ffp-contract=off"));
        assert!(!flags.iter().any(|f| f.contains("fast-math")));
    }

    #[test]
    fn cache_key_depends_on_source_and_flags() {
        let a = CCompiler::new("cc", vec!["-O2".into()]);
        let b = CCompiler::new("cc", vec!["-O1".into()]);
        let key = |c: &CCompiler, s: &str| c.cache_key(s).unwrap();
        assert_eq!(key(&a, "int x;"), key(&a, "int x;"));
        assert_ne!(key(&a, "int x;"), key(&a, "int y;"));
        assert_ne!(key(&a, "int x;"), key(&b, "int x;"));
    }

    #[test]
    fn file_stem_keeps_only_safe_characters() {
        assert_eq!(file_stem("E_4_4_entry"), "E_4_4_entry");
        assert_eq!(file_stem("../x y"), "___x_y");
        assert_eq!(file_stem(""), "kernel");
    }
}
