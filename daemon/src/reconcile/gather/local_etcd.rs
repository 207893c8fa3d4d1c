//! The local etcd, live; or, when its process exists but does not answer,
//! a stand-in read from the state file.

use std::time::Duration;

use warden_failover::{EtcdView, LiveEtcd as LiveFacts, MemberInfo, RaftPosition};

use super::GatherError;
use super::members::{members_info, unasked_members};
use crate::config::Settings;
use crate::reconcile::local::{LocalError, LocalPaths, StateFile};
use crate::reconcile::ports::{EtcdOps, Ports, Supervisor};
use crate::supervise::ProcState;

/// The local etcd, live.
pub(super) async fn local_etcd<P: ?Sized, E: EtcdOps, S: Supervisor>(
    ports: &Ports<'_, P, E, S>,
    deadline: Duration,
) -> Result<EtcdView, GatherError> {
    match ports.supervisor.state().await {
        ProcState::Running { .. } => {}
        ProcState::Frozen { pid } => return Err(GatherError::Silent { pid, hung_ms: None }),
        ProcState::Hung { pid, silent_ms } => {
            return Err(GatherError::Silent {
                pid,
                hung_ms: Some(silent_ms),
            });
        }
        ProcState::Stopped | ProcState::Died { .. } => return Ok(EtcdView::NotRunning),
    }
    let st = ports.etcd.status(deadline).await?;
    // Without a leader a linearizable read can only time out: skip it (and
    // the lock read) rather than spend the deadline on it, which would delay
    // the survivor's failover by a whole deadline per round.
    let leader = st.has_leader();
    let (read, members, lock) = tokio::join!(
        async {
            if leader {
                ports.etcd.linearizable_read(deadline).await.is_ok()
            } else {
                false
            }
        },
        ports.etcd.member_list(deadline),
        async {
            if leader {
                ports.etcd.leave_lock(deadline).await.ok().flatten()
            } else {
                None
            }
        },
    );
    let members = members?;
    // Without a leader no decision looks at whether another member answers
    // (promotions, removals and the graceful-stop count all need quorum),
    // while asking a lost peer costs up to MEMBER_STATUS_LIMIT on every
    // pass of the survivor between the fence and its forced restart.
    let infos = if leader {
        let leads = st.leader == st.member_id;
        members_info(ports, &members, st.raft_index, leads, deadline).await
    } else {
        unasked_members(ports, &members)
    };
    Ok(EtcdView::Running(LiveFacts {
        member_id: st.member_id,
        cluster_id: st.cluster_id,
        is_learner: st.is_learner,
        has_leader: st.has_leader(),
        is_leader: st.has_leader() && st.leader == st.member_id,
        linearizable_ok: read,
        members: infos,
        leave_lock: lock,
        position: RaftPosition {
            term: st.raft_term,
            index: st.raft_index,
        },
        hung_ms: None,
    }))
}

/// The local member as the state file describes it, for a member that
/// runs but did not answer (`silent`, the error that said so).
///
/// In HA mode a member restarted while the majority is down runs but
/// answers no client before it has a leader (etcd 3.4/3.5 serve only once
/// the member has published itself through raft). That is a fact to decide
/// on (running, no leader, no quorum), not a reason to decide nothing: the
/// decision then reports it degraded and waits, and a start does not hold
/// Pacemaker up.
///
/// The same holds for a two-node member restarted after a total outage
/// while its peer runs no member (its data is gone): the membership the
/// data last had (from the state file) is what the decision needs to see
/// that the peer's vote is missing, and that the peer holds nothing this
/// node lacks.
///
/// A process stopped by a signal or hung past the bound is such a member
/// too: it exists (a stop must end it), and the decision sees how long it
/// has been silent.
pub(super) fn stand_in(
    s: &Settings,
    paths: &LocalPaths,
    silent: GatherError,
) -> Result<EtcdView, LocalError> {
    tracing::debug!(error = %silent, "etcd runs but does not answer");
    let hung_ms = match silent {
        GatherError::Silent { hung_ms, .. } => hung_ms,
        _ => None,
    };
    let st = paths.read_state()?;
    let members = match s.topology {
        crate::config::Topology::Ha => Vec::new(),
        crate::config::Topology::TwoNode => last_voters(s, &st),
    };
    Ok(EtcdView::Running(LiveFacts {
        member_id: st.member_id.unwrap_or_default(),
        cluster_id: st.cluster_id.unwrap_or_default(),
        // A member started to join answers only once the leader has
        // sent it the data; until then it is the learner it was
        // added as (and never a voter that could force).
        is_learner: st.joining,
        has_leader: false,
        is_leader: false,
        linearizable_ok: false,
        members,
        leave_lock: None,
        position: RaftPosition::default(),
        hung_ms,
    }))
}

/// The voters of the data's last membership, as the state file lists them,
/// none in sync; only this node's own id is known.
fn last_voters(s: &Settings, st: &StateFile) -> Vec<MemberInfo> {
    st.voters
        .iter()
        .map(|n| MemberInfo {
            id: if *n == s.node_name {
                st.member_id.unwrap_or_default()
            } else {
                0
            },
            name: String::new(),
            started: true,
            node: n.clone(),
            is_learner: false,
            in_sync: false,
        })
        .collect()
}
