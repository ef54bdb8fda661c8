//! How the cold kernels of a schedule are split into compiler runs, and those runs spread
//! over the cores.
//!
//! Kernels are built together, one compiler run per core: each run pays the compiler's
//! start-up, the headers, the link and the helper functions once. Measured on 183 kernels of
//! `examples/per_sample_grads_transformer` (gcc, -O2, about 43 ms of CPU a kernel), every
//! run beyond one per core cost about 0.12 s of CPU more: 2 runs 7.9 s, 4 runs 8.1 s, 8 runs
//! 8.8 s, 16 runs 9.1 s. But one run per core leaves the progress of a long compile
//! (`progress`) at `0/N` until it is nearly over. So only a compile long enough for each run
//! to keep [`MIN_KERNELS_PER_RUN`] kernels (about 3 s of compiling; the extra runs cost it at
//! most about 4%) is cut into more runs, up to [`RUNS_PER_CORE`], which the cores take from
//! a queue as each finishes one.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Most compiler runs per core for one compile.
const RUNS_PER_CORE: usize = 4;

/// Fewest kernels a compiler run is cut down to, so its fixed cost stays small beside them.
const MIN_KERNELS_PER_RUN: usize = 64;

/// How many compiler runs `kernels` cold kernels are built in on `cores` cores: one per core
/// for few kernels, up to [`RUNS_PER_CORE`] per core for many (a multiple of the cores, so
/// runs of equal size finish together), none with fewer than [`MIN_KERNELS_PER_RUN`] kernels
/// unless there are fewer kernels than cores.
pub(super) fn compiler_runs(kernels: usize, cores: usize) -> usize {
    let cores = cores.max(1);
    let per_core = (kernels / (cores * MIN_KERNELS_PER_RUN)).clamp(1, RUNS_PER_CORE);
    (cores * per_core).min(kernels)
}

/// `items` split into at most `parts` groups of about equal total `weight`, each group in
/// the order of `items` (largest first into the lightest group).
pub(super) fn balanced_groups(
    items: &[usize],
    parts: usize,
    weight: impl Fn(usize) -> usize,
) -> Vec<Vec<usize>> {
    let parts = parts.clamp(1, items.len().max(1));
    let mut by_weight = items.to_vec();
    by_weight.sort_by_key(|&i| std::cmp::Reverse(weight(i)));
    let mut groups: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); parts];
    for i in by_weight {
        let lightest = groups
            .iter_mut()
            .min_by_key(|(total, _)| *total)
            .expect("at least one group");
        lightest.0 += weight(i);
        lightest.1.push(i);
    }
    groups
        .into_iter()
        .map(|(_, mut group)| {
            group.sort_unstable();
            group
        })
        .filter(|group| !group.is_empty())
        .collect()
}

/// `f` of every item, on at most `cores` threads (the calling one among them, and never more
/// than the machine has cores), each taking the next item as it finishes one; results in the
/// order of `items`.
pub(super) fn each_on_cores<T: Sync, R: Send>(
    items: &[T],
    cores: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let lanes = vec![(); cores.clamp(1, items.len().max(1))];
    let mut results: Vec<(usize, R)> = crate::parallel::each_in_parallel(&lanes, |_| {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            done.push((i, f(item)));
        }
    })
    .into_iter()
    .flatten()
    .collect();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;

    #[test]
    fn few_kernels_get_one_run_per_core_and_many_a_few_runs_per_core() {
        assert_eq!(compiler_runs(1, 16), 1);
        assert_eq!(compiler_runs(10, 16), 10);
        assert_eq!(compiler_runs(75, 2), 2);
        assert_eq!(compiler_runs(255, 2), 2);
        assert_eq!(compiler_runs(256, 2), 4);
        assert_eq!(compiler_runs(400, 2), 6);
        assert_eq!(compiler_runs(1400, 2), 8);
        assert_eq!(compiler_runs(1000, 16), 16);
        assert_eq!(compiler_runs(100_000, 16), 64);
        assert_eq!(compiler_runs(5, 0), 1);
    }

    #[test]
    fn groups_hold_every_item_once_with_about_equal_weight() {
        let items: Vec<usize> = (0..40).collect();
        let groups = balanced_groups(&items, 8, |i| 100 + i);
        assert_eq!(groups.len(), 8);
        let all: Vec<usize> = groups.iter().flatten().copied().collect();
        assert_eq!(all.iter().copied().collect::<HashSet<_>>().len(), 40);
        assert_eq!(all.len(), 40);
        let totals: Vec<usize> = groups
            .iter()
            .map(|g| g.iter().map(|&i| 100 + i).sum())
            .collect();
        let (low, high) = (totals.iter().min().unwrap(), totals.iter().max().unwrap());
        assert!(high - low <= 139, "{totals:?}");
        assert!(groups.iter().all(|g| g.is_sorted()));
        assert_eq!(balanced_groups(&[3], 4, |_| 1), vec![vec![3]]);
    }

    #[test]
    fn each_on_cores_keeps_the_order_and_uses_at_most_the_cores_asked_for() {
        let items: Vec<u64> = (0..200).collect();
        let threads = Mutex::new(HashSet::new());
        let squares = each_on_cores(&items, 1, |&x| {
            threads.lock().unwrap().insert(std::thread::current().id());
            x * x
        });
        assert_eq!(squares, items.iter().map(|x| x * x).collect::<Vec<_>>());
        assert_eq!(threads.lock().unwrap().len(), 1);
        assert_eq!(each_on_cores(&items, 64, |&x| x + 1)[199], 200);
        assert!(each_on_cores(&[] as &[u64], 4, |&x| x).is_empty());
    }

    #[test]
    fn each_on_cores_runs_items_at_once_on_two_cores() {
        if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
            return;
        }
        // Each item waits (up to a minute) until both are under way: on one thread the first
        // would time out alone.
        let started = (Mutex::new(0), std::sync::Condvar::new());
        let together = each_on_cores(&[0, 1], 2, |_| {
            let mut count = started.0.lock().unwrap();
            *count += 1;
            started.1.notify_all();
            let timeout = std::time::Duration::from_secs(60);
            let (count, _) = started
                .1
                .wait_timeout_while(count, timeout, |c| *c < 2)
                .unwrap();
            *count == 2
        });
        assert_eq!(together, [true, true]);
    }
}
