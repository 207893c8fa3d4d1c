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
    decide::{
        bootstrap_token, expected_record, peer_holds_no_data, peer_is_blank, peer_removed_itself,
    },
    peer_down_proof,
};

use super::local::LocalPaths;
use super::pcmk::{CLAIM_ATTR, Pacemaker, RECORD_ATTR};
use super::ports::{EtcdOps, OpsError, PeerDown, Ports, Supervisor};
use super::revision_step;
use crate::config::Settings;
use crate::etcd::EtcdError;
use crate::etcd_conf::StartMode;
use crate::supervise::ProcState;

/// A step that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
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
    /// etcd was started and runs, but had not answered when the short
    /// wait of a restart or a join ended: expected while a learner receives
    /// a large snapshot or a restarted member waits for its majority.
    #[error(
        "{step}: etcd runs but did not answer within {waited:?}; deciding again on what it answers next"
    )]
    NotAnsweringYet {
        /// The step.
        step: String,
        /// How long the step waited.
        waited: Duration,
    },
}

/// What was done.
#[derive(Debug, Default)]
pub struct ExecReport {
    /// Steps carried out, in order.
    pub(crate) done: Vec<Step>,
    /// The step that failed, and why; later steps were not tried.
    pub failed: Option<(Step, String)>,
    /// Archive directories created.
    pub(crate) archived: Vec<PathBuf>,
    /// Their checksums, being written on threads of their own (see
    /// [`super::local::record_checksum`]); nothing waits for them but tests.
    pub checksums: Vec<std::thread::JoinHandle<()>>,
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
/// (never on a guess): `None` unless the topology is two-node, each peer is proven
/// down (or, online, runs no member that could vote: its data is gone, or
/// its own removal is committed) and this node holds the in-sync marker
/// of this boot.
pub(crate) fn force_allowed(facts: &Facts) -> Result<PeerDown, String> {
    if facts.topology != Topology::TwoNode {
        return Err("the topology is not two-node: a new cluster is never forced".into());
    }
    let mut proofs = Vec::new();
    for peer in facts.others() {
        // Online, but its daemon says it left and its own removal is
        // committed, in the cluster and at the epoch of the member running
        // here: its member never votes again.
        let removed = match &facts.etcd {
            warden_failover::EtcdView::Running(l) => peer_removed_itself(facts, peer, l.cluster_id),
            warden_failover::EtcdView::NotRunning => false,
        };
        let evidence = match peer_down_proof(facts, peer) {
            Some(p) => format!("{p:?}"),
            // Online, but its daemon says its data is gone and names no
            // newer epoch: no other member runs.
            None if peer_holds_no_data(facts, peer) => {
                "online without data (its state file names no newer epoch)".into()
            }
            None if removed => "online, left the member list with its removal committed".into(),
            // Online with neither data nor a state file (a replaced
            // machine): no member runs there.
            None if peer_is_blank(facts, peer) => {
                "online with neither data nor a state file".into()
            }
            None => {
                return Err(format!(
                    "Pacemaker has not confirmed that {} is down",
                    peer.name
                ));
            }
        };
        // Completeness needs the marker, whatever the proof.
        if !facts.in_sync_this_boot() {
            return Err("this node does not hold the in-sync marker of this boot".into());
        }
        proofs.push((peer.name.clone(), evidence));
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
/// How long a leadership transfer may take: etcd waits for the target to
/// catch up, then gives up after an election timeout; writes pause while it
/// runs, so a transfer that cannot finish soon is abandoned, not retried.
const LEADER_TRANSFER: Duration = Duration::from_secs(3);

/// How fast an archive's checksum reads the archived database: a second
/// per 64 MiB, a small share of one core and of the disk.
const CHECKSUM_PACE: u64 = 64 << 20;

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

/// Whether the local etcd process exists (as its supervisor sees it),
/// answering or not.
async fn etcd_runs<P, E, S: Supervisor>(ports: &Ports<'_, P, E, S>) -> bool {
    ports.supervisor.state().await.pid().is_some()
}

/// Carry out `steps` (decided from `facts`) in order within `deadline`.
pub async fn execute<P: Pacemaker, E: EtcdOps, S: Supervisor>(
    ports: &Ports<'_, P, E, S>,
    local: &LocalPaths,
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
        match one(ports, local, facts, step, left, &mut report).await {
            Ok(()) => report.done.push(step.clone()),
            Err(e) => {
                // A start still waiting for etcd's first answer is expected,
                // not a failure: it is said at info level.
                if matches!(e, StepError::NotAnsweringYet { .. }) {
                    tracing::info!(step = %name(step), "{e}");
                } else {
                    tracing::warn!(step = %name(step), error = %e, "step failed; deciding again");
                }
                report.failed = Some((step.clone(), e.to_string()));
                break;
            }
        }
    }
    report
}

async fn one<P: Pacemaker, E: EtcdOps, S: Supervisor>(
    ports: &Ports<'_, P, E, S>,
    paths: &LocalPaths,
    facts: &Facts,
    step: &Step,
    left: Duration,
    report: &mut ExecReport,
) -> Result<(), StepError> {
    let s = ports.settings;
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
            ports
                .pacemaker
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
            ports
                .pacemaker
                .set_attr(me, CLAIM_ATTR, &v, attr_deadline)
                .await
                .map_err(pcmk)
        }
        // Only ever this node's own failure record. Bookkeeping: a cleanup
        // that fails must not hold up the steps after it (the next pass
        // sees the record still there and tries again).
        Step::ClearFailedStart { resource } => {
            match ports
                .pacemaker
                .clear_failed_start(resource, me, attr_deadline)
                .await
            {
                Ok(()) => tracing::info!(
                    resource = %resource,
                    "cleared a start of etcd that failed while no daemon answered: Pacemaker may start it again"
                ),
                Err(e) => tracing::warn!(
                    resource = %resource,
                    error = %e,
                    "cannot clear a start of etcd that failed while no daemon answered"
                ),
            }
            Ok(())
        }
        // Only ever this node's own claim: the attribute of `me`.
        Step::ClearClaim => ports
            .pacemaker
            .delete_attr(me, CLAIM_ATTR, attr_deadline)
            .await
            .map_err(pcmk),
        Step::StartEtcd { mode } => {
            let has = paths.has_data();
            let over = |what: &str| {
                unsafe_(&format!(
                    "{} already holds a member: a {what} would start over its data",
                    paths.member_dir().display()
                ))
            };
            let m = match mode {
                Mode::New if has => return Err(over("bootstrap")),
                Mode::New => {
                    // Read again here, not from the facts: a bootstrap over a
                    // history replaces data that existed with an empty
                    // cluster.
                    let st = paths.read_state().map_err(local)?;
                    if st.had_cluster() {
                        return Err(unsafe_(&format!(
                            "the state file {} says this node's data was part of cluster {} (epoch {}): a bootstrap would replace it with an empty cluster",
                            paths.state_file.display(),
                            st.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
                            st.epoch
                        )));
                    }
                    let token = bootstrap_token(facts);
                    paths
                        .update_state(|st| st.bootstrap_token = Some(token.clone()))
                        .map_err(local)?;
                    tracing::warn!(%token, "bootstrapping a new etcd cluster with a fresh cluster token");
                    StartMode::Bootstrap { token }
                }
                Mode::Join { .. } if has => return Err(over("join")),
                Mode::Reseed if has => return Err(over("reseed")),
                Mode::Reseed => {
                    let st = paths.read_state().map_err(local)?;
                    let (Some(member), Some(cluster)) = (st.member_id, st.cluster_id) else {
                        return Err(unsafe_(
                            "the state file names no member and cluster to restart",
                        ));
                    };
                    // Until a quorate look lists this member as a voter, its
                    // data may be anything from empty to whole (the snapshot
                    // may still be on its way): empty voters make the record
                    // say it holds only a learner's data, so a peer whose own
                    // data goes missing meanwhile never takes this one for
                    // the holder of the writes.
                    paths
                        .update_state(|st| {
                            st.voters = Vec::new();
                            st.added_by.clear();
                            st.joining = false;
                            st.reseeding = true;
                            st.pending_epoch = None;
                        })
                        .map_err(local)?;
                    // The peer's member serves no client request without
                    // quorum, only its member list on the peer URL, which
                    // etcd itself reads at this start: it takes the id of
                    // the member listed at this node's peer URL and refuses
                    // to start when the list does not match the configured
                    // nodes.
                    tracing::warn!(
                        member = format!("{member:x}"),
                        cluster = format!("{cluster:x}"),
                        "restarting this node's member on an empty data directory; the peer's member sends it the data"
                    );
                    StartMode::JoinExisting {
                        initial_cluster: crate::etcd_conf::every_node(s),
                    }
                }
                Mode::Existing if !has => return Err(unsafe_("no data to restart from")),
                Mode::Existing => StartMode::Normal,
                Mode::Join { epoch } => {
                    let cluster = facts
                        .cluster
                        .as_ref()
                        .ok_or_else(|| unsafe_("no quorate cluster answered to join"))?;
                    // The data this start creates belongs to the member the
                    // cluster lists for this node, in this cluster: the
                    // learner added for it, or the voter of a bootstrap it
                    // was late for, which never ran. Recorded
                    // before etcd runs: otherwise a stop before the first
                    // live look left the old member's ids here, the next
                    // start archived the new data as stale and joined again,
                    // empty, as a member the leader knows has entries (etcd
                    // panics: "tocommit(…) is out of range").
                    let joined = cluster
                        .members
                        .iter()
                        .find(|m| m.node == s.node_name && (m.is_learner || !m.started))
                        .map(|m| m.id);
                    paths
                        .update_state(|st| {
                            st.epoch = *epoch;
                            st.pending_epoch = None;
                            st.epoch_unknown = false;
                            st.bootstrap_token = None;
                            st.joining = true;
                            st.departed = false;
                            st.formed = false;
                            st.cluster_id = Some(cluster.cluster_id);
                            st.member_id = joined;
                            // The joined data has been a voter in no
                            // membership yet: until the first look as a
                            // quorate voter lists this node, the record
                            // says it holds only a learner's data, which a
                            // peer whose own newer data is gone must not
                            // wait on (a directory lost without an archive
                            // keeps the old voters here otherwise).
                            st.voters = Vec::new();
                            // Everything the learner receives comes from
                            // these voters until it is promoted.
                            st.added_by = cluster
                                .members
                                .iter()
                                .filter(|m| !m.is_learner)
                                .filter(|m| m.node != s.node_name)
                                .map(|m| (m.node.clone(), m.id))
                                .collect();
                        })
                        .map_err(local)?;
                    crate::kill_point::reached("join-recorded");
                    StartMode::JoinExisting {
                        initial_cluster: initial_cluster(s, &cluster.members),
                    }
                }
            };
            // A member restarted while the majority is down answers nothing
            // until the majority is back (in HA mode it may wait for the
            // very start Pacemaker holds back while this one is in flight;
            // in a two-node pair after a total outage, for a peer whose data
            // is gone and that will never start a member). A joining learner
            // answers only once the leader has sent it the data: never, if
            // the leader's node lost power meanwhile, and only after the
            // whole snapshot of a large database. Either way, wait only
            // briefly; the next round decides on "running, not answering",
            // and a start does not hold Pacemaker's transition (and so the
            // peer's own start) up.
            let short = matches!(mode, Mode::Existing | Mode::Join { .. } | Mode::Reseed);
            let wait = if short {
                left.min(RESTART_ANSWER)
            } else {
                left
            };
            let owed = match m {
                StartMode::Normal => paths.read_state().map_err(local)?.revision_bump_owed,
                _ => None,
            };
            if let Some(at_risk) = owed {
                tracing::warn!(
                    at_risk,
                    "a forced restart of this data did not finish moving the revision on; starting with clients held off"
                );
                ports
                    .supervisor
                    .start_moving_revision(at_risk, left)
                    .await
                    .map_err(ops)?;
                return revision_step::clear(paths).map_err(local);
            }
            let Err(e) = ports.supervisor.start(m, wait).await else {
                return Ok(());
            };
            if short && etcd_runs(ports).await {
                Err(StepError::NotAnsweringYet {
                    step: sname.clone(),
                    waited: wait,
                })
            } else {
                Err(ops(e))
            }
        }
        Step::StopEtcd => ports
            .supervisor
            .stop(s.timeouts.stop_grace.min(left.mul_f32(0.7)))
            .await
            .map(|_| ())
            .map_err(ops),
        Step::ForceNewCluster { epoch } => {
            let proof = force_allowed(facts)
                .map_err(|w| unsafe_(&format!("a forced restart is not proven safe: {w}")))?;
            if !paths.has_data() {
                return Err(unsafe_("no local data to force a cluster from"));
            }
            // The epoch is an intent until the live member list shows this
            // node alone (see `StateFile::pending_epoch`): a power loss before
            // the restart leaves the old lineage, which is still the truth.
            paths
                .update_state(|st| {
                    st.pending_epoch = Some(*epoch);
                    st.departed = false;
                })
                .map_err(local)?;
            crate::kill_point::reached("force-intent-recorded");
            // Stop etcd so that its log is final, keep its tail for an
            // operator, read what the force will drop, then force.
            let started = std::time::Instant::now();
            let running = matches!(ports.supervisor.state().await, ProcState::Running { .. });
            let graceful = ports
                .supervisor
                .stop(s.timeouts.stop_grace.min(left / 2))
                .await
                .map_err(ops)?;
            keep_wal_tail(paths, *epoch, started);
            let at_risk =
                revision_step::force_at_risk(paths, running && graceful).map_err(local)?;
            if at_risk > 0 {
                paths
                    .update_state(|st| st.revision_bump_owed = Some(at_risk))
                    .map_err(local)?;
            }
            crate::kill_point::reached("force-stopped");
            let left = left.saturating_sub(started.elapsed());
            ports
                .supervisor
                .restart_force_new_cluster(proof, at_risk, left)
                .await
                .map_err(ops)?;
            crate::kill_point::reached("force-restarted");
            revision_step::clear(paths).map_err(local)
        }
        Step::ArchiveDataDir { reason } => {
            if matches!(facts.etcd, warden_failover::EtcdView::Running(_)) {
                return Err(unsafe_("etcd still runs on that data"));
            }
            if !paths.has_data() {
                return Ok(());
            }
            let dest = paths.archive(reason, now_unix()).map_err(local)?;
            tracing::warn!(archive = %dest.display(), %reason, "archived the etcd member directory (nothing deleted)");
            crate::kill_point::reached("archive-done");
            // The checksum reads the whole database; the rejoin goes on
            // meanwhile (the moved data is no longer anyone's to write),
            // and the read is paced so that it leaves the disk and the CPU
            // to the snapshot transfer that usually follows.
            let at = dest.clone();
            let sum = move || {
                let started = std::time::Instant::now();
                match super::local::record_checksum(&at, Some(CHECKSUM_PACE)) {
                    Ok(()) => tracing::info!(
                        archive = %at.display(),
                        took_ms = started.elapsed().as_millis() as u64,
                        "recorded the archived database's checksum"
                    ),
                    Err(e) => {
                        tracing::warn!(archive = %at.display(), error = %e, "could not record the archived database's checksum")
                    }
                }
            };
            // A thread of its own, not the runtime's blocking pool: the
            // daemon's exit never waits for it (an archive whose checksum
            // was cut off is still whole, and the runbook says so).
            match std::thread::Builder::new()
                .name("archive-checksum".into())
                .spawn(sum.clone())
            {
                Ok(h) => report.checksums.push(h),
                Err(e) => {
                    tracing::warn!(error = %e, "no thread for the archive's checksum; computing it now");
                    sum();
                }
            }
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
                ports.etcd.add_learner(urls.clone(), d)
            })
            .await
            .map(|(m, _)| {
                tracing::info!(node, id = m.id, "added as a learner");
                crate::kill_point::reached("learner-added");
            })
            .map_err(ops)
        }
        Step::PromoteLearner { id, node } => {
            retrying(left.min(MEMBERSHIP_RETRY), |d| ports.etcd.promote(*id, d))
                .await
                .map(|_| tracing::info!(node, id, "promoted to voter"))
                .map_err(ops)
        }
        Step::RemoveMember { id, node } => {
            let own = node == me;
            retrying(left.min(MEMBERSHIP_RETRY), |d| async move {
                if !own {
                    return ports.etcd.remove(*id, d).await;
                }
                // A member stops once it has applied its own removal (about
                // a second later, or at once when the peer tells it first),
                // sometimes before its answer is out, and a call in flight
                // then waits for its whole deadline. Once etcd has stopped
                // no answer can come: whether the removal took effect is
                // read from the cluster on the next look (see `gather`).
                // Biased, so that a stopped etcd is not sent the request.
                let etcd_gone = async {
                    while etcd_runs(ports).await {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                };
                tokio::select! {
                    biased;
                    () = etcd_gone => Err(OpsError::Supervise(
                        "etcd stopped before answering this node's own removal; the next look asks the cluster whether it took effect".into(),
                    )),
                    answer = ports.etcd.remove(*id, d) => answer,
                }
            })
            .await
            .map(|_| tracing::info!(node, id, "removed from the member list"))
            .map_err(ops)?;
            // etcd answers a removal once it has applied it, so it is
            // committed: the data's last membership no longer lists this
            // node. Written down now, because this member exits as soon as
            // it has applied its own removal, before a live look could see
            // the new membership; the record's `removed` rests on it (the
            // peer may not have persisted that commit, see `decide`).
            if node == me {
                paths
                    .update_state(|st| st.voters.retain(|v| v != me))
                    .map_err(local)?;
            }
            Ok(())
        }
        Step::TransferLeadership { id, node } => {
            let started = std::time::Instant::now();
            ports
                .etcd
                .move_leader(*id, left.min(LEADER_TRANSFER))
                .await
                .map(|_| {
                    tracing::info!(
                        node,
                        id,
                        took_ms = started.elapsed().as_millis() as u64,
                        "leadership handed to the node that wins fence races"
                    )
                })
                .map_err(ops)
        }
        Step::AcquireLeaveLock => {
            let holder = ports
                .etcd
                .acquire_leave_lock(me, attr_deadline)
                .await
                .map_err(|e| ops(OpsError::Etcd(e)))?;
            if holder == me {
                Ok(())
            } else {
                Err(StepError::LockHeld(holder))
            }
        }
        Step::ReleaseLeaveLock => ports
            .etcd
            .release_leave_lock(me, attr_deadline)
            .await
            .map_err(|e| ops(OpsError::Etcd(e))),
        Step::RecordDeparture => paths
            .update_state(|st| st.departed = true)
            .map(|_| ())
            .map_err(local),
        Step::ClearDeparture => paths
            .update_state(|st| st.departed = false)
            .map(|_| ())
            .map_err(local),
        Step::MarkInSync => paths.mark_in_sync(&facts.boot_id).map_err(local),
        Step::ClearInSync => paths.clear_in_sync().map_err(local),
    }
}

/// `initial-cluster` for joining: every named member as the cluster lists
/// it, and this node (the learner just added, not yet named).
pub(crate) fn initial_cluster(s: &Settings, members: &[warden_failover::MemberInfo]) -> String {
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
mod tests;

/// Keep the WAL's tail beside the archives before a forced restart (see
/// `wal_tail`). Evidence, not a condition: a failure is logged.
fn keep_wal_tail(paths: &LocalPaths, epoch: u64, started: std::time::Instant) {
    match super::wal_tail::keep(paths, epoch, now_unix()) {
        Ok(Some(dir)) => tracing::info!(
            kept = %dir.display(),
            took_ms = started.elapsed().as_millis() as u64,
            "kept the write-ahead log's tail before the forced restart"
        ),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "could not keep the write-ahead log's tail"),
    }
}
