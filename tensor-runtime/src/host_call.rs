//! External calls at run time: before a graph is scheduled, every external `Call` in it runs
//! on the host, inner calls first. The kernels computing a call's operands run (one realize of
//! all the operands of the calls that are ready), then the host function, whose results
//! become buffers that the kernels after it read. So the kernels end before a call and start
//! again after it. `DEBUG=2` prints a line per host call among the kernel lines.

use crate::error::{Result, RuntimeError};
use crate::realize::{debug_level, read_bytes, realize};
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use tensor_core::schedule::callify::callify;
use tensor_core::transform::external::{CallInfo, HostArray, invoke};
use tensor_core::uop::substitute;
use tensor_core::{Op, Tensor, UOp};

/// `roots` with every external call replaced by buffers of its results (running the calls),
/// or `None` when the graph has no external call.
pub fn run_host_calls(roots: &[UOp]) -> Result<Option<Vec<UOp>>> {
    if !has_call(roots) {
        return Ok(None);
    }
    let mut graph = callify(roots);
    while has_call(&graph) {
        let ready = ready_calls(&graph);
        let operands: Vec<Tensor> = ready
            .iter()
            .flat_map(|c| c.src()[1..].iter().cloned().map(Tensor::from_uop))
            .collect();
        realize(&operands.iter().collect::<Vec<_>>())?;
        let mut results = HashMap::new();
        let mut next = operands.into_iter();
        for call in &ready {
            let args: Vec<Tensor> = next.by_ref().take(call.src().len() - 1).collect();
            for (k, out) in run_one(call, &args)?.into_iter().enumerate() {
                results.insert(call.get_tuple(k), out);
            }
        }
        graph = graph.iter().map(|r| substitute(r, &results)).collect();
    }
    Ok(Some(graph))
}

fn has_call(roots: &[UOp]) -> bool {
    UOp::sink(roots.to_vec())
        .toposort()
        .iter()
        .any(|u| u.op() == Op::Call && CallInfo::of(u).is_some())
}

/// The external calls none of whose operands depends on another external call.
fn ready_calls(graph: &[UOp]) -> Vec<UOp> {
    let order = UOp::sink(graph.to_vec()).toposort();
    let mut after_call: HashSet<UOp> = HashSet::new();
    let mut ready = Vec::new();
    for node in &order {
        let waits = node.src().iter().any(|s| after_call.contains(s));
        let is_call = CallInfo::of(node).is_some();
        if is_call && !waits {
            ready.push(node.clone());
        }
        if is_call || waits {
            after_call.insert(node.clone());
        }
    }
    ready
}

/// Runs one call on its realized operands: the result tensors, in order.
fn run_one(call: &UOp, args: &[Tensor]) -> Result<Vec<UOp>> {
    let hosts = args
        .iter()
        .map(|t| Ok(HostArray::from_bytes(read_bytes(t)?, t.dtype(), &t.shape())))
        .collect::<Result<Vec<_>>>()?;
    let shapes: Vec<Vec<usize>> = hosts.iter().map(|h| h.shape().to_vec()).collect();
    let started = Instant::now();
    let results = invoke(call, hosts).map_err(RuntimeError::External)?;
    if debug_level() >= 2 {
        let what = CallInfo::of(call).map(|i| i.describe()).unwrap_or_default();
        eprintln!(
            "host call {what:<20} shapes {shapes:?}  run {:>9.3?}",
            started.elapsed()
        );
    }
    Ok(results
        .into_iter()
        .map(|r| Tensor::from_bytes(r.bytes().to_vec(), r.dtype(), r.shape()).uop())
        .collect())
}
