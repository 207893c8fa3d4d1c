//! What a node's daemon observes: the facts `decide` is called with.

use crate::facts::{
    ClusterView, DataRecord, EtcdView, Facts, FenceAction, FenceEvent, FenceStatus, LiveEtcd,
    LocalData, LocalMarkers, MemberInfo, NodeView, PacemakerView, RaftPosition, ResourceState,
    Stamp, Trigger,
};

use super::etcd::Group;
use super::state::{ClaimM, Data, Node, Rec, Seen, State};
use super::{CLUSTER_ID, EtcdModel, ID_BASE, boot_id, connected, is_voter, name, running_data};

impl EtcdModel {
    pub(super) fn facts(&self, s: &State, x: usize) -> Facts {
        let me = &s.nodes[x];
        let trigger = if s.maintenance {
            Trigger::Reconcile
        } else if !me.target && me.stopped_at.is_none() {
            Trigger::Stop
        } else if me.target && !me.started && !me.queued {
            Trigger::Start
        } else {
            Trigger::Reconcile
        };
        let nodes = self
            .configured(s)
            .into_iter()
            .map(|y| self.node_view(s, x, y))
            .collect::<Vec<_>>();
        let fence_history = s
            .fences
            .iter()
            .map(|&(t, at)| FenceEvent {
                target: name(t),
                action: FenceAction::Reboot,
                status: FenceStatus::Success,
                completed: Some(Stamp(u64::from(at))),
            })
            .collect();
        let etcd = match running_data(s, x) {
            None => EtcdView::NotRunning,
            Some(d) => {
                let quorate = self.quorate(s, x);
                let group = self.group(s, x);
                EtcdView::Running(LiveEtcd {
                    member_id: ID_BASE + u64::from(d.member),
                    cluster_id: CLUSTER_ID,
                    is_learner: !is_voter(d, x),
                    has_leader: quorate || (!is_voter(d, x) && self.learner_has_leader(s, x)),
                    is_leader: self.leader(s, x) == Some(x),
                    linearizable_ok: quorate,
                    members: self.members(s, d, group),
                    leave_lock: d.lock.map(name),
                    position: RaftPosition {
                        term: u64::from(d.epoch),
                        index: d.log.len() as u64,
                    },
                    hung_ms: None,
                })
            }
        };
        let cluster = if me.etcd {
            None
        } else {
            (0..self.n())
                .filter(|&y| y != x && connected(s, x, y) && self.quorate(s, y))
                .find_map(|y| running_data(s, y).map(|d| (y, d)))
                .map(|(y, d)| ClusterView {
                    cluster_id: CLUSTER_ID,
                    epoch: u64::from(d.recorded_epoch()),
                    members: self.members(s, d, self.group(s, y)),
                    leave_lock: d.lock.map(name),
                })
        };
        let mut data = local_data(me);
        if !self.config.lose_state_file {
            // Only a node whose state file is lost reads the peer's voter
            // ids: elsewhere they would only deepen the state space with
            // records republished after every membership change.
            data.voter_ids.clear();
        }
        Facts {
            node: name(x),
            boot_id: boot_id(x, me.boot),
            topology: self.config.topology,
            trigger,
            notify: None,
            pacemaker: PacemakerView {
                quorate: me.quorate,
                nodes,
                fence_history,
                maintenance_mode: s.maintenance,
                etcd_unmanaged: false,
                // The model derives the leader from the logs (the longest
                // wins) and has no fence delays: no transfer is decided.
                fence_race_winner: None,
            },
            etcd,
            cluster,
            data,
            local: LocalMarkers {
                in_sync_boot: me.in_sync.then(|| boot_id(x, me.boot)),
            },
            alerts: Vec::new(),
        }
    }

    pub(super) fn learner_has_leader(&self, s: &State, x: usize) -> bool {
        (0..self.n()).any(|l| self.leader(s, l) == Some(l) && self.group(s, l).contains(&x))
    }

    pub(super) fn members(&self, s: &State, d: &Data, group: Group) -> Vec<MemberInfo> {
        d.config
            .iter()
            .map(|e| {
                let up = group.contains(&e.node)
                    && running_data(s, e.node).is_some_and(|dy| dy.member == e.id);
                let synced = running_data(s, e.node).is_some_and(|dy| dy.synced);
                MemberInfo {
                    id: ID_BASE + u64::from(e.id),
                    name: if up { name(e.node) } else { String::new() },
                    started: e.published,
                    node: name(e.node),
                    is_learner: e.learner,
                    in_sync: up && (!e.learner || synced),
                }
            })
            .collect()
    }

    pub(super) fn node_view(&self, s: &State, x: usize, y: usize) -> NodeView {
        let ny = &s.nodes[y];
        if x == y {
            return NodeView {
                name: name(y),
                online: true,
                unclean: false,
                expected_up: true,
                shutdown: false,
                standby: false,
                maintenance: false,
                last_seen: None,
                etcd: resource_state(ny),
                record: ny.record.as_ref().map(|r| to_record(y, r)),
                claim: ny.claim.map(|c| to_claim(y, &c)),
                start_failed_without_daemon: None,
            };
        }
        let me = &s.nodes[x];
        let copy = &me.cib[y];
        let base = NodeView {
            name: name(y),
            online: false,
            unclean: false,
            expected_up: true,
            shutdown: false,
            standby: false,
            maintenance: false,
            // The daemon's own note, which only the rule before read.
            last_seen: me.joins[y].map(|at| Stamp(u64::from(at))),
            etcd: ResourceState::Unknown,
            record: copy.record.as_ref().map(|r| to_record(y, r)),
            claim: copy.claim.map(|c| to_claim(y, &c)),
            start_failed_without_daemon: None,
        };
        match me.seen[y] {
            // Never seen as a member: unclean until fenced
            // (`startup-fencing`, Pacemaker's default).
            Seen::Never => NodeView {
                expected_up: false,
                unclean: true,
                ..base
            },
            Seen::Online(_) => NodeView {
                online: true,
                etcd: copy.etcd,
                ..base
            },
            Seen::Lost(_) => NodeView {
                unclean: true,
                ..base
            },
            // Pacemaker recorded the fence against the node: its last
            // membership ended (`join="down" expected="down"`).
            Seen::Fenced(_) => NodeView {
                expected_up: false,
                ..base
            },
            Seen::Left(_) => NodeView {
                expected_up: false,
                shutdown: true,
                ..base
            },
        }
    }
}

/// What a node's daemon reads of its data directory and state file.
pub(super) fn local_data(me: &Node) -> LocalData {
    match &me.data {
        None => match me.lost {
            None => LocalData {
                archives: u32::from(me.archives),
                ..LocalData::default()
            },
            Some(l) => LocalData {
                formed: l.formed,
                epoch: u64::from(l.epoch),
                cluster_id: Some(CLUSTER_ID),
                member_id: Some(ID_BASE + u64::from(l.member)),
                archives: u32::from(me.archives),
                pending_epoch: l.pending.map(u64::from),
                ..LocalData::default()
            },
        },
        Some(d) if me.state_lost => LocalData {
            exists: true,
            formed: true,
            cluster_id: Some(CLUSTER_ID),
            member_id: Some(ID_BASE + u64::from(d.member)),
            archives: u32::from(me.archives),
            state_lost: true,
            ..LocalData::default()
        },
        Some(d) => LocalData {
            exists: true,
            formed: d.formed,
            epoch: u64::from(d.recorded_epoch()),
            cluster_id: Some(CLUSTER_ID),
            member_id: Some(ID_BASE + u64::from(d.member)),
            voters: d
                .config
                .iter()
                .filter(|e| !e.learner)
                .map(|e| name(e.node))
                .collect(),
            position: Some(RaftPosition {
                term: u64::from(d.epoch),
                index: d.log.len() as u64,
            }),
            departed: d.departed,
            archives: u32::from(me.archives),
            member_dir: String::new(),
            bootstrap_token: None,
            joining: false,
            pending_epoch: d.pending.map(u64::from),
            voter_ids: d
                .config
                .iter()
                .filter(|e| !e.learner)
                .map(|e| (name(e.node), ID_BASE + u64::from(e.id)))
                .collect(),
            state_lost: false,
            added_by: added_by(d),
        },
    }
}

/// The voters a learner's data was added by, while its own member is not
/// a voter yet: the voters its membership lists (a learner's membership
/// comes from the leader that added it).
fn added_by(d: &Data) -> std::collections::BTreeMap<String, u64> {
    if d.config.iter().any(|e| e.id == d.member && !e.learner) {
        return Default::default();
    }
    d.config
        .iter()
        .filter(|e| !e.learner)
        .map(|e| (name(e.node), ID_BASE + u64::from(e.id)))
        .collect()
}

pub(super) fn resource_state(n: &Node) -> ResourceState {
    match (n.target, n.etcd, n.started) {
        (true, true, _) | (true, false, true) => ResourceState::Started,
        // A start Pacemaker has not begun: the probe found etcd not
        // running, and the history holds no start or stop of this boot.
        (true, false, false) if n.queued => ResourceState::Unknown,
        (true, false, false) => ResourceState::Starting,
        (false, true, _) => ResourceState::Stopping,
        (false, false, _) => match n.stopped_at {
            Some(at) => ResourceState::Stopped {
                at: Stamp(u64::from(at)),
            },
            None => ResourceState::Stopping,
        },
    }
}

pub(super) fn to_record(y: usize, r: &Rec) -> DataRecord {
    DataRecord {
        boot_id: boot_id(y, r.boot),
        has_data: r.has_data,
        formed: r.formed,
        epoch: u64::from(r.epoch),
        cluster_id: (r.has_data || r.lost).then_some(CLUSTER_ID),
        departed: r.departed,
        archives: u32::from(r.archives),
        bootstrap_token: None,
        lost_member: r.lost_member.map(|m| ID_BASE + u64::from(m)),
        learner: r.learner,
        joined_without_data: false,
        removed: r.removed,
        pending_epoch: r.pending.map(u64::from),
        voter_ids: r
            .voter_ids
            .iter()
            .map(|&(n, id)| (name(n), ID_BASE + u64::from(id)))
            .collect(),
        state_lost: r.state_lost,
        added_by: r
            .added_by
            .iter()
            .map(|&(n, id)| (name(n), ID_BASE + u64::from(id)))
            .collect(),
    }
}

pub(super) fn to_claim(y: usize, c: &ClaimM) -> crate::facts::Claim {
    crate::facts::Claim {
        owner: name(y),
        boot_id: boot_id(y, c.boot),
        epoch: u64::from(c.epoch),
        at: Stamp(u64::from(c.at)),
    }
}
