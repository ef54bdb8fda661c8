//! External calls at run time: before a graph is scheduled, every external `Call` in it runs
//! on the host, inner calls first. The kernels computing a call's operands run (one realize of
//! all the operands of the calls that are ready), then the host function, whose results
//! become buffers that the kernels after it read. So the kernels end before a call and start
//! again after it. `DEBUG=2` prints a line per host call among the kernel lines.
//!
//! External functions are pure (as JAX's `pure_callback`): the results of the last
//! [`REMEMBERED_CALLS`] calls are kept by node, so realizing several results of one transform
//! one at a time (two gradients, say) runs a call they share once.

use crate::error::{Result, RuntimeError};
use crate::realize::{read_realized, realize};
use crate::settings::debug_level;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, OnceLock};
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
        let mut outs: HashMap<UOp, Vec<UOp>> = HashMap::new();
        let mut pending = Vec::new();
        for call in ready_calls(&graph) {
            match remembered(&call) {
                Some(results) => drop(outs.insert(call, results)),
                None => pending.push(call),
            }
        }
        let operands: Vec<Tensor> = pending
            .iter()
            .flat_map(|c| c.src()[1..].iter().cloned().map(Tensor::from_uop))
            .collect();
        realize(&operands.iter().collect::<Vec<_>>())?;
        let mut next = operands.into_iter();
        for call in pending {
            let args: Vec<Tensor> = next.by_ref().take(call.src().len() - 1).collect();
            let results = remember(&call, run_one(&call, &args)?);
            outs.insert(call, results);
        }
        let substitutions = outs
            .iter()
            .flat_map(|(call, results)| {
                results
                    .iter()
                    .enumerate()
                    .map(|(k, r)| (call.get_tuple(k), r.clone()))
            })
            .collect();
        graph = graph
            .iter()
            .map(|r| substitute(r, &substitutions))
            .collect();
    }
    Ok(Some(graph))
}

/// True when the graphs of `roots` call an external function.
pub fn has_call(roots: &[UOp]) -> bool {
    if !roots.iter().any(UOp::reaches_call) {
        return false;
    }
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

/// Runs one call on its operands (realized already): the result tensors, in order.
fn run_one(call: &UOp, args: &[Tensor]) -> Result<Vec<UOp>> {
    let hosts = args
        .iter()
        .map(|t| {
            let bytes = read_realized(&t.uop())?;
            Ok(HostArray::from_bytes(bytes, t.dtype(), &t.shape()))
        })
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

/// How many calls' results are kept (see the module docs).
pub const REMEMBERED_CALLS: usize = 256;

type Memory = (HashMap<UOp, Vec<UOp>>, VecDeque<UOp>);

fn memory() -> &'static Mutex<Memory> {
    static MEMORY: OnceLock<Mutex<Memory>> = OnceLock::new();
    MEMORY.get_or_init(|| Mutex::new((HashMap::new(), VecDeque::new())))
}

fn remembered(call: &UOp) -> Option<Vec<UOp>> {
    let memory = memory().lock().unwrap_or_else(|e| e.into_inner());
    memory.0.get(call).cloned()
}

fn remember(call: &UOp, results: Vec<UOp>) -> Vec<UOp> {
    let mut memory = memory().lock().unwrap_or_else(|e| e.into_inner());
    let (map, order) = &mut *memory;
    if map.insert(call.clone(), results.clone()).is_none() {
        order.push_back(call.clone());
    }
    while order.len() > REMEMBERED_CALLS {
        if let Some(old) = order.pop_front() {
            map.remove(&old);
        }
    }
    results
}
