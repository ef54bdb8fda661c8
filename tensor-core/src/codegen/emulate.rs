//! A GPU emulator: runs a [`GpuKernel`] the way a GPU would, every thread of every block of
//! its launch grid, each computing its `SPECIAL` indices from its block and thread number and
//! then its lines in Rust with the exact scalar semantics of `uop::alu`.
//!
//! It checks the GPU lowering numerically where no GPU exists: the grid mapping (digits of
//! the thread number, the bounds check of the last block), what each thread loops over and
//! accumulates, and which elements it stores. The threads of a block run in lockstep phases:
//! every thread runs up to the next top-level barrier before any thread goes past it, and
//! each block has its own shared memory (a loop with a barrier inside runs each iteration that
//! way). A shared element read in the phase another thread wrote it, or written by two threads
//! in one phase, is a race the emulator stops at, as is a read of an element never written or
//! a barrier where threads diverge (in a strided loop of more or fewer values than threads,
//! or an `If`).

#[cfg(test)]
use super::program::LaunchDims;
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
        let mut threads = block_threads(kernel, block, dims.block);
        let mut shared = Shared::default();
        run_block(&kernel.body.lines, &mut threads, buffers, &mut shared);
    }
}

/// Runs `lines` on every thread of a block, in phases that end at barriers: a barrier at the
/// top level, inside a loop that every thread runs alike (its bounds are constants), whose
/// iterations the block then runs together, or inside a strided loop that runs one value per
/// thread (a GROUP loop as long as the block). A barrier inside another strided loop or an
/// `If` (where threads diverge) stops the emulator.
fn run_block(
    lines: &[Line],
    threads: &mut [(usize, Thread)],
    buffers: &mut [Vec<Scalar>],
    shared: &mut Shared,
) {
    let mut start = 0;
    let mut i = 0;
    while i < lines.len() {
        match &lines[i] {
            Line::Barrier => {
                run_phase(&lines[start..i], threads, buffers, shared);
                shared.writers.clear();
                shared.readers.clear();
                start = i + 1;
                i += 1;
            }
            Line::Loop(r) if has_barrier(&lines[i..i + matching_end(&lines[i..])]) => {
                run_phase(&lines[start..i], threads, buffers, shared);
                let end = i + matching_end(&lines[i..]);
                let size = r.range_size().expect("rendered ranges have constant sizes");
                for v in 0..size {
                    for (_, thread) in threads.iter_mut() {
                        thread.ranges.insert(r.range_id(), v as i64);
                    }
                    run_block(&lines[i + 1..end], threads, buffers, shared);
                }
                start = end + 1;
                i = end + 1;
            }
            Line::StridedLoop { range, lane, lanes }
                if range.range_size() == Some(*lanes)
                    && has_barrier(&lines[i..i + matching_end(&lines[i..])]) =>
            {
                run_phase(&lines[start..i], threads, buffers, shared);
                let end = i + matching_end(&lines[i..]);
                for (_, thread) in threads.iter_mut() {
                    let value = thread.ranges[&lane.range_id()];
                    thread.ranges.insert(range.range_id(), value);
                }
                run_block(&lines[i + 1..end], threads, buffers, shared);
                start = end + 1;
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    run_phase(&lines[start..], threads, buffers, shared);
}

/// Runs `lines` (no barrier at their top level) on each thread of the block in turn.
fn run_phase(
    lines: &[Line],
    threads: &mut [(usize, Thread)],
    buffers: &mut [Vec<Scalar>],
    shared: &mut Shared,
) {
    for (lane, thread) in threads.iter_mut() {
        shared.lane = *lane;
        thread.run(lines, buffers, shared);
    }
}

fn has_barrier(lines: &[Line]) -> bool {
    lines.iter().any(|l| matches!(l, Line::Barrier))
}

/// The threads of `block` that compute outputs, by lane, with their grid indices set.
fn block_threads(kernel: &GpuKernel, block: usize, size: usize) -> Vec<(usize, Thread)> {
    let mut threads = Vec::with_capacity(size);
    for lane in 0..size {
        let gid = match &kernel.group {
            Some(_) => block,
            None => block * size + lane,
        };
        if gid >= kernel.threads {
            continue;
        }
        let mut state = Thread::default();
        for s in &kernel.specials {
            let digit = gid / s.stride % s.size;
            state.ranges.insert(s.range.range_id(), digit as i64);
        }
        let lane_range = kernel.group.as_ref().map(|g| &g.lane);
        if let Some(r) = lane_range.or(kernel.local.as_ref().map(|t| &t.lane)) {
            state.ranges.insert(r.range_id(), lane as i64);
        }
        threads.push((lane, state));
    }
    threads
}

/// A block's shared memory, and which lane wrote each element in the current phase.
#[derive(Default)]
struct Shared {
    arrays: HashMap<usize, Vec<Option<Scalar>>>,
    writers: HashMap<(usize, usize), usize>,
    readers: HashMap<(usize, usize), Vec<usize>>,
    lane: usize,
}

impl Shared {
    #[track_caller]
    fn store(&mut self, local: usize, at: usize, v: Scalar) {
        let array = self
            .arrays
            .get_mut(&local)
            .expect("emulator: a shared array is defined");
        assert!(
            at < array.len(),
            "emulator: shared access at {at} of {}",
            array.len()
        );
        if let Some(other) = self.writers.insert((local, at), self.lane) {
            assert_eq!(
                other, self.lane,
                "emulator: race: lanes {other} and {} write local{local}[{at}] in one phase",
                self.lane
            );
        }
        let lane = self.lane;
        let read_by_other = self.readers.get(&(local, at));
        if let Some(reader) = read_by_other.and_then(|r| r.iter().find(|&&r| r != lane)) {
            panic!(
                "emulator: race: lane {lane} writes local{local}[{at}] that lane {reader} read without a barrier between"
            );
        }
        array[at] = Some(v);
    }

    #[track_caller]
    fn load(&mut self, local: usize, at: usize) -> Scalar {
        let array = &self.arrays[&local];
        assert!(
            at < array.len(),
            "emulator: shared access at {at} of {}",
            array.len()
        );
        if let Some(&writer) = self.writers.get(&(local, at)) {
            assert_eq!(
                writer, self.lane,
                "emulator: race: lane {} reads local{local}[{at}] that lane {writer} wrote without a barrier between",
                self.lane
            );
        }
        let v = array[at]
            .unwrap_or_else(|| panic!("emulator: local{local}[{at}] read before any write"));
        self.readers.entry((local, at)).or_default().push(self.lane);
        v
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
    fn run(&mut self, lines: &[Line], buffers: &mut [Vec<Scalar>], shared: &mut Shared) {
        let mut i = 0;
        while i < lines.len() {
            match &lines[i] {
                Line::Loop(r) => {
                    let end = i + matching_end(&lines[i..]);
                    let size = r.range_size().expect("rendered ranges have constant sizes");
                    for v in 0..size {
                        self.ranges.insert(r.range_id(), v as i64);
                        self.run(&lines[i + 1..end], buffers, shared);
                    }
                    i = end;
                }
                Line::StridedLoop { range, lane, lanes } => {
                    let end = i + matching_end(&lines[i..]);
                    let size = range
                        .range_size()
                        .expect("rendered ranges have constant sizes");
                    let first = self.ranges[&lane.range_id()] as usize;
                    for v in (first..size).step_by(*lanes) {
                        self.ranges.insert(range.range_id(), v as i64);
                        self.run(&lines[i + 1..end], buffers, shared);
                    }
                    i = end;
                }
                Line::If(cond) if !self.value(cond).as_bool() => {
                    i += matching_end_if(&lines[i..]);
                }
                Line::If(_) | Line::EndIf => {}
                Line::EndLoop => panic!("emulator: an EndLoop without its Loop"),
                Line::Barrier => panic!("emulator: a barrier where the threads diverge"),
                Line::DefineLocal {
                    local,
                    dtype: _,
                    size,
                } => {
                    shared
                        .arrays
                        .entry(*local)
                        .or_insert_with(|| vec![None; *size]);
                }
                Line::LocalStore {
                    local,
                    index,
                    value,
                } => {
                    let at = self.value(index).as_i64() as usize;
                    shared.store(*local, at, self.value(value));
                }
                Line::LocalLoad {
                    temp,
                    local,
                    dtype,
                    index,
                } => {
                    let at = self.value(index).as_i64() as usize;
                    let v = shared.load(*local, at).cast(*dtype);
                    self.temps.insert(*temp, v);
                }
                Line::LocalVectorLoad {
                    temps,
                    local,
                    index,
                } => {
                    let first = self.value(index).as_i64() as usize;
                    assert!(
                        first.is_multiple_of(temps.len()),
                        "emulator: a shared vector read of {} elements at {first}",
                        temps.len()
                    );
                    for (k, temp) in temps.iter().enumerate() {
                        let v = shared.load(*local, first + k);
                        self.temps.insert(*temp, v);
                    }
                }
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
                Line::VectorLoad { temps, load, index } => {
                    let buffer = &buffers[load.s(0).s(0).global_slot()];
                    let first = self.aligned(index, temps.len(), buffer.len());
                    for (k, temp) in temps.iter().enumerate() {
                        self.temps.insert(*temp, buffer[first + k]);
                    }
                }
                Line::VectorStore {
                    store,
                    index,
                    values,
                } => {
                    let global = store.s(0).s(0);
                    let slot = global.global_slot();
                    let first = self.aligned(index, values.len(), buffers[slot].len());
                    for (k, v) in values.iter().enumerate() {
                        buffers[slot][first + k] = self.value(v).cast(global.dtype());
                    }
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

    /// The first element of a vector access of `lanes` elements at `v`, which must be a
    /// multiple of `lanes` (a GPU faults on a misaligned vector access) and in bounds.
    #[track_caller]
    fn aligned(&self, v: &Value, lanes: usize, len: usize) -> usize {
        let first = self.index(v, len);
        assert!(
            first.is_multiple_of(lanes),
            "emulator: a vector access of {lanes} elements at {first}, not a multiple of {lanes}"
        );
        assert!(
            first + lanes <= len,
            "emulator: a vector access of {lanes} elements at {first} of a buffer of {len}"
        );
        first
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
            l if l.opens_loop() => depth += 1,
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

/// The offset of the `EndIf` closing the `If` at `lines[0]`.
fn matching_end_if(lines: &[Line]) -> usize {
    let mut depth = 0usize;
    for (i, line) in lines.iter().enumerate() {
        match line {
            Line::If(_) => depth += 1,
            Line::EndIf => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("emulator: an If without its EndIf")
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
    use crate::codegen::{
        CodegenOptions, Opt, gpu_optimizations, lower_kernel_gpu, lower_kernel_gpu_with_opts,
    };
    use crate::schedule::{Schedule, create_schedule, exec};
    use crate::tensor::Tensor;
    use crate::transform::{grad, vmap};
    use crate::uop::dtype::decode_scalars;
    use crate::uop::{Arg, AxisType, BufferArg, DType};

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
        emulated_with(schedule, |ast, sizes| {
            lower_kernel_gpu(ast, sizes, &CodegenOptions::default(), "k")
        })
    }

    /// [`emulated`] with each kernel lowered by `lower` (from its AST and buffer sizes).
    fn emulated_with(
        schedule: &Schedule,
        lower: impl Fn(&UOp, &[usize]) -> GpuKernel,
    ) -> (Vec<Vec<Scalar>>, usize) {
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
            let kernel = lower(&item.ast, &item.buffer_sizes());
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
        check_within(name, outputs, 1e-5)
    }

    /// [`check`] with floats within `tol` relative plus `tol` absolute.
    #[track_caller]
    fn check_within(name: &str, outputs: &[Tensor], tol: f64) -> usize {
        let roots: Vec<UOp> = outputs.iter().map(|t| t.uop()).collect();
        let schedule = create_schedule(&roots);
        let got = emulated(&schedule);
        compare(name, &schedule, got, tol)
    }

    /// The emulated outputs `got` (with their thread count) equal the kernel ASTs of
    /// `schedule` run in Rust, floats within `tol`; returns the thread count.
    #[track_caller]
    fn compare(
        name: &str,
        schedule: &Schedule,
        (got, threads): (Vec<Vec<Scalar>>, usize),
        tol: f64,
    ) -> usize {
        let expected = exec::run(schedule);
        for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g.len(), e.len(), "{name}: output {k} length");
            for (i, (a, b)) in g.iter().zip(e).enumerate() {
                let (a, b) = (a.as_f64(), b.as_f64());
                let both_nan = a.is_nan() && b.is_nan();
                let close = a == b || both_nan || (a - b).abs() <= tol + tol * b.abs();
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
    fn a_one_hot_contraction_branches_on_the_grid_and_equals_the_cpu() {
        let ids: Vec<i64> = (0..24).map(|i| i * 5 % 11).collect();
        let tok = Tensor::from_vec(ids, &[24, 1]);
        let hot = tok.eq(Tensor::arange(16i64).reshape(&[1, 16]));
        let dy = data(&[24, 1, 8], 3);
        let rows = hot.unsqueeze(2).where_(&dy, 0.0).sum([0], false);
        let schedule = create_schedule(&[rows.uop()]);
        let item = &schedule.items[schedule.items.len() - 1];
        let sizes = item.buffer_sizes();
        let kernel = lower_kernel_gpu(&item.ast, &sizes, &CodegenOptions::default(), "k");
        let ifs = kernel.body.lines.iter();
        assert!(ifs.filter(|l| matches!(l, Line::If(_))).count() >= 1);
        // The first rows have matches (a gate that holds), the last rows none.
        check("gated row sums", &[rows]);
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
        // 1024 x 1024 outputs, a 4x4 tile per thread (the columns' upcast and the rows').
        let threads = check(
            "tiled matmul",
            &[data(&[1024, 16], 9).matmul(&data(&[16, 1024], 10))],
        );
        assert_eq!(threads, 1024 * 1024 / 16);
        check(
            "odd matmul",
            &[data(&[7, 13], 5).matmul(&data(&[13, 3], 6))],
        );
        check(
            "batched matmul",
            &[data(&[3, 5, 8], 7).matmul(&data(&[3, 8, 6], 8))],
        );
    }

    /// The opts of a block tile on a contraction's last two output ranges (rows, columns):
    /// 4 x 4 outputs per thread, 8 x 16 threads per block, the reduce staged 16 steps at a
    /// time.
    fn block_tile_opts(ast: &UOp) -> Vec<Opt> {
        block_tile_opts_with(ast, (4, 4), (8, 16), 16)
    }

    /// A block tile of `per_thread` (rows, columns) outputs per thread, `threads` (rows,
    /// columns) threads per block and reduce steps of `steps`.
    fn block_tile_opts_with(
        ast: &UOp,
        per_thread: (usize, usize),
        threads: (usize, usize),
        steps: usize,
    ) -> Vec<Opt> {
        use crate::codegen::opt::kernel_ranges;
        let ranges = kernel_ranges(ast);
        let id = |t: AxisType| -> Vec<usize> {
            let of_type = ranges.iter().filter(|r| r.range_axis_type() == t);
            of_type.map(UOp::range_id).collect()
        };
        let (outputs, reduce) = (id(AxisType::Loop), id(AxisType::Reduce)[0]);
        let (row, column) = (outputs[outputs.len() - 2], outputs[outputs.len() - 1]);
        let split = |axis, factor, target, top| Opt::Split {
            axis,
            factor,
            target,
            top,
        };
        vec![
            split(column, per_thread.1, AxisType::Upcast, true),
            split(row, per_thread.0, AxisType::Upcast, true),
            split(row, threads.0, AxisType::Local, false),
            split(column, threads.1, AxisType::Local, false),
            split(reduce, steps, AxisType::Reduce, false),
        ]
    }

    /// `out`'s kernels, a contraction's with [`block_tile_opts`], staged and emulated, equal
    /// the CPU; the contraction's kernel.
    #[track_caller]
    fn check_block_tile(name: &str, out: &Tensor) -> GpuKernel {
        let schedule = create_schedule(&[out.uop()]);
        let lower = |ast: &UOp, sizes: &[usize]| {
            let contraction = ast.toposort().iter().any(|u| u.op() == Op::Reduce);
            match contraction {
                true => lower_kernel_gpu_with_opts(ast, sizes, &block_tile_opts(ast), "k"),
                false => lower_kernel_gpu(ast, sizes, &CodegenOptions::default(), "k"),
            }
        };
        compare(name, &schedule, emulated_with(&schedule, lower), 1e-4);
        let item = schedule.items.last().expect("a kernel");
        let kernel = lower(&item.ast, &item.buffer_sizes());
        assert!(kernel.local.is_some(), "{name}: no block tile");
        let shared = kernel.body.lines.iter();
        let shared = shared.filter(|l| matches!(l, Line::DefineLocal { .. }));
        assert!(shared.count() > 0, "{name}: nothing staged");
        kernel
    }

    #[test]
    fn block_tiled_matmuls_staged_in_shared_memory_equal_the_cpu() {
        // 64 x 128 outputs in blocks of 32 x 64, the reduce in 3 steps of 16.
        check_block_tile("matmul", &data(&[64, 48], 30).matmul(&data(&[48, 128], 31)));
        // x @ w.T: the weight rows are read along the reduce (a padded tile).
        let w = data(&[128, 48], 32);
        check_block_tile("x @ w.T", &data(&[64, 48], 33).matmul(&w.transpose(0, 1)));
        check_block_tile(
            "batched",
            &data(&[2, 32, 32], 34).matmul(&data(&[2, 32, 64], 35)),
        );
        // An epilogue after the reduce, and a reduce longer than 4096 (its steps nested into
        // a sum of their own).
        let long = data(&[32, 4112], 36).matmul(&data(&[4112, 64], 37));
        check_block_tile("relu epilogue, K = 4112", &(long * 0.5).relu());
    }

    #[test]
    fn block_tiles_of_other_shapes_equal_the_cpu() {
        // The shapes `gpu_bench` times against the heuristic's: 8 x 8 and 4 x 8 per thread,
        // 16 x 8 threads, steps of 8 and 32.
        let out = data(&[128, 64], 40).matmul(&data(&[64, 256], 41));
        let schedule = create_schedule(&[out.uop()]);
        for (per_thread, threads, steps) in [
            ((8, 8), (8, 16), 8),
            ((8, 8), (16, 8), 8),
            ((4, 8), (16, 8), 16),
            ((8, 4), (8, 16), 32),
        ] {
            let lower = |ast: &UOp, sizes: &[usize]| {
                let opts = block_tile_opts_with(ast, per_thread, threads, steps);
                let kernel = lower_kernel_gpu_with_opts(ast, sizes, &opts, "k");
                let staged = kernel.body.lines.iter();
                let vector_reads = staged.filter(|l| matches!(l, Line::LocalVectorLoad { .. }));
                assert!(vector_reads.count() > 0, "{per_thread:?}: no vector reads");
                kernel
            };
            let name = format!("{per_thread:?} per thread, {threads:?} threads, steps {steps}");
            compare(&name, &schedule, emulated_with(&schedule, lower), 1e-4);
        }
    }

    #[test]
    fn a_large_matmul_gets_the_block_tile_emulated_above() {
        // 2^20 outputs: the heuristic picks 4 x 4 per thread and the same block tile, with
        // reduce steps of STAGE_STEPS, which is emulated on small shapes (a grid of 2^16
        // threads takes half a minute here).
        let out = data(&[1024, 64], 38).matmul(&data(&[64, 1024], 39));
        let schedule = create_schedule(&[out.uop()]);
        let ast = &schedule.items.last().unwrap().ast;
        let steps = crate::codegen::heuristic::STAGE_STEPS;
        assert_eq!(
            crate::codegen::gpu_optimizations(ast),
            block_tile_opts_with(ast, (4, 4), (8, 16), steps)
        );
    }

    #[test]
    fn every_barrier_of_a_staged_matmul_is_needed() {
        let out = data(&[64, 48], 40).matmul(&data(&[48, 128], 41));
        let kernel = check_block_tile("matmul", &out);
        let schedule = create_schedule(&[out.uop()]);
        assert_every_barrier_is_needed(&kernel, schedule.items.last().unwrap());
    }

    /// Without any one of `kernel`'s barriers (kernel of `item`), the emulator stops at a
    /// race: a thread reads a shared element another thread writes in the same phase.
    #[track_caller]
    fn assert_every_barrier_is_needed(kernel: &GpuKernel, item: &crate::schedule::ScheduleItem) {
        let lines = &kernel.body.lines;
        let barriers = (0..lines.len()).filter(|&i| matches!(lines[i], Line::Barrier));
        for at in barriers {
            let mut broken = kernel.clone();
            broken.body.lines.remove(at);
            let mut bufs: Vec<Vec<Scalar>> = item.buffers.iter().map(initial).collect();
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_on_grid(&broken, &mut bufs)
            }));
            assert!(caught.is_err(), "the barrier at line {at} is not checked");
        }
    }

    #[test]
    fn vector_accesses_on_the_grid_equal_the_cpu() {
        let x = data(&[4096], 42);
        let kernels = gpu_kernels(&[x.exp() * 2.0]);
        let vector = |l: &Line| matches!(l, Line::VectorLoad { .. } | Line::VectorStore { .. });
        assert!(kernels[0].body.lines.iter().any(vector));
        check("exp chain", &[((&x * 2.0 + 1.0).exp2() * &x).sqrt() * 0.5]);
        check("broadcast row", &[data(&[32, 64], 43) + data(&[64], 44)]);
        check(
            "offset view",
            &[data(&[4096], 45).shrink(&[(4, 4092)]) + 1.0],
        );
        check("two outputs", &[x.sin(), &x * &x]);
    }

    #[test]
    fn a_misaligned_vector_access_stops_the_emulator() {
        let schedule = create_schedule(&[(data(&[64], 46) * 2.0).uop()]);
        let item = &schedule.items[0];
        let mut kernel = lower_kernel_gpu(
            &item.ast,
            &item.buffer_sizes(),
            &CodegenOptions::default(),
            "k",
        );
        let lines = &mut kernel.body.lines;
        let at = lines
            .iter()
            .position(|l| matches!(l, Line::VectorLoad { .. }))
            .expect("a vector load");
        let Line::VectorLoad { index, .. } = &mut lines[at] else {
            unreachable!()
        };
        *index = Value::Const(UOp::constant(2i64, DType::Index));
        let mut bufs: Vec<Vec<Scalar>> = item.buffers.iter().map(initial).collect();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_on_grid(&kernel, &mut bufs)
        }));
        let message = caught.expect_err("a misaligned vector access must stop the emulator");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(text.contains("not a multiple of 4"), "{text}");
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

    /// The GPU kernels of `outputs`, lowered as the emulator runs them.
    fn gpu_kernels(outputs: &[Tensor]) -> Vec<GpuKernel> {
        let roots: Vec<UOp> = outputs.iter().map(|t| t.uop()).collect();
        lowered(&create_schedule(&roots))
    }

    /// The kernels of `schedule`, lowered as the emulator runs them.
    fn lowered(schedule: &Schedule) -> Vec<GpuKernel> {
        let opts = CodegenOptions::default();
        schedule
            .items
            .iter()
            .map(|item| lower_kernel_gpu(&item.ast, &item.buffer_sizes(), &opts, "k"))
            .collect()
    }

    /// The launch dims of the grouped kernels of `outputs` (blocks of 128 threads sharing
    /// one output each).
    fn grouped_dims(outputs: &[Tensor]) -> Vec<LaunchDims> {
        gpu_kernels(outputs)
            .iter()
            .filter(|k| k.group.is_some())
            .map(GpuKernel::launch_dims)
            .collect()
    }

    #[test]
    fn group_reductions_on_the_grid_equal_the_cpu() {
        use crate::codegen::group::GROUP_SIZE;
        // Scalars as a library op writes them (code, not values bound at run time).
        let _library = crate::tensor::LibraryScope::enter();
        let block = |grid, block| LaunchDims { grid, block };
        // Positive terms, so a sum in another order stays within 1e-4 of the CPU's.
        // The scheduler splits a sum of 65536 into 256 partial sums and their sum.
        let long = data(&[65536], 12).abs() + 0.5;
        assert_eq!(
            grouped_dims(&[long.sum_all()]),
            [block(256, GROUP_SIZE), block(1, GROUP_SIZE)]
        );
        assert_eq!(check_within("sum of 65536", &[long.sum_all()], 1e-4), 257);
        check("max of 65536", &[data(&[65536], 13).max_all()]);
        // Rows of 5000 = 40 x 125: blocks of 125 threads (the widest that divides a row).
        let rows = data(&[6, 5000], 14);
        assert_eq!(grouped_dims(&[rows.mean([1], false)]), [block(6, 125)]);
        check_within("mean of rows of 5000", &[rows.mean([1], false)], 1e-4);
        check(
            "max of rows of 1000",
            &[data(&[3, 1000], 15).max([1], true)],
        );
        let wide = data(&[8, 4096], 16);
        // A row's loads are contiguous along the reduce, so the rows are not upcast (the CPU
        // heuristic gives such a reduce partial accumulators instead): a block per row.
        let softmax_dims = grouped_dims(&[wide.softmax(-1)]);
        assert!(!softmax_dims.is_empty(), "softmax is not grouped");
        assert!(
            softmax_dims.iter().all(|d| *d == block(8, GROUP_SIZE)),
            "{softmax_dims:?}"
        );
        check_within("softmax rows of 4096", &[wide.softmax(-1)], 1e-4);
        check_within(
            "softmax rows of 300",
            &[data(&[5, 300], 17).softmax(-1)],
            1e-4,
        );
        check_within(
            "log_softmax rows of 777",
            &[data(&[4, 777], 18).log_softmax(-1)],
            1e-4,
        );
        // A matmul with few outputs and a long reduce: a block per column, whose lanes
        // split the reduce, each lane keeping the 4 rows (upcast) in registers.
        let narrow = data(&[4, 8192], 19).matmul(&data(&[8192, 3], 20));
        assert_eq!(
            grouped_dims(std::slice::from_ref(&narrow)),
            [block(3, GROUP_SIZE)]
        );
        check_within("matmul 4x8192 . 8192x3", &[narrow], 1e-4);
    }

    #[test]
    fn many_outputs_are_grouped_only_where_the_lanes_read_neighbours() {
        use crate::codegen::group::{GROUP_MAX_OUTPUTS, GROUP_SIZE};
        let _library = crate::tensor::LibraryScope::enter();
        let rows = GROUP_MAX_OUTPUTS + 256;
        // Row sums of a tall matrix: each row is contiguous, so a block per row.
        let tall = data(&[rows, 256], 21);
        let row_sums = tall.sum([1], false);
        assert_eq!(
            grouped_dims(std::slice::from_ref(&row_sums)),
            [LaunchDims {
                grid: rows,
                block: GROUP_SIZE
            }]
        );
        check_within("row sums of 4352 x 256", &[row_sums], 1e-4);
        // Column sums with more threads than that (after the upcast of 4): a thread per
        // column group already reads neighbours, and a block splitting a column would not.
        let columns = data(&[256, 8 * GROUP_MAX_OUTPUTS], 22).sum([0], false);
        let dims = grouped_dims(std::slice::from_ref(&columns));
        assert!(dims.is_empty(), "{dims:?}");
    }

    /// The kernel of `out` lowered for the GPU with the heuristic's GROUP splits changed by
    /// `change` (after its other opts), run on the emulated grid against the CPU.
    #[track_caller]
    fn check_group_variant(name: &str, out: &Tensor, change: impl Fn(Opt) -> Opt) {
        let schedule = create_schedule(&[out.uop()]);
        let lowered = emulated_with(&schedule, |ast, sizes| {
            let opts: Vec<Opt> = gpu_optimizations(ast).into_iter().map(&change).collect();
            let kernel = lower_kernel_gpu_with_opts(ast, sizes, &opts, "k");
            let grouped = opts.iter().any(|o| o.target() == AxisType::Group);
            assert_eq!(kernel.group.is_some(), grouped, "{name}: {opts:?}");
            kernel
        });
        compare(name, &schedule, lowered, 1e-4);
    }

    #[test]
    fn group_and_grouptop_splits_of_any_width_equal_the_cpu() {
        let grouptop = |opt: Opt| match opt {
            Opt::Split {
                axis,
                factor,
                target: AxisType::Group,
                ..
            } => Opt::Split {
                axis,
                factor,
                target: AxisType::Group,
                top: true,
            },
            other => other,
        };
        let narrower = |lanes: usize| {
            move |opt: Opt| match opt {
                Opt::Split {
                    axis,
                    target: AxisType::Group,
                    top,
                    ..
                } => Opt::Split {
                    axis,
                    factor: lanes,
                    target: AxisType::Group,
                    top,
                },
                other => other,
            }
        };
        let rows = data(&[6, 4096], 50).abs() + 0.5;
        let cases = [
            ("row sums", rows.sum([1], false)),
            ("row max", rows.max([1], false)),
            ("softmax", rows.softmax(-1)),
            ("variance", rows.var([1], false)),
            // Small integers: every order of the sum is exact in f32, the CPU's included.
            (
                "sum of 2^19",
                ((data(&[1 << 19], 51) * 4.0).floor().abs() + 1.0).sum_all(),
            ),
        ];
        for (name, out) in &cases {
            check_group_variant(&format!("{name}, GROUPTOP"), out, grouptop);
            check_group_variant(&format!("{name}, GROUP 64"), out, narrower(64));
            check_group_variant(&format!("{name}, GROUPTOP 32"), out, |o| {
                grouptop(narrower(32)(o))
            });
        }
    }

    /// The heuristic's GPU opts for `ast` and an UNROLL by `factor` of the first reduce range
    /// left that `factor` divides (`None` without one).
    fn with_unroll(ast: &UOp, factor: usize) -> Option<Vec<Opt>> {
        use crate::codegen::opt::{OptimizedKernel, kernel_ranges};
        let opts = gpu_optimizations(ast);
        let optimized = OptimizedKernel::new(ast).apply_all(&opts);
        let reduce = kernel_ranges(&optimized.ast).into_iter().find(|r| {
            r.range_axis_type() == AxisType::Reduce
                && r.range_size().is_some_and(|n| n.is_multiple_of(factor))
        })?;
        let unroll = Opt::Split {
            axis: reduce.range_id(),
            factor,
            target: AxisType::Unroll,
            top: false,
        };
        Some([opts, vec![unroll]].concat())
    }

    #[test]
    fn unrolled_reduces_on_the_grid_equal_the_cpu() {
        let rows = data(&[6, 4096], 52);
        let cases = [
            // A block per row: each lane's loop unrolled.
            ("row sums", rows.sum([1], false), 4),
            ("softmax", rows.softmax(-1), 4),
            // A thread per output: its reduce unrolled, fully for the 8 of the small one.
            (
                "matmul",
                data(&[12, 16], 53).matmul(&data(&[16, 20], 54)),
                4,
            ),
            ("sums of 8", data(&[64, 8], 55).sum([1], false), 8),
        ];
        for (name, out, factor) in &cases {
            let schedule = create_schedule(std::slice::from_ref(&out.uop()));
            let unrolled = schedule
                .items
                .iter()
                .any(|i| with_unroll(&i.ast, *factor).is_some());
            assert!(unrolled, "{name}: nothing to unroll");
            let lowered = emulated_with(&schedule, |ast, sizes| match with_unroll(ast, *factor) {
                Some(opts) => lower_kernel_gpu_with_opts(ast, sizes, &opts, "k"),
                None => lower_kernel_gpu(ast, sizes, &CodegenOptions::default(), "k"),
            });
            compare(name, &schedule, lowered, 1e-4);
        }
    }

    #[test]
    fn a_lanes_part_of_a_long_sum_is_blocked_and_combined_once() {
        use crate::codegen::blocked_sum::BLOCK;
        use crate::codegen::group::GROUP_SIZE;
        // 2^20 terms in one kernel (the scheduler would split the sum in two): 8192 per lane,
        // summed in 2 blocks of BLOCK.
        let long = data(&[1 << 20], 21).abs() + 0.5;
        let schedule = crate::schedule::create_schedule_unsplit(&[long.sum_all().uop()]);
        let kernels = lowered(&schedule);
        let [kernel] = kernels.as_slice() else {
            panic!("one kernel, not {}", kernels.len());
        };
        let loops: Vec<(bool, Option<usize>)> = kernel
            .body
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Loop(r) => Some((false, r.range_size())),
                Line::StridedLoop { range, .. } => Some((true, range.range_size())),
                _ => None,
            })
            .collect();
        let per_lane = (1 << 20) / GROUP_SIZE / BLOCK;
        assert_eq!(
            loops,
            [
                (false, Some(per_lane)),
                (false, Some(BLOCK)),
                (true, Some(GROUP_SIZE))
            ],
            "blocks, a block's terms, the lane's term"
        );
        let shared = |l: &&Line| matches!(l, Line::DefineLocal { .. });
        assert_eq!(
            kernel.body.lines.iter().filter(shared).count(),
            1,
            "the blocks' parts fold into the lane's total, combined once"
        );
        // Against the sum in f64 (the kernel AST run in Rust adds 2^20 terms one by one in
        // f32).
        let (got, _) = emulated(&schedule);
        let exact: f64 = crate::interp::evaluate(&long.uop())
            .to_f64_vec()
            .iter()
            .sum();
        let error = (got[0][0].as_f64() - exact).abs() / exact;
        assert!(error < 1e-6, "{} against {exact}", got[0][0].as_f64());
        check_within(
            "mean of rows of 20000",
            &[data(&[3, 20000], 22).mean([1], false)],
            1e-4,
        );
    }

    #[test]
    fn a_combine_inside_a_loop_waits_before_the_next_iteration() {
        // The squares of row sums, summed: the kernel loops over the rows, and the lanes'
        // parts of each row's sum are combined before it is squared.
        let out = data(&[8, 4096], 24).sum([1], false).square().sum_all();
        let kernels = gpu_kernels(std::slice::from_ref(&out));
        let [kernel] = kernels.as_slice() else {
            panic!("one kernel, not {}", kernels.len());
        };
        assert!(kernel.group.is_some());
        let opens = kernel
            .body
            .lines
            .iter()
            .position(|l| matches!(l, Line::Loop(_)));
        let shared = kernel
            .body
            .lines
            .iter()
            .position(|l| matches!(l, Line::DefineLocal { .. }));
        assert!(opens < shared, "the combine is inside the loop over rows");
        check_within("sum of squared row sums", std::slice::from_ref(&out), 1e-4);
        let schedule = create_schedule(&[out.uop()]);
        assert_every_barrier_is_needed(kernel, &schedule.items[0]);
    }

    #[test]
    fn a_block_combines_its_parts_in_a_tree_of_log2_steps() {
        use crate::codegen::group::GROUP_SIZE;
        let kernels = gpu_kernels(&[data(&[4096], 20).sum_all()]);
        let [kernel] = kernels.as_slice() else {
            panic!("one kernel, not {}", kernels.len());
        };
        let count = |f: fn(&Line) -> bool| kernel.body.lines.iter().filter(|l| f(l)).count();
        let steps = GROUP_SIZE.trailing_zeros() as usize;
        // One barrier after the parts are stored, one after each step.
        assert_eq!(count(|l| matches!(l, Line::Barrier)), 1 + steps);
        // Each step reads two parts; then every thread reads the total.
        assert_eq!(
            count(|l| matches!(l, Line::LocalLoad { .. })),
            2 * steps + 1
        );
        // Every step's barrier is needed.
        let schedule = create_schedule(&[data(&[4096], 20).sum_all().uop()]);
        assert_every_barrier_is_needed(kernel, &schedule.items[0]);
    }

    #[test]
    fn a_combine_without_its_barrier_is_a_race() {
        let schedule = create_schedule(&[data(&[4096], 19).sum_all().uop()]);
        let item = &schedule.items[0];
        let opts = CodegenOptions::default();
        let mut kernel = lower_kernel_gpu(&item.ast, &item.buffer_sizes(), &opts, "k");
        assert!(kernel.group.is_some());
        let mut bufs: Vec<Vec<Scalar>> = item.buffers.iter().map(initial).collect();
        // Intact, it runs.
        run_on_grid(&kernel, &mut bufs);
        let lines = &mut kernel.body.lines;
        let at = lines
            .iter()
            .position(|l| matches!(l, Line::Barrier))
            .unwrap();
        lines.remove(at);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_on_grid(&kernel, &mut bufs)
        }));
        let message = caught.expect_err("a race must stop the emulator");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(
            text.contains("race") || text.contains("before any write"),
            "{text}"
        );
    }
}
