//! The NCCL backend (cudarc's bindings, loaded at run time): one process per GPU, buffers
//! staged through the GPU's memory for each collective.

use super::NcclId;
use super::backend::{Backend, Combine};
use super::buffer::{HostBuf, each_buf, map_buf};
use super::error::DistError;
use cudarc::driver::{CudaContext, CudaStream};
use cudarc::nccl::safe::{Comm, Id, ReduceOp};
use std::sync::Arc;

/// A communicator of one rank on one GPU.
pub(crate) struct Nccl {
    comm: Comm,
    stream: Arc<CudaStream>,
}

const INSTALL: &str = "install NCCL 2 (Debian/Ubuntu: NVIDIA's libnccl2 package; or \
                       `pip install nvidia-nccl-cu12` and add its lib folder to LD_LIBRARY_PATH)";

/// Ok when both the CUDA driver and NCCL can be loaded (checked before cudarc loads them,
/// which panics on a missing library).
fn libraries_present() -> Result<(), DistError> {
    tensor_runtime::cuda::driver_available()?;
    // SAFETY: loads (and drops) the shared library by name; no symbol of it is called.
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(DistError::MissingLibrary {
            backend: "nccl",
            tried: "libnccl.so, libnccl.so.2".to_string(),
            install: INSTALL,
        })
    }
}

fn nccl_error(what: &str, e: impl std::fmt::Debug) -> DistError {
    DistError::backend("nccl", format!("{what} failed: {e:?}"))
}

/// A fresh unique id (call on one rank, share with the others).
pub(crate) fn new_id() -> Result<[u8; 128], DistError> {
    libraries_present()?;
    let id = Id::new().map_err(|e| nccl_error("ncclGetUniqueId", e))?;
    Ok(id.internal().map(|c| c as u8))
}

impl Nccl {
    /// Rank `rank` of `world_size` on GPU `device`, joining the clique named by `id`.
    pub(crate) fn new(
        rank: usize,
        world_size: usize,
        device: usize,
        id: &NcclId,
    ) -> Result<Nccl, DistError> {
        libraries_present()?;
        let context = CudaContext::new(device).map_err(|e| nccl_error("cuCtxCreate", e))?;
        let stream = context.default_stream();
        let id = Id::uninit(id.to_bytes().map(|b| b as std::ffi::c_char));
        let comm = Comm::from_rank(stream.clone(), rank, world_size, id)
            .map_err(|e| nccl_error("ncclCommInitRank", e))?;
        Ok(Nccl { comm, stream })
    }
}

fn operation(combine: Combine) -> ReduceOp {
    match combine {
        Combine::Sum => ReduceOp::Sum,
        Combine::Max => ReduceOp::Max,
        Combine::Min => ReduceOp::Min,
    }
}

impl Backend for Nccl {
    fn name(&self) -> &'static str {
        "nccl"
    }
    fn rank(&self) -> usize {
        self.comm.rank()
    }
    fn world_size(&self) -> usize {
        self.comm.world_size()
    }
    fn all_reduce(&self, buf: &mut HostBuf, combine: Combine) -> Result<(), DistError> {
        if buf.is_empty() {
            return Ok(());
        }
        each_buf!(buf, v => {
            let mut device = self.stream.memcpy_stod(&v[..]).map_err(|e| nccl_error("copy to GPU", e))?;
            self.comm
                .all_reduce_in_place(&mut device, &operation(combine))
                .map_err(|e| nccl_error("ncclAllReduce", e))?;
            *v = self.stream.memcpy_dtov(&device).map_err(|e| nccl_error("copy from GPU", e))?;
        });
        Ok(())
    }
    fn broadcast(&self, buf: &mut HostBuf, root: usize) -> Result<(), DistError> {
        if buf.is_empty() {
            return Ok(());
        }
        each_buf!(buf, v => {
            let mut device = self.stream.memcpy_stod(&v[..]).map_err(|e| nccl_error("copy to GPU", e))?;
            self.comm
                .broadcast_in_place(&mut device, root as i32)
                .map_err(|e| nccl_error("ncclBroadcast", e))?;
            *v = self.stream.memcpy_dtov(&device).map_err(|e| nccl_error("copy from GPU", e))?;
        });
        Ok(())
    }
    fn all_gather(&self, buf: &HostBuf) -> Result<HostBuf, DistError> {
        let ranks = self.world_size();
        if buf.is_empty() {
            return Ok(buf.clone());
        }
        Ok(map_buf!(buf, v => {
            let send = self.stream.memcpy_stod(&v[..]).map_err(|e| nccl_error("copy to GPU", e))?;
            let mut recv = self
                .stream
                .alloc_zeros(v.len() * ranks)
                .map_err(|e| nccl_error("cuMemAlloc", e))?;
            self.comm
                .all_gather(&send, &mut recv)
                .map_err(|e| nccl_error("ncclAllGather", e))?;
            self.stream.memcpy_dtov(&recv).map_err(|e| nccl_error("copy from GPU", e))?
        }))
    }
    fn barrier(&self) -> Result<(), DistError> {
        // NCCL has no barrier: an all-reduce of one number waits for every rank.
        let mut one = HostBuf::U8(vec![0]);
        self.all_reduce(&mut one, Combine::Sum)?;
        self.stream
            .synchronize()
            .map_err(|e| nccl_error("cuStreamSynchronize", e))
    }
}
