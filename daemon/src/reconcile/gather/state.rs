//! This node's state file, kept up with what was seen: written again from
//! the data when it went missing, updated from a live look at etcd (the
//! data's last membership, for when etcd does not run), and read into the
//! facts about the local data.

use warden_failover::{ClusterView, EtcdView, LiveEtcd as LiveFacts, LocalData, MemberInfo};

use super::Records;
use crate::config::Settings;
use crate::reconcile::local::{LocalError, LocalPaths, StateFile};

/// Writes a state file that went missing beside data down again from what
/// the data itself says: the cluster and member ids in its write-ahead
/// log, and that its epoch is unknown (never "epoch 0, never formed",
/// which would make this node call its own voter data stale beside any
/// peer of a higher epoch). Nothing when the state file exists or there is
/// no log.
pub(super) fn derive_lost_state(paths: &LocalPaths) -> Result<(), LocalError> {
    if paths.state_file.exists() || !paths.has_data() {
        return Ok(());
    }
    let ids = crate::reconcile::held::ids(&paths.member_dir());
    let st = StateFile {
        formed: true,
        member_id: ids.map(|(m, _)| m),
        cluster_id: ids.map(|(_, c)| c),
        epoch_unknown: true,
        ..StateFile::default()
    };
    paths.write_state(&st)?;
    tracing::warn!(
        state_file = %paths.state_file.display(),
        member = ?st.member_id.map(|m| format!("{m:x}")),
        cluster = ?st.cluster_id.map(|c| format!("{c:x}")),
        "the state file was missing beside etcd data: wrote it again from the data's write-ahead log, with the epoch unknown"
    );
    Ok(())
}

/// What the live view says about the data is written down for when etcd
/// does not run (the data's last membership: a restarting sole voter
/// reads its role from it instead of guessing from notify counts). The
/// state file as it is now.
pub(super) fn note_what_was_seen(
    paths: &LocalPaths,
    s: &Settings,
    etcd: &EtcdView,
    answered: bool,
    cluster: Option<&ClusterView>,
    records: &Records,
) -> Result<StateFile, LocalError> {
    match etcd {
        EtcdView::Running(l) => paths.update_state(|st| {
            // The joined member answers: its data is there from now on.
            if answered {
                st.joining = false;
                st.reseeding = false;
            }
            if l.quorate() && !l.is_learner {
                note_quorate_voter(st, s, l, records);
            }
        }),
        EtcdView::NotRunning => note_not_running(paths, s, cluster),
    }
}

/// The membership a quorate look as a voter shows, as the data's last.
fn note_quorate_voter(st: &mut StateFile, s: &Settings, l: &LiveFacts, records: &Records) {
    let voters: Vec<String> = l.voters().map(|m| m.node.clone()).collect();
    st.formed = true;
    st.bootstrap_token = None;
    st.cluster_id = Some(l.cluster_id);
    st.member_id = Some(l.member_id);
    // A forced restart is done once this member is the only voter: its
    // epoch becomes the data's lineage. A quorate membership with the peer
    // still in it means the force never happened.
    if let Some(e) = st.pending_epoch.take()
        && voters == [s.node_name.as_str()]
    {
        st.epoch = st.epoch.max(e);
    }
    // A member that joined took the epoch of the record the leader's node
    // had published then; a force moments before the join is published a
    // pass later, so the join may carry the epoch before it. Quorate here
    // with that node as a voter, this member is in its lineage now: take
    // its epoch when higher, for the same cluster. Kept behind, the label
    // would call this voter's data stale once the peer is lost and archive
    // the one copy the peer needs for quorum.
    for (node, (record, _)) in records {
        if node != &s.node_name
            && voters.contains(node)
            && let Some(r) = record
            && r.cluster_id == Some(l.cluster_id)
        {
            st.epoch = st.epoch.max(r.epoch);
        }
    }
    st.voter_ids = l.voters().map(|m| (m.node.clone(), m.id)).collect();
    if st.epoch_unknown {
        st.epoch_unknown = false;
        if voters == [s.node_name.as_str()] {
            st.epoch = sole_voter_epoch(st.epoch, &s.node_name, &l.members, records);
        }
        tracing::warn!(
            epoch = st.epoch,
            ?voters,
            "wrote the lost state file down again from a quorate look"
        );
    }
    st.voters = voters;
}

/// What a stopped etcd means for the state file and the in-sync marker.
fn note_not_running(
    paths: &LocalPaths,
    s: &Settings,
    cluster: Option<&ClusterView>,
) -> Result<StateFile, LocalError> {
    let st = paths.read_state()?;
    // etcd exited: from then on the peer may have gone on without this
    // member, so its data is no longer known complete. Not while this
    // node's own forced restart is unconfirmed: the daemon stopped etcd
    // itself for it, with the peer proven down (its daemon may have been
    // restarted between the stop and the restart), and no other member can
    // take a write meanwhile.
    let forcing = st.pending_epoch.is_some_and(|p| p > st.epoch);
    if !forcing && paths.in_sync_marker().is_some_and(|m| !m.operator) {
        paths.clear_in_sync()?;
    }
    match removal_seen(&st, &s.node_name, cluster, paths.has_data()) {
        Some(voters) => {
            tracing::info!(
                ?voters,
                "the running cluster no longer lists this node's departed member: its removal is committed"
            );
            paths.update_state(|st| st.voters = voters)
        }
        None => Ok(st),
    }
}

/// The voters to write down for a node whose graceful leave asked for its
/// own removal without hearing the answer, when the cluster shows it took
/// effect.
///
/// etcd answers a removal only once it has applied it, and the member that
/// applied its own removal stops about a second later: a slow answer can
/// arrive after that, i.e. never. The state file then still lists this
/// node as a voter, and after a total outage in which the peer's data
/// lost that commit, this node would take its data for a leave cut short
/// and start its member again and again, each one exiting on the removal
/// it replays. The quorate cluster, answering linearizably with this
/// data's cluster id and without this data's member, is the proof that the
/// removal is committed (a member leaves the list only by a committed
/// removal), so its voters are the data's last membership.
fn removal_seen(
    st: &StateFile,
    node: &str,
    cluster: Option<&ClusterView>,
    has_data: bool,
) -> Option<Vec<String>> {
    let c = cluster?;
    let member = st.member_id?;
    let listed_here = st.voters.iter().any(|v| v == node);
    (st.departed
        && has_data
        && listed_here
        && st.cluster_id == Some(c.cluster_id)
        && c.members.iter().all(|m| m.id != member))
    .then(|| {
        c.members
            .iter()
            .filter(|m| !m.is_learner && !m.node.is_empty())
            .map(|m| m.node.clone())
            .collect()
    })
}

/// The epoch a sole voter whose state file was lost writes down: a learner
/// of its membership joined at its epoch (its record names it), and any
/// other node's data is older than this one, which serves alone, so the
/// epoch goes above what its record names (a forced restart not yet seen
/// done included).
fn sole_voter_epoch(own: u64, me: &str, members: &[MemberInfo], records: &Records) -> u64 {
    records
        .iter()
        .filter(|(n, _)| n.as_str() != me)
        .filter_map(|(n, (r, _))| r.as_ref().map(|r| (n, r)))
        .map(|(n, r)| {
            if members.iter().any(|m| &m.node == n) {
                r.epoch
            } else {
                r.may_hold_epoch() + 1
            }
        })
        .fold(own, u64::max)
}

/// The facts about the local data: the state file and the data directory.
pub(super) fn local_data(paths: &LocalPaths, state: &StateFile) -> LocalData {
    LocalData {
        joining: state.joining,
        member_dir: paths.member_dir().display().to_string(),
        bootstrap_token: state.bootstrap_token.clone(),
        exists: paths.has_data(),
        formed: state.formed,
        epoch: state.epoch,
        cluster_id: state.cluster_id,
        member_id: state.member_id,
        voters: state.voters.clone(),
        position: None,
        departed: state.departed,
        archives: u32::try_from(paths.archives().len()).unwrap_or(u32::MAX),
        pending_epoch: state.pending_epoch.filter(|p| *p > state.epoch),
        voter_ids: state
            .voter_ids
            .iter()
            .filter(|(n, _)| state.voters.contains(n))
            .map(|(n, id)| (n.clone(), *id))
            .collect(),
        state_lost: state.epoch_unknown && paths.has_data(),
        added_by: state.added_by.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, node: &str, is_learner: bool) -> MemberInfo {
        MemberInfo {
            id,
            name: node.into(),
            started: true,
            node: node.into(),
            is_learner,
            in_sync: true,
        }
    }

    fn left(cluster_id: u64) -> StateFile {
        StateFile {
            departed: true,
            cluster_id: Some(cluster_id),
            member_id: Some(0x2),
            voters: vec!["n1".into(), "n2".into()],
            ..StateFile::default()
        }
    }

    fn cluster(cluster_id: u64, members: Vec<MemberInfo>) -> ClusterView {
        ClusterView {
            cluster_id,
            epoch: 0,
            members,
            leave_lock: None,
        }
    }

    #[test]
    fn a_departed_member_missing_from_its_quorate_cluster_was_removed() {
        let c = cluster(7, vec![member(0x1, "n1", false), member(0x9, "n3", true)]);
        assert_eq!(
            removal_seen(&left(7), "n2", Some(&c), true),
            Some(vec!["n1".to_string()])
        );
    }

    #[test]
    fn nothing_else_counts_as_a_removal() {
        let gone = cluster(7, vec![member(0x1, "n1", false)]);
        let listed = cluster(7, vec![member(0x1, "n1", false), member(0x2, "n2", false)]);
        // The member is still listed: the removal did not take effect.
        assert_eq!(removal_seen(&left(7), "n2", Some(&listed), true), None);
        // Another cluster says nothing about this data's member.
        assert_eq!(removal_seen(&left(8), "n2", Some(&gone), true), None);
        // No quorate cluster answered.
        assert_eq!(removal_seen(&left(7), "n2", None, true), None);
        // Not a graceful leave (a stale member is archived, not labelled).
        let stayed = StateFile {
            departed: false,
            ..left(7)
        };
        assert_eq!(removal_seen(&stayed, "n2", Some(&gone), true), None);
        // Already written down, or no data to describe.
        let known = StateFile {
            voters: vec!["n1".into()],
            ..left(7)
        };
        assert_eq!(removal_seen(&known, "n2", Some(&gone), true), None);
        assert_eq!(removal_seen(&left(7), "n2", Some(&gone), false), None);
    }
}
