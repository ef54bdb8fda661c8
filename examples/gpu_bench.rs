//! Issue #14's figures on a GPU, each next to a reference measured in the same run: an
//! elementwise chain against the device-to-device copy of the same bytes, an f32 matmul
//! 4096² against the GPU's f32 peak, and the per-sample gradients of a 784-128-10 MLP
//! (B=256, `vmap!(grad!(loss))`) on the GPU against the same call on the host's cores. When
//! a Python with a CUDA build of PyTorch is found (`TENSOR_BENCH_PYTHON`, else `python3`),
//! PyTorch's times for the same work on the same GPU are printed beside ours.
//!
//! Every result is checked against the CPU path before it is timed. Without a GPU it says
//! so in one line and exits. Last, the matmul's kernel is timed under other OptOps than the
//! heuristic's (tile per thread, block, reduce step, staging), and the row sums' under other
//! GROUP splits (block width, GROUPTOP, none), each checked against the heuristic's result:
//! the measurements behind the GPU heuristic's constants.
//!
//! Run: `cargo run --release --example gpu_bench` (`DEVICE` is ignored: it uses `CUDA:0`).

use std::process::Command;
use std::time::{Duration, Instant};
use tensor::core::codegen::opt::{Opt, OptimizedKernel, kernel_ranges};
use tensor::core::codegen::{gpu_optimizations, lower_kernel_gpu_with_opts};
use tensor::core::render::cuda::render_kernel;
use tensor::core::schedule::{ScheduleItem, create_schedule};
use tensor::core::uop::AxisType;
use tensor::prelude::*;
use tensor::runtime::cuda::{CudaBuffer, CudaDevice};
use tensor::runtime::device::Device;
use tensor::runtime::realize::{cuda_device, realize, set_device, synchronize, to_vec};

const LEN: usize = 64 * 1024 * 1024;
const MATMUL: usize = 4096;
const BATCH: usize = 256;
const IN: usize = 784;
const HIDDEN: usize = 128;
const OUT: usize = 10;

/// The model's parameters: two dense layers.
#[derive(Clone, Tree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
}

/// Cross-entropy of one sample.
fn loss(p: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(&p.w1) + &p.b1).relu();
    let logits = hidden.matmul(&p.w2) + &p.b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

fn median(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..reps)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[reps / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn exp2_chain(x: &Tensor) -> Tensor {
    ((x * 2.0 + 1.0).exp2() * x).sqrt() * 0.5
}

fn poly_chain(x: &Tensor) -> Tensor {
    ((x * 2.0 + 1.0) * x - 3.0) * 0.5 + x
}

/// [`exp2_chain`] with its scalars as code (`Tensor::constant`) instead of values bound at
/// run time: the difference is what reading the values costs each thread.
fn exp2_chain_code(x: &Tensor) -> Tensor {
    let c = Tensor::constant;
    ((x * &c(2.0f32) + 1.0).exp2() * x).sqrt() * &c(0.5f32)
}

/// [`poly_chain`] with its scalars as code.
fn poly_chain_code(x: &Tensor) -> Tensor {
    let c = Tensor::constant;
    ((x * &c(2.0f32) + 1.0) * x - &c(3.0f32)) * &c(0.5f32) + x
}

/// The largest difference between `ours` and `reference`, relative to the reference's
/// largest magnitude.
fn relative_error(ours: &[f32], reference: &[f32]) -> f64 {
    let scale = reference.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
    let worst = ours
        .iter()
        .zip(reference)
        .fold(0f64, |m, (a, b)| m.max((*a as f64 - *b as f64).abs()));
    worst / scale.max(f64::MIN_POSITIVE)
}

/// Computes `f` on the GPU and on the host's cores from the same inputs and fails unless they
/// agree within `tolerance` (relative to the largest value).
fn check(
    name: &str,
    tolerance: f64,
    f: impl Fn() -> Tensor,
) -> Result<(), Box<dyn std::error::Error>> {
    set_device(Some("CUDA"))?;
    let gpu: Vec<f32> = to_vec(&f())?;
    set_device(Some("CPU"))?;
    let cpu: Vec<f32> = to_vec(&f())?;
    set_device(Some("CUDA"))?;
    let error = relative_error(&gpu, &cpu);
    println!("  checked {name}: GPU = CPU within {error:.1e} (relative)");
    if error > tolerance {
        return Err(format!("{name}: GPU and CPU differ by {error:e} > {tolerance:e}").into());
    }
    Ok(())
}

/// PyTorch's side: `name milliseconds` lines, then a `torch ...` line.
const TORCH_PEER: &str = r#"
import time, torch
from torch.func import vmap, grad
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"
def med(f, reps=21):
    f(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3
x = torch.rand(64 * 1024 * 1024, device=dev)
y = torch.empty_like(x)
print("copy", med(lambda: y.copy_(x)))
print("exp2_chain", med(lambda: torch.sqrt(torch.exp2(x * 2 + 1) * x) * 0.5))
print("poly_chain", med(lambda: ((x * 2 + 1) * x - 3) * 0.5 + x))
chain = torch.compile(lambda x: torch.sqrt(torch.exp2(x * 2 + 1) * x) * 0.5)
print("exp2_chain_compiled", med(lambda: chain(x)))
a = torch.rand(4096, 4096, device=dev)
b = torch.rand(4096, 4096, device=dev)
print("matmul", med(lambda: a @ b))
r = torch.rand(4096, 16384, device=dev)
print("sum_all", med(lambda: x.sum()))
print("row_sums", med(lambda: r.sum(1)))
s = torch.rand(4096, 4096, device=dev)
print("softmax", med(lambda: torch.softmax(s, -1)))
w1 = torch.randn(784, 128, device=dev) / 28.0
b1 = torch.zeros(128, device=dev)
w2 = torch.randn(128, 10, device=dev) / 128 ** 0.5
b2 = torch.zeros(10, device=dev)
xs = torch.rand(256, 784, device=dev)
ys = torch.nn.functional.one_hot(torch.arange(256, device=dev) % 10, 10).float()
def loss(p, x, y):
    h = torch.relu(x @ p[0] + p[1])
    return -(y * torch.log_softmax(h @ p[2] + p[3], -1)).sum()
per_sample = vmap(grad(loss), in_dims=(None, 0, 0))
print("per_sample_grads", med(lambda: per_sample((w1, b1, w2, b2), xs, ys)))
print("torch", torch.__version__, torch.cuda.get_device_name(0))
"#;

/// PyTorch's figures on the same GPU, or why there are none.
fn torch_peer() -> Result<(Vec<(String, f64)>, String), String> {
    let python = std::env::var("TENSOR_BENCH_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let ran = Command::new(&python)
        .arg("-c")
        .arg(TORCH_PEER)
        .output()
        .map_err(|e| format!("running {python}: {e}"))?;
    if !ran.status.success() {
        let stderr = String::from_utf8_lossy(&ran.stderr);
        let last = stderr.lines().last().unwrap_or("").to_string();
        return Err(format!("{python} with PyTorch on CUDA failed: {last}"));
    }
    let mut figures = Vec::new();
    let mut about = String::new();
    for line in String::from_utf8_lossy(&ran.stdout).lines() {
        match line.split_once(' ').map(|(n, v)| (n, v.parse::<f64>())) {
            Some((name, Ok(value))) => figures.push((name.to_string(), value)),
            _ => about = line.to_string(),
        }
    }
    Ok((figures, about))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Err(why) = set_device(Some("CUDA")) {
        println!("gpu_bench: no GPU to measure on: {why}");
        return Ok(());
    }
    let gpu = cuda_device(0)?;
    let peak = gpu.f32_peak_flops()?;
    println!(
        "device: {} ({}), f32 peak {:.1} TFLOP/s",
        gpu.device_name()?,
        gpu.arch(),
        peak / 1e12
    );

    println!("checks (each result against the CPU path, same inputs):");
    check("exp2 chain, 1M", 1e-5, || {
        exp2_chain(&Tensor::rand(&[1 << 20], 1))
    })?;
    check("matmul 512x384 @ 384x640 (1x4 per thread)", 1e-5, || {
        Tensor::rand(&[512, 384], 2).matmul(&Tensor::rand(&[384, 640], 3))
    })?;
    check(
        "matmul 2048x256 @ 256x2048 (8x4 per thread, 64x64 per block, staged)",
        1e-5,
        || Tensor::rand(&[2048, 256], 2).matmul(&Tensor::rand(&[256, 2048], 3)),
    )?;
    check("x @ w.T 2048x256 @ 256x2048 (staged, padded)", 1e-5, || {
        let w = Tensor::rand(&[2048, 256], 3);
        Tensor::rand(&[2048, 256], 2).matmul(&w.transpose(0, 1))
    })?;
    check("sum of 16M (group reduction)", 1e-5, || {
        Tensor::rand(&[1 << 24], 4).sum_all()
    })?;
    check("row sums 256 x 16384 (group reduction)", 1e-5, || {
        Tensor::rand(&[256, 16384], 4).sum(1, false)
    })?;
    check("softmax 256 x 4096 (group reduction)", 1e-5, || {
        Tensor::rand(&[256, 4096], 4).softmax(-1)
    })?;

    let torch = torch_peer();
    match &torch {
        Ok((_, about)) => println!("PyTorch (same run, same GPU): {about}"),
        Err(why) => println!("PyTorch: skipped: {why}"),
    }
    let peer = |name: &str| {
        torch
            .as_ref()
            .ok()
            .and_then(|(f, _)| f.iter().find(|(n, _)| n == name).map(|(_, v)| *v))
    };
    let versus = |name: &str, ours: f64| match peer(name) {
        Some(theirs) => format!(
            "   torch {theirs:.3} ms (ours / torch = {:.2}x)",
            ours / theirs
        ),
        None => String::new(),
    };

    let bytes = LEN * 4;
    let copy = ms(gpu.time_device_copy(bytes, 21)?);
    let gbps = |millis: f64| (bytes * 2) as f64 / (millis * 1e-3) / 1e9;
    println!("elementwise, 64M f32 (warm medians; each call a realize and a synchronize):");
    println!(
        "  device-to-device copy (cuMemcpyDtoD)      {copy:>8.3} ms  {:>7.1} GB/s{}",
        gbps(copy),
        versus("copy", copy)
    );
    let x = Tensor::rand(&[LEN], 4);
    x.realize()?;
    for (name, key, f) in [
        (
            "((x*2+1).exp2()*x).sqrt()*0.5",
            "exp2_chain",
            exp2_chain as fn(&Tensor) -> Tensor,
        ),
        ("((x*2+1)*x-3)*0.5+x", "poly_chain", poly_chain),
        ("  exp2 chain, scalars as code", "-", exp2_chain_code),
        ("  arithmetic chain, scalars as code", "-", poly_chain_code),
    ] {
        let t = ms(median(21, || {
            f(&x).realize().expect("the chain runs");
            synchronize().expect("the chain finishes");
        }));
        println!(
            "  {name:<40} {t:>8.3} ms  {:>7.1} GB/s = {:>3.0}% of the copy's{}",
            gbps(t),
            100.0 * copy / t,
            versus(key, t)
        );
    }
    if let Some(compiled) = peer("exp2_chain_compiled") {
        println!("  (torch.compile of the exp2 chain: {compiled:.3} ms)");
    }

    let a = Tensor::rand(&[MATMUL, MATMUL], 5);
    let b = Tensor::rand(&[MATMUL, MATMUL], 6);
    realize(&[&a, &b])?;
    let t = ms(median(9, || {
        a.matmul(&b).realize().expect("the matmul runs");
        synchronize().expect("the matmul finishes");
    }));
    let flops = 2.0 * (MATMUL as f64).powi(3) / (t * 1e-3);
    println!(
        "matmul f32 {MATMUL}x{MATMUL}: {t:.3} ms  {:.2} TFLOP/s = {:.1}% of the f32 peak{}",
        flops / 1e12,
        100.0 * flops / peak,
        versus("matmul", t)
    );

    reductions(copy, &versus)?;

    let gpu_grads = ms(per_sample_grads("CUDA")?);
    let cpu_grads = ms(per_sample_grads("CPU")?);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "per-sample grads, MLP {IN}-{HIDDEN}-{OUT}, B={BATCH}: GPU {gpu_grads:.3} ms, CPU ({cores} cores) {cpu_grads:.3} ms (GPU / CPU = {:.2}x){}",
        gpu_grads / cpu_grads,
        versus("per_sample_grads", gpu_grads)
    );
    set_device(Some("CUDA"))?;
    matmul_variants(gpu, peak)?;
    let copy_gbps = (LEN * 4 * 2) as f64 / (copy * 1e-3) / 1e9;
    reduction_variants(gpu, copy_gbps, (4096, 16384))?;
    reduction_variants(gpu, copy_gbps, (16384, 4096))
}

/// A timed reduction: its name, its PyTorch figure's key, its input, the reduction and the
/// bytes it reads.
type Reduction = (
    &'static str,
    &'static str,
    Tensor,
    fn(&Tensor) -> Tensor,
    usize,
);

/// Group reductions (a block of threads per output, combined in shared memory) against the
/// copy's bandwidth: each reads its input once.
fn reductions(
    copy: f64,
    versus: &dyn Fn(&str, f64) -> String,
) -> Result<(), Box<dyn std::error::Error>> {
    let copy_gbps = (LEN * 4 * 2) as f64 / (copy * 1e-3) / 1e9;
    println!("reductions (each reads its input once; copy {copy_gbps:.0} GB/s):");
    let cases: [Reduction; 3] = [
        (
            "sum of 64M f32",
            "sum_all",
            Tensor::rand(&[LEN], 7),
            |x| x.sum_all(),
            LEN * 4,
        ),
        (
            "row sums, 4096 x 16384",
            "row_sums",
            Tensor::rand(&[4096, 16384], 8),
            |x| x.sum(1, false),
            LEN * 4,
        ),
        (
            "softmax over rows, 4096 x 4096",
            "softmax",
            Tensor::rand(&[4096, 4096], 9),
            |x| x.softmax(-1),
            4096 * 4096 * 8,
        ),
    ];
    for (name, key, x, f, bytes) in cases {
        x.realize()?;
        let t = ms(median(21, || {
            f(&x).realize().expect("the reduction runs");
            synchronize().expect("the reduction finishes");
        }));
        let gbps = bytes as f64 / (t * 1e-3) / 1e9;
        println!(
            "  {name:<40} {t:>8.3} ms  {gbps:>7.1} GB/s = {:>3.0}% of the copy's{}",
            100.0 * gbps / copy_gbps,
            versus(key, t)
        );
    }
    Ok(())
}

/// The matmul 4096²'s kernel under OptOps other than the heuristic's, each timed (median of
/// 9 launches, each synchronized) and checked against the heuristic's result.
fn matmul_variants(gpu: &CudaDevice, peak: f64) -> Result<(), Box<dyn std::error::Error>> {
    let a = Tensor::rand(&[MATMUL, MATMUL], 5);
    let b = Tensor::rand(&[MATMUL, MATMUL], 6);
    realize(&[&a, &b])?;
    let schedule = create_schedule(&[a.matmul(&b).uop()]);
    let item = schedule.items.last().ok_or("the matmul has a kernel")?;
    let heuristic = gpu_optimizations(&item.ast);
    let [columns, rows, local_rows, local_columns, steps] = heuristic.as_slice() else {
        println!("matmul variants: skipped: the heuristic's opts are {heuristic:?}");
        return Ok(());
    };
    let with = |opt: &Opt, factor: usize| {
        let Opt::Split {
            axis, target, top, ..
        } = opt.clone();
        Opt::Split {
            axis,
            factor,
            target,
            top,
        }
    };
    let local = |r: usize, c: usize, s: usize| {
        vec![with(local_rows, r), with(local_columns, c), with(steps, s)]
    };
    let per_thread = |r: usize, c: usize| vec![with(columns, c), with(rows, r)];
    let variants: Vec<(&str, Vec<Opt>)> = vec![
        ("heuristic", heuristic.clone()),
        ("8x4 per thread, unstaged", per_thread(8, 4)),
        (
            "8x4, 8x16 threads, steps of 16",
            [per_thread(8, 4), local(8, 16, 16)].concat(),
        ),
        (
            "8x4, 8x16 threads, steps of 64",
            [per_thread(8, 4), local(8, 16, 64)].concat(),
        ),
        (
            "8x4, 16x8 threads, steps of 32",
            [per_thread(8, 4), local(16, 8, 32)].concat(),
        ),
        (
            "4x4, 8x16 threads, steps of 32",
            [per_thread(4, 4), local(8, 16, 32)].concat(),
        ),
        (
            "8x8, 8x16 threads, steps of 16",
            [per_thread(8, 8), local(8, 16, 16)].concat(),
        ),
        (
            "8x8, 8x16 threads, steps of 32",
            [per_thread(8, 8), local(8, 16, 32)].concat(),
        ),
        (
            "8x8, 16x8 threads, steps of 32",
            [per_thread(8, 8), local(16, 8, 32)].concat(),
        ),
    ];
    println!("matmul f32 {MATMUL}x{MATMUL} under other OptOps (kernel alone, median of 9):");
    time_variants(gpu, item, variants, |t| {
        let flops = 2.0 * (MATMUL as f64).powi(3) / (t * 1e-3);
        format!(
            "{:>5.2} TFLOP/s = {:>4.1}% of peak",
            flops / 1e12,
            100.0 * flops / peak
        )
    })
}

/// Row sums under other GROUP splits than the heuristic's: block widths, GROUPTOP (a
/// contiguous run per lane) and none (a thread per row). Rows of 4096 x 16384 are grouped by
/// the heuristic; 16384 x 4096 has more outputs than `group::GROUP_MAX_OUTPUTS` and is not.
fn reduction_variants(
    gpu: &CudaDevice,
    copy_gbps: f64,
    (rows, columns): (usize, usize),
) -> Result<(), Box<dyn std::error::Error>> {
    let x = Tensor::rand(&[rows, columns], 8);
    x.realize()?;
    let schedule = create_schedule(&[x.sum(1, false).uop()]);
    let item = schedule.items.last().ok_or("the row sums have a kernel")?;
    let heuristic = gpu_optimizations(&item.ast);
    let others: Vec<Opt> = heuristic
        .iter()
        .filter(|o| o.target() != AxisType::Group)
        .cloned()
        .collect();
    let optimized = OptimizedKernel::new(&item.ast).apply_all(&others);
    let Some(reduce) = kernel_ranges(&optimized.ast)
        .into_iter()
        .find(|r| r.range_axis_type() == AxisType::Reduce)
    else {
        println!("row sums {rows} x {columns}: skipped: no reduce range");
        return Ok(());
    };
    let group = |factor: usize, top: bool| {
        let split = Opt::Split {
            axis: reduce.range_id(),
            factor,
            target: AxisType::Group,
            top,
        };
        [others.clone(), vec![split]].concat()
    };
    let variants: Vec<(&str, Vec<Opt>)> = vec![
        ("heuristic", heuristic.clone()),
        ("GROUP 128", group(128, false)),
        ("GROUP 64", group(64, false)),
        ("GROUP 32", group(32, false)),
        ("GROUPTOP 128", group(128, true)),
        ("GROUPTOP 32", group(32, true)),
        ("no GROUP (a thread per row)", others.clone()),
    ];
    println!("row sums {rows} x {columns} under other GROUP splits (kernel alone, median of 9):");
    time_variants(gpu, item, variants, |t| {
        let gbps = (rows * columns * 4) as f64 / (t * 1e-3) / 1e9;
        format!(
            "{gbps:>7.1} GB/s = {:>3.0}% of the copy's",
            100.0 * gbps / copy_gbps
        )
    })
}

/// Times the kernel of `item` under each variant's OptOps (median of 9 launches, each
/// synchronized) on inputs of values in [0, 1), checks each result against the first
/// variant's, and prints each time with what `rate` makes of it.
fn time_variants(
    gpu: &CudaDevice,
    item: &ScheduleItem,
    variants: Vec<(&str, Vec<Opt>)>,
    rate: impl Fn(f64) -> String,
) -> Result<(), Box<dyn std::error::Error>> {
    let sizes = item.buffer_sizes();
    // Inputs of the slot sizes the kernel reads (a realized `rand` may be a view of a
    // larger buffer), filled with values in [0, 1).
    let input = |slot: usize| -> Result<_, Box<dyn std::error::Error>> {
        let bytes: Vec<u8> = (0..sizes[slot] as u64)
            .flat_map(|i| {
                let bits = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as u32;
                (bits as f32 / (1u32 << 24) as f32).to_le_bytes()
            })
            .collect();
        let buffer = gpu.allocate(bytes.len())?;
        gpu.copy_in(&buffer, &bytes)?;
        Ok(buffer)
    };
    let inputs = (1..sizes.len()).map(input).collect::<Result<Vec<_>, _>>()?;
    let out = gpu.allocate(sizes[0] * 4)?;
    let buffers: Vec<&CudaBuffer> = std::iter::once(&out).chain(&inputs).collect();
    let mut reference: Option<Vec<u8>> = None;
    for (name, opts) in variants {
        let kernel = render_kernel(&lower_kernel_gpu_with_opts(
            &item.ast, &sizes, &opts, "variant",
        ));
        let program = gpu.compile_kernel(&kernel)?;
        let launch = || {
            gpu.launch(&program, &buffers)
                .and_then(|()| gpu.wait_idle())
                .expect("the variant runs");
        };
        let t = ms(median(9, launch));
        let mut result = vec![0u8; sizes[0] * 4];
        gpu.copy_out(&out, &mut result)?;
        let floats = |bytes: &[u8]| -> Vec<f32> {
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        let error = match &reference {
            Some(r) => relative_error(&floats(&result), &floats(r)),
            None => 0.0,
        };
        reference.get_or_insert(result);
        println!(
            "  {name:<34} {t:>7.3} ms  {}  (vs the first {error:.0e})",
            rate(t)
        );
        if error > 1e-5 {
            return Err(format!("variant {name} differs by {error:e}").into());
        }
    }
    Ok(())
}

/// The warm median of the per-sample gradients on `device`.
fn per_sample_grads(device: &str) -> Result<Duration, Box<dyn std::error::Error>> {
    set_device(Some(device))?;
    let params = Mlp {
        w1: Tensor::randn(&[IN, HIDDEN], 1) * (1.0 / (IN as f64).sqrt()),
        b1: Tensor::zeros(&[HIDDEN], DType::F32),
        w2: Tensor::randn(&[HIDDEN, OUT], 2) * (1.0 / (HIDDEN as f64).sqrt()),
        b2: Tensor::zeros(&[OUT], DType::F32),
    };
    let x = Tensor::rand(&[BATCH, IN], 3);
    let labels: Vec<i32> = (0..BATCH).map(|i| ((i * 7 + 3) % OUT) as i32).collect();
    let y = Tensor::from_vec(labels, &[BATCH])
        .one_hot(OUT)
        .cast(DType::F32);
    for t in tree_leaves(&params).iter().chain([&x, &y]) {
        realize(&[t])?;
    }
    let per_sample = vmap!(grad!(loss), in_axes = (None, 0, 0));
    Ok(median(21, || {
        let grads = tree_leaves(&per_sample(&params, &x, &y));
        realize(&grads.iter().collect::<Vec<_>>()).expect("the gradients realize");
        synchronize().expect("the gradients finish");
    }))
}
