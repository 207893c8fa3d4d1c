//! Forcing a new cluster from this node's data, only with Pacemaker's proof
//! that every other node is down (the split-brain rule), checked here
//! again.

use std::time::Instant;

use warden_failover::{
    EtcdView, Facts, Topology,
    decide::{peer_holds_no_data, peer_is_blank, peer_removed_itself},
    peer_down_proof,
};

use super::{Ctx, Fault};
use crate::clock::now_unix;
use crate::reconcile::local::LocalPaths;
use crate::reconcile::ports::{PeerDown, Supervisor};
use crate::reconcile::{revision_step, wal_tail};
use crate::supervise::ProcState;

/// Pacemaker's proof that every other node is down, checked here again
/// (never on a guess): an error saying what is missing unless the topology
/// is two-node, each peer is proven down (or, online, runs no member that
/// could vote: its data is gone, or its own removal is committed) and this
/// node holds the in-sync marker of this boot.
pub(super) fn force_allowed(facts: &Facts) -> Result<PeerDown, String> {
    if facts.topology != Topology::TwoNode {
        return Err("the topology is not two-node: a new cluster is never forced".into());
    }
    let mut proofs = Vec::new();
    for peer in facts.others() {
        let evidence = peer_evidence(facts, peer)?;
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

/// Why `peer` runs no member that could vote, for the log; an error when
/// Pacemaker has not confirmed it.
fn peer_evidence(facts: &Facts, peer: &warden_failover::NodeView) -> Result<String, String> {
    // Online, but its daemon says it left and its own removal is committed,
    // in the cluster and at the epoch of the member running here: its
    // member never votes again.
    let removed = match &facts.etcd {
        EtcdView::Running(l) => peer_removed_itself(facts, peer, l.cluster_id),
        EtcdView::NotRunning => false,
    };
    match peer_down_proof(facts, peer) {
        Some(p) => Ok(format!("{p:?}")),
        // Online, but its daemon says its data is gone and names no newer
        // epoch: no other member runs.
        None if peer_holds_no_data(facts, peer) => {
            Ok("online without data (its state file names no newer epoch)".into())
        }
        None if removed => Ok("online, left the member list with its removal committed".into()),
        // Online with neither data nor a state file (a replaced machine):
        // no member runs there.
        None if peer_is_blank(facts, peer) => {
            Ok("online with neither data nor a state file".into())
        }
        None => Err(format!(
            "Pacemaker has not confirmed that {} is down",
            peer.name
        )),
    }
}

/// Force a new cluster at `epoch` from this node's data, once
/// [`force_allowed`] finds the proof and the data is there.
pub(super) async fn force_new_cluster<P: ?Sized, E, S: Supervisor>(
    cx: &Ctx<'_, P, E, S>,
    epoch: u64,
) -> Result<(), Fault> {
    let proof = force_allowed(cx.facts)
        .map_err(|w| Fault::refused(format!("a forced restart is not proven safe: {w}")))?;
    if !cx.paths.has_data() {
        return Err(Fault::refused("no local data to force a cluster from"));
    }
    // The epoch is an intent until the live member list shows this node
    // alone (see `StateFile::pending_epoch`): a power loss before the
    // restart leaves the old lineage, which is still the truth.
    cx.paths.update_state(|st| {
        st.pending_epoch = Some(epoch);
        st.departed = false;
    })?;
    crate::kill_point::reached("force-intent-recorded");
    let started = Instant::now();
    let at_risk = stop_for_force(cx, epoch, started).await?;
    crate::kill_point::reached("force-stopped");
    let left = cx.left.saturating_sub(started.elapsed());
    cx.ports
        .supervisor
        .restart_force_new_cluster(proof, at_risk, left)
        .await?;
    crate::kill_point::reached("force-restarted");
    revision_step::clear(cx.paths)?;
    Ok(())
}

/// Stop etcd so that its log is final, keep its tail for an operator, and
/// read what the force will drop: the revisions at risk, written down when
/// there are any.
async fn stop_for_force<P: ?Sized, E, S: Supervisor>(
    cx: &Ctx<'_, P, E, S>,
    epoch: u64,
    started: Instant,
) -> Result<u64, Fault> {
    let running = matches!(cx.ports.supervisor.state().await, ProcState::Running { .. });
    let grace = cx.settings().timeouts.stop_grace.min(cx.left / 2);
    let graceful = cx.ports.supervisor.stop(grace).await?;
    keep_wal_tail(cx.paths, epoch, started);
    let at_risk = revision_step::force_at_risk(cx.paths, running && graceful)?;
    if at_risk > 0 {
        cx.paths
            .update_state(|st| st.revision_bump_owed = Some(at_risk))?;
    }
    Ok(at_risk)
}

/// Keep the WAL's tail beside the archives before a forced restart (see
/// `wal_tail`). Evidence, not a condition: a failure is logged.
fn keep_wal_tail(paths: &LocalPaths, epoch: u64, started: Instant) {
    match wal_tail::keep(paths, epoch, now_unix()) {
        Ok(Some(dir)) => tracing::info!(
            kept = %dir.display(),
            took_ms = started.elapsed().as_millis() as u64,
            "kept the write-ahead log's tail before the forced restart"
        ),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "could not keep the write-ahead log's tail"),
    }
}
