//! The parameter structs of `nn` layers as trees, so that they are one argument of every
//! transform and of a checkpoint, their leaves named by field.

use super::{Key, Leaves, NodeKind, Tree, TreeDef, expect_node, next_leaf};
use crate::nn::RecurrentWeights;

impl Tree for RecurrentWeights {
    fn flatten(&self, leaves: &mut Vec<crate::tensor::Tensor>) {
        leaves.extend([self.weight_ih.clone(), self.weight_hh.clone()]);
        self.bias_ih.flatten(leaves);
        self.bias_hh.flatten(leaves);
    }

    fn structure(&self) -> TreeDef {
        TreeDef::node(
            NodeKind::Struct("RecurrentWeights"),
            vec![
                (Key::Field("weight_ih"), TreeDef::Leaf),
                (Key::Field("weight_hh"), TreeDef::Leaf),
                (Key::Field("bias_ih"), self.bias_ih.structure()),
                (Key::Field("bias_hh"), self.bias_hh.structure()),
            ],
        )
    }

    fn unflatten(def: &TreeDef, leaves: &mut Leaves) -> Self {
        let children = expect_node(def, &NodeKind::Struct("RecurrentWeights"));
        RecurrentWeights {
            weight_ih: next_leaf(leaves),
            weight_hh: next_leaf(leaves),
            bias_ih: Option::unflatten(&children[2].1, leaves),
            bias_hh: Option::unflatten(&children[3].1, leaves),
        }
    }
}
