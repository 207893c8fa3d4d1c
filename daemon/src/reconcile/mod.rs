//! The daemon side of failover: gather the facts ([`gather`]), call
//! `warden_failover::decide`, carry out the steps ([`exec`]), observe again
//! and decide again. Driven by the daemon's failover loop (a timer, fence
//! alerts, leader changes) and by the OCF agent's actions ([`agent`]), all
//! through the same `decide`. One pass runs at a time.
//!
//! Everything outside this node's files is reached through the traits of
//! [`ports`] (Pacemaker, the etcd client calls, the local etcd's
//! supervision), handed in with each call: the reconciler does not know the
//! daemon's core, and tests drive it against a simulated cluster.
//!
//! Enabled when Pacemaker manages etcd (no `autostart`) and two or more
//! nodes are configured; a standalone daemon keeps its plain behaviour.

pub(crate) mod agent;
pub mod archives;
pub mod backend_index;
pub mod exec;
pub(crate) mod gather;
pub(crate) mod held;
pub mod local;
pub mod ports;
pub(crate) mod revision_step;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod sim_scenarios;
mod wal_tail;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crm_xml::report::WardenState;
use serde::Serialize;
use tokio::sync::Notify;
use warden_api::{Action, ActionReply, ActionRequest, Outcome};
use warden_failover::{
    Decision, EtcdView, Facts, FenceEvent, Notification, NotifyPhase, Step, Trigger, decide,
};

use crate::config::Settings;
use exec::ExecReport;
use local::LocalPaths;
use ports::{EtcdOps, Pacemaker, Ports, Supervisor};

/// The latest decision, for the monitor answer, `/status` and the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LastDecision {
    /// Why it was decided.
    pub(crate) trigger: String,
    /// The outcome.
    pub(crate) outcome: Outcome,
    /// The reason, if any.
    pub(crate) reason: Option<String>,
    /// The steps decided.
    pub(crate) steps: Vec<Step>,
    /// The step that failed, if one did.
    pub(crate) failed: Option<String>,
    /// Unix seconds.
    pub(crate) at: u64,
}

/// How many decide/act rounds one pass may take before it yields.
const MAX_ROUNDS: usize = 6;
/// Fence alerts kept (they are facts; Pacemaker's history has them too).
const MAX_ALERTS: usize = 32;

/// How long a refusing pass asks an online peer whether its TLS check
/// fails (see [`gather::peer_tls_failure`]).
const PEER_TLS_ASK: Duration = Duration::from_millis(500);

/// The failover driver.
#[derive(Debug)]
pub(crate) struct Reconciler {
    /// This node's files.
    pub(crate) paths: LocalPaths,
    alerts: Mutex<Vec<FenceEvent>>,
    notify_hint: Mutex<Option<Notification>>,
    last: Mutex<Option<LastDecision>>,
    state: Mutex<(WardenState, u64)>,
    kick: Notify,
    serial: tokio::sync::Mutex<()>,
    // Agent stops in progress. While Pacemaker stops etcd here, the loop's
    // own passes must not act: between two passes of the stop they saw the
    // member just removed as "etcd not running where Pacemaker wants it"
    // and archived and rejoined it (the graceful-reboot scenario), or released the leave lock taken
    // for the stop. The stop's own passes carry it through.
    stops: std::sync::atomic::AtomicUsize,
    // Whether the last facts showed a learner. Nothing is decided while it
    // catches up (decide has no step for that), yet its promotion is due
    // the moment etcd reports it in sync: the loop keeps the pending pace
    // rather than the stable one, or a rejoin waits a whole stable interval.
    learner: std::sync::atomic::AtomicBool,
    // The learner this node's member leads and last saw behind (0: none).
    // The loop watches the leader's raft progress for it between passes,
    // so that its promotion follows the moment it is in sync rather than
    // the next pending pass.
    catching_up: std::sync::atomic::AtomicU64,
    // Forced new clusters and archives, for /metrics.
    counters: ExecCounters,
}

/// Counts one agent stop in flight for as long as it lives.
struct StopInFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> StopInFlight<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        StopInFlight(n)
    }
}

impl Drop for StopInFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Where this node's failover files live, from the settings: the state file
/// in the state directory, the archives in `failover.archive_dir` (by
/// default beside the data directory; always on its filesystem, checked
/// when the configuration is loaded, so that archiving is a rename), the
/// reboot-scoped markers under `/run/etcd-warden/<node>`.
pub(crate) fn paths_for(s: &Settings) -> LocalPaths {
    LocalPaths {
        data_dir: s.etcd.data_dir.clone(),
        state_file: s.state_dir.join("failover-state.json"),
        run_dir: PathBuf::from("/run/etcd-warden").join(&s.node_name),
        archive_dir: s.failover.archive_dir.clone(),
    }
}

/// Whether the failover logic drives etcd: Pacemaker manages it and the
/// cluster has more than one node.
pub fn enabled(s: &Settings) -> bool {
    !s.autostart && s.nodes.len() >= 2
}

use crate::clock::now_unix;
use crate::metrics::ExecCounters;

/// The answer to an agent's action (the daemon's one constructor of it).
pub(crate) fn reply(outcome: Outcome, reason: Option<String>) -> ActionReply {
    ActionReply { outcome, reason }
}

impl Reconciler {
    /// A reconciler for `settings`.
    pub(crate) fn new(settings: &Settings) -> Self {
        Self::with_paths(paths_for(settings))
    }

    /// A reconciler with explicit paths (tests).
    pub(crate) fn with_paths(paths: LocalPaths) -> Self {
        Reconciler {
            paths,
            alerts: Mutex::new(Vec::new()),
            notify_hint: Mutex::new(None),
            last: Mutex::new(None),
            state: Mutex::new((WardenState::Stopped, now_unix())),
            kick: Notify::new(),
            serial: tokio::sync::Mutex::new(()),
            stops: std::sync::atomic::AtomicUsize::new(0),
            learner: std::sync::atomic::AtomicBool::new(false),
            catching_up: std::sync::atomic::AtomicU64::new(0),
            counters: ExecCounters::default(),
        }
    }

    /// Counts forced new clusters and archives into `counters` (the
    /// daemon's metrics) instead of counters of its own.
    pub(crate) fn with_counters(mut self, counters: ExecCounters) -> Self {
        self.counters = counters;
        self
    }

    /// Hold the one-pass-at-a-time lock: no pass (the loop's or an agent
    /// action's) runs while the guard lives. An operator's resolution
    /// (`etcd-warden recover`) changes this node's files under it.
    pub(crate) async fn exclusive(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.serial.lock().await
    }

    /// Wake the loop now.
    pub(crate) fn kick(&self) {
        self.kick.notify_one();
    }

    /// Resolves when someone asked the loop to decide now.
    pub(crate) async fn kicked(&self) {
        self.kick.notified().await;
    }

    /// The learner this node's member led and saw behind in the last pass.
    pub(crate) fn catching_up(&self) -> Option<u64> {
        match self.catching_up.load(std::sync::atomic::Ordering::SeqCst) {
            0 => None,
            id => Some(id),
        }
    }

    /// An event pushed by the alert agent. A fence result is kept as a fact
    /// (exactly like crm_mon's fence history) and wakes the loop at once:
    /// that is the fast path of a survivor after its peer was fenced.
    pub(crate) fn alert(&self, ev: &warden_api::ClusterEvent) {
        if let Some(f) = crate::pacemaker::alert_fence_event(ev) {
            tracing::info!(target = %f.target, action = ?f.action, status = ?f.status, "fence result from the alert agent");
            let mut a = self.alerts.lock().unwrap_or_else(|e| e.into_inner());
            if !a.contains(&f) {
                a.push(f);
            }
            let excess = a.len().saturating_sub(MAX_ALERTS);
            a.drain(..excess);
        }
        if matches!(ev.kind.as_str(), "fencing" | "node") {
            self.kick();
        }
    }

    /// The latest decision.
    pub(crate) fn last(&self) -> Option<LastDecision> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// What this node's daemon is doing, and since when (Unix seconds).
    pub(crate) fn warden_state(&self) -> (WardenState, u64) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note(&self, trigger: &Trigger, d: &Decision, r: Option<&ExecReport>, facts: &Facts) {
        let failed = r
            .and_then(|r| r.failed.as_ref())
            .map(|(s, e)| format!("{s:?}: {e}"));
        let rec = LastDecision {
            trigger: format!("{trigger:?}"),
            outcome: d.outcome,
            reason: d.reason.clone(),
            steps: d.steps.clone(),
            failed,
            at: now_unix(),
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(rec);
        let learner = matches!(&facts.etcd, EtcdView::Running(l) if l.is_learner || l.members.iter().any(|m| m.is_learner));
        self.learner
            .store(learner, std::sync::atomic::Ordering::SeqCst);
        let behind = match &facts.etcd {
            EtcdView::Running(l) if l.is_leader => l
                .members
                .iter()
                .find(|m| m.is_learner && !m.in_sync)
                .map_or(0, |m| m.id),
            _ => 0,
        };
        self.catching_up
            .store(behind, std::sync::atomic::Ordering::SeqCst);
        let st = classify(facts, d);
        let mut cur = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if cur.0 != st {
            tracing::info!(from = ?cur.0, to = ?st, "failover state");
            *cur = (st, now_unix());
        }
    }

    /// Observe, decide and (unless `trigger` is a monitor) act, repeating
    /// while steps succeed, within `deadline`. Returns the last decision,
    /// which describes the state after the steps carried out.
    pub(crate) async fn pass<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
        &self,
        ports: &Ports<'_, P, E, S>,
        trigger: Trigger,
        deadline: Duration,
    ) -> Result<Decision, String> {
        let started = Instant::now();
        let _one = self.serial.lock().await;
        if matches!(trigger, Trigger::Reconcile)
            && self.stops.load(std::sync::atomic::Ordering::SeqCst) > 0
        {
            // A tick that queued behind a pass of the stop (see `stops`).
            return Err("an agent stop is in progress; its own passes act".into());
        }
        let probe = ports
            .settings
            .timeouts
            .probe_timeout
            .max(Duration::from_millis(500));
        let mut last: Option<Decision> = None;
        for _ in 0..MAX_ROUNDS {
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            let gathering = Instant::now();
            let facts = match self.observe(ports, &trigger, left.min(probe)).await {
                Ok(f) => f,
                Err(e) => return last.ok_or_else(|| e.to_string()),
            };
            let mut d = decide(&facts);
            if d.refusal().is_some()
                && let Some(note) =
                    gather::peer_tls_failure(ports, &facts, left.min(PEER_TLS_ASK)).await
            {
                d.reason = Some(match d.reason.take() {
                    Some(r) => format!("{r}; {note}"),
                    None => note,
                });
            }
            tracing::debug!(?trigger, outcome = ?d.outcome, steps = ?d.steps, "decided");
            if matches!(trigger, Trigger::Monitor) || d.first_act().is_none() {
                self.note(&trigger, &d, None, &facts);
                return Ok(d);
            }
            // A forced restart acts on facts gathered again just before it,
            // and only if they lead to the very same force: anything it
            // depends on (the peer's state, a fence, a claim, the marker)
            // may have changed while the first gathering was decided on.
            let (facts, d) = match forced_epoch(&d) {
                None => (facts, d),
                Some(epoch) => {
                    let left = deadline.saturating_sub(started.elapsed());
                    let fresh = match self.observe(ports, &trigger, left.min(probe)).await {
                        Ok(f) => f,
                        Err(e) => return last.ok_or_else(|| e.to_string()),
                    };
                    let again = decide(&fresh);
                    if forced_epoch(&again) != Some(epoch) {
                        tracing::warn!(epoch, steps = ?again.steps, "the facts changed just before the forced restart: not forcing");
                        self.note(&trigger, &again, None, &fresh);
                        last = Some(again);
                        continue;
                    }
                    (fresh, again)
                }
            };
            // How long the facts took is the survivor's overhead between a
            // fence and its forced restart: worth seeing in every action log.
            tracing::info!(?trigger, steps = ?d.steps, reason = d.reason.as_deref().unwrap_or_default(), gathered_ms = gathering.elapsed().as_millis() as u64, "carrying out");
            let left = deadline.saturating_sub(started.elapsed());
            let report = exec::execute(ports, &self.paths, &facts, &d.steps, left).await;
            self.counters.executed(&report.done, report.archived.len());
            self.note(&trigger, &d, Some(&report), &facts);
            let failed = report.failed.is_some();
            last = Some(d);
            if failed {
                break;
            }
        }
        last.ok_or_else(|| "no time left to decide".into())
    }

    /// Gather the facts for `trigger` now, with the notify hint and the
    /// fence alerts received so far.
    async fn observe<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
        &self,
        ports: &Ports<'_, P, E, S>,
        trigger: &Trigger,
        deadline: Duration,
    ) -> Result<Facts, gather::GatherError> {
        let notify = self
            .notify_hint
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let alerts = self
            .alerts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        gather::gather(
            ports,
            &self.paths,
            trigger.clone(),
            notify,
            alerts,
            deadline,
        )
        .await
    }

    /// The loop's own pass (timer, alert, leader change). Returns whether
    /// something is pending, so that the loop comes back sooner.
    pub(crate) async fn tick<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
        &self,
        ports: &Ports<'_, P, E, S>,
    ) -> bool {
        if self.stops.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            // The stop decides and acts; come back once it is done.
            return true;
        }
        let limit = ports.settings.timeouts.start_timeout;
        match self.pass(ports, Trigger::Reconcile, limit).await {
            Ok(d) => {
                d.steps.iter().any(|s| !matches!(s, Step::Refuse { .. }))
                    || self.learner.load(std::sync::atomic::Ordering::SeqCst)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot decide now");
                true
            }
        }
    }

    /// An OCF action through `decide`. `None` for actions it does not
    /// handle, and for a monitor when Pacemaker's view cannot be read (the
    /// daemon's own live check answers then, so that a slow crm_mon never
    /// fails a healthy etcd).
    pub(crate) async fn action<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
        &self,
        ports: &Ports<'_, P, E, S>,
        req: &ActionRequest,
        budget: Duration,
    ) -> Option<ActionReply> {
        match req.action {
            Action::Start | Action::Stop => Some(self.start_stop(ports, req.action, budget).await),
            Action::Monitor => {
                let r = self.pass(ports, Trigger::Monitor, budget).await.ok()?;
                if r.first_act().is_some() {
                    self.kick();
                }
                Some(reply(r.outcome, r.reason))
            }
            Action::Notify => {
                if let Some(n) = &req.notify {
                    let phase = if n.kind == "pre" {
                        NotifyPhase::Pre
                    } else {
                        NotifyPhase::Post
                    };
                    let list = |k: &str| n.nodes.get(k).cloned().unwrap_or_default();
                    let note = Notification {
                        phase,
                        operation: n.operation.clone(),
                        start: list("start"),
                        stop: list("stop"),
                    };
                    // The pre notification describes the pending start or
                    // stop; after it, the hint has served.
                    *self.notify_hint.lock().unwrap_or_else(|e| e.into_inner()) =
                        (phase == NotifyPhase::Pre).then_some(note);
                }
                self.kick();
                Some(reply(Outcome::Success, None))
            }
            Action::Promote | Action::Demote => Some(reply(Outcome::Success, None)),
            Action::Reload | Action::ValidateAll => None,
        }
    }

    /// Start or stop: decide and act until nothing is left to do or the
    /// deadline passes (then `Failed`, retryable, with the reason).
    async fn start_stop<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
        &self,
        ports: &Ports<'_, P, E, S>,
        action: Action,
        budget: Duration,
    ) -> ActionReply {
        let started = Instant::now();
        let trigger = if action == Action::Start {
            Trigger::Start
        } else {
            Trigger::Stop
        };
        let _stopping = (action == Action::Stop).then(|| StopInFlight::new(&self.stops));
        let mut why = String::from("no decision yet");
        loop {
            let left = budget.saturating_sub(started.elapsed());
            if left.is_zero() {
                return reply(
                    Outcome::Failed,
                    Some(format!(
                        "{action:?} did not complete within {budget:?}: {why}"
                    )),
                );
            }
            match self.pass(ports, trigger.clone(), left).await {
                Ok(d) if d.first_act().is_none() => {
                    let waiting = d.steps.iter().find_map(|s| match s {
                        Step::Wait { reason } => Some(reason.clone()),
                        _ => None,
                    });
                    match waiting {
                        // etcd runs, so the start is done: what it waits for
                        // (quorum, a fence, a promotion) the loop carries on
                        // with, and monitor reports it (190). Waiting here
                        // instead deadlocked a start whose peer died during
                        // it: Pacemaker holds the fence of the peer until the
                        // in-flight start ends, and the start waited for
                        // that fence (bench: 2 min, until the start timeout).
                        Some(w)
                            if action == Action::Start
                                && finished(action, d.outcome) == Outcome::Success =>
                        {
                            return reply(Outcome::Success, Some(w));
                        }
                        Some(w) => why = w,
                        None => {
                            if action == Action::Stop {
                                *self.notify_hint.lock().unwrap_or_else(|e| e.into_inner()) = None;
                            }
                            return reply(finished(action, d.outcome), d.reason);
                        }
                    }
                }
                Ok(d) => {
                    why = self
                        .last()
                        .and_then(|l| l.failed)
                        .or(d.reason)
                        .unwrap_or_else(|| "steps still in progress".into());
                }
                Err(e) => why = e,
            }
            let left = budget.saturating_sub(started.elapsed());
            tokio::time::sleep(Duration::from_millis(250).min(left)).await;
        }
    }
}

/// The epoch of the forced restart a decision carries, if any.
fn forced_epoch(d: &Decision) -> Option<u64> {
    d.steps.iter().find_map(|s| match s {
        Step::ForceNewCluster { epoch } => Some(*epoch),
        _ => None,
    })
}

/// The outcome a finished start or stop reports. A start that leaves etcd
/// running has succeeded even when the member is degraded (a sole voter, a
/// learner catching up): Pacemaker records any other start code as a failed
/// action, and the degraded state is what the next monitor reports (190).
fn finished(action: Action, outcome: Outcome) -> Outcome {
    match (action, outcome) {
        (Action::Start, Outcome::Degraded) => Outcome::Success,
        (Action::Start, Outcome::DegradedPromoted) => Outcome::RunningPromoted,
        _ => outcome,
    }
}

/// What an operator should see this node doing.
fn classify(f: &Facts, d: &Decision) -> WardenState {
    let recovering = d.steps.iter().any(|s| {
        matches!(
            s,
            Step::ArchiveDataDir { .. } | Step::ForceNewCluster { .. } | Step::SetClaim { .. }
        )
    });
    if recovering {
        return WardenState::Recovering;
    }
    match &f.etcd {
        EtcdView::NotRunning => WardenState::Stopped,
        EtcdView::Running(l) if l.is_learner => WardenState::Rejoining,
        EtcdView::Running(l)
            if l.quorate() && l.voters().count() == 1 && f.pacemaker.nodes.len() > 1 =>
        {
            WardenState::Standalone
        }
        EtcdView::Running(_) => WardenState::Member,
    }
}

#[cfg(test)]
mod finished_tests {
    use super::*;

    #[test]
    fn a_start_that_leaves_etcd_running_degraded_has_succeeded() {
        assert_eq!(finished(Action::Start, Outcome::Degraded), Outcome::Success);
        assert_eq!(
            finished(Action::Start, Outcome::DegradedPromoted),
            Outcome::RunningPromoted
        );
        assert_eq!(finished(Action::Start, Outcome::Failed), Outcome::Failed);
        assert_eq!(finished(Action::Stop, Outcome::Degraded), Outcome::Degraded);
    }
}
