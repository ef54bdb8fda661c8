//! Vectorization, checked in the object code: the kernels of a fused elementwise chain and of a
//! matmul are generated as the runtime generates them (optimized, two cores), compiled to
//! assembly with the runtime's default flags (`cc -S`), and the innermost loop of each kernel
//! must compute with packed vector instructions (`vmulps`, `vfmadd231ps`, ... on `xmm`,
//! `ymm` or `zmm` registers), not one float at a time. x86-64 only (the mnemonics are
//! x86's).
#![cfg(target_arch = "x86_64")]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use tensor::core::codegen::CodegenOptions;
use tensor::core::schedule::create_schedule;
use tensor::prelude::*;
use tensor::runtime::cpu::{compiler_from_env, default_flags, vector_lanes_of};
use tensor::runtime::plan::generate_kernels;

/// The C sources and names of the kernels that compute `t`.
fn kernels(t: &Tensor) -> Vec<(String, String)> {
    let schedule = create_schedule(&[t.uop()]);
    let options = CodegenOptions {
        optimize: true,
        threads: 2,
        vector_lanes: vector_lanes_of(&default_flags()),
    };
    generate_kernels(&schedule, &options)
        .into_iter()
        .map(|k| (k.name, k.source))
        .collect()
}

/// `source` compiled to assembly with the default kernel flags.
fn assembly(name: &str, source: &str) -> String {
    // Tests run in parallel and kernels of different tests can share a name.
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "tensor-vectorized-{}-{n}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (c, s) = (dir.join("kernel.c"), dir.join("kernel.s"));
    std::fs::write(&c, source).unwrap();
    let compiler = compiler_from_env();
    let mut words = compiler.split_whitespace();
    let flags: Vec<String> = default_flags()
        .into_iter()
        .filter(|f| f != "-shared")
        .collect();
    let output = Command::new(words.next().unwrap())
        .args(words)
        .args(&flags)
        .arg("-S")
        .arg("-o")
        .arg(&s)
        .arg(&c)
        .output()
        .expect("the C compiler runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&s).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    text
}

/// The instructions of function `name` in `asm`.
fn function<'a>(asm: &'a str, name: &str) -> Vec<&'a str> {
    let start = format!("{name}:");
    asm.lines()
        .skip_while(|l| l.trim() != start)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with(".size") && !l.contains(".cfi_endproc"))
        .map(str::trim)
        .collect()
}

/// The loops of a function: for each backward jump, the lines from its target label to it,
/// unless they hold a `ret` (gcc places cold blocks after the return, and they jump back to
/// where they rejoin). Innermost loops are the ones that contain no other loop.
fn innermost_loops<'a>(body: &[&'a str]) -> Vec<Vec<&'a str>> {
    let mut loops: Vec<(usize, usize)> = Vec::new();
    for (end, line) in body.iter().enumerate() {
        let Some(target) = line
            .strip_prefix('j')
            .and_then(|rest| rest.split_whitespace().nth(1))
        else {
            continue;
        };
        let label = format!("{target}:");
        if let Some(start) = body[..end].iter().position(|l| *l == label)
            && !body[start..end].iter().any(|l| l.starts_with("ret"))
        {
            loops.push((start, end));
        }
    }
    loops
        .iter()
        .filter(|&&(s, e)| {
            !loops
                .iter()
                .any(|&(s2, e2)| (s2, e2) != (s, e) && s <= s2 && e2 <= e)
        })
        .map(|&(s, e)| body[s..=e].to_vec())
        .collect()
}

/// True for a packed single-precision arithmetic instruction on vector registers.
fn packed_arithmetic(line: &str) -> bool {
    let mut parts = line.split_whitespace();
    let mnemonic = parts.next().unwrap_or("");
    let operands = parts.collect::<String>();
    let arithmetic = [
        "add", "sub", "mul", "fmadd", "fmsub", "fnmadd", "sqrt", "max",
    ]
    .iter()
    .any(|op| mnemonic.contains(op));
    arithmetic
        && mnemonic.ends_with("ps")
        && ["%xmm", "%ymm", "%zmm"]
            .iter()
            .any(|r| operands.contains(r))
}

/// Asserts that every innermost loop of `t`'s kernels that does floating-point arithmetic
/// does it with packed instructions, and that there is such a loop; returns the packed
/// instructions of the hot loops.
fn assert_vectorized(t: &Tensor) -> Vec<String> {
    let mut packed = Vec::new();
    for (name, source) in kernels(t) {
        let asm = assembly(&name, &source);
        let body = function(&asm, &name);
        assert!(!body.is_empty(), "no function {name} in\n{asm}");
        for lp in innermost_loops(&body) {
            let scalar: Vec<&&str> = lp
                .iter()
                .filter(|l| {
                    let m = l.split_whitespace().next().unwrap_or("");
                    ["vaddss", "vmulss", "vfmadd", "vsubss"]
                        .iter()
                        .any(|s| m.starts_with(s))
                        && m.ends_with("ss")
                })
                .collect();
            let vector: Vec<String> = lp
                .iter()
                .filter(|l| packed_arithmetic(l))
                .map(|l| l.to_string())
                .collect();
            assert!(
                scalar.is_empty() || !vector.is_empty(),
                "{name}: a hot loop computes one float at a time:\n{}\n\nC source:\n{source}",
                lp.join("\n")
            );
            packed.extend(vector);
        }
    }
    assert!(
        !packed.is_empty(),
        "no packed arithmetic in any innermost loop of {t:?}"
    );
    packed
}

#[test]
fn a_fused_elementwise_chain_runs_packed_vector_instructions() {
    let x = Tensor::rand(&[1 << 16], 1);
    x.realize().unwrap();
    let y = ((&x * 2.0 + 1.0) * &x - 3.0) * 0.5 + &x;
    assert_vectorized(&y);
}

#[test]
fn the_exp2_chain_runs_whole_vector_registers_without_libm_calls() {
    // The f32 `exp2` decomposition (`codegen::transcendental`) has float selects (its clamp,
    // its NaN test); gcc vectorizes the loop only because `-fno-trapping-math` lets it
    // if-convert them. With AVX2 the square root is a packed `vsqrtps` on ymm/zmm registers.
    let x = Tensor::rand(&[1 << 16], 1);
    x.realize().unwrap();
    let y = ((&x * 2.0 + 1.0).exp2() * &x).sqrt() * 0.5;
    let packed = assert_vectorized(&y);
    for (name, source) in kernels(&y) {
        let asm = assembly(&name, &source);
        let calls: Vec<&str> = function(&asm, &name)
            .into_iter()
            .filter(|l| l.starts_with("call") || l.starts_with("jmp\t") && l.contains('@'))
            .collect();
        assert!(calls.is_empty(), "{name} calls out: {calls:?}");
    }
    if std::is_x86_feature_detected!("avx2") {
        assert!(
            packed
                .iter()
                .any(|l| l.starts_with("vsqrtps") && !l.contains("%xmm")),
            "with AVX2, the chain's square root should be a ymm/zmm vsqrtps: {packed:?}"
        );
    }
}

#[test]
fn the_f32_transcendentals_built_on_exp2_and_log2_run_packed_vector_instructions() {
    // `sin` is not here: its Payne-Hanek reduction computes in 64-bit integers and converts
    // an i64 to a float, which AVX2 has no packed instruction for.
    let x = Tensor::rand(&[1 << 16], 1);
    x.realize().unwrap();
    for y in [
        x.exp(),
        (&x + 0.5).log2(),
        (&x + 0.5).log(),
        x.tanh(),
        x.sigmoid(),
    ] {
        assert_vectorized(&y);
    }
}

#[test]
fn the_matmul_hot_loop_uses_packed_fused_multiply_adds() {
    assert_matmul_fmas(256);
}

#[test]
fn the_cache_blocked_matmul_hot_loop_uses_packed_fused_multiply_adds() {
    assert_matmul_fmas(768);
}

/// The hot loops of an `n`x`n` matmul (cache-blocked from `n = 512`) are packed, with whole
/// vector registers of fused multiply-adds where the CPU has FMA and AVX2.
fn assert_matmul_fmas(n: usize) {
    let a = Tensor::rand(&[n, n], 1);
    let b = Tensor::rand(&[n, n], 2);
    a.realize().unwrap();
    b.realize().unwrap();
    let packed = assert_vectorized(&a.matmul(&b));
    let avx2 = std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx2");
    if avx2 {
        assert!(
            packed
                .iter()
                .any(|l| l.starts_with("vfmadd") && !l.contains("%xmm")),
            "with FMA and AVX2, the matmul should multiply-add whole ymm/zmm registers: {packed:?}"
        );
    }
}

#[test]
fn a_matmul_with_a_transposed_weight_multiplies_whole_vector_registers() {
    // `x @ w.T` as `nn::linear` computes it: the reduce is contiguous in both operands, and
    // its LANE accumulators (`codegen::heuristic`) are a loop gcc turns into vector FMAs.
    let x = Tensor::rand(&[256, 256], 1);
    let w = Tensor::rand(&[64, 256], 2);
    x.realize().unwrap();
    w.realize().unwrap();
    let packed = assert_vectorized(&x.matmul(&w.transpose(0, 1)));
    if std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx2") {
        assert!(
            packed
                .iter()
                .any(|l| l.starts_with("vfmadd") && !l.contains("%xmm")),
            "with FMA and AVX2, x @ w.T should multiply-add whole ymm/zmm registers: {packed:?}"
        );
    }
}

#[test]
fn a_sum_along_a_contiguous_axis_runs_packed_vector_instructions() {
    // Its 16 partial accumulators (`codegen::heuristic`).
    let x = Tensor::rand(&[64, 4096], 1);
    x.realize().unwrap();
    let sum = assert_vectorized(&x.sum(-1, false));
    assert!(sum.iter().any(|l| l.starts_with("vadd")), "{sum:?}");
}

#[test]
fn a_max_along_a_contiguous_axis_runs_packed_vector_instructions() {
    // Its partial maxima are a LANE array (`codegen::heuristic`); the NaN test of the
    // `max_f32` helper is a float select that gcc if-converts under `-fno-trapping-math`.
    let x = Tensor::rand(&[64, 4096], 1);
    x.realize().unwrap();
    let max = assert_vectorized(&x.max(-1, false));
    if std::is_x86_feature_detected!("avx2") {
        assert!(
            max.iter().any(|l| !l.contains("%xmm")),
            "with AVX2, the maxima should fill ymm/zmm registers: {max:?}"
        );
    }
}
