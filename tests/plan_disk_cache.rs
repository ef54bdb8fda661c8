//! Plans kept on disk beside the kernels (`tensor::runtime::plan_store`): each test runs the
//! per-sample gradient of a tiny MLP in child processes (this test binary again) that share
//! one fresh cache directory, and reads the work each child did and the values it computed
//! from its stdout. A second process with a warm cache schedules, generates and compiles
//! nothing; a damaged plan entry is rebuilt with a warning; another shape is another plan.

use std::path::{Path, PathBuf};
use std::process::Command;
use tensor::prelude::*;
use tensor::runtime::plan::PlanCache;
use tensor::runtime::plan_store::PlanStore;
use tensor::runtime::realize::{read_buffer, realize_on};
use tensor::runtime::{CpuConfig, CpuDevice, compiler_invocations, pipeline_counts};

/// Set in a child process to the batch size it computes the gradients for.
const CHILD: &str = "PLAN_DISK_CACHE_CHILD";

/// The line a child prints its work and values on.
const REPORT: &str = "plan-disk-cache-child:";

#[derive(Clone, Tree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

fn loss(p: &Mlp, x: &Tensor) -> Tensor {
    let hidden = (x.matmul(&p.w1) + &p.b1).tanh();
    hidden.matmul(&p.w2).square().sum_all()
}

/// `n` fixed values in [-1, 1) of shape `shape`.
fn values(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|i| ((i * 7 + seed * 13) % 17) as f32 / 8.5 - 1.0);
    Tensor::from_vec(v.collect(), shape)
}

/// The per-sample gradients of `loss` over a batch of `batch` samples, lazy.
fn per_sample_grads(batch: usize) -> Vec<Tensor> {
    let p = Mlp {
        w1: values(&[4, 8], 1),
        b1: values(&[8], 2),
        w2: values(&[8, 3], 3),
    };
    let x = values(&[batch, 4], 4);
    tree_leaves(&vmap!(grad!(loss), in_axes = (None, 0))(&p, &x))
}

/// What a child did and computed.
struct ChildRun {
    schedules: u64,
    kernels_generated: u64,
    compiles: u64,
    disk_plan_hits: u64,
    /// The bits of the gradients' values, leaf after leaf.
    values: Vec<u32>,
    stderr: String,
}

/// The counters and the warnings: the values are compared, not printed.
impl std::fmt::Debug for ChildRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} schedules, {} kernels generated, {} compiles, {} disk plan hits, {} values; \
             stderr:\n{}",
            self.schedules,
            self.kernels_generated,
            self.compiles,
            self.disk_plan_hits,
            self.values.len(),
            self.stderr
        )
    }
}

/// The child's work: the gradients realized on a CPU device with the environment's cache
/// directory and a plan cache that keeps plans there, then the counters and the values'
/// bits printed on one line.
#[test]
fn computes_the_gradients_in_the_child() {
    let Some(batch) = std::env::var(CHILD).ok().and_then(|b| b.parse().ok()) else {
        return;
    };
    let device = CpuDevice::with_config(CpuConfig::from_env().unwrap());
    let plans = PlanCache::with_store(8, PlanStore::for_cpu(&device));
    assert!(plans.store().is_some(), "the child has a cache directory");
    let grads = per_sample_grads(batch);
    realize_on(&device, &plans, &grads.iter().collect::<Vec<_>>()).unwrap();
    let mut bits = Vec::new();
    for g in &grads {
        let bytes = read_buffer(&device, &g.uop()).unwrap();
        let words = bytes.chunks_exact(4);
        bits.extend(words.map(|c| u32::from_le_bytes(c.try_into().unwrap()).to_string()));
    }
    let counts = pipeline_counts();
    println!(
        "{REPORT} {} {} {} {} {}",
        counts.schedules,
        counts.kernels_generated,
        compiler_invocations(),
        counts.disk_plan_hits,
        bits.join(",")
    );
}

/// Runs the child for `batch` samples with `cache` as its cache directory.
fn run_child(cache: &Path, batch: usize) -> ChildRun {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "computes_the_gradients_in_the_child",
            "--exact",
            "--nocapture",
        ])
        .arg("--test-threads=1")
        .env(CHILD, batch.to_string())
        .env("TENSOR_CACHE_DIR", cache)
        .env_remove("DEBUG")
        .env_remove("BEAM")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.split_once(REPORT).map(|(_, report)| report))
        .unwrap_or_else(|| panic!("no report from the child:\n{stdout}\n{stderr}"));
    let fields: Vec<&str> = line.split_whitespace().collect();
    let number = |i: usize| fields[i].parse::<u64>().unwrap();
    ChildRun {
        schedules: number(0),
        kernels_generated: number(1),
        compiles: number(2),
        disk_plan_hits: number(3),
        values: fields[4].split(',').map(|b| b.parse().unwrap()).collect(),
        stderr,
    }
}

/// An empty cache directory for this process and `tag`, removed when dropped.
struct FreshCache(PathBuf);

impl FreshCache {
    fn new(tag: &str) -> FreshCache {
        let dir = std::env::temp_dir().join(format!(
            "tensor-plan-disk-cache-{}-{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        FreshCache(dir)
    }

    /// The plan entries in the cache.
    fn plan_entries(&self) -> Vec<PathBuf> {
        let listing = std::fs::read_dir(self.0.join("plans")).unwrap();
        listing
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "kernel"))
            .collect()
    }
}

impl Drop for FreshCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The gradients' values computed in this process by the default path.
fn reference(batch: usize) -> Vec<f32> {
    per_sample_grads(batch)
        .iter()
        .flat_map(|g| g.to_vec::<f32>().unwrap())
        .collect()
}

fn assert_close(bits: &[u32], want: &[f32]) {
    assert_eq!(bits.len(), want.len());
    for (i, (b, w)) in bits.iter().zip(want).enumerate() {
        let got = f32::from_bits(*b);
        assert!(
            (got - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "element {i}: {got} vs {w}"
        );
    }
}

/// A first run that built its plan: one schedule, kernels generated and compiled.
fn assert_built(run: &ChildRun) {
    assert_eq!(run.schedules, 1, "{run:?}");
    assert!(run.kernels_generated > 0, "{run:?}");
    assert_eq!(run.disk_plan_hits, 0, "{run:?}");
}

#[test]
fn a_second_process_reads_the_plan_and_schedules_generates_and_compiles_nothing() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let cache = FreshCache::new("warm");
    let first = run_child(&cache.0, 3);
    assert_built(&first);
    assert!(first.compiles > 0, "a fresh cache compiles: {first:?}");
    assert_close(&first.values, &reference(3));
    assert_eq!(cache.plan_entries().len(), 1, "the plan was kept");
    let second = run_child(&cache.0, 3);
    assert_eq!(
        (second.schedules, second.kernels_generated, second.compiles),
        (0, 0, 0),
        "{second:?}"
    );
    assert_eq!(second.disk_plan_hits, 1, "{second:?}");
    assert_eq!(
        second.values, first.values,
        "the same kernels give the same bits"
    );
}

#[test]
fn a_damaged_plan_entry_is_rebuilt_with_a_warning() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let cache = FreshCache::new("damaged");
    let first = run_child(&cache.0, 3);
    assert_built(&first);
    for entry in cache.plan_entries() {
        let mut bytes = std::fs::read(&entry).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x55;
        std::fs::write(&entry, bytes).unwrap();
    }
    let rebuilt = run_child(&cache.0, 3);
    assert_built(&rebuilt);
    assert_eq!(
        rebuilt.compiles, 0,
        "the kernels still come from the disk: {rebuilt:?}"
    );
    assert!(
        rebuilt.stderr.contains("plan cache entry") && rebuilt.stderr.contains("rebuilding it"),
        "{}",
        rebuilt.stderr
    );
    assert_eq!(rebuilt.values, first.values);
    let third = run_child(&cache.0, 3);
    assert_eq!(
        (third.schedules, third.disk_plan_hits),
        (0, 1),
        "rewritten: {third:?}"
    );
}

#[test]
fn another_batch_size_is_another_plan() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let cache = FreshCache::new("shapes");
    assert_built(&run_child(&cache.0, 3));
    let other = run_child(&cache.0, 5);
    assert_built(&other);
    assert_close(&other.values, &reference(5));
    assert_eq!(cache.plan_entries().len(), 2);
}
