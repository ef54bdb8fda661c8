//! GPU lowering: the outer loops over output axes of a linearized kernel become the launch
//! grid, tinyspec's `SPECIAL` indices.
//!
//! A GPU thread computes what one iteration of the output loops computes: thread number
//! `g = blockIdx.x * blockDim.x + threadIdx.x` (one flat grid, so no per-dimension limit of
//! the launch applies) is split into the values of the mapped ranges, outermost first, as
//! digits of a mixed-radix number (`gidx_k = g / stride_k % size_k`). Threads past the last
//! output return at once. A reduction keeps its loop inside the thread, so every output of a
//! reduce kernel has its own thread.
//!
//! Only loops that enclose everything after them are mapped: a loop whose body is followed by
//! other statements (a second loop nest of the kernel) stays a loop inside the thread, and the
//! statements between two mapped loop headers must be computations (every thread computes
//! them; a store or an accumulation there would run once per thread instead of once).
//!
//! GROUP ranges (the GROUP and GROUPTOP OptOps) are the threads of a block that share one
//! output: the block's number is the output's, and each GROUP loop runs one value per thread,
//! the thread's position in the block (`codegen::group` then combines the threads' partial
//! accumulators).

use super::fresh::Fresh;
use super::program::{
    GpuKernel, Group, KernelArg, Line, LocalTile, MAX_BLOCK_THREADS, Program, Special,
};
use crate::uop::{AxisType, UOp};

/// Maps the outer output loops of `program` to grid indices.
pub fn map_to_grid(name: &str, program: &Program, args: &[KernelArg]) -> GpuKernel {
    let lines = &program.lines;
    let mapped = mappable_loops(lines);
    let mut body = Vec::with_capacity(lines.len());
    let mut ranges = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match line {
            Line::Loop(r) if mapped.contains(&i) => ranges.push(r.clone()),
            _ => body.push(line.clone()),
        }
    }
    body.truncate(body.len() - ranges.len());
    let sizes: Vec<usize> = ranges
        .iter()
        .map(|r| r.range_size().expect("rendered ranges have constant sizes"))
        .collect();
    let mut stride = 1;
    let mut specials: Vec<Special> = Vec::with_capacity(ranges.len());
    for (range, &size) in ranges.iter().zip(&sizes).rev() {
        specials.push(Special {
            range: range.clone(),
            stride,
            size,
        });
        stride *= size;
    }
    specials.reverse();
    let mut kernel = GpuKernel {
        name: name.to_string(),
        specials,
        threads: stride,
        group: None,
        local: None,
        body: Program {
            lines: body,
            threads: 1,
        },
        args: args.to_vec(),
    };
    kernel.local = local_tile(&kernel);
    map_group_loops(kernel)
}

/// `kernel` with each loop over a GROUP range run by the threads of a block, one value each
/// (a loop strided by the block's size over a range of that size), and its [`Group`] set;
/// unchanged without GROUP loops.
fn map_group_loops(kernel: GpuKernel) -> GpuKernel {
    let is_group = |r: &UOp| r.range_axis_type() == AxisType::Group;
    let sizes: Vec<usize> = kernel
        .body
        .lines
        .iter()
        .filter_map(|l| match l {
            Line::Loop(r) if is_group(r) => r.range_size(),
            _ => None,
        })
        .collect();
    let Some(&size) = sizes.first() else {
        return kernel;
    };
    assert!(
        sizes.iter().all(|&s| s == size),
        "codegen: a kernel's GROUP ranges share one block, but their sizes are {sizes:?}"
    );
    let lane = UOp::range(size, Fresh::after(&kernel).range(), AxisType::Group);
    let lines = kernel
        .body
        .lines
        .into_iter()
        .map(|line| match line {
            Line::Loop(r) if is_group(&r) => Line::StridedLoop {
                range: r,
                lane: lane.clone(),
                lanes: size,
            },
            other => other,
        })
        .collect();
    GpuKernel {
        group: Some(Group { lane, size }),
        body: Program {
            lines,
            threads: kernel.body.threads,
        },
        ..kernel
    }
}

/// The block of a kernel whose LOCAL ranges are its innermost grid indices and make up
/// exactly [`MAX_BLOCK_THREADS`] threads (the launch's block, so each block's threads are
/// the values of those ranges); `None` otherwise (a LOCAL range is then one more digit).
fn local_tile(kernel: &GpuKernel) -> Option<LocalTile> {
    let locals = kernel
        .specials
        .iter()
        .rev()
        .take_while(|s| s.range.range_axis_type() == AxisType::Local);
    let size: usize = locals.map(|s| s.size).product();
    let any = kernel
        .specials
        .last()
        .is_some_and(|s| s.range.range_axis_type() == AxisType::Local);
    (any && size == MAX_BLOCK_THREADS).then(|| LocalTile {
        lane: UOp::range(size, Fresh::after(kernel).range(), AxisType::Group),
        size,
    })
}

/// The positions of the loop headers that become grid indices: a prefix of the loop nest,
/// over output axes, each closed by one of the trailing `EndLoop`s, with only computations
/// between the headers.
fn mappable_loops(lines: &[Line]) -> Vec<usize> {
    let trailing_ends = lines
        .iter()
        .rev()
        .take_while(|l| matches!(l, Line::EndLoop))
        .count();
    let mut mapped = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match line {
            Line::Assign { .. } => continue,
            Line::Loop(r) if is_output_axis(r) && mapped.len() < trailing_ends => {
                if closing_end(lines, i) != Some(lines.len() - 1 - mapped.len()) {
                    break;
                }
                mapped.push(i);
            }
            _ => break,
        }
    }
    mapped
}

fn is_output_axis(r: &UOp) -> bool {
    matches!(
        r.range_axis_type(),
        AxisType::Loop | AxisType::Thread | AxisType::Local
    )
}

/// The position of the `EndLoop` that closes the loop opened at `open`.
fn closing_end(lines: &[Line], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, line) in lines.iter().enumerate().skip(open) {
        match line {
            l if l.opens_loop() => depth += 1,
            Line::EndLoop => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::program::LaunchDims;
    use crate::codegen::{CodegenOptions, lower_kernel};
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;

    fn kernels(out: &Tensor) -> Vec<GpuKernel> {
        let schedule = create_schedule(&[out.uop()]);
        schedule
            .items
            .iter()
            .map(|item| {
                let sizes = item.buffer_sizes();
                let opts = CodegenOptions::default();
                let k = lower_kernel(&item.ast, &sizes, &opts);
                map_to_grid(&k.name, &k.program, &k.args)
            })
            .collect()
    }

    #[test]
    fn elementwise_output_axes_become_the_grid() {
        let a = Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[4, 6]);
        let k = &kernels(&(&a * 2.0))[0];
        // The contiguous axis is upcast by 4 for C; without it 24 threads, with it 6.
        assert!(k.threads == 24 || k.threads == 6, "{}", k.threads);
        assert!(!k.body.lines.iter().any(|l| matches!(l, Line::Loop(_))));
        assert!(k.body.lines.iter().any(|l| matches!(l, Line::Store { .. })));
    }

    #[test]
    fn a_reduction_keeps_its_loop_and_has_one_thread_per_output() {
        let a = Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[6, 4]);
        let k = &kernels(&a.sum([1], false))[0];
        assert_eq!(k.threads, 6);
        let loops: Vec<&Line> = k
            .body
            .lines
            .iter()
            .filter(|l| matches!(l, Line::Loop(_)))
            .collect();
        assert!(!loops.is_empty(), "the reduce loop stays in the thread");
        for l in loops {
            let Line::Loop(r) = l else { unreachable!() };
            assert_ne!(r.range_axis_type(), AxisType::Loop);
        }
    }

    #[test]
    fn launch_dims_cover_every_thread() {
        assert_eq!(LaunchDims::for_threads(1), LaunchDims { grid: 1, block: 1 });
        assert_eq!(
            LaunchDims::for_threads(300),
            LaunchDims {
                grid: 3,
                block: 128
            }
        );
        assert_eq!(
            LaunchDims::for_threads(256),
            LaunchDims {
                grid: 2,
                block: 128
            }
        );
    }
}
