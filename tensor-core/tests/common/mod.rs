//! Test helper shared by the codegen tests: compile a kernel's C and run it.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use tensor_core::Scalar;
use tensor_core::codegen::Kernel;
use tensor_core::uop::dtype::{decode_scalars, encode_scalars};

/// Compiles the kernel's C to a shared object in a fresh temp dir and runs its entry on every
/// core in turn; `buffers[slot]` holds the values of each buffer before and after.
pub fn run(kernel: &Kernel, buffers: &mut [Vec<Scalar>]) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "codegen_c_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("kernel.c");
    let lib = dir.join("kernel.so");
    std::fs::write(&src, &kernel.source).expect("write C");
    let out = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-Wall", "-Werror", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-lm")
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "cc failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        kernel.source
    );
    let mut bytes: Vec<Vec<u8>> = kernel
        .args
        .iter()
        .zip(buffers.iter())
        .map(|(a, values)| {
            assert_eq!(
                values.len(),
                a.size,
                "buffer size of a {} argument",
                a.dtype
            );
            encode_scalars(values, a.dtype)
        })
        .collect();
    let mut ptrs: Vec<*mut std::ffi::c_void> =
        bytes.iter_mut().map(|b| b.as_mut_ptr().cast()).collect();
    // SAFETY: the library was just compiled from the kernel's source; loading it runs no
    // initializers beyond the C runtime's.
    let library = unsafe { libloading::Library::new(&lib) }.expect("load kernel");
    type Entry = unsafe extern "C" fn(*mut *mut std::ffi::c_void, i32);
    // SAFETY: the renderer emits `void <entry>(void** bufs, int core_id)`, matching `Entry`.
    let entry = unsafe { library.get::<Entry>(kernel.entry.as_bytes()) }.expect("entry symbol");
    for core in 0..kernel.threads {
        // SAFETY: every pointer addresses a live buffer of the size and dtype the kernel's
        // argument list declares, and the kernel touches nothing else.
        unsafe { entry(ptrs.as_mut_ptr(), core as i32) };
    }
    drop(library);
    for ((values, b), a) in buffers.iter_mut().zip(&bytes).zip(&kernel.args) {
        *values = decode_scalars(b, a.dtype);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
