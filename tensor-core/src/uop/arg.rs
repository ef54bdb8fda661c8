//! The op-dependent payload of a UOp (`arg` in tinyspec).

use super::dtype::{DType, Element, Scalar, decode_scalars, encode_scalars};
use super::op::{AxisType, ReduceOp};
use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where a value lives: one device (`"CPU"`, `"CUDA:0"`) or a tuple of devices it is sharded on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// One device, by name (`"CPU"`).
    Single(String),
    /// The devices a value is sharded across.
    Multi(Vec<String>),
}

impl Device {
    /// The host CPU, where every tensor lives unless moved.
    pub fn cpu() -> Device {
        Device::Single("CPU".to_string())
    }

    /// Whether this is the host (`CPU`), where tensors are made: a value there is not tied to
    /// a device and computes wherever the graph reading it runs (see `Tensor::to`).
    pub fn is_host(&self) -> bool {
        matches!(self, Device::Single(name) if name == "CPU")
    }

    /// The device's name as users write it.
    pub fn name(&self) -> String {
        match self {
            Device::Single(name) => name.clone(),
            Device::Multi(names) => format!("({})", names.join(", ")),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The contents a buffer was made from, held on the host: encoded bytes, or the caller's own
/// vector of elements (kept as it is, so making a tensor from it copies nothing).
///
/// # Safety
///
/// A runtime hands [`HostData::as_ptr`] to compiled kernels, which read memory through it
/// unchecked. Where [`HostData::native_layout`] is true, `as_ptr` must point at `len()`
/// initialised elements of `dtype()` in the machine's layout, aligned for that dtype, that
/// stay valid, and unchanged, for as long as the value lives; `len() * dtype().size_bytes()`
/// must not overflow. [`HostData::to_bytes`] must hold exactly `len()` encoded elements.
pub unsafe trait HostData: Send + Sync {
    /// The element type of the contents.
    fn dtype(&self) -> DType;

    /// The number of elements.
    fn len(&self) -> usize;

    /// True when there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as scalars, for the reference interpreter.
    fn scalars(&self) -> Vec<Scalar>;

    /// The elements encoded little-endian in their dtype (borrowed when they are held that
    /// way already).
    fn to_bytes(&self) -> Cow<'_, [u8]>;

    /// The address of the first element.
    fn as_ptr(&self) -> *const u8;

    /// True when [`HostData::as_ptr`] points at the elements in the machine's own layout and
    /// alignment for the dtype, so a kernel may read them in place.
    fn native_layout(&self) -> bool;
}

/// Encoded bytes: the contents of `from_slice`/`from_scalars` tensors and copied-back results.
struct HostBytes {
    bytes: Arc<[u8]>,
    dtype: DType,
}

// SAFETY: `native_layout` is false, so nothing reads through `as_ptr`; `len` counts the
// whole elements the bytes hold.
unsafe impl HostData for HostBytes {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.bytes.len() / self.dtype.size_bytes()
    }

    fn scalars(&self) -> Vec<Scalar> {
        decode_scalars(&self.bytes, self.dtype)
    }

    fn to_bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }

    fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }

    // Little-endian and only byte-aligned: a device copies these in.
    fn native_layout(&self) -> bool {
        false
    }
}

// SAFETY: `native_layout` is true only for the primitive element types, whose Rust layout is
// the dtype's (size, alignment, every bit pattern initialised); a vector's buffer holds `len`
// of them, lives as long as the vector, and cannot change while it is shared behind the
// `Arc` a buffer holds it in.
unsafe impl<T: Element> HostData for Vec<T> {
    fn dtype(&self) -> DType {
        T::DTYPE
    }

    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn scalars(&self) -> Vec<Scalar> {
        self.iter().map(|v| v.to_scalar()).collect()
    }

    /// The vector's own memory where it is the little-endian encoding already (a primitive
    /// element type on a little-endian machine): no copy of what may be most of the memory.
    /// Otherwise encoded element by element, one copy and no intermediate.
    fn to_bytes(&self) -> Cow<'_, [u8]> {
        if cfg!(target_endian = "little") && is_primitive_element::<T>() {
            let len = std::mem::size_of_val(self.as_slice());
            // SAFETY: a primitive element type's values are `len` initialised bytes with no
            // padding (see `native_layout`), borrowed for as long as the vector is.
            return Cow::Borrowed(unsafe { std::slice::from_raw_parts(self.as_ptr().cast(), len) });
        }
        let mut bytes = Vec::with_capacity(self.len() * T::DTYPE.size_bytes());
        for chunk in self.chunks(4096) {
            let scalars: Vec<Scalar> = chunk.iter().map(|v| v.to_scalar()).collect();
            bytes.extend(encode_scalars(&scalars, T::DTYPE));
        }
        Cow::Owned(bytes)
    }

    fn as_ptr(&self) -> *const u8 {
        self.as_slice().as_ptr().cast()
    }

    /// True for the library's own element types; an `Element` implemented elsewhere may have
    /// any size, alignment or padding, so its values are copied in (encoded) instead.
    fn native_layout(&self) -> bool {
        is_primitive_element::<T>()
    }
}

/// True when `T` is one of the primitive types `Element` is implemented for here, each laid
/// out in memory exactly as its dtype is in a kernel.
fn is_primitive_element<T: Element>() -> bool {
    use std::any::TypeId;
    let primitives = [
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<bool>(),
    ];
    primitives.contains(&TypeId::of::<T>()) && std::mem::size_of::<T>() == T::DTYPE.size_bytes()
}

/// A runtime's allocation of a buffer's memory, as the node's storage holds it: the runtime
/// finds its own type again through [`DeviceAllocation::as_any`], and anyone can copy the
/// contents back to the host (which is how the reference interpreter reads a computed buffer).
pub trait DeviceAllocation: Send + Sync + 'static {
    /// The contents as little-endian bytes of the buffer's dtype, copied to the host; `None`
    /// when the device cannot be read right now.
    fn read_back(&self) -> Option<Vec<u8>>;
    /// The allocation as `Any`, for the runtime that made it to downcast.
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// The memory behind a `Buffer` node, owned by the node so that it is freed with it.
///
/// `tensor-core` does no I/O, so it only holds two slots: the contents on the host (the
/// initial contents a tensor was made from, or a result copied back), and an opaque
/// allocation a runtime attaches once the buffer lives on a device.
#[derive(Default)]
pub struct BufferStorage {
    host: Mutex<Option<Arc<dyn HostData>>>,
    device: Mutex<Option<Arc<dyn DeviceAllocation>>>,
}

impl BufferStorage {
    /// Storage with host contents: `bytes` encode elements of `dtype` (little-endian).
    pub fn with_host_bytes(bytes: Arc<[u8]>, dtype: DType) -> BufferStorage {
        BufferStorage::with_host_data(Arc::new(HostBytes { bytes, dtype }))
    }

    /// Storage whose host contents are `data`, kept as it is.
    pub fn with_host_data(data: Arc<dyn HostData>) -> BufferStorage {
        BufferStorage {
            host: Mutex::new(Some(data)),
            device: Mutex::new(None),
        }
    }

    /// The host contents, if the buffer was made from data (or copied back).
    pub fn host_data(&self) -> Option<Arc<dyn HostData>> {
        self.host.lock().expect("buffer storage poisoned").clone()
    }

    /// The host contents encoded little-endian in their dtype (a copy).
    pub fn host_bytes(&self) -> Option<Arc<[u8]>> {
        self.host_data().map(|data| Arc::from(data.to_bytes()))
    }

    /// Replaces the host contents with `bytes`, which encode elements of `dtype`.
    pub fn set_host_bytes(&self, bytes: Arc<[u8]>, dtype: DType) {
        *self.host.lock().expect("buffer storage poisoned") =
            Some(Arc::new(HostBytes { bytes, dtype }));
    }

    /// The runtime's allocation, if one is attached.
    pub fn device_allocation(&self) -> Option<Arc<dyn DeviceAllocation>> {
        self.device.lock().expect("buffer storage poisoned").clone()
    }

    /// Attaches a runtime allocation (replacing any earlier one).
    pub fn set_device_allocation(&self, alloc: Arc<dyn DeviceAllocation>) {
        *self.device.lock().expect("buffer storage poisoned") = Some(alloc);
    }

    /// The contents on the host: the host data if there is any, else the device allocation
    /// copied back (and kept as the host data, since a computed buffer never changes).
    pub fn contents(&self, dtype: DType) -> Option<Arc<dyn HostData>> {
        if let Some(host) = self.host_data() {
            return Some(host);
        }
        let bytes = self.device_allocation()?.read_back()?;
        self.set_host_bytes(bytes.into(), dtype);
        self.host_data()
    }
}

/// The arg of a `Buffer`: a unique id (so two buffers of equal size stay distinct nodes),
/// the element count, dtype and device, and the storage that owns the memory.
#[derive(Clone)]
pub struct BufferArg {
    /// Unique per buffer.
    pub id: u64,
    /// The element count.
    pub size: usize,
    /// The element type.
    pub dtype: DType,
    /// Where the memory lives.
    pub device: Device,
    /// The memory (or the handle to it).
    pub storage: Arc<BufferStorage>,
}

impl BufferArg {
    /// A new, empty buffer with a fresh id.
    pub fn new(size: usize, dtype: DType, device: Device) -> BufferArg {
        BufferArg::with_storage(size, dtype, device, Arc::new(BufferStorage::default()))
    }

    /// Placeholder number `number` for a buffer of `size` elements of `dtype` on `device`: the
    /// same number, size, dtype and device always give an equal arg (ids of fresh buffers never
    /// reach [`BufferArg::PLACEHOLDER_IDS`]).
    pub fn placeholder(number: usize, size: usize, dtype: DType, device: Device) -> BufferArg {
        BufferArg {
            id: BufferArg::PLACEHOLDER_IDS + number as u64,
            size,
            dtype,
            device,
            storage: Arc::new(BufferStorage::default()),
        }
    }

    /// The first id of placeholders; fresh buffers count up from 1, far below it.
    pub const PLACEHOLDER_IDS: u64 = 1 << 63;

    /// The number of a placeholder made by [`BufferArg::placeholder`].
    pub fn placeholder_number(&self) -> Option<usize> {
        self.id
            .checked_sub(BufferArg::PLACEHOLDER_IDS)
            .map(|n| n as usize)
    }

    /// A new buffer with a fresh id over the given storage.
    pub fn with_storage(
        size: usize,
        dtype: DType,
        device: Device,
        storage: Arc<BufferStorage>,
    ) -> BufferArg {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        BufferArg {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            size,
            dtype,
            device,
            storage,
        }
    }
}

// Identity is the id with what the buffer holds (size, dtype, device), never the storage: a
// fresh buffer's id is unique anyway, and a placeholder (whose id is its number, see
// `schedule::placeholders`) is one node per number *and* kind of buffer.
impl PartialEq for BufferArg {
    fn eq(&self, other: &Self) -> bool {
        (self.id, self.size, self.dtype, &self.device)
            == (other.id, other.size, other.dtype, &other.device)
    }
}
impl Eq for BufferArg {}
impl Hash for BufferArg {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.id, self.size, self.dtype, &self.device).hash(state)
    }
}
impl fmt::Debug for BufferArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Buffer#{}({}, {}, {})",
            self.id, self.size, self.dtype, self.device
        )
    }
}

/// How an opaque `Call` is batched under vmap (seeds/batching-strategies-tesseract.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BatchStrategy {
    /// One call per batch element.
    Sequential,
    /// Every unbatched argument broadcast to `(batch, ...)`, one call.
    BroadcastAll,
    /// Every unbatched argument given a leading `(1, ...)`, one call.
    ExpandDims,
    /// `ExpandDims` where the function declares it accepts leading dims, else `Sequential`.
    Auto,
}

/// Which endpoint of an external function a `Call` invokes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// The function itself: array inputs in, outputs out.
    Apply,
    /// Forward mode: the array inputs and one tangent per differentiable array input in, one
    /// tangent per output out.
    Jvp,
    /// Reverse mode: the array inputs and one cotangent per output in, one cotangent per
    /// differentiable array input out.
    Vjp,
}

/// The op-dependent payload of a UOp.
///
/// The discriminants are stable, as `Op`'s are: the hashes that order commutative operands
/// hash them. A removed variant leaves its discriminant unused (the explicit `= n` below skip
/// past them; `repr(isize)` allows them on variants with fields and keeps the type that
/// `derive(Hash)` hashes) and a new variant goes last.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[repr(isize)]
pub enum Arg {
    /// No payload.
    None,
    /// The value of a `Const`.
    Const(Scalar),
    /// The values of a `Vconst`.
    Vconst(Vec<Scalar>),
    /// A `Buffer`'s identity, size, dtype, device and memory.
    Buffer(BufferArg),
    // 4 was `BufferView`.
    /// A `Param`'s slot and device.
    Param {
        /// The position among the function's parameters.
        slot: usize,
        /// The device, when fixed.
        device: Option<Device>,
    } = 5,
    /// A name: `DefineVar`, and an inlined
    /// `Function` (the captured function's name).
    Name(String),
    /// A `Function` to be compiled as one reusable unit (`#[function(precompile)]`): the
    /// captured function's name.
    Precompile(String),
    /// A `Permute`'s axis order.
    Permutation(Vec<usize>),
    /// A `Flip`'s per-axis flags.
    Flags(Vec<bool>),
    // 10 was `Axes`.
    /// A `Reduce`'s combining op and axes.
    Reduce(ReduceOp, Vec<usize>) = 11,
    /// A `Copy`'s target device.
    Device(Device),
    /// An integer: `GetTuple`'s index, `DefineGlobal`'s slot.
    Int(i64),
    /// A `Range`'s id (unique within a graph) and axis type.
    Range {
        /// Unique within a graph.
        id: usize,
        /// What the loop is for (global, reduce, upcast, ...).
        axis_type: AxisType,
    },
    /// A `Function` whose transforms use the user's rules (`transform::custom`): the rules,
    /// kept alive by the nodes that name them.
    Custom(Handle),
    /// An opaque `Call` of an external host function.
    Call {
        /// The callee's name.
        name: String,
        /// How it is batched under `vmap` (`None`: vmapping it is an error).
        strategy: Option<BatchStrategy>,
        /// The external's definition, kept alive by the calls that name it.
        external: Handle,
        /// Which of its functions is called (apply, jvp, vjp).
        endpoint: Endpoint,
        /// How many leading batch axes its array operands carry.
        lead: usize,
        /// Its static (non-array) inputs.
        statics: Vec<Scalar>,
    },
}

impl Arg {
    /// The scalar of a `Const` arg.
    pub fn as_const(&self) -> Option<Scalar> {
        match self {
            Arg::Const(v) => Some(*v),
            _ => None,
        }
    }
}

/// A value of the user's that nodes name (the rules of a custom function, the definition of
/// an external), shared by every node, function and handle that holds it and dropped with
/// the last: there is no registry to outlive them. Equality, hashing and `Debug` see only the
/// id, unique in the process and never reused, so a node of one value is never taken for a
/// node of another.
#[derive(Clone)]
pub struct Handle {
    id: u64,
    value: Arc<dyn Any + Send + Sync>,
}

impl Handle {
    /// A handle to `value`, with a fresh id.
    pub fn new(value: impl Any + Send + Sync) -> Handle {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Handle {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            value: Arc::new(value),
        }
    }

    /// The id (unique in the process).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The value, when it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.value.downcast_ref::<T>()
    }
}

impl PartialEq for Handle {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for Handle {}
impl Hash for Handle {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state)
    }
}
impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_of_primitives_lends_its_own_memory_as_bytes() {
        let v: Vec<f32> = vec![1.5, -2.0, 3.25];
        let bytes = HostData::to_bytes(&v);
        assert!(matches!(bytes, Cow::Borrowed(_)) == cfg!(target_endian = "little"));
        assert_eq!(&*bytes, &encode_scalars(&v.scalars(), DType::F32)[..]);
        let flags = vec![true, false, true];
        assert_eq!(&*HostData::to_bytes(&flags), &[1, 0, 1]);
    }

    #[test]
    fn a_long_vector_encodes_to_the_same_bytes_in_chunks() {
        let v: Vec<i16> = (0..10_000).map(|i| (i * 7 - 30_000) as i16).collect();
        let want: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(&*HostData::to_bytes(&v), &want[..]);
    }
}
