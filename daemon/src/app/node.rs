//! The supervised local etcd as the app sees it: its process state (with
//! the hang check), the live probe and what it records (node state,
//! metrics, leader changes), start and stop.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::etcd::EtcdError;
use crate::etcd::MemberStatus;
use crate::etcd::conf::StartMode;
use crate::metrics::Role;
use crate::supervise::silence::Change;
use crate::supervise::{ProcState, SuperviseError};

use super::{App, LeaderEvent, Probe};

impl App {
    /// etcd's process state, `Hung` once a process that answered before
    /// has not answered for `timeouts.hung_after_ms` (or one stopped by a
    /// signal has been so for that long).
    pub(crate) async fn proc_state(&self) -> ProcState {
        let (state, change) = self
            .silence
            .judge(self.supervisor.state().await, Instant::now());
        self.silence_changed(change);
        state
    }

    /// The local member's Status, noted for the hang check.
    pub(crate) async fn local_status(&self, deadline: Duration) -> Result<MemberStatus, EtcdError> {
        let st = self.etcd.status(deadline).await;
        let change = self.silence.answered(st.is_ok(), Instant::now());
        self.silence_changed(change);
        st
    }

    fn silence_changed(&self, change: Option<Change>) {
        let bound = self.silence.bound();
        match change {
            Some(Change::Hung { pid, silent }) => {
                self.metrics.etcd_hung();
                tracing::warn!(
                    pid,
                    silent_ms = u64::try_from(silent.as_millis()).unwrap_or(u64::MAX),
                    hung_after_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
                    "etcd's process exists but has not answered for timeouts.hung_after_ms: it counts as hung, and monitor fails it"
                );
            }
            Some(Change::Answers { pid }) => {
                tracing::info!(pid, "etcd answers again after a hang");
            }
            None => {}
        }
    }

    /// Ask etcd now: process state, Status and (when `read`) a
    /// linearizable read, all within `deadline`.
    pub(crate) async fn probe(&self, deadline: Duration, read: bool) -> Probe {
        let started = Instant::now();
        let proc = self.proc_state().await;
        // A hung etcd is asked too (it may answer again), unless it is
        // stopped by a signal and cannot.
        let asked = match &proc {
            ProcState::Running { .. } => true,
            ProcState::Hung { pid, .. } => !crate::supervise::is_frozen(*pid),
            _ => false,
        };
        let (status, lin) = if asked {
            {
                let st = self.local_status(deadline).await;
                let leaderless = matches!(&st, Ok(s) if !s.has_leader());
                let lin = if read && leaderless {
                    // Without a leader the read can only time out, and the
                    // probe runs in the daemon's one loop: waiting the whole
                    // deadline there held up the failover pass a fence alert
                    // had just asked for (bench: alert → claim up to 1.9 s).
                    Some(Err(EtcdError::Unavailable(
                        "etcd has no leader (the read was not attempted)".into(),
                    )))
                } else if read {
                    let left = deadline.saturating_sub(started.elapsed());
                    Some(self.etcd.linearizable_read(left).await)
                } else {
                    None
                };
                (Some(st), lin)
            }
        } else {
            (None, None)
        };
        Probe {
            proc,
            status,
            read: lin,
        }
    }

    /// Record what a probe saw: node state, metrics, leader changes.
    pub(crate) fn record(&self, p: &Probe) {
        self.etcd_record.observe(&p.proc);
        let (role, up) = match &p.status {
            Some(Ok(s)) if s.is_learner => (Role::Learner, true),
            Some(Ok(s)) if s.leader == s.member_id && s.leader != 0 => (Role::Leader, true),
            Some(Ok(_)) => (Role::Follower, true),
            _ => (Role::None, false),
        };
        let quorum = matches!(p.read, Some(Ok(_)));
        self.metrics.observe(role, quorum, up);
        self.metrics
            .observe_hung(matches!(p.proc, ProcState::Hung { .. }));
        if let Some(Ok(s)) = &p.status {
            self.metrics.observe_etcd(s)
        }
        if p.status.as_ref().is_some_and(|s| s.is_err()) {
            self.metrics.probe_failed();
        }
        let state = match (&p.proc, &p.status) {
            (ProcState::Stopped, _) => "stopped",
            (ProcState::Died { .. }, _) => "failed",
            (ProcState::Frozen { .. }, _) => "failed",
            (ProcState::Hung { .. }, _) => "hung",
            (ProcState::Running { .. }, Some(Ok(s))) if s.is_learner => "learner",
            (ProcState::Running { .. }, Some(Ok(s))) if s.has_leader() => "running",
            (ProcState::Running { .. }, Some(Ok(_))) => "no-leader",
            (ProcState::Running { .. }, _) => "unresponsive",
        };
        self.set_state(state);
        if let Some(Ok(s)) = &p.status {
            let now = (s.leader != 0).then_some(s.leader);
            let mut last = self.last_leader.lock().unwrap_or_else(|e| e.into_inner());
            if *last != now {
                if last.is_some() || now.is_some() {
                    self.metrics.leader_changed();
                }
                let ev = LeaderEvent {
                    leader_id: now,
                    previous_id: *last,
                    raft_term: Some(s.raft_term),
                    at_ms: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                        .unwrap_or_default(),
                };
                tracing::info!(leader = ?now, previous = ?*last, "leader change");
                *last = now;
                let _ = self.leader_tx.send(ev);
            }
        }
    }

    /// Whether the local member is a voter and the cluster has a leader,
    /// asked now.
    pub(crate) async fn ready(&self, deadline: Duration) -> Result<(), String> {
        match self.etcd.status(deadline).await {
            Ok(s) if s.is_learner => Err("the local member is a learner".into()),
            Ok(s) if !s.has_leader() => Err("the cluster has no leader".into()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Start etcd and wait until the local member answers Status.
    pub(crate) async fn start_etcd(
        &self,
        mode: StartMode,
        deadline: Duration,
    ) -> Result<u32, String> {
        let started = Instant::now();
        let pid = self.launch(mode).await?;
        loop {
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(format!(
                    "etcd (pid {pid}) did not answer within {deadline:?} of being started"
                ));
            }
            let probe_limit = left.min(self.settings.timeouts.probe_timeout);
            let p = self.probe(probe_limit, false).await;
            self.record(&p);
            match (&p.proc, &p.status) {
                (ProcState::Running { .. }, Some(Ok(_))) => return Ok(pid),
                (ProcState::Died { how, .. }, _) => {
                    return Err(format!("etcd exited while starting ({how})"));
                }
                (ProcState::Stopped, _) => return Err("etcd was stopped while starting".into()),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(100).min(left)).await;
        }
    }

    /// Start etcd in `mode` unless it runs already; its PID.
    pub(crate) async fn launch(&self, mode: StartMode) -> Result<u32, String> {
        self.want_running.store(true, Ordering::SeqCst);
        if let ProcState::Running { pid } = self.supervisor.state().await {
            return Ok(pid);
        }
        // A forced restart starts alone, its peers down by proof.
        if !matches!(
            mode,
            StartMode::ForceNewCluster | StartMode::ClientsHeld { force: true, .. }
        ) {
            crate::etcd::version::check_start(&self.settings, &self.connector).await?;
        }
        self.set_state("starting");
        self.etcd.reset().await;
        if matches!(mode, StartMode::JoinExisting { .. }) {
            // A joining member may be sent the whole database.
            crate::supervise::writeback::watch_incoming(&self.settings.etcd.data_dir);
        }
        self.supervisor.start(mode).await.map_err(|e| e.to_string())
    }

    /// Stop etcd gracefully within `grace`, then SIGKILL.
    pub async fn stop_etcd(&self, grace: Duration) -> Result<bool, SuperviseError> {
        self.want_running.store(false, Ordering::SeqCst);
        self.set_state("stopping");
        let r = self.supervisor.stop(grace).await;
        let p = self
            .probe(self.settings.timeouts.probe_timeout, false)
            .await;
        self.record(&p);
        r
    }

    /// Whether the daemon should restart a dead etcd itself.
    pub(crate) fn should_restart(&self) -> bool {
        self.settings.autostart && self.want_running.load(Ordering::SeqCst)
    }
}
