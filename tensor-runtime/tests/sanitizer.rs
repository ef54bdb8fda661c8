//! The control case of CI's AddressSanitizer run (`.ci/run`): a kernel that writes one cache
//! line past its output buffer. CI compiles kernels with `CC="cc -fsanitize=address"`, preloads the
//! sanitizer runtime (so every buffer the runtime allocates has guarded edges) and runs the
//! compiled-kernel tests, which must report nothing; this test, run the same way, must be
//! stopped with a `heap-buffer-overflow` report, which shows the sanitizer sees into kernels.
//! Without the sanitizer the write would corrupt the heap silently, so it is ignored by default.
//!
//! Why a whole line: a buffer starts at the first 64-byte boundary of an allocation up to
//! 48 bytes longer than the buffer (`cpu::memory`), so the first 48 bytes past its end may
//! still lie inside the allocation, where a write is harmless and the sanitizer rightly silent.
//! Sixteen floats reach past any such slack into the sanitizer's redzone.

mod common;

use common::CompileTestKernel;
use tensor_core::render::Launch;

use common::device;
use tensor_runtime::Device;
use tensor_runtime::cpu::compiler_from_env;

/// The floats in one 64-byte cache line.
const LINE: usize = 16;

/// `out[i] = i` for `i` in `0..n + LINE`: one cache line too many.
fn overflowing_kernel(n: usize) -> String {
    let end = n + LINE;
    format!(
        r#"void past_end(float* restrict out) {{
  for (int i = 0; i < {end}; i++) {{
    out[i] = (float)i;
  }}
}}
void past_end_entry(void** bufs, int core_id) {{
  (void)core_id;
  past_end((float*)bufs[0]);
}}
"#
    )
}

#[test]
#[ignore = "writes past a buffer: run only under AddressSanitizer (see .ci/run)"]
fn a_kernel_writing_past_its_buffer_is_caught_by_the_sanitizer() {
    let device = device(&compiler_from_env(), None, 1);
    let n = 64;
    let program = device
        .compile_test_kernel(&overflowing_kernel(n), "past_end_entry")
        .unwrap();
    let out = device.allocate(n * 4).unwrap();
    // SAFETY: none: the kernel writes past `out` on purpose, for AddressSanitizer to stop.
    unsafe { device.launch_unchecked(&program, &[&out], Launch::Cores(1)) }.unwrap();
    panic!("the write past the buffer was not reported: is AddressSanitizer preloaded?");
}
