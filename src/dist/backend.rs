//! [`Backend`]: what a transport (one process, MPI, NCCL) does with host buffers; everything
//! about trees, layouts and checks lives above it, in [`Communicator`](super::Communicator).

use super::buffer::HostBuf;
use super::error::DistError;

/// How an all-reduce combines the ranks' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum over ranks.
    Sum,
    /// The sum divided by the world size (float tensors only).
    Mean,
    /// The largest value.
    Max,
    /// The smallest value.
    Min,
}

/// The reductions a backend performs itself (a mean is a sum divided afterwards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Combine {
    /// Elementwise sum.
    Sum,
    /// Elementwise maximum.
    Max,
    /// Elementwise minimum.
    Min,
}

impl ReduceOp {
    /// The backend's reduction for this op.
    pub(crate) fn combine(self) -> Combine {
        match self {
            ReduceOp::Sum | ReduceOp::Mean => Combine::Sum,
            ReduceOp::Max => Combine::Max,
            ReduceOp::Min => Combine::Min,
        }
    }
}

/// A transport: collectives over host buffers of one dtype. Every rank calls the same methods
/// in the same order with buffers of the same length (checked above this trait).
pub(crate) trait Backend {
    /// The backend's name in messages (`"single"`, `"mpi"`, `"nccl"`).
    fn name(&self) -> &'static str;
    /// This process's rank, `0..world_size`.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn world_size(&self) -> usize;
    /// Replaces `buf` by the elementwise combination of every rank's `buf`.
    fn all_reduce(&self, buf: &mut HostBuf, combine: Combine) -> Result<(), DistError>;
    /// Replaces `buf` by rank `root`'s `buf`.
    fn broadcast(&self, buf: &mut HostBuf, root: usize) -> Result<(), DistError>;
    /// Every rank's `buf`, one after another in rank order.
    fn all_gather(&self, buf: &HostBuf) -> Result<HostBuf, DistError>;
    /// Returns when every rank has called it.
    fn barrier(&self) -> Result<(), DistError>;
    /// False for a transport whose collectives are the identity (one process): the
    /// communicator then skips packing trees into buffers. An MPI or NCCL world of one rank
    /// still runs every collective, through the same path as several ranks.
    fn moves_data(&self) -> bool {
        true
    }
}
