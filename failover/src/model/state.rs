//! The model's state: nodes, their data, records and claims, and what
//! each node's Pacemaker knows of the others.

use crate::decision::Step;
use crate::facts::ResourceState;

use super::view::resource_state;

/// What one node's Pacemaker knows of another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Seen {
    /// Not seen during this boot.
    Never,
    /// Online, joined at the stamp.
    Online(u8),
    /// Lost without proof (unclean); was last seen at the stamp.
    Lost(u8),
    /// Fenced after being lost; the stamp is still its last join (the
    /// fence itself is in the fence history).
    Fenced(u8),
    /// Left the cluster cleanly; the stamp is its last join.
    Left(u8),
}

/// A member entry of a membership configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The node.
    pub node: usize,
    /// Member id (small; a large base is added in the facts).
    pub id: u8,
    /// Learner?
    pub learner: bool,
    /// The member has run in a quorate cluster, which commits its name
    /// and client URLs into the membership (etcd's "publish"); until then
    /// the member list shows it without client URLs.
    pub published: bool,
}

/// A data directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Data {
    /// Lineage.
    pub epoch: u8,
    /// This node's member id.
    pub member: u8,
    /// The membership.
    pub config: Vec<Entry>,
    /// Write ids, in order.
    pub log: Vec<u8>,
    /// How much of the log this member knows to be committed.
    pub commit: usize,
    /// The leave lock holder.
    pub lock: Option<usize>,
    /// The departure marker (state file).
    pub departed: bool,
    /// The WAL holds this member's own removal.
    pub removed: bool,
    /// For a learner: caught up with the leader.
    pub synced: bool,
    /// Was part of a quorate cluster once.
    pub formed: bool,
    /// The state file's pending epoch: a forced restart decided and not
    /// yet seen done (see `LocalData::pending_epoch`).
    pub pending: Option<u8>,
    /// The state file's epoch where it differs from the data's lineage
    /// (`epoch`): a state file written down again after it was lost takes
    /// its epoch from the peers' records, which need not be the lineage's.
    pub label: Option<u8>,
}

impl Data {
    /// A forced restart to a newer epoch was decided and not seen done.
    pub(super) fn force_unconfirmed(&self) -> bool {
        self.pending.is_some_and(|p| p > self.recorded_epoch())
    }

    /// The epoch the state file names.
    pub(super) fn recorded_epoch(&self) -> u8 {
        self.label.unwrap_or(self.epoch)
    }

    /// A new member's directory at epoch 0 with an empty log: the bootstrap's
    /// (`formed`) or a model start's.
    pub(super) fn fresh(member: u8, config: Vec<Entry>, formed: bool) -> Data {
        Data {
            epoch: 0,
            member,
            config,
            log: Vec::new(),
            commit: 0,
            lock: None,
            departed: false,
            removed: false,
            synced: true,
            formed,
            pending: None,
            label: None,
        }
    }

    /// An empty member directory of member `member` in `host`'s membership
    /// and lineage: a learner's join (not yet `synced`) or a reseed (a
    /// voter whose log raft catch-up fills once the pair is quorate).
    pub(super) fn empty_member_of(host: &Data, member: u8, synced: bool) -> Data {
        Data {
            epoch: host.epoch,
            member,
            config: host.config.clone(),
            log: Vec::new(),
            commit: 0,
            lock: host.lock,
            departed: false,
            removed: false,
            synced,
            formed: true,
            pending: None,
            label: host.label,
        }
    }
}

/// A published record, as the model keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rec {
    /// Boot count of the owner when written.
    pub boot: u8,
    /// Has data.
    pub has_data: bool,
    /// Data formed a quorate cluster once.
    pub formed: bool,
    /// Epoch.
    pub epoch: u8,
    /// Departed.
    pub departed: bool,
    /// Archives.
    pub archives: u8,
    /// The state file names a cluster although the data is gone.
    pub lost: bool,
    /// The member id of that lost data.
    pub lost_member: Option<u8>,
    /// The data is a learner's that has not been a voter yet.
    pub learner: bool,
    /// Departed, and the data's membership no longer lists it.
    pub removed: bool,
    /// A forced restart's epoch the owner has not seen done.
    pub pending: Option<u8>,
    /// The member id of each voter of its data's last membership.
    pub voter_ids: Vec<(usize, u8)>,
    /// Its state file is missing beside data: the epoch is unknown.
    pub state_lost: bool,
    /// A learner's data: the voters that added it, by node.
    pub added_by: Vec<(usize, u8)>,
}

/// What the state file still says of a member directory that went missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lost {
    /// Lineage.
    pub epoch: u8,
    /// Member id.
    pub member: u8,
    /// Formed a quorate cluster once.
    pub formed: bool,
    /// A forced restart's epoch not seen done before the directory went.
    pub pending: Option<u8>,
}

/// A claim, as the model keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimM {
    /// Boot count of the owner when written.
    pub boot: u8,
    /// The epoch to create.
    pub epoch: u8,
    /// When.
    pub at: u8,
}

/// What one node's CIB says about another: refreshed at a join and by
/// `SyncCib`, so it can be stale in between.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CibCopy {
    /// Its published record.
    pub record: Option<Rec>,
    /// Its claim.
    pub claim: Option<ClaimM>,
    /// Its etcd instance, from the operation history.
    pub etcd: ResourceState,
}

impl Default for CibCopy {
    fn default() -> Self {
        CibCopy {
            record: None,
            claim: None,
            etcd: ResourceState::Unknown,
        }
    }
}

impl CibCopy {
    pub(super) fn of(n: &Node) -> CibCopy {
        CibCopy {
            record: n.record.clone(),
            claim: n.claim,
            etcd: resource_state(n),
        }
    }
}

/// One node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    /// Powered on.
    pub power: bool,
    /// Boot count.
    pub boot: u8,
    /// Pacemaker runs here.
    pub pcmk: bool,
    /// Pacemaker wants etcd started here.
    pub target: bool,
    /// Pacemaker recorded a completed start (this boot).
    pub started: bool,
    /// Pacemaker recorded a completed stop, at the stamp.
    pub stopped_at: Option<u8>,
    /// Corosync quorate (two_node + wait_for_all: both seen this boot).
    pub quorate: bool,
    /// The etcd process runs.
    pub etcd: bool,
    /// The data directory.
    pub data: Option<Data>,
    /// Archived data directories.
    pub archives: u8,
    /// The state file of a member directory that went missing.
    pub lost: Option<Lost>,
    /// The in-sync marker (reboot-scoped).
    pub in_sync: bool,
    /// Own claim attribute.
    pub claim: Option<ClaimM>,
    /// Own published record.
    pub record: Option<Rec>,
    /// Pacemaker's view of every node (own entry unused).
    pub seen: Vec<Seen>,
    /// CIB copy of every node's attributes and etcd operation history
    /// (own entry unused).
    pub cib: Vec<CibCopy>,
    /// A step decided but not yet carried out.
    pub pending: Option<Step>,
    /// With `plans`: the acting steps of the same decision after
    /// `pending`, carried out in order on the facts it was made from.
    pub plan: Vec<Step>,
    /// In Pacemaker's configuration.
    pub configured: bool,
    /// Taken out of service for good (replaced).
    pub retired: bool,
    /// The daemon's own note of when it saw each node join, in its clock
    /// (only with `join_records`; gone at power-off).
    pub joins: Vec<Option<u8>>,
    /// The node's clock was stepped back: its notes read 0, earlier than
    /// every fence.
    pub clock_behind: bool,
    /// The state file is missing beside the data (only with
    /// `lose_state_file`): the daemon reads the ids from the data, and the
    /// epoch, the membership and `formed` as unknown.
    pub state_lost: bool,
    /// With `serial_starts`: Pacemaker wants etcd started here but has not
    /// begun the start action yet (another start is in flight, or the
    /// partition has no quorum).
    pub queued: bool,
}

/// The whole system.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// The node cut off from the others, if any.
    pub cut: Option<usize>,
    /// Logical time for Pacemaker's stamps.
    pub clock: u8,
    /// Successful fences: (target, stamp).
    pub fences: Vec<(usize, u8)>,
    /// Acknowledged write ids.
    pub acked: Vec<u8>,
    /// Writes issued.
    pub writes: u8,
    /// Next member id.
    pub next_member: u8,
    /// Faults so far.
    pub faults: u8,
    /// A disk was swapped (at most once per run, like `Replace`).
    pub swapped: bool,
    /// Two-node: a machine was replaced with empty disks
    /// (`CrashReplacingDisks`): the data it held is gone by a fault.
    pub replaced: bool,
    /// Pacemaker's `maintenance-mode`.
    pub maintenance: bool,
    /// A transition broke a rule that no single state shows.
    pub broken: Option<(&'static str, String)>,
}
