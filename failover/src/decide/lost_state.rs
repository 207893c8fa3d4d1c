//! Two nodes, starting: a node whose state file is lost beside data (an OS
//! disk reimaged), whose epoch is unknown, beside its peer.

use super::*;

impl<P: Policy> Decider<'_, P> {
    /// This node's state file is missing although its member directory
    /// holds data: the cluster and member ids come from the data's
    /// write-ahead log, the epoch and membership are unknown. An epoch
    /// comparison would call this data stale beside any peer whose epoch
    /// is above 0, though it may be that very epoch's voter data. What
    /// decides instead is the peer's own record of its membership: when it
    /// lists this data's member as a voter of the same cluster, this data
    /// is part of that membership (or of a newer one forced from it, which
    /// then serves alone while the peer's waits), and starting it is a
    /// plain start that raft arbitrates. So is a start beside a learner
    /// this very member added (the record's `added_by`). Beside a learner
    /// whose record names nobody as its adder it refuses and names this
    /// node; otherwise it refuses and names the peer, whose state file is
    /// intact, and the command that keeps its data. (A quorate cluster, when one answers, is read first: see
    /// `two_node_start`.)
    pub(super) fn start_without_state(&mut self, peer: &NodeView) -> Decision {
        let f = self.f;
        let d = &f.data;
        let listed = peer.record.as_ref().is_some_and(|r| {
            r.has_data
                && r.formed
                && !r.learner
                && !r.state_lost
                && r.cluster_id.is_some()
                && r.cluster_id == d.cluster_id
                && d.member_id.is_some()
                && r.voter_ids.get(&f.node) == d.member_id.as_ref()
        });
        // The peer's data is a learner's, not yet a voter, that this very
        // member added while it was the only voter: everything the peer
        // holds came from this data, and nothing was committed without
        // it. A plain start loses nothing: raft needs the votes this
        // data's own membership names, and etcd lets a learner vote for a
        // leader whose newer membership lists it as a voter.
        let fed = !self.policy.refuse_beside_own_learner()
            && peer.record.as_ref().is_some_and(|r| {
                r.has_data
                    && r.learner
                    && !r.state_lost
                    && r.cluster_id.is_some()
                    && r.cluster_id == d.cluster_id
                    && d.member_id.is_some()
                    && r.added_by.len() == 1
                    && r.added_by.get(&f.node) == d.member_id.as_ref()
            });
        let claimed = peer
            .claim
            .as_ref()
            .is_some_and(|c| claim_is_valid(f, peer, c));
        // The peer holds no data (this data is the only data there is), or
        // its state file is lost too (no epoch can be compared on either
        // side): a plain start is harmless, raft needs the votes its own
        // membership names; the running branch takes it from there, and a
        // quorate cluster that does not list this member makes it stop
        // and rejoin.
        let plain = peer.record.as_ref().is_some_and(|r| {
            !r.has_data || (r.state_lost && r.cluster_id.is_some() && r.cluster_id == d.cluster_id)
        });
        if (listed || plain || fed) && !claimed {
            return self.act(
                Step::StartEtcd {
                    mode: StartMode::Existing,
                },
                Outcome::Success,
                Some(format!(
                    "this node's state file is missing; its data is member {:x} of cluster {:x} (read from the write-ahead log), {}: starting it",
                    d.member_id.unwrap_or(0),
                    d.cluster_id.unwrap_or(0),
                    match &peer.record {
                        _ if listed => format!("which {}'s data lists as a voter", peer.name),
                        _ if fed => format!(
                            "which added {}'s learner: its data holds everything the learner has",
                            peer.name
                        ),
                        Some(r) if r.has_data => format!(
                            "and {} lost its state file too: a plain start in the data's own membership",
                            peer.name
                        ),
                        _ => format!("the only data: {} holds none", peer.name),
                    }
                )),
            );
        }
        let what = match &peer.record {
            Some(r) if r.has_data && r.state_lost => {
                format!("{} lost its state file too", peer.name)
            }
            // A learner's data counts for no commit: beside one whose
            // record does not say who added it (a join recorded by an
            // earlier daemon), this node's voter data is the newest there
            // is, and a force from it loses no write. A learner added by
            // another member of this node is left to the refusal below:
            // this data is then older than that member's was.
            Some(r)
                if r.has_data
                    && r.learner
                    && r.added_by.is_empty()
                    && !claimed
                    && !self.policy.refuse_beside_own_learner() =>
            {
                let outcome = self.held_outcome();
                return self.refuse_as(
                    format!(
                        "this node's state file is missing; its data is member {} of cluster {} (read from the write-ahead log), epoch unknown, and {}'s data is a learner's that has not been a voter yet, whose record does not say who added it: {} holds the newest data",
                        d.member_id.map_or("?".into(), |m| format!("{m:x}")),
                        d.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
                        peer.name,
                        f.node
                    ),
                    resolve::force_new_cluster(&f.node),
                    outcome,
                );
            }
            Some(r) if r.has_data => format!(
                "{}'s data (epoch {}) does not list it as a voter",
                peer.name, r.epoch
            ),
            Some(_) => format!("{} holds no data", peer.name),
            None => format!("{} has not said what it holds", peer.name),
        };
        let outcome = self.held_outcome();
        self.refuse_as(
            format!(
                "this node's state file is missing; its data is member {} of cluster {} (read from the write-ahead log), epoch unknown, and {what}: which node holds the newest data is unknown; {} keeps its state file",
                d.member_id.map_or("?".into(), |m| format!("{m:x}")),
                d.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
                peer.name
            ),
            resolve::keep_data_of(&peer.name),
            outcome,
        )
    }
}
