//! The decision function: facts in, steps out. No I/O, no clock.
//!
//! The rules it encodes (the numbered rules are those of docs/failover.md
//! §5), each with its reason:
//! - A new cluster is forced only with Pacemaker's proof that the peer is
//!   down ([`peer_down_proof`]), never on "no leader" alone (rule 1): in a
//!   symmetric partition both nodes see no leader, and both would force.
//! - …and only from data known to hold every acknowledged write: the member
//!   was a voter with quorum during this boot and etcd has not been stopped
//!   since (the in-sync marker). Otherwise a lone node refuses and names the
//!   recover command (rules 2 and 6, scenario S8).
//! - A node that left the member list gracefully never forces: its WAL
//!   holds its own removal, and etcd panics forcing from it.
//! - The claim is written and read back before forcing; a valid peer claim
//!   makes this node yield. The loser path is a wait, never a hard error
//!   (rule 4): a fatal code on both nodes after a race stops etcd for good.
//! - Stale data is archived, never deleted, before a node joins as a learner
//!   (rule 3).
//! - Membership changes are made by the leader's daemon only, one at a time;
//!   a learner is promoted only when etcd reports it in sync; only the
//!   holder of the leave lock leaves; the last voter never leaves (rule 5):
//!   two nodes removing members at once can remove every voter, and an etcd
//!   call can report failure yet have taken effect, so every change is read
//!   back from the member list.
//! - Roles come from the live member list whenever etcd answers: a restarting
//!   sole voter that inferred its role otherwise could demote itself. Notify
//!   data only hints: during a crash-restart an instance can be listed both
//!   active and stopping, so the CIB status is the truth.

use warden_api::Outcome;

use crate::decision::{Decision, StartMode, Step};
use crate::facts::{
    Claim, DataRecord, EtcdView, Facts, FenceAction, FenceStatus, LiveEtcd, MemberInfo, NodeView,
    ResourceState, Stamp, Topology, Trigger,
};

/// A rule broken on purpose, for the model checker's tests only: each one
/// proves that the checker finds the violation it causes. Compiled only with
/// the `model` feature; production `decide` has no such switch.
#[cfg(feature = "model")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// Treat "no leader" as proof the peer is down (the bug of the shell
    /// agent podman-etcd):
    /// breaks rule 1 in a partition.
    ForceOnNoLeader,
    /// Write the claim on "no leader", without proof: breaks rule 4.
    ClaimOnNoLeader,
    /// Force without the in-sync marker: breaks rule 2.
    ForceWithoutInSync,
    /// Join as a learner without archiving the old data first: breaks rule 3.
    JoinWithoutArchive,
    /// Promote a learner that etcd does not report in sync: breaks rule 5.
    PromoteUnsynced,
    /// Leave the member list without the leave lock (still checking that the
    /// peer is not stopping): with a stale view of the peer's stop, both
    /// leave (rule 5).
    LeaveWithoutLock,
    /// Leave the member list whenever another voter answers, without the
    /// leave lock and without looking at whether the peer is stopping too:
    /// two nodes that stop at once both leave, breaking rule 5.
    LeaveWithoutArbitration,
    /// Prove a fence by comparing its completion time with this daemon's
    /// own note of the peer's last join (a wall-clock reading in a file on
    /// /run), accepting any fence when the note is missing: after the note
    /// is lost or the clock steps back, a fence from before the peer's last
    /// join proves its current loss.
    ProofFromLocalJoinRecord,
    /// Ignore Pacemaker's maintenance settings (maintenance mode, an
    /// unmanaged etcd resource, a node in maintenance): the daemon goes on
    /// starting, stopping, forcing and changing membership while the
    /// operator works by hand.
    IgnoreMaintenance,
    /// Bootstrap a new cluster whenever no node has a member directory,
    /// ignoring state files that say a cluster existed (the rule before
    /// missing data volumes were modelled): after a total outage with the
    /// data volumes unmounted, an empty cluster replaces the data.
    BootstrapOverHistory,
}

/// How `decide` behaves under the model checker's tests.
#[cfg(feature = "model")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Policy {
    /// The rule to break, if any.
    pub mutation: Option<Mutation>,
}

/// Why the peer counts as down (rule 1).
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
    /// (its state file names an epoch no newer than ours), so it runs no
    /// member and holds nothing this node lacks: no write can be
    /// acknowledged without this node, and none was acknowledged that this
    /// node has not persisted.
    HoldsNoData,
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
    down_proof(facts, peer, false)
}

fn down_proof(facts: &Facts, peer: &NodeView, local_join_record: bool) -> Option<DownProof> {
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
    #[cfg(feature = "model")]
    let proof = if local_join_record {
        proof_from_local_join_note(peer, fences)
    } else {
        proof_from_membership_end(peer, fences)
    };
    #[cfg(not(feature = "model"))]
    let proof = {
        debug_assert!(!local_join_record);
        proof_from_membership_end(peer, fences)
    };
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
fn proof_from_membership_end<'f>(
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

/// The rule before, kept for the model checker only: a fence newer than
/// this daemon's own note of the peer's last join, any fence at all when
/// the note is missing.
#[cfg(feature = "model")]
fn proof_from_local_join_note<'f>(
    peer: &NodeView,
    fences: impl Iterator<Item = &'f crate::facts::FenceEvent>,
) -> Option<DownProof> {
    let fenced = fences
        .filter_map(|e| e.completed)
        .filter(|at| peer.last_seen.is_none_or(|seen| *at > seen))
        .max();
    if let Some(at) = fenced {
        return Some(DownProof::Fenced { at });
    }
    (!peer.unclean && !peer.expected_up && peer.last_seen.is_some())
        .then_some(DownProof::CleanlyDown)
}

/// Whether `peer` is online and provably holds no data this node lacks: its
/// daemon published, this boot, that its member directory is gone, its
/// state file names our cluster (or none) at an epoch no newer than ours,
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
        && r.epoch <= d.epoch
        && (r.cluster_id.is_none() || r.cluster_id == d.cluster_id)
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
            .filter(|_| facts.data.lost() && !facts.data.joining),
    }
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

/// Decide.
pub fn decide(facts: &Facts) -> Decision {
    Decider {
        f: facts,
        #[cfg(feature = "model")]
        policy: &Policy { mutation: None },
        steps: Vec::new(),
    }
    .run()
}

/// Decide with a given policy (the model checker's tests inject mutations
/// through it).
#[cfg(feature = "model")]
pub fn decide_with(facts: &Facts, policy: &Policy) -> Decision {
    Decider {
        f: facts,
        policy,
        steps: Vec::new(),
    }
    .run()
}

/// Whether the model checker's test broke rule `$m` on purpose: without the
/// `model` feature, never (the mutations do not exist).
#[cfg(feature = "model")]
macro_rules! broken {
    ($d:expr, $m:ident) => {
        $d.policy.mutation == Some(Mutation::$m)
    };
}
#[cfg(not(feature = "model"))]
macro_rules! broken {
    ($d:expr, $m:ident) => {
        $d.unbroken()
    };
}

struct Decider<'a> {
    f: &'a Facts,
    #[cfg(feature = "model")]
    policy: &'a Policy,
    steps: Vec<Step>,
}

impl<'a> Decider<'a> {
    /// No rule is ever broken in production (see `broken!`).
    #[cfg(not(feature = "model"))]
    #[inline(always)]
    fn unbroken(&self) -> bool {
        false
    }

    fn run(&mut self) -> Decision {
        let Some(me) = self.f.me() else {
            return self.fail(format!(
                "node {} is not in Pacemaker's node list; check the node name in the configuration",
                self.f.node
            ));
        };
        if matches!(self.f.trigger, Trigger::Promote | Trigger::Demote) {
            return self.done(
                Outcome::Unimplemented,
                Some("the etcd clone is not promotable".into()),
            );
        }
        if me.record.as_ref() != Some(&expected_record(self.f)) {
            self.steps.push(Step::PublishRecord);
        }
        // A claim left from an earlier boot (attrd did not purge it) is
        // cleared by its owner before anything else.
        if let Some(c) = &me.claim
            && c.boot_id != self.f.boot_id
        {
            self.steps.push(Step::ClearClaim);
        }
        if let Some(reason) = self.f.pacemaker.paused()
            && !broken!(self, IgnoreMaintenance)
        {
            return self.paused(me, reason);
        }
        if self.f.trigger == Trigger::Stop {
            return self.stop(me);
        }
        match self.f.topology {
            Topology::TwoNode => self.two_node(me),
            Topology::Ha => self.ha(me),
        }
    }

    // ---- outcomes -------------------------------------------------------

    fn done(&mut self, outcome: Outcome, reason: Option<String>) -> Decision {
        let outcome = match self.f.trigger {
            // Notify failures are ignored by Pacemaker; never report one.
            Trigger::Notify(_) => Outcome::Success,
            _ => outcome,
        };
        Decision {
            steps: std::mem::take(&mut self.steps),
            outcome,
            reason,
        }
    }

    fn fail(&mut self, reason: String) -> Decision {
        self.steps.push(Step::Wait {
            reason: reason.clone(),
        });
        self.done(Outcome::Failed, Some(reason))
    }

    /// Waiting: what to report depends on the action and on etcd.
    fn wait(&mut self, reason: String) -> Decision {
        self.steps.push(Step::Wait {
            reason: reason.clone(),
        });
        let outcome = self.waiting_outcome();
        self.done(outcome, Some(reason))
    }

    /// A node without data that waits for the cluster to add it: the start
    /// has done its part (see `ha_wait_without_data`), and monitors report
    /// the instance degraded, not failed, so that Pacemaker neither restarts
    /// it nor waits on it.
    fn wait_to_join(&mut self, reason: String) -> Decision {
        self.steps.push(Step::Wait {
            reason: reason.clone(),
        });
        let outcome = match self.f.trigger {
            Trigger::Start => Outcome::Success,
            Trigger::Monitor | Trigger::Reconcile => Outcome::Degraded,
            _ => self.waiting_outcome(),
        };
        self.done(outcome, Some(reason))
    }

    fn refuse(&mut self, reason: String, resolve_command: String) -> Decision {
        let outcome = self.waiting_outcome();
        self.refuse_as(reason, resolve_command, outcome)
    }

    fn refuse_as(&mut self, reason: String, resolve_command: String, outcome: Outcome) -> Decision {
        // The command first: Pacemaker keeps only the first 128 characters
        // of an exit reason, and the command is what the operator needs.
        let shown = format!("resolve with '{resolve_command}': {reason}");
        self.steps.push(Step::Refuse {
            reason,
            resolve_command,
        });
        self.done(outcome, Some(shown))
    }

    /// An action that acts now. Start and stop report what it will be once
    /// done; monitor (and reconcile) describe etcd as it is now, because a
    /// monitor never acts itself: the daemon's loop carries the steps out.
    fn act(&mut self, step: Step, outcome: Outcome, reason: Option<String>) -> Decision {
        self.steps.push(step);
        let running = matches!(self.f.etcd, EtcdView::Running(_));
        let outcome = match self.f.trigger {
            Trigger::Monitor | Trigger::Reconcile if !running => self.down_outcome(),
            _ => outcome,
        };
        self.done(outcome, reason)
    }

    fn waiting_outcome(&self) -> Outcome {
        let running = matches!(self.f.etcd, EtcdView::Running(_));
        match self.f.trigger {
            // A start that is still waiting when its deadline passes failed,
            // transiently (1, never 6: 6 would stop the resource on every
            // node after a mere race). A running etcd is started.
            Trigger::Start if running => Outcome::Success,
            Trigger::Start => Outcome::Failed,
            // Running but not serving: degraded (190), not failed, so that
            // Pacemaker does not restart it (a stop would end the in-sync
            // marker) and not success either (a monitor that says healthy
            // while etcd does not serve hides the outage).
            _ if running => Outcome::Degraded,
            _ => self.down_outcome(),
        }
    }

    fn down_outcome(&self) -> Outcome {
        match self.f.me().map(|m| m.etcd) {
            Some(ResourceState::Started | ResourceState::Starting) => Outcome::Failed,
            _ => Outcome::NotRunning,
        }
    }

    // ---- maintenance ----------------------------------------------------

    /// An operator's setting in Pacemaker pauses automatic failover
    /// (maintenance mode, an unmanaged etcd resource, a node in
    /// maintenance). Pacemaker starts, stops and monitors nothing then, so
    /// its view of etcd may be stale, and the operator may change etcd by
    /// hand: no force, archive, membership change, start or stop. A stop
    /// Pacemaker does not send for an unmanaged resource can only be the
    /// operator's own (`crm_resource --force-stop`): it stops etcd in place,
    /// without leaving the member list.
    ///
    /// The in-sync marker is cleared: what the operator does by hand (a
    /// member removed, a restart with other data) is not seen as a stop,
    /// so the marker could outlive the data it describes and later prove a
    /// force over writes made meanwhile. It is set again once the member is
    /// a voter with quorum after the pause ends.
    fn paused(&mut self, me: &NodeView, reason: String) -> Decision {
        if self.f.local.in_sync_boot.is_some() {
            self.steps.push(Step::ClearInSync);
        }
        let running = matches!(self.f.etcd, EtcdView::Running(_));
        if self.f.trigger == Trigger::Stop {
            if me
                .claim
                .as_ref()
                .is_some_and(|c| c.boot_id == self.f.boot_id)
                && !self.steps.contains(&Step::ClearClaim)
            {
                self.steps.push(Step::ClearClaim);
            }
            if running {
                self.steps.push(Step::StopEtcd);
            }
            return self.done(Outcome::Success, Some(reason));
        }
        self.steps.push(Step::Wait {
            reason: reason.clone(),
        });
        let outcome = match (&self.f.etcd, &self.f.trigger) {
            (EtcdView::Running(l), _) if l.quorate() && l.voters().count() >= 2 => Outcome::Success,
            (EtcdView::Running(_), _) => Outcome::Degraded,
            (EtcdView::NotRunning, Trigger::Start) => Outcome::Failed,
            (EtcdView::NotRunning, _) => Outcome::NotRunning,
        };
        self.done(outcome, Some(reason))
    }

    // ---- stop -----------------------------------------------------------

    fn stop(&mut self, me: &NodeView) -> Decision {
        if me
            .claim
            .as_ref()
            .is_some_and(|c| c.boot_id == self.f.boot_id)
        {
            self.steps.push(Step::ClearClaim);
        }
        // From the moment Pacemaker can see this stop, the peer may go on
        // without us: our data stops being known complete.
        if self.f.local.in_sync_boot.is_some() {
            self.steps.push(Step::ClearInSync);
        }
        let EtcdView::Running(live) = &self.f.etcd else {
            return self.done(Outcome::Success, None);
        };
        if self.f.topology == Topology::TwoNode && !live.is_learner && live.quorate() {
            let others_voting = live
                .voters()
                .filter(|m| m.id != live.member_id && m.in_sync)
                .count();
            let peer_stopping = self.f.others().any(|p| {
                p.etcd == ResourceState::Stopping
                    || self
                        .f
                        .notify
                        .as_ref()
                        .is_some_and(|n| n.stop.contains(&p.name))
            });
            let lock = live.leave_lock.as_deref();
            let unarbitrated = broken!(self, LeaveWithoutArbitration);
            let may_leave = others_voting > 0 && (!peer_stopping || unarbitrated);
            let holds_lock = lock == Some(self.f.node.as_str());
            let lockless = unarbitrated || broken!(self, LeaveWithoutLock);
            if may_leave && (holds_lock || lockless) {
                if !self.f.data.departed {
                    self.steps.push(Step::RecordDeparture);
                }
                self.steps.push(Step::RemoveMember {
                    id: live.member_id,
                    node: self.f.node.clone(),
                });
                return self.done(Outcome::Success, None);
            }
            if may_leave && lock.is_none() {
                return self.act(Step::AcquireLeaveLock, Outcome::Success, None);
            }
        }
        self.act(Step::StopEtcd, Outcome::Success, None)
    }

    // ---- two nodes ------------------------------------------------------

    fn two_node(&mut self, me: &NodeView) -> Decision {
        let others: Vec<&NodeView> = self.f.others().collect();
        let [peer] = others.as_slice() else {
            return self.fail(format!(
                "the two-node topology needs exactly one peer in Pacemaker's node list, found {}",
                others.len()
            ));
        };
        match &self.f.etcd {
            EtcdView::Running(live) => self.two_node_running(live, peer),
            EtcdView::NotRunning => {
                if let Some(d) = self.alone_after_outage(peer) {
                    return d;
                }
                if let Some(d) = self.lost_data(peer) {
                    return d;
                }
                let wanted = match self.f.trigger {
                    Trigger::Start => true,
                    // Pacemaker believes it started: the daemon restarts it
                    // in place (S5) rather than wait for monitor.
                    _ => matches!(me.etcd, ResourceState::Started | ResourceState::Starting),
                };
                if wanted {
                    self.two_node_start(peer)
                } else {
                    self.done(Outcome::NotRunning, None)
                }
            }
        }
    }

    /// A node that booted alone after a total outage (S8): corosync holds
    /// quorum back until the peer has been seen (wait_for_all), and nothing
    /// shows that this node's data holds the writes the peer may have
    /// acknowledged alone after they lost each other (S7). It waits for the
    /// peer, and says so where an operator looks: a probe answers `Failed`
    /// so that the reason and the command are an exit reason in crm_mon
    /// (a "not running" probe shows none), and Pacemaker, without quorum,
    /// only stops what is not running. Kept short: Pacemaker cuts exit
    /// reasons at 128 characters, and the command must survive.
    fn alone_after_outage(&mut self, peer: &NodeView) -> Option<Decision> {
        let f = self.f;
        if f.pacemaker.quorate
            || peer.online
            || !f.data.exists
            || f.data.departed
            || f.in_sync_this_boot()
        {
            return None;
        }
        let outcome = match f.trigger {
            Trigger::Monitor | Trigger::Start => Outcome::Failed,
            _ => Outcome::NotRunning,
        };
        Some(self.refuse_as(
            format!(
                "alone since boot, {} unseen: data may lack its writes",
                peer.name
            ),
            resolve::force_new_cluster(&f.node),
            outcome,
        ))
    }

    /// This node's member directory is gone although its state file says a
    /// cluster existed, and nothing live can give the data back: no quorate
    /// cluster answers and the peer holds no data either. Starting anything
    /// would serve a cluster without the data (an empty bootstrap with the
    /// same ids as the old cluster's is indistinguishable to clients), so it
    /// refuses, names what is missing and where, and the command that
    /// restores it on the node whose state file names the newest data.
    ///
    /// While the peer holds data, or a quorate cluster answers, this node
    /// waits to join as a learner instead (see `start_without_data`).
    fn lost_data(&mut self, peer: &NodeView) -> Option<Decision> {
        let f = self.f;
        if !f.data.lost() || broken!(self, BootstrapOverHistory) {
            return None;
        }
        if f.cluster.is_some() || peer.record.as_ref().is_some_and(|r| r.has_data) {
            return None;
        }
        let d = &f.data;
        let mut reason = format!(
            "etcd data missing: no member directory at {}, but this node's state file says it was member {} of cluster {} (epoch {})",
            if d.member_dir.is_empty() {
                "the data directory"
            } else {
                d.member_dir.as_str()
            },
            d.member_id.map_or("?".into(), |m| format!("{m:x}")),
            d.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
            d.epoch
        );
        let (newest, archives) = match &peer.record {
            Some(r) if r.had_cluster() => {
                reason.push_str(&format!(
                    "; {} lost its data too (epoch {})",
                    peer.name, r.epoch
                ));
                if r.epoch > d.epoch {
                    (peer.name.as_str(), r.archives)
                } else {
                    (f.node.as_str(), d.archives)
                }
            }
            Some(_) => {
                reason.push_str(&format!("; {} holds no data", peer.name));
                (f.node.as_str(), d.archives)
            }
            None => {
                reason.push_str(&format!(
                    "; {} has not said what it holds ({})",
                    peer.name,
                    describe(peer)
                ));
                (f.node.as_str(), d.archives)
            }
        };
        reason.push_str(&format!(
            ": a new cluster would replace that data with an empty one; the newest data known was on {newest}"
        ));
        let command = resolve::restore_data(newest, archives);
        let outcome = self.held_outcome();
        Some(self.refuse_as(reason, command, outcome))
    }

    /// What to report while this node holds back without etcd for a reason
    /// only the peer or an operator can end. A start returns at once (with
    /// the reason): Pacemaker holds every other action, the peer's start
    /// among them, while a start is in flight, so a start that waited here
    /// could wait for the very action it holds up. Monitors then report the
    /// instance degraded (190) with the reason, never failed (a stop and a
    /// new start would only wait again); a probe of an instance Pacemaker
    /// has not started says it is not running.
    fn held_outcome(&self) -> Outcome {
        let started = matches!(
            self.f.me().map(|m| m.etcd),
            Some(ResourceState::Started | ResourceState::Starting)
        );
        match self.f.trigger {
            Trigger::Start => Outcome::Success,
            Trigger::Monitor | Trigger::Reconcile if started => Outcome::Degraded,
            _ => Outcome::NotRunning,
        }
    }

    /// Wait for the peer (its daemon, its etcd, its forced cluster) without
    /// holding a start up: see [`Decider::held_outcome`].
    fn hold(&mut self, reason: String) -> Decision {
        self.steps.push(Step::Wait {
            reason: reason.clone(),
        });
        let outcome = self.held_outcome();
        self.done(outcome, Some(reason))
    }

    fn two_node_start(&mut self, peer: &NodeView) -> Decision {
        let f = self.f;
        if !f.pacemaker.quorate {
            return self.wait(
                "the corosync partition has no quorum (wait_for_all: both nodes must have been seen since boot)".into(),
            );
        }
        if !f.data.exists {
            return self.start_without_data(peer);
        }
        if let Some(cluster) = &f.cluster {
            return self.start_beside_live_cluster(cluster.members.as_slice(), cluster.cluster_id);
        }
        if f.data.departed {
            if let Some(proof) = peer_down_proof(f, peer) {
                return self.refuse(
                    format!(
                        "this node left the member list gracefully, so its data ends with its own removal and it can never form a cluster alone; peer {} is down ({proof})",
                        peer.name
                    ),
                    resolve::keep_data_of(&peer.name),
                );
            }
            return self.hold(format!(
                "this node left the member list gracefully and never forces a new cluster; waiting for {} to start etcd",
                peer.name
            ));
        }
        // The peer is up but its daemon has not said what data it holds
        // yet: after a total outage its data may be the newer one (it went
        // on alone, S7). Starting ours first in the old membership could
        // let the older history lead. Its record comes within seconds.
        if peer.online && peer.record.is_none() {
            return self.hold(format!(
                "waiting for {}'s daemon to publish its record (its data may be newer)",
                peer.name
            ));
        }
        if let Some(r) = &peer.record
            && r.has_data
        {
            if r.epoch > f.data.epoch {
                return self.archive(format!(
                    "local data has epoch {} but {} holds epoch {}: it is stale",
                    f.data.epoch, peer.name, r.epoch
                ));
            }
            if r.epoch == f.data.epoch
                && r.cluster_id.is_some()
                && f.data.cluster_id.is_some()
                && r.cluster_id != f.data.cluster_id
            {
                return self.refuse(
                    format!(
                        "divergent histories: this node and {} both hold epoch {} data of different clusters ({:?} vs {:?})",
                        peer.name, r.epoch, f.data.cluster_id, r.cluster_id
                    ),
                    resolve::keep_data_of(&f.node),
                );
            }
        }
        // The peer is forcing a new cluster from its data: starting ours in
        // the old membership could re-form a quorum with the peer just before
        // its forced restart. Wait; once its cluster runs, this node's data
        // is stale and is archived. (A claim written before this node joined
        // reaches it with the CIB at join; one written after it joined was
        // written seeing it online, so the peer does not force.)
        if let Some(c) = &peer.claim
            && claim_is_valid(f, peer, c)
        {
            return self.hold(format!(
                "{} holds the force-new-cluster claim (epoch {}); waiting for its cluster to join it",
                peer.name, c.epoch
            ));
        }
        // Our data is current: start the member from it. Alone it has no
        // quorum unless it is the sole voter; the running branch takes it
        // from there (and forces only with proof).
        self.act(
            Step::StartEtcd {
                mode: StartMode::Existing,
            },
            Outcome::Success,
            None,
        )
    }

    fn start_without_data(&mut self, peer: &NodeView) -> Decision {
        let f = self.f;
        if let Some(cluster) = &f.cluster {
            return match cluster.members.iter().find(|m| m.node == f.node) {
                // The learner is this node's own member whose data is gone:
                // etcd cannot run it again from an empty directory (the
                // leader would send it entries past what it holds).
                Some(m)
                    if m.is_learner
                        && f.data.lost()
                        && !f.data.joining
                        && f.data.member_id == Some(m.id) =>
                {
                    self.hold(format!(
                        "the cluster lists this node's old learner {:x}, whose data is gone: waiting for the leader on {} to remove it and add this node anew",
                        m.id, peer.name
                    ))
                }
                Some(m) if m.is_learner => self.act(
                    Step::StartEtcd {
                        mode: StartMode::Join {
                            epoch: cluster.epoch,
                        },
                    },
                    Outcome::Success,
                    None,
                ),
                Some(m) => self.refuse(
                    format!(
                        "this node has no data but the cluster lists it as voter {:x}",
                        m.id
                    ),
                    resolve::keep_data_of(&peer.name),
                ),
                None => self.hold(format!(
                    "waiting for the voter on {} to add this node as a learner",
                    peer.name
                )),
            };
        }
        let history = f.data.had_cluster() && !broken!(self, BootstrapOverHistory);
        match &peer.record {
            None => self.hold(format!(
                "waiting for {}'s daemon to publish its record",
                peer.name
            )),
            // The peer bootstrapped (`new`) but never reached quorum without
            // us: starting `new` with the same initial cluster completes that
            // bootstrap. Nothing was ever committed, so nothing can be lost.
            Some(r)
                if r.has_data
                    && !r.formed
                    && r.epoch == 0
                    && r.archives == 0
                    && f.data.archives == 0
                    && !history
                    && peer.online =>
            {
                self.act(
                    Step::StartEtcd {
                        mode: StartMode::New,
                    },
                    Outcome::Success,
                    None,
                )
            }
            Some(r) if r.has_data => self.hold(format!(
                "{} holds the data; waiting for its etcd to start so that this node can join",
                peer.name
            )),
            // The peer's data is gone although its state file says a
            // cluster existed (its own daemon refuses and says where): a
            // bootstrap here would replace that data with an empty cluster.
            Some(r) if r.had_cluster() && !broken!(self, BootstrapOverHistory) => {
                let command = resolve::restore_data(&peer.name, r.archives);
                let outcome = self.held_outcome();
                self.refuse_as(
                    format!(
                        "no etcd data here, and {} lost its data (its state file names cluster {} at epoch {}): a new cluster would replace that data with an empty one; the newest data known was on {}",
                        peer.name,
                        r.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
                        r.epoch,
                        peer.name
                    ),
                    command,
                    outcome,
                )
            }
            Some(r) if r.archives > 0 || f.data.archives > 0 => self.refuse(
                "no node has live data, but archived data exists: a fresh bootstrap would lose it"
                    .into(),
                resolve::restore_archive(if f.data.archives > 0 {
                    &f.node
                } else {
                    &peer.name
                }),
            ),
            Some(_) if peer.online => self.act(
                Step::StartEtcd {
                    mode: StartMode::New,
                },
                Outcome::Success,
                None,
            ),
            Some(_) => self.hold(format!(
                "fresh bootstrap: waiting for {} to be online",
                peer.name
            )),
        }
    }

    fn start_beside_live_cluster(&mut self, members: &[MemberInfo], cluster_id: u64) -> Decision {
        let f = self.f;
        let mine = f
            .data
            .member_id
            .and_then(|id| members.iter().find(|m| m.id == id))
            .filter(|_| f.data.cluster_id == Some(cluster_id));
        match mine {
            Some(m) => {
                if f.data.departed && !m.is_learner {
                    self.steps.push(Step::ClearDeparture);
                }
                self.act(
                    Step::StartEtcd {
                        mode: StartMode::Existing,
                    },
                    Outcome::Success,
                    None,
                )
            }
            None => self.archive(format!(
                "member {:x} of this node's data is not in the running cluster",
                f.data.member_id.unwrap_or(0)
            )),
        }
    }

    /// Archive stale data (rule 3); the next decision joins as a learner.
    fn archive(&mut self, reason: String) -> Decision {
        if broken!(self, JoinWithoutArchive)
            && let Some(cluster) = &self.f.cluster
            && cluster
                .members
                .iter()
                .any(|m| m.node == self.f.node && m.is_learner)
        {
            let epoch = cluster.epoch;
            return self.act(
                Step::StartEtcd {
                    mode: StartMode::Join { epoch },
                },
                Outcome::Success,
                None,
            );
        }
        if broken!(self, JoinWithoutArchive) {
            return self.wait("waiting to be added as a learner".into());
        }
        let outcome = self.waiting_outcome();
        self.act(Step::ArchiveDataDir { reason }, outcome, None)
    }

    fn two_node_running(&mut self, live: &LiveEtcd, peer: &NodeView) -> Decision {
        let f = self.f;
        if live.is_learner {
            let reason = if live.quorate() {
                "learner catching up; the voter promotes it once etcd reports it in sync".into()
            } else {
                format!(
                    "learner not in contact with a leader (receiving the data, or the leader is gone): waiting for the voter on {}",
                    peer.name
                )
            };
            return self.wait(reason);
        }
        if live.quorate() {
            return self.two_node_quorate(live, peer);
        }
        let peer_votes = live.voters().any(|m| m.node == peer.name);
        if !peer_votes {
            return self.wait("etcd has no leader yet (the sole voter is electing itself)".into());
        }
        // The peer went on without this node: its data has a newer epoch
        // (it forced a cluster after Pacemaker proved this node down), so
        // the member running here, without quorum, holds a stale history
        // that waits for a peer member that no longer exists. Stop it (the
        // data stays); the next decision archives it and joins the peer's
        // cluster as a learner.
        if let Some(r) = &peer.record
            && peer.online
            && r.has_data
            && r.epoch > f.data.epoch
        {
            let outcome = self.waiting_outcome();
            return self.act(
                Step::StopEtcd,
                outcome,
                Some(format!(
                    "{} holds epoch {} data and this node epoch {}: stopping the stale member to rejoin as a learner",
                    peer.name, r.epoch, f.data.epoch
                )),
            );
        }
        let mut proof = down_proof(f, peer, broken!(self, ProofFromLocalJoinRecord));
        if proof.is_none() && peer_holds_no_data(f, peer) {
            proof = Some(DownProof::HoldsNoData);
        }
        if proof.is_none() && broken!(self, ForceOnNoLeader) {
            proof = Some(DownProof::NoLeaderOnly);
        }
        let Some(proof) = proof else {
            let own_claim = f.me().and_then(|m| m.claim.as_ref());
            // The proof is gone (the peer is back) before we forced: give the
            // claim up, or the peer would wait for it forever.
            if let Some(c) = own_claim
                && c.boot_id == f.boot_id
                && f.data.epoch < c.epoch
            {
                self.steps.push(Step::ClearClaim);
            }
            if broken!(self, ClaimOnNoLeader) && own_claim.is_none() {
                let epoch = self.next_epoch(peer);
                self.steps.push(Step::SetClaim { epoch });
            }
            return self.wait(format!(
                "etcd has no quorum; peer {} is {}: waiting for Pacemaker to fence it or for it to return",
                peer.name,
                describe(peer)
            ));
        };
        self.force_path(proof, peer)
    }

    fn next_epoch(&self, peer: &NodeView) -> u64 {
        let peer_epoch = peer.record.as_ref().map_or(0, |r| r.epoch);
        self.f.data.epoch.max(peer_epoch) + 1
    }

    fn force_path(&mut self, proof: DownProof, peer: &NodeView) -> Decision {
        let f = self.f;
        if f.data.departed {
            return self.refuse(
                format!(
                    "peer {} is down ({proof}) but this node left the member list gracefully, so it never forces a new cluster",
                    peer.name
                ),
                resolve::keep_data_of(&f.node),
            );
        }
        // A peer without data proves only that no other member runs: after a
        // total outage this node's data holds every acknowledged entry, but
        // the commit index it persisted may lag its log (etcd does not sync
        // a commit-index change on its own, and a power loss takes what was
        // not synced), and a forced restart drops every entry past it. Only
        // the in-sync marker (etcd ran as a quorate voter since and was
        // stopped cleanly before the force) makes the data complete.
        if proof == DownProof::HoldsNoData
            && !f.in_sync_this_boot()
            && !broken!(self, ForceWithoutInSync)
        {
            return self.refuse(
                format!(
                    "{} runs no member and its data is gone, so this node holds the only data, but after a power loss its last acknowledged writes may lie past the commit index it persisted, which a forced restart drops",
                    peer.name
                ),
                resolve::force_new_cluster(&f.node),
            );
        }
        let complete = f.in_sync_this_boot();
        if !complete && !broken!(self, ForceWithoutInSync) {
            return self.refuse(
                format!(
                    "peer {} is down ({proof}), but this node has not been a voter with quorum since it booted (or its etcd was stopped since), so its data may lack writes {} acknowledged",
                    peer.name, peer.name
                ),
                resolve::force_new_cluster(&f.node),
            );
        }
        if let Some(c) = &peer.claim
            && claim_is_valid(f, peer, c)
        {
            return self.wait(format!(
                "{} holds the force-new-cluster claim (epoch {}); this node yields",
                peer.name, c.epoch
            ));
        }
        let reason = format!(
            "recovering quorum alone: peer {} is down ({proof})",
            peer.name
        );
        let own = f
            .me()
            .and_then(|m| m.claim.as_ref())
            .filter(|c| c.boot_id == f.boot_id);
        match own {
            None => {
                let epoch = self.next_epoch(peer);
                self.act(Step::SetClaim { epoch }, Outcome::Degraded, Some(reason))
            }
            Some(c) => {
                let epoch = c.epoch;
                self.act(
                    Step::ForceNewCluster { epoch },
                    Outcome::Degraded,
                    Some(reason),
                )
            }
        }
    }

    fn two_node_quorate(&mut self, live: &LiveEtcd, peer: &NodeView) -> Decision {
        let f = self.f;
        if !f.in_sync_this_boot() {
            self.steps.push(Step::MarkInSync);
        }
        if f.me().is_some_and(|m| m.claim.is_some()) && !self.steps.contains(&Step::ClearClaim) {
            self.steps.push(Step::ClearClaim);
        }
        if f.data.departed {
            self.steps.push(Step::ClearDeparture);
        }
        // Only the holder releases the leave lock, once it is a voter with
        // quorum again outside a stop. Anyone else releasing it on a stale
        // view could free it while the holder is still leaving, and let a
        // second node leave after it (the checker found exactly that).
        if live.leave_lock.as_deref() == Some(f.node.as_str()) {
            self.steps.push(Step::ReleaseLeaveLock);
        }
        if live.is_leader {
            self.membership_changes(live, std::slice::from_ref(&peer));
            self.keep_leader_on_fence_race_winner(live, peer);
        }
        let voters = live.voters().count();
        let learner = live.members.iter().find(|m| m.is_learner);
        let (outcome, reason) = match (voters, learner) {
            (2, None) => (Outcome::Success, None),
            (_, Some(l)) => (
                Outcome::Degraded,
                Some(format!(
                    "running as the only voter; learner on {} is {}",
                    l.node,
                    if l.in_sync { "in sync" } else { "catching up" }
                )),
            ),
            _ => (
                Outcome::Degraded,
                Some(format!(
                    "running as the only voter; peer {} is {}",
                    peer.name,
                    describe(peer)
                )),
            ),
        };
        self.done(outcome, reason)
    }

    /// Leader only, one change per decision.
    fn membership_changes(&mut self, live: &LiveEtcd, peers: &[&NodeView]) {
        // A learner whose node says its data is gone never catches up:
        // remove it, so that the node can be added anew.
        if let Some(l) = live.members.iter().find(|m| {
            m.is_learner
                && !m.in_sync
                && peers.iter().any(|p| {
                    p.name == m.node
                        && p.online
                        && p.record
                            .as_ref()
                            .is_some_and(|r| !r.has_data && r.lost_member == Some(m.id))
                })
        }) {
            self.steps.push(Step::RemoveMember {
                id: l.id,
                node: l.node.clone(),
            });
            return;
        }
        if let Some(l) = live.members.iter().find(|m| m.is_learner) {
            if l.in_sync || broken!(self, PromoteUnsynced) {
                self.steps.push(Step::PromoteLearner {
                    id: l.id,
                    node: l.node.clone(),
                });
            }
            // etcd 3.4/3.5 allow one learner at a time.
            return;
        }
        if let Some(p) = peers
            .iter()
            .find(|p| wants_to_join(p) && !live.members.iter().any(|m| m.node == p.name))
        {
            self.steps.push(Step::AddLearner {
                node: p.name.clone(),
            });
        }
    }

    /// A follower learns that an entry is committed only from the leader's
    /// next message, after the leader has already acknowledged the write:
    /// if a partition cuts that message off and the follower then forces a
    /// new cluster, etcd drops the entry as uncommitted and reuses its
    /// revision. The leader itself knows every entry it committed. So in a
    /// healthy pair the leader belongs on the node that wins fence races
    /// (the one that forces after a partition): a leader elsewhere (an
    /// election after a restart, or moved by an operator) hands its
    /// leadership over. Only with both members voting and the peer's
    /// member answering (the transfer waits for it to catch up), and never
    /// beside a membership change.
    fn keep_leader_on_fence_race_winner(&mut self, live: &LiveEtcd, peer: &NodeView) {
        let f = self.f;
        if f.pacemaker.fence_race_winner.as_deref() != Some(peer.name.as_str())
            || f.trigger != Trigger::Reconcile
            || !peer.online
            || peer.etcd != ResourceState::Started
            || self.steps.iter().any(Step::changes_membership)
        {
            return;
        }
        let voters: Vec<&MemberInfo> = live.voters().collect();
        let Some(target) = voters
            .iter()
            .find(|m| m.node == peer.name && m.id != live.member_id && m.in_sync)
        else {
            return;
        };
        if voters.len() == 2 && !live.members.iter().any(|m| m.is_learner) {
            self.steps.push(Step::TransferLeadership {
                id: target.id,
                node: target.node.clone(),
            });
        }
    }

    // ---- HA -------------------------------------------------------------

    fn ha(&mut self, me: &NodeView) -> Decision {
        let f = self.f;
        match &f.etcd {
            EtcdView::Running(live) => {
                if live.is_learner {
                    return self.ha_running_but(
                        "learner catching up; the leader promotes it once etcd reports it in sync"
                            .into(),
                    );
                }
                if !live.quorate() {
                    return self.ha_running_but(
                        "etcd has no quorum; waiting for a majority of voters (HA mode never forces a new cluster)"
                            .into(),
                    );
                }
                if live.is_leader {
                    self.ha_membership(live);
                }
                let configured = f.pacemaker.nodes.len();
                let voters = live.voters().count();
                let silent: Vec<&str> = live
                    .voters()
                    .filter(|m| !m.in_sync && m.id != live.member_id)
                    .map(|m| m.node.as_str())
                    .collect();
                if !silent.is_empty() {
                    // Quorum holds, but one more loss would end it: say so.
                    self.done(
                        Outcome::Degraded,
                        Some(format!(
                            "{voters} voters, {} of them not answering: {}",
                            silent.len(),
                            silent.join(", ")
                        )),
                    )
                } else if voters == configured && live.members.len() == configured {
                    self.done(Outcome::Success, None)
                } else {
                    self.done(
                        Outcome::Degraded,
                        Some(format!(
                            "{voters} voters and {} members for {configured} configured nodes",
                            live.members.len()
                        )),
                    )
                }
            }
            EtcdView::NotRunning => {
                let wanted = f.trigger == Trigger::Start
                    || matches!(me.etcd, ResourceState::Started | ResourceState::Starting);
                if !wanted {
                    return self.done(Outcome::NotRunning, None);
                }
                if !f.pacemaker.quorate {
                    return self.wait("the corosync partition has no quorum".into());
                }
                if f.data.exists {
                    if let Some(c) = &f.cluster {
                        return self.start_beside_live_cluster(&c.members, c.cluster_id);
                    }
                    // A majority forms from existing members; no forcing.
                    return self.act(
                        Step::StartEtcd {
                            mode: StartMode::Existing,
                        },
                        Outcome::Success,
                        None,
                    );
                }
                if let Some(c) = &f.cluster
                    && c.members.iter().any(|m| m.node == f.node && m.is_learner)
                {
                    let step = Step::StartEtcd {
                        mode: StartMode::Join { epoch: c.epoch },
                    };
                    if matches!(f.trigger, Trigger::Monitor | Trigger::Reconcile) {
                        // Pacemaker holds the instance started (its start
                        // returned while waiting to be added) and the loop is
                        // about to start etcd: "failed" here would have it
                        // stopped and started again in the middle of the join.
                        self.steps.push(step);
                        return self.done(
                            Outcome::Degraded,
                            Some("added to the cluster as a learner: starting etcd to join".into()),
                        );
                    }
                    return self.act(step, Outcome::Success, None);
                }
                if f.cluster.is_some() {
                    return self.ha_wait_without_data();
                }
                let all_fresh = f.others().all(|n| {
                    n.online
                        && n.record
                            .as_ref()
                            .is_some_and(|r| !r.has_data && r.archives == 0)
                });
                if all_fresh && f.data.archives == 0 {
                    self.act(
                        Step::StartEtcd {
                            mode: StartMode::New,
                        },
                        Outcome::Success,
                        None,
                    )
                } else {
                    self.ha_wait_without_data()
                }
            }
        }
    }

    /// Membership changes in HA mode, made by the leader's daemon only, one
    /// change per decision, and none while a member that stays is unhealthy.
    ///
    /// Two kinds of replacement:
    /// - by a new machine (the old node left Pacemaker's configuration):
    ///   learner → promote → remove the old voter, so at most one extra voter
    ///   during the change;
    /// - by the same machine with an empty disk (its daemon publishes "no
    ///   data" this boot): etcd refuses a second member with the same peer
    ///   URL, so the old member, which can never vote again without its data,
    ///   is removed first, then the node joins as a new learner and is
    ///   promoted. Removing a member that cannot vote costs no fault
    ///   tolerance: a majority of the remaining voters is the same set of
    ///   live members as before.
    fn ha_membership(&mut self, live: &LiveEtcd) {
        let f = self.f;
        let configured = |node: &str| f.pacemaker.nodes.iter().any(|n| n.name == node);
        let lost_data = |m: &MemberInfo| ha_member_without_data(f, live, m);
        let staying_unhealthy = live
            .voters()
            .find(|m| configured(&m.node) && !m.in_sync && m.id != live.member_id && !lost_data(m));
        if staying_unhealthy.is_some() {
            return;
        }
        if let Some(l) = live.members.iter().find(|m| m.is_learner) {
            // Promote only once the learner's node says it holds data: then
            // no stale "no data" record of that node can later make a voter
            // of it look like a member whose data is gone.
            let has_data = f
                .pacemaker
                .nodes
                .iter()
                .find(|n| n.name == l.node)
                .and_then(|n| n.record.as_ref())
                .is_some_and(|r| r.has_data);
            if (l.in_sync && has_data) || broken!(self, PromoteUnsynced) {
                self.steps.push(Step::PromoteLearner {
                    id: l.id,
                    node: l.node.clone(),
                });
            }
            // etcd 3.4/3.5 allow one learner at a time.
            return;
        }
        let voters = live.voters().count();
        let wanted = f.pacemaker.nodes.len();
        if let Some(old) = live.voters().find(|m| !configured(&m.node))
            && voters > wanted
        {
            self.steps.push(Step::RemoveMember {
                id: old.id,
                node: old.node.clone(),
            });
            return;
        }
        if let Some(gone) = live.voters().find(|m| lost_data(m)) {
            self.steps.push(Step::RemoveMember {
                id: gone.id,
                node: gone.node.clone(),
            });
            return;
        }
        if voters <= wanted
            && let Some(p) = f
                .others()
                .find(|p| wants_to_join(p) && !live.members.iter().any(|m| m.node == p.name))
        {
            self.steps.push(Step::AddLearner {
                node: p.name.clone(),
            });
        }
    }

    /// etcd runs here but cannot serve yet (no majority, or a learner
    /// catching up). A start is done: what it waits for is other nodes'
    /// etcd, which Pacemaker starts only once the actions in flight have
    /// completed, so a start that kept waiting would hold up the very start
    /// it waits for. The monitor reports it degraded meanwhile.
    fn ha_running_but(&mut self, reason: String) -> Decision {
        if self.f.trigger == Trigger::Start {
            return self.done(Outcome::Degraded, Some(reason));
        }
        self.wait(reason)
    }

    /// Why a node without data waits in HA mode, in words an operator can
    /// act on.
    ///
    /// Only the cluster can end this wait (its leader adds the node as a
    /// learner), so the start does not sit in it: it succeeds at once with
    /// the reason, the daemon's loop starts etcd as soon as the learner is
    /// added, and until then every monitor reports 190 (degraded) with the
    /// reason. Both alternatives failed on the harness:
    /// - waiting inside the start held Pacemaker's other actions up while it
    ///   was in flight, the start of the returning node whose etcd would
    ///   bring quorum back among them, until the start timeout (300 s);
    /// - failing the start at once made Pacemaker retry it at once, ahead of
    ///   the other node's start, until the node was banned.
    fn ha_wait_without_data(&mut self) -> Decision {
        let f = self.f;
        let Some(c) = &f.cluster else {
            let down: Vec<&str> = f
                .others()
                .filter(|n| !n.online)
                .map(|n| n.name.as_str())
                .collect();
            let down = if down.is_empty() {
                String::new()
            } else {
                format!(" (offline: {})", down.join(", "))
            };
            return self.wait_to_join(format!(
                "no etcd data here and no member answers with quorum{down}: waiting for a quorate \
                 cluster to add this node as a learner (HA mode never forces or starts a new \
                 cluster beside one that formed)"
            ));
        };
        match c.members.iter().find(|m| m.node == f.node) {
            Some(old) => self.wait_to_join(format!(
                "no etcd data here; the cluster still lists this node's old member {:x}: \
                 waiting for the leader to remove it (once every other member is healthy), then \
                 to add this node as a learner",
                old.id
            )),
            None => {
                self.wait_to_join("waiting for the leader to add this node as a learner".into())
            }
        }
    }
}

/// A voter on a configured node whose daemon says, this boot, that the
/// data it once held is gone: the member can never vote again and is being
/// replaced by the same machine.
///
/// "Once held" is what tells it from a member of a fresh bootstrap whose
/// node has not started etcd yet (no data either): the node's state file
/// still names this cluster, or its data was archived. The node must be
/// online (a transient attribute of a node that is gone means nothing), the
/// member must not answer, and it must be the only member listed for that
/// node.
fn ha_member_without_data(f: &Facts, live: &LiveEtcd, m: &MemberInfo) -> bool {
    if m.is_learner || m.in_sync || m.id == live.member_id || m.node == f.node {
        return false;
    }
    let Some(n) = f.pacemaker.nodes.iter().find(|n| n.name == m.node) else {
        return false;
    };
    let lost = n
        .record
        .as_ref()
        .is_some_and(|r| !r.has_data && (r.cluster_id == Some(live.cluster_id) || r.archives > 0));
    n.online
        && n.etcd != ResourceState::Stopping
        && lost
        && live.members.iter().filter(|o| o.node == m.node).count() == 1
}

/// A node whose daemon is up (it published a record this boot), online and
/// not being stopped: adding it as a learner is useful and harmless
/// (learners never count as voters).
fn wants_to_join(p: &NodeView) -> bool {
    p.online && !p.standby && p.record.is_some() && p.etcd != ResourceState::Stopping
}

fn describe(p: &NodeView) -> String {
    let etcd = match p.etcd {
        ResourceState::Started => "started".to_string(),
        ResourceState::Starting => "starting".to_string(),
        ResourceState::Stopping => "stopping".to_string(),
        ResourceState::Stopped { at } => format!("stopped at {}", at.0),
        ResourceState::Unknown => "in an unknown state".to_string(),
    };
    match (p.online, p.unclean) {
        (true, _) => format!("online, its etcd {etcd}"),
        (false, true) => "lost (unclean, not yet fenced)".into(),
        (false, false) if p.expected_up => "offline (expected up)".into(),
        (false, false) => "offline".into(),
    }
}
