//! Vector memory access on the GPU: four `f32` loads (or stores) of one thread at neighbouring
//! elements `i, i+1, i+2, i+3` of a buffer, `i` a multiple of 4, become one 16-byte access
//! (`float4`): a quarter of the memory instructions, and a warp's access is 512 contiguous
//! bytes.
//!
//! Whether `i` is a multiple of 4 is decided on the index as an affine form of the kernel's
//! ranges (`Σ c_r · r + c`): every `c_r` and `c` a multiple of 4 holds for every value of the
//! ranges. The runtime's device buffers start at least 256-byte aligned (each is a whole
//! allocation), so the access is aligned too; the emulator checks both on every vector access.
//!
//! The GPU heuristic gives an elementwise kernel's contiguous axis this form when every access
//! along it allows (`vectorizable_upcast`): the thread's 4 outputs are neighbours
//! (`Opt::Split { top: false }`), where otherwise they are a quarter of the axis apart so that
//! a warp's scalar accesses are contiguous.

use super::emit::{Emitter, drop_unused};
use super::fresh::Fresh;
use super::program::{GpuKernel, Line, Program, Value};
use crate::uop::{DType, Op, UOp};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The elements of one vector access.
pub const VECTOR_WIDTH: usize = 4;

/// An index as `Σ coefficient · range + constant`, ranges by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Affine {
    /// The coefficient of each range (by range id), none zero.
    pub terms: BTreeMap<usize, i64>,
    /// The constant.
    pub constant: i64,
}

impl Affine {
    fn constant(c: i64) -> Affine {
        Affine {
            terms: BTreeMap::new(),
            constant: c,
        }
    }

    fn plus(mut self, other: Affine, sign: i64) -> Affine {
        for (r, c) in other.terms {
            *self.terms.entry(r).or_insert(0) += sign * c;
        }
        self.terms.retain(|_, c| *c != 0);
        self.constant += sign * other.constant;
        self
    }

    fn times(mut self, k: i64) -> Affine {
        self.terms.values_mut().for_each(|c| *c *= k);
        self.terms.retain(|_, c| *c != 0);
        self.constant *= k;
        self
    }

    /// True when every value of the index is a multiple of `n`.
    pub fn always_multiple_of(&self, n: i64) -> bool {
        self.constant % n == 0 && self.terms.values().all(|c| c % n == 0)
    }
}

/// `idx` as an affine form of its ranges, `None` when it is not one (a division, a modulo, a
/// product of two ranges, a load, ...). Built operands first, each node once (an explicit
/// stack: an index of any depth).
pub fn affine(idx: &UOp) -> Option<Affine> {
    let mut forms: HashMap<UOp, Option<Affine>> = HashMap::new();
    for node in idx.toposort_along(affine_operands, |_| true) {
        let form = affine_node(&node, |s| forms.get(s).cloned().flatten());
        forms.insert(node, form);
    }
    forms.remove(idx).flatten()
}

/// The operands whose forms a node's form is built from.
fn affine_operands(u: &UOp) -> &[UOp] {
    match u.op() {
        Op::Add | Op::Sub | Op::Neg | Op::Mul => u.src(),
        _ => &[],
    }
}

/// The form of `idx` given its operands' forms (`of`).
fn affine_node(idx: &UOp, of: impl Fn(&UOp) -> Option<Affine>) -> Option<Affine> {
    match idx.op() {
        Op::Const => Some(Affine::constant(idx.const_value()?.as_i64())),
        Op::Range => Some(Affine {
            terms: BTreeMap::from([(idx.range_id(), 1)]),
            constant: 0,
        }),
        Op::Add => Some(of(idx.s(0))?.plus(of(idx.s(1))?, 1)),
        Op::Sub => Some(of(idx.s(0))?.plus(of(idx.s(1))?, -1)),
        Op::Neg => Some(of(idx.s(0))?.times(-1)),
        Op::Mul => {
            let (a, b) = (of(idx.s(0))?, of(idx.s(1))?);
            match (a.terms.is_empty(), b.terms.is_empty()) {
                (_, true) => Some(a.times(b.constant)),
                (true, false) => Some(b.times(a.constant)),
                (false, false) => None,
            }
        }
        _ => None,
    }
}

/// The element index of a Load's or Store's address, and whether the address has a gate.
fn address_index(access: &UOp) -> (&UOp, bool) {
    let address = access.s(0);
    (&address.src()[1], address.src().len() > 2)
}

/// True when an elementwise kernel's range `axis` can be upcast by [`VECTOR_WIDTH`] into
/// neighbouring elements that every access along it reads or writes as one vector: the kernel
/// has no reduce, and every Load and Store whose index depends on `axis` is an ungated `f32`
/// access with an affine index that advances by one element along `axis` and by multiples of
/// 4 along every other range, from a multiple of 4.
pub fn vectorizable_upcast(ast: &UOp, axis: usize) -> bool {
    let nodes = ast.toposort();
    if nodes.iter().any(|u| u.op() == Op::Reduce) {
        return false;
    }
    let accesses = nodes
        .iter()
        .filter(|u| matches!(u.op(), Op::Load | Op::Store));
    let mut any = false;
    for access in accesses {
        let (idx, gated) = address_index(access);
        let Some(form) = affine(idx) else {
            return false;
        };
        let Some(&along) = form.terms.get(&axis) else {
            continue;
        };
        let mut rest = form.clone();
        rest.terms.remove(&axis);
        let dtype = access.s(0).s(0).dtype();
        if gated || dtype != DType::F32 || along != 1 || !rest.always_multiple_of(4) {
            return false;
        }
        any = true;
    }
    any
}

/// `kernel` with each set of 4 neighbouring `f32` loads (or stores) of its top-level lines
/// from an aligned index turned into one vector access.
pub fn vectorize(kernel: GpuKernel) -> GpuKernel {
    let mut fresh = Fresh::after(&kernel);
    let lines = &kernel.body.lines;
    let top = top_level(lines);
    // A vector load reads its members where the first one was, and a vector store writes
    // where the last one was: neither moves past an access to its buffer of the other kind.
    let slots = |f: fn(&Line) -> Option<&UOp>| -> HashSet<usize> {
        lines.iter().filter_map(f).map(slot).collect()
    };
    let read_slots = slots(|l| match l {
        Line::Assign { node, .. } if node.op() == Op::Load => Some(node),
        _ => None,
    });
    let written_slots = slots(|l| match l {
        Line::Store { store, .. } => Some(store),
        _ => None,
    });
    let loads = quads(lines, &top, |l| match l {
        Line::Assign { node, .. }
            if node.op() == Op::Load && !written_slots.contains(&slot(node)) =>
        {
            Some(node)
        }
        _ => None,
    });
    let stores = quads(lines, &top, |l| match l {
        Line::Store {
            store, gate: None, ..
        } if !read_slots.contains(&slot(store)) => Some(store),
        _ => None,
    });
    if loads.is_empty() && stores.is_empty() {
        return kernel;
    }
    // Each vector load takes the place of its first member, each vector store its last.
    let mut at: HashMap<usize, Vec<Line>> = HashMap::new();
    let mut removed: HashSet<usize> = HashSet::new();
    for quad in &loads {
        let first = *quad.iter().min().expect("four members");
        let (mut emitted, index) = index_lines(&lines[quad[0]], &mut fresh);
        let temps = quad
            .iter()
            .map(|&i| match &lines[i] {
                Line::Assign { temp, .. } => *temp,
                _ => unreachable!("a load quad holds Assigns"),
            })
            .collect();
        let Line::Assign { node, .. } = &lines[quad[0]] else {
            unreachable!("a load quad holds Assigns")
        };
        emitted.push(Line::VectorLoad {
            temps,
            load: node.clone(),
            index,
        });
        at.insert(first, emitted);
        removed.extend(quad.iter().copied());
    }
    for quad in &stores {
        let last = *quad.iter().max().expect("four members");
        let (mut emitted, index) = index_lines(&lines[quad[0]], &mut fresh);
        let values = quad
            .iter()
            .map(|&i| match &lines[i] {
                Line::Store { value, .. } => value.clone(),
                _ => unreachable!("a store quad holds Stores"),
            })
            .collect();
        let Line::Store { store, .. } = &lines[quad[0]] else {
            unreachable!("a store quad holds Stores")
        };
        emitted.push(Line::VectorStore {
            store: store.clone(),
            index,
            values,
        });
        at.insert(last, emitted);
        removed.extend(quad.iter().copied());
    }
    let mut body = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if let Some(replacement) = at.remove(&i) {
            body.extend(replacement);
        }
        if !removed.contains(&i) {
            body.push(line.clone());
        }
    }
    GpuKernel {
        body: Program {
            lines: drop_unused(body),
            threads: kernel.body.threads,
        },
        ..kernel
    }
}

fn slot(access: &UOp) -> usize {
    access.s(0).s(0).global_slot()
}

/// The positions of the lines outside every loop and `If`.
fn top_level(lines: &[Line]) -> Vec<usize> {
    let mut depth = 0usize;
    let mut top = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match line {
            l if l.opens_loop() || matches!(l, Line::If(_)) => depth += 1,
            Line::EndLoop | Line::EndIf => depth -= 1,
            _ if depth == 0 => top.push(i),
            _ => {}
        }
    }
    top
}

/// The positions of the accesses (`access` picks a line's Load or Store) that form sets of
/// [`VECTOR_WIDTH`] `f32` accesses at `i, i+1, i+2, i+3` of one buffer, `i` always a
/// multiple of 4, each set in element order.
fn quads<'a>(
    lines: &'a [Line],
    top: &[usize],
    access: impl Fn(&'a Line) -> Option<&'a UOp>,
) -> Vec<[usize; VECTOR_WIDTH]> {
    type Key = (usize, BTreeMap<usize, i64>, i64);
    let mut sets: BTreeMap<Key, [Option<usize>; VECTOR_WIDTH]> = BTreeMap::new();
    let mut spoiled: HashSet<Key> = HashSet::new();
    for &i in top {
        let Some(node) = access(&lines[i]) else {
            continue;
        };
        let (idx, gated) = address_index(node);
        let dtype = node.s(0).s(0).dtype();
        let Some(form) = affine(idx).filter(|_| !gated && dtype == DType::F32) else {
            continue;
        };
        let width = VECTOR_WIDTH as i64;
        let lane = form.constant.rem_euclid(width) as usize;
        let key = (slot(node), form.terms.clone(), form.constant - lane as i64);
        let aligned = Affine {
            terms: form.terms,
            constant: key.2,
        }
        .always_multiple_of(width);
        let set = sets.entry(key.clone()).or_default();
        if !aligned || set[lane].is_some() {
            spoiled.insert(key);
        } else {
            set[lane] = Some(i);
        }
    }
    sets.into_iter()
        .filter(|(key, _)| !spoiled.contains(key))
        .filter_map(|(_, set)| {
            let members: Option<Vec<usize>> = set.into_iter().collect();
            members.map(|m| [m[0], m[1], m[2], m[3]])
        })
        .collect()
}

/// The statements that compute the index of the access on `line` afresh, and its value.
fn index_lines(line: &Line, fresh: &mut Fresh) -> (Vec<Line>, Value) {
    let node = match line {
        Line::Assign { node, .. } => node,
        Line::Store { store, .. } => store,
        _ => unreachable!("an access line"),
    };
    let mut emit = Emitter::new(fresh);
    let value = emit.value(address_index(node).0);
    (emit.lines, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::{CodegenOptions, lower_kernel_gpu};
    use crate::schedule::create_schedule;
    use crate::tensor::Tensor;
    use crate::uop::AxisType;

    /// The number of vector loads and stores, and of scalar loads and stores, of `out`'s
    /// last kernel.
    fn accesses(out: &Tensor) -> [usize; 4] {
        let schedule = create_schedule(&[out.uop()]);
        let item = schedule.items.last().expect("a kernel");
        let options = CodegenOptions::default();
        let kernel = lower_kernel_gpu(&item.ast, &item.buffer_sizes(), &options, "k");
        let count = |f: fn(&Line) -> bool| kernel.body.lines.iter().filter(|l| f(l)).count();
        [
            count(|l| matches!(l, Line::VectorLoad { .. })),
            count(|l| matches!(l, Line::VectorStore { .. })),
            count(|l| matches!(l, Line::Assign { node, .. } if node.op() == Op::Load)),
            count(|l| matches!(l, Line::Store { .. })),
        ]
    }

    fn data(shape: &[usize]) -> Tensor {
        Tensor::from_vec(vec![0.5f32; shape.iter().product()], shape)
    }

    #[test]
    fn neighbouring_aligned_f32_accesses_become_vector_accesses() {
        // Scalars as a library op writes them (code, not values bound at run time).
        let _library = crate::tensor::LibraryScope::enter();
        let x = data(&[4096]);
        let chain = ((&x * 2.0 + 1.0).exp2() * &x).sqrt() * 0.5;
        assert_eq!(accesses(&chain), [1, 1, 0, 0]);
        // A broadcast row: its load is a vector too.
        assert_eq!(accesses(&(data(&[32, 64]) + data(&[64]))), [2, 1, 0, 0]);
    }

    #[test]
    fn strided_misaligned_or_narrow_accesses_stay_scalar() {
        // Scalars as a library op writes them (code, not values bound at run time).
        let _library = crate::tensor::LibraryScope::enter();
        // A transposed read: the thread's elements are a quarter of the axis apart.
        assert_eq!(
            accesses(&(data(&[32, 64]).transpose(0, 1) + 1.0)),
            [0, 0, 4, 4]
        );
        // An offset of one element: never 16-byte aligned.
        assert_eq!(
            accesses(&(data(&[4096]).shrink(&[(1, 4093)]) * 2.0)),
            [0, 0, 4, 4]
        );
        // f16 elements, and rows of 130 (not a multiple of 4).
        assert_eq!(
            accesses(&(data(&[4096]).cast(DType::F16) * 2.0))[..2],
            [0, 0]
        );
        assert_eq!(accesses(&(data(&[5, 130]) * 2.0))[..2], [0, 0]);
    }

    fn range(id: usize) -> UOp {
        UOp::range(64, id, AxisType::Loop)
    }

    fn int(v: i64) -> UOp {
        UOp::constant(v, DType::Index)
    }

    #[test]
    fn an_index_of_sums_and_constant_multiples_is_affine() {
        let (a, b) = (range(0), range(1));
        let idx = UOp::alu(
            Op::Add,
            vec![
                UOp::alu(Op::Mul, vec![a.clone(), int(16)]),
                UOp::alu(
                    Op::Add,
                    vec![UOp::alu(Op::Mul, vec![int(4), b.clone()]), int(3)],
                ),
            ],
        );
        let form = affine(&idx).expect("affine");
        assert_eq!(form.terms, BTreeMap::from([(0, 16), (1, 4)]));
        assert_eq!(form.constant, 3);
        assert!(!form.always_multiple_of(4));
        assert!(
            affine(&UOp::alu(Op::Sub, vec![idx, int(3)]))
                .unwrap()
                .always_multiple_of(4)
        );
        // A product of ranges, a division or a modulo is not affine.
        assert!(affine(&UOp::alu(Op::Mul, vec![a.clone(), b.clone()])).is_none());
        assert!(affine(&UOp::alu(Op::Idiv, vec![a.clone(), int(2)])).is_none());
        assert!(affine(&UOp::alu(Op::Mod, vec![a, int(2)])).is_none());
    }
}
