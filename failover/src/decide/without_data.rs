//! Two-node mode, a node whose member directory holds nothing: start as
//! the membership lists it, beside the peer's data, or beside a peer that
//! holds nothing either.

use super::*;

impl<P: Policy> Decider<'_, P> {
    pub(super) fn start_without_data(&mut self, peer: &NodeView) -> Decision {
        if let Some(cluster) = &self.f.cluster {
            return self.start_as_listed(cluster, peer);
        }
        match &peer.record {
            None => self.hold(format!(
                "waiting for {}'s daemon to publish its record",
                peer.name
            )),
            Some(r) if r.has_data => self.start_beside_peer_data(peer, r),
            Some(r) => self.start_beside_peer_without_data(peer, r),
        }
    }

    /// No data here, and a quorate cluster answers: what it lists for this
    /// node decides.
    fn start_as_listed(&mut self, cluster: &ClusterView, peer: &NodeView) -> Decision {
        let f = self.f;
        match cluster.members.iter().find(|m| m.node == f.node) {
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
        // A blank node (a replaced machine) whose old learner has
        // run: the leader's progress for it is past an empty log.
        Some(m)
            if m.is_learner
                && m.started
                && !f.data.had_cluster()
                && f.data.archives == 0
                && !f.data.joining
                && !self.policy.blank_peer_is_no_proof() =>
        {
            self.hold(format!(
                "the cluster lists this node's old learner {:x}, which has run, and this node has no data: waiting for the leader on {} to remove it and add this node anew",
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
        }
    }

    /// No data here, no quorate cluster, and the peer's record says it
    /// holds data.
    fn start_beside_peer_data(&mut self, peer: &NodeView, r: &DataRecord) -> Decision {
        let f = self.f;
        let history = f.data.had_cluster() && !self.policy.bootstrap_over_history();
        match r {
            // The peer bootstrapped (`new`) but never reached quorum without
            // us: starting `new` with the same initial cluster completes that
            // bootstrap. Nothing was ever committed, so nothing can be lost.
            r if !r.formed
                    && !r.learner
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
            r if self.reseed_from(peer, r) => self.act(
                Step::StartEtcd {
                    mode: StartMode::Reseed,
                },
                Outcome::Success,
                Some(format!(
                    "this node's etcd data is gone and {}'s member waits without quorum on the same cluster's data (epoch {}) for this node's vote: restarting member {:x} on an empty data directory, which {}'s member fills",
                    peer.name,
                    r.epoch,
                    f.data.member_id.unwrap_or(0),
                    peer.name
                )),
            ),
            // The peer holds only a learner's data, never promoted, and this
            // node has none: in a pair the voter it was learning from was
            // this node, whose data is gone (a replaced machine, an
            // archive). A learner counts for no commit, so its data may
            // lack acknowledged writes.
            r if r.learner
                    && f.cluster.is_none()
                    && !self.policy.blank_peer_is_no_proof()
                    && !self.policy.wait_on_learner_data() =>
            {
                let outcome = self.held_outcome();
                self.refuse_as(
                    format!(
                        "this node has no etcd data, and {} holds only a learner's data, never promoted, which may lack acknowledged writes: the voter's data is gone, and {} holds the newest data there is",
                        peer.name, peer.name
                    ),
                    resolve::force_new_cluster(&peer.name),
                    outcome,
                )
            }
            r if self.blank_beside_waiting_member(peer, r) => {
                let outcome = self.held_outcome();
                self.refuse_as(
                    format!(
                        "this node has neither etcd data nor a state file (a new or replaced machine), and {}'s member runs without quorum, waiting for the vote of this node's old member, which is gone; {} holds the newest data known, but nothing shows whether this node's lost disk held writes it lacks",
                        peer.name, peer.name
                    ),
                    resolve::force_new_cluster(&peer.name),
                    outcome,
                )
            }
            _ => self.hold(format!(
                "{} holds the data; waiting for its etcd to start so that this node can join",
                peer.name
            )),
        }
    }

    /// No data here or on the peer, and no quorate cluster: a fresh
    /// bootstrap, unless a state file or an archive says data existed.
    fn start_beside_peer_without_data(&mut self, peer: &NodeView, r: &DataRecord) -> Decision {
        let f = self.f;
        match r {
            // The peer's data is gone although its state file says a
            // cluster existed (its own daemon refuses and says where): a
            // bootstrap here would replace that data with an empty cluster.
            r if r.joined_without_data
                && r.archives > 0
                && f.data.archives == 0
                && !self.policy.bootstrap_over_history() =>
            {
                let outcome = self.held_outcome();
                self.refuse_as(
                    format!(
                        "no etcd data here, and {} was joining cluster {} (epoch {}) as a learner when its data went missing, so it never held that epoch's data, which was here and is gone: the writes of epoch {} are lost; the newest data left is {}'s archive, of an older epoch",
                        peer.name,
                        r.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
                        r.epoch,
                        r.epoch,
                        peer.name
                    ),
                    resolve::restore_older_archive(&peer.name),
                    outcome,
                )
            }
            r if r.had_cluster() && !self.policy.bootstrap_over_history() => {
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
            r if r.archives > 0 || f.data.archives > 0 => self.refuse(
                "no node has live data, but archived data exists: a fresh bootstrap would lose it"
                    .into(),
                resolve::restore_archive(if f.data.archives > 0 {
                    &f.node
                } else {
                    &peer.name
                }),
            ),
            _ if peer.online => self.act(
                Step::StartEtcd {
                    mode: StartMode::New,
                },
                Outcome::Success,
                None,
            ),
            _ => self.hold(format!(
                "fresh bootstrap: waiting for {} to be online",
                peer.name
            )),
        }
    }

    pub(super) fn start_beside_live_cluster(
        &mut self,
        members: &[MemberInfo],
        cluster_id: u64,
    ) -> Decision {
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
}
