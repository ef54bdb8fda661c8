//! A test-only executor of schedules: runs each kernel AST's loops in Rust over host arrays,
//! so the values a schedule computes can be checked before any code is generated.

use super::Schedule;
use crate::uop::alu::exec_typed;
use crate::uop::dtype::decode_scalars;
use crate::uop::{Arg, AxisType, Op, Scalar, UOp};
use std::collections::HashMap;

/// Runs every kernel of `schedule` in order and returns each output's elements, row-major.
pub fn run(schedule: &Schedule) -> Vec<Vec<Scalar>> {
    run_counted(schedule).0
}

/// [`run`], and the number of node evaluations it took (for tests of the executor's cost).
pub fn run_counted(schedule: &Schedule) -> (Vec<Vec<Scalar>>, usize) {
    super::with_deep_stack(|| run_items(schedule))
}

fn run_items(schedule: &Schedule) -> (Vec<Vec<Scalar>>, usize) {
    let mut evaluations = 0;
    let mut memory: HashMap<u64, Vec<Scalar>> = HashMap::new();
    for item in &schedule.items {
        let mut bufs: Vec<Vec<Scalar>> = item
            .buffers
            .iter()
            .map(|b| memory.get(&id(b)).cloned().unwrap_or_else(|| initial(b)))
            .collect();
        evaluations += run_kernel(&item.ast, &mut bufs);
        memory.insert(id(&item.buffers[0]), bufs.swap_remove(0));
    }
    let outputs = schedule
        .outputs
        .iter()
        .map(|o| {
            let mut b = o.clone();
            while b.op() == Op::Reshape {
                b = b.s(0).clone();
            }
            memory.get(&id(&b)).cloned().unwrap_or_else(|| initial(&b))
        })
        .collect();
    (outputs, evaluations)
}

fn id(buffer: &UOp) -> u64 {
    match buffer.arg() {
        Arg::Buffer(b) => b.id,
        _ => panic!("exec: {} is not a Buffer", buffer.op()),
    }
}

fn initial(buffer: &UOp) -> Vec<Scalar> {
    let Arg::Buffer(b) = buffer.arg() else {
        panic!("exec: not a buffer")
    };
    match b.storage.host_bytes() {
        Some(bytes) => decode_scalars(&bytes, b.dtype),
        None => vec![Scalar::Int(0).cast(b.dtype); b.size],
    }
}

/// The loop indices in scope and the values computed for them. A kernel AST is a DAG whose
/// shared nodes would be evaluated once per path as a tree (exponential in the sharing), so
/// each node's value is kept until a loop index changes.
#[derive(Default)]
struct Env {
    ranges: HashMap<usize, i64>,
    values: HashMap<usize, Scalar>,
    evaluations: usize,
}

impl Env {
    /// Sets the indices of `ranges` (every value computed so far may depend on them).
    fn enter(&mut self, ranges: &[UOp], counter: &[i64]) {
        for (r, &c) in ranges.iter().zip(counter) {
            self.ranges.insert(range_id(r), c);
        }
        self.values.clear();
    }

    fn leave(&mut self, ranges: &[UOp]) {
        for r in ranges {
            self.ranges.remove(&range_id(r));
        }
    }
}

/// Runs one kernel; returns the number of node evaluations.
fn run_kernel(ast: &UOp, bufs: &mut [Vec<Scalar>]) -> usize {
    assert_eq!(ast.op(), Op::Sink, "a kernel AST is a Sink");
    let store = ast.s(0);
    let (target, value) = (store.s(0), store.s(1));
    let mut loops: Vec<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| {
            matches!(
                u.arg(),
                Arg::Range {
                    axis_type: AxisType::Loop,
                    ..
                }
            )
        })
        .collect();
    loops.sort_by_key(range_id);
    let bounds: Vec<i64> = loops.iter().map(|r| r.vmax().as_i64() + 1).collect();
    if bounds.contains(&0) {
        return 0;
    }
    let mut env = Env::default();
    let mut counter = vec![0i64; loops.len()];
    loop {
        env.enter(&loops, &counter);
        let flat = eval(target.s(1), &mut env, bufs).as_i64();
        let v = eval(value, &mut env, bufs).cast(target.dtype());
        let out = &mut bufs[0];
        assert!(
            flat >= 0 && (flat as usize) < out.len(),
            "store out of bounds: {flat}"
        );
        out[flat as usize] = v;
        if !advance(&mut counter, &bounds) {
            break;
        }
    }
    env.evaluations
}

fn range_id(r: &UOp) -> usize {
    match r.arg() {
        Arg::Range { id, .. } => *id,
        _ => panic!("exec: not a range"),
    }
}

/// Steps an odometer; false once it wraps around.
fn advance(counter: &mut [i64], bounds: &[i64]) -> bool {
    for k in (0..counter.len()).rev() {
        counter[k] += 1;
        if counter[k] < bounds[k] {
            return true;
        }
        counter[k] = 0;
    }
    false
}

fn eval(u: &UOp, env: &mut Env, bufs: &[Vec<Scalar>]) -> Scalar {
    if let Some(&v) = env.values.get(&u.id()) {
        return v;
    }
    let v = match u.op() {
        Op::Const => u.const_value().expect("const"),
        Op::Range => Scalar::Int(
            *env.ranges
                .get(&range_id(u))
                .unwrap_or_else(|| panic!("range {} used outside its loop", range_id(u))),
        ),
        Op::Load => load(u, env, bufs),
        Op::Reduce => reduce(u, env, bufs),
        op => {
            let args: Vec<Scalar> = u.src().iter().map(|s| eval(s, env, bufs)).collect();
            let operand = if op == Op::Where { u.s(1) } else { u.s(0) }.dtype();
            exec_typed(op, u.dtype(), operand, &args)
        }
    };
    env.values.insert(u.id(), v);
    env.evaluations += 1;
    v
}

fn load(u: &UOp, env: &mut Env, bufs: &[Vec<Scalar>]) -> Scalar {
    let index = u.s(0);
    assert_eq!(index.op(), Op::Address, "a Load reads through an Address");
    if let Some(gate) = index.src().get(2)
        && !eval(gate, env, bufs).as_bool()
    {
        return Scalar::Int(0).cast(u.dtype());
    }
    let Arg::Int(slot) = index.s(0).arg() else {
        panic!("exec: Address of something other than a DefineGlobal")
    };
    let buf = &bufs[*slot as usize];
    let flat = eval(index.s(1), env, bufs).as_i64();
    assert!(
        flat >= 0 && (flat as usize) < buf.len(),
        "load of slot {slot} out of bounds: {flat} not in 0..{}",
        buf.len()
    );
    buf[flat as usize]
}

fn reduce(u: &UOp, env: &mut Env, bufs: &[Vec<Scalar>]) -> Scalar {
    let Arg::Reduce(op, _) = u.arg() else {
        panic!("exec: Reduce without an op")
    };
    let dtype = u.dtype();
    let mut acc = op.identity(dtype);
    let ranges = &u.src()[1..];
    let bounds: Vec<i64> = ranges.iter().map(|r| r.vmax().as_i64() + 1).collect();
    if bounds.contains(&0) {
        return acc;
    }
    let mut counter = vec![0i64; ranges.len()];
    loop {
        env.enter(ranges, &counter);
        let v = eval(u.s(0), env, bufs);
        acc = exec_typed(op.binary(), dtype, dtype, &[acc, v]);
        if !advance(&mut counter, &bounds) {
            break;
        }
    }
    env.leave(ranges);
    acc
}
