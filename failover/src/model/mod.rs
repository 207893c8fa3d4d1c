//! A model of two (or three) nodes running etcd under Pacemaker, in which
//! every node's daemon is the real [`crate::decide_with`], and an explorer
//! that runs every interleaving of faults up to a bound and checks the
//! split-brain, lost-write, nothing-deleted, one-claim and voter rules.
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
//!   on facts that are stale by then, exactly as a real daemon can (with
//!   `plans`, a decision's whole plan), except a forced restart, before
//!   which it gathers the facts afresh;
//! - with `serial_starts`, Pacemaker's transitions: no start or fence begins
//!   while a start is in flight, and a start ends as the daemon's start
//!   action ends.
//!
//! etcd is modelled by its externally visible rules: a member with quorum
//! accepts writes; membership changes need quorum and reach every connected
//! member; `--force-new-cluster` keeps the member's log (up to its known
//! commit index when the power-loss window is modelled) and
//! drops every other member; a removed member stops.

mod config;
mod daemon;
mod etcd;
mod events;
pub mod explore;
mod invariants;
mod liveness;
mod mutations;
mod render;
mod state;
mod view;

use std::cell::RefCell;
use std::collections::HashSet;

use explore::{Model, Violation};

pub use config::{Config, Initial};
pub use events::Event;
pub use mutations::{Mutated, Mutation, decide_with};
pub use state::{CibCopy, ClaimM, Data, Entry, Lost, Node, Rec, Seen, State};

use events::sync_cib;

/// Member ids as etcd makes them: above 2^53, so that any float on the way
/// would corrupt them (a rounded id names no member, so a learner would
/// never be promoted).
const ID_BASE: u64 = 0x8e9e_05c5_2164_0000;
/// The cluster id of the model's (single) bootstrap.
const CLUSTER_ID: u64 = 0x7d3a_11c0_9b20_0001;

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
            plan: Vec::new(),
            configured: true,
            retired: false,
            joins: vec![None; self.n()],
            clock_behind: false,
            queued: self.config.serial_starts,
            state_lost: false,
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
            replaced: false,
            broken: None,
        };
        if self.config.initial == Initial::Healthy {
            let config: Vec<Entry> = (0..n)
                .map(|i| Entry {
                    node: i,
                    id: i as u8 + 1,
                    learner: false,
                    published: true,
                })
                .collect();
            for i in 0..n {
                let node = &mut s.nodes[i];
                node.data = Some(Data::fresh(i as u8 + 1, config.clone(), true));
                node.etcd = true;
                node.started = true;
                node.in_sync = true;
            }
            for i in 0..n {
                let rec = self.rec_of(&s, i);
                s.nodes[i].record = Some(rec);
            }
            sync_cib(&mut s);
        }
        s
    }

    /// The record `x`'s daemon publishes: what `decide` expects, from the
    /// same facts.
    pub(super) fn rec_of(&self, s: &State, x: usize) -> Rec {
        let r = crate::decide::expected_record(&self.facts(s, x));
        let node = &s.nodes[x];
        let small = |v: u64| u8::try_from(v).unwrap_or(u8::MAX);
        // A record's `{node: member id}` map, by node index and small id.
        let by_index = |ids: &std::collections::BTreeMap<String, u64>| -> Vec<(usize, u8)> {
            ids.iter()
                .filter_map(|(n, id)| {
                    let y = (0..self.n()).find(|&y| name(y) == *n)?;
                    Some((y, small(id - ID_BASE)))
                })
                .collect()
        };
        Rec {
            learner: r.learner,
            removed: r.removed,
            boot: node.boot,
            has_data: r.has_data,
            formed: r.formed,
            epoch: small(r.epoch),
            departed: r.departed,
            archives: small(u64::from(r.archives)),
            lost: node.data.is_none() && node.lost.is_some(),
            lost_member: r.lost_member.map(|m| small(m - ID_BASE)),
            pending: r.pending_epoch.map(small),
            voter_ids: by_index(&r.voter_ids),
            state_lost: r.state_lost,
            added_by: by_index(&r.added_by),
        }
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
        if !self.config.check_liveness || s.faults > self.config.liveness_faults {
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
        if (0..self.n()).any(|x| {
            self.quorate(s, x)
                && running_data(s, x).is_some_and(|d| d.force_unconfirmed() && d.config.len() == 1)
        }) {
            out.push("forced cluster accepts writes before its epoch is confirmed");
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

/// With `serial_starts`: a start action is in flight in `x`'s partition
/// (Pacemaker begins no other action there until it ends).
fn start_in_flight(s: &State, x: usize) -> bool {
    (0..s.nodes.len()).any(|z| {
        let n = &s.nodes[z];
        connected(s, x, z) && n.target && !n.started && !n.queued
    })
}
