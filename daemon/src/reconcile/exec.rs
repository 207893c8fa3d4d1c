//! Carrying out a [`Decision`]'s steps, in order, stopping at the first that
//! fails. The caller observes again and decides again afterwards: a step's
//! effect is read back from fresh facts, never from the call's result (an
//! etcd call can report failure yet have taken effect).
//!
//! Rules 1 and 3 are checked here again, against the facts the decision was
//! made from, so that a wrong decision cannot force a new cluster without
//! Pacemaker's proof that the peer is down, nor start over or delete data.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use warden_failover::{
    Claim, Facts, StartMode as Mode, Step, Topology,
    decide::{bootstrap_token, expected_record, peer_holds_no_data},
    peer_down_proof,
};

use super::local::LocalPaths;
use super::pcmk::{CLAIM_ATTR, Pacemaker, RECORD_ATTR};
use crate::config::Settings;
use crate::etcd::EtcdError;
use crate::etcd_conf::StartMode;
use crate::ops::{EtcdOps, OpsError, PeerDown};

/// The leave lock in etcd.
pub trait LeaveLock: Send + Sync {
    /// Take the lock for `node`; returns the holder after the attempt.
    fn acquire(
        &self,
        node: &str,
        deadline: Duration,
    ) -> impl Future<Output = Result<String, EtcdError>> + Send;
    /// Release `node`'s lock (never another node's).
    fn release(
        &self,
        node: &str,
        deadline: Duration,
    ) -> impl Future<Output = Result<(), EtcdError>> + Send;
}

impl LeaveLock for std::sync::Arc<crate::core::Core> {
    async fn acquire(&self, node: &str, deadline: Duration) -> Result<String, EtcdError> {
        self.etcd.acquire_leave_lock(node, deadline).await
    }
    async fn release(&self, node: &str, deadline: Duration) -> Result<(), EtcdError> {
        self.etcd.release_leave_lock(node, deadline).await
    }
}

/// A step that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The step would break a safety rule on these facts; not carried out.
    #[error("refused to carry out {step}: {why}")]
    Unsafe {
        /// The step, for the log.
        step: String,
        /// Which rule and why.
        why: String,
    },
    /// etcd or its supervision failed.
    #[error("{step} failed: {source}")]
    Ops {
        /// The step.
        step: String,
        /// The error.
        source: OpsError,
    },
    /// Pacemaker's tools failed.
    #[error("{step} failed: {source}")]
    Pcmk {
        /// The step.
        step: String,
        /// The error.
        source: super::pcmk::PcmkError,
    },
    /// A local file operation failed.
    #[error("{step} failed: {source}")]
    Local {
        /// The step.
        step: String,
        /// The error.
        source: super::local::LocalError,
    },
    /// The leave lock is held by another node.
    #[error("the leave lock is held by {0}")]
    LockHeld(String),
}

/// What was done.
#[derive(Debug, Default)]
pub struct ExecReport {
    /// Steps carried out, in order.
    pub done: Vec<Step>,
    /// The step that failed, and why; later steps were not tried.
    pub failed: Option<(Step, String)>,
    /// Archive directories created.
    pub archived: Vec<PathBuf>,
}

/// What the executor acts on.
pub struct Env<'a, O, P, L> {
    /// etcd operations.
    pub ops: &'a O,
    /// Pacemaker's tools.
    pub pcmk: &'a P,
    /// The leave lock.
    pub lock: &'a L,
    /// This node's files.
    pub local: &'a LocalPaths,
    /// Settings (node URLs, timeouts).
    pub settings: &'a Settings,
}

fn name(s: &Step) -> String {
    match s {
        Step::ArchiveDataDir { .. } => "ArchiveDataDir".into(),
        Step::Wait { .. } => "Wait".into(),
        Step::Refuse { .. } => "Refuse".into(),
        other => format!("{other:?}"),
    }
}

use crate::clock::now_unix;

/// Pacemaker's proof that every other node is down, checked here again
/// (rule 1): `None` unless the topology is two-node, each peer is proven
/// down and this node holds the in-sync marker of this boot.
pub fn force_allowed(facts: &Facts) -> Result<PeerDown, String> {
    if facts.topology != Topology::TwoNode {
        return Err("the topology is not two-node: a new cluster is never forced".into());
    }
    let mut proofs = Vec::new();
    for peer in facts.others() {
        match peer_down_proof(facts, peer) {
            Some(p) if facts.in_sync_this_boot() => {
                proofs.push((peer.name.clone(), format!("{p:?}")))
            }
            Some(_) => {
                return Err("this node does not hold the in-sync marker of this boot".into());
            }
            // Online, but its daemon says its data is gone and names no
            // newer epoch: no other member runs (completeness still needs
            // the marker, as for any force).
            None if peer_holds_no_data(facts, peer) && !facts.in_sync_this_boot() => {
                return Err("this node does not hold the in-sync marker of this boot".into());
            }
            None if peer_holds_no_data(facts, peer) => proofs.push((
                peer.name.clone(),
                "online without data (its state file names no newer epoch)".into(),
            )),
            None => {
                return Err(format!(
                    "Pacemaker has not confirmed that {} is down",
                    peer.name
                ));
            }
        }
    }
    let (node, evidence) = proofs
        .into_iter()
        .next()
        .ok_or_else(|| "no peer is configured".to_string())?;
    Ok(PeerDown { node, evidence })
}

/// How long a restart from existing data waits for etcd to answer before
/// the step is left to the next round (see `StartEtcd`).
const RESTART_ANSWER: Duration = Duration::from_secs(5);

/// How long one membership step may keep retrying through etcd's
/// "unhealthy cluster" window after a restart.
const MEMBERSHIP_RETRY: Duration = Duration::from_secs(10);

/// The deadline of one membership call within that budget. etcd 3.5 may
/// not answer a change at all while another one is pending (a removal just
/// after a promotion) and the call times out; a shorter attempt leaves time
/// to ask again once the pending change has been applied.
const MEMBERSHIP_ATTEMPT: Duration = Duration::from_secs(3);

/// Retry `f` while etcd answers with a transient error (unavailable, a
/// timeout, or a precondition such as a learner not yet in sync), by the
/// gRPC code. Each attempt gets at most [`MEMBERSHIP_ATTEMPT`].
async fn retrying<T, F, Fut>(budget: Duration, mut f: F) -> Result<T, OpsError>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<T, OpsError>>,
{
    let started = Instant::now();
    loop {
        let left = budget.saturating_sub(started.elapsed());
        let attempt = left.min(MEMBERSHIP_ATTEMPT).max(Duration::from_millis(100));
        match f(attempt).await {
            Ok(v) => return Ok(v),
            Err(OpsError::Etcd(e))
                if (e.is_unreachable() || matches!(e, EtcdError::FailedPrecondition(_)))
                    && started.elapsed() + Duration::from_millis(200) < budget =>
            {
                tracing::debug!(error = %e, "etcd not ready for a membership change yet; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Carry out `steps` (decided from `facts`) in order within `deadline`.
pub async fn execute<O: EtcdOps, P: Pacemaker, L: LeaveLock>(
    env: &Env<'_, O, P, L>,
    facts: &Facts,
    steps: &[Step],
    deadline: Duration,
) -> ExecReport {
    let started = Instant::now();
    let mut report = ExecReport::default();
    for step in steps {
        let left = deadline.saturating_sub(started.elapsed());
        if left.is_zero() {
            report.failed = Some((step.clone(), "no time left before the deadline".into()));
            break;
        }
        match one(env, facts, step, left, &mut report).await {
            Ok(()) => report.done.push(step.clone()),
            Err(e) => {
                tracing::warn!(step = %name(step), error = %e, "step failed; deciding again");
                report.failed = Some((step.clone(), e.to_string()));
                break;
            }
        }
    }
    report
}

async fn one<O: EtcdOps, P: Pacemaker, L: LeaveLock>(
    env: &Env<'_, O, P, L>,
    facts: &Facts,
    step: &Step,
    left: Duration,
    report: &mut ExecReport,
) -> Result<(), StepError> {
    let s = env.settings;
    let me = s.node_name.as_str();
    let sname = name(step);
    let ops = |source| StepError::Ops {
        step: sname.clone(),
        source,
    };
    let pcmk = |source| StepError::Pcmk {
        step: sname.clone(),
        source,
    };
    let local = |source| StepError::Local {
        step: sname.clone(),
        source,
    };
    let unsafe_ = |why: &str| StepError::Unsafe {
        step: sname.clone(),
        why: why.to_string(),
    };
    let attr_deadline = left.min(s.timeouts.probe_timeout.max(Duration::from_secs(2)));
    match step {
        Step::Wait { .. } | Step::Refuse { .. } => Ok(()),
        Step::PublishRecord => {
            let rec = expected_record(facts);
            let v = serde_json::to_string(&rec).unwrap_or_default();
            env.pcmk
                .set_attr(me, RECORD_ATTR, &v, attr_deadline)
                .await
                .map_err(pcmk)
        }
        Step::SetClaim { epoch } => {
            let claim = Claim {
                owner: me.to_string(),
                boot_id: facts.boot_id.clone(),
                epoch: *epoch,
                at: warden_failover::Stamp(now_unix()),
            };
            tracing::warn!(epoch, "claiming the right to force a new cluster");
            let v = serde_json::to_string(&claim).unwrap_or_default();
            env.pcmk
                .set_attr(me, CLAIM_ATTR, &v, attr_deadline)
                .await
                .map_err(pcmk)
        }
        // Only ever this node's own claim: the attribute of `me`.
        Step::ClearClaim => env
            .pcmk
            .delete_attr(me, CLAIM_ATTR, attr_deadline)
            .await
            .map_err(pcmk),
        Step::StartEtcd { mode } => {
            let has = env.local.has_data();
            let m = match mode {
                Mode::New if has => {
                    return Err(unsafe_(
                        "rule 3: a bootstrap would start over existing data",
                    ));
                }
                Mode::New => {
                    // Read again here, not from the facts: a bootstrap over a
                    // history replaces data that existed with an empty
                    // cluster.
                    let st = env.local.read_state().map_err(local)?;
                    if st.had_cluster() {
                        return Err(unsafe_(&format!(
                            "the state file {} says this node's data was part of cluster {} (epoch {}): a bootstrap would replace it with an empty cluster",
                            env.local.state_file.display(),
                            st.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
                            st.epoch
                        )));
                    }
                    let token = bootstrap_token(facts);
                    env.local
                        .update_state(|st| st.bootstrap_token = Some(token.clone()))
                        .map_err(local)?;
                    tracing::warn!(%token, "bootstrapping a new etcd cluster with a fresh cluster token");
                    StartMode::Bootstrap { token }
                }
                Mode::Join { .. } if has => {
                    return Err(unsafe_("rule 3: a join would start over existing data"));
                }
                Mode::Existing if !has => return Err(unsafe_("no data to restart from")),
                Mode::Existing => StartMode::Normal,
                Mode::Join { epoch } => {
                    let cluster = facts
                        .cluster
                        .as_ref()
                        .ok_or_else(|| unsafe_("no quorate cluster answered to join"))?;
                    // The data this start creates belongs to the learner the
                    // cluster lists for this node, in this cluster. Recorded
                    // before etcd runs: otherwise a stop before the first
                    // live look left the old member's ids here, the next
                    // start archived the new data as stale and joined again,
                    // empty, as a member the leader knows has entries (etcd
                    // panics: "tocommit(…) is out of range").
                    let learner = cluster
                        .members
                        .iter()
                        .find(|m| m.node == s.node_name && m.is_learner)
                        .map(|m| m.id);
                    env.local
                        .update_state(|st| {
                            st.epoch = *epoch;
                            st.pending_epoch = None;
                            st.bootstrap_token = None;
                            st.joining = true;
                            st.departed = false;
                            st.formed = false;
                            st.cluster_id = Some(cluster.cluster_id);
                            st.member_id = learner;
                        })
                        .map_err(local)?;
                    StartMode::JoinExisting {
                        initial_cluster: initial_cluster(s, &cluster.members),
                    }
                }
            };
            // A member restarted while the majority is down answers nothing
            // until the majority is back (in HA mode it may wait for the
            // very start Pacemaker holds back while this one is in flight;
            // in a two-node pair after a total outage, for a peer whose data
            // is gone and that will never start a member): wait only
            // briefly; the next round decides on "running, no quorum".
            let wait = if matches!(mode, Mode::Existing) {
                left.min(RESTART_ANSWER)
            } else {
                left
            };
            env.ops.start(m, wait).await.map(|_| ()).map_err(ops)
        }
        Step::StopEtcd => env
            .ops
            .stop(s.timeouts.stop_grace.min(left.mul_f32(0.7)))
            .await
            .map_err(ops),
        Step::ForceNewCluster { epoch } => {
            let proof = force_allowed(facts).map_err(|w| unsafe_(&format!("rule 1: {w}")))?;
            if !env.local.has_data() {
                return Err(unsafe_("no local data to force a cluster from"));
            }
            // The epoch is an intent until the live member list shows this
            // node alone (see `StateFile::pending_epoch`): a power loss before
            // the restart leaves the old lineage, which is still the truth.
            env.local
                .update_state(|st| {
                    st.pending_epoch = Some(*epoch);
                    st.departed = false;
                })
                .map_err(local)?;
            env.ops
                .restart_force_new_cluster(proof, left)
                .await
                .map(|_| ())
                .map_err(ops)
        }
        Step::ArchiveDataDir { reason } => {
            if matches!(facts.etcd, warden_failover::EtcdView::Running(_)) {
                return Err(unsafe_("etcd still runs on that data"));
            }
            if !env.local.has_data() {
                return Ok(());
            }
            let dest = env.local.archive(reason, now_unix()).map_err(local)?;
            tracing::warn!(archive = %dest.display(), %reason, "archived the etcd member directory (nothing deleted)");
            report.archived.push(dest);
            Ok(())
        }
        Step::AddLearner { node } => {
            let urls = s
                .nodes
                .iter()
                .find(|n| &n.name == node)
                .map(|n| n.peer_urls.clone())
                .ok_or_else(|| unsafe_(&format!("{node} is not a configured node")))?;
            retrying(left.min(MEMBERSHIP_RETRY), |d| {
                env.ops.add_learner(urls.clone(), d)
            })
            .await
            .map(|(m, _)| tracing::info!(node, id = m.id, "added as a learner"))
            .map_err(ops)
        }
        Step::PromoteLearner { id, node } => {
            retrying(left.min(MEMBERSHIP_RETRY), |d| env.ops.promote(*id, d))
                .await
                .map(|_| tracing::info!(node, id, "promoted to voter"))
                .map_err(ops)
        }
        Step::RemoveMember { id, node } => {
            retrying(left.min(MEMBERSHIP_RETRY), |d| env.ops.remove(*id, d))
                .await
                .map(|_| tracing::info!(node, id, "removed from the member list"))
                .map_err(ops)
        }
        Step::AcquireLeaveLock => {
            let holder = env
                .lock
                .acquire(me, attr_deadline)
                .await
                .map_err(|e| ops(OpsError::Etcd(e)))?;
            if holder == me {
                Ok(())
            } else {
                Err(StepError::LockHeld(holder))
            }
        }
        Step::ReleaseLeaveLock => env
            .lock
            .release(me, attr_deadline)
            .await
            .map_err(|e| ops(OpsError::Etcd(e))),
        Step::RecordDeparture => env
            .local
            .update_state(|st| st.departed = true)
            .map(|_| ())
            .map_err(local),
        Step::ClearDeparture => env
            .local
            .update_state(|st| st.departed = false)
            .map(|_| ())
            .map_err(local),
        Step::MarkInSync => env.local.mark_in_sync(&facts.boot_id).map_err(local),
        Step::ClearInSync => env.local.clear_in_sync().map_err(local),
    }
}

/// `initial-cluster` for joining: every named member as the cluster lists
/// it, and this node (the learner just added, not yet named).
pub fn initial_cluster(s: &Settings, members: &[warden_failover::MemberInfo]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for m in members {
        if m.name.is_empty() || m.name == s.node_name {
            continue;
        }
        if let Some(n) = s
            .nodes
            .iter()
            .find(|n| n.name == m.node || n.name == m.name)
        {
            for u in &n.peer_urls {
                parts.push(format!("{}={u}", m.name));
            }
        }
    }
    for u in &s.local_node().peer_urls {
        parts.push(format!("{}={u}", s.node_name));
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use warden_failover::{
        EtcdView, FenceEvent, FenceStatus, LocalData, LocalMarkers, NodeView, PacemakerView,
        ResourceState, Stamp, Trigger,
    };

    use super::*;
    use crate::etcd::Member;
    use crate::reconcile::pcmk::PcmkError;

    const CONF: &str = r#"
node_name = "a"
topology = "two-node"

[[nodes]]
name = "a"
peer_urls = ["http://127.0.0.1:12380"]
client_urls = ["http://127.0.0.1:12379"]

[[nodes]]
name = "b"
peer_urls = ["http://127.0.0.1:22380"]
client_urls = ["http://127.0.0.1:22379"]
"#;

    fn settings() -> Settings {
        crate::config::from_texts(&[("/c.toml".into(), CONF.to_string())]).unwrap()
    }

    /// Records every call; fails the ones told to.
    #[derive(Default)]
    struct Fake {
        calls: Mutex<Vec<String>>,
        /// Errors to return, in order, for membership calls.
        etcd_errors: Mutex<Vec<EtcdError>>,
        fail_attrs: bool,
        /// The state file's epoch as seen at the force (must be written first).
        state: Option<LocalPaths>,
        epoch_at_force: Mutex<Option<u64>>,
        /// The deadline each membership call was given.
        deadlines: Mutex<Vec<Duration>>,
    }

    impl Fake {
        fn log(&self, s: String) {
            self.calls.lock().unwrap().push(s);
        }
        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }
        fn next_err(&self) -> Result<(), OpsError> {
            let mut e = self.etcd_errors.lock().unwrap();
            if e.is_empty() {
                Ok(())
            } else {
                Err(OpsError::Etcd(e.remove(0)))
            }
        }
    }

    fn member(id: u64) -> Member {
        Member {
            id,
            name: String::new(),
            peer_urls: vec![],
            client_urls: vec![],
            is_learner: true,
        }
    }

    impl EtcdOps for Fake {
        async fn start(&self, mode: StartMode, _d: Duration) -> Result<u32, OpsError> {
            self.log(format!("start {mode:?}"));
            Ok(1)
        }
        async fn stop(&self, _g: Duration) -> Result<(), OpsError> {
            self.log("stop".into());
            Ok(())
        }
        async fn restart_force_new_cluster(
            &self,
            p: PeerDown,
            _d: Duration,
        ) -> Result<u32, OpsError> {
            if let Some(s) = &self.state {
                *self.epoch_at_force.lock().unwrap() = s.read_state().unwrap().pending_epoch;
            }
            self.log(format!("force {}", p.node));
            Ok(1)
        }
        async fn add_learner(
            &self,
            urls: Vec<String>,
            _d: Duration,
        ) -> Result<(Member, Vec<Member>), OpsError> {
            self.log(format!("add {urls:?}"));
            self.next_err()?;
            Ok((member(7), vec![member(7)]))
        }
        async fn promote(&self, id: u64, d: Duration) -> Result<Vec<Member>, OpsError> {
            self.log(format!("promote {id}"));
            self.deadlines.lock().unwrap().push(d);
            self.next_err()?;
            Ok(vec![])
        }
        async fn remove(&self, id: u64, d: Duration) -> Result<Vec<Member>, OpsError> {
            self.log(format!("remove {id}"));
            self.deadlines.lock().unwrap().push(d);
            self.next_err()?;
            Ok(vec![])
        }
    }

    impl Pacemaker for Fake {
        async fn crm_mon(&self, _d: Duration) -> Result<crm_xml::CrmMon, PcmkError> {
            unreachable!("the executor never reads crm_mon")
        }
        async fn get_attr(
            &self,
            _n: &str,
            _a: &str,
            _d: Duration,
        ) -> Result<Option<String>, PcmkError> {
            Ok(None)
        }
        async fn set_attr(&self, n: &str, a: &str, v: &str, _d: Duration) -> Result<(), PcmkError> {
            self.log(format!("set {n} {a} {v}"));
            if self.fail_attrs {
                return Err(PcmkError::Failed {
                    tool: "crm_attribute",
                    code: Some(1),
                    message: "cib not connected".into(),
                });
            }
            Ok(())
        }
        async fn delete_attr(&self, n: &str, a: &str, _d: Duration) -> Result<(), PcmkError> {
            self.log(format!("delete {n} {a}"));
            Ok(())
        }
    }

    impl LeaveLock for Fake {
        async fn acquire(&self, node: &str, _d: Duration) -> Result<String, EtcdError> {
            self.log(format!("lock {node}"));
            Ok("b".into())
        }
        async fn release(&self, node: &str, _d: Duration) -> Result<(), EtcdError> {
            self.log(format!("unlock {node}"));
            Ok(())
        }
    }

    fn node(name: &str, online: bool) -> NodeView {
        NodeView {
            name: name.into(),
            online,
            unclean: false,
            expected_up: online,
            shutdown: false,
            standby: false,
            last_seen: Some(Stamp(100)),
            etcd: if online {
                ResourceState::Started
            } else {
                ResourceState::Unknown
            },
            record: None,
            claim: None,
        }
    }

    /// Node a alone with its data and the in-sync marker; b lost.
    fn facts(b_fenced: bool) -> Facts {
        let mut b = node("b", false);
        b.unclean = !b_fenced;
        b.expected_up = true;
        Facts {
            node: "a".into(),
            boot_id: "boot-a".into(),
            topology: Topology::TwoNode,
            trigger: Trigger::Reconcile,
            notify: None,
            pacemaker: PacemakerView {
                quorate: true,
                nodes: vec![node("a", true), b],
                fence_history: vec![],
            },
            etcd: EtcdView::NotRunning,
            cluster: None,
            data: LocalData {
                exists: true,
                ..Default::default()
            },
            local: LocalMarkers {
                in_sync_boot: Some("boot-a".into()),
            },
            alerts: if b_fenced {
                vec![FenceEvent {
                    target: "b".into(),
                    action: warden_failover::FenceAction::Reboot,
                    status: FenceStatus::Success,
                    completed: Some(Stamp(200)),
                }]
            } else {
                vec![]
            },
        }
    }

    fn paths(t: &std::path::Path) -> LocalPaths {
        LocalPaths {
            data_dir: t.join("data"),
            state_file: t.join("state/failover.json"),
            run_dir: t.join("run"),
            archive_dir: t.join("data.archive"),
        }
    }

    async fn run(fake: &Fake, p: &LocalPaths, f: &Facts, steps: &[Step]) -> ExecReport {
        let s = settings();
        let env = Env {
            ops: fake,
            pcmk: fake,
            lock: fake,
            local: p,
            settings: &s,
        };
        execute(&env, f, steps, Duration::from_secs(10)).await
    }

    fn with_data(t: &std::path::Path) -> LocalPaths {
        let p = paths(t);
        std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
        std::fs::write(p.member_dir().join("snap/db"), b"db").unwrap();
        p
    }

    #[tokio::test]
    async fn never_bootstraps_over_a_state_file_that_names_a_cluster() {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        p.update_state(|s| {
            s.formed = true;
            s.cluster_id = Some(0x1c3e);
            s.member_id = Some(7);
        })
        .unwrap();
        let fake = Fake::default();
        let mut f = facts(true);
        f.data.exists = false;
        let r = run(&fake, &p, &f, &[Step::StartEtcd { mode: Mode::New }]).await;
        let why = r.failed.expect("refused").1;
        assert!(
            why.contains("1c3e") && why.contains("empty cluster"),
            "{why}"
        );
        assert!(fake.calls().is_empty());
        // Without a history, a bootstrap gets the fresh token, recorded first.
        let t2 = tempfile::tempdir().unwrap();
        let p2 = paths(t2.path());
        let r = run(&fake, &p2, &f, &[Step::StartEtcd { mode: Mode::New }]).await;
        assert!(r.failed.is_none(), "{:?}", r.failed);
        let token = p2.read_state().unwrap().bootstrap_token.expect("recorded");
        assert_eq!(token, warden_failover::decide::bootstrap_token(&f));
        assert!(token.starts_with("etcd-warden:"), "{token}");
    }

    #[tokio::test]
    async fn force_needs_pacemakers_proof_even_if_decided() {
        let t = tempfile::tempdir().unwrap();
        let p = with_data(t.path());
        let fake = Fake::default();
        // b is lost but not fenced: no proof, so no force, whatever was decided.
        let r = run(
            &fake,
            &p,
            &facts(false),
            &[Step::ForceNewCluster { epoch: 1 }],
        )
        .await;
        let (_, why) = r.failed.unwrap();
        assert!(
            why.contains("rule 1") && why.contains("not confirmed that b is down"),
            "{why}"
        );
        assert!(fake.calls().is_empty());
        // Without the in-sync marker of this boot: no force either.
        let mut f = facts(true);
        f.local.in_sync_boot = Some("an-earlier-boot".into());
        let r = run(&fake, &p, &f, &[Step::ForceNewCluster { epoch: 1 }]).await;
        assert!(r.failed.unwrap().1.contains("in-sync"));
        // HA never forces.
        let mut f = facts(true);
        f.topology = Topology::Ha;
        let r = run(&fake, &p, &f, &[Step::ForceNewCluster { epoch: 1 }]).await;
        assert!(r.failed.is_some());
        assert!(fake.calls().is_empty());
    }

    #[tokio::test]
    async fn force_records_the_epoch_first() {
        let t = tempfile::tempdir().unwrap();
        let p = with_data(t.path());
        let fake = Fake {
            state: Some(p.clone()),
            ..Default::default()
        };
        let r = run(
            &fake,
            &p,
            &facts(true),
            &[Step::ForceNewCluster { epoch: 4 }],
        )
        .await;
        assert!(r.failed.is_none(), "{:?}", r.failed);
        assert_eq!(fake.calls(), vec!["force b"]);
        // On disk before the restart, as an intent: the epoch itself changes
        // only once the live member list shows this node alone.
        assert_eq!(*fake.epoch_at_force.lock().unwrap(), Some(4));
        assert_eq!(p.read_state().unwrap().epoch, 0);
    }

    #[tokio::test]
    async fn steps_stop_at_the_first_failure() {
        let t = tempfile::tempdir().unwrap();
        let p = with_data(t.path());
        let fake = Fake {
            fail_attrs: true,
            ..Default::default()
        };
        let steps = [
            Step::SetClaim { epoch: 1 },
            Step::ClearInSync,
            Step::StopEtcd,
        ];
        p.update_state(|s| {
            s.cluster_id = Some(2);
            s.member_id = Some(1);
        })
        .unwrap();
        p.mark_in_sync("boot-a").unwrap();
        let r = run(&fake, &p, &facts(true), &steps).await;
        assert_eq!(r.done, vec![]);
        assert_eq!(r.failed.as_ref().unwrap().0, Step::SetClaim { epoch: 1 });
        assert_eq!(fake.calls().len(), 1);
        // The marker was not touched: the step after the failure never ran.
        assert_eq!(p.in_sync().as_deref(), Some("boot-a"));
        let ok = Fake::default();
        let r = run(&ok, &p, &facts(true), &steps).await;
        assert_eq!(r.done.len(), 3);
        assert!(p.in_sync().is_none());
        assert_eq!(ok.calls()[1], "stop");
    }

    #[tokio::test]
    async fn never_starts_over_existing_data_and_archives_instead_of_deleting() {
        let t = tempfile::tempdir().unwrap();
        let p = with_data(t.path());
        let fake = Fake::default();
        for mode in [Mode::New, Mode::Join { epoch: 2 }] {
            let r = run(&fake, &p, &facts(true), &[Step::StartEtcd { mode }]).await;
            assert!(r.failed.unwrap().1.contains("rule 3"));
        }
        assert!(fake.calls().is_empty());
        // Archiving while etcd runs on the data is refused too.
        let mut f = facts(true);
        f.etcd = EtcdView::Running(warden_failover::LiveEtcd {
            member_id: 1,
            cluster_id: 2,
            is_learner: false,
            has_leader: false,
            is_leader: false,
            linearizable_ok: false,
            members: vec![],
            leave_lock: None,
            position: Default::default(),
        });
        let archive = Step::ArchiveDataDir {
            reason: "stale".into(),
        };
        let r = run(&fake, &p, &f, std::slice::from_ref(&archive)).await;
        assert!(r.failed.is_some());
        assert!(p.has_data());
        let r = run(&fake, &p, &facts(true), &[archive]).await;
        assert!(r.failed.is_none());
        assert!(!p.has_data());
        let dest = &r.archived[0];
        assert_eq!(std::fs::read(dest.join("member/snap/db")).unwrap(), b"db");
        assert!(dest.join("db.sha256").exists());
    }

    #[tokio::test]
    async fn a_join_records_the_learner_it_starts_as_before_etcd_runs() {
        // The state file still names the member this node was before its
        // data was archived: the join must replace both ids, or a stop before
        // the first live look makes the next start archive the new data.
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        p.write_state(&super::super::local::StateFile {
            epoch: 1,
            cluster_id: Some(5),
            member_id: Some(99),
            formed: true,
            ..Default::default()
        })
        .unwrap();
        let mut f = facts(true);
        let member = |id: u64, node: &str, is_learner: bool| warden_failover::MemberInfo {
            id,
            name: if is_learner {
                String::new()
            } else {
                node.into()
            },
            node: node.into(),
            is_learner,
            in_sync: !is_learner,
        };
        f.cluster = Some(warden_failover::ClusterView {
            cluster_id: 6,
            epoch: 3,
            members: vec![member(11, "b", false), member(12, "a", true)],
            leave_lock: None,
        });
        f.data.exists = false;
        let fake = Fake::default();
        let r = run(
            &fake,
            &p,
            &f,
            &[Step::StartEtcd {
                mode: Mode::Join { epoch: 3 },
            }],
        )
        .await;
        assert!(r.failed.is_none(), "{:?}", r.failed);
        assert_eq!(fake.calls().len(), 1, "{:?}", fake.calls());
        let st = p.read_state().unwrap();
        assert_eq!(
            (st.epoch, st.cluster_id, st.member_id, st.formed),
            (3, Some(6), Some(12), false)
        );
    }

    #[tokio::test]
    async fn membership_changes_retry_through_unhealthy_cluster() {
        let t = tempfile::tempdir().unwrap();
        let p = with_data(t.path());
        let fake = Fake::default();
        fake.etcd_errors.lock().unwrap().extend([
            EtcdError::Unavailable("etcdserver: unhealthy cluster".into()),
            EtcdError::FailedPrecondition(
                "can only promote a learner member which is in sync with leader".into(),
            ),
        ]);
        let r = run(
            &fake,
            &p,
            &facts(true),
            &[Step::PromoteLearner {
                id: 7,
                node: "b".into(),
            }],
        )
        .await;
        assert!(r.failed.is_none(), "{:?}", r.failed);
        assert_eq!(fake.calls(), vec!["promote 7"; 3]);
        // A permanent error is not retried.
        fake.etcd_errors
            .lock()
            .unwrap()
            .push(EtcdError::NotFound("member".into()));
        let r = run(
            &fake,
            &p,
            &facts(true),
            &[Step::RemoveMember {
                id: 9,
                node: "b".into(),
            }],
        )
        .await;
        assert!(r.failed.is_some());
        assert_eq!(fake.calls().len(), 4);
    }

    #[tokio::test]
    async fn a_membership_call_that_times_out_is_asked_again_within_the_budget() {
        // etcd 3.5: a removal while a promotion is pending may time out
        // instead of answering; that is not an answer, so it is retried.
        let t = tempfile::tempdir().unwrap();
        let p = with_data(t.path());
        let fake = Fake::default();
        fake.etcd_errors.lock().unwrap().extend([
            EtcdError::Timeout(Duration::from_secs(3)),
            EtcdError::Timeout(Duration::from_secs(3)),
        ]);
        let r = run(
            &fake,
            &p,
            &facts(true),
            &[Step::RemoveMember {
                id: 9,
                node: "b".into(),
            }],
        )
        .await;
        assert!(r.failed.is_none(), "{:?}", r.failed);
        assert_eq!(fake.calls(), vec!["remove 9"; 3]);
        // Each attempt is short enough to leave room for the next one.
        let d = fake.deadlines.lock().unwrap().clone();
        assert!(
            d.iter().all(|d| *d <= MEMBERSHIP_ATTEMPT),
            "attempt deadlines {d:?}"
        );
    }

    #[tokio::test]
    async fn leave_lock_held_elsewhere_fails_the_step_and_adds_use_the_configured_url() {
        let t = tempfile::tempdir().unwrap();
        let p = with_data(t.path());
        let fake = Fake::default();
        let r = run(
            &fake,
            &p,
            &facts(true),
            &[Step::AcquireLeaveLock, Step::RecordDeparture],
        )
        .await;
        assert!(r.failed.unwrap().1.contains("held by b"));
        assert!(!p.read_state().unwrap().departed);
        let r = run(
            &fake,
            &p,
            &facts(true),
            &[Step::AddLearner { node: "b".into() }],
        )
        .await;
        assert!(r.failed.is_none());
        assert!(
            fake.calls()
                .contains(&"add [\"http://127.0.0.1:22380\"]".to_string())
        );
    }

    #[test]
    fn join_lists_the_cluster_and_this_node() {
        let s = settings();
        let members = vec![
            warden_failover::MemberInfo {
                id: 1,
                name: "b".into(),
                node: "b".into(),
                is_learner: false,
                in_sync: true,
            },
            warden_failover::MemberInfo {
                id: 2,
                name: String::new(),
                node: "a".into(),
                is_learner: true,
                in_sync: false,
            },
        ];
        assert_eq!(
            initial_cluster(&s, &members),
            "b=http://127.0.0.1:22380,a=http://127.0.0.1:12380"
        );
    }
}
