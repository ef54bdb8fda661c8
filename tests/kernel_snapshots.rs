//! Blessed kernel snapshots, as rust-analyzer's expect tests: `tests/kernels/` holds the
//! generated C and CUDA source of about 30 representative graphs, and this test generates them
//! again and compares byte for byte. Every change to generated code shows in review as a diff
//! of those files.
//!
//! Re-bless after an intended change, then review the diff:
//!
//! ```sh
//! UPDATE_EXPECT=1 cargo test -p tensor --test kernel_snapshots
//! git diff tests/kernels/
//! ```
//!
//! The sources do not depend on the machine or the environment. The C kernels are lowered with
//! fixed [`CodegenOptions`] by `plan::generate_kernels`: [`C_OPTIONS`] (optimized, 4 threads,
//! 8 `f32` lanes as AVX2), and for `matmul_blocked.avx512.c` 16 lanes as AVX-512. Never with
//! the host's `codegen_options` (its cores, its vector width, `THREADS`, `NOOPT`), nor through
//! a `CpuDevice` (`BEAM` searches there). The compiler flags (`-march=native`) are not part of
//! the source. The CUDA kernels come from `cuda_kernels`, which lowers with
//! `CodegenOptions::default()` and needs no GPU. Inputs are fresh buffers with no data, so no
//! value and no random draw enters a graph; `UPDATE_EXPECT` is the only variable read.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use tensor::core::codegen::CodegenOptions;
use tensor::core::render::Kernel;
use tensor::core::schedule::create_schedule;
use tensor::core::{Device, UOp};
use tensor::nn::{self, Conv};
use tensor::prelude::*;
use tensor::runtime::cuda::cuda_kernels;
use tensor::runtime::plan::generate_kernels;

/// The machine the C snapshots are generated for: optimized, 4 cores, 8 `f32` lanes (AVX2).
const C_OPTIONS: CodegenOptions = CodegenOptions {
    optimize: true,
    threads: 4,
    vector_lanes: 8,
};

/// [`C_OPTIONS`] with 16 `f32` lanes (AVX-512).
const C_AVX512_OPTIONS: CodegenOptions = CodegenOptions {
    vector_lanes: 16,
    ..C_OPTIONS
};

/// What renders a graph's kernels, and the file ending it writes.
#[derive(Clone, Copy)]
enum Backend {
    /// C for [`C_OPTIONS`].
    C,
    /// C for [`C_AVX512_OPTIONS`].
    CAvx512,
    /// CUDA C, as `cuda_kernels` renders it.
    Cuda,
}

impl Backend {
    fn extension(self) -> &'static str {
        match self {
            Backend::C => "c",
            Backend::CAvx512 => "avx512.c",
            Backend::Cuda => "cu",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Backend::C => "C, optimized, 4 threads, 8 f32 lanes (AVX2)",
            Backend::CAvx512 => "C, optimized, 4 threads, 16 f32 lanes (AVX-512)",
            Backend::Cuda => "CUDA, cuda_kernels (default options)",
        }
    }

    fn kernels(self, outputs: &[Tensor]) -> Vec<Kernel> {
        let roots: Vec<UOp> = outputs.iter().map(|t| t.uop()).collect();
        let schedule = create_schedule(&roots);
        match self {
            Backend::C => generate_kernels(&schedule, &C_OPTIONS),
            Backend::CAvx512 => generate_kernels(&schedule, &C_AVX512_OPTIONS),
            Backend::Cuda => cuda_kernels(&schedule),
        }
    }
}

const BOTH: &[Backend] = &[Backend::C, Backend::Cuda];

/// One representative graph: its file stem, what it computes, the backends it is kept for.
struct Graph {
    name: &'static str,
    about: &'static str,
    backends: &'static [Backend],
    build: fn() -> Vec<Tensor>,
}

/// A fresh buffer of `shape` and `dtype` holding no data (only its size enters a kernel).
fn input(shape: &[usize], dtype: DType) -> Tensor {
    let numel = shape.iter().product();
    Tensor::from_uop(UOp::new_buffer(numel, dtype, Device::cpu()).reshape(shape))
}

fn f32s(shape: &[usize]) -> Tensor {
    input(shape, DType::F32)
}

fn unary(f: fn(&Tensor) -> Tensor) -> Vec<Tensor> {
    vec![f(&f32s(&[4096]))]
}

/// A two-layer ReLU MLP's cross-entropy for one sample (the per-sample-gradient example's).
fn mlp_loss(w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
    let hidden = (x.matmul(w1) + b1).relu();
    let logits = hidden.matmul(w2) + b2;
    -(y * logits.log_softmax(-1)).sum_all()
}

fn per_sample_grads() -> Vec<Tensor> {
    let args = [
        f32s(&[16, 8]),
        f32s(&[8]),
        f32s(&[8, 4]),
        f32s(&[4]),
        f32s(&[4, 16]),
        f32s(&[4, 4]),
    ];
    let in_axes = [None, None, None, None, Some(0), Some(0)];
    vmap(grad(mlp_loss, [0, 1, 2, 3]), in_axes, 0).call(&args)
}

/// The representative graphs, in file order.
fn graphs() -> Vec<Graph> {
    let g = |name, about, backends, build| Graph {
        name,
        about,
        backends,
        build,
    };
    vec![
        g(
            "elementwise_chain",
            "((x * 2 + 1).exp2() * x).sqrt() * 0.5, x: f32[1024]",
            BOTH,
            || {
                let x = f32s(&[1024]);
                vec![((&x * 2.0 + 1.0).exp2() * &x).sqrt() * 0.5]
            },
        ),
        g(
            "elementwise_f16",
            "(a * b + a).relu(), a, b: f16[1024]",
            BOTH,
            || {
                let (a, b) = (input(&[1024], DType::F16), input(&[1024], DType::F16));
                vec![(&a * &b + &a).relu()]
            },
        ),
        g(
            "elementwise_int",
            "((a + b) * 3).maximum(a) - 7, a, b: i32[1024]",
            BOTH,
            || {
                let (a, b) = (input(&[1024], DType::I32), input(&[1024], DType::I32));
                vec![((&a + &b) * 3).maximum(&a) - 7]
            },
        ),
        g(
            "bool_mask_where",
            "m.where_(x.exp(), x.gt(0.5).where_(x, 0)), m: bool, x: f32[1024]",
            BOTH,
            || {
                let (m, x) = (input(&[1024], DType::Bool), f32s(&[1024]));
                vec![m.where_(x.exp(), x.gt(0.5).where_(&x, 0.0))]
            },
        ),
        g(
            "casts",
            "(a.cast(f32) * 0.25).cast(f16), a.lt(3).cast(i32), a: i32[1024]",
            BOTH,
            || {
                let a = input(&[1024], DType::I32);
                vec![
                    (a.cast(DType::F32) * 0.25).cast(DType::F16),
                    a.lt(3).cast(DType::I32),
                ]
            },
        ),
        g("exp2", "x.exp2(), x: f32[4096]", BOTH, || {
            unary(Tensor::exp2)
        }),
        g("log2", "x.log2(), x: f32[4096]", BOTH, || {
            unary(Tensor::log2)
        }),
        g("sin", "x.sin(), x: f32[4096]", BOTH, || unary(Tensor::sin)),
        g("erf", "x.erf(), x: f32[4096]", BOTH, || unary(Tensor::erf)),
        g("sum_axis", "x.sum(1), x: f32[64, 256]", BOTH, || {
            vec![f32s(&[64, 256]).sum(1, false)]
        }),
        g("sum_all", "x.sum_all(), x: f32[64, 256]", BOTH, || {
            vec![f32s(&[64, 256]).sum_all()]
        }),
        g("max_axis", "x.max(0), x: f32[64, 256]", BOTH, || {
            vec![f32s(&[64, 256]).max(0, false)]
        }),
        g("max_all", "x.max_all(), x: f32[64, 256]", BOTH, || {
            vec![f32s(&[64, 256]).max_all()]
        }),
        g("mean_axis", "x.mean(1), x: f32[64, 256]", BOTH, || {
            vec![f32s(&[64, 256]).mean(1, false)]
        }),
        g("mean_all", "x.mean_all(), x: f32[64, 256]", BOTH, || {
            vec![f32s(&[64, 256]).mean_all()]
        }),
        g("argmax", "x.argmax(1), x: f32[64, 256]", BOTH, || {
            vec![f32s(&[64, 256]).argmax(1, false)]
        }),
        g(
            "matmul_small",
            "a @ b, a: f32[4, 8], b: f32[8, 3]",
            BOTH,
            || vec![f32s(&[4, 8]).matmul(&f32s(&[8, 3]))],
        ),
        g("matmul_256", "a @ b, a, b: f32[256, 256]", BOTH, || {
            vec![f32s(&[256, 256]).matmul(&f32s(&[256, 256]))]
        }),
        g(
            "matmul_blocked",
            "a @ b, a: f32[1024, 1024], b: f32[1024, 1536] (cache-blocked on the CPU)",
            &[Backend::C, Backend::CAvx512, Backend::Cuda],
            || vec![f32s(&[1024, 1024]).matmul(&f32s(&[1024, 1536]))],
        ),
        g(
            "matmul_staged",
            "a @ b, a: f32[2048, 256], b: f32[256, 2048]",
            BOTH,
            || vec![f32s(&[2048, 256]).matmul(&f32s(&[256, 2048]))],
        ),
        g("row_sums", "x.sum(1), x: f32[4096, 16384]", BOTH, || {
            vec![f32s(&[4096, 16384]).sum(1, false)]
        }),
        g(
            "softmax_rows",
            "x.softmax(-1), x: f32[4096, 4096]",
            BOTH,
            || vec![f32s(&[4096, 4096]).softmax(-1)],
        ),
        g(
            "softmax_small",
            "x.softmax(-1), x: f32[32, 100]",
            BOTH,
            || vec![f32s(&[32, 100]).softmax(-1)],
        ),
        g(
            "float4_elementwise",
            "(a + b) * a, a, b: f32[1 << 20]",
            BOTH,
            || {
                let (a, b) = (f32s(&[1 << 20]), f32s(&[1 << 20]));
                vec![(&a + &b) * &a]
            },
        ),
        g(
            "conv2d",
            "conv2d(x, w, bias), x: f32[2, 3, 16, 16], w: f32[8, 3, 3, 3]",
            BOTH,
            || {
                let (x, w, b) = (f32s(&[2, 3, 16, 16]), f32s(&[8, 3, 3, 3]), f32s(&[8]));
                vec![nn::conv2d(&x, &w, Some(&b), &Conv::default())]
            },
        ),
        g(
            "per_sample_grads",
            "vmap(grad(loss)) of a 16-8-4 ReLU MLP's cross-entropy, batch 4",
            BOTH,
            per_sample_grads,
        ),
        g("cumsum", "x.cumsum(1), x: f32[8, 128]", BOTH, || {
            vec![f32s(&[8, 128]).cumsum(1)]
        }),
        g(
            "gather",
            "x.gather(1, idx), x: f32[16, 32], idx: i64[16, 4]",
            BOTH,
            || vec![f32s(&[16, 32]).gather(1, &input(&[16, 4], DType::I64))],
        ),
        g(
            "take",
            "x.take(idx, 0), x: f32[100, 8], idx: i32[10]",
            BOTH,
            || vec![f32s(&[100, 8]).take(&input(&[10], DType::I32), 0)],
        ),
        g(
            "pad_slice",
            "x.pad([(1, 2), (3, 0)]).slice(0, 2, 10) + 1, x: f32[16, 16]",
            BOTH,
            || vec![f32s(&[16, 16]).pad(&[(1, 2), (3, 0)]).slice(0, 2, 10) + 1.0],
        ),
        g(
            "bound_value",
            "x * lr (lr = 0.01, a user scalar: a bound value), x: f32[1024]",
            BOTH,
            || {
                let lr = 0.01f32;
                vec![&f32s(&[1024]) * lr]
            },
        ),
        g(
            "cat",
            "cat([a, b, c], 0), a: f32[3, 8], b: f32[5, 8], c: f32[1, 8]",
            BOTH,
            || {
                vec![Tensor::cat(
                    &[f32s(&[3, 8]), f32s(&[5, 8]), f32s(&[1, 8])],
                    0,
                )]
            },
        ),
    ]
}

/// The snapshot file of `graph` rendered by `backend`: a header naming the graph, then each
/// kernel after a comment line naming it.
fn snapshot(graph: &Graph, backend: Backend) -> String {
    let kernels = backend.kernels(&(graph.build)());
    let mut text = format!(
        "// graph {}: {}\n// {}; {} kernel(s). Generated by tests/kernel_snapshots.rs: \
         re-bless with UPDATE_EXPECT=1.\n",
        graph.name,
        graph.about,
        backend.describe(),
        kernels.len()
    );
    for (i, kernel) in kernels.iter().enumerate() {
        text.push_str(&format!(
            "\n// ---- kernel {} of {}: {}, launched on {} ----\n",
            i + 1,
            kernels.len(),
            kernel.name,
            kernel.launch
        ));
        text.push_str(&kernel.source);
        if !kernel.source.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

/// Whether to compare with the files or write them.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Check,
    Bless,
}

/// Compares (or, blessing, writes) the snapshot of every graph and backend in `dir`; returns
/// the files that differ, are missing, or are left over from a graph that is gone (blessing
/// removes those and returns nothing).
fn check_or_bless(dir: &Path, graphs: &[Graph], mode: Mode) -> Vec<String> {
    let mut problems = Vec::new();
    let mut expected = BTreeSet::new();
    for graph in graphs {
        for &backend in graph.backends {
            let file = format!("{}.{}", graph.name, backend.extension());
            let path = dir.join(&file);
            let want = snapshot(graph, backend);
            expected.insert(file.clone());
            match (mode, fs::read_to_string(&path)) {
                (Mode::Check, Ok(have)) if have == want => {}
                (Mode::Check, Ok(have)) => {
                    let line = first_difference(&have, &want);
                    problems.push(format!("{file}: differs from line {line}"));
                }
                (Mode::Check, Err(_)) => problems.push(format!("{file}: missing")),
                (Mode::Bless, Ok(have)) if have == want => {}
                (Mode::Bless, _) => {
                    fs::create_dir_all(dir).unwrap();
                    fs::write(&path, want).unwrap_or_else(|e| panic!("writing {file}: {e}"));
                }
            }
        }
    }
    for stale in snapshot_files(dir).difference(&expected) {
        match mode {
            Mode::Check => problems.push(format!("{stale}: no graph makes it")),
            Mode::Bless => fs::remove_file(dir.join(stale)).unwrap(),
        }
    }
    problems
}

/// The first line (from 1) where `have` and `want` differ.
fn first_difference(have: &str, want: &str) -> usize {
    // `split`, not `lines`: texts that differ only in line endings differ here too.
    let (mut have, mut want) = (have.split('\n'), want.split('\n'));
    (1..).find(|_| have.next() != want.next()).unwrap()
}

/// The `.c` and `.cu` files in `dir`.
fn snapshot_files(dir: &Path) -> BTreeSet<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".c") || name.ends_with(".cu"))
        .collect()
}

fn kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernels")
}

#[test]
fn generated_kernels_match_the_blessed_snapshots() {
    let bless = std::env::var_os("UPDATE_EXPECT").is_some_and(|v| v == "1");
    let mode = if bless { Mode::Bless } else { Mode::Check };
    let problems = check_or_bless(&kernels_dir(), &graphs(), mode);
    assert!(
        problems.is_empty(),
        "{} kernel snapshot(s) in tests/kernels/ do not match the generated code:\n  {}\n\
         run with UPDATE_EXPECT=1 to re-bless, then review the diff \
         (UPDATE_EXPECT=1 cargo test -p tensor --test kernel_snapshots; git diff tests/kernels/)",
        problems.len(),
        problems.join("\n  ")
    );
}

#[test]
fn there_are_about_thirty_graphs_with_distinct_names() {
    let graphs = graphs();
    let names: BTreeSet<_> = graphs.iter().map(|g| g.name).collect();
    assert_eq!(names.len(), graphs.len(), "two graphs share a file name");
    assert!(graphs.len() >= 30, "{} graphs", graphs.len());
}

#[test]
fn blessing_writes_files_that_a_second_run_accepts() {
    let dir = std::env::temp_dir().join(format!("kernel_snapshots_{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let some = || {
        graphs()
            .into_iter()
            .filter(|g| g.name.starts_with("sum_") || g.name == "cat")
    };
    let graphs: Vec<Graph> = some().collect();
    assert_eq!(
        check_or_bless(&dir, &graphs, Mode::Check).len(),
        2 * graphs.len(),
        "every file missing"
    );
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("gone.c"), "// a graph that was removed\n").unwrap();
    assert!(check_or_bless(&dir, &graphs, Mode::Bless).is_empty());
    assert!(!dir.join("gone.c").exists(), "blessing removes stale files");
    assert_eq!(
        check_or_bless(&dir, &graphs, Mode::Check),
        Vec::<String>::new()
    );

    let edited = dir.join("cat.cu");
    let text = fs::read_to_string(&edited).unwrap();
    fs::write(&edited, text.replacen("float", "double", 1)).unwrap();
    fs::remove_file(dir.join("sum_all.c")).unwrap();
    let crlf = fs::read_to_string(dir.join("cat.c"))
        .unwrap()
        .replace('\n', "\r\n");
    fs::write(dir.join("cat.c"), crlf).unwrap();
    assert_eq!(
        check_or_bless(&dir, &graphs, Mode::Check),
        [
            "sum_all.c: missing",
            "cat.c: differs from line 1",
            "cat.cu: differs from line 7"
        ]
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn snapshots_do_not_depend_on_the_order_graphs_are_built_in() {
    let graphs = graphs();
    let forward: Vec<String> = graphs.iter().map(|g| snapshot(g, Backend::C)).collect();
    let mut backward: Vec<String> = graphs
        .iter()
        .rev()
        .map(|g| snapshot(g, Backend::C))
        .collect();
    backward.reverse();
    for ((graph, a), b) in graphs.iter().zip(&forward).zip(&backward) {
        assert_eq!(
            a, b,
            "{}: the source changed when built after the others",
            graph.name
        );
    }
}

#[test]
fn inputs_holding_data_make_the_same_kernels_as_the_empty_buffers() {
    let chain = |x: &Tensor| vec![((x * 2.0 + 1.0).exp2() * x).sqrt() * 0.5];
    let with_data = Tensor::from_vec((0..1024).map(|i| i as f32).collect::<Vec<f32>>(), &[1024]);
    for backend in [Backend::C, Backend::Cuda] {
        let want = backend.kernels(&chain(&f32s(&[1024])));
        let got = backend.kernels(&chain(&with_data));
        let sources = |ks: &[Kernel]| ks.iter().map(|k| k.source.clone()).collect::<Vec<_>>();
        assert_eq!(sources(&got), sources(&want), "{}", backend.describe());
    }
}
