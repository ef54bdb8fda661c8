//! `Tensor::to`: a value moved to a device ties the graphs that read it to that device, host
//! values follow it there, values tied to two devices are refused, and transforms and `jit`
//! see through the move. Checked on the emulated GPU (`EMU`), which every machine has: its
//! kernels are lowered and rendered for a GPU and run by the emulator, so a value that is
//! resident there was computed by GPU code. No test changes the selected device.

mod common;

use common::{assert_matches_interpreter, interpreted, ramp};
use tensor::prelude::*;
use tensor::runtime::placement::resident_device;
use tensor::runtime::realize::{SelectedDevice, realize, selected_device};
use tensor::runtime::{Jit, RuntimeError};

const EMU: SelectedDevice = SelectedDevice::Emulated;

fn emu() -> Device {
    Device::Single("EMU".into())
}

/// Fails unless the compiled values of `t` equal `expected` within `tol` (relative and
/// absolute).
#[track_caller]
fn assert_close(what: &str, t: &Tensor, expected: &[f64], tol: f64) {
    let actual = common::values(t);
    assert!(
        common::allclose(&actual, expected, tol, tol),
        "{what}: {actual:?} vs {expected:?}"
    );
}

#[test]
fn a_moved_value_is_computed_on_its_device_and_equals_the_interpreter() {
    let x = ramp(&[4, 6], 2.0);
    let y = (x.to("emu") * 2.0 + 1.0).exp().sum(1, false);
    assert_eq!(y.device(), emu());
    assert_matches_interpreter("exp row sums on EMU", &y);
    assert_eq!(resident_device(&y), Some(EMU));
    assert_eq!(y.device(), emu(), "the result stays tied to EMU");
}

#[test]
fn host_operands_follow_a_tied_operand_whatever_their_order() {
    let (host, other) = (ramp(&[3, 5], 1.0), ramp(&[3, 5], 3.0));
    let moved = other.to("EMU");
    for (what, t) in [
        ("host first", &host + &moved),
        ("host last", &moved * &host),
    ] {
        assert_eq!(t.device(), emu(), "{what}");
        assert_matches_interpreter(what, &t);
        assert_eq!(resident_device(&t), Some(EMU), "{what}");
    }
}

#[test]
fn a_value_computed_on_a_device_keeps_computing_there_and_moves_back_to_the_host() {
    let x = ramp(&[8], 1.0);
    let on_emu = (x.to("EMU") + 1.0).sqrt();
    realize(&[&on_emu]).unwrap();
    let later = &on_emu * 3.0;
    assert_matches_interpreter("from a realized EMU value", &later);
    assert_eq!(resident_device(&later), Some(EMU));
    let back = later.to("CPU") - 1.0;
    assert_eq!(back.device(), Device::cpu());
    assert_matches_interpreter("moved back to the host", &back);
    assert_eq!(
        resident_device(&back),
        Some(selected_device().unwrap()),
        "a host value computes on the selected device"
    );
}

#[test]
fn integers_keep_every_bit_through_moves_there_and_back() {
    let ints = Tensor::from_vec(vec![i32::MIN, -1, 0, 7, i32::MAX], &[5]);
    let round_trip = ints.to("EMU").to("CPU").to("EMU");
    assert_eq!(
        round_trip.to_vec::<i32>().unwrap(),
        vec![i32::MIN, -1, 0, 7, i32::MAX]
    );
    let shifted = (&round_trip ^ 5).to("CPU");
    assert_eq!(
        shifted.to_vec::<i32>().unwrap(),
        vec![i32::MIN ^ 5, -1 ^ 5, 5, 7 ^ 5, i32::MAX ^ 5]
    );
}

#[test]
fn values_tied_to_two_devices_are_refused_with_what_to_do() {
    let x = ramp(&[4], 1.0);
    let mixed = x.to("EMU") + x.to("CUDA:3");
    let err = realize(&[&mixed]).unwrap_err();
    assert!(matches!(err, RuntimeError::Placement(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("EMU") && text.contains("CUDA:3"), "{text}");
    assert!(text.contains(".to(...)"), "{text}");
}

#[test]
fn an_unknown_device_is_an_error_when_realized() {
    let moved = ramp(&[4], 1.0).to("tpu");
    assert_eq!(moved.device(), Device::Single("TPU".into()));
    let err = realize(&[&moved]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("`TPU`") && text.contains("is not a device"),
        "{text}"
    );
}

#[test]
fn gradients_flow_back_through_a_move() {
    let x = ramp(&[6], 2.0);
    let loss = |x: &Tensor| {
        let on_emu = x.to("EMU");
        (&on_emu * &on_emu).sin().sum_all()
    };
    let g = grad(loss, 0).call1(std::slice::from_ref(&x));
    assert_eq!(
        g.device(),
        Device::cpu(),
        "the cotangent moves back to x's device"
    );
    let expected: Vec<f64> = interpreted(&((&x * &x).cos() * &x * 2.0));
    assert_close("gradient", &g, &expected, 1e-5);
}

#[test]
fn vmap_moves_the_whole_batch() {
    let xs = ramp(&[3, 4], 2.0);
    let per_row =
        vmap(|x: &Tensor| x.to("EMU").exp().sum_all(), 0, 0).call1(std::slice::from_ref(&xs));
    assert_eq!(per_row.device(), emu());
    let expected = interpreted(&xs.exp().sum(1, false));
    assert_close("per-row sums", &per_row, &expected, 1e-5);
    assert_eq!(resident_device(&per_row), Some(EMU));
}

#[test]
fn a_jitted_function_runs_and_replays_where_its_arguments_are_tied() {
    let jitted = Jit::new(Func::new(Some(2), |args: &[Tensor]| {
        vec![(&args[0] * &args[1] + 1.0).tanh()]
    }));
    let (a, b) = (ramp(&[16], 1.0).to("EMU"), ramp(&[16], 2.0));
    let first = jitted.call(&[a.clone(), b.clone()]).unwrap().remove(0);
    assert_eq!(resident_device(&first), Some(EMU));
    let (c, d) = (ramp(&[16], 3.0).to("EMU"), ramp(&[16], 0.5));
    let second = jitted.call(&[c.clone(), d.clone()]).unwrap().remove(0);
    assert_eq!(jitted.trace_count(), 1, "one signature, one trace");
    assert_eq!(resident_device(&second), Some(EMU));
    let expected = interpreted(&(&c * &d + 1.0).tanh());
    assert_close("second call", &second, &expected, 1e-6);
    let on_host = jitted.call(&[ramp(&[16], 1.0), b]).unwrap().remove(0);
    assert_eq!(
        jitted.trace_count(),
        2,
        "host arguments are another signature"
    );
    assert_eq!(resident_device(&on_host), Some(selected_device().unwrap()));
}

#[test]
fn a_jitted_function_that_moves_values_itself_is_realized_at_each_call() {
    let jitted = Jit::new(Func::new(Some(1), |args: &[Tensor]| {
        vec![(args[0].to("EMU") * 2.0).to("CPU") + 1.0]
    }));
    for scale in [1.0, 2.0] {
        let x = ramp(&[5], scale);
        let y = jitted.call(std::slice::from_ref(&x)).unwrap().remove(0);
        assert_close(
            "moved inside jit",
            &y,
            &interpreted(&(&x * 2.0 + 1.0)),
            1e-6,
        );
    }
    assert_eq!(jitted.trace_count(), 1);
}
