use tensor::core::transform::tree::{Leaves, TreeDef};
use tensor::prelude::*;

/// A hand-written tree that does not name its Jacobian type.
#[derive(Clone)]
struct Pair(Tensor, Tensor);

impl Tree for Pair {
    fn flatten(&self, leaves: &mut Vec<Tensor>) {
        leaves.extend([self.0.clone(), self.1.clone()]);
    }
    fn structure(&self) -> TreeDef {
        TreeDef::tuple(vec![TreeDef::Leaf, TreeDef::Leaf])
    }
    fn unflatten(_: &TreeDef, leaves: &mut Leaves) -> Self {
        Pair(leaves.next().unwrap(), leaves.next().unwrap())
    }
}

fn main() {
    let _ = jacrev!(|x: &Tensor| Pair(x.sin(), x.cos()));
}
