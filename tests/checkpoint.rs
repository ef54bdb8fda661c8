//! Checkpoints (issue 40): safetensors files saved from and loaded into trees — a nested
//! derived struct of every dtype kind round-trips byte for byte, an optimizer's state
//! round-trips and training resumes from it, a file written by PyTorch's tooling
//! (`tests/data/torch_linear.safetensors`, made by `tests/data/make_torch_linear.py`) loads
//! into a struct through a name map, and each fault is an error that says what to do.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use tensor::checkpoint::{self, CheckpointError, leaf_names};
use tensor::optim::{Adam, Optimizer, Stepper};
use tensor::prelude::*;
use tensor::runtime::realize::read_bytes;

#[derive(Clone, Tree)]
struct Block {
    weight: Tensor,
    bias: Option<Tensor>,
    scale: Tensor,
}

#[derive(Clone, Tree)]
struct Model {
    layers: Vec<Block>,
    embed: Tensor,
    table: BTreeMap<String, Tensor>,
    counts: Tensor,
    mask: Tensor,
    pixels: Tensor,
    ids: Tensor,
    precise: Tensor,
    #[tree(static)]
    width: usize,
}

/// A model whose every leaf is `base` shifted: f32, bf16, f16, i64, bool, u8, i32, f64 leaves.
fn model(base: f32) -> Model {
    let ramp = |n: usize| {
        (0..n)
            .map(|i| base + i as f32 * 0.75 - 1.0)
            .collect::<Vec<f32>>()
    };
    let block = |n: usize, bias: bool| Block {
        weight: Tensor::from_vec(ramp(n * 2), &[n, 2]),
        bias: bias.then(|| Tensor::from_vec(ramp(2), &[2])),
        scale: Tensor::from_vec(ramp(2), &[2]).cast(DType::BF16),
    };
    Model {
        layers: vec![block(3, true), block(2, false)],
        embed: Tensor::from_vec(ramp(6), &[3, 2]).cast(DType::F16),
        table: BTreeMap::from([
            ("alpha".to_string(), Tensor::from_vec(ramp(1), &[1])),
            ("beta".to_string(), Tensor::from_vec(ramp(1), &[])),
        ]),
        counts: Tensor::from_vec(vec![base as i64 * 1_000_000_007, -3], &[2]),
        mask: Tensor::from_vec(vec![base > 0.0, true, false], &[3]),
        pixels: Tensor::from_vec(vec![base as u8, 255, 0, 17], &[2, 2]),
        ids: Tensor::from_vec(vec![base as i32 - 5, 9], &[2]),
        precise: Tensor::from_vec(vec![f64::from(base) + 1e-12, std::f64::consts::PI], &[2]),
        width: 2,
    }
}

fn bytes_of<T: Tree>(tree: &T) -> Vec<(DType, Vec<usize>, Vec<u8>)> {
    tree_leaves(tree)
        .iter()
        .map(|t| (t.dtype(), t.shape(), read_bytes(t).unwrap()))
        .collect()
}

/// A fresh path in the temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> TempFile {
        let file = format!(
            "tensor_checkpoint_{}_{name}.safetensors",
            std::process::id()
        );
        TempFile(std::env::temp_dir().join(file))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torch_linear.safetensors")
}

#[test]
fn a_nested_struct_of_every_dtype_kind_round_trips_byte_for_byte() {
    let saved = model(3.0);
    let file = TempFile::new("round_trip");
    checkpoint::save(&file.0, &saved).unwrap();
    let mut loaded = model(0.0);
    assert_ne!(bytes_of(&loaded), bytes_of(&saved));
    checkpoint::load(&file.0, &mut loaded).unwrap();
    assert_eq!(bytes_of(&loaded), bytes_of(&saved));
    assert_eq!(loaded.width, 2);
    assert_eq!(
        leaf_names(&saved),
        [
            "layers.0.weight",
            "layers.0.bias",
            "layers.0.scale",
            "layers.1.weight",
            "layers.1.scale",
            "embed",
            "table.alpha",
            "table.beta",
            "counts",
            "mask",
            "pixels",
            "ids",
            "precise",
        ]
    );
    let dtypes: Vec<DType> = tree_leaves(&loaded).iter().map(Tensor::dtype).collect();
    assert_eq!(dtypes[2], DType::BF16);
    assert_eq!(dtypes[5], DType::F16);
    assert_eq!(
        loaded.counts.to_vec::<i64>().unwrap(),
        vec![3_000_000_021, -3]
    );
    assert_eq!(
        loaded.mask.to_vec::<bool>().unwrap(),
        vec![true, true, false]
    );
    assert_eq!(loaded.precise.to_vec::<f64>().unwrap()[0], 3.0 + 1e-12);
}

#[test]
fn an_optimizer_state_round_trips_and_training_resumes_from_it() {
    #[derive(Clone, Tree)]
    struct Line {
        w: Tensor,
        b: Tensor,
    }
    let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0], &[4]);
    let y = Tensor::from_vec(vec![1.0f32, 3.0, 5.0, 7.0], &[4]);
    let dloss = grad!(move |p: &Line| (&x * &p.w + &p.b - &y).square().mean_all());
    let start = || Line {
        w: Tensor::from_vec(vec![0.5f32], &[1]),
        b: Tensor::from_vec(vec![-0.5f32], &[1]),
    };
    let adam = Adam::new().amsgrad(true);
    let mut p = start();
    let mut stepper = Stepper::new(adam, &p, 0.05).unwrap();
    for _ in 0..3 {
        let g = dloss(&p);
        stepper.step(&mut p, &g).unwrap();
    }
    let file = TempFile::new("adam_state");
    checkpoint::save(
        &file.0,
        &(p.w.clone(), p.b.clone(), stepper.state().clone()),
    )
    .unwrap();

    let mut restored = (start().w, start().b, adam.init(&start()));
    checkpoint::load(&file.0, &mut restored).unwrap();
    assert_eq!(bytes_of(&restored.2), bytes_of(stepper.state()));
    assert!(leaf_names(&restored).contains(&"2.max_exp_avg_sq.b".to_string()));
    let (w, b, state) = restored;
    let mut q = Line { w, b };
    let mut resumed = Stepper::resume(adam, state, 0.05).unwrap();
    assert_eq!(resumed.steps(), 3);
    for _ in 0..4 {
        let g = dloss(&p);
        stepper.step(&mut p, &g).unwrap();
        let g = dloss(&q);
        resumed.step(&mut q, &g).unwrap();
    }
    assert_eq!(bytes_of(&q), bytes_of(&p));
}

#[derive(Clone, Tree)]
struct Dense {
    w: Tensor,
    b: Tensor,
}

#[derive(Clone, Tree)]
struct Mlp {
    layers: Vec<Dense>,
    batches: Tensor,
}

/// An `Mlp` of zeros shaped as the fixture's PyTorch model.
fn blank_mlp() -> Mlp {
    let dense = |out: usize, inp: usize, dtype| Dense {
        w: Tensor::zeros(&[out, inp], dtype),
        b: Tensor::zeros(&[out], dtype),
    };
    Mlp {
        layers: vec![dense(4, 3, DType::F32), dense(2, 4, DType::F16)],
        batches: Tensor::zeros(&[0usize; 0], DType::I64),
    }
}

fn torch_names(ours: &str) -> String {
    let map = HashMap::from([
        ("layers.0.w", "fc1.weight"),
        ("layers.0.b", "fc1.bias"),
        ("layers.1.w", "fc2.weight"),
        ("layers.1.b", "fc2.bias"),
        ("batches", "bn.num_batches_tracked"),
    ]);
    map.get(ours)
        .map_or_else(|| ours.to_string(), |s| s.to_string())
}

#[test]
fn a_file_written_by_pytorch_loads_into_a_struct_through_a_name_map() {
    let mut mlp = blank_mlp();
    checkpoint::load_with_names(fixture(), &mut mlp, torch_names).unwrap();
    // The values make_torch_linear.py wrote.
    let fc1_w: Vec<f32> = (0..12).map(|i| (i as f32 - 6.0) / 8.0).collect();
    assert_eq!(mlp.layers[0].w.to_vec::<f32>().unwrap(), fc1_w);
    assert_eq!(
        mlp.layers[0].b.to_vec::<f32>().unwrap(),
        vec![0.5, -0.25, 0.125, 1.0]
    );
    assert_eq!(mlp.layers[1].w.dtype(), DType::F16);
    let fc2_w: Vec<f32> = (0..8).map(|i| (i as f32 - 4.0) / 4.0).collect();
    assert_eq!(
        mlp.layers[1].w.cast(DType::F32).to_vec::<f32>().unwrap(),
        fc2_w
    );
    assert_eq!(
        mlp.layers[1].b.cast(DType::F32).to_vec::<f32>().unwrap(),
        vec![-1.5, 2.0]
    );
    assert_eq!(mlp.batches.to_vec::<i64>().unwrap(), vec![7]);
    // torch's Linear computes x Wᵀ + b (NumPy: [1, 2, 3] @ W.T + b).
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[1, 3]);
    let h = x.matmul(&mlp.layers[0].w.transpose(0, 1)) + &mlp.layers[0].b;
    assert_eq!(h.to_vec::<f32>().unwrap(), vec![-3.0, -1.5, 1.125, 4.25]);
}

#[track_caller]
fn error_of(result: Result<(), CheckpointError>) -> String {
    result
        .expect_err("the checkpoint call must fail")
        .to_string()
}

#[test]
fn a_missing_name_lists_what_the_file_holds() {
    let mut mlp = blank_mlp();
    let message = error_of(checkpoint::load(fixture(), &mut mlp));
    assert!(message.contains("has no tensor named `layers.0.w`; it holds `bn.num_batches_tracked`, `fc1.bias`, `fc1.weight`, `fc2.bias`, `fc2.weight`"), "{message}");
    assert!(message.contains("load_with_names"), "{message}");
    let message = error_of(checkpoint::load_with_names(fixture(), &mut mlp, |n| {
        torch_names(n).replace("fc2", "fc3")
    }));
    assert!(
        message.contains("no tensor named `fc3.weight` (for the leaf `layers.1.w`)"),
        "{message}"
    );
    // A failed load leaves the tree as it was.
    assert_eq!(mlp.layers[0].w.to_vec::<f32>().unwrap(), vec![0.0; 12]);
}

#[test]
fn a_wrong_shape_or_dtype_names_both_sides() {
    let mut mlp = blank_mlp();
    mlp.layers[0].w = Tensor::zeros(&[3, 4], DType::F32);
    let message = error_of(checkpoint::load_with_names(
        fixture(),
        &mut mlp,
        torch_names,
    ));
    assert!(message.contains("`fc1.weight` in"), "{message}");
    assert!(
        message.contains("has shape [4, 3], the tree's leaf [3, 4]"),
        "{message}"
    );

    let mut mlp = blank_mlp();
    mlp.layers[1].w = Tensor::zeros(&[2, 4], DType::F32);
    let message = error_of(checkpoint::load_with_names(
        fixture(),
        &mut mlp,
        torch_names,
    ));
    assert!(message.contains("`fc2.weight` in"), "{message}");
    assert!(
        message.contains("is F16, the tree's leaf f32; make the leaf that dtype"),
        "{message}"
    );
}

#[test]
fn a_dtype_the_crate_lacks_is_refused_by_name() {
    use safetensors::Dtype;
    use safetensors::tensor::TensorView;
    let file = TempFile::new("f8");
    let data = [0u8; 4];
    let view = TensorView::new(Dtype::F8_E4M3, vec![4], &data).unwrap();
    std::fs::write(
        &file.0,
        safetensors::serialize([("x", view)], None).unwrap(),
    )
    .unwrap();
    let mut x = BTreeMap::from([("x".to_string(), Tensor::zeros(&[4], DType::U8))]);
    let message = error_of(checkpoint::load(&file.0, &mut x));
    assert!(message.contains("`x` in"), "{message}");
    assert!(
        message.contains("is F8_E4M3, which this crate has no dtype for"),
        "{message}"
    );
}

#[test]
fn io_and_format_faults_say_what_to_do() {
    let mut mlp = blank_mlp();
    let missing = std::env::temp_dir().join("tensor_no_such_dir_40/none.safetensors");
    let message = error_of(checkpoint::load(&missing, &mut mlp));
    assert!(message.starts_with("checkpoint: cannot read "), "{message}");
    assert!(message.contains("none.safetensors"), "{message}");
    assert!(
        message.contains("check the path and its permissions"),
        "{message}"
    );

    let message = error_of(checkpoint::save(&missing, &mlp));
    assert!(
        message.starts_with("checkpoint: cannot write "),
        "{message}"
    );

    let file = TempFile::new("garbage");
    std::fs::write(&file.0, b"this is not a safetensors file at all").unwrap();
    let message = error_of(checkpoint::load(&file.0, &mut mlp));
    assert!(
        message.contains("is not a readable safetensors file"),
        "{message}"
    );
}

#[test]
fn two_leaves_of_one_name_are_refused() {
    let t = || Tensor::zeros(&[1], DType::F32);
    let tree = BTreeMap::from([
        ("a".to_string(), BTreeMap::from([("b.c".to_string(), t())])),
        ("a.b".to_string(), BTreeMap::from([("c".to_string(), t())])),
    ]);
    let file = TempFile::new("duplicate");
    let message = error_of(checkpoint::save(&file.0, &tree));
    assert!(
        message.contains("two leaves of the tree are named `a.b.c`"),
        "{message}"
    );
    assert!(!file.0.exists());
}

#[test]
fn a_single_tensor_is_named_tensor() {
    let file = TempFile::new("single");
    let x = Tensor::from_vec(vec![1.5f32, -2.0], &[2]);
    checkpoint::save(&file.0, &x).unwrap();
    let mut y = Tensor::zeros(&[2], DType::F32);
    checkpoint::load(&file.0, &mut y).unwrap();
    assert_eq!(leaf_names(&y), ["tensor"]);
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.5, -2.0]);
}
