//! The width of the vectors CPU kernels are compiled for (`-mprefer-vector-width=`, and the
//! lanes of the kernels' own `UPCAST`), decided from the machine, never from its vendor:
//!
//! - `TENSOR_VECTOR_WIDTH=128|256|512` if set;
//! - 256 bits on a CPU without AVX-512;
//! - with AVX-512, a calibration: the same vectorizable work (a chain of multiply-adds over a
//!   buffer in the first-level cache, the shape of our elementwise and matmul inner loops) is
//!   compiled for 256- and for 512-bit vectors and timed on every core at once, so that a CPU
//!   that lowers its clock for wide vectors, or runs them as two halves, shows it. 512 bits are
//!   chosen unless they run more than 3% slower (a tie favors the half as many instructions).
//!   The decision is kept in the cache directory per CPU and compiler
//!   (`<cache>/machine/vector-width-<hash>`), so a machine calibrates once (about 0.3 s: two compiles and 0.1 s of runs).

use super::compiler::{compiler_from_env, flags_for_vector_width, host_cpu_identity};
use crate::cache::default_cache_dir;
use crate::error::{Result, RuntimeError};
use crate::private_files::create_private_dir_all;
use crate::stable_hash::stable_hash;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The widest vectors, in bits, the kernels are compiled for on this machine.
pub fn preferred_vector_width() -> u32 {
    static WIDTH: OnceLock<u32> = OnceLock::new();
    *WIDTH.get_or_init(|| {
        if let Ok(Some(bits)) = vector_width_from_env() {
            return bits;
        }
        if !has_avx512(host_cpu_identity()) {
            return 256;
        }
        measured_width()
    })
}

/// `$TENSOR_VECTOR_WIDTH` in bits (`None` when unset or empty); a malformed value is an error
/// naming the variable (reported at every realize, as other malformed settings are).
pub fn vector_width_from_env() -> Result<Option<u32>> {
    width_setting(crate::settings::var("TENSOR_VECTOR_WIDTH"))
}

fn width_setting(value: Option<String>) -> Result<Option<u32>> {
    let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    match value.trim() {
        "128" => Ok(Some(128)),
        "256" => Ok(Some(256)),
        "512" => Ok(Some(512)),
        _ => Err(RuntimeError::InvalidSetting {
            variable: "TENSOR_VECTOR_WIDTH",
            value,
            expected: "128, 256 or 512 (bits), or unset to measure",
        }),
    }
}

/// Whether the CPU described by `identity` (as `host_cpu_identity` describes it) has AVX-512.
fn has_avx512(identity: &str) -> bool {
    identity
        .lines()
        .any(|l| l.starts_with("flags") && l.split_whitespace().any(|flag| flag == "avx512f"))
}

/// 512 unless the 512-bit build took more than 3% longer than the 256-bit one.
fn decide(time_256: Duration, time_512: Duration) -> u32 {
    if time_512.as_secs_f64() <= time_256.as_secs_f64() * 1.03 {
        512
    } else {
        256
    }
}

/// The kept decision for this CPU and compiler, else a calibration (kept for next time);
/// 256 when the calibration cannot run (no compiler: kernels cannot be built either, and that
/// error is reported where they are).
fn measured_width() -> u32 {
    let kept = decision_file();
    if let Some(bits) = kept.as_deref().and_then(read_decision) {
        return bits;
    }
    match calibrate() {
        Ok((time_256, time_512)) => {
            let bits = decide(time_256, time_512);
            if crate::settings::debug_level() >= 1 {
                eprintln!(
                    "vector width: {bits} bits (calibration: 256-bit {:.2} ms, 512-bit {:.2} ms)",
                    time_256.as_secs_f64() * 1e3,
                    time_512.as_secs_f64() * 1e3
                );
            }
            if let Some(path) = kept {
                keep_decision(&path, bits);
            }
            bits
        }
        Err(_) => 256,
    }
}

/// Where this CPU and compiler's decision is kept, if there is a cache directory.
fn decision_file() -> Option<PathBuf> {
    let key = format!("{}\n{}", host_cpu_identity(), compiler_from_env());
    let hash = stable_hash(key.as_bytes());
    default_cache_dir().map(|dir| {
        dir.join("machine")
            .join(format!("vector-width-{:016x}", hash as u64))
    })
}

fn read_decision(path: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    match text.trim() {
        "256" => Some(256),
        "512" => Some(512),
        _ => None,
    }
}

/// Writes the decision whole or not at all (a partial file is renamed into place).
fn keep_decision(path: &Path, bits: u32) {
    let Some(dir) = path.parent() else { return };
    if create_private_dir_all(dir).is_err() {
        return;
    }
    let partial = path.with_extension(format!("partial.{}", std::process::id()));
    if std::fs::write(&partial, format!("{bits}\n")).is_ok() {
        let _ = std::fs::rename(&partial, path);
    }
}

/// The calibration's work: `reps` passes of a multiply-add chain over 2048 floats.
const CALIBRATION_C: &str = r#"
#define N 2048
/* N is known to the compiler, as the kernels' loop bounds are, so gcc -O2 vectorizes it. */
void calibrate(float *restrict x, float *restrict y, long reps) {
  for (long r = 0; r < reps; r++)
    for (long i = 0; i < N; i++) {
      float v = x[i] * 0.5f + 0.25f;
      float p = ((((v * 0.0013f + 0.0096f) * v + 0.0555f) * v + 0.2402f) * v + 0.6931f) * v;
      y[i] = (p + 1.0f) * y[i] + 1e-7f;
    }
}
"#;

/// The best of three timed runs of the calibration built for 256- and for 512-bit vectors,
/// each on every core at once.
fn calibrate() -> std::result::Result<(Duration, Duration), String> {
    let dir = std::env::temp_dir().join(format!("tensor-vector-width-{}", std::process::id()));
    create_private_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = (|| {
        let source = dir.join("calibrate.c");
        std::fs::write(&source, CALIBRATION_C).map_err(|e| e.to_string())?;
        let time_256 = time_build(&build(&source, 256)?)?;
        let time_512 = time_build(&build(&source, 512)?)?;
        Ok((time_256, time_512))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The calibration source compiled as the kernels are, for `bits`-wide vectors.
fn build(source: &Path, bits: u32) -> std::result::Result<PathBuf, String> {
    let object = source.with_file_name(format!("calibrate{bits}.so"));
    let output = Command::new(compiler_from_env())
        .args(flags_for_vector_width(bits))
        .arg(source)
        .arg("-o")
        .arg(&object)
        .output()
        .map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(object)
}

type Calibrate = unsafe extern "C" fn(*mut f32, *mut f32, i64);

/// The best of three runs of the built calibration on every core.
fn time_build(object: &Path) -> std::result::Result<Duration, String> {
    // SAFETY: loads a shared object this module just compiled from `CALIBRATION_C`; its only
    // initialization is the C runtime's.
    let library = unsafe { libloading::Library::new(object) }.map_err(|e| e.to_string())?;
    // SAFETY: `calibrate` is defined in `CALIBRATION_C` with exactly the `Calibrate` signature.
    let run: libloading::Symbol<Calibrate> =
        unsafe { library.get(b"calibrate\0") }.map_err(|e| e.to_string())?;
    let run = *run;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    const N: usize = 2048;
    const REPS: i64 = 5000;
    let once = || {
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..cores {
                scope.spawn(|| {
                    let mut x: Vec<f32> = (0..N).map(|i| (i % 97) as f32 / 97.0).collect();
                    let mut y = vec![1.0f32; N];
                    // SAFETY: both buffers hold the 2048 floats the calibration reads and
                    // writes; each thread owns its own.
                    unsafe { run(x.as_mut_ptr(), y.as_mut_ptr(), REPS) };
                    std::hint::black_box(&y);
                });
            }
        });
        started.elapsed()
    };
    once(); // warms the clocks and the caches
    Ok((0..3).map(|_| once()).min().expect("three runs"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_vectors_unless_measured_slower() {
        let ms = Duration::from_millis;
        assert_eq!(decide(ms(100), ms(60)), 512);
        assert_eq!(
            decide(ms(100), ms(102)),
            512,
            "a tie favors fewer instructions"
        );
        assert_eq!(decide(ms(100), ms(110)), 256);
    }

    #[test]
    fn only_a_cpu_with_avx512_is_calibrated() {
        let cpu = |vendor: &str, flags: &str| {
            format!("x86_64\nvendor_id\t: {vendor}\nmodel name\t: some cpu\nflags\t\t: {flags}")
        };
        assert!(has_avx512(&cpu(
            "GenuineIntel",
            "fpu sse2 avx2 fma avx512f"
        )));
        assert!(has_avx512(&cpu(
            "AuthenticAMD",
            "fpu avx2 avx512f avx512bw"
        )));
        assert!(!has_avx512(&cpu("AuthenticAMD", "fpu sse2 avx2 fma")));
        assert!(!has_avx512(&cpu("AuthenticAMD", "avx512fx avx2")));
        assert!(!has_avx512("aarch64"));
    }

    #[test]
    fn the_setting_takes_a_width_in_bits_or_names_the_variable() {
        assert_eq!(width_setting(None).unwrap(), None);
        assert_eq!(width_setting(Some(" ".into())).unwrap(), None);
        assert_eq!(width_setting(Some("512\n".into())).unwrap(), Some(512));
        assert_eq!(width_setting(Some("128".into())).unwrap(), Some(128));
        let err = width_setting(Some("wide".into())).unwrap_err().to_string();
        assert!(err.contains("TENSOR_VECTOR_WIDTH"), "{err}");
    }

    #[test]
    fn a_kept_decision_is_read_back_and_anything_else_is_ignored() {
        let dir = std::env::temp_dir().join(format!("tensor-vw-test-{}", std::process::id()));
        let path = dir.join("machine").join("vector-width-test");
        keep_decision(&path, 512);
        assert_eq!(read_decision(&path), Some(512));
        std::fs::write(&path, "lots").unwrap();
        assert_eq!(read_decision(&path), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
