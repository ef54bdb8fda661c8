//! Function capture (tinyspec "The @function Decorator"): the runtime behind `#[function]`.
//!
//! A captured function is traced once per *signature* (the shape, dtype and device of each
//! distinct argument, and which arguments are the same tensor) on `Param(k)` placeholders;
//! the traced results are packed in a `Tuple` and cached. Every call then builds
//! `Function(Tuple(body), a_0, a_1, ...)` over its distinct arguments and returns one
//! `GetTuple(i)` per result, without running the Rust body again.
//!
//! The `Function` node's arg records how the scheduler should treat it:
//!
//! - **inline** (the default): at schedule time each `Param(k)` of the body is replaced by
//!   `a_k`, and the body fuses with its surroundings like any other graph;
//! - **precompile**: the body is one reusable compiled unit: the scheduler realizes its
//!   results, so the body compiles into kernels of its own (found again in the program
//!   caches at every call of the same signature) instead of fusing into its callers.
//!
//! Transforms (`vmap`, `jvp`, `vjp`, ...) see through both kinds: they inline `Function` nodes
//! when they trace (see [`crate::transform::trace::inline_functions`]), so a transformed
//! function is rebuilt from the primitive ops of its body. The interpreter evaluates a
//! `Function` node directly, in a frame where `Param(k)` is the value of `a_k`.

use crate::tensor::Tensor;
use crate::transform::func::Func;
use crate::transform::trace::placeholder;
use crate::uop::substitute;
use crate::uop::{Arg, DType, Device, Op, UOp};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// How the scheduler should treat a captured function's `Function` node (not to be confused
/// with [`crate::schedule::Schedule`], the kernels of a graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallMode {
    /// Substitute the arguments into the body and fuse it with the rest of the graph.
    Inline,
    /// Compile the body once as a reusable unit and call it (tinygrad's `precompile`).
    Precompile,
}

/// The arg of a `Function` node of the captured function `name`: `Arg::Name` when it is
/// inlined, `Arg::Precompile` when it is compiled as one unit.
pub fn function_arg(name: &str, mode: CallMode) -> Arg {
    match mode {
        CallMode::Inline => Arg::Name(name.to_string()),
        CallMode::Precompile => Arg::Precompile(name.to_string()),
    }
}

/// How the scheduler should treat `node`, if it is a `Function` node: `Precompile` when its
/// arg is `Arg::Precompile`, `Inline` otherwise.
pub fn call_mode_of(node: &UOp) -> Option<CallMode> {
    if node.op() != Op::Function {
        return None;
    }
    Some(match node.arg() {
        Arg::Precompile(_) => CallMode::Precompile,
        _ => CallMode::Inline,
    })
}

/// The name of the captured function a `Function` node calls, if it records one.
pub fn function_name(node: &UOp) -> Option<&str> {
    match node.arg() {
        Arg::Name(name) | Arg::Precompile(name) if node.op() == Op::Function => Some(name),
        _ => None,
    }
}

/// What a traced body depends on: per distinct argument its shape, dtype and device, and for
/// every argument the index of the distinct argument it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Signature {
    distinct: Vec<(Vec<usize>, DType, Device)>,
    slot_of_arg: Vec<usize>,
    /// The structure of tree arguments (empty for a function of tensors): two structures
    /// with the same leaves are different signatures.
    structure: String,
}

impl Signature {
    /// One `Param(slot)` per distinct argument, shaped like it.
    fn params(&self) -> Vec<UOp> {
        self.distinct
            .iter()
            .enumerate()
            .map(|(slot, (shape, dtype, device))| {
                UOp::param(slot, shape, *dtype, Some(device.clone()))
            })
            .collect()
    }

    /// The tensors a body is called with: for each argument, the stand-in of its distinct slot.
    fn inputs(&self, stand_ins: &[UOp]) -> Vec<Tensor> {
        self.slot_of_arg
            .iter()
            .map(|&slot| Tensor::from_uop(stand_ins[slot].clone()))
            .collect()
    }
}

/// The arguments of one call: the distinct graphs (one `Param` each) and the signature.
struct Arguments {
    distinct: Vec<UOp>,
    signature: Signature,
}

impl Arguments {
    /// Deduplicates `args` by identity: the same graph passed twice is one `Param`.
    fn of(args: &[Tensor]) -> Arguments {
        let mut distinct: Vec<UOp> = Vec::new();
        let mut described = Vec::new();
        let mut slot_of_arg = Vec::with_capacity(args.len());
        for arg in args {
            let uop = arg.uop();
            let slot = match distinct.iter().position(|d| *d == uop) {
                Some(slot) => slot,
                None => {
                    described.push((arg.shape(), arg.dtype(), arg.device()));
                    distinct.push(uop);
                    distinct.len() - 1
                }
            };
            slot_of_arg.push(slot);
        }
        Arguments {
            distinct,
            signature: Signature {
                distinct: described,
                slot_of_arg,
                structure: String::new(),
            },
        }
    }
}

/// The trace cache of one captured function: one traced body per signature.
pub struct FunctionCache {
    name: &'static str,
    mode: CallMode,
    bodies: Mutex<Option<HashMap<Signature, Arc<OnceLock<UOp>>>>>,
    traces: AtomicUsize,
}

impl FunctionCache {
    /// An empty cache for the captured function `name` (usually its module path and name).
    pub const fn new(name: &'static str, mode: CallMode) -> FunctionCache {
        FunctionCache {
            name,
            mode,
            bodies: Mutex::new(None),
            traces: AtomicUsize::new(0),
        }
    }

    /// The captured function's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How the scheduler should treat this function's `Function` nodes.
    pub fn call_mode(&self) -> CallMode {
        self.mode
    }

    /// How many times the body has been traced: once per distinct signature it was called with.
    pub fn trace_count(&self) -> usize {
        self.traces.load(Ordering::Relaxed)
    }

    /// Calls the captured function on `args`: traces `body` (which receives one tensor per
    /// argument, `Param`s standing for the arguments) if this signature is new, and returns
    /// the results through `GetTuple` of `Function(Tuple(body), distinct args...)`.
    ///
    /// Safe to call from several threads: a signature is traced once, and a thread that needs
    /// a body another thread is tracing waits for it.
    pub fn call(
        &self,
        args: &[Tensor],
        body: impl FnOnce(&[Tensor]) -> Vec<Tensor>,
    ) -> Vec<Tensor> {
        self.call_structured("", args, body)
    }

    /// [`FunctionCache::call`] for the leaves `args` of tree arguments whose structure is
    /// described by `structure` (part of the signature).
    pub fn call_structured(
        &self,
        structure: &str,
        args: &[Tensor],
        body: impl FnOnce(&[Tensor]) -> Vec<Tensor>,
    ) -> Vec<Tensor> {
        let mut arguments = Arguments::of(args);
        arguments.signature.structure = structure.to_string();
        let cell = self.cell_for(&arguments.signature);
        let tuple = cell.get_or_init(|| self.trace(&arguments.signature, body));
        self.called(tuple, arguments.distinct)
    }

    /// Calls `body` as [`FunctionCache::call`] does when its trace reads nothing but its own
    /// arguments; a trace that reads placeholders of an enclosing trace is returned with the
    /// arguments substituted, inline, and is not cached (it is only valid in that trace).
    pub fn call_closed(
        &self,
        args: &[Tensor],
        body: impl FnOnce(&[Tensor]) -> Vec<Tensor>,
    ) -> Vec<Tensor> {
        let arguments = Arguments::of(args);
        let cell = self.cell_for(&arguments.signature);
        if let Some(tuple) = cell.get() {
            return self.called(tuple, arguments.distinct);
        }
        self.traces.fetch_add(1, Ordering::Relaxed);
        let signature = &arguments.signature;
        let stand_ins: Vec<UOp> = signature
            .distinct
            .iter()
            .map(|(shape, dtype, device)| placeholder(shape, *dtype, device.clone()))
            .collect();
        let results = UOp::tuple(
            body(&signature.inputs(&stand_ins))
                .iter()
                .map(Tensor::uop)
                .collect(),
        );
        if reads_foreign_params(&results, &stand_ins) {
            let actual: HashMap<UOp, UOp> =
                stand_ins.iter().cloned().zip(arguments.distinct).collect();
            let inlined = substitute(&results, &actual);
            return inlined
                .src()
                .iter()
                .cloned()
                .map(Tensor::from_uop)
                .collect();
        }
        let params: HashMap<UOp, UOp> = stand_ins.into_iter().zip(signature.params()).collect();
        let tuple = cell.get_or_init(|| substitute(&results, &params));
        self.called(tuple, arguments.distinct)
    }

    /// The results of `Function(tuple, distinct...)`, one `GetTuple` each.
    fn called(&self, tuple: &UOp, distinct: Vec<UOp>) -> Vec<Tensor> {
        let function = UOp::new(
            Op::Function,
            DType::Void,
            std::iter::once(tuple.clone()).chain(distinct).collect(),
            function_arg(self.name, self.mode),
        );
        (0..tuple.src().len())
            .map(|i| Tensor::from_uop(function.get_tuple(i)))
            .collect()
    }

    /// The cell holding (or about to hold) the body traced for `signature`.
    fn cell_for(&self, signature: &Signature) -> Arc<OnceLock<UOp>> {
        let mut bodies = self.bodies.lock().unwrap_or_else(|e| e.into_inner());
        bodies
            .get_or_insert_with(HashMap::new)
            .entry(signature.clone())
            .or_default()
            .clone()
    }

    /// Runs `body` on `Param` placeholders and packs its results in a `Tuple`.
    fn trace(&self, signature: &Signature, body: impl FnOnce(&[Tensor]) -> Vec<Tensor>) -> UOp {
        self.traces.fetch_add(1, Ordering::Relaxed);
        // The body is kept per signature: its scalars are code, not values bound per call.
        let _library = crate::tensor::LibraryScope::enter();
        let results = body(&signature.inputs(&signature.params()));
        UOp::tuple(results.iter().map(Tensor::uop).collect())
    }
}

/// `f` traced once per signature, as a `#[function]` is: the first call with a given set of
/// argument shapes, dtypes, devices and aliasing runs `f` (and whatever transforms it is made
/// of) on placeholders; every later call with that signature only builds the `Function` node
/// over its arguments. Transforms return their results this way, so calling `vmap(grad(f))`
/// again does not trace, differentiate or batch again. As under `jax.jit`, `f` must be a pure
/// function of its tensor arguments: what it captures is read once per signature.
///
/// A body that reads a placeholder of an enclosing trace (a closure that captured a value
/// being traced, such as the arguments a `jacfwd` batches over) belongs to that trace alone:
/// it is returned inlined and not cached.
pub fn traced_once(name: &'static str, f: Func) -> Func {
    let cache = Arc::new(FunctionCache::new(name, CallMode::Inline));
    Func::new(f.arity(), move |args: &[Tensor]| {
        cache.call_closed(args, |inputs| f.call(inputs))
    })
}

/// Whether `graph` reads a `Param` other than `own`, outside the bodies of the functions it
/// calls (whose `Param`s are their own arguments).
fn reads_foreign_params(graph: &UOp, own: &[UOp]) -> bool {
    let mut stack = vec![graph.clone()];
    let mut seen = std::collections::HashSet::new();
    while let Some(node) = stack.pop() {
        if !seen.insert(node.clone()) {
            continue;
        }
        if node.op() == Op::Param && !own.contains(&node) {
            return true;
        }
        let skip_body = usize::from(node.op() == Op::Function);
        stack.extend(node.src()[skip_body..].iter().cloned());
    }
    false
}

impl std::fmt::Debug for FunctionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FunctionCache({}, {:?}, {} traces)",
            self.name,
            self.mode,
            self.trace_count()
        )
    }
}
