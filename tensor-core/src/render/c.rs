//! The C renderer: a linearized kernel as readable, self-contained C11.
//!
//! Conventions of the output:
//! - buffers are `data0, data1, ...` by slot (`restrict`, `const` for inputs); loop variables
//!   `gidx<id>` (output axes), `ridx<id>` (reduce axes) and `lane<id>` (LANE axes); `val<n>`
//!   loaded values, `alu<n>` computed values, `acc<n>` accumulators. A computed value used once
//!   in the same loop body is written inline into its user.
//! - The accumulator of a Reduce with a LANE range is an array, one partial sum (product,
//!   maximum) per lane, updated in the lane loop (`acc3[lane6] += ...`,
//!   `acc3[lane6] = max_f32(acc3[lane6], ...)`) and folded pairwise where it is read: a plain
//!   loop of independent updates, which gcc vectorizes even at `-O2` (it does not reassociate
//!   a float sum itself, nor pack scalar accumulators updated in a loop).
//! - Every value means what `uop::alu` says: integer arithmetic wraps (through unsigned types
//!   where C would overflow), integer division by zero gives 0, `Max` propagates NaN, float
//!   transcendentals are computed in double and rounded once, like `alu` does; a float
//!   `Mulacc` is `fmaf`/`fma` (rounded once).
//! - `f16` and `bf16` values are computed in `float` and rounded to their type after every op
//!   (`f16_round`, `bf16_round`), which gives the same results as native half arithmetic
//!   without relying on compiler support for it; `f16` is stored as `_Float16` and `bf16` as
//!   its 16 bits in an `unsigned short`.
//! - Index arithmetic is `int` when every index value of the kernel fits in 32 bits, else
//!   `long long`.

use super::c_helpers::{self as helpers, storage_type, tag};
use super::{Kernel, Launch};
use crate::codegen::program::{KernelArg, Line, LinearKernel, Program, Value};
use crate::uop::{AxisType, DType, Op, ReduceOp, Scalar, UOp};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

/// A linearized kernel rendered as C: its source (see [`render`]), its entry trampoline
/// `<name>_entry`, its core count and its buffer arguments.
pub fn render_kernel(kernel: &LinearKernel) -> Kernel {
    Kernel::rendered(
        kernel.name.clone(),
        render(&kernel.name, &kernel.program, &kernel.args),
        format!("{}_entry", kernel.name),
        Launch::Cores(kernel.program.threads),
        kernel.args.clone(),
    )
}

/// The C source of a kernel: includes, helpers, the function `name`, and its entry
/// trampoline `<name>_entry(void** bufs, int core_id)`.
pub fn render(name: &str, program: &Program, args: &[KernelArg]) -> String {
    let mut renderer = CRenderer::new(program, args);
    let body = renderer.body();
    let params = parameters(args, program.threads);
    let mut out = String::from(
        "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n#include <string.h>\n\n",
    );
    // Each helper is guarded, so the sources of several kernels can be compiled as one unit.
    for (helper, code) in &renderer.helpers {
        let guard = helper_guard(helper);
        let _ = writeln!(
            out,
            "#ifndef {guard}\n#define {guard}\n{}\n#endif",
            code.trim_end()
        );
    }
    if !renderer.helpers.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, "void {name}({}) {{", params.join(", "));
    out.push_str(&body);
    out.push_str("}\n\n");
    out.push_str(&entry(name, args, program.threads));
    out
}

/// A program's statements as C, indented one level, with the helper functions they call
/// (by name) and the C type of index values: for a renderer that wraps them in a function of
/// its own (`render::cuda`).
pub(crate) struct Statements {
    /// The lines of the function body.
    pub body: String,
    /// `static inline` helper functions, by name.
    pub helpers: BTreeMap<String, String>,
    /// `int` or `long long`.
    pub index_type: &'static str,
}

/// The statements of `program` (see [`Statements`]).
pub(crate) fn statements(program: &Program, args: &[KernelArg]) -> Statements {
    let mut renderer = CRenderer::new(program, args);
    let body = renderer.body();
    Statements {
        body,
        helpers: renderer.helpers,
        index_type: renderer.index_type,
    }
}

/// The include-guard macro of the helper `name`.
pub(crate) fn helper_guard(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("TENSOR_HELPER_{name}")
}

fn parameters(args: &[KernelArg], threads: usize) -> Vec<String> {
    let mut params: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(slot, a)| format!("{}* restrict data{slot}", pointee(a)))
        .collect();
    if threads > 1 {
        params.push("int core_id".to_string());
    }
    params
}

fn pointee(a: &KernelArg) -> String {
    let ty = storage_type(a.dtype);
    if a.writes {
        ty.to_string()
    } else {
        format!("const {ty}")
    }
}

fn entry(name: &str, args: &[KernelArg], threads: usize) -> String {
    let mut call: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(slot, a)| format!("({}*)bufs[{slot}]", pointee(a)))
        .collect();
    let mut out = format!("void {name}_entry(void** bufs, int core_id) {{\n");
    if threads > 1 {
        call.push("core_id".to_string());
    } else {
        out.push_str("  (void)core_id;\n");
    }
    if args.is_empty() {
        out.push_str("  (void)bufs;\n");
    }
    let _ = writeln!(out, "  {name}({});\n}}", call.join(", "));
    out
}

/// The longest expression (in characters) written inline into its user; a longer one is
/// named. Without a bound, a chain of single-use values nests into one expression that every
/// step copies (time and memory quadratic in the chain), and the C compiler's parser recurses
/// as deep as the nesting.
pub const MAX_INLINE_CHARS: usize = 512;

struct CRenderer<'a> {
    program: &'a Program,
    index_type: &'static str,
    helpers: BTreeMap<String, String>,
    names: HashMap<usize, String>,
    inline: HashSet<usize>,
    exprs: HashMap<usize, String>,
    loads: usize,
    alus: usize,
    /// The accumulators of Reduces with a LANE range: their lane range, reduce op and dtype.
    lane_accs: HashMap<usize, (UOp, ReduceOp, DType)>,
}

impl<'a> CRenderer<'a> {
    fn new(program: &'a Program, args: &[KernelArg]) -> CRenderer<'a> {
        CRenderer {
            program,
            index_type: index_type(program, args),
            helpers: BTreeMap::new(),
            names: HashMap::new(),
            inline: inlinable_temps(&program.lines),
            exprs: HashMap::new(),
            loads: 0,
            alus: 0,
            lane_accs: HashMap::new(),
        }
    }

    fn body(&mut self) -> String {
        let mut out = String::new();
        let mut depth = 1;
        for line in &self.program.lines {
            if matches!(line, Line::EndLoop | Line::EndIf) {
                depth -= 1;
            }
            if let Some(text) = self.line(line) {
                let _ = writeln!(out, "{}{text}", "  ".repeat(depth));
            }
            // An inline temp has one use: this line, which has just copied its text.
            for v in line.reads() {
                if let Value::Temp(t) = v {
                    self.exprs.remove(t);
                }
            }
            if line.opens_loop() || matches!(line, Line::If(_)) {
                depth += 1;
            }
        }
        out
    }

    fn line(&mut self, line: &Line) -> Option<String> {
        Some(match line {
            Line::Loop(r) => self.loop_header(r),
            Line::EndLoop | Line::EndIf => "}".to_string(),
            Line::If(cond) => format!("if ({}) {{", self.bare(cond)),
            Line::DefineAcc { acc, reduce } => self.define_acc(*acc, reduce),
            Line::Accumulate {
                acc,
                op,
                reduce,
                value,
            } => self.accumulate(*acc, *op, reduce.dtype(), value),
            Line::Assign {
                temp,
                node,
                operands,
            } => {
                let expr = if node.op() == Op::Load {
                    self.load(node, operands)
                } else {
                    self.alu(node, operands)
                };
                if self.inline.contains(temp) && expr.len() <= MAX_INLINE_CHARS {
                    self.exprs.insert(*temp, expr);
                    return None;
                }
                let name = self.fresh_name(*temp, node.op() == Op::Load);
                format!("{} {name} = {expr};", self.ctype(node.dtype()))
            }
            Line::Store {
                store,
                index,
                gate,
                value,
            } => self.store(store, index, gate.as_ref(), value),
            // The lines below appear only in GPU kernels (`codegen::group`), printed as CUDA.
            Line::StridedLoop { range, lane, lanes } => {
                let (var, it) = (range_name(range), self.index_type);
                let size = range
                    .range_size()
                    .expect("rendered ranges have constant sizes");
                let start = range_name(lane);
                match size == *lanes {
                    // A GROUP loop: one value per thread of the block, its position.
                    true => format!("{{ const {it} {var} = {start};"),
                    false => {
                        format!("for ({it} {var} = {start}; {var} < {size}; {var} += {lanes}) {{")
                    }
                }
            }
            Line::DefineLocal { local, dtype, size } => {
                format!(
                    "__shared__ __align__(16) {} local{local}[{size}];",
                    self.ctype(*dtype)
                )
            }
            Line::LocalStore {
                local,
                index,
                value,
            } => format!("local{local}[{}] = {};", self.bare(index), self.bare(value)),
            Line::LocalLoad {
                temp,
                local,
                dtype,
                index,
            } => {
                let name = self.fresh_name(*temp, true);
                let ty = self.ctype(*dtype);
                format!("{ty} {name} = local{local}[{}];", self.bare(index))
            }
            Line::LocalVectorLoad {
                temps,
                local,
                index,
            } => self.local_vector_load(temps, *local, index),
            Line::Barrier => "__syncthreads();".to_string(),
            Line::VectorLoad { temps, load, index } => self.vector_load(temps, load, index),
            Line::VectorStore {
                store,
                index,
                values,
            } => self.vector_store(store, index, values),
        })
    }

    /// `float4 vecN = *(const float4*)(dataS + index);` and one `float` per element.
    fn vector_load(&mut self, temps: &[usize], load: &UOp, index: &Value) -> String {
        let slot = load.s(0).s(0).global_slot();
        self.vector_read(temps, &format!("data{slot}"), index)
    }

    /// `float4 vecN = *(const float4*)(localL + index);` and one `float` per element.
    fn local_vector_load(&mut self, temps: &[usize], local: usize, index: &Value) -> String {
        self.vector_read(temps, &format!("local{local}"), index)
    }

    /// `float4 vecN = *(const float4*)(array + index);` and one `float` per element.
    fn vector_read(&mut self, temps: &[usize], array: &str, index: &Value) -> String {
        let vector = format!("vec{}", self.loads);
        let mut text = format!(
            "float4 {vector} = *(const float4*)({array} + {});",
            self.atom(index)
        );
        for (temp, lane) in temps.iter().zip(["x", "y", "z", "w"]) {
            let name = self.fresh_name(*temp, true);
            let _ = write!(text, " float {name} = {vector}.{lane};");
        }
        text
    }

    /// `*(float4*)(dataS + index) = float4{a, b, c, d};`
    fn vector_store(&mut self, store: &UOp, index: &Value, values: &[Value]) -> String {
        let slot = store.s(0).s(0).global_slot();
        let values: Vec<String> = values.iter().map(|v| self.bare(v)).collect();
        format!(
            "*(float4*)(data{slot} + {}) = float4{{{}}};",
            self.atom(index),
            values.join(", ")
        )
    }

    fn fresh_name(&mut self, temp: usize, is_load: bool) -> String {
        let name = if is_load {
            self.loads += 1;
            format!("val{}", self.loads - 1)
        } else {
            self.alus += 1;
            format!("alu{}", self.alus - 1)
        };
        self.names.insert(temp, name.clone());
        name
    }

    fn loop_header(&self, r: &UOp) -> String {
        let var = range_name(r);
        let it = self.index_type;
        let size = r.range_size().expect("rendered ranges have constant sizes");
        if r.range_axis_type() == AxisType::Thread {
            let t = self.program.threads;
            return format!(
                "for ({it} {var} = core_id * {size}LL / {t}; {var} < (core_id + 1) * {size}LL / {t}; {var}++) {{"
            );
        }
        format!("for ({it} {var} = 0; {var} < {size}; {var}++) {{")
    }

    /// The C type a value of `dtype` is computed in.
    fn ctype(&self, dtype: DType) -> &'static str {
        match dtype {
            DType::F16 | DType::BF16 => "float",
            DType::Index => self.index_type,
            other => other.c_name(),
        }
    }

    /// An operand as a C expression that can stand next to an operator.
    fn atom(&self, v: &Value) -> String {
        match v {
            Value::Temp(t) if self.exprs.contains_key(t) => format!("({})", self.exprs[t]),
            Value::Const(c) => {
                let s = self.literal(c);
                if s.starts_with('-') {
                    format!("({s})")
                } else {
                    s
                }
            }
            other => self.bare(other),
        }
    }

    /// An operand as a C expression in a position that needs no parentheses.
    fn bare(&self, v: &Value) -> String {
        match v {
            Value::Temp(t) => match self.exprs.get(t) {
                Some(e) => e.clone(),
                None => self.names[t].clone(),
            },
            Value::Acc(a) => self.acc_value(*a),
            Value::Range(r) => range_name(r),
            Value::Const(c) => self.literal(c),
        }
    }

    fn literal(&self, c: &UOp) -> String {
        let value = c.const_value().expect("a Const");
        literal(value, c.dtype(), self.index_type)
    }

    fn identity(&self, op: ReduceOp, dtype: DType) -> String {
        literal(op.identity(dtype), dtype, self.index_type)
    }

    /// The declaration of an accumulator: a scalar, or an array of one partial accumulator
    /// per value of the Reduce's LANE range (`f32`/`f64` sums, products and maxima).
    fn define_acc(&mut self, acc: usize, reduce: &UOp) -> String {
        let (ct, dtype) = (self.ctype(reduce.dtype()), reduce.dtype());
        let identity = self.identity(reduce.reduce_op(), dtype);
        let Some(lane) = lane_range(reduce) else {
            return format!("{ct} acc{acc} = {identity};");
        };
        let op = reduce.reduce_op();
        assert!(
            matches!(dtype, DType::F32 | DType::F64),
            "C renderer: LANE accumulators hold f32/f64 values, not {dtype}"
        );
        let lanes = lane.range_size().expect("a LANE range has a constant size");
        if op == ReduceOp::Max {
            self.helper(&format!("max_{}", tag(dtype)), helpers::max(dtype, ct));
        }
        self.lane_accs.insert(acc, (lane, op, dtype));
        format!(
            "{ct} acc{acc}[{lanes}] = {{{}}};",
            vec![identity; lanes].join(", ")
        )
    }

    /// An accumulator read after its loops: a LANE accumulator's elements folded pairwise.
    fn acc_value(&self, acc: usize) -> String {
        let Some((lane, op, dtype)) = self.lane_accs.get(&acc) else {
            return format!("acc{acc}");
        };
        let fold = |a: &str, b: &str| match op {
            ReduceOp::Add => format!("({a} + {b})"),
            ReduceOp::Mul => format!("({a} * {b})"),
            ReduceOp::Max => format!("max_{}({a}, {b})", tag(*dtype)),
        };
        let mut terms: Vec<String> = (0..lane.range_size().unwrap_or(1))
            .map(|l| format!("acc{acc}[{l}]"))
            .collect();
        while terms.len() > 1 {
            terms = terms
                .chunks(2)
                .map(|p| match p {
                    [a, b] => fold(a, b),
                    [a] => a.clone(),
                    _ => unreachable!("chunks of two"),
                })
                .collect();
        }
        terms.remove(0)
    }

    fn accumulate(&mut self, acc: usize, op: ReduceOp, dtype: DType, value: &Value) -> String {
        let name = match self.lane_accs.get(&acc) {
            Some((lane, _, _)) => format!("acc{acc}[{}]", range_name(lane)),
            None => format!("acc{acc}"),
        };
        let native = matches!(dtype, DType::F32 | DType::F64 | DType::U32 | DType::U64);
        match op {
            ReduceOp::Max if self.lane_accs.contains_key(&acc) => {
                let value = self.bare(value);
                format!("{name} = max_{}({name}, {value});", tag(dtype))
            }
            ReduceOp::Add if native => format!("{name} += {};", self.bare(value)),
            ReduceOp::Mul if native => format!("{name} *= {};", self.bare(value)),
            _ => {
                let expr = self.binary(op.binary(), dtype, dtype, &Value::Acc(acc), value, None);
                let expr = self.round_narrow(dtype, expr);
                format!("{name} = {expr};")
            }
        }
    }

    fn load(&mut self, load: &UOp, operands: &[Value]) -> String {
        let slot = load.s(0).s(0).global_slot();
        let read = format!("data{slot}[{}]", self.bare(&operands[0]));
        let read = match load.dtype() {
            DType::F16 => format!("(float){read}"),
            DType::BF16 => {
                self.helper("bf16", helpers::BF16.to_string());
                format!("bf16_to_float({read})")
            }
            _ => read,
        };
        match operands.get(1) {
            Some(gate) => {
                let zero = literal(
                    Scalar::Int(0).cast(load.dtype()),
                    load.dtype(),
                    self.index_type,
                );
                format!("{} ? {read} : {zero}", self.atom(gate))
            }
            None => read,
        }
    }

    fn store(&mut self, store: &UOp, index: &Value, gate: Option<&Value>, value: &Value) -> String {
        let slot = store.s(0).s(0).global_slot();
        let dtype = store.s(0).s(0).dtype();
        let v = self.bare(value);
        let v = match dtype {
            DType::F16 => format!("(_Float16){}", self.atom(value)),
            DType::BF16 => {
                self.helper("bf16", helpers::BF16.to_string());
                format!("float_to_bf16({v})")
            }
            _ => v,
        };
        let assign = format!("data{slot}[{}] = {v};", self.bare(index));
        match gate {
            Some(g) => format!("if ({}) {assign}", self.bare(g)),
            None => assign,
        }
    }

    fn helper(&mut self, name: &str, code: String) {
        self.helpers.entry(name.to_string()).or_insert(code);
    }

    /// The C expression of an ALU node, rounded to `f16`/`bf16` where the node has that type.
    fn alu(&mut self, node: &UOp, operands: &[Value]) -> String {
        let dtype = node.dtype();
        let operand_dtype = match node.op() {
            Op::Where => node.s(1).dtype(),
            _ => node.s(0).dtype(),
        };
        let expr = match node.op() {
            Op::Where => format!(
                "{} ? {} : {}",
                self.atom(&operands[0]),
                self.atom(&operands[1]),
                self.atom(&operands[2])
            ),
            Op::Cast => self.cast(operand_dtype, dtype, &operands[0]),
            Op::Bitcast => return self.bitcast(operand_dtype, dtype, &operands[0]),
            Op::Threefry => {
                self.helper("threefry", helpers::THREEFRY.to_string());
                format!(
                    "threefry2x32({}, {})",
                    self.bare(&operands[0]),
                    self.bare(&operands[1])
                )
            }
            Op::Mulacc if dtype.is_float() => {
                let name = if dtype == DType::F64 { "fma" } else { "fmaf" };
                let [a, b, c] = [0, 1, 2].map(|i| self.bare(&operands[i]));
                format!("{name}({a}, {b}, {c})")
            }
            Op::Mulacc => {
                let product = self.binary(
                    Op::Mul,
                    dtype,
                    operand_dtype,
                    &operands[0],
                    &operands[1],
                    None,
                );
                let product = format!("({})", self.round_narrow(dtype, product));
                let addend = self.atom(&operands[2]);
                let sum = self.binary_str(Op::Add, dtype, &product, &addend, Some(operand_dtype));
                return self.round_narrow(dtype, sum);
            }
            op if operands.len() == 1 => self.unary(op, dtype, &operands[0]),
            op => self.binary(
                op,
                dtype,
                operand_dtype,
                &operands[0],
                &operands[1],
                node.src().get(1),
            ),
        };
        if matches!(node.op(), Op::Where | Op::Cast) {
            return expr;
        }
        self.round_narrow(dtype, expr)
    }

    fn round_narrow(&mut self, dtype: DType, expr: String) -> String {
        match dtype {
            DType::F16 => {
                self.helper("f16", helpers::F16_ROUND.to_string());
                format!("f16_round({expr})")
            }
            DType::BF16 => {
                self.helper("bf16", helpers::BF16.to_string());
                format!("bf16_round({expr})")
            }
            _ => expr,
        }
    }

    fn unary(&mut self, op: Op, dtype: DType, a: &Value) -> String {
        let x = self.atom(a);
        let bare = self.bare(a);
        let f32_like = matches!(dtype, DType::F32 | DType::F16 | DType::BF16);
        let math = |name: &str| {
            if f32_like {
                format!("(float){name}({bare})")
            } else {
                format!("{name}({bare})")
            }
        };
        if dtype.is_float() {
            return match op {
                Op::Recip if f32_like => format!("1.0f / {x}"),
                Op::Recip => format!("1.0 / {x}"),
                Op::Neg => format!("-{x}"),
                Op::Trunc if f32_like => format!("truncf({bare})"),
                Op::Trunc => format!("trunc({bare})"),
                Op::Sqrt if f32_like => format!("sqrtf({bare})"),
                Op::Sqrt => format!("sqrt({bare})"),
                Op::Exp2 => math("exp2"),
                Op::Log2 => math("log2"),
                Op::Sin => math("sin"),
                Op::Cos => math("cos"),
                Op::Erf => math("erf"),
                Op::Erfc => math("erfc"),
                op => panic!("C renderer: {op} is not a unary float op"),
            };
        }
        let ct = self.ctype(dtype);
        match op {
            Op::Trunc => bare,
            Op::Neg if matches!(dtype, DType::I32 | DType::I64) => {
                format!("({ct})(0 - ({}){x})", helpers::unsigned_of(dtype))
            }
            Op::Neg => self.wrapping(dtype, &format!("-{x}"), ct),
            Op::Recip => {
                let one = Value::Const(UOp::constant(1, dtype));
                self.binary(Op::Idiv, dtype, dtype, &one, a, None)
            }
            Op::Exp2 | Op::Log2 | Op::Sin | Op::Cos | Op::Erf | Op::Erfc | Op::Sqrt => {
                let name = format!("{op:?}").to_lowercase();
                let operand = if dtype == DType::U64 {
                    format!("(double)(unsigned long long){x}")
                } else {
                    format!("(double){x}")
                };
                self.float_to_int(dtype, &format!("{name}({operand})"))
            }
            op => panic!("C renderer: {op} is not a unary op on {dtype}"),
        }
    }

    /// `a op b` for a node of dtype `dtype` whose operands have dtype `operand`. `divisor`
    /// is the node of `b`, for deciding whether a division needs its zero guard.
    fn binary(
        &mut self,
        op: Op,
        dtype: DType,
        operand: DType,
        a: &Value,
        b: &Value,
        divisor: Option<&UOp>,
    ) -> String {
        // On bools (0 or 1, any non-zero result is true) these are the logical ops.
        let op = match (dtype, op) {
            (DType::Bool, Op::Add | Op::Max) => Op::Or,
            (DType::Bool, Op::Mul) => Op::And,
            (DType::Bool, Op::Sub) => Op::Xor,
            _ => op,
        };
        if op == Op::Max
            || op == Op::Pow
            || (matches!(op, Op::Idiv | Op::Mod | Op::Div) && operand.is_int())
        {
            let (a, b) = (self.bare(a), self.bare(b));
            return self.binary_call(op, dtype, &a, &b, divisor);
        }
        if matches!(op, Op::Shl | Op::Shr) {
            let amount_ok = divisor.is_some_and(|amount| {
                let width = if dtype == DType::Bool {
                    1
                } else {
                    dtype.bits() as i64
                };
                amount.vmin().as_i64() >= 0 && amount.vmax().as_i64() < width
            });
            let (sa, sb) = (self.atom(a), self.atom(b));
            if !amount_ok {
                let ct = self.ctype(dtype);
                self.helper(&format!("shift_{}", tag(dtype)), helpers::shifts(dtype, ct));
                let name = if op == Op::Shl { "shl" } else { "shr" };
                return format!("{name}_{}({}, {})", tag(dtype), self.bare(a), self.bare(b));
            }
            let ct = self.ctype(dtype);
            if op == Op::Shl && matches!(dtype, DType::I32 | DType::I64) {
                let u = helpers::unsigned_of(dtype);
                return format!("({ct})(({u}){sa} << {sb})");
            }
            return self.wrapping(dtype, &format!("{sa} {} {sb}", c_operator(op)), ct);
        }
        let (sa, sb) = (self.atom(a), self.atom(b));
        self.binary_str(op, dtype, &sa, &sb, Some(operand))
    }

    /// An infix binary op on rendered operands, wrapped to the integer width of `dtype`.
    fn binary_str(&self, op: Op, dtype: DType, a: &str, b: &str, operand: Option<DType>) -> String {
        let ct = self.ctype(dtype);
        if op == Op::Div && dtype.is_float()
            || op.is_comparison()
            || matches!(op, Op::Xor | Op::Or | Op::And)
        {
            return format!("{a} {} {b}", c_operator(op));
        }
        if op == Op::Mod && operand.is_some_and(|d| d.is_float()) {
            return if matches!(dtype, DType::F64) {
                format!("fmod({a}, {b})")
            } else {
                format!("fmodf({a}, {b})")
            };
        }
        if op == Op::Idiv && dtype.is_float() {
            return format!("({ct})trunc((double){a} / (double){b})");
        }
        let arith = matches!(op, Op::Add | Op::Sub | Op::Mul);
        assert!(arith, "C renderer: {op} is not an infix op on {dtype}");
        if matches!(dtype, DType::I32 | DType::I64) {
            let u = helpers::unsigned_of(dtype);
            return format!("({ct})(({u}){a} {} ({u}){b})", c_operator(op));
        }
        self.wrapping(dtype, &format!("{a} {} {b}", c_operator(op)), ct)
    }

    /// `expr` converted back to a narrow integer type after C's promotion to `int`.
    fn wrapping(&self, dtype: DType, expr: &str, ct: &str) -> String {
        match dtype {
            DType::I8 | DType::I16 | DType::U8 | DType::U16 | DType::Bool => {
                format!("({ct})({expr})")
            }
            _ => expr.to_string(),
        }
    }

    /// Ops rendered as helper calls: `Max`, `Pow`, and integer division and remainder
    /// (plain `/` and `%` where the divisor can be neither 0 nor -1).
    fn binary_call(
        &mut self,
        op: Op,
        dtype: DType,
        a: &str,
        b: &str,
        divisor: Option<&UOp>,
    ) -> String {
        let ct = self.ctype(dtype);
        let t = tag(dtype);
        match op {
            Op::Max => {
                self.helper(&format!("max_{t}"), helpers::max(dtype, ct));
                format!("max_{t}({a}, {b})")
            }
            Op::Pow if dtype.is_float() => {
                let call = format!("pow({a}, {b})");
                if dtype == DType::F64 {
                    call
                } else {
                    format!("(float){call}")
                }
            }
            Op::Pow => {
                self.helper(&format!("pow_{t}"), helpers::ipow(dtype, ct));
                format!("pow_{t}({a}, {b})")
            }
            _ => {
                let safe = divisor.is_some_and(|d| {
                    let (lo, hi) = (d.vmin().as_i64(), d.vmax().as_i64());
                    let excludes_zero = lo > 0 || hi < 0;
                    let excludes_minus_one = dtype.is_unsigned_int() || lo >= 0 || hi < -1;
                    excludes_zero && excludes_minus_one && d.dtype() != DType::U64
                });
                let name = if op == Op::Mod { "mod" } else { "idiv" };
                if safe {
                    let sym = if op == Op::Mod { "%" } else { "/" };
                    let wrap = |s: String| self.wrapping(dtype, &s, ct);
                    return wrap(format!("{} {sym} {}", paren(a), paren(b)));
                }
                self.helper(&format!("divmod_{t}"), helpers::idiv_mod(dtype, ct));
                format!("{name}_{t}({a}, {b})")
            }
        }
    }

    fn cast(&mut self, from: DType, to: DType, a: &Value) -> String {
        let x = self.atom(a);
        if to.is_float() {
            let ct = self.ctype(to);
            let via_double = from.is_int() && from.size_bytes() == 8 && to != DType::F64;
            let converted = if via_double {
                format!("({ct})(double){x}")
            } else {
                format!("({ct}){x}")
            };
            return if from == to {
                converted
            } else {
                self.round_narrow(to, converted)
            };
        }
        if from.is_float() && to != DType::Bool {
            return self.float_to_int(to, &self.bare(a));
        }
        format!("({}){x}", self.ctype(to))
    }

    fn float_to_int(&mut self, to: DType, expr: &str) -> String {
        self.helper("cast_f2i", helpers::FLOAT_TO_INT.to_string());
        let ct = self.ctype(to);
        if to.is_unsigned_int() {
            format!("({ct})cast_f2u({expr})")
        } else {
            format!("({ct})cast_f2i({expr})")
        }
    }

    fn bitcast(&mut self, from: DType, to: DType, a: &Value) -> String {
        let x = self.bare(a);
        let (from_c, source) = match from {
            DType::F16 => ("_Float16", format!("(_Float16){}", self.atom(a))),
            DType::BF16 => {
                self.helper("bf16", helpers::BF16.to_string());
                ("unsigned short", format!("float_to_bf16({x})"))
            }
            other => (self.ctype(other), x),
        };
        let to_c = match to {
            DType::F16 => "_Float16",
            DType::BF16 => "unsigned short",
            other => self.ctype(other),
        };
        let name = format!("bitcast_{}_{}", tag(from), tag(to));
        self.helper(&name, helpers::bitcast(from, from_c, to, to_c));
        let call = format!("{name}({source})");
        match to {
            DType::F16 => format!("(float){call}"),
            DType::BF16 => format!("bf16_to_float({call})"),
            _ => call,
        }
    }
}

fn paren(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        s.to_string()
    } else {
        format!("({s})")
    }
}

fn c_operator(op: Op) -> &'static str {
    match op {
        Op::Add => "+",
        Op::Sub => "-",
        Op::Mul => "*",
        Op::Div | Op::Idiv => "/",
        Op::Mod => "%",
        Op::CmpLt => "<",
        Op::CmpGt => ">",
        Op::CmpLe => "<=",
        Op::CmpGe => ">=",
        Op::CmpEq => "==",
        Op::CmpNe => "!=",
        Op::Xor => "^",
        Op::Or => "|",
        Op::And => "&",
        Op::Shl => "<<",
        Op::Shr => ">>",
        op => panic!("C renderer: {op} has no C operator"),
    }
}

/// The LANE range of a kernel Reduce, if it has one.
fn lane_range(reduce: &UOp) -> Option<UOp> {
    reduce.src()[1..]
        .iter()
        .find(|r| r.op() == Op::Range && r.range_axis_type() == AxisType::Lane)
        .cloned()
}

/// The C name of a loop variable.
pub fn range_name(r: &UOp) -> String {
    let prefix = match r.range_axis_type() {
        AxisType::Reduce | AxisType::Unroll | AxisType::ReduceBlock => "ridx",
        AxisType::Lane => "lane",
        AxisType::Group | AxisType::Local => "lidx",
        _ => "gidx",
    };
    format!("{prefix}{}", r.range_id())
}

/// A constant as a C literal of the C type `dtype` is computed in, exactly.
pub fn literal(value: Scalar, dtype: DType, index_type: &str) -> String {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 => float_literal(value.as_f64(), true),
        DType::F64 => float_literal(value.as_f64(), false),
        DType::Bool => if value.as_bool() { "true" } else { "false" }.to_string(),
        DType::U64 => format!("{}ULL", value.as_i64() as u64),
        DType::U32 => format!("{}u", value.as_i64() as u32),
        DType::I64 => int64_literal(value.as_i64()),
        DType::Index if index_type != "int" => int64_literal(value.as_i64()),
        DType::I32 | DType::Index if value.as_i64() == i32::MIN as i64 => {
            "(-2147483647 - 1)".to_string()
        }
        _ => value.as_i64().to_string(),
    }
}

fn int64_literal(v: i64) -> String {
    if v == i64::MIN {
        "(-9223372036854775807LL - 1)".to_string()
    } else if i32::try_from(v).is_ok() {
        v.to_string()
    } else {
        format!("{v}LL")
    }
}

fn float_literal(v: f64, single: bool) -> String {
    if v.is_nan() {
        return "NAN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "INFINITY" } else { "-INFINITY" }.to_string();
    }
    if single {
        format!("{:?}f", v as f32)
    } else {
        format!("{v:?}")
    }
}

/// `int` when every index value of the program (and every buffer offset) fits in 32 bits.
fn index_type(program: &Program, args: &[KernelArg]) -> &'static str {
    let fits = |u: &UOp| {
        u.dtype() != DType::Index
            || (u.vmin().as_i64() >= i32::MIN as i64 && u.vmax().as_i64() <= i32::MAX as i64)
    };
    let sizes_fit = args.iter().all(|a| a.size <= i32::MAX as usize);
    let nodes_fit = program.lines.iter().all(|line| match line {
        Line::Loop(r) | Line::StridedLoop { range: r, .. } => fits(r),
        Line::Assign { node, operands, .. } => {
            fits(node)
                && operands
                    .iter()
                    .all(|v| !matches!(v, Value::Const(c) if !fits(c)))
        }
        _ => true,
    });
    if sizes_fit && nodes_fit {
        "int"
    } else {
        "long long"
    }
}

/// Temps written inline into their single user: ALU values (not loads) used exactly once,
/// in the same loop body as their definition, and not an arm of a select. An arm written
/// inline would be evaluated only when chosen, so the C compiler branches on the condition
/// (mispredicted half the time when it depends on the data, as `erf`'s two ranges do) and
/// vectorizes nothing; named, both arms are computed and the select is a blend.
fn inlinable_temps(lines: &[Line]) -> HashSet<usize> {
    let mut defined_at: HashMap<usize, (usize, bool)> = HashMap::new();
    let mut select_arms: HashSet<usize> = HashSet::new();
    let mut uses: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut loop_marks = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let operands: Vec<&Value> = match line {
            Line::Loop(_) | Line::StridedLoop { .. } | Line::EndLoop | Line::EndIf => {
                loop_marks.push(i);
                continue;
            }
            Line::If(cond) => {
                loop_marks.push(i);
                vec![cond]
            }
            Line::Assign {
                temp,
                node,
                operands,
            } => {
                defined_at.insert(*temp, (i, node.op() != Op::Load));
                if node.op() == Op::Where {
                    select_arms.extend(operands[1..].iter().filter_map(|v| match v {
                        Value::Temp(t) => Some(*t),
                        _ => None,
                    }));
                }
                line.reads()
            }
            _ => line.reads(),
        };
        for v in operands {
            if let Value::Temp(t) = v {
                uses.entry(*t).or_default().push(i);
            }
        }
    }
    // `loop_marks` is sorted: the first mark after the definition decides.
    let mark_between = |def: usize, user: usize| {
        let next = loop_marks.partition_point(|&m| m <= def);
        loop_marks.get(next).is_some_and(|&m| m < user)
    };
    defined_at
        .into_iter()
        .filter(|(t, (def, is_alu))| {
            let Some(u) = uses.get(t) else { return false };
            *is_alu && u.len() == 1 && !select_arms.contains(t) && !mark_between(*def, u[0])
        })
        .map(|(t, _)| t)
        .collect()
}
