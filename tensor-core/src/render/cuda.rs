//! The CUDA renderer: a kernel lowered for a GPU (`codegen::program::GpuKernel`) as CUDA C++
//! that NVRTC compiles without any header.
//!
//! The statements are the C renderer's (`render::c`), so every value means what `uop::alu`
//! says on both backends; this renderer adds what differs on a GPU:
//! - the function is `extern "C" __global__`, its buffers `__restrict__` pointers by slot,
//!   with `__launch_bounds__` of the block size the runtime launches it with;
//! - the grid indices (`SPECIAL`): `gid = blockIdx.x * blockDim.x + threadIdx.x`, threads past
//!   the last output return, and each mapped range is a digit of `gid`;
//! - a grouped kernel (`codegen::group`) is one block per output: `gid = blockIdx.x`, its
//!   lane `threadIdx.x`, its shared arrays `__shared__` and its barriers `__syncthreads()`;
//!   a tiled kernel (`codegen::stage`) keeps `gid` and names its lane too;
//! - helpers are `__device__` functions; `NAN`/`INFINITY` are bit patterns (there is no
//!   `math.h`); the math functions are CUDA's device functions of the same names (`f32`
//!   transcendentals were already decomposed by `codegen::transcendental`, as for the CPU);
//! - `f16` is stored as a 2-byte struct converted by PTX's `cvt` (NVRTC has no
//!   `cuda_fp16.h` without the toolkit's headers), computed in `float` and rounded after every
//!   op, as in C.

use super::c::{helper_guard, statements};
use super::{Kernel, Launch};
use crate::codegen::program::{GpuKernel, KernelArg};
use crate::uop::DType;
use std::fmt::Write;

/// Definitions every kernel's source starts with: what `math.h` and C11 give the C renderer.
const PRELUDE: &str = "#define restrict __restrict__
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fc00000)
#endif
";

/// `f16` storage: IEEE half bits, rounded to nearest even from `float` or `double` and widened
/// exactly to `float`, by PTX conversions. A NaN keeps its sign and the top of its payload,
/// quieted, as on the CPU (PTX's `cvt` would give the canonical NaN instead).
const HALF: &str = "struct tensor_half {
  unsigned short bits;
  __device__ tensor_half() {}
  __device__ tensor_half(float f) {
    if (f != f) { unsigned u = __float_as_uint(f); bits = (unsigned short)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu)); }
    else asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(bits) : \"f\"(f));
  }
  __device__ tensor_half(double d) {
    if (d != d) { unsigned long long u = __double_as_longlong(d); bits = (unsigned short)(((u >> 48) & 0x8000u) | 0x7e00u | ((u >> 42) & 0x3ffu)); }
    else asm(\"cvt.rn.f16.f64 %0, %1;\" : \"=h\"(bits) : \"d\"(d));
  }
  __device__ operator float() const {
    if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu)) return __uint_as_float(((bits & 0x8000u) << 16) | 0x7fc00000u | ((bits & 0x3ffu) << 13));
    float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(bits)); return f;
  }
};
#define _Float16 tensor_half
";

/// A GPU kernel rendered as CUDA C: the entry is the kernel's name, launched on the grid its
/// lowering chose (the block size is also the source's `__launch_bounds__`).
pub fn render_kernel(kernel: &GpuKernel) -> Kernel {
    Kernel::rendered(
        kernel.name.clone(),
        render(kernel),
        kernel.name.clone(),
        Launch::Grid(kernel.launch_dims()),
        kernel.args.clone(),
    )
}

/// The CUDA source of `kernel`: the prelude, `__device__` helpers, and the `__global__`
/// function.
pub fn render(kernel: &GpuKernel) -> String {
    let stmts = statements(&kernel.body, &kernel.args);
    let index_type = if kernel.threads > i32::MAX as usize {
        "long long"
    } else {
        stmts.index_type
    };
    let mut out = String::new();
    let helpers_text: String = stmts.helpers.values().map(String::as_str).collect();
    if uses_half(&kernel.args)
        || stmts.body.contains("_Float16")
        || helpers_text.contains("_Float16")
    {
        out.push_str(HALF);
    }
    out.push_str(PRELUDE);
    for (helper, code) in &stmts.helpers {
        let guard = helper_guard(helper);
        let code = code.replace("static inline", "static __device__ inline");
        let _ = writeln!(
            out,
            "#ifndef {guard}\n#define {guard}\n{}\n#endif",
            code.trim_end()
        );
    }
    let block = kernel.launch_dims().block;
    let _ = writeln!(
        out,
        "\nextern \"C\" __global__ void __launch_bounds__({block}) {}({}) {{",
        kernel.name,
        parameters(&kernel.args).join(", ")
    );
    out.push_str(&grid_indices(kernel, index_type));
    out.push_str(&stmts.body);
    out.push_str("}\n");
    out
}

fn uses_half(args: &[KernelArg]) -> bool {
    args.iter().any(|a| a.dtype == DType::F16)
}

fn parameters(args: &[KernelArg]) -> Vec<String> {
    args.iter()
        .enumerate()
        .map(|(slot, a)| {
            let ty = super::c_helpers::storage_type(a.dtype);
            let constness = if a.writes { "" } else { "const " };
            format!("{constness}{ty}* __restrict__ data{slot}")
        })
        .collect()
}

/// The declarations of the grid indices: the output's number (the flat thread number, or the
/// block's for a grouped kernel, whose thread in the block is its lane), the bounds check, and
/// each mapped range as a digit of it.
fn grid_indices(kernel: &GpuKernel, index_type: &str) -> String {
    let (specials, threads) = (&kernel.specials, kernel.threads);
    let mut out = match &kernel.group {
        Some(group) => format!(
            "  const {index_type} gid = ({index_type})blockIdx.x;\n  const {index_type} {} = ({index_type})threadIdx.x;\n",
            super::c::range_name(&group.lane)
        ),
        None => format!(
            "  const {index_type} gid = ({index_type})blockIdx.x * ({index_type})blockDim.x + ({index_type})threadIdx.x;\n"
        ),
    };
    if let Some(tile) = &kernel.local {
        let _ = writeln!(
            out,
            "  const {index_type} {} = ({index_type})threadIdx.x;",
            super::c::range_name(&tile.lane)
        );
    }
    // A grouped kernel's blocks return whole, before any barrier; a tiled kernel's threads
    // fill whole blocks.
    let _ = writeln!(out, "  if (gid >= {threads}) return;");
    for (k, s) in specials.iter().enumerate() {
        let name = super::c::range_name(&s.range);
        let quotient = if s.stride == 1 {
            "gid".to_string()
        } else {
            format!("gid / {}", s.stride)
        };
        let value = if k == 0 {
            quotient
        } else {
            format!("({quotient}) % {}", s.size)
        };
        let _ = writeln!(out, "  const {index_type} {name} = {value};");
    }
    if specials.is_empty() {
        out.push_str("  (void)gid;\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::program::LaunchDims;
    use crate::codegen::{CodegenOptions, lower_kernel_gpu};
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;

    fn sources(out: &Tensor) -> Vec<String> {
        let schedule = create_schedule(&[out.uop()]);
        schedule
            .items
            .iter()
            .map(|item| {
                let sizes = item.buffer_sizes();
                let k = lower_kernel_gpu(&item.ast, &sizes, &CodegenOptions::default(), "k");
                render(&k)
            })
            .collect()
    }

    #[test]
    fn an_elementwise_kernel_is_a_global_function_over_the_grid() {
        let a = Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[4, 6]);
        let src = &sources(&(&a * 2.0 + 1.0))[0];
        assert!(
            src.contains("extern \"C\" __global__ void __launch_bounds__("),
            "{src}"
        );
        assert!(
            src.contains("blockIdx.x") && src.contains("threadIdx.x"),
            "{src}"
        );
        assert!(src.contains("if (gid >= "), "{src}");
        assert!(
            !src.contains("for ("),
            "no loop left in an elementwise kernel:\n{src}"
        );
        assert!(src.contains("float* __restrict__ data0"), "{src}");
        assert!(src.contains("const float* __restrict__ data1"), "{src}");
    }

    #[test]
    fn a_reduction_loops_inside_each_thread() {
        let a = Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[6, 4]);
        let src = &sources(&a.max([1], false))[0];
        assert!(src.contains("if (gid >= 6) return;"), "{src}");
        assert!(src.contains("for (int ridx"), "{src}");
        assert!(
            src.contains("static __device__ inline float max_f32"),
            "{src}"
        );
    }

    #[test]
    fn the_launch_is_the_grid_the_lowering_chose_and_bounds_the_block() {
        let rows = Tensor::from_vec((0..30000).map(|v| (v % 7) as f32).collect(), &[6, 5000]);
        let schedule = create_schedule(&[rows.sum([1], false).uop()]);
        let item = &schedule.items[0];
        let k = lower_kernel_gpu(
            &item.ast,
            &item.buffer_sizes(),
            &CodegenOptions::default(),
            "k",
        );
        let rendered = render_kernel(&k);
        // Rows of 5000 = 40 x 125: one block of 125 threads per row.
        let grid = LaunchDims {
            grid: 6,
            block: 125,
        };
        assert_eq!(rendered.launch, Launch::Grid(grid));
        assert!(
            rendered.source.contains("__launch_bounds__(125)"),
            "{}",
            rendered.source
        );
    }
}
