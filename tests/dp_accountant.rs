//! The DP-SGD privacy accountant and Poisson sampling (issue #41). Every expected ε was computed
//! with Opacus 1.6.0 (`opacus.accountants.RDPAccountant`, default orders) and written here; ε and
//! the RDP values agree within 1e-9 relative, the best order and noise multipliers exactly.

use tensor::dp::accountant::{
    NOISE_SEARCH_TOLERANCE, RdpAccountant, default_orders, epsilon_from_rdp, noise_multiplier_for,
    rdp,
};
use tensor::dp::sampling::{PoissonBatches, poisson_batch, steps_per_epoch};

mod common;
use common::panic_message;

const REL_TOL: f64 = 1e-9;

#[track_caller]
fn assert_rel(what: &str, got: f64, expected: f64) {
    let err = (got - expected).abs() / expected.abs().max(f64::MIN_POSITIVE);
    assert!(
        got == expected || err <= REL_TOL,
        "{what}: got {got}, Opacus {expected} (relative error {err:e})"
    );
}

/// `(sample rate, noise multiplier, steps, δ, ε, best α)`: every 5th point of the grid
/// q × σ × steps × δ, from
/// ```python
/// import itertools as it, warnings; warnings.simplefilter('ignore')
/// from opacus.accountants import RDPAccountant
/// a = RDPAccountant()
/// for q, s, n, d in list(it.product([0.001, 0.01, 0.05, 0.256, 1.0], [0.5, 0.8, 1.1, 2.0, 5.0], [1, 10, 1000, 10000], [1e-5, 1e-6]))[::5]:
///     a.history = [(s, q, n)]; e, o = a.get_privacy_spent(delta=d); print(f'    ({q!r}, {s!r}, {n}, {d!r}, {e!r}, {o!r}),')
/// ```
/// (`history = [(s, q, n)]` is what `n` calls of `step` leave.)
#[rustfmt::skip]
const OPACUS_GRID: [(f64, f64, u64, f64, f64, f64); 40] = [
    (0.001, 0.5, 1, 1e-05, 2.835610328605305, 4.4),
    (0.001, 0.5, 1000, 1e-06, 5.329067567391664, 3.5),
    (0.001, 0.8, 10, 1e-05, 1.0286409948326718, 9.3),
    (0.001, 0.8, 10000, 1e-06, 1.7036252805758572, 8.2),
    (0.001, 1.1, 1000, 1e-05, 0.5295493532921038, 16.0),
    (0.001, 2.0, 1, 1e-06, 0.16284028234888528, 56.0),
    (0.001, 2.0, 10000, 1e-05, 0.20127230462935622, 54.0),
    (0.001, 5.0, 10, 1e-06, 0.1400186083617621, 63.0),
    (0.01, 0.5, 1, 1e-05, 4.395180133955984, 3.4),
    (0.01, 0.5, 1000, 1e-06, 17.557527646728683, 2.1),
    (0.01, 0.8, 10, 1e-05, 1.7841922398132788, 6.2),
    (0.01, 0.8, 10000, 1e-06, 12.047241635096471, 3.2),
    (0.01, 1.1, 1000, 1e-05, 1.7117700912203435, 9.6),
    (0.01, 2.0, 1, 1e-06, 0.25753885017142614, 37.0),
    (0.01, 2.0, 10000, 1e-05, 2.3529131287817933, 8.9),
    (0.01, 5.0, 10, 1e-06, 0.14132447944921858, 63.0),
    (0.05, 0.5, 1, 1e-05, 6.340948878747915, 3.0),
    (0.05, 0.5, 1000, 1e-06, 70.63558354208415, 1.4),
    (0.05, 0.8, 10, 1e-05, 3.5981761764396563, 4.2),
    (0.05, 0.8, 10000, 1e-06, 88.40055474574648, 1.5),
    (0.05, 1.1, 1000, 1e-05, 10.013398353326437, 3.1),
    (0.05, 2.0, 1, 1e-06, 0.44463106510848976, 24.0),
    (0.05, 2.0, 10000, 1e-05, 15.406597982237031, 2.7),
    (0.05, 5.0, 10, 1e-06, 0.17673936456402373, 63.0),
    (0.256, 0.5, 1, 1e-05, 8.743723850511666, 3.1),
    (0.256, 0.5, 1000, 1e-06, 421.91606164164716, 1.2),
    (0.256, 0.8, 10, 1e-05, 10.186038992954169, 2.6),
    (0.256, 0.8, 10000, 1e-06, 947.5343246075369, 1.1),
    (0.256, 1.1, 1000, 1e-05, 75.55343892439487, 1.5),
    (0.256, 2.0, 1, 1e-06, 1.2054236545646937, 13.0),
    (0.256, 2.0, 10000, 1e-05, 151.55727476400583, 1.3),
    (0.256, 5.0, 10, 1e-06, 0.8102316865968189, 24.0),
    (1.0, 0.5, 1, 1e-05, 10.725509696418232, 3.3),
    (1.0, 0.5, 1000, 1e-06, 2334.8041085088007, 1.1),
    (1.0, 0.8, 10, 1e-05, 25.518420950267977, 2.2),
    (1.0, 0.8, 10000, 1e-06, 8728.5541085088, 1.1),
    (1.0, 1.1, 1000, 1e-05, 550.7290286666946, 1.2),
    (1.0, 2.0, 1, 1e-06, 2.4191024886939205, 10.6),
    (1.0, 2.0, 10000, 1e-05, 1486.7782575788606, 1.1),
    (1.0, 5.0, 10, 1e-06, 3.131089774915035, 8.6),
];

#[test]
fn epsilon_equals_opacus_on_the_grid() {
    for &(q, sigma, steps, delta, eps, alpha) in &OPACUS_GRID {
        let mut acc = RdpAccountant::new();
        (0..steps).for_each(|_| acc.step(sigma, q));
        assert_eq!(acc.steps(), steps);
        let (got, order) = acc.epsilon_and_order(delta);
        let what = format!("q={q} σ={sigma} steps={steps} δ={delta}");
        assert_rel(&what, got, eps);
        assert_eq!(order, alpha, "{what}: best order");
        assert_eq!(acc.epsilon(delta), got, "{what}: epsilon");
    }
}

#[test]
fn rdp_and_conversion_equal_opacus() {
    // compute_rdp(q=0.05, noise_multiplier=1.1, steps=7, orders=[1.5, 2.0, 2.5, 7.0, 32.0]) and
    // get_privacy_spent(orders=..., rdp=..., delta=1e-5).
    let orders = [1.5, 2.0, 2.5, 7.0, 32.0];
    let expected = [
        0.01622460660933197,
        0.022454655738903616,
        0.0292217605365364,
        0.20564127595589052,
        70.91540188254882,
    ];
    let got = rdp(0.05, 1.1, 7, &orders);
    for ((&g, &e), a) in got.iter().zip(&expected).zip(orders) {
        assert_rel(&format!("rdp at α={a}"), g, e);
    }
    let (eps, alpha) = epsilon_from_rdp(&orders, &got, 1e-5);
    assert_rel("epsilon_from_rdp", eps, 1.6459931487811181);
    assert_eq!(alpha, 7.0);
}

#[test]
fn default_orders_are_opacus_defaults() {
    let orders = default_orders();
    assert_eq!(orders.len(), 99 + 52);
    assert_eq!(&orders[..3], &[1.1, 1.2, 1.3]);
    assert_eq!(orders[98], 10.9);
    assert_eq!(&orders[99..101], &[12.0, 13.0]);
    assert_eq!(orders[150], 63.0);
}

/// `(σ, q, steps)` phases, Opacus's history length, and `(ε, best α)` at δ = 1e-5 and 1e-6.
type TwoPhaseCase = (&'static [(f64, f64, u64)], usize, [(f64, f64); 2]);

#[test]
fn two_phase_histories_equal_opacus() {
    // a = RDPAccountant(); [a.step(noise_multiplier=s, sample_rate=q) for s, q, n in phases
    // for _ in range(n)]; (len(a.history), [a.get_privacy_spent(delta=d) for d in (1e-5, 1e-6)])
    let cases: [TwoPhaseCase; 3] = [
        (
            &[(1.1, 0.01, 500), (2.0, 0.05, 300)],
            2,
            [(2.4409810676359176, 8.2), (2.7455532725918914, 8.9)],
        ),
        (
            &[(0.8, 0.001, 1000), (5.0, 0.256, 10), (0.8, 0.001, 1000)],
            3,
            [(1.3163964524696719, 8.4), (1.6243343277130748, 8.5)],
        ),
        (
            &[(0.5, 1.0, 3), (1.1, 0.01, 2000)],
            2,
            [(21.742004895314547, 2.3), (23.41280907895808, 2.5)],
        ),
    ];
    for (phases, runs, expected) in cases {
        let mut acc = RdpAccountant::new();
        for &(sigma, q, n) in phases {
            (0..n).for_each(|_| acc.step(sigma, q));
        }
        assert_eq!(acc.steps(), phases.iter().map(|p| p.2).sum::<u64>());
        assert_eq!(acc.history(), phases, "consecutive equal steps merge");
        assert_eq!(acc.history().len(), runs, "Opacus's history length");
        for (delta, (eps, alpha)) in [1e-5, 1e-6].into_iter().zip(expected) {
            let (got, order) = acc.epsilon_and_order(delta);
            assert_rel(&format!("{phases:?} δ={delta}"), got, eps);
            assert_eq!(order, alpha, "{phases:?} δ={delta}: best order");
        }
    }
}

#[test]
fn merged_history_equals_one_entry_per_step() {
    // Merging consecutive equal steps changes nothing but the bookkeeping: the same RDP summed
    // step by step (here by hand) gives the same ε.
    let mut acc = RdpAccountant::new();
    (0..50).for_each(|_| acc.step(1.1, 0.05));
    let orders = default_orders();
    let one = rdp(0.05, 1.1, 1, &orders);
    let summed: Vec<f64> = one.iter().map(|r| r * 50.0).collect();
    assert_rel(
        "merged",
        acc.epsilon(1e-5),
        epsilon_from_rdp(&orders, &summed, 1e-5).0,
    );
}

#[test]
fn edge_cases_behave_as_opacus() {
    let empty = RdpAccountant::new();
    assert_eq!(empty.epsilon_and_order(1e-5), (0.0, 0.0));
    // history = [(0.0, 0.01, 5)]: no noise, no privacy.
    let mut no_noise = RdpAccountant::new();
    (0..5).for_each(|_| no_noise.step(0.0, 0.01));
    assert_eq!(no_noise.epsilon_and_order(1e-5), (f64::INFINITY, 1.1));
    // history = [(1.0, 0.0, 5)]: nothing sampled, only the conversion's own term.
    let mut nothing = RdpAccountant::new();
    (0..5).for_each(|_| nothing.step(1.0, 0.0));
    let (eps, alpha) = nothing.epsilon_and_order(1e-5);
    assert_rel("q = 0", eps, 0.10286725121127971);
    assert_eq!(alpha, 63.0);
    // q = 1 is the plain Gaussian mechanism: α / (2σ²) per step.
    assert_eq!(rdp(1.0, 2.0, 3, &[2.0, 9.0]), vec![0.75, 3.375]);
}

#[test]
fn invalid_inputs_panic_naming_the_function_and_value() {
    let msg = panic_message(|| RdpAccountant::new().step(1.0, 1.5));
    assert!(
        msg.contains("RdpAccountant::step") && msg.contains("1.5"),
        "{msg}"
    );
    let msg = panic_message(|| RdpAccountant::new().step(-0.5, 0.1));
    assert!(
        msg.contains("RdpAccountant::step") && msg.contains("-0.5"),
        "{msg}"
    );
    let msg = panic_message(|| RdpAccountant::new().epsilon(1.0));
    assert!(
        msg.contains("RdpAccountant::epsilon") && msg.contains("delta"),
        "{msg}"
    );
    let msg = panic_message(|| rdp(-0.1, 1.0, 1, &[2.0]));
    assert!(msg.contains("rdp") && msg.contains("-0.1"), "{msg}");
    let msg = panic_message(|| rdp(0.1, f64::NAN, 1, &[2.0]));
    assert!(msg.contains("rdp") && msg.contains("NaN"), "{msg}");
    let msg = panic_message(|| epsilon_from_rdp(&[2.0], &[1.0], 0.0));
    assert!(
        msg.contains("epsilon_from_rdp") && msg.contains("got 0"),
        "{msg}"
    );
    let msg = panic_message(|| noise_multiplier_for(1.0, 2.0, 0.1, 10));
    assert!(
        msg.contains("noise_multiplier_for") && msg.contains("got 2"),
        "{msg}"
    );
    let msg = panic_message(|| poisson_batch(10, 1.01, 0, 0));
    assert!(
        msg.contains("poisson_batch") && msg.contains("1.01"),
        "{msg}"
    );
    let msg = panic_message(|| PoissonBatches::epoch(10, 0.0, 0, 0));
    assert!(
        msg.contains("steps_per_epoch") && msg.contains("got 0"),
        "{msg}"
    );
}

/// `(target ε, δ, sample rate, steps, σ)` from
/// `get_noise_multiplier(target_epsilon=e, target_delta=d, sample_rate=q, steps=n)` (Opacus's
/// default `epsilon_tolerance=0.01`).
const OPACUS_NOISE: [(f64, f64, f64, u64, f64); 5] = [
    (1.0, 1e-05, 0.01, 1000, 1.5234375),
    (3.0, 1e-05, 0.256, 100, 4.0234375),
    (8.0, 1e-06, 0.001, 10000, 0.492706298828125),
    (0.5, 1e-05, 0.05, 10, 1.97265625),
    (2.0, 1e-06, 1.0, 1, 2.3828125),
];

#[test]
fn noise_multiplier_for_round_trips_and_equals_opacus() {
    for (target, delta, q, steps, opacus_sigma) in OPACUS_NOISE {
        let sigma = noise_multiplier_for(target, delta, q, steps);
        let mut acc = RdpAccountant::new();
        (0..steps).for_each(|_| acc.step(sigma, q));
        let eps = acc.epsilon(delta);
        let what = format!("ε={target} δ={delta} q={q} steps={steps}: σ={sigma} gives ε={eps}");
        assert!(
            eps <= target && eps >= target - NOISE_SEARCH_TOLERANCE,
            "{what}"
        );
        // The same bisection over the same ε: the same dyadic σ, not merely one within the
        // tolerance.
        assert_eq!(sigma, opacus_sigma, "{what}");
    }
}

#[test]
fn poisson_batches_are_deterministic_ascending_and_seeded() {
    let batch = poisson_batch(500, 0.2, 42, 3);
    assert_eq!(batch, poisson_batch(500, 0.2, 42, 3));
    assert!(batch.windows(2).all(|w| w[0] < w[1]));
    assert!(batch.iter().all(|&i| i < 500));
    assert_ne!(batch, poisson_batch(500, 0.2, 43, 3), "another seed");
    assert_eq!(poisson_batch(500, 1.0, 42, 3), (0..500).collect::<Vec<_>>());
    assert!(poisson_batch(500, 0.0, 42, 3).is_empty());
}

#[test]
fn poisson_steps_differ_and_are_independent() {
    // Different steps give different batches, and the overlap of two steps' batches is what
    // independence predicts: n q² = 1000 · 0.09 = 90 shared indices on average, standard
    // deviation √(n q²(1 - q²)) ≈ 9.1; 6 deviations is a bound a correct sampler breaks with
    // probability about 1e-9 per pair.
    let (n, q) = (1000, 0.3);
    let batches: Vec<Vec<usize>> = (0..20).map(|s| poisson_batch(n, q, 9, s)).collect();
    for a in 0..batches.len() {
        for b in a + 1..batches.len() {
            assert_ne!(batches[a], batches[b], "steps {a} and {b}");
            let shared = batches[a]
                .iter()
                .filter(|i| batches[b].binary_search(i).is_ok())
                .count() as f64;
            let (mean, sd) = (n as f64 * q * q, (n as f64 * q * q * (1.0 - q * q)).sqrt());
            assert!(
                (shared - mean).abs() <= 6.0 * sd,
                "steps {a} and {b} share {shared} indices, independence predicts {mean} ± {sd}"
            );
        }
    }
}

#[test]
fn poisson_empirical_rate_is_within_binomial_tolerance() {
    // 2000 steps over 1000 examples at q = 0.01: 2e6 Bernoulli draws, total ~ Binomial(2e6,
    // 0.01) with mean 20000 and standard deviation √(2e6 · 0.01 · 0.99) ≈ 140.7; accept 6
    // deviations. Each index on its own: 2000 draws, mean 20, sd ≈ 4.45, and every index must
    // be drawn at least once (P(never) = 0.99^2000 ≈ 2e-9).
    let (n, q, steps) = (1000usize, 0.01, 2000u64);
    let mut counts = vec![0u32; n];
    let mut empty = 0;
    for step in 0..steps {
        let batch = poisson_batch(n, q, 1, step);
        empty += batch.is_empty() as u32;
        batch.iter().for_each(|&i| counts[i] += 1);
    }
    let total: u32 = counts.iter().sum();
    let (mean, sd) = (2e4, (2e6f64 * q * (1.0 - q)).sqrt());
    assert!(
        (total as f64 - mean).abs() <= 6.0 * sd,
        "{total} draws, expected {mean} ± {sd}"
    );
    assert!(counts.iter().all(|&c| c > 0), "an index never drawn");
    // P(empty batch) = 0.99^1000 ≈ 4.3e-5: about 0.09 empty batches in 2000 steps, so none
    // here; empty batches show at small n.
    assert!(empty <= 3, "{empty} empty batches");
    let small_empty = (0..1000)
        .filter(|&s| poisson_batch(5, 0.1, 1, s).is_empty())
        .count();
    // P(empty) = 0.9^5 ≈ 0.59: 590 ± 15.6 of 1000 steps; 6 deviations.
    assert!(
        (small_empty as f64 - 590.49).abs() <= 6.0 * 15.55,
        "{small_empty} empty batches of 1000"
    );
}

#[test]
fn an_epoch_has_floor_one_over_q_batches_continuing_the_step_counter() {
    assert_eq!(steps_per_epoch(0.256), 3);
    assert_eq!(steps_per_epoch(0.001), 1000);
    assert_eq!(steps_per_epoch(1.0), 1);
    let epoch2: Vec<Vec<usize>> = PoissonBatches::epoch(64, 0.3, 5, 2).collect();
    assert_eq!(epoch2.len(), 3);
    assert_eq!(PoissonBatches::epoch(64, 0.3, 5, 2).len(), 3);
    for (k, batch) in epoch2.iter().enumerate() {
        assert_eq!(*batch, poisson_batch(64, 0.3, 5, 6 + k as u64), "batch {k}");
    }
}
