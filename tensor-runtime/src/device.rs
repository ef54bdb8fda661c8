//! What every backend offers: memory, copies to and from the host, compiling kernel source to
//! a program, and launching a program over buffers.
//!
//! Buffers and programs are associated types, so each backend keeps its own handles (host
//! memory and a loaded shared object on the CPU; device memory and a module function under
//! CUDA) and a buffer of one device cannot be handed to another. Buffers are used through
//! shared references: a device synchronises access to its own memory, so a buffer can sit in
//! an `Arc` (e.g. in a `BufferStorage`) and be an input of one launch while it is read
//! elsewhere.

use crate::error::{Result, RuntimeError};
use crate::host_alloc::{out_of_memory, vec_with_capacity, zeroed_bytes};
use std::sync::Arc;
use tensor_core::UOp;
use tensor_core::codegen::program::KernelArg;
use tensor_core::codegen::{CodegenOptions, lower_kernel_named};
use tensor_core::render::{Kernel, Launch};
use tensor_core::uop::HostData;
use tensor_core::uop::dtype::encode_scalars;
use tensor_core::{DType, Element};

/// How many elements typed copies convert at a time (their temporaries stay this small).
const ELEMENTS_PER_CHUNK: usize = 4096;

/// A place kernels run: allocate, copy in and out, compile, launch.
pub trait Device: Send + Sync {
    /// An allocation of device memory, freed when dropped.
    type Buffer: tensor_core::uop::DeviceAllocation;
    /// A compiled kernel, ready to launch; cheap to clone.
    type Program: Clone + Send + Sync + 'static;

    /// The device's name as users write it (`"CPU"`, `"CUDA:0"`).
    fn name(&self) -> &str;

    /// How many parallel workers a kernel should be split into on this device.
    fn default_threads(&self) -> usize;

    /// The `f32` lanes of the vector registers this device's kernels are compiled for, which
    /// size the register tile of a reduce (`CodegenOptions::vector_lanes`).
    fn vector_lanes(&self) -> usize {
        tensor_core::codegen::heuristic::DEFAULT_VECTOR_LANES
    }

    /// The kernel of one schedule item (`ast` over buffers of `buffer_sizes` elements, by
    /// slot) lowered and rendered for this device, its function named `name`: the device's
    /// renderer, so the scheduler never asks which device it schedules for. By default the C
    /// renderer (`codegen::lower_kernel_named` then `render::c`).
    fn generate_kernel(
        &self,
        ast: &UOp,
        buffer_sizes: &[usize],
        options: &CodegenOptions,
        name: &str,
    ) -> Kernel {
        tensor_core::render::c::render_kernel(&lower_kernel_named(ast, buffer_sizes, options, name))
    }

    /// A new buffer of `bytes` bytes, zero-filled.
    fn allocate(&self, bytes: usize) -> Result<Self::Buffer>;

    /// A new buffer of `bytes` bytes for a kernel to store into before anything reads it:
    /// every kernel writes each element of its output, so the contents need not be zeroed
    /// (the CPU device hands back recycled memory as it was, saving a pass over memory).
    fn allocate_output(&self, bytes: usize) -> Result<Self::Buffer> {
        self.allocate(bytes)
    }

    /// The size of `buffer` in bytes.
    fn buffer_len(&self, buffer: &Self::Buffer) -> usize;

    /// A buffer that reads `data` where it lies, without allocating or copying, if this
    /// device can address host memory and the data is in native layout; `None` otherwise
    /// (the caller then allocates and copies in). Kernels must never write such a buffer.
    fn bind_host(&self, data: Arc<dyn HostData>) -> Option<Self::Buffer> {
        let _ = data;
        None
    }

    /// True when `buffer` is bound host data ([`Device::bind_host`]), which kernels must
    /// only read.
    fn is_read_only(&self, buffer: &Self::Buffer) -> bool {
        let _ = buffer;
        false
    }

    /// Copies host bytes into `dst`; `src` must be exactly as long as the buffer.
    fn copy_in(&self, dst: &Self::Buffer, src: &[u8]) -> Result<()>;

    /// Copies the contents of `src` to the host; `dst` must be exactly as long as the buffer.
    fn copy_out(&self, src: &Self::Buffer, dst: &mut [u8]) -> Result<()>;

    /// Compiles several kernels, `(source, entry)` each, into programs in the same order.
    /// By default each is compiled on its own, on every core; a device that can build many
    /// kernels in one compiler run does so.
    ///
    /// # Safety
    ///
    /// As [`Device::compile`], for every source.
    unsafe fn compile_many(&self, kernels: &[(&str, &str)]) -> Result<Vec<Self::Program>>
    where
        Self: Sized,
    {
        crate::parallel::each_in_parallel(kernels, |(source, entry)| {
            // SAFETY: the caller vouches for every source (this function's contract).
            unsafe { self.compile(source, entry) }
        })
        .into_iter()
        .collect()
    }

    /// Compiles kernel `source` and returns the program whose entry point is `entry` (for the
    /// CPU, a C function `void entry(void** bufs, int core_id)`).
    ///
    /// Nothing here knows which memory the source addresses, so such a program can only be
    /// launched with the `unsafe` [`Device::launch_unchecked`]; a kernel a renderer made is
    /// compiled with [`Device::compile_kernel`] instead, and launched with the checked
    /// [`Device::launch`].
    ///
    /// # Safety
    ///
    /// Loading the compiled program runs whatever the source says runs at load time (a C
    /// constructor, a static initializer), so `source` must be code that does nothing unsound
    /// when loaded: a kernel and its helpers, as a renderer makes them.
    unsafe fn compile(&self, source: &str, entry: &str) -> Result<Self::Program>;

    /// Compiles a kernel made by `tensor_core`'s renderers (as [`Device::generate_kernel`]
    /// returns it) into a program whose launches are checked against its arguments.
    ///
    /// Fails for a kernel built or changed by hand ([`Kernel::is_as_rendered`]), whose
    /// arguments say nothing reliable about what its source touches.
    fn compile_kernel(&self, kernel: &Kernel) -> Result<CheckedProgram<Self::Program>>
    where
        Self: Sized,
    {
        let signature = Signature::of(kernel)?;
        // SAFETY: the source is as a renderer made it (`Signature::of` checked), a kernel
        // with no load-time code.
        let program = unsafe { self.compile(&kernel.source, &kernel.entry)? };
        Ok(CheckedProgram { program, signature })
    }

    /// Compiles several rendered kernels as [`Device::compile_kernel`] does, in as few
    /// compiler runs as the device can ([`Device::compile_many`]); programs in kernel order.
    fn compile_kernels(&self, kernels: &[&Kernel]) -> Result<Vec<CheckedProgram<Self::Program>>>
    where
        Self: Sized,
    {
        let signatures = kernels
            .iter()
            .map(|k| Signature::of(k))
            .collect::<Result<Vec<_>>>()?;
        let sources: Vec<(&str, &str)> = kernels
            .iter()
            .map(|k| (k.source.as_str(), k.entry.as_str()))
            .collect();
        // SAFETY: every source is as a renderer made it (checked above), with no load-time
        // code.
        let programs = unsafe { self.compile_many(&sources)? };
        Ok(programs
            .into_iter()
            .zip(signatures)
            .map(|(program, signature)| CheckedProgram { program, signature })
            .collect())
    }

    /// Runs a rendered kernel's `program` once over `buffers` (its arguments in slot order),
    /// split as the kernel was rendered to be; returns when every part has finished, or, on a
    /// device with an in-order queue (a GPU's stream), once the launch is queued there,
    /// where every later copy, launch and free of that device waits for it.
    ///
    /// Before anything runs, the buffers are checked against the kernel's arguments: one
    /// buffer per argument, each holding at least the bytes the kernel addresses in it, and
    /// every buffer the kernel stores into writable and bound to no other argument. A
    /// mismatch is an [`RuntimeError::InvalidLaunch`] naming the argument.
    fn launch(
        &self,
        program: &CheckedProgram<Self::Program>,
        buffers: &[&Self::Buffer],
    ) -> Result<()>
    where
        Self: Sized,
    {
        program.signature.check(self, buffers)?;
        // SAFETY: the program was compiled from a kernel exactly as a renderer made it
        // (`Signature::of`), whose source follows the kernel ABI and addresses no more than
        // its arguments say; `check` has just verified that `buffers` hold that much, that
        // written buffers are writable and unaliased, and the launch is split into the parts
        // the kernel was rendered for.
        unsafe { self.launch_unchecked(&program.program, buffers, program.signature.launch) }
    }

    /// Runs `program` once over `buffers` (its arguments in slot order), launched as `launch`
    /// says (on the CPU `Launch::Cores`, on a GPU `Launch::Grid`; the other kind is an
    /// [`RuntimeError::InvalidLaunch`]), with no check of the buffers: what [`Device::launch`] does after its checks, and the only way to launch a
    /// program compiled from source text ([`Device::compile`]). Returns as `launch` does.
    ///
    /// # Safety
    ///
    /// The program must follow the kernel ABI and, for these `buffers` and `threads`, only
    /// touch memory inside them: every buffer must hold at least the bytes the kernel
    /// addresses in its slot (aligned for the element type it reads there, which every
    /// allocation of a device is); a buffer the kernel stores into must not be bound host
    /// data ([`Device::is_read_only`]) nor be bound to another slot (the kernel's pointers
    /// are `restrict`); and `launch` must be the one the kernel was written for (a C kernel
    /// of `n` parts indexes past its buffers when called on more cores).
    unsafe fn launch_unchecked(
        &self,
        program: &Self::Program,
        buffers: &[&Self::Buffer],
        launch: Launch,
    ) -> Result<()>;

    /// Waits until every launch and copy queued on the device has finished (a no-op where
    /// [`Device::launch`] returns only when its kernel has finished); reports a queued
    /// kernel's failure.
    fn wait_idle(&self) -> Result<()> {
        Ok(())
    }

    /// Copies typed host values into `dst` (little-endian, the layout kernels read); fails
    /// with [`RuntimeError::OutOfMemory`] where the host cannot hold the encoded copy.
    fn copy_in_elements<T: Element>(&self, dst: &Self::Buffer, values: &[T]) -> Result<()>
    where
        Self: Sized,
    {
        let len = values
            .len()
            .checked_mul(T::DTYPE.size_bytes())
            .ok_or_else(|| out_of_memory(usize::MAX))?;
        let mut bytes = vec_with_capacity(len)?;
        // Through scalars a chunk at a time: a scalar is larger than most elements.
        for chunk in values.chunks(ELEMENTS_PER_CHUNK) {
            let scalars: Vec<_> = chunk.iter().map(|v| v.to_scalar()).collect();
            bytes.extend_from_slice(&encode_scalars(&scalars, T::DTYPE));
        }
        self.copy_in(dst, &bytes)
    }

    /// The contents of `src`, which holds elements of `dtype`, as host values of type `T`;
    /// fails with [`RuntimeError::WrongElementType`] unless `T` is that element type, and
    /// with [`RuntimeError::OutOfMemory`] where the host cannot hold them.
    fn copy_out_elements<T: Element>(&self, src: &Self::Buffer, dtype: DType) -> Result<Vec<T>>
    where
        Self: Sized,
    {
        if T::DTYPE != dtype {
            return Err(RuntimeError::WrongElementType {
                expected: T::DTYPE,
                found: dtype,
            });
        }
        let mut bytes = zeroed_bytes(self.buffer_len(src))?;
        self.copy_out(src, &mut bytes)?;
        let size = dtype.size_bytes();
        if bytes.len() % size != 0 {
            return Err(RuntimeError::SizeMismatch {
                operation: "copy_out_elements (buffer is not a whole number of elements)",
                buffer_bytes: bytes.len(),
                data_bytes: bytes.len() / size * size,
            });
        }
        let mut values = vec_with_capacity(bytes.len() / size)?;
        for chunk in bytes.chunks(ELEMENTS_PER_CHUNK * size) {
            T::decode_into(chunk, &mut values);
        }
        Ok(values)
    }
}

/// Ok when a copy's `data_bytes` match the device buffer's `buffer_bytes` exactly.
pub(crate) fn check_len(
    operation: &'static str,
    buffer_bytes: usize,
    data_bytes: usize,
) -> Result<()> {
    if buffer_bytes == data_bytes {
        Ok(())
    } else {
        Err(RuntimeError::SizeMismatch {
            operation,
            buffer_bytes,
            data_bytes,
        })
    }
}

/// A program compiled from a kernel a renderer made ([`Device::compile_kernel`]), with what
/// its launches must bind: [`Device::launch`] checks every launch's buffers against it.
/// Cheap to clone.
#[derive(Clone)]
pub struct CheckedProgram<P> {
    program: P,
    signature: Arc<Signature>,
}

impl<P> CheckedProgram<P> {
    /// The compiled program, for [`Device::launch_unchecked`].
    pub fn program(&self) -> &P {
        &self.program
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.signature.name
    }

    /// How the kernel is launched (the rendered kernel's `launch`).
    pub fn launch(&self) -> Launch {
        self.signature.launch
    }

    /// The kernel's buffer arguments by slot: what each launch must bind.
    pub fn args(&self) -> &[KernelArg] {
        &self.signature.args
    }
}

/// What a rendered kernel addresses: the extent, dtype and direction of each buffer argument,
/// and the parts its launch is split into.
#[derive(Debug)]
struct Signature {
    name: String,
    launch: Launch,
    args: Vec<KernelArg>,
}

impl Signature {
    /// The signature of `kernel`, if it is exactly as a renderer made it.
    fn of(kernel: &Kernel) -> Result<Arc<Signature>> {
        if !kernel.is_as_rendered() {
            return Err(RuntimeError::InvalidLaunch(format!(
                "kernel `{}` was built or changed outside tensor_core's renderers, so what its \
                 source touches is unknown: compile it with Device::compile and launch it with \
                 the unsafe Device::launch_unchecked",
                kernel.name
            )));
        }
        Ok(Arc::new(Signature {
            name: kernel.name.clone(),
            launch: kernel.launch,
            args: kernel.args.clone(),
        }))
    }

    /// Ok when `buffers` can be handed to the kernel: one per argument, each holding what
    /// the kernel addresses, each written one writable and bound only once.
    fn check<D: Device>(&self, device: &D, buffers: &[&D::Buffer]) -> Result<()> {
        if self.args.len() != buffers.len() {
            return Err(self.refuse(format!(
                "takes {} buffers but {} were bound",
                self.args.len(),
                buffers.len()
            )));
        }
        for (slot, (arg, buffer)) in self.args.iter().zip(buffers).enumerate() {
            let held = device.buffer_len(buffer);
            let needed = arg.size.checked_mul(arg.dtype.size_bytes());
            if needed.is_none_or(|needed| needed > held) {
                return Err(self.refuse(format!(
                    "addresses {} {} elements in argument {slot}, but the buffer bound there \
                     holds {held} bytes: bind a buffer of at least {} bytes",
                    arg.size,
                    arg.dtype,
                    needed.map_or_else(|| "more than usize::MAX".to_string(), |n| n.to_string())
                )));
            }
            if arg.writes {
                self.check_writable(device, buffers, slot)?;
            }
        }
        Ok(())
    }

    /// Ok when the buffer in `slot`, which the kernel stores into, may be written: not
    /// read-only host data, and bound to no other slot (the kernel's pointers are
    /// `restrict`, and its parts would race).
    fn check_writable<D: Device>(
        &self,
        device: &D,
        buffers: &[&D::Buffer],
        slot: usize,
    ) -> Result<()> {
        if device.is_read_only(buffers[slot]) {
            return Err(self.refuse(format!(
                "stores into argument {slot}, but the buffer bound there is a tensor's \
                 read-only host data: bind a buffer allocated on the device"
            )));
        }
        let alias = buffers
            .iter()
            .enumerate()
            .find(|&(other, b)| other != slot && std::ptr::eq(*b, buffers[slot]));
        if let Some((other, _)) = alias {
            return Err(self.refuse(format!(
                "stores into argument {slot}, whose buffer is also bound to argument {other}: \
                 bind a separate buffer for the output"
            )));
        }
        Ok(())
    }

    fn refuse(&self, why: String) -> RuntimeError {
        RuntimeError::InvalidLaunch(format!("kernel `{}` {why}", self.name))
    }
}
