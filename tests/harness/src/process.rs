//! Process helpers: bounded command runs, signals by PID, zombie-aware liveness,
//! and polling with a deadline.
//!
//! Everything here works on PIDs the harness recorded itself. Nothing looks
//! processes up by name: the machine may run other clusters and other tests.

use std::fs;
use std::io::{Read, Seek};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// The captured result of a finished command.
#[derive(Debug, Clone)]
pub struct CmdOutput {
    /// How the command ended.
    pub status: ExitStatus,
    /// Everything it wrote to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything it wrote to stderr (lossy UTF-8).
    pub stderr: String,
    /// The command line, for error messages.
    pub cmdline: String,
}

impl CmdOutput {
    /// Whether the command exited with status 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Turns a non-zero exit into an error that names the command and quotes its stderr.
    pub fn ok(self) -> Result<Self> {
        self.ok_with(&[0])
    }

    /// Like [`ok`](Self::ok), with the exit codes that count as an answer
    /// (`etcd-warden status` exits 2 when it answers that the node is not
    /// healthy).
    pub fn ok_with(self, codes: &[i32]) -> Result<Self> {
        if self.status.code().is_some_and(|c| codes.contains(&c)) {
            Ok(self)
        } else {
            bail!(
                "`{}` failed ({}): {}",
                self.cmdline,
                self.status,
                self.stderr.trim()
            )
        }
    }
}

/// The exit codes of `etcd-warden status` that come with the node's status
/// on stdout: 0 healthy, 2 not healthy.
pub const STATUS_ANSWERED: &[i32] = &[0, 2];

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion, killing it after `timeout`.
///
/// Output goes to anonymous temporary files rather than pipes: a grandchild
/// that inherits a pipe (a daemon started by the command) would otherwise keep
/// the reader blocked long after the command itself has exited.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<CmdOutput> {
    let cmdline = describe(cmd);
    let mut out = tempfile::tempfile().context("creating a temporary file for stdout")?;
    let mut err = tempfile::tempfile().context("creating a temporary file for stderr")?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(err.try_clone()?)
        .spawn()
        .with_context(|| format!("starting `{cmdline}`"))?;
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            // Our own child, not yet reaped: its PID cannot have been reused.
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{cmdline}` did not finish within {timeout:?}; killed it");
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    };
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    out.rewind()?;
    out.read_to_end(&mut stdout)?;
    err.rewind()?;
    err.read_to_end(&mut stderr)?;
    Ok(CmdOutput {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        cmdline,
    })
}

/// Polls `probe` every `interval` until it returns `Ok`, or fails after `timeout`.
///
/// `probe` returns `Err(observed)` while the wanted state is not there yet;
/// the last `observed` text is part of the timeout error, so a failing test
/// says what it saw instead of only what it wanted.
pub fn poll<T>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut probe: impl FnMut() -> std::result::Result<T, String>,
) -> Result<T> {
    let start = Instant::now();
    let _stage = crate::progress::waiting_for(what);
    loop {
        let last = match probe() {
            Ok(v) => return Ok(v),
            Err(observed) => observed,
        };
        crate::progress::observed(&last);
        if start.elapsed() >= timeout {
            bail!("timed out after {timeout:?} waiting for {what}; last observed: {last}");
        }
        thread::sleep(interval);
    }
}

/// The one-letter state of a process from `/proc/PID/stat`, `None` if it does not exist.
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself contain spaces or ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

/// Whether `pid` exists and is not a zombie.
///
/// PID 1 on the test machines does not reap orphans, so a killed process can
/// stay a zombie forever; it counts as dead.
pub fn alive(pid: i32) -> bool {
    matches!(proc_state(pid), Some(s) if s != 'Z' && s != 'X')
}

/// Reaps `pid` if it is a finished child of this process (no-op otherwise).
pub fn reap(pid: i32) {
    let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}

/// Sends `sig` to `pid`; a process that is already gone is not an error.
pub fn signal(pid: i32, sig: Signal) -> Result<()> {
    match kill(Pid::from_raw(pid), sig) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("sending {sig} to PID {pid}")),
    }
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`, clock ticks since
/// boot), `None` if it does not exist: with the PID it names one process.
pub fn start_ticks(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces or ')'; the fields after it are plain.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A process stopped with SIGSTOP, continued (SIGCONT) on drop, also on a
/// panic, unless it is gone or its PID now names another process.
#[derive(Debug)]
pub struct Paused {
    pid: i32,
    start: Option<u64>,
}

impl Paused {
    /// Sends SIGSTOP to `pid`.
    pub fn pause(pid: i32) -> Result<Self> {
        let start = start_ticks(pid);
        if start.is_none() {
            bail!("PID {pid} does not exist");
        }
        signal(pid, Signal::SIGSTOP)?;
        Ok(Self { pid, start })
    }

    /// Whether the paused process still exists (as the same process).
    pub fn exists(&self) -> bool {
        alive(self.pid) && start_ticks(self.pid) == self.start
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        if self.exists() {
            let _ = signal(self.pid, Signal::SIGCONT);
        }
    }
}

/// Waits until none of `pids` is alive (reaping those that are our children).
/// Returns the PIDs still alive at the deadline.
pub fn wait_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        for &p in pids {
            reap(p);
        }
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            // A child that ended between its reap above and the check
            // (a zombie counts as gone) is reaped now.
            for &p in pids {
                reap(p);
            }
            return left;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM, wait up to `grace`, then SIGKILL what is left and wait (bounded) for it.
/// Returns the PIDs that survived even SIGKILL (e.g. stuck in the kernel).
pub fn terminate(pids: &[i32], grace: Duration) -> Vec<i32> {
    for &p in pids {
        let _ = signal(p, Signal::SIGTERM);
    }
    let left = wait_gone(pids, grace);
    if left.is_empty() {
        return left;
    }
    kill_all(&left)
}

/// SIGKILL every PID and wait (bounded) until they are gone; returns survivors.
pub fn kill_all(pids: &[i32]) -> Vec<i32> {
    for &p in pids {
        let _ = signal(p, Signal::SIGKILL);
    }
    wait_gone(pids, Duration::from_secs(5))
}

/// The mount namespace of `pid` (`mnt:[inode]`), `None` if the process is gone.
pub fn mount_ns(pid: i32) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/ns/mnt"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Every live process whose mount namespace is `ns`, except those in `except`.
pub fn pids_in_mount_ns(ns: &str, except: &[i32]) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| !except.contains(p))
        .filter(|&p| mount_ns(p).as_deref() == Some(ns) && alive(p))
        .collect()
}

/// Reads a PID from a file written by the harness.
pub fn read_pid(path: &Path) -> Result<i32> {
    let s = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    s.trim()
        .parse()
        .with_context(|| format!("{} does not hold a PID: {s:?}", path.display()))
}

/// Becomes a "child subreaper": daemons of a test node that lose their parent
/// (pacemakerd killed by a fence) are re-parented to this process instead of
/// PID 1, which on these machines never reaps them, so the harness can.
pub fn become_subreaper() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!("cannot become child subreaper ({e}); killed daemons may stay zombies");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_captures_output_and_status() {
        let out = run(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.code(), Some(3));
        let e = out.ok().unwrap_err().to_string();
        assert!(e.contains("exit status: 3") && e.contains("err"), "{e}");
    }

    #[test]
    fn run_kills_on_timeout() {
        let t = Instant::now();
        let e = run(Command::new("sleep").arg("30"), Duration::from_millis(200)).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(e.to_string().contains("did not finish"), "{e}");
    }

    #[test]
    fn poll_reports_last_observation() {
        let mut n = 0;
        let e = poll(
            "n to reach 1000",
            Duration::from_millis(50),
            Duration::from_millis(5),
            || {
                n += 1;
                Err::<(), _>(format!("n={n}"))
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("n to reach 1000") && e.contains("last observed: n="),
            "{e}"
        );
    }

    #[test]
    fn terminate_and_state() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        assert!(alive(pid));
        assert_eq!(mount_ns(pid), mount_ns(std::process::id() as i32));
        assert!(terminate(&[pid], Duration::from_secs(5)).is_empty());
        assert!(!alive(pid));
        // terminate() reaped it already
        assert!(child.wait().is_err());
    }
}
