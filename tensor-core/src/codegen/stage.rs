//! Shared-memory staging: the threads of a block that compute a tile of outputs together
//! (LOCAL ranges, see `codegen::gpu`) copy the operand slices their reduce reads into shared
//! memory once, and each thread then reads its values from there.
//!
//! In a matmul tiled this way (`gpu_optimizations`), a block of 8 x 16 threads computes
//! 64 x 64 outputs; without staging each thread loads its own 8 rows and 4 columns at every
//! step of the reduce, so the block asks memory for every row element 16 times and every
//! column element 8 times. The pass works on a reduce split into steps (an outer loop whose
//! body holds the inner loop, see the heuristic's reduce split); for every load of the inner
//! loop that is the same for some threads of the block (its index does not depend on every
//! LOCAL range):
//!
//! ```text
//! for o:                               __shared__ T tile[Π sizes];
//!   for i:                             for o:
//!     v = buf[f(l, i, o, g)]    =>       for e = lane; e < Π sizes; e += block:   (copy)
//!     ...                                  tile[e] = buf[f(digits of e, o, g)]
//!                                        barrier
//!                                        for i:
//!                                          v = tile[mixed-radix(l, i)]
//!                                          ...
//!                                        barrier
//! ```
//!
//! where `l` are the LOCAL ranges and `i` the inner range the index depends on (the tile's
//! axes), and `o` and the other grid indices `g` are the same for every thread of the block.
//! The tile's axes are ordered by their stride in the index, largest first, so the copy's
//! consecutive threads read consecutive addresses (a coalesced load) and the shared array
//! keeps the operand's layout. The second barrier keeps the next step's copy from
//! overwriting values a slower thread still reads.

use super::emit::{Emitter, drop_unused};
use super::fresh::Fresh;
use super::heuristic::index_stride;
use super::program::{GpuKernel, Line, LocalTile};
use crate::symbolic::simplify;
use crate::uop::{AxisType, DType, Op, UOp, substitute};
use std::collections::HashMap;

/// The most bytes of shared memory a kernel's tiles take (CUDA's limit for a static
/// `__shared__` array per block is 48 KiB; half of it leaves room for two blocks per SM).
pub const STAGE_BYTES: usize = 24 * 1024;

/// `kernel` with the loads of its first split reduce staged through shared memory, when it
/// has a block of LOCAL threads and such a reduce; otherwise unchanged.
pub fn stage_tiles(kernel: GpuKernel) -> GpuKernel {
    let Some(tile) = kernel.local.clone() else {
        return kernel;
    };
    let Some(site) = find_site(&kernel.body.lines) else {
        return kernel;
    };
    let locals: Vec<UOp> = kernel
        .specials
        .iter()
        .filter(|s| s.range.range_axis_type() == AxisType::Local)
        .map(|s| s.range.clone())
        .collect();
    let uniform: Vec<UOp> = kernel
        .specials
        .iter()
        .filter(|s| s.range.range_axis_type() != AxisType::Local)
        .map(|s| s.range.clone())
        .chain([site.outer.clone()])
        .collect();
    let mut fresh = Fresh::after(&kernel);
    let mut budget = STAGE_BYTES;
    let mut stager = Stager {
        tile: &tile,
        inner: &site.inner,
        fresh: &mut fresh,
        defines: Vec::new(),
        copies: Vec::new(),
    };
    let lines = &kernel.body.lines;
    let mut inner_body = Vec::with_capacity(site.inner_end - site.inner_open);
    for line in &lines[site.inner_open + 1..site.inner_end] {
        let staged = match line {
            Line::Assign { temp, node, .. } if node.op() == Op::Load => {
                tile_axes(node, &site.inner, &locals, &uniform)
                    .filter(|axes| {
                        let bytes = axes.size() * node.dtype().size_bytes();
                        let fits = bytes <= budget;
                        if fits {
                            budget -= bytes;
                        }
                        fits
                    })
                    .map(|axes| stager.stage(*temp, node, &axes))
            }
            _ => None,
        };
        match staged {
            Some(reads) => inner_body.extend(reads),
            None => inner_body.push(line.clone()),
        }
    }
    if stager.copies.is_empty() {
        return kernel;
    }
    let Stager {
        defines, copies, ..
    } = stager;
    let mut body = defines;
    body.extend_from_slice(&lines[..site.inner_open]);
    body.extend(copies);
    body.push(Line::Barrier);
    body.push(lines[site.inner_open].clone());
    body.extend(inner_body);
    body.push(Line::EndLoop);
    body.push(Line::Barrier);
    body.extend_from_slice(&lines[site.inner_end + 1..]);
    GpuKernel {
        body: super::program::Program {
            lines: drop_unused(body),
            threads: kernel.body.threads,
        },
        ..kernel
    }
}

/// A reduce split into steps: a top-level loop `outer` (only computations and accumulator
/// definitions before the inner loop) holding the loop `inner` of straight-line statements.
struct Site {
    outer: UOp,
    inner: UOp,
    inner_open: usize,
    inner_end: usize,
}

/// The first top-level reduce loop that holds a straight-line reduce loop, with no barrier
/// inside it.
fn find_site(lines: &[Line]) -> Option<Site> {
    let mut depth = 0usize;
    for (i, line) in lines.iter().enumerate() {
        match line {
            Line::Loop(outer) if depth == 0 && is_reduce(outer) => {
                if let Some(site) = site_at(lines, i, outer) {
                    return Some(site);
                }
                depth += 1;
            }
            l if l.opens_loop() || matches!(l, Line::If(_)) => depth += 1,
            Line::EndLoop | Line::EndIf => depth -= 1,
            _ => {}
        }
    }
    None
}

fn site_at(lines: &[Line], open: usize, outer: &UOp) -> Option<Site> {
    let inner_open = open
        + 1
        + lines[open + 1..]
            .iter()
            .position(|l| !matches!(l, Line::Assign { .. } | Line::DefineAcc { .. }))?;
    let Line::Loop(inner) = &lines[inner_open] else {
        return None;
    };
    let inner_end = inner_open
        + 1
        + lines[inner_open + 1..]
            .iter()
            .position(|l| !matches!(l, Line::Assign { .. } | Line::Accumulate { .. }))?;
    let outer_end = inner_end
        + 1
        + lines[inner_end + 1..]
            .iter()
            .position(|l| !matches!(l, Line::Assign { .. } | Line::Accumulate { .. }))?;
    let closes =
        matches!(lines[inner_end], Line::EndLoop) && matches!(lines[outer_end], Line::EndLoop);
    (is_reduce(inner) && closes).then(|| Site {
        outer: outer.clone(),
        inner: inner.clone(),
        inner_open,
        inner_end,
    })
}

fn is_reduce(r: &UOp) -> bool {
    r.range_axis_type() == AxisType::Reduce
}

/// The axes of the shared tile of one load: the ranges its index varies over inside a block
/// step, outermost first, with their sizes.
struct TileAxes {
    ranges: Vec<UOp>,
    sizes: Vec<usize>,
}

impl TileAxes {
    fn size(&self) -> usize {
        self.sizes.iter().product()
    }

    /// The weight of each axis in the tile's row-major layout: the digits of an element's
    /// number in the dense tile.
    fn weights(&self) -> Vec<usize> {
        let mut weights = vec![1; self.sizes.len()];
        for k in (0..self.sizes.len().saturating_sub(1)).rev() {
            weights[k] = weights[k + 1] * self.sizes[k + 1];
        }
        weights
    }

    /// The weight of each axis in the shared array. When the innermost axis is the reduce's
    /// (the threads of a warp read along an outer axis, as the weight rows of `x @ w.T`), its
    /// rows are padded by one element: rows of 16 words would put 16 threads on two of the 32
    /// banks of shared memory (an 8-way conflict), rows of 17 put each on its own.
    fn layout(&self, inner: &UOp) -> Vec<usize> {
        let n = self.sizes.len();
        let padded = n > 1 && self.ranges[n - 1] == *inner;
        let mut weights = vec![1; n];
        for k in (0..n.saturating_sub(1)).rev() {
            let next = self.sizes[k + 1] + usize::from(padded && k + 1 == n - 1);
            weights[k] = weights[k + 1] * next;
        }
        weights
    }
}

/// The tile axes of `load` when it reads through the inner range, is shared by some threads
/// of the block (some LOCAL range is not among its ranges), and otherwise depends only on
/// values every thread of the block has alike.
fn tile_axes(load: &UOp, inner: &UOp, locals: &[UOp], uniform: &[UOp]) -> Option<TileAxes> {
    let address = load.s(0);
    let ranges: Vec<UOp> = address
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Range)
        .collect();
    if !ranges.contains(inner) || locals.iter().all(|l| ranges.contains(l)) {
        return None;
    }
    let mut axes: Vec<UOp> = Vec::new();
    for r in ranges {
        if r == *inner || locals.contains(&r) {
            axes.push(r);
        } else if !uniform.contains(&r) {
            return None;
        }
    }
    let index = &address.src()[1];
    let mut strides: Vec<(i64, UOp)> = axes
        .into_iter()
        .map(|r| (index_stride(index, &r).unwrap_or(0), r))
        .collect();
    strides.sort_by_key(|(s, r)| (std::cmp::Reverse(*s), r.range_id()));
    let ranges: Vec<UOp> = strides.into_iter().map(|(_, r)| r).collect();
    let sizes = ranges
        .iter()
        .map(|r| r.range_size())
        .collect::<Option<Vec<usize>>>()?;
    Some(TileAxes { ranges, sizes })
}

/// Builds the shared arrays, their copies and the reads that replace the staged loads.
struct Stager<'a> {
    tile: &'a LocalTile,
    inner: &'a UOp,
    fresh: &'a mut Fresh,
    defines: Vec<Line>,
    copies: Vec<Line>,
}

impl Stager<'_> {
    /// Stages the load `node` (temp `temp`) over `axes`: defines its shared array, adds its
    /// copy, and returns the lines that read the thread's value from the array into `temp`.
    fn stage(&mut self, temp: usize, node: &UOp, axes: &TileAxes) -> Vec<Line> {
        let local = self.fresh.local();
        let (size, weights) = (axes.size(), axes.weights());
        let layout = axes.layout(self.inner);
        self.defines.push(Line::DefineLocal {
            local,
            dtype: node.dtype(),
            size: layout[0] * axes.sizes[0],
        });
        let element = UOp::range(size, self.fresh.range(), AxisType::Loop);
        let digits: HashMap<UOp, UOp> = axes
            .ranges
            .iter()
            .zip(&weights)
            .zip(&axes.sizes)
            .enumerate()
            .map(|(k, ((r, &w), &n))| {
                let mut digit = element.clone();
                if w > 1 {
                    digit = UOp::alu(Op::Idiv, vec![digit, index(w)]);
                }
                if k > 0 {
                    digit = UOp::alu(Op::Mod, vec![digit, index(n)]);
                }
                (r.clone(), digit)
            })
            .collect();
        let copied = simplify_address(&substitute(node, &digits));
        self.copies.push(Line::StridedLoop {
            range: element.clone(),
            lane: self.tile.lane.clone(),
            lanes: self.tile.size,
        });
        let mut emit = Emitter::new(self.fresh);
        let value = emit.value(&copied);
        let stored_at = position(&axes.ranges, &layout);
        let stored_at = emit.value(&simplify(&substitute(&stored_at, &digits)));
        self.copies.extend(emit.lines);
        self.copies.push(Line::LocalStore {
            local,
            index: stored_at,
            value,
        });
        self.copies.push(Line::EndLoop);
        let mut emit = Emitter::new(self.fresh);
        let at = emit.value(&position(&axes.ranges, &layout));
        let mut reads = emit.lines;
        reads.push(Line::LocalLoad {
            temp,
            local,
            dtype: node.dtype(),
            index: at,
        });
        reads
    }
}

/// `Σ r_k * w_k`: the element of the shared array at the ranges' values.
fn position(ranges: &[UOp], weights: &[usize]) -> UOp {
    ranges
        .iter()
        .zip(weights)
        .map(|(r, &w)| match w {
            1 => r.clone(),
            _ => UOp::alu(Op::Mul, vec![r.clone(), index(w)]),
        })
        .reduce(|a, b| UOp::alu(Op::Add, vec![a, b]))
        .expect("a tile has an axis")
}

fn index(v: usize) -> UOp {
    UOp::constant(v as i64, DType::Index)
}

/// A load with its index and gate simplified.
fn simplify_address(load: &UOp) -> UOp {
    let address = load.s(0);
    let parts: Vec<UOp> = address
        .src()
        .iter()
        .enumerate()
        .map(|(k, s)| if k == 0 { s.clone() } else { simplify(s) })
        .collect();
    load.with_src(vec![address.with_src(parts)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::{CodegenOptions, LaunchDims, lower_kernel_gpu};
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;

    fn contraction(a: &[usize], b: &[usize]) -> GpuKernel {
        let data = |shape: &[usize]| Tensor::from_vec(vec![0.5f32; shape.iter().product()], shape);
        let schedule = create_schedule(&[data(a).matmul(&data(b)).uop()]);
        let item = schedule.items.last().expect("a kernel");
        lower_kernel_gpu(
            &item.ast,
            &item.buffer_sizes(),
            &CodegenOptions::default(),
            "k",
        )
    }

    fn count(kernel: &GpuKernel, f: impl Fn(&Line) -> bool) -> usize {
        kernel.body.lines.iter().filter(|l| f(l)).count()
    }

    #[test]
    fn a_large_matmul_stages_its_operand_slices_in_shared_memory() {
        let k = contraction(&[4096, 64], &[64, 4096]);
        let tile = k.local.as_ref().expect("a block of LOCAL threads");
        assert_eq!(tile.size, 128);
        // 8 x 4 outputs per thread: 8 row slices and 4 column slices, copied per step.
        assert_eq!(count(&k, |l| matches!(l, Line::DefineLocal { .. })), 12);
        assert_eq!(count(&k, |l| matches!(l, Line::StridedLoop { .. })), 12);
        assert_eq!(count(&k, |l| matches!(l, Line::Barrier)), 2);
        // Inside the step loop every operand comes from shared memory: 12 reads per step for
        // 32 multiply-adds, where each thread loaded 12 values from global memory.
        let step = k
            .body
            .lines
            .iter()
            .rposition(|l| matches!(l, Line::Loop(r) if r.range_size() == Some(16)))
            .expect("the step loop");
        let inner = &k.body.lines[step..];
        let end = inner
            .iter()
            .position(|l| matches!(l, Line::EndLoop))
            .unwrap();
        let reads = inner[..end]
            .iter()
            .filter(|l| matches!(l, Line::LocalLoad { .. }))
            .count();
        let loads = inner[..end]
            .iter()
            .filter(|l| matches!(l, Line::Assign { node, .. } if node.op() == Op::Load))
            .count();
        assert_eq!((reads, loads), (12, 0));
        // 64 x 64 outputs per block of 128 threads, the blocks the runtime launches for the
        // rendered kernel's thread count.
        assert_eq!(k.launch_dims().grid, 4096 * 4096 / (64 * 64));
        let rendered = crate::render::cuda::render_kernel(&k);
        assert_eq!(LaunchDims::for_threads(rendered.threads), k.launch_dims());
    }

    #[test]
    fn a_small_or_short_contraction_is_not_staged() {
        // Fewer than 2^20 outputs: one thread per 1x4 outputs, no block tile.
        assert!(contraction(&[256, 64], &[64, 256]).local.is_none());
        // A reduce of one step has nothing to stage step by step.
        assert!(contraction(&[4096, 16], &[16, 4096]).local.is_none());
    }

    #[test]
    fn the_rows_of_a_tile_read_along_the_reduce_are_padded() {
        let inner = UOp::range(16, 1, AxisType::Reduce);
        let local = UOp::range(16, 2, AxisType::Local);
        let along_reduce = TileAxes {
            ranges: vec![local.clone(), inner.clone()],
            sizes: vec![16, 16],
        };
        assert_eq!(along_reduce.layout(&inner), vec![17, 1]);
        assert_eq!(along_reduce.weights(), vec![16, 1]);
        let along_columns = TileAxes {
            ranges: vec![inner.clone(), local],
            sizes: vec![16, 16],
        };
        assert_eq!(along_columns.layout(&inner), vec![16, 1]);
    }
}
