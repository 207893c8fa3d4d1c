//! Two nodes, starting: a node with or without data beside its peer, a node
//! alone after a total outage, a node whose data is gone, and the archive of
//! stale data before a rejoin as a learner.

use super::*;

impl<P: Policy> Decider<'_, P> {
    pub(super) fn two_node(&mut self, me: &NodeView) -> Decision {
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
                    // in place (the etcd-crash scenario) rather than wait for monitor.
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

    /// A node that booted alone after a total outage (the total-outage scenario): corosync holds
    /// quorum back until the peer has been seen (wait_for_all), and nothing
    /// shows that this node's data holds the writes the peer may have
    /// acknowledged alone after they lost each other (the double-power-loss scenario). It waits for the
    /// peer, and says so where an operator looks: a probe answers `Failed`
    /// so that the reason and the command are an exit reason in crm_mon
    /// (a "not running" probe shows none), and Pacemaker, without quorum,
    /// only stops what is not running. Kept short: Pacemaker cuts exit
    /// reasons at 128 characters, and the command must survive.
    pub(super) fn alone_after_outage(&mut self, peer: &NodeView) -> Option<Decision> {
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
            // Pacemaker starts nothing without quorum, so a start here means
            // this view is behind the cluster's (a Pacemaker that restarted
            // moments ago): held, not failed, as a failed start counts
            // against this node until Pacemaker stops trying it at all. The
            // next look, on fresh facts, decides.
            Trigger::Start => self.held_outcome(),
            Trigger::Monitor => Outcome::Failed,
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
    /// The peer's data does not give it back either when it is older (its
    /// record names an epoch below the one this node's state file names:
    /// this node forced after the peer was proven down, and the writes it
    /// acknowledged alone were only here), or when it is a learner's that
    /// has not been a voter yet (a learner counts for no commit).
    ///
    /// While the peer holds current data, or a quorate cluster answers,
    /// this node waits to join as a learner instead (see
    /// `start_without_data`).
    pub(super) fn lost_data(&mut self, peer: &NodeView) -> Option<Decision> {
        let f = self.f;
        if !f.data.lost() || self.policy.bootstrap_over_history() {
            return None;
        }
        let older_counts = self.policy.wait_on_older_data() || self.policy.reseed_from_any_data();
        let learner_counts = older_counts || self.policy.wait_on_learner_data();
        let peer_current = peer.record.as_ref().is_some_and(|r| {
            r.has_data
                && (learner_counts || !r.learner)
                && (older_counts || r.epoch >= f.data.may_hold_epoch())
        });
        if f.cluster.is_some() || peer_current {
            return None;
        }
        if let Some(d) = self.join_lost_with_the_peers_data(peer) {
            return Some(d);
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
        if d.force_unconfirmed() {
            reason.push_str(&format!(
                ", and that it forced a new cluster (epoch {}) that was never confirmed, so it may have acknowledged writes of that epoch alone",
                d.may_hold_epoch()
            ));
        }
        let mine = d.may_hold_epoch();
        let (newest, archives) = match &peer.record {
            Some(r) if r.has_data => {
                if r.learner {
                    reason.push_str(&format!(
                        "; {} holds only a learner's data (epoch {}), never promoted, which may lack acknowledged writes",
                        peer.name, r.epoch
                    ));
                } else {
                    reason.push_str(&format!(
                        "; {} holds only older data (epoch {}), which lacks the writes of epoch {mine}",
                        peer.name, r.epoch
                    ));
                }
                if r.may_hold_epoch() > mine && r.learner {
                    // Its live data, not an archive: a learner's data is
                    // made a cluster by `force-new-cluster` on its node.
                    let command = resolve::force_new_cluster(&peer.name);
                    reason.push_str(&format!(
                        ": a new cluster would replace that data with an empty one; the newest data known is {}'s",
                        peer.name
                    ));
                    let outcome = self.held_outcome();
                    return Some(self.refuse_as(reason, command, outcome));
                }
                if r.may_hold_epoch() > mine {
                    (peer.name.as_str(), r.archives)
                } else {
                    (f.node.as_str(), d.archives)
                }
            }
            Some(r) if r.had_cluster() => {
                reason.push_str(&format!(
                    "; {} lost its data too (epoch {})",
                    peer.name,
                    r.may_hold_epoch()
                ));
                // Of one epoch, only the node that keeps archives has data
                // left: both daemons name it.
                let same = r.may_hold_epoch() == mine;
                if r.may_hold_epoch() > mine || (same && r.archives > 0 && d.archives == 0) {
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

    /// This node's member directory is gone while its state file says a
    /// join was under way (the join's etcd never ran to completion), and
    /// the peer, whose data the join was to copy, says this boot that it
    /// holds neither data nor an archive: the data of the epoch this node
    /// was joining existed only on the peer and is gone. The newest data
    /// left is this node's archive (it archived its older data to join),
    /// of an older epoch than the state file names: restoring it needs
    /// the operator's `--allow-older-epoch`, which the refusal names.
    fn join_lost_with_the_peers_data(&mut self, peer: &NodeView) -> Option<Decision> {
        let f = self.f;
        let d = &f.data;
        let r = peer.record.as_ref()?;
        if !d.joining || r.has_data || r.archives > 0 || r.joined_without_data {
            return None;
        }
        let command = if d.archives > 0 {
            resolve::restore_older_archive(&f.node)
        } else {
            resolve::restore_snapshot(&f.node)
        };
        let outcome = self.held_outcome();
        Some(self.refuse_as(
            format!(
                "etcd data missing: this node was joining cluster {} (epoch {}) as a learner and its member never received the data; {}, which held it, holds neither data nor an archive now, so the writes of epoch {} are lost; the newest data left is this node's archive, of an older epoch",
                d.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
                d.may_hold_epoch(),
                peer.name,
                d.may_hold_epoch()
            ),
            command,
            outcome,
        ))
    }

    /// What to report while this node holds back without etcd for a reason
    /// only the peer or an operator can end. A start returns at once (with
    /// the reason): Pacemaker holds every other action, the peer's start
    /// among them, while a start is in flight, so a start that waited here
    /// could wait for the very action it holds up. Monitors then report the
    /// instance degraded (190) with the reason, never failed (a stop and a
    /// new start would only wait again); a probe of an instance Pacemaker
    /// has not started says it is not running.
    pub(super) fn held_outcome(&self) -> Outcome {
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
    pub(super) fn hold(&mut self, reason: String) -> Decision {
        self.steps.push(Step::Wait {
            reason: reason.clone(),
        });
        let outcome = self.held_outcome();
        self.done(outcome, Some(reason))
    }

    pub(super) fn two_node_start(&mut self, peer: &NodeView) -> Decision {
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
                // Held, not failed: the peer holds the newest data and a
                // fenced peer usually boots again, and then this node joins
                // it. A failed start would end that path: Pacemaker treats
                // it as fatal on this node (start-failure-is-fatal) and
                // would never start it here again without a cleanup.
                let outcome = self.held_outcome();
                return self.refuse_as(
                    format!(
                        "this node left the member list gracefully, so its data ends with its own removal and it can never form a cluster alone; peer {} is down ({proof}): this node joins it when it is back",
                        peer.name
                    ),
                    resolve::keep_data_of(&peer.name),
                    outcome,
                );
            }
            if let Some(d) = self.removed_beside_blank(peer) {
                return d;
            }
            if let Some(d) = self.removal_unlearned(peer) {
                return d;
            }
            if !self.leave_interrupted(peer) || self.policy.departed_waits_for_peer() {
                return self.hold(format!(
                    "this node left the member list gracefully and never forces a new cluster; waiting for {} to start etcd",
                    peer.name
                ));
            }
            // The leave was cut off before the removal took effect: the
            // peer's member waits for this one's vote. The checks below
            // (the peer's record, its claim) apply as to any current data.
        }
        // The peer is up but its daemon has not said what data it holds
        // yet: after a total outage its data may be the newer one (it went
        // on alone, the double-power-loss scenario). Starting ours first in the old membership could
        // let the older history lead. Its record comes within seconds.
        if peer.online && peer.record.is_none() {
            return self.hold(format!(
                "waiting for {}'s daemon to publish its record (its data may be newer)",
                peer.name
            ));
        }
        if f.data.state_lost && !self.policy.state_loss_reads_as_new() {
            return self.start_without_state(peer);
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

    /// A node whose leave committed its removal (its data's last quorate
    /// membership lists only the peer), while the peer's etcd runs and no
    /// quorate cluster answers: the peer's member, whose persisted commit
    /// index predates the removal (a power loss took the unsynced commit),
    /// still counts this node as a voter and waits for a vote a removed
    /// member never gives. Nothing here can end that: the peer holds the
    /// newest data and must restart as a one-member cluster, which only an
    /// operator may allow (its daemon refuses and says so too). Held, so
    /// that neither the start nor a monitor makes Pacemaker act; the
    /// peer's member may still elect itself within a second when its data
    /// did record the removal, and then this node joins it as usual.
    fn removal_unlearned(&mut self, peer: &NodeView) -> Option<Decision> {
        let f = self.f;
        if !f.data.removed_by_own_leave(&f.node)
            || f.cluster.is_some()
            || !peer.online
            || peer.unclean
            || peer.etcd != ResourceState::Started
            || self.policy.departed_waits_for_peer()
        {
            return None;
        }
        let outcome = self.held_outcome();
        Some(self.refuse_as(
            format!(
                "this node left the member list and its data shows the removal committed, but {}'s etcd runs without quorum: its persisted commit index predates the removal, so it waits for this node's vote, which a removed member never gives; the newest data is on {}",
                peer.name, peer.name
            ),
            resolve::force_new_cluster(&peer.name),
            outcome,
        ))
    }

    /// A node whose leave committed its removal, beside a peer whose daemon
    /// says this boot that it holds no etcd data (a lost disk, or a new or
    /// replaced machine): no member runs anywhere and none can start
    /// (this node's member is removed, the peer's is gone), so waiting for
    /// the peer's etcd never ends. This node's data, which ends with its own
    /// removal, is the newest there is; whatever the peer acknowledged after
    /// the leave went with its disk, and nothing shows how much. Only an
    /// operator may make a cluster of it (a restore of this data's backend:
    /// etcd cannot force the data of a member that is no longer listed).
    fn removed_beside_blank(&mut self, peer: &NodeView) -> Option<Decision> {
        let f = self.f;
        let r = peer.record.as_ref()?;
        if r.has_data
            || !f.data.removed_by_own_leave(&f.node)
            || f.cluster.is_some()
            || !peer.online
            || peer.unclean
        {
            return None;
        }
        let outcome = self.held_outcome();
        Some(self.refuse_as(
            format!(
                "this node left the member list and its data shows the removal committed, and {} holds no etcd data (a lost disk, or a new or replaced machine), so no member runs anywhere; this node holds the newest data there is, and what {} acknowledged after the leave went with its disk",
                peer.name, peer.name
            ),
            resolve::force_new_cluster(&f.node),
            outcome,
        ))
    }

    /// A node that departed gracefully, whose leave may have been cut off
    /// between its departure record and its removal (its etcd exited, or
    /// the node lost power): its data still lists it as a voter, the
    /// peer's etcd runs (Pacemaker shows it started) and no quorate
    /// cluster answers, and the peer's record names this node's cluster at
    /// this node's epoch. Then the peer's member may be waiting for this
    /// one's vote, and only starting it ends that wait.
    ///
    /// Starting it is safe whether or not the removal took effect: it is a
    /// plain start in the data's own membership, never a force, so it
    /// accepts writes only with the peer's vote (the split-brain and
    /// lost-write rules rest on raft alone here). Had the removal been committed, the peer's member
    /// rejects the removed one and its etcd exits; the next look finds the
    /// peer's cluster and archives this data.
    fn leave_interrupted(&self, peer: &NodeView) -> bool {
        let f = self.f;
        f.data.voters.contains(&f.node)
            && f.cluster.is_none()
            && peer.online
            && !peer.unclean
            && peer.etcd == ResourceState::Started
            && peer.record.as_ref().is_some_and(|r| {
                r.has_data
                    && !r.learner
                    && r.epoch == f.data.epoch
                    && r.cluster_id.is_some()
                    && r.cluster_id == f.data.cluster_id
            })
    }

    /// Whether this node, whose member directory is gone, may restart its
    /// own voter on an empty directory and let the peer's member fill it
    /// (one data volume missing after a total outage, the other intact).
    ///
    /// Safe because of what raft needs here. In a two-member membership
    /// every election and every commit needs both votes, so every entry
    /// ever committed (every acknowledged write) is in the peer's log,
    /// which is intact, and the peer, whose own vote and term are intact
    /// too, grants at most one vote a term. This member's empty log can
    /// win no election (the peer votes only for a log at least as long as
    /// its own); it can only vote for the peer's member, which then leads
    /// with every committed entry and commits its whole log, entries past
    /// its persisted commit index included, where a forced restart would
    /// drop them. The lost vote of this member is harmless: any leader
    /// needs the peer's vote, which is never given twice in one term.
    ///
    /// That holds only while the peer's data is a voter's in the same
    /// membership as this node's lost one: the peer's record, published
    /// this boot, names the same cluster at this node's epoch (an older
    /// epoch lacks the writes this node acknowledged alone after a force;
    /// a newer one has no member for this node), is not a learner's (a
    /// learner counts for no commit) and not a leaver's. The peer's etcd
    /// runs (Pacemaker shows it started: its member serves the member list
    /// the new member needs) and no quorate cluster answers. etcd itself
    /// checks the rest at the start: it reads that member list on the
    /// peer URLs (the peer's member answers no client request without
    /// quorum), takes the id listed at this node's peer URL, and refuses
    /// to start unless the list matches the configured nodes.
    pub(super) fn reseed_from(&self, peer: &NodeView, r: &DataRecord) -> bool {
        let f = self.f;
        let d = &f.data;
        let any_data = self.policy.reseed_from_any_data();
        !self.policy.no_reseed()
            && d.lost()
            && !d.joining
            && !d.departed
            && d.member_id.is_some()
            && d.cluster_id.is_some()
            && (any_data || !d.force_unconfirmed())
            && f.cluster.is_none()
            && peer.online
            && !peer.unclean
            && peer.etcd == ResourceState::Started
            && !peer
                .claim
                .as_ref()
                .is_some_and(|c| claim_is_valid(f, peer, c))
            && r.has_data
            && !r.departed
            && !r.removed
            && !r.state_lost
            && (any_data
                || (r.formed && !r.learner && r.epoch == d.epoch && r.cluster_id == d.cluster_id))
    }

    /// This node is blank (no data, no state file naming any) and the
    /// peer's member, a formed voter's data, runs while no quorate cluster
    /// answers: in a two-node pair it waits for the vote of this node's
    /// old member, which is gone with the disk. Nothing here can end that
    /// safely: whether the lost disk held writes the peer lacks is
    /// unknown, so only an operator may let the peer go on alone (its
    /// daemon refuses and names the same command).
    pub(super) fn blank_beside_waiting_member(&self, peer: &NodeView, r: &DataRecord) -> bool {
        let f = self.f;
        !f.data.had_cluster()
            && f.data.archives == 0
            && f.cluster.is_none()
            && peer.online
            && !peer.unclean
            && peer.etcd == ResourceState::Started
            && r.formed
            && !r.learner
            && !r.departed
            && !self.policy.blank_peer_is_no_proof()
    }

    /// Archive stale data (the nothing-deleted rule); the next decision joins as a learner.
    pub(super) fn archive(&mut self, reason: String) -> Decision {
        if self.policy.join_without_archive()
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
        if self.policy.join_without_archive() {
            return self.wait("waiting to be added as a learner".into());
        }
        let outcome = self.waiting_outcome();
        self.act(Step::ArchiveDataDir { reason }, outcome, None)
    }
}
