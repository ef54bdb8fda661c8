//! A small persistent pool of worker threads that runs the parts of a launch in parallel.
//!
//! Starting threads for every launch costs tens of microseconds, more than many fused kernels
//! take to run, so workers are started once (on the first parallel launch) and then sleep
//! until there is work. A launch publishes a job and the number of parts; the launching
//! thread and the workers claim part ids one at a time until none is left, and the launch
//! returns only when every claimed part has finished. Any number of parts works with any
//! number of workers. Launches through one pool run one after another.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// The work of one launch: called once with each part id in `0..parts`.
pub type Job = Arc<dyn Fn(i32) + Send + Sync>;

/// Worker threads shared by the launches of one device.
pub struct WorkerPool {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// Lowered to the workers that could be started when the system refuses another.
    wanted_workers: AtomicUsize,
    one_launch_at_a_time: Mutex<()>,
}

struct Shared {
    state: Mutex<LaunchState>,
    work_available: Condvar,
    all_parts_done: Condvar,
}

#[derive(Default)]
struct LaunchState {
    job: Option<Job>,
    next_part: i32,
    parts: i32,
    unfinished: i32,
    panicked: bool,
    shutdown: bool,
}

impl LaunchState {
    /// Takes the next unclaimed part of the current job, if any.
    fn claim(&mut self) -> Option<(Job, i32)> {
        let job = self.job.clone()?;
        (self.next_part < self.parts).then(|| {
            self.next_part += 1;
            (job, self.next_part - 1)
        })
    }
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("workers", &self.wanted_workers.load(Ordering::Relaxed))
            .finish()
    }
}

impl WorkerPool {
    /// A pool that will run up to `workers` threads besides the launching one.
    pub fn new(workers: usize) -> WorkerPool {
        WorkerPool {
            shared: Arc::new(Shared {
                state: Mutex::new(LaunchState::default()),
                work_available: Condvar::new(),
                all_parts_done: Condvar::new(),
            }),
            workers: Mutex::new(Vec::new()),
            wanted_workers: AtomicUsize::new(workers),
            one_launch_at_a_time: Mutex::new(()),
        }
    }

    /// Calls `job(part)` for every part in `0..parts` across the pool and the calling thread;
    /// returns when all calls have returned. Fails if a part panicked (after all parts have
    /// finished).
    pub fn run(&self, job: Job, parts: i32) -> std::io::Result<()> {
        let _turn = lock(&self.one_launch_at_a_time);
        self.start_workers();
        let mut state = lock(&self.shared.state);
        *state = LaunchState {
            job: Some(job),
            next_part: 0,
            parts,
            unfinished: parts,
            panicked: false,
            shutdown: false,
        };
        self.shared.work_available.notify_all();
        while let Some(claimed) = state.claim() {
            drop(state);
            let ok = run_part(claimed);
            state = lock(&self.shared.state);
            finish_part(&mut state, ok, &self.shared);
        }
        while state.unfinished > 0 {
            state = self
                .shared
                .all_parts_done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.job = None;
        if state.panicked {
            return Err(std::io::Error::other("a kernel thread panicked"));
        }
        Ok(())
    }

    /// Starts the workers not started yet. Where the system refuses a thread, the pool keeps
    /// the workers it has (the launching thread alone if none), says so once, and asks for no
    /// more: every part still runs, and every worker is joined when the pool is dropped.
    fn start_workers(&self) {
        let mut workers = lock(&self.workers);
        while workers.len() < self.wanted_workers.load(Ordering::Relaxed) {
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("tensor-cpu-{}", workers.len() + 1))
                .spawn(move || work(&shared));
            match spawned {
                Ok(handle) => workers.push(handle),
                Err(e) => {
                    crate::warn(&format!(
                        "could not start CPU worker thread {} ({e}); kernels run on {} \
                         threads. Lower THREADS",
                        workers.len() + 1,
                        workers.len() + 1
                    ));
                    self.wanted_workers.store(workers.len(), Ordering::Relaxed);
                }
            }
        }
    }
}

/// A worker's life: sleep until a part is available, run it, repeat until shutdown.
fn work(shared: &Shared) {
    let mut state = lock(&shared.state);
    loop {
        if state.shutdown {
            return;
        }
        match state.claim() {
            Some(claimed) => {
                drop(state);
                let ok = run_part(claimed);
                state = lock(&shared.state);
                finish_part(&mut state, ok, shared);
            }
            None => {
                state = shared
                    .work_available
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
    }
}

/// Runs one part; true if it returned normally. The job handle is released before the part
/// is reported finished, so nothing of a launch outlives it.
fn run_part((job, part): (Job, i32)) -> bool {
    catch_unwind(AssertUnwindSafe(|| job(part))).is_ok()
}

fn finish_part(state: &mut LaunchState, ok: bool, shared: &Shared) {
    state.panicked |= !ok;
    state.unfinished -= 1;
    if state.unfinished == 0 {
        shared.all_parts_done.notify_all();
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.work_available.notify_all();
        for worker in lock(&self.workers).drain(..) {
            let _ = worker.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn run_counting(pool: &WorkerPool, parts: i32) -> u64 {
        let seen = Arc::new(AtomicU64::new(0));
        let sink = seen.clone();
        pool.run(
            Arc::new(move |part| {
                sink.fetch_add(1 << part, Ordering::Relaxed);
            }),
            parts,
        )
        .unwrap();
        seen.load(Ordering::Relaxed)
    }

    #[test]
    fn every_part_runs_exactly_once() {
        let pool = WorkerPool::new(3);
        for parts in [1, 2, 4, 9, 33] {
            assert_eq!(run_counting(&pool, parts), (1u64 << parts) - 1);
        }
    }

    #[test]
    fn more_parts_than_threads_and_no_workers_still_complete() {
        assert_eq!(run_counting(&WorkerPool::new(0), 5), 0b11111);
        assert_eq!(run_counting(&WorkerPool::new(1), 17), (1 << 17) - 1);
    }

    #[test]
    fn panicking_part_is_an_error_after_all_parts_finish() {
        let pool = WorkerPool::new(2);
        let finished = Arc::new(AtomicU64::new(0));
        let sink = finished.clone();
        let result = pool.run(
            Arc::new(move |part| {
                if part == 1 {
                    panic!("part 1 fails");
                }
                sink.fetch_add(1, Ordering::Relaxed);
            }),
            4,
        );
        assert!(result.is_err());
        assert_eq!(finished.load(Ordering::Relaxed), 3);
        assert_eq!(run_counting(&pool, 3), 0b111);
    }
}
