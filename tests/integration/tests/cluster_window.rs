//! The commit-index window of a follower's force, on real Corosync,
//! Pacemaker, fencing and etcd, with an `etcd-warden daemon` in every node.
//!
//! A follower learns that an entry is committed only from the leader's
//! next message, so when the leader is lost the follower's log may hold,
//! past its commit index, writes the leader had acknowledged. A forced
//! restart drops them and etcd would give their revisions to the next
//! writes. The daemon starts the forced etcd with its clients held off,
//! moves the revision past them, compacts, and only then lets clients in.
//!
//! Two ways a follower forces, each round judged as a campaign round
//! (writers and watchers on both nodes): no revision acknowledged twice, no
//! watch delivering a revision twice or backwards or skipping without a
//! compaction error, every acknowledged write present except a client's
//! last one on the leader's node before the cut (the window, counted),
//! real-time order, two voters again.
//! - `follower-forces`: node2's daemon paused (so that it cannot hand the
//!   leadership back to node1, the fence race's winner), the leader moved
//!   to node2, four clients on it, etcd's peer traffic node2 -> node1
//!   slowed for 0.7 s, node2's fencing of node1 failing (node1 wins the
//!   fence race by node2's 2 s delay, which a loaded machine can outlast),
//!   the network cut: node1 forces.
//! - `winner-cannot-fence`: four clients on the leader, node1, where the
//!   daemons keep it; node1's fencing of node2 fails and the network is
//!   cut: node2 fences node1 once its delay has passed, and forces.
//!
//! `WINDOW_ROUNDS` sets the number of rounds of each (default 3);
//! docs/failover.md records long runs.

use std::time::{Duration, Instant};

use warden_integration::campaign::{self, Fault, Rng, Tally, Verdict};

/// A daemon line of each forced restart: how many revisions it found at risk.
const AT_RISK: &str = "read the log entries the forced restart drops";

/// `at_risk=N` of every such line in `log`.
fn forces_at_risk(log: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains(AT_RISK))
        .filter_map(|l| {
            let v = l.split("at_risk=").nth(1)?;
            v.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
        })
        .collect()
}

/// Runs `WINDOW_ROUNDS` rounds of the fault `fault` makes, `forcer` being
/// the node expected to force; returns the tally and each force's
/// revisions at risk.
fn rounds(seed: u64, forcer: &str, fault: impl Fn(Duration) -> Fault) -> (Tally, Vec<u64>) {
    let rounds: usize = std::env::var("WINDOW_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    // A signal tears the clusters down too (a long run may be cut short).
    warden_harness::teardown_on_signals().unwrap_or_else(|e| panic!("{e:#}"));
    let mut rng = Rng::new(seed);
    let mut tally = Tally::default();
    let mut at_risk = Vec::new();
    let mut cluster = None;
    for n in 1..=rounds {
        let w = match cluster.take() {
            Some(w) => w,
            None => campaign::fresh_cluster().unwrap_or_else(|e| panic!("{e:#}")),
        };
        let seen = forces_at_risk(&w.daemon_log(forcer)).len();
        let f = fault(Duration::from_millis(1000 + rng.below(2000)));
        let t = Instant::now();
        let judged = campaign::round_of(&w, n, std::slice::from_ref(&f), &mut rng);
        let now = forces_at_risk(&w.daemon_log(forcer));
        let this: Vec<u64> = now.get(seen..).unwrap_or_default().to_vec();
        eprintln!(
            "round {n}/{rounds} [{f}] {} in {:.0}s; {forcer} forced with {this:?} revisions at risk; \
             {} dropped in the window {:?}{}",
            judged.verdict.word(),
            t.elapsed().as_secs_f64(),
            judged.window_lost.len(),
            judged.window_lost,
            match &judged.verdict {
                Verdict::Passed => String::new(),
                Verdict::Lost(d) | Verdict::Order(d) | Verdict::Stuck(d) | Verdict::Unsafe(d) =>
                    format!(": {d}"),
            }
        );
        at_risk.extend(this);
        tally.add(&judged);
        if judged.verdict == Verdict::Passed {
            cluster = Some(w);
        } else {
            w.c.stop();
        }
    }
    if let Some(w) = cluster {
        w.c.stop();
    }
    let held = at_risk.iter().filter(|&&n| n > 0).count();
    eprintln!(
        "{tally}; {} forces, {held} with revisions at risk (clients held off), at risk {at_risk:?}",
        at_risk.len()
    );
    (tally, at_risk)
}

#[test]
fn a_followers_force_never_hands_out_a_revision_twice() {
    let (tally, at_risk) = rounds(20_261_204, "node1", |after| Fault::FollowerForces { after });
    assert!(tally.ok() && tally.passed == tally.rounds, "{tally}");
    assert!(
        at_risk.iter().any(|&n| n > 0),
        "no force of {} found revisions at risk: the rounds did not reach the window",
        at_risk.len()
    );
}

#[test]
fn a_partition_whose_winner_cannot_fence_loses_at_most_the_window() {
    let (tally, _) = rounds(20_261_205, "node2", |after| Fault::WinnerCannotFence {
        after,
    });
    assert!(tally.ok() && tally.passed == tally.rounds, "{tally}");
}
