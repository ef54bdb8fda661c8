//! A GPU emulator: runs a [`GpuKernel`] the way a GPU would, every thread of every block of
//! its launch grid, each computing its `SPECIAL` indices from its block and thread number and
//! then its lines in Rust with the exact scalar semantics of `uop::alu`.
//!
//! It checks the GPU lowering numerically where no GPU exists: the grid mapping (digits of
//! the thread number, the bounds check of the last block), what each thread loops over and
//! accumulates, and which elements it stores. Kernels have no shared memory or barriers yet
//! (see `codegen::gpu`), so threads run one after another.

use super::program::{GpuKernel, Line, Value};
use crate::uop::alu::exec_typed;
use crate::uop::{Op, ReduceOp, Scalar, UOp};
use std::collections::HashMap;

/// Runs `kernel` over its launch grid on `buffers` (one per slot, elements as scalars of the
/// slot's dtype); outputs are written in place.
#[track_caller]
pub fn run_on_grid(kernel: &GpuKernel, buffers: &mut [Vec<Scalar>]) {
    let dims = kernel.launch_dims();
    for block in 0..dims.grid {
        for thread in 0..dims.block {
            let gid = block * dims.block + thread;
            if gid >= kernel.threads {
                continue;
            }
            let mut state = Thread::default();
            for s in &kernel.specials {
                let digit = gid / s.stride % s.size;
                state.ranges.insert(s.range.range_id(), digit as i64);
            }
            state.run(&kernel.body.lines, buffers);
        }
    }
}

/// The registers of one thread.
#[derive(Default)]
struct Thread {
    temps: HashMap<usize, Scalar>,
    accs: HashMap<usize, Scalar>,
    ranges: HashMap<usize, i64>,
}

impl Thread {
    fn run(&mut self, lines: &[Line], buffers: &mut [Vec<Scalar>]) {
        let mut i = 0;
        while i < lines.len() {
            match &lines[i] {
                Line::Loop(r) => {
                    let end = i + matching_end(&lines[i..]);
                    let size = r.range_size().expect("rendered ranges have constant sizes");
                    for v in 0..size {
                        self.ranges.insert(r.range_id(), v as i64);
                        self.run(&lines[i + 1..end], buffers);
                    }
                    i = end;
                }
                Line::EndLoop => panic!("emulator: an EndLoop without its Loop"),
                Line::DefineAcc { acc, reduce } => {
                    self.accs.insert(*acc, identity(reduce));
                }
                Line::Accumulate {
                    acc,
                    op,
                    reduce,
                    value,
                } => {
                    let dtype = reduce.dtype();
                    let args = [self.accs[acc], self.value(value)];
                    let folded = exec_typed(op.binary(), dtype, dtype, &args);
                    self.accs.insert(*acc, folded);
                }
                Line::Assign {
                    temp,
                    node,
                    operands,
                } => {
                    let v = self.assign(node, operands, buffers);
                    self.temps.insert(*temp, v);
                }
                Line::Store {
                    store,
                    index,
                    gate,
                    value,
                } => {
                    if gate.as_ref().is_none_or(|g| self.value(g).as_bool()) {
                        let global = store.s(0).s(0);
                        let at = self.index(index, buffers[global.global_slot()].len());
                        let v = self.value(value).cast(global.dtype());
                        buffers[global.global_slot()][at] = v;
                    }
                }
            }
            i += 1;
        }
    }

    fn assign(&self, node: &UOp, operands: &[Value], buffers: &[Vec<Scalar>]) -> Scalar {
        if node.op() == Op::Load {
            if operands.get(1).is_some_and(|g| !self.value(g).as_bool()) {
                return Scalar::Int(0).cast(node.dtype());
            }
            let buffer = &buffers[node.s(0).s(0).global_slot()];
            return buffer[self.index(&operands[0], buffer.len())];
        }
        let args: Vec<Scalar> = operands.iter().map(|v| self.value(v)).collect();
        let operand = if node.op() == Op::Where {
            node.s(1)
        } else {
            node.s(0)
        }
        .dtype();
        exec_typed(node.op(), node.dtype(), operand, &args)
    }

    #[track_caller]
    fn index(&self, v: &Value, len: usize) -> usize {
        let i = self.value(v).as_i64();
        assert!(
            i >= 0 && (i as usize) < len,
            "emulator: access at {i} of a buffer of {len} elements"
        );
        i as usize
    }

    fn value(&self, v: &Value) -> Scalar {
        match v {
            Value::Temp(t) => self.temps[t],
            Value::Acc(a) => self.accs[a],
            Value::Range(r) => Scalar::Int(self.ranges[&r.range_id()]),
            Value::Const(c) => c.const_value().expect("a Const"),
        }
    }
}

/// The offset of the `EndLoop` closing the `Loop` at `lines[0]`.
fn matching_end(lines: &[Line]) -> usize {
    let mut depth = 0usize;
    for (i, line) in lines.iter().enumerate() {
        match line {
            Line::Loop(_) => depth += 1,
            Line::EndLoop => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("emulator: a Loop without its EndLoop")
}

fn identity(reduce: &UOp) -> Scalar {
    let dtype = reduce.dtype();
    match reduce.reduce_op() {
        ReduceOp::Add => Scalar::Int(0).cast(dtype),
        ReduceOp::Mul => Scalar::Int(1).cast(dtype),
        ReduceOp::Max => dtype.min_value(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::{CodegenOptions, lower_kernel_gpu};
    use crate::schedule::{Schedule, create_schedule, exec};
    use crate::tensor::Tensor;
    use crate::transform::{grad, vmap};
    use crate::uop::dtype::decode_scalars;
    use crate::uop::{Arg, BufferArg, DType};

    fn buffer_arg(b: &UOp) -> &BufferArg {
        match b.arg() {
            Arg::Buffer(arg) => arg,
            other => panic!("a kernel slot holds {other:?}"),
        }
    }

    fn initial(b: &UOp) -> Vec<Scalar> {
        let arg = buffer_arg(b);
        match arg.storage.host_bytes() {
            Some(bytes) => decode_scalars(&bytes, arg.dtype),
            None => vec![Scalar::Int(0).cast(arg.dtype); arg.size],
        }
    }

    /// Every kernel of `schedule` lowered for the GPU and run on the emulated grid; the
    /// outputs' elements and how many GPU threads ran in all.
    fn emulated(schedule: &Schedule) -> (Vec<Vec<Scalar>>, usize) {
        let mut memory: HashMap<u64, Vec<Scalar>> = HashMap::new();
        let mut threads = 0;
        for item in &schedule.items {
            let mut bufs: Vec<Vec<Scalar>> = item
                .buffers
                .iter()
                .map(|b| {
                    let id = buffer_arg(b).id;
                    memory.get(&id).cloned().unwrap_or_else(|| initial(b))
                })
                .collect();
            let sizes = item.buffer_sizes();
            let kernel = lower_kernel_gpu(&item.ast, &sizes, &CodegenOptions::default(), "k");
            threads += kernel.threads;
            run_on_grid(&kernel, &mut bufs);
            memory.insert(buffer_arg(&item.buffers[0]).id, bufs.swap_remove(0));
        }
        let outputs = schedule
            .outputs
            .iter()
            .map(|o| {
                let mut b = o.clone();
                while b.op() == Op::Reshape {
                    b = b.s(0).clone();
                }
                memory[&buffer_arg(&b).id].clone()
            })
            .collect();
        (outputs, threads)
    }

    /// The emulated GPU kernels of `outputs` equal the kernel ASTs run in Rust (the CPU's
    /// reference), floats within 1e-5 relative plus 1e-5 absolute, integers exactly.
    #[track_caller]
    fn check(name: &str, outputs: &[Tensor]) -> usize {
        let roots: Vec<UOp> = outputs.iter().map(|t| t.uop()).collect();
        let schedule = create_schedule(&roots);
        let expected = exec::run(&schedule);
        let (got, threads) = emulated(&schedule);
        for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g.len(), e.len(), "{name}: output {k} length");
            for (i, (a, b)) in g.iter().zip(e).enumerate() {
                let (a, b) = (a.as_f64(), b.as_f64());
                let close = a == b || (a - b).abs() <= 1e-5 + 1e-5 * b.abs();
                assert!(close, "{name}: output {k}[{i}]: GPU {a}, CPU {b}");
            }
        }
        threads
    }

    /// A buffer of deterministic values (not `randn`, whose bits would be realized by a
    /// kernel of their own and counted among the threads).
    fn data(shape: &[usize], seed: u64) -> Tensor {
        let n: usize = shape.iter().product();
        let values: Vec<f32> = (0..n)
            .map(|i| ((i as f32 + 1.0) * (0.61 + seed as f32 * 0.13)).sin() * 2.0)
            .collect();
        Tensor::from_vec(values, shape)
    }

    #[test]
    fn reductions_on_the_grid_equal_the_cpu() {
        let x = data(&[37, 19], 1);
        assert_eq!(check("sum rows", &[x.sum([1], false)]), 37);
        check("max columns", &[x.max([0], true)]);
        check("sum all", &[x.sum_all()]);
        check("long sum", &[data(&[9000], 2).sum_all()]);
        check("softmax", &[x.softmax(-1)]);
        check("log_softmax", &[x.log_softmax(0)]);
        check("argmax", &[x.argmax(1, false)]);
        check("cumsum", &[x.cumsum(1)]);
    }

    #[test]
    fn matmuls_on_the_grid_equal_the_cpu() {
        // 64 x 80 outputs, the column axis upcast by 4: 1280 threads over 10 blocks of 128.
        let threads = check("matmul", &[data(&[64, 48], 3).matmul(&data(&[48, 80], 4))]);
        assert_eq!(threads, 64 * 80 / 4);
        check(
            "odd matmul",
            &[data(&[7, 13], 5).matmul(&data(&[13, 3], 6))],
        );
        check(
            "batched matmul",
            &[data(&[3, 5, 8], 7).matmul(&data(&[3, 8, 6], 8))],
        );
    }

    #[test]
    fn elementwise_and_per_sample_gradients_on_the_grid_equal_the_cpu() {
        let x = data(&[5, 130], 9);
        check("transcendentals", &[x.exp() + x.sin() + x.tanh()]);
        check("f64", &[x.cast(DType::F64).exp()]);
        let loss = |w: &Tensor, x: &Tensor| (x.matmul(w).relu() * 0.5).sum_all();
        let per_sample = vmap(grad(loss, 0), [None, Some(0)], 0);
        let g = per_sample.call(&[data(&[6, 4], 10), data(&[3, 6], 11)]);
        check("per-sample gradients", &g);
    }
}
