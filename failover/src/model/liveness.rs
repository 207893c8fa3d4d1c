//! The liveness check: once the faults stop, the pair settles whole.

use std::hash::{DefaultHasher, Hash, Hasher};

use super::decide_with;
use crate::facts::Topology;

use super::events::Event;
use super::explore::{Model, Violation};
use super::render::render_trail;
use super::state::{Node, Seen, State};
use super::{EtcdModel, is_voter, name, running_data};

impl EtcdModel {
    /// Let the faults stop and the environment settle fairly: the network
    /// heals, lost nodes are fenced, every node powers on and Pacemaker wants
    /// etcd everywhere; daemons observe and act in turn until nothing
    /// changes. The cluster must then be whole.
    pub fn settle(&self, s: &State) -> Result<(), Violation> {
        let mut s = s.clone();
        s.faults = u8::MAX; // no more faults
        let mut rounds = 0;
        let mut trail: Vec<Event> = Vec::new();
        let mut round_starts: Vec<u64> = Vec::new();
        let mut known_good = false;
        loop {
            rounds += 1;
            let fp = {
                let mut h = DefaultHasher::new();
                s.hash(&mut h);
                h.finish()
            };
            if self.settled.borrow().contains(&fp) {
                known_good = true;
                break;
            }
            round_starts.push(fp);
            let before = s.clone();
            self.settle_environment(&mut s, &mut trail);
            self.settle_daemons(&mut s, &mut trail);
            self.invariants(&s).map_err(|v| Violation {
                rule: v.rule,
                detail: format!(
                    "while settling, after {}: {}\nstate:\n{s:?}",
                    render_trail(&trail),
                    v.detail
                ),
            })?;
            if s == before {
                break;
            }
            if rounds > 60 {
                return Err(Violation {
                    rule: "liveness",
                    detail: "the daemons never stop acting after the faults stopped".into(),
                });
            }
        }
        if known_good {
            self.settled.borrow_mut().extend(round_starts);
            return Ok(());
        }
        let configured = self.configured(&s);
        let want = configured.len();
        let whole = configured.iter().all(|&x| {
            running_data(&s, x).is_some_and(|d| is_voter(d, x) && d.config.len() == want)
                && self.quorate(&s, x)
                && self.group(&s, x).len() == want
        });
        if !whole && !self.refusal_names_the_newest(&s) {
            let why: Vec<String> = configured
                .iter()
                .map(|&x| {
                    let f = self.facts(&s, x);
                    let d = decide_with(&f, &self.config.policy);
                    format!("{}: {:?} {:?}", name(x), d.outcome, d.reason)
                })
                .collect();
            return Err(Violation {
                rule: "liveness",
                detail: format!(
                    "after the faults stopped the cluster did not settle with every node a voter: {}\nsettling: {}\nstate:\n{s:?}",
                    why.join("; "),
                    render_trail(&trail)
                ),
            });
        }
        self.settled.borrow_mut().extend(round_starts);
        Ok(())
    }

    /// One settling round's environment: maintenance ends, lost nodes are
    /// fenced (or confirmed down), the network heals, every node powers on
    /// and a node that stopped etcd for good shuts down.
    fn settle_environment(&self, s: &mut State, trail: &mut Vec<Event>) {
        if s.maintenance {
            self.settle_step(s, trail, Event::Maintenance(false));
        }
        self.settle_fences(s, trail);
        if s.cut.is_some() {
            self.settle_step(s, trail, Event::Heal);
        }
        for x in 0..self.n() {
            let node = &s.nodes[x];
            let ev = if !node.power && node.configured {
                Event::PowerOn(x)
            } else if !node.target && node.stopped_at.is_some() && !node.etcd {
                Event::Shutdown(x)
            } else {
                continue;
            };
            self.settle_step(s, trail, ev);
        }
    }

    fn settle_fences(&self, s: &mut State, trail: &mut Vec<Event>) {
        let n = self.n();
        for x in 0..n {
            for y in 0..n {
                let ev = if self.config.fence_fails {
                    if s.nodes[y].power {
                        continue;
                    }
                    Event::Confirm(x, y)
                } else {
                    Event::Fence(x, y)
                };
                if s.nodes[x].power
                    && s.nodes[x].quorate
                    && matches!(s.nodes[x].seen[y], Seen::Lost(_))
                    && self.config.topology == Topology::TwoNode
                {
                    self.settle_step(s, trail, ev);
                }
            }
        }
    }

    /// One settling round's daemons: the CIB syncs, commits persist,
    /// learners catch up, and every daemon acts, observes and acts again.
    fn settle_daemons(&self, s: &mut State, trail: &mut Vec<Event>) {
        let mut quiet = vec![Event::SyncCib, Event::CommitSync];
        for x in 0..self.n() {
            quiet.extend([
                Event::Replicate(x),
                Event::Act(x),
                Event::Observe(x),
                Event::Act(x),
            ]);
        }
        for ev in quiet {
            if let Some(next) = self.apply(s, &ev) {
                trail.push(ev);
                *s = next;
            }
        }
    }

    /// `ev`, if it can happen now, appended to the trail.
    fn settle_step(&self, s: &mut State, trail: &mut Vec<Event>, ev: Event) {
        if let Some(next) = self.step(s, &ev) {
            trail.push(ev);
            *s = next;
        }
    }

    /// With `refusal_ends`: the pair is stuck on purpose. A member
    /// directory is missing (only an operator can bring it back, or accept
    /// the risk of forcing from the data left), a node refuses, and every
    /// refusal names, in its command, a node whose data (or, for a missing
    /// directory, whose state file) has the newest epoch, a forced
    /// restart's epoch not yet seen done included.
    fn refusal_names_the_newest(&self, s: &State) -> bool {
        let missing = |n: &Node| {
            n.configured
                && (n.lost.is_some() || n.state_lost || (n.data.is_none() && n.archives == 0))
        };
        if !self.config.refusal_ends || !(s.replaced || s.nodes.iter().any(missing)) {
            return false;
        }
        let may_hold = |epoch: u8, pending: Option<u8>| epoch.max(pending.unwrap_or(0));
        let epoch = |n: &Node| {
            n.data
                .as_ref()
                .map(|d| may_hold(d.epoch, d.pending))
                .or(n.lost.map(|l| may_hold(l.epoch, l.pending)))
        };
        let newest = s.nodes.iter().filter_map(epoch).max();
        // A learner's data that has not been a voter yet counts for no
        // commit: beside a voter's data (or a lost voter's state file) of
        // the same epoch it is never the newest.
        let learner_only = |x: usize| {
            s.nodes[x]
                .data
                .as_ref()
                .is_some_and(|d| !d.removed && !is_voter(d, x))
        };
        let at_newest: Vec<usize> = (0..self.n())
            .filter(|&x| newest.is_some() && epoch(&s.nodes[x]) == newest)
            .collect();
        let voter_at_newest = at_newest.iter().any(|&x| !learner_only(x));
        // With no data and no state file left anywhere (a machine replaced
        // beside a peer that archived its own), the archives hold it.
        let newest_nodes: Vec<String> = (0..self.n())
            .filter(|&x| match newest {
                Some(_) => at_newest.contains(&x) && (!voter_at_newest || !learner_only(x)),
                None => s.nodes[x].archives > 0,
            })
            .map(name)
            .collect();
        let mut refused = false;
        for x in self.configured(s) {
            let d = decide_with(&self.facts(s, x), &self.config.policy);
            if let Some((_, command)) = d.refusal() {
                refused = true;
                let names_newest = newest_nodes
                    .iter()
                    .any(|n| command.split_whitespace().any(|w| w == n));
                if !names_newest {
                    return false;
                }
            }
        }
        refused
    }
}
