//! The one runner for external commands: Pacemaker's and Corosync's
//! tools (crm_mon, cibadmin, crm_attribute, corosync-cmapctl), etcd's
//! restore tools, `etcd --version` and `kill` as etcd's user. A deadline counted
//! from the start, an output cap, the child killed by its own pid (never by
//! name) when either is passed, and the tool's reason for a failure, taken
//! from stderr or, since these tools in XML mode leave stderr empty, from
//! the `<error>` elements of their XML output.
//!
//! The report cycle calls it synchronously ([`run`], [`Running`]): the
//! `collect` command has no async runtime, and a cycle overlaps its file
//! reads with crm_mon by starting it first and finishing it later. The
//! reconciler calls [`run_async`], which finishes the same [`Running`] on a
//! blocking thread and stops it early when its caller stops waiting (a pass
//! cancelled at shutdown does not leave a crm_mon behind for its deadline).

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

/// Largest output accepted from a tool by default (bytes): far above the
/// crm_mon status of any real cluster, far below what would hurt the host.
pub(crate) const DEFAULT_MAX_OUTPUT: usize = 16 * 1024 * 1024;

/// A tool that did not give its output.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// No program was given.
    #[error("empty command")]
    Empty,
    /// The socket pair for its output could not be made.
    #[error("cannot create a socket pair: {0}")]
    SocketPair(std::io::Error),
    /// It could not be started.
    #[error("cannot run {prog}: {err}")]
    Spawn {
        /// The program.
        prog: String,
        /// The OS error.
        err: std::io::Error,
    },
    /// Its pid does not fit a pid_t (never on Linux).
    #[error("pid out of range")]
    Pid,
    /// It ran past its deadline and was killed.
    #[error("{prog} did not finish within {secs:.1}s")]
    Deadline {
        /// The program.
        prog: String,
        /// The deadline, in seconds.
        secs: f64,
    },
    /// It printed more than the cap and was killed.
    #[error("{prog} printed more than {max} bytes and was stopped")]
    Overflow {
        /// The program.
        prog: String,
        /// The cap.
        max: usize,
    },
    /// Its caller stopped waiting for it, and it was killed.
    #[error("{prog} was abandoned by its caller and killed")]
    Abandoned {
        /// The program.
        prog: String,
    },
    /// It could not be waited for.
    #[error("cannot wait for {prog}: {err}")]
    Wait {
        /// The program.
        prog: String,
        /// The OS error.
        err: std::io::Error,
    },
    /// Its output could not be read.
    #[error("cannot read the output of {prog}: {err}")]
    Read {
        /// The program.
        prog: String,
        /// The OS error.
        err: std::io::Error,
    },
    /// The thread finishing it failed (a panic, or a runtime shutting down).
    #[error("the thread waiting for {prog} failed: {reason}")]
    Thread {
        /// The program.
        prog: String,
        /// The runtime's account of it.
        reason: String,
    },
    /// It exited unsuccessfully.
    #[error("{prog} exited with {status}: {reason}")]
    Exit {
        /// The program.
        prog: String,
        /// How it exited.
        status: ExitStatus,
        /// Its stderr, trimmed, or the texts of its XML `<error>` elements.
        reason: String,
    },
    /// Its output is not UTF-8.
    #[error("{prog} printed invalid UTF-8: {err}")]
    Utf8 {
        /// The program.
        prog: String,
        /// Where the bad byte is.
        err: std::string::FromUtf8Error,
    },
}

/// What a tool left when it exited by itself, successfully or not: callers
/// that give exit codes a meaning (crm_attribute's "no such attribute") read
/// the code; the others call [`Output::into_stdout`].
#[derive(Debug)]
pub(crate) struct Output {
    /// The program.
    pub(crate) prog: String,
    /// How it exited.
    pub(crate) status: ExitStatus,
    /// Its stdout, up to the cap.
    pub(crate) stdout: Vec<u8>,
    /// Its stderr, up to [`STDERR_KEEP`] bytes.
    pub(crate) stderr: Vec<u8>,
}

impl Output {
    /// The exit code; `None` when a signal ended it.
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Why it failed, in its own words: stderr, or, when that is empty, the
    /// `<error>` texts of its XML output (where Pacemaker's tools put them).
    pub(crate) fn reason(&self) -> String {
        let stderr = String::from_utf8_lossy(&self.stderr).trim().to_owned();
        if !stderr.is_empty() {
            return stderr;
        }
        xml_errors(&String::from_utf8_lossy(&self.stdout)).join("; ")
    }

    /// stdout as text when the tool succeeded; otherwise an error with its
    /// exit status and [`Output::reason`].
    pub(crate) fn into_stdout(self) -> Result<String, ToolError> {
        if !self.status.success() {
            return Err(ToolError::Exit {
                reason: self.reason(),
                prog: self.prog,
                status: self.status,
            });
        }
        let prog = self.prog;
        String::from_utf8(self.stdout).map_err(|err| ToolError::Utf8 { prog, err })
    }
}

/// A command for the runner: its argv (no shell; paths kept as the OS
/// gives them, not only as UTF-8), variables added to the daemon's
/// environment, and the user it runs as (root's own commands keep root).
#[derive(Debug, Clone, Default)]
pub(crate) struct Cmd {
    argv: Vec<OsString>,
    env: Vec<(String, String)>,
    user: Option<(u32, u32)>,
}

impl Cmd {
    /// `argv[0]` with the rest as its arguments.
    pub(crate) fn new<S: AsRef<std::ffi::OsStr>>(argv: impl IntoIterator<Item = S>) -> Self {
        Cmd {
            argv: argv.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            ..Cmd::default()
        }
    }

    /// One more argument.
    pub(crate) fn arg(mut self, a: impl AsRef<std::ffi::OsStr>) -> Self {
        self.argv.push(a.as_ref().to_owned());
        self
    }

    /// More arguments.
    pub(crate) fn args<S: AsRef<std::ffi::OsStr>>(self, more: impl IntoIterator<Item = S>) -> Self {
        more.into_iter().fold(self, Cmd::arg)
    }

    /// `name=value` in its environment.
    pub(crate) fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Run as `uid`:`gid`, without supplementary groups.
    pub(crate) fn user(mut self, uid: u32, gid: u32) -> Self {
        self.user = Some((uid, gid));
        self
    }

    /// The program, for messages.
    pub(crate) fn prog(&self) -> String {
        self.argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Run it to its end (or `timeout`, or `max_output` bytes of stdout) on
    /// this thread; what it left, whatever its exit code.
    pub(crate) fn output(&self, timeout: Duration, max_output: usize) -> Result<Output, ToolError> {
        Running::spawn_cmd(self, timeout, max_output).finish_output()
    }
}

/// The texts of the `<error>` elements of a Pacemaker tool's XML output
/// (`<status><errors><error>…`), entities decoded. Output cut short or not
/// XML at all still gives the errors it shows on lines of their own.
pub(crate) fn xml_errors(text: &str) -> Vec<String> {
    if let Ok(doc) = roxmltree::Document::parse(text) {
        return doc
            .descendants()
            .filter(|n| n.has_tag_name("error"))
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect();
    }
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("<error>")?.strip_suffix("</error>"))
        .map(str::to_owned)
        .collect()
}

/// Run a tool to the end and return its stdout; any failure is an error.
#[cfg(test)]
pub(crate) fn run(
    argv: &[String],
    timeout: Duration,
    max_output: usize,
) -> Result<String, ToolError> {
    Running::spawn(argv, timeout, max_output).finish()
}

/// Run a tool from async code and return what it left, whatever its exit
/// code. The wait happens on a blocking thread; dropping the future stops
/// the tool at once (its reads are woken, it is killed and reaped by that
/// thread, which owns it).
pub(crate) async fn run_async(
    argv: &[&str],
    timeout: Duration,
    max_output: usize,
) -> Result<Output, ToolError> {
    let argv: Vec<String> = argv.iter().map(|s| (*s).to_owned()).collect();
    let prog = argv.first().cloned().unwrap_or_default();
    let running = Running::spawn(&argv, timeout, max_output);
    let mut abandon = AbandonOnDrop(running.abandoner());
    let out = tokio::task::spawn_blocking(move || running.finish_output()).await;
    // Finished: nothing to abandon; dropping the handle closes its socket.
    abandon.0 = None;
    out.map_err(|e| ToolError::Thread {
        prog,
        reason: e.to_string(),
    })?
}

/// Stops a [`Running`] whose async caller went away.
struct AbandonOnDrop(Option<Abandoner>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if let Some(a) = &self.0 {
            a.abandon();
        }
    }
}

/// A handle that makes a [`Running`] give up from another thread: it sets
/// a flag and shuts the reading side of the tool's stdout, which wakes the
/// blocked read at once. The thread that owns the child then kills and
/// reaps it, so the pid is only ever signalled while it is still ours.
struct Abandoner {
    flag: Arc<AtomicBool>,
    stdout: UnixStream,
}

impl Abandoner {
    fn abandon(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let _ = self.stdout.shutdown(std::net::Shutdown::Read);
    }
}

/// A started tool with a deadline (counted from its start) and an output
/// cap. The caller does other work while it runs, then calls
/// [`Running::finish`]. The child is killed by its own pid, never by name,
/// and only while it is unreaped, so the pid is still ours; dropping an
/// unfinished one kills and reaps it.
///
/// Its stdout and stderr are Unix socket pairs rather than pipes: a socket
/// read takes a timeout, so one thread enforces the deadline and reads both,
/// with no reader or watchdog threads to start, wake and join on every
/// report cycle.
pub(crate) struct Running {
    prog: String,
    max_output: usize,
    deadline: Instant,
    timeout: Duration,
    abandoned: Arc<AtomicBool>,
    /// `None` once finished.
    pub(crate) started: Option<Result<Started, ToolError>>,
}

pub(crate) struct Started {
    child: Child,
    pub(crate) pid: Pid,
    stdout: UnixStream,
    stderr: UnixStream,
}

/// What ended the read of a command's stdout early.
enum Cut {
    Deadline,
    Overflow,
    Abandoned,
}

/// Longest pause between checks for a child that has closed its stdout but
/// not yet exited (normally it exits within microseconds of the close).
const EXIT_CHECK_MAX: Duration = Duration::from_millis(10);

/// stderr kept for the error message.
pub(crate) const STDERR_KEEP: usize = 64 * 1024;

impl Running {
    /// Start `argv` (no shell). A failure to start is reported by
    /// [`Running::finish`], so that callers handle one result.
    pub(crate) fn spawn(argv: &[String], timeout: Duration, max_output: usize) -> Self {
        Self::spawn_cmd(&Cmd::new(argv), timeout, max_output)
    }

    /// Start `cmd`; see [`Running::spawn`].
    pub(crate) fn spawn_cmd(cmd: &Cmd, timeout: Duration, max_output: usize) -> Self {
        let prog = cmd.prog();
        let started = Some(Self::start(cmd));
        Running {
            prog,
            max_output,
            deadline: Instant::now() + timeout,
            timeout,
            abandoned: Arc::new(AtomicBool::new(false)),
            started,
        }
    }

    fn start(cmd: &Cmd) -> Result<Started, ToolError> {
        use std::os::unix::process::CommandExt;
        let (prog, rest) = cmd.argv.split_first().ok_or(ToolError::Empty)?;
        let (stdout, child_out) = UnixStream::pair().map_err(ToolError::SocketPair)?;
        let (stderr, child_err) = UnixStream::pair().map_err(ToolError::SocketPair)?;
        // The child's ends are closed here once spawned (the Command owns
        // them), so that its exit ends our reads.
        let mut command = Command::new(prog);
        command
            .args(rest)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(OwnedFd::from(child_out)))
            .stderr(Stdio::from(OwnedFd::from(child_err)));
        if let Some((uid, gid)) = cmd.user {
            // std clears the supplementary groups when root switches uid.
            command.uid(uid).gid(gid);
        }
        let child = command.spawn().map_err(|err| ToolError::Spawn {
            prog: cmd.prog(),
            err,
        })?;
        let pid = Pid::from_raw(i32::try_from(child.id()).map_err(|_| ToolError::Pid)?);
        Ok(Started {
            child,
            pid,
            stdout,
            stderr,
        })
    }

    fn abandoner(&self) -> Option<Abandoner> {
        let s = self.started.as_ref()?.as_ref().ok()?;
        Some(Abandoner {
            flag: Arc::clone(&self.abandoned),
            stdout: s.stdout.try_clone().ok()?,
        })
    }

    /// Wait for the tool and return its stdout; see [`Output::into_stdout`].
    pub(crate) fn finish(self) -> Result<String, ToolError> {
        self.finish_output()?.into_stdout()
    }

    /// Wait for the tool and return what it left, whatever its exit code.
    pub(crate) fn finish_output(mut self) -> Result<Output, ToolError> {
        let Started {
            mut child,
            pid,
            mut stdout,
            mut stderr,
        } = match self.started.take() {
            Some(s) => s?,
            // Only reachable through a second finish, which the type
            // forbids (finish consumes self); kept total without a panic.
            None => return Err(ToolError::Empty),
        };
        let prog = std::mem::take(&mut self.prog);
        let max_output = self.max_output;
        // Room for a small cluster's status up front: read_to_end-style
        // growth from empty starts with 32-byte reads.
        let mut buf = Vec::with_capacity(max_output.min(64 * 1024));
        let (read, mut cut) = read_until(&mut stdout, &mut buf, max_output, self.deadline);
        if self.abandoned.load(Ordering::SeqCst) {
            cut = Some(Cut::Abandoned);
        }
        if cut.is_none() {
            // Closing stdout normally means exiting; wait for the exit
            // without reaping (WNOWAIT), within the same deadline.
            cut = wait_exit(pid, self.deadline).then_some(Cut::Deadline);
        }
        if cut.is_some() {
            // Unreaped, so the pid is still this child's.
            let _ = kill(pid, Signal::SIGKILL);
        }
        let status = child.wait();
        let errbuf = read_available(&mut stderr);
        match cut {
            Some(Cut::Deadline) => {
                return Err(ToolError::Deadline {
                    prog,
                    secs: self.timeout.as_secs_f64(),
                });
            }
            Some(Cut::Overflow) => {
                return Err(ToolError::Overflow {
                    prog,
                    max: max_output,
                });
            }
            Some(Cut::Abandoned) => return Err(ToolError::Abandoned { prog }),
            None => {}
        }
        let status = status.map_err(|err| ToolError::Wait {
            prog: prog.clone(),
            err,
        })?;
        read.map_err(|err| ToolError::Read {
            prog: prog.clone(),
            err,
        })?;
        Ok(Output {
            prog,
            status,
            stdout: buf,
            stderr: errbuf,
        })
    }
}

/// Read until end of file, more than `max` bytes, or the deadline.
fn read_until(
    src: &mut UnixStream,
    buf: &mut Vec<u8>,
    max: usize,
    deadline: Instant,
) -> (std::io::Result<()>, Option<Cut>) {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (Ok(()), Some(Cut::Deadline));
        }
        if let Err(e) = src.set_read_timeout(Some(left)) {
            return (Err(e), None);
        }
        match src.read(&mut chunk) {
            Ok(0) => return (Ok(()), None),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > max {
                    return (Ok(()), Some(Cut::Overflow));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (Ok(()), Some(Cut::Deadline));
            }
            Err(e) => return (Err(e), None),
        }
    }
}

/// Wait until `pid` has exited (leaving it unreaped) or the deadline has
/// passed; true if the deadline passed first. Checks at growing intervals:
/// the child has closed its stdout already, so it is normally gone at the
/// first check.
fn wait_exit(pid: Pid, deadline: Instant) -> bool {
    let mut pause = Duration::from_micros(50);
    loop {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG;
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR) => {}
            // Exited, or not waitable at all: either way nothing to wait for.
            _ => return false,
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(EXIT_CHECK_MAX);
    }
}

/// What the (exited or killed) child left on its stderr, up to
/// `STDERR_KEEP` bytes, without waiting for more.
fn read_available(src: &mut UnixStream) -> Vec<u8> {
    let mut out = Vec::new();
    if src.set_nonblocking(true).is_err() {
        return out;
    }
    let mut chunk = [0u8; 4096];
    while out.len() < STDERR_KEEP {
        match src.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n.min(STDERR_KEEP - out.len())]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    out
}

impl Drop for Running {
    fn drop(&mut self) {
        // Only an unfinished command is still here: an error elsewhere
        // ended its caller while it ran. Kill it through its handle (it is
        // unreaped, so the pid is still ours) and reap it.
        if let Some(Ok(s)) = &mut self.started {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn run_ok_timeout_cap_and_exit() {
        assert_eq!(
            run(&argv("echo hi"), Duration::from_secs(5), 100).unwrap(),
            "hi\n"
        );
        let e = run(&argv("sleep 5"), Duration::from_millis(200), 100).unwrap_err();
        assert!(e.to_string().contains("did not finish"), "{e}");
        let e = run(&argv("yes"), Duration::from_secs(5), 1000).unwrap_err();
        assert!(e.to_string().contains("more than 1000 bytes"), "{e}");
        let e = run(&argv("false"), Duration::from_secs(5), 100).unwrap_err();
        assert!(e.to_string().contains("exited"), "{e}");
        assert!(matches!(
            run(&argv("/nonexistent/x"), Duration::from_secs(1), 100),
            Err(ToolError::Spawn { .. })
        ));
        assert!(matches!(
            run(&[], Duration::from_secs(1), 100),
            Err(ToolError::Empty)
        ));
    }

    #[test]
    fn failure_reasons_come_from_stderr_else_xml_errors() {
        let e = run(
            &sh("echo 'no such node' >&2; exit 105"),
            Duration::from_secs(5),
            1000,
        )
        .unwrap_err();
        assert!(
            e.to_string().ends_with("exit status: 105: no such node"),
            "{e}"
        );
        // crm_mon --output-as=xml: the reason is in <error>, with entities.
        let xml = "<pacemaker-result api-version=\"2.25\" request=\"crm_mon\">\n  <status code=\"102\" message=\"Not connected\">\n    <errors>\n      <error>crm_mon: Connection to cluster failed: Transport endpoint isn&apos;t connected</error>\n    </errors>\n  </status>\n</pacemaker-result>";
        let e = run(
            &sh(&format!("cat <<'EOF'\n{xml}\nEOF\nexit 102")),
            Duration::from_secs(5),
            10_000,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("Connection to cluster failed: Transport endpoint isn't connected"),
            "{e}"
        );
        // Output cut short: the error lines are still found.
        assert_eq!(
            xml_errors(
                "<pacemaker-result>\n <errors>\n  <error>first</error>\n  <error>second</error>"
            ),
            ["first", "second"]
        );
        assert!(xml_errors("").is_empty());
    }

    #[test]
    fn output_keeps_the_exit_code_of_a_failure() {
        let o = Running::spawn(&sh("echo out; exit 6"), Duration::from_secs(5), 100)
            .finish_output()
            .unwrap();
        assert_eq!(o.code(), Some(6));
        assert_eq!(o.stdout, b"out\n");
    }

    #[test]
    fn unfinished_command_is_killed_and_reaped_on_drop() {
        let b = Running::spawn(&argv("sleep 30"), Duration::from_secs(60), 100);
        let pid = b.started.as_ref().unwrap().as_ref().unwrap().pid;
        let t = Instant::now();
        drop(b);
        assert!(t.elapsed() < Duration::from_secs(5));
        // Reaped: the pid is no longer our child.
        assert!(waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG).is_err());
    }

    #[test]
    fn concurrent_commands_keep_their_own_deadlines() {
        let slow = Running::spawn(&argv("sleep 30"), Duration::from_millis(300), 100);
        let quick = Running::spawn(&argv("echo ok"), Duration::from_secs(5), 100);
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(quick.finish().unwrap(), "ok\n");
        let t = Instant::now();
        let e = slow.finish().unwrap_err();
        assert!(e.to_string().contains("did not finish within 0.3s"), "{e}");
        // Its deadline had passed already: killed at once, not 300 ms later.
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn async_run_gives_output_and_obeys_its_deadline() {
        let o = run_async(
            &["sh", "-c", "echo hi; exit 3"],
            Duration::from_secs(5),
            100,
        )
        .await
        .unwrap();
        assert_eq!((o.code(), o.stdout.as_slice()), (Some(3), &b"hi\n"[..]));
        let e = run_async(&["sleep", "5"], Duration::from_millis(200), 100)
            .await
            .unwrap_err();
        assert!(matches!(e, ToolError::Deadline { .. }), "{e}");
        let e = run_async(&["yes"], Duration::from_secs(5), 1000)
            .await
            .unwrap_err();
        assert!(matches!(e, ToolError::Overflow { .. }), "{e}");
    }

    /// Each call closes what it opened: a daemon makes these calls for ever.
    #[tokio::test]
    async fn async_runs_leave_no_descriptor_open() {
        let open = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        // The first call may open the runtime's own descriptors.
        run_async(&["true"], Duration::from_secs(5), 100)
            .await
            .unwrap();
        let before = open();
        for _ in 0..20 {
            run_async(&["true"], Duration::from_secs(5), 100)
                .await
                .unwrap();
        }
        assert_eq!(open(), before);
    }

    /// A caller that stops waiting (a cancelled pass) takes its tool with
    /// it: the child is gone long before its own deadline.
    #[tokio::test]
    async fn an_abandoned_async_run_kills_its_tool() {
        let d = tempfile::tempdir().unwrap();
        let pidfile = d.path().join("pid");
        let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
        let argv = ["sh", "-c", &script];
        let fut = run_async(&argv, Duration::from_secs(60), 100);
        let r = tokio::time::timeout(Duration::from_millis(300), fut).await;
        assert!(r.is_err(), "sleep 30 finished within 300 ms?");
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        // Gone (reaped by the blocking thread): signal 0 finds no process.
        while kill(Pid::from_raw(pid), None).is_ok() {
            assert!(Instant::now() < deadline, "tool {pid} still runs");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
