//! The decisions a policy may weaken, as a type parameter of the decision
//! function.
//!
//! Production decides under [`Sound`], which weakens nothing: every method
//! keeps its default, the constant `false`, and monomorphisation compiles
//! the checks away. The model checker's tests (the `model` feature) supply
//! a policy that weakens one decision at a time, to prove that the checker
//! finds the violation each weakening causes.

use super::DownProof;
use super::proof::proof_from_membership_end;
use crate::facts::{FenceEvent, NodeView};

/// The decisions of `decide` that a policy may weaken. Each method answers
/// whether to take the weakened decision it names; the default, `false`,
/// is the decision as docs/failover.md states it.
pub(crate) trait Policy {
    /// Go on deciding while Pacemaker's maintenance settings pause
    /// automatic failover.
    fn ignore_maintenance(&self) -> bool {
        false
    }

    /// Clear the in-sync marker as soon as a maintenance pause begins.
    fn clear_marker_in_maintenance(&self) -> bool {
        false
    }

    /// Leave the member list whenever another voter answers, without the
    /// leave lock and whether or not the peer is stopping too.
    fn leave_without_arbitration(&self) -> bool {
        false
    }

    /// Leave the member list without holding the leave lock.
    fn leave_without_lock(&self) -> bool {
        false
    }

    /// In a fresh HA bootstrap, start a node without data only as a learner
    /// the leader added, never as a listed member that has not started.
    fn ha_late_bootstrap_waits(&self) -> bool {
        false
    }

    /// Promote a learner that etcd does not report in sync.
    fn promote_unsynced(&self) -> bool {
        false
    }

    /// Bootstrap a new cluster whenever no node has a member directory,
    /// whatever the state files say about an earlier cluster.
    fn bootstrap_over_history(&self) -> bool {
        false
    }

    /// Wait to join a peer whose data is older than this node's lost data.
    fn wait_on_older_data(&self) -> bool {
        false
    }

    /// Restart a lost member on an empty directory beside any peer data,
    /// whatever its epoch and role.
    fn reseed_from_any_data(&self) -> bool {
        false
    }

    /// Wait to join a peer that holds only a learner's data.
    fn wait_on_learner_data(&self) -> bool {
        false
    }

    /// Make a node that departed gracefully wait for its peer's etcd even
    /// when its leave was cut off before the removal.
    fn departed_waits_for_peer(&self) -> bool {
        false
    }

    /// Read a lost state file as a new node's (epoch 0, never formed).
    fn state_loss_reads_as_new(&self) -> bool {
        false
    }

    /// Never restart a lost member on an empty directory.
    fn no_reseed(&self) -> bool {
        false
    }

    /// Take a blank peer (neither data nor a state file) as no proof that
    /// no other member runs.
    fn blank_peer_is_no_proof(&self) -> bool {
        false
    }

    /// Join as a learner without archiving the stale data first.
    fn join_without_archive(&self) -> bool {
        false
    }

    /// The proof that the offline `peer` is down from its successful
    /// `fences`: by default, Pacemaker's record that its last membership
    /// ended, whatever the clocks say.
    fn proof_from_fences<'f>(
        &self,
        peer: &NodeView,
        fences: impl Iterator<Item = &'f FenceEvent>,
    ) -> Option<DownProof> {
        proof_from_membership_end(peer, fences)
    }

    /// Take "no leader" as proof that the peer is down.
    fn force_on_no_leader(&self) -> bool {
        false
    }

    /// Write the claim on "no leader", without proof that the peer is down.
    fn claim_on_no_leader(&self) -> bool {
        false
    }

    /// Force a new cluster without the in-sync marker.
    fn force_without_in_sync(&self) -> bool {
        false
    }

    /// After losing the state file, refuse beside a learner this node added
    /// itself instead of starting its own voter data.
    fn refuse_beside_own_learner(&self) -> bool {
        false
    }
}

/// The policy of production: no decision weakened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct Sound;

impl Policy for Sound {}
