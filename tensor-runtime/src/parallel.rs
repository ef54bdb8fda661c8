//! Running independent jobs on every core the machine has, results in the order of the jobs.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of every item, computed on up to as many threads as the machine has cores (the calling
/// thread among them); the results come back in the order of `items`. Where the system
/// refuses a thread, the threads already running (at least the calling one) do all the work.
pub fn each_in_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(items.len());
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else {
                return done;
            };
            done.push((i, f(item)));
        }
    };
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers)
            .map_while(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        let mut results = work();
        for helper in helpers {
            results.extend(helper.join().expect("a worker thread panicked"));
        }
        results
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_the_order_of_the_items() {
        let items: Vec<u64> = (0..1000).collect();
        let squares = each_in_parallel(&items, |&x| x * x);
        assert_eq!(squares, items.iter().map(|x| x * x).collect::<Vec<_>>());
        assert_eq!(each_in_parallel(&[] as &[u64], |&x| x), Vec::<u64>::new());
        assert_eq!(each_in_parallel(&[7u64], |&x| x + 1), vec![8]);
    }
}
