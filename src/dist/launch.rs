//! [`from_env`]: the communicator a launcher asked for, read from its environment variables
//! (the only place `tensor::dist` reads them; the table is in `docs/environment.md`).
//!
//! - `TENSOR_DIST=single|mpi|nccl` chooses the backend; unset, a process started by `mpirun`
//!   (Open MPI's `OMPI_COMM_WORLD_SIZE`, or PMI's `PMI_SIZE`) uses MPI and any other process is
//!   a world of one.
//! - NCCL takes its rank and world size from MPI when started by `mpirun` with the `mpi`
//!   feature (the id is broadcast over MPI), else from `RANK` and `WORLD_SIZE` (as `torchrun`
//!   sets them) with the id exchanged through the file `TENSOR_NCCL_ID_FILE`, written by rank
//!   0 (use a fresh path per run); the GPU is `LOCAL_RANK` (Open MPI's
//!   `OMPI_COMM_WORLD_LOCAL_RANK`), else 0.

use super::{Communicator, DistError, NcclId};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a rank waits for rank 0's NCCL id file.
const RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(120);

/// See the module docs.
pub(crate) fn from_env() -> Result<Communicator, DistError> {
    match tensor_runtime::settings::var("TENSOR_DIST")
        .as_deref()
        .map(str::trim)
    {
        Some("single") => Ok(Communicator::single()),
        Some("mpi") => Communicator::mpi(),
        Some("nccl") => nccl_from_env(),
        None | Some("") => autodetect(),
        Some(other) => Err(DistError::Launch {
            variable: "TENSOR_DIST",
            message: format!("`{other}` is not a backend; use single, mpi or nccl"),
        }),
    }
}

/// MPI when an MPI launcher started this process with more than one rank (or with one, when
/// MPI is built in), else one process.
fn autodetect() -> Result<Communicator, DistError> {
    match number(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"])? {
        Some(n) if n > 1 || cfg!(feature = "mpi") => Communicator::mpi(),
        _ => Ok(Communicator::single()),
    }
}

fn nccl_from_env() -> Result<Communicator, DistError> {
    let device = number(&["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"])?.unwrap_or(0);
    if cfg!(feature = "mpi") && number(&["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"])?.is_some() {
        return Communicator::nccl_over(&Communicator::mpi()?, device);
    }
    let rank = required(&["RANK", "OMPI_COMM_WORLD_RANK"])?;
    let world = required(&["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"])?;
    let path = tensor_runtime::settings::var_os("TENSOR_NCCL_ID_FILE")
        .map(PathBuf::from)
        .ok_or(DistError::Launch {
            variable: "TENSOR_NCCL_ID_FILE",
            message: "unset: NCCL ranks started without mpirun exchange their id through \
                      this file (a fresh path per run, on a file system every rank sees)"
                .to_string(),
        })?;
    let id = if rank == 0 {
        let id = NcclId::new()?;
        publish(&path, &id)?;
        id
    } else {
        await_id(&path)?
    };
    Communicator::nccl(rank, world, device, &id)
}

/// Writes the id where the other ranks look for it, atomically (a whole file or none).
fn publish(path: &Path, id: &NcclId) -> Result<(), DistError> {
    let partial = path.with_extension(format!("partial.{}", std::process::id()));
    std::fs::write(&partial, id.to_bytes())
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|e| DistError::Launch {
            variable: "TENSOR_NCCL_ID_FILE",
            message: format!("cannot write {}: {e}", path.display()),
        })
}

/// Rank 0's id, once its file appears.
fn await_id(path: &Path) -> Result<NcclId, DistError> {
    let start = Instant::now();
    loop {
        if let Ok(bytes) = std::fs::read(path)
            && let Ok(bytes) = <[u8; 128]>::try_from(bytes.as_slice())
        {
            return Ok(NcclId::from_bytes(bytes));
        }
        if start.elapsed() > RENDEZVOUS_TIMEOUT {
            return Err(DistError::Launch {
                variable: "TENSOR_NCCL_ID_FILE",
                message: format!(
                    "rank 0 wrote no id to {} within {} s: start rank 0 with the same path",
                    path.display(),
                    RENDEZVOUS_TIMEOUT.as_secs()
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The first of `names` that is set, as a number.
fn number(names: &[&'static str]) -> Result<Option<usize>, DistError> {
    for &name in names {
        if let Some(text) = tensor_runtime::settings::var(name) {
            return text
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| DistError::Launch {
                    variable: name,
                    message: format!("`{text}` is not a non-negative integer"),
                });
        }
    }
    Ok(None)
}

fn required(names: &[&'static str]) -> Result<usize, DistError> {
    number(names)?.ok_or_else(|| DistError::Launch {
        variable: names[0],
        message: format!("unset (also looked for {:?})", &names[1..]),
    })
}
