//! The states of the optimizers: structs generic over the parameters' tree type, each a tree
//! itself (so `jit!` takes and returns it, and a checkpoint saves it) with the step count.

use crate::tensor::Tensor;
use crate::transform::tree::Tree;

/// An optimizer's state: a tree that counts the steps taken.
pub trait OptimizerState: Tree {
    /// The number of steps taken, a 0-d `i32` tensor (torch's `state["step"]`).
    fn step_count(&self) -> &Tensor;
}

/// A state struct generic over the parameters' type `P`, with `Tree` implemented by hand
/// (`#[derive(Tree)]` expands to paths of the `tensor` facade and takes no generics): its
/// fields are its children, in order, named by the field.
macro_rules! state_struct {
    (
        $(#[$doc:meta])*
        $name:ident {
            $( $(#[$field_doc:meta])* $field:ident : $ty:ty ),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name<P> {
            $( $(#[$field_doc])* pub $field: $ty ),+
        }

        impl<P: $crate::transform::tree::Tree> $crate::transform::tree::Tree for $name<P> {
            fn flatten(&self, leaves: &mut Vec<$crate::tensor::Tensor>) {
                $( $crate::transform::tree::Tree::flatten(&self.$field, leaves); )+
            }

            fn structure(&self) -> $crate::transform::tree::TreeDef {
                use $crate::transform::tree::{Key, NodeKind, Tree, TreeDef};
                TreeDef::node(
                    NodeKind::Struct(stringify!($name)),
                    vec![$( (Key::Field(stringify!($field)), Tree::structure(&self.$field)) ),+],
                )
            }

            fn unflatten(
                def: &$crate::transform::tree::TreeDef,
                leaves: &mut $crate::transform::tree::Leaves,
            ) -> Self {
                use $crate::transform::tree::{NodeKind, expect_node};
                let mut children =
                    expect_node(def, &NodeKind::Struct(stringify!($name))).iter();
                $name {
                    $( $field: <$ty as $crate::transform::tree::Tree>::unflatten(
                        &children
                            .next()
                            .expect(concat!("tree: ", stringify!($name), " has too few fields"))
                            .1,
                        leaves,
                    ), )+
                }
            }
        }

        impl<P: $crate::transform::tree::Tree> $crate::optim::OptimizerState for $name<P> {
            fn step_count(&self) -> &$crate::tensor::Tensor {
                &self.step
            }
        }
    };
}

pub(crate) use state_struct;

/// The step count before the first step: a 0-d `i32` zero.
pub(crate) fn zero_steps() -> Tensor {
    Tensor::zeros(&[0usize; 0], crate::uop::DType::I32)
}
