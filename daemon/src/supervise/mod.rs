//! etcd supervision behind one trait, with two backends:
//! [`process::ProcessSupervisor`] (etcd as the daemon's child, adopted by a
//! restarted daemon; default) and [`systemd::SystemdSupervisor`] (etcd as a
//! transient systemd unit).

pub(crate) mod logtail;
pub(crate) mod preflight;
pub mod process;
pub(crate) mod systemd;
pub(crate) mod user;

use std::time::Duration;

use crate::etcd_conf::StartMode;

/// What the supervisor knows about etcd's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcState {
    /// Not running, and nobody expected it to be.
    Stopped,
    /// Running with this PID.
    Running {
        /// etcd's PID.
        pid: u32,
    },
    /// Running but stopped by a signal (SIGSTOP): it cannot answer.
    Frozen {
        /// etcd's PID.
        pid: u32,
    },
    /// It exited without being asked to.
    Died {
        /// Its PID.
        pid: u32,
        /// How it ended (`exit code 1`, `signal 9`).
        how: String,
    },
}

impl ProcState {
    /// The PID while the process exists.
    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            ProcState::Running { pid } | ProcState::Frozen { pid } => Some(*pid),
            _ => None,
        }
    }
}

/// A supervision failure.
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    /// etcd is already running.
    #[error("etcd is already running (pid {0})")]
    AlreadyRunning(u32),
    /// The etcd binary is missing.
    #[error("the etcd binary {0} does not exist")]
    NotInstalled(String),
    /// Preparing or spawning failed.
    #[error("cannot start etcd: {0}")]
    Spawn(String),
    /// Stopping failed even with SIGKILL.
    #[error("cannot stop etcd: {0}")]
    Stop(String),
    /// systemd's D-Bus API failed.
    #[error("systemd D-Bus call failed: {0}")]
    DBus(String),
}

/// Supervision of the local etcd. Operations that the failover logic calls.
pub(crate) trait Supervisor: Send + Sync {
    /// Start etcd in `mode` (the configuration is regenerated first).
    fn start(&self, mode: StartMode) -> impl Future<Output = Result<u32, SuperviseError>> + Send;
    /// Stop etcd: SIGTERM, then SIGKILL once `grace` has passed. Returns
    /// whether it stopped gracefully.
    fn stop(&self, grace: Duration) -> impl Future<Output = Result<bool, SuperviseError>> + Send;
    /// The process state, now.
    fn state(&self) -> impl Future<Output = ProcState> + Send;
    /// The backend's name.
    fn name(&self) -> &'static str;
}

/// The backend chosen in the configuration.
#[derive(Debug)]
pub enum AnySupervisor {
    /// etcd as a child process.
    Process(process::ProcessSupervisor),
    /// etcd as a transient systemd unit.
    Systemd(systemd::SystemdSupervisor),
}

impl Supervisor for AnySupervisor {
    async fn start(&self, mode: StartMode) -> Result<u32, SuperviseError> {
        match self {
            AnySupervisor::Process(p) => p.start(mode).await,
            AnySupervisor::Systemd(s) => s.start(mode).await,
        }
    }

    async fn stop(&self, grace: Duration) -> Result<bool, SuperviseError> {
        match self {
            AnySupervisor::Process(p) => p.stop(grace).await,
            AnySupervisor::Systemd(s) => s.stop(grace).await,
        }
    }

    async fn state(&self) -> ProcState {
        match self {
            AnySupervisor::Process(p) => p.state().await,
            AnySupervisor::Systemd(s) => s.state().await,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            AnySupervisor::Process(p) => p.name(),
            AnySupervisor::Systemd(s) => s.name(),
        }
    }
}

/// Whether `pid` exists and is stopped by a signal (state `T` in
/// /proc/PID/stat).
pub(crate) fn is_frozen(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state == 'T' || state == 't')
}

/// `(state, start time in clock ticks)` from /proc/PID/stat.
pub(crate) fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: split after the
    // last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // Field 22 of stat is starttime; `rest` starts at field 3.
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// The process group of `pid` (field 5 of /proc/PID/stat).
pub(crate) fn proc_pgrp(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// Whether `pid` is still the process that started at `start` (clock ticks
/// since boot) and not a zombie: a PID alone may have been reused.
pub(crate) fn same_process(pid: u32, start: u64) -> bool {
    proc_stat(pid).is_some_and(|(state, st)| st == start && state != 'Z' && state != 'X')
}

/// Whether a process with this PID is alive (not a zombie).
pub(crate) fn alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}
