//! Helpers shared by the runtime's integration tests: scratch directories, devices with an
//! explicit configuration, and small hand-written kernels that follow the kernel ABI.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use tensor_runtime::cpu::default_flags;
use tensor_runtime::{CpuConfig, CpuDevice};

/// A fresh directory removed when dropped.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "tensor-runtime-test-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create test dir");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A device compiling with `compiler`, caching in `cache_dir`, running on `threads` cores.
pub fn device(compiler: &str, cache_dir: Option<&Path>, threads: usize) -> CpuDevice {
    CpuDevice::with_config(CpuConfig {
        compiler: compiler.to_string(),
        flags: default_flags(),
        cache_dir: cache_dir.map(Path::to_path_buf),
        threads,
        ..CpuConfig::default()
    })
}

/// `out[i] = a[i] + b[i]` over `n` floats; entry `add_entry`, buffers (out, a, b).
pub fn add_kernel(n: usize) -> String {
    format!(
        r#"#include <stddef.h>
void add(float* restrict out, const float* restrict a, const float* restrict b) {{
  for (int i = 0; i < {n}; i++) {{
    out[i] = a[i] + b[i];
  }}
}}
void add_entry(void** bufs, int core_id) {{
  (void)core_id;
  add((float*)bufs[0], (const float*)bufs[1], (const float*)bufs[2]);
}}
"#
    )
}

/// A `rows x cols` kernel whose outer loop is split across `threads` cores by `core_id`:
/// `out[r][c] = x[r][c] * 2 + r` and `owner[r] = core_id + 1`; buffers (out, owner, x).
pub fn split_kernel(rows: usize, cols: usize, threads: usize) -> String {
    format!(
        r#"#include <stdint.h>
void scale_rows(float* restrict out, int32_t* restrict owner, const float* restrict x,
                int core_id) {{
  int begin = core_id * {rows} / {threads};
  int end = (core_id + 1) * {rows} / {threads};
  for (int r = begin; r < end; r++) {{
    owner[r] = core_id + 1;
    for (int c = 0; c < {cols}; c++) {{
      out[r * {cols} + c] = x[r * {cols} + c] * 2.0f + (float)r;
    }}
  }}
}}
void scale_rows_entry(void** bufs, int core_id) {{
  scale_rows((float*)bufs[0], (int32_t*)bufs[1], (const float*)bufs[2], core_id);
}}
"#
    )
}

/// `a + b` element by element, as the kernels compute it.
pub fn host_sum(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// Deterministic, varied test data.
pub fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 - 3.5) * scale).collect()
}

/// Writes an executable shell script `dir/name` posing as a C compiler: it answers
/// `--version` like one, and runs `body` for every other call (the arguments in `$@`).
pub fn fake_compiler(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join(name);
    let text = format!(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{name} 1.0'; exit 0; fi\n{body}\n"
    );
    std::fs::write(&script, text).expect("write fake compiler");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .expect("make fake compiler executable");
    script
}

/// Shell code that sets `$out` to the argument after `-o` (the object path).
pub const FIND_OUTPUT_PATH: &str =
    "while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then out=\"$2\"; fi; shift; done";

/// Compiling the hand-written kernels of these tests: `Device::compile` is `unsafe` because a
/// source could run code when its program is loaded; these kernels are plain functions.
pub trait CompileTestKernel: tensor_runtime::Device + Sized {
    /// [`tensor_runtime::Device::compile`] of a kernel written in this test suite.
    fn compile_test_kernel(
        &self,
        source: &str,
        entry: &str,
    ) -> tensor_runtime::Result<Self::Program> {
        // SAFETY: the tests' kernels (and their deliberately broken variants) define no
        // constructor or other load-time code.
        unsafe { self.compile(source, entry) }
    }

    /// [`tensor_runtime::Device::compile_many`] of kernels written in this test suite.
    fn compile_many_test_kernels(
        &self,
        kernels: &[(&str, &str)],
    ) -> tensor_runtime::Result<Vec<Self::Program>> {
        // SAFETY: as in `compile_test_kernel`.
        unsafe { self.compile_many(kernels) }
    }
}

impl<D: tensor_runtime::Device> CompileTestKernel for D {}
