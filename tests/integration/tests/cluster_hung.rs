//! A hung etcd: the process exists but answers nothing (SIGSTOP, as a
//! process stuck on a dead disk). On the two-node cluster with a writer on
//! each node, etcd on one node is stopped for 60 s, first on the leader's
//! node, then on the follower's. The hung node's daemon sees that its etcd
//! has not answered for `timeouts.hung_after_ms`, its monitor fails, and
//! Pacemaker's stop kills it; the peer forces on that completed stop and
//! takes writes again well inside the hang. The longest gap of the peer's
//! writes is printed and bounded; the pair ends with two voters and every
//! acknowledged write.

mod failover_support;

use std::time::{Duration, Instant};

use failover_support::{FAILOVER, OrFail, SETTLE, healthy, wait_acks_everywhere};
use serde_json::Value;
use warden_harness::process::Paused;
use warden_integration::twonode::{Topology, WardenCluster, is_etcd};
use warden_integration::writer::{Writer, longest_gap};

/// How long etcd stays hung.
const HANG: Duration = Duration::from_secs(60);
/// The longest the peer may go without an acknowledged write meanwhile.
const MAX_PEER_GAP: Duration = Duration::from_secs(20);

/// What the hung node's daemon and Pacemaker say, one line each: the
/// daemon's state and Pacemaker's view (what is compared), and the reason.
fn observe(w: &WardenCluster, node: &str, peer: &str) -> (String, String) {
    let (state, reason) = w.status(node).map_or_else(
        |e| ("status failed".to_string(), format!("{e:#}")),
        |s| {
            let field = |k: &str| s.get(k).map(Value::to_string).unwrap_or_default();
            (field("state"), field("reason"))
        },
    );
    let pcmk = w.c.crm_mon(peer).map_or_else(
        |e| format!("crm_mon failed: {e:#}"),
        |m| {
            m.resources
                .iter()
                .filter(|r| is_etcd(r))
                .map(|r| {
                    format!(
                        "{}:{}{}",
                        r.nodes.join(","),
                        r.role,
                        if r.failed { " FAILED" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(" ")
        },
    );
    (format!("{node}: {state} | pacemaker: {pcmk}"), reason)
}

/// etcd on `node` hung for `HANG`, then continued if it still exists; the
/// pair healed to two voters. Returns the peer's longest write gap.
fn hang(w: &WardenCluster, writer: &Writer, node: &str) -> Duration {
    let peer = w.peer(node);
    let all = w.nodes();
    let pid = w
        .etcd_pid(node)
        .or_fail(w)
        .unwrap_or_else(|| panic!("no etcd on {node}"));
    let pid = i32::try_from(pid).expect("a PID fits i32");
    let t0 = Instant::now();
    let paused = Paused::pause(pid).or_fail(w);
    // The hang lasts HANG whatever happens; what the node shows is logged
    // whenever it changes.
    let mut last = String::new();
    while t0.elapsed() < HANG {
        let (seen, reason) = observe(w, node, &peer);
        if seen != last {
            eprintln!("+{:5.1} s {seen} ({reason})", t0.elapsed().as_secs_f64());
            last = seen;
        }
        let t = Instant::now();
        let _ = writer.wait_ack_after(Some(&peer), t, Duration::from_secs(1));
    }
    let t_end = Instant::now();
    let killed = !paused.exists();
    drop(paused);
    eprintln!(
        "etcd (pid {pid}) on {node} hung {:.1} s; {}",
        t_end.duration_since(t0).as_secs_f64(),
        if killed {
            "it was killed meanwhile"
        } else {
            "continued (it was still there)"
        }
    );
    w.wait_started(&all, SETTLE).or_fail(w);
    w.wait_voters(&peer, &all, SETTLE).or_fail(w);
    let healed = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), healed, FAILOVER).or_fail(w);
    }
    eprintln!(
        "two voters {:.1} s after the hang ended",
        healed.duration_since(t_end).as_secs_f64()
    );
    longest_gap(&writer.acks(), Some(&peer), t0, t_end)
}

#[test]
fn a_hung_etcd_is_replaced_and_the_peer_goes_on() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/hung", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);

    let leader = w.leader_node(SETTLE).or_fail(&w);
    let on_leader = hang(&w, &writer, &leader);
    eprintln!(
        "etcd hung on the leader's node {leader}: the peer's longest write gap {:.1} s",
        on_leader.as_secs_f64()
    );

    let leader = w.leader_node(SETTLE).or_fail(&w);
    let follower = w.peer(&leader);
    let on_follower = hang(&w, &writer, &follower);
    eprintln!(
        "etcd hung on the follower's node {follower}: the peer's longest write gap {:.1} s",
        on_follower.as_secs_f64()
    );

    let acks = writer.finish();
    w.check_writes(&acks, "/hung", &all).or_fail(&w);
    assert!(
        on_leader <= MAX_PEER_GAP && on_follower <= MAX_PEER_GAP,
        "the peer went without writes for {on_leader:?} (hang on the leader's node) and \
         {on_follower:?} (on the follower's), more than {MAX_PEER_GAP:?}"
    );
    w.c.stop();
}
