//! `#[derive(Tree)]`: a struct as a tree of tensors. Every field is a subtree (a `Tensor`, a
//! `Vec` of layers, another derived struct, ...) except those marked `#[tree(static)]`
//! (hyper-parameters: sizes, rates, names), which are kept in the structure, not the leaves.
//!
//! ```text
//! #[derive(Clone, Tree)]                  impl Tree for Mlp {
//! struct Mlp {                       =>       flatten: w.flatten(leaves); b.flatten(leaves)
//!     w: Tensor, b: Tensor,                   structure: Node(Struct("Mlp"), [.w, .b], statics [lr])
//!     #[tree(static)] lr: f32,                unflatten: Mlp { w: .., b: .., lr: statics[0] }
//! }                                       }
//!                                         impl HasJacobian for Mlp {   // jacfwd!/jacrev! of an Mlp
//!                                             Jacobian<T> = TreeJacobian<Mlp, T>
//!                                         }
//! ```

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Fields, Member};

/// One field of the struct: its accessor, and whether it is static.
struct Field {
    member: Member,
    name: String,
    is_static: bool,
    span: Span,
}

/// Expands `#[derive(Tree)]` on `input`.
pub fn derive(input: TokenStream) -> syn::Result<TokenStream> {
    let input: DeriveInput = syn::parse2(input)?;
    if !input.generics.params.is_empty() {
        return Err(Error::new_spanned(
            &input.generics,
            "#[derive(Tree)] does not support generic structs; name the field types \
             (e.g. `Vec<Layer>`)",
        ));
    }
    let fields = match &input.data {
        Data::Struct(data) => fields_of(&data.fields)?,
        Data::Enum(e) => {
            return Err(Error::new_spanned(
                e.enum_token,
                "#[derive(Tree)] works on structs only; an enum has no fixed structure \
                 (use `Option` for a subtree that may be absent)",
            ));
        }
        Data::Union(u) => {
            return Err(Error::new_spanned(
                u.union_token,
                "#[derive(Tree)] works on structs only",
            ));
        }
    };
    Ok(generate(&input, &fields))
}

fn fields_of(fields: &Fields) -> syn::Result<Vec<Field>> {
    fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let (member, name) = match &field.ident {
                Some(ident) => (Member::Named(ident.clone()), ident.to_string()),
                None => (Member::Unnamed(i.into()), i.to_string()),
            };
            Ok(Field {
                member,
                name,
                is_static: is_static(&field.attrs)?,
                span: field.ty.span(),
            })
        })
        .collect()
}

/// Whether the attributes hold `#[tree(static)]`; any other `#[tree(..)]` is an error.
fn is_static(attrs: &[syn::Attribute]) -> syn::Result<bool> {
    let mut found = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("tree")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("static") {
                found = true;
                Ok(())
            } else {
                Err(meta.error(format!(
                    "unknown tree option `{}`; the only one is `#[tree(static)]` (a field kept \
                     in the structure, not among the tensors)",
                    meta.path
                        .get_ident()
                        .map(|i| i.to_string())
                        .unwrap_or_default()
                )))
            }
        })?;
    }
    Ok(found)
}

fn generate(input: &DeriveInput, fields: &[Field]) -> TokenStream {
    let ty = &input.ident;
    let name = ty.to_string();
    let tree = quote!(::tensor::core::transform::tree);
    let leaves: Vec<&Field> = fields.iter().filter(|f| !f.is_static).collect();
    let statics: Vec<&Field> = fields.iter().filter(|f| f.is_static).collect();
    let flatten = leaves.iter().map(|f| {
        let m = &f.member;
        quote_spanned!(f.span=> #tree::Tree::flatten(&self.#m, leaves);)
    });
    let children = leaves.iter().map(|f| {
        let (m, n) = (&f.member, &f.name);
        quote!((#tree::Key::Field(#n), #tree::Tree::structure(&self.#m)))
    });
    let static_values = statics.iter().map(|f| {
        let m = &f.member;
        quote_spanned!(f.span=> #tree::StaticValue::new(&self.#m))
    });
    let mut child_index = 0usize;
    let mut static_index = 0usize;
    let rebuild = fields.iter().map(|f| {
        let m = &f.member;
        if f.is_static {
            let i = static_index;
            static_index += 1;
            let n = &f.name;
            quote_spanned!(f.span=> #m: statics[#i].get().unwrap_or_else(|| {
                panic!("tree: static field `{}` of {} has another type in this structure", #n, #name)
            }))
        } else {
            let i = child_index;
            child_index += 1;
            quote_spanned!(f.span=> #m: #tree::Tree::unflatten(&children[#i].1, leaves))
        }
    });
    let (nchildren, nstatics) = (leaves.len(), statics.len());
    quote! {
        impl #tree::Tree for #ty {
            fn flatten(&self, leaves: &mut ::std::vec::Vec<::tensor::Tensor>) {
                #(#flatten)*
            }
            fn structure(&self) -> #tree::TreeDef {
                #tree::TreeDef::Node {
                    kind: #tree::NodeKind::Struct(#name),
                    children: ::std::vec![#(#children),*],
                    statics: ::std::vec![#(#static_values),*],
                }
            }
            #[allow(unused_variables)]
            fn unflatten(def: &#tree::TreeDef, leaves: &mut #tree::Leaves) -> Self {
                let children = #tree::expect_node(def, &#tree::NodeKind::Struct(#name));
                let statics = #tree::statics_of(def);
                assert!(
                    children.len() == #nchildren && statics.len() == #nstatics,
                    "tree: the structure {} is not one of {}", def.describe(), #name
                );
                #ty { #(#rebuild),* }
            }
        }

        impl #tree::HasJacobian for #ty {
            type Jacobian<__T: #tree::Tree> = #tree::TreeJacobian<#ty, __T>;
            fn jacobian_def(out: &#tree::TreeDef, wrt: &#tree::TreeDef) -> #tree::TreeDef {
                #tree::tree_jacobian_def(out, wrt)
            }
        }
    }
}
