//! Errors raised through the callables the macros make name the user's line (issue 36, item
//! 18): a call through `Fn` cannot track its caller, so a macro's callable reports the line
//! the macro was written on, as `jvp!` and `vjp!` report theirs. Before, they named
//! `src/macro_support.rs`.

mod common;

use common::panic_message;

use tensor::prelude::*;

fn product(x: &Tensor, y: &Tensor) -> Tensor {
    (x * y).sum_all()
}

/// Panics unless `message` contains `part` and names `line` of this file, and not the
/// library's sources.
#[track_caller]
fn assert_site(message: &str, part: &str, line: u32) {
    assert!(message.contains(part), "missing {part:?} in:\n{message}");
    let site = format!("(called at {}:{line}:", file!());
    assert!(message.contains(&site), "missing {site} in:\n{message}");
    assert!(!message.contains("macro_support"), "{message}");
}

#[test]
fn a_vmap_callable_names_the_line_it_was_written_on() {
    let (a, b) = (
        Tensor::ones(&[3, 2], DType::F32),
        Tensor::ones(&[4, 2], DType::F32),
    );
    let line = line!() + 1;
    let m = panic_message(|| vmap!(product, in_axes = (0, 0))(&a, &b));
    assert_site(&m, "vmap: inconsistent sizes for the mapped axes", line);
}

#[test]
fn a_boxed_callable_names_the_line_of_its_macro() {
    type Batched = Box<dyn Fn(&Tensor, &Tensor) -> Tensor + Send + Sync>;
    let line = line!() + 1;
    let batched: Batched = Box::new(vmap!(product, in_axes = (0, None)));
    let (a, b) = (
        Tensor::ones(&[3, 2], DType::F32),
        Tensor::ones(&[2], DType::F32),
    );
    assert_eq!(batched(&a, &b).to_vec::<f32>().unwrap(), [2.0; 3]);
    let m = panic_message(|| {
        batched(
            &Tensor::ones(&[3, 2], DType::F32),
            &Tensor::ones(&[5], DType::F32),
        )
    });
    assert!(
        m.contains("mul: shapes [2] and [5] cannot broadcast"),
        "{m}"
    );
    let m = panic_message(|| batched(&Tensor::ones(&[0usize; 0], DType::F32), &b));
    assert_site(&m, "vmap", line);
}

#[test]
fn a_grad_callable_names_the_line_it_was_written_on() {
    let ints = Tensor::from_vec(vec![1i32, 2], &[2]);
    let line = line!() + 1;
    let m = panic_message(|| grad!(product)(&ints, &ints));
    assert_site(&m, "grad", line);
}
