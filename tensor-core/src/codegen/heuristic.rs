//! Hand-coded optimizations: the OptOps a kernel gets without search.
//!
//! 1. UPCAST by 4 the innermost output axis that the stores walk contiguously, when 4 divides
//!    it: four neighbouring elements per iteration, which the C compiler turns into one SIMD
//!    operation. In a kernel with a reduce the axis is upcast by two vector registers' worth
//!    ([`reduce_upcast_width`]: 16 with 8-lane AVX2, 32 with 16-lane AVX-512 in a big kernel) when that
//!    divides it (else 16, else 4): the accumulators of a row fill two vector registers, and
//!    a value loaded once per reduce step (the row element of a matmul) is used that often.
//! 2. In a kernel with a reduce, also UPCAST by 4 an output axis that some load does not
//!    depend on: each loaded value is then reused by four accumulators (a 4x16 register tile
//!    for a matmul whose output rows are a multiple of 16 long, 4x4 otherwise). (Preferring
//!    a convolution's output channels over its rows here, to reuse the unfolded input rather
//!    than the weight, was measured slower: 91 -> 121 ms for the B=64 forward conv.)
//! 3. THREAD the outermost output axis across the cores when the kernel does enough work to
//!    pay for waking them. In a matmul-shaped kernel (a reduce and exactly two output axes,
//!    the inner one upcast as the contiguous axis) the contiguous axis is spread over the
//!    cores instead when each core gets at least two of its tiles: the THREAD axis is the
//!    outer loop, so a column strip of the right operand (reduce length x 16 floats) stays in
//!    cache while every row tile of the left operand passes by, where rows outside would
//!    stream the whole right operand once per row tile (2x on a 1024² f32 matmul, measured).
//!
//! 4. Cache-block a matmul-shaped kernel (the 16-wide column upcast of item 1, two output
//!    axes, one reduce range of at least two [`REDUCE_BLOCK`]s, every store a plain float
//!    sum): REDUCEBLOCK-split the reduce axis into blocks of [`REDUCE_BLOCK`] (the block loop
//!    runs outside the output loops and each block's sums are added into the output), and
//!    split the column tiles into groups of up to [`COLUMN_TILES_PER_BLOCK`] whose inner
//!    axis loops inside the row tiles. Per block, a 4 x 256 slice of the left operand (4 KiB)
//!    then stays in L1 while it meets the group's columns, and the group's 256 x 128 slice of
//!    the right operand (128 KiB) stays in L2 while every row tile passes by, where the left
//!    operand was streamed from memory once per column tile before (2048² `f32`: 6.7 s ->
//!    1.8 s together with the staggered copy of `tensor::matmul`).
//! 5. Give a reduce along a contiguous axis (some load advances by one element along its
//!    range) [`REDUCE_LANES`] partial accumulators (an UNROLL split, see `expand`), unless its
//!    reduces depend on the upcast output axis (a matmul's reduce: the column upcast already
//!    gives it 16 accumulators). Where the output upcast of item 1 would gather a load (a row
//!    sum: the rows are 4096 floats apart) and such a reduce exists, the lanes replace it.
//!    A range whose reduces are all `f32`/`f64` maxima is LANE-split instead: its partial
//!    maxima are an array updated in a loop, which gcc vectorizes, where the NaN-propagating
//!    selects of 16 unrolled scalar maxima stayed scalar.
//! 6. A dot-form kernel (`x @ w.T`, as every `nn::linear` computes it: both operands advance
//!    by one element along the reduce, so the output upcast of item 1 gathers the weight rows
//!    and item 2 upcasts an output axis instead) whose reduces are `f32`/`f64` sums gets a
//!    register tile: a second output axis that some load does not depend on upcast by 2
//!    (4 x 2 outputs), and the contiguous reduce LANE-split by [`DOT_LANES`]. The lanes stay
//!    a loop over arrays of partial accumulators (see `render::c`), which gcc turns into eight
//!    vector FMAs per step, where the 16 unrolled scalar accumulators of item 5 per output (64
//!    in a 4-output tile) were left scalar and shuffled (the transformer's `fc2`, 1024 x 64 x
//!    256: 20 ms -> 1.3 ms).
//! 7. A kernel with a reduce whose stores walk no upcastable axis contiguously and whose
//!    reduces walk no load contiguously (a convolution's input gradient into a positions-first
//!    `[b, c, y, x, ky, kx]` buffer, the reduce over the output channels; `nn` now unfolds
//!    taps first, whose gradient is a plain matmul tile), where
//!    some load advances by one element along the reuse axis of item 2: that axis is upcast
//!    by 16 (or 8) instead of 4, and a short output axis (at most [`SHORT_AXIS`], a kernel
//!    width) that this load does not depend on is upcast whole. Each step then loads one
//!    contiguous strip and reuses it across the short axis (a 8 x 3 register tile).
//! 8. A tiny kernel (fewer than [`TINY_KERNEL_WORK`] loop iterations) gets only the 4-wide
//!    upcast of item 1 (unless it is dot-form, item 6, whose lanes stay a loop), and a kernel whose reduces are all shorter than 16 steps no reuse
//!    upcast (item 2): their run time hardly changes, while the unrolled C they would get (up
//!    to 64 accumulators) is what `cc` spends most of a cold start on (the per-sample gradient
//!    example's 10 kernels: 1.8 s -> 0.9 s of compiler time, serial).
//! 9. In a kernel without a reduce, an output axis that comparisons read against constants
//!    that cut it into at most [`STACK_AXIS`] equal parts (the axis of a `stack`, or of a `cat`
//!    of equal parts: each element picks one of the joined views through gates) has its parts
//!    upcast (a top split): in each copy the gates are constants and fold away, so the copy is
//!    a plain read of its own view, where the loop evaluated every view's select per element
//!    (the CNN's im2col columns, 9 taps stacked: 13 -> 3 ms at B=64; the transformer's qkv
//!    gradient, three 64-wide parts).
//! 10. A one-hot contraction (a sum of `Where(a == b, x, 0)`, an embedding's gradient) whose
//!     reuse axis of item 2 is read by the gate gets no reuse upcast: each copy of the reduce
//!     loop would test the gate again. Its contiguous axis is upcast by
//!     [`ONE_HOT_UPCAST_WIDTH`] instead, so one test serves the whole row (the transformer's
//!     embedding gradient `[32, 1000, 64]`: a quarter of the tests, 1.7 -> 1.0 ms).
//!
//! The C compiler keeps the 16 accumulators of a row as two 8-wide vector registers (one
//! 16-wide register where the runtime asks for 512-bit vectors) and fuses the multiply-adds
//! (`-mprefer-vector-width`, `-ffp-contract=fast`, see the runtime's compiler flags);
//! `tests/vectorized.rs` checks that in the object code.

use super::expand::is_kernel_reduce;
use super::opt::{Opt, OptimizedKernel, kernel_ranges};
use crate::schedule::kernel_size::code_cost;
use crate::uop::{AxisType, DType, Op, ReduceOp, Scalar, UOp, alu};
use std::collections::HashMap;

/// Below this many loop iterations (all ranges multiplied) a kernel runs on one core. Waking
/// a worker costs microseconds when the other core is idle and up to milliseconds when it is
/// busy: a 784 x 128 outer product (a single-sample weight gradient) took 13.7 us on one core
/// and 12-107 us (some 1.5 ms) on two of a loaded 2-core machine, so 1 << 16 was too low;
/// 1 << 18 kept kernels of the transformer and the CNN (2^17 iterations) on one core, 20 %
/// slower on an idle machine.
pub const MIN_WORK_PER_THREADED_KERNEL: usize = 1 << 17;

/// The width of an upcast.
pub const UPCAST_WIDTH: usize = 4;

/// The `f32` lanes of a vector register the C compiler is assumed to use unless the device
/// says otherwise (256-bit AVX2).
pub const DEFAULT_VECTOR_LANES: usize = 8;

/// The width of the contiguous upcast in a kernel with a reduce doing `work` loop iterations,
/// for vectors of `vector_lanes` `f32` lanes: two vector registers of accumulators per row of
/// the register tile (16 with AVX2; 32 with AVX-512 from [`WIDE_TILE_WORK`] on, where a
/// 4 x 16 tile left the matmul at 40% of the FMA peak and 4 x 32 reached 50%: four rows of
/// one 512-bit register each were too few multiply-adds per load).
pub fn reduce_upcast_width(vector_lanes: usize, work: usize) -> usize {
    let width = 2 * vector_lanes.max(1);
    match work >= WIDE_TILE_WORK {
        true => width,
        false => width.min(2 * DEFAULT_VECTOR_LANES),
    }
}

/// The least work (loop iterations, all ranges multiplied) for which a register tile wider
/// than 16 pays for its compile time: `cc` takes about twice as long over a 4 x 32 tile as over
/// a 4 x 16 one (190 vs 100 ms for the 256 x 784 x 128 layer of the per-sample-gradient MLP,
/// whose cold start grew from 0.21-0.31 s to 0.29-0.35 s with it), while below 2^27
/// multiply-adds (a few milliseconds of work) the wider tile saves well under a millisecond a
/// call.
pub const WIDE_TILE_WORK: usize = 1 << 27;

/// The opts for `ast` on a machine with `threads` cores whose C compiler vectorizes with
/// `vector_lanes` `f32` lanes per register (see [`DEFAULT_VECTOR_LANES`]).
pub fn hand_coded_optimizations(ast: &UOp, threads: usize, vector_lanes: usize) -> Vec<Opt> {
    let mut opts = Vec::new();
    let outputs: Vec<UOp> = kernel_ranges(ast)
        .into_iter()
        .filter(|r| r.range_axis_type() == AxisType::Loop)
        .collect();
    // An upper bound: sibling loops (a kernel may hold dozens of fused reduces) multiply as
    // if nested, so the product saturates instead of overflowing.
    let work: usize = kernel_ranges(ast)
        .iter()
        .map(|r| r.range_size().unwrap_or(1))
        .fold(1, usize::saturating_mul);
    let tile_width = reduce_upcast_width(vector_lanes, work);
    if code_size(ast) > UNROLL_CODE_LIMIT {
        return thread_split(ast, &outputs, &[], threads, work, tile_width)
            .into_iter()
            .collect();
    }
    let lane_ranges = contiguous_reduce_ranges(ast);
    if work < TINY_KERNEL_WORK && !dot_lanes_fit(ast, &lane_ranges) {
        return upcastable_axis(ast, &outputs, tile_width)
            .map(|(axis, _)| Opt::Split {
                axis: axis.range_id(),
                factor: UPCAST_WIDTH,
                target: AxisType::Upcast,
                top: false,
            })
            .into_iter()
            .collect();
    }
    let mut upcast = upcastable_axis(ast, &outputs, tile_width)
        .filter(|(axis, _)| lane_ranges.is_empty() || !gathers(ast, axis));
    if let Some((axis, factor)) = &upcast {
        opts.push(Opt::Split {
            axis: axis.range_id(),
            factor: *factor,
            target: AxisType::Upcast,
            top: false,
        });
    }
    opts.extend(
        stack_axis(ast, &outputs, &opts).map(|(axis, parts)| Opt::Split {
            axis: axis.range_id(),
            factor: parts,
            target: AxisType::Upcast,
            top: true,
        }),
    );
    let upcast_first = opts.first().cloned();
    let mut reuse_range = reuse_axis(ast, &outputs, upcast_first.as_ref())
        .filter(|_| !reduces_are_short(ast, tile_width));
    if let (Some(r), Some((axis, factor))) = (&reuse_range, &mut upcast)
        && one_hot_gate_ranges(ast).contains(r)
        && let Some(size) = axis.range_size()
        && size % ONE_HOT_UPCAST_WIDTH == 0
    {
        // Item 10: the whole row of the contiguous axis per gate test, not a reuse tile.
        *factor = ONE_HOT_UPCAST_WIDTH;
        opts[0] = Opt::Split {
            axis: axis.range_id(),
            factor: ONE_HOT_UPCAST_WIDTH,
            target: AxisType::Upcast,
            top: false,
        };
        reuse_range = None;
    }
    let strip = match (&upcast, &reuse_range) {
        (None, Some(axis)) if lane_ranges.is_empty() => {
            contiguous_strip(ast, &outputs, axis, tile_width)
        }
        _ => Vec::new(),
    };
    let reuse = reuse_range.map(|axis| Opt::Split {
        axis: axis.range_id(),
        factor: UPCAST_WIDTH,
        target: AxisType::Upcast,
        top: false,
    });
    if !strip.is_empty() {
        opts.extend(strip);
    } else {
        opts.extend(reuse.clone());
    }
    match (&upcast, &reuse) {
        (None, Some(reuse)) if dot_lanes_fit(ast, &lane_ranges) => {
            opts.extend(dot_tile(ast, &outputs, reuse, &lane_ranges));
        }
        _ => {
            opts.extend(cache_blocks(ast, &outputs, &opts, threads, tile_width));
            opts.extend(reduce_lanes(
                ast,
                &lane_ranges,
                upcast.map(|(axis, _)| axis),
            ));
        }
    }
    opts.extend(thread_split(
        ast, &outputs, &opts, threads, work, tile_width,
    ));
    opts
}

/// The split of an output axis across `threads` cores, after `opts`, for a kernel doing
/// `work` loop iterations.
fn thread_split(
    ast: &UOp,
    outputs: &[UOp],
    opts: &[Opt],
    threads: usize,
    work: usize,
    tile_width: usize,
) -> Option<Opt> {
    if threads <= 1 || work < MIN_WORK_PER_THREADED_KERNEL {
        return None;
    }
    let axis = thread_axis(ast, outputs, opts, threads, tile_width)?;
    Some(Opt::Split {
        axis,
        factor: threads,
        target: AxisType::Thread,
        top: true,
    })
}

/// A kernel whose AST lowers to more ops than this ([`code_size`]) gets no upcast or
/// register tile, only its THREAD split: each unrolled copy of a body that long adds as much
/// to the C compiler's time as the body itself (four copies of a chain of `sin`s took `cc`
/// four times as long), for little gain in a loop that already has that much work per
/// iteration. The scheduler keeps fused chains below `schedule::kernel_size::CHAIN_BUDGET`.
pub const UNROLL_CODE_LIMIT: u64 = 1024;

/// The ops `ast` lowers to: its nodes, a transcendental counting the nodes of its
/// decomposition ([`code_cost`]).
pub fn code_size(ast: &UOp) -> u64 {
    ast.toposort()
        .iter()
        .map(|u| match u.op().is_elementwise() {
            true => code_cost(u.op(), u.dtype()),
            false => 1,
        })
        .fold(0, u64::saturating_add)
}

/// Below this many loop iterations (all ranges multiplied) a kernel that is not dot-form gets
/// only the 4-wide upcast of item 1: it runs in microseconds however it is unrolled, while a 16-wide upcast
/// multiplies its C, and `cc` spends 100-500 ms on such a kernel (a row max over 10 classes of
/// 256 samples) where it spends 60-100 ms on the plain loop: the cold start of a program is
/// mostly compiling its kernels.
pub const TINY_KERNEL_WORK: usize = 4096;

/// True when the kernel reduces and every reduce range is shorter than the tile width
/// ([`reduce_upcast_width`]): item 2's reuse upcast would then multiply the accumulators (64
/// for a 4 x 16 tile) for a loop of a few steps, four times the C for little reuse.
fn reduces_are_short(ast: &UOp, tile_width: usize) -> bool {
    let reduces: Vec<usize> = kernel_ranges(ast)
        .iter()
        .filter(|r| r.range_axis_type() == AxisType::Reduce)
        .map(|r| r.range_size().unwrap_or(usize::MAX))
        .collect();
    !reduces.is_empty() && reduces.iter().all(|&n| n < tile_width)
}

/// The partial accumulators of a reduce along a contiguous axis (two 8-wide vector registers).
pub const REDUCE_LANES: usize = 16;

/// The reduce ranges of constant size divisible by 8 along which some load advances by one
/// element, each with the number of partial accumulators to give it: [`REDUCE_LANES`] when
/// that divides it, else 8.
fn contiguous_reduce_ranges(ast: &UOp) -> Vec<(UOp, usize)> {
    let nodes = ast.toposort();
    let loads: Vec<&UOp> = nodes.iter().filter(|u| u.op() == Op::Load).collect();
    kernel_ranges(ast)
        .into_iter()
        .filter(|r| r.range_axis_type() == AxisType::Reduce)
        .filter_map(|r| {
            let size = r.range_size()?;
            let lanes = [REDUCE_LANES, 8]
                .into_iter()
                .find(|&w| size >= 2 * w && size.is_multiple_of(w))?;
            let contiguous = loads
                .iter()
                .any(|l| index_stride(&l.s(0).src()[1], &r) == Some(1));
            contiguous.then_some((r, lanes))
        })
        .collect()
}

/// True when some load depends on `axis` but does not advance by one element along it: an
/// upcast of `axis` would gather that load's values one by one.
fn gathers(ast: &UOp, axis: &UOp) -> bool {
    ast.toposort().iter().any(|u| {
        u.op() == Op::Load && {
            let idx = &u.s(0).src()[1];
            idx.toposort().contains(axis) && index_stride(idx, axis) != Some(1)
        }
    })
}

/// Item 4 of the module doc: an UNROLL split (partial accumulators, see `expand`) of each
/// reduce range in `candidates` whose reduces do not depend on the output `upcast` axis (whose
/// copies would multiply the accumulators).
fn reduce_lanes(ast: &UOp, candidates: &[(UOp, usize)], upcast: Option<UOp>) -> Vec<Opt> {
    let nodes = ast.toposort();
    let reduces: Vec<&UOp> = nodes.iter().filter(|u| is_kernel_reduce(u)).collect();
    candidates
        .iter()
        .filter(|(r, _)| {
            reduces
                .iter()
                .filter(|red| red.src()[1..].contains(r))
                .all(|red| match &upcast {
                    Some(axis) => !red.s(0).toposort().contains(axis),
                    None => true,
                })
        })
        .map(|(r, lanes)| Opt::Split {
            axis: r.range_id(),
            factor: *lanes,
            target: if float_maxes_over(&reduces, r) {
                AxisType::Lane
            } else {
                AxisType::Unroll
            },
            top: false,
        })
        .collect()
}

/// True when every reduce over `range` is an `f32`/`f64` maximum: its partial accumulators
/// are a LANE array (`render::c`), whose loop gcc vectorizes, where 16 unrolled scalar
/// maxima (NaN-propagating selects) stayed scalar.
fn float_maxes_over(reduces: &[&UOp], range: &UOp) -> bool {
    reduces
        .iter()
        .filter(|red| red.src()[1..].contains(range))
        .all(|red| {
            red.reduce_op() == ReduceOp::Max && matches!(red.dtype(), DType::F32 | DType::F64)
        })
}

/// The partial accumulators of one reduce of a dot-form kernel (one 8-wide vector register).
pub const DOT_LANES: usize = 8;

/// True when every reduce over the contiguous ranges is an `f32`/`f64` sum: the sums a LANE
/// split keeps as an array of [`DOT_LANES`] partial accumulators.
fn dot_lanes_fit(ast: &UOp, lane_ranges: &[(UOp, usize)]) -> bool {
    !lane_ranges.is_empty()
        && ast
            .toposort()
            .iter()
            .filter(|u| is_kernel_reduce(u))
            .all(|red| {
                red.reduce_op() == ReduceOp::Add && matches!(red.dtype(), DType::F32 | DType::F64)
            })
}

/// Item 6 of the module doc: the register tile of a dot-form kernel after its first reuse
/// upcast `reuse` (by 4): a second output axis that some load does not depend on upcast by 2,
/// and each contiguous reduce range LANE-split by [`DOT_LANES`].
fn dot_tile(ast: &UOp, outputs: &[UOp], reuse: &Opt, lane_ranges: &[(UOp, usize)]) -> Vec<Opt> {
    let second = reuse_axis(ast, outputs, Some(reuse)).map(|axis| Opt::Split {
        axis: axis.range_id(),
        factor: 2,
        target: AxisType::Upcast,
        top: false,
    });
    let lanes = lane_ranges.iter().map(|(r, _)| Opt::Split {
        axis: r.range_id(),
        factor: DOT_LANES,
        target: AxisType::Lane,
        top: false,
    });
    second.into_iter().chain(lanes).collect()
}

/// The most elements of a short output axis that item 7 upcasts whole.
pub const SHORT_AXIS: usize = 4;

/// Item 7 of the module doc: for a kernel whose stores walk no upcastable axis contiguously
/// and whose reduces walk no load contiguously, when some load advances by one element along
/// the reuse axis `axis`: that axis upcast by the tile width (or 16, or 8) as a contiguous
/// strip, and the innermost short output axis (at most [`SHORT_AXIS`]) that this load does not
/// depend on upcast whole. Empty when the shape does not fit.
fn contiguous_strip(ast: &UOp, outputs: &[UOp], axis: &UOp, tile_width: usize) -> Vec<Opt> {
    let nodes = ast.toposort();
    let Some(strip_load) = nodes
        .iter()
        .find(|u| u.op() == Op::Load && index_stride(&u.s(0).src()[1], axis) == Some(1))
    else {
        return Vec::new();
    };
    let size = axis.range_size().unwrap_or(0);
    let Some(width) = [tile_width, 16, 8]
        .into_iter()
        .find(|&w| size.is_multiple_of(w))
    else {
        return Vec::new();
    };
    let loads: Vec<&UOp> = nodes.iter().filter(|u| u.op() == Op::Load).collect();
    let Some(short) = outputs.iter().rev().find(|r| {
        let n = r.range_size().unwrap_or(0);
        (2..=SHORT_AXIS).contains(&n)
            && r != &axis
            && !strip_load.toposort().contains(r)
            && loads.iter().any(|l| l.toposort().contains(r))
    }) else {
        return Vec::new();
    };
    let split = |r: &UOp, factor| Opt::Split {
        axis: r.range_id(),
        factor,
        target: AxisType::Upcast,
        top: false,
    };
    let n = short.range_size().unwrap_or(0);
    vec![split(axis, width), split(short, n)]
}

/// The reduce length of one cache block of a matmul.
pub const REDUCE_BLOCK: usize = 256;

/// The most column tiles of a matmul that one pass over a reduce block visits.
pub const COLUMN_TILES_PER_BLOCK: usize = 8;

/// Cache blocking of a matmul-shaped kernel whose reduce is longer than one block (see the
/// module doc, item 4): the reduce axis in blocks of [`REDUCE_BLOCK`] (a REDUCEBLOCK split),
/// and the column tiles in groups of up to [`COLUMN_TILES_PER_BLOCK`] visited per row tile
/// (a LOOP split, its new inner axis looping inside the row tiles), leaving each core at least
/// two groups. None when the kernel is not a plain matmul or the opts do not fit.
fn cache_blocks(
    ast: &UOp,
    outputs: &[UOp],
    opts: &[Opt],
    threads: usize,
    tile_width: usize,
) -> Vec<Opt> {
    let Some(&Opt::Split {
        axis: columns,
        factor,
        ..
    }) = opts.first()
    else {
        return Vec::new();
    };
    if factor != tile_width {
        return Vec::new();
    }
    let reduces: Vec<UOp> = kernel_ranges(ast)
        .into_iter()
        .filter(|r| r.range_axis_type() == AxisType::Reduce)
        .collect();
    let (Some(column_size), [reduce]) = (
        outputs
            .iter()
            .find(|r| r.range_id() == columns)
            .and_then(UOp::range_size),
        reduces.as_slice(),
    ) else {
        return Vec::new();
    };
    let k = reduce.range_size().unwrap_or(0);
    if outputs.len() != 2 || k < 2 * REDUCE_BLOCK || !k.is_multiple_of(REDUCE_BLOCK) {
        return Vec::new();
    }
    let tiles = column_size / tile_width;
    let Some(group) = [COLUMN_TILES_PER_BLOCK, 4, 2]
        .into_iter()
        .find(|&g| tiles.is_multiple_of(g) && tiles / g >= 2 * threads)
    else {
        return Vec::new();
    };
    let blocking = vec![
        Opt::Split {
            axis: columns,
            factor: group,
            target: AxisType::Loop,
            top: false,
        },
        Opt::Split {
            axis: reduce.range_id(),
            factor: k / REDUCE_BLOCK,
            target: AxisType::ReduceBlock,
            top: true,
        },
    ];
    let all: Vec<Opt> = opts.iter().chain(&blocking).cloned().collect();
    let fits = all
        .iter()
        .try_fold(OptimizedKernel::new(ast), |k, opt| k.apply(opt))
        .is_ok();
    if fits { blocking } else { Vec::new() }
}

/// The id of the output range to spread over `threads` cores: the contiguous axis of a
/// matmul-shaped kernel when each core gets two of its tiles, else the outermost output axis;
/// `None` when no axis can be split (fewer than two iterations, or a store whose address does
/// not depend on it: cores would race).
fn thread_axis(
    ast: &UOp,
    outputs: &[UOp],
    opts: &[Opt],
    threads: usize,
    tile_width: usize,
) -> Option<usize> {
    let remaining = |r: &UOp| {
        let mut size = r.range_size().unwrap_or(1);
        for opt in opts {
            if let Opt::Split { axis, factor, .. } = opt
                && *axis == r.range_id()
            {
                size /= factor;
            }
        }
        size
    };
    let addressed = |r: &UOp| {
        ast.src()
            .iter()
            .all(|st| st.op() == Op::Store && st.s(0).toposort().contains(r))
    };
    let matmul_columns = match opts.first() {
        Some(Opt::Split { axis, factor, .. }) if *factor == tile_width && outputs.len() == 2 => {
            outputs.iter().find(|r| r.range_id() == *axis)
        }
        _ => None,
    };
    let chosen = matmul_columns
        .filter(|r| remaining(r) >= 2 * threads)
        .or(outputs.first())?;
    (remaining(chosen) >= 2 && addressed(chosen)).then(|| chosen.range_id())
}

/// The innermost output range of constant size divisible by the upcast width along which
/// every store's address advances by exactly one element, with the factor to upcast it by.
fn upcastable_axis(ast: &UOp, outputs: &[UOp], tile_width: usize) -> Option<(UOp, usize)> {
    let stores: Vec<&UOp> = ast.src().iter().filter(|s| s.op() == Op::Store).collect();
    if stores.is_empty() {
        return None;
    }
    let widths: &[usize] = if ast.toposort().iter().any(is_kernel_reduce) {
        &[tile_width, 16, UPCAST_WIDTH]
    } else {
        &[UPCAST_WIDTH]
    };
    outputs.iter().rev().find_map(|r| {
        let size = r.range_size()?;
        let contiguous = stores
            .iter()
            .all(|s| index_stride(&s.s(0).src()[1], r) == Some(1));
        let factor = widths
            .iter()
            .copied()
            .find(|&w| size >= w && size % w == 0)?;
        contiguous.then(|| (r.clone(), factor))
    })
}

/// The contiguous upcast of a one-hot contraction (item 10): 64 accumulators, as many as the
/// 4x16 tile it replaces.
pub const ONE_HOT_UPCAST_WIDTH: usize = 64;

/// The ranges read by the gates of one-hot reduces (`Where(a == b, x, 0)` folded by a sum:
/// an embedding's gradient, whose gate compares the vocabulary index with a token).
fn one_hot_gate_ranges(ast: &UOp) -> Vec<UOp> {
    ast.toposort()
        .iter()
        .filter(|u| is_kernel_reduce(u) && u.reduce_op() == ReduceOp::Add)
        .map(|u| u.s(0))
        .filter(|v| v.op() == Op::Where && v.s(0).op() == Op::CmpEq)
        .flat_map(|v| v.s(0).toposort())
        .filter(|u| u.op() == Op::Range)
        .collect()
}

/// The most elements of a stack axis that item 9 upcasts whole.
pub const STACK_AXIS: usize = 16;

/// Item 9 of the module doc: in a kernel without a reduce, an output range that comparisons
/// read against constants, all multiples of a part size `d` with at most [`STACK_AXIS`] parts
/// (a stack's axis: `d = 1`; a `cat` of equal parts: `d` the part size), and the number of
/// parts, when it divides what the opts so far left of the range.
fn stack_axis(ast: &UOp, outputs: &[UOp], opts: &[Opt]) -> Option<(UOp, usize)> {
    let nodes = ast.toposort();
    if nodes.iter().any(is_kernel_reduce) {
        return None;
    }
    let left = |r: &UOp| {
        opts.iter()
            .filter(|Opt::Split { axis, .. }| *axis == r.range_id())
            .fold(
                r.range_size().unwrap_or(0),
                |n, Opt::Split { factor, .. }| n / factor,
            )
    };
    // Where the comparisons of `r` with constants cut its axis: `r < c` at `c`, `c < r` at
    // `c + 1`, `r == c` and `r != c` at both.
    let cuts = |r: &UOp| -> Vec<i64> {
        nodes
            .iter()
            .filter(|u| matches!(u.op(), Op::CmpLt | Op::CmpNe | Op::CmpEq) && u.src().contains(r))
            .flat_map(|u| {
                let constant = |k: usize| u.s(k).const_value().map(|c| c.as_i64());
                match (u.op(), constant(0), constant(1)) {
                    (Op::CmpLt, None, Some(c)) => vec![c],
                    (Op::CmpLt, Some(c), None) => vec![c + 1],
                    (_, Some(c), None) | (_, None, Some(c)) => vec![c, c + 1],
                    _ => vec![],
                }
            })
            .collect()
    };
    outputs.iter().rev().find_map(|r| {
        let n = r.range_size()? as i64;
        let cuts: Vec<i64> = cuts(r).into_iter().filter(|&c| c > 0 && c < n).collect();
        if cuts.is_empty() {
            return None;
        }
        let part = cuts.into_iter().fold(n, gcd);
        let parts = (n / part) as usize;
        ((2..=STACK_AXIS).contains(&parts) && left(r).is_multiple_of(parts))
            .then(|| (r.clone(), parts))
    })
}

/// The greatest common divisor.
fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// An output range (other than the one already upcast) of size divisible by the upcast width
/// that some load of a reduce kernel does not depend on, innermost first.
fn reuse_axis(ast: &UOp, outputs: &[UOp], upcast: Option<&Opt>) -> Option<UOp> {
    let nodes = ast.toposort();
    if !nodes.iter().any(is_kernel_reduce) {
        return None;
    }
    let loads: Vec<&UOp> = nodes.iter().filter(|u| u.op() == Op::Load).collect();
    let already =
        |r: &UOp| matches!(upcast, Some(Opt::Split { axis, .. }) if *axis == r.range_id());
    outputs.iter().rev().find_map(|r| {
        let size = r.range_size()?;
        let fits = size >= UPCAST_WIDTH && size % UPCAST_WIDTH == 0 && !already(r);
        let reused = loads.iter().any(|l| !l.toposort().contains(r));
        (fits && reused).then(|| r.clone())
    })
}

/// The output range a GPU thread tiles next to its first upcast `first` (the rows of a
/// matmul whose columns it upcasts), when the kernel reduces and some load does not depend on
/// that range (so its values are reused across the tile from registers), with the tile's
/// width on that range: [`GPU_TILE_WIDTH`] when it divides and still leaves
/// [`GPU_TILE_MIN_THREADS`] threads, else [`UPCAST_WIDTH`].
pub fn gpu_tile(ast: &UOp, first: &Opt) -> Option<(UOp, usize)> {
    let Opt::Split { factor, .. } = first;
    let outputs: Vec<UOp> = kernel_ranges(ast)
        .into_iter()
        .filter(|r| r.range_axis_type() == AxisType::Loop)
        .collect();
    let elements = outputs
        .iter()
        .map(|r| r.range_size().unwrap_or(1))
        .fold(1, usize::saturating_mul);
    // A smaller kernel keeps one thread per 1x4 outputs: tiling it would leave the GPU's
    // multiprocessors without enough threads to hide memory latency.
    if elements < GPU_TILE_MIN_OUTPUTS
        || reduces_are_short(ast, reduce_upcast_width(DEFAULT_VECTOR_LANES, 0))
    {
        return None;
    }
    let tile = reuse_axis(ast, &outputs, Some(first))?;
    let divides = tile
        .range_size()
        .is_some_and(|n| n.is_multiple_of(GPU_TILE_WIDTH));
    let enough = elements / (GPU_TILE_WIDTH * factor) >= GPU_TILE_MIN_THREADS;
    Some((
        tile,
        if divides && enough {
            GPU_TILE_WIDTH
        } else {
            UPCAST_WIDTH
        },
    ))
}

/// The LOCAL splits and the reduce split of a GPU contraction tiled per thread (its columns
/// by `columns`, its rows by `rows`, the opts of [`gpu_tile`]): the threads of a block take
/// [`LOCAL_ROWS`] x [`LOCAL_COLUMNS`] neighbouring thread tiles (a 64 x 64 output tile for
/// 8 x 4 per thread), and the reduce [`STAGE_STEPS`] steps at a time, so `codegen::stage`
/// copies each step's operand slices into shared memory once per block. Empty unless the
/// kernel has one reduce range, longer than a step, and the sizes divide.
pub fn gpu_local_tile(ast: &UOp, columns: &Opt, rows: &Opt) -> Vec<Opt> {
    let ranges = kernel_ranges(ast);
    let size_of = |opt: &Opt| {
        let Opt::Split { axis, factor, .. } = opt;
        let range = ranges.iter().find(|r| r.range_id() == *axis)?;
        Some((*axis, range.range_size()? / factor))
    };
    let reduces: Vec<&UOp> = ranges
        .iter()
        .filter(|r| r.range_axis_type() == AxisType::Reduce)
        .collect();
    let (Some((column, column_left)), Some((row, row_left)), [reduce]) =
        (size_of(columns), size_of(rows), reduces.as_slice())
    else {
        return Vec::new();
    };
    let steps = reduce.range_size().unwrap_or(0);
    let fits = column_left.is_multiple_of(LOCAL_COLUMNS)
        && row_left.is_multiple_of(LOCAL_ROWS)
        && steps > STAGE_STEPS
        && steps.is_multiple_of(STAGE_STEPS);
    if !fits {
        return Vec::new();
    }
    let split = |axis, factor, target| Opt::Split {
        axis,
        factor,
        target,
        top: false,
    };
    vec![
        split(row, LOCAL_ROWS, AxisType::Local),
        split(column, LOCAL_COLUMNS, AxisType::Local),
        split(reduce.range_id(), STAGE_STEPS, AxisType::Reduce),
    ]
}

/// The threads of a tiled GPU contraction's block along its rows (see [`gpu_local_tile`]).
pub const LOCAL_ROWS: usize = 8;

/// The threads of a tiled GPU contraction's block along its columns: a warp reads 16
/// neighbouring columns (and two rows) of each staged step.
pub const LOCAL_COLUMNS: usize = 16;

/// The reduce steps whose operand slices a tiled GPU contraction's block stages in shared
/// memory at once. Measured on an H100 (matmul 4096², 8x4 per thread, 8x16 threads, `gpu_bench`):
/// steps of 8 32.3 TFLOP/s, 16 37.4, 32 39.1 (8x8 per thread: 31.8 with 8, 36.3 with 16).
pub const STAGE_STEPS: usize = 32;

/// The fewest outputs a GPU contraction must have to be tiled per thread.
pub const GPU_TILE_MIN_OUTPUTS: usize = 1 << 20;

/// How many rows of a large GPU contraction one thread computes (by the first upcast's 4
/// columns: 32 accumulators). Measured on an H100 (matmul 4096²): 8x4 19.7 TFLOP/s, 4x8
/// 18.5, 8x8 17.3 (96 registers a thread, so 31% occupancy), 4x4 13.1.
pub const GPU_TILE_WIDTH: usize = 8;

/// The fewest threads a tiled GPU contraction keeps (about 500 per multiprocessor of a large
/// GPU): a tile of [`GPU_TILE_WIDTH`] rows that would leave fewer is [`UPCAST_WIDTH`] rows.
pub const GPU_TILE_MIN_THREADS: usize = 1 << 16;

/// How far `idx` moves when `range` goes from 0 to 1 with every other range at 0.
pub fn index_stride(idx: &UOp, range: &UOp) -> Option<i64> {
    let at = |v: i64| eval_index(idx, &HashMap::from([(range.clone(), v)]));
    Some(at(1)? - at(0)?)
}

/// The value of an index expression with the given ranges (others 0), `None` when it reads
/// memory or reduces.
fn eval_index(idx: &UOp, env: &HashMap<UOp, i64>) -> Option<i64> {
    let mut values: HashMap<UOp, Scalar> = HashMap::new();
    for node in idx.toposort() {
        let value = match node.op() {
            Op::Range => Scalar::Int(env.get(&node).copied().unwrap_or(0)),
            Op::Const => node.const_value()?,
            Op::Load | Op::DefineGlobal | Op::Address => return None,
            _ if is_kernel_reduce(&node) => return None,
            op if op.is_elementwise() => {
                let args: Vec<Scalar> = node.src().iter().map(|s| values[s]).collect();
                alu::exec(op, node.dtype(), &args)
            }
            _ => return None,
        };
        values.insert(node, value);
    }
    Some(values[idx].as_i64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;

    /// The AST of the one kernel of `t`.
    fn kernel_ast(t: &Tensor) -> UOp {
        let schedule = create_schedule(&[t.uop()]);
        assert_eq!(schedule.items.len(), 1, "one kernel");
        schedule.items[0].ast.clone()
    }

    fn matrix(rows: usize, cols: usize) -> Tensor {
        Tensor::from_vec(vec![0.5f32; rows * cols], &[rows, cols])
    }

    /// The selects (`Where`s and gated loads) left in `ast` after `opts` and expand.
    fn selects_after_expand(ast: &UOp, opts: &[Opt]) -> usize {
        let expanded = super::super::expand::expand(&OptimizedKernel::new(ast).apply_all(opts).ast);
        expanded
            .toposort()
            .iter()
            .filter(|u| u.op() == Op::Where || (u.op() == Op::Address && u.src().len() > 2))
            .count()
    }

    /// The opts' (range size before the opts, factor, target) per opt, for readable asserts.
    fn described(ast: &UOp, opts: &[Opt]) -> Vec<(usize, usize, AxisType)> {
        let size = |id: usize| {
            kernel_ranges(ast)
                .iter()
                .find(|r| r.range_id() == id)
                .and_then(UOp::range_size)
                .unwrap_or(0)
        };
        opts.iter()
            .map(
                |Opt::Split {
                     axis,
                     factor,
                     target,
                     ..
                 }| (size(*axis), *factor, *target),
            )
            .collect()
    }

    #[test]
    fn gpu_contractions_tile_by_their_size() {
        use AxisType::{Local, Reduce, Upcast};
        let opts = |a: Tensor, b: Tensor| -> Vec<(usize, AxisType, bool)> {
            // The last kernel is the contraction (a wide B may be copied to padded rows first).
            let schedule = create_schedule(&[a.matmul(&b).uop()]);
            let ast = &schedule.items.last().expect("a kernel").ast;
            crate::codegen::gpu_optimizations(ast)
                .iter()
                .map(|opt| {
                    let Opt::Split {
                        factor,
                        top,
                        target,
                        ..
                    } = opt;
                    (*factor, *target, *top)
                })
                .collect()
        };
        // The upcasts take the top of their axes (neighbouring threads, neighbouring
        // elements); a block tile takes 8 x 16 neighbouring threads and stages the reduce
        // 32 steps at a time.
        let block = [(8, Local, false), (16, Local, false), (32, Reduce, false)];
        // 16M outputs: 4 columns by 8 rows per thread, 524,288 threads.
        let tiled = |rows| [(4, Upcast, true), (rows, Upcast, true)];
        assert_eq!(
            opts(matrix(4096, 64), matrix(64, 4096)),
            [tiled(8).as_slice(), &block].concat()
        );
        // 1M outputs: 8 rows would leave 32,768 threads, so 4x4 (65,536).
        assert_eq!(
            opts(matrix(1024, 64), matrix(64, 1024)),
            [tiled(4).as_slice(), &block].concat()
        );
        // Fewer outputs: one thread per 1x4.
        assert_eq!(opts(matrix(512, 64), matrix(64, 512)), [(4, Upcast, true)]);
        // A short reduce is not a contraction worth tiling.
        assert_eq!(opts(matrix(4096, 8), matrix(8, 4096)), [(4, Upcast, true)]);
        // A reduce of one step is tiled per thread but not staged.
        assert_eq!(opts(matrix(4096, 32), matrix(32, 4096)), tiled(8));
    }

    #[test]
    fn a_matmul_spreads_its_column_tiles_over_the_cores() {
        let (a, b) = (matrix(256, 64), matrix(64, 512));
        let ast = kernel_ast(&a.matmul(&b));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert_eq!(
            described(&ast, &opts),
            vec![
                (512, 16, AxisType::Upcast),
                (256, 4, AxisType::Upcast),
                (512, 2, AxisType::Thread),
            ]
        );
    }

    #[test]
    fn with_avx512_vectors_a_big_matmul_row_holds_two_sixteen_lane_registers() {
        let (a, b) = (matrix(512, 512), matrix(512, 512));
        let ast = kernel_ast(&a.matmul(&b));
        let first = described(&ast, &hand_coded_optimizations(&ast, 2, 16))[0];
        assert_eq!(first, (512, 32, AxisType::Upcast), "2^27 multiply-adds");
        // A row of 48 is no multiple of 32: two 8-lane registers' worth, as with AVX2.
        let ast = kernel_ast(&matrix(2048, 2048).matmul(&matrix(2048, 48)));
        let first = described(&ast, &hand_coded_optimizations(&ast, 2, 16))[0];
        assert_eq!(first, (48, 16, AxisType::Upcast));
    }

    #[test]
    fn a_small_matmul_keeps_the_sixteen_wide_tile_that_compiles_in_half_the_time() {
        let (a, b) = (matrix(256, 64), matrix(64, 512));
        let ast = kernel_ast(&a.matmul(&b));
        let with_avx512 = hand_coded_optimizations(&ast, 2, 16);
        assert_eq!(with_avx512, hand_coded_optimizations(&ast, 2, 8));
        assert_eq!(
            described(&ast, &with_avx512)[0],
            (512, 16, AxisType::Upcast)
        );
    }

    #[test]
    fn a_matmul_with_few_column_tiles_spreads_its_rows() {
        let (a, b) = (matrix(1024, 64), matrix(64, 32));
        let ast = kernel_ast(&a.matmul(&b));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert_eq!(
            described(&ast, &opts),
            vec![
                (32, 16, AxisType::Upcast),
                (1024, 4, AxisType::Upcast),
                (1024, 2, AxisType::Thread),
            ]
        );
    }

    #[test]
    fn only_kernels_of_at_least_two_to_the_seventeen_iterations_are_threaded() {
        // A single-sample weight gradient: the 784 x 128 outer product.
        let (x, g) = (matrix(784, 1), matrix(1, 128));
        let outer = kernel_ast(&(x.expand(&[784, 128]) * g.expand(&[784, 128])));
        let threaded = |ast: &UOp| {
            hand_coded_optimizations(ast, 2, DEFAULT_VECTOR_LANES)
                .iter()
                .any(|Opt::Split { target, .. }| *target == AxisType::Thread)
        };
        assert!(!threaded(&outer), "100352 iterations run on one core");
        let (x, g) = (matrix(2048, 1), matrix(1, 128));
        let large = kernel_ast(&(x.expand(&[2048, 128]) * g.expand(&[2048, 128])));
        assert!(
            threaded(&large),
            "262144 iterations are spread over the cores"
        );
    }

    #[test]
    fn a_tiny_kernel_gets_only_a_four_wide_upcast() {
        // A row max over 10 classes of 256 samples: 2560 iterations.
        let ast = kernel_ast(&matrix(256, 10).max(-1, false));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert_eq!(
            described(&ast, &opts),
            vec![(256, UPCAST_WIDTH, AxisType::Upcast)]
        );
    }

    #[test]
    fn a_matmul_with_a_short_reduce_gets_no_reuse_upcast() {
        let (a, b) = (matrix(256, 10), matrix(10, 128));
        let ast = kernel_ast(&a.matmul(&b));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert_eq!(
            described(&ast, &opts),
            vec![(128, 16, AxisType::Upcast), (128, 2, AxisType::Thread)]
        );
        let (a, b) = (matrix(256, 16), matrix(16, 128));
        let ast = kernel_ast(&a.matmul(&b));
        let long = described(
            &ast,
            &hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES),
        );
        assert!(long.contains(&(256, 4, AxisType::Upcast)), "{long:?}");
    }

    #[test]
    fn a_matmul_with_a_long_reduce_is_cache_blocked() {
        // 1536 columns: rows 6 KiB apart, so no staggered copy (a second kernel).
        let (a, b) = (matrix(1024, 1024), matrix(1024, 1536));
        let ast = kernel_ast(&a.matmul(&b));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert_eq!(
            described(&ast, &opts),
            vec![
                (1536, 16, AxisType::Upcast),
                (1024, 4, AxisType::Upcast),
                (1536, COLUMN_TILES_PER_BLOCK, AxisType::Loop),
                (1024, 1024 / REDUCE_BLOCK, AxisType::ReduceBlock),
                (1536, 2, AxisType::Thread),
            ]
        );
    }

    #[test]
    fn a_matmul_with_an_epilogue_is_not_cache_blocked() {
        let (a, b) = (matrix(64, 1024), matrix(1024, 512));
        let ast = kernel_ast(&a.matmul(&b).relu());
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert!(
            described(&ast, &opts)
                .iter()
                .all(|o| o.2 != AxisType::ReduceBlock),
            "{opts:?}"
        );
    }

    #[test]
    fn a_matmul_with_a_transposed_weight_gets_a_register_tile_with_lane_accumulators() {
        // `x @ w.T` (an `nn::linear`): both operands advance by one element along the reduce,
        // the weight rows are 256 floats apart, so the 16-wide column upcast would gather.
        let (x, w) = (matrix(256, 256), matrix(64, 256));
        let ast = kernel_ast(&x.matmul(&w.transpose(0, 1)));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert_eq!(
            described(&ast, &opts),
            vec![
                (64, UPCAST_WIDTH, AxisType::Upcast),
                (256, 2, AxisType::Upcast),
                (256, DOT_LANES, AxisType::Lane),
                (256, 2, AxisType::Thread),
            ]
        );
    }

    #[test]
    fn an_integer_dot_form_keeps_unrolled_partial_accumulators() {
        let x = Tensor::from_vec(vec![1i32; 64 * 256], &[64, 256]);
        let w = Tensor::from_vec(vec![2i32; 16 * 256], &[16, 256]);
        let ast = kernel_ast(&x.matmul(&w.transpose(0, 1)));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        let described = described(&ast, &opts);
        assert!(
            described.iter().all(|o| o.2 != AxisType::Lane)
                && described.contains(&(256, REDUCE_LANES, AxisType::Unroll)),
            "{described:?}"
        );
    }

    #[test]
    fn a_row_sum_gets_partial_accumulators_instead_of_a_gathering_row_upcast() {
        let ast = kernel_ast(&matrix(64, 4096).sum(-1, false));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert_eq!(
            described(&ast, &opts),
            vec![
                (4096, REDUCE_LANES, AxisType::Unroll),
                (64, 2, AxisType::Thread)
            ]
        );
    }

    #[test]
    fn a_taps_first_conv_input_gradient_is_a_matmul_tile_over_the_merged_positions() {
        // cols_grad[b, c, t, y, x] = sum_o g[b, o, y, x] * w[o, c, t]: the 8 x 24 positions are
        // one contiguous range of 192 and so are the 4 x 9 (channel, tap) pairs (schedule::merge);
        // the positions are upcast 16 wide and g does not depend on the pairs: a 4 x 16
        // register tile, as a matmul gets.
        let g = Tensor::from_vec(vec![0.5f32; 4 * 16 * 8 * 24], &[4, 16, 8, 24]);
        let w = Tensor::from_vec(vec![0.5f32; 16 * 4 * 9], &[16, 4, 9]);
        let g = g.permute(&[0, 2, 3, 1]).reshape(&[4, 1, 1, 8, 24, 16]);
        let w = w.permute(&[1, 2, 0]).reshape(&[1, 4, 9, 1, 1, 16]);
        let ast = kernel_ast(&g.mul(&w).sum(-1, false));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert_eq!(
            described(&ast, &opts),
            vec![
                (192, 16, AxisType::Upcast),
                (36, UPCAST_WIDTH, AxisType::Upcast),
                (4, 2, AxisType::Thread),
            ]
        );
    }

    #[test]
    fn a_one_hot_contraction_upcasts_its_row_whole_instead_of_a_tile_of_the_gated_axis() {
        // An embedding's gradient: table[v, d] = sum over t of (tokens[t] == v ? g[t, d] : 0).
        let tokens = Tensor::from_vec((0..32i64).map(|t| t * 7 % 1000).collect(), &[32, 1, 1]);
        let vocabulary = Tensor::arange(1000i64).reshape(&[1, 1000, 1]);
        let g = matrix(32, 64).reshape(&[32, 1, 64]);
        let table = tokens.eq(&vocabulary).where_(&g, 0.0).sum(0, false);
        let ast = kernel_ast(&table);
        assert!(!one_hot_gate_ranges(&ast).is_empty(), "a one-hot reduce");
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        let described = described(&ast, &opts);
        assert_eq!(described[0], (64, ONE_HOT_UPCAST_WIDTH, AxisType::Upcast));
        assert!(
            !described.contains(&(1000, UPCAST_WIDTH, AxisType::Upcast)),
            "{described:?}"
        );
    }

    #[test]
    fn a_stack_axis_is_upcast_whole_and_its_gates_fold() {
        // Three shifted row blocks of x stacked ahead of the positions: [3, 64, 64].
        let x = matrix(66, 64);
        let taps: Vec<Tensor> = (0..3).map(|k| x.narrow(0, k, 64)).collect();
        let ast = kernel_ast(&Tensor::stack(&taps, 0));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert!(
            described(&ast, &opts).contains(&(3, 3, AxisType::Upcast)),
            "{opts:?}"
        );
        let selects = selects_after_expand(&ast, &opts);
        assert_eq!(selects, 0, "every copy reads its own view without a select");
    }

    #[test]
    fn a_cat_of_equal_parts_upcasts_its_parts_and_their_gates_fold() {
        // [64, 3 x 64]: the cat's gates cut the last axis at 64 and 128.
        let parts: Vec<Tensor> = (0..3).map(|_| matrix(64, 64)).collect();
        let ast = kernel_ast(&Tensor::cat(&parts, 1));
        let opts = hand_coded_optimizations(&ast, 2, DEFAULT_VECTOR_LANES);
        assert!(
            opts.contains(&Opt::Split {
                axis: 1,
                factor: 3,
                target: AxisType::Upcast,
                top: true
            }),
            "{opts:?}"
        );
        let selects = selects_after_expand(&ast, &opts);
        assert_eq!(
            selects, 0,
            "every part reads its own input without a select"
        );
    }
}
