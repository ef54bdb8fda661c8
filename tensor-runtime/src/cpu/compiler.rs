//! The system C compiler: which one, with which flags, its version, and running it.
//!
//! Flags (see [`default_flags`]), chosen by measurement (README, "CPU kernel speed"):
//! `-O2 -march=native` for speed on the machine at hand (`-O3` measured no faster on the
//! generated kernels and compiles slower); `-mprefer-vector-width=` the width measured for the
//! machine ([`preferred_vector_width`], `vector_width`): gcc's `-march=native` on some AMD
//! parts (znver1 tuning) otherwise vectorizes with 128-bit registers only, and on Zen 4 it
//! keeps to 256 bits, where 512 made the `f32` `exp2` chain 1.2–1.6× and a 2048² matmul 1.3×
//! faster; `-ffp-contract=fast` lets `a*b+c` become one FMA (one rounding instead of
//! two: compiled floats may differ from the interpreter in the last bits, within the
//! tolerance the tests state in `tests/common/tolerance.rs`); no `-ffast-math`, so NaN,
//! infinities, signed zeros and IEEE division survive; `-fno-math-errno` lets `sqrtf`
//! compile to one instruction without changing any result (only `errno` is lost);
//! `-fno-trapping-math` lets gcc if-convert float selects (`x < lo ? lo : x`, the NaN test of
//! a transcendental) and so vectorize loops that contain them, again without changing any
//! value (only the floating-point exception flags, which nothing reads, are lost; the f32
//! `exp2` chain of 16M elements: 54 ms scalar, 18 ms vectorized);
//! `-std=c11` because kernels are C11; `-fPIC -shared` to build a loadable object. `-lm` is
//! appended after the source. Because `-march=native` means different code on different
//! CPUs, the cache key then also covers the host CPU's model and feature list.
//!
//! Every run of the compiler has a time limit ([`CCompiler::with_timeout`], from
//! `TENSOR_COMPILE_TIMEOUT`): a compiler that does not finish in time is killed with every
//! process it started (its process group) and reported as [`RuntimeError::CompileTimedOut`].
//! A compiler killed by a signal, or reporting an internal error, is reported as
//! [`RuntimeError::CompilerCrashed`], not as a rejected kernel; one that exits successfully
//! without writing the object, as [`RuntimeError::BadCompilerOutput`].

use super::compiler_identity;
use super::compiler_process::run_with_limit;
use super::vector_width::preferred_vector_width;
use crate::error::{Result, RuntimeError};
use crate::stable_hash::StableHasher;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How long one compiler run may take unless configured otherwise.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(120);

/// The flags kernels are compiled with unless configured otherwise.
pub fn default_flags() -> Vec<String> {
    flags_for_vector_width(preferred_vector_width())
}

/// The kernels' flags with vectors of `bits` bits preferred: what [`default_flags`] gives
/// for the machine's width, and what its calibration builds each candidate width with.
pub(super) fn flags_for_vector_width(bits: u32) -> Vec<String> {
    let vector_width = format!("-mprefer-vector-width={bits}");
    [
        "-O2",
        "-march=native",
        &vector_width,
        "-std=c11",
        "-fPIC",
        "-shared",
        "-ffp-contract=fast",
        "-fno-math-errno",
        "-fno-trapping-math",
    ]
    .map(String::from)
    .to_vec()
}

/// The `f32` lanes of the vectors a compiler run with `flags` prefers: the
/// `-mprefer-vector-width=` among them in bits over 32, else 8 (256-bit vectors).
pub fn vector_lanes_of(flags: &[String]) -> usize {
    flags
        .iter()
        .rev()
        .find_map(|f| f.strip_prefix("-mprefer-vector-width="))
        .and_then(|bits| bits.parse::<usize>().ok())
        .map_or(8, |bits| (bits / 32).max(1))
}

/// The compiler the environment asks for: `$CC` if set and non-empty, else `cc`.
pub fn compiler_from_env() -> String {
    crate::settings::var("CC")
        .filter(|cc| !cc.trim().is_empty())
        .unwrap_or_else(|| "cc".to_string())
}

/// The compile time limit the environment asks for: `$TENSOR_COMPILE_TIMEOUT` seconds, else
/// [`DEFAULT_COMPILE_TIMEOUT`].
pub fn compile_timeout_from_env() -> Result<Duration> {
    compile_timeout_setting(crate::settings::var("TENSOR_COMPILE_TIMEOUT"))
}

/// The time limit a `TENSOR_COMPILE_TIMEOUT` value asks for (`None`: the default).
fn compile_timeout_setting(value: Option<String>) -> Result<Duration> {
    let Some(value) = value else {
        return Ok(DEFAULT_COMPILE_TIMEOUT);
    };
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|&seconds| seconds > 0.0)
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .ok_or(RuntimeError::InvalidSetting {
            variable: "TENSOR_COMPILE_TIMEOUT",
            value,
            expected: "a positive number of seconds",
        })
}

/// A C compiler command (a program, possibly followed by arguments, like `CC="ccache gcc"`),
/// the flags it builds kernels with, and how long one run may take.
#[derive(Clone, Debug)]
pub struct CCompiler {
    command: String,
    flags: Vec<String>,
    timeout: Duration,
}

impl CCompiler {
    /// A compiler run as `command` (split at whitespace) with `flags`, and the default time
    /// limit.
    pub fn new(command: impl Into<String>, flags: Vec<String>) -> CCompiler {
        CCompiler {
            command: command.into(),
            flags,
            timeout: DEFAULT_COMPILE_TIMEOUT,
        }
    }

    /// The same compiler with a different time limit per run.
    pub fn with_timeout(self, timeout: Duration) -> CCompiler {
        CCompiler { timeout, ..self }
    }

    /// How long one run may take before it is killed.
    pub fn timeout(&self) -> Duration {
        self.timeout
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
        let output = self.run(&["--version".to_string()], None)?;
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

    /// What identifies this compiler command for the kernel cache (see
    /// `compiler_identity`): every word of the command, the program it resolves to, its
    /// version and the compiler's environment; worked out once per process and command.
    pub fn identity(&self) -> Result<String> {
        static IDENTITIES: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
        let identities = IDENTITIES.get_or_init(Default::default);
        if let Some(identity) = lock(identities).get(&self.command) {
            return Ok(identity.clone());
        }
        let identity = compiler_identity::describe(&self.command, &self.version()?);
        lock(identities).insert(self.command.clone(), identity.clone());
        Ok(identity)
    }

    /// The cache key of `source` built by this compiler: a stable hash of the source, the
    /// flags and the compiler's [identity](CCompiler::identity), i.e. of everything that
    /// decides the object code.
    pub fn cache_key(&self, source: &str) -> Result<u128> {
        let mut hasher = StableHasher::new();
        hasher.write_field(source.as_bytes());
        hasher.write_field(&(self.flags.len() as u64).to_le_bytes());
        for flag in &self.flags {
            hasher.write_field(flag.as_bytes());
        }
        hasher.write_field(self.identity()?.as_bytes());
        if self.flags.iter().any(|f| f.contains("=native")) {
            hasher.write_field(host_cpu_identity().as_bytes());
        }
        Ok(hasher.finish())
    }

    /// Compiles `source` into a shared object in `dir` and returns its path. The files are
    /// named after `name`, so compiler messages point at `<name>.c`; `dir` is also the
    /// compiler's `TMPDIR`, so it needs no other writable directory.
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
        let output = self.run(&args, Some(dir))?;
        if let Some(status) = crash_status(&output) {
            return Err(RuntimeError::CompilerCrashed {
                compiler: self.command.clone(),
                status,
                output: combined_output(&output),
            });
        }
        if !output.status.success() {
            return Err(RuntimeError::CompileFailed {
                compiler: self.command.clone(),
                source: source.to_string(),
                output: combined_output(&output),
            });
        }
        if !object_path.is_file() {
            let printed = combined_output(&output);
            return Err(RuntimeError::BadCompilerOutput {
                compiler: self.command.clone(),
                reason: match printed.trim() {
                    "" => "it wrote no file at all and printed nothing".to_string(),
                    text => format!("it wrote no file at all; it printed: {text}"),
                },
            });
        }
        Ok(object_path)
    }

    /// Runs the compiler with `args` after the command's own arguments (and `TMPDIR=tmp`
    /// if given), killing its whole process group if it is still running when the time
    /// limit passes (see `compiler_process`).
    fn run(&self, args: &[String], tmp: Option<&Path>) -> Result<Output> {
        let mut words = self.command.split_whitespace();
        let program = words.next().unwrap_or("cc");
        let mut command = Command::new(program);
        command.args(words).args(args);
        if let Some(tmp) = tmp {
            command.env("TMPDIR", tmp);
        }
        let failed = |e: io::Error| match e.kind() {
            io::ErrorKind::NotFound => RuntimeError::CompilerNotFound {
                compiler: self.command.clone(),
            },
            _ => RuntimeError::io(format!("running C compiler `{}`", self.command), e),
        };
        run_with_limit(&mut command, self.timeout)
            .map_err(failed)?
            .ok_or_else(|| RuntimeError::CompileTimedOut {
                compiler: self.command.clone(),
                limit: self.timeout,
            })
    }
}

/// How the compiler crashed, if it did: killed by a signal, or an internal compiler error
/// (how gcc reports the crash of one of its passes).
fn crash_status(output: &Output) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if output.status.signal().is_some() {
            return Some(output.status.to_string());
        }
    }
    let internal = combined_output(output).contains("internal compiler error");
    (internal && !output.status.success())
        .then(|| format!("internal compiler error, {}", output.status))
}

/// What `-march=native` resolves to on this machine, so that a cache directory shared
/// between machines (say, a home directory on NFS) never hands one CPU an object built for
/// another: the architecture plus, on Linux, the CPU model and feature list.
pub(crate) fn host_cpu_identity() -> &'static str {
    static IDENTITY: OnceLock<String> = OnceLock::new();
    IDENTITY.get_or_init(|| {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let mut identity = std::env::consts::ARCH.to_string();
        for prefix in ["vendor_id", "model name", "flags", "Features", "CPU part"] {
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
/// The longest file stem a kernel's files get (file names are at most 255 bytes).
const MAX_STEM: usize = 128;

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
        .take(MAX_STEM)
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
    fn default_flags_contract_multiply_add_but_keep_ieee_special_values() {
        let flags = default_flags();
        assert!(flags.iter().any(|f| f == "-ffp-contract=fast"));
        // Lets gcc if-convert (and so vectorize) float selects; changes no value.
        assert!(flags.iter().any(|f| f == "-fno-trapping-math"));
        for relaxing in ["fast-math", "finite-math", "unsafe-math", "-Ofast"] {
            assert!(!flags.iter().any(|f| f.contains(relaxing)), "{relaxing}");
        }
    }

    #[test]
    fn the_default_flags_ask_for_the_machines_vector_width() {
        let flag = format!("-mprefer-vector-width={}", preferred_vector_width());
        assert!(default_flags().contains(&flag));
    }

    #[test]
    fn vector_lanes_follow_the_last_width_flag() {
        let flags = |list: &[&str]| list.iter().map(|f| f.to_string()).collect::<Vec<_>>();
        assert_eq!(vector_lanes_of(&flags(&["-O2"])), 8);
        assert_eq!(vector_lanes_of(&flags(&["-mprefer-vector-width=512"])), 16);
        let both = flags(&["-mprefer-vector-width=512", "-mprefer-vector-width=128"]);
        assert_eq!(vector_lanes_of(&both), 4);
        assert_eq!(vector_lanes_of(&flags(&["-mprefer-vector-width=none"])), 8);
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
    fn cache_key_depends_on_every_word_of_the_compiler_command() {
        let flags = vec!["-O2".to_string()];
        let key = |command: &str| CCompiler::new(command, flags.clone()).cache_key("int x;");
        let plain = key("cc").unwrap();
        assert_ne!(plain, key("cc -ffast-math").unwrap());
        assert_ne!(plain, key("cc -fsanitize=address").unwrap());
        assert_ne!(
            key("cc -ffast-math").unwrap(),
            key("cc -fsanitize=address").unwrap()
        );
        assert_eq!(plain, key("cc").unwrap());
    }

    #[test]
    fn compile_timeout_setting_reads_seconds_and_rejects_nonsense() {
        let setting = |v: &str| compile_timeout_setting(Some(v.into()));
        assert_eq!(setting("3").unwrap(), Duration::from_secs(3));
        assert_eq!(setting(" 0.5\n").unwrap(), Duration::from_millis(500));
        assert_eq!(
            compile_timeout_setting(None).unwrap(),
            DEFAULT_COMPILE_TIMEOUT
        );
        for bad in ["0", "-1", "soon", "", "inf", "NaN"] {
            let err = setting(bad).unwrap_err();
            assert!(
                matches!(err, RuntimeError::InvalidSetting { .. }),
                "{bad}: {err:?}"
            );
            assert!(err.to_string().contains("TENSOR_COMPILE_TIMEOUT"), "{err}");
        }
    }

    #[test]
    fn file_stem_keeps_only_safe_characters() {
        assert_eq!(file_stem("E_4_4_entry"), "E_4_4_entry");
        assert_eq!(file_stem("../x y"), "___x_y");
        assert_eq!(file_stem(""), "kernel");
        assert_eq!(file_stem(&"r_8".repeat(200)).len(), MAX_STEM);
    }
}
