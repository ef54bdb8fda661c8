//! The transform macros. Each expands to a block that binds the function, checks at compile
//! time what the macro can see (axes and argnums are literals, counts agree with the
//! function's arity), and calls the typed wrapper in `::tensor::__private`:
//!
//! ```text
//! vmap!(f, in_axes = (0, None), out_axes = 0, method = rewrite)
//!   => { let f = <f>; <arity checks>; __private::vmap(f, InAxes::Each(..), OutAxes::All(..)) }
//! ```
//!
//! A closure's arity is read from its parameter list (and unannotated parameters become
//! `&Tensor`); for any other function (a `#[function]` item, a path, another transform
//! macro) the arity checks are trait bounds on its type, spanned on the offending tokens.

use crate::args::{Args, Grammar};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Error, Expr, ExprClosure, Ident, LitInt, Pat};

/// The function a macro transforms, and its arity when the macro can read it.
struct Target {
    expr: TokenStream,
    arity: Option<usize>,
}

impl Target {
    /// `expr`, with a closure's unannotated parameters annotated `&Tensor`.
    fn of(expr: &Expr) -> Target {
        match expr {
            Expr::Closure(closure) => Target {
                arity: Some(closure.inputs.len()),
                expr: annotate_closure(closure),
            },
            Expr::Paren(inner) => Target::of(&inner.expr),
            other => Target {
                expr: quote!(#other),
                arity: None,
            },
        }
    }
}

fn annotate_closure(closure: &ExprClosure) -> TokenStream {
    let mut closure = closure.clone();
    for input in closure.inputs.iter_mut() {
        if !matches!(input, Pat::Type(_)) {
            *input = Pat::Type(syn::PatType {
                attrs: Vec::new(),
                pat: Box::new(input.clone()),
                colon_token: Default::default(),
                ty: syn::parse_quote!(&::tensor::Tensor),
            });
        }
    }
    quote!(#closure)
}

/// The binding every expansion checks and transforms: `__tensor_f`, spanned where a failed
/// trait bound on it should be reported.
fn target_at(span: Span) -> Ident {
    Ident::new("__tensor_f", Span::call_site().located_at(span))
}

/// `::tensor::__private::<check>::<n, _, _>(&__tensor_f)` spanned at `span`.
fn bound_check(check: &str, n: usize, span: Span) -> TokenStream {
    let check = Ident::new(check, span);
    let n = LitInt::new(&n.to_string(), span);
    let f = target_at(span);
    quote_spanned!(span=> ::tensor::__private::#check::<#n, _, _>(&#f);)
}

fn block(target: &Target, checks: TokenStream, call: TokenStream) -> TokenStream {
    let f = &target.expr;
    let binding = target_at(Span::call_site());
    quote!({
        let #binding = #f;
        #checks
        #call
    })
}

// ---------------------------------------------------------------------------------------------
// vmap!

const VMAP: Grammar = Grammar {
    name: "vmap",
    positional: &["f"],
    keywords: &["in_axes", "out_axes", "method", "chunk_size"],
    usage: "vmap!(f, in_axes = (0, None), out_axes = 0, method = rewrite, chunk_size = 32)",
};

/// Expands `vmap!(f, in_axes = .., out_axes = ..)`.
pub fn vmap(tokens: TokenStream) -> syn::Result<TokenStream> {
    let args = Args::parse(tokens, &VMAP)?;
    let target = Target::of(&args.positional[0]);
    let in_axes = args
        .keyword("in_axes")
        .map(|e| Axes::parse(e, "in_axes"))
        .transpose()?
        .unwrap_or(Axes::All(Some(0)));
    let out_axes = args
        .keyword("out_axes")
        .map(|e| Axes::parse(e, "out_axes"))
        .transpose()?
        .unwrap_or(Axes::All(Some(0)));
    let mut checks = TokenStream::new();
    if let Axes::Each(entries, span) = &in_axes {
        match target.arity {
            Some(arity) if arity != entries.len() => {
                return Err(Error::new(
                    *span,
                    format!(
                        "vmap!: in_axes has {} entr{} but the closure takes {arity} argument{}; \
                         give one entry per argument, e.g. `in_axes = ({})`",
                        entries.len(),
                        if entries.len() == 1 { "y" } else { "ies" },
                        if arity == 1 { "" } else { "s" },
                        example_axes(arity)
                    ),
                ));
            }
            Some(_) => {}
            None => checks.extend(bound_check("in_axes_fit", entries.len(), *span)),
        }
    }
    let (in_axes, out_axes) = (in_axes.tokens(), out_axes.tokens());
    let method = args
        .keyword("method")
        .map(vmap_method)
        .transpose()?
        .unwrap_or(quote!(Rewrite));
    let chunk_size = chunk_size(&args);
    let call = quote!(::tensor::__private::vmap(
        __tensor_f,
        #in_axes,
        #out_axes,
        ::tensor::core::transform::VmapMethod::#method,
        #chunk_size
    ));
    Ok(block(&target, checks, call))
}

/// `method = rewrite` (the batch is a graph dimension), `method = range` (a loop in the
/// kernels, through vmap scopes) or `method = pad_reduce` (a loop in the kernels, through
/// sliding windows summed over the range), as the variant of `VmapMethod` it names.
fn vmap_method(expr: &Expr) -> syn::Result<TokenStream> {
    let name = match expr {
        Expr::Path(path) => path.path.get_ident().map(|i| i.to_string()),
        _ => None,
    };
    match name.as_deref() {
        Some("rewrite") => Ok(quote!(Rewrite)),
        Some("range") => Ok(quote!(Range)),
        Some("pad_reduce") => Ok(quote!(PadReduce)),
        _ => Err(Error::new_spanned(
            expr,
            "vmap!: method must be `rewrite` (the batch becomes a graph dimension), `range` \
             (the batch becomes a loop inside the kernels) or `pad_reduce` (a loop built from \
             sliding windows summed over it); write e.g. `method = range`",
        )),
    }
}

fn example_axes(arity: usize) -> String {
    let mut entries = vec!["0"];
    entries.extend(std::iter::repeat_n("None", arity.saturating_sub(1)));
    entries.join(", ")
}

/// `in_axes` / `out_axes` as written: one axis (or None) for all, or one entry per argument
/// (result), each a prefix tree: an axis, a tuple of entries, or a struct literal naming an
/// entry per field (`Params { w: None, b: 0 }`).
enum Axes {
    All(Option<i64>),
    Each(Vec<AxisExpr>, Span),
}

/// One entry of a prefix tree of axes.
enum AxisExpr {
    Axis(Option<i64>),
    Each(Vec<AxisExpr>),
    Fields(Vec<(String, AxisExpr)>),
}

impl AxisExpr {
    fn parse(expr: &Expr, keyword: &str) -> syn::Result<AxisExpr> {
        match expr {
            Expr::Tuple(tuple) => Ok(AxisExpr::Each(
                tuple
                    .elems
                    .iter()
                    .map(|e| AxisExpr::parse(e, keyword))
                    .collect::<syn::Result<_>>()?,
            )),
            Expr::Paren(inner) => AxisExpr::parse(&inner.expr, keyword),
            Expr::Struct(st) => {
                if let Some(rest) = &st.rest {
                    return Err(Error::new_spanned(
                        rest,
                        format!(
                            "vmap!: {keyword} names every field of a struct; `..` is not allowed"
                        ),
                    ));
                }
                st.fields
                    .iter()
                    .map(|field| {
                        let name = match &field.member {
                            syn::Member::Named(ident) => ident.to_string(),
                            syn::Member::Unnamed(index) => index.index.to_string(),
                        };
                        Ok((name, AxisExpr::parse(&field.expr, keyword)?))
                    })
                    .collect::<syn::Result<_>>()
                    .map(AxisExpr::Fields)
            }
            Expr::Array(array) => Err(Error::new_spanned(
                array,
                format!(
                    "vmap!: write {keyword} as a tuple, e.g. `{keyword} = (0, None)`, not an array"
                ),
            )),
            single => Ok(AxisExpr::Axis(axis(single, keyword)?)),
        }
    }

    fn tokens(&self) -> TokenStream {
        let ty = quote!(::tensor::core::transform::tree::AxisTree);
        match self {
            AxisExpr::Axis(a) => {
                let a = axis_tokens(*a);
                quote!(#ty::Axis(#a))
            }
            AxisExpr::Each(entries) => {
                let entries = entries.iter().map(AxisExpr::tokens);
                quote!(#ty::Each(::std::vec![#(#entries),*]))
            }
            AxisExpr::Fields(named) => {
                let entries = named.iter().map(|(n, e)| {
                    let e = e.tokens();
                    quote!((::std::string::String::from(#n), #e))
                });
                quote!(#ty::Fields(::std::vec![#(#entries),*]))
            }
        }
    }
}

impl Axes {
    fn parse(expr: &Expr, keyword: &str) -> syn::Result<Axes> {
        match expr {
            Expr::Tuple(tuple) => Ok(Axes::Each(
                tuple
                    .elems
                    .iter()
                    .map(|e| AxisExpr::parse(e, keyword))
                    .collect::<syn::Result<_>>()?,
                expr.span(),
            )),
            Expr::Paren(inner) => Axes::parse(&inner.expr, keyword),
            Expr::Array(_) | Expr::Struct(_) => {
                AxisExpr::parse(expr, keyword).map(|e| Axes::Each(vec![e], expr.span()))
            }
            single => Ok(Axes::All(axis(single, keyword)?)),
        }
    }

    /// The axes as an `AxisTree` (a top-level tuple is one entry per argument or result).
    fn tokens(&self) -> TokenStream {
        match self {
            Axes::All(axis) => AxisExpr::Axis(*axis).tokens(),
            Axes::Each(entries, _) => {
                let entries = entries.iter().map(AxisExpr::tokens);
                quote!(::tensor::core::transform::tree::AxisTree::Each(
                    ::std::vec![#(#entries),*]
                ))
            }
        }
    }
}

fn axis_tokens(axis: Option<i64>) -> TokenStream {
    match axis {
        Some(a) => {
            let lit = LitInt::new(&format!("{}isize", a.unsigned_abs()), Span::call_site());
            if a < 0 {
                quote!(::core::option::Option::Some(-#lit))
            } else {
                quote!(::core::option::Option::Some(#lit))
            }
        }
        None => quote!(::core::option::Option::None),
    }
}

/// One entry of in_axes/out_axes: an integer literal (maybe negative) or `None`.
fn axis(expr: &Expr, keyword: &str) -> syn::Result<Option<i64>> {
    let not_literal = || {
        Error::new_spanned(
            expr,
            format!(
                "vmap!: {keyword} entries must be integer literals or `None`, found `{}`; \
                 write e.g. `{keyword} = (0, None)` (for axes computed at run time, call \
                 `tensor::vmap(f, in_axes, out_axes)`)",
                quote!(#expr)
            ),
        )
    };
    match expr {
        Expr::Lit(lit) => match &lit.lit {
            syn::Lit::Int(i) => i.base10_parse::<i64>().map(Some),
            _ => Err(not_literal()),
        },
        Expr::Unary(unary) if matches!(unary.op, syn::UnOp::Neg(_)) => {
            match axis(&unary.expr, keyword) {
                Ok(Some(a)) => Ok(Some(-a)),
                _ => Err(not_literal()),
            }
        }
        Expr::Path(path) if path.path.is_ident("None") => Ok(None),
        Expr::Group(group) => axis(&group.expr, keyword),
        _ => Err(not_literal()),
    }
}

// ---------------------------------------------------------------------------------------------
// grad!, value_and_grad!, jacfwd!, jacrev!, hessian!

/// Which derivative a macro of the grad family takes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Derivative {
    Grad,
    ValueAndGrad,
    Jacfwd,
    Jacrev,
    Hessian,
}

impl Derivative {
    fn grammar(self) -> Grammar {
        let (name, usage) = match self {
            Derivative::Grad => (
                "grad",
                "grad!(f, argnums = (0, 2), has_aux = false, allow_int = false)",
            ),
            Derivative::ValueAndGrad => (
                "value_and_grad",
                "value_and_grad!(f, argnums = 0, has_aux = false, allow_int = false)",
            ),
            Derivative::Jacfwd => (
                "jacfwd",
                "jacfwd!(f, argnums = (0, 1), has_aux = false, chunk_size = 16)",
            ),
            Derivative::Jacrev => (
                "jacrev",
                "jacrev!(f, argnums = (0, 1), has_aux = false, chunk_size = 16)",
            ),
            Derivative::Hessian => ("hessian", "hessian!(f, argnums = 0, has_aux = false)"),
        };
        let keywords: &'static [&'static str] = match self {
            Derivative::Grad | Derivative::ValueAndGrad => &["argnums", "has_aux", "allow_int"],
            Derivative::Jacfwd | Derivative::Jacrev => &["argnums", "has_aux", "chunk_size"],
            Derivative::Hessian => &["argnums", "has_aux"],
        };
        Grammar {
            name,
            positional: &["f"],
            keywords,
            usage,
        }
    }
}

/// The `chunk_size = n` keyword as an `Option<usize>` expression (`None` when absent); the
/// type checker holds the expression to `usize`.
fn chunk_size(args: &Args) -> TokenStream {
    match args.keyword("chunk_size") {
        Some(expr) => quote!(::core::option::Option::Some::<usize>(#expr)),
        None => quote!(::core::option::Option::None),
    }
}

/// A `true` / `false` keyword (default false).
fn flag(args: &Args, keyword: &str, name: &str) -> syn::Result<bool> {
    match args.keyword(keyword) {
        None => Ok(false),
        Some(Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Bool(b),
            ..
        })) => Ok(b.value),
        Some(other) => Err(Error::new_spanned(
            other,
            format!(
                "{name}!: {keyword} must be `true` or `false`, found `{}`",
                quote!(#other)
            ),
        )),
    }
}

/// Expands `grad!(f, argnums = .., has_aux = .., allow_int = ..)` and the rest of the family.
pub fn derivative(kind: Derivative, tokens: TokenStream) -> syn::Result<TokenStream> {
    let grammar = kind.grammar();
    let args = Args::parse(tokens, &grammar)?;
    let target = Target::of(&args.positional[0]);
    let (argnums, tuple) = match args.keyword("argnums") {
        Some(expr) => parse_argnums(expr, grammar.name)?,
        None => (vec![(0, Span::call_site())], false),
    };
    let has_aux = flag(&args, "has_aux", grammar.name)?;
    let allow_int = flag(&args, "allow_int", grammar.name)?;
    let chunk_size = chunk_size(&args);
    let mut checks = TokenStream::new();
    for &(k, span) in &argnums {
        match target.arity {
            Some(arity) if k >= arity as i64 || k < -(arity as i64) => {
                return Err(Error::new(
                    span,
                    format!(
                        "{}!: argnums {k} is out of range: the closure takes {arity} argument{} \
                         (argnums counts from 0, so use 0..={}, or -{arity}..=-1 from the end)",
                        grammar.name,
                        if arity == 1 { "" } else { "s" },
                        arity.saturating_sub(1)
                    ),
                ));
            }
            Some(_) => {}
            None if args.keyword("argnums").is_some() => {
                checks.extend(bound_check_signed("has_argument", k, span))
            }
            None => {}
        }
    }
    let nums = argnums.iter().map(|&(k, _)| signed_lit(k));
    let selection = if tuple && argnums.len() > 1 {
        quote!((#(::tensor::__private::Nums::<#nums>,)*))
    } else {
        quote!(::tensor::__private::Nums::<#(#nums),*>)
    };
    let wrapper = Ident::new(
        &format!("{}{}", grammar.name, if has_aux { "_aux" } else { "" }),
        Span::call_site(),
    );
    let call = quote!(::tensor::__private::#wrapper(
        __tensor_f,
        #selection,
        ::tensor::__private::Options {
            has_aux: #has_aux,
            allow_int: #allow_int,
            chunk_size: #chunk_size,
        },
    ));
    Ok(block(&target, checks, call))
}

/// An integer as a const-generic argument: `3` or `{ -1 }`.
fn signed_lit(k: i64) -> TokenStream {
    let lit = LitInt::new(&k.unsigned_abs().to_string(), Span::call_site());
    if k < 0 {
        quote!({ -#lit })
    } else {
        quote!(#lit)
    }
}

/// `::tensor::__private::<check>::<k, _, _>(&__tensor_f)` spanned at `span`, for a signed `k`.
fn bound_check_signed(check: &str, k: i64, span: Span) -> TokenStream {
    let check = Ident::new(check, span);
    let lit = LitInt::new(&k.unsigned_abs().to_string(), span);
    let k = if k < 0 {
        quote_spanned!(span=> { -#lit })
    } else {
        quote_spanned!(span=> #lit)
    };
    let f = target_at(span);
    quote_spanned!(span=> ::tensor::__private::#check::<#k, _, _>(&#f);)
}

/// argnums: an integer literal (negative counts from the end) or a tuple of them, each with
/// its span, and whether it was a tuple.
fn parse_argnums(expr: &Expr, name: &str) -> syn::Result<(Vec<(i64, Span)>, bool)> {
    let one = |e: &Expr| -> syn::Result<(i64, Span)> {
        let value = match e {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse::<i64>().ok(),
            Expr::Unary(syn::ExprUnary {
                op: syn::UnOp::Neg(_),
                expr,
                ..
            }) => match &**expr {
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i),
                    ..
                }) => i.base10_parse::<i64>().ok().map(|k| -k),
                _ => None,
            },
            _ => None,
        };
        value.map(|k| (k, e.span())).ok_or_else(|| {
            Error::new_spanned(
                e,
                format!(
                    "{name}!: argnums must be integer literals, found `{}`; write e.g. \
                     `argnums = 0`, `argnums = -1` or `argnums = (0, 2)`",
                    quote!(#e)
                ),
            )
        })
    };
    match expr {
        Expr::Tuple(tuple) if !tuple.elems.is_empty() => Ok((
            tuple.elems.iter().map(one).collect::<syn::Result<_>>()?,
            true,
        )),
        Expr::Paren(inner) => parse_argnums(&inner.expr, name),
        single => Ok((vec![one(single)?], false)),
    }
}

// ---------------------------------------------------------------------------------------------
// jvp!, vjp!

const JVP: Grammar = Grammar {
    name: "jvp",
    positional: &["f", "primals", "tangents"],
    keywords: &["has_aux"],
    usage: "jvp!(f, (x, y), (tx, ty), has_aux = false)",
};

const VJP: Grammar = Grammar {
    name: "vjp",
    positional: &["f", "primals"],
    keywords: &["has_aux"],
    usage: "vjp!(f, (x, y), has_aux = false)",
};

/// The trees of a tuple expression (or the one tree of any other expression), each owned
/// (given by value or by reference).
fn tensor_list(expr: &Expr) -> Vec<TokenStream> {
    let each = |e: &Expr| quote!(::tensor::__private::own(&(#e)));
    match expr {
        Expr::Tuple(tuple) => tuple.elems.iter().map(each).collect(),
        other => vec![each(other)],
    }
}

fn check_primals(
    target: &Target,
    name: &str,
    primals: &Expr,
    count: usize,
) -> syn::Result<TokenStream> {
    match target.arity {
        Some(arity) if arity != count => Err(Error::new_spanned(
            primals,
            format!(
                "{name}!: {count} primal{} given but the closure takes {arity} argument{}; \
                 pass one primal per argument as a tuple, e.g. `({})`",
                if count == 1 { "" } else { "s" },
                if arity == 1 { "" } else { "s" },
                (0..arity)
                    .map(|i| format!("x{i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        Some(_) => Ok(TokenStream::new()),
        None => Ok(bound_check("primals_fit", count, primals.span())),
    }
}

/// Expands `jvp!(f, primals, tangents)`: `(f(primals), J · tangents)`, typed like `f`'s results.
pub fn jvp(tokens: TokenStream) -> syn::Result<TokenStream> {
    let args = Args::parse(tokens, &JVP)?;
    let target = Target::of(&args.positional[0]);
    let (primals, tangents) = (&args.positional[1], &args.positional[2]);
    let (p, t) = (tensor_list(primals), tensor_list(tangents));
    if p.len() != t.len() {
        return Err(Error::new_spanned(
            tangents,
            format!(
                "jvp!: {} tangent{} given for {} primal{}; give one tangent per primal, \
                 with the primal's shape, e.g. `({})`",
                t.len(),
                if t.len() == 1 { "" } else { "s" },
                p.len(),
                if p.len() == 1 { "" } else { "s" },
                (0..p.len())
                    .map(|i| format!("t{i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    let checks = check_primals(&target, "jvp", primals, p.len())?;
    let wrapper = if flag(&args, "has_aux", "jvp")? {
        quote!(jvp_aux)
    } else {
        quote!(jvp)
    };
    let call = quote!(::tensor::__private::#wrapper(
        __tensor_f,
        (#(#p,)*),
        (#(#t,)*),
    ));
    Ok(block(&target, checks, call))
}

/// Expands `vjp!(f, primals)`: `(f(primals), pullback)`, where `pullback(&cotangent)` returns
/// one cotangent per primal (a `Tensor` for one primal, a tuple for several).
pub fn vjp(tokens: TokenStream) -> syn::Result<TokenStream> {
    let args = Args::parse(tokens, &VJP)?;
    let target = Target::of(&args.positional[0]);
    let primals = &args.positional[1];
    let p = tensor_list(primals);
    let checks = check_primals(&target, "vjp", primals, p.len())?;
    let wrapper = if flag(&args, "has_aux", "vjp")? {
        quote!(vjp_aux)
    } else {
        quote!(vjp)
    };
    let call = quote!(::tensor::__private::#wrapper(__tensor_f, (#(#p,)*)));
    Ok(block(&target, checks, call))
}
