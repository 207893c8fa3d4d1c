//! The commit-index window of a follower's force, on real Corosync,
//! Pacemaker, fencing and etcd, with an `etcd-warden daemon` in every node.
//!
//! Each round: node2's daemon paused (so that it cannot hand the leadership
//! back to node1, the fence race's winner), the leader moved to node2, four
//! clients writing through node2 and one on each node, watchers on both;
//! 1–3 s later the network is cut, node1 fences node2 and forces a new
//! cluster from its follower's log. A follower learns that an entry is
//! committed only from the leader's next message, so that log's tail may
//! hold writes node2 had acknowledged; etcd drops them and would give their
//! revisions to the next writes. The daemon starts the forced etcd with
//! its clients held off, moves the revision past them, compacts, and only
//! then lets clients in.
//!
//! Judged per round (the campaign's checks): no revision acknowledged
//! twice, no watch delivering a revision twice or backwards or skipping
//! without a compaction error, every acknowledged write present except a
//! node2 client's last one before the cut (the window, counted), real-time
//! order, two voters again. `WINDOW_ROUNDS` sets the number of rounds
//! (default 4); docs/failover.md records a long run.

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

#[test]
fn a_followers_force_never_hands_out_a_revision_twice() {
    let rounds: usize = std::env::var("WINDOW_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut rng = Rng::new(20_261_204);
    let mut tally = Tally::default();
    let mut at_risk = Vec::new();
    let mut cluster = None;
    for n in 1..=rounds {
        let w = match cluster.take() {
            Some(w) => w,
            None => campaign::fresh_cluster().unwrap_or_else(|e| panic!("{e:#}")),
        };
        let seen = forces_at_risk(&w.daemon_log("node1")).len();
        let fault = Fault::FollowerForces {
            after: Duration::from_millis(1000 + rng.below(2000)),
        };
        let t = Instant::now();
        let judged = campaign::round_of(&w, n, std::slice::from_ref(&fault), &mut rng);
        let now = forces_at_risk(&w.daemon_log("node1"));
        let this: Vec<u64> = now.get(seen..).unwrap_or_default().to_vec();
        eprintln!(
            "round {n}/{rounds} [{fault}] {} in {:.0}s; node1 forced with {this:?} revisions at risk; \
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
    assert!(tally.ok() && tally.passed == tally.rounds, "{tally}");
    assert!(
        held > 0,
        "no force of {} found revisions at risk: the rounds did not reach the window",
        at_risk.len()
    );
}
