//! The safety rules checked in every state.

use crate::facts::Topology;

use super::explore::Violation;
use super::state::State;
use super::{EtcdModel, is_voter, name, running_data};

impl EtcdModel {
    pub(super) fn invariants(&self, s: &State) -> Result<(), Violation> {
        match self
            .rules(s)
            .into_iter()
            .find(|v| !self.config.unchecked.contains(&v.rule))
        {
            Some(v) => Err(v),
            None => Ok(()),
        }
    }

    pub(super) fn rules(&self, s: &State) -> Vec<Violation> {
        let mut out = Vec::new();
        if let Some((rule, detail)) = &s.broken {
            out.push(Violation {
                rule,
                detail: detail.clone(),
            });
        }
        let n = self.n();
        let writers: Vec<usize> = (0..n).filter(|&x| self.quorate(s, x)).collect();
        // The split-brain rule: all members that accept writes form one cluster.
        for &a in &writers {
            for &b in &writers {
                if a < b && !self.group(s, a).contains(&b) {
                    out.push(Violation {
                        rule: "split brain",
                        detail: format!(
                            "split brain: {} and {} both accept writes in separate clusters",
                            name(a),
                            name(b)
                        ),
                    });
                }
            }
        }
        // The lost-write rule: every acknowledged write is in every writer's log.
        for &x in &writers {
            let log = running_data(s, x).map(|d| d.log.as_slice()).unwrap_or(&[]);
            if let Some(w) = s.acked.iter().find(|w| !log.contains(w)) {
                out.push(Violation {
                    rule: "lost write",
                    detail: format!(
                        "acknowledged write {w} is missing from {}, which accepts writes",
                        name(x)
                    ),
                });
            }
        }
        // The lost-write rule, for the marker: a node's in-sync marker says its data
        // holds every acknowledged write, so that a force from it loses
        // none; a marker that outlives that is a force waiting to lose one.
        // Checked while etcd runs: a daemon clears the marker as soon as it
        // finds etcd not running, before it decides anything.
        // Two-node only: HA mode never forces, so it never reads the marker.
        for x in 0..n {
            let node = &s.nodes[x];
            if self.config.topology == Topology::TwoNode
                && node.in_sync
                && let Some(d) = running_data(s, x)
                && let Some(w) = s.acked.iter().find(|w| !d.log.contains(w))
            {
                out.push(Violation {
                    rule: "lost write",
                    detail: format!(
                        "{} holds the in-sync marker but its data lacks acknowledged write {w}",
                        name(x)
                    ),
                });
            }
        }
        // The voter rule (HA replacement): never more than one extra voter.
        let wanted = self.configured(s).len();
        for x in 0..n {
            if let Some(d) = running_data(s, x) {
                let voters = d.config.iter().filter(|e| !e.learner).count();
                if voters > wanted + 1 {
                    out.push(Violation {
                        rule: "no voter",
                        detail: format!(
                            "{} has {voters} voters for {wanted} configured nodes",
                            name(x)
                        ),
                    });
                }
            }
        }
        // The one-claim rule: at most one live claim.
        let claims: Vec<String> = (0..n)
            .filter(|&x| s.nodes[x].power && s.nodes[x].claim.is_some())
            .map(name)
            .collect();
        if claims.len() > 1 {
            out.push(Violation {
                rule: "two claims",
                detail: format!("more than one node claims force-new-cluster: {claims:?}"),
            });
        }
        // The voter rule: a voter exists (on disk), unless nothing was ever created.
        let ever = s.nodes.iter().any(|n| n.data.is_some() || n.archives > 0);
        let voter = (0..n).any(|x| {
            s.nodes[x]
                .data
                .as_ref()
                .is_some_and(|d| !d.removed && is_voter(d, x))
        });
        // A member directory that went missing (a fault, not a decision)
        // still exists for this rule: its volume or a snapshot holds it,
        // and only an operator can bring it back.
        // So does the data of a machine replaced with empty disks.
        let missing = s.nodes.iter().any(|n| n.lost.is_some()) || s.replaced;
        if ever && !voter && !missing {
            out.push(Violation {
                rule: "no voter",
                detail: "no node holds a voting member any more".into(),
            });
        }
        out
    }
}
