//! The UOp: an immutable, hash-consed node `(op, dtype, src, arg, tag)` of the IR.
//!
//! Building a node structurally equal to a live one returns that same node, so equality and
//! hashing are pointer operations and every graph is a DAG with shared subterms. The intern
//! table holds weak references: a node lives exactly as long as some handle or parent holds it.

pub mod affine;
pub mod alu;
pub mod arg;
pub mod axis;
pub mod dtype;
pub mod fast_hash;
pub mod minmax;
pub mod op;
pub mod scope;
pub mod shape;
pub mod spec;
pub mod stable_form;
pub mod wire;

pub use arg::{
    Arg, BatchStrategy, BufferArg, BufferStorage, Device, DeviceAllocation, Endpoint, HostData,
};
pub use dtype::{DType, Element, Scalar};
pub use op::{AxisType, Op, ReduceOp};

use fast_hash::{FastMap, FastSet};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A shape: the size of each axis, outermost first.
pub type Shape = Vec<usize>;

/// `root` with every node in `map` replaced by its image, the nodes above rebuilt over their
/// operands' images (memoized, operands first; an unchanged node is kept as it is).
pub fn substitute(root: &UOp, map: &HashMap<UOp, UOp>) -> UOp {
    if map.is_empty() {
        return root.clone();
    }
    let mut images: FastMap<UOp, UOp> = FastMap::default();
    for node in root.toposort() {
        let image = match map.get(&node) {
            Some(image) => image.clone(),
            None => rebuild(&node, &images),
        };
        images.insert(node, image);
    }
    images.remove(root).expect("root is in its own toposort")
}

/// `root` with each node of `map` replaced by its image, outside the bodies of the functions
/// `root` calls: a `Function`'s body (its first operand) has `Param`s of its own, which an
/// enclosing substitution must leave alone.
pub fn substitute_in_scope(root: &UOp, map: &HashMap<UOp, UOp>) -> UOp {
    let mut images: FastMap<UOp, UOp> = FastMap::default();
    for node in root.toposort_along(outside_bodies, |_| true) {
        let image = match map.get(&node) {
            Some(image) => image.clone(),
            None => rebuild(&node, &images),
        };
        images.insert(node, image);
    }
    images.remove(root).expect("root is in its own toposort")
}

/// The operands of `node` that are in its scope: all but a `Function`'s body.
pub fn outside_bodies(node: &UOp) -> &[UOp] {
    let skip = usize::from(node.op() == Op::Function);
    &node.src()[skip..]
}

/// `node` over the images of its operands (an operand without an image stays; `node` itself
/// when none changed).
pub fn rebuild<S: std::hash::BuildHasher>(node: &UOp, images: &HashMap<UOp, UOp, S>) -> UOp {
    let src: Vec<UOp> = node
        .src()
        .iter()
        .map(|s| images.get(s).unwrap_or(s).clone())
        .collect();
    if src.iter().zip(node.src()).all(|(a, b)| a == b) {
        node.clone()
    } else {
        node.with_src(src)
    }
}

/// A handle on an interned node. Cloning is cheap (a reference count).
#[derive(Clone)]
pub struct UOp(Arc<UOpNode>);

/// A handle that does not keep its node alive.
#[derive(Clone)]
pub struct WeakUOp(Weak<UOpNode>);

impl WeakUOp {
    /// The node, if it is still alive.
    pub fn upgrade(&self) -> Option<UOp> {
        self.0.upgrade().map(UOp)
    }
    /// True while the node is alive.
    pub fn is_alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}

/// The data of a node. Reach it through [`UOp`]'s accessors.
pub struct UOpNode {
    op: Op,
    dtype: DType,
    src: Vec<UOp>,
    arg: Arg,
    tag: Option<u32>,
    content_key: u64,
    form_key: u64,
    shape: OnceLock<Option<Shape>>,
    min_max: OnceLock<(Scalar, Scalar)>,
    /// Whether a `Buffer` is among this node and its operands (transitively): set when the
    /// node is made, from its operands', so a walk looking for buffers skips what has none.
    reads_buffers: bool,
    /// Whether a `Call` is among this node and its operands (transitively), likewise.
    reaches_call: bool,
    /// Whether a `Copy` (a move to another device) is among them, likewise.
    reaches_copy: bool,
}

type Bucket = Vec<Weak<UOpNode>>;

/// The intern table, keyed by content key: structurally equal nodes have equal operands,
/// hence equal content keys, and a collision is told apart by `same_structure`.
fn intern_table() -> &'static Mutex<FastMap<u64, Bucket>> {
    static TABLE: OnceLock<Mutex<FastMap<u64, Bucket>>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(FastMap::default()))
}

/// A hash of the whole graph under a node built from the operands' keys (not their
/// addresses), so it is the same for the same graph in every run. Computed for every node
/// made, so with the fast hasher; a collision only costs a longer intern bucket.
fn content_key(op: Op, dtype: DType, src: &[UOp], arg: &Arg, tag: Option<u32>) -> u64 {
    let mut h = fast_hash::FastHasher::default();
    (op, dtype, arg, tag).hash(&mut h);
    for s in src {
        s.0.content_key.hash(&mut h);
    }
    h.finish()
}

/// [`content_key`] with the values of constants left out: the lanes of an upcast axis differ
/// only in index constants, so their nodes share a form key (and a commutative op orders its
/// operands alike in every lane, which lets the C compiler pack the lanes into vectors).
fn form_key(op: Op, dtype: DType, src: &[UOp], arg: &Arg, tag: Option<u32>) -> u64 {
    let mut h = fast_hash::FastHasher::default();
    (op, dtype, tag).hash(&mut h);
    if op != Op::Const {
        arg.hash(&mut h);
    }
    for s in src {
        s.0.form_key.hash(&mut h);
    }
    h.finish()
}

impl UOpNode {
    fn same_structure(
        &self,
        op: Op,
        dtype: DType,
        src: &[UOp],
        arg: &Arg,
        tag: Option<u32>,
    ) -> bool {
        self.op == op
            && self.dtype == dtype
            && self.tag == tag
            && self.src.len() == src.len()
            && self.src.iter().zip(src).all(|(a, b)| a == b)
            && &self.arg == arg
    }
}

thread_local! {
    /// Children of nodes being dropped on this thread, released one at a time so that
    /// dropping a long chain does not recurse once per link.
    static DROP_QUEUE: RefCell<Option<Vec<Vec<UOp>>>> = const { RefCell::new(None) };
}

impl Drop for UOpNode {
    fn drop(&mut self) {
        {
            let mut table = intern_table().lock().unwrap_or_else(|e| e.into_inner());
            if let Some(bucket) = table.get_mut(&self.content_key) {
                bucket.retain(|w| w.strong_count() > 0);
                if bucket.is_empty() {
                    table.remove(&self.content_key);
                }
            }
        }
        let children = std::mem::take(&mut self.src);
        if children.is_empty() {
            return;
        }
        let mut children = Some(children);
        let nested = DROP_QUEUE.with(|q| {
            let mut q = q.borrow_mut();
            match q.as_mut() {
                Some(pending) => {
                    pending.extend(children.take());
                    true
                }
                None => {
                    *q = Some(Vec::new());
                    false
                }
            }
        });
        if nested {
            return;
        }
        drop(children);
        loop {
            let next = DROP_QUEUE.with(|q| q.borrow_mut().as_mut().and_then(|p| p.pop()));
            match next {
                Some(batch) => drop(batch),
                None => break,
            }
        }
        DROP_QUEUE.with(|q| *q.borrow_mut() = None);
    }
}

impl UOp {
    /// The interned node `(op, dtype, src, arg)` with no tag.
    pub fn new(op: Op, dtype: DType, src: Vec<UOp>, arg: Arg) -> UOp {
        UOp::new_tagged(op, dtype, src, arg, None)
    }

    /// The interned node `(op, dtype, src, arg, tag)`.
    pub fn new_tagged(op: Op, dtype: DType, src: Vec<UOp>, arg: Arg, tag: Option<u32>) -> UOp {
        let reads_buffers = op == Op::Buffer || src.iter().any(|s| s.0.reads_buffers);
        let reaches_call = op == Op::Call || src.iter().any(|s| s.0.reaches_call);
        let reaches_copy = op == Op::Copy || src.iter().any(|s| s.0.reaches_copy);
        let content_key = content_key(op, dtype, &src, &arg, tag);
        let form_key = form_key(op, dtype, &src, &arg, tag);
        let mut table = intern_table().lock().unwrap_or_else(|e| e.into_inner());
        let bucket = table.entry(content_key).or_default();
        for weak in bucket.iter() {
            if let Some(node) = weak.upgrade()
                && node.same_structure(op, dtype, &src, &arg, tag)
            {
                return UOp(node);
            }
        }
        let node = Arc::new(UOpNode {
            op,
            dtype,
            src,
            arg,
            tag,
            content_key,
            form_key,
            shape: OnceLock::new(),
            min_max: OnceLock::new(),
            reads_buffers,
            reaches_call,
            reaches_copy,
        });
        bucket.push(Arc::downgrade(&node));
        UOp(node)
    }

    /// How many nodes are alive in the whole process (for leak tests).
    pub fn live_count() -> usize {
        let table = intern_table().lock().unwrap_or_else(|e| e.into_inner());
        table
            .values()
            .flat_map(|b| b.iter())
            .filter(|w| w.strong_count() > 0)
            .count()
    }

    /// The operation.
    pub fn op(&self) -> Op {
        self.0.op
    }
    /// The element type of the value.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }
    /// The operands.
    pub fn src(&self) -> &[UOp] {
        &self.0.src
    }
    /// Operand `i`. Panics if there is none.
    pub fn s(&self, i: usize) -> &UOp {
        &self.0.src[i]
    }
    /// The op-dependent payload.
    pub fn arg(&self) -> &Arg {
        &self.0.arg
    }
    /// The temporary tag passes may set.
    pub fn tag(&self) -> Option<u32> {
        self.0.tag
    }
    /// A weak handle that does not keep the node alive (for caches and leak tests).
    pub fn downgrade(&self) -> WeakUOp {
        WeakUOp(Arc::downgrade(&self.0))
    }
    /// How many handles hold this node now (parents, tensors, caches, walks in progress): a
    /// runtime asks whether anything besides the one parent it knows of can read it again.
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }
    /// A hash of the graph under this node that does not depend on where nodes live in
    /// memory: equal graphs have equal keys in every run.
    pub fn content_key(&self) -> u64 {
        self.0.content_key
    }

    /// The content key with the values of constants left out (equal for graphs that differ
    /// only in constants, as the lanes of an upcast do), then the content key: the canonical
    /// operand order of commutative ops sorts by it.
    pub fn order_key(&self) -> (u64, u64) {
        (self.0.form_key, self.0.content_key)
    }

    /// A stable identity for the lifetime of the node (its address).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The same node with other operands.
    pub fn with_src(&self, src: Vec<UOp>) -> UOp {
        UOp::new_tagged(self.op(), self.dtype(), src, self.arg().clone(), self.tag())
    }
    /// The same node with another tag.
    pub fn with_tag(&self, tag: Option<u32>) -> UOp {
        UOp::new_tagged(
            self.op(),
            self.dtype(),
            self.src().to_vec(),
            self.arg().clone(),
            tag,
        )
    }
    /// The same node with another arg.
    pub fn with_arg(&self, arg: Arg) -> UOp {
        UOp::new_tagged(
            self.op(),
            self.dtype(),
            self.src().to_vec(),
            arg,
            self.tag(),
        )
    }

    /// Whether this node or any node it is computed from is a `Buffer` (known without a walk).
    pub fn reads_buffers(&self) -> bool {
        self.0.reads_buffers
    }

    /// Whether this node or any node it is computed from is a `Call` (known without a walk).
    pub fn reaches_call(&self) -> bool {
        self.0.reaches_call
    }

    /// Whether this node or any node it is computed from is a `Copy` to a device (known
    /// without a walk).
    pub fn reaches_copy(&self) -> bool {
        self.0.reaches_copy
    }

    /// The derived shape: `None` for nodes without one (void ops, tuples) or malformed nodes
    /// (`spec::check` says why).
    pub fn shape(&self) -> Option<&[usize]> {
        if let Some(shape) = self.0.shape.get() {
            return shape.as_deref();
        }
        self.derive_operands_first(
            |u| u.0.shape.get().is_some(),
            |u| {
                u.shape();
            },
        );
        self.0.shape.get_or_init(|| shape::derive(self)).as_deref()
    }

    /// Derives a lazy property (`shape`, `min_max`) of every node below this one that lacks it
    /// (`known`), operands before users, so that deriving a node looks only at operands whose
    /// property is known: a chain of any length is derived without recursing once per link.
    fn derive_operands_first(&self, known: impl Fn(&UOp) -> bool, derive: impl Fn(&UOp)) {
        if self.src().iter().all(&known) {
            return;
        }
        // Empty when another thread derived this node since the check above (nodes are
        // shared between threads); otherwise this node comes last.
        let pending = self.toposort_where(|u| !known(u));
        for node in pending
            .split_last()
            .map_or(&[][..], |(_, operands)| operands)
        {
            derive(node);
        }
    }

    /// The derived shape, panicking with the op if there is none.
    #[track_caller]
    pub fn shape_vec(&self) -> Shape {
        match self.shape() {
            Some(s) => s.to_vec(),
            None => panic!(
                "{} node has no shape (its operands do not fit the op, or its shape would have more than {} elements)",
                self.op(),
                shape::MAX_ELEMENTS
            ),
        }
    }

    /// Number of axes (0 when shapeless).
    pub fn ndim(&self) -> usize {
        self.shape().map_or(0, |s| s.len())
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape().map_or(0, |s| s.iter().product())
    }

    /// The derived device: `None` for constants and index arithmetic.
    ///
    /// The first device met by a depth-first walk that follows operands in order (a
    /// function's or call's arguments, not its body), with an explicit stack.
    pub fn device(&self) -> Option<Device> {
        let mut stack = vec![self.clone()];
        let mut seen = FastSet::default();
        while let Some(node) = stack.pop() {
            // A node met before has no device (else the walk would have stopped there).
            if !seen.insert(node.id()) {
                continue;
            }
            let operands = match (node.op(), node.arg()) {
                (Op::Buffer, Arg::Buffer(b)) => return Some(b.device.clone()),
                (Op::Param, Arg::Param { device, .. }) => match device {
                    Some(d) => return Some(d.clone()),
                    None => continue,
                },
                (Op::Copy, Arg::Device(d)) => return Some(d.clone()),
                (Op::Const | Op::Vconst | Op::Range | Op::DefineVar, _) => continue,
                (Op::Function | Op::Call, _) => node.src().get(1..2).unwrap_or_default(),
                _ => node.src(),
            };
            stack.extend(operands.iter().rev().cloned());
        }
        None
    }

    /// The derived sharded axis: which axis is split across a multi-device tuple, if any.
    pub fn axis(&self) -> Option<usize> {
        axis::derive(self)
    }

    /// The derived bounds `[min, max]` of the value (tinyspec "min_max").
    pub fn min_max(&self) -> (Scalar, Scalar) {
        if let Some(bounds) = self.0.min_max.get() {
            return *bounds;
        }
        self.derive_operands_first(
            |u| u.0.min_max.get().is_some(),
            |u| {
                u.min_max();
            },
        );
        *self.0.min_max.get_or_init(|| minmax::derive(self))
    }
    /// The smallest value the node can take.
    pub fn vmin(&self) -> Scalar {
        self.min_max().0
    }
    /// The largest value the node can take.
    pub fn vmax(&self) -> Scalar {
        self.min_max().1
    }

    /// The scalar of a `Const` node.
    pub fn const_value(&self) -> Option<Scalar> {
        match self.op() {
            Op::Const => self.arg().as_const(),
            _ => None,
        }
    }

    /// The id of a `Range`.
    ///
    /// Panics when the node is not a `Range`.
    #[track_caller]
    pub fn range_id(&self) -> usize {
        match self.arg() {
            Arg::Range { id, .. } => *id,
            other => panic!("expected a Range, got {:?} with arg {other:?}", self.op()),
        }
    }

    /// The axis type of a `Range`.
    ///
    /// Panics when the node is not a `Range`.
    #[track_caller]
    pub fn range_axis_type(&self) -> AxisType {
        match self.arg() {
            Arg::Range { axis_type, .. } => *axis_type,
            other => panic!("expected a Range, got {:?} with arg {other:?}", self.op()),
        }
    }

    /// The constant size (bound) of a `Range`, `None` when it is symbolic.
    pub fn range_size(&self) -> Option<usize> {
        self.s(0)
            .const_value()
            .and_then(|v| usize::try_from(v.as_i64()).ok())
    }

    /// The combining op of a `Reduce` (the op of its `Arg::Reduce`).
    ///
    /// Panics when the node has no `Arg::Reduce`.
    #[track_caller]
    pub fn reduce_op(&self) -> ReduceOp {
        match self.arg() {
            Arg::Reduce(op, _) => *op,
            other => panic!("expected a Reduce arg, got {other:?}"),
        }
    }

    /// The buffer slot of a `DefineGlobal`.
    ///
    /// Panics when the node is not a `DefineGlobal` with an `Int` slot.
    #[track_caller]
    pub fn global_slot(&self) -> usize {
        match (self.op(), self.arg()) {
            (Op::DefineGlobal, Arg::Int(slot)) => *slot as usize,
            _ => panic!("expected a DefineGlobal with an Int slot, got {self:?}"),
        }
    }

    /// All nodes reachable from this one, operands before users (this node last).
    pub fn toposort(&self) -> Vec<UOp> {
        self.toposort_where(|_| true)
    }

    /// The nodes reachable from this one through nodes that satisfy `enter` (a node that does
    /// not is neither listed nor walked into), operands before users, in the order of a
    /// depth-first walk that follows operands in order.
    pub fn toposort_where(&self, enter: impl Fn(&UOp) -> bool) -> Vec<UOp> {
        self.toposort_along(UOp::src, enter)
    }

    /// The one topological walk: the nodes reachable from this one following `operands` (the
    /// operands of a node to walk into, e.g. a subset of its sources or of its sources'
    /// sources) through nodes that satisfy `enter` (asked once per node reached, in walk
    /// order; a node that does not satisfy it is neither listed nor walked into), operands
    /// before users, in the order of a depth-first walk that follows operands in order.
    pub fn toposort_along(
        &self,
        operands: impl Fn(&UOp) -> &[UOp],
        mut enter: impl FnMut(&UOp) -> bool,
    ) -> Vec<UOp> {
        let mut order = Vec::new();
        let mut visited = FastSet::default();
        let mut stack = vec![(self.clone(), false)];
        while let Some((node, expanded)) = stack.pop() {
            if expanded {
                order.push(node);
                continue;
            }
            if visited.contains(&node.id()) || !enter(&node) {
                continue;
            }
            visited.insert(node.id());
            stack.push((node.clone(), true));
            for s in operands(&node).iter().rev() {
                if !visited.contains(&s.id()) {
                    stack.push((s.clone(), false));
                }
            }
        }
        order
    }

    // ---- constructors ----

    /// A scalar constant of `dtype` (the value is cast to it).
    pub fn constant(value: impl Into<Scalar>, dtype: DType) -> UOp {
        UOp::new(
            Op::Const,
            dtype,
            vec![],
            Arg::Const(value.into().cast(dtype)),
        )
    }
    /// An index-typed constant.
    pub fn index(value: i64) -> UOp {
        UOp::constant(value, DType::Index)
    }
    /// A vector constant of index values: the operand form of a shape or a padding.
    pub fn index_vec(values: &[usize]) -> UOp {
        let values = values.iter().map(|&v| Scalar::Int(v as i64)).collect();
        UOp::new(Op::Vconst, DType::Index, vec![], Arg::Vconst(values))
    }
    /// A loop variable from 0 to `bound`.
    pub fn range(bound: usize, id: usize, axis_type: AxisType) -> UOp {
        UOp::new(
            Op::Range,
            DType::Index,
            vec![UOp::index(bound as i64)],
            Arg::Range { id, axis_type },
        )
    }
    /// A fresh buffer of `size` elements.
    pub fn new_buffer(size: usize, dtype: DType, device: Device) -> UOp {
        UOp::new(
            Op::Buffer,
            dtype,
            vec![],
            Arg::Buffer(BufferArg::new(size, dtype, device)),
        )
    }
    /// A placeholder for argument `slot` of a function body.
    pub fn param(slot: usize, shape: &[usize], dtype: DType, device: Option<Device>) -> UOp {
        UOp::new(
            Op::Param,
            dtype,
            vec![UOp::index_vec(shape)],
            Arg::Param { slot, device },
        )
    }

    /// An elementwise op with the dtype rule of tinyspec (comparisons give bool, `Where` takes
    /// its branches' dtype, everything else its first operand's).
    pub fn alu(op: Op, src: Vec<UOp>) -> UOp {
        let dtype = if op.is_comparison() {
            DType::Bool
        } else if op == Op::Where {
            src[1].dtype()
        } else {
            src[0].dtype()
        };
        UOp::new(op, dtype, src, Arg::None)
    }
    /// `Cast(self)` to `dtype`.
    pub fn cast(&self, dtype: DType) -> UOp {
        UOp::new(Op::Cast, dtype, vec![self.clone()], Arg::None)
    }
    /// `Bitcast(self)` to `dtype`.
    pub fn bitcast(&self, dtype: DType) -> UOp {
        UOp::new(Op::Bitcast, dtype, vec![self.clone()], Arg::None)
    }
    /// `Reshape(self, shape)`.
    pub fn reshape(&self, shape: &[usize]) -> UOp {
        UOp::new(
            Op::Reshape,
            self.dtype(),
            vec![self.clone(), UOp::index_vec(shape)],
            Arg::None,
        )
    }
    /// `Expand(self, shape)`.
    pub fn expand(&self, shape: &[usize]) -> UOp {
        UOp::new(
            Op::Expand,
            self.dtype(),
            vec![self.clone(), UOp::index_vec(shape)],
            Arg::None,
        )
    }
    /// `Permute(self)` with axis order `perm`.
    pub fn permute(&self, perm: &[usize]) -> UOp {
        UOp::new(
            Op::Permute,
            self.dtype(),
            vec![self.clone()],
            Arg::Permutation(perm.to_vec()),
        )
    }
    /// `Flip(self)` along the flagged axes.
    pub fn flip(&self, flags: &[bool]) -> UOp {
        UOp::new(
            Op::Flip,
            self.dtype(),
            vec![self.clone()],
            Arg::Flags(flags.to_vec()),
        )
    }
    /// `Pad(self, begins, ends)`.
    pub fn pad(&self, begins: &[usize], ends: &[usize]) -> UOp {
        let src = vec![self.clone(), UOp::index_vec(begins), UOp::index_vec(ends)];
        UOp::new(Op::Pad, self.dtype(), src, Arg::None)
    }
    /// `Shrink(self, begins, ends)`: keep `[b, e)` of each axis.
    pub fn shrink(&self, begins: &[usize], ends: &[usize]) -> UOp {
        let src = vec![self.clone(), UOp::index_vec(begins), UOp::index_vec(ends)];
        UOp::new(Op::Shrink, self.dtype(), src, Arg::None)
    }
    /// `Pad` (`op = Op::Pad`) or `Shrink` of `self` whose per-axis begins and ends are index
    /// scalar expressions, which may vary with a `Range` (a window that slides with a loop).
    pub fn window(&self, op: Op, begins: Vec<UOp>, ends: Vec<UOp>) -> UOp {
        debug_assert!(matches!(op, Op::Pad | Op::Shrink));
        let src = vec![self.clone(), UOp::stack(begins), UOp::stack(ends)];
        UOp::new(op, self.dtype(), src, Arg::None)
    }
    /// `Reduce(self)` with `op` over `axes` (kept as size 1).
    pub fn reduce(&self, op: ReduceOp, axes: &[usize]) -> UOp {
        let mut axes = axes.to_vec();
        axes.sort_unstable();
        axes.dedup();
        UOp::new(
            Op::Reduce,
            self.dtype(),
            vec![self.clone()],
            Arg::Reduce(op, axes),
        )
    }
    /// `Reduce(self, ranges...)`: `self` accumulated with `op` over every value of the
    /// `Range`s (which it varies with); the shape is unchanged.
    pub fn reduce_over(&self, op: ReduceOp, ranges: &[UOp]) -> UOp {
        let mut src = vec![self.clone()];
        src.extend(ranges.iter().cloned());
        UOp::new(Op::Reduce, self.dtype(), src, Arg::Reduce(op, vec![]))
    }
    /// A node of `op` over `self` with no arg and the same dtype (markers, `Contiguous`).
    pub fn unary_marker(&self, op: Op) -> UOp {
        UOp::new(op, self.dtype(), vec![self.clone()], Arg::None)
    }
    /// `Stack(parts)` along a new leading axis.
    pub fn stack(parts: Vec<UOp>) -> UOp {
        let dtype = parts[0].dtype();
        UOp::new(Op::Stack, dtype, parts, Arg::None)
    }
    /// `Index(self, idx...)`.
    pub fn index_by(&self, idx: Vec<UOp>) -> UOp {
        let mut src = vec![self.clone()];
        src.extend(idx);
        UOp::new(Op::Index, self.dtype(), src, Arg::None)
    }
    /// `Vmapin(self, vargs...)`.
    pub fn vmapin(&self, vargs: &[UOp]) -> UOp {
        let mut src = vec![self.clone()];
        src.extend(vargs.iter().cloned());
        UOp::new(Op::Vmapin, self.dtype(), src, Arg::None)
    }
    /// `Vmapout(self, vargs...)`.
    pub fn vmapout(&self, vargs: &[UOp]) -> UOp {
        let mut src = vec![self.clone()];
        src.extend(vargs.iter().cloned());
        UOp::new(Op::Vmapout, self.dtype(), src, Arg::None)
    }
    /// `Copy(self)` to `device`.
    pub fn copy_to(&self, device: Device) -> UOp {
        UOp::new(
            Op::Copy,
            self.dtype(),
            vec![self.clone()],
            Arg::Device(device),
        )
    }
    /// `Sink(outputs...)`: the root of a program.
    pub fn sink(outputs: Vec<UOp>) -> UOp {
        UOp::new(Op::Sink, DType::Void, outputs, Arg::None)
    }
    /// `Store(buf, value)`.
    pub fn store(buf: &UOp, value: &UOp) -> UOp {
        UOp::new(
            Op::Store,
            DType::Void,
            vec![buf.clone(), value.clone()],
            Arg::None,
        )
    }
    /// `Tuple(values...)`.
    pub fn tuple(values: Vec<UOp>) -> UOp {
        UOp::new(Op::Tuple, DType::Void, values, Arg::None)
    }
    /// `GetTuple(self, idx)`: element `idx` of a tuple or of a function's result.
    pub fn get_tuple(&self, idx: usize) -> UOp {
        let dtype = tuple_body(self).map_or(DType::Void, |t| t.s(idx).dtype());
        UOp::new(
            Op::GetTuple,
            dtype,
            vec![self.clone()],
            Arg::Int(idx as i64),
        )
    }
    /// `Function(body, args...)`.
    pub fn function(body: UOp, args: Vec<UOp>) -> UOp {
        let mut src = vec![body];
        src.extend(args);
        UOp::new(Op::Function, DType::Void, src, Arg::None)
    }
}

/// The `Tuple` a `GetTuple` operand stands for: itself, or the body of a `Function`/`Call`.
pub fn tuple_body(u: &UOp) -> Option<&UOp> {
    match u.op() {
        Op::Tuple => Some(u),
        Op::Function | Op::Call => u.src().first().filter(|b| b.op() == Op::Tuple),
        _ => None,
    }
}

impl PartialEq for UOp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for UOp {}
impl Hash for UOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id().hash(state)
    }
}

impl fmt::Debug for UOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_node(self, f, 0)
    }
}

fn fmt_node(u: &UOp, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
    write!(f, "{}", u.op())?;
    write!(f, "<{}>", u.dtype())?;
    match u.arg() {
        Arg::None => {}
        arg => write!(f, "[{arg:?}]")?,
    }
    if u.src().is_empty() {
        return Ok(());
    }
    if depth > 12 {
        return write!(f, "(...)");
    }
    write!(f, "(")?;
    for (i, s) in u.src().iter().enumerate() {
        if i > 0 {
            write!(f, ", ")?;
        }
        fmt_node(s, f, depth + 1)?;
    }
    write!(f, ")")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn building_the_same_node_twice_gives_the_same_node() {
        let a = UOp::constant(3.0, DType::F32);
        let b = UOp::constant(3.0, DType::F32);
        assert_eq!(a, b);
        let sum1 = UOp::alu(Op::Add, vec![a.clone(), b.clone()]);
        let sum2 = UOp::alu(Op::Add, vec![b, a]);
        assert_eq!(sum1, sum2);
        assert_ne!(
            UOp::constant(3.0, DType::F32),
            UOp::constant(3.0, DType::F64)
        );
    }

    #[test]
    fn whether_a_graph_reaches_a_call_is_known_at_every_node() {
        let x = UOp::new_buffer(4, DType::F32, Device::cpu());
        let plain = UOp::alu(Op::Mul, vec![x.clone(), UOp::constant(2.0, DType::F32)]);
        assert!(!plain.reaches_call() && !x.reaches_call());
        let call = UOp::new(Op::Call, DType::Void, vec![x.clone()], Arg::None);
        let user = UOp::new(
            Op::Sink,
            DType::Void,
            vec![plain.clone(), call.clone()],
            Arg::None,
        );
        assert!(call.reaches_call() && user.reaches_call());
        assert!(
            !plain.reaches_call(),
            "an operand is unchanged by its users"
        );
    }

    #[test]
    fn whether_a_graph_moves_a_value_between_devices_is_known_at_every_node() {
        let x = UOp::new_buffer(4, DType::F32, Device::cpu());
        let doubled = UOp::alu(Op::Mul, vec![x.clone(), UOp::constant(2.0, DType::F32)]);
        let moved = doubled.copy_to(Device::Single("EMU".into()));
        let user = UOp::alu(Op::Add, vec![moved.clone(), moved.clone()]);
        assert!(!x.reaches_copy() && !doubled.reaches_copy());
        assert!(moved.reaches_copy() && user.reaches_copy());
    }

    #[test]
    fn structurally_equal_nodes_share_a_content_key_across_buffers_of_one_structure() {
        let (x, y) = (
            UOp::new_buffer(4, DType::F32, Device::cpu()),
            UOp::new_buffer(4, DType::F32, Device::cpu()),
        );
        let two = UOp::constant(2.0, DType::F32);
        let x2 = UOp::alu(Op::Mul, vec![x.clone(), two.clone()]);
        assert_eq!(
            x2.content_key(),
            UOp::alu(Op::Mul, vec![x, two.clone()]).content_key()
        );
        assert_ne!(
            x2.content_key(),
            UOp::alu(Op::Mul, vec![y, two]).content_key()
        );
    }

    #[test]
    fn a_node_another_thread_derived_meanwhile_is_left_alone() {
        // Nodes are shared between threads: between the check of the operands and the walk,
        // another thread may derive the node itself, and the walk then lists nothing.
        let x = UOp::new_buffer(4, DType::F32, Device::cpu());
        let y = UOp::alu(Op::Neg, vec![x]);
        let asked = std::cell::Cell::new(0);
        let known = |_: &UOp| {
            asked.set(asked.get() + 1);
            asked.get() > 1
        };
        let derived = std::cell::Cell::new(0);
        y.derive_operands_first(known, |_| derived.set(derived.get() + 1));
        assert_eq!(derived.get(), 0);
    }

    #[test]
    fn a_dropped_graph_frees_its_nodes() {
        let x = UOp::new_buffer(4, DType::F32, Device::cpu());
        let y = UOp::alu(Op::Mul, vec![x.clone(), UOp::constant(1234.5, DType::F32)]);
        let z = UOp::alu(
            Op::Add,
            vec![y.clone(), x.reduce(ReduceOp::Max, &[0]).expand(&[4])],
        );
        // Constants may be shared with graphs of other tests; every other node is this graph's.
        let own = z
            .toposort()
            .into_iter()
            .filter(|u| !matches!(u.op(), Op::Const | Op::Vconst));
        let weak: Vec<WeakUOp> = own.map(|u| u.downgrade()).collect();
        assert_eq!(weak.len(), 5);
        assert!(weak.iter().all(|w| w.is_alive()));
        drop((x, y, z));
        assert!(
            weak.iter().all(|w| !w.is_alive()),
            "every node of the dropped graph is freed"
        );
    }

    #[test]
    fn dropping_a_deep_chain_does_not_overflow_the_stack() {
        let mut x = UOp::new_buffer(4, DType::F32, Device::cpu());
        for i in 0..200_000 {
            x = UOp::alu(Op::Add, vec![x, UOp::constant(i as f64, DType::F32)]);
        }
        drop(x);
    }
}
