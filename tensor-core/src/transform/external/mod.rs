//! External functions: opaque host code inside the traced graph
//! (seeds/batching-strategies-tesseract.md).
//!
//! An [`External`] wraps a Rust function over host arrays with an `apply` endpoint, optional
//! `jvp` and `vjp` endpoints and an input schema. Calling it on tensors puts one `Call` node in
//! the graph (`src = (Tuple(carriers), arrays.., extra..)`, where the carriers are constants of
//! the outputs' shapes and dtypes and `extra` are the tangents of a `jvp` or the cotangents of
//! a `vjp` call); the runtime runs it on host memory between kernels. The transforms treat it
//! by rule: [`batch`] (vmap, by the call's [`BatchStrategy`]) and [`diff`] (jvp and vjp, by
//! the endpoints).

pub mod batch;
pub mod diff;
pub mod host;
pub mod linalg;
mod linalg_decomp;
pub mod linalg_ops;
pub mod schema;

pub use host::{CALL_LOG_SIZE, CallRecord, HostArray, HostCall, HostValue};
pub use schema::{Dims, InputSpec, OutputSpec};

use crate::tensor::Tensor;
use crate::uop::arg::Handle;
use crate::uop::{Arg, BatchStrategy, DType, Endpoint, Op, Scalar, UOp, tuple_body};
use host::CallLog;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A host endpoint: the call's inputs (and tangents or cotangents) in, one array per result
/// out.
pub type HostFn = Arc<dyn Fn(&HostCall) -> Vec<HostArray> + Send + Sync>;

/// The definition of an external function, held by its [`External`] handles and by the
/// `Call` nodes of it, and dropped with the last of them.
pub struct ExternalDef {
    name: String,
    inputs: Vec<InputSpec>,
    outputs: Vec<OutputSpec>,
    apply: HostFn,
    jvp: Option<HostFn>,
    vjp: Option<HostFn>,
    vmap_method: Option<BatchStrategy>,
    calls: Mutex<CallLog>,
}

static LIVE: AtomicUsize = AtomicUsize::new(0);

impl Drop for ExternalDef {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An external function (cheap to clone); see the module docs.
#[derive(Clone)]
pub struct External(Handle);

/// An argument of an external call: a tensor (an array input) or a plain number (a static
/// input).
#[derive(Clone)]
pub enum ExtArg {
    /// An array input.
    Array(Tensor),
    /// A static input.
    Static(Scalar),
}

impl From<&Tensor> for ExtArg {
    fn from(t: &Tensor) -> ExtArg {
        ExtArg::Array(t.clone())
    }
}
impl From<Tensor> for ExtArg {
    fn from(t: Tensor) -> ExtArg {
        ExtArg::Array(t)
    }
}
impl From<f64> for ExtArg {
    fn from(v: f64) -> ExtArg {
        ExtArg::Static(Scalar::Float(v))
    }
}
impl From<f32> for ExtArg {
    fn from(v: f32) -> ExtArg {
        ExtArg::Static(Scalar::Float(v as f64))
    }
}
impl From<i64> for ExtArg {
    fn from(v: i64) -> ExtArg {
        ExtArg::Static(Scalar::Int(v))
    }
}
impl From<i32> for ExtArg {
    fn from(v: i32) -> ExtArg {
        ExtArg::Static(Scalar::Int(v as i64))
    }
}
impl From<bool> for ExtArg {
    fn from(v: bool) -> ExtArg {
        ExtArg::Static(Scalar::Bool(v))
    }
}

/// Builds an [`External`]: name, schema, endpoints, default vmap method.
pub struct ExternalBuilder {
    name: String,
    inputs: Vec<InputSpec>,
    outputs: Vec<OutputSpec>,
    apply: Option<HostFn>,
    jvp: Option<HostFn>,
    vjp: Option<HostFn>,
    vmap_method: Option<BatchStrategy>,
}

impl External {
    /// Starts the definition of an external named `name` (the name errors and `DEBUG=2` show).
    pub fn builder(name: &str) -> ExternalBuilder {
        ExternalBuilder {
            name: name.to_string(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            apply: None,
            jvp: None,
            vjp: None,
            vmap_method: None,
        }
    }

    /// How many externals are alive in the process (held by an `External` or a graph node
    /// that calls one): a count for checking that none outlives its owners.
    pub fn live() -> usize {
        LIVE.load(Ordering::Relaxed)
    }

    fn def(&self) -> &ExternalDef {
        self.0
            .get::<ExternalDef>()
            .expect("an external's handle holds its definition")
    }

    fn log(&self) -> std::sync::MutexGuard<'_, CallLog> {
        self.def().calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.def().name
    }

    /// The input schema.
    pub fn inputs(&self) -> &[InputSpec] {
        &self.def().inputs
    }

    /// Calls the external on `args` (schema order) with its default vmap method; one tensor
    /// per output. Shape and dtype mismatches with the schema panic here, at the caller.
    #[track_caller]
    pub fn call(&self, args: &[ExtArg]) -> Vec<Tensor> {
        self.call_with(args, self.def().vmap_method)
    }

    /// [`External::call`] with the vmap method of this call site (`None`: vmapping it, also
    /// inside `jacfwd`/`jacrev`, is an error that says to choose one).
    #[track_caller]
    pub fn call_with(&self, args: &[ExtArg], method: Option<BatchStrategy>) -> Vec<Tensor> {
        let (arrays, statics) = self.check_args(args);
        let info = CallInfo {
            name: self.def().name.clone(),
            strategy: method,
            external: self.0.clone(),
            endpoint: Endpoint::Apply,
            lead: 0,
            statics,
        };
        let call = info.node(arrays, Vec::new());
        let n = tuple_body(&call).map_or(0, |b| b.src().len());
        (0..n)
            .map(|i| Tensor::from_uop(call.get_tuple(i)))
            .collect()
    }

    /// The latest invocations (at most [`CALL_LOG_SIZE`]), oldest first.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.log().recent()
    }

    /// How many times `endpoint` ran (every invocation counts, kept or not).
    pub fn count(&self, endpoint: Endpoint) -> usize {
        self.log().count(endpoint)
    }

    /// The shapes each kept invocation of `endpoint` received (see [`External::calls`]), in
    /// order.
    pub fn shapes(&self, endpoint: Endpoint) -> Vec<Vec<Vec<usize>>> {
        self.calls()
            .into_iter()
            .filter(|r| r.endpoint == endpoint)
            .map(|r| r.shapes)
            .collect()
    }

    /// Forgets the recorded invocations and their counts.
    pub fn reset_calls(&self) {
        self.log().clear();
    }

    #[track_caller]
    fn check_args(&self, args: &[ExtArg]) -> (Vec<UOp>, Vec<Scalar>) {
        let name = &self.def().name;
        if args.len() != self.def().inputs.len() {
            panic!(
                "external `{name}`: called with {} arguments, but its schema has {} inputs",
                args.len(),
                self.def().inputs.len()
            );
        }
        let (mut arrays, mut statics) = (Vec::new(), Vec::new());
        for (k, (arg, spec)) in args.iter().zip(&self.def().inputs).enumerate() {
            match (arg, spec) {
                (ExtArg::Array(t), InputSpec::Array { dtype, dims, .. }) => {
                    if t.dtype() != *dtype || !dims.accepts(&t.shape()) {
                        panic!(
                            "external `{name}`: input {k} is {}{:?}, but the schema wants {dtype}{dims}",
                            t.dtype(),
                            t.shape()
                        );
                    }
                    arrays.push(t.uop());
                }
                (ExtArg::Static(s), InputSpec::Static) => statics.push(*s),
                (ExtArg::Array(_), InputSpec::Static) => {
                    panic!("external `{name}`: input {k} is static, but a tensor was given")
                }
                (ExtArg::Static(_), InputSpec::Array { .. }) => {
                    panic!("external `{name}`: input {k} is an array, but a number was given")
                }
            }
        }
        (arrays, statics)
    }

    fn endpoint(&self, endpoint: Endpoint) -> Option<&HostFn> {
        match endpoint {
            Endpoint::Apply => Some(&self.def().apply),
            Endpoint::Jvp => self.def().jvp.as_ref(),
            Endpoint::Vjp => self.def().vjp.as_ref(),
        }
    }

    /// True when the external has `endpoint`.
    pub fn has(&self, endpoint: Endpoint) -> bool {
        self.endpoint(endpoint).is_some()
    }

    /// Schema indices of the array inputs, in order.
    fn array_inputs(&self) -> Vec<usize> {
        (0..self.def().inputs.len())
            .filter(|&k| matches!(self.def().inputs[k], InputSpec::Array { .. }))
            .collect()
    }

    /// Positions among the array inputs of the differentiable ones.
    pub(crate) fn differentiable_arrays(&self) -> Vec<usize> {
        self.array_inputs()
            .iter()
            .enumerate()
            .filter(|(_, k)| self.def().inputs[**k].is_differentiable())
            .map(|(j, _)| j)
            .collect()
    }

    /// The spec of array input `j` (a position among the array inputs).
    pub(crate) fn array_spec(&self, j: usize) -> &InputSpec {
        &self.def().inputs[self.array_inputs()[j]]
    }
}

impl ExternalBuilder {
    /// Appends an input to the schema.
    pub fn input(mut self, spec: InputSpec) -> Self {
        self.inputs.push(spec);
        self
    }

    /// Appends an output.
    pub fn output(mut self, spec: OutputSpec) -> Self {
        self.outputs.push(spec);
        self
    }

    /// The function itself.
    pub fn apply(
        mut self,
        f: impl Fn(&HostCall) -> Vec<HostArray> + Send + Sync + 'static,
    ) -> Self {
        self.apply = Some(Arc::new(f));
        self
    }

    /// The forward-mode endpoint: given the inputs and [`HostCall::tangents`], one tangent per
    /// output.
    pub fn jvp(mut self, f: impl Fn(&HostCall) -> Vec<HostArray> + Send + Sync + 'static) -> Self {
        self.jvp = Some(Arc::new(f));
        self
    }

    /// The reverse-mode endpoint: given the inputs and [`HostCall::cotangents`], one cotangent
    /// per differentiable array input.
    pub fn vjp(mut self, f: impl Fn(&HostCall) -> Vec<HostArray> + Send + Sync + 'static) -> Self {
        self.vjp = Some(Arc::new(f));
        self
    }

    /// The vmap method of calls that do not name one (unset: vmapping a call is an error).
    pub fn vmap_method(mut self, method: BatchStrategy) -> Self {
        self.vmap_method = Some(method);
        self
    }

    /// The external (no registry holds it: it lives as long as a handle or a call of it).
    #[track_caller]
    pub fn build(self) -> External {
        let name = self.name;
        let apply = self
            .apply
            .unwrap_or_else(|| panic!("external `{name}`: no apply endpoint was given"));
        if self.outputs.is_empty() {
            panic!("external `{name}`: no output was declared");
        }
        LIVE.fetch_add(1, Ordering::Relaxed);
        let def = ExternalDef {
            name,
            inputs: self.inputs,
            outputs: self.outputs,
            apply,
            jvp: self.jvp,
            vjp: self.vjp,
            vmap_method: self.vmap_method,
            calls: Mutex::new(CallLog::default()),
        };
        External(Handle::new(def))
    }
}

/// The fields of a `Call`'s arg, owned.
#[derive(Clone, Debug, PartialEq)]
pub struct CallInfo {
    /// The external's name.
    pub name: String,
    /// The call site's vmap method.
    pub strategy: Option<BatchStrategy>,
    /// The external's definition, kept alive by the call.
    pub external: Handle,
    /// The endpoint invoked.
    pub endpoint: Endpoint,
    /// How many leading batch axes the array operands carry.
    pub lead: usize,
    /// The static inputs, in schema order.
    pub statics: Vec<Scalar>,
}

impl CallInfo {
    /// The info of an external `Call` node.
    pub fn of(node: &UOp) -> Option<CallInfo> {
        match (node.op(), node.arg()) {
            (
                Op::Call,
                Arg::Call {
                    name,
                    strategy,
                    external,
                    endpoint,
                    lead,
                    statics,
                },
            ) if external.get::<ExternalDef>().is_some() => Some(CallInfo {
                name: name.clone(),
                strategy: *strategy,
                external: external.clone(),
                endpoint: *endpoint,
                lead: *lead,
                statics: statics.clone(),
            }),
            _ => None,
        }
    }

    /// The external this call invokes.
    pub fn external(&self) -> External {
        External(self.external.clone())
    }

    fn arg(&self) -> Arg {
        Arg::Call {
            name: self.name.clone(),
            strategy: self.strategy,
            external: self.external.clone(),
            endpoint: self.endpoint,
            lead: self.lead,
            statics: self.statics.clone(),
        }
    }

    /// A short description for messages: "`name` (apply)".
    pub fn describe(&self) -> String {
        let endpoint = match self.endpoint {
            Endpoint::Apply => "apply",
            Endpoint::Jvp => "jvp",
            Endpoint::Vjp => "vjp",
        };
        format!("`{}` ({endpoint})", self.name)
    }

    /// The `Call` node of this endpoint on `arrays` (the array inputs) and `extra` (tangents
    /// or cotangents), each carrying `lead` leading batch axes.
    pub fn node(&self, arrays: Vec<UOp>, extra: Vec<UOp>) -> UOp {
        let carriers = self
            .outputs(&arrays, &extra)
            .into_iter()
            .map(|(shape, dtype)| Tensor::zeros(&shape, dtype).uop())
            .collect();
        let mut src = vec![UOp::tuple(carriers)];
        src.extend(arrays);
        src.extend(extra);
        UOp::new(Op::Call, DType::Void, src, self.arg())
    }

    /// The shape and dtype of each result: the broadcast leading axes, then the per-call
    /// shape (the schema's outputs for apply and jvp, the differentiable inputs for vjp).
    fn outputs(&self, arrays: &[UOp], extra: &[UOp]) -> Vec<(Vec<usize>, DType)> {
        let ext = self.external();
        let lead = leading_dims(arrays.iter().chain(extra), self.lead);
        let mut stripped = Vec::new();
        let mut next = arrays.iter();
        for spec in ext.inputs() {
            stripped.push(match spec {
                InputSpec::Array { .. } => next
                    .next()
                    .expect("one operand per array input")
                    .shape_vec()[self.lead..]
                    .to_vec(),
                InputSpec::Static => Vec::new(),
            });
        }
        let with_lead = |s: Vec<usize>| [lead.clone(), s].concat();
        match self.endpoint {
            Endpoint::Apply | Endpoint::Jvp => ext
                .def()
                .outputs
                .iter()
                .map(|o| (with_lead((o.shape)(&stripped)), o.dtype))
                .collect(),
            Endpoint::Vjp => ext
                .differentiable_arrays()
                .into_iter()
                .map(|j| {
                    let shape = arrays[j].shape_vec()[self.lead..].to_vec();
                    (with_lead(shape), arrays[j].dtype())
                })
                .collect(),
        }
    }
}

/// The first `lead` axes of `operands`, broadcast together (size-1 axes stretch).
fn leading_dims<'a>(operands: impl Iterator<Item = &'a UOp>, lead: usize) -> Vec<usize> {
    let mut dims = vec![1; lead];
    for u in operands {
        for (d, &s) in dims.iter_mut().zip(&u.shape_vec()[..lead]) {
            if s != 1 {
                *d = s;
            }
        }
    }
    dims
}

/// Runs the endpoint of the external `Call` node on its realized operands (the array inputs
/// then the tangents or cotangents, in operand order), records the call, and checks the
/// results against the shapes and dtypes the node declares. A panic inside the host function
/// or a result of the wrong shape or dtype is an error naming the external.
pub fn invoke(node: &UOp, operands: Vec<HostArray>) -> Result<Vec<HostArray>, String> {
    let info = CallInfo::of(node).ok_or_else(|| format!("{node:?} is not an external call"))?;
    let ext = info.external();
    let what = info.describe();
    let f = ext
        .endpoint(info.endpoint)
        .ok_or_else(|| format!("external {what}: the external has no such endpoint"))?
        .clone();
    let narrays = ext.array_inputs().len();
    let shapes = operands.iter().map(|a| a.shape().to_vec()).collect();
    let mut operands = operands.into_iter();
    let (mut arrays, mut statics) = (operands.by_ref().take(narrays), info.statics.iter());
    let inputs = ext
        .inputs()
        .iter()
        .map(|spec| match spec {
            InputSpec::Array { .. } => HostValue::Array(arrays.next().expect("array operand")),
            InputSpec::Static => HostValue::Static(*statics.next().expect("static value")),
        })
        .collect();
    let call = HostCall {
        inputs,
        extra: operands.collect(),
    };
    ext.log().record(CallRecord {
        endpoint: info.endpoint,
        shapes,
    });
    let results = catch_unwind(AssertUnwindSafe(|| f(&call)))
        .map_err(|panic| format!("external {what} panicked: {}", panic_message(&panic)))?;
    check_results(&what, node, &results)?;
    Ok(results)
}

fn check_results(what: &str, node: &UOp, results: &[HostArray]) -> Result<(), String> {
    let declared = tuple_body(node).expect("an external call has a body").src();
    if results.len() != declared.len() {
        return Err(format!(
            "external {what} returned {} arrays, but {} were expected",
            results.len(),
            declared.len()
        ));
    }
    for (i, (r, d)) in results.iter().zip(declared).enumerate() {
        if r.shape() != d.shape_vec().as_slice() || r.dtype() != d.dtype() {
            return Err(format!(
                "external {what} returned {}{:?} as result {i}, but {}{:?} was expected",
                r.dtype(),
                r.shape(),
                d.dtype(),
                d.shape_vec()
            ));
        }
        if r.bytes().len() != d.shape_vec().iter().product::<usize>() * d.dtype().size_bytes() {
            return Err(format!(
                "external {what}: result {i} holds {} bytes, which do not fill its shape",
                r.bytes().len()
            ));
        }
    }
    Ok(())
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}
