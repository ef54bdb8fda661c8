//! `tensor::dist` over NCCL (built with `--features nccl`). Where the machine has an NVIDIA
//! driver and NCCL, a world of one rank runs every collective on the GPU and returns its
//! input; elsewhere creating the communicator is an error that says what to install (checked
//! before cudarc loads the libraries, which would panic). Several ranks need several GPUs:
//! `docs/dist.md` says how to launch them.

use tensor::dist::{Communicator, DistError, NcclId, ReduceOp};
use tensor::prelude::*;

/// The machine's answer: a world of one NCCL rank on GPU 0, or why there is none.
fn world_of_one() -> Result<Communicator, DistError> {
    let id = NcclId::new()?;
    Communicator::nccl(0, 1, 0, &id)
}

#[test]
fn one_rank_on_a_gpu_or_an_error_that_says_what_to_install() {
    match world_of_one() {
        Ok(comm) => {
            assert_eq!(
                (comm.backend(), comm.rank(), comm.world_size()),
                ("nccl", 0, 1)
            );
            let tree = (
                Tensor::from_vec(vec![1.5f32, -2.0, 3.0], &[3]),
                Tensor::from_vec(vec![7i64, -9], &[2]),
            );
            for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
                let r = comm.all_reduce(&tree, op).unwrap();
                assert_eq!(r.0.to_vec::<f32>().unwrap(), vec![1.5, -2.0, 3.0]);
                assert_eq!(r.1.to_vec::<i64>().unwrap(), vec![7, -9]);
            }
            let b = comm.broadcast(&tree, 0).unwrap();
            assert_eq!(b.1.to_vec::<i64>().unwrap(), vec![7, -9]);
            let g = comm.all_gather(&tree.0).unwrap();
            assert_eq!(g.shape(), vec![1, 3]);
            comm.barrier().unwrap();
            println!("NCCL world of one on CUDA:0: all_reduce, broadcast, all_gather, barrier ran");
        }
        Err(e) => {
            let text = e.to_string();
            let says_what_to_do = text.contains("libcuda.so.1 could not be loaded")
                || text.contains("install NCCL 2");
            assert!(says_what_to_do, "{text}");
        }
    }
}

#[test]
fn a_rank_outside_the_world_is_refused_before_any_library_is_loaded() {
    let id = NcclId::from_bytes([0; 128]);
    let err = Communicator::nccl(2, 2, 0, &id).unwrap_err();
    assert!(
        err.to_string().contains("rank 2 is outside a world of 2"),
        "{err}"
    );
}
