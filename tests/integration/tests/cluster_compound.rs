//! Compound faults on real Corosync, Pacemaker, fencing and etcd, with an
//! `etcd-warden daemon` in every node: a second power loss while the pair
//! is still recovering from the first.
//!
//! Whatever the order of the faults, once both nodes are back the pair must
//! end with two voters and every acknowledged write, with no admin step:
//! each fault here leaves one node holding every acknowledged write, so a
//! safe automatic path exists. The returning node's start must not wait
//! inside Pacemaker's transition for the other node (Pacemaker would then
//! hold the other node's start until this one times out, and each would
//! wait for the other).

mod failover_support;

use std::time::{Duration, Instant};

use failover_support::{FAILOVER, OrFail, SETTLE, healthy, wait_acks_everywhere};
use warden_integration::campaign::{self, Rng};
use warden_integration::twonode::{Topology, WardenCluster, poll};

/// `node` loses power; waits until Pacemaker on its peer has fenced it.
fn lose_power(w: &WardenCluster, node: &str) {
    campaign::power_off(w, node).or_fail(w);
}

/// Where in the fenced node's return the survivor loses power.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// Its Pacemaker has just joined: it is not a member yet.
    Joined,
    /// The leader listed it as a learner.
    Learner,
    /// It has just been promoted to voter.
    Promoted,
}

/// Waits for `point` of `returning`'s return, as `survivor`'s etcd shows it.
fn wait_point(w: &WardenCluster, survivor: &str, returning: &str, point: Point) {
    match point {
        Point::Joined => {}
        Point::Learner => {
            poll(
                &format!("{returning} listed as a learner by {survivor}"),
                SETTLE,
                || {
                    let (_, ms) = w.members(survivor)?;
                    Ok(ms
                        .iter()
                        .any(|m| m.is_learner && (m.name.is_empty() || m.name == returning))
                        .then_some(()))
                },
            )
            .or_fail(w);
        }
        Point::Promoted => {
            let all = w.nodes();
            poll(
                &format!("{returning} promoted, seen from {survivor}"),
                SETTLE,
                || {
                    let (_, ms) = w.members(survivor)?;
                    Ok((ms.len() == all.len() && ms.iter().all(|m| !m.is_learner)).then_some(()))
                },
            )
            .or_fail(w);
        }
    }
}

/// Both nodes back: two voters, etcd started on both as Pacemaker shows it.
fn wait_recovered(w: &WardenCluster, what: &str) {
    let all = w.nodes();
    let t = Instant::now();
    w.wait_voters("node1", &all, SETTLE)
        .or_else(|_| w.wait_voters("node2", &all, SETTLE))
        .or_fail(w);
    w.wait_started(&all, SETTLE).or_fail(w);
    eprintln!(
        "{what}: both back -> two voters and both started {:.2}s",
        t.elapsed().as_secs_f64()
    );
}

/// node1 loses power and is fenced; node2 forces a one-member cluster and
/// takes writes; node1 is powered on and, at one point of its return,
/// node2 loses power and is fenced by node1. node1 holds stale data (or no
/// complete copy) then, node2 every acknowledged write: when node2 is
/// powered on again the pair recovers by itself. Run at three points of
/// the return, in turn, on one cluster (the roles swap each round).
#[test]
fn survivor_lost_at_any_point_of_the_peers_return_recovers_by_itself() {
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/compound1", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 10);

    let mut first = "node1";
    for point in [Point::Joined, Point::Learner, Point::Promoted] {
        let second = w.peer(first);
        let round = format!("{point:?} ({first} then {second})");
        let t0 = Instant::now();
        lose_power(&w, first);
        writer
            .wait_ack_after(Some(&second), Instant::now(), FAILOVER)
            .or_fail(&w);
        w.boot(first, SETTLE).or_fail(&w);
        wait_point(&w, &second, first, point);
        eprintln!(
            "{round}: {second} loses power {:.2}s after {first} did",
            t0.elapsed().as_secs_f64()
        );
        lose_power(&w, &second);
        let reason = w.reason(first).unwrap_or_default();
        eprintln!("{round}: {first} alone: {reason}");
        w.boot(&second, SETTLE).or_fail(&w);
        wait_recovered(&w, &round);
        let (c, _) = w.members(first).or_fail(&w);
        assert_eq!(c, cid, "{round}: the pair ended in another cluster");
        wait_acks_everywhere(&writer, &all, writer.acks().len() / 2 + 3);
        first = if first == "node1" { "node2" } else { "node1" };
    }

    let acks = writer.finish();
    w.check_writes(&acks, "/compound1", &all).or_fail(&w);
    eprintln!(
        "survivor lost during the return: {} acknowledged writes checked",
        acks.len()
    );
    w.c.stop();
}

/// Four power losses of randomly chosen nodes, each a random 0–5 s after
/// the node lost before came back (joined Pacemaker). At most one node is
/// down at a time, and it is always fenced, so one node always holds every
/// acknowledged write: after the last one the pair recovers by itself.
#[test]
fn power_losses_in_a_row_recover_by_themselves() {
    let seed = std::env::var("COMPOUND_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026_u64);
    eprintln!("power losses in a row: COMPOUND_SEED={seed}");
    let mut rng = Rng::new(seed);
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/compound3", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 10);

    for i in 1..=4 {
        let victim = all[rng.below(2) as usize].clone();
        let other = w.peer(&victim);
        lose_power(&w, &victim);
        eprintln!(
            "loss {i}: {victim} ({})",
            w.reason(&other).unwrap_or_default()
        );
        w.boot(&victim, SETTLE).or_fail(&w);
        let delay = Duration::from_millis(rng.below(5000));
        eprintln!("loss {i}: {victim} back; next loss in {delay:?}");
        // A random moment of the return, not an observed state: the point
        // of this test is that any moment is survivable.
        std::thread::sleep(delay);
    }
    wait_recovered(&w, "after four losses");
    let (c, _) = w.members("node1").or_fail(&w);
    assert_eq!(c, cid, "the pair ended in another cluster");

    let acks = writer.finish();
    w.check_writes(&acks, "/compound3", &all).or_fail(&w);
    eprintln!(
        "power losses in a row: {} acknowledged writes checked",
        acks.len()
    );
    w.c.stop();
}
