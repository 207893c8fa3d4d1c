//! The model checker's rule-breaking variants of `decide`: a [`Mutated`]
//! policy that weakens one decision, and [`decide_with`], which decides
//! under it. Production decides under `Sound` and has no switch.

use crate::decide::{DownProof, Policy, Sound, decide_under};
use crate::decision::Decision;
use crate::facts::{Facts, FenceEvent, LocalData, NodeView};

/// A rule broken on purpose, for the model checker's tests only: each one
/// proves that the checker finds the violation it causes. Compiled only with
/// the `model` feature; production `decide` has no such switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// Treat "no leader" as proof the peer is down (the bug of the shell
    /// agent podman-etcd):
    /// breaks the split-brain rule in a partition.
    ForceOnNoLeader,
    /// Write the claim on "no leader", without proof: breaks the one-claim rule.
    ClaimOnNoLeader,
    /// Force without the in-sync marker: breaks the lost-write rule.
    ForceWithoutInSync,
    /// Join as a learner without archiving the old data first: breaks the nothing-deleted rule.
    JoinWithoutArchive,
    /// Promote a learner that etcd does not report in sync: breaks the voter rule.
    PromoteUnsynced,
    /// Leave the member list without the leave lock (still checking that the
    /// peer is not stopping): with a stale view of the peer's stop, both
    /// leave (the voter rule).
    LeaveWithoutLock,
    /// Leave the member list whenever another voter answers, without the
    /// leave lock and without looking at whether the peer is stopping too:
    /// two nodes that stop at once both leave, breaking the voter rule.
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
    /// The daemon's start action returns only once etcd runs (the rule
    /// before starts that hold back returned at once with the reason): a
    /// start that waits for its peer holds up the peer's start, which
    /// Pacemaker does not begin while an action is in flight, and the
    /// pair waits on itself (a model switch: `decide` is unchanged).
    StartWaitsInAction,
    /// A forced restart writes its new epoch into the state file before
    /// it restarts etcd alone (the rule before the epoch was an intent
    /// until the forced membership shows): a power loss in between leaves
    /// the new epoch on the old two-member data (a model switch).
    EpochBeforeForce,
    /// The in-sync marker is a plain flag for the boot: the daemon does
    /// not clear it when it finds etcd not running, and it names no data,
    /// so it outlives an etcd exit, an archive and a rejoin (a model
    /// switch).
    MarkerOutlivesEtcdExit,
    /// A forced restart goes ahead on the facts its plan was made from,
    /// with no fresh gathering right before it (a model switch, with
    /// `plans`).
    ForceOnPlanFacts,
    /// A node that departed gracefully waits for its peer's etcd whatever
    /// that etcd does (the rule before interrupted leaves were seen): when
    /// the leave was cut off before the removal, the peer's member waits
    /// for this node's vote, and the pair waits on itself.
    DepartedWaitsForPeer,
    /// A node whose member directory is gone waits to join its peer
    /// whenever the peer's record says it holds data (the rule before):
    /// also when that data is older than what this node's state file names;
    /// and the peer's older member waits for a fence without naming the
    /// newest data: nobody names it, and the pair waits for ever.
    WaitOnOlderData,
    /// The same wait only when the peer's data is a learner's that has not
    /// been a voter yet (the record's `learner` ignored): that learner's
    /// etcd waits for the leader whose data is gone.
    WaitOnLearnerData,
    /// A node whose member directory is gone restarts its old voter on an
    /// empty directory beside any peer whose record says it holds data,
    /// whatever that data's epoch and role: also beside a learner's data,
    /// or older data, which lacks the writes this node acknowledged alone.
    ReseedFromAnyData,
    /// The rule before: a node whose member directory is gone never
    /// restarts its old voter; it waits to join its peer as a learner,
    /// while the peer's member, after a total outage, waits for that
    /// voter and refuses to force (its persisted commit index may lag).
    NoReseed,
    /// The rule before in a fresh HA bootstrap: a node without data starts
    /// only with no data anywhere, or as a learner the leader added. A node
    /// late for the bootstrap then waits for ever: for the removal of its
    /// member that never ran (no rule removes a member that never held
    /// data), or beside a node whose lone `new` never reached quorum.
    HaLateBootstrapWaits,
    /// The rule before a forced restart's epoch counted while unconfirmed:
    /// `decide` sees no pending epoch, neither this node's nor a peer's
    /// record's. A node that forced, took writes alone before a quorate
    /// look confirmed the epoch, and then lost its member directory looks
    /// like one whose data the peer's older data can give back.
    IgnorePendingEpoch,
    /// The daemon clears the in-sync marker whenever it finds etcd not
    /// running, also when it stopped etcd itself for a forced restart it
    /// has not finished (its daemon restarted between the stop and the
    /// restart): the proof that its data holds every write is gone, and
    /// the survivor refuses until an operator acts (a model switch).
    ClearMarkerMidForce,
    /// The rule before a blank peer (neither data nor a state file) was a
    /// proof that no other member runs: beside it, a node whose member
    /// waits for the blank node's old vote waits for a fence that never
    /// comes, and the blank node waits for that member to serve.
    BlankPeerIsNoProof,
    /// The rule before a missing state file was unknown: it read as
    /// "epoch 0, never formed", so a node whose state file was lost took
    /// its own voter data for stale beside a peer of a higher epoch and
    /// archived it.
    StateLossReadsAsNew,
    /// The rule before: maintenance mode (or an unmanaged resource, or a
    /// node in maintenance) cleared the in-sync marker the moment it began,
    /// although nothing about the data changed: a peer lost inside the
    /// window left the survivor refusing to force once it ended.
    ClearMarkerInMaintenance,
    /// The rule before: a node whose state file was lost started its data
    /// only where the peer's record listed its member as a voter. Beside
    /// a learner it had added itself, not yet a voter, it refused and
    /// named the learner's node as the one to keep: the learner waits for
    /// the voter whose node refuses, and the command named archives the
    /// newest data.
    RefuseBesideOwnLearner,
}

/// How `decide` behaves under the model checker's tests: the decision
/// `mutation` names is weakened, every other one is sound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Mutated {
    /// The rule to break, if any.
    pub mutation: Option<Mutation>,
}

impl Mutated {
    fn breaks(&self, m: Mutation) -> bool {
        self.mutation == Some(m)
    }
}

impl Policy for Mutated {
    fn ignore_maintenance(&self) -> bool {
        self.breaks(Mutation::IgnoreMaintenance)
    }

    fn clear_marker_in_maintenance(&self) -> bool {
        self.breaks(Mutation::ClearMarkerInMaintenance)
    }

    fn leave_without_arbitration(&self) -> bool {
        self.breaks(Mutation::LeaveWithoutArbitration)
    }

    fn leave_without_lock(&self) -> bool {
        self.breaks(Mutation::LeaveWithoutLock)
    }

    fn ha_late_bootstrap_waits(&self) -> bool {
        self.breaks(Mutation::HaLateBootstrapWaits)
    }

    fn promote_unsynced(&self) -> bool {
        self.breaks(Mutation::PromoteUnsynced)
    }

    fn bootstrap_over_history(&self) -> bool {
        self.breaks(Mutation::BootstrapOverHistory)
    }

    fn wait_on_older_data(&self) -> bool {
        self.breaks(Mutation::WaitOnOlderData)
    }

    fn reseed_from_any_data(&self) -> bool {
        self.breaks(Mutation::ReseedFromAnyData)
    }

    fn wait_on_learner_data(&self) -> bool {
        self.breaks(Mutation::WaitOnLearnerData)
    }

    fn departed_waits_for_peer(&self) -> bool {
        self.breaks(Mutation::DepartedWaitsForPeer)
    }

    fn state_loss_reads_as_new(&self) -> bool {
        self.breaks(Mutation::StateLossReadsAsNew)
    }

    fn no_reseed(&self) -> bool {
        self.breaks(Mutation::NoReseed)
    }

    fn blank_peer_is_no_proof(&self) -> bool {
        self.breaks(Mutation::BlankPeerIsNoProof)
    }

    fn join_without_archive(&self) -> bool {
        self.breaks(Mutation::JoinWithoutArchive)
    }

    fn proof_from_fences<'f>(
        &self,
        peer: &NodeView,
        fences: impl Iterator<Item = &'f FenceEvent>,
    ) -> Option<DownProof> {
        if self.breaks(Mutation::ProofFromLocalJoinRecord) {
            proof_from_local_join_note(peer, fences)
        } else {
            Sound.proof_from_fences(peer, fences)
        }
    }

    fn force_on_no_leader(&self) -> bool {
        self.breaks(Mutation::ForceOnNoLeader)
    }

    fn claim_on_no_leader(&self) -> bool {
        self.breaks(Mutation::ClaimOnNoLeader)
    }

    fn force_without_in_sync(&self) -> bool {
        self.breaks(Mutation::ForceWithoutInSync)
    }

    fn refuse_beside_own_learner(&self) -> bool {
        self.breaks(Mutation::RefuseBesideOwnLearner)
    }
}

/// Decide under `policy` (the model checker's tests inject mutations
/// through it). Two mutations change how the facts read rather than a
/// decision: those facts are rewritten first.
pub fn decide_with(facts: &Facts, policy: &Mutated) -> Decision {
    let rewritten;
    let facts = match policy.mutation {
        Some(Mutation::IgnorePendingEpoch) => {
            rewritten = without_pending_epochs(facts);
            &rewritten
        }
        Some(Mutation::StateLossReadsAsNew) => {
            rewritten = lost_state_as_new(facts);
            &rewritten
        }
        _ => facts,
    };
    decide_under(facts, policy)
}

/// The rule before: a fence newer than this daemon's own note of the
/// peer's last join, any fence at all when the note is missing.
fn proof_from_local_join_note<'f>(
    peer: &NodeView,
    fences: impl Iterator<Item = &'f FenceEvent>,
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

/// `facts` as the rule before saw them: a missing state file read as the
/// default state (epoch 0, never formed, no ids).
fn lost_state_as_new(facts: &Facts) -> Facts {
    let mut f = facts.clone();
    if f.data.state_lost {
        f.data = LocalData {
            exists: f.data.exists,
            member_dir: f.data.member_dir.clone(),
            archives: f.data.archives,
            ..Default::default()
        };
    }
    for n in &mut f.pacemaker.nodes {
        if let Some(r) = n.record.as_mut() {
            r.state_lost = false;
        }
    }
    f
}

/// `facts` as the rule before saw them: no pending epoch anywhere.
fn without_pending_epochs(facts: &Facts) -> Facts {
    let mut f = facts.clone();
    f.data.pending_epoch = None;
    for n in &mut f.pacemaker.nodes {
        if let Some(r) = n.record.as_mut() {
            r.pending_epoch = None;
        }
    }
    f
}
