//! What the proc macros of `tensor-macros` expand to: typed wrappers around the plain
//! transforms, so that `vmap!(f, ...)` is a callable of `f`'s arity and result type, and the
//! trace cache of `#[function]`. Not a public API: reachable as `tensor::__private`.
//!
//! Typing works through [`Signature`]: every closure or fn of one to eight tensors (all by
//! reference or all by value) returning [`Outputs`] (a tensor, or tuples of them, nested)
//! names its arity, its result type, and the boxed callable of the same arity returning any
//! other `Outputs` type. A transform macro's result is such a boxed callable, so transform
//! macros nest: `vmap!(grad!(loss), ...)` types the inner result like any other function.

use tensor_core::Tensor;
use tensor_core::transform::{self, ArgNums, Func, InAxes, OutAxes};

pub use tensor_core::transform::function::{CallMode, FunctionCache};

/// Results a typed function returns: a tensor, or a tuple of `Outputs` (nested tuples are
/// flattened in order, so `(Tensor, (Tensor, Tensor))` is three results).
pub trait Outputs: Sized {
    /// How many tensors this type holds.
    const COUNT: usize;
    /// Appends the tensors, in order.
    fn flatten_into(self, out: &mut Vec<Tensor>);
    /// Appends clones of the tensors, in order.
    fn flatten_ref_into(&self, out: &mut Vec<Tensor>);
    /// Takes `COUNT` tensors from `items`.
    fn take_from(items: &mut std::vec::IntoIter<Tensor>) -> Self;
}

impl Outputs for Tensor {
    const COUNT: usize = 1;
    fn flatten_into(self, out: &mut Vec<Tensor>) {
        out.push(self);
    }
    fn flatten_ref_into(&self, out: &mut Vec<Tensor>) {
        out.push(self.clone());
    }
    fn take_from(items: &mut std::vec::IntoIter<Tensor>) -> Self {
        items
            .next()
            .expect("typed results: fewer tensors than the result type holds")
    }
}

macro_rules! tuple_outputs {
    ($($t:ident $v:ident),+) => {
        impl<$($t: Outputs),+> Outputs for ($($t,)+) {
            const COUNT: usize = 0 $(+ $t::COUNT)+;
            fn flatten_into(self, out: &mut Vec<Tensor>) {
                let ($($v,)+) = self;
                $($v.flatten_into(out);)+
            }
            fn flatten_ref_into(&self, out: &mut Vec<Tensor>) {
                let ($($v,)+) = self;
                $($v.flatten_ref_into(out);)+
            }
            fn take_from(items: &mut std::vec::IntoIter<Tensor>) -> Self {
                ($($t::take_from(items),)+)
            }
        }
    };
}

tuple_outputs!(A a);
tuple_outputs!(A a, B b);
tuple_outputs!(A a, B b, C c);
tuple_outputs!(A a, B b, C c, D d);
tuple_outputs!(A a, B b, C c, D d, E e);
tuple_outputs!(A a, B b, C c, D d, E e, G g);
tuple_outputs!(A a, B b, C c, D d, E e, G g, H h);
tuple_outputs!(A a, B b, C c, D d, E e, G g, H h, I i);

/// `value` as a flat list of tensors.
pub fn flatten<O: Outputs>(value: O) -> Vec<Tensor> {
    let mut out = Vec::with_capacity(O::COUNT);
    value.flatten_into(&mut out);
    out
}

/// The flat list `items` as the result type `O`.
#[track_caller]
pub fn unflatten<O: Outputs>(items: Vec<Tensor>) -> O {
    assert_eq!(
        items.len(),
        O::COUNT,
        "typed results: the function returned {} tensors but its result type holds {}",
        items.len(),
        O::COUNT
    );
    O::take_from(&mut items.into_iter())
}

/// A tensor argument given to a macro by value or by reference (`x`, `&x`, `&&x`).
pub trait TensorRef {
    /// A handle on the same tensor.
    fn tensor(&self) -> Tensor;
}

impl TensorRef for Tensor {
    fn tensor(&self) -> Tensor {
        self.clone()
    }
}

impl<T: TensorRef + ?Sized> TensorRef for &T {
    fn tensor(&self) -> Tensor {
        (**self).tensor()
    }
}

/// Marker for functions taking `N` tensors by reference.
pub struct ByRef<const N: usize>;
/// Marker for functions taking `N` tensors by value.
pub struct ByValue<const N: usize>;

/// A function of tensors whose arity and result type are known to the type system. `M` is a
/// marker (arity, passing mode, result type) that only keeps the impls apart.
pub trait Signature<M>: Sized {
    /// The number of tensor arguments.
    const ARITY: usize;
    /// What the function returns.
    type Output: Outputs;
    /// A boxed function of the same arity, taking its tensors by reference, returning `Out`.
    type Callable<Out: Outputs + 'static>;
    /// The function as an untyped [`Func`].
    fn into_func(self) -> Func;
    /// `func` (of this arity) typed as a callable returning `Out`.
    fn callable<Out: Outputs + 'static>(func: Func) -> Self::Callable<Out>;
}

/// `vmap!`'s check: in_axes has one entry per argument.
#[diagnostic::on_unimplemented(
    message = "vmap!: in_axes has length {N}, but the function's arity is not {N}",
    label = "one entry per argument of `{Self}`",
    note = "give in_axes one integer or None per argument, or a single integer or None for all of them"
)]
pub trait InAxesFit<const N: usize, M> {}

/// `jvp!`/`vjp!`'s check: one primal per argument.
#[diagnostic::on_unimplemented(
    message = "the number of primals ({N}) is not the function's arity",
    label = "one primal per argument of `{Self}`",
    note = "pass the primals as a tuple with one tensor per argument: `(x, y)`"
)]
pub trait PrimalsFit<const N: usize, M> {}

/// `grad!`-family's check: argument `K` exists.
#[diagnostic::on_unimplemented(
    message = "argnums {K} is out of range: the function has no argument {K}",
    label = "`{Self}` has no argument {K}",
    note = "argnums counts arguments from 0; use an index below the function's arity"
)]
pub trait HasArgument<const K: usize, M> {}

macro_rules! signature {
    ($n:literal; $($idx:tt $a:ident),+; $refs:tt; $vals:tt) => {
        impl<F, R> Signature<(ByRef<$n>, R)> for F
        where
            F: Fn $refs -> R + Send + Sync + 'static,
            R: Outputs,
        {
            const ARITY: usize = $n;
            type Output = R;
            type Callable<Out: Outputs + 'static> =
                Box<dyn Fn $refs -> Out + Send + Sync>;
            fn into_func(self) -> Func {
                Func::new(Some($n), move |args: &[Tensor]| flatten(self($(&args[$idx]),+)))
            }
            fn callable<Out: Outputs + 'static>(func: Func) -> Self::Callable<Out> {
                Box::new(move |$($a: &Tensor),+| unflatten(func.call(&[$($a),+].map(Tensor::clone))))
            }
        }
        impl<F, R> Signature<(ByValue<$n>, R)> for F
        where
            F: Fn $vals -> R + Send + Sync + 'static,
            R: Outputs,
        {
            const ARITY: usize = $n;
            type Output = R;
            type Callable<Out: Outputs + 'static> =
                Box<dyn Fn $refs -> Out + Send + Sync>;
            fn into_func(self) -> Func {
                Func::new(Some($n), move |args: &[Tensor]| flatten(self($(args[$idx].clone()),+)))
            }
            fn callable<Out: Outputs + 'static>(func: Func) -> Self::Callable<Out> {
                Box::new(move |$($a: &Tensor),+| unflatten(func.call(&[$($a),+].map(Tensor::clone))))
            }
        }
        impl<F, R> InAxesFit<$n, (ByRef<$n>, R)> for F where F: Fn $refs -> R {}
        impl<F, R> InAxesFit<$n, (ByValue<$n>, R)> for F where F: Fn $vals -> R {}
        impl<F, R> PrimalsFit<$n, (ByRef<$n>, R)> for F where F: Fn $refs -> R {}
        impl<F, R> PrimalsFit<$n, (ByValue<$n>, R)> for F where F: Fn $vals -> R {}
        $(
            impl<F, R> HasArgument<$idx, (ByRef<$n>, R)> for F where F: Fn $refs -> R {}
            impl<F, R> HasArgument<$idx, (ByValue<$n>, R)> for F where F: Fn $vals -> R {}
        )+
    };
}

signature!(1; 0 a; (&Tensor); (Tensor));
signature!(2; 0 a, 1 b; (&Tensor, &Tensor); (Tensor, Tensor));
signature!(3; 0 a, 1 b, 2 c; (&Tensor, &Tensor, &Tensor); (Tensor, Tensor, Tensor));
signature!(4; 0 a, 1 b, 2 c, 3 d; (&Tensor, &Tensor, &Tensor, &Tensor); (Tensor, Tensor, Tensor, Tensor));
signature!(5; 0 a, 1 b, 2 c, 3 d, 4 e; (&Tensor, &Tensor, &Tensor, &Tensor, &Tensor); (Tensor, Tensor, Tensor, Tensor, Tensor));
signature!(6; 0 a, 1 b, 2 c, 3 d, 4 e, 5 g; (&Tensor, &Tensor, &Tensor, &Tensor, &Tensor, &Tensor); (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor));
signature!(7; 0 a, 1 b, 2 c, 3 d, 4 e, 5 g, 6 h; (&Tensor, &Tensor, &Tensor, &Tensor, &Tensor, &Tensor, &Tensor); (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor));
signature!(8; 0 a, 1 b, 2 c, 3 d, 4 e, 5 g, 6 h, 7 i; (&Tensor, &Tensor, &Tensor, &Tensor, &Tensor, &Tensor, &Tensor, &Tensor); (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor));

/// Compile-time check that `f` takes `N` tensors (vmap!'s in_axes).
pub fn in_axes_fit<const N: usize, M, F: InAxesFit<N, M>>(_: &F) {}

/// Compile-time check that `f` takes `N` tensors (jvp!/vjp!'s primals).
pub fn primals_fit<const N: usize, M, F: PrimalsFit<N, M>>(_: &F) {}

/// Compile-time check that `f` has argument `K` (argnums).
pub fn has_argument<const K: usize, M, F: HasArgument<K, M>>(_: &F) {}

/// `vmap!`: `f` batched, with `f`'s arity and result type.
pub fn vmap<M, F: Signature<M>>(
    f: F,
    in_axes: InAxes,
    out_axes: OutAxes,
    method: transform::VmapMethod,
) -> F::Callable<F::Output>
where
    F::Output: 'static,
{
    F::callable(transform::vmap_with(
        f.into_func(),
        in_axes,
        out_axes,
        method,
    ))
}

/// `grad!`: the gradients with respect to `argnums`, typed as `Out`.
pub fn grad<M, F: Signature<M>, Out: Outputs + 'static>(
    f: F,
    argnums: ArgNums,
) -> F::Callable<Out> {
    F::callable(transform::grad(f.into_func(), argnums))
}

/// `value_and_grad!`: the value followed by the gradients, typed as `(Tensor, Out)`.
pub fn value_and_grad<M, F: Signature<M>, Out: Outputs + 'static>(
    f: F,
    argnums: ArgNums,
) -> F::Callable<(Tensor, Out)> {
    F::callable(transform::value_and_grad(f.into_func(), argnums))
}

/// `jacfwd!`: one Jacobian per result of `f`, typed like `f`'s results.
pub fn jacfwd<M, F: Signature<M>>(f: F, argnum: usize) -> F::Callable<F::Output>
where
    F::Output: 'static,
{
    F::callable(transform::jacfwd(f.into_func(), argnum))
}

/// `jacrev!`: one Jacobian per result of `f`, typed like `f`'s results.
pub fn jacrev<M, F: Signature<M>>(f: F, argnum: usize) -> F::Callable<F::Output>
where
    F::Output: 'static,
{
    F::callable(transform::jacrev(f.into_func(), argnum))
}

/// `hessian!`: one Hessian per result of `f`, typed like `f`'s results.
pub fn hessian<M, F: Signature<M>>(f: F, argnum: usize) -> F::Callable<F::Output>
where
    F::Output: 'static,
{
    F::callable(transform::hessian(f.into_func(), argnum))
}

/// `jit!`: `f` compiled once per input signature and replayed, typed like `f`.
pub fn jit<M, F: Signature<M>>(f: F) -> F::Callable<F::Output>
where
    F::Output: 'static,
{
    F::callable(tensor_runtime::jit(f.into_func()))
}

/// `jvp!`: `(f(primals), J · tangents)`, each typed like `f`'s results.
#[track_caller]
pub fn jvp<M, F: Signature<M>>(
    f: F,
    primals: Vec<Tensor>,
    tangents: Vec<Tensor>,
) -> (F::Output, F::Output) {
    let (outputs, tangents_out) = transform::jvp(f.into_func(), &primals, &tangents);
    (unflatten(outputs), unflatten(tangents_out))
}

/// The pullback `vjp!` returns: from a cotangent shaped like the results to the cotangents
/// of the primals, typed as `G`.
pub type Pullback<O, G> = Box<dyn Fn(&O) -> G + Send + Sync>;

/// `vjp!`: `f(primals)` typed like `f`'s results, and the pullback.
#[track_caller]
pub fn vjp<M, F: Signature<M>, G: Outputs + 'static>(
    f: F,
    primals: Vec<Tensor>,
) -> (F::Output, Pullback<F::Output, G>)
where
    F::Output: 'static,
{
    let (outputs, pullback) = transform::vjp(f.into_func(), &primals);
    let typed = Box::new(move |cotangent: &F::Output| {
        let mut flat = Vec::with_capacity(<F::Output as Outputs>::COUNT);
        cotangent.flatten_ref_into(&mut flat);
        unflatten(pullback.call(&flat))
    });
    (unflatten(outputs), typed)
}
