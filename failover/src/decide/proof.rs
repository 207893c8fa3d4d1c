//! The proof that the peer is down (never "no leader" alone: a partition
//! looks the same), and the records it rests on: the data records both daemons
//! publish, the bootstrap token, the force claim, and the commands that
//! resolve a refusal.

use super::*;

/// Why the peer counts as down (the split-brain rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownProof {
    /// A fence of the peer succeeded after it last joined.
    Fenced {
        /// When the fence completed.
        at: Stamp,
    },
    /// The peer left the cluster cleanly (offline, not unclean, not
    /// expected up).
    CleanlyDown,
    /// A stop of the peer's etcd completed and it is not unclean.
    EtcdStopped {
        /// When the stop completed.
        at: Stamp,
    },
    /// The peer is online, its daemon says this boot that its data is gone
    /// (its state file names an epoch no newer than ours, and no forced
    /// restart to a newer one that it has not seen done), so it runs no
    /// member and holds nothing this node lacks: no write can be
    /// acknowledged without this node, and none was acknowledged that this
    /// node has not persisted.
    HoldsNoData,
    /// The peer is online and its daemon says, this boot, that it left the
    /// member list and that its data shows the removal committed (in this
    /// node's cluster, at this node's epoch): its member never votes again,
    /// so none runs that could take a write, and every entry acknowledged
    /// before the removal was persisted here too. Only this node's
    /// persisted commit index, older than the removal (etcd syncs a commit
    /// index change only with new entries), still lists the peer.
    RemovedItself,
    /// The peer is online and its daemon says, this boot, that it has
    /// neither data nor a state file naming any (a new machine, or one
    /// whose disks were replaced): no member runs there. It says nothing
    /// about what the lost disk held, so a force still needs this node's
    /// in-sync marker.
    Blank,
    /// No proof at all: only a mutation produces this.
    NoLeaderOnly,
}

impl std::fmt::Display for DownProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DownProof::Fenced { at } => write!(f, "fenced at {}", at.0),
            DownProof::CleanlyDown => write!(f, "cleanly down"),
            DownProof::EtcdStopped { at } => write!(f, "its etcd stopped at {}", at.0),
            DownProof::HoldsNoData => write!(f, "online without data, none newer than ours"),
            DownProof::RemovedItself => {
                write!(
                    f,
                    "it left the member list and its data shows the removal committed"
                )
            }
            DownProof::Blank => write!(f, "online with neither data nor a state file"),
            DownProof::NoLeaderOnly => write!(f, "no leader (no proof)"),
        }
    }
}

/// Pacemaker's proof that `peer` is down, if there is one.
///
/// "No leader" is never part of it: a partition looks the same.
///
/// A fence proves the peer down only while Pacemaker's own record of the
/// node says its last membership has ended: offline, not unclean, not
/// expected up. Pacemaker writes that record (the node's `node_state`:
/// `join="down" expected="down"`) when it records a fence result against
/// the node, an operator's `stonith_admin --confirm` included, or when the
/// node leaves cleanly; the node's next join replaces it (online, expected
/// up), and a loss after that join makes the node unclean again. So a
/// fence completed before the peer's last membership never proves its
/// current loss, whatever the clocks say, and where the record is missing
/// (the node absent from crm_mon's view) there is no proof. No time is
/// compared: a fence's completion stamp comes from the fencing node's
/// clock, and a join time this daemon noted itself lives in a file on
/// /run; a clock step, or the note lost, turned an old fence into a fresh
/// proof when the two were compared.
pub fn peer_down_proof(facts: &Facts, peer: &NodeView) -> Option<DownProof> {
    down_proof(facts, peer, &Sound)
}

pub(super) fn down_proof<P: Policy>(
    facts: &Facts,
    peer: &NodeView,
    policy: &P,
) -> Option<DownProof> {
    if peer.online {
        // Online with its etcd stopped by a completed stop action.
        return match peer.etcd {
            ResourceState::Stopped { at } if !peer.unclean => Some(DownProof::EtcdStopped { at }),
            _ => None,
        };
    }
    let fences = facts
        .fence_events()
        .filter(|e| e.target == peer.name && e.status == FenceStatus::Success)
        .filter(|e| e.action != FenceAction::On);
    let proof = policy.proof_from_fences(peer, fences);
    if proof.is_some() {
        return proof;
    }
    match peer.etcd {
        ResourceState::Stopped { at } if !peer.unclean => Some(DownProof::EtcdStopped { at }),
        _ => None,
    }
}

/// Pacemaker's record that the node's last membership ended, with the
/// peer's successful fences (`fences`).
pub(super) fn proof_from_membership_end<'f>(
    peer: &NodeView,
    fences: impl Iterator<Item = &'f crate::facts::FenceEvent>,
) -> Option<DownProof> {
    let ended = !peer.unclean && !peer.expected_up;
    if !ended {
        return None;
    }
    let mut fences = fences.peekable();
    if fences.peek().is_some() {
        let at = fences.filter_map(|e| e.completed).max().unwrap_or(Stamp(0));
        return Some(DownProof::Fenced { at });
    }
    // Left cleanly (or fenced, with the history not yet synced to this
    // node). A node Pacemaker has never seen as a member is unclean until
    // fenced (`startup-fencing`, on by default), so it gives no proof here.
    Some(DownProof::CleanlyDown)
}

/// Whether `peer` is online and provably holds no data this node lacks: its
/// daemon published, this boot, that its member directory is gone, its
/// state file names our cluster (or none) at an epoch no newer than ours
/// (a forced restart it decided and never saw done counts: its lost data
/// may have held writes of that epoch),
/// and Pacemaker is not stopping it. Only a voter that is not departed
/// uses this, from a two-member membership: every write acknowledged in it
/// was persisted here too.
pub fn peer_holds_no_data(facts: &Facts, peer: &NodeView) -> bool {
    let Some(r) = &peer.record else {
        return false;
    };
    let d = &facts.data;
    peer.online
        && !peer.unclean
        && peer.etcd != ResourceState::Stopping
        && !r.has_data
        && r.had_cluster()
        && r.may_hold_epoch() <= d.epoch
        && (r.cluster_id.is_none() || r.cluster_id == d.cluster_id)
        && d.exists
        && !d.departed
}

/// Whether `peer` is online and its daemon published, this boot, that it
/// has neither data nor a state file (see [`DataRecord::blank`]), beside
/// this node's data that formed a cluster: no member runs there. Only a
/// voter that is not departed uses this.
pub fn peer_is_blank(facts: &Facts, peer: &NodeView) -> bool {
    let d = &facts.data;
    peer.online
        && !peer.unclean
        && peer.etcd != ResourceState::Stopping
        && peer.record.as_ref().is_some_and(DataRecord::blank)
        && d.exists
        && d.formed
        && !d.departed
}

/// Whether `peer` is online and its daemon published, this boot, that it
/// left the member list and that its data shows its removal committed, in
/// the cluster `cluster_id` this node's member runs, at this node's epoch.
/// Only a voter that is not departed uses this, from a two-member
/// membership that still lists the peer: its own persisted commit index
/// predates the removal (a power loss took the unsynced commit), so its
/// member waits for a vote that the removed member never gives.
pub fn peer_removed_itself(facts: &Facts, peer: &NodeView, cluster_id: u64) -> bool {
    let Some(r) = &peer.record else {
        return false;
    };
    let d = &facts.data;
    peer.online
        && !peer.unclean
        && r.removed
        && r.departed
        && r.has_data
        && r.epoch == d.epoch
        && r.cluster_id == Some(cluster_id)
        && d.cluster_id == Some(cluster_id)
        && d.exists
        && !d.departed
}

/// The `initial-cluster-token` of a bootstrap decided on these facts.
///
/// A fresh one for every bootstrap, so that a new cluster never carries an
/// old one's ids (etcd derives member and cluster ids from the token and
/// the peer URLs only): the boot ids of every configured node, each random
/// per boot, in name order. Every node computes the same value from the
/// published records. A node completing a peer's half-done bootstrap uses
/// the token that peer recorded.
pub fn bootstrap_token(facts: &Facts) -> String {
    if let Some(t) = facts
        .others()
        .filter_map(|n| n.record.as_ref())
        .find(|r| r.has_data && !r.formed)
        .and_then(|r| r.bootstrap_token.clone())
    {
        return t;
    }
    let mut boots: Vec<(&str, &str)> = facts
        .pacemaker
        .nodes
        .iter()
        .map(|n| {
            let boot = if n.name == facts.node {
                facts.boot_id.as_str()
            } else {
                n.record.as_ref().map_or("", |r| r.boot_id.as_str())
            };
            (n.name.as_str(), boot)
        })
        .collect();
    boots.sort();
    let parts: Vec<String> = boots.iter().map(|(n, b)| format!("{n}={b}")).collect();
    format!("etcd-warden:{}", parts.join(","))
}

/// Whether `claim` (found on `owner`) still stands: its owner has neither
/// rebooted nor been fenced since writing it.
pub fn claim_is_valid(facts: &Facts, owner: &NodeView, claim: &Claim) -> bool {
    if claim.owner != owner.name {
        return false;
    }
    if let Some(record) = &owner.record
        && record.boot_id != claim.boot_id
    {
        return false;
    }
    let fenced_since = facts
        .fence_events()
        .filter(|e| e.target == owner.name && e.status == FenceStatus::Success)
        .filter(|e| e.action != FenceAction::On)
        .filter_map(|e| e.completed)
        .any(|at| at > claim.at);
    !fenced_since
}

/// The record this node should have published for this boot.
pub fn expected_record(facts: &Facts) -> DataRecord {
    DataRecord {
        boot_id: facts.boot_id.clone(),
        has_data: facts.data.exists,
        formed: facts.data.formed,
        epoch: facts.data.epoch,
        cluster_id: facts.data.cluster_id,
        departed: facts.data.departed,
        archives: facts.data.archives,
        bootstrap_token: facts
            .data
            .bootstrap_token
            .clone()
            .filter(|_| facts.data.exists && !facts.data.formed),
        lost_member: facts
            .data
            .member_id
            .filter(|_| facts.data.lost() && !facts.data.joining)
            .or_else(|| old_member_of_blank(facts)),
        learner: facts.data.learner_only(&facts.node),
        removed: facts.data.removed_by_own_leave(&facts.node),
        joined_without_data: facts.data.lost() && facts.data.joining,
        pending_epoch: facts
            .data
            .pending_epoch
            .filter(|_| facts.data.force_unconfirmed()),
        voter_ids: facts
            .data
            .voter_ids
            .iter()
            .filter(|(n, _)| facts.data.voters.contains(n))
            .map(|(n, id)| (n.clone(), *id))
            .collect(),
        state_lost: facts.data.state_lost && facts.data.exists,
        added_by: if facts.data.learner_only(&facts.node) {
            facts.data.added_by.clone()
        } else {
            Default::default()
        },
    }
}

/// For a node without data or a state file (a replaced machine): a learner
/// (in HA mode, any member) the quorate cluster lists at this node that
/// has run. It ran on the old disks, so it can never run again here: the
/// leader's progress for it is past an empty log, and a voter of it is a
/// vote that never comes back.
fn old_member_of_blank(facts: &Facts) -> Option<u64> {
    let d = &facts.data;
    if d.exists || d.had_cluster() || d.joining || d.archives > 0 {
        return None;
    }
    let any_role = facts.topology == Topology::Ha;
    facts
        .cluster
        .as_ref()?
        .members
        .iter()
        .find(|m| m.node == facts.node && (m.is_learner || any_role) && m.started)
        .map(|m| m.id)
}

/// The command that resolves a refusal, so that every refusal names one.
pub mod resolve {
    /// Force a new cluster from this node's data, accepting that it may
    /// lack writes the peer acknowledged.
    pub fn force_new_cluster(node: &str) -> String {
        format!("etcd-warden recover force-new-cluster --node {node}")
    }

    /// Keep one node's history; the other's data is archived.
    pub fn keep_data_of(node: &str) -> String {
        format!("etcd-warden recover keep-data-of --node {node}")
    }

    /// Restore the newest archive on a node and start from it.
    pub fn restore_archive(node: &str) -> String {
        format!("etcd-warden recover restore-archive --node {node}")
    }

    /// Restore a node's newest archive although it is of an older epoch
    /// than its state file names, once no data of that epoch exists.
    pub fn restore_older_archive(node: &str) -> String {
        format!("etcd-warden recover restore-archive --node {node} --allow-older-epoch")
    }

    /// Restore an etcd snapshot on a node as a one-member cluster.
    pub fn restore_snapshot(node: &str) -> String {
        format!("etcd-warden recover restore-snapshot --node {node} --snapshot <FILE>")
    }

    /// Bring a node's lost data back: its newest archive where it keeps
    /// one, otherwise a snapshot.
    pub fn restore_data(node: &str, archives: u32) -> String {
        if archives > 0 {
            restore_archive(node)
        } else {
            restore_snapshot(node)
        }
    }
}
