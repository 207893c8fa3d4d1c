//! HA mode (three or more voters): never forces; membership changes by the
//! leader's daemon only, one at a time.

use super::*;

/// A voter on a configured node whose daemon says, this boot, that the
/// data it once held is gone: the member can never vote again and is being
/// replaced by the same machine.
///
/// "Once held" is what tells it from a member of a fresh bootstrap whose
/// node has not started etcd yet (no data either): the node's state file
/// still names this cluster, or its data was archived, or (a new machine
/// of the same name: no data, no state file, no archive) its record names
/// this very member as its old one, which it saw had run. The node must be
/// online (a transient attribute of a node that is gone means nothing), the
/// member must not answer, and it must be the only member listed for that
/// node.
pub(super) fn ha_member_without_data(f: &Facts, live: &LiveEtcd, m: &MemberInfo) -> bool {
    if m.is_learner || m.in_sync || m.id == live.member_id || m.node == f.node {
        return false;
    }
    let Some(n) = f.pacemaker.nodes.iter().find(|n| n.name == m.node) else {
        return false;
    };
    // A member that never ran is the node's own to start; its node's
    // archives are of other data then, unless its record names this very
    // cluster.
    let lost = n.record.as_ref().is_some_and(|r| {
        !r.has_data
            && (r.cluster_id == Some(live.cluster_id)
                || (r.archives > 0 && m.started)
                || r.lost_member == Some(m.id))
    });
    n.online
        && n.etcd != ResourceState::Stopping
        && lost
        && live.members.iter().filter(|o| o.node == m.node).count() == 1
}

/// This node's voter in the live cluster `c` has never run: etcd lists no
/// client URLs for it (a member publishes them as soon as it runs in a
/// quorate cluster), it does not answer, and this node's state file does
/// not say it ran that member. That is a member of a bootstrap this node
/// was late for (the other nodes formed quorum first): it holds no entry,
/// so this node, without data, starts it as etcd's own static bootstrap
/// does for a late member. Nothing else would end the wait: the leader
/// removes only members whose data is gone.
pub(super) fn never_started(f: &Facts, c: &ClusterView, m: &MemberInfo) -> bool {
    let ran_it = f.data.cluster_id == Some(c.cluster_id) && f.data.member_id == Some(m.id);
    !m.is_learner && !m.started && !m.in_sync && !ran_it
}

impl<P: Policy> Decider<'_, P> {
    pub(super) fn ha(&mut self, me: &NodeView) -> Decision {
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
                let late_ok = !self.policy.ha_late_bootstrap_waits();
                if let Some(c) = &f.cluster
                    && let Some(m) = c.members.iter().find(|m| {
                        m.node == f.node && (m.is_learner || (late_ok && never_started(f, c, m)))
                    })
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
                        let why = if m.is_learner {
                            "added to the cluster as a learner: starting etcd to join"
                        } else {
                            "the cluster lists this node's member of its bootstrap, never started: \
                             starting etcd to join as that member"
                        };
                        return self.done(Outcome::Degraded, Some(why.into()));
                    }
                    return self.act(step, Outcome::Success, None);
                }
                if f.cluster.is_some() {
                    return self.ha_wait_without_data();
                }
                // Every other node is online and either holds nothing or
                // holds only this bootstrap, begun but never quorate (a
                // node that started `new` ahead of the others): starting
                // `new` with the same initial cluster completes it, as
                // etcd's static bootstrap does for a late member. Nothing
                // was ever committed, so nothing can be lost.
                let all_fresh = f.others().all(|n| {
                    n.online
                        && n.record.as_ref().is_some_and(|r| {
                            r.archives == 0
                                && (!r.has_data
                                    || (late_ok && !r.formed && !r.learner && r.epoch == 0))
                        })
                });
                if all_fresh && f.data.archives == 0 && !f.data.had_cluster() {
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
    pub(super) fn ha_membership(&mut self, live: &LiveEtcd) {
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
            if (l.in_sync && has_data) || self.policy.promote_unsynced() {
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
    pub(super) fn ha_running_but(&mut self, reason: String) -> Decision {
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
    pub(super) fn ha_wait_without_data(&mut self) -> Decision {
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
