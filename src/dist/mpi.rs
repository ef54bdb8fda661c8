//! The MPI backend (the `mpi` crate over the system's MPI, Open MPI on Debian): CPU hosts, and
//! the bootstrap of NCCL across hosts.

use super::backend::{Backend, Combine};
use super::buffer::{HostBuf, each_buf, map_buf};
use super::error::DistError;
use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::cell::RefCell;
use std::rc::{Rc, Weak};

/// `MPI_COMM_WORLD`, and the environment whose drop finalizes MPI.
pub(crate) struct Mpi {
    world: SimpleCommunicator,
    _universe: Universe,
}

thread_local! {
    /// The live MPI backend, shared by every `Communicator::mpi()` of the program: MPI can be
    /// initialized once per process, and is finalized when the last communicator is dropped.
    static LIVE: RefCell<Weak<Mpi>> = const { RefCell::new(Weak::new()) };
}

impl Mpi {
    /// The world communicator, initializing MPI on first use.
    pub(crate) fn world() -> Result<Rc<Mpi>, DistError> {
        if let Some(live) = LIVE.with(|l| l.borrow().upgrade()) {
            return Ok(live);
        }
        let universe = mpi::initialize().ok_or_else(|| {
            DistError::backend(
                "mpi",
                "MPI cannot be initialized again in this process (it was finalized when the \
                 last Communicator was dropped, or initialized by other code): keep one \
                 Communicator alive for the whole program and clone it",
            )
        })?;
        let world = universe.world();
        let mpi = Rc::new(Mpi {
            world,
            _universe: universe,
        });
        LIVE.with(|l| *l.borrow_mut() = Rc::downgrade(&mpi));
        Ok(mpi)
    }
}

fn operation(combine: Combine) -> SystemOperation {
    match combine {
        Combine::Sum => SystemOperation::sum(),
        Combine::Max => SystemOperation::max(),
        Combine::Min => SystemOperation::min(),
    }
}

impl Backend for Mpi {
    fn name(&self) -> &'static str {
        "mpi"
    }
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn world_size(&self) -> usize {
        self.world.size() as usize
    }
    fn all_reduce(&self, buf: &mut HostBuf, combine: Combine) -> Result<(), DistError> {
        each_buf!(buf, v => {
            let send = v.clone();
            self.world.all_reduce_into(&send[..], &mut v[..], operation(combine));
        });
        Ok(())
    }
    fn broadcast(&self, buf: &mut HostBuf, root: usize) -> Result<(), DistError> {
        let root = self.world.process_at_rank(root as i32);
        each_buf!(buf, v => root.broadcast_into(&mut v[..]));
        Ok(())
    }
    fn all_gather(&self, buf: &HostBuf) -> Result<HostBuf, DistError> {
        let ranks = self.world_size();
        Ok(map_buf!(buf, v => {
            let mut out = vec![Default::default(); v.len() * ranks];
            self.world.all_gather_into(&v[..], &mut out[..]);
            out
        }))
    }
    fn barrier(&self) -> Result<(), DistError> {
        self.world.barrier();
        Ok(())
    }
}
