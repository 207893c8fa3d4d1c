//! What the daemon observes, as plain data: the input of [`crate::decide()`].
//!
//! Every field is something the daemon reads live just before it calls
//! `decide` (crm_mon XML, node attributes, etcd Status/MemberList, the local
//! data directory and state file, alert events). Nothing here is a cached
//! decision: a quorum answer is a fact about *now* (a cached answer can still
//! say "healthy" just after the peer died).
//! Time enters only as [`Stamp`] values that the daemon took from Pacemaker's
//! own records, never as a clock read inside `decide`.

use serde::{Deserialize, Serialize};

/// A point in Pacemaker's time (seconds since the epoch, as crm_mon prints
/// `last-rc-change`, fence `completed` and node join times). Only compared
/// with other stamps from the same cluster, never with a local clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp(pub u64);

/// How many voters the cluster is meant to have, and so whether fencing is
/// the only safe way to go on after a loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Two nodes with fencing: the survivor may force a one-member cluster
    /// once Pacemaker has proved the peer down.
    TwoNode,
    /// Three or more voters (or an arbiter): a majority survives any single
    /// loss, so a new cluster is never forced.
    Ha,
}

/// Why the daemon is deciding now.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// Pacemaker runs `start` for this node's instance.
    Start,
    /// Pacemaker runs `stop` for this node's instance.
    Stop,
    /// Pacemaker runs `monitor` (a probe too).
    Monitor,
    /// A clone notification (a hint only: the CIB status is the truth; during
    /// a crash-restart an instance can be in both the active and stop lists).
    Notify(Notification),
    /// Pacemaker runs `promote` (not used: the clone is not promotable).
    Promote,
    /// Pacemaker runs `demote` (not used: the clone is not promotable).
    Demote,
    /// The daemon's own loop: a timer, an alert event or a change it watches.
    /// Recovery is driven from here, not only from monitor: Pacemaker does
    /// not run a peer's recurring monitor during a transition, so recovery
    /// that waits for a monitor can wait for ever.
    Reconcile,
}

/// Clone notification data, reduced to what the decision uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Notification {
    /// Before or after the operation.
    pub phase: NotifyPhase,
    /// The operation being notified (`start`, `stop`, …).
    pub operation: String,
    /// Nodes whose instance is being started in this transition.
    pub start: Vec<String>,
    /// Nodes whose instance is being stopped in this transition.
    pub stop: Vec<String>,
}

/// `pre` or `post`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NotifyPhase {
    /// Before the operation.
    Pre,
    /// After the operation.
    Post,
}

/// Everything `decide` looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Facts {
    /// This node's Pacemaker node name.
    pub node: String,
    /// This boot's identity (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// The intended topology, from configuration.
    pub topology: Topology,
    /// Why we decide now.
    pub trigger: Trigger,
    /// Notification data Pacemaker attached to the pending start or stop
    /// (it does so for a clone with `notify=true`). A hint only.
    pub notify: Option<Notification>,
    /// Pacemaker's view from this node.
    pub pacemaker: PacemakerView,
    /// The local etcd process, read live.
    pub etcd: EtcdView,
    /// The cluster as a running member elsewhere answers it with a
    /// linearizable request, when this node's etcd does not run (or has no
    /// leader) and a peer's does. `None` when no member answered with quorum.
    pub cluster: Option<ClusterView>,
    /// The local data directory and the daemon's state file beside it.
    pub data: LocalData,
    /// Reboot-scoped markers this node's daemon owns.
    pub local: LocalMarkers,
    /// Fence results pushed by the alert agent that crm_mon may not show yet.
    /// Treated exactly like [`PacemakerView::fence_history`].
    pub alerts: Vec<FenceEvent>,
}

/// Pacemaker's view, as this node's crm_mon XML and CIB show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PacemakerView {
    /// Whether this node's corosync partition has quorum (with `two_node`
    /// and `wait_for_all`: whether both nodes were seen together since boot).
    pub quorate: bool,
    /// Every configured node, this one included.
    pub nodes: Vec<NodeView>,
    /// Fence operations (crm_mon `fence_history`), automatic ones and an
    /// operator's manual confirmation (`stonith_admin --confirm`) alike.
    pub fence_history: Vec<FenceEvent>,
    /// The cluster option `maintenance-mode=true`: Pacemaker manages no
    /// resource, so every automatic failover step is paused too.
    #[serde(default)]
    pub maintenance_mode: bool,
    /// The etcd resource is not managed (`is-managed=false`, or the
    /// resource's own `maintenance` meta attribute): an operator works on
    /// it by hand, so every automatic failover step is paused.
    #[serde(default)]
    pub etcd_unmanaged: bool,
    /// The node that wins a fence race: the only node whose fence device
    /// is configured with a delay (`pcmk_delay_base` or `pcmk_delay_max`),
    /// so that fencing it waits while it fences its peer at once. `None`
    /// when no device is delayed, or when more than one is (no node wins
    /// then). Read from Pacemaker's configuration on every gathering.
    #[serde(default)]
    pub fence_race_winner: Option<String>,
}

impl PacemakerView {
    /// Why automatic failover is paused by an operator's setting in
    /// Pacemaker, if it is: maintenance mode, an unmanaged etcd resource,
    /// or a node in maintenance. While it holds, Pacemaker neither starts,
    /// stops nor monitors etcd, and its view of etcd may be stale, so the
    /// daemon changes nothing either (no force, archive, membership change,
    /// start or stop) until the operator ends it.
    pub fn paused(&self) -> Option<String> {
        if self.maintenance_mode {
            return Some("automatic failover paused: cluster in maintenance mode".into());
        }
        let nodes: Vec<&str> = self
            .nodes
            .iter()
            .filter(|n| n.maintenance)
            .map(|n| n.name.as_str())
            .collect();
        if !nodes.is_empty() {
            return Some(format!(
                "automatic failover paused: node {} in maintenance",
                nodes.join(", ")
            ));
        }
        // Checked last: maintenance mode and a node in maintenance show
        // the resource unmanaged too, and their own reason says more.
        if self.etcd_unmanaged {
            return Some(
                "automatic failover paused: the etcd resource is unmanaged (is-managed=false)"
                    .into(),
            );
        }
        None
    }
}

/// One node as Pacemaker sees it, with the attributes its daemon publishes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// `online="true"`.
    pub online: bool,
    /// `unclean="true"`: lost without proof it is down; it must be fenced.
    pub unclean: bool,
    /// `expected_up="true"`: the cluster wants it up.
    pub expected_up: bool,
    /// `shutdown="true"`: it is leaving the cluster cleanly.
    pub shutdown: bool,
    /// `standby="true"`.
    pub standby: bool,
    /// This daemon's own wall-clock note of when the node last joined.
    /// Not evidence of anything, and no proof reads it: a clock step
    /// between the join and a fence, or the note lost or unreadable, would
    /// make a fence from before the join look newer (see
    /// [`crate::peer_down_proof`]). The daemon leaves it `None`; the model
    /// checker fills it to show what the rule that used it got wrong.
    #[serde(default)]
    pub last_seen: Option<Stamp>,
    /// `maintenance="true"`: the node is in maintenance (Pacemaker manages
    /// nothing on it), which pauses every automatic failover step.
    #[serde(default)]
    pub maintenance: bool,
    /// The etcd clone instance on that node.
    pub etcd: ResourceState,
    /// Its daemon's published record for this boot (transient attribute
    /// `etcd-warden-record`, lifetime reboot, owner: that node's daemon).
    pub record: Option<DataRecord>,
    /// Its force-new-cluster claim (transient attribute
    /// `etcd-warden-claim`, lifetime reboot, owner: that node's daemon).
    pub claim: Option<Claim>,
    /// The etcd resource whose start Pacemaker records as failed on that
    /// node because no daemon answered the agent (the daemon was down or
    /// restarting): a start failure keeps etcd off the node until the
    /// failure expires, although nothing about etcd failed.
    #[serde(default)]
    pub start_failed_without_daemon: Option<String>,
}

/// The etcd instance on a node, from the CIB's operation history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceState {
    /// Started (last start succeeded, no later stop).
    Started,
    /// A start is in flight.
    Starting,
    /// A stop is in flight.
    Stopping,
    /// A stop completed successfully at the given time: its etcd is down.
    Stopped {
        /// When the stop completed.
        at: Stamp,
    },
    /// Never started in this view, or unknown (e.g. the node is lost).
    Unknown,
}

/// One fence operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FenceEvent {
    /// The node fenced.
    pub target: String,
    /// reboot / off / on.
    pub action: FenceAction,
    /// Its result.
    pub status: FenceStatus,
    /// When it completed (absent while pending).
    pub completed: Option<Stamp>,
}

/// The fence action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FenceAction {
    /// Power-cycle.
    Reboot,
    /// Power off.
    Off,
    /// Power on (unfencing): proves nothing about being down.
    On,
}

/// The result of a fence operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FenceStatus {
    /// Done: the target was powered off or reset.
    Success,
    /// Failed: proves nothing.
    Failed,
    /// Still running.
    Pending,
}

/// What a node's daemon publishes about its data for the current boot.
/// Being a reboot-lifetime attribute, a record that is present was written
/// during the owner's current boot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataRecord {
    /// The owner's boot id.
    pub boot_id: String,
    /// Whether it has an etcd data directory.
    pub has_data: bool,
    /// Whether that data was ever part of a cluster with quorum (see
    /// [`LocalData::formed`]).
    pub formed: bool,
    /// The lineage of that data (see [`LocalData::epoch`]).
    pub epoch: u64,
    /// etcd cluster id of that data.
    pub cluster_id: Option<u64>,
    /// Whether it left the member list gracefully and has not rejoined.
    pub departed: bool,
    /// How many archived data directories it keeps.
    pub archives: u32,
    /// The `initial-cluster-token` its data was bootstrapped with, while
    /// that bootstrap has not formed a cluster yet: the peer completing the
    /// bootstrap must use the same token, or etcd derives different ids.
    #[serde(default)]
    pub bootstrap_token: Option<String>,
    /// The member id of data that is gone (see [`LocalData::lost`]): that
    /// member can never run again, so a learner listed under it must be
    /// removed before the node can join anew.
    #[serde(default)]
    pub lost_member: Option<u64>,
    /// Its data is a learner's that has not been a voter yet (see
    /// [`LocalData::learner_only`]): a learner counts for no commit, so
    /// its data may lack acknowledged writes, and a peer whose own newer
    /// data is gone must not wait on it as the holder of the data.
    #[serde(default)]
    pub learner: bool,
    /// It left the member list gracefully and its data's last quorate
    /// membership, seen live, no longer lists it (see
    /// [`LocalData::removed_by_own_leave`]): its removal was committed, so
    /// its member never votes again, even where the peer's data, whose
    /// persisted commit index may predate the removal, still lists it.
    #[serde(default)]
    pub removed: bool,
    /// Its data is gone while its state file says a join was under way
    /// (see [`LocalData::joining`]): its member was a learner that never
    /// held the cluster's data, so the state file's epoch names writes it
    /// never had.
    #[serde(default)]
    pub joined_without_data: bool,
    /// The epoch of a forced restart the owner decided and has not seen
    /// done (see [`LocalData::pending_epoch`]): its data may hold writes
    /// of that epoch, acknowledged while it ran alone.
    #[serde(default)]
    pub pending_epoch: Option<u64>,
    /// The member id of each voter its data's last quorate membership
    /// listed, by node (see [`LocalData::voter_ids`]).
    #[serde(default)]
    pub voter_ids: std::collections::BTreeMap<String, u64>,
    /// Its state file was missing while its member directory held data
    /// (see [`LocalData::state_lost`]): its epoch is unknown (published as
    /// 0) until a quorate look writes the state down again.
    #[serde(default)]
    pub state_lost: bool,
    /// While its data is a learner's that has not been a voter yet: the
    /// voters of the cluster that added it (see [`LocalData::added_by`]).
    #[serde(default)]
    pub added_by: std::collections::BTreeMap<String, u64>,
}

impl DataRecord {
    /// Whether the owner's state file says its data was part of a cluster
    /// (even if the data itself is gone now).
    pub fn had_cluster(&self) -> bool {
        self.formed || self.epoch > 0 || self.cluster_id.is_some()
    }

    /// The newest epoch whose writes the owner's data may hold: its epoch,
    /// or the epoch of a forced restart it has not seen done.
    pub fn may_hold_epoch(&self) -> u64 {
        self.epoch.max(self.pending_epoch.unwrap_or(0))
    }

    /// The owner has neither data, nor a state file naming any, nor an
    /// archive: a new machine, or one whose disks were replaced. (A node
    /// that archived its own stale data to rejoin is no new machine: its
    /// record says so until it has joined.)
    pub fn blank(&self) -> bool {
        !self.has_data && !self.had_cluster() && !self.state_lost && self.archives == 0
    }
}

/// A claim to force a new cluster. At most one node may hold one (the one-claim rule).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Claim {
    /// The node that wrote it (always the node the attribute belongs to).
    pub owner: String,
    /// The owner's boot id when it wrote it.
    pub boot_id: String,
    /// The epoch the owner will create.
    pub epoch: u64,
    /// When it was written (the attribute's CIB change time).
    pub at: Stamp,
}

/// The local etcd process.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EtcdView {
    /// No etcd process runs here.
    NotRunning,
    /// etcd runs; what it answered.
    Running(LiveEtcd),
}

/// What the local etcd answered, live and with deadlines (Status, a
/// linearizable range read, MemberList).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LiveEtcd {
    /// Its member id (u64 end to end).
    pub member_id: u64,
    /// Its cluster id.
    pub cluster_id: u64,
    /// Whether it is a learner.
    pub is_learner: bool,
    /// Status reports a leader.
    pub has_leader: bool,
    /// This member is the leader. Only the leader's daemon changes
    /// membership, so that changes are made one at a time.
    pub is_leader: bool,
    /// A linearizable read succeeded just now. Together with `has_leader`
    /// this is the quorum test; MemberList answering is not (etcd 3.4
    /// answers it from the local member without a leader).
    pub linearizable_ok: bool,
    /// The member list.
    pub members: Vec<MemberInfo>,
    /// The node holding the leave lock (see [`ClusterView::leave_lock`]).
    pub leave_lock: Option<String>,
    /// Raft term and index.
    pub position: RaftPosition,
    /// The process exists, answered before, and has not answered for this
    /// many milliseconds, at least the daemon's bound
    /// (`timeouts.hung_after_ms`): it is hung (stopped by a signal, stuck
    /// in the kernel, live-locked). The rest of this view is then the
    /// daemon's stand-in from its state file, as for any member that does
    /// not answer.
    #[serde(default)]
    pub hung_ms: Option<u64>,
}

/// A member of the etcd cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MemberInfo {
    /// Member id.
    pub id: u64,
    /// Member name (= Pacemaker node name); empty if added but never started.
    pub name: String,
    /// etcd lists client URLs for it: the member has run in a quorate
    /// cluster (it publishes them on its first start). A member of a
    /// bootstrap, or one added, that never ran has none, and so holds no
    /// entry. Read as true when absent, so that facts recorded before it
    /// existed never show a member as one that never ran.
    #[serde(default = "started_when_absent")]
    pub started: bool,
    /// The node the member's peer URL belongs to (matched on the exact URL).
    pub node: String,
    /// Whether it is a learner.
    pub is_learner: bool,
    /// For a learner: etcd reports it in sync with the leader (its own
    /// Status shows the leader's index reached, or the leader replicates to
    /// it up to its commit index). For a voter: it answers Status. Read live.
    pub in_sync: bool,
}

fn started_when_absent() -> bool {
    true
}

/// Raft term and index.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct RaftPosition {
    /// Raft term.
    pub term: u64,
    /// Raft index.
    pub index: u64,
}

/// The cluster as seen through a member that has quorum.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClusterView {
    /// Cluster id.
    pub cluster_id: u64,
    /// Its epoch (from the answering node's record).
    pub epoch: u64,
    /// Its member list.
    pub members: Vec<MemberInfo>,
    /// The node holding the leave lock (a key in etcd written with a
    /// compare-and-swap transaction), if any.
    pub leave_lock: Option<String>,
}

/// The local data directory and the daemon's state file next to it
/// (written with fsync before every change it describes).
///
/// The state file lives apart from the data directory, so `formed`,
/// `epoch`, `cluster_id` and `member_id` survive a member directory that has
/// gone missing (a data volume not mounted, a replaced disk): they are what
/// tells "this node never had data" from "this node's data is gone".
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LocalData {
    /// Where the member directory is expected (for messages only).
    #[serde(default)]
    pub member_dir: String,
    /// A member directory exists.
    pub exists: bool,
    /// The data was part of a cluster with quorum at least once: its applied
    /// index is past the bootstrap entries. A bootstrap that never reached
    /// quorum can still be completed by a peer starting `new`.
    pub formed: bool,
    /// The lineage of the data: 0 for a bootstrap, raised by every
    /// force-new-cluster, copied from the cluster when joining. A node whose
    /// epoch is lower than the cluster's holds stale data.
    pub epoch: u64,
    /// Cluster id of the data.
    pub cluster_id: Option<u64>,
    /// This node's member id in the data.
    pub member_id: Option<u64>,
    /// The voters the data's last membership lists (node names).
    pub voters: Vec<String>,
    /// The last persisted position.
    pub position: Option<RaftPosition>,
    /// The node left the member list gracefully (written before the
    /// removal is proposed; its WAL then contains its own removal, so it must
    /// never force a new cluster: etcd panics forcing from it).
    pub departed: bool,
    /// How many archived data directories are kept.
    pub archives: u32,
    /// The `initial-cluster-token` of the bootstrap that created the data,
    /// kept until the data forms a cluster.
    #[serde(default)]
    pub bootstrap_token: Option<String>,
    /// A join was started and its etcd has not run yet: the member id is
    /// the learner being joined, not data that was lost.
    #[serde(default)]
    pub joining: bool,
    /// The epoch of a forced restart this node decided and has not yet
    /// seen done: the daemon records it before it stops etcd, and it
    /// becomes [`LocalData::epoch`] only once a quorate look lists this
    /// member as the only voter (a quorate look that lists the peer too
    /// refutes it). Until then the data may be the old two-member data (a
    /// power loss before the restart) or the forced one with writes
    /// acknowledged alone, so it counts as "may hold writes of that epoch".
    #[serde(default)]
    pub pending_epoch: Option<u64>,
    /// The member id of each voter the data's last quorate membership
    /// listed, by node (written with `voters`).
    #[serde(default)]
    pub voter_ids: std::collections::BTreeMap<String, u64>,
    /// The state file was missing while the member directory held data
    /// (an OS disk reimaged, the file deleted): the cluster and member ids
    /// were read from the data's write-ahead log, but the epoch, the
    /// membership and whether the data formed a cluster are unknown, never
    /// "epoch 0, never formed". Cleared by the next quorate look.
    #[serde(default)]
    pub state_lost: bool,
    /// The member id of each voter of the cluster that added this node's
    /// member as a learner, by node, as the quorate look the join was
    /// decided on listed them (written at the join). While the data is a
    /// learner's that has not been a voter yet, everything it holds came
    /// from those voters: none of it was committed without them.
    #[serde(default)]
    pub added_by: std::collections::BTreeMap<String, u64>,
}

impl LocalData {
    /// The newest epoch whose writes this data may hold (or, when the
    /// member directory is gone, may have held): the epoch, or the epoch
    /// of a forced restart not yet seen done.
    pub fn may_hold_epoch(&self) -> u64 {
        self.epoch.max(self.pending_epoch.unwrap_or(0))
    }

    /// A forced restart to a newer epoch was decided and is not yet seen
    /// done.
    pub fn force_unconfirmed(&self) -> bool {
        self.pending_epoch.is_some_and(|p| p > self.epoch)
    }

    /// Whether the state file says this node's data was part of a cluster:
    /// it formed one, was forced or joined (an epoch, a cluster id), or was
    /// given a member id. A bootstrap over such a history would replace
    /// data that existed with an empty cluster.
    pub fn had_cluster(&self) -> bool {
        self.formed || self.epoch > 0 || self.cluster_id.is_some() || self.member_id.is_some()
    }

    /// The node left the member list gracefully and its recorded voters no
    /// longer list it: etcd answered its own removal (it answers once it
    /// has applied it), or a live look at its quorate member listed only
    /// the others. etcd applies only what is committed, so the removal is
    /// committed in the cluster's history. A join empties the voters (so
    /// an older membership never counts) and a rejoin as a voter clears
    /// the departure.
    pub fn removed_by_own_leave(&self, node: &str) -> bool {
        self.departed
            && self.exists
            && !self.voters.is_empty()
            && !self.voters.iter().any(|v| v == node)
    }

    /// The data is gone but the state file says it existed.
    pub fn lost(&self) -> bool {
        !self.exists && self.had_cluster()
    }

    /// The data is a learner's that has not been a voter yet: it joined a
    /// cluster (a cluster id) and its last membership as a voter does not
    /// list this node `node` (a join starts with none), or its join has
    /// not answered yet. Learners count for no commit, so such data may
    /// lack acknowledged writes until the member is promoted.
    pub fn learner_only(&self, node: &str) -> bool {
        self.exists
            && (self.joining
                || (self.cluster_id.is_some() && !self.voters.iter().any(|v| v == node)))
    }
}

/// Markers that live for one boot (a file under /run), owned by this node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LocalMarkers {
    /// Set while this node's member was a voter in a quorate cluster during
    /// this boot; cleared by any stop of etcd that Pacemaker can see (the
    /// peer may go on without us from then on). While it is set, the local
    /// data holds every acknowledged write, so forcing from it loses none.
    pub in_sync_boot: Option<String>,
}

impl Facts {
    /// This node's own entry in Pacemaker's view.
    pub fn me(&self) -> Option<&NodeView> {
        self.pacemaker.nodes.iter().find(|n| n.name == self.node)
    }

    /// The other configured nodes.
    pub fn others(&self) -> impl Iterator<Item = &NodeView> {
        self.pacemaker
            .nodes
            .iter()
            .filter(move |n| n.name != self.node)
    }

    /// Every fence event known, from crm_mon and from alerts.
    pub fn fence_events(&self) -> impl Iterator<Item = &FenceEvent> {
        self.pacemaker
            .fence_history
            .iter()
            .chain(self.alerts.iter())
    }

    /// Whether the in-sync marker is set for this boot.
    pub fn in_sync_this_boot(&self) -> bool {
        self.local.in_sync_boot.as_deref() == Some(self.boot_id.as_str())
    }
}

impl LiveEtcd {
    /// Quorum, from live answers only.
    pub fn quorate(&self) -> bool {
        self.has_leader && self.linearizable_ok
    }

    /// The voters in the member list.
    pub fn voters(&self) -> impl Iterator<Item = &MemberInfo> {
        self.members.iter().filter(|m| !m.is_learner)
    }
}
