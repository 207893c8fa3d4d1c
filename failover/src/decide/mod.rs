//! The decision function: facts in, steps out. No I/O, no clock.
//!
//! The rules it encodes (named as in docs/failover.md §5), each with its
//! reason:
//! - A new cluster is forced only with Pacemaker's proof that the peer is
//!   down ([`peer_down_proof`]), never on "no leader" alone (the split-brain rule): in a
//!   symmetric partition both nodes see no leader, and both would force.
//! - …and only from data known to hold every acknowledged write: the member
//!   was a voter with quorum during this boot and etcd has not been stopped
//!   since (the in-sync marker). Otherwise a lone node refuses and names the
//!   recover command (the lost-write and refusal rules, the total-outage scenario).
//! - A node that left the member list gracefully never forces: its WAL
//!   holds its own removal, and etcd panics forcing from it.
//! - The claim is written and read back before forcing; a valid peer claim
//!   makes this node yield. The loser path is a wait, never a hard error
//!   (the one-claim rule): a fatal code on both nodes after a race stops etcd for good.
//! - Stale data is archived, never deleted, before a node joins as a learner
//!   (the nothing-deleted rule).
//! - Membership changes are made by the leader's daemon only, one at a time;
//!   a learner is promoted only when etcd reports it in sync; only the
//!   holder of the leave lock leaves; the last voter never leaves (the voter rule):
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
    Claim, ClusterView, DataRecord, EtcdView, Facts, FenceAction, FenceStatus, LiveEtcd,
    MemberInfo, NodeView, ResourceState, Stamp, Topology, Trigger,
};

/// Decide.
pub fn decide(facts: &Facts) -> Decision {
    decide_under(facts, &Sound)
}

/// Decide under `policy`: production decides under [`Sound`]; the model
/// checker's tests pass a policy that weakens one decision.
pub(crate) fn decide_under<P: Policy>(facts: &Facts, policy: &P) -> Decision {
    Decider {
        f: facts,
        policy,
        steps: Vec::new(),
    }
    .run()
}

mod ha;
mod lost_state;
mod policy;
mod proof;
mod running;
mod two_node;
mod without_data;

pub(crate) use policy::{Policy, Sound};
pub use proof::{
    DownProof, bootstrap_token, claim_is_valid, expected_record, peer_down_proof,
    peer_holds_no_data, peer_is_blank, peer_removed_itself, resolve,
};

struct Decider<'a, P> {
    f: &'a Facts,
    policy: &'a P,
    steps: Vec<Step>,
}

impl<P: Policy> Decider<'_, P> {
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
            && !self.policy.ignore_maintenance()
        {
            return self.paused(me, reason);
        }
        // This daemon answers now: a start that failed while it was down
        // proves nothing about etcd; Pacemaker may try it again, and the
        // start decides then.
        if let Some(resource) = &me.start_failed_without_daemon {
            self.steps.push(Step::ClearFailedStart {
                resource: resource.clone(),
            });
        }
        if let EtcdView::Running(live) = &self.f.etcd
            && let Some(ms) = live.hung_ms
            && matches!(
                self.f.trigger,
                Trigger::Monitor | Trigger::Reconcile | Trigger::Start
            )
        {
            return self.hung(ms);
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
    ///
    /// Every such result carries its reason. A monitor that finds etcd not
    /// running while the daemon starts it to join (or to complete a
    /// bootstrap, or to restart a member whose data is gone) is the
    /// continuation of a start that held back and returned: degraded (190)
    /// with the reason, never failed, or Pacemaker would recover the member
    /// it just started with a stop (a graceful leave) and a new start.
    fn act(&mut self, step: Step, outcome: Outcome, reason: Option<String>) -> Decision {
        let running = matches!(self.f.etcd, EtcdView::Running(_));
        let joining = matches!(
            step,
            Step::StartEtcd {
                mode: StartMode::Join { .. } | StartMode::Reseed | StartMode::New
            }
        );
        let doing = doing(&step);
        self.steps.push(step);
        let (outcome, reason) = match self.f.trigger {
            Trigger::Monitor | Trigger::Reconcile if !running => {
                let started = matches!(
                    self.f.me().map(|m| m.etcd),
                    Some(ResourceState::Started | ResourceState::Starting)
                );
                let outcome = if joining && started {
                    Outcome::Degraded
                } else {
                    self.down_outcome()
                };
                let reason = reason.unwrap_or_else(|| format!("etcd does not run here: {doing}"));
                (outcome, Some(reason))
            }
            _ => (outcome, reason),
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

    /// etcd's process exists but has not answered for the daemon's bound:
    /// failed, so that Pacemaker recovers it. Its stop ends the process
    /// (SIGKILL after the grace), and a completed stop is what lets the
    /// peer force on; a stop that cannot complete gets this node fenced.
    /// Reported degraded like a member that waits, a hung member kept the
    /// peer without quorum for as long as the hang lasted.
    fn hung(&mut self, ms: u64) -> Decision {
        self.fail(format!(
            "etcd has not answered for {}.{} s while its process exists (stopped by a signal, stuck in the kernel or live-locked): Pacemaker's recovery stops it",
            ms / 1000,
            ms % 1000 / 100
        ))
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
    /// The in-sync marker is kept: the pause itself changes nothing about
    /// the data, and a peer lost inside the window must not leave the
    /// survivor refusing once it ends. What the operator may do by hand
    /// meanwhile clears it the way it always does: a hand stop is an etcd
    /// exit (the gathering clears the marker when it finds etcd not
    /// running), an archive or a membership change leaves the marker
    /// naming other data. A peer forced by hand outside etcd-warden, with
    /// this node's member cut off, is not seen: docs/operations.md says
    /// not to.
    fn paused(&mut self, me: &NodeView, reason: String) -> Decision {
        if self.f.local.in_sync_boot.is_some() && self.policy.clear_marker_in_maintenance() {
            self.steps.push(Step::ClearInSync);
        }
        let running = matches!(self.f.etcd, EtcdView::Running(_));
        if self.f.trigger == Trigger::Stop {
            // The stop ends etcd: the data is no longer known complete.
            if self.f.local.in_sync_boot.is_some() && !self.steps.contains(&Step::ClearInSync) {
                self.steps.push(Step::ClearInSync);
            }
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
            let unarbitrated = self.policy.leave_without_arbitration();
            let may_leave = others_voting > 0 && (!peer_stopping || unarbitrated);
            let holds_lock = lock == Some(self.f.node.as_str());
            let lockless = unarbitrated || self.policy.leave_without_lock();
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
}

/// A node whose daemon is up (it published a record this boot), online and
/// not being stopped: adding it as a learner is useful and harmless
/// (learners never count as voters).
fn wants_to_join(p: &NodeView) -> bool {
    p.online && !p.standby && p.record.is_some() && p.etcd != ResourceState::Stopping
}

/// What the daemon does with `step`, for a monitor's reason.
fn doing(step: &Step) -> String {
    match step {
        Step::StartEtcd { mode } => match mode {
            StartMode::New => "the daemon starts it to bootstrap the cluster".into(),
            StartMode::Existing => "the daemon starts it again from its data".into(),
            StartMode::Join { epoch } => format!(
                "the daemon starts it to join the cluster (epoch {epoch}) as the learner added for this node"
            ),
            StartMode::Reseed => {
                "the daemon restarts this node's member on an empty data directory".into()
            }
        },
        Step::ArchiveDataDir { reason } => {
            format!("the daemon archives its data before rejoining ({reason})")
        }
        Step::ForceNewCluster { epoch } => {
            format!("the daemon restarts it alone as a new cluster (epoch {epoch})")
        }
        other => format!("the daemon carries out {other:?}"),
    }
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
