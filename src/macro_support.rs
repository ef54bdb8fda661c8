//! What the proc macros of `tensor-macros` expand to: typed wrappers around the plain
//! transforms, so that `vmap!(f, ...)` is a callable of `f`'s arity and argument types, and
//! the trace cache of `#[function]`. Not a public API: reachable as `tensor::__private`.
//!
//! Arguments and results are trees ([`Tree`]: tensors, tuples, `Vec`s, derived structs, ...).
//! A typed callable flattens its arguments to leaves at its boundary, runs the flat [`Func`]
//! made for that structure of arguments (one per structure, each tracing once per signature as
//! usual), and rebuilds the results with the structure the transform gives them: `f`'s result
//! for `vmap`, the selected arguments for `grad`, and for the Jacobians the type
//! [`HasJacobian`] names (`f`'s result with each tensor replaced by the selected arguments, or a
//! `TreeJacobian` for a derived struct).
//!
//! Typing works through [`Signature`]: every closure or fn of one to eight trees (all by
//! reference or all by value) returning a tree names its arguments, its result type, and the
//! boxed callable of the same arguments returning any other tree. A transform macro's result
//! is such a boxed callable, so transform macros nest.

use std::panic::Location;
use std::sync::{Arc, Mutex};
use tensor_core::Tensor;
use tensor_core::transform::func::transform_error;
use tensor_core::transform::tree::{
    AxisTree, HasJacobian, Tree, TreeDef, tree_leaves, tree_unflatten,
};
use tensor_core::transform::{self, DeferredAxes, Func, InAxes, OutAxes};

pub use tensor_core::transform::function::{CallMode, FunctionCache};

/// A typed function of a tuple of trees.
pub type Body<A, R> = Arc<dyn Fn(A) -> R + Send + Sync>;

/// Results whose structure is known from their type (`#[function]`'s results): a tensor, or
/// tuples of them (nested).
pub trait Outputs: Tree {
    /// The structure of every value of this type.
    fn def() -> TreeDef;
}

impl Outputs for Tensor {
    fn def() -> TreeDef {
        TreeDef::Leaf
    }
}

macro_rules! tuple_outputs {
    ($($t:ident),+) => {
        impl<$($t: Outputs),+> Outputs for ($($t,)+) {
            fn def() -> TreeDef {
                TreeDef::tuple(vec![$($t::def()),+])
            }
        }
    };
}

tuple_outputs!(A);
tuple_outputs!(A, B);
tuple_outputs!(A, B, C);
tuple_outputs!(A, B, C, D);
tuple_outputs!(A, B, C, D, E);
tuple_outputs!(A, B, C, D, E, G);
tuple_outputs!(A, B, C, D, E, G, H);
tuple_outputs!(A, B, C, D, E, G, H, I);

/// `value` as a flat list of tensors (`#[function]`'s results).
pub fn flatten<O: Tree>(value: O) -> Vec<Tensor> {
    tree_leaves(&value)
}

/// The flat list `items` as the result type `O` (`#[function]`'s results).
#[track_caller]
pub fn unflatten<O: Outputs>(items: Vec<Tensor>) -> O {
    tree_unflatten(&O::def(), items)
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

/// `#[function]`'s check that a parameter type is a tree, spanned on the type.
pub fn is_tree<T: Tree>() {}

/// `#[function]`'s call: the arguments (a tuple of trees) flattened to leaves, the body
/// traced once per signature of the leaves and structure of the trees, the results rebuilt.
pub fn call_function<A: Tree, O: Outputs>(
    cache: &FunctionCache,
    args: A,
    body: impl FnOnce(A) -> O,
) -> O {
    unflatten(call_flat(cache, args, body, |_| {}))
}

/// The part of a `#[function]`'s cache key that the leaves' signature does not give: the
/// arguments' structure (empty when every argument is a tensor).
fn structure_key(def: &TreeDef) -> String {
    let all_tensors = def
        .children()
        .iter()
        .all(|(_, c)| matches!(c, TreeDef::Leaf));
    if all_tensors {
        String::new()
    } else {
        format!("{def:?}")
    }
}

/// `body` at `args` through `cache`, as its flat results; `traced` sees the result when the
/// body is traced.
fn call_flat<A: Tree, O: Tree>(
    cache: &FunctionCache,
    args: A,
    body: impl FnOnce(A) -> O,
    traced: impl FnOnce(&O),
) -> Vec<Tensor> {
    let def = args.structure();
    cache.call_structured(&structure_key(&def), &tree_leaves(&args), |params| {
        let owned: Vec<Tensor> = params.to_vec();
        let result = body(A::unflatten(&def, &mut owned.into_iter()));
        traced(&result);
        flatten(result)
    })
}

/// The structures of a `#[function]`'s tree results, one per structure, shapes and dtypes of
/// its arguments, recorded when the body is traced (a later call with a cached trace does not
/// run the body, so it reads the structure here).
pub struct ResultDefs(Mutex<Vec<(String, TreeDef)>>);

impl ResultDefs {
    /// No structures yet.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> ResultDefs {
        ResultDefs(Mutex::new(Vec::new()))
    }

    fn get(&self, key: &str) -> Option<TreeDef> {
        let defs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        defs.iter().find(|(k, _)| k == key).map(|(_, d)| d.clone())
    }

    fn record(&self, key: String, def: TreeDef) {
        let mut defs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !defs.iter().any(|(k, _)| *k == key) {
            defs.push((key, def));
        }
    }
}

/// `#[function]`'s call for a result that is a tree (a derived struct, a `Vec`, ...): as
/// [`call_function`], with the result's structure recorded per signature in `defs`.
pub fn call_function_tree<A: Tree, O: Tree>(
    cache: &FunctionCache,
    defs: &ResultDefs,
    args: A,
    body: impl FnOnce(A) -> O,
) -> O {
    let leaves = tree_leaves(&args);
    let signature: Vec<_> = leaves.iter().map(|l| (l.shape(), l.dtype())).collect();
    let key = format!("{}{signature:?}", structure_key(&args.structure()));
    let results = call_flat(cache, args, body, |out| {
        defs.record(key.clone(), out.structure())
    });
    let def = defs
        .get(&key)
        .expect("a #[function] records its result's structure when it traces a signature");
    tree_unflatten(&def, results)
}

/// A result `(output, aux)` of a function differentiated with `has_aux = true`.
#[diagnostic::on_unimplemented(
    message = "has_aux = true needs a function returning a pair `(output, aux)`, not `{Self}`",
    note = "return the differentiated value first and the auxiliary tree second"
)]
pub trait WithAux: Tree {
    /// What is differentiated.
    type Main: Tree;
    /// What is passed through.
    type Aux: Tree;
}

impl<A: Tree, B: Tree> WithAux for (A, B) {
    type Main = A;
    type Aux = B;
}

/// An argument given to `jvp!`/`vjp!` by value or by reference (`x`, `&x`).
pub fn own<T: Tree, B: std::borrow::Borrow<T>>(value: &B) -> T {
    value.borrow().clone()
}

/// The differentiated half of a `(output, aux)` result type.
pub type MainOf<O> = <O as WithAux>::Main;
/// The passed-through half of a `(output, aux)` result type.
pub type AuxOf<O> = <O as WithAux>::Aux;
/// The Jacobians of results of type `O` with respect to arguments of type `S`.
pub type Jac<O, S> = <O as HasJacobian>::Jacobian<S>;

/// `jacfwd!`/`jacrev!(.., has_aux = true)`'s result: `(jacobian, aux)`.
pub type JacAux<O, S> = (Jac<MainOf<O>, S>, AuxOf<O>);
/// The Hessian blocks of arguments of type `S`.
pub type Hess<S> = Jac<S, S>;
/// `T` with the aux of results of type `O`: `(T, aux)`.
pub type PlusAux<T, O> = (T, AuxOf<O>);
/// `value_and_grad!(.., has_aux = true)`'s first half: `(value, aux)`.
pub type ValueAux<O> = (Tensor, AuxOf<O>);
/// `jvp!(.., has_aux = true)`'s result: `(output, tangent, aux)`.
pub type JvpAux<O> = (MainOf<O>, MainOf<O>, AuxOf<O>);
/// `vjp!(.., has_aux = true)`'s result: `(output, pullback, aux)`.
pub type VjpAux<O, G> = (MainOf<O>, Pullback<MainOf<O>, G>, AuxOf<O>);

/// Marker for functions taking `N` trees by reference.
pub struct ByRef<const N: usize>;
/// Marker for functions taking `N` trees by value.
pub struct ByValue<const N: usize>;

/// A function of trees whose arguments and result type are known to the type system. `M` is
/// a marker (arity, passing mode, argument and result types) that only keeps the impls apart.
pub trait Signature<M>: Sized {
    /// The number of arguments.
    const ARITY: usize;
    /// The arguments as one tuple.
    type Args: Tree;
    /// The cotangents of all arguments: the one argument's type, or the tuple.
    type AllArgs: Tree;
    /// What the function returns.
    type Output: Tree;
    /// A boxed function of the same arguments, taken by reference, returning `Out`.
    type Callable<Out: Tree>;
    /// The function as a function of the argument tuple.
    fn into_body(self) -> Body<Self::Args, Self::Output>;
    /// `body` typed as a callable of this function's arguments returning `Out`.
    fn callable<Out: Tree>(body: Body<Self::Args, Out>) -> Self::Callable<Out>;
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

/// `grad!`-family's check and typing: argument `K` exists (negative `K` counts from the
/// end), and has type `Arg`.
#[diagnostic::on_unimplemented(
    message = "argnums {K} is out of range: the function has no argument {K}",
    label = "`{Self}` has no argument {K}",
    note = "argnums counts arguments from 0 (or from -1 at the end); use an index below the function's arity"
)]
pub trait HasArgument<const K: isize, M> {
    /// The type of argument `K`.
    type Arg: Tree;
}

/// `HasArgument` for each index of one arity, positive and negative.
macro_rules! has_argument_impls {
    ($n:literal; [$($all:ident),+]) => {};
    ($n:literal; [$($all:ident),+] $idx:tt $neg:literal $t:ident $(, $ri:tt $rn:literal $rt:ident)*) => {
        impl<F, R, $($all: Tree),+> HasArgument<$idx, (ByRef<$n>, ($($all,)+), R)> for F where F: Fn($(&$all),+) -> R { type Arg = $t; }
        impl<F, R, $($all: Tree),+> HasArgument<$idx, (ByValue<$n>, ($($all,)+), R)> for F where F: Fn($($all),+) -> R { type Arg = $t; }
        impl<F, R, $($all: Tree),+> HasArgument<{ $neg }, (ByRef<$n>, ($($all,)+), R)> for F where F: Fn($(&$all),+) -> R { type Arg = $t; }
        impl<F, R, $($all: Tree),+> HasArgument<{ $neg }, (ByValue<$n>, ($($all,)+), R)> for F where F: Fn($($all),+) -> R { type Arg = $t; }
        has_argument_impls!($n; [$($all),+] $($ri $rn $rt),*);
    };
}

macro_rules! signature {
    ($n:literal; $all:ty; $($idx:tt $neg:literal $a:ident $t:ident),+) => {
        impl<F, R, $($t: Tree),+> Signature<(ByRef<$n>, ($($t,)+), R)> for F
        where
            F: Fn($(&$t),+) -> R + Send + Sync + 'static,
            R: Tree,
        {
            const ARITY: usize = $n;
            type Args = ($($t,)+);
            type AllArgs = $all;
            type Output = R;
            type Callable<Out: Tree> = Box<dyn Fn($(&$t),+) -> Out + Send + Sync>;
            fn into_body(self) -> Body<Self::Args, R> {
                Arc::new(move |args: ($($t,)+)| self($(&args.$idx),+))
            }
            fn callable<Out: Tree>(body: Body<Self::Args, Out>) -> Self::Callable<Out> {
                Box::new(move |$($a: &$t),+| body(($($a.clone(),)+)))
            }
        }
        impl<F, R, $($t: Tree),+> Signature<(ByValue<$n>, ($($t,)+), R)> for F
        where
            F: Fn($($t),+) -> R + Send + Sync + 'static,
            R: Tree,
        {
            const ARITY: usize = $n;
            type Args = ($($t,)+);
            type AllArgs = $all;
            type Output = R;
            type Callable<Out: Tree> = Box<dyn Fn($(&$t),+) -> Out + Send + Sync>;
            fn into_body(self) -> Body<Self::Args, R> {
                Arc::new(move |args: ($($t,)+)| { let ($($a,)+) = args; self($($a),+) })
            }
            fn callable<Out: Tree>(body: Body<Self::Args, Out>) -> Self::Callable<Out> {
                Box::new(move |$($a: &$t),+| body(($($a.clone(),)+)))
            }
        }
        impl<F, R, $($t: Tree),+> InAxesFit<$n, (ByRef<$n>, ($($t,)+), R)> for F where F: Fn($(&$t),+) -> R {}
        impl<F, R, $($t: Tree),+> InAxesFit<$n, (ByValue<$n>, ($($t,)+), R)> for F where F: Fn($($t),+) -> R {}
        impl<F, R, $($t: Tree),+> PrimalsFit<$n, (ByRef<$n>, ($($t,)+), R)> for F where F: Fn($(&$t),+) -> R {}
        impl<F, R, $($t: Tree),+> PrimalsFit<$n, (ByValue<$n>, ($($t,)+), R)> for F where F: Fn($($t),+) -> R {}
        has_argument_impls!($n; [$($t),+] $($idx $neg $t),+);
    };
}

signature!(1; A; 0 -1 a A);
signature!(2; (A, B); 0 -2 a A, 1 -1 b B);
signature!(3; (A, B, C); 0 -3 a A, 1 -2 b B, 2 -1 c C);
signature!(4; (A, B, C, D); 0 -4 a A, 1 -3 b B, 2 -2 c C, 3 -1 d D);
signature!(5; (A, B, C, D, E); 0 -5 a A, 1 -4 b B, 2 -3 c C, 3 -2 d D, 4 -1 e E);
signature!(6; (A, B, C, D, E, G); 0 -6 a A, 1 -5 b B, 2 -4 c C, 3 -3 d D, 4 -2 e E, 5 -1 g G);
signature!(7; (A, B, C, D, E, G, H); 0 -7 a A, 1 -6 b B, 2 -5 c C, 3 -4 d D, 4 -3 e E, 5 -2 g G, 6 -1 h H);
signature!(8; (A, B, C, D, E, G, H, I); 0 -8 a A, 1 -7 b B, 2 -6 c C, 3 -5 d D, 4 -4 e E, 5 -3 g G, 6 -2 h H, 7 -1 i I);

/// Compile-time check that `f` takes `N` arguments (vmap!'s in_axes).
pub fn in_axes_fit<const N: usize, M, F: InAxesFit<N, M>>(_: &F) {}

/// Compile-time check that `f` takes `N` arguments (jvp!/vjp!'s primals).
pub fn primals_fit<const N: usize, M, F: PrimalsFit<N, M>>(_: &F) {}

/// Compile-time check that `f` has argument `K` (argnums).
pub fn has_argument<const K: isize, M, F: HasArgument<K, M>>(_: &F) {}

/// The argnums of a derivative macro as a type, so that its result type is the selected
/// arguments' types: `Nums1<0>` gives argument 0's type, `Nums2<0, -1>` a pair.
pub trait Selection<F, M> {
    /// The selected arguments' types: one type, or a tuple for several argnums.
    type Out: Tree;
    /// The argnums.
    fn argnums(&self) -> Vec<isize>;
    /// Whether the argnums were a tuple (the result is then a tuple even for one).
    fn tuple(&self) -> bool;
}

/// argnums given as one index, public as `tensor::typed::Argnum`: `Argnum::<0>` selects the
/// first argument, `Argnum::<-1>` the last. A tuple of them selects several, and the result is
/// then a tuple (also for a tuple of one).
pub struct Nums<const K: isize>;

impl<F: HasArgument<K, M>, M, const K: isize> Selection<F, M> for Nums<K> {
    type Out = <F as HasArgument<K, M>>::Arg;
    fn argnums(&self) -> Vec<isize> {
        vec![K]
    }
    fn tuple(&self) -> bool {
        false
    }
}

macro_rules! selection {
    ($($k:ident),+) => {
        impl<F, M, $(const $k: isize),+> Selection<F, M> for ($(Nums<$k>,)+)
        where
            $(F: HasArgument<$k, M>),+
        {
            type Out = ($(<F as HasArgument<$k, M>>::Arg,)+);
            fn argnums(&self) -> Vec<isize> {
                vec![$($k),+]
            }
            fn tuple(&self) -> bool {
                true
            }
        }
    };
}

selection!(K0);
selection!(K0, K1);
selection!(K0, K1, K2);
selection!(K0, K1, K2, K3);
selection!(K0, K1, K2, K3, K4);
selection!(K0, K1, K2, K3, K4, K5);
selection!(K0, K1, K2, K3, K4, K5, K6);
selection!(K0, K1, K2, K3, K4, K5, K6, K7);

// ---------------------------------------------------------------------------------------------
// The boundary between trees and flat functions.

/// The structure of `f`'s result, recorded when the flat function runs.
type OutCell = Arc<Mutex<Option<TreeDef>>>;

fn recorded(out: &OutCell) -> TreeDef {
    out.lock()
        .unwrap()
        .clone()
        .expect("the transform ran the function, so its result structure is known")
}

/// `body` as a flat function of the leaves of arguments of structure `def`.
fn flat<A: Tree, R: Tree>(body: Body<A, R>, def: TreeDef, out: OutCell) -> Func {
    Func::new(Some(def.num_leaves()), move |leaves: &[Tensor]| {
        let owned: Vec<Tensor> = leaves.to_vec();
        let args = A::unflatten(&def, &mut owned.into_iter());
        let result = body(args);
        *out.lock().unwrap() = Some(result.structure());
        tree_leaves(&result)
    })
}

/// Builds the transformed flat function for one structure of the arguments.
type Make = dyn Fn(Func, &TreeDef, &OutCell) -> Func + Send + Sync;
/// The structure of the transformed results, from the arguments' and `f`'s result's.
type ResultDef = dyn Fn(&TreeDef, &TreeDef) -> TreeDef + Send + Sync;

/// `body` transformed by `make` at the level of leaves, as a typed function again: one flat
/// function per structure of the arguments, kept for later calls.
///
/// Errors of a call report `site`, the line the macro was written on.
fn lowered<A: Tree, R: Tree, Out: Tree>(
    body: Body<A, R>,
    make: Arc<Make>,
    result: Arc<ResultDef>,
    site: &'static Location<'static>,
) -> Body<A, Out> {
    type Entries = Vec<(TreeDef, Func, OutCell)>;
    let entries: Arc<Mutex<Entries>> = Arc::default();
    Arc::new(move |args: A| {
        let def = args.structure();
        let found = entries
            .lock()
            .unwrap()
            .iter()
            .find(|(d, _, _)| *d == def)
            .map(|(_, f, o)| (f.clone(), o.clone()));
        let (func, out) = found.unwrap_or_else(|| {
            let out: OutCell = Arc::default();
            let func = make(flat(body.clone(), def.clone(), out.clone()), &def, &out);
            let entry = (def.clone(), func.clone(), out.clone());
            entries.lock().unwrap().push(entry);
            (func, out)
        });
        let results = func.call_at(&tree_leaves(&args), site);
        tree_unflatten(&result(&def, &recorded(&out)), results)
    })
}

/// The leaf indices of the arguments `argnums` (resolved) of the argument tuple `def`.
fn leaf_argnums(def: &TreeDef, argnums: &[usize]) -> Vec<usize> {
    let mut starts = vec![0];
    for (_, child) in def.children() {
        starts.push(starts.last().unwrap() + child.num_leaves());
    }
    argnums
        .iter()
        .flat_map(|&i| starts[i]..starts[i + 1])
        .collect()
}

/// The structure of the selected arguments: one argument's, or a tuple of them.
fn selected_def(def: &TreeDef, argnums: &[usize], tuple: bool) -> TreeDef {
    let picked: Vec<TreeDef> = argnums
        .iter()
        .map(|&i| def.children()[i].1.clone())
        .collect();
    if tuple {
        TreeDef::tuple(picked)
    } else {
        picked.into_iter().next().expect("one argnum")
    }
}

/// The two halves of the structure of a `(output, aux)` result.
fn aux_halves(out: &TreeDef) -> (TreeDef, TreeDef) {
    match out.children() {
        [(_, main), (_, aux)] => (main.clone(), aux.clone()),
        _ => transform_error(&format!(
            "has_aux: the function must return a pair (output, aux), but it returned a {}",
            out.describe()
        )),
    }
}

/// `transform` applied to the output half of `flat` (whose results are `(output, aux)`),
/// with the aux half at the same arguments inserted after the first `at` results (all of
/// them for `None`), as JAX's `has_aux`.
fn with_aux(
    flat: Func,
    out: &OutCell,
    at: Option<usize>,
    transform: impl FnOnce(Func) -> Func,
) -> Func {
    let n_main = {
        let out = out.clone();
        move || aux_halves(&recorded(&out)).0.num_leaves()
    };
    let main = {
        let (flat, n_main) = (flat.clone(), n_main.clone());
        Func::new(flat.arity(), move |args: &[Tensor]| {
            let mut all = flat.call(args);
            all.truncate(n_main());
            all
        })
    };
    let transformed = transform(main);
    Func::new(flat.arity(), move |args: &[Tensor]| {
        let mut results = transformed.call(args);
        let aux = flat.call(args).split_off(n_main());
        let at = at.unwrap_or(results.len());
        results.splice(at..at, aux);
        results
    })
}

/// Panics, naming the argument and the path of the leaf, when a differentiated leaf is not
/// a float tensor.
fn check_float_leaves(def: &TreeDef, argnums: &[usize], leaves: &[Tensor], name: &str) {
    let paths: Vec<String> = def
        .children()
        .iter()
        .enumerate()
        .flat_map(|(i, (_, c))| c.leaf_paths(&format!("argument {i}")))
        .collect();
    for &k in &leaf_argnums(def, argnums) {
        if !leaves[k].dtype().is_float() {
            transform_error(&format!(
                "{name}: {} is {}{:?}, but gradients are taken with respect to float tensors \
                 only; pass allow_int = true for a zero gradient, or leave it out of argnums",
                paths[k],
                leaves[k].dtype(),
                leaves[k].shape()
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The typed transforms.

/// The in axes of each leaf of the argument tuple `def`: a single axis for all, or one
/// prefix tree per argument.
fn leaf_in_axes(axes: &AxisTree, def: &TreeDef) -> Vec<Option<isize>> {
    match axes {
        AxisTree::Each(per_arg) if per_arg.len() == def.children().len() => per_arg
            .iter()
            .zip(def.children())
            .enumerate()
            .flat_map(|(i, (a, (_, child)))| a.expand(child, &format!("argument {i}")))
            .collect(),
        AxisTree::Each(per_arg) => transform_error(&format!(
            "vmap: in_axes has {} entries for {} arguments; give one per argument",
            per_arg.len(),
            def.children().len()
        )),
        other => other.expand(def, "arguments"),
    }
}

/// `vmap!`: `f` batched, with `f`'s arguments and result type. `in_axes` is a prefix tree of
/// the argument tuple (or one axis for all), `out_axes` of the result; `chunk_size` maps that
/// many samples at a time.
#[track_caller]
pub fn vmap<M, F: Signature<M>>(
    f: F,
    in_axes: AxisTree,
    out_axes: AxisTree,
    method: transform::VmapMethod,
    chunk_size: Option<usize>,
) -> F::Callable<F::Output> {
    let make = move |flat: Func, def: &TreeDef, out: &OutCell| {
        let in_axes = InAxes::Each(leaf_in_axes(&in_axes, def));
        let out_axes = match &out_axes {
            AxisTree::Axis(axis) => OutAxes::All(*axis),
            tree => {
                let (tree, out) = (tree.clone(), out.clone());
                OutAxes::Deferred(DeferredAxes(Arc::new(move |_| {
                    tree.expand(&recorded(&out), "result")
                })))
            }
        };
        match chunk_size {
            None => transform::vmap_with(flat, in_axes, out_axes, method),
            Some(chunk) => transform::vmap_chunked(flat, in_axes, out_axes, method, chunk),
        }
    };
    let result = |_: &TreeDef, out: &TreeDef| out.clone();
    F::callable(lowered(
        f.into_body(),
        Arc::new(make),
        Arc::new(result),
        Location::caller(),
    ))
}

/// The options of the grad family.
#[derive(Clone, Copy, Default)]
pub struct Options {
    /// `f` returns `(output, aux)`; aux is passed through.
    pub has_aux: bool,
    /// Integer and bool arguments get a zero gradient instead of an error.
    pub allow_int: bool,
    /// `jacfwd`/`jacrev`: how many basis vectors are pushed through at a time (`None`: all).
    pub chunk_size: Option<usize>,
}

/// Which derivative the grad family takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Grad,
    ValueAndGrad,
    Jacfwd,
    Jacrev,
    Hessian,
}

/// The structure of a Jacobian from its output's and argument's structures
/// ([`HasJacobian::jacobian_def`] of the output type).
type JacDef = fn(&TreeDef, &TreeDef) -> TreeDef;

/// The typed derivative of kind `kind` with respect to `sel`, with `options`; `jac_def`
/// shapes the Jacobians (of `f`'s result, or of the selected arguments for the Hessian).
#[track_caller]
fn derivative<M, F: Signature<M>, S: Selection<F, M>, Out: Tree>(
    f: F,
    sel: S,
    options: Options,
    kind: Kind,
    jac_def: JacDef,
) -> F::Callable<Out> {
    let (nums, tuple, arity) = (sel.argnums(), sel.tuple(), F::ARITY);
    let argnums = transform::ArgNums(nums).resolve(arity);
    let name = match kind {
        Kind::Grad => "grad",
        Kind::ValueAndGrad => "value_and_grad",
        Kind::Jacfwd => "jacfwd",
        Kind::Jacrev => "jacrev",
        Kind::Hessian => "hessian",
    };
    let make = {
        let argnums = argnums.clone();
        move |flat: Func, def: &TreeDef, out: &OutCell| {
            let leaves = leaf_argnums(def, &argnums);
            let transform = move |main: Func| match kind {
                Kind::Grad => transform::grad_with(main, leaves, options.allow_int),
                Kind::ValueAndGrad => {
                    transform::value_and_grad_with(main, leaves, options.allow_int)
                }
                Kind::Jacfwd => match options.chunk_size {
                    None => transform::jacfwd(main, leaves),
                    Some(chunk) => transform::jacfwd_chunked(main, leaves, chunk),
                },
                Kind::Jacrev => match options.chunk_size {
                    None => transform::jacrev(main, leaves),
                    Some(chunk) => transform::jacrev_chunked(main, leaves, chunk),
                },
                Kind::Hessian => transform::hessian(main, leaves),
            };
            let func = if options.has_aux {
                let at = (kind == Kind::ValueAndGrad).then_some(1);
                with_aux(flat, out, at, transform)
            } else {
                transform(flat)
            };
            if options.allow_int || !matches!(kind, Kind::Grad | Kind::ValueAndGrad) {
                return func;
            }
            let (def, argnums) = (def.clone(), argnums.clone());
            Func::new(func.arity(), move |args: &[Tensor]| {
                check_float_leaves(&def, &argnums, args, name);
                func.call(args)
            })
        }
    };
    let result = move |def: &TreeDef, out: &TreeDef| {
        let sel = selected_def(def, &argnums, tuple);
        let (main, aux) = if options.has_aux {
            let (m, a) = aux_halves(out);
            (m, Some(a))
        } else {
            (out.clone(), None)
        };
        let transformed = match kind {
            Kind::Grad => sel,
            Kind::ValueAndGrad => TreeDef::tuple(vec![TreeDef::Leaf, sel]),
            Kind::Jacfwd | Kind::Jacrev => jac_def(&main, &sel),
            Kind::Hessian => jac_def(&sel, &sel),
        };
        match (aux, kind) {
            (None, _) => transformed,
            (Some(aux), Kind::ValueAndGrad) => TreeDef::tuple(vec![
                TreeDef::tuple(vec![TreeDef::Leaf, aux]),
                transformed.children()[1].1.clone(),
            ]),
            (Some(aux), _) => TreeDef::tuple(vec![transformed, aux]),
        }
    };
    F::callable(lowered(
        f.into_body(),
        Arc::new(make),
        Arc::new(result),
        Location::caller(),
    ))
}

/// The grad family has no Jacobian to shape.
fn unused_jac_def(_: &TreeDef, wrt: &TreeDef) -> TreeDef {
    wrt.clone()
}

/// `grad!`: the gradients with respect to `sel`, shaped like those arguments.
#[track_caller]
pub fn grad<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    sel: S,
    options: Options,
) -> F::Callable<S::Out> {
    derivative(f, sel, options, Kind::Grad, unused_jac_def)
}

/// `grad!(.., has_aux = true)`: `(gradients, aux)`.
#[track_caller]
pub fn grad_aux<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    sel: S,
    options: Options,
) -> F::Callable<(S::Out, AuxOf<F::Output>)>
where
    F::Output: WithAux,
{
    derivative(f, sel, options, Kind::Grad, unused_jac_def)
}

/// `value_and_grad!`: `(value, gradients)`.
#[track_caller]
pub fn value_and_grad<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    sel: S,
    options: Options,
) -> F::Callable<(Tensor, S::Out)> {
    derivative(f, sel, options, Kind::ValueAndGrad, unused_jac_def)
}

/// `value_and_grad!(.., has_aux = true)`: `((value, aux), gradients)`.
#[track_caller]
pub fn value_and_grad_aux<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    sel: S,
    options: Options,
) -> F::Callable<(ValueAux<F::Output>, S::Out)>
where
    F::Output: WithAux,
{
    derivative(f, sel, options, Kind::ValueAndGrad, unused_jac_def)
}

macro_rules! jacobian {
    ($name:ident, $aux:ident, $kind:expr, $doc:literal) => {
        #[doc = $doc]
        #[track_caller]
        pub fn $name<M, F: Signature<M>, S: Selection<F, M>>(
            f: F,
            sel: S,
            options: Options,
        ) -> F::Callable<Jac<F::Output, S::Out>>
        where
            F::Output: HasJacobian,
        {
            derivative(f, sel, options, $kind, F::Output::jacobian_def)
        }
        #[doc = concat!($doc, " With `has_aux = true`: `(jacobians, aux)`.")]
        #[track_caller]
        pub fn $aux<M, F: Signature<M>, S: Selection<F, M>>(
            f: F,
            sel: S,
            options: Options,
        ) -> F::Callable<(Jac<MainOf<F::Output>, S::Out>, AuxOf<F::Output>)>
        where
            F::Output: WithAux,
            MainOf<F::Output>: HasJacobian,
        {
            derivative(f, sel, options, $kind, MainOf::<F::Output>::jacobian_def)
        }
    };
}

jacobian!(
    jacfwd,
    jacfwd_aux,
    Kind::Jacfwd,
    "`jacfwd!`: for each tensor of `f`'s result, the Jacobians with respect to `sel`."
);
jacobian!(
    jacrev,
    jacrev_aux,
    Kind::Jacrev,
    "`jacrev!`: for each tensor of `f`'s result, the Jacobians with respect to `sel`."
);

/// `hessian!`: the blocks `∂²f / ∂x_i ∂x_j` for the selected arguments, nested like them.
#[track_caller]
pub fn hessian<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    sel: S,
    options: Options,
) -> F::Callable<Hess<S::Out>>
where
    S::Out: HasJacobian,
{
    derivative(f, sel, options, Kind::Hessian, S::Out::jacobian_def)
}

/// `hessian!(.., has_aux = true)`: `(hessian, aux)`.
#[track_caller]
pub fn hessian_aux<M, F: Signature<M>, S: Selection<F, M>>(
    f: F,
    sel: S,
    options: Options,
) -> F::Callable<PlusAux<Hess<S::Out>, F::Output>>
where
    S::Out: HasJacobian,
    F::Output: WithAux,
{
    derivative(f, sel, options, Kind::Hessian, S::Out::jacobian_def)
}

/// `jit!`: `f` compiled once per input signature and replayed, typed like `f`.
#[track_caller]
pub fn jit<M, F: Signature<M>>(f: F) -> F::Callable<F::Output> {
    let make = |flat: Func, _: &TreeDef, _: &OutCell| tensor_runtime::jit(flat);
    let result = |_: &TreeDef, out: &TreeDef| out.clone();
    F::callable(lowered(
        f.into_body(),
        Arc::new(make),
        Arc::new(result),
        Location::caller(),
    ))
}

/// Panics, naming the path, when the tangents' (or cotangents') structure is not the
/// primals'.
#[track_caller]
fn check_same(what: &str, expected: &TreeDef, given: &TreeDef) {
    if let Some(why) = expected.mismatch(given, what) {
        transform_error(&format!(
            "{what}: the structure differs from the primals' {why}"
        ));
    }
}

/// `f`'s arguments as a flat function, with the structure of its result recorded.
fn flat_of<M, F: Signature<M>>(f: F, primals: &F::Args) -> (Func, OutCell, Vec<Tensor>) {
    let out: OutCell = Arc::default();
    let func = flat(f.into_body(), primals.structure(), out.clone());
    (func, out, tree_leaves(primals))
}

/// `jvp!`: `(f(primals), J · tangents)`, each typed like `f`'s results.
#[track_caller]
pub fn jvp<M, F: Signature<M>>(
    f: F,
    primals: F::Args,
    tangents: F::Args,
) -> (F::Output, F::Output) {
    check_same("tangents", &primals.structure(), &tangents.structure());
    let (func, out, leaves) = flat_of(f, &primals);
    let (values, tangents_out) = transform::jvp(func, &leaves, &tree_leaves(&tangents));
    let def = recorded(&out);
    (
        tree_unflatten(&def, values),
        tree_unflatten(&def, tangents_out),
    )
}

/// `jvp!(.., has_aux = true)`: `(output, J · tangents, aux)`.
#[track_caller]
pub fn jvp_aux<M, F: Signature<M>>(f: F, primals: F::Args, tangents: F::Args) -> JvpAux<F::Output>
where
    F::Output: WithAux,
{
    check_same("tangents", &primals.structure(), &tangents.structure());
    let (func, out, leaves) = flat_of(f, &primals);
    let all = func.call(&leaves);
    let (main_def, aux_def) = aux_halves(&recorded(&out));
    let n = main_def.num_leaves();
    let main = Func::new(func.arity(), move |args: &[Tensor]| {
        let mut r = func.call(args);
        r.truncate(n);
        r
    });
    let (values, tangents_out) = transform::jvp(main, &leaves, &tree_leaves(&tangents));
    (
        tree_unflatten(&main_def, values),
        tree_unflatten(&main_def, tangents_out),
        tree_unflatten(&aux_def, all[n..].to_vec()),
    )
}

/// The pullback `vjp!` returns: from a cotangent shaped like the results to the cotangents
/// of the primals (the one primal's type, or a tuple of them).
pub type Pullback<O, G> = Box<dyn Fn(&O) -> G + Send + Sync>;

/// The pullback of `flat` at `leaves` for results of structure `out_def`, typed.
fn typed_pullback<O: Tree, G: Tree>(
    func: Func,
    leaves: &[Tensor],
    out_def: TreeDef,
    grads_def: TreeDef,
) -> (Vec<Tensor>, Pullback<O, G>) {
    let (values, pullback) = transform::vjp(func, leaves);
    let typed = Box::new(move |cotangent: &O| {
        check_same("cotangent", &out_def, &cotangent.structure());
        tree_unflatten(&grads_def, pullback.call(&tree_leaves(cotangent)))
    });
    (values, typed)
}

/// The structure of the cotangents of all arguments: the one argument's, or the tuple.
fn all_args_def(def: &TreeDef, arity: usize) -> TreeDef {
    if arity == 1 {
        def.children()[0].1.clone()
    } else {
        def.clone()
    }
}

/// `vjp!`: `f(primals)` typed like `f`'s results, and the pullback.
#[track_caller]
pub fn vjp<M, F: Signature<M>>(
    f: F,
    primals: F::Args,
) -> (F::Output, Pullback<F::Output, F::AllArgs>) {
    let grads_def = all_args_def(&primals.structure(), F::ARITY);
    let (func, out, leaves) = flat_of(f, &primals);
    let _ = func.call(&leaves);
    let out_def = recorded(&out);
    let (values, pullback) = typed_pullback(func, &leaves, out_def.clone(), grads_def);
    (tree_unflatten(&out_def, values), pullback)
}

/// `vjp!(.., has_aux = true)`: `(output, pullback, aux)`.
#[track_caller]
pub fn vjp_aux<M, F: Signature<M>>(f: F, primals: F::Args) -> VjpAux<F::Output, F::AllArgs>
where
    F::Output: WithAux,
{
    let grads_def = all_args_def(&primals.structure(), F::ARITY);
    let (func, out, leaves) = flat_of(f, &primals);
    let all = func.call(&leaves);
    let (main_def, aux_def) = aux_halves(&recorded(&out));
    let n = main_def.num_leaves();
    let main = Func::new(func.arity(), move |args: &[Tensor]| {
        let mut r = func.call(args);
        r.truncate(n);
        r
    });
    let (values, pullback) = typed_pullback(main, &leaves, main_def.clone(), grads_def);
    (
        tree_unflatten(&main_def, values),
        pullback,
        tree_unflatten(&aux_def, all[n..].to_vec()),
    )
}
