//! `#[function]`: capture a Rust fn of tensors as a `Function` node, traced once per signature.
//!
//! ```text
//! #[function]                              fn loss(w: &Params, x: &Tensor) -> Tensor {
//! fn loss(w: &Params, x: &Tensor)     =>       fn body(w: &Params, x: &Tensor) -> Tensor { ... }
//!     -> Tensor { ... }                        __private::call_function(&loss::CACHE,
//!                                                  (w.clone(), x.clone()), |p| body(&p.0, &p.1))
//!                                          }
//!                                          mod loss { ARITY, RESULTS, CACHE, trace_count() }
//! ```
//!
//! A result that is not a tensor or a tuple of them (a derived struct, a `Vec`, ...) goes
//! through `call_function_tree`, which records its structure per signature when the body is
//! traced (the companion has `RESULT_DEFS` instead of `RESULTS`).
//!
//! Each parameter is a tree (a tensor, or any `Tree` type); `call_function` flattens the
//! arguments to leaves, traces once per signature of the leaves and structure of the trees,
//! and rebuilds the arguments for the body.

use crate::suggest::nearest;
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Error, FnArg, GenericParam, ItemFn, ReturnType, Type};

/// The options `#[function(...)]` accepts.
const OPTIONS: &[&str] = &["inline", "precompile"];

/// Expands `#[function(attr)] item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let precompile = parse_options(attr)?;
    let item: ItemFn = syn::parse2(item)?;
    check_signature(&item)?;
    let params = item
        .sig
        .inputs
        .iter()
        .map(param_kind)
        .collect::<syn::Result<Vec<_>>>()?;
    let results = result_count(&item.sig.output, &item.sig)?;
    Ok(generate(&item, &params, results, precompile))
}

/// `true` for `#[function(precompile)]`.
fn parse_options(attr: TokenStream) -> syn::Result<bool> {
    if attr.is_empty() {
        return Ok(false);
    }
    let option: syn::Ident = syn::parse2(attr.clone()).map_err(|_| {
        Error::new_spanned(
            &attr,
            "#[function] takes one option: write `#[function]` (inline at schedule time) or \
             `#[function(precompile)]` (one reusable compiled unit)",
        )
    })?;
    match option.to_string().as_str() {
        "inline" => Ok(false),
        "precompile" => Ok(true),
        other => Err(Error::new_spanned(
            &option,
            match nearest(other, OPTIONS) {
                Some(near) => format!(
                    "unknown #[function] option `{other}`; did you mean `{near}`? \
                     (options: inline, precompile)"
                ),
                None => format!(
                    "unknown #[function] option `{other}`; write `#[function]` or \
                     `#[function(precompile)]`"
                ),
            },
        )),
    }
}

/// Rejects what tracing cannot capture: async, const, unsafe, extern, generics, variadics.
fn check_signature(item: &ItemFn) -> syn::Result<()> {
    let sig = &item.sig;
    if let Some(token) = &sig.asyncness {
        return Err(Error::new_spanned(
            token,
            "#[function] cannot capture an `async fn`: the body is traced once, synchronously, \
             into a graph; remove `async`",
        ));
    }
    if let Some(token) = &sig.constness {
        return Err(Error::new_spanned(
            token,
            "#[function] cannot capture a `const fn`: tracing builds graphs at run time; remove `const`",
        ));
    }
    if let Some(token) = &sig.unsafety {
        return Err(Error::new_spanned(
            token,
            "#[function] cannot capture an `unsafe fn`: remove `unsafe` and keep unsafe blocks inside the body",
        ));
    }
    if let Some(abi) = &sig.abi {
        return Err(Error::new_spanned(
            abi,
            "#[function] cannot capture an `extern` fn: remove the ABI; the function is called from Rust",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(Error::new_spanned(
            variadic,
            "#[function] cannot capture a variadic fn: take one `&Tensor` per input",
        ));
    }
    for param in &sig.generics.params {
        match param {
            GenericParam::Lifetime(_) => {}
            GenericParam::Type(t) => {
                return Err(Error::new_spanned(
                    t,
                    format!(
                        "#[function] cannot trace a generic parameter `{}`: the body is traced once per \
                         signature of its tensors, so the function must be concrete; take `&Tensor` \
                         instead of a generic type",
                        t.ident
                    ),
                ));
            }
            GenericParam::Const(c) => {
                return Err(Error::new_spanned(
                    c,
                    format!(
                        "#[function] cannot trace a const generic parameter `{}`: the traced graph \
                         may depend only on tensors; read sizes from the tensors' shapes instead",
                        c.ident
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// How a parameter takes its tree (a tensor, or any type implementing `Tree`), and its type
/// without the reference.
#[derive(Clone)]
enum Param {
    ByRef(Type),
    ByValue(Type),
    /// A Rust number (`f32`, `i64`, ...): passed as a 0-d tensor bound at run time, so the
    /// body sees an abstract `Tensor` and a new value replays the trace (JAX's weak-typed
    /// scalar arguments of `jit`).
    Scalar,
}

impl Param {
    /// The type the traced body takes.
    fn traced_ty(&self) -> Type {
        match self {
            Param::ByRef(t) | Param::ByValue(t) => t.clone(),
            Param::Scalar => syn::parse_quote!(::tensor::Tensor),
        }
    }
}

/// The Rust numbers a parameter may have to be traced as an abstract 0-d tensor.
const SCALARS: &[&str] = &[
    "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
];

/// True for a bare primitive number type (`f32`, `u64`, ...).
pub(crate) fn is_scalar(ty: &Type) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
            let seg = &p.path.segments[0];
            seg.arguments.is_none() && SCALARS.iter().any(|s| seg.ident == s)
        }
        _ => false,
    }
}

fn param_kind(arg: &FnArg) -> syn::Result<Param> {
    let ty = match arg {
        FnArg::Receiver(receiver) => {
            return Err(Error::new_spanned(
                receiver,
                "#[function] cannot capture a method: `self` is not a tensor; write a free function \
                 taking the tensors it reads, e.g. `fn forward(w: &Tensor, x: &Tensor) -> Tensor`",
            ));
        }
        FnArg::Typed(typed) => &*typed.ty,
    };
    if is_scalar(ty) {
        return Ok(Param::Scalar);
    }
    match ty {
        Type::Reference(r) => match &r.mutability {
            Some(token) => Err(Error::new_spanned(
                token,
                "#[function] parameters are read-only: a traced function cannot mutate its inputs; \
                 take `&Tensor` and return the new value as a result",
            )),
            None => tree_type(&r.elem).map(Param::ByRef),
        },
        ty => tree_type(ty).map(Param::ByValue),
    }
}

/// A parameter's type, which must name a tree: a tensor, or a type implementing `Tree`
/// (checked by the compiler, spanned on the type).
fn tree_type(ty: &Type) -> syn::Result<Type> {
    match ty {
        Type::ImplTrait(_) => Err(Error::new_spanned(
            ty,
            "#[function] cannot trace an `impl Trait` parameter (a hidden generic): take `&Tensor` \
             or a concrete tree type",
        )),
        Type::Path(_) | Type::Tuple(_) | Type::Array(_) | Type::Paren(_) | Type::Group(_) => {
            Ok(ty.clone())
        }
        ty => Err(Error::new_spanned(
            ty,
            "#[function] parameters must be trees of tensors: write `&Tensor`, `Tensor`, or a \
             type implementing `Tree` (`#[derive(Tree)]`); settings that are not tensors belong \
             in a closure around the call, or in the body as constants",
        )),
    }
}

/// True for `Tensor` or a path ending in `Tensor` (`tensor::Tensor`), without generics.
fn is_tensor(ty: &Type) -> bool {
    match ty {
        Type::Paren(p) => is_tensor(&p.elem),
        Type::Group(g) => is_tensor(&g.elem),
        Type::Path(p) if p.qself.is_none() => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Tensor" && s.arguments.is_none()),
        _ => false,
    }
}

/// The number of tensors the function returns: 1 for `Tensor`, n for an n-tuple of them.
/// How many tensors the function returns: `Some(n)` for a tensor or a tuple of them, `None`
/// for any other type (a tree, such as a derived struct or a `Vec`, whose count depends on
/// the call; the compiler checks that it is a tree).
fn result_count(output: &ReturnType, sig: &syn::Signature) -> syn::Result<Option<usize>> {
    match output {
        ReturnType::Default => Err(Error::new(
            sig.paren_token.span.join(),
            "#[function] must return a tree of tensors (a `Tensor`, a tuple of them, a \
             `#[derive(Tree)]` struct, ...): add `-> Tensor` after the parameters",
        )),
        ReturnType::Type(_, ty) if is_tensor(ty) => Ok(Some(1)),
        ReturnType::Type(_, ty) => match &**ty {
            Type::Tuple(t) if !t.elems.is_empty() && t.elems.iter().all(is_tensor) => {
                Ok(Some(t.elems.len()))
            }
            _ => Ok(None),
        },
    }
}

fn generate(
    item: &ItemFn,
    params: &[Param],
    results: Option<usize>,
    precompile: bool,
) -> TokenStream {
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = item;
    let name = &sig.ident;
    let body_fn = format_ident!("__tensor_function_body");
    let mut inner_sig = sig.clone();
    inner_sig.ident = body_fn.clone();
    for (input, param) in inner_sig.inputs.iter_mut().zip(params) {
        if let (FnArg::Typed(typed), Param::Scalar) = (input, param) {
            *typed.ty = param.traced_ty();
        }
    }
    let lint_attrs = attrs.iter().filter(|a| {
        ["allow", "expect", "warn", "deny"]
            .iter()
            .any(|l| a.path().is_ident(l))
    });
    let arg_names: Vec<syn::Ident> = (0..params.len())
        .map(|i| syn::Ident::new(&format!("__tensor_arg{i}"), Span::mixed_site()))
        .collect();
    let mut outer_sig = sig.clone();
    for (input, arg_name) in outer_sig.inputs.iter_mut().zip(&arg_names) {
        if let FnArg::Typed(typed) = input {
            *typed.pat = syn::parse_quote!(#arg_name);
        }
    }
    let traced_args = params.iter().enumerate().map(|(i, p)| {
        let i = syn::Index::from(i);
        match p {
            Param::ByRef(_) => quote!(&__tensor_params.#i),
            Param::ByValue(_) | Param::Scalar => quote!(__tensor_params.#i),
        }
    });
    let owned_args = params.iter().zip(&arg_names).map(|(p, a)| match p {
        Param::ByRef(_) => quote!(::core::clone::Clone::clone(#a)),
        Param::ByValue(_) => quote!(#a),
        // A buffer whatever the number (even an identity such as 0 or 1): the trace must not
        // depend on it.
        Param::Scalar => quote!(::tensor::Tensor::from_vec(::std::vec![#a], &[])),
    });
    let types: Vec<Type> = params.iter().map(Param::traced_ty).collect();
    let tree_checks = types
        .iter()
        .map(|ty| quote_spanned!(ty.span()=> ::tensor::__private::is_tree::<#ty>();));
    let arity = params.len();
    let schedule = if precompile {
        quote!(::tensor::__private::CallMode::Precompile)
    } else {
        quote!(::tensor::__private::CallMode::Inline)
    };
    // A tensor or a tuple of them has a structure known from its type; any other result is a
    // tree whose structure is recorded per signature when the body is traced.
    let (call, result_check, results_item) = match results {
        // `call` is the callee's name and its first arguments.
        Some(n) => (
            (
                quote!(::tensor::__private::call_function),
                vec![quote!(&#name::CACHE)],
            ),
            quote!(),
            quote! {
                /// The number of tensor results.
                pub const RESULTS: usize = #n;
            },
        ),
        None => {
            let ReturnType::Type(_, ret) = &sig.output else {
                unreachable!("result_count rejects a missing return type")
            };
            (
                (
                    quote!(::tensor::__private::call_function_tree),
                    vec![quote!(&#name::CACHE), quote!(&#name::RESULT_DEFS)],
                ),
                quote_spanned!(ret.span()=> ::tensor::__private::is_tree::<#ret>();),
                quote! {
                    /// The structure of the (tree) result, per signature of the arguments.
                    pub static RESULT_DEFS: ::tensor::__private::ResultDefs =
                        ::tensor::__private::ResultDefs::new();
                },
            )
        }
    };
    let (call_fn, call_args) = call;
    let name_str = name.to_string();
    let companion_doc = format!(
        "Companion of the captured function `{name_str}()`: its trace cache and signature."
    );
    quote! {
        #(#attrs)*
        #vis #outer_sig {
            #(#lint_attrs)*
            #inner_sig #block
            #(#tree_checks)*
            #result_check
            #call_fn(
                #(#call_args,)*
                (#(#owned_args,)*),
                |__tensor_params: (#(#types,)*)| #body_fn(#(#traced_args),*),
            )
        }

        #[doc = #companion_doc]
        #[allow(dead_code)]
        #vis mod #name {
            /// The number of arguments (each a tensor or a tree of them).
            pub const ARITY: usize = #arity;
            #results_item
            /// The traced bodies, one per signature (shapes, dtypes, devices, aliasing).
            pub static CACHE: ::tensor::__private::FunctionCache =
                ::tensor::__private::FunctionCache::new(
                    ::core::concat!(::core::module_path!(), "::", #name_str),
                    #schedule,
                );
            /// How many times the body has been traced (once per new signature).
            pub fn trace_count() -> usize {
                CACHE.trace_count()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_parameter_is_traced_as_a_tensor() {
        let item: ItemFn = syn::parse_quote!(
            fn step(p: &Tensor, lr: f32, seed: u64) -> Tensor {
                todo!()
            }
        );
        let kinds: Vec<bool> = item
            .sig
            .inputs
            .iter()
            .map(|a| matches!(param_kind(a), Ok(Param::Scalar)))
            .collect();
        assert_eq!(kinds, [false, true, true]);
    }

    #[test]
    fn counts_the_tensors_of_a_tuple_result() {
        let item: ItemFn = syn::parse_quote!(
            fn f(x: &Tensor) -> (Tensor, Tensor) {
                (x.clone(), x.clone())
            }
        );
        assert_eq!(result_count(&item.sig.output, &item.sig).unwrap(), Some(2));
    }

    #[test]
    fn rejects_a_usize_parameter() {
        let item: ItemFn = syn::parse_quote!(
            fn f(n: usize) -> Tensor {
                todo!()
            }
        );
        // A `usize` is a path type: the compiler rejects it (it is not a `Tree`, and not a
        // number traced as a value: a size is structure), spanned on it.
        assert!(matches!(
            param_kind(&item.sig.inputs[0]),
            Ok(Param::ByValue(_))
        ));
        let item: ItemFn = syn::parse_quote!(
            fn f(n: fn()) -> Tensor {
                todo!()
            }
        );
        let err = param_kind(&item.sig.inputs[0]).err().unwrap();
        assert!(err.to_string().contains("must be trees of tensors"));
    }
}
