//! The moves of a search over OptOps (`BEAM=n`, run by the runtime, which times them): from
//! a kernel with some opts applied, every single opt that can be added to it.
//!
//! The moves are the splits the hand-coded heuristic makes, with every factor that divides:
//! an output (LOOP) range upcast (register tiles), split into an inner LOOP (loop order for
//! cache reuse) or spread over the cores (THREAD, once, and only over a range every store's
//! address depends on, so cores never write the same element); a reduce range unrolled into
//! partial accumulators (UNROLL), kept as a loop over an array of partial sums (LANE, which
//! the C compiler vectorizes; offered for float sums only, as the renderer accepts), or cut
//! into cache blocks (REDUCEBLOCK). Only moves the kernel
//! accepts are returned (`OptimizedKernel::apply` succeeds), and none that would unroll more
//! than [`MAX_UNROLLED`] copies of the loop body in all.

use super::expand::is_kernel_reduce;
use super::opt::{Opt, OptimizedKernel, kernel_ranges};
use crate::uop::{AxisType, DType, Op, ReduceOp, UOp};

/// The most copies of the body that the UPCAST and UNROLL axes of one kernel may make.
pub const MAX_UNROLLED: usize = 256;

/// The factors a move splits by (those that divide the range are tried).
const FACTORS: [usize; 5] = [2, 3, 4, 8, 16];

/// Every opt that can be added to `kernel` (see the module docs) on a machine with `threads`
/// cores.
pub fn moves(kernel: &OptimizedKernel, threads: usize) -> Vec<Opt> {
    let ranges = kernel_ranges(&kernel.ast);
    let unrolled: usize = ranges
        .iter()
        .filter(|r| matches!(r.range_axis_type(), AxisType::Upcast | AxisType::Unroll))
        .filter_map(UOp::range_size)
        .product();
    let threaded = ranges
        .iter()
        .any(|r| r.range_axis_type() == AxisType::Thread);
    let mut moves = Vec::new();
    for range in &ranges {
        let Some(size) = range.range_size() else {
            continue;
        };
        let split = |factor: usize, target: AxisType, top: bool| Opt::Split {
            axis: range.range_id(),
            factor,
            target,
            top,
        };
        let divides = FACTORS
            .into_iter()
            .filter(|&f| f < size && size.is_multiple_of(f));
        match range.range_axis_type() {
            AxisType::Loop => {
                for f in divides {
                    if unrolled * f <= MAX_UNROLLED {
                        moves.push(split(f, AxisType::Upcast, false));
                    }
                    moves.push(split(f, AxisType::Loop, false));
                }
                if threads > 1 && !threaded && size >= 2 && every_store_depends_on(kernel, range) {
                    moves.push(split(threads, AxisType::Thread, true));
                }
            }
            AxisType::Reduce => {
                for f in divides {
                    if unrolled * f <= MAX_UNROLLED {
                        moves.push(split(f, AxisType::Unroll, false));
                    }
                    if f >= 4 && float_sums_over(kernel, range) {
                        moves.push(split(f, AxisType::Lane, false));
                    }
                    moves.push(split(f, AxisType::ReduceBlock, true));
                }
            }
            _ => {}
        }
    }
    moves.retain(|m| kernel.apply(m).is_ok());
    moves
}

/// True when every reduce over `range` is an `f32`/`f64` sum (what a LANE split renders).
fn float_sums_over(kernel: &OptimizedKernel, range: &UOp) -> bool {
    kernel
        .ast
        .toposort()
        .iter()
        .filter(|u| is_kernel_reduce(u) && u.src()[1..].contains(range))
        .all(|red| {
            red.reduce_op() == ReduceOp::Add && matches!(red.dtype(), DType::F32 | DType::F64)
        })
}

fn every_store_depends_on(kernel: &OptimizedKernel, range: &UOp) -> bool {
    kernel
        .ast
        .src()
        .iter()
        .all(|st| st.op() == Op::Store && st.s(0).toposort().contains(range))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;

    fn kernel_of(t: &Tensor) -> OptimizedKernel {
        let schedule = create_schedule(&[t.uop()]);
        assert_eq!(schedule.items.len(), 1);
        OptimizedKernel::new(&schedule.items[0].ast)
    }

    fn targets(moves: &[Opt]) -> Vec<AxisType> {
        moves
            .iter()
            .map(|Opt::Split { target, .. }| *target)
            .collect()
    }

    #[test]
    fn a_matmul_can_be_tiled_unrolled_blocked_and_threaded() {
        let a = Tensor::from_vec(vec![1.0f32; 32 * 64], &[32, 64]);
        let b = Tensor::from_vec(vec![1.0f32; 64 * 48], &[64, 48]);
        let moves = moves(&kernel_of(&a.matmul(&b)), 2);
        let kinds = targets(&moves);
        for kind in [
            AxisType::Upcast,
            AxisType::Loop,
            AxisType::Thread,
            AxisType::Unroll,
            AxisType::Lane,
            AxisType::ReduceBlock,
        ] {
            assert!(kinds.contains(&kind), "{kind:?} in {moves:?}");
        }
        let kernel = kernel_of(&a.matmul(&b));
        assert!(moves.iter().all(|m| kernel.apply(m).is_ok()));
    }

    #[test]
    fn a_threaded_kernel_is_not_threaded_again_and_unrolling_is_bounded() {
        let x = Tensor::from_vec(vec![1.0f32; 64 * 64], &[64, 64]);
        let kernel = kernel_of(&(&x * 2.0));
        let first = moves(&kernel, 2);
        let thread = first
            .iter()
            .find(|m| {
                matches!(
                    m,
                    Opt::Split {
                        target: AxisType::Thread,
                        ..
                    }
                )
            })
            .expect("a thread move");
        let threaded = kernel.apply(thread).unwrap();
        assert!(!targets(&moves(&threaded, 2)).contains(&AxisType::Thread));
        let mut tiled = kernel;
        for _ in 0..4 {
            let upcast = moves(&tiled, 1)
                .into_iter()
                .filter(|m| {
                    matches!(
                        m,
                        Opt::Split {
                            target: AxisType::Upcast,
                            ..
                        }
                    )
                })
                .max_by_key(|Opt::Split { factor, .. }| *factor);
            if let Some(m) = upcast {
                tiled = tiled.apply(&m).unwrap();
            }
        }
        let copies: usize = kernel_ranges(&tiled.ast)
            .iter()
            .filter(|r| r.range_axis_type() == AxisType::Upcast)
            .filter_map(UOp::range_size)
            .product();
        assert!(copies <= MAX_UNROLLED, "{copies} copies");
    }
}
