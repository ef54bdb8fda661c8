//! The argument list every transform macro shares: positional expressions, then
//! `keyword = value` pairs, checked against what the macro accepts.

use crate::suggest::nearest;
use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Error, Expr, Ident, Token};

/// One argument: `expr` or `keyword = expr`.
enum Arg {
    Positional(Expr),
    Keyword(Ident, Expr),
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Arg> {
        if input.peek(Ident) && input.peek2(Token![=]) && !input.peek2(Token![==]) {
            let key: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            Ok(Arg::Keyword(key, input.parse()?))
        } else {
            Ok(Arg::Positional(input.parse()?))
        }
    }
}

/// What one macro accepts: its name, its positional parameters, its keywords, and a usage line.
pub struct Grammar {
    pub name: &'static str,
    pub positional: &'static [&'static str],
    pub keywords: &'static [&'static str],
    pub usage: &'static str,
}

/// A macro's arguments, checked against its grammar.
pub struct Args {
    pub positional: Vec<Expr>,
    keywords: Vec<(Ident, Expr)>,
}

impl Args {
    /// Parses `tokens` and checks the count of positional arguments and every keyword.
    pub fn parse(tokens: proc_macro2::TokenStream, grammar: &Grammar) -> syn::Result<Args> {
        let list =
            syn::parse::Parser::parse2(Punctuated::<Arg, Token![,]>::parse_terminated, tokens)?;
        let mut positional = Vec::new();
        let mut keywords: Vec<(Ident, Expr)> = Vec::new();
        for arg in list {
            match arg {
                Arg::Positional(expr) => positional.push(expr),
                Arg::Keyword(key, value) => {
                    check_keyword(&key, grammar)?;
                    if keywords.iter().any(|(k, _)| *k == key) {
                        return Err(Error::new_spanned(
                            &key,
                            format!("{}!: `{key}` is given twice; keep one", grammar.name),
                        ));
                    }
                    keywords.push((key, value));
                }
            }
        }
        if positional.len() != grammar.positional.len() {
            let span = positional
                .get(grammar.positional.len())
                .map_or_else(Span::call_site, syn::spanned::Spanned::span);
            return Err(Error::new(
                span,
                format!(
                    "{}! takes {} positional argument{} ({}), found {}; write `{}`",
                    grammar.name,
                    grammar.positional.len(),
                    if grammar.positional.len() == 1 {
                        ""
                    } else {
                        "s"
                    },
                    grammar.positional.join(", "),
                    positional.len(),
                    grammar.usage
                ),
            ));
        }
        Ok(Args {
            positional,
            keywords,
        })
    }

    /// The value of `keyword`, if given.
    pub fn keyword(&self, keyword: &str) -> Option<&Expr> {
        self.keywords
            .iter()
            .find(|(k, _)| k == keyword)
            .map(|(_, v)| v)
    }
}

/// An unknown keyword is an error that names the nearest known one.
fn check_keyword(key: &Ident, grammar: &Grammar) -> syn::Result<()> {
    let word = key.to_string();
    if grammar.keywords.contains(&word.as_str()) {
        return Ok(());
    }
    let name = grammar.name;
    let message = if grammar.keywords.is_empty() {
        format!(
            "{name}! takes no keyword arguments, found `{word}`; write `{}`",
            grammar.usage
        )
    } else {
        let known = grammar
            .keywords
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ");
        match nearest(&word, grammar.keywords) {
            Some(near) => format!(
                "{name}!: unknown keyword argument `{word}`; did you mean `{near}`? ({name}! takes {known})"
            ),
            None => format!("{name}!: unknown keyword argument `{word}`; {name}! takes {known}"),
        }
    };
    Err(Error::new_spanned(key, message))
}
