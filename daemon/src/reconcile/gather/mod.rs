//! Gathering the facts for `decide`, each read live under a deadline.
//! Nothing here is a cached decision: the only things kept between calls
//! are observations Pacemaker pushed (fence alerts). No join time is kept:
//! whether a fence proves a peer down is read from Pacemaker's own record
//! of the peer each time (see `warden_failover::peer_down_proof`).

use std::collections::BTreeMap;
use std::time::Duration;

use warden_failover::{
    Claim, ClusterView, DataRecord, EtcdView, Facts, FenceEvent, LiveEtcd as LiveFacts, LocalData,
    LocalMarkers, MemberInfo, Notification, RaftPosition, Topology, Trigger,
};

use super::local::{LocalPaths, StateFile};
use super::pcmk::{self, CLAIM_ATTR, Pacemaker, PcmkError, RECORD_ATTR};
use super::ports::{EtcdOps, EtcdReads, Ports, Supervisor};
use crate::config::Settings;
use crate::etcd::{EtcdError, Member};
use crate::supervise::ProcState;

/// Facts could not be gathered: no decision is made this round.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GatherError {
    /// Pacemaker could not be asked.
    #[error("Pacemaker's view is unavailable: {0}")]
    Pacemaker(#[from] PcmkError),
    /// The local files could not be read.
    #[error(transparent)]
    Local(#[from] super::local::LocalError),
    /// etcd runs but does not answer Status.
    #[error("etcd runs but does not answer: {0}")]
    Etcd(#[from] EtcdError),
    /// etcd's process exists but is stopped by a signal, or has not answered
    /// for the daemon's bound (`hung_ms`): it is not asked.
    #[error("etcd (pid {pid}) runs but cannot answer")]
    Silent {
        /// etcd's PID.
        pid: u32,
        /// How long it has not answered, once that reached the bound.
        hung_ms: Option<u64>,
    },
}

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
/// seconds (see [`crate::raft_progress`]). The leader's progress says what
/// etcd's promote check reads, and a member the leader cannot reach is not
/// replicated to, so a lost learner is never taken for one in sync. With
/// the progress at hand a learner is therefore never asked: its silence
/// would hold every pass of its catch-up for the whole member limit, and
/// the loop watches for the learner's catch-up only between passes.
async fn members_info<P, E: EtcdOps, S>(
    core: &Ports<'_, P, E, S>,
    members: &[Member],
    leader_index: u64,
    leads: bool,
    deadline: Duration,
) -> Vec<MemberInfo> {
    // A member that does not answer within half a second is not in sync
    // for this decision; a lost peer must not hold the whole pass up.
    let limit = deadline.min(MEMBER_STATUS_LIMIT);
    let progress = if leads && members.iter().any(|m| m.is_learner) {
        match core.etcd.raft_progress(limit).await {
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
    let answers: BTreeMap<u64, bool> = core
        .etcd
        .statuses(&ask, limit)
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
        .collect();
    members
        .iter()
        .map(|m| {
            let in_sync = judged(m)
                .or_else(|| answers.get(&m.id).copied())
                .unwrap_or(false);
            member_info(core.settings, m, in_sync)
        })
        .collect()
}

/// The members with their node, none of them asked (so none in sync).
fn unasked_members<P, E, S>(core: &Ports<'_, P, E, S>, members: &[Member]) -> Vec<MemberInfo> {
    members
        .iter()
        .map(|m| member_info(core.settings, m, false))
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

/// The local etcd, live.
async fn local_etcd<P, E: EtcdOps, S: Supervisor>(
    core: &Ports<'_, P, E, S>,
    deadline: Duration,
) -> Result<EtcdView, GatherError> {
    match core.supervisor.state().await {
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
    let st = core.etcd.status(deadline).await?;
    // Without a leader a linearizable read can only time out: skip it (and
    // the lock read) rather than spend the deadline on it, which would delay
    // the survivor's failover by a whole deadline per round.
    let leader = st.has_leader();
    let (read, members, lock) = tokio::join!(
        async {
            if leader {
                core.etcd.linearizable_read(deadline).await.is_ok()
            } else {
                false
            }
        },
        core.etcd.member_list(deadline),
        async {
            if leader {
                core.etcd.leave_lock(deadline).await.ok().flatten()
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
        members_info(core, &members, st.raft_index, leads, deadline).await
    } else {
        unasked_members(core, &members)
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

/// Writes a state file that went missing beside data down again from what
/// the data itself says: the cluster and member ids in its write-ahead
/// log, and that its epoch is unknown (never "epoch 0, never formed",
/// which would make this node call its own voter data stale beside any
/// peer of a higher epoch). Nothing when the state file exists or there is
/// no log.
fn derive_lost_state(paths: &LocalPaths) -> Result<(), super::local::LocalError> {
    if paths.state_file.exists() || !paths.has_data() {
        return Ok(());
    }
    let ids = super::held::ids(&paths.member_dir());
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

/// The epoch a sole voter whose state file was lost writes down: a learner
/// of its membership joined at its epoch (its record names it), and any
/// other node's data is older than this one, which serves alone, so the
/// epoch goes above what its record names (a forced restart not yet seen
/// done included).
fn sole_voter_epoch(
    own: u64,
    me: &str,
    members: &[MemberInfo],
    records: &BTreeMap<String, (Option<DataRecord>, Option<Claim>)>,
) -> u64 {
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

/// The cluster as another node's etcd answers it with quorum.
async fn cluster_via_peers<P, E: EtcdOps, S>(
    core: &Ports<'_, P, E, S>,
    records: &BTreeMap<String, (Option<DataRecord>, Option<Claim>)>,
    online: &[String],
    deadline: Duration,
) -> Option<ClusterView> {
    // Only peers Pacemaker shows online: asking a lost one costs a whole
    // connect deadline and cannot answer with quorum anyway.
    for n in core
        .settings
        .nodes
        .iter()
        .filter(|n| n.name != core.settings.node_name && online.contains(&n.name))
    {
        let Some(url) = n.client_urls.first() else {
            continue;
        };
        let peer = core.etcd.peer(url);
        let Ok(st) = peer.status(deadline).await else {
            continue;
        };
        if !st.has_leader() || peer.linearizable_read(deadline).await.is_err() {
            continue;
        }
        let Ok(members) = peer.member_list(deadline).await else {
            continue;
        };
        let leader_index = st.raft_index;
        let infos = members_info(core, &members, leader_index, false, deadline).await;
        let epoch = records
            .get(&n.name)
            .and_then(|(r, _)| r.as_ref())
            .map(|r| r.epoch)
            .unwrap_or_default();
        return Some(ClusterView {
            cluster_id: st.cluster_id,
            epoch,
            members: infos,
            leave_lock: peer.leave_lock(deadline).await.ok().flatten(),
        });
    }
    None
}

/// A note for a refusal when another node's etcd fails this node's TLS
/// check (an untrusted or expired certificate, a handshake refused): a
/// peer that cannot be verified answers nothing here, exactly as one that
/// is down or has no quorum, and the refusal's command may then be wrong.
/// Asked only when a decision refuses, never on the failover's path, and
/// only of the nodes Pacemaker shows online.
pub(crate) async fn peer_tls_failure<P, E: EtcdOps, S>(
    core: &Ports<'_, P, E, S>,
    facts: &Facts,
    deadline: Duration,
) -> Option<String> {
    let online = |name: &str| {
        facts
            .pacemaker
            .nodes
            .iter()
            .any(|v| v.name == name && v.online && !v.unclean)
    };
    let me = core.settings.node_name.as_str();
    for n in core
        .settings
        .nodes
        .iter()
        .filter(|n| n.name != me && online(&n.name))
    {
        let Some(url) = n.client_urls.first() else {
            continue;
        };
        if let Err(e) = core.etcd.peer(url).status(deadline).await
            && looks_like_tls(&e)
        {
            return Some(format!(
                "{}'s etcd at {url} fails this node's TLS check ({e}): fix the CA and certificates first (openssl s_client), then restart this node's daemon; the command above is for a peer that is really down or without its data",
                n.name
            ));
        }
    }
    None
}

/// Whether `e` says a TLS check failed rather than that nothing answered.
fn looks_like_tls(e: &EtcdError) -> bool {
    let m = e.to_string().to_ascii_lowercase();
    [
        "certificate",
        "tls",
        "handshake",
        "unknownissuer",
        "badsignature",
    ]
    .iter()
    .any(|w| m.contains(w))
}

/// Everything `decide` looks at, gathered now.
pub(crate) async fn gather<P: Pacemaker, E: EtcdOps, S: Supervisor>(
    core: &Ports<'_, P, E, S>,
    paths: &LocalPaths,
    trigger: Trigger,
    notify: Option<Notification>,
    alerts: Vec<FenceEvent>,
    deadline: Duration,
) -> Result<Facts, GatherError> {
    let s = core.settings;
    let pcmk = core.pacemaker;
    derive_lost_state(paths)?;
    let names: Vec<String> = s.nodes.iter().map(|n| n.name.clone()).collect();
    // Every node's two attributes at once: each read is a crm_attribute
    // process, and run one after another they cost more than crm_mon itself
    // on the survivor's path from a fence to its forced restart.
    let attrs = async {
        let reads = futures_util::future::join_all(names.iter().map(|n| async move {
            let (r, c) = tokio::join!(
                pcmk.get_attr(n, RECORD_ATTR, deadline),
                pcmk.get_attr(n, CLAIM_ATTR, deadline)
            );
            (n, r, c)
        }))
        .await;
        let mut out = BTreeMap::new();
        for (n, r, c) in reads {
            // An attribute that does not parse is treated as absent and
            // logged: it can only have been written by something else.
            let parse_r = r?.and_then(|v| {
                serde_json::from_str::<DataRecord>(&v)
                    .map_err(
                        |e| tracing::warn!(node = %n, error = %e, "unreadable record attribute"),
                    )
                    .ok()
            });
            let parse_c = c?.and_then(|v| {
                serde_json::from_str::<Claim>(&v)
                    .map_err(
                        |e| tracing::warn!(node = %n, error = %e, "unreadable claim attribute"),
                    )
                    .ok()
            });
            out.insert(n.clone(), (parse_r, parse_c));
        }
        Ok::<_, PcmkError>(out)
    };
    // Not a proof of anything, only where the leader belongs: a failed
    // read means "no preference" and never fails the gathering. Only the
    // loop's own passes decide a transfer, so only they read it.
    let wants_winner =
        s.topology == crate::config::Topology::TwoNode && matches!(trigger, Trigger::Reconcile);
    let winner = async {
        if !wants_winner {
            return None;
        }
        pcmk.fence_race_winner(&names, deadline)
            .await
            .map_err(|e| tracing::debug!(error = %e, "fence delays not read"))
            .ok()
            .flatten()
    };
    let (doc, attrs, etcd, winner) = tokio::join!(
        pcmk.crm_mon(deadline),
        attrs,
        local_etcd(core, deadline),
        winner
    );
    let doc = doc?;
    let attrs = attrs?;
    // Whether the local member itself answered (not the stand-in below).
    let mut answered = true;
    let etcd = match etcd {
        // In HA mode a member restarted while the majority is down runs but
        // answers no client before it has a leader (etcd 3.4/3.5 serve only
        // once the member has published itself through raft). That is a
        // fact to decide on (running, no leader, no quorum), not a reason
        // to decide nothing: the decision then reports it degraded and
        // waits, and a start does not hold Pacemaker up.
        //
        // The same holds for a two-node member restarted after a total
        // outage while its peer runs no member (its data is gone): the
        // membership the data last had (from the state file) is what the
        // decision needs to see that the peer's vote is missing, and that
        // the peer holds nothing this node lacks.
        //
        // A process stopped by a signal or hung past the bound is such a
        // member too: it exists (a stop must end it), and the decision
        // sees how long it has been silent.
        Err(e @ (GatherError::Etcd(_) | GatherError::Silent { .. })) => {
            tracing::debug!(error = %e, "etcd runs but does not answer");
            answered = false;
            let hung_ms = match e {
                GatherError::Silent { hung_ms, .. } => hung_ms,
                _ => None,
            };
            let st = paths.read_state()?;
            let members = match s.topology {
                crate::config::Topology::Ha => Vec::new(),
                crate::config::Topology::TwoNode => st
                    .voters
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
                    .collect(),
            };
            EtcdView::Running(LiveFacts {
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
            })
        }
        r => r?,
    };
    let mut pacemaker = pcmk::view(&doc, &names, &attrs);
    pacemaker.fence_race_winner = winner;

    let quorate_here = matches!(&etcd, EtcdView::Running(l) if l.quorate());
    let cluster = if quorate_here {
        None
    } else {
        let online: Vec<String> = pacemaker
            .nodes
            .iter()
            .filter(|n| n.online)
            .map(|n| n.name.clone())
            .collect();
        cluster_via_peers(core, &attrs, &online, deadline).await
    };

    // What the live view says about the data is written down for when etcd
    // does not run (the data's last membership: a restarting sole voter
    // reads its role from it instead of guessing from notify counts).
    let state = match &etcd {
        EtcdView::Running(l) => paths.update_state(|st| {
            // The joined member answers: its data is there from now on.
            if answered {
                st.joining = false;
                st.reseeding = false;
            }
            if l.quorate() && !l.is_learner {
                let voters: Vec<String> = l.voters().map(|m| m.node.clone()).collect();
                st.formed = true;
                st.bootstrap_token = None;
                st.cluster_id = Some(l.cluster_id);
                st.member_id = Some(l.member_id);
                // A forced restart is done once this member is the only
                // voter: its epoch becomes the data's lineage. A quorate
                // membership with the peer still in it means the force never
                // happened.
                if let Some(e) = st.pending_epoch.take()
                    && voters == [s.node_name.as_str()]
                {
                    st.epoch = st.epoch.max(e);
                }
                // A member that joined took the epoch of the record the
                // leader's node had published then; a force moments before
                // the join is published a pass later, so the join may carry
                // the epoch before it. Quorate here with that node as a
                // voter, this member is in its lineage now: take its epoch
                // when higher, for the same cluster. Kept behind, the label
                // would call this voter's data stale once the peer is lost
                // and archive the one copy the peer needs for quorum.
                for (node, (record, _)) in &attrs {
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
                        st.epoch = sole_voter_epoch(st.epoch, &s.node_name, &l.members, &attrs);
                    }
                    tracing::warn!(
                        epoch = st.epoch,
                        ?voters,
                        "wrote the lost state file down again from a quorate look"
                    );
                }
                st.voters = voters;
            }
        })?,
        EtcdView::NotRunning => {
            let st = paths.read_state()?;
            // etcd exited: from then on the peer may have gone on without
            // this member, so its data is no longer known complete. Not
            // while this node's own forced restart is unconfirmed: the
            // daemon stopped etcd itself for it, with the peer proven down
            // (its daemon may have been restarted between the stop and the
            // restart), and no other member can take a write meanwhile.
            let forcing = st.pending_epoch.is_some_and(|p| p > st.epoch);
            if !forcing && paths.in_sync_marker().is_some_and(|m| !m.operator) {
                paths.clear_in_sync()?;
            }
            match removal_seen(&st, &s.node_name, cluster.as_ref(), paths.has_data()) {
                Some(voters) => {
                    tracing::info!(
                        ?voters,
                        "the running cluster no longer lists this node's departed member: its removal is committed"
                    );
                    paths.update_state(|st| st.voters = voters)?
                }
                None => st,
            }
        }
    };
    let data = LocalData {
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
    };
    Ok(Facts {
        node: s.node_name.clone(),
        boot_id: paths.boot_id()?,
        topology: match s.topology {
            crate::config::Topology::TwoNode => Topology::TwoNode,
            crate::config::Topology::Ha => Topology::Ha,
        },
        trigger,
        notify,
        pacemaker,
        etcd,
        cluster,
        data,
        local: LocalMarkers {
            in_sync_boot: paths.in_sync(),
        },
        alerts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_failover::MemberInfo;

    #[test]
    fn a_tls_failure_is_told_from_no_answer() {
        let tls = EtcdError::Unavailable(
            "transport error: error trying to connect: invalid peer certificate: UnknownIssuer"
                .into(),
        );
        assert!(looks_like_tls(&tls));
        let refused = EtcdError::Unavailable(
            "transport error: error trying to connect: tcp connect error: Connection refused (os error 111)".into(),
        );
        assert!(!looks_like_tls(&refused));
        assert!(!looks_like_tls(&EtcdError::Timeout(Duration::from_secs(1))));
    }

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
