//! The digits example's training run, shortened for CI: a small CNN trained with Adam on the
//! UCI handwritten digits (`tensor::datasets`) reaches a stated accuracy floor on the held-out
//! images, and a checkpoint of it reloads to the same predictions. The model, the loop and
//! the split are the example's own (`examples/digits.rs`, included here).

#[allow(dead_code)]
#[path = "../examples/digits.rs"]
mod digits;

use tensor::prelude::*;

/// Four epochs reach 0.95 on this split in release and debug builds alike (the kernels are
/// compiled C either way); the floor leaves room for another C compiler's rounding.
const FLOOR: f64 = 0.93;

#[test]
fn a_cnn_trained_on_the_digits_passes_the_floor_and_reloads_from_a_checkpoint() {
    let p = digits::train(4, false).expect("training runs");
    let (test_x, test_y) = digits::test_set();
    let trained = digits::accuracy(&p, &test_x, &test_y);
    assert!(trained >= FLOOR, "test accuracy {trained:.4} < {FLOOR}");

    let path = std::env::temp_dir().join(format!(
        "digits-training-{}.safetensors",
        std::process::id()
    ));
    tensor::checkpoint::save(&path, &p).expect("the checkpoint is written");
    let mut reloaded = digits::Cnn::init(7);
    tensor::checkpoint::load(&path, &mut reloaded).expect("the checkpoint is read");
    let _ = std::fs::remove_file(&path);
    for (a, b) in tree_leaves(&p).iter().zip(&tree_leaves(&reloaded)) {
        assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    }
    assert_eq!(digits::accuracy(&reloaded, &test_x, &test_y), trained);
}
