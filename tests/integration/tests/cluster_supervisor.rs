//! The survivor's own daemon dies while it holds the only copy of the
//! newest writes: node2 lost power and was fenced, node1 forced a
//! one-member cluster and took writes, then node1's daemon is SIGKILLed and
//! stays down for 60 s while node2 powers on. The OCF agent judges etcd
//! itself meanwhile (monitor passes a healthy etcd within
//! `daemon_down_grace`), so Pacemaker neither recovers etcd nor fences
//! node1; writes on node1 go on throughout; once the daemon is back the
//! pair ends with two voters and every acknowledged write.
//!
//! A writer per node writes to its own node's etcd all along, as in the
//! failover scenarios.

mod failover_support;

use std::time::{Duration, Instant};

use failover_support::{FAILOVER, OrFail, SETTLE, healthy, wait_acks_everywhere};
use warden_harness::crm;
use warden_integration::twonode::{Topology, WardenCluster, is_etcd, poll};
use warden_integration::writer::Ack;

/// How long the survivor's daemon stays down.
const DAEMON_DOWN: Duration = Duration::from_secs(60);

/// The longest time without an acknowledged write on `node` between
/// `from` and `to` (the edges count as the ends of a gap).
fn longest_gap(acks: &[Ack], node: &str, from: Instant, to: Instant) -> Duration {
    let mut times: Vec<Instant> = acks
        .iter()
        .filter(|a| a.node == node && a.at >= from && a.at <= to)
        .map(|a| a.at)
        .collect();
    times.sort();
    let mut last = from;
    let mut longest = Duration::ZERO;
    for t in times.into_iter().chain(std::iter::once(to)) {
        longest = longest.max(t.duration_since(last));
        last = t;
    }
    longest
}

/// Whether Pacemaker, asked on `node`, shows etcd active and not failed
/// there.
fn etcd_fine_on(w: &WardenCluster, node: &str) -> bool {
    w.c.crm_mon(node).is_ok_and(|m| {
        m.resources
            .iter()
            .any(|r| is_etcd(r) && r.active && !r.failed && r.nodes.iter().any(|n| n == node))
    })
}

#[test]
fn a_dead_daemon_on_the_survivor_fences_nobody_and_writes_go_on() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let (survivor, victim) = ("node1", "node2");
    let writer = w.writer("/supervisor", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);

    // node2 loses power; Pacemaker fences it; node1 goes on alone.
    w.c.crash(victim).or_fail(&w);
    let t_dead = Instant::now();
    w.c.wait_for(survivor, crm::fenced(victim), FAILOVER)
        .or_fail(&w);
    writer
        .wait_ack_after(Some(survivor), t_dead, FAILOVER)
        .or_fail(&w);
    w.wait_voters(survivor, &[survivor.to_string()], FAILOVER)
        .or_fail(&w);
    let fenced = (
        w.fence_count(survivor, survivor).or_fail(&w),
        w.fence_count(survivor, victim).or_fail(&w),
    );
    let etcd = w.etcd_pid(survivor).or_fail(&w).expect("etcd on node1");

    // node1's daemon dies (SIGKILL, by its PID) and stays down.
    let daemon = w.daemon_pid(survivor).expect("a daemon on node1");
    let t_kill = Instant::now();
    w.c.exec_ok(survivor, &["kill", "-KILL", &daemon.to_string()])
        .or_fail(&w);
    // node2 powers on meanwhile (its own daemon first, as at boot).
    w.boot(victim, SETTLE).or_fail(&w);
    let booted = t_kill.elapsed();
    // Throughout the outage: nobody fenced, etcd on node1 never failed or
    // stopped by Pacemaker, node1 taking writes.
    let mut checks = 0;
    while t_kill.elapsed() < DAEMON_DOWN {
        assert_eq!(
            (
                w.fence_count(survivor, survivor).or_fail(&w),
                w.fence_count(survivor, victim).or_fail(&w)
            ),
            fenced,
            "a node was fenced while node1's daemon was down\n{}",
            w.c.crm_mon_text(survivor).unwrap_or_default()
        );
        assert!(
            etcd_fine_on(&w, survivor),
            "Pacemaker shows etcd failed or stopped on node1 with its daemon down\n{}",
            w.c.crm_mon_text(survivor).unwrap_or_default()
        );
        let t = Instant::now();
        writer
            .wait_ack_after(Some(survivor), t, Duration::from_secs(10))
            .or_fail(&w);
        checks += 1;
    }
    let t_back = Instant::now();

    // The daemon is back: it adopts the etcd it left, and the pair heals.
    w.spawn_daemon(survivor).or_fail(&w);
    let adopted = poll("the new daemon to report etcd", FAILOVER, || {
        w.etcd_pid(survivor)
    })
    .or_fail(&w);
    assert_eq!(
        adopted, etcd,
        "etcd on node1 was restarted instead of adopted"
    );
    w.wait_started(&all, SETTLE).or_fail(&w);
    w.wait_voters(survivor, &all, SETTLE).or_fail(&w);
    let healed = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), healed, FAILOVER).or_fail(&w);
    }
    assert_eq!(
        (
            w.fence_count(survivor, survivor).or_fail(&w),
            w.fence_count(survivor, victim).or_fail(&w)
        ),
        fenced,
        "a node was fenced after node1's daemon came back"
    );

    let acks = writer.finish();
    let gap = longest_gap(&acks, survivor, t_kill, t_back);
    let during = acks
        .iter()
        .filter(|a| a.node == survivor && a.at >= t_kill && a.at <= t_back)
        .count();
    eprintln!(
        "node1's daemon down {:.1} s (node2 booted after {:.1} s, {checks} checks): {during} \
         writes acknowledged by node1, longest gap {:.2} s",
        t_back.duration_since(t_kill).as_secs_f64(),
        booted.as_secs_f64(),
        gap.as_secs_f64()
    );
    assert!(
        gap < Duration::from_secs(5),
        "node1 stopped taking writes for {gap:?} while its daemon was down"
    );
    w.check_writes(&acks, "/supervisor", &all).or_fail(&w);
    w.c.stop();
}
