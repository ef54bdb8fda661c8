//! `jit!(f)`: `f` compiled once per input signature. A closure whose parameters include Rust
//! numbers (`lr: f32`, `step: i32`) takes them as numbers and traces them as abstract 0-d
//! tensors, as `#[function]` does and as `jax.jit` traces Python scalars: inside the body the
//! parameter is a `Tensor`, and a new number replays the trace and the plan.
//!
//! ```text
//! jit!(|p: &P, lr: f32| body)
//!   => { let inner = __private::jit(|p: &P, __tensor_arg1: &Tensor| {
//!            let lr: Tensor = __tensor_arg1.clone(); body });
//!        move |__tensor_arg0: &P, __tensor_arg1: f32|
//!            inner(__tensor_arg0, &Tensor::from_vec(vec![__tensor_arg1], &[])) }
//! ```

use crate::function::is_scalar;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;
use syn::{Error, Expr, ExprClosure, Pat, Token};

/// Expands `jit!(f)`.
pub fn jit(tokens: TokenStream) -> syn::Result<TokenStream> {
    let args = syn::parse::Parser::parse2(Punctuated::<Expr, Token![,]>::parse_terminated, tokens)?;
    let mut args = args.into_iter();
    let (Some(f), None) = (args.next(), args.next()) else {
        return Err(Error::new(
            proc_macro2::Span::call_site(),
            "jit! takes one function: `jit!(f)`, `jit!(|x: &Tensor| ..)` or `jit!(grad!(loss))`",
        ));
    };
    match &f {
        Expr::Closure(closure) if has_number_parameter(closure) => with_numbers(closure),
        _ => Ok(quote!(::tensor::__private::jit(#f))),
    }
}

fn has_number_parameter(closure: &ExprClosure) -> bool {
    closure
        .inputs
        .iter()
        .any(|p| matches!(p, Pat::Type(t) if is_scalar(&t.ty)))
}

/// The closure jitted with its number parameters retyped as tensors, behind a closure that
/// takes the numbers.
fn with_numbers(closure: &ExprClosure) -> syn::Result<TokenStream> {
    let mut inner = closure.clone();
    let (mut outer_params, mut call_args, mut lets) = (Vec::new(), Vec::new(), Vec::new());
    for (i, param) in inner.inputs.iter_mut().enumerate() {
        let Pat::Type(typed) = param else {
            return Err(Error::new_spanned(
                &*param,
                "jit!: a closure with number parameters needs every parameter's type \
                 (e.g. `|p: &Params, lr: f32| ..`)",
            ));
        };
        let name = format_ident!("__tensor_arg{i}");
        let ty = &typed.ty;
        outer_params.push(quote!(#name: #ty));
        if is_scalar(ty) {
            let pat = &typed.pat;
            lets.push(quote!(let #pat: ::tensor::Tensor = ::core::clone::Clone::clone(#name);));
            *typed.pat = syn::parse_quote!(#name);
            *typed.ty = syn::parse_quote!(&::tensor::Tensor);
            // A buffer whatever the number (identities included): the trace must not depend
            // on it.
            call_args.push(quote!(&::tensor::Tensor::from_vec(::std::vec![#name], &[])));
        } else {
            call_args.push(quote!(#name));
        }
    }
    let body = &closure.body;
    *inner.body = syn::parse_quote!({ #(#lets)* #body });
    Ok(quote!({
        let __tensor_inner = ::tensor::__private::jit(#inner);
        move |#(#outer_params),*| __tensor_inner(#(#call_args),*)
    }))
}
