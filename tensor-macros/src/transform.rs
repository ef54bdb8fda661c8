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

/// The result type of `count` tensors: `Tensor`, or a tuple of them.
fn tensors_type(count: usize) -> TokenStream {
    if count == 1 {
        quote!(::tensor::Tensor)
    } else {
        let each = (0..count).map(|_| quote!(::tensor::Tensor));
        quote!((#(#each),*))
    }
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
    keywords: &["in_axes", "out_axes", "method"],
    usage: "vmap!(f, in_axes = (0, None), out_axes = 0, method = rewrite)",
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
    let (in_axes, out_axes) = (
        in_axes.tokens(quote!(InAxes)),
        out_axes.tokens(quote!(OutAxes)),
    );
    let method = args
        .keyword("method")
        .map(vmap_method)
        .transpose()?
        .unwrap_or(quote!(Rewrite));
    let call = quote!(::tensor::__private::vmap(
        __tensor_f,
        #in_axes,
        #out_axes,
        ::tensor::core::transform::VmapMethod::#method
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

/// `in_axes` / `out_axes` as written: one axis (or None) for all, or one per entry.
enum Axes {
    All(Option<i64>),
    Each(Vec<Option<i64>>, Span),
}

impl Axes {
    fn parse(expr: &Expr, keyword: &str) -> syn::Result<Axes> {
        match expr {
            Expr::Tuple(tuple) => Ok(Axes::Each(
                tuple
                    .elems
                    .iter()
                    .map(|e| axis(e, keyword))
                    .collect::<syn::Result<_>>()?,
                expr.span(),
            )),
            Expr::Array(array) => Err(Error::new_spanned(
                array,
                format!(
                    "vmap!: write {keyword} as a tuple, e.g. `{keyword} = (0, None)`, not an array"
                ),
            )),
            Expr::Paren(inner) => Axes::parse(&inner.expr, keyword),
            single => Ok(Axes::All(axis(single, keyword)?)),
        }
    }

    fn tokens(&self, ty: TokenStream) -> TokenStream {
        match self {
            Axes::All(axis) => {
                let axis = axis_tokens(*axis);
                quote!(::tensor::#ty::All(#axis))
            }
            Axes::Each(axes, _) => {
                let axes = axes.iter().map(|a| axis_tokens(*a));
                quote!(::tensor::#ty::Each(::std::vec![#(#axes),*]))
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
            Derivative::Grad => ("grad", "grad!(f, argnums = (0, 2))"),
            Derivative::ValueAndGrad => ("value_and_grad", "value_and_grad!(f, argnums = 0)"),
            Derivative::Jacfwd => ("jacfwd", "jacfwd!(f, argnums = 0)"),
            Derivative::Jacrev => ("jacrev", "jacrev!(f, argnums = 0)"),
            Derivative::Hessian => ("hessian", "hessian!(f, argnums = 0)"),
        };
        Grammar {
            name,
            positional: &["f"],
            keywords: &["argnums"],
            usage,
        }
    }

    fn takes_several_argnums(self) -> bool {
        matches!(self, Derivative::Grad | Derivative::ValueAndGrad)
    }
}

/// Expands `grad!(f, argnums = ..)` and the rest of the family.
pub fn derivative(kind: Derivative, tokens: TokenStream) -> syn::Result<TokenStream> {
    let grammar = kind.grammar();
    let args = Args::parse(tokens, &grammar)?;
    let target = Target::of(&args.positional[0]);
    let argnums = match args.keyword("argnums") {
        Some(expr) => parse_argnums(expr, grammar.name)?,
        None => vec![(0, Span::call_site())],
    };
    if !kind.takes_several_argnums() && argnums.len() != 1 {
        return Err(Error::new_spanned(
            args.keyword("argnums"),
            format!(
                "{}! differentiates with respect to one argument: write `argnums = {}`",
                grammar.name, argnums[0].0
            ),
        ));
    }
    let mut checks = TokenStream::new();
    for &(k, span) in &argnums {
        match target.arity {
            Some(arity) if k >= arity => {
                return Err(Error::new(
                    span,
                    format!(
                        "{}!: argnums {k} is out of range: the closure takes {arity} argument{} \
                         (argnums counts from 0, so use 0..={})",
                        grammar.name,
                        if arity == 1 { "" } else { "s" },
                        arity.saturating_sub(1)
                    ),
                ));
            }
            Some(_) => {}
            None if args.keyword("argnums").is_some() => {
                checks.extend(bound_check("has_argument", k, span))
            }
            None => {}
        }
    }
    let first = argnums[0].0;
    let call = match kind {
        Derivative::Grad | Derivative::ValueAndGrad => {
            let out = tensors_type(argnums.len());
            let nums = argnums.iter().map(|(k, _)| k);
            let wrapper = Ident::new(grammar.name, Span::call_site());
            quote!(::tensor::__private::#wrapper::<_, _, #out>(
                __tensor_f,
                ::tensor::ArgNums(::std::vec![#(#nums),*]),
            ))
        }
        _ => {
            let wrapper = Ident::new(grammar.name, Span::call_site());
            quote!(::tensor::__private::#wrapper(__tensor_f, #first))
        }
    };
    Ok(block(&target, checks, call))
}

/// argnums: a non-negative integer literal or a tuple of them, each with its span.
fn parse_argnums(expr: &Expr, name: &str) -> syn::Result<Vec<(usize, Span)>> {
    let one = |e: &Expr| -> syn::Result<(usize, Span)> {
        if let Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) = e
            && let Ok(k) = i.base10_parse::<usize>()
        {
            return Ok((k, e.span()));
        }
        Err(Error::new_spanned(
            e,
            format!(
                "{name}!: argnums must be non-negative integer literals, found `{}`; write e.g. \
                 `argnums = 0` or `argnums = (0, 2)`",
                quote!(#e)
            ),
        ))
    };
    match expr {
        Expr::Tuple(tuple) if !tuple.elems.is_empty() => tuple.elems.iter().map(one).collect(),
        Expr::Paren(inner) => parse_argnums(&inner.expr, name),
        single => Ok(vec![one(single)?]),
    }
}

// ---------------------------------------------------------------------------------------------
// jvp!, vjp!

const JVP: Grammar = Grammar {
    name: "jvp",
    positional: &["f", "primals", "tangents"],
    keywords: &[],
    usage: "jvp!(f, (x, y), (tx, ty))",
};

const VJP: Grammar = Grammar {
    name: "vjp",
    positional: &["f", "primals"],
    keywords: &[],
    usage: "vjp!(f, (x, y))",
};

/// The tensors of a tuple expression (or the one tensor of any other expression).
fn tensor_list(expr: &Expr) -> Vec<TokenStream> {
    let each = |e: &Expr| quote!(::tensor::__private::TensorRef::tensor(&(#e)));
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
    let call = quote!(::tensor::__private::jvp(
        __tensor_f,
        ::std::vec![#(#p),*],
        ::std::vec![#(#t),*],
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
    let grads = tensors_type(p.len());
    let call = quote!(::tensor::__private::vjp::<_, _, #grads>(
        __tensor_f,
        ::std::vec![#(#p),*],
    ));
    Ok(block(&target, checks, call))
}
