//! The one-process backend: a world of one rank, where every collective returns its input.
//! Programs written for several ranks run unchanged on one.

use super::backend::{Backend, Combine};
use super::buffer::HostBuf;
use super::error::DistError;

/// A world of one rank.
pub(crate) struct SingleProcess;

impl Backend for SingleProcess {
    fn name(&self) -> &'static str {
        "single"
    }
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn all_reduce(&self, _buf: &mut HostBuf, _combine: Combine) -> Result<(), DistError> {
        Ok(())
    }
    fn broadcast(&self, _buf: &mut HostBuf, _root: usize) -> Result<(), DistError> {
        Ok(())
    }
    fn all_gather(&self, buf: &HostBuf) -> Result<HostBuf, DistError> {
        Ok(buf.clone())
    }
    fn barrier(&self) -> Result<(), DistError> {
        Ok(())
    }
    fn moves_data(&self) -> bool {
        false
    }
}
