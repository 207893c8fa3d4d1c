//! The `process` backend: etcd runs as the daemon's child, in a process
//! group of its own (so that a stop signal reaches it and only it), and its
//! log lines are forwarded to tracing.
//!
//! The PID and start time of the running etcd are kept in
//! `STATE_DIR/etcd.pid`. If the daemon is SIGKILLed, its etcd keeps running
//! with a log pipe nobody reads; a restarted daemon finds it through that file
//! (PID *and* start time must match, so a reused PID is never touched) and
//! stops it gracefully before it does anything else. See docs/daemon.md.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::{Mutex, watch};

use super::{ProcState, SuperviseError, Supervisor, alive, is_frozen, proc_stat};
use crate::config::Settings;
use crate::etcd_conf::{self, StartMode};

/// etcd as a child process.
#[derive(Debug)]
pub struct ProcessSupervisor {
    settings: Arc<Settings>,
    // Serialises start and stop.
    op: Mutex<()>,
    state_tx: watch::Sender<Inner>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inner {
    Stopped,
    Running { pid: u32 },
    Stopping { pid: u32 },
    Died { pid: u32, how: String },
}

impl ProcessSupervisor {
    /// A supervisor for the etcd described by `settings`.
    pub fn new(settings: Arc<Settings>) -> Self {
        let (state_tx, _) = watch::channel(Inner::Stopped);
        ProcessSupervisor {
            settings,
            op: Mutex::new(()),
            state_tx,
        }
    }

    fn pid_file(&self) -> PathBuf {
        self.settings.state_dir.join("etcd.pid")
    }

    /// Stop an etcd left running by a previous daemon instance (found via the
    /// PID file, PID and start time both matching). Returns its PID.
    pub async fn stop_orphan(&self, grace: Duration) -> Result<Option<u32>, SuperviseError> {
        let Ok(text) = std::fs::read_to_string(self.pid_file()) else {
            return Ok(None);
        };
        let mut parts = text.split_whitespace();
        let (Some(pid), Some(start)) = (
            parts.next().and_then(|p| p.parse::<u32>().ok()),
            parts.next().and_then(|s| s.parse::<u64>().ok()),
        ) else {
            tracing::warn!(file = %self.pid_file().display(), "ignoring a malformed PID file");
            let _ = std::fs::remove_file(self.pid_file());
            return Ok(None);
        };
        let same = proc_stat(pid).is_some_and(|(state, st)| st == start && state != 'Z');
        if !same {
            let _ = std::fs::remove_file(self.pid_file());
            return Ok(None);
        }
        tracing::warn!(
            pid,
            "an etcd started by a previous etcd-warden instance is still running; stopping it"
        );
        let pgid = Pid::from_raw(pid as i32);
        // A frozen process must be continued to act on SIGTERM.
        let _ = killpg(pgid, Signal::SIGCONT);
        let _ = killpg(pgid, Signal::SIGTERM);
        if !wait_gone(pid, grace).await {
            let _ = killpg(pgid, Signal::SIGKILL);
            if !wait_gone(pid, Duration::from_secs(5)).await {
                return Err(SuperviseError::Stop(format!(
                    "orphaned etcd {pid} survived SIGKILL"
                )));
            }
        }
        let _ = std::fs::remove_file(self.pid_file());
        Ok(Some(pid))
    }
}

/// Polls until `pid` is gone; an orphan is not our child, so it cannot be
/// waited for.
async fn wait_gone(pid: u32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if !alive(pid) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Forward etcd's log lines (zap JSON) to tracing at etcd's own level.
fn forward_logs(stream: impl tokio::io::AsyncRead + Unpin + Send + 'static) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let level = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v.get("level").and_then(|l| l.as_str()).map(str::to_owned));
            match level.as_deref() {
                Some("error" | "fatal" | "panic" | "dpanic") => {
                    tracing::error!(target: "etcd", "{line}")
                }
                Some("warn") => tracing::warn!(target: "etcd", "{line}"),
                Some("debug") => tracing::debug!(target: "etcd", "{line}"),
                _ => tracing::info!(target: "etcd", "{line}"),
            }
        }
    });
}

impl Supervisor for ProcessSupervisor {
    async fn start(&self, mode: StartMode) -> Result<u32, SuperviseError> {
        let _op = self.op.lock().await;
        if let Inner::Running { pid } | Inner::Stopping { pid } = *self.state_tx.borrow() {
            return Err(SuperviseError::AlreadyRunning(pid));
        }
        let binary = &self.settings.etcd.binary;
        if !binary.exists() {
            return Err(SuperviseError::NotInstalled(binary.display().to_string()));
        }
        std::fs::create_dir_all(&self.settings.state_dir).map_err(|e| {
            SuperviseError::Spawn(format!(
                "cannot create {}: {e}",
                self.settings.state_dir.display()
            ))
        })?;
        etcd_conf::write(&self.settings, &mode).map_err(|e| {
            SuperviseError::Spawn(format!(
                "cannot write {}: {e}",
                self.settings.etcd_config_path().display()
            ))
        })?;
        let mut child = Command::new(binary)
            .arg("--config-file")
            .arg(self.settings.etcd_config_path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // etcd speaks sd_notify itself; it must not report READY or
            // feed the watchdog on the daemon's behalf.
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            // Own process group: stop signals go to etcd alone, and a
            // terminal's Ctrl-C on the daemon does not reach etcd directly.
            .process_group(0)
            .kill_on_drop(false)
            .spawn()
            .map_err(|e| SuperviseError::Spawn(format!("{}: {e}", binary.display())))?;
        let pid = child
            .id()
            .ok_or_else(|| SuperviseError::Spawn("etcd exited at once".into()))?;
        if let Some((_, start)) = proc_stat(pid)
            && let Err(e) =
                etcd_conf::write_atomic(&self.pid_file(), format!("{pid} {start}\n").as_bytes())
        {
            tracing::warn!(error = %e, "cannot write the etcd PID file");
        }
        if let Some(out) = child.stdout.take() {
            forward_logs(out);
        }
        if let Some(err) = child.stderr.take() {
            forward_logs(err);
        }
        tracing::info!(pid, ?mode, "etcd started");
        self.state_tx.send_replace(Inner::Running { pid });
        let tx = self.state_tx.clone();
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
            let _ = std::fs::remove_file(&pid_file);
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
        });
        Ok(pid)
    }

    async fn stop(&self, grace: Duration) -> Result<bool, SuperviseError> {
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
        self.state_tx.send_replace(Inner::Stopping { pid });
        let pgid = Pid::from_raw(pid as i32);
        // SIGCONT first: a SIGSTOPped etcd would otherwise sit on SIGTERM
        // until the deadline.
        let _ = killpg(pgid, Signal::SIGCONT);
        let _ = killpg(pgid, Signal::SIGTERM);
        let mut rx = self.state_tx.subscribe();
        let stopped = |st: &Inner| matches!(st, Inner::Stopped | Inner::Died { .. });
        if tokio::time::timeout(grace, rx.wait_for(stopped))
            .await
            .is_ok()
        {
            self.state_tx.send_replace(Inner::Stopped);
            return Ok(true);
        }
        tracing::warn!(pid, ?grace, "etcd did not stop in time; sending SIGKILL");
        let _ = killpg(pgid, Signal::SIGKILL);
        match tokio::time::timeout(Duration::from_secs(10), rx.wait_for(stopped)).await {
            Ok(_) => {
                self.state_tx.send_replace(Inner::Stopped);
                Ok(false)
            }
            Err(_) => Err(SuperviseError::Stop(format!(
                "etcd {pid} is still there 10 s after SIGKILL"
            ))),
        }
    }

    async fn state(&self) -> ProcState {
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

    fn name(&self) -> &'static str {
        "process"
    }
}

impl Drop for ProcessSupervisor {
    fn drop(&mut self) {
        // The daemon is going away without a stop (e.g. a panic): take etcd's
        // process group with it rather than leave an unsupervised etcd.
        if let Inner::Running { pid } | Inner::Stopping { pid } = *self.state_tx.borrow() {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}
