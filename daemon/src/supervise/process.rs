//! The `process` backend: etcd runs as the daemon's child, in a process
//! group of its own (so that a stop signal reaches it and only it). Its log,
//! stdout and stderr go to `STATE_DIR/etcd.log`, which the daemon follows and
//! forwards to tracing ([`super::logtail`]); never to a pipe, so that etcd
//! can outlive the daemon.
//!
//! The PID and start time of the running etcd are kept in
//! `STATE_DIR/etcd.pid`. If the daemon is SIGKILLed, its etcd keeps running
//! and serving. A restarted daemon finds it through that file (PID *and*
//! start time must match, so a reused PID is never touched) and adopts it
//! as it is, when it is provably the etcd this configuration would run
//! (see [`adopt`]); otherwise it stops it gracefully before it does
//! anything else. See docs/daemon.md.
//!
//! etcd runs as `etcd.user` ([`super::user`]): the child drops to it between
//! fork and exec; the daemon stays root.

mod adopt;

pub(crate) use adopt::parse_pid_file;

use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::Command;
use tokio::sync::{Mutex, watch};

use super::logtail::{self, LogTail};
use super::{ProcState, SuperviseError, is_frozen, proc_stat, user};
use crate::config::Settings;
use crate::etcd::conf::{self, StartMode};

/// How often the log file is read.
const LOG_POLL: Duration = Duration::from_millis(200);

/// etcd as a child process.
#[derive(Debug)]
pub struct ProcessSupervisor {
    settings: Arc<Settings>,
    // Serialises start, stop and take-over.
    op: Mutex<()>,
    state_tx: watch::Sender<Inner>,
    // etcd's log file, followed from where it ended when the daemon started.
    tail: Arc<std::sync::Mutex<LogTail>>,
    // Whether the task following the log runs (started with the first etcd).
    following: AtomicBool,
    // The daemon leaves etcd running for the next daemon to adopt: the
    // drop must not take it down.
    left_running: AtomicBool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inner {
    Stopped,
    Running { pid: u32 },
    Stopping { pid: u32 },
    Died { pid: u32, how: String },
}

/// What a daemon start found of the etcd of a previous daemon instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Previous {
    /// None is running.
    None,
    /// It runs and is supervised again, as it is: same PID, no restart.
    Adopted {
        /// Its PID.
        pid: u32,
    },
    /// It ran but could not be adopted, for the reason given; it was
    /// stopped (SIGTERM, SIGKILL after the grace).
    Stopped {
        /// Its PID.
        pid: u32,
        /// Why it was not adopted.
        why: String,
    },
}

impl ProcessSupervisor {
    /// A supervisor for the etcd described by `settings`.
    pub fn new(settings: Arc<Settings>) -> Self {
        let (state_tx, _) = watch::channel(Inner::Stopped);
        let tail = LogTail::from_end(conf::log_path(&settings));
        ProcessSupervisor {
            settings,
            op: Mutex::new(()),
            state_tx,
            tail: Arc::new(std::sync::Mutex::new(tail)),
            following: AtomicBool::new(false),
            left_running: AtomicBool::new(false),
        }
    }

    /// Leave etcd running when the daemon exits, for the next daemon to
    /// adopt by its PID file (Pacemaker, not the daemon, stops it).
    pub(crate) fn leave_running(&self) {
        self.left_running.store(true, Ordering::SeqCst);
    }

    fn pid_file(&self) -> PathBuf {
        self.settings.state_dir.join("etcd.pid")
    }

    /// `(pid, start time)` from the PID file; a malformed file is removed.
    fn read_pid_file(&self) -> Option<(u32, u64)> {
        let text = std::fs::read_to_string(self.pid_file()).ok()?;
        match parse_pid_file(&text) {
            Some(v) => Some(v),
            None => {
                tracing::warn!(file = %self.pid_file().display(), "ignoring a malformed PID file");
                let _ = std::fs::remove_file(self.pid_file());
                None
            }
        }
    }

    /// Start following the log file (once; the task ends with the
    /// supervisor).
    fn follow_log(&self) {
        if self.following.swap(true, Ordering::SeqCst) {
            return;
        }
        let tail = Arc::downgrade(&self.tail);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(LOG_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // An unreadable file is reported once per distinct error, not
            // every tick.
            let mut last_error: Option<String> = None;
            loop {
                tick.tick().await;
                let Some(tail) = tail.upgrade() else { break };
                match drain(&tail, true) {
                    Ok(()) => last_error = None,
                    Err(e) => {
                        let e = e.to_string();
                        if last_error.as_deref() != Some(e.as_str()) {
                            tracing::warn!(error = %e, "cannot read etcd's log file");
                            last_error = Some(e);
                        }
                    }
                }
            }
        });
    }
}

/// Read the log file to its end and forward the lines; with `bound`, also
/// keep it under [`logtail::ROTATE_BYTES`] (copy and truncate, etcd
/// writing on).
fn drain(tail: &std::sync::Mutex<LogTail>, bound: bool) -> std::io::Result<()> {
    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
    t.poll(&mut logtail::forward)?;
    if bound && t.bound(logtail::ROTATE_BYTES, &mut logtail::forward)? {
        tracing::info!(file = %t.path().display(), "etcd's log file was rotated to .1");
    }
    Ok(())
}

/// etcd `pid` is gone: forward its last log lines, forget its PID file,
/// and record the end as a stop (when one was asked for) or a death.
fn exited(
    tx: &watch::Sender<Inner>,
    tail: &std::sync::Mutex<LogTail>,
    pid_file: &Path,
    pid: u32,
    how: String,
) {
    // Its last words come before the news of its death.
    if let Err(e) = drain(tail, false) {
        tracing::debug!(error = %e, "cannot read etcd's log file");
    }
    // Only this etcd's PID file: never one a later start wrote.
    if let Ok(text) = std::fs::read_to_string(pid_file)
        && parse_pid_file(&text).is_some_and(|(p, _)| p == pid)
    {
        let _ = std::fs::remove_file(pid_file);
    }
    tx.send_modify(|st| {
        *st = match st {
            Inner::Stopping { .. } => {
                tracing::info!(pid, %how, "etcd stopped");
                Inner::Stopped
            }
            _ => {
                tracing::error!(pid, %how, "etcd exited unexpectedly");
                Inner::Died { pid, how }
            }
        }
    });
}

impl ProcessSupervisor {
    pub(crate) async fn start(&self, mode: StartMode) -> Result<u32, SuperviseError> {
        let _op = self.op.lock().await;
        if let Inner::Running { pid } | Inner::Stopping { pid } = *self.state_tx.borrow() {
            return Err(SuperviseError::AlreadyRunning(pid));
        }
        let binary = &self.settings.etcd.binary;
        if !binary.exists() {
            return Err(SuperviseError::NotInstalled(binary.display().to_string()));
        }
        super::preflight::check_free(&self.settings)?;
        let as_user = user::prepare(&self.settings)?;
        std::fs::create_dir_all(&self.settings.state_dir).map_err(|e| {
            SuperviseError::Spawn(format!(
                "cannot create {}: {e}",
                self.settings.state_dir.display()
            ))
        })?;
        conf::write(&self.settings, &mode).map_err(|e| {
            SuperviseError::Spawn(format!(
                "cannot write {}: {e}",
                self.settings.etcd_config_path().display()
            ))
        })?;
        if let Some(u) = &as_user {
            user::share_config(&self.settings, u)?;
        }
        // No etcd writes the log now: forward the previous one's last lines,
        // then rotate a large file by renaming it.
        let log_path = conf::log_path(&self.settings);
        if let Err(e) = drain(&self.tail, false) {
            tracing::debug!(error = %e, "cannot read etcd's log file");
        }
        match logtail::rotate_if_larger(&log_path, logtail::ROTATE_BYTES) {
            Ok(true) => {
                tracing::info!(file = %log_path.display(), "etcd's log file was rotated to .1")
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(file = %log_path.display(), error = %e, "cannot rotate etcd's log file")
            }
        }
        // stdout and stderr to the log file as well (Go runtime messages
        // bypass zap), opened with O_APPEND like zap's own descriptor.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o640)
            .open(&log_path)
            // The unit's umask (0077) narrows the mode above to 0600 when
            // the file is created: set it again so that the log stays
            // readable by the file's group, as documented. Only on a file
            // the daemon owns: once given to etcd's user, the file keeps
            // the mode it had, and root without CAP_FOWNER may not chmod it.
            .and_then(|f| {
                if f.metadata()?.uid() == nix::unistd::geteuid().as_raw() {
                    f.set_permissions(std::fs::Permissions::from_mode(0o640))?;
                }
                Ok(f)
            })
            .map_err(|e| {
                SuperviseError::Spawn(format!("cannot open {}: {e}", log_path.display()))
            })?;
        let log_err = log.try_clone().map_err(|e| {
            SuperviseError::Spawn(format!("cannot open {}: {e}", log_path.display()))
        })?;
        let mut cmd = Command::new(binary);
        if let Some(u) = as_user {
            user::give_log(&log, &log_path, &u)?;
            // In the child before exec: groups cleared, then gid, then uid.
            cmd.uid(u.uid).gid(u.gid);
        }
        let mut child = cmd
            .arg("--config-file")
            .arg(self.settings.etcd_config_path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            // etcd speaks sd_notify itself; it must not report READY or
            // feed the watchdog on the daemon's behalf.
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            // Own process group: stop signals go to etcd alone, a terminal's
            // Ctrl-C on the daemon does not reach etcd directly, and a
            // restarted daemon can tell its etcd by the group it leads.
            .process_group(0)
            .kill_on_drop(false)
            .spawn()
            .map_err(|e| SuperviseError::Spawn(format!("{}: {e}", binary.display())))?;
        let pid = child
            .id()
            .ok_or_else(|| SuperviseError::Spawn("etcd exited at once".into()))?;
        crate::kill_point::reached("start-spawned");
        if let Some((_, start)) = proc_stat(pid)
            && let Err(e) = crate::atomic_file::write(
                &self.pid_file(),
                format!("{pid} {start}\n").as_bytes(),
                crate::atomic_file::Replace::Durable,
            )
        {
            tracing::warn!(error = %e, "cannot write the etcd PID file");
        }
        self.follow_log();
        tracing::info!(pid, ?mode, log = %log_path.display(), "etcd started");
        self.state_tx.send_replace(Inner::Running { pid });
        let tx = self.state_tx.clone();
        let tail = self.tail.clone();
        let pid_file = self.pid_file();
        tokio::spawn(async move {
            let how = match child.wait().await {
                Ok(st) => match (
                    st.code(),
                    std::os::unix::process::ExitStatusExt::signal(&st),
                ) {
                    (Some(c), _) => format!("exit code {c}"),
                    (None, Some(s)) => format!("signal {s}"),
                    _ => "unknown status".into(),
                },
                Err(e) => format!("wait failed: {e}"),
            };
            exited(&tx, &tail, &pid_file, pid, how);
        });
        Ok(pid)
    }

    pub(crate) async fn stop(&self, grace: Duration) -> Result<bool, SuperviseError> {
        let _op = self.op.lock().await;
        let running = match &*self.state_tx.borrow() {
            Inner::Running { pid } | Inner::Stopping { pid } => Some(*pid),
            _ => None,
        };
        let Some(pid) = running else {
            // Died or already stopped: a stop makes it "cleanly stopped".
            self.state_tx.send_replace(Inner::Stopped);
            return Ok(true);
        };
        // The same for a child and an adopted etcd: the task watching it
        // (wait or /proc poll) turns Stopping into Stopped.
        self.state_tx.send_replace(Inner::Stopping { pid });
        // SIGCONT first: a SIGSTOPped etcd would otherwise sit on SIGTERM
        // until the deadline. A signal that cannot be sent is logged; the
        // deadline below still ends in SIGKILL.
        for sig in [Signal::SIGCONT, Signal::SIGTERM] {
            if let Err(e) = super::signal_group(pid, sig) {
                tracing::warn!(pid, error = %e, "cannot signal etcd");
            }
        }
        let mut rx = self.state_tx.subscribe();
        let stopped = |st: &Inner| matches!(st, Inner::Stopped | Inner::Died { .. });
        // `is_ok_and` drops the read guard before `send_replace` below.
        if tokio::time::timeout(grace, rx.wait_for(stopped))
            .await
            .is_ok_and(|r| r.is_ok())
        {
            self.state_tx.send_replace(Inner::Stopped);
            return Ok(true);
        }
        tracing::warn!(pid, ?grace, "etcd did not stop in time; sending SIGKILL");
        if let Err(e) = super::signal_group(pid, Signal::SIGKILL) {
            tracing::warn!(pid, error = %e, "cannot signal etcd");
        }
        // `wait_for` answers with a read guard on the state. It must be gone
        // before `send_replace` takes the write lock: held through a
        // `match`, it deadlocked the daemon's runtime after every SIGKILL
        // (CI: a stop that never answered, then a self-fence).
        let gone = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(stopped))
            .await
            .is_ok_and(|r| r.is_ok());
        if !gone {
            return Err(SuperviseError::Stop(format!(
                "etcd {pid} is still there 10 s after SIGKILL"
            )));
        }
        self.state_tx.send_replace(Inner::Stopped);
        Ok(false)
    }

    pub(crate) async fn state(&self) -> ProcState {
        match &*self.state_tx.borrow() {
            Inner::Stopped => ProcState::Stopped,
            Inner::Running { pid } | Inner::Stopping { pid } => {
                if is_frozen(*pid) {
                    ProcState::Frozen { pid: *pid }
                } else {
                    ProcState::Running { pid: *pid }
                }
            }
            Inner::Died { pid, how } => ProcState::Died {
                pid: *pid,
                how: how.clone(),
            },
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        "process"
    }
}

impl Drop for ProcessSupervisor {
    fn drop(&mut self) {
        // The daemon is going away without a stop (e.g. a panic): take etcd's
        // process group with it rather than leave an unsupervised etcd,
        // unless the daemon left it running on purpose.
        if self.left_running.load(Ordering::SeqCst) {
            return;
        }
        if let Inner::Running { pid } | Inner::Stopping { pid } = *self.state_tx.borrow() {
            let _ = super::signal_group(pid, Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// One-node settings under `dir`, etcd on loopback at `ports`
    /// (peer, client).
    pub(super) fn settings(dir: &Path, binary: &str, ports: (u16, u16)) -> Settings {
        crate::config::from_texts(&[(
            PathBuf::from("/c.toml"),
            format!(
                r#"
node_name = "a"
topology = "ha"
[etcd]
# The daemon's own user: the test's directories are root's.
user = "root"
binary = "{binary}"
data_dir = "{dir}/data"
[paths]
state_dir = "{dir}/state"
[[nodes]]
name = "a"
peer_urls = ["http://127.0.0.1:{peer}"]
client_urls = ["http://127.0.0.1:{client}"]
"#,
                dir = dir.display(),
                peer = ports.0,
                client = ports.1,
            ),
        )])
        .unwrap()
    }

    /// An "etcd" that ignores SIGTERM: the stop must escalate to SIGKILL and
    /// answer. Run on a thread of its own, so that a deadlocked runtime
    /// fails the test instead of hanging it.
    #[test]
    fn a_stop_that_needs_sigkill_answers() {
        let d = tempfile::tempdir().unwrap();
        let script = d.path().join("stubborn-etcd");
        std::fs::write(
            &script,
            "#!/bin/sh\ntrap '' TERM\ntouch \"$0.trapped\"\nwhile :; do sleep 1; done\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = Arc::new(settings(
            d.path(),
            script.to_str().unwrap(),
            (free_port(), free_port()),
        ));
        let (tx, rx) = std::sync::mpsc::channel();
        let (pid_tx, pid_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let r = rt.block_on(async {
                let sup = ProcessSupervisor::new(s);
                let pid = sup.start(StartMode::Normal).await?;
                let _ = pid_tx.send(pid);
                // SIGTERM before the trap is set would simply end it.
                let trapped = script.with_extension("trapped");
                while !trapped.exists() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let stopped = sup.stop(Duration::from_millis(300)).await?;
                Ok::<_, SuperviseError>((stopped, sup.state().await))
            });
            let _ = tx.send(r);
        });
        let pid = pid_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let answer = rx.recv_timeout(Duration::from_secs(20));
        // Whatever happened, the stub's group goes (by its own PID).
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
        let (graceful, state) = answer
            .expect("the stop did not answer within 20 s (deadlock)")
            .unwrap();
        assert!(!graceful, "the stub ignores SIGTERM: SIGKILL was needed");
        assert!(matches!(state, ProcState::Stopped), "{state:?}");
    }

    pub(super) fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}
