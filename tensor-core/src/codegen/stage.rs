//! Shared-memory staging: the threads of a block that compute a tile of outputs together
//! (LOCAL ranges, see `codegen::gpu`) copy the operand slices their reduce reads into shared
//! memory once, and each thread then reads its values from there.
//!
//! In a matmul tiled this way (`gpu_optimizations`), a block of 8 x 16 threads computes
//! 64 x 64 outputs; without staging each thread loads its own 8 rows and 4 columns at every
//! step of the reduce, so the block asks memory for every row element 16 times and every
//! column element 8 times. The pass works on a reduce split into steps (an outer loop whose
//! body holds the inner loop, see the heuristic's reduce split). The loads of the inner loop
//! that are the same for some threads of the block (the index does not depend on every LOCAL
//! range) are staged, in *families*: the loads of one buffer whose indices differ by
//! multiples of one constant (a thread's upcast rows or columns, `u = 0, 1, ...`) share one
//! array with `u` as its innermost axis:
//!
//! ```text
//! for o:                               __shared__ T tile[inner][locals...][u];
//!   for i:                             for o:
//!     v_u = buf[f(l, i, o, g) + u·d]  =>  x_j = buf[f(digits of e_j, o, g) + u_j·d]   (copy:
//!     ...                                tile[position of e_j] = x_j              e_j = lane + j·block)
//!                                        barrier
//!                                        for i:
//!                                          v_0..v_3 = tile[i][l][0..4]   (one float4)
//!                                          ...
//!                                        barrier
//! ```
//!
//! where `l` are the LOCAL ranges and `i` the inner range (with `u`, the tile's axes), and
//! `o` and the other grid indices `g` are the same for every thread of the block.
//!
//! - **The copy** numbers the tile's elements in the order of their strides in memory,
//!   largest first, so consecutive threads read consecutive addresses (a coalesced load).
//!   Each thread's elements `e_j = lane + j·block` are loaded one after the other before any
//!   is stored, so the loads of a step wait on memory once, not once each.
//! - **The layout** is the order the threads read in: the inner range outermost (every
//!   thread reads the same step together), then the LOCAL ranges, then `u`, so a thread's 4
//!   neighbouring `u` of an `f32` family are one aligned `float4` read. A row (one step)
//!   of 32 words or a multiple is padded by 4 words (1 when not read as vectors), so the
//!   copy's stores along the inner range do not fall in one bank.
//! - The second barrier keeps the next step's copy from overwriting values a slower thread
//!   still reads.

use super::emit::{Emitter, drop_unused};
use super::fresh::Fresh;
use super::heuristic::index_stride;
use super::program::{GpuKernel, Line, LocalTile, Value};
use super::vectorize::{VECTOR_WIDTH, affine};
use crate::symbolic::simplify;
use crate::uop::{AxisType, DType, Op, UOp, substitute};
use std::collections::{HashMap, HashSet};

/// The most bytes of shared memory a kernel's tiles take: below CUDA's 48 KiB of static
/// `__shared__` arrays per block, and room for 5 blocks in the 228 KiB of a Hopper
/// multiprocessor (a 4096² matmul's tiles take 17 KiB).
pub const STAGE_BYTES: usize = 40 * 1024;

/// `kernel` with the loads of its first split reduce staged through shared memory, when it
/// has a block of LOCAL threads and such a reduce; otherwise unchanged.
pub fn stage_tiles(kernel: GpuKernel) -> GpuKernel {
    let Some(tile) = kernel.local.clone() else {
        return kernel;
    };
    let Some(site) = find_site(&kernel.body.lines) else {
        return kernel;
    };
    let is_local = |r: &UOp| r.range_axis_type() == AxisType::Local;
    let locals: Vec<UOp> = kernel
        .specials
        .iter()
        .filter(|s| is_local(&s.range))
        .map(|s| s.range.clone())
        .collect();
    let uniform: Vec<UOp> = kernel
        .specials
        .iter()
        .filter(|s| !is_local(&s.range))
        .map(|s| s.range.clone())
        .chain([site.outer.clone()])
        .collect();
    let lines = &kernel.body.lines;
    let inner_lines = &lines[site.inner_open + 1..site.inner_end];
    let mut fresh = Fresh::after(&kernel);
    let mut stager = Stager {
        tile: &tile,
        inner: &site.inner,
        fresh: &mut fresh,
        defines: Vec::new(),
        copy_loads: Vec::new(),
        copy_stores: Vec::new(),
        reads: HashMap::new(),
        replaced: HashSet::new(),
    };
    let mut budget = STAGE_BYTES;
    for family in families(inner_lines, &site.inner, &locals, &uniform) {
        let bytes = family.layout(&site.inner).len * family.load.dtype().size_bytes();
        if bytes <= budget {
            budget -= bytes;
            stager.stage(&family);
        }
    }
    if stager.defines.is_empty() {
        return kernel;
    }
    let Stager {
        defines,
        copy_loads,
        copy_stores,
        mut reads,
        replaced,
        ..
    } = stager;
    let mut body = defines;
    body.extend_from_slice(&lines[..site.inner_open]);
    body.extend(copy_loads);
    body.extend(copy_stores);
    body.push(Line::Barrier);
    body.push(lines[site.inner_open].clone());
    for (i, line) in inner_lines.iter().enumerate() {
        body.extend(reads.remove(&i).unwrap_or_default());
        if !replaced.contains(&i) {
            body.push(line.clone());
        }
    }
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

/// The ranges a staged load varies over inside a block step (the inner range and some LOCAL
/// ranges), ordered by their stride in the load's index, largest first.
fn tile_ranges(load: &UOp, inner: &UOp, locals: &[UOp], uniform: &[UOp]) -> Option<Vec<UOp>> {
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
    ranges
        .iter()
        .all(|r| r.range_size().is_some())
        .then_some(ranges)
}

/// Staged loads that share one shared array: loads of one buffer over the same tile ranges
/// whose indices are `index(load) + u·step` for `u = 0, 1, ...` (one load alone: `step` 0).
struct Family {
    /// The member with `u = 0`.
    load: UOp,
    /// The tile's ranges, largest stride first.
    ranges: Vec<UOp>,
    /// `(line in the inner loop, temp)` of each member, by `u`.
    members: Vec<(usize, usize)>,
    /// How far apart neighbouring members' indices are.
    step: i64,
}

/// Where each element of a family's array is: the weight of the inner range, of each LOCAL
/// range (in the family's order) and of `u`, and the array's length.
struct Layout {
    weights: HashMap<UOp, usize>,
    len: usize,
}

impl Family {
    fn count(&self) -> usize {
        self.members.len()
    }

    fn size(r: &UOp) -> usize {
        r.range_size().expect("tile ranges have constant sizes")
    }

    /// True when a thread reads its `u` four at a time as one `float4`.
    fn vectorized(&self) -> bool {
        self.load.dtype() == DType::F32 && self.count().is_multiple_of(VECTOR_WIDTH)
    }

    /// The array's layout (see the module docs): the inner range outermost, then the LOCAL
    /// ranges, then `u`; a row of a multiple of 32 words padded.
    fn layout(&self, inner: &UOp) -> Layout {
        let mut weights = HashMap::new();
        let mut row = self.count();
        for r in self.ranges.iter().rev().filter(|r| *r != inner) {
            weights.insert(r.clone(), row);
            row *= Self::size(r);
        }
        if row.is_multiple_of(32) {
            row += if self.vectorized() { VECTOR_WIDTH } else { 1 };
        }
        weights.insert(inner.clone(), row);
        Layout {
            weights,
            len: row * Self::size(inner),
        }
    }

    /// The copy's axes, largest stride in memory first: each tile range and `u` (`None`),
    /// with its size.
    fn copy_axes(&self) -> Vec<(Option<UOp>, usize)> {
        let index = &self.load.s(0).src()[1];
        let mut axes: Vec<(i64, Option<UOp>, usize)> = self
            .ranges
            .iter()
            .map(|r| {
                (
                    index_stride(index, r).unwrap_or(0),
                    Some(r.clone()),
                    Self::size(r),
                )
            })
            .collect();
        if self.count() > 1 {
            axes.push((self.step, None, self.count()));
        }
        axes.sort_by_key(|(stride, _, _)| std::cmp::Reverse(*stride));
        axes.into_iter().map(|(_, r, n)| (r, n)).collect()
    }
}

/// The families of the stageable loads of the inner loop's lines, in line order of their
/// first members.
fn families(lines: &[Line], inner: &UOp, locals: &[UOp], uniform: &[UOp]) -> Vec<Family> {
    struct Candidate {
        line: usize,
        temp: usize,
        load: UOp,
        ranges: Vec<UOp>,
    }
    let mut groups: Vec<Vec<Candidate>> = Vec::new();
    for (line, l) in lines.iter().enumerate() {
        let Line::Assign { temp, node, .. } = l else {
            continue;
        };
        if node.op() != Op::Load {
            continue;
        }
        let Some(ranges) = tile_ranges(node, inner, locals, uniform) else {
            continue;
        };
        let candidate = Candidate {
            line,
            temp: *temp,
            load: node.clone(),
            ranges,
        };
        match groups.iter_mut().find(|g| {
            index_offset(&g[0].load, &candidate.load).is_some() && g[0].ranges == candidate.ranges
        }) {
            Some(group) => group.push(candidate),
            None => groups.push(vec![candidate]),
        }
    }
    let mut families = Vec::new();
    for mut group in groups {
        let first = group[0].load.clone();
        group.sort_by_key(|c| index_offset(&first, &c.load).expect("grouped by offset"));
        let offsets: Vec<i64> = group
            .iter()
            .map(|c| index_offset(&group[0].load, &c.load).expect("grouped by offset"))
            .collect();
        let step = offsets.get(1).copied().unwrap_or(0);
        let progression = offsets
            .iter()
            .enumerate()
            .all(|(u, &o)| o == u as i64 * step);
        if progression {
            families.push(Family {
                load: group[0].load.clone(),
                ranges: group[0].ranges.clone(),
                members: group.iter().map(|c| (c.line, c.temp)).collect(),
                step,
            });
        } else {
            families.extend(group.into_iter().map(|c| Family {
                load: c.load,
                ranges: c.ranges,
                members: vec![(c.line, c.temp)],
                step: 0,
            }));
        }
    }
    families.sort_by_key(|f| f.members.iter().map(|(line, _)| *line).min());
    families
}

/// `index(b) - index(a)` when both are ungated loads of one buffer and dtype whose indices
/// are affine in the ranges and differ by a constant.
fn index_offset(a: &UOp, b: &UOp) -> Option<i64> {
    let (address_a, address_b) = (a.s(0), b.s(0));
    let same_buffer = address_a.s(0) == address_b.s(0) && a.dtype() == b.dtype();
    let ungated = address_a.src().len() == 2 && address_b.src().len() == 2;
    if !same_buffer || !ungated {
        return None;
    }
    let (form_a, form_b) = (affine(&address_a.src()[1])?, affine(&address_b.src()[1])?);
    (form_a.terms == form_b.terms).then(|| form_b.constant - form_a.constant)
}

/// Builds the shared arrays, their copies and the reads that replace the staged loads.
struct Stager<'a> {
    tile: &'a LocalTile,
    inner: &'a UOp,
    fresh: &'a mut Fresh,
    defines: Vec<Line>,
    /// Every global load of a step's copy, then every shared store.
    copy_loads: Vec<Line>,
    copy_stores: Vec<Line>,
    /// The lines that read staged values, by the inner-loop line they go before.
    reads: HashMap<usize, Vec<Line>>,
    /// The inner-loop lines whose loads now read shared memory.
    replaced: HashSet<usize>,
}

impl Stager<'_> {
    /// Stages `family`: defines its shared array, adds its copy, and reads each member's
    /// value from the array where the member was loaded.
    fn stage(&mut self, family: &Family) {
        let local = self.fresh.local();
        let layout = family.layout(self.inner);
        self.defines.push(Line::DefineLocal {
            local,
            dtype: family.load.dtype(),
            size: layout.len,
        });
        self.copy(family, local, &layout);
        self.read(family, local, &layout);
    }

    /// The copy of one step's tile: element `e` of the tile (numbered along `copy_axes`)
    /// goes from its global address to its place in the layout. Each thread copies
    /// `lane + j·block` for every `j` when the block divides the tile, else in a strided loop.
    fn copy(&mut self, family: &Family, local: usize, layout: &Layout) {
        let axes = family.copy_axes();
        let elements: usize = axes.iter().map(|(_, n)| n).product();
        let lanes = self.tile.size;
        if elements.is_multiple_of(lanes) {
            let mut emit = Emitter::new(self.fresh);
            let mut values = Vec::new();
            for j in 0..elements / lanes {
                let e = UOp::alu(
                    Op::Add,
                    vec![self.tile.lane.clone(), index((j * lanes) as i64)],
                );
                let (load, at) = element_copy(family, &axes, layout, &simplify(&e));
                values.push((emit.value(&load), at));
            }
            self.copy_loads.append(&mut emit.lines);
            for (value, at) in values {
                store_at(&mut emit, local, &at, value);
            }
            self.copy_stores.append(&mut emit.lines);
        } else {
            let element = UOp::range(elements, self.fresh.range(), AxisType::Loop);
            self.copy_stores.push(Line::StridedLoop {
                range: element.clone(),
                lane: self.tile.lane.clone(),
                lanes,
            });
            let (load, at) = element_copy(family, &axes, layout, &element);
            let mut emit = Emitter::new(self.fresh);
            let value = emit.value(&load);
            store_at(&mut emit, local, &at, value);
            self.copy_stores.append(&mut emit.lines);
            self.copy_stores.push(Line::EndLoop);
        }
    }

    /// The reads of the family's members: a thread's `u` four at a time as one vector read
    /// when the family allows, else one by one, each before the first line of its members.
    fn read(&mut self, family: &Family, local: usize, layout: &Layout) {
        let width = if family.vectorized() { VECTOR_WIDTH } else { 1 };
        let position = position(self.inner, &family.ranges, layout);
        for (q, quad) in family.members.chunks(width).enumerate() {
            let at = UOp::alu(Op::Add, vec![position.clone(), index((q * width) as i64)]);
            let mut emit = Emitter::new(self.fresh);
            let index = emit.value(&simplify(&at));
            let mut lines = emit.lines;
            let temps: Vec<usize> = quad.iter().map(|(_, temp)| *temp).collect();
            lines.push(match temps.as_slice() {
                [temp] => Line::LocalLoad {
                    temp: *temp,
                    local,
                    dtype: family.load.dtype(),
                    index,
                },
                _ => Line::LocalVectorLoad {
                    temps,
                    local,
                    index,
                },
            });
            let first = quad.iter().map(|(line, _)| *line).min().expect("a member");
            self.reads.entry(first).or_default().extend(lines);
            self.replaced.extend(quad.iter().map(|(line, _)| *line));
        }
    }
}

/// Emits the store of `value` at position `at` of shared array `local`.
fn store_at(emit: &mut Emitter, local: usize, at: &UOp, value: Value) {
    let index = emit.value(at);
    emit.lines.push(Line::LocalStore {
        local,
        index,
        value,
    });
}

/// The global load and the array position of the tile element `e` (numbered along `axes`,
/// last fastest).
fn element_copy(
    family: &Family,
    axes: &[(Option<UOp>, usize)],
    layout: &Layout,
    e: &UOp,
) -> (UOp, UOp) {
    let mut digits: HashMap<UOp, UOp> = HashMap::new();
    let mut u_digit = index(0);
    let mut weight = 1usize;
    for (k, (range, size)) in axes.iter().enumerate().rev() {
        let mut digit = e.clone();
        if weight > 1 {
            digit = UOp::alu(Op::Idiv, vec![digit, index(weight as i64)]);
        }
        if k > 0 {
            digit = UOp::alu(Op::Mod, vec![digit, index(*size as i64)]);
        }
        match range {
            Some(r) => {
                digits.insert(r.clone(), digit);
            }
            None => u_digit = digit,
        }
        weight *= size;
    }
    let address = family.load.s(0);
    let offset = UOp::alu(Op::Mul, vec![u_digit.clone(), index(family.step)]);
    let at = UOp::alu(
        Op::Add,
        vec![substitute(&address.src()[1], &digits), offset],
    );
    let load = family.load.with_src(vec![
        address.with_src(vec![address.s(0).clone(), simplify(&at)]),
    ]);
    let tile_position = family
        .ranges
        .iter()
        .map(|r| scaled(&digits[r], layout.weights[r]))
        .chain([u_digit])
        .reduce(|a, b| UOp::alu(Op::Add, vec![a, b]))
        .expect("a tile has an axis");
    (load, simplify(&tile_position))
}

/// The array position a thread reads at step `inner`: `Σ r · weight(r)` over the tile's
/// ranges (`u` is added per member).
fn position(inner: &UOp, ranges: &[UOp], layout: &Layout) -> UOp {
    debug_assert!(ranges.contains(inner));
    ranges
        .iter()
        .map(|r| scaled(r, layout.weights[r]))
        .reduce(|a, b| UOp::alu(Op::Add, vec![a, b]))
        .expect("a tile has an axis")
}

fn scaled(x: &UOp, weight: usize) -> UOp {
    match weight {
        1 => x.clone(),
        w => UOp::alu(Op::Mul, vec![x.clone(), index(w as i64)]),
    }
}

fn index(v: i64) -> UOp {
    UOp::constant(v, DType::Index)
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
        // 8 x 4 outputs per thread: the 8 row slices share one array, the 4 column slices
        // another, each 32 steps of rows of 64 words padded to 68.
        let sizes: Vec<usize> = k
            .body
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::DefineLocal { size, .. } => Some(*size),
                _ => None,
            })
            .collect();
        assert_eq!(sizes, vec![32 * 68, 32 * 68]);
        assert_eq!(count(&k, |l| matches!(l, Line::Barrier)), 2);
        // The block's 128 threads copy 32 x 64 elements of each array per step: 16 global
        // loads each, all before the first shared store, with no copy loop.
        assert_eq!(count(&k, |l| matches!(l, Line::StridedLoop { .. })), 0);
        let stores = count(&k, |l| matches!(l, Line::LocalStore { .. }));
        assert_eq!(stores, 32);
        let first_store = k
            .body
            .lines
            .iter()
            .position(|l| matches!(l, Line::LocalStore { .. }))
            .expect("the copy's stores");
        let loads_before = k.body.lines[..first_store]
            .iter()
            .filter(|l| matches!(l, Line::Assign { node, .. } if node.op() == Op::Load))
            .count();
        assert_eq!(loads_before, 32);
        // Inside the step loop every operand comes from shared memory: 3 float4 reads per
        // step (8 rows, 4 columns) for 32 multiply-adds.
        let step = k
            .body
            .lines
            .iter()
            .rposition(|l| matches!(l, Line::Loop(r) if r.range_size() == Some(32)))
            .expect("the step loop");
        let inner = &k.body.lines[step..];
        let end = inner
            .iter()
            .position(|l| matches!(l, Line::EndLoop))
            .unwrap();
        let reads = |f: fn(&Line) -> bool| inner[..end].iter().filter(|l| f(l)).count();
        assert_eq!(reads(|l| matches!(l, Line::LocalVectorLoad { .. })), 3);
        assert_eq!(reads(|l| matches!(l, Line::LocalLoad { .. })), 0);
        assert_eq!(
            reads(|l| matches!(l, Line::Assign { node, .. } if node.op() == Op::Load)),
            0
        );
        // 64 x 64 outputs per block of 128 threads: the launch the rendered kernel carries.
        let rendered = crate::render::cuda::render_kernel(&k);
        let grid = LaunchDims {
            grid: 4096 * 4096 / (64 * 64),
            block: 128,
        };
        assert_eq!(rendered.launch, crate::render::Launch::Grid(grid));
    }

    #[test]
    fn a_small_or_short_contraction_is_not_staged() {
        // Fewer than 2^20 outputs: one thread per 1x4 outputs, no block tile.
        assert!(contraction(&[256, 64], &[64, 256]).local.is_none());
        // A reduce of one step has nothing to stage step by step.
        assert!(contraction(&[4096, 32], &[32, 4096]).local.is_none());
    }

    #[test]
    fn a_transposed_operand_is_laid_out_for_its_readers() {
        // `x @ w.T`: the weight rows are read along the reduce, yet the shared array puts
        // the step outermost and a thread's 4 columns side by side, as for `a @ b`.
        let w = Tensor::from_vec(vec![0.5f32; 4096 * 64], &[4096, 64]);
        let x = Tensor::from_vec(vec![0.5f32; 4096 * 64], &[4096, 64]);
        let schedule = create_schedule(&[x.matmul(&w.transpose(0, 1)).uop()]);
        let item = schedule.items.last().expect("a kernel");
        let k = lower_kernel_gpu(
            &item.ast,
            &item.buffer_sizes(),
            &CodegenOptions::default(),
            "k",
        );
        assert_eq!(
            count(
                &k,
                |l| matches!(l, Line::DefineLocal { size, .. } if *size == 32 * 68)
            ),
            2
        );
        assert_eq!(count(&k, |l| matches!(l, Line::LocalVectorLoad { .. })), 3);
    }
}
