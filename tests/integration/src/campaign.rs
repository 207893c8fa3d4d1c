//! `make campaign`: randomised rounds of compound faults on the two-node
//! namespace harness, each checked for lost writes, broken real-time order,
//! split brain and a pair that does not recover by itself.
//!
//! A round draws 1–3 faults from the kinds below, applies them with random
//! delays (a fault may land in the middle of the recovery from the one
//! before), then heals everything an operator would (powers nodes on, heals
//! the network, ends maintenance and standby) and waits, up to a deadline,
//! for two voters and etcd started on both. Independent clients write to
//! each node throughout and a watcher on each node follows every key;
//! afterwards every acknowledged write must be read back, no revision may
//! be acknowledged twice, a write acknowledged before another was sent
//! must have the lower revision, and no watch may deliver a revision twice,
//! go backwards, or skip events without a compaction error. Two losses are
//! counted instead of failed: writes a follower's forced restart drops in
//! the commit-index window (`follower-forces`, see [`window_losses`]), and
//! writes acknowledged before a node whose etcd listed it as the only voter
//! lost its disks (`replaced-node` while the other node had left or was
//! still joining): their only copy is gone, whatever any software does.
//! Their revisions and order are checked like every other write's.
//!
//! The round's faults are drawn from its seed, so `SEED` replays a
//! campaign; the delays are wall-clock sleeps on purpose: the point is that
//! any moment is survivable, not a moment chosen by an observed state.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::gateway;
use crate::twonode::{Topology, WardenCluster, poll};
use crate::watcher::Watcher;
use crate::writer::{self, Writer};

/// How long a round's pair may take to recover once every fault is healed.
pub const RECOVERY: Duration = Duration::from_secs(180);
/// Deadline of the harness's own steps (a boot, a fence).
const STEP: Duration = Duration::from_secs(120);

/// Where the window fault's own clients write, each fault under a key
/// prefix of its own numbered by [`WINDOW_FAULTS`].
const WINDOW_PREFIX: &str = "/campaign-window";

/// Window faults started in this process.
static WINDOW_FAULTS: AtomicUsize = AtomicUsize::new(0);

/// A small deterministic generator (xorshift64*): a seed replays a campaign.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is mapped to 1: xorshift stays at 0).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A delay in `0..max_ms` milliseconds.
    pub fn delay(&mut self, max_ms: u64) -> Duration {
        Duration::from_millis(self.below(max_ms))
    }

    /// One of the two nodes.
    pub fn node(&mut self) -> &'static str {
        if self.below(2) == 0 { "node1" } else { "node2" }
    }
}

/// One fault of a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The node loses power; the other fences it. It is powered on again
    /// after `back_after` (a later fault may hit the return).
    PowerLoss {
        node: &'static str,
        back_after: Duration,
    },
    /// The network between the nodes is cut; one node is fenced (the fence
    /// race); the cut heals and the fenced node boots.
    Partition,
    /// The leader is moved by hand to node2, which loses fence races, and
    /// four clients write through node2; 1–3 s later the network is cut
    /// at a random moment. The window in which the leader acknowledged a
    /// write its follower has not yet learned is committed.
    LeaderOnLoserThenPartition { after: Duration },
    /// As above, with node2's daemon paused (SIGSTOP) from before the move
    /// so that it cannot hand the leadership back, and node2's fencing of
    /// node1 failing during the cut: node1, a follower, wins the fence
    /// race and forces from a log whose tail may hold writes
    /// node2 acknowledged. The forced restart must move the revision past
    /// them before any client writes.
    FollowerForces { after: Duration },
    /// Four clients write through the leader (node1, the fence race's
    /// winner, where the daemons keep it); after `after` the network is
    /// cut while node1 cannot fence node2 (its fence device fails), so
    /// node2 fences node1 once its delay has passed and forces from its
    /// follower's log.
    WinnerCannotFence { after: Duration },
    /// The node's daemon is killed (SIGKILL) and restarted after a delay,
    /// as systemd would.
    DaemonKill {
        node: &'static str,
        restart_after: Duration,
    },
    /// The node's etcd is killed (SIGKILL); its daemon restarts it.
    EtcdKill { node: &'static str },
    /// The node's etcd stops answering (SIGSTOP, as a process stuck on a
    /// dead disk) for `lasts`, then gets SIGCONT if it still exists: the
    /// daemon reports it hung and Pacemaker's recovery replaces it.
    EtcdHang { node: &'static str, lasts: Duration },
    /// The cluster is put in maintenance mode for a while.
    Maintenance { lasts: Duration },
    /// Maintenance mode with a fault inside it; maintenance ends after
    /// `lasts`.
    MaintenanceWith { lasts: Duration, inside: Inside },
    /// The node is put in standby (Pacemaker stops etcd there), then back.
    Standby { node: &'static str, lasts: Duration },
    /// Pacemaker on the node stops gracefully, as a reboot does, and the
    /// node boots again.
    GracefulReboot { node: &'static str },
    /// Both nodes lose power; they boot in the given order, the second
    /// `gap` after the first.
    TotalOutage { first: &'static str, gap: Duration },
    /// The node loses power and its fencing fails (an unreachable BMC);
    /// after a failed fence and `confirm_after`, the operator runs
    /// `stonith_admin --confirm` on the survivor; fencing is repaired and
    /// the node powered on.
    FenceFailsThenConfirm {
        node: &'static str,
        confirm_after: Duration,
    },
    /// The node loses power and is fenced; while it is off its daemon's
    /// state file is lost (moved aside, as with a reimaged OS disk); it
    /// boots after `back_after`.
    LostStateFile {
        node: &'static str,
        back_after: Duration,
    },
    /// The node loses power and is fenced, and comes back as a replaced
    /// machine: its etcd data, archives and state directory moved aside.
    ReplacedNode {
        node: &'static str,
        back_after: Duration,
    },
}

/// A fault inside a maintenance window ([`Fault::MaintenanceWith`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inside {
    /// The node loses power; it is fenced once maintenance ends, and
    /// powered on after that.
    PowerLoss(&'static str),
    /// The node's daemon is killed, and started again before maintenance
    /// ends.
    DaemonKill(&'static str),
    /// The node's etcd is killed; nothing restarts it while Pacemaker
    /// manages nothing.
    EtcdKill(&'static str),
}

impl fmt::Display for Inside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Inside::PowerLoss(n) => write!(f, "power-loss {n}"),
            Inside::DaemonKill(n) => write!(f, "daemon-kill {n}"),
            Inside::EtcdKill(n) => write!(f, "etcd-kill {n}"),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |d: &Duration| format!("{:.1}s", d.as_secs_f64());
        match self {
            Fault::PowerLoss { node, back_after } => {
                write!(f, "power-loss {node} (on after {})", s(back_after))
            }
            Fault::Partition => write!(f, "partition"),
            Fault::LeaderOnLoserThenPartition { after } => {
                write!(f, "leader-to-node2+partition ({})", s(after))
            }
            Fault::FollowerForces { after } => {
                write!(f, "follower-forces ({})", s(after))
            }
            Fault::WinnerCannotFence { after } => {
                write!(f, "winner-cannot-fence ({})", s(after))
            }
            Fault::DaemonKill {
                node,
                restart_after,
            } => write!(f, "daemon-kill {node} (restart {})", s(restart_after)),
            Fault::EtcdKill { node } => write!(f, "etcd-kill {node}"),
            Fault::EtcdHang { node, lasts } => write!(f, "etcd-hang {node} ({})", s(lasts)),
            Fault::Maintenance { lasts } => write!(f, "maintenance ({})", s(lasts)),
            Fault::MaintenanceWith { lasts, inside } => {
                write!(f, "maintenance with {inside} ({})", s(lasts))
            }
            Fault::Standby { node, lasts } => write!(f, "standby {node} ({})", s(lasts)),
            Fault::GracefulReboot { node } => write!(f, "graceful-reboot {node}"),
            Fault::TotalOutage { first, gap } => {
                write!(f, "total-outage ({first} first, gap {})", s(gap))
            }
            Fault::FenceFailsThenConfirm {
                node,
                confirm_after,
            } => write!(f, "fence-fails+confirm {node} ({})", s(confirm_after)),
            Fault::LostStateFile { node, back_after } => {
                write!(f, "lost-state-file {node} (on after {})", s(back_after))
            }
            Fault::ReplacedNode { node, back_after } => {
                write!(f, "replaced-node {node} (on after {})", s(back_after))
            }
        }
    }
}

/// Draws one fault.
pub fn draw(rng: &mut Rng) -> Fault {
    match rng.below(10) {
        0 => Fault::PowerLoss {
            node: rng.node(),
            back_after: rng.delay(8000),
        },
        1 => {
            let (node, back_after) = (rng.node(), rng.delay(8000));
            match rng.below(3) {
                0 => Fault::PowerLoss { node, back_after },
                1 => Fault::LostStateFile { node, back_after },
                _ => Fault::ReplacedNode { node, back_after },
            }
        }
        2 => Fault::Partition,
        3 => {
            let after = Duration::from_millis(1000 + rng.below(2000));
            match rng.below(2) {
                0 => Fault::LeaderOnLoserThenPartition { after },
                _ => Fault::FollowerForces { after },
            }
        }
        // Daemon outages of 0–60 s: within the agent's grace for a
        // daemon that is down (300 s), so nobody may be fenced for them.
        4 => Fault::DaemonKill {
            node: rng.node(),
            restart_after: match rng.below(3) {
                0 => rng.delay(60_000),
                _ => rng.delay(3000),
            },
        },
        5 => match rng.below(2) {
            0 => Fault::EtcdKill { node: rng.node() },
            _ => Fault::EtcdHang {
                node: rng.node(),
                lasts: Duration::from_millis(5000 + rng.below(55_000)),
            },
        },
        6 => match rng.below(3) {
            0 => Fault::Maintenance {
                lasts: Duration::from_millis(2000 + rng.below(6000)),
            },
            1 => Fault::MaintenanceWith {
                lasts: Duration::from_millis(2000 + rng.below(6000)),
                inside: match rng.below(3) {
                    0 => Inside::PowerLoss(rng.node()),
                    1 => Inside::DaemonKill(rng.node()),
                    _ => Inside::EtcdKill(rng.node()),
                },
            },
            _ => Fault::Standby {
                node: rng.node(),
                lasts: Duration::from_millis(2000 + rng.below(6000)),
            },
        },
        7 => Fault::GracefulReboot { node: rng.node() },
        8 => match rng.below(2) {
            0 => Fault::FenceFailsThenConfirm {
                node: rng.node(),
                confirm_after: rng.delay(5000),
            },
            _ => Fault::WinnerCannotFence {
                after: Duration::from_millis(1000 + rng.below(2000)),
            },
        },
        _ => Fault::TotalOutage {
            first: rng.node(),
            gap: rng.delay(10_000),
        },
    }
}

/// How a round ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Two voters, every write there, in order.
    Passed,
    /// An acknowledged write is missing.
    Lost(String),
    /// Real-time order broken.
    Order(String),
    /// The pair did not recover by the deadline; the daemons' reasons.
    Stuck(String),
    /// A revision acknowledged twice (two clusters took writes), or a
    /// harness step failed in a way that leaves the round unjudged.
    Unsafe(String),
}

impl Verdict {
    /// The word on the round's line.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Lost(_) => "LOST",
            Verdict::Order(_) => "ORDER",
            Verdict::Stuck(_) => "STUCK",
            Verdict::Unsafe(_) => "UNSAFE",
        }
    }
}

/// Tallies of a campaign.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Rounds run.
    pub rounds: usize,
    /// Passed.
    pub passed: usize,
    /// Lost writes.
    pub lost: usize,
    /// Order violations.
    pub order: usize,
    /// Stuck.
    pub stuck: usize,
    /// Stuck, but the reason names a node and an `etcd-warden recover`
    /// command (the state the daemons explain instead of fixing).
    pub stuck_explained: usize,
    /// Unsafe.
    pub unsafe_: usize,
    /// Rounds in which a follower's force dropped writes node2 had just
    /// acknowledged (the commit-index window), and how many.
    pub window_rounds: usize,
    /// Writes so dropped.
    pub window_lost: usize,
    /// Rounds in which a node holding the only copy of acknowledged
    /// writes lost its disks, and how many such writes were gone.
    pub disk_rounds: usize,
    /// Writes so gone.
    pub lost_with_disk: usize,
    /// Rounds that ended in a refusal naming a command, which the
    /// campaign then ran (judged as any round afterwards).
    pub operator: usize,
}

impl Tally {
    /// Adds a round's verdict and window losses.
    pub fn add(&mut self, j: &Judged) {
        self.rounds += 1;
        if j.operator.is_some() {
            self.operator += 1;
        }
        if !j.window_lost.is_empty() {
            self.window_rounds += 1;
            self.window_lost += j.window_lost.len();
        }
        if !j.lost_with_disk.is_empty() {
            self.disk_rounds += 1;
            self.lost_with_disk += j.lost_with_disk.len();
        }
        let v = &j.verdict;
        match v {
            Verdict::Passed => self.passed += 1,
            Verdict::Lost(_) => self.lost += 1,
            Verdict::Order(_) => self.order += 1,
            Verdict::Stuck(r) => {
                self.stuck += 1;
                if r.contains("etcd-warden recover") {
                    self.stuck_explained += 1;
                }
            }
            Verdict::Unsafe(_) => self.unsafe_ += 1,
        }
    }

    /// Whether the campaign passes: nothing lost, no order broken, nothing
    /// unsafe, and every stuck round explained by the daemons.
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.order == 0 && self.unsafe_ == 0 && self.stuck == self.stuck_explained
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "campaign: {} rounds, {} passed, {} lost, {} order, {} stuck, {} unsafe",
            self.rounds, self.passed, self.lost, self.order, self.stuck, self.unsafe_
        )?;
        if self.stuck > 0 {
            write!(f, " ({} stuck explained)", self.stuck_explained)?;
        }
        if self.operator > 0 {
            write!(
                f,
                "; the command a refusal named run in {} rounds",
                self.operator
            )?;
        }
        if self.window_rounds > 0 {
            write!(
                f,
                "; {} writes dropped by a follower's force in {} rounds (the commit-index window)",
                self.window_lost, self.window_rounds
            )?;
        }
        if self.disk_rounds > 0 {
            write!(
                f,
                "; {} writes gone with the disks of a node that held their only copy, in {} rounds",
                self.lost_with_disk, self.disk_rounds
            )?;
        }
        Ok(())
    }
}

/// A fresh two-node cluster with both members voters.
pub fn fresh_cluster() -> Result<WardenCluster> {
    let w = WardenCluster::start(2, Topology::TwoNode)?;
    let all = w.nodes();
    w.wait_voters("node1", &all, STEP)?;
    for n in &all {
        poll(&format!("{n}'s etcd to answer"), STEP, || {
            Ok(w.read(n, "/campaign-probe").ok().map(|_| ()))
        })?;
    }
    Ok(w)
}

fn other(node: &str) -> &'static str {
    if node == "node1" { "node2" } else { "node1" }
}

/// Successful fences of `node` seen from `from` (0 if `from` cannot say).
fn fences(w: &WardenCluster, from: &str, node: &str) -> usize {
    w.fence_count(from, node).unwrap_or(0)
}

/// Whether `node` is powered on (its Corosync runs).
fn up(w: &WardenCluster, node: &str) -> bool {
    w.c.is_running(node).unwrap_or(false)
}

/// Powers `node` off and waits for its peer, if up, to fence it.
pub fn power_off(w: &WardenCluster, node: &str) -> Result<()> {
    let peer = other(node);
    let peer_up = up(w, peer);
    let before = if peer_up { fences(w, peer, node) } else { 0 };
    w.c.crash(node)?;
    if peer_up {
        poll(&format!("{peer} to fence {node}"), STEP, || {
            Ok((fences(w, peer, node) > before).then_some(()))
        })?;
    }
    Ok(())
}

/// Boots `node` if it is off.
fn power_on(w: &WardenCluster, node: &str) -> Result<()> {
    if !up(w, node) {
        w.boot(node, STEP)?;
    }
    Ok(())
}

/// Cuts the network and waits until the fence race has a winner; heals the
/// network; returns the fenced node.
fn partition_until_fenced(w: &WardenCluster) -> Result<&'static str> {
    w.c.cut("node1", "node2")?;
    fenced_then_heal(w)
}

/// Waits, with the network cut, until the fence race has a winner; heals
/// the network; returns the fenced node.
fn fenced_then_heal(w: &WardenCluster) -> Result<&'static str> {
    let loser = poll("the fence race to end", STEP, || {
        Ok(match (up(w, "node1"), up(w, "node2")) {
            (true, false) => Some("node2"),
            (false, true) => Some("node1"),
            (false, false) => bail!("both nodes were fenced"),
            (true, true) => None,
        })
    });
    w.c.heal("node1", "node2")?;
    loser
}

/// Four clients writing through `node` under keys of their own (a second
/// window fault in the same round would otherwise write the same keys with
/// the same values, and the first one's acknowledgements would read as
/// lost: same value, later revision).
fn window_writers(w: &WardenCluster, node: &str) -> Result<Writer> {
    let mut targets = Vec::new();
    for i in 1..=4 {
        targets.push((format!("{node}c{i}"), w.netns(node)?, w.client_addr(node)?));
    }
    let k = WINDOW_FAULTS.fetch_add(1, Ordering::Relaxed);
    Writer::start(&format!("{WINDOW_PREFIX}/w{k:05}"), targets)
}

/// The [`Fault::FollowerForces`] fault up to the fence: node2's daemon
/// paused, the leader moved to node2, four clients on it for `after`,
/// node2's fencing of node1 failing, the network cut. Returns the clients' acks and when the network was cut;
/// node2 is left powered off.
fn follower_forces(w: &WardenCluster, after: Duration) -> Result<(Vec<writer::Ack>, Instant)> {
    let daemon = w.daemon_pid("node2").context("node2 runs no daemon")?;
    w.c.exec_ok("node2", &["kill", "-STOP", &daemon.to_string()])?;
    let cont = |w: &WardenCluster| {
        if up(w, "node2") {
            let _ = w.c.exec("node2", &["kill", "-CONT", &daemon.to_string()]);
        }
    };
    if let Err(e) = move_leader(w, "node2") {
        eprintln!("  (leader not moved: {e:#})");
    }
    let extra = match window_writers(w, "node2") {
        Ok(x) => x,
        Err(e) => {
            cont(w);
            return Err(e);
        }
    };
    std::thread::sleep(after);
    // etcd's leader tells its follower of a commit in its next message,
    // one network delay after it acknowledged the write: on a fast link
    // that window is a fraction of a millisecond. A slow link from node2
    // to node1 for etcd's peer traffic widens it to the queue's delay.
    let slowed = slow_peer_link(w, "node2", "node1");
    if slowed.is_ok() {
        std::thread::sleep(SLOW_LINK_FOR);
    }
    // node1 wins fence races by node2's 2 s fencing delay; on a loaded
    // machine node1's own fencing can take longer than that. node2's
    // fencing of node1 fails for the race, so that node1 is the one that
    // forces, the follower this fault is about.
    let fails = warden_harness::fence_agent::set_fails(w.c.root(), "node1", true);
    let mut cut = Instant::now();
    let loser = fails
        .and_then(|()| w.c.cut("node1", "node2"))
        .and_then(|()| {
            // No write is committed once the link is down: acks up to here.
            cut = Instant::now();
            if slowed.is_ok() {
                w.c.exec_ok("node2", &["tc", "qdisc", "del", "dev", "to-node1", "root"])?;
            }
            fenced_then_heal(w)
        });
    let own = extra.finish();
    cont(w);
    warden_harness::fence_agent::set_fails(w.c.root(), "node1", false)?;
    let loser = loser?;
    ensure!(
        loser == "node2",
        "node1 was fenced although node2's fencing of it failed"
    );
    Ok((own, cut))
}

/// Whether `node`'s etcd lists `node` as its only voter (it answers; a
/// learner or a missing peer beside it holds no copy of every write).
fn only_voter(w: &WardenCluster, node: &str) -> bool {
    w.members(node).is_ok_and(|(_, members)| {
        let voters: Vec<_> = members.iter().filter(|m| !m.is_learner).collect();
        voters.len() == 1 && voters.iter().all(|m| m.name == node)
    })
}

/// Faults that set files aside in this process (names their directory).
static SET_ASIDE: AtomicUsize = AtomicUsize::new(0);

/// Moves each of `paths` that exists into a new directory under the
/// cluster's root (`set-aside/<node>-<n>/`): a lost disk's content is
/// kept, never deleted.
fn set_aside(w: &WardenCluster, node: &str, paths: &[std::path::PathBuf]) -> Result<()> {
    let n = SET_ASIDE.fetch_add(1, Ordering::Relaxed);
    let dir = w.c.root().join("set-aside").join(format!("{node}-{n}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (i, p) in paths.iter().enumerate().filter(|(_, p)| p.exists()) {
        // Numbered: two directories may hold entries of one name.
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        let to = dir.join(format!("{i:02}-{name}"));
        std::fs::rename(p, &to)
            .with_context(|| format!("moving {} to {}", p.display(), to.display()))?;
    }
    Ok(())
}

/// The entries of directory `dir` (none when it cannot be read).
fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// How long etcd's peer traffic from node2 to node1 is slowed before the cut.
const SLOW_LINK_FOR: Duration = Duration::from_millis(700);

/// Shapes etcd's peer traffic (port 2380, either end) leaving `from`
/// towards `to` to 200 kbit/s (an HTB class; the rest of the link, Corosync
/// included, is not limited). Removed with `tc qdisc del dev to-TO root`.
fn slow_peer_link(w: &WardenCluster, from: &str, to: &str) -> Result<()> {
    let dev = format!("to-{to}");
    let tc = |args: &[&str]| -> Result<()> {
        let mut argv = vec!["tc"];
        argv.extend_from_slice(args);
        w.c.exec_ok(from, &argv).map(|_| ())
    };
    let port = crate::twonode::PEER_PORT.to_string();
    tc(&[
        "qdisc", "add", "dev", &dev, "root", "handle", "1:", "htb", "default", "10",
    ])?;
    tc(&[
        "class", "add", "dev", &dev, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit",
    ])?;
    tc(&[
        "class", "add", "dev", &dev, "parent", "1:", "classid", "1:30", "htb", "rate", "200kbit",
        "ceil", "200kbit",
    ])?;
    for end in ["dport", "sport"] {
        tc(&[
            "filter", "add", "dev", &dev, "parent", "1:", "protocol", "ip", "u32", "match", "ip",
            end, &port, "0xffff", "flowid", "1:30",
        ])?;
    }
    Ok(())
}

/// The [`Fault::WinnerCannotFence`] fault up to the fence: four clients on
/// node1 for `after`, node1's fencing of node2 failing, the network cut
/// until node2 fenced node1. Returns the clients' acks and when the network
/// was cut; node1 is left powered off.
fn winner_cannot_fence(w: &WardenCluster, after: Duration) -> Result<(Vec<writer::Ack>, Instant)> {
    let extra = window_writers(w, "node1")?;
    std::thread::sleep(after);
    let fails = warden_harness::fence_agent::set_fails(w.c.root(), "node2", true);
    let mut cut = Instant::now();
    let loser = fails
        .and_then(|()| w.c.cut("node1", "node2"))
        .and_then(|()| {
            cut = Instant::now();
            fenced_then_heal(w)
        });
    let own = extra.finish();
    warden_harness::fence_agent::set_fails(w.c.root(), "node2", false)?;
    let loser = loser?;
    ensure!(
        loser == "node1",
        "node2 was fenced although node1's fencing of it failed"
    );
    Ok((own, cut))
}

/// Moves etcd's leadership to `to` (asked of the current leader).
fn move_leader(w: &WardenCluster, to: &str) -> Result<()> {
    let (_, members) = w.members(to)?;
    let target = members
        .iter()
        .find(|m| m.name == to)
        .with_context(|| format!("{to} is not a member: {members:?}"))?
        .id;
    let (n, me) = leader(w)?;
    if me == target {
        return Ok(());
    }
    let addr = w.client_addr(n)?;
    let id = format!("{target:x}");
    w.netns(n)?.run(move || {
        gateway::etcdctl(addr, &["move-leader", &id], Duration::from_secs(5)).map(|_| ())
    })?;
    Ok(())
}

/// The node whose etcd answers as the leader, and its member id.
fn leader(w: &WardenCluster) -> Result<(&'static str, u64)> {
    for n in ["node1", "node2"] {
        let addr = w.client_addr(n)?;
        let status = w
            .netns(n)?
            .run(move || gateway::etcdctl(addr, &["endpoint", "status"], Duration::from_secs(3)));
        let Ok(status) = status else { continue };
        let s = status
            .get(0)
            .and_then(|e| e.get("Status"))
            .cloned()
            .unwrap_or_default();
        let leader = s.get("leader").and_then(gateway::num);
        let me = s
            .get("header")
            .and_then(|h| h.get("member_id"))
            .and_then(gateway::num);
        if let Some(me) = me
            && leader == Some(me)
        {
            return Ok((n, me));
        }
    }
    bail!("no node answered as the leader")
}

/// The moment `node` is taken out, when its etcd led: the other node can
/// then force only from a follower's log, whose commit index may not cover
/// the last write the leader acknowledged (the commit-index window).
fn leader_cut(w: &WardenCluster, node: &'static str) -> Option<(Instant, &'static str)> {
    let led = leader(w).is_ok_and(|(n, _)| n == node);
    led.then(|| (Instant::now(), node))
}

/// Kills `pid` inside `node`.
fn kill9(w: &WardenCluster, node: &str, pid: i64) -> Result<()> {
    w.c.exec_ok(node, &["kill", "-KILL", &pid.to_string()])?;
    Ok(())
}

/// Sets the cluster's `maintenance-mode`.
fn maintenance(w: &WardenCluster, on: bool) -> Result<()> {
    let value = if on { "true" } else { "false" };
    crm_attribute(
        w,
        &[
            "--type",
            "crm_config",
            "--name",
            "maintenance-mode",
            "--update",
            value,
        ],
    )
}

/// Maintenance mode for `lasts` with `inside` happening in it (see
/// [`Inside`]); a node powered off inside is fenced once maintenance ends
/// and powered on after that.
fn maintenance_with(
    w: &WardenCluster,
    lasts: Duration,
    inside: Inside,
    rng: &mut Rng,
) -> Result<()> {
    let node = match inside {
        Inside::PowerLoss(n) | Inside::DaemonKill(n) | Inside::EtcdKill(n) => n,
    };
    if !(up(w, node) && up(w, other(node))) {
        return Ok(());
    }
    maintenance(w, true)?;
    let before = fences(w, other(node), node);
    match inside {
        Inside::PowerLoss(_) => {
            w.c.crash(node)?;
        }
        Inside::DaemonKill(_) => {
            if let Some(pid) = w.daemon_pid(node) {
                kill9(w, node, i64::from(pid))?;
            }
        }
        Inside::EtcdKill(_) => {
            if let Ok(Some(pid)) = w.etcd_pid(node) {
                kill9(w, node, pid)?;
            }
        }
    }
    std::thread::sleep(lasts);
    if let Inside::DaemonKill(_) = inside {
        w.spawn_daemon(node)?;
    }
    maintenance(w, false)?;
    if let Inside::PowerLoss(_) = inside {
        let peer = other(node);
        poll(
            &format!("{peer} to fence {node} after maintenance"),
            STEP,
            || Ok((fences(w, peer, node) > before).then_some(())),
        )?;
        std::thread::sleep(rng.delay(3000));
        power_on(w, node)?;
    }
    Ok(())
}

/// Runs `crm_attribute ARGS` on a node that is up.
fn crm_attribute(w: &WardenCluster, args: &[&str]) -> Result<()> {
    let on = ["node1", "node2"]
        .into_iter()
        .find(|n| up(w, n))
        .context("no node is up to run crm_attribute")?;
    let mut argv = vec!["crm_attribute"];
    argv.extend_from_slice(args);
    w.c.exec_ok(on, &argv)?;
    Ok(())
}

/// Stops Pacemaker on `node` as a graceful reboot does (SIGTERM to
/// pacemakerd: it stops its resources, then leaves), then Corosync.
fn graceful_stop(w: &WardenCluster, node: &str) -> Result<()> {
    let (corosync, pacemakerd) = w.c.daemon_pids(node)?;
    if let Some(p) = pacemakerd {
        w.c.exec_ok(node, &["kill", "-TERM", &p.to_string()])?;
        poll(&format!("pacemakerd on {node} to stop"), STEP, || {
            Ok((!warden_harness::process::alive(p)).then_some(()))
        })?;
    }
    if let Some(c) = corosync {
        w.c.exec_ok(node, &["kill", "-TERM", &c.to_string()])?;
        poll(&format!("corosync on {node} to stop"), STEP, || {
            Ok((!warden_harness::process::alive(c)).then_some(()))
        })?;
    }
    // What the reboot ends: every other process of the node, the daemon
    // and its etcd among them (stopped by Pacemaker already).
    w.c.crash(node)?;
    Ok(())
}

/// What applying a fault left for the round's judgement.
#[derive(Debug, Default)]
pub struct Applied {
    /// The acks of the fault's own clients (the window faults').
    pub own: Vec<writer::Ack>,
    /// When the network was cut, and the node of the leader the other
    /// node forced without ([`Fault::FollowerForces`],
    /// [`Fault::WinnerCannotFence`]); or when a leader's node lost power
    /// or lost a fence race (a random fence delay, an operator's confirm).
    pub window_cut: Option<(Instant, &'static str)>,
    /// When a node whose etcd listed it as the only voter lost its disks
    /// ([`Fault::ReplacedNode`] while the other node had not rejoined as a
    /// voter): the writes acknowledged before then had no other copy.
    pub sole_copy_lost: Option<Instant>,
}

/// Applies one fault. Faults that power a node off power it on again
/// themselves (after their delay), so the next fault may hit the return.
pub fn apply(w: &WardenCluster, f: &Fault, rng: &mut Rng) -> Result<Applied> {
    let mut done = Applied::default();
    let own = &mut done.own;
    match f {
        Fault::PowerLoss { node, back_after } => {
            if !up(w, other(node)) {
                // Two nodes down at once is the total outage, drawn apart.
                return Ok(done);
            }
            done.window_cut = leader_cut(w, node);
            power_off(w, node)?;
            std::thread::sleep(*back_after);
            power_on(w, node)?;
        }
        Fault::Partition => {
            if !(up(w, "node1") && up(w, "node2")) {
                return Ok(done);
            }
            let led = leader(w).ok().map(|(n, _)| n);
            let cut = Instant::now();
            let loser = partition_until_fenced(w)?;
            if led == Some(loser) {
                done.window_cut = Some((cut, loser));
            }
            std::thread::sleep(rng.delay(3000));
            power_on(w, loser)?;
        }
        Fault::LeaderOnLoserThenPartition { after } => {
            if !(up(w, "node1") && up(w, "node2")) {
                return Ok(done);
            }
            // Best effort: while a member is rejoining there may be no
            // leader to move; the partition still happens.
            if let Err(e) = move_leader(w, "node2") {
                eprintln!("  (leader not moved: {e:#})");
            }
            let extra = window_writers(w, "node2")?;
            std::thread::sleep(*after);
            let loser = partition_until_fenced(w);
            *own = extra.finish();
            let loser = loser?;
            std::thread::sleep(rng.delay(2000));
            power_on(w, loser)?;
        }
        Fault::FollowerForces { after } | Fault::WinnerCannotFence { after } => {
            if !(up(w, "node1") && up(w, "node2")) {
                return Ok(done);
            }
            // The leader the other node forces without, which is fenced.
            let (acks, cut, leader) = if matches!(f, Fault::FollowerForces { .. }) {
                let (acks, cut) = follower_forces(w, *after)?;
                (acks, cut, "node2")
            } else {
                let (acks, cut) = winner_cannot_fence(w, *after)?;
                (acks, cut, "node1")
            };
            *own = acks;
            done.window_cut = Some((cut, leader));
            std::thread::sleep(rng.delay(2000));
            power_on(w, leader)?;
        }
        Fault::LostStateFile { node, back_after } | Fault::ReplacedNode { node, back_after } => {
            if !(up(w, node) && up(w, other(node))) {
                return Ok(done);
            }
            let sole = matches!(f, Fault::ReplacedNode { .. }) && only_voter(w, node);
            power_off(w, node)?;
            if sole {
                done.sole_copy_lost = Some(Instant::now());
            }
            let state = w.state_dir(node)?;
            let mut lost = vec![state.join("failover-state.json")];
            if matches!(f, Fault::ReplacedNode { .. }) {
                // The directories stay (as a new machine's package makes
                // them); what they held goes.
                lost = vec![w.archive_dir(node)?];
                lost.extend(entries(&w.data_dir(node)?));
                lost.extend(entries(&state));
            }
            set_aside(w, node, &lost)?;
            std::thread::sleep(*back_after);
            power_on(w, node)?;
        }
        Fault::DaemonKill {
            node,
            restart_after,
        } => {
            if !up(w, node) {
                return Ok(done);
            }
            if let Some(pid) = w.daemon_pid(node) {
                kill9(w, node, i64::from(pid))?;
            }
            std::thread::sleep(*restart_after);
            if up(w, node) {
                w.spawn_daemon(node)?;
            }
        }
        Fault::EtcdKill { node } => {
            if up(w, node)
                && let Ok(Some(pid)) = w.etcd_pid(node)
            {
                kill9(w, node, pid)?;
            }
        }
        Fault::EtcdHang { node, lasts } => {
            if up(w, node)
                && let Ok(Some(pid)) = w.etcd_pid(node)
            {
                let pid = pid.to_string();
                w.c.exec_ok(node, &["kill", "-STOP", &pid])?;
                std::thread::sleep(*lasts);
                // Gone when Pacemaker's recovery killed it, or the node
                // was fenced: nothing to continue then.
                if up(w, node) {
                    let _ = w.c.exec(node, &["kill", "-CONT", &pid]);
                }
            }
        }
        Fault::Maintenance { lasts } => {
            maintenance(w, true)?;
            std::thread::sleep(*lasts);
            maintenance(w, false)?;
        }
        Fault::MaintenanceWith { lasts, inside } => {
            maintenance_with(w, *lasts, *inside, rng)?;
        }
        Fault::Standby { node, lasts } => {
            if !up(w, node) {
                return Ok(done);
            }
            crm_attribute(w, &["--node", node, "--name", "standby", "--update", "on"])?;
            std::thread::sleep(*lasts);
            crm_attribute(w, &["--node", node, "--name", "standby", "--update", "off"])?;
        }
        Fault::GracefulReboot { node } => {
            if !up(w, node) {
                return Ok(done);
            }
            graceful_stop(w, node)?;
            power_on(w, node)?;
        }
        Fault::FenceFailsThenConfirm {
            node,
            confirm_after,
        } => {
            let survivor = other(node);
            if !(up(w, node) && up(w, survivor)) {
                return Ok(done);
            }
            warden_harness::fence_agent::set_fails(w.c.root(), node, true)?;
            done.window_cut = leader_cut(w, node);
            let result = (|| {
                w.c.crash(node)?;
                poll(&format!("a failed fence of {node}"), STEP, || {
                    Ok(w.c
                        .crm_mon(survivor)?
                        .fence_history
                        .iter()
                        .any(|e| e.target == *node && e.status == "failed")
                        .then_some(()))
                })?;
                std::thread::sleep(*confirm_after);
                w.c.exec_ok(survivor, &["stonith_admin", "--confirm", node])?;
                anyhow::Ok(())
            })();
            warden_harness::fence_agent::set_fails(w.c.root(), node, false)?;
            result?;
            // Pacemaker retries a failed fence: a retry already in flight
            // when the operator confirmed still runs, and now succeeds.
            // On real hardware its reboot power-cycles the node, which
            // then boots; the harness's fence agent only cuts power. So
            // the node is powered on once no fence of it is pending, as
            // the reboot would leave it, not before (a power-on before the
            // retry ends is cut again and never booted).
            poll(&format!("no pending fence of {node}"), STEP, || {
                Ok((!w
                    .c
                    .crm_mon(survivor)?
                    .fence_history
                    .iter()
                    .any(|e| e.target == *node && e.status == "pending"))
                .then_some(()))
            })?;
            power_on(w, node)?;
        }
        Fault::TotalOutage { first, gap } => {
            for n in ["node1", "node2"] {
                if up(w, n) {
                    w.c.crash(n)?;
                }
            }
            power_on(w, first)?;
            std::thread::sleep(*gap);
            power_on(w, other(first))?;
        }
    }
    Ok(done)
}

/// Heals what a round may have left: network, maintenance, standby, nodes
/// that are off.
pub fn heal(w: &WardenCluster) -> Result<()> {
    w.c.heal("node1", "node2")?;
    for n in ["node1", "node2"] {
        power_on(w, n)?;
    }
    maintenance(w, false)?;
    for n in ["node1", "node2"] {
        crm_attribute(w, &["--node", n, "--name", "standby", "--update", "off"])?;
    }
    Ok(())
}

/// The daemons' own words, for a stuck round.
fn reasons(w: &WardenCluster) -> String {
    ["node1", "node2"]
        .iter()
        .map(|n| {
            format!(
                "{n}: {}",
                w.reason(n).unwrap_or_else(|e| format!("({e:#})"))
            )
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Runs one round of 1–3 faults drawn from `rng`; see [`round_of`].
pub fn round(w: &WardenCluster, n: usize, rng: &mut Rng) -> (Vec<Fault>, Judged) {
    let faults: Vec<Fault> = (0..1 + rng.below(3)).map(|_| draw(rng)).collect();
    let judged = round_of(w, n, &faults, rng);
    (faults, judged)
}

/// Runs one round of `faults` (delays drawn from `rng`) with writers and
/// watchers on both nodes, heals, waits for the pair, and judges it.
pub fn round_of(w: &WardenCluster, n: usize, faults: &[Fault], rng: &mut Rng) -> Judged {
    let all = w.nodes();
    let prefix = format!("/campaign/r{n:04}");
    let writer = match w.writer(&prefix, &all) {
        Ok(wr) => wr,
        Err(e) => return Verdict::Unsafe(format!("writer: {e:#}")).into(),
    };
    // Every round's keys and the window faults' ("/campaign-window").
    let watcher = match Watcher::on_every_node(w, "/campaign") {
        Ok(x) => x,
        Err(e) => return Verdict::Unsafe(format!("watcher: {e:#}")).into(),
    };
    let mut window = Vec::new();
    let mut cuts = Vec::new();
    let mut sole_copy_lost = None;
    for f in faults {
        match apply(w, f, rng) {
            Ok(done) => {
                window.extend(done.own);
                cuts.extend(done.window_cut);
                sole_copy_lost = done.sole_copy_lost.or(sole_copy_lost);
            }
            Err(e) => {
                drop(writer);
                return Verdict::Stuck(format!("{f}: {e:#}; {}", reasons(w))).into();
            }
        }
        std::thread::sleep(rng.delay(5000));
    }
    if let Err(e) = heal(w) {
        return Verdict::Stuck(format!("heal: {e:#}; {}", reasons(w))).into();
    }
    let mut operator = None;
    if let Err(e) = recovered(w, &all) {
        let why = reasons(w);
        // Where the daemons name one command, the operator runs it, as
        // the runbook says, and the pair is judged as any other.
        let Some((sub, node)) = named_command(&why) else {
            return Verdict::Stuck(format!("{e:#}; {why}")).into();
        };
        let cmd = format!("etcd-warden recover {sub} --node {node}");
        let args = [
            "recover",
            sub.as_str(),
            "--node",
            node.as_str(),
            "--confirm",
        ];
        if let Err(run) = w.warden_cli(&node, &args) {
            return Verdict::Stuck(format!("{e:#}; {why}; '{cmd}' failed: {run:#}")).into();
        }
        if let Err(after) = recovered(w, &all) {
            return Verdict::Stuck(format!(
                "{e:#}; {why}; after '{cmd}': {after:#}; {}",
                reasons(w)
            ))
            .into();
        }
        operator = Some(cmd);
    }
    // A write or two once recovered, so the check covers the whole round.
    let t = Instant::now();
    let _ = writer.wait_ack_after(None, t, Duration::from_secs(30));
    let mut acks = writer.finish();
    let watched = watcher.finish();
    let mut judged = judge(w, &mut acks, &prefix, window, &all, &cuts, sole_copy_lost);
    judged.operator = operator;
    if judged.verdict == Verdict::Passed
        && let Err(e) = watched.check()
    {
        judged.verdict = Verdict::Unsafe(format!("watch: {e:#}"));
    }
    judged
}

/// The `etcd-warden recover` command the daemons' refusals in `reasons`
/// name (`resolve with 'etcd-warden recover SUB --node NODE'`), when they
/// name exactly one that needs nothing but the node: the subcommand and
/// the node. A snapshot restore needs a file only the operator has.
pub fn named_command(reasons: &str) -> Option<(String, String)> {
    const RUNNABLE: [&str; 3] = ["force-new-cluster", "keep-data-of", "restore-archive"];
    let named: std::collections::BTreeSet<(String, String)> = reasons
        .split("resolve with 'etcd-warden recover ")
        .skip(1)
        .filter_map(|rest| {
            let words: Vec<&str> = rest.split('\'').next()?.split_whitespace().collect();
            match words.as_slice() {
                [sub, "--node", node] if RUNNABLE.contains(sub) => {
                    Some((sub.to_string(), node.to_string()))
                }
                _ => None,
            }
        })
        .collect();
    let mut it = named.into_iter();
    match (it.next(), it.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// A round's verdict, and the writes lost in the commit-index window of a
/// follower's force (see [`window_losses`]), which are measured, not
/// failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// How the round ended.
    pub verdict: Verdict,
    /// Acknowledged writes a follower's forced restart dropped: each one
    /// the last write a client on node2 had acknowledged before the cut.
    pub window_lost: Vec<String>,
    /// Acknowledged writes whose only copy was on a node that lost its
    /// disks (a replaced machine whose etcd was the only voter): no
    /// software gets them back; each one is checked never to be read.
    pub lost_with_disk: Vec<String>,
    /// The command the daemons named, which the campaign ran as the
    /// operator before judging the round.
    pub operator: Option<String>,
}

impl From<Verdict> for Judged {
    fn from(verdict: Verdict) -> Self {
        Judged {
            verdict,
            window_lost: Vec::new(),
            lost_with_disk: Vec::new(),
            operator: None,
        }
    }
}

/// Waits until the pair is back to full strength and Pacemaker has
/// nothing left to do. Two voters seen while an action is still in flight
/// prove nothing: a stop begun by a fault (standby, a reboot) may be about
/// to take one of them out of the member list again. So: the cluster idle
/// (no pending action), two voters answering, etcd started on both, and
/// still idle afterwards (else once more, within the same deadline).
fn recovered(w: &WardenCluster, all: &[String]) -> Result<()> {
    let deadline = Instant::now() + RECOVERY;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        w.c.wait_idle("node1", left)?;
        let left = deadline.saturating_duration_since(Instant::now());
        w.wait_voters("node1", all, left)?;
        w.wait_started(all, deadline.saturating_duration_since(Instant::now()))?;
        // Idle at once: nothing was scheduled while we looked.
        if w.c.wait_idle("node1", Duration::from_secs(1)).is_ok() {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "Pacemaker still busy after {RECOVERY:?}"
        );
    }
}

fn judge(
    w: &WardenCluster,
    acks: &mut Vec<writer::Ack>,
    prefix: &str,
    window: Vec<writer::Ack>,
    all: &[String],
    cuts: &[(Instant, &str)],
    sole_copy_lost: Option<Instant>,
) -> Judged {
    if let Err(e) = writer::check_unique_revisions(&[acks.as_slice(), window.as_slice()].concat()) {
        return Verdict::Unsafe(format!("{e:#}")).into();
    }
    let mut window_lost = std::collections::BTreeSet::new();
    let mut with_disk = std::collections::BTreeSet::new();
    for (what, set, pfx) in [
        ("writes", &*acks, prefix),
        ("window writes", &window, WINDOW_PREFIX),
    ] {
        if set.is_empty() {
            continue;
        }
        for r in all {
            let kvs = match w.read(r, pfx) {
                Ok(kvs) => kvs,
                Err(e) => {
                    return Verdict::Stuck(format!("reading back through {r}: {e:#}")).into();
                }
            };
            let all_lost = writer::lost_acks(set, &kvs);
            // Acknowledged before the only copy's disks went: gone with them.
            let (gone, all_lost): (Vec<&writer::Ack>, Vec<&writer::Ack>) = all_lost
                .into_iter()
                .partition(|a| sole_copy_lost.is_some_and(|t| a.at < t));
            with_disk.extend(gone.iter().map(|a| a.key.clone()));
            let (in_window, lost) = window_losses(set, &all_lost, cuts);
            if !lost.is_empty() {
                return Verdict::Lost(format!(
                    "{what} through {r}: {} of {} acknowledged writes lost, e.g. {:?}",
                    lost.len(),
                    set.len(),
                    &lost[..lost.len().min(5)]
                ))
                .into();
            }
            window_lost.extend(in_window);
        }
    }
    let mut everything = std::mem::take(acks);
    everything.extend(window);
    let window_lost: Vec<String> = window_lost.into_iter().collect();
    let lost_with_disk: Vec<String> = with_disk.into_iter().collect();
    // A dropped write keeps its place in real time but not in the history.
    everything.retain(|a| !window_lost.contains(&a.key) && !lost_with_disk.contains(&a.key));
    let verdict = match writer::check_real_time_order(&everything) {
        Err(e) => Verdict::Order(format!("{e:#}")),
        Ok(()) => Verdict::Passed,
    };
    Judged {
        verdict,
        window_lost,
        lost_with_disk,
        operator: None,
    }
}

/// Splits `lost` (acks of `acks` a read did not return) into the keys of
/// those a follower's forced restart may drop, and descriptions of the
/// rest. Dropped: a write the leader's node acknowledged, the last its
/// client sent before a cut in `cuts` (when, and the leader's node), after
/// which the other node forced from its follower's log (a follower learns
/// that an entry is committed only from the leader's next message, and a
/// client's next write is that message's earliest cause). By the time it
/// was sent, not answered: the answer to a write committed just before the
/// cut may reach the client after it.
pub fn window_losses(
    acks: &[writer::Ack],
    lost: &[&writer::Ack],
    cuts: &[(Instant, &str)],
) -> (Vec<String>, Vec<String>) {
    let last_before = |a: &writer::Ack, (cut, leader): (Instant, &str)| {
        a.node.starts_with(leader)
            && a.sent < cut
            && !acks
                .iter()
                .any(|b| b.node == a.node && b.sent > a.sent && b.sent < cut)
    };
    let (dropped, rest): (Vec<&&writer::Ack>, Vec<&&writer::Ack>) = lost
        .iter()
        .partition(|a| cuts.iter().any(|&c| last_before(a, c)));
    (
        dropped.iter().map(|a| a.key.clone()).collect(),
        rest.iter()
            .map(|a| format!("{} (acked by {} at revision {})", a.key, a.node, a.revision))
            .collect(),
    )
}

/// Keeps what explains a failed round before its cluster is torn down:
/// each node's daemon log, Pacemaker's and Corosync's logs, crm_mon with
/// fail counts and fence history, and the daemon's status. Written under
/// `CAMPAIGN_EVIDENCE` (default: the temp dir's `etcd-warden-campaign`),
/// in a directory named by the round and its seed.
fn keep_evidence(w: &WardenCluster, n: usize, seed: u64) -> Result<std::path::PathBuf> {
    let base = std::env::var_os("CAMPAIGN_EVIDENCE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("etcd-warden-campaign"));
    let dir = base.join(format!("r{n:04}-{seed}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: String, text: String| {
        std::fs::write(dir.join(&name), text).with_context(|| format!("writing {name}"))
    };
    for node in ["node1", "node2"] {
        write(format!("{node}-etcd-warden.log"), w.daemon_log(node))?;
        let crm =
            w.c.exec(
                node,
                &[
                    "crm_mon",
                    "-1",
                    "--failcounts",
                    "--fence-history=2",
                    "--show-detail",
                ],
            )
            .map(|o| format!("{}{}", o.stdout, o.stderr))
            .unwrap_or_else(|e| format!("({e:#})"));
        write(format!("{node}-crm_mon.txt"), crm)?;
        let status = w
            .status(node)
            .map(|v| serde_json::to_string_pretty(&v).unwrap_or_default())
            .unwrap_or_else(|e| format!("({e:#})"));
        write(format!("{node}-status.json"), status)?;
        if let Ok(d) = w.c.log_dir(node) {
            for f in ["pacemaker.log", "corosync.log"] {
                if let Ok(text) = std::fs::read_to_string(d.join("log-pacemaker").join(f)) {
                    write(format!("{node}-{f}"), text)?;
                }
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string(w.c.root().join("fence.log")) {
        write("fence.log".into(), text)?;
    }
    Ok(dir)
}

/// Runs `rounds` rounds from `seed`, calling `line` with one line per
/// round; a round that ends stuck or unsafe leaves its cluster behind for
/// a fresh one (its evidence is in the line). Returns the tally.
pub fn run(rounds: usize, seed: u64, line: impl FnMut(String)) -> Result<Tally> {
    let mut seeds = Rng::new(seed);
    let round_seeds: Vec<u64> = (0..rounds).map(|_| seeds.next_u64()).collect();
    run_rounds(&round_seeds, line)
}

/// Runs one round per seed in `round_seeds` (the seeds a campaign's lines
/// print): replays chosen rounds of an earlier campaign.
pub fn run_rounds(round_seeds: &[u64], mut line: impl FnMut(String)) -> Result<Tally> {
    let rounds = round_seeds.len();
    let mut tally = Tally::default();
    let mut cluster: Option<WardenCluster> = None;
    for (i, &round_seed) in round_seeds.iter().enumerate() {
        let n = i + 1;
        let w = match cluster.take() {
            Some(w) => w,
            None => fresh_cluster().context("starting a fresh two-node cluster")?,
        };
        let mut rng = Rng::new(round_seed);
        let t = Instant::now();
        let (faults, judged) = round(&w, n, &mut rng);
        let verdict = &judged.verdict;
        let faults: Vec<String> = faults.iter().map(ToString::to_string).collect();
        let mut detail = match verdict {
            Verdict::Passed => String::new(),
            Verdict::Lost(d) | Verdict::Order(d) | Verdict::Stuck(d) | Verdict::Unsafe(d) => {
                format!(": {d}")
            }
        };
        if let Some(cmd) = &judged.operator {
            detail.push_str(&format!(" (after the operator's '{cmd}')"));
        }
        if !judged.window_lost.is_empty() {
            detail.push_str(&format!(
                " ({} dropped in the commit-index window: {:?})",
                judged.window_lost.len(),
                judged.window_lost
            ));
        }
        if !judged.lost_with_disk.is_empty() {
            detail.push_str(&format!(
                " ({} gone with the disks of the node that held their only copy)",
                judged.lost_with_disk.len()
            ));
        }
        line(format!(
            "round {n}/{rounds} (seed {round_seed}) [{}] {} in {:.0}s{detail}",
            faults.join(", "),
            verdict.word(),
            t.elapsed().as_secs_f64()
        ));
        tally.add(&judged);
        if *verdict == Verdict::Passed {
            cluster = Some(w);
        } else {
            match keep_evidence(&w, n, round_seed) {
                Ok(dir) => line(format!("  evidence of round {n}: {}", dir.display())),
                Err(e) => line(format!("  evidence of round {n} not kept: {e:#}")),
            }
            // Its state is unknown: the next round starts from a fresh pair.
            w.c.stop();
        }
    }
    if let Some(w) = cluster {
        w.c.stop();
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_the_same_faults() {
        let draw_all = |seed| {
            let mut r = Rng::new(seed);
            (0..50).map(|_| draw(&mut r)).collect::<Vec<_>>()
        };
        assert_eq!(draw_all(7), draw_all(7));
        assert_ne!(draw_all(7), draw_all(8));
        // Every kind of fault is drawn.
        let kinds: std::collections::BTreeSet<_> = draw_all(7)
            .iter()
            .map(|f| {
                f.to_string()
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert!(kinds.len() >= 9, "{kinds:?}");
    }

    #[test]
    fn the_tally_fails_on_anything_but_explained_stuck_rounds() {
        let mut t = Tally::default();
        t.add(&Verdict::Passed.into());
        t.add(
            &Verdict::Stuck(
                "node1 holds the newest data: etcd-warden recover force-new-cluster --node node1"
                    .into(),
            )
            .into(),
        );
        assert!(t.ok(), "{t}");
        t.add(&Judged {
            verdict: Verdict::Passed,
            window_lost: vec!["/campaign-window/w00001/node2c1/7".into()],
            lost_with_disk: Vec::new(),
            operator: None,
        });
        assert!(t.ok(), "window losses are measured, not failed: {t}");
        t.add(&Judged {
            verdict: Verdict::Passed,
            window_lost: Vec::new(),
            lost_with_disk: vec!["/campaign/r0004/node1/00000076".into()],
            operator: Some("etcd-warden recover force-new-cluster --node node2".into()),
        });
        assert!(
            t.ok(),
            "writes gone with their only copy are counted, not failed: {t}"
        );
        t.add(&Verdict::Stuck("waiting".into()).into());
        assert!(!t.ok());
        t.add(&Judged {
            verdict: Verdict::Lost("1 of 9 acknowledged writes lost".into()),
            window_lost: Vec::new(),
            lost_with_disk: Vec::new(),
            operator: Some("etcd-warden recover keep-data-of --node node2".into()),
        });
        assert_eq!(
            t.to_string(),
            "campaign: 6 rounds, 3 passed, 1 lost, 0 order, 2 stuck, 0 unsafe (1 stuck explained); \
             the command a refusal named run in 2 rounds; \
             1 writes dropped by a follower's force in 1 rounds (the commit-index window); \
             1 writes gone with the disks of a node that held their only copy, in 1 rounds"
        );
    }

    #[test]
    fn the_command_a_refusal_names_is_read_from_the_reasons() {
        let both = "node1: resolve with 'etcd-warden recover force-new-cluster --node node2': this node is new | \
                    node2: resolve with 'etcd-warden recover force-new-cluster --node node2': no in-sync marker";
        assert_eq!(
            named_command(both),
            Some(("force-new-cluster".into(), "node2".into()))
        );
        let one = "node1: waiting for node2 | node2: resolve with 'etcd-warden recover keep-data-of --node node1': x";
        assert_eq!(
            named_command(one),
            Some(("keep-data-of".into(), "node1".into()))
        );
        // Two different commands, a file only the operator has, no command.
        let two = "node1: resolve with 'etcd-warden recover force-new-cluster --node node1': a | \
                   node2: resolve with 'etcd-warden recover force-new-cluster --node node2': b";
        assert_eq!(named_command(two), None);
        let snapshot = "node1: resolve with 'etcd-warden recover restore-snapshot --node node1 --snapshot <FILE>': a";
        assert_eq!(named_command(snapshot), None);
        assert_eq!(named_command("node1: waiting | node2: waiting"), None);
    }

    fn ack(node: &str, key: &str, at: Instant) -> writer::Ack {
        answered(node, key, at, at)
    }

    fn answered(node: &str, key: &str, sent: Instant, at: Instant) -> writer::Ack {
        writer::Ack {
            node: node.into(),
            key: key.into(),
            value: "v".into(),
            revision: 1,
            cluster_id: 1,
            sent,
            at,
            wall: std::time::SystemTime::now(),
        }
    }

    #[test]
    fn only_a_node2_clients_last_write_before_a_cut_counts_as_the_window() {
        let t0 = Instant::now();
        let s = |ms| t0 + Duration::from_millis(ms);
        let acks = vec![
            ack("node2c1", "a1", s(10)),
            ack("node2c1", "a2", s(20)),
            ack("node2c2", "b1", s(15)),
            ack("node1", "c1", s(18)),
            ack("node2c1", "a3", s(90)),
            // Sent before the cut, answered after it.
            answered("node2c3", "d1", s(25), s(40)),
        ];
        let cut = [(s(30), "node2")];
        let lost: Vec<&writer::Ack> = acks.iter().collect();
        let (window, rest) = window_losses(&acks, &lost, &cut);
        assert_eq!(window, ["a2", "b1", "d1"]);
        assert_eq!(rest.len(), 3, "{rest:?}");
        let (window, _) = window_losses(&acks, &lost, &[]);
        assert!(window.is_empty(), "no follower's force, no window");
    }
}
