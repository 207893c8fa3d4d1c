//! The local etcd's supervision. [`Supervisor`] is what the failover logic
//! asks of it (probe, start in a mode, stop, a forced restart); the daemon's
//! app implements it over [`AnySupervisor`], the backend the configuration
//! names: [`process::ProcessSupervisor`] (etcd as the daemon's child,
//! adopted by a restarted daemon; default) or [`systemd::SystemdSupervisor`]
//! (etcd as a transient systemd unit).

mod backend;
pub(crate) mod logtail;
pub(crate) mod preflight;
pub mod process;
pub(crate) mod record;
pub(crate) mod silence;
pub(crate) mod systemd;
pub(crate) mod user;
pub(crate) mod writeback;

use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use warden_api::procfs;

pub use backend::AnySupervisor;

use crate::etcd::conf::StartMode;
use crate::etcd::ops::OpsError;
use crate::etcd::{EtcdError, MemberStatus};

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
    /// Running, but it answered before and has not answered for
    /// `timeouts.hung_after_ms` or longer (stopped by a signal, stuck in
    /// the kernel, live-locked). Only the daemon's app says so; the
    /// backends report `Running` or `Frozen`.
    Hung {
        /// etcd's PID.
        pid: u32,
        /// How long it has not answered, in milliseconds.
        silent_ms: u64,
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
            ProcState::Running { pid }
            | ProcState::Frozen { pid }
            | ProcState::Hung { pid, .. } => Some(*pid),
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

/// Pacemaker's confirmation that the peer node is down (fenced). Forcing a
/// new cluster needs one: the type makes the rule impossible to forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerDown {
    /// The fenced node.
    pub node: String,
    /// What Pacemaker said (e.g. the fencing history entry), for the log.
    pub evidence: String,
}

/// Result of one probe of the local etcd.
#[derive(Debug)]
pub struct Probe {
    /// Process state.
    pub(crate) proc: ProcState,
    /// Local Status, or why it failed.
    pub(crate) status: Option<Result<MemberStatus, EtcdError>>,
    /// Linearizable read, when asked for.
    pub(crate) read: Option<Result<i64, EtcdError>>,
}

/// The local etcd's supervision: is it running, start it in a mode, stop
/// it, restart it as a new one-member cluster.
pub trait Supervisor: Send + Sync {
    /// The process's state, now.
    fn state(&self) -> impl Future<Output = ProcState> + Send;
    /// Ask the local etcd now (process, Status, and a linearizable read
    /// when `read`), recording what was seen for operators.
    fn probe(&self, deadline: Duration, read: bool) -> impl Future<Output = Probe> + Send;
    /// Start etcd in `mode` and wait until it answers.
    fn start(
        &self,
        mode: StartMode,
        deadline: Duration,
    ) -> impl Future<Output = Result<u32, OpsError>> + Send;
    /// Stop etcd (graceful within `grace`, then SIGKILL). Returns whether
    /// it ended by the graceful signal.
    fn stop(&self, grace: Duration) -> impl Future<Output = Result<bool, OpsError>> + Send;
    /// Stop etcd and start it again with `--force-new-cluster`. When the
    /// forced restart drops log entries that may hold `at_risk` revisions
    /// a peer acknowledged, clients are held off until the revision has
    /// moved past them.
    fn restart_force_new_cluster(
        &self,
        peer_down: PeerDown,
        at_risk: u64,
        deadline: Duration,
    ) -> impl Future<Output = Result<u32, OpsError>> + Send;
    /// Start etcd on its data with clients held off, move the revision
    /// past `at_risk` revisions if the data is a forced one-member
    /// cluster, then restart it normally: the end of a forced restart
    /// whose revision step was cut off.
    fn start_moving_revision(
        &self,
        at_risk: u64,
        deadline: Duration,
    ) -> impl Future<Output = Result<u32, OpsError>> + Send;
}

/// Whether `pid` exists and is stopped by a signal (state `T` in
/// /proc/PID/stat).
pub(crate) fn is_frozen(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| state == 'T' || state == 't')
}

/// `(state, start time in clock ticks)` from /proc/PID/stat.
pub(crate) fn proc_stat(pid: u32) -> Option<(char, u64)> {
    procfs::stat(pid).map(|s| (s.state, s.start_ticks))
}

/// The process group of `pid` (field 5 of /proc/PID/stat).
pub(crate) fn proc_pgrp(pid: u32) -> Option<u32> {
    procfs::stat(pid).map(|s| s.pgrp)
}

/// Whether `pid` is still the process that started at `start` (clock ticks
/// since boot) and not a zombie: a PID alone may have been reused.
pub(crate) fn same_process(pid: u32, start: u64) -> bool {
    procfs::same_process(pid, start)
}

/// Whether a process with this PID is alive (not a zombie).
pub(crate) fn alive(pid: u32) -> bool {
    procfs::stat(pid).is_some_and(|s| s.is_alive())
}

/// The real uid and gid of `pid` (the `Uid:` and `Gid:` lines of
/// /proc/PID/status).
pub(crate) fn proc_owner(pid: u32) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let first = |key: &str| -> Option<u32> {
        text.lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some((first("Uid:")?, first("Gid:")?))
}

/// Send `sig` to the process group led by `pgid` (etcd's: it leads a group
/// of its own). The shipped unit gives the daemon no `CAP_KILL`, so root may
/// not signal etcd once etcd runs as its own user: the signal is then sent
/// by `kill(1)` running as etcd's user and group, which may signal its own
/// processes. Only that group is reached either way. A group that is gone
/// counts as signalled.
///
/// Synchronous: `kill` is a short process, and this runs on the stop path
/// and in `Drop`, where no runtime may be left to wait on.
pub(crate) fn signal_group(pgid: u32, sig: Signal) -> Result<(), SuperviseError> {
    use nix::errno::Errno;
    let err = match killpg(Pid::from_raw(pgid as i32), sig) {
        Ok(()) | Err(Errno::ESRCH) => return Ok(()),
        Err(e) => e,
    };
    let fail = |why: String| {
        SuperviseError::Stop(format!("cannot send {sig} to etcd's group {pgid}: {why}"))
    };
    if err != Errno::EPERM {
        return Err(fail(err.to_string()));
    }
    let Some((uid, gid)) = proc_owner(pgid) else {
        // Gone between the two looks.
        return Ok(());
    };
    signal_group_as(pgid, sig, uid, gid)
        .map_err(|why| fail(format!("root may not (EPERM), and {why}")))
}

/// Send `sig` to the group `pgid` by `kill(1)` running as `uid`:`gid` (no
/// supplementary groups: std clears them when root switches uid).
fn signal_group_as(pgid: u32, sig: Signal, uid: u32, gid: u32) -> Result<(), String> {
    let name = sig.as_str().trim_start_matches("SIG");
    let out = crate::tool::Cmd::new(["kill", "-s", name, "--", &format!("-{pgid}")])
        .user(uid, gid)
        .output(KILL_DEADLINE, KILL_OUTPUT)
        .map_err(|e| format!("`kill` as uid {uid} did not run: {e}"))?;
    if out.status.success() || !alive(pgid) {
        return Ok(());
    }
    Err(format!(
        "`kill` as uid {uid} failed ({}): {}",
        out.status,
        out.reason()
    ))
}

/// How long `kill(1)` may take: it sends one signal.
const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// `kill(1)` prints nothing on stdout.
const KILL_OUTPUT: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    /// `sleep` as `nobody` in a process group of its own, as etcd runs.
    fn sleeper_as_nobody() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .uid(65534)
            .gid(65534)
            .process_group(0)
            .spawn()
            .expect("sleep runs")
    }

    #[test]
    fn owner_is_read_from_proc() {
        let mut c = sleeper_as_nobody();
        let owner = proc_owner(c.id());
        let _ = c.kill();
        let _ = c.wait();
        assert_eq!(owner, Some((65534, 65534)));
        assert_eq!(proc_owner(u32::MAX), None);
    }

    /// The path taken when the daemon lacks CAP_KILL: the signal is sent by
    /// `kill` running as the group's owner, and reaches it.
    #[test]
    fn a_group_is_signalled_as_its_owner() {
        use std::os::unix::process::ExitStatusExt;
        let mut c = sleeper_as_nobody();
        let r = signal_group_as(c.id(), Signal::SIGTERM, 65534, 65534);
        let status = c.wait().expect("sleep is our child");
        r.expect("kill as nobody");
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));
    }

    /// Another user's group is out of reach of `kill` as a third user: the
    /// error says which uid tried.
    #[test]
    fn a_signal_as_the_wrong_user_is_an_error() {
        let mut c = sleeper_as_nobody();
        let r = signal_group_as(c.id(), Signal::SIGTERM, 1, 1);
        let _ = c.kill();
        let _ = c.wait();
        let e = r.expect_err("uid 1 may not signal nobody's process");
        assert!(e.contains("as uid 1 failed"), "{e}");
    }

    #[test]
    fn a_group_that_is_gone_counts_as_signalled() {
        let mut c = sleeper_as_nobody();
        let pid = c.id();
        let _ = c.kill();
        let _ = c.wait();
        signal_group(pid, Signal::SIGTERM).expect("gone is signalled");
    }
}
