//! `tensor::dist` over MPI, with 2 and 3 processes started by `mpirun` (Open MPI; the test
//! binary is built with `--features mpi`, and `.ci/run` installs Open MPI from Debian's
//! packages). Each `#[test]` here starts `mpirun`, which runs one ignored worker test of this
//! binary in every rank; a worker's failed assertion fails its rank and so the test.
//!
//! The workers check: all-reduce (sum, mean, max, min), broadcast, all-gather and
//! reduce-scatter of trees against closed forms; a mismatched call is an error on every rank,
//! after which the world still works; 20 data-parallel SGD steps equal the single-process run
//! on the concatenated batch (max |diff| ≤ 1e-5: the sums are added in another order); the
//! per-sample gradients gathered from the shards equal the whole batch's; DP-SGD's private
//! gradient over shards equals the single-process one, noise included (so the noise is added
//! once), and the accountant sees the global batch.

use std::process::Command;
use tensor::dist::{Communicator, DistError, ReduceOp};
use tensor::dp::DpSgd;
use tensor::prelude::*;

/// Runs worker `name` in `ranks` processes under `mpirun`; fails with every rank's output.
fn mpirun(ranks: usize, name: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("mpirun")
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        .arg(exe)
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        // Open MPI refuses to start as root (CI containers) without both of these.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("TENSOR_DIST")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start mpirun ({e}): install Open MPI (Debian: openmpi-bin libopenmpi-dev)"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{name} on {ranks} ranks failed:\n{text}"
    );
    let passed = text.matches("1 passed").count();
    assert_eq!(
        passed, ranks,
        "{name}: {passed} of {ranks} ranks ran the worker:\n{text}"
    );
}

#[test]
fn collectives_on_two_ranks() {
    mpirun(2, "collectives");
}

#[test]
fn collectives_on_three_ranks() {
    mpirun(3, "collectives");
}

#[test]
fn data_parallel_sgd_on_two_ranks() {
    mpirun(2, "data_parallel_sgd");
}

#[test]
fn data_parallel_sgd_on_three_ranks() {
    mpirun(3, "data_parallel_sgd");
}

#[test]
fn dp_sgd_on_two_ranks() {
    mpirun(2, "dp_sgd");
}

#[test]
fn dp_sgd_on_three_ranks() {
    mpirun(3, "dp_sgd");
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
#[ignore = "a worker: run by mpirun from collectives_on_*_ranks"]
fn collectives() {
    let comm = Communicator::from_env().unwrap();
    assert_eq!(comm.backend(), "mpi");
    let (r, n) = (comm.rank() as i64, comm.world_size() as i64);
    let tree = (
        Tensor::from_vec(vec![r as f32, 1.0, -(r as f32)], &[3]),
        Tensor::scalar(r as f64 * 0.5),
        Tensor::from_vec(vec![r, 10 * r], &[2]),
    );
    let ranks_sum = n * (n - 1) / 2;
    let sum = comm.all_reduce(&tree, ReduceOp::Sum).unwrap();
    assert_eq!(
        f32s(&sum.0),
        vec![ranks_sum as f32, n as f32, -ranks_sum as f32]
    );
    assert_eq!(sum.1.to_vec::<f64>().unwrap(), vec![ranks_sum as f64 * 0.5]);
    assert_eq!(
        sum.2.to_vec::<i64>().unwrap(),
        vec![ranks_sum, 10 * ranks_sum]
    );
    let mean = comm.all_reduce(&tree.0, ReduceOp::Mean).unwrap();
    let m = ranks_sum as f32 / n as f32;
    assert_eq!(f32s(&mean), vec![m, 1.0, -m]);
    let max = comm.all_reduce(&tree.2, ReduceOp::Max).unwrap();
    assert_eq!(max.to_vec::<i64>().unwrap(), vec![n - 1, 10 * (n - 1)]);
    let min = comm.all_reduce(&tree.0, ReduceOp::Min).unwrap();
    assert_eq!(f32s(&min), vec![0.0, 1.0, -((n - 1) as f32)]);

    let root = (n - 1) as usize;
    let b = comm.broadcast(&tree, root).unwrap();
    assert_eq!(b.2.to_vec::<i64>().unwrap(), vec![n - 1, 10 * (n - 1)]);

    let g = comm.all_gather(&tree).unwrap();
    assert_eq!(g.0.shape(), vec![n as usize, 3]);
    assert_eq!(g.1.shape(), vec![n as usize]);
    let expected: Vec<i64> = (0..n).flat_map(|k| [k, 10 * k]).collect();
    assert_eq!(g.2.to_vec::<i64>().unwrap(), expected);

    // Rows k·n .. k·n + n of a [n·2, 1] tensor whose rows are rank + row.
    let rows: Vec<f32> = (0..2 * n).map(|i| (i + r) as f32).collect();
    let scattered = comm
        .reduce_scatter(&Tensor::from_vec(rows, &[2 * n as usize, 1]), ReduceOp::Sum)
        .unwrap();
    let want: Vec<f32> = (2 * r..2 * r + 2)
        .map(|i| (n * i + ranks_sum) as f32)
        .collect();
    assert_eq!(f32s(&scattered), want);

    // A mismatch (rank 0 sends a shorter tensor) is an error on every rank, not a hang.
    let len = if r == 0 { 2 } else { 3 };
    let err = comm
        .all_reduce(&Tensor::zeros(&[len], DType::F32), ReduceOp::Sum)
        .unwrap_err();
    assert!(matches!(err, DistError::Mismatch { .. }), "{err}");
    let err = comm.barrier();
    assert!(err.is_ok(), "the world works after a refused call: {err:?}");
    // A shard of a batch: the ranks' parts cover it in order.
    let parts = comm.all_gather(&Tensor::from_vec(
        vec![comm.shard(10).start as i64, comm.shard(10).end as i64],
        &[2],
    ));
    let parts = parts.unwrap().to_vec::<i64>().unwrap();
    assert_eq!((parts[0], parts[parts.len() - 1]), (0, 10));
}

#[derive(Clone, Tree)]
struct Mlp {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

/// The summed squared error of the MLP over a batch `x: [b, 3]`, `y: [b]`.
fn batch_loss(p: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    let h = (x.matmul(&p.w1) + &p.b1).tanh();
    (h.matmul(&p.w2) - y).square().sum_all()
}

/// One sample's squared error, `x: [3]`, `y: []`.
fn sample_loss(p: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    let h = (x.matmul(&p.w1) + &p.b1).tanh();
    (h.matmul(&p.w2) - y).square()
}

const BATCH: usize = 12;

fn batch() -> (Tensor, Tensor) {
    let x: Vec<f32> = (0..BATCH * 3)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let y: Vec<f32> = (0..BATCH)
        .map(|i| ((i * 5 % 7) as f32 - 3.0) / 3.0)
        .collect();
    (
        Tensor::from_vec(x, &[BATCH, 3]),
        Tensor::from_vec(y, &[BATCH]),
    )
}

/// Parameters that differ between ranks until rank 0's are broadcast.
fn init(rank: usize) -> Mlp {
    let ramp = |n: usize, k: f32| -> Vec<f32> {
        (0..n)
            .map(|i| ((i as f32 + k) * 0.37).sin() * 0.5)
            .collect()
    };
    let k = rank as f32 * 3.0;
    Mlp {
        w1: Tensor::from_vec(ramp(15, k), &[3, 5]),
        b1: Tensor::from_vec(ramp(5, k + 1.0), &[5]),
        w2: Tensor::from_vec(ramp(5, k + 2.0), &[5]),
    }
}

fn sgd(p: &Mlp, g: &Mlp, lr: f32) -> Mlp {
    let p = tree_zip_map(p, g, |p, g| p - &(g * lr));
    realize_tree(&p).unwrap();
    p
}

fn flat(p: &Mlp) -> Vec<f32> {
    tree_leaves(p).iter().flat_map(f32s).collect()
}

#[test]
#[ignore = "a worker: run by mpirun from data_parallel_sgd_on_*_ranks"]
fn data_parallel_sgd() {
    let comm = Communicator::from_env().unwrap();
    let (x, y) = batch();
    let mine = comm.shard(BATCH);
    let (xs, ys) = (
        x.narrow(0, mine.start as isize, mine.len()),
        y.narrow(0, mine.start as isize, mine.len()),
    );

    let start = init(comm.rank());
    let mut p = comm.broadcast(&start, 0).unwrap();
    assert_eq!(
        flat(&p),
        flat(&init(0)),
        "every rank starts from rank 0's parameters"
    );
    let mut reference = init(0);
    for _ in 0..20 {
        let local = grad!(batch_loss)(&p, &xs, &ys);
        let global = comm.all_reduce(&local, ReduceOp::Sum).unwrap();
        p = sgd(&p, &tree_scale(&global, 1.0 / BATCH as f64), 0.1);
        let whole = grad!(batch_loss)(&reference, &x, &y);
        reference = sgd(&reference, &tree_scale(&whole, 1.0 / BATCH as f64), 0.1);
    }
    let diff = max_diff(&flat(&p), &flat(&reference));
    assert!(
        diff <= 1e-5,
        "20 data-parallel steps differ from one process by {diff}"
    );
    assert!(
        max_diff(&flat(&p), &flat(&init(0))) > 1e-2,
        "the steps moved the parameters"
    );

    // Per-sample gradients of the shards, gathered: the whole batch's, in order (equal shards).
    if BATCH.is_multiple_of(comm.world_size()) {
        let per_sample = vmap!(grad!(sample_loss), in_axes = (None, 0, 0));
        let gathered = comm.all_gather(&per_sample(&p, &xs, &ys)).unwrap();
        let whole = per_sample(&p, &x, &y);
        for (g, w) in tree_leaves(&gathered).iter().zip(tree_leaves(&whole)) {
            let mut shape = w.shape();
            shape.insert(0, comm.world_size());
            shape[1] /= comm.world_size();
            assert_eq!(g.shape(), shape);
            assert!(max_diff(&f32s(g), &f32s(&w)) <= 1e-6);
        }
    }
}

fn dp_loss(w: &Tensor, s: &(Tensor, Tensor)) -> Tensor {
    ((&s.0 * w).sum_all() - &s.1).square()
}

#[test]
#[ignore = "a worker: run by mpirun from dp_sgd_on_*_ranks"]
fn dp_sgd() {
    let comm = Communicator::from_env().unwrap();
    const N: usize = 60;
    let x = Tensor::from_vec(
        (0..N * 3).map(|i| ((i % 13) as f32 - 6.0) / 3.0).collect(),
        &[N, 3],
    );
    let y = Tensor::from_vec((0..N).map(|i| (i % 5) as f32 - 2.0).collect(), &[N]);
    let data = (x, y);
    let (clip, sigma, rate) = (0.8, 1.3, 0.3);
    let mut shared = DpSgd::new(clip, sigma, N, rate, 17);
    let mut alone = DpSgd::new(clip, sigma, N, rate, 17);
    let mut w = Tensor::from_vec(vec![0.3f32, -0.2, 0.1], &[3]);
    for step in 0..5 {
        let batch = shared.batch(step);
        let g = shared
            .private_grad_distributed(&comm, dp_loss, &w, &data, &batch)
            .unwrap();
        let want = alone.private_grad(dp_loss, &w, &data, &batch);
        let diff = max_diff(&f32s(&g), &f32s(&want));
        assert!(
            diff <= 1e-5,
            "step {step}: {:?} != {:?}",
            f32s(&g),
            f32s(&want)
        );
        // Every rank holds the same gradient.
        let spread = comm.all_reduce(&g, ReduceOp::Max).unwrap()
            - comm.all_reduce(&g, ReduceOp::Min).unwrap();
        assert_eq!(f32s(&spread), vec![0.0; 3]);
        w = &w - &(&g * 0.5);
        w.realize().unwrap();
    }
    assert_eq!(shared.epsilon(1e-5), alone.epsilon(1e-5));
    assert_eq!(shared.steps(), 5);
}
