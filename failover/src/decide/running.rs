//! Two nodes, etcd running: the forced new cluster when the peer is lost
//! (with Pacemaker's proof, the in-sync marker and the claim), and a quorate
//! pair's membership changes and leadership (leader only, one at a time).

use super::proof::down_proof;
use super::*;

impl<P: Policy> Decider<'_, P> {
    pub(super) fn two_node_running(&mut self, live: &LiveEtcd, peer: &NodeView) -> Decision {
        let f = self.f;
        if live.is_learner {
            if !live.quorate()
                && peer.online
                && peer.record.as_ref().is_some_and(DataRecord::blank)
                && !self.policy.blank_peer_is_no_proof()
            {
                return self.refuse(
                    format!(
                        "this node's member is a learner, never promoted, and {} is online with neither etcd data nor a state file (a new or replaced machine): the voter's data is gone, and a learner's data may lack acknowledged writes; this node holds the newest data there is",
                        peer.name
                    ),
                    resolve::force_new_cluster(&f.node),
                );
            }
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
        // A state file lost: the epoch is unknown, but a quorate cluster
        // that does not list this member went on without it.
        if f.data.state_lost
            && let Some(c) = &f.cluster
            && !c.members.iter().any(|m| Some(m.id) == f.data.member_id)
        {
            let outcome = self.waiting_outcome();
            return self.act(
                Step::StopEtcd,
                outcome,
                Some(format!(
                    "the quorate cluster does not list this node's member {:x}: stopping it to rejoin as a learner",
                    live.member_id
                )),
            );
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
            && !f.data.state_lost
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
        let mut proof = down_proof(f, peer, self.policy);
        if proof.is_none() && peer_holds_no_data(f, peer) {
            proof = Some(DownProof::HoldsNoData);
        }
        if proof.is_none() && peer_removed_itself(f, peer, live.cluster_id) {
            proof = Some(DownProof::RemovedItself);
        }
        if proof.is_none() && peer_is_blank(f, peer) && !self.policy.blank_peer_is_no_proof() {
            proof = Some(DownProof::Blank);
        }
        if proof.is_none() && self.policy.force_on_no_leader() {
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
            if self.policy.claim_on_no_leader() && own_claim.is_none() {
                let epoch = self.next_epoch(peer);
                self.steps.push(Step::SetClaim { epoch });
            }
            // The peer's newer data is gone (it went on alone after this
            // node was proven down): this member waits for a vote that
            // only the restored data can give, so say where that data was.
            if let Some(r) = &peer.record
                && peer.online
                && !r.has_data
                && r.had_cluster()
                && r.may_hold_epoch() > f.data.epoch
                && !self.policy.wait_on_older_data()
            {
                let unconfirmed = if r.epoch < r.may_hold_epoch() {
                    " (a forced restart it decided and had not seen done)"
                } else {
                    ""
                };
                return self.refuse(
                    format!(
                        "{} lost its etcd data, and its state file names epoch {}{unconfirmed}, newer than this node's {}: this node's data lacks the writes of that epoch; the newest data known was on {}",
                        peer.name,
                        r.may_hold_epoch(),
                        f.data.epoch,
                        peer.name
                    ),
                    resolve::restore_data(&peer.name, r.archives),
                );
            }
            return self.wait(format!(
                "etcd has no quorum; peer {} is {}: waiting for Pacemaker to fence it or for it to return",
                peer.name,
                describe(peer)
            ));
        };
        self.force_path(proof, peer)
    }

    /// An epoch no lineage known here has used or may have used: a forced
    /// restart decided but not seen done counts too, so that two lineages
    /// never share an epoch.
    pub(super) fn next_epoch(&self, peer: &NodeView) -> u64 {
        let peer_epoch = peer.record.as_ref().map_or(0, |r| r.may_hold_epoch());
        self.f.data.may_hold_epoch().max(peer_epoch) + 1
    }

    pub(super) fn force_path(&mut self, proof: DownProof, peer: &NodeView) -> Decision {
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
        // Forcing keeps only what the persisted commit index covers, so it
        // needs the in-sync marker (etcd ran as a quorate voter since and
        // was stopped cleanly before the force): without it, refuse with
        // the reason the proof calls for.
        // - A peer without data proves only that no other member runs: after
        //   a total outage this node's data holds every acknowledged entry,
        //   but the commit index it persisted may lag its log (etcd does not
        //   sync a commit-index change on its own, and a power loss takes
        //   what was not synced), and a forced restart drops every entry
        //   past it.
        // - A peer whose leave committed its removal, while this member's
        //   persisted commit index predates it: the member waits for the
        //   removed one's vote, which never comes. This node holds every
        //   entry of the pair and the newest data, with the same caveat.
        if !f.in_sync_this_boot() && !self.policy.force_without_in_sync() {
            let reason = match proof {
                DownProof::HoldsNoData => format!(
                    "{} runs no member and its data is gone, so this node holds the only data, but after a power loss its last acknowledged writes may lie past the commit index it persisted, which a forced restart drops",
                    peer.name
                ),
                DownProof::Blank => format!(
                    "{} is online with neither etcd data nor a state file (a new or replaced machine), so no other member runs and this node holds the newest data known; nothing shows whether {}'s lost disk held writes this node lacks, and after a power loss this node's last acknowledged writes may lie past the commit index it persisted, which a forced restart drops",
                    peer.name, peer.name
                ),
                DownProof::RemovedItself => format!(
                    "{} left the member list and its data shows the removal committed, but this member's persisted commit index predates it, so it waits for a vote the removed member never gives; this node holds the newest data, though its last acknowledged writes may lie past that commit index, which a forced restart drops",
                    peer.name
                ),
                _ => format!(
                    "peer {} is down ({proof}), but this node has not been a voter with quorum since it booted (or its etcd was stopped since), so its data may lack writes {} acknowledged",
                    peer.name, peer.name
                ),
            };
            return self.refuse(reason, resolve::force_new_cluster(&f.node));
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

    pub(super) fn two_node_quorate(&mut self, live: &LiveEtcd, peer: &NodeView) -> Decision {
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
    pub(super) fn membership_changes(&mut self, live: &LiveEtcd, peers: &[&NodeView]) {
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
            if l.in_sync || self.policy.promote_unsynced() {
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
    pub(super) fn keep_leader_on_fence_race_winner(&mut self, live: &LiveEtcd, peer: &NodeView) {
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
}
