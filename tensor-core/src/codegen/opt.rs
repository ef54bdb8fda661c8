//! OptOps (tinyspec "Kernel Optimizations"): transforms of a kernel's ranges.
//!
//! A kernel's iteration space is its `Range` nodes; each has an [`AxisType`]. An [`Opt`] splits
//! one range into two, substituting `r = outer * k + inner` everywhere in the AST, and gives the
//! new sub-axis a target axis type (UPCAST, UNROLL, ...).
//!
//! THREAD is the one split that does not need `k` to divide the range: the range is cut into
//! `k` contiguous chunks, chunk `c` running on core `c` (`[c*n/k, (c+1)*n/k)`). The chunk
//! number is the core id and never appears as a loop, so a THREAD split only retypes the range
//! and records the core count; the renderer gives each core its bounds.
//!
//! REDUCEBLOCK (cache blocking) splits a reduce range `r` into `factor` blocks: the block
//! number `b` leaves the Reduce and becomes a loop outside the output loops, and every store
//! of the reduce accumulates into its output (`b == 0 ? 0 : out`, plus the block's sum), so
//! the operands' slices of one block stay in cache while every output tile passes by. It
//! applies only where each store writes a float sum over `r` as it is (no epilogue).
//!
//! GROUP and GROUPTOP (GPU) split a reduce or loop range into `factor` lanes: the new GROUP
//! sub-axis is the thread's position in a block of `factor` threads that share one output
//! (`codegen::gpu` maps it to `threadIdx.x`), so each thread runs `n/factor` of the values and
//! `codegen::group` combines the threads' partial results in shared memory. GROUP takes the
//! inner part (`r = outer * factor + lane`: neighbouring threads read neighbouring values, a
//! warp's loads are coalesced), GROUPTOP the outer one (`r = lane * n/factor + inner`: each
//! thread a contiguous run). A kernel's GROUP splits share one block, so they have one factor,
//! and a kernel has GROUP or LOCAL ranges, not both (both are the block's threads).

use crate::rewrite::{PatternMatcher, UPat, graph_rewrite};
use crate::uop::substitute;
use crate::uop::{Arg, AxisType, Op, ReduceOp, UOp};
use std::collections::HashMap;
use std::sync::OnceLock;

/// One optimization of a kernel's ranges.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Opt {
    /// Split range `axis` (its range id) of size `n` by `factor`: into `(n/factor, factor)`
    /// with the new inner sub-axis of type `target`, or `(factor, n/factor)` with the new outer
    /// sub-axis of type `target` when `top`. With `target == Thread` (always `top`), `factor`
    /// is the number of cores and need not divide `n`.
    Split {
        /// The id of the range to split.
        axis: usize,
        /// The size of the new sub-axis (the number of cores for `Thread`).
        factor: usize,
        /// The axis type of the new sub-axis.
        target: AxisType,
        /// Whether the new sub-axis is the outer one.
        top: bool,
    },
}

impl Opt {
    /// The axis type the opt gives its new sub-axis.
    pub fn target(&self) -> AxisType {
        let Opt::Split { target, .. } = self;
        *target
    }
}

/// A kernel AST with the opts applied so far and the core count they chose.
#[derive(Clone, Debug)]
pub struct OptimizedKernel {
    /// The AST with split and retyped ranges.
    pub ast: UOp,
    /// How many cores the THREAD axis is spread over (1 without one).
    pub threads: usize,
}

/// Why an opt cannot be applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptError(pub String);

impl OptimizedKernel {
    /// An unoptimized kernel.
    pub fn new(ast: &UOp) -> OptimizedKernel {
        OptimizedKernel {
            ast: ast.clone(),
            threads: 1,
        }
    }

    /// The kernel after every opt in order. Panics on an opt that does not fit (the heuristic
    /// only proposes opts that fit).
    #[track_caller]
    pub fn apply_all(self, opts: &[Opt]) -> OptimizedKernel {
        opts.iter().fold(self, |k, opt| match k.apply(opt) {
            Ok(k) => k,
            Err(OptError(why)) => panic!("cannot apply {opt:?}: {why}"),
        })
    }

    /// The kernel after one opt.
    pub fn apply(&self, opt: &Opt) -> Result<OptimizedKernel, OptError> {
        let Opt::Split {
            axis,
            factor,
            target,
            top,
        } = *opt;
        let range = find_range(&self.ast, axis)
            .ok_or_else(|| OptError(format!("the kernel has no range with id {axis}")))?;
        let size = range
            .range_size()
            .ok_or_else(|| OptError(format!("range {axis} has a symbolic size")))?;
        if factor < 2 {
            return Err(OptError(format!("split factor {factor} is below 2")));
        }
        if target == AxisType::Thread {
            return self.thread(&range, size, factor, top);
        }
        if target == AxisType::ReduceBlock {
            return self.reduce_block(&range, size, factor, top);
        }
        self.check_block(&range, factor, target)?;
        if size % factor != 0 {
            return Err(OptError(format!(
                "factor {factor} does not divide range {axis} of size {size}"
            )));
        }
        let fresh = next_range_id(&self.ast);
        let old_type = range.range_axis_type();
        let (outer, inner) = if top {
            (
                UOp::range(factor, fresh, target),
                UOp::range(size / factor, axis, old_type),
            )
        } else {
            (
                UOp::range(size / factor, axis, old_type),
                UOp::range(factor, fresh, target),
            )
        };
        let ast = split_range(&self.ast, &range, &outer, &inner);
        Ok(OptimizedKernel {
            ast,
            threads: self.threads,
        })
    }

    fn thread(
        &self,
        range: &UOp,
        size: usize,
        cores: usize,
        top: bool,
    ) -> Result<OptimizedKernel, OptError> {
        if !top {
            return Err(OptError("a THREAD split is always the outer part".into()));
        }
        if range.range_axis_type() != AxisType::Loop {
            return Err(OptError("only LOOP ranges can be spread over cores".into()));
        }
        let addressed = self
            .ast
            .src()
            .iter()
            .all(|st| st.op() == Op::Store && st.s(0).toposort().contains(range));
        if !addressed {
            return Err(OptError(
                "cores would race: some store's address does not depend on the range".into(),
            ));
        }
        if self.threads > 1 {
            return Err(OptError("the kernel already has a THREAD axis".into()));
        }
        let Arg::Range { id, .. } = range.arg() else {
            unreachable!("find_range returns ranges")
        };
        let threaded = UOp::range(size, *id, AxisType::Thread);
        let ast = substitute(&self.ast, &HashMap::from([(range.clone(), threaded)]));
        Ok(OptimizedKernel {
            ast,
            threads: cores.min(size),
        })
    }
}

impl OptimizedKernel {
    /// Refuses a GROUP split that does not fit the kernel's block (see the module doc), and a
    /// LOCAL split in a kernel with GROUP ranges.
    fn check_block(&self, range: &UOp, factor: usize, target: AxisType) -> Result<(), OptError> {
        let ranges = kernel_ranges(&self.ast);
        let of_type = |t| ranges.iter().find(|r| r.range_axis_type() == t);
        match target {
            AxisType::Group => {
                if !matches!(range.range_axis_type(), AxisType::Reduce | AxisType::Loop) {
                    return Err(OptError(format!(
                        "a GROUP split takes a reduce or loop range, not a {:?} one",
                        range.range_axis_type()
                    )));
                }
                if of_type(AxisType::Local).is_some() {
                    return Err(OptError(
                        "the kernel has LOCAL ranges: its block is a tile of outputs".into(),
                    ));
                }
                match of_type(AxisType::Group).and_then(UOp::range_size) {
                    Some(lanes) if lanes != factor => Err(OptError(format!(
                        "the kernel's GROUP splits share one block of {lanes} threads, not {factor}"
                    ))),
                    _ => Ok(()),
                }
            }
            AxisType::Local if of_type(AxisType::Group).is_some() => Err(OptError(
                "the kernel has GROUP ranges: its block splits the work of one output".into(),
            )),
            _ => Ok(()),
        }
    }

    fn reduce_block(
        &self,
        range: &UOp,
        size: usize,
        blocks: usize,
        top: bool,
    ) -> Result<OptimizedKernel, OptError> {
        if !top || range.range_axis_type() != AxisType::Reduce || !size.is_multiple_of(blocks) {
            return Err(OptError(format!(
                "a REDUCEBLOCK split is the outer part of a reduce range, in blocks that divide \
                 its size {size}"
            )));
        }
        let plain_sums = self.ast.src().iter().all(|st| {
            st.op() == Op::Store && {
                let value = st.s(1);
                value.op() == Op::Reduce
                    && value.reduce_op() == ReduceOp::Add
                    && value.dtype().is_float()
                    && value.src()[1..].contains(range)
            }
        });
        if !plain_sums {
            return Err(OptError(
                "only a kernel whose every store writes a float sum over the range can \
                 accumulate it block by block"
                    .into(),
            ));
        }
        let block = UOp::range(blocks, next_range_id(&self.ast), AxisType::ReduceBlock);
        let inner = UOp::range(size / blocks, range.range_id(), AxisType::Reduce);
        let split = split_range(&self.ast, range, &block, &inner);
        let stores = split
            .src()
            .iter()
            .map(|st| accumulate_block(st, &block))
            .collect();
        Ok(OptimizedKernel {
            ast: split.with_src(stores),
            threads: self.threads,
        })
    }
}

/// `Store(out, Reduce(v, .., block, inner, ..))` => `Store(out, (block == 0 ? 0 : out) +
/// Reduce(v, .., inner, ..))`: the store adds one block's sum to the previous blocks'.
fn accumulate_block(store: &UOp, block: &UOp) -> UOp {
    let (address, reduce) = (store.s(0), store.s(1));
    let mut src = vec![reduce.s(0).clone()];
    src.extend(reduce.src()[1..].iter().filter(|r| *r != block).cloned());
    let dtype = reduce.dtype();
    let first = UOp::alu(Op::CmpLt, vec![block.clone(), UOp::index(1)]);
    let previous = UOp::new(Op::Load, dtype, vec![address.clone()], Arg::None);
    let start = UOp::alu(Op::Where, vec![first, UOp::constant(0.0, dtype), previous]);
    let value = UOp::alu(Op::Add, vec![start, reduce.with_src(src)]);
    store.with_src(vec![address.clone(), value])
}

/// Every range of the AST, sorted by id.
pub fn kernel_ranges(ast: &UOp) -> Vec<UOp> {
    let mut ranges: Vec<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Op::Range)
        .collect();
    ranges.sort_by_key(UOp::range_id);
    ranges
}

fn find_range(ast: &UOp, id: usize) -> Option<UOp> {
    kernel_ranges(ast).into_iter().find(|r| r.range_id() == id)
}

fn next_range_id(ast: &UOp) -> usize {
    kernel_ranges(ast).last().map_or(0, |r| r.range_id() + 1)
}

/// A split in progress: the range and what it becomes.
struct SplitCtx {
    range: UOp,
    outer: UOp,
    inner: UOp,
    /// `outer * inner.size + inner`, the value of the old range.
    value: UOp,
}

/// The rule table of a split, one row per fact.
fn split_rules() -> &'static PatternMatcher<SplitCtx> {
    static TABLE: OnceLock<PatternMatcher<SplitCtx>> = OnceLock::new();
    TABLE.get_or_init(|| {
        PatternMatcher::new()
            // r                                  => outer * k + inner
            .rule(UPat::op(Op::Range), |m, ctx: &mut SplitCtx| {
                (*m.root() == ctx.range).then(|| ctx.value.clone())
            })
            // Reduce(v, .., outer * k + inner, ..) => Reduce(v, .., outer, inner, ..)
            .rule(UPat::op(Op::Reduce), |m, ctx: &mut SplitCtx| {
                let reduce = m.root();
                if reduce.src().len() < 2 || !reduce.src()[1..].contains(&ctx.value) {
                    return None;
                }
                let mut src = vec![reduce.s(0).clone()];
                for r in &reduce.src()[1..] {
                    match *r == ctx.value {
                        true => src.extend([ctx.outer.clone(), ctx.inner.clone()]),
                        false => src.push(r.clone()),
                    }
                }
                Some(reduce.with_src(src))
            })
    })
}

/// `ast` with `range` replaced by `outer * inner.size + inner`; in a Reduce's range list the
/// range is replaced by the two sub-ranges.
fn split_range(ast: &UOp, range: &UOp, outer: &UOp, inner: &UOp) -> UOp {
    let k = UOp::index(
        inner
            .range_size()
            .expect("split sub-ranges have constant sizes") as i64,
    );
    let value = UOp::alu(
        Op::Add,
        vec![UOp::alu(Op::Mul, vec![outer.clone(), k]), inner.clone()],
    );
    let mut ctx = SplitCtx {
        range: range.clone(),
        outer: outer.clone(),
        inner: inner.clone(),
        value,
    };
    graph_rewrite(ast, split_rules(), &mut ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::DType;

    fn sum_rows(rows: usize, cols: usize) -> UOp {
        let (i, j) = (
            UOp::range(rows, 0, AxisType::Loop),
            UOp::range(cols, 1, AxisType::Reduce),
        );
        let buf = UOp::new(Op::DefineGlobal, DType::F32, vec![], Arg::Int(0));
        let flat = UOp::alu(
            Op::Add,
            vec![
                UOp::alu(Op::Mul, vec![i.clone(), UOp::index(cols as i64)]),
                j.clone(),
            ],
        );
        let x = UOp::new(
            Op::Load,
            DType::F32,
            vec![UOp::new(
                Op::Address,
                DType::F32,
                vec![buf.clone(), flat],
                Arg::None,
            )],
            Arg::None,
        );
        let sum = UOp::new(
            Op::Reduce,
            DType::F32,
            vec![x, j],
            Arg::Reduce(ReduceOp::Add, vec![]),
        );
        let out = UOp::new(Op::Address, DType::F32, vec![buf, i], Arg::None);
        UOp::sink(vec![UOp::store(&out, &sum)])
    }

    #[test]
    fn splitting_a_reduce_range_puts_both_parts_in_the_reduce() {
        let k = OptimizedKernel::new(&sum_rows(3, 8));
        let split = k
            .apply(&Opt::Split {
                axis: 1,
                factor: 4,
                target: AxisType::Unroll,
                top: false,
            })
            .expect("4 divides 8");
        let reduce = split
            .ast
            .toposort()
            .into_iter()
            .find(|u| u.op() == Op::Reduce)
            .expect("a reduce");
        let ranges: Vec<(usize, AxisType, Option<usize>)> = reduce.src()[1..]
            .iter()
            .map(|r| (r.range_id(), r.range_axis_type(), r.range_size()))
            .collect();
        assert_eq!(
            ranges,
            vec![
                (1, AxisType::Reduce, Some(2)),
                (2, AxisType::Unroll, Some(4))
            ]
        );
    }

    #[test]
    fn a_split_that_does_not_divide_the_range_is_refused() {
        let k = OptimizedKernel::new(&sum_rows(3, 8));
        let err = k
            .apply(&Opt::Split {
                axis: 1,
                factor: 3,
                target: AxisType::Unroll,
                top: false,
            })
            .unwrap_err();
        assert!(err.0.contains("does not divide"), "{err:?}");
    }

    #[test]
    fn a_thread_split_retypes_the_range_and_caps_cores_at_its_size() {
        let k = OptimizedKernel::new(&sum_rows(3, 8));
        let threaded = k
            .apply(&Opt::Split {
                axis: 0,
                factor: 8,
                target: AxisType::Thread,
                top: true,
            })
            .expect("loop ranges can be threaded");
        assert_eq!(threaded.threads, 3);
        let types: Vec<AxisType> = kernel_ranges(&threaded.ast)
            .iter()
            .map(UOp::range_axis_type)
            .collect();
        assert_eq!(types, vec![AxisType::Thread, AxisType::Reduce]);
        let again = threaded.apply(&Opt::Split {
            axis: 1,
            factor: 2,
            target: AxisType::Thread,
            top: true,
        });
        assert!(again.is_err());
    }

    fn split(axis: usize, factor: usize, target: AxisType, top: bool) -> Opt {
        Opt::Split {
            axis,
            factor,
            target,
            top,
        }
    }

    /// The reduce ranges of the kernel's Reduce: (id, type, size).
    fn reduce_ranges(ast: &UOp) -> Vec<(usize, AxisType, Option<usize>)> {
        let reduce = ast
            .toposort()
            .into_iter()
            .find(|u| u.op() == Op::Reduce)
            .expect("a reduce");
        reduce.src()[1..]
            .iter()
            .map(|r| (r.range_id(), r.range_axis_type(), r.range_size()))
            .collect()
    }

    #[test]
    fn group_takes_the_inner_part_of_a_reduce_and_grouptop_the_outer() {
        let k = OptimizedKernel::new(&sum_rows(3, 256));
        let group = k.apply(&split(1, 32, AxisType::Group, false)).unwrap();
        assert_eq!(
            reduce_ranges(&group.ast),
            [
                (1, AxisType::Reduce, Some(8)),
                (2, AxisType::Group, Some(32))
            ]
        );
        let top = k.apply(&split(1, 32, AxisType::Group, true)).unwrap();
        assert_eq!(
            reduce_ranges(&top.ast),
            [
                (2, AxisType::Group, Some(32)),
                (1, AxisType::Reduce, Some(8))
            ]
        );
        // An output loop can be split across the block too (its stores are the lanes').
        assert!(k.apply(&split(0, 3, AxisType::Group, false)).is_ok());
    }

    #[test]
    fn a_kernels_group_splits_share_one_block_and_exclude_local_ranges() {
        let k = OptimizedKernel::new(&sum_rows(4, 256));
        let grouped = k.apply(&split(1, 32, AxisType::Group, false)).unwrap();
        let err = grouped
            .apply(&split(0, 2, AxisType::Group, false))
            .unwrap_err();
        assert!(err.0.contains("one block of 32"), "{err:?}");
        let err = grouped
            .apply(&split(0, 2, AxisType::Local, false))
            .unwrap_err();
        assert!(err.0.contains("GROUP ranges"), "{err:?}");
        let local = k.apply(&split(0, 2, AxisType::Local, false)).unwrap();
        let err = local
            .apply(&split(1, 32, AxisType::Group, false))
            .unwrap_err();
        assert!(err.0.contains("LOCAL ranges"), "{err:?}");
        let upcast = k.apply(&split(0, 2, AxisType::Upcast, false)).unwrap();
        let new_upcast = kernel_ranges(&upcast.ast).last().unwrap().range_id();
        let err = upcast
            .apply(&split(new_upcast, 2, AxisType::Group, false))
            .unwrap_err();
        assert!(err.0.contains("reduce or loop range"), "{err:?}");
    }

    fn block_opt(blocks: usize) -> Opt {
        Opt::Split {
            axis: 1,
            factor: blocks,
            target: AxisType::ReduceBlock,
            top: true,
        }
    }

    #[test]
    fn a_reduce_block_moves_out_of_the_reduce_and_the_store_accumulates() {
        let blocked = OptimizedKernel::new(&sum_rows(3, 8))
            .apply(&block_opt(2))
            .expect("a plain sum can be blocked");
        let nodes = blocked.ast.toposort();
        let reduce = nodes
            .iter()
            .find(|u| u.op() == Op::Reduce)
            .expect("a reduce");
        let inner: Vec<(AxisType, Option<usize>)> = reduce.src()[1..]
            .iter()
            .map(|r| (r.range_axis_type(), r.range_size()))
            .collect();
        assert_eq!(inner, vec![(AxisType::Reduce, Some(4))]);
        let block = kernel_ranges(&blocked.ast)
            .into_iter()
            .find(|r| r.range_axis_type() == AxisType::ReduceBlock)
            .expect("a block range");
        assert_eq!(block.range_size(), Some(2));
        let store = blocked.ast.s(0);
        let reads_output = store
            .s(1)
            .toposort()
            .iter()
            .any(|u| u.op() == Op::Load && u.s(0) == store.s(0));
        assert!(
            reads_output,
            "the store adds to what the previous blocks wrote"
        );
    }

    #[test]
    fn a_reduce_block_needs_a_plain_float_sum_and_a_dividing_count() {
        let k = OptimizedKernel::new(&sum_rows(3, 8));
        assert!(k.apply(&block_opt(3)).is_err());
        let store = k.ast.s(0);
        let epilogue = UOp::alu(Op::Mul, vec![store.s(1).clone(), store.s(1).clone()]);
        let squared = UOp::sink(vec![UOp::store(store.s(0), &epilogue)]);
        let err = OptimizedKernel::new(&squared)
            .apply(&block_opt(2))
            .unwrap_err();
        assert!(err.0.contains("float sum"), "{err:?}");
    }
}
