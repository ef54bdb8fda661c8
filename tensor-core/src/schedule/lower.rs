//! Range assignment: lowering a tensor node, asked for at per-axis index expressions, to the
//! scalar expression that computes that element inside one kernel.
//!
//! Walking from a kernel's root toward its inputs, each op turns the index it is asked for into
//! the indices it asks its operands for:
//!
//! ```text
//! elementwise op(a, b)[i]      => op(a[i], b[i])            (size-1 axes of an operand read 0)
//! Reshape(x, s')[i]            => x[unravel(flatten(i, s'), shape x)]
//! Expand(x, s')[i]             => x[i with broadcast axes := 0]
//! Permute(x, p)[i]             => x[j] where j[p[k]] = i[k]
//! Flip(x, f)[i]                => x[i with flagged axes := n-1-i]
//! Shrink(x, b, e)[i]           => x[i + b]
//! Pad(x, b, e)[i]              => x[i - b] gated by b <= i < b + n, else 0
//! Stack(x0, x1, ..)[s, i]      => x_s[i]  (a where-chain on s when s is not a constant)
//! Index(x, j0, ..)[i]          => x[j0[..], .., i..] gated by 0 <= j < n
//! Reduce(x, op, axes)[i]       => Reduce(x[i with axes := fresh Reduce ranges], ranges)
//! realized or Buffer x[i]      => Load(Address(DefineGlobal(slot of x), flatten(i), gate))
//! ```
//!
//! Lowerings are memoized on `(node, index, gate)`, so two consumers asking for the same element
//! share one UOp (hash-consing is the CSE); consumers asking for different elements get
//! different expressions, which is how cheap elementwise work is recomputed instead of buffered.

use super::ScheduleItem;
use super::collapse::collapse_reduce;
use super::index::{add, and, flatten, int, less, mul, ranges_in, unravel};
use super::realize::{CostModel, Decision, Facts, MIN_VALUE_COST, Rule, decide};
use super::simplify::simplify_kernel;
use crate::uop::scope::free_ranges;
use crate::uop::shape::operand_exprs;
use crate::uop::{Arg, AxisType, DType, Device, Op, ReduceOp, UOp};
use std::collections::{HashMap, HashSet};

/// A request for one element of a node: the node, its per-axis index, its validity gate.
type Request = (UOp, Vec<UOp>, Option<UOp>);

/// Where a reduce was asked for: the kernel, the per-axis index, the validity gate.
type RequestSite = (usize, Vec<UOp>, Option<UOp>);

/// What the scheduler knows across kernels: which nodes are realized into which buffers, and
/// how often each reduce is asked for (the input of the realization cost model).
#[derive(Default)]
pub struct IndexingContext {
    /// Realized tensor node → the `Buffer` it is stored into.
    pub realized: HashMap<UOp, UOp>,
    /// `Buffer` → the realized node whose kernel fills it.
    pub producer: HashMap<UOp, UOp>,
    /// Reduce node → the distinct `(kernel, index, gate)` it was requested at this round.
    requests: HashMap<UOp, HashSet<RequestSite>>,
    costs: CostModel,
    /// `vmap_map`: node → the ambient vmap `Range`s its value varies with (outermost first).
    ambient: HashMap<UOp, Vec<UOp>>,
    /// The rule (and facts) that realized each realized node, in order, kept across rounds.
    realized_by: Vec<Decision>,
    /// Optional nodes kept fused this round, in order, each with its latest decision.
    fused: Vec<Decision>,
    fused_at: HashMap<UOp, usize>,
    /// For each node realized by the cost model: the values it was being computed for when
    /// it was decided (the kernel's root and the reduces and values lowered inline around
    /// the request). If one of them changes between buffer and inline, the facts of that
    /// decision are stale (a product realized because it sat under a window, inside a
    /// reduce that later got a kernel of its own), so it is decided again.
    decided_within: HashMap<UOp, Vec<UOp>>,
    /// Whether this round realized or un-realized a node (another round is needed).
    changed: bool,
}

impl IndexingContext {
    /// Gives `node` a buffer of its own because of `rule` (idempotent).
    pub fn realize(&mut self, node: &UOp, rule: Rule) {
        self.realize_for(node, rule, None, Vec::new());
    }

    fn realize_for(&mut self, node: &UOp, rule: Rule, facts: Option<Facts>, within: Vec<UOp>) {
        if self.realized.contains_key(node) {
            return;
        }
        let decision = Decision {
            node: node.clone(),
            rule,
            facts,
        };
        self.realized_by.push(decision);
        self.forget_statistics();
        if facts.is_some() {
            self.decided_within.insert(node.clone(), within);
        }
        self.undo_decisions_within(node);
        let device = node.device().unwrap_or_else(Device::cpu);
        let size = node.numel() * self.ambient_shape(node).iter().product::<usize>();
        let buffer = UOp::new_buffer(size, node.dtype(), device);
        self.producer.insert(buffer.clone(), node.clone());
        self.realized.insert(node.clone(), buffer);
    }

    /// Requests counted so far may come from inline lowerings that now read a buffer (or
    /// no longer do), and memoized costs may include its computation: both are stale. Later
    /// requests of the round count afresh; the last round (it changes nothing) sees complete
    /// counts.
    fn forget_statistics(&mut self) {
        self.changed = true;
        self.requests.clear();
        self.costs = CostModel::default();
    }

    /// Takes the buffer back from every node the cost model realized while computing
    /// `node` (inline, or as its kernel's root), which just changed between buffer and
    /// inline: those nodes are decided again, with the facts of where they are now computed.
    fn undo_decisions_within(&mut self, node: &UOp) {
        let stale: Vec<UOp> = self
            .decided_within
            .iter()
            .filter(|(_, within)| within.contains(node))
            .map(|(n, _)| n.clone())
            .collect();
        for n in stale {
            self.decided_within.remove(&n);
            if let Some(buffer) = self.realized.remove(&n) {
                self.producer.remove(&buffer);
            }
            self.realized_by.retain(|d| d.node != n);
            self.forget_statistics();
            self.undo_decisions_within(&n);
        }
    }

    /// Whether the last round realized or un-realized a node (cleared by [`Self::start_round`]).
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The forward `vmap_map` pass over `graph` (operands before users): each node's ambient
    /// ranges are its free ranges (`uop::scope`): a `Vmapin` adds its `Range` vargs, a
    /// `Vmapout` removes its own. A node that does not depend on a `Vmapin` (an index buffer,
    /// a constant) has none, so its buffer is not batched.
    pub fn track_ambient_ranges(&mut self, graph: &[UOp]) {
        self.ambient = free_ranges(graph);
    }

    /// The ambient vmap ranges `node`'s value varies with (empty outside a vmap scope).
    fn ambient_of(&self, node: &UOp) -> Vec<UOp> {
        self.ambient.get(node).cloned().unwrap_or_default()
    }

    /// The sizes of `node`'s ambient ranges: the batch axes prepended to its buffer.
    fn ambient_shape(&self, node: &UOp) -> Vec<usize> {
        self.ambient_of(node).iter().map(range_size).collect()
    }

    /// Forgets the per-round statistics before every kernel is built again.
    pub fn start_round(&mut self) {
        self.changed = false;
        self.requests.clear();
        self.fused.clear();
        self.fused_at.clear();
        self.costs = CostModel::default();
    }

    /// Every decision of the last round: the realized nodes with the rule that realized
    /// them, then the fused nodes the cost model was asked about, in a stable order.
    pub fn decisions(&self) -> Vec<Decision> {
        let fused = self
            .fused
            .iter()
            .filter(|d| !self.realized.contains_key(&d.node));
        self.realized_by.iter().chain(fused).cloned().collect()
    }

    /// Records that `decision.node` stays fused (the latest request's decision wins).
    fn keep_fused(&mut self, decision: Decision) {
        match self.fused_at.get(&decision.node) {
            Some(&k) => self.fused[k] = decision,
            None => {
                self.fused_at
                    .insert(decision.node.clone(), self.fused.len());
                self.fused.push(decision);
            }
        }
    }
}

/// Builds the kernel that computes realized node `root` into its buffer.
pub fn build_kernel(ctx: &mut IndexingContext, kernel: usize, root: &UOp) -> ScheduleItem {
    let out = ctx.realized[root].clone();
    let mut builder = KernelBuilder {
        ctx,
        kernel,
        next_range: 0,
        loops: Vec::new(),
        enclosing: Vec::new(),
        memo: HashMap::new(),
        buffers: vec![out.clone()],
        bindings: HashMap::new(),
        reads: HashMap::new(),
        mask_factors: HashMap::new(),
        sliding: 0,
        within: vec![root.clone()],
        epilogue: [None; 2],
    };
    // Inside a vmap scope the kernel also loops over the ambient ranges (outermost).
    let ambient = builder.ctx.ambient_of(root);
    let mut stored_shape = builder.ctx.ambient_shape(root);
    let batch: Vec<UOp> = stored_shape
        .iter()
        .map(|&d| builder.new_range(d, AxisType::Loop))
        .collect();
    builder.bindings = ambient.into_iter().zip(batch.iter().cloned()).collect();
    let shape = root.shape_vec();
    let loops: Vec<UOp> = shape
        .iter()
        .map(|&d| builder.new_range(d, AxisType::Loop))
        .collect();
    builder.loops = batch.iter().chain(&loops).cloned().collect();
    let value = builder.lower_node(root, &loops, None);
    stored_shape.extend(&shape);
    let target = address_node(&out, 0, flatten(&builder.loops, &stored_shape), None);
    let store = UOp::new(Op::Store, DType::Void, vec![target, value], Arg::None);
    ScheduleItem {
        ast: simplify_kernel(&UOp::sink(vec![store])),
        buffers: builder.buffers,
    }
}

fn buffer_size(buffer: &UOp) -> usize {
    match buffer.arg() {
        Arg::Buffer(b) => b.size,
        _ => usize::MAX,
    }
}

fn range_size(r: &UOp) -> usize {
    (r.vmax().as_i64() + 1).max(0) as usize
}

fn address_node(buffer: &UOp, slot: usize, flat: UOp, gate: Option<UOp>) -> UOp {
    let dg = UOp::new(
        Op::DefineGlobal,
        buffer.dtype(),
        vec![],
        Arg::Int(slot as i64),
    );
    let mut src = vec![dg, flat];
    src.extend(gate);
    UOp::new(Op::Address, buffer.dtype(), src, Arg::None)
}

fn zero(dtype: DType) -> UOp {
    UOp::constant(0i64, dtype)
}

fn is_false(gate: &Option<UOp>) -> bool {
    gate.as_ref()
        .and_then(|g| g.const_value())
        .is_some_and(|v| !v.as_bool())
}

/// `where(gate, v, 0)`, or `v` itself when it is a load already gated by `gate`.
fn gated_value(gate: Option<UOp>, v: UOp) -> UOp {
    match gate {
        None => v,
        Some(_) if v.op() == Op::Load => v,
        Some(g) if g.const_value().is_some() => {
            if g.const_value().is_some_and(|c| c.as_bool()) {
                v
            } else {
                zero(v.dtype())
            }
        }
        Some(g) => {
            let z = zero(v.dtype());
            UOp::alu(Op::Where, vec![g, v, z])
        }
    }
}

/// The index of an operand of shape `src` for output index `idx` of shape `out` under
/// NumPy broadcasting (right-aligned; size-1 operand axes read element 0).
fn broadcast_index(idx: &[UOp], out: &[usize], src: &[usize]) -> Vec<UOp> {
    let offset = out.len() - src.len();
    src.iter()
        .enumerate()
        .map(|(k, &d)| {
            if d == 1 && out[offset + k] != 1 {
                int(0)
            } else {
                idx[offset + k].clone()
            }
        })
        .collect()
}

struct KernelBuilder<'a> {
    ctx: &'a mut IndexingContext,
    kernel: usize,
    next_range: usize,
    /// The output loops of the kernel (`Const 0` for size-1 axes).
    loops: Vec<UOp>,
    /// The ranges of the reduces being lowered, innermost last.
    enclosing: Vec<UOp>,
    memo: HashMap<Request, UOp>,
    /// The kernel's buffer arguments in slot order, the output first.
    buffers: Vec<UOp>,
    /// Ambient vmap `Range` → the index expression it stands for in this kernel.
    bindings: HashMap<UOp, UOp>,
    /// Whether computing a node reads memory (see `reads_memory`).
    reads: HashMap<UOp, bool>,
    /// Whether a product (looked through casts and views) has a mask factor (see
    /// `has_mask_factor`), memoized: a long product chain is walked once, not once per link.
    mask_factors: HashMap<UOp, bool>,
    /// How many reduces over sliding ranges enclose the node being lowered (their sum
    /// collapses to one read per position, so values under them are left inline).
    sliding: usize,
    /// The kernel's root, then the optional nodes (reduces, costly values) being lowered
    /// inline around the current request, outermost first.
    within: Vec<UOp>,
    /// The kernel's epilogue cost as written and lowered, once asked for (`epilogue_cost`).
    epilogue: [Option<u64>; 2],
}

impl KernelBuilder<'_> {
    /// A fresh range for an axis of size `bound` (a size-1 axis is just index 0).
    fn new_range(&mut self, bound: usize, axis_type: AxisType) -> UOp {
        if bound == 1 {
            return int(0);
        }
        let r = UOp::range(bound, self.next_range, axis_type);
        self.next_range += 1;
        r
    }

    fn slot(&mut self, buffer: &UOp) -> usize {
        match self.buffers.iter().position(|b| b == buffer) {
            Some(s) => s,
            None => {
                self.buffers.push(buffer.clone());
                self.buffers.len() - 1
            }
        }
    }

    fn load(&mut self, buffer: &UOp, flat: UOp, gate: Option<UOp>) -> UOp {
        // Nothing is ever read from an empty buffer: the load's loop never runs, but a
        // rewrite that drops the loop (a sum of an invariant) would read it anyway.
        if is_false(&gate) || buffer_size(buffer) == 0 {
            return zero(buffer.dtype());
        }
        let slot = self.slot(buffer);
        let address = address_node(buffer, slot, flat, gate);
        UOp::new(Op::Load, buffer.dtype(), vec![address], Arg::None)
    }

    /// Element `idx` of `x` (under validity `gate`): a load if `x` is realized, else its
    /// inline computation.
    fn lower(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        // One level of recursion per op along a path of the graph: on a stack that grows.
        super::stack::grow(|| self.lower_in_place(x, idx, gate))
    }

    fn lower_in_place(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        if is_false(&gate) {
            return zero(x.dtype());
        }
        if let Some(buffer) = self.ctx.realized.get(x).cloned() {
            let mut full_idx: Vec<UOp> = self
                .ctx
                .ambient_of(x)
                .iter()
                .map(|r| self.bound(r))
                .collect();
            full_idx.extend(idx.iter().cloned());
            let mut shape = self.ctx.ambient_shape(x);
            shape.extend(x.shape_vec());
            return self.load(&buffer, flatten(&full_idx, &shape), gate);
        }
        // A node that varies with ranges is a different value under each binding of them.
        let mut key_idx: Vec<UOp> = self
            .ctx
            .ambient_of(x)
            .iter()
            .map(|r| self.bound(r))
            .collect();
        key_idx.extend(idx.iter().cloned());
        let key = (x.clone(), key_idx, gate.clone());
        if let Some(v) = self.memo.get(&key) {
            return v.clone();
        }
        let optional = self.is_costly_value(x);
        if optional && self.should_realize(x, idx, &gate) {
            return self.lower(x, idx, gate);
        }
        let v = match optional {
            true => self.inside(x, |b| b.lower_node(x, idx, gate)),
            false => self.lower_node(x, idx, gate),
        };
        self.memo.insert(key, v.clone());
        v
    }

    /// Element `idx` of `x` computed from its operands (never a load of `x` itself).
    fn lower_node(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        match x.op() {
            Op::Buffer => self.load(x, idx[0].clone(), gate),
            Op::Const => x.clone(),
            Op::Vconst => self.lower_vconst(x, &idx[0]),
            Op::Contiguous | Op::Copy | Op::Detach | Op::ContiguousBackward => {
                self.lower(x.s(0), idx, gate)
            }
            Op::Reshape => {
                let (from, to) = (x.s(0).shape_vec(), x.shape_vec());
                let src_idx = if from == to {
                    idx.to_vec()
                } else {
                    unravel(&flatten(idx, &to), &from)
                };
                self.lower(x.s(0), &src_idx, gate)
            }
            Op::Expand => {
                let src_idx = broadcast_index(idx, &x.shape_vec(), &x.s(0).shape_vec());
                self.lower(x.s(0), &src_idx, gate)
            }
            Op::Permute => self.lower_permute(x, idx, gate),
            Op::Flip => self.lower_flip(x, idx, gate),
            Op::Range => self.bound(x),
            Op::Shrink => {
                let begins = self.window_operand(x, 1);
                let src_idx: Vec<UOp> = idx.iter().zip(&begins).map(|(i, b)| add(i, b)).collect();
                self.lower(x.s(0), &src_idx, gate)
            }
            Op::Pad => self.lower_pad(x, idx, gate),
            Op::Stack => self.lower_stack(x, idx, gate),
            Op::Index => self.lower_index(x, idx, gate),
            Op::Reduce => self.lower_reduce(x, idx, gate),
            Op::Vmapout => self.lower_vmapout(x, idx, gate),
            Op::Vmapin => {
                let mut inner = idx.iter();
                let src_idx: Vec<UOp> = x.src()[1..]
                    .iter()
                    .map(|a| match a.op() {
                        Op::Range => self.bound(a),
                        _ => inner
                            .next()
                            .expect("Vmapin: one index per kept axis")
                            .clone(),
                    })
                    .collect();
                self.lower(x.s(0), &src_idx, gate)
            }
            op if op.is_elementwise() => {
                let out = x.shape_vec();
                let src: Vec<UOp> = x
                    .src()
                    .iter()
                    .map(|s| {
                        let s_idx = broadcast_index(idx, &out, &s.shape_vec());
                        self.lower(s, &s_idx, gate.clone())
                    })
                    .collect();
                UOp::new(op, x.dtype(), src, x.arg().clone())
            }
            op => panic!(
                "schedule: cannot lower {op} into a kernel (stores, calls, parameters outside \
                 a function and multi-device ops are not scheduled yet)"
            ),
        }
    }

    /// What ambient range `r` stands for in this kernel.
    fn bound(&self, r: &UOp) -> UOp {
        match self.bindings.get(r) {
            Some(i) => i.clone(),
            None => panic!(
                "schedule: a Range is used outside the Vmapout or Reduce that closes it \
                 (range bound {})",
                range_size(r)
            ),
        }
    }

    /// `f` lowered with each range of `pairs` bound to its index expression; the previous
    /// bindings are restored afterwards.
    fn with_bindings(&mut self, pairs: Vec<(UOp, UOp)>, f: impl FnOnce(&mut Self) -> UOp) -> UOp {
        let previous: Vec<(UOp, Option<UOp>)> = pairs
            .into_iter()
            .map(|(r, i)| (r.clone(), self.bindings.insert(r, i)))
            .collect();
        let v = f(self);
        for (r, p) in previous {
            match p {
                Some(p) => self.bindings.insert(r, p),
                None => self.bindings.remove(&r),
            };
        }
        v
    }

    /// `Vmapout(x, vargs)[i]`: bind each `Range` varg to its axis of `i`, ask `x` for the rest.
    fn lower_vmapout(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        let mut inner_idx = Vec::new();
        let mut pairs = Vec::new();
        for (a, i) in x.src()[1..].iter().zip(idx) {
            if a.op() == Op::Range {
                pairs.push((a.clone(), i.clone()));
            } else {
                inner_idx.push(i.clone());
            }
        }
        self.with_bindings(pairs, |b| b.lower(x.s(0), &inner_idx, gate))
    }

    fn lower_vconst(&mut self, x: &UOp, i: &UOp) -> UOp {
        let Arg::Vconst(values) = x.arg() else {
            panic!("schedule: Vconst without values")
        };
        let element = |k: usize| UOp::constant(values[k], x.dtype());
        if let Some(k) = i.const_value() {
            return element(k.as_i64() as usize);
        }
        let last = values.len() - 1;
        (0..last).rev().fold(element(last), |acc, k| {
            let differs = UOp::alu(Op::CmpNe, vec![i.clone(), int(k as i64)]);
            UOp::alu(Op::Where, vec![differs, acc, element(k)])
        })
    }

    fn lower_permute(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        let Arg::Permutation(perm) = x.arg() else {
            panic!("schedule: Permute without a permutation")
        };
        let mut src_idx = vec![int(0); perm.len()];
        for (k, &p) in perm.iter().enumerate() {
            src_idx[p] = idx[k].clone();
        }
        self.lower(x.s(0), &src_idx, gate)
    }

    fn lower_flip(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        let Arg::Flags(flags) = x.arg() else {
            panic!("schedule: Flip without flags")
        };
        let shape = x.shape_vec();
        let src_idx: Vec<UOp> = idx
            .iter()
            .zip(flags)
            .zip(&shape)
            .map(|((i, &f), &n)| {
                if f {
                    add(&int(n as i64 - 1), &mul(i, &int(-1)))
                } else {
                    i.clone()
                }
            })
            .collect();
        self.lower(x.s(0), &src_idx, gate)
    }

    fn lower_pad(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        let (begins, ends) = (self.window_operand(x, 1), self.window_operand(x, 2));
        let src_shape = x.s(0).shape_vec();
        let mut valid = None;
        let mut src_idx = Vec::with_capacity(idx.len());
        for (k, i) in idx.iter().enumerate() {
            let (b, n) = (&begins[k], int(src_shape[k] as i64));
            src_idx.push(add(i, &mul(b, &int(-1))));
            if b.vmax().as_i64() > 0 {
                valid = and(valid, Some(less(&add(b, &int(-1)), i)));
            }
            if ends[k].vmax().as_i64() > 0 {
                valid = and(valid, Some(less(i, &add(b, &n))));
            }
        }
        let v = self.lower(x.s(0), &src_idx, and(gate, valid.clone()));
        gated_value(valid, v)
    }

    /// The begins (`i = 1`) or ends (`i = 2`) of a `Pad`/`Shrink` as index expressions of this
    /// kernel (an entry that slides with a range reads what the range is bound to).
    fn window_operand(&mut self, x: &UOp, i: usize) -> Vec<UOp> {
        let exprs = operand_exprs(x.s(i))
            .unwrap_or_else(|| panic!("schedule: {} has a malformed window operand", x.op()));
        exprs.iter().map(|e| self.lower(e, &[], None)).collect()
    }

    fn lower_stack(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        let (which, rest) = (&idx[0], &idx[1..]);
        if let Some(k) = which.const_value() {
            return self.lower(x.s(k.as_i64() as usize), rest, gate);
        }
        let parts: Vec<UOp> = x
            .src()
            .iter()
            .map(|p| self.lower(p, rest, gate.clone()))
            .collect();
        let last = parts.len() - 1;
        (0..last).rev().fold(parts[last].clone(), |acc, k| {
            let differs = UOp::alu(Op::CmpNe, vec![which.clone(), int(k as i64)]);
            UOp::alu(Op::Where, vec![differs, acc, parts[k].clone()])
        })
    }

    fn lower_index(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        let base = x.s(0);
        let base_shape = base.shape_vec();
        let mut out_axis = 0;
        let mut base_idx = Vec::new();
        let mut valid = None;
        for (j, selector) in x.src()[1..].iter().enumerate() {
            let sel_idx: Vec<UOp> = match selector.shape_vec().len() {
                0 => vec![],
                _ => {
                    out_axis += 1;
                    vec![idx[out_axis - 1].clone()]
                }
            };
            let mut v = self.lower(selector, &sel_idx, gate.clone());
            if v.dtype() != DType::Index {
                v = v.cast(DType::Index);
            }
            valid = and(valid, Some(less(&int(-1), &v)));
            valid = and(valid, Some(less(&v, &int(base_shape[j] as i64))));
            base_idx.push(v);
        }
        base_idx.extend(idx[out_axis..].iter().cloned());
        let v = self.lower(base, &base_idx, and(gate, valid.clone()));
        gated_value(valid, v)
    }

    fn lower_reduce(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        // A reduce of pure index arithmetic (an arange's prefix sum) that has a closed form
        // costs nothing inline, whatever the cost model would say.
        let pure = !self.reads_memory(x);
        let inline = pure.then(|| self.inside(x, |b| b.reduce_inline(x, idx, gate.clone())));
        if let Some(closed) = inline.as_ref().and_then(collapse_reduce) {
            self.ctx.keep_fused(Decision {
                node: x.clone(),
                rule: Rule::ClosedForm,
                facts: None,
            });
            return closed;
        }
        if self.should_realize(x, idx, &gate) {
            return self.lower(x, idx, gate);
        }
        inline.unwrap_or_else(|| self.inside(x, |b| b.reduce_inline(x, idx, gate)))
    }

    /// Runs `f` (the inline lowering of optional node `x`) with `x` recorded as the value
    /// the nodes decided meanwhile are computed for.
    fn inside(&mut self, x: &UOp, f: impl FnOnce(&mut Self) -> UOp) -> UOp {
        self.within.push(x.clone());
        let v = f(self);
        self.within.pop();
        v
    }

    /// True when `x` is a product with a mask of positions: some factor of its chain of
    /// products reads no memory and, below casts and movement ops, is a comparison or a
    /// select (not a constant).
    fn is_masked_product(&mut self, x: &UOp) -> bool {
        x.op() == Op::Mul && self.has_mask_factor(x)
    }

    /// True for a sum of products of two values read from memory (a matmul, a convolution):
    /// the kernel rules tile it, so its epilogue runs lane by lane over the tile.
    fn is_contraction(&mut self, x: &UOp) -> bool {
        if !matches!(x.arg(), Arg::Reduce(ReduceOp::Add, _)) {
            return false;
        }
        let body = under_casts_and_views(x.s(0));
        body.op() == Op::Mul && body.src().iter().all(|f| self.reads_memory(f))
    }

    fn has_mask_factor(&mut self, u: &UOp) -> bool {
        // Factors before products, each distinct one once: a chain of squarings (`x * x`,
        // repeated) is a DAG whose paths double at every step.
        let root = under_casts_and_views(u);
        let mut stack = vec![(root.clone(), false)];
        while let Some((core, factors_done)) = stack.pop() {
            if self.mask_factors.contains_key(&core) {
                continue;
            }
            let factors: Vec<UOp> = match core.op() {
                Op::Mul => core.src().iter().map(under_casts_and_views).collect(),
                _ => Vec::new(),
            };
            if !factors_done && !factors.is_empty() {
                stack.push((core, true));
                stack.extend(factors.into_iter().map(|f| (f, false)));
                continue;
            }
            let has = match core.op() {
                Op::Mul => factors.iter().any(|f| self.mask_factors[f]),
                Op::CmpNe | Op::CmpLt | Op::CmpEq | Op::Where => !self.reads_memory(&core),
                _ => false,
            };
            self.mask_factors.insert(core, has);
        }
        self.mask_factors[&root]
    }

    /// True when computing `x` reads a buffer (a `Buffer` or a realized node) or draws random
    /// bits, memoized for the kernel being built. Random bits count as memory: like a
    /// buffer's contents they are data no kernel rule folds, and each recomputation costs a
    /// hash, so they are decided by cost like loaded values (a model whose parameters are
    /// unrealized `randn` would otherwise recompute them at every use).
    fn reads_memory(&mut self, x: &UOp) -> bool {
        if let Some(&reads) = self.reads.get(x) {
            return reads;
        }
        let mut stack = vec![x.clone()];
        while let Some(node) = stack.pop() {
            if self.reads.contains_key(&node) {
                continue;
            }
            // A realized operand is a load: its own operands are another kernel's (walking
            // them from every kernel would be quadratic in a long chain of kernels).
            if self.ctx.realized.contains_key(&node) {
                self.reads.insert(node, true);
                continue;
            }
            let pending: Vec<UOp> = node
                .src()
                .iter()
                .filter(|s| !self.reads.contains_key(*s))
                .cloned()
                .collect();
            if pending.is_empty() {
                let reads = matches!(node.op(), Op::Buffer | Op::Threefry)
                    || self.ctx.realized.contains_key(&node)
                    || node.src().iter().any(|s| self.reads[s]);
                self.reads.insert(node, reads);
            } else {
                stack.push(node);
                stack.extend(pending);
            }
        }
        self.reads[x]
    }

    /// `x` lowered into this kernel: its operand inside a reduce over fresh loops.
    fn reduce_inline(&mut self, x: &UOp, idx: &[UOp], gate: Option<UOp>) -> UOp {
        let Arg::Reduce(op, axes) = x.arg() else {
            panic!("schedule: Reduce without a reduce arg")
        };
        let src_shape = x.s(0).shape_vec();
        let mut src_idx = idx.to_vec();
        let mut ranges = Vec::new();
        for &a in axes {
            let r = self.new_range(src_shape[a], AxisType::Reduce);
            if r.op() == Op::Range {
                ranges.push(r.clone());
            }
            src_idx[a] = r;
        }
        // A reduce over ranges (`reduce_over`) binds each to a fresh reduce loop.
        let mut pairs = Vec::new();
        for r in &x.src()[1..] {
            let fresh = self.new_range(range_size(r), AxisType::Reduce);
            if fresh.op() == Op::Range {
                ranges.push(fresh.clone());
            }
            pairs.push((r.clone(), fresh));
        }
        let depth = self.enclosing.len();
        self.enclosing.extend(ranges.iter().cloned());
        let sliding = !pairs.is_empty();
        self.sliding += usize::from(sliding);
        let v = self.with_bindings(pairs, |b| b.lower(x.s(0), &src_idx, gate));
        self.sliding -= usize::from(sliding);
        self.enclosing.truncate(depth);
        if ranges.is_empty() {
            return v;
        }
        let mut src = vec![v];
        src.extend(ranges);
        UOp::new(Op::Reduce, x.dtype(), src, Arg::Reduce(*op, vec![]))
    }

    /// True for an elementwise value the cost model should be asked about: one that could
    /// be stored (not index arithmetic) and costs at least [`MIN_VALUE_COST`] inline.
    /// Masks (bools and their casts) stay inline for the one-hot collapse of a gather.
    /// Values inside a vmap scope or a sliding window (with ambient ranges) are left inline:
    /// the collapse of `Σ_r pad_at(f(x[r]), r)` needs them there, and it removes the repetition
    /// the request facts would see.
    fn is_costly_value(&mut self, x: &UOp) -> bool {
        let mask =
            x.dtype() == DType::Bool || (x.op() == Op::Cast && x.s(0).dtype() == DType::Bool);
        if !x.op().is_elementwise()
            || x.dtype() == DType::Index
            || mask
            || self.sliding > 0
            || !self.ctx.ambient_of(x).is_empty()
        {
            return false;
        }
        let realized = &self.ctx.realized;
        self.ctx.costs.cost(x, &|u| realized.contains_key(u)) >= MIN_VALUE_COST
    }

    /// The elementwise cost per element of this kernel's root around its reduces
    /// ([`CostModel::epilogue`], transcendentals at their `lowered` cost or at one), computed
    /// once per kernel.
    fn epilogue_cost(&mut self, lowered: bool) -> u64 {
        if let Some(c) = self.epilogue[usize::from(lowered)] {
            return c;
        }
        let realized = &self.ctx.realized;
        let root = &self.within[0];
        let c = CostModel::epilogue(root, &|u| u != root && realized.contains_key(u), lowered);
        self.epilogue[usize::from(lowered)] = Some(c);
        c
    }

    /// The realization cost model for a reduce or a costly value requested at `idx`: how
    /// many times would computing it inline repeat its work? Realizes it when the rule table
    /// says so (and returns true), else records why it stays fused.
    fn should_realize(&mut self, x: &UOp, idx: &[UOp], gate: &Option<UOp>) -> bool {
        let mut asked: Vec<UOp> = idx.to_vec();
        asked.extend(gate.iter().cloned());
        // Inside a vmap scope the value also varies with the ranges its ambient ones are bound to.
        let ambient = self.ctx.ambient_of(x);
        asked.extend(ambient.iter().filter_map(|r| self.bindings.get(r).cloned()));
        let used = ranges_in(&asked);
        let reduce = x.op() == Op::Reduce;
        let nest: Vec<&UOp> = self
            .loops
            .iter()
            .chain(&self.enclosing)
            .filter(|r| r.op() == Op::Range)
            .collect();
        // The linearizer places a value at the shallowest loop that defines its ranges, so
        // loops inside the innermost one it uses do not repeat it; a reduce's accumulator is
        // placed where its result is used, so every loop it ignores repeats it.
        let depth = match reduce {
            true => nest.len(),
            false => nest.iter().rposition(|r| used.contains(r)).unwrap_or(0),
        };
        let size = |r: &&UOp| (r.vmax().as_i64() + 1).max(0) as u64;
        let ignored: u64 = nest[..depth]
            .iter()
            .filter(|r| !used.contains(r))
            .map(size)
            .product();
        // Loops a value does use can still repeat it: a window or a broadcast by reshape maps
        // several iterations to one element (a pooled value read by its 2×2 window). Not
        // counted for reduces, whose sliding-range collapses remove that repetition.
        let iterations: u64 = nest.iter().filter(|r| used.contains(r)).map(size).product();
        let elements = (x.numel() * self.ctx.ambient_shape(x).iter().product::<usize>()).max(1);
        let window = match reduce {
            true => 1,
            false => (iterations / elements as u64).max(1),
        };
        let redundancy = ignored.saturating_mul(window);
        let requests = self.ctx.requests.entry(x.clone()).or_default();
        requests.insert((self.kernel, idx.to_vec(), gate.clone()));
        let requests = requests.len() as u64;
        let realized = &self.ctx.realized;
        let cost = self.ctx.costs.cost(x, &|u| realized.contains_key(u));
        let contraction = self.is_contraction(x);
        let facts = Facts {
            reduce,
            reads_memory: self.reads_memory(x),
            masked: self.is_masked_product(x),
            contraction,
            cost,
            redundancy,
            requests,
            gated: gate.is_some() && self.sliding == 0 && ambient.is_empty(),
            epilogue: match reduce && self.enclosing.is_empty() {
                // Only a contraction's tile runs its epilogue lane by lane, where a lowered
                // transcendental costs its tens of ops.
                true => self.epilogue_cost(contraction),
                false => 0,
            },
        };
        let rule = decide(&facts);
        if rule.realizes() {
            let within = self.within.clone();
            self.ctx.realize_for(x, rule, Some(facts), within);
        } else {
            let decision = Decision {
                node: x.clone(),
                rule,
                facts: Some(facts),
            };
            self.ctx.keep_fused(decision);
        }
        rule.realizes()
    }
}

/// `u` with its casts and movement ops looked through: the value they present.
fn under_casts_and_views(u: &UOp) -> UOp {
    let mut core = u.clone();
    while core.op() == Op::Cast || core.op().is_movement() {
        core = core.s(0).clone();
    }
    core
}
