//! A daemon's two halves: deciding from what it observes, and carrying
//! the decided step out later.

use warden_api::Outcome;

use super::{Mutation, decide_with};
use crate::decision::{Decision, StartMode, Step};
use crate::facts::Trigger;

use super::state::{ClaimM, Data, Entry, State};
use super::{EtcdModel, ID_BASE, connected, name, running_data, start_in_flight, tick};

impl EtcdModel {
    pub(super) fn carry_out(&self, s: &mut State, x: usize, step: &Step) {
        match step {
            Step::PublishRecord => {
                let rec = self.rec_of(s, x);
                s.nodes[x].record = Some(rec);
            }
            Step::StartEtcd { mode } => {
                if s.nodes[x].etcd {
                    return;
                }
                match mode {
                    StartMode::New => self.start_new(s, x),
                    StartMode::Existing => {
                        if s.nodes[x].data.is_some() {
                            s.nodes[x].etcd = true;
                        }
                    }
                    StartMode::Join { epoch } => self.start_join(s, x, *epoch),
                    StartMode::Reseed => self.start_reseed(s, x),
                }
            }
            Step::StopEtcd => s.nodes[x].etcd = false,
            Step::SetClaim { epoch } => {
                s.nodes[x].claim = Some(ClaimM {
                    boot: s.nodes[x].boot,
                    epoch: u8::try_from(*epoch).unwrap_or(u8::MAX),
                    at: tick(s),
                });
            }
            Step::ClearClaim => s.nodes[x].claim = None,
            // The model keeps no failure record: Pacemaker always retries.
            Step::ClearFailedStart { .. } => {}
            Step::ForceNewCluster { epoch } => self.force_new_cluster(s, x, step, *epoch),
            Step::ArchiveDataDir { .. } => archive(s, x),
            Step::AddLearner { node } => self.add_learner(s, x, node),
            Step::PromoteLearner { id, .. } => self.promote_learner(s, x, *id),
            Step::RemoveMember { id, .. } => self.remove_member(s, x, *id),
            Step::AcquireLeaveLock => {
                if !self.quorate(s, x) || s.nodes[x].data.as_ref().is_none_or(|d| d.lock.is_some())
                {
                    return;
                }
                self.commit_change(s, x, |d| d.lock = Some(x));
            }
            Step::ReleaseLeaveLock => {
                if self.quorate(s, x) {
                    self.commit_change(s, x, |d| d.lock = None);
                }
            }
            Step::RecordDeparture => {
                if let Some(d) = s.nodes[x].data.as_mut() {
                    d.departed = true;
                }
            }
            Step::ClearDeparture => {
                if let Some(d) = s.nodes[x].data.as_mut() {
                    d.departed = false;
                }
            }
            Step::MarkInSync => s.nodes[x].in_sync = true,
            Step::ClearInSync => s.nodes[x].in_sync = false,
            // The model's leader follows from the logs, not from a choice.
            Step::TransferLeadership { .. } | Step::Wait { .. } | Step::Refuse { .. } => {}
        }
    }

    /// `etcd --initial-cluster-state=new` over the configured nodes.
    fn start_new(&self, s: &mut State, x: usize) {
        if s.nodes[x].data.is_some() {
            s.broken = Some((
                "data deleted",
                format!("{} bootstrapped over its data", name(x)),
            ));
        }
        let config = self
            .configured(s)
            .into_iter()
            .map(|i| Entry {
                node: i,
                id: i as u8 + 1,
                learner: false,
                published: false,
            })
            .collect();
        s.nodes[x].lost = None;
        s.nodes[x].state_lost = false;
        s.nodes[x].data = Some(Data::fresh(x as u8 + 1, config, false));
        s.nodes[x].etcd = true;
    }

    /// A learner's first start, from the leader's membership.
    fn start_join(&self, s: &mut State, x: usize, epoch: u64) {
        // What etcd checks: the leader's membership lists
        // a member at this node's peer URL. It checks
        // neither learner nor name: joining a voter that
        // ran is the decision's mistake to find.
        let host = (0..self.n()).find(|&l| {
            connected(s, x, l)
                && self.leader(s, l) == Some(l)
                && running_data(s, l).is_some_and(|d| {
                    u64::from(d.recorded_epoch()) == epoch && d.config.iter().any(|e| e.node == x)
                })
        });
        let Some(l) = host else {
            return;
        };
        let Some(dl) = s.nodes[l].data.clone() else {
            return;
        };
        let Some(entry) = dl.config.iter().find(|e| e.node == x) else {
            return;
        };
        if let Some(old) = &s.nodes[x].data
            && !old.log.is_empty()
        {
            s.broken = Some((
                "data deleted",
                format!("{} joined over its data without archiving it", name(x)),
            ));
        }
        s.nodes[x].lost = None;
        s.nodes[x].state_lost = false;
        s.nodes[x].data = Some(Data::empty_member_of(&dl, entry.id, false));
        s.nodes[x].etcd = true;
    }

    /// A lost member restarted on an empty data directory.
    fn start_reseed(&self, s: &mut State, x: usize) {
        // What etcd checks: a connected peer member runs
        // and its membership lists this node's lost member
        // id as a voter (etcd knows no epochs; the daemon's
        // decision does). The new member's log is empty;
        // raft catch-up fills it once the pair is quorate.
        let Some(lost) = s.nodes[x].lost else {
            return;
        };
        let host = (0..self.n()).find(|&l| {
            l != x
                && connected(s, x, l)
                && running_data(s, l).is_some_and(|d| {
                    d.config
                        .iter()
                        .any(|e| e.node == x && e.id == lost.member && !e.learner)
                })
        });
        let Some(l) = host else {
            return;
        };
        let Some(dl) = s.nodes[l].data.clone() else {
            return;
        };
        if s.nodes[x].data.is_some() {
            s.broken = Some((
                "data deleted",
                format!("{} reseeded over its data", name(x)),
            ));
        }
        s.nodes[x].lost = None;
        s.nodes[x].data = Some(Data::empty_member_of(&dl, lost.member, true));
        s.nodes[x].etcd = true;
    }

    /// A forced restart in two halves: the epoch as an intent and a stop,
    /// then the restart alone.
    fn force_new_cluster(&self, s: &mut State, x: usize, step: &Step, epoch: u64) {
        let window = self.config.power_loss_window;
        let epoch_first = self.config.policy.mutation == Some(Mutation::EpochBeforeForce);
        let node = &mut s.nodes[x];
        let Some(d) = node.data.as_mut() else {
            return;
        };
        let new = u8::try_from(epoch).unwrap_or(u8::MAX);
        if epoch_first && d.epoch != new {
            // The rule before: the new epoch goes into the state
            // file first (fsync), etcd is stopped, and the forced
            // restart follows as a second half of the same step,
            // which a power loss or a daemon restart can cut off.
            d.epoch = new;
            node.etcd = false;
            node.pending = Some(step.clone());
            return;
        }
        if !epoch_first && (d.pending != Some(new) || node.etcd) {
            // The first half: the new epoch goes into the state
            // file as an intent (fsync) and etcd is stopped; the
            // forced restart follows as a second half, which a
            // power loss or a daemon restart can cut off. A
            // gathering confirms the epoch later (see `observe`).
            d.pending = Some(new);
            node.etcd = false;
            node.pending = Some(step.clone());
            return;
        }
        if window {
            d.log.truncate(d.commit);
        }
        d.commit = d.log.len();
        if epoch_first {
            d.epoch = new;
        }
        d.config = vec![Entry {
            node: x,
            id: d.member,
            learner: false,
            published: true,
        }];
        d.synced = true;
        node.etcd = true;
    }

    /// The leader adds `node` as a learner, one at a time.
    fn add_learner(&self, s: &mut State, x: usize, node: &str) {
        let Some(y) = (0..self.n()).find(|&y| name(y) == node) else {
            return;
        };
        if self.leader(s, x) != Some(x) {
            return;
        }
        let Some(d) = &s.nodes[x].data else {
            return;
        };
        if d.config.iter().any(|e| e.learner || e.node == y) {
            return;
        }
        let id = s.next_member;
        s.next_member = s.next_member.saturating_add(1);
        self.commit_change(s, x, |d| {
            d.config.push(Entry {
                node: y,
                id,
                learner: true,
                published: false,
            })
        });
    }

    /// The leader promotes learner `id`, if it can reach it.
    fn promote_learner(&self, s: &mut State, x: usize, id: u64) {
        if self.leader(s, x) != Some(x) {
            return;
        }
        let Some(dl) = s.nodes[x].data.clone() else {
            return;
        };
        let Some(e) = dl
            .config
            .iter()
            .find(|e| e.learner && ID_BASE + u64::from(e.id) == id)
            .copied()
        else {
            return;
        };
        // etcd's own check is lenient (90 % of the leader's commit
        // index): it refuses only a learner it cannot reach.
        let group = self.group(s, x);
        if !group.contains(&e.node) {
            return;
        }
        let learner_synced = running_data(s, e.node).is_some_and(|d| d.synced && d.log == dl.log);
        if !learner_synced {
            s.broken = Some((
                "no voter",
                format!(
                    "{} promoted learner {} before it was in sync",
                    name(x),
                    name(e.node)
                ),
            ));
        }
        self.commit_change(s, x, |d| {
            for entry in d.config.iter_mut() {
                if entry.id == e.id {
                    entry.learner = false;
                }
            }
        });
    }

    /// A quorate member removes member `id`; a removed member stops.
    fn remove_member(&self, s: &mut State, x: usize, id: u64) {
        if !self.quorate(s, x) {
            return;
        }
        let Some(d) = &s.nodes[x].data else {
            return;
        };
        let Some(e) = d
            .config
            .iter()
            .find(|e| ID_BASE + u64::from(e.id) == id)
            .copied()
        else {
            return;
        };
        let group = self.group(s, x);
        self.commit_change(s, x, |d| d.config.retain(|c| c.id != e.id));
        if group.contains(&e.node)
            && let Some(dy) = s.nodes[e.node].data.as_mut()
            && dy.member == e.id
        {
            dy.removed = true;
            s.nodes[e.node].etcd = false;
        }
    }

    /// Observe and decide: keep the first acting step for `Act`; with none,
    /// the pending OCF action completes.
    pub(super) fn observe(&self, s: &mut State, x: usize) {
        if self.force_half_done(s, x) {
            // The executor is between the two halves of a forced restart
            // (`EpochBeforeForce`): no gathering runs meanwhile.
            return;
        }
        if self.config.serial_starts
            && s.nodes[x].queued
            && s.nodes[x].quorate
            && !s.maintenance
            && !start_in_flight(s, x)
        {
            // Pacemaker begins this node's start (it starts nothing without
            // quorum, and nothing while another action is in flight).
            s.nodes[x].queued = false;
        }
        self.confirm_force(s, x);
        // The daemon clears the marker whenever it finds etcd not running,
        // except while its own forced restart is unconfirmed: it stopped
        // etcd itself for the force, with the peer proven down.
        let forcing = s.nodes[x]
            .data
            .as_ref()
            .is_some_and(Data::force_unconfirmed)
            && self.config.policy.mutation != Some(Mutation::ClearMarkerMidForce);
        if !s.nodes[x].etcd
            && !forcing
            && self.config.policy.mutation != Some(Mutation::MarkerOutlivesEtcdExit)
        {
            s.nodes[x].in_sync = false;
        }
        let facts = self.facts(s, x);
        let decision = decide_with(&facts, &self.config.policy);
        if s.maintenance
            && let Some(step) = decision.steps.iter().find(|st| {
                !matches!(
                    st,
                    Step::PublishRecord
                        | Step::ClearClaim
                        | Step::ClearInSync
                        | Step::Wait { .. }
                        | Step::Refuse { .. }
                )
            })
        {
            s.broken = Some((
                "maintenance",
                format!(
                    "{} decided {step:?} while Pacemaker was in maintenance mode",
                    name(x)
                ),
            ));
        }
        // A newer decision replaces the plan of an older one, as in the
        // daemon (which carries a plan out within the pass that made it):
        // with nothing to do now, nothing older is carried out later.
        s.nodes[x].pending = decision.first_act().cloned();
        s.nodes[x].plan = if self.config.plans {
            decision
                .steps
                .iter()
                .filter(|st| st.acts())
                .skip(1)
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        match decision.first_act() {
            Some(_) => {}
            None => match facts.trigger {
                Trigger::Start if self.start_returns(&decision, s.nodes[x].etcd) => {
                    s.nodes[x].started = true;
                }
                Trigger::Stop if !s.nodes[x].etcd => {
                    let at = tick(s);
                    s.nodes[x].stopped_at = Some(at);
                    s.nodes[x].started = false;
                }
                _ => {}
            },
        }
    }

    /// Whether a start action ends with this decision (which acts on
    /// nothing). Without `serial_starts` the model lets it end once etcd
    /// runs. With it, as the daemon's start action does: once the decision
    /// reports success (a start that holds back for its peer or an operator
    /// reports success at once, with the reason), or, the rule before
    /// (`StartWaitsInAction`), only once etcd runs.
    fn start_returns(&self, decision: &Decision, etcd: bool) -> bool {
        if !self.config.serial_starts
            || self.config.policy.mutation == Some(Mutation::StartWaitsInAction)
        {
            return etcd;
        }
        // A start that leaves etcd degraded (a sole voter, a learner
        // catching up) has succeeded (`finished` in the daemon).
        matches!(decision.outcome, Outcome::Success | Outcome::Degraded)
    }

    /// What a gathering writes down about a forced restart decided
    /// earlier: once a quorate look shows this member as the only voter,
    /// its epoch becomes the data's; a quorate look that lists another
    /// voter shows the force never happened.
    fn confirm_force(&self, s: &mut State, x: usize) {
        if !self.quorate(s, x) {
            return;
        }
        self.state_written_again(s, x);
        self.fellow_voters_epoch(s, x);
        let Some(d) = s.nodes[x].data.as_mut() else {
            return;
        };
        if let Some(p) = d.pending.take()
            && d.config.iter().filter(|e| !e.learner).count() == 1
        {
            d.epoch = d.recorded_epoch().max(p);
            d.label = None;
        }
    }

    /// A quorate look writes a lost state file down again: the ids and
    /// membership from the live view, the epoch from a fellow voter's
    /// record (the data's own lineage, `Data::epoch` here), or, for a sole
    /// voter, from the peers' records: a learner of its membership joined
    /// at its epoch, and any other peer's data is older (this one serves
    /// alone), so the epoch goes above it.
    fn state_written_again(&self, s: &mut State, x: usize) {
        if !s.nodes[x].state_lost {
            return;
        }
        s.nodes[x].state_lost = false;
        let Some(d) = running_data(s, x) else {
            return;
        };
        if d.config.iter().filter(|e| !e.learner).count() != 1 {
            return;
        }
        let members: Vec<usize> = d.config.iter().map(|e| e.node).collect();
        let epoch = s.nodes[x]
            .cib
            .iter()
            .enumerate()
            .filter(|&(y, _)| y != x)
            .filter_map(|(y, c)| c.record.as_ref().map(|r| (y, r)))
            .map(|(y, r)| {
                if members.contains(&y) {
                    r.epoch
                } else {
                    r.epoch.max(r.pending.unwrap_or(0)).saturating_add(1)
                }
            })
            .max()
            .unwrap_or(0);
        if let Some(d) = s.nodes[x].data.as_mut() {
            d.label = (epoch != d.epoch).then_some(epoch);
        }
    }

    /// A quorate voter raises its state file's epoch to a fellow voter's
    /// record of the same cluster (as the daemon's gathering does).
    fn fellow_voters_epoch(&self, s: &mut State, x: usize) {
        let Some(d) = running_data(s, x) else {
            return;
        };
        let Some(label) = d.label else {
            return;
        };
        let fellows = d
            .config
            .iter()
            .filter(|e| !e.learner && e.node != x)
            .filter_map(|e| s.nodes[x].cib[e.node].record.as_ref())
            .map(|r| r.epoch)
            .max()
            .unwrap_or(0);
        let epoch = label.max(fellows);
        if let Some(d) = s.nodes[x].data.as_mut() {
            d.label = (epoch != d.epoch).then_some(epoch);
        }
    }

    /// `x` recorded a forced restart's epoch and stopped etcd, and has not
    /// restarted it yet: the executor is between the two halves.
    fn force_half_done(&self, s: &State, x: usize) -> bool {
        match &s.nodes[x].pending {
            Some(step) => self.second_half(s, x, step),
            None => false,
        }
    }

    /// Whether carrying `step` out now is the second half of a forced
    /// restart: the epoch (`EpochBeforeForce`: the new epoch, otherwise
    /// the intent) is written and etcd stopped.
    pub(super) fn second_half(&self, s: &State, x: usize, step: &Step) -> bool {
        let node = &s.nodes[x];
        let (Step::ForceNewCluster { epoch }, Some(d)) = (step, &node.data) else {
            return false;
        };
        if self.config.policy.mutation == Some(Mutation::EpochBeforeForce) {
            u64::from(d.epoch) == *epoch
        } else {
            d.pending.map(u64::from) == Some(*epoch) && !node.etcd
        }
    }

    /// Whether a fresh gathering right before the forced restart `step`
    /// leads to the very same force, as the daemon checks before it
    /// restarts etcd with `--force-new-cluster`. The rule before
    /// (`ForceOnPlanFacts`) forced on the facts its decision was made
    /// from, however old. Every other step is carried out on those facts.
    pub(super) fn force_still_decided(&self, s: &State, x: usize, step: &Step) -> bool {
        if !matches!(step, Step::ForceNewCluster { .. })
            || self.config.policy.mutation == Some(Mutation::ForceOnPlanFacts)
        {
            return true;
        }
        if self.second_half(s, x, step) {
            // The second half of a forced restart: the same executor step
            // as the first, with no gathering between.
            return true;
        }
        let mut fresh = s.clone();
        // The gathering clears the marker of an etcd that is not running.
        if !fresh.nodes[x].etcd {
            fresh.nodes[x].in_sync = false;
        }
        let again = decide_with(&self.facts(&fresh, x), &self.config.policy);
        again.steps.contains(step)
    }
}

/// The data directory moved aside (never while etcd runs).
fn archive(s: &mut State, x: usize) {
    let node = &mut s.nodes[x];
    if node.etcd || node.data.is_none() {
        return;
    }
    node.data = None;
    node.state_lost = false;
    node.archives = node.archives.saturating_add(1);
}
