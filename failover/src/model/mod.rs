//! A model of two (or three) nodes running etcd under Pacemaker, in which
//! every node's daemon is the real [`crate::decide_with`], and an explorer
//! that runs every interleaving of faults up to a bound and checks rules 1–5.
//!
//! What is modelled (see `docs/failover.md` for the full list):
//! - per node: power, boot count, Pacemaker up/down and what it wants for the
//!   etcd instance, the etcd process, the data directory (lineage epoch,
//!   member id, membership, log of write ids, known commit, leave lock,
//!   departure and removal markers), archives, the reboot-scoped in-sync
//!   marker, the claim attribute and the published record;
//! - per node: its Pacemaker view of every other node (online / lost /
//!   fenced / left / not seen), and its CIB copy of their attributes and
//!   etcd operation history, refreshed at a join and otherwise only by a
//!   separate `SyncCib` event (a delayed message);
//! - HA: three voters, and optionally a spare machine that replaces one,
//!   or a disk swap that makes a node come back empty;
//! - the network (one node may be cut off), fencing (either side of a race
//!   may win; the loser is powered off), power-on, process and daemon
//!   crashes, graceful stops, client writes (acknowledged when a quorum of the
//!   writer's membership persisted them), learner catch-up;
//! - the daemon observes and acts in two separate events, so that it can act
//!   on facts that are stale by then, exactly as a real daemon can.
//!
//! etcd is modelled by its externally visible rules: a member with quorum
//! accepts writes; membership changes need quorum and reach every connected
//! member; `--force-new-cluster` keeps the member's log (up to its known
//! commit index when the power-loss window is modelled) and
//! drops every other member; a removed member stops.

pub mod explore;

use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::decide::{Policy, decide_with};
use crate::decision::{StartMode, Step};
use crate::facts::{
    ClusterView, DataRecord, EtcdView, Facts, FenceAction, FenceEvent, FenceStatus, LiveEtcd,
    LocalData, LocalMarkers, MemberInfo, NodeView, PacemakerView, RaftPosition, ResourceState,
    Stamp, Topology, Trigger,
};
use explore::{Model, Violation};

/// Member ids as etcd makes them: above 2^53, so that any float on the way
/// would corrupt them (a rounded id names no member, so a learner would
/// never be promoted).
const ID_BASE: u64 = 0x8e9e_05c5_2164_0000;
/// The cluster id of the model's (single) bootstrap.
const CLUSTER_ID: u64 = 0x7d3a_11c0_9b20_0001;

/// How the model starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initial {
    /// Nodes powered on, no data anywhere (S1).
    Fresh,
    /// A healthy cluster: every node a voter, in sync, Pacemaker happy.
    Healthy,
}

/// The bounds and switches of one model run.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Two-node or HA.
    pub topology: Topology,
    /// Number of configured nodes (2 for two-node, 3 for HA).
    pub nodes: usize,
    /// One more machine, powered off and not configured, that a
    /// `Replace` event swaps in for a configured node (HA member
    /// replacement).
    pub spare: bool,
    /// HA: a `SwapDisk` event (once per run) powers a configured node off
    /// and gives it an empty disk (its old data kept as an archive), so
    /// that the same machine, with the same peer URL, must be replaced in
    /// the membership.
    pub disk_swap: bool,
    /// Two-node: a `CrashLosingMemberDir` event is a power loss after which
    /// the node's member directory is gone (a data volume not mounted at
    /// boot, a replaced disk) while its state file, kept elsewhere, stays.
    pub lose_member_dir: bool,
    /// Two-node: every daemon also keeps its own wall-clock note of when
    /// it saw each peer join (a file on /run, gone at power-off), as the
    /// rule before proofs came from Pacemaker's records did; a
    /// `LoseJoinRecord` event deletes a node's notes and a `ClockStepBack`
    /// event steps its clock back, so that its later notes read earlier
    /// than every fence (one fault each; `ClockStepBack` only with
    /// `clock_steps`).
    pub join_records: bool,
    /// With `join_records`: `ClockStepBack` events.
    pub clock_steps: bool,
    /// The fence history starts with a successful fence of every node,
    /// from before the run (a history keeps old fences).
    pub prior_fences: bool,
    /// Two-node: no fence device works (a BMC unreachable). The lost node
    /// is never fenced; an operator who knows it is off confirms it
    /// (`stonith_admin --confirm`, the `Confirm` event), which Pacemaker
    /// records as it records a fence.
    pub fence_fails: bool,
    /// A `Maintenance` event turns Pacemaker's `maintenance-mode` on or off
    /// (one fault each): Pacemaker starts and stops nothing meanwhile.
    pub maintenance: bool,
    /// Starting point.
    pub initial: Initial,
    /// At most this many fault events (crash, partition, etcd crash, daemon
    /// restart, graceful stop) per run.
    pub max_faults: u8,
    /// At most this many client writes per run.
    pub max_writes: u8,
    /// Model the power-loss window: a follower learns that an entry is
    /// committed only from the leader's next message, and a forced member
    /// keeps only what it knows is committed, so a leader that loses power
    /// right after acknowledging a write can take that write with it.
    pub power_loss_window: bool,
    /// Check that every state reached with at most one fault settles to a
    /// healthy cluster (all voters, one quorate group) when the faults stop.
    pub check_liveness: bool,
    /// The policy the daemons use (tests inject mutations here).
    pub policy: Policy,
    /// Rules not checked ("rule 4", …): lets a test show that a mutation
    /// caught early by one rule is also caught by a deeper one.
    pub unchecked: &'static [&'static str],
}

impl Config {
    /// Two nodes starting healthy.
    pub fn two_node() -> Config {
        Config {
            topology: Topology::TwoNode,
            nodes: 2,
            spare: false,
            disk_swap: false,
            lose_member_dir: false,
            join_records: false,
            clock_steps: false,
            prior_fences: false,
            fence_fails: false,
            maintenance: false,
            initial: Initial::Healthy,
            max_faults: 2,
            max_writes: 1,
            power_loss_window: false,
            check_liveness: true,
            policy: Policy::default(),
            unchecked: &[],
        }
    }

    /// Three voters starting healthy, no fencing.
    pub fn ha() -> Config {
        Config {
            topology: Topology::Ha,
            nodes: 3,
            spare: false,
            disk_swap: false,
            lose_member_dir: false,
            join_records: false,
            clock_steps: false,
            prior_fences: false,
            fence_fails: false,
            maintenance: false,
            initial: Initial::Healthy,
            max_faults: 1,
            max_writes: 1,
            power_loss_window: false,
            check_liveness: true,
            policy: Policy::default(),
            unchecked: &[],
        }
    }
}

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
    fn of(n: &Node) -> CibCopy {
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
    /// Pacemaker's `maintenance-mode`.
    pub maintenance: bool,
    /// A transition broke a rule that no single state shows.
    pub broken: Option<(&'static str, String)>,
}

impl std::fmt::Debug for State {
    /// One line per node, so that a counterexample reads as a table.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "cut={:?} clock={} fences={:?} acked={:?} faults={}",
            self.cut.map(name),
            self.clock,
            self.fences
                .iter()
                .map(|(t, at)| format!("{}@{at}", name(*t)))
                .collect::<Vec<_>>(),
            self.acked,
            self.faults
        )?;
        for (i, n) in self.nodes.iter().enumerate() {
            let data = match &n.data {
                None => "no data".to_string(),
                Some(d) => format!(
                    "data(epoch {} member {} config [{}] log {:?} commit {} lock {:?}{}{}{})",
                    d.epoch,
                    d.member,
                    d.config
                        .iter()
                        .map(|e| format!(
                            "{}#{}{}",
                            name(e.node),
                            e.id,
                            if e.learner { "(learner)" } else { "" }
                        ))
                        .collect::<Vec<_>>()
                        .join(" "),
                    d.log,
                    d.commit,
                    d.lock.map(name),
                    if d.departed { " departed" } else { "" },
                    if d.removed { " removed" } else { "" },
                    if d.synced { "" } else { " unsynced" },
                ),
            };
            writeln!(
                f,
                "  {}: power={} boot={} pcmk={} quorate={} target={} started={} stopped_at={:?} etcd={} in_sync={} claim={:?} archives={} lost={:?} seen={:?} pending={:?}\n      {data}",
                name(i),
                n.power,
                n.boot,
                n.pcmk,
                n.quorate,
                n.target,
                n.started,
                n.stopped_at,
                n.etcd,
                n.in_sync,
                n.claim.map(|c| (c.epoch, c.at)),
                n.archives,
                n.lost,
                n.seen,
                n.pending,
            )?;
        }
        Ok(())
    }
}

/// Environment and daemon events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// Power loss of a node (fault).
    Crash(usize),
    /// Cut one node off the network (fault).
    Partition(usize),
    /// Reconnect.
    Heal,
    /// The first node fences the second (Pacemaker's decision).
    Fence(usize, usize),
    /// Power a node on.
    PowerOn(usize),
    /// The etcd process dies (fault).
    EtcdCrash(usize),
    /// The daemon restarts, losing the step it had decided (fault).
    DaemonRestart(usize),
    /// Pacemaker stops the etcd instance for a graceful shutdown (fault).
    GracefulStop(usize),
    /// After its stop completed, the node leaves the cluster and powers off.
    Shutdown(usize),
    /// A client writes through a node.
    Write(usize),
    /// A learner catches up.
    Replicate(usize),
    /// Followers learn the leader's commit index.
    CommitSync,
    /// Attribute changes reach every connected node's CIB copy.
    SyncCib,
    /// A daemon observes and decides.
    Observe(usize),
    /// A daemon carries out the step it decided.
    Act(usize),
    /// The machine is retired for good and the spare takes its place in
    /// Pacemaker's configuration, powered on with an empty disk (fault).
    Replace(usize),
    /// HA only: the node loses power and its disk is swapped for an empty
    /// one; the old data is kept aside as an archive (fault).
    SwapDisk(usize),
    /// Two-node: the node's own notes of its peers' joins are lost (a file
    /// on /run deleted or unreadable) (fault).
    LoseJoinRecord(usize),
    /// Two-node: the node's clock steps back, so that the joins it notes
    /// from now on read earlier than every fence (fault).
    ClockStepBack(usize),
    /// An operator confirms that the second node, which is off, is down
    /// (`stonith_admin --confirm` on the first): Pacemaker records it as a
    /// fence.
    Confirm(usize, usize),
    /// Pacemaker's `maintenance-mode` is turned on or off (fault).
    Maintenance(bool),
    /// Two-node: power loss of a node whose member directory is then gone
    /// when it boots (its data volume is not mounted, or its disk was
    /// replaced), while its state file, kept elsewhere, stays (one fault).
    CrashLosingMemberDir(usize),
}

/// The two-node / HA model.
#[derive(Debug, Clone)]
pub struct EtcdModel {
    /// Bounds and switches.
    pub config: Config,
    /// Fingerprints of states (at the start of a settling round) already
    /// shown to settle. Settling is deterministic, so reaching one of them
    /// again settles the same way; this keeps the liveness check affordable.
    settled: RefCell<HashSet<u64>>,
}

fn name(i: usize) -> String {
    format!("n{}", i + 1)
}

fn boot_id(i: usize, boot: u8) -> String {
    format!("{}-boot{boot}", name(i))
}

impl EtcdModel {
    /// A model with this configuration.
    pub fn new(config: Config) -> EtcdModel {
        EtcdModel {
            config,
            settled: RefCell::new(HashSet::new()),
        }
    }

    /// Machines, the spare included.
    fn n(&self) -> usize {
        self.config.nodes + usize::from(self.config.spare)
    }

    fn configured(&self, s: &State) -> Vec<usize> {
        (0..self.n()).filter(|&i| s.nodes[i].configured).collect()
    }

    fn fresh_node(&self, boot: u8) -> Node {
        Node {
            power: true,
            boot,
            pcmk: true,
            target: true,
            started: false,
            stopped_at: None,
            quorate: false,
            etcd: false,
            data: None,
            archives: 0,
            lost: None,
            in_sync: false,
            claim: None,
            record: None,
            seen: vec![Seen::Never; self.n()],
            cib: vec![CibCopy::default(); self.n()],
            pending: None,
            configured: true,
            retired: false,
            joins: vec![None; self.n()],
            clock_behind: false,
        }
    }

    fn initial(&self) -> State {
        let n = self.config.nodes;
        let mut nodes: Vec<Node> = (0..self.n()).map(|_| self.fresh_node(1)).collect();
        for (i, node) in nodes.iter_mut().enumerate() {
            if i >= n {
                // The spare: a machine not yet in the cluster.
                node.configured = false;
                node.power = false;
                node.pcmk = false;
                node.target = false;
                continue;
            }
            node.quorate = true;
            for j in 0..n {
                if j != i {
                    node.seen[j] = Seen::Online(0);
                    if self.config.join_records {
                        node.joins[j] = Some(0);
                    }
                }
            }
        }
        // Fences from before the run: at stamp 0, no later than every join
        // the run starts from.
        let fences = if self.config.prior_fences {
            (0..n).map(|i| (i, 0)).collect()
        } else {
            Vec::new()
        };
        let mut s = State {
            nodes,
            cut: None,
            clock: 1,
            maintenance: false,
            fences,
            acked: Vec::new(),
            writes: 0,
            next_member: n as u8 + 1,
            faults: 0,
            swapped: false,
            broken: None,
        };
        if self.config.initial == Initial::Healthy {
            let config: Vec<Entry> = (0..n)
                .map(|i| Entry {
                    node: i,
                    id: i as u8 + 1,
                    learner: false,
                })
                .collect();
            for i in 0..n {
                let node = &mut s.nodes[i];
                node.data = Some(Data {
                    epoch: 0,
                    member: i as u8 + 1,
                    config: config.clone(),
                    log: Vec::new(),
                    commit: 0,
                    lock: None,
                    departed: false,
                    removed: false,
                    synced: true,
                    formed: true,
                });
                node.etcd = true;
                node.started = true;
                node.in_sync = true;
                node.record = Some(self.rec_of(node));
            }
            sync_cib(&mut s);
        }
        s
    }

    fn rec_of(&self, node: &Node) -> Rec {
        Rec {
            boot: node.boot,
            has_data: node.data.is_some(),
            formed: node.data.as_ref().is_some_and(|d| d.formed)
                || node.lost.is_some_and(|l| l.formed),
            epoch: node
                .data
                .as_ref()
                .map(|d| d.epoch)
                .or(node.lost.map(|l| l.epoch))
                .unwrap_or(0),
            departed: node.data.as_ref().is_some_and(|d| d.departed),
            archives: node.archives,
            lost: node.data.is_none() && node.lost.is_some(),
            lost_member: node
                .data
                .is_none()
                .then_some(node.lost)
                .flatten()
                .map(|l| l.member),
        }
    }

    // ---- etcd semantics -------------------------------------------------

    /// The nodes whose etcd talks to `x`'s as part of one cluster.
    fn group(&self, s: &State, x: usize) -> Group {
        let mut g = Group(0);
        let Some(dx) = running_data(s, x) else {
            return g;
        };
        for y in 0..self.n() {
            let Some(dy) = running_data(s, y) else {
                continue;
            };
            if connected(s, x, y)
                && dy.epoch == dx.epoch
                && dx.config.iter().any(|e| e.node == y && e.id == dy.member)
                && dy.config.iter().any(|e| e.node == x && e.id == dx.member)
            {
                g.0 |= 1 << y;
            }
        }
        g
    }

    /// `x`'s member is a voter whose group holds a majority of its voters.
    fn quorate(&self, s: &State, x: usize) -> bool {
        let Some(dx) = running_data(s, x) else {
            return false;
        };
        if !is_voter(dx, x) {
            return false;
        }
        let group = self.group(s, x);
        let (mut voters, mut present) = (0, 0);
        for e in dx.config.iter().filter(|e| !e.learner) {
            voters += 1;
            if group.contains(&e.node) {
                present += 1;
            }
        }
        present * 2 > voters
    }

    fn leader(&self, s: &State, x: usize) -> Option<usize> {
        if !self.quorate(s, x) {
            return None;
        }
        // Raft elects only a voter whose log is at least as long as a
        // majority's: the longest log wins here, the lowest index on a tie.
        let mut best: Option<(usize, usize)> = None;
        for y in self.group(s, x) {
            let Some(d) = running_data(s, y) else {
                continue;
            };
            if !is_voter(d, y) || !self.quorate(s, y) {
                continue;
            }
            if best.is_none_or(|(_, len)| d.log.len() > len) {
                best = Some((y, d.log.len()));
            }
        }
        best.map(|(y, _)| y)
    }

    /// Apply a committed change to every member of `x`'s group.
    fn commit_change(&self, s: &mut State, x: usize, change: impl Fn(&mut Data)) {
        for y in self.group(s, x) {
            if let Some(d) = s.nodes[y].data.as_mut() {
                change(d);
            }
        }
    }

    /// Raft catch-up and removal, applied after every event: connected
    /// voters (and caught-up learners) of a quorate group follow its leader;
    /// a member the leader's membership no longer lists is stopped.
    fn settle_etcd(&self, s: &mut State) {
        for l in 0..self.n() {
            if self.leader(s, l) != Some(l) {
                continue;
            }
            let Some(dl) = s.nodes[l].data.clone() else {
                continue;
            };
            for y in 0..self.n() {
                if y == l || !connected(s, l, y) || !s.nodes[y].etcd {
                    continue;
                }
                let quorate_y = self.quorate(s, y);
                let Some(dy) = s.nodes[y].data.as_mut() else {
                    continue;
                };
                let entry = dl.config.iter().find(|e| e.node == y && e.id == dy.member);
                match entry {
                    Some(e) if dy.epoch == dl.epoch || !quorate_y => {
                        if dy.epoch != dl.epoch {
                            // An older lineage that the leader still lists
                            // cannot exist; leave it alone.
                            continue;
                        }
                        if !e.learner || dy.synced {
                            dy.log = dl.log.clone();
                            dy.commit = dl.commit.min(dy.log.len());
                        }
                        dy.config = dl.config.clone();
                        dy.lock = dl.lock;
                    }
                    Some(_) => {}
                    None if !quorate_y => {
                        // "the member has been permanently removed": it exits.
                        s.nodes[y].etcd = false;
                    }
                    None => {}
                }
            }
        }
        for i in 0..self.n() {
            if self.quorate(s, i)
                && let Some(d) = s.nodes[i].data.as_mut()
            {
                d.formed = true;
            }
            let node = &mut s.nodes[i];
            if node.etcd && node.data.as_ref().is_none_or(|d| d.removed) {
                node.etcd = false;
            }
            if node.target && node.etcd {
                node.started = true;
            }
        }
    }

    // ---- facts ----------------------------------------------------------

    fn facts(&self, s: &State, x: usize) -> Facts {
        let me = &s.nodes[x];
        let trigger = if s.maintenance {
            Trigger::Reconcile
        } else if !me.target && me.stopped_at.is_none() {
            Trigger::Stop
        } else if me.target && !me.started {
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
                    epoch: u64::from(d.epoch),
                    members: self.members(s, d, self.group(s, y)),
                    leave_lock: d.lock.map(name),
                })
        };
        let data = match &me.data {
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
                    ..LocalData::default()
                },
            },
            Some(d) => LocalData {
                exists: true,
                formed: d.formed,
                epoch: u64::from(d.epoch),
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
            },
        };
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

    fn learner_has_leader(&self, s: &State, x: usize) -> bool {
        (0..self.n()).any(|l| self.leader(s, l) == Some(l) && self.group(s, l).contains(&x))
    }

    fn members(&self, s: &State, d: &Data, group: Group) -> Vec<MemberInfo> {
        d.config
            .iter()
            .map(|e| {
                let up = group.contains(&e.node)
                    && running_data(s, e.node).is_some_and(|dy| dy.member == e.id);
                let synced = running_data(s, e.node).is_some_and(|dy| dy.synced);
                MemberInfo {
                    id: ID_BASE + u64::from(e.id),
                    name: if up { name(e.node) } else { String::new() },
                    node: name(e.node),
                    is_learner: e.learner,
                    in_sync: up && (!e.learner || synced),
                }
            })
            .collect()
    }

    fn node_view(&self, s: &State, x: usize, y: usize) -> NodeView {
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

    // ---- carrying out steps --------------------------------------------

    fn carry_out(&self, s: &mut State, x: usize, step: &Step) {
        match step {
            Step::PublishRecord => {
                let rec = self.rec_of(&s.nodes[x]);
                s.nodes[x].record = Some(rec);
            }
            Step::StartEtcd { mode } => {
                if s.nodes[x].etcd {
                    return;
                }
                match mode {
                    StartMode::New => {
                        if s.nodes[x].data.is_some() {
                            s.broken =
                                Some(("rule 3", format!("{} bootstrapped over its data", name(x))));
                        }
                        let config = self
                            .configured(s)
                            .into_iter()
                            .map(|i| Entry {
                                node: i,
                                id: i as u8 + 1,
                                learner: false,
                            })
                            .collect();
                        s.nodes[x].lost = None;
                        s.nodes[x].data = Some(Data {
                            epoch: 0,
                            member: x as u8 + 1,
                            config,
                            log: Vec::new(),
                            commit: 0,
                            lock: None,
                            departed: false,
                            removed: false,
                            synced: true,
                            formed: false,
                        });
                        s.nodes[x].etcd = true;
                    }
                    StartMode::Existing => {
                        if s.nodes[x].data.is_some() {
                            s.nodes[x].etcd = true;
                        }
                    }
                    StartMode::Join { epoch } => {
                        let host = (0..self.n()).find(|&l| {
                            connected(s, x, l)
                                && self.leader(s, l) == Some(l)
                                && running_data(s, l).is_some_and(|d| {
                                    u64::from(d.epoch) == *epoch
                                        && d.config.iter().any(|e| e.node == x && e.learner)
                                })
                        });
                        let Some(l) = host else {
                            return;
                        };
                        let Some(dl) = s.nodes[l].data.clone() else {
                            return;
                        };
                        let Some(entry) = dl.config.iter().find(|e| e.node == x) else {
                            return;
                        };
                        if let Some(old) = &s.nodes[x].data
                            && !old.log.is_empty()
                        {
                            s.broken = Some((
                                "rule 3",
                                format!("{} joined over its data without archiving it", name(x)),
                            ));
                        }
                        s.nodes[x].lost = None;
                        s.nodes[x].data = Some(Data {
                            epoch: dl.epoch,
                            member: entry.id,
                            config: dl.config.clone(),
                            log: Vec::new(),
                            commit: 0,
                            lock: dl.lock,
                            departed: false,
                            removed: false,
                            synced: false,
                            formed: true,
                        });
                        s.nodes[x].etcd = true;
                    }
                }
            }
            Step::StopEtcd => s.nodes[x].etcd = false,
            Step::SetClaim { epoch } => {
                s.nodes[x].claim = Some(ClaimM {
                    boot: s.nodes[x].boot,
                    epoch: u8::try_from(*epoch).unwrap_or(u8::MAX),
                    at: tick(s),
                });
            }
            Step::ClearClaim => s.nodes[x].claim = None,
            Step::ForceNewCluster { epoch } => {
                let window = self.config.power_loss_window;
                let node = &mut s.nodes[x];
                let Some(d) = node.data.as_mut() else {
                    return;
                };
                if window {
                    d.log.truncate(d.commit);
                }
                d.commit = d.log.len();
                d.epoch = u8::try_from(*epoch).unwrap_or(u8::MAX);
                d.config = vec![Entry {
                    node: x,
                    id: d.member,
                    learner: false,
                }];
                d.synced = true;
                node.etcd = true;
            }
            Step::ArchiveDataDir { .. } => {
                let node = &mut s.nodes[x];
                if node.etcd || node.data.is_none() {
                    return;
                }
                node.data = None;
                node.archives = node.archives.saturating_add(1);
            }
            Step::AddLearner { node } => {
                let Some(y) = (0..self.n()).find(|&y| name(y) == *node) else {
                    return;
                };
                if self.leader(s, x) != Some(x) {
                    return;
                }
                let Some(d) = &s.nodes[x].data else {
                    return;
                };
                if d.config.iter().any(|e| e.learner || e.node == y) {
                    return;
                }
                let id = s.next_member;
                s.next_member = s.next_member.saturating_add(1);
                self.commit_change(s, x, |d| {
                    d.config.push(Entry {
                        node: y,
                        id,
                        learner: true,
                    })
                });
            }
            Step::PromoteLearner { id, .. } => {
                if self.leader(s, x) != Some(x) {
                    return;
                }
                let Some(dl) = s.nodes[x].data.clone() else {
                    return;
                };
                let Some(e) = dl
                    .config
                    .iter()
                    .find(|e| e.learner && ID_BASE + u64::from(e.id) == *id)
                    .copied()
                else {
                    return;
                };
                // etcd's own check is lenient (90 % of the leader's commit
                // index): it refuses only a learner it cannot reach.
                let group = self.group(s, x);
                if !group.contains(&e.node) {
                    return;
                }
                let learner_synced =
                    running_data(s, e.node).is_some_and(|d| d.synced && d.log == dl.log);
                if !learner_synced {
                    s.broken = Some((
                        "rule 5",
                        format!(
                            "{} promoted learner {} before it was in sync",
                            name(x),
                            name(e.node)
                        ),
                    ));
                }
                self.commit_change(s, x, |d| {
                    for entry in d.config.iter_mut() {
                        if entry.id == e.id {
                            entry.learner = false;
                        }
                    }
                });
            }
            Step::RemoveMember { id, .. } => {
                if !self.quorate(s, x) {
                    return;
                }
                let Some(d) = &s.nodes[x].data else {
                    return;
                };
                let Some(e) = d
                    .config
                    .iter()
                    .find(|e| ID_BASE + u64::from(e.id) == *id)
                    .copied()
                else {
                    return;
                };
                let group = self.group(s, x);
                self.commit_change(s, x, |d| d.config.retain(|c| c.id != e.id));
                if group.contains(&e.node)
                    && let Some(dy) = s.nodes[e.node].data.as_mut()
                    && dy.member == e.id
                {
                    dy.removed = true;
                    s.nodes[e.node].etcd = false;
                }
            }
            Step::AcquireLeaveLock => {
                if !self.quorate(s, x) || s.nodes[x].data.as_ref().is_none_or(|d| d.lock.is_some())
                {
                    return;
                }
                self.commit_change(s, x, |d| d.lock = Some(x));
            }
            Step::ReleaseLeaveLock => {
                if self.quorate(s, x) {
                    self.commit_change(s, x, |d| d.lock = None);
                }
            }
            Step::RecordDeparture => {
                if let Some(d) = s.nodes[x].data.as_mut() {
                    d.departed = true;
                }
            }
            Step::ClearDeparture => {
                if let Some(d) = s.nodes[x].data.as_mut() {
                    d.departed = false;
                }
            }
            Step::MarkInSync => s.nodes[x].in_sync = true,
            Step::ClearInSync => s.nodes[x].in_sync = false,
            // The model's leader follows from the logs, not from a choice.
            Step::TransferLeadership { .. } | Step::Wait { .. } | Step::Refuse { .. } => {}
        }
    }

    /// Observe and decide: keep the first acting step for `Act`; with none,
    /// the pending OCF action completes.
    fn observe(&self, s: &mut State, x: usize) {
        // The daemon clears the marker whenever it finds etcd not running.
        if !s.nodes[x].etcd {
            s.nodes[x].in_sync = false;
        }
        let facts = self.facts(s, x);
        let decision = decide_with(&facts, &self.config.policy);
        if s.maintenance
            && let Some(step) = decision.steps.iter().find(|st| {
                !matches!(
                    st,
                    Step::PublishRecord
                        | Step::ClearClaim
                        | Step::ClearInSync
                        | Step::Wait { .. }
                        | Step::Refuse { .. }
                )
            })
        {
            s.broken = Some((
                "maintenance",
                format!(
                    "{} decided {step:?} while Pacemaker was in maintenance mode",
                    name(x)
                ),
            ));
        }
        // A newer decision replaces the plan of an older one, as in the
        // daemon (which carries a plan out within the pass that made it):
        // with nothing to do now, nothing older is carried out later.
        s.nodes[x].pending = decision.first_act().cloned();
        match decision.first_act() {
            Some(_) => {}
            None => match facts.trigger {
                Trigger::Start if s.nodes[x].etcd => s.nodes[x].started = true,
                Trigger::Stop if !s.nodes[x].etcd => {
                    let at = tick(s);
                    s.nodes[x].stopped_at = Some(at);
                    s.nodes[x].started = false;
                }
                _ => {}
            },
        }
    }

    // ---- environment ----------------------------------------------------

    fn power_off(&self, s: &mut State, y: usize) {
        let boot = s.nodes[y].boot;
        let data = s.nodes[y].data.take();
        let archives = s.nodes[y].archives;
        let lost = s.nodes[y].lost;
        let mut node = self.fresh_node(boot);
        node.power = false;
        node.pcmk = false;
        node.data = data;
        node.archives = archives;
        node.lost = lost;
        s.nodes[y] = node;
        // Pacemaker purges the transient attributes of a node that is gone.
        for other in s.nodes.iter_mut() {
            other.cib[y] = CibCopy::default();
        }
    }

    /// Two nodes see each other join. Pacemaker syncs the CIB and attrd its
    /// values as part of the join, before it schedules anything on the
    /// joiner, so both see each other's attributes as of now.
    fn join(&self, s: &mut State, a: usize, b: usize) {
        let at = tick(s);
        s.nodes[a].seen[b] = Seen::Online(at);
        s.nodes[b].seen[a] = Seen::Online(at);
        if self.config.join_records {
            for (x, y) in [(a, b), (b, a)] {
                let note = if s.nodes[x].clock_behind { 0 } else { at };
                s.nodes[x].joins[y] = Some(note);
            }
        }
        s.nodes[a].quorate = true;
        s.nodes[b].quorate = true;
        s.nodes[a].cib[b] = CibCopy::of(&s.nodes[b]);
        s.nodes[b].cib[a] = CibCopy::of(&s.nodes[a]);
    }

    fn step(&self, s: &State, e: &Event) -> Option<State> {
        let mut s = s.clone();
        let n = self.n();
        match *e {
            Event::Crash(y) => {
                s.faults += 1;
                self.lose(&mut s, y);
                self.power_off(&mut s, y);
            }
            Event::Partition(y) => {
                s.faults += 1;
                s.cut = Some(y);
                for x in 0..n {
                    if x != y && s.nodes[x].power {
                        self.lose_between(&mut s, x, y);
                        self.lose_between(&mut s, y, x);
                    }
                }
            }
            Event::Heal => {
                s.cut = None;
                for a in 0..n {
                    for b in a + 1..n {
                        if s.nodes[a].pcmk && s.nodes[b].pcmk {
                            self.join(&mut s, a, b);
                        }
                    }
                }
            }
            Event::Fence(x, y) => {
                let at = tick(&mut s);
                s.fences.push((y, at));
                if s.nodes[y].power {
                    self.power_off(&mut s, y);
                }
                for z in 0..n {
                    if let Seen::Lost(joined) = s.nodes[z].seen[y]
                        && (z == x || connected(&s, z, x))
                    {
                        s.nodes[z].seen[y] = Seen::Fenced(joined);
                    }
                }
            }
            Event::PowerOn(y) => {
                let boot = s.nodes[y].boot.saturating_add(1);
                let data = s.nodes[y].data.take();
                let archives = s.nodes[y].archives;
                let lost = s.nodes[y].lost;
                let mut node = self.fresh_node(boot);
                node.data = data;
                node.archives = archives;
                node.lost = lost;
                s.nodes[y] = node;
                for x in 0..n {
                    if x != y && s.nodes[x].pcmk && connected(&s, x, y) {
                        self.join(&mut s, x, y);
                    }
                }
            }
            Event::EtcdCrash(y) => {
                s.faults += 1;
                s.nodes[y].etcd = false;
            }
            Event::Replace(y) => {
                s.faults += 1;
                let spare = self.config.nodes;
                self.lose(&mut s, y);
                self.power_off(&mut s, y);
                s.nodes[y].configured = false;
                s.nodes[y].retired = true;
                let boot = s.nodes[spare].boot.saturating_add(1);
                s.nodes[spare] = self.fresh_node(boot);
                for x in 0..n {
                    if x != spare && s.nodes[x].pcmk && connected(&s, x, spare) {
                        self.join(&mut s, x, spare);
                    }
                }
            }
            Event::SwapDisk(y) => {
                s.faults += 1;
                s.swapped = true;
                self.lose(&mut s, y);
                self.power_off(&mut s, y);
                let node = &mut s.nodes[y];
                if node.data.take().is_some() {
                    node.archives = node.archives.saturating_add(1);
                }
            }
            Event::CrashLosingMemberDir(y) => {
                s.faults += 1;
                self.lose(&mut s, y);
                self.power_off(&mut s, y);
                let node = &mut s.nodes[y];
                let d = node.data.take()?;
                node.lost = Some(Lost {
                    epoch: d.epoch,
                    member: d.member,
                    formed: d.formed,
                });
            }
            Event::DaemonRestart(y) => {
                s.faults += 1;
                s.nodes[y].pending = None;
            }
            Event::LoseJoinRecord(y) => {
                s.faults += 1;
                s.nodes[y].joins = vec![None; n];
            }
            Event::ClockStepBack(y) => {
                s.faults += 1;
                s.nodes[y].clock_behind = true;
            }
            Event::Confirm(x, y) => {
                // Recorded exactly as a fence is; nothing is powered off
                // (the operator confirms a node that is off already).
                let at = tick(&mut s);
                s.fences.push((y, at));
                for z in 0..n {
                    if let Seen::Lost(joined) = s.nodes[z].seen[y]
                        && (z == x || connected(&s, z, x))
                    {
                        s.nodes[z].seen[y] = Seen::Fenced(joined);
                    }
                }
            }
            Event::Maintenance(on) => {
                // Turning it on is the fault; turning it off ends it.
                if on {
                    s.faults += 1;
                }
                s.maintenance = on;
            }
            Event::GracefulStop(y) => {
                s.faults += 1;
                s.nodes[y].target = false;
                s.nodes[y].stopped_at = None;
            }
            Event::Shutdown(y) => {
                for x in 0..n {
                    if x != y
                        && let Seen::Online(joined) = s.nodes[x].seen[y]
                    {
                        s.nodes[x].seen[y] = Seen::Left(joined);
                    }
                }
                self.power_off(&mut s, y);
            }
            Event::Write(x) => {
                let group = self.group(&s, x);
                let w = s.writes + 1;
                s.writes = w;
                let window = self.config.power_loss_window;
                for y in group {
                    let voter = running_data(&s, y).is_some_and(|d| is_voter(d, y));
                    if let Some(d) = s.nodes[y].data.as_mut()
                        && (voter || d.synced)
                    {
                        d.log.push(w);
                        if !window || y == x {
                            d.commit = d.log.len();
                        }
                    }
                }
                s.acked.push(w);
            }
            Event::Replicate(y) => {
                let leader = (0..n)
                    .find(|&l| self.leader(&s, l) == Some(l) && self.group(&s, l).contains(&y))?;
                let log = s.nodes[leader].data.as_ref()?.log.clone();
                let d = s.nodes[y].data.as_mut()?;
                d.log = log;
                d.synced = true;
            }
            Event::CommitSync => {
                for node in s.nodes.iter_mut() {
                    if node.etcd
                        && let Some(d) = node.data.as_mut()
                    {
                        d.commit = d.log.len();
                    }
                }
            }
            Event::SyncCib => sync_cib(&mut s),
            Event::Observe(x) => self.observe(&mut s, x),
            Event::Act(x) => {
                let step = s.nodes[x].pending.take()?;
                self.carry_out(&mut s, x, &step);
            }
        }
        self.settle_etcd(&mut s);
        Some(s)
    }

    /// `x` loses sight of `y` without proof it is down.
    fn lose_between(&self, s: &mut State, x: usize, y: usize) {
        if let Seen::Online(at) = s.nodes[x].seen[y] {
            s.nodes[x].seen[y] = Seen::Lost(at);
        }
    }

    fn lose(&self, s: &mut State, y: usize) {
        for x in 0..self.n() {
            if x != y && connected(s, x, y) {
                self.lose_between(s, x, y);
            }
        }
    }

    fn enabled(&self, s: &State) -> Vec<Event> {
        let n = self.n();
        let mut out = Vec::new();
        let can_fault = s.faults < self.config.max_faults;
        for x in 0..n {
            let node = &s.nodes[x];
            if node.power {
                out.push(Event::Observe(x));
                if node.pending.is_some() {
                    out.push(Event::Act(x));
                }
                if self.quorate(s, x) && s.writes < self.config.max_writes {
                    out.push(Event::Write(x));
                }
                if node.etcd
                    && node
                        .data
                        .as_ref()
                        .is_some_and(|d| !is_voter(d, x) && !d.synced)
                {
                    out.push(Event::Replicate(x));
                }
                if !node.target && node.stopped_at.is_some() && !node.etcd {
                    out.push(Event::Shutdown(x));
                }
                if can_fault
                    && self.config.lose_member_dir
                    && self.config.topology == Topology::TwoNode
                    && node.data.is_some()
                {
                    out.push(Event::CrashLosingMemberDir(x));
                }
                if can_fault {
                    out.push(Event::Crash(x));
                    if node.etcd {
                        out.push(Event::EtcdCrash(x));
                    }
                    if node.pending.is_some() {
                        out.push(Event::DaemonRestart(x));
                    }
                    if node.target && node.started && !s.maintenance {
                        out.push(Event::GracefulStop(x));
                    }
                    if self.config.join_records {
                        if node.joins.iter().any(Option::is_some) {
                            out.push(Event::LoseJoinRecord(x));
                        }
                        if self.config.clock_steps && !node.clock_behind {
                            out.push(Event::ClockStepBack(x));
                        }
                    }
                    if s.cut.is_none() {
                        out.push(Event::Partition(x));
                    }
                }
                if self.config.topology == Topology::TwoNode && node.quorate {
                    for y in 0..n {
                        if !matches!(node.seen[y], Seen::Lost(_)) {
                            continue;
                        }
                        if !self.config.fence_fails {
                            out.push(Event::Fence(x, y));
                        } else if !s.nodes[y].power {
                            out.push(Event::Confirm(x, y));
                        }
                    }
                }
            } else if node.configured {
                out.push(Event::PowerOn(x));
            }
            if can_fault
                && self.config.disk_swap
                && !s.swapped
                && self.config.topology == Topology::Ha
                && node.configured
                && node.data.is_some()
            {
                out.push(Event::SwapDisk(x));
            }
            let spare_unused = self.config.spare && !s.nodes[self.config.nodes].configured;
            if can_fault && spare_unused && node.configured {
                out.push(Event::Replace(x));
            }
        }
        if s.cut.is_some() {
            out.push(Event::Heal);
        }
        if self.config.maintenance && (s.maintenance || can_fault) {
            out.push(Event::Maintenance(!s.maintenance));
        }
        if self.config.power_loss_window {
            out.push(Event::CommitSync);
        }
        out.push(Event::SyncCib);
        out
    }

    // ---- invariants -----------------------------------------------------

    fn invariants(&self, s: &State) -> Result<(), Violation> {
        match self
            .rules(s)
            .into_iter()
            .find(|v| !self.config.unchecked.contains(&v.rule))
        {
            Some(v) => Err(v),
            None => Ok(()),
        }
    }

    fn rules(&self, s: &State) -> Vec<Violation> {
        let mut out = Vec::new();
        if let Some((rule, detail)) = &s.broken {
            out.push(Violation {
                rule,
                detail: detail.clone(),
            });
        }
        let n = self.n();
        let writers: Vec<usize> = (0..n).filter(|&x| self.quorate(s, x)).collect();
        // Rule 1: all members that accept writes form one cluster.
        for &a in &writers {
            for &b in &writers {
                if a < b && !self.group(s, a).contains(&b) {
                    out.push(Violation {
                        rule: "rule 1",
                        detail: format!(
                            "split brain: {} and {} both accept writes in separate clusters",
                            name(a),
                            name(b)
                        ),
                    });
                }
            }
        }
        // Rule 2: every acknowledged write is in every writer's log.
        for &x in &writers {
            let log = running_data(s, x).map(|d| d.log.as_slice()).unwrap_or(&[]);
            if let Some(w) = s.acked.iter().find(|w| !log.contains(w)) {
                out.push(Violation {
                    rule: "rule 2",
                    detail: format!(
                        "acknowledged write {w} is missing from {}, which accepts writes",
                        name(x)
                    ),
                });
            }
        }
        // Rule 2, for the marker: a node's in-sync marker says its data
        // holds every acknowledged write, so that a force from it loses
        // none; a marker that outlives that is a force waiting to lose one.
        // Checked while etcd runs: a daemon clears the marker as soon as it
        // finds etcd not running, before it decides anything.
        // Two-node only: HA mode never forces, so it never reads the marker.
        for x in 0..n {
            let node = &s.nodes[x];
            if self.config.topology == Topology::TwoNode
                && node.in_sync
                && let Some(d) = running_data(s, x)
                && let Some(w) = s.acked.iter().find(|w| !d.log.contains(w))
            {
                out.push(Violation {
                    rule: "rule 2",
                    detail: format!(
                        "{} holds the in-sync marker but its data lacks acknowledged write {w}",
                        name(x)
                    ),
                });
            }
        }
        // Rule 5 (HA replacement): never more than one extra voter.
        let wanted = self.configured(s).len();
        for x in 0..n {
            if let Some(d) = running_data(s, x) {
                let voters = d.config.iter().filter(|e| !e.learner).count();
                if voters > wanted + 1 {
                    out.push(Violation {
                        rule: "rule 5",
                        detail: format!(
                            "{} has {voters} voters for {wanted} configured nodes",
                            name(x)
                        ),
                    });
                }
            }
        }
        // Rule 4: at most one live claim.
        let claims: Vec<String> = (0..n)
            .filter(|&x| s.nodes[x].power && s.nodes[x].claim.is_some())
            .map(name)
            .collect();
        if claims.len() > 1 {
            out.push(Violation {
                rule: "rule 4",
                detail: format!("more than one node claims force-new-cluster: {claims:?}"),
            });
        }
        // Rule 5: a voter exists (on disk), unless nothing was ever created.
        let ever = s.nodes.iter().any(|n| n.data.is_some() || n.archives > 0);
        let voter = (0..n).any(|x| {
            s.nodes[x]
                .data
                .as_ref()
                .is_some_and(|d| !d.removed && is_voter(d, x))
        });
        // A member directory that went missing (a fault, not a decision)
        // still exists for this rule: its volume or a snapshot holds it,
        // and only an operator can bring it back.
        let missing = s.nodes.iter().any(|n| n.lost.is_some());
        if ever && !voter && !missing {
            out.push(Violation {
                rule: "rule 5",
                detail: "no node holds a voting member any more".into(),
            });
        }
        out
    }

    /// Let the faults stop and the environment settle fairly: the network
    /// heals, lost nodes are fenced, every node powers on and Pacemaker wants
    /// etcd everywhere; daemons observe and act in turn until nothing
    /// changes. The cluster must then be whole.
    pub fn settle(&self, s: &State) -> Result<(), Violation> {
        let n = self.n();
        let mut s = s.clone();
        s.faults = u8::MAX; // no more faults
        let mut rounds = 0;
        let mut trail: Vec<Event> = Vec::new();
        let mut round_starts: Vec<u64> = Vec::new();
        let mut known_good = false;
        loop {
            rounds += 1;
            let fp = {
                let mut h = DefaultHasher::new();
                s.hash(&mut h);
                h.finish()
            };
            if self.settled.borrow().contains(&fp) {
                known_good = true;
                break;
            }
            round_starts.push(fp);
            let before = s.clone();
            if s.maintenance
                && let Some(next) = self.step(&s, &Event::Maintenance(false))
            {
                trail.push(Event::Maintenance(false));
                s = next;
            }
            for x in 0..n {
                for y in 0..n {
                    let ev = if self.config.fence_fails {
                        if s.nodes[y].power {
                            continue;
                        }
                        Event::Confirm(x, y)
                    } else {
                        Event::Fence(x, y)
                    };
                    if s.nodes[x].power
                        && s.nodes[x].quorate
                        && matches!(s.nodes[x].seen[y], Seen::Lost(_))
                        && self.config.topology == Topology::TwoNode
                        && let Some(next) = self.step(&s, &ev)
                    {
                        trail.push(ev);
                        s = next;
                    }
                }
            }
            if s.cut.is_some()
                && let Some(next) = self.step(&s, &Event::Heal)
            {
                trail.push(Event::Heal);
                s = next;
            }
            for x in 0..n {
                let node = &s.nodes[x];
                let ev = if !node.power && node.configured {
                    Event::PowerOn(x)
                } else if !node.target && node.stopped_at.is_some() && !node.etcd {
                    Event::Shutdown(x)
                } else {
                    continue;
                };
                if let Some(next) = self.step(&s, &ev) {
                    trail.push(ev);
                    s = next;
                }
            }
            let mut quiet = vec![Event::SyncCib, Event::CommitSync];
            for x in 0..n {
                quiet.extend([
                    Event::Replicate(x),
                    Event::Act(x),
                    Event::Observe(x),
                    Event::Act(x),
                ]);
            }
            for ev in quiet {
                if let Some(next) = self.apply(&s, &ev) {
                    trail.push(ev);
                    s = next;
                }
            }
            self.invariants(&s).map_err(|v| Violation {
                rule: v.rule,
                detail: format!(
                    "while settling, after {}: {}\nstate:\n{s:?}",
                    render_trail(&trail),
                    v.detail
                ),
            })?;
            if s == before {
                break;
            }
            if rounds > 60 {
                return Err(Violation {
                    rule: "liveness",
                    detail: "the daemons never stop acting after the faults stopped".into(),
                });
            }
        }
        if known_good {
            self.settled.borrow_mut().extend(round_starts);
            return Ok(());
        }
        let configured = self.configured(&s);
        let want = configured.len();
        let whole = configured.iter().all(|&x| {
            running_data(&s, x).is_some_and(|d| is_voter(d, x) && d.config.len() == want)
                && self.quorate(&s, x)
                && self.group(&s, x).len() == want
        });
        if !whole {
            let why: Vec<String> = configured
                .iter()
                .map(|&x| {
                    let f = self.facts(&s, x);
                    let d = decide_with(&f, &self.config.policy);
                    format!("{}: {:?} {:?}", name(x), d.outcome, d.reason)
                })
                .collect();
            return Err(Violation {
                rule: "liveness",
                detail: format!(
                    "after the faults stopped the cluster did not settle with every node a voter: {}\nsettling: {}\nstate:\n{s:?}",
                    why.join("; "),
                    render_trail(&trail)
                ),
            });
        }
        self.settled.borrow_mut().extend(round_starts);
        Ok(())
    }
}

impl Model for EtcdModel {
    type State = State;
    type Event = Event;

    fn init(&self) -> Vec<State> {
        vec![self.initial()]
    }

    fn events(&self, s: &State) -> Vec<Event> {
        self.enabled(s)
    }

    fn apply(&self, s: &State, e: &Event) -> Option<State> {
        let next = self.step(s, e)?;
        (next != *s).then_some(next)
    }

    fn check(&self, s: &State) -> Result<(), Violation> {
        self.invariants(s)
    }

    fn check_settles(&self, s: &State) -> Result<(), Violation> {
        if !self.config.check_liveness || s.faults > 1 {
            return Ok(());
        }
        self.settle(s)
    }

    fn witnesses(&self, s: &State) -> Vec<&'static str> {
        let mut out = Vec::new();
        let data = || s.nodes.iter().filter_map(|n| n.data.as_ref());
        if data().any(|d| d.epoch > 0) {
            out.push("forced a new cluster");
        }
        if (0..self.n())
            .any(|x| self.quorate(s, x) && running_data(s, x).is_some_and(|d| d.epoch > 0))
        {
            out.push("forced cluster accepts writes");
        }
        if s.nodes.iter().any(|n| n.claim.is_some()) {
            out.push("claim held");
        }
        if s.nodes.iter().any(|n| n.archives > 0) {
            out.push("data archived");
        }
        if data().any(|d| d.config.iter().any(|e| e.learner)) {
            out.push("learner added");
        }
        if s.nodes.iter().any(|n| {
            n.data.as_ref().is_some_and(|d| {
                d.epoch > 0 && d.config.len() > 1 && d.config.iter().all(|e| !e.learner)
            })
        }) {
            out.push("rejoined as voter after a force");
        }
        if data().any(|d| d.lock.is_some()) {
            out.push("leave lock held");
        }
        if data().any(|d| d.removed) {
            out.push("left the member list");
        }
        if s.nodes.iter().any(|n| n.pending.is_some()) {
            out.push("decision in flight");
        }
        if !s.fences.is_empty() {
            out.push("fenced");
        }
        if !s.acked.is_empty() {
            out.push("write acknowledged");
        }
        if s.maintenance {
            out.push("maintenance mode on");
        }
        if self.config.disk_swap {
            // A member added after the initial ones (ids 1..=nodes) that
            // votes, on a node that is not the spare: a swapped disk was
            // replaced in the membership.
            let first_new = self.config.nodes as u8 + 1;
            if data().any(|d| {
                d.config
                    .iter()
                    .any(|e| e.id >= first_new && !e.learner && e.node < self.config.nodes)
            }) {
                out.push("swapped disk rejoined as a new voter");
            }
        }
        if self.config.spare {
            let spare = self.config.nodes;
            let promoted = |d: &Data| d.config.iter().any(|e| e.node == spare && !e.learner);
            if data().any(promoted) {
                out.push("replacement promoted");
            }
            let retired: Vec<usize> = (0..self.n()).filter(|&i| s.nodes[i].retired).collect();
            if data().any(|d| promoted(d) && !d.config.iter().any(|e| retired.contains(&e.node))) {
                out.push("replaced member removed");
            }
        }
        out
    }
}

/// A set of node indexes (the model has at most eight nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Group(u8);

impl Group {
    fn contains(&self, y: &usize) -> bool {
        self.0 & (1 << y) != 0
    }

    fn len(&self) -> usize {
        self.0.count_ones() as usize
    }
}

impl Iterator for Group {
    type Item = usize;

    /// Yields the members in index order, consuming the set.
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let y = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(y)
    }
}

fn render_trail(trail: &[Event]) -> String {
    trail
        .iter()
        .map(|e| format!("{e:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn tick(s: &mut State) -> u8 {
    s.clock = s.clock.saturating_add(1);
    s.clock
}

fn connected(s: &State, a: usize, b: usize) -> bool {
    let cut = |x: usize| s.cut == Some(x);
    s.nodes[a].power && s.nodes[b].power && (a == b || (!cut(a) && !cut(b)))
}

fn running_data(s: &State, x: usize) -> Option<&Data> {
    let node = &s.nodes[x];
    if node.power && node.etcd {
        node.data.as_ref()
    } else {
        None
    }
}

fn is_voter(d: &Data, x: usize) -> bool {
    !d.removed
        && d.config
            .iter()
            .any(|e| e.node == x && e.id == d.member && !e.learner)
}

fn resource_state(n: &Node) -> ResourceState {
    match (n.target, n.etcd, n.started) {
        (true, true, _) | (true, false, true) => ResourceState::Started,
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

fn to_record(y: usize, r: &Rec) -> DataRecord {
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
    }
}

fn to_claim(y: usize, c: &ClaimM) -> crate::facts::Claim {
    crate::facts::Claim {
        owner: name(y),
        boot_id: boot_id(y, c.boot),
        epoch: u64::from(c.epoch),
        at: Stamp(u64::from(c.at)),
    }
}

fn sync_cib(s: &mut State) {
    let n = s.nodes.len();
    for x in 0..n {
        for y in 0..n {
            if x != y && connected(s, x, y) && s.nodes[x].pcmk && s.nodes[y].pcmk {
                s.nodes[x].cib[y] = CibCopy::of(&s.nodes[y]);
            }
        }
    }
}
