//! The progress of a cold compile on stderr: `compiling kernels: k/N`, shown only once the
//! compile has run for [`PROGRESS_DELAY`] (a warm or small compile stays silent), and updated
//! as compiler runs finish. On a terminal it is one line redrawn in place with a bar; otherwise
//! plain lines, one when it first shows, one per quarter of the kernels, and the last one.
//! `TENSOR_PROGRESS` chooses ([`ProgressSetting`]).

use crate::error::{Result, RuntimeError};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a compile runs before its progress is shown.
pub const PROGRESS_DELAY: Duration = Duration::from_secs(1);

/// How often the shown progress is looked at again between compiler runs finishing (the
/// terminal line's seconds count up).
const TICK: Duration = Duration::from_millis(250);

/// How many characters wide the terminal bar is.
const BAR_WIDTH: usize = 24;

/// When the progress of a compile is shown on stderr (`TENSOR_PROGRESS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProgressSetting {
    /// Never (`TENSOR_PROGRESS=0`).
    Off,
    /// Once a compile has run for [`PROGRESS_DELAY`] (`TENSOR_PROGRESS=1`, the default).
    #[default]
    AfterDelay,
    /// From the start of every compile that runs the compiler (`TENSOR_PROGRESS=always`).
    Always,
}

/// The progress setting `$TENSOR_PROGRESS` asks for.
pub fn progress_setting_from_env() -> Result<ProgressSetting> {
    progress_setting(crate::settings::var("TENSOR_PROGRESS"))
}

/// The progress setting a `TENSOR_PROGRESS` value asks for (`None`: the default).
fn progress_setting(value: Option<String>) -> Result<ProgressSetting> {
    let Some(value) = value else {
        return Ok(ProgressSetting::default());
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "0" | "off" | "false" | "no" => Ok(ProgressSetting::Off),
        "1" | "on" | "true" | "yes" => Ok(ProgressSetting::AfterDelay),
        "always" => Ok(ProgressSetting::Always),
        _ => Err(RuntimeError::InvalidSetting {
            variable: "TENSOR_PROGRESS",
            value,
            expected: "0 (never show compile progress), 1 (after a second) or always",
        }),
    }
}

/// What a compile's progress display writes next, decided from the time, the kernels built,
/// whether stderr is a terminal and what it wrote before (and nothing else, so tests can
/// replay any course of a compile).
#[derive(Debug)]
pub(crate) struct ProgressView {
    delay: Option<Duration>,
    terminal: bool,
    shown: Option<Shown>,
}

/// The last progress written.
#[derive(Clone, Copy, Debug)]
struct Shown {
    done: usize,
    seconds: u64,
}

impl ProgressView {
    /// A display that has written nothing yet.
    pub(crate) fn new(setting: ProgressSetting, terminal: bool) -> ProgressView {
        let delay = match setting {
            ProgressSetting::Off => None,
            ProgressSetting::AfterDelay => Some(PROGRESS_DELAY),
            ProgressSetting::Always => Some(Duration::ZERO),
        };
        ProgressView {
            delay,
            terminal,
            shown: None,
        }
    }

    /// What to write now that `done` of `total` kernels are built, `elapsed` into the
    /// compile, if anything.
    pub(crate) fn update(
        &mut self,
        elapsed: Duration,
        done: usize,
        total: usize,
    ) -> Option<String> {
        let delay = self.delay?;
        let seconds = elapsed.as_secs();
        let changed = match self.shown {
            None => elapsed >= delay,
            Some(last) if self.terminal => done != last.done || seconds != last.seconds,
            // The last quarter is told by the final line.
            Some(last) => done < total && quarter(done, total) > quarter(last.done, total),
        };
        if !changed {
            return None;
        }
        self.shown = Some(Shown { done, seconds });
        Some(if self.terminal {
            format!("\r\x1b[2K{}", bar_line(elapsed, done, total))
        } else {
            format!("compiling kernels: {done}/{total}\n")
        })
    }

    /// What to write when the compile is over, `done` of `total` kernels built: a last line,
    /// if anything was shown.
    pub(crate) fn finish(
        &mut self,
        elapsed: Duration,
        done: usize,
        total: usize,
    ) -> Option<String> {
        self.shown?;
        self.shown = None;
        let outcome = if done >= total { "in" } else { "stopped after" };
        let line = format!("compiling kernels: {done}/{total} {outcome} {elapsed:.1?}");
        Some(if self.terminal {
            format!("\r\x1b[2K{line}\n")
        } else {
            format!("{line}\n")
        })
    }
}

/// Which quarter of `total` `done` has reached (0 to 4).
fn quarter(done: usize, total: usize) -> usize {
    (done.min(total) * 4).checked_div(total).unwrap_or(4)
}

/// The terminal's line: `compiling kernels [#####-----] k/N 3s`.
fn bar_line(elapsed: Duration, done: usize, total: usize) -> String {
    let filled = (done.min(total) * BAR_WIDTH)
        .checked_div(total)
        .unwrap_or(BAR_WIDTH);
    format!(
        "compiling kernels [{}{}] {done}/{total} {}s",
        "#".repeat(filled),
        "-".repeat(BAR_WIDTH - filled),
        elapsed.as_secs()
    )
}

/// Whether a compile's progress is on stderr now: a second compile running at the same time
/// stays silent rather than draw over the first one's line.
static SHOWING: AtomicBool = AtomicBool::new(false);

/// The kernels built so far by a compile, counted by the threads that build them.
#[derive(Debug, Default)]
pub(crate) struct BuildCount {
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl BuildCount {
    /// Counts `kernels` more as built (or failed: their compiler run is over either way).
    pub(crate) fn add(&self, kernels: usize) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).0 += kernels;
        self.changed.notify_all();
    }

    /// Marks the compile as over.
    fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.changed.notify_all();
    }

    /// The count and whether the compile is over, once either differs from `seen` kernels
    /// built and still under way, or after `timeout`.
    fn wait(&self, seen: usize, timeout: Duration) -> (usize, bool) {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |&mut (done, over)| done == seen && !over)
            .unwrap_or_else(PoisonError::into_inner);
        *state
    }
}

/// Closes its count when dropped, so the display ends even when the work panics.
struct CloseOnDrop<'a>(&'a BuildCount);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// `work` (the build of `total` kernels, counting them in the [`BuildCount`] it is given),
/// with its progress shown on stderr by a second thread as `setting` asks.
pub(crate) fn with_progress<R>(
    setting: ProgressSetting,
    total: usize,
    work: impl FnOnce(&BuildCount) -> R,
) -> R {
    let count = BuildCount::default();
    if setting == ProgressSetting::Off {
        return work(&count);
    }
    let view = ProgressView::new(setting, std::io::stderr().is_terminal());
    let started = Instant::now();
    std::thread::scope(|scope| {
        let display = std::thread::Builder::new()
            .name("compile progress".into())
            .spawn_scoped(scope, || show(view, &count, started, total));
        let closing = CloseOnDrop(&count);
        let result = work(&count);
        drop(closing);
        if let Ok(display) = display {
            let _ = display.join();
        }
        result
    })
}

/// Writes `view`'s progress of `count` until the compile is over, then its last line.
fn show(mut view: ProgressView, count: &BuildCount, started: Instant, total: usize) {
    let mut owns_stderr = false;
    // The first look does not wait, so a compile shown from its start is shown even when it
    // is over before this thread runs.
    let mut seen = usize::MAX;
    loop {
        let (done, over) = count.wait(seen, TICK);
        seen = done;
        if let Some(text) = view.update(started.elapsed(), done, total) {
            owns_stderr = owns_stderr || !SHOWING.swap(true, Ordering::AcqRel);
            if owns_stderr {
                write_stderr(&text);
            } else {
                // Another compile's progress is on stderr: this one stays silent.
                view = ProgressView::new(ProgressSetting::Off, false);
            }
        }
        if over {
            if let Some(text) = view.finish(started.elapsed(), done, total) {
                write_stderr(&text);
            }
            break;
        }
    }
    if owns_stderr {
        SHOWING.store(false, Ordering::Release);
    }
}

/// Writes `text` to stderr; a failed write is dropped, since the compile does not depend on
/// its progress being seen.
fn write_stderr(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn nothing_is_shown_before_the_delay_nor_when_the_compile_ends_before_it() {
        let mut view = ProgressView::new(ProgressSetting::AfterDelay, false);
        assert_eq!(view.update(ms(0), 0, 40), None);
        assert_eq!(view.update(ms(900), 30, 40), None);
        assert_eq!(view.finish(ms(950), 40, 40), None);
    }

    #[test]
    fn plain_lines_come_at_the_delay_then_per_quarter_then_at_the_end() {
        let mut view = ProgressView::new(ProgressSetting::AfterDelay, false);
        let lines: Vec<String> = [(1000, 3), (1250, 5), (1500, 10), (1750, 11), (2000, 19)]
            .into_iter()
            .chain([(2250, 21), (9000, 29), (9250, 30), (9500, 39), (9700, 40)])
            .filter_map(|(t, done)| view.update(ms(t), done, 40))
            .collect();
        assert_eq!(
            lines,
            [
                "compiling kernels: 3/40\n",
                "compiling kernels: 10/40\n",
                "compiling kernels: 21/40\n",
                "compiling kernels: 30/40\n",
            ]
        );
        assert_eq!(
            view.finish(ms(9800), 40, 40).unwrap(),
            "compiling kernels: 40/40 in 9.8s\n"
        );
    }

    #[test]
    fn a_terminal_line_is_redrawn_when_the_count_or_the_second_changes() {
        let mut view = ProgressView::new(ProgressSetting::AfterDelay, true);
        assert_eq!(view.update(ms(500), 0, 4), None);
        let first = view.update(ms(1000), 1, 4).unwrap();
        assert_eq!(
            first,
            format!(
                "\r\x1b[2Kcompiling kernels [{}{}] 1/4 1s",
                "#".repeat(6),
                "-".repeat(18)
            )
        );
        assert!(!first.contains('\n'));
        assert_eq!(view.update(ms(1250), 1, 4), None);
        assert!(view.update(ms(1500), 2, 4).unwrap().ends_with("] 2/4 1s"));
        assert!(view.update(ms(2000), 2, 4).unwrap().ends_with("] 2/4 2s"));
        let last = view.finish(ms(2100), 4, 4).unwrap();
        assert_eq!(last, "\r\x1b[2Kcompiling kernels: 4/4 in 2.1s\n");
    }

    #[test]
    fn always_shows_from_the_start_and_off_never_shows() {
        let mut always = ProgressView::new(ProgressSetting::Always, false);
        assert_eq!(
            always.update(ms(0), 0, 2).as_deref(),
            Some("compiling kernels: 0/2\n")
        );
        let mut off = ProgressView::new(ProgressSetting::Off, true);
        assert_eq!(off.update(ms(60_000), 1, 2), None);
        assert_eq!(off.finish(ms(60_000), 2, 2), None);
    }

    #[test]
    fn a_failed_compile_ends_the_line_saying_where_it_stopped() {
        let mut view = ProgressView::new(ProgressSetting::Always, true);
        assert!(view.update(ms(10), 0, 8).is_some());
        assert_eq!(
            view.finish(ms(1500), 3, 8).unwrap(),
            "\r\x1b[2Kcompiling kernels: 3/8 stopped after 1.5s\n"
        );
    }

    #[test]
    fn progress_setting_reads_on_off_and_always_and_names_the_variable_otherwise() {
        assert_eq!(progress_setting(None).unwrap(), ProgressSetting::AfterDelay);
        for (value, setting) in [
            ("0", ProgressSetting::Off),
            (" off\n", ProgressSetting::Off),
            ("1", ProgressSetting::AfterDelay),
            ("Always", ProgressSetting::Always),
        ] {
            assert_eq!(progress_setting(Some(value.into())).unwrap(), setting);
        }
        for bad in ["", "2", "sometimes"] {
            let err = progress_setting(Some(bad.into())).unwrap_err();
            assert!(err.to_string().contains("TENSOR_PROGRESS"), "{err}");
        }
    }

    #[test]
    fn the_build_count_hands_the_display_every_kernel_and_the_end() {
        let count = BuildCount::default();
        count.add(2);
        count.add(3);
        assert_eq!(count.wait(0, ms(1)), (5, false));
        assert_eq!(count.wait(5, ms(1)), (5, false));
        count.close();
        assert_eq!(count.wait(5, Duration::from_secs(3600)), (5, true));
    }
}
