//! `tensor`: a tensor compiler embedded in Rust, with NumPy's operations and JAX's transforms.
//!
//! Operations on a [`Tensor`] are lazy: they build a graph, which is simplified by rewrite
//! rules, fused into kernels, compiled to C by the system compiler and run on every CPU core
//! when a value is asked for. The transforms (`grad`, `vmap`, `jvp`, `vjp`, `jacfwd`,
//! `jacrev`, `hessian`, `jit`) take and return functions of tensors and compose as in JAX.
//! The facade re-exports the compiler ([`core`], the `tensor-core` crate), the runtime
//! ([`runtime`]) and the proc macros; `use tensor::prelude::*;` brings in what most programs
//! need.
//!
//! # Two commands
//!
//! ```text
//! cargo run --release --example per_sample_grads   # vmap(grad(loss)) of an MLP, checked against a loop
//! cargo test --workspace                           # what CI runs (after fmt and clippy)
//! ```
//!
//! # Tensors
//!
//! Names and signatures follow NumPy: reductions take one axis, several, or `None` for all,
//! and `keepdim`; constructors take a dtype; scalars mix with tensors on either side of an
//! operator and take the tensor's dtype (JAX's weak types). Values are computed by
//! [`Realize`](prelude::Realize) (`to_vec`, `to_ndarray`, `realize`).
//!
//! ```
//! use tensor::prelude::*;
//!
//! let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
//! let y = (2.0 - &x).abs().sum(1, true) / 2.0;       // np.abs(2 - x).sum(axis=1, keepdims=True) / 2
//! assert_eq!(y.shape(), vec![2, 1]);
//! assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 4.5]);
//! let i = Tensor::arange((0, 6, 2));                 // np.arange(0, 6, 2)
//! assert_eq!((&i * 10).to_vec::<i32>().unwrap(), vec![0, 20, 40]);
//! ```
//!
//! Shape and dtype mistakes panic where the graph is built, naming the op, the shapes and
//! the caller's line (`matmul: shapes [2, 3] and [2, 3] do not align: ...`); faults of the
//! runtime (no C compiler, a full disk) are `Result`s.
//!
//! # Transforms
//!
//! As plain functions over a [`Func`] (from a closure of one to eight tensors), as plain
//! functions typed like the function they transform, taking and returning trees of tensors
//! ([`typed`]: `typed::grad(loss, Argnum::<0>)` returns gradients shaped like argument 0), or
//! as macros typed the same way:
//!
//! ```
//! use tensor::prelude::*;
//!
//! let loss = |w: &Tensor, x: &Tensor| (x.matmul(w).tanh()).square().sum_all();
//! let w = Tensor::from_vec(vec![0.5f32, -0.25], &[2]);
//! let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 0.0, 1.0], &[3, 2]);
//! // One gradient per sample: vmap over x, not over w.
//! let per_sample = vmap!(grad!(loss, argnums = 0), in_axes = (None, 0));
//! let g = per_sample(&w, &xs);
//! assert_eq!(g.shape(), vec![3, 2]);
//! assert_eq!(g.to_vec::<f32>().unwrap()[..2], [0.0, 0.0]); // x·w = 0 for the first sample
//! ```
//!
//! # Macros
//!
//! `vmap!`, `grad!`, `value_and_grad!`, `jvp!`, `vjp!`, `jacfwd!`, `jacrev!`, `hessian!`,
//! `jit!` take JAX's keywords (`in_axes`, `out_axes`, `argnums`, `has_aux`, `allow_int`) and
//! check them at compile time; `#[function]` traces a function once per input signature;
//! `#[derive(Tree)]` makes a struct of tensors one argument or result of every transform (as
//! JAX's pytrees). The README's *Using it* section lists every keyword.
//!
//! # Devices
//!
//! Kernels run on the CPU by default, compiled by `cc` (or `$CC`) and cached on disk in
//! `$TENSOR_CACHE_DIR` (else `~/.cache/tensor`). `DEVICE=CUDA` (or `CUDA:1`) runs every
//! graph on an NVIDIA GPU, compiled by NVRTC (loaded at run time; without a driver the error
//! says what is missing), and `DEVICE=EMU` on the emulated GPU (the GPU's kernels run by an
//! interpreter, for tests); `runtime::realize::set_device` chooses in code. `x.to("CUDA")`
//! ties one value to a device, as PyTorch's `Tensor.to`: the graphs that read it run there,
//! host tensors they read follow it, and `y.to("CPU")` brings a result back:
//!
//! ```
//! use tensor::prelude::*;
//! let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
//! let y = (x.to("EMU") * 2.0).exp2(); // computed by the emulated GPU
//! assert_eq!(y.device(), Device::Single("EMU".into()));
//! assert_eq!(y.to("CPU").to_vec::<f32>().unwrap(), vec![4.0, 16.0, 64.0]);
//! ```
//!
//! # Debugging switches
//!
//! | variable | effect |
//! |---|---|
//! | `DEBUG=1` | one line per realize: kernels, compiler runs, cache hits, time; one warning for a loop whose graph keeps growing |
//! | `DEBUG=2` | also one line per kernel with its launch size and time |
//! | `DEBUG=3` | also each scheduling decision (which node was stored or fused, and why) |
//! | `DEBUG=4` | also the generated C of each kernel |
//! | `NOOPT=1` | kernels without optimizations (no threads, no upcasts) |
//! | `THREADS=n` | cores a kernel is split across |
//! | `CC`, `TENSOR_CACHE_DIR`, `TENSOR_COMPILE_TIMEOUT` | the compiler, the kernel cache, the compile time limit |

#![warn(missing_docs)]

pub use tensor_core as core;
pub use tensor_runtime as runtime;

pub use tensor_core::Tensor;
pub use tensor_core::nn;
pub use tensor_core::transform::tree::{
    self, AxisTree, HasJacobian, Tree, TreeDef, TreeJacobian, tree_add, tree_leaves, tree_map,
    tree_scale, tree_structure, tree_sub, tree_unflatten, tree_vdot, tree_zeros_like, tree_zip_map,
};
pub use tensor_core::transform::{
    ArgNums, Custom, Func, InAxes, IntoFunc, OutAxes, custom_jvp, custom_vjp, custom_vmap, grad,
    grad_with, hessian, jacfwd, jacrev, jvp, value_and_grad, value_and_grad_with, vjp, vmap,
};
pub use tensor_core::{ArangeArgs, Axes, IntoAxes, MatrixOrd, RoundingMode, ShapeError};
pub use tensor_macros::{
    Tree, function, grad, hessian, jacfwd, jacrev, jit, jvp, value_and_grad, vjp, vmap,
};
pub use tensor_runtime::jit;

/// External functions: opaque host code called inside traced graphs, with the batching
/// strategies of `vmap` and autodiff through their `jvp`/`vjp` endpoints.
pub mod external {
    pub use tensor_core::transform::external::{
        CALL_LOG_SIZE, CallRecord, Dims, ExtArg, External, ExternalBuilder, HostArray, HostCall,
        HostValue, InputSpec, OutputSpec,
    };
    pub use tensor_core::uop::{BatchStrategy, Endpoint};
}

#[doc(hidden)]
#[path = "macro_support.rs"]
pub mod __private;

pub mod checkpoint;
pub mod datasets;
pub mod dist;
pub mod dp;
pub mod optim;
pub mod typed;

/// The names most programs need: `use tensor::prelude::*;`.
pub mod prelude {
    /// Compiles a function once per input signature and replays it (see the crate docs).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let step = jit!(|x: &Tensor| x * 2.0 + 1.0);
    /// let y = step(&Tensor::from_vec(vec![1.0f32, 2.0], &[2]));
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0, 5.0]);
    /// ```
    pub use crate::jit;

    /// A structure of tensors (a JAX pytree): tuples, arrays, `Vec`, `Option`, maps, and
    /// structs with `#[derive(Tree)]`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// #[derive(Clone, Tree)]
    /// struct Linear { w: Tensor, b: Tensor }
    /// let p = Linear { w: Tensor::ones(&[2, 2], DType::F32), b: Tensor::zeros(&[2], DType::F32) };
    /// let loss = |p: &Linear, x: &Tensor| (x.matmul(&p.w) + &p.b).sum_all();
    /// let g: Linear = grad!(loss)(&p, &Tensor::from_vec(vec![1.0f32, 2.0], &[2]));
    /// assert_eq!(g.w.to_vec::<f32>().unwrap(), vec![1.0, 1.0, 2.0, 2.0]);
    /// assert_eq!(g.b.to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    /// assert_eq!(tree_leaves(&g).len(), 2);
    /// ```
    pub use tensor_core::transform::tree::Tree;

    /// `tree_add(a, b)`: leaf by leaf `a + b`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let a = (Tensor::scalar(1.0f32), Tensor::scalar(2.0f32));
    /// let s = tree_add(&a, &a);
    /// assert_eq!(s.1.to_vec::<f32>().unwrap(), vec![4.0]);
    /// ```
    pub use tensor_core::transform::tree::tree_add;

    /// `tree_leaves(t)`: the tensors of a tree, in order.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let t = vec![Tensor::scalar(1.0f32), Tensor::scalar(2.0f32)];
    /// assert_eq!(tree_leaves(&(t, Tensor::scalar(3i32))).len(), 3);
    /// ```
    pub use tensor_core::transform::tree::tree_leaves;

    /// `tree_map(t, f)`: `f` applied to every leaf, the structure kept.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let t = (Tensor::scalar(1.0f32), Tensor::scalar(2.0f32));
    /// let doubled = tree_map(&t, |x| x * 2.0);
    /// assert_eq!(doubled.1.to_vec::<f32>().unwrap(), vec![4.0]);
    /// ```
    pub use tensor_core::transform::tree::tree_map;

    /// `tree_scale(t, s)`: every leaf times `s`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let t = [Tensor::scalar(2.0f32)];
    /// assert_eq!(tree_scale(&t, 0.5)[0].to_vec::<f32>().unwrap(), vec![1.0]);
    /// ```
    pub use tensor_core::transform::tree::tree_scale;

    /// `tree_sub(a, b)`: leaf by leaf `a - b` (`tree_sub(&p, &tree_scale(&g, lr))` is SGD).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let p = [Tensor::scalar(1.0f32)];
    /// let g = [Tensor::scalar(4.0f32)];
    /// assert_eq!(tree_sub(&p, &tree_scale(&g, 0.25))[0].to_vec::<f32>().unwrap(), vec![0.0]);
    /// ```
    pub use tensor_core::transform::tree::tree_sub;

    /// `tree_vdot(a, b)`: the sum over all leaves of `sum(a * b)`, a 0-d tensor.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let a = (Tensor::from_vec(vec![1.0f32, 2.0], &[2]), Tensor::scalar(3.0f32));
    /// assert_eq!(tree_vdot(&a, &a).to_vec::<f32>().unwrap(), vec![14.0]);
    /// ```
    pub use tensor_core::transform::tree::tree_vdot;

    /// `tree_zeros_like(t)`: zeros of every leaf's shape and dtype.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let z = tree_zeros_like(&[Tensor::ones(&[2], DType::I32)]);
    /// assert_eq!(z[0].to_vec::<i32>().unwrap(), vec![0, 0]);
    /// ```
    pub use tensor_core::transform::tree::tree_zeros_like;

    /// `tree_zip_map(a, b, f)`: `f` applied to matching leaves of two trees of one structure.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let a = [Tensor::scalar(3.0f32)];
    /// let m = tree_zip_map(&a, &a, |x, y| x.maximum(y) * 2.0);
    /// assert_eq!(m[0].to_vec::<f32>().unwrap(), vec![6.0]);
    /// ```
    pub use tensor_core::transform::tree::tree_zip_map;

    /// A function of tensors, as every transform takes and returns it.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let f = Func::new(Some(2), |args: &[Tensor]| vec![&args[0] * &args[1]]);
    /// let x = Tensor::scalar(3.0f32);
    /// let df = grad(f, 1).call1(&[x.clone(), x]);  // d(x*y)/dy = x
    /// assert_eq!(df.to_vec::<f32>().unwrap(), vec![3.0]);
    /// ```
    pub use tensor_core::transform::Func;

    /// `grad(f, argnums)`: the gradient of a scalar function (`jax.grad`), over flat lists of
    /// tensors. For arguments that are trees (a parameter struct), use
    /// [`typed::grad`](crate::typed::grad), which returns gradients shaped like them.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    /// let g = grad(|x: &Tensor| (x * x).sum_all(), 0).call1(&[x]);
    /// assert_eq!(g.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    /// ```
    pub use tensor_core::transform::grad;

    /// `hessian(f, argnums)`: `jacfwd(jacrev(f))` (`jax.hessian`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let h = hessian(|x: &Tensor| x.pow(3.0).sum_all(), 0).call1(&[x]);
    /// assert_eq!(h.to_vec::<f32>().unwrap(), vec![6.0, 0.0, 0.0, 12.0]);
    /// ```
    pub use tensor_core::transform::hessian;

    /// `jacfwd(f, argnums)`: the Jacobian by forward mode (`jax.jacfwd`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let j = jacfwd(|x: &Tensor| x * x, 0).call1(&[x]);
    /// assert_eq!(j.to_vec::<f32>().unwrap(), vec![2.0, 0.0, 0.0, 4.0]);
    /// ```
    pub use tensor_core::transform::jacfwd;

    /// `jacrev(f, argnums)`: the Jacobian by reverse mode (`jax.jacrev`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let j = jacrev(|x: &Tensor| x.sum(None, true) * x, 0).call1(&[x]);
    /// assert_eq!(j.to_vec::<f32>().unwrap(), vec![4.0, 1.0, 2.0, 5.0]);
    /// ```
    pub use tensor_core::transform::jacrev;

    /// `jvp(f, &primals, &tangents)`: `(f(primals), J · tangents)` (`jax.jvp`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let (y, t) = jvp(|x: &Tensor| x.exp(), &[Tensor::scalar(0.0f32)], &[Tensor::scalar(2.0f32)]);
    /// assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![1.0]);
    /// assert_eq!(t[0].to_vec::<f32>().unwrap(), vec![2.0]);
    /// ```
    pub use tensor_core::transform::jvp;

    /// `value_and_grad(f, argnums)`: the value, then the gradients (`jax.value_and_grad`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let out = value_and_grad(|x: &Tensor| x.square().sum_all(), 0).call(&[Tensor::scalar(3.0f32)]);
    /// assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![9.0]);
    /// assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![6.0]);
    /// ```
    pub use tensor_core::transform::value_and_grad;

    /// `vjp(f, &primals)`: `(f(primals), pullback)` (`jax.vjp`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let (y, pullback) = vjp(|x: &Tensor| x * 3.0, &[x]);
    /// let ct = pullback.call1(&[Tensor::from_vec(vec![1.0f32, -1.0], &[2])]);
    /// assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
    /// assert_eq!(ct.to_vec::<f32>().unwrap(), vec![3.0, -3.0]);
    /// ```
    pub use tensor_core::transform::vjp;

    /// `vmap(f, in_axes, out_axes)`: `f` over a batch axis (`jax.vmap`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let norms = vmap(|x: &Tensor| x.square().sum_all(), 0, 0).call1(&[xs]);
    /// assert_eq!(norms.to_vec::<f32>().unwrap(), vec![5.0, 25.0]);
    /// ```
    pub use tensor_core::transform::vmap;

    /// Element types (`DType::F32`, `DType::I32`, ...).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::arange(3).cast(DType::F32);
    /// assert_eq!(x.dtype(), DType::F32);
    /// assert_eq!((&x * 2).dtype(), DType::F32); // a scalar takes the tensor's dtype
    /// ```
    pub use tensor_core::DType;

    /// Where a value lives (`Device::cpu()`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// assert_eq!(Tensor::scalar(1.0f32).device(), Device::cpu());
    /// ```
    pub use tensor_core::Device;

    /// The lazy n-dimensional array (see the crate docs for the signature patterns).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::arange((1, 7)).reshape(&[2, 3]);
    /// assert_eq!(x.max(None, false).to_vec::<i32>().unwrap(), vec![6]);
    /// assert_eq!(x.argmin(1, false).to_vec::<i64>().unwrap(), vec![0, 0]);
    /// ```
    pub use tensor_core::Tensor;

    /// A node of the graph a tensor stands for (`Tensor::uop`).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::scalar(1.0f32) + 2.0;
    /// let u: UOp = x.uop();
    /// assert_eq!(u.dtype(), DType::F32);
    /// ```
    pub use tensor_core::UOp;

    /// `#[function]`: a function traced once per input signature into one reusable node.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// #[function]
    /// fn affine(x: &Tensor, w: &Tensor) -> Tensor {
    ///     x * w + 1.0
    /// }
    /// let y = affine(&Tensor::scalar(2.0f32), &Tensor::scalar(3.0f32));
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![7.0]);
    /// ```
    pub use tensor_macros::function;

    /// `#[derive(Tree)]`: a struct of tensors as one argument or result of every transform
    /// (see [`Tree`](trait@Tree)).
    pub use tensor_macros::Tree;

    /// `grad!(f, argnums = .., has_aux = .., allow_int = ..)`: a callable typed like `f`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let f = |x: &Tensor, y: &Tensor| (x * y).sum_all();
    /// let (dx, dy) = grad!(f, argnums = (0, 1))(&Tensor::scalar(2.0f32), &Tensor::scalar(5.0f32));
    /// assert_eq!(dx.to_vec::<f32>().unwrap(), vec![5.0]);
    /// assert_eq!(dy.to_vec::<f32>().unwrap(), vec![2.0]);
    /// ```
    pub use tensor_macros::grad;

    /// `hessian!(f, argnums = ..)`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let h = hessian!(|x| x.square().sum_all() * 0.5)(&Tensor::from_vec(vec![1.0f32, 2.0], &[2]));
    /// assert_eq!(h.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 0.0, 1.0]);
    /// ```
    pub use tensor_macros::hessian;

    /// `jacfwd!(f, argnums = ..)`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let j = jacfwd!(|x| x * 2.0)(&Tensor::from_vec(vec![1.0f32, 2.0], &[2]));
    /// assert_eq!(j.to_vec::<f32>().unwrap(), vec![2.0, 0.0, 0.0, 2.0]);
    /// ```
    pub use tensor_macros::jacfwd;

    /// `jacrev!(f, argnums = ..)`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let j = jacrev!(|x| x.flip(None))(&Tensor::from_vec(vec![1.0f32, 2.0], &[2]));
    /// assert_eq!(j.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 1.0, 0.0]);
    /// ```
    pub use tensor_macros::jacrev;

    /// `jvp!(f, (primals..), (tangents..))`: `(f(primals), J · tangents)`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::scalar(3.0f32);
    /// let (y, t) = jvp!(|x| x * x, (&x,), (&Tensor::scalar(1.0f32),));
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![9.0]);
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![6.0]);
    /// ```
    pub use tensor_macros::jvp;

    /// `value_and_grad!(f, argnums = ..)`: `(value, gradients)`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let (v, g) = value_and_grad!(|x| x.exp().sum_all())(&Tensor::scalar(0.0f32));
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![1.0]);
    /// assert_eq!(g.to_vec::<f32>().unwrap(), vec![1.0]);
    /// ```
    pub use tensor_macros::value_and_grad;

    /// `vjp!(f, (primals..))`: `(f(primals), pullback)`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let (y, pullback) = vjp!(|x| x.sum_all(), (&x,));
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![3.0]);
    /// assert_eq!(pullback(&Tensor::scalar(2.0f32)).to_vec::<f32>().unwrap(), vec![2.0, 2.0]);
    /// ```
    pub use tensor_macros::vjp;

    /// `vmap!(f, in_axes = .., out_axes = .., method = ..)`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let xs = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let w = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
    /// let ys = vmap!(|x, w| x.dot(w), in_axes = (0, None))(&xs, &w);
    /// assert_eq!(ys.to_vec::<f32>().unwrap(), vec![-1.0, -1.0]);
    /// ```
    pub use tensor_macros::vmap;

    /// Computing a lazy tensor: `to_vec`, `to_ndarray`, `realize`.
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let x = Tensor::from_vec(vec![1i32, 2, 3, 4], &[2, 2]).sum(0, false);
    /// assert_eq!(x.to_vec::<i32>().unwrap(), vec![4, 6]);
    /// assert_eq!(x.to_ndarray::<i32>().unwrap().shape(), &[2]);
    /// assert!(x.to_vec::<f32>().is_err()); // the element type must match
    /// ```
    pub use tensor_runtime::Realize;

    /// `realize_tree(&t)`: computes every tensor of a tree in one plan (the parameters after an
    /// update step, so the next step's graph starts from buffers).
    ///
    /// ```
    /// use tensor::prelude::*;
    /// let p = (Tensor::scalar(1.0f32), [Tensor::scalar(2.0f32)]);
    /// let stepped = tree_scale(&p, 0.5);
    /// realize_tree(&stepped).unwrap();
    /// assert_eq!(stepped.1[0].to_vec::<f32>().unwrap(), vec![1.0]);
    /// ```
    pub use tensor_runtime::realize::realize_tree;
}
