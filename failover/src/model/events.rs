//! The environment's and the daemons' events, and what each does to the
//! state.

use crate::decision::Step;
use crate::facts::Topology;

use super::state::{CibCopy, Lost, Node, Seen, State};
use super::{EtcdModel, connected, is_voter, name, running_data, start_in_flight, tick};

/// Environment and daemon events.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// Power loss of a node (fault).
    Crash(usize),
    /// Cut one node off the network (fault).
    Partition(usize),
    /// Reconnect.
    Heal,
    /// The first node fences the second (Pacemaker's decision).
    Fence(usize, usize),
    /// Power a node on.
    PowerOn(usize),
    /// The etcd process dies (fault).
    EtcdCrash(usize),
    /// The daemon restarts, losing the step it had decided (fault).
    DaemonRestart(usize),
    /// Pacemaker stops the etcd instance for a graceful shutdown (fault).
    GracefulStop(usize),
    /// After its stop completed, the node leaves the cluster and powers off.
    Shutdown(usize),
    /// A client writes through a node.
    Write(usize),
    /// A learner catches up.
    Replicate(usize),
    /// Followers learn the leader's commit index.
    CommitSync,
    /// Attribute changes reach every connected node's CIB copy.
    SyncCib,
    /// A daemon observes and decides.
    Observe(usize),
    /// A daemon carries out the step it decided.
    Act(usize),
    /// The machine is retired for good and the spare takes its place in
    /// Pacemaker's configuration, powered on with an empty disk (fault).
    Replace(usize),
    /// HA only: the node loses power and its disk is swapped for an empty
    /// one; the old data is kept aside as an archive (fault).
    SwapDisk(usize),
    /// Two-node: the node's own notes of its peers' joins are lost (a file
    /// on /run deleted or unreadable) (fault).
    LoseJoinRecord(usize),
    /// Two-node: the node's clock steps back, so that the joins it notes
    /// from now on read earlier than every fence (fault).
    ClockStepBack(usize),
    /// An operator confirms that the second node, which is off, is down
    /// (`stonith_admin --confirm` on the first): Pacemaker records it as a
    /// fence.
    Confirm(usize, usize),
    /// Pacemaker's `maintenance-mode` is turned on or off (fault).
    Maintenance(bool),
    /// In maintenance: the operator stops the node's etcd by hand (one
    /// fault).
    HandStopEtcd(usize),
    /// In maintenance: the operator starts the node's etcd by hand on its
    /// data, as it is (one fault).
    HandStartEtcd(usize),
    /// Two-node: power loss of a node whose member directory is then gone
    /// when it boots (its data volume is not mounted, or its disk was
    /// replaced), while its state file, kept elsewhere, stays (one fault).
    CrashLosingMemberDir(usize),
    /// Two-node: power loss of a node whose state file is then gone when
    /// it boots, its data intact (one fault).
    CrashLosingStateFile(usize),
    /// Two-node: power loss of a node that comes back with neither data,
    /// nor state file, nor archives (a replaced machine, one fault).
    CrashReplacingDisks(usize),
}

impl EtcdModel {
    /// `y` as a fresh boot numbered `boot`, with what its disks hold (data,
    /// archives, the state file of a lost member directory) and nothing
    /// else.
    fn with_disks(&self, s: &mut State, y: usize, boot: u8) -> Node {
        let mut node = self.fresh_node(boot);
        node.data = s.nodes[y].data.take();
        node.archives = s.nodes[y].archives;
        node.lost = s.nodes[y].lost;
        node.state_lost = s.nodes[y].state_lost;
        node
    }

    pub(super) fn power_off(&self, s: &mut State, y: usize) {
        let boot = s.nodes[y].boot;
        let mut node = self.with_disks(s, y, boot);
        node.power = false;
        node.pcmk = false;
        s.nodes[y] = node;
        // Pacemaker purges the transient attributes of a node that is gone.
        for other in s.nodes.iter_mut() {
            other.cib[y] = CibCopy::default();
        }
    }

    /// Two nodes see each other join. Pacemaker syncs the CIB and attrd its
    /// values as part of the join, before it schedules anything on the
    /// joiner, so both see each other's attributes as of now.
    pub(super) fn join(&self, s: &mut State, a: usize, b: usize) {
        let at = tick(s);
        s.nodes[a].seen[b] = Seen::Online(at);
        s.nodes[b].seen[a] = Seen::Online(at);
        if self.config.join_records {
            for (x, y) in [(a, b), (b, a)] {
                let note = if s.nodes[x].clock_behind { 0 } else { at };
                s.nodes[x].joins[y] = Some(note);
            }
        }
        s.nodes[a].quorate = true;
        s.nodes[b].quorate = true;
        s.nodes[a].cib[b] = CibCopy::of(&s.nodes[b]);
        s.nodes[b].cib[a] = CibCopy::of(&s.nodes[a]);
    }

    pub(super) fn step(&self, s: &State, e: &Event) -> Option<State> {
        let mut s = s.clone();
        let n = self.n();
        match *e {
            Event::Crash(y) => {
                s.faults += 1;
                self.lose(&mut s, y);
                self.power_off(&mut s, y);
            }
            Event::Partition(y) => self.partition(&mut s, y),
            Event::Heal => self.heal(&mut s),
            Event::Fence(x, _) if self.config.serial_starts && start_in_flight(&s, x) => {
                // Pacemaker holds the fence until the start in flight ends.
                return None;
            }
            Event::Fence(x, y) => self.fence(&mut s, x, y),
            Event::PowerOn(y) => self.power_on(&mut s, y),
            Event::EtcdCrash(y) => {
                s.faults += 1;
                s.nodes[y].etcd = false;
            }
            Event::Replace(y) => self.replace(&mut s, y),
            Event::SwapDisk(y) => self.swap_disk(&mut s, y),
            Event::CrashLosingMemberDir(y) => self.crash_losing_member_dir(&mut s, y)?,
            Event::CrashLosingStateFile(y) => self.crash_losing_state_file(&mut s, y)?,
            Event::CrashReplacingDisks(y) => self.crash_replacing_disks(&mut s, y),
            Event::DaemonRestart(y) => {
                s.faults += 1;
                s.nodes[y].pending = None;
                s.nodes[y].plan.clear();
            }
            Event::LoseJoinRecord(y) => {
                s.faults += 1;
                s.nodes[y].joins = vec![None; n];
            }
            Event::ClockStepBack(y) => {
                s.faults += 1;
                s.nodes[y].clock_behind = true;
            }
            Event::Confirm(x, y) => self.confirm(&mut s, x, y),
            Event::Maintenance(on) => {
                // Turning it on is the fault; turning it off ends it.
                if on {
                    s.faults += 1;
                }
                s.maintenance = on;
            }
            Event::HandStopEtcd(y) => {
                s.faults += 1;
                s.nodes[y].etcd = false;
            }
            Event::HandStartEtcd(y) => {
                s.faults += 1;
                s.nodes[y].data.as_ref()?;
                s.nodes[y].etcd = true;
            }
            Event::GracefulStop(y) => {
                s.faults += 1;
                s.nodes[y].target = false;
                s.nodes[y].stopped_at = None;
            }
            Event::Shutdown(y) => self.shutdown(&mut s, y),
            Event::Write(x) => self.write(&mut s, x),
            Event::Replicate(y) => self.replicate(&mut s, y)?,
            Event::CommitSync => {
                for node in s.nodes.iter_mut() {
                    if node.etcd
                        && let Some(d) = node.data.as_mut()
                    {
                        d.commit = d.log.len();
                    }
                }
            }
            Event::SyncCib => sync_cib(&mut s),
            Event::Observe(x) => self.observe(&mut s, x),
            Event::Act(x) => self.act(&mut s, x)?,
        }
        self.settle_etcd(&mut s);
        Some(s)
    }

    /// `y` is cut off from every other node.
    fn partition(&self, s: &mut State, y: usize) {
        let n = self.n();
        s.faults += 1;
        s.cut = Some(y);
        for x in 0..n {
            if x != y && s.nodes[x].power {
                self.lose_between(s, x, y);
                self.lose_between(s, y, x);
            }
        }
    }

    /// The network heals: every pair of Pacemaker nodes joins again.
    fn heal(&self, s: &mut State) {
        let n = self.n();
        s.cut = None;
        for a in 0..n {
            for b in a + 1..n {
                if s.nodes[a].pcmk && s.nodes[b].pcmk {
                    self.join(s, a, b);
                }
            }
        }
    }

    /// `x` fences `y`: `y` is powered off and seen fenced.
    fn fence(&self, s: &mut State, x: usize, y: usize) {
        let n = self.n();
        let at = tick(s);
        s.fences.push((y, at));
        if s.nodes[y].power {
            self.power_off(s, y);
        }
        for z in 0..n {
            if let Seen::Lost(joined) = s.nodes[z].seen[y]
                && (z == x || connected(s, z, x))
            {
                s.nodes[z].seen[y] = Seen::Fenced(joined);
            }
        }
    }

    /// `y` boots with what its disks hold and joins its peers.
    fn power_on(&self, s: &mut State, y: usize) {
        let n = self.n();
        let boot = s.nodes[y].boot.saturating_add(1);
        s.nodes[y] = self.with_disks(s, y, boot);
        for x in 0..n {
            if x != y && s.nodes[x].pcmk && connected(s, x, y) {
                self.join(s, x, y);
            }
        }
    }

    /// The spare machine replaces `y`.
    fn replace(&self, s: &mut State, y: usize) {
        let n = self.n();
        s.faults += 1;
        let spare = self.config.nodes;
        self.lose(s, y);
        self.power_off(s, y);
        s.nodes[y].configured = false;
        s.nodes[y].retired = true;
        let boot = s.nodes[spare].boot.saturating_add(1);
        s.nodes[spare] = self.fresh_node(boot);
        for x in 0..n {
            if x != spare && s.nodes[x].pcmk && connected(s, x, spare) {
                self.join(s, x, spare);
            }
        }
    }

    /// `y` crashes and comes back with an empty disk.
    fn swap_disk(&self, s: &mut State, y: usize) {
        s.faults += 1;
        s.swapped = true;
        self.lose(s, y);
        self.power_off(s, y);
        let node = &mut s.nodes[y];
        if node.data.take().is_some() {
            node.archives = node.archives.saturating_add(1);
        }
    }

    /// `y` crashes and its member directory is gone; its state file stays.
    fn crash_losing_member_dir(&self, s: &mut State, y: usize) -> Option<()> {
        s.faults += 1;
        self.lose(s, y);
        self.power_off(s, y);
        let node = &mut s.nodes[y];
        let d = node.data.take()?;
        node.lost = Some(Lost {
            epoch: d.recorded_epoch(),
            member: d.member,
            formed: d.formed,
            pending: d.pending.filter(|_| d.force_unconfirmed()),
        });
        Some(())
    }

    /// `y` crashes and its state file is gone; its data stays.
    fn crash_losing_state_file(&self, s: &mut State, y: usize) -> Option<()> {
        s.faults += 1;
        self.lose(s, y);
        self.power_off(s, y);
        s.nodes[y].data.as_ref()?;
        s.nodes[y].state_lost = true;
        Some(())
    }

    /// `y` crashes and comes back blank: no data, state file or archive.
    fn crash_replacing_disks(&self, s: &mut State, y: usize) {
        s.faults += 1;
        s.replaced = true;
        self.lose(s, y);
        self.power_off(s, y);
        let node = &mut s.nodes[y];
        node.data = None;
        node.lost = None;
        node.archives = 0;
        node.state_lost = false;
    }

    /// An operator confirms `y` down on `x`'s side.
    fn confirm(&self, s: &mut State, x: usize, y: usize) {
        let n = self.n();
        // Recorded exactly as a fence is; nothing is powered off
        // (the operator confirms a node that is off already).
        let at = tick(s);
        s.fences.push((y, at));
        for z in 0..n {
            if let Seen::Lost(joined) = s.nodes[z].seen[y]
                && (z == x || connected(s, z, x))
            {
                s.nodes[z].seen[y] = Seen::Fenced(joined);
            }
        }
    }

    /// `y` shuts down cleanly: its peers see it leave.
    fn shutdown(&self, s: &mut State, y: usize) {
        let n = self.n();
        for x in 0..n {
            if x != y
                && let Seen::Online(joined) = s.nodes[x].seen[y]
            {
                s.nodes[x].seen[y] = Seen::Left(joined);
            }
        }
        self.power_off(s, y);
    }

    /// A client write through `x`, acknowledged by its group.
    fn write(&self, s: &mut State, x: usize) {
        let group = self.group(s, x);
        let w = s.writes + 1;
        s.writes = w;
        let window = self.config.power_loss_window;
        for y in group {
            let voter = running_data(s, y).is_some_and(|d| is_voter(d, y));
            if let Some(d) = s.nodes[y].data.as_mut()
                && (voter || d.synced)
            {
                d.log.push(w);
                if !window || y == x {
                    d.commit = d.log.len();
                }
            }
        }
        s.acked.push(w);
    }

    /// Learner `y` catches up with its leader.
    fn replicate(&self, s: &mut State, y: usize) -> Option<()> {
        let n = self.n();
        let leader =
            (0..n).find(|&l| self.leader(s, l) == Some(l) && self.group(s, l).contains(&y))?;
        let log = s.nodes[leader].data.as_ref()?.log.clone();
        let d = s.nodes[y].data.as_mut()?;
        d.log = log;
        d.synced = true;
        Some(())
    }

    /// `x`'s daemon carries out its pending step.
    fn act(&self, s: &mut State, x: usize) -> Option<()> {
        let step = s.nodes[x].pending.take()?;
        if !s.nodes[x].plan.is_empty() {
            s.nodes[x].pending = Some(s.nodes[x].plan.remove(0));
        }
        if self.force_still_decided(s, x, &step) {
            // A forced restart begun before maintenance mode is one
            // executor step: its second half (the restart after the
            // stop) is not a new action.
            if s.maintenance
                && matches!(step, Step::ForceNewCluster { .. })
                && !self.second_half(s, x, &step)
            {
                s.broken = Some((
                    "maintenance",
                    format!(
                        "{} restarted etcd with --force-new-cluster while Pacemaker was in maintenance mode",
                        name(x)
                    ),
                ));
            }
            self.carry_out(s, x, &step);
        } else {
            // The fresh facts no longer lead to this force: the
            // daemon abandons it, and the rest of the plan.
            s.nodes[x].pending = None;
            s.nodes[x].plan.clear();
        }
        Some(())
    }

    /// `x` loses sight of `y` without proof it is down.
    pub(super) fn lose_between(&self, s: &mut State, x: usize, y: usize) {
        if let Seen::Online(at) = s.nodes[x].seen[y] {
            s.nodes[x].seen[y] = Seen::Lost(at);
        }
    }

    pub(super) fn lose(&self, s: &mut State, y: usize) {
        for x in 0..self.n() {
            if x != y && connected(s, x, y) {
                self.lose_between(s, x, y);
            }
        }
    }

    pub(super) fn enabled(&self, s: &State) -> Vec<Event> {
        let n = self.n();
        let mut out = Vec::new();
        let can_fault = s.faults < self.config.max_faults;
        for x in 0..n {
            let node = &s.nodes[x];
            if node.power {
                self.powered_events(s, x, can_fault, &mut out);
            } else if node.configured {
                out.push(Event::PowerOn(x));
            }
            self.machine_faults(s, x, can_fault, &mut out);
        }
        if s.cut.is_some() {
            out.push(Event::Heal);
        }
        if self.config.maintenance && (s.maintenance || can_fault) {
            out.push(Event::Maintenance(!s.maintenance));
        }
        if self.config.power_loss_window {
            out.push(Event::CommitSync);
        }
        out.push(Event::SyncCib);
        out
    }

    /// What can happen on powered node `x`: its daemon, its etcd, its
    /// faults and its fences.
    fn powered_events(&self, s: &State, x: usize, can_fault: bool, out: &mut Vec<Event>) {
        let node = &s.nodes[x];
        out.push(Event::Observe(x));
        if node.pending.is_some() {
            out.push(Event::Act(x));
        }
        if self.quorate(s, x) && s.writes < self.config.max_writes {
            out.push(Event::Write(x));
        }
        if node.etcd
            && node
                .data
                .as_ref()
                .is_some_and(|d| !is_voter(d, x) && !d.synced)
        {
            out.push(Event::Replicate(x));
        }
        if !node.target && node.stopped_at.is_some() && !node.etcd {
            out.push(Event::Shutdown(x));
        }
        if can_fault {
            self.disk_faults(s, x, out);
            self.hand_events(s, x, out);
            self.node_faults(s, x, out);
        }
        self.fences(s, x, out);
    }

    /// Crashes that take part of `x`'s disks with them (two nodes only).
    fn disk_faults(&self, s: &State, x: usize, out: &mut Vec<Event>) {
        let node = &s.nodes[x];
        if self.config.topology != Topology::TwoNode {
            return;
        }
        if self.config.lose_member_dir && node.data.is_some() {
            out.push(Event::CrashLosingMemberDir(x));
        }
        if !self.config.lose_state_file {
            return;
        }
        if node.data.is_some() && !node.state_lost {
            out.push(Event::CrashLosingStateFile(x));
        }
        // Both machines replaced leaves no history at all (a fresh
        // bootstrap is then right): one blank at a time. And a replacement
        // (power off, new disks, boot) takes far longer than a daemon's
        // pass: the other nodes' records are current when it happens.
        let n = self.n();
        let other_blank = (0..n).any(|y| {
            y != x
                && s.nodes[y].configured
                && s.nodes[y].data.is_none()
                && s.nodes[y].lost.is_none()
        });
        let records_current = (0..n).all(|y| {
            y == x || !s.nodes[y].power || s.nodes[y].record.as_ref() == Some(&self.rec_of(s, y))
        });
        if !other_blank && records_current {
            out.push(Event::CrashReplacingDisks(x));
        }
    }

    /// An operator's hand on etcd during maintenance.
    fn hand_events(&self, s: &State, x: usize, out: &mut Vec<Event>) {
        let node = &s.nodes[x];
        if self.config.maintenance && s.maintenance {
            if node.etcd {
                out.push(Event::HandStopEtcd(x));
            } else if node.data.is_some() {
                out.push(Event::HandStartEtcd(x));
            }
        }
    }

    /// Crashes, restarts, stops, lost notes, clock steps and a partition.
    fn node_faults(&self, s: &State, x: usize, out: &mut Vec<Event>) {
        let node = &s.nodes[x];
        out.push(Event::Crash(x));
        if node.etcd {
            out.push(Event::EtcdCrash(x));
        }
        if node.pending.is_some() {
            out.push(Event::DaemonRestart(x));
        }
        if node.target && node.started && !s.maintenance && self.config.graceful_stops {
            out.push(Event::GracefulStop(x));
        }
        if self.config.join_records {
            if node.joins.iter().any(Option::is_some) {
                out.push(Event::LoseJoinRecord(x));
            }
            if self.config.clock_steps && !node.clock_behind {
                out.push(Event::ClockStepBack(x));
            }
        }
        if s.cut.is_none() {
            out.push(Event::Partition(x));
        }
    }

    /// A quorate two-node partition fences (or, when fencing fails, has
    /// an operator confirm) every node it lost.
    fn fences(&self, s: &State, x: usize, out: &mut Vec<Event>) {
        let node = &s.nodes[x];
        if self.config.topology != Topology::TwoNode || !node.quorate {
            return;
        }
        for y in 0..self.n() {
            if !matches!(node.seen[y], Seen::Lost(_)) {
                continue;
            }
            if !self.config.fence_fails {
                out.push(Event::Fence(x, y));
            } else if !s.nodes[y].power {
                out.push(Event::Confirm(x, y));
            }
        }
    }

    /// Faults of a whole machine, powered or not: a disk swap, a
    /// replacement by the spare.
    fn machine_faults(&self, s: &State, x: usize, can_fault: bool, out: &mut Vec<Event>) {
        let node = &s.nodes[x];
        if can_fault
            && self.config.disk_swap
            && !s.swapped
            && self.config.topology == Topology::Ha
            && node.configured
            && node.data.is_some()
        {
            out.push(Event::SwapDisk(x));
        }
        let spare_unused = self.config.spare && !s.nodes[self.config.nodes].configured;
        if can_fault && spare_unused && node.configured {
            out.push(Event::Replace(x));
        }
    }
}

pub(super) fn sync_cib(s: &mut State) {
    let n = s.nodes.len();
    for x in 0..n {
        for y in 0..n {
            if x != y && connected(s, x, y) && s.nodes[x].pcmk && s.nodes[y].pcmk {
                s.nodes[x].cib[y] = CibCopy::of(&s.nodes[y]);
            }
        }
    }
}
