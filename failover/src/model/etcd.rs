//! etcd as its members see it: who talks to whom, quorum, the leader, and
//! raft's catch-up and removal after every event.

use super::state::{Data, State};
use super::{EtcdModel, connected, is_voter, running_data};

impl EtcdModel {
    /// The nodes whose etcd talks to `x`'s as part of one cluster.
    pub(super) fn group(&self, s: &State, x: usize) -> Group {
        let mut g = Group(0);
        let Some(dx) = running_data(s, x) else {
            return g;
        };
        for y in 0..self.n() {
            let Some(dy) = running_data(s, y) else {
                continue;
            };
            if connected(s, x, y)
                && dy.epoch == dx.epoch
                && dx.config.iter().any(|e| e.node == y && e.id == dy.member)
                && dy.config.iter().any(|e| e.node == x && e.id == dx.member)
            {
                g.0 |= 1 << y;
            }
        }
        g
    }

    /// `x`'s member is a voter whose group holds a majority of its voters.
    pub(super) fn quorate(&self, s: &State, x: usize) -> bool {
        let Some(dx) = running_data(s, x) else {
            return false;
        };
        if !is_voter(dx, x) {
            return false;
        }
        let group = self.group(s, x);
        let (mut voters, mut present) = (0, 0);
        for e in dx.config.iter().filter(|e| !e.learner) {
            voters += 1;
            if group.contains(&e.node) {
                present += 1;
            }
        }
        present * 2 > voters
    }

    pub(super) fn leader(&self, s: &State, x: usize) -> Option<usize> {
        if !self.quorate(s, x) {
            return None;
        }
        // Raft elects only a voter whose log is at least as long as a
        // majority's: the longest log wins here, the lowest index on a tie.
        let mut best: Option<(usize, usize)> = None;
        for y in self.group(s, x) {
            let Some(d) = running_data(s, y) else {
                continue;
            };
            if !is_voter(d, y) || !self.quorate(s, y) {
                continue;
            }
            if best.is_none_or(|(_, len)| d.log.len() > len) {
                best = Some((y, d.log.len()));
            }
        }
        best.map(|(y, _)| y)
    }

    /// Apply a committed change to every member of `x`'s group.
    pub(super) fn commit_change(&self, s: &mut State, x: usize, change: impl Fn(&mut Data)) {
        for y in self.group(s, x) {
            if let Some(d) = s.nodes[y].data.as_mut() {
                change(d);
            }
        }
    }

    /// Raft catch-up and removal, applied after every event: connected
    /// voters (and caught-up learners) of a quorate group follow its leader;
    /// a member the leader's membership no longer lists is stopped.
    pub(super) fn settle_etcd(&self, s: &mut State) {
        for l in 0..self.n() {
            if self.leader(s, l) != Some(l) {
                continue;
            }
            let Some(dl) = s.nodes[l].data.clone() else {
                continue;
            };
            for y in 0..self.n() {
                if y == l || !connected(s, l, y) || !s.nodes[y].etcd {
                    continue;
                }
                let quorate_y = self.quorate(s, y);
                let Some(dy) = s.nodes[y].data.as_mut() else {
                    continue;
                };
                let entry = dl.config.iter().find(|e| e.node == y && e.id == dy.member);
                match entry {
                    Some(e) if dy.epoch == dl.epoch || !quorate_y => {
                        if dy.epoch != dl.epoch {
                            // An older lineage that the leader still lists
                            // cannot exist; leave it alone.
                            continue;
                        }
                        if !e.learner || dy.synced {
                            dy.log = dl.log.clone();
                            dy.commit = dl.commit.min(dy.log.len());
                        }
                        dy.config = dl.config.clone();
                        dy.lock = dl.lock;
                    }
                    Some(_) => {}
                    None if !quorate_y => {
                        // "the member has been permanently removed": it exits.
                        s.nodes[y].etcd = false;
                    }
                    None => {}
                }
            }
        }
        // A member running in a quorate group publishes itself (name and
        // client URLs), committed like any change (setting it again is a
        // no-op).
        for l in 0..self.n() {
            if self.leader(s, l) != Some(l) {
                continue;
            }
            for y in self.group(s, l) {
                let Some(member) = running_data(s, y).map(|d| d.member) else {
                    continue;
                };
                self.commit_change(s, l, |d| {
                    for e in d
                        .config
                        .iter_mut()
                        .filter(|e| e.node == y && e.id == member)
                    {
                        e.published = true;
                    }
                });
            }
        }
        for i in 0..self.n() {
            if self.quorate(s, i)
                && let Some(d) = s.nodes[i].data.as_mut()
            {
                d.formed = true;
            }
            let node = &mut s.nodes[i];
            if node.etcd && node.data.as_ref().is_none_or(|d| d.removed) {
                node.etcd = false;
            }
            if node.target && node.etcd {
                node.started = true;
            }
        }
    }
}

/// A set of node indexes (the model has at most eight nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Group(pub(super) u8);

impl Group {
    pub(super) fn contains(&self, y: &usize) -> bool {
        self.0 & (1 << y) != 0
    }

    pub(super) fn len(&self) -> usize {
        self.0.count_ones() as usize
    }
}

impl Iterator for Group {
    type Item = usize;

    /// Yields the members in index order, consuming the set.
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let y = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(y)
    }
}
