//! `Func`: a function of tensors that transforms take and return, so that they compose.
//!
//! Rust closures of different arities have different types; every transform first turns its
//! argument into a `Func` (a function from a slice of tensors to a list of tensors) through
//! [`IntoFunc`], and returns a `Func` again, so `vmap(grad(loss, 0), ...)` is a `Func` too.

use crate::tensor::Tensor;
use std::cell::RefCell;
use std::panic::Location;
use std::sync::Arc;

type Body = dyn Fn(&[Tensor]) -> Vec<Tensor> + Send + Sync;

/// A function from tensors to tensors: what every transform consumes and produces.
#[derive(Clone)]
pub struct Func {
    body: Arc<Body>,
    arity: Option<usize>,
}

impl Func {
    /// A function from its body. `arity` is the number of arguments it takes, if fixed.
    pub fn new(
        arity: Option<usize>,
        body: impl Fn(&[Tensor]) -> Vec<Tensor> + Send + Sync + 'static,
    ) -> Func {
        Func {
            body: Arc::new(body),
            arity,
        }
    }

    /// The number of arguments, when the function was made from a closure of fixed arity.
    pub fn arity(&self) -> Option<usize> {
        self.arity
    }

    /// Calls the function. Errors raised by transforms inside report this call's line.
    #[track_caller]
    pub fn call(&self, args: &[Tensor]) -> Vec<Tensor> {
        self.call_at(args, Location::caller())
    }

    /// Calls the function; errors raised by transforms inside report `site` as the user's
    /// line (how a callable made by a macro reports the line the macro was written on, since
    /// a call through `Fn` cannot track its caller).
    pub fn call_at(&self, args: &[Tensor], site: &'static Location<'static>) -> Vec<Tensor> {
        if let Some(n) = self.arity
            && n != args.len()
        {
            panic!(
                "function takes {n} argument{} but was called with {} (called at {})",
                if n == 1 { "" } else { "s" },
                args.len(),
                site
            );
        }
        let _site = CallSite::enter(site);
        let results = (self.body)(args);
        Tensor::group_siblings(&results);
        results
    }

    /// Calls a function of one result and returns it.
    #[track_caller]
    pub fn call1(&self, args: &[Tensor]) -> Tensor {
        let mut out = self.call(args);
        if out.len() != 1 {
            transform_error(&format!(
                "call1: the function returned {} results, expected exactly one",
                out.len()
            ));
        }
        out.remove(0)
    }
}

impl std::fmt::Debug for Func {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.arity {
            Some(n) => write!(f, "Func(arity {n})"),
            None => write!(f, "Func"),
        }
    }
}

thread_local! {
    static CALL_SITES: RefCell<Vec<&'static Location<'static>>> = const { RefCell::new(Vec::new()) };
}

/// Marks the user's call site while a `Func` runs, so transform errors can name it.
struct CallSite;

impl CallSite {
    fn enter(site: &'static Location<'static>) -> CallSite {
        CALL_SITES.with(|s| s.borrow_mut().push(site));
        CallSite
    }
}

impl Drop for CallSite {
    fn drop(&mut self) {
        CALL_SITES.with(|s| s.borrow_mut().pop());
    }
}

/// The outermost user call of a transformed function on this thread, if any.
pub fn user_call_site() -> Option<&'static Location<'static>> {
    CALL_SITES.with(|s| s.borrow().first().copied())
}

/// Panics with a transform error that names the user's call site (like JAX's TypeErrors):
/// the outermost `Func::call`, or, for a transform called directly (`jvp`, `vjp`), the
/// `#[track_caller]` location.
#[track_caller]
pub fn transform_error(message: &str) -> ! {
    let site = user_call_site().unwrap_or(Location::caller());
    panic!("{message}\n  (called at {site})")
}

/// Values a traced function may return: one tensor, a tuple of tensors, or a `Vec`.
pub trait IntoOutputs {
    /// The results as a list.
    fn into_outputs(self) -> Vec<Tensor>;
}

impl IntoOutputs for Tensor {
    fn into_outputs(self) -> Vec<Tensor> {
        vec![self]
    }
}

impl IntoOutputs for Vec<Tensor> {
    fn into_outputs(self) -> Vec<Tensor> {
        self
    }
}

macro_rules! tuple_outputs {
    ($($name:ident),+) => {
        impl IntoOutputs for ($(tuple_outputs!(@tensor $name),)+) {
            fn into_outputs(self) -> Vec<Tensor> {
                let ($($name,)+) = self;
                vec![$($name),+]
            }
        }
    };
    (@tensor $name:ident) => { Tensor };
}

tuple_outputs!(a, b);
tuple_outputs!(a, b, c);
tuple_outputs!(a, b, c, d);
tuple_outputs!(a, b, c, d, e);
tuple_outputs!(a, b, c, d, e, f);

/// Anything a transform accepts as a function: a `Func`, or a closure taking tensors (by
/// value or by reference) and returning [`IntoOutputs`]. The marker type parameter only
/// keeps the impls for different arities apart.
pub trait IntoFunc<Marker> {
    /// The function as a `Func`.
    fn into_func(self) -> Func;
}

impl IntoFunc<Func> for Func {
    fn into_func(self) -> Func {
        self
    }
}

impl IntoFunc<&Func> for &Func {
    fn into_func(self) -> Func {
        self.clone()
    }
}

/// Marker for closures taking their tensors by reference.
pub struct ByRef<const N: usize>;
/// Marker for closures taking their tensors by value.
pub struct ByValue<const N: usize>;

macro_rules! closure_into_func {
    ($n:literal; $($idx:tt),+) => {
        impl<F, R> IntoFunc<(ByRef<$n>, R)> for F
        where
            F: Fn($(closure_into_func!(@ref $idx)),+) -> R + Send + Sync + 'static,
            R: IntoOutputs,
        {
            fn into_func(self) -> Func {
                Func::new(Some($n), move |args: &[Tensor]| self($(&args[$idx]),+).into_outputs())
            }
        }
        impl<F, R> IntoFunc<(ByValue<$n>, R)> for F
        where
            F: Fn($(closure_into_func!(@val $idx)),+) -> R + Send + Sync + 'static,
            R: IntoOutputs,
        {
            fn into_func(self) -> Func {
                Func::new(Some($n), move |args: &[Tensor]| self($(args[$idx].clone()),+).into_outputs())
            }
        }
    };
    (@ref $idx:tt) => { &Tensor };
    (@val $idx:tt) => { Tensor };
}

closure_into_func!(1; 0);
closure_into_func!(2; 0, 1);
closure_into_func!(3; 0, 1, 2);
closure_into_func!(4; 0, 1, 2, 3);
closure_into_func!(5; 0, 1, 2, 3, 4);
closure_into_func!(6; 0, 1, 2, 3, 4, 5);
closure_into_func!(7; 0, 1, 2, 3, 4, 5, 6);
closure_into_func!(8; 0, 1, 2, 3, 4, 5, 6, 7);

/// Marker for closures over a slice of tensors (any arity).
pub struct BySlice;

impl<F, R> IntoFunc<(BySlice, R)> for F
where
    F: Fn(&[Tensor]) -> R + Send + Sync + 'static,
    R: IntoOutputs,
{
    fn into_func(self) -> Func {
        Func::new(None, move |args: &[Tensor]| self(args).into_outputs())
    }
}
