//! Running the C compiler as a process group under a time limit, without helper threads.
//!
//! The compiler is started as the leader of a process group of its own, so everything it
//! starts (gcc's `cc1`, `as`, `collect2`; a wrapper script's children) is in that group. When
//! the time limit passes, the whole group is killed, not only the driver: a `cc1` left running
//! would go on using memory and a core long after the process that wanted it gave up. When
//! the compiler exits in time, whatever it left running in its group (a background child
//! that still holds its output pipes, say) is killed too, and its exit status decides the
//! outcome: the run is never reported as timed out because a leftover kept a pipe open.
//!
//! The leader is observed with `waitid(WNOWAIT)`, which leaves it a zombie, so its process id
//! (the group's id) cannot be reused by an unrelated process before the group is killed;
//! only then is it reaped. Output is read by the calling thread from non-blocking pipes,
//! woken by `poll`, so a run leaves no thread and no descriptor behind, however it ends.
//!
//! The price of a group of its own: a terminal's Ctrl-C, sent to the foreground group, does
//! not reach the compiler. If the process is interrupted mid-compile, the compiler finishes
//! (or fails) on its own, writing only into the build directory.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The longest the calling thread sleeps between two checks of whether the leader exited
/// while a leftover process keeps its output pipes open.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Runs `command` with no input, collecting its output, as the leader of a new process
/// group. Returns `None` if it is still running when `limit` passes: its whole group has then
/// been killed and reaped.
pub(crate) fn run_with_limit(command: &mut Command, limit: Duration) -> io::Result<Option<Output>> {
    command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let deadline = Instant::now() + limit;
    let mut group = ProcessGroup {
        child: spawn_when_not_busy(command)?,
        reaped: false,
    };
    let mut stdout = Pipe::new(group.child.stdout.take().map(OwnedFd::from))?;
    let mut stderr = Pipe::new(group.child.stderr.take().map(OwnedFd::from))?;
    loop {
        stdout.read_available()?;
        stderr.read_available()?;
        if group.leader_exited()? {
            group.kill();
            stdout.read_available()?;
            stderr.read_available()?;
            let status = group.reap()?;
            return Ok(Some(Output {
                status,
                stdout: stdout.bytes,
                stderr: stderr.bytes,
            }));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // Dropping the group kills and reaps it.
            return Ok(None);
        }
        wait_for_output(&[&stdout, &stderr], left.min(POLL_INTERVAL))?;
    }
}

/// Spawns `command`, retrying for a moment while its program is "text file busy": a compiler
/// (or wrapper script) written just before is busy while any process forked meanwhile, by
/// another thread, still holds the writer's descriptor between its fork and its exec.
fn spawn_when_not_busy(command: &mut Command) -> io::Result<Child> {
    let mut attempts = 0;
    loop {
        match command.spawn() {
            Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy && attempts < 50 => {
                attempts += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            result => return result,
        }
    }
}

/// A started compiler, the leader of its own process group. Dropped before it was reaped
/// (a time limit, an error), it kills the whole group and reaps the leader.
struct ProcessGroup {
    child: Child,
    reaped: bool,
}

impl ProcessGroup {
    /// Whether the leader has exited; it is left unreaped (a zombie holding the group's id).
    fn leader_exited(&self) -> io::Result<bool> {
        let pid = libc::id_t::from(self.child.id());
        // SAFETY: `waitid` writes one `siginfo_t`, which lives on this stack frame and starts
        // zeroed (so `si_pid` stays 0 when no child changed state); WNOWAIT leaves the child
        // unreaped, so `Child::wait` still owns reaping it.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            if libc::waitid(libc::P_PID, pid, &mut info, flags) != 0 {
                let error = io::Error::last_os_error();
                // Interrupted by a signal: not known to have exited yet; asked again soon.
                return match error.kind() {
                    io::ErrorKind::Interrupted => Ok(false),
                    _ => Err(error),
                };
            }
            Ok(info.si_pid() != 0)
        }
    }

    /// Kills every process of the group (best effort: it may be empty but for the zombie
    /// leader). Only called while the leader is unreaped, so the id is still this group's.
    fn kill(&self) {
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        // SAFETY: sends a signal; no memory is touched. A negative id names the group, and
        // the unreaped leader keeps that id from being reused.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }

    /// Reaps the leader, returning its exit status.
    fn reap(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait()?;
        self.reaped = true;
        Ok(status)
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
            let _ = self.child.wait();
        }
    }
}

/// One of the compiler's output pipes, read without blocking, and what was read from it.
struct Pipe {
    reader: Option<File>,
    bytes: Vec<u8>,
}

impl Pipe {
    /// The pipe `fd`, put in non-blocking mode.
    fn new(fd: Option<OwnedFd>) -> io::Result<Pipe> {
        if let Some(fd) = &fd {
            set_nonblocking(fd.as_raw_fd())?;
        }
        Ok(Pipe {
            reader: fd.map(File::from),
            bytes: Vec::new(),
        })
    }

    /// Reads what the pipe holds now; closes it at end of file.
    fn read_available(&mut self) -> io::Result<()> {
        let Some(reader) = self.reader.as_mut() else {
            return Ok(());
        };
        let mut chunk = [0u8; 8192];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => {
                    self.reader = None;
                    return Ok(());
                }
                Ok(n) => self.bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn raw_fd(&self) -> Option<i32> {
        self.reader.as_ref().map(AsRawFd::as_raw_fd)
    }
}

/// Sleeps until one of `pipes` has output or is closed, or `timeout` passes.
fn wait_for_output(pipes: &[&Pipe], timeout: Duration) -> io::Result<()> {
    let mut fds: Vec<libc::pollfd> = pipes
        .iter()
        .filter_map(|pipe| pipe.raw_fd())
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        // Both pipes are closed: the leader is about to become a zombie.
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
        return Ok(());
    }
    let millis = i32::try_from(timeout.as_millis().max(1)).unwrap_or(i32::MAX);
    let count = libc::nfds_t::try_from(fds.len()).expect("two descriptors");
    // SAFETY: `fds` is a live array of `count` initialised `pollfd`s that `poll` may write.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), count, millis) };
    if ready < 0 {
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    Ok(())
}

/// Sets `O_NONBLOCK` on the descriptor `fd`.
fn set_nonblocking(fd: i32) -> io::Result<()> {
    // SAFETY: `fd` is an open descriptor owned by the caller's pipe; F_GETFL and F_SETFL
    // only read and set its status flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    #[test]
    fn output_and_status_of_a_quick_command_are_collected() {
        let output = run_with_limit(
            &mut sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(20),
        )
        .unwrap()
        .expect("finished in time");
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(output.stdout, b"out\n");
        assert_eq!(output.stderr, b"err\n");
    }

    #[test]
    fn output_larger_than_a_pipe_buffer_is_read_whole() {
        let script = "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2";
        let output = run_with_limit(&mut sh(script), Duration::from_secs(20))
            .unwrap()
            .expect("finished in time");
        assert!(output.status.success());
        assert_eq!(
            (output.stdout.len(), output.stderr.len()),
            (300_000, 200_000)
        );
    }

    #[test]
    fn a_background_child_holding_the_pipes_does_not_delay_the_result() {
        let started = Instant::now();
        let output = run_with_limit(&mut sh("sleep 30 & echo done"), Duration::from_secs(10))
            .unwrap()
            .expect("the leader exited at once: not a timeout");
        assert!(output.status.success());
        assert_eq!(output.stdout, b"done\n");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_command_past_its_limit_is_stopped() {
        let started = Instant::now();
        let outcome = run_with_limit(&mut sh("sleep 30"), Duration::from_millis(200)).unwrap();
        assert!(outcome.is_none());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
