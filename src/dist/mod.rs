//! Data parallelism across processes: a [`Communicator`] (rank, world size, all-reduce of
//! trees, broadcast, all-gather, reduce-scatter, barrier) over MPI for CPU hosts, NCCL for
//! NVIDIA GPUs, or one process.
//!
//! Each rank runs the same program on its own shard of every batch: it computes the gradients
//! (or per-sample gradients, or DP-SGD's clipped sum, [`DpSgd::private_grad_distributed`]) of
//! its shard, all-reduces them, and takes the same optimizer step, so the parameters stay equal
//! on every rank, as PyTorch's `DistributedDataParallel` keeps them. A collective over a tree
//! computes every leaf in one plan and moves one buffer per dtype.
//!
//! The backends are the engines the field uses: MPI through the `mpi` crate (cargo feature
//! `mpi`; Open MPI from Debian's `libopenmpi-dev` and `openmpi-bin`, and `libclang-dev` to
//! build the bindings) and NCCL through cudarc (cargo feature `nccl`; loaded at run time).
//! A program built without a backend gets an error naming the feature when it asks for it.
//!
//! # Launching
//!
//! [`Communicator::from_env`] reads what the launcher set: `TENSOR_DIST=single|mpi|nccl`
//! chooses; unset, a process started by `mpirun` uses MPI and any other is a world of one.
//! NCCL ranks take their rank and GPU from MPI, or from `RANK`, `WORLD_SIZE` and `LOCAL_RANK`
//! (as `torchrun` sets them) with the clique's id passed through `TENSOR_NCCL_ID_FILE`.
//! `docs/dist.md` has the commands.
//!
//! ```
//! use tensor::prelude::*;
//! use tensor::dist::{Communicator, ReduceOp};
//!
//! // Under `mpirun -np N` with `--features mpi` this is rank k of N; alone, a world of one.
//! let comm = Communicator::from_env().unwrap();
//! let grads = (Tensor::from_vec(vec![1.0f32, 2.0], &[2]), Tensor::scalar(3.0f64));
//! let mean = comm.all_reduce(&grads, ReduceOp::Mean).unwrap();
//! assert_eq!(mean.0.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
//! let range = comm.shard(10); // this rank's part of a batch of 10
//! assert_eq!(range, 0..10);
//! ```
//!
//! [`DpSgd::private_grad_distributed`]: crate::dp::DpSgd::private_grad_distributed

mod backend;
mod buffer;
mod error;
mod launch;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "nccl")]
mod nccl;
mod single;

pub use backend::ReduceOp;
pub use error::DistError;

use backend::Backend;
use buffer::{HostBuf, check_dtypes, pack, unpack, unpack_stacked};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;
use std::rc::Rc;
use tensor_core::Tensor;
use tensor_core::transform::tree::{Tree, tree_leaves, tree_structure, tree_unflatten};

/// One process's handle on a group of ranks. Cloning shares the handle; the backend is shut
/// down (MPI finalized) when the last clone is dropped. Collectives are called by every rank,
/// in the same order, with trees of the same shapes and dtypes: a rank whose call differs gets
/// [`DistError::Mismatch`] on every rank instead of a hang or mixed-up buffers.
#[derive(Clone)]
pub struct Communicator {
    backend: Rc<dyn Backend>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator({}, rank {} of {})",
            self.backend.name(),
            self.rank(),
            self.world_size()
        )
    }
}

/// The unique id that names an NCCL clique: made on one rank ([`NcclId::new`]) and sent to
/// the others (by MPI, [`Communicator::nccl_over`], or a file, [`Communicator::from_env`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NcclId([u8; 128]);

impl NcclId {
    /// A fresh id from NCCL (`ncclGetUniqueId`).
    pub fn new() -> Result<NcclId, DistError> {
        #[cfg(feature = "nccl")]
        {
            nccl::new_id().map(NcclId)
        }
        #[cfg(not(feature = "nccl"))]
        {
            Err(not_built_nccl())
        }
    }

    /// The id's bytes, to send to the other ranks.
    pub fn to_bytes(&self) -> [u8; 128] {
        self.0
    }

    /// The id another rank made, from its bytes.
    pub fn from_bytes(bytes: [u8; 128]) -> NcclId {
        NcclId(bytes)
    }
}

#[cfg(not(feature = "mpi"))]
fn not_built_mpi() -> DistError {
    DistError::NotBuilt {
        backend: "mpi",
        feature: "mpi",
        needs: "Open MPI, Debian's libopenmpi-dev and openmpi-bin, and libclang-dev for the \
                bindings",
    }
}

#[cfg(not(feature = "nccl"))]
fn not_built_nccl() -> DistError {
    DistError::NotBuilt {
        backend: "nccl",
        feature: "nccl",
        needs: "nothing at build time; NCCL 2 and an NVIDIA driver at run time",
    }
}

impl Communicator {
    /// A world of one rank: every collective returns its input.
    pub fn single() -> Communicator {
        Communicator {
            backend: Rc::new(single::SingleProcess),
        }
    }

    /// `MPI_COMM_WORLD` of the processes `mpirun` started (MPI is initialized on the first
    /// call, and every later call shares it).
    pub fn mpi() -> Result<Communicator, DistError> {
        #[cfg(feature = "mpi")]
        {
            let backend: Rc<dyn Backend> = mpi::Mpi::world()?;
            Ok(Communicator { backend })
        }
        #[cfg(not(feature = "mpi"))]
        {
            Err(not_built_mpi())
        }
    }

    /// Rank `rank` of `world_size` NCCL ranks, on GPU `device`, in the clique `id` (the same
    /// id on every rank). The process then computes on that GPU (`CUDA:device`, as
    /// `torch.cuda.set_device(local_rank)` before DDP), so one process per GPU needs no
    /// per-rank `DEVICE`.
    pub fn nccl(
        rank: usize,
        world_size: usize,
        device: usize,
        id: &NcclId,
    ) -> Result<Communicator, DistError> {
        if rank >= world_size {
            return Err(DistError::Launch {
                variable: "RANK",
                message: format!("rank {rank} is outside a world of {world_size}"),
            });
        }
        #[cfg(feature = "nccl")]
        {
            let backend: Rc<dyn Backend> = Rc::new(nccl::Nccl::new(rank, world_size, device, id)?);
            tensor_runtime::realize::set_device(Some(&format!("CUDA:{device}")))?;
            Ok(Communicator { backend })
        }
        #[cfg(not(feature = "nccl"))]
        {
            let _ = (device, id);
            Err(not_built_nccl())
        }
    }

    /// An NCCL communicator with the ranks of `bootstrap` (typically [`Communicator::mpi`]),
    /// on GPU `device`: rank 0 makes the id and broadcasts it over `bootstrap`.
    pub fn nccl_over(bootstrap: &Communicator, device: usize) -> Result<Communicator, DistError> {
        let mine = if bootstrap.rank() == 0 {
            NcclId::new()?.to_bytes().to_vec()
        } else {
            vec![0u8; 128]
        };
        let shared = bootstrap.broadcast(&Tensor::from_vec(mine, &[128]), 0)?;
        let bytes: Vec<u8> = tensor_runtime::realize::to_vec(&shared)?;
        let id = NcclId::from_bytes(bytes.try_into().expect("128 bytes were broadcast"));
        Communicator::nccl(bootstrap.rank(), bootstrap.world_size(), device, &id)
    }

    /// The communicator the launcher asked for (see [Launching](self#launching): `mpirun`,
    /// `TENSOR_DIST`), a world of one when started alone.
    pub fn from_env() -> Result<Communicator, DistError> {
        launch::from_env()
    }

    /// The backend's name: `"single"`, `"mpi"` or `"nccl"`.
    pub fn backend(&self) -> &'static str {
        self.backend.name()
    }

    /// This process's rank, `0..world_size()`.
    pub fn rank(&self) -> usize {
        self.backend.rank()
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.backend.world_size()
    }

    /// This rank's contiguous part of `n` items (a batch): the ranks' parts cover `0..n` in
    /// rank order, their sizes differing by at most one.
    pub fn shard(&self, n: usize) -> Range<usize> {
        shard_of(n, self.rank(), self.world_size())
    }

    /// Every leaf of `tree` combined elementwise over the ranks by `op` (all ranks get the
    /// result): `all_reduce(&grads, ReduceOp::Mean)` averages gradients as DDP does. With the
    /// one-process backend the tree is returned as it is, computing and copying nothing (an
    /// MPI or NCCL world of one still runs the collective).
    pub fn all_reduce<T: Tree>(&self, tree: &T, op: ReduceOp) -> Result<T, DistError> {
        let call = "all_reduce";
        let leaves = tree_leaves(tree);
        check_dtypes(call, &leaves)?;
        if op == ReduceOp::Mean
            && let Some(leaf) = leaves.iter().find(|l| !l.dtype().is_float())
        {
            return Err(DistError::DType {
                call,
                dtype: leaf.dtype(),
                reason: "a mean is defined for float tensors; use ReduceOp::Sum",
            });
        }
        if !self.backend.moves_data() {
            return Ok(tree.clone());
        }
        let (mut buffers, layout) = pack(call, &leaves)?;
        self.agree(call, &(op, &layout.describe()))?;
        for buffer in &mut buffers {
            self.backend.all_reduce(buffer, op.combine())?;
            if op == ReduceOp::Mean {
                buffer.divide(self.world_size());
            }
        }
        Ok(rebuild(tree, unpack(&buffers, &layout)))
    }

    /// Rank `root`'s `tree` on every rank (the parameters at start, so every replica begins
    /// equal).
    pub fn broadcast<T: Tree>(&self, tree: &T, root: usize) -> Result<T, DistError> {
        let call = "broadcast";
        self.check_root(call, root)?;
        let leaves = tree_leaves(tree);
        check_dtypes(call, &leaves)?;
        if !self.backend.moves_data() {
            return Ok(tree.clone());
        }
        let (mut buffers, layout) = pack(call, &leaves)?;
        self.agree(call, &(root, &layout.describe()))?;
        for buffer in &mut buffers {
            self.backend.broadcast(buffer, root)?;
        }
        Ok(rebuild(tree, unpack(&buffers, &layout)))
    }

    /// Every rank's `tree`, each leaf stacked along a new axis 0 in rank order (JAX's
    /// `all_gather`; `reshape` merges the axis into the next one, as torch's
    /// `all_gather_into_tensor`).
    pub fn all_gather<T: Tree>(&self, tree: &T) -> Result<T, DistError> {
        let call = "all_gather";
        let leaves = tree_leaves(tree);
        check_dtypes(call, &leaves)?;
        if !self.backend.moves_data() {
            return Ok(rebuild(
                tree,
                leaves.iter().map(|l| l.unsqueeze(0)).collect(),
            ));
        }
        let (buffers, layout) = pack(call, &leaves)?;
        self.agree(call, &layout.describe())?;
        let gathered = buffers
            .iter()
            .map(|b| self.backend.all_gather(b))
            .collect::<Result<Vec<HostBuf>, _>>()?;
        let leaves = unpack_stacked(&gathered, &layout, self.world_size());
        Ok(rebuild(tree, leaves))
    }

    /// This rank's block of the reduction of `tensor` over the ranks: axis 0 (a multiple of
    /// the world size) cut into `world_size` equal blocks, block `rank` kept. Computed as an
    /// all-reduce followed by the slice (the same values as a native reduce-scatter, with the
    /// all-reduce's traffic).
    ///
    /// # Panics
    ///
    /// On a 0-d tensor or an axis 0 that the world size does not divide.
    #[track_caller]
    pub fn reduce_scatter(&self, tensor: &Tensor, op: ReduceOp) -> Result<Tensor, DistError> {
        let shape = tensor.shape().to_vec();
        let ranks = self.world_size();
        assert!(
            shape.first().is_some_and(|&n| n.is_multiple_of(ranks)),
            "reduce_scatter: axis 0 of shape {shape:?} must be a multiple of the world size \
             {ranks}"
        );
        let block = shape[0] / ranks;
        let reduced = self.all_reduce(tensor, op)?;
        let start = self.rank() * block;
        Ok(reduced.narrow(0, start as isize, block))
    }

    /// Returns when every rank has called it.
    pub fn barrier(&self) -> Result<(), DistError> {
        self.agree("barrier", &())?;
        self.backend.barrier()
    }

    /// Checks that every rank makes this call with the same structure, by gathering one hash
    /// of it from each: on a mismatch every rank returns the same error.
    fn agree(&self, call: &'static str, structure: &impl Hash) -> Result<(), DistError> {
        if self.world_size() == 1 {
            return Ok(());
        }
        let mut hasher = DefaultHasher::new();
        (call, structure).hash(&mut hasher);
        let mine = hasher.finish();
        let all = match self.backend.all_gather(&HostBuf::U64(vec![mine]))? {
            HostBuf::U64(all) => all,
            other => unreachable!("an all-gather of u64 returned {other:?}"),
        };
        let differ: Vec<usize> = (0..all.len()).filter(|&r| all[r] != all[0]).collect();
        if differ.is_empty() {
            return Ok(());
        }
        Err(DistError::Mismatch {
            call,
            detail: format!(
                "ranks {differ:?} differ from rank 0; this is rank {}",
                self.rank()
            ),
        })
    }

    fn check_root(&self, call: &'static str, root: usize) -> Result<(), DistError> {
        if root < self.world_size() {
            return Ok(());
        }
        Err(DistError::Mismatch {
            call,
            detail: format!(
                "root {root} is not a rank of a world of {}",
                self.world_size()
            ),
        })
    }
}

/// Rank `rank`'s contiguous part of `n` items among `ranks`.
fn shard_of(n: usize, rank: usize, ranks: usize) -> Range<usize> {
    let start = |r: usize| r * n / ranks;
    start(rank)..start(rank + 1)
}

/// A tree shaped like `like` from `leaves`.
fn rebuild<T: Tree>(like: &T, leaves: Vec<Tensor>) -> T {
    tree_unflatten(&tree_structure(like), leaves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_batch_in_rank_order_and_differ_by_at_most_one() {
        for n in [0, 1, 7, 64, 65] {
            for ranks in 1..=5 {
                let parts: Vec<Range<usize>> = (0..ranks).map(|r| shard_of(n, r, ranks)).collect();
                assert_eq!(parts[0].start, 0);
                assert_eq!(parts[ranks - 1].end, n);
                for w in parts.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                }
                let sizes: Vec<usize> = parts.iter().map(|p| p.len()).collect();
                let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(hi - lo <= 1, "{n} over {ranks}: {sizes:?}");
            }
        }
    }
}
