//! etcd's member list as `decide` sees it: each member with its node and
//! whether it is in sync.

use std::collections::BTreeMap;
use std::time::Duration;

use warden_failover::MemberInfo;

use crate::config::Settings;
use crate::etcd::Member;
use crate::reconcile::ports::{EtcdOps, Ports};

/// How long each other member's Status may take in one pass.
const MEMBER_STATUS_LIMIT: Duration = Duration::from_millis(500);

/// Node of a member, matched on the exact peer URL.
fn node_of(s: &Settings, m: &Member) -> String {
    s.nodes
        .iter()
        .find(|n| n.peer_urls.iter().any(|u| m.peer_urls.contains(u)))
        .map(|n| n.name.clone())
        .unwrap_or_else(|| m.name.clone())
}

/// The members with their node and whether each is in sync: a voter that
/// answers Status; a learner the leader replicates to up to its commit
/// index, when this member leads and etcd's progress can be read, else one
/// whose raft index reached `leader_index`.
///
/// A learner that receives or applies a snapshot answers no Status for
/// seconds (see [`crate::etcd::raft_progress`]). The leader's progress says what
/// etcd's promote check reads, and a member the leader cannot reach is not
/// replicated to, so a lost learner is never taken for one in sync. With
/// the progress at hand a learner is therefore never asked: its silence
/// would hold every pass of its catch-up for the whole member limit, and
/// the loop watches for the learner's catch-up only between passes.
pub(super) async fn members_info<P: ?Sized, E: EtcdOps, S>(
    ports: &Ports<'_, P, E, S>,
    members: &[Member],
    leader_index: u64,
    leads: bool,
    deadline: Duration,
) -> Vec<MemberInfo> {
    // A member that does not answer within half a second is not in sync
    // for this decision; a lost peer must not hold the whole pass up.
    let limit = deadline.min(MEMBER_STATUS_LIMIT);
    let progress = if leads && members.iter().any(|m| m.is_learner) {
        match ports.etcd.raft_progress(limit).await {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::debug!(error = %e, "no raft progress from the leader; learners judged by their Status");
                None
            }
        }
    } else {
        None
    };
    // `Some(in sync)` for a learner the progress judges.
    let judged = |m: &Member| {
        progress
            .as_ref()
            .filter(|_| m.is_learner)
            .map(|p| p.in_sync(m.id))
    };
    let ask: Vec<Member> = members
        .iter()
        .filter(|m| judged(m).is_none())
        .cloned()
        .collect();
    let answers = in_sync_by_status(ports, &ask, leader_index, limit).await;
    members
        .iter()
        .map(|m| {
            let in_sync = judged(m)
                .or_else(|| answers.get(&m.id).copied())
                .unwrap_or(false);
            member_info(ports.settings, m, in_sync)
        })
        .collect()
}

/// Whether each member in `ask` is in sync by its own Status: a voter that
/// answers, a learner whose raft index reached `leader_index`.
async fn in_sync_by_status<P: ?Sized, E: EtcdOps, S>(
    ports: &Ports<'_, P, E, S>,
    ask: &[Member],
    leader_index: u64,
    limit: Duration,
) -> BTreeMap<u64, bool> {
    ports
        .etcd
        .statuses(ask, limit)
        .await
        .into_iter()
        .map(|(m, st)| {
            let in_sync = match st {
                Ok(st) if m.is_learner => st.raft_index >= leader_index,
                Ok(_) => true,
                Err(_) => false,
            };
            (m.id, in_sync)
        })
        .collect()
}

/// The members with their node, none of them asked (so none in sync).
pub(super) fn unasked_members<P: ?Sized, E, S>(
    ports: &Ports<'_, P, E, S>,
    members: &[Member],
) -> Vec<MemberInfo> {
    members
        .iter()
        .map(|m| member_info(ports.settings, m, false))
        .collect()
}

fn member_info(s: &Settings, m: &Member, in_sync: bool) -> MemberInfo {
    MemberInfo {
        id: m.id,
        name: m.name.clone(),
        started: !m.client_urls.is_empty(),
        node: node_of(s, m),
        is_learner: m.is_learner,
        in_sync,
    }
}
