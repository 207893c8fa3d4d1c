//! Operator actions on real Corosync, Pacemaker, fencing and etcd, with an
//! `etcd-warden daemon` in every node: what an operator does by hand must
//! leave the pair correct, and what Pacemaker records of it is a fact the
//! daemons act on.
//!
//! Fencing fails for one node (the harness fence agent's switch, as with an
//! unreachable BMC) and that node loses power: the survivor takes no write,
//! because nothing proves the peer down. The operator, who knows the node
//! is off, runs `stonith_admin --confirm`; Pacemaker records it as a fence
//! (a successful "off" by "a human", and the node's membership ended), and
//! the survivor goes on alone within seconds. Once the node is powered on it
//! rejoins as a voter and every acknowledged write is there.

mod failover_support;

use std::time::{Duration, Instant};

use failover_support::{FAILOVER, OrFail, SETTLE, healthy, wait_acks_everywhere};
use warden_integration::twonode::{Topology, WardenCluster, poll};

/// The longest the survivor may take from the operator's confirm to its
/// first acknowledged write (the daemon's pending interval is 1 s; a
/// forced restart takes about 1 s on this machine).
const CONFIRM_TO_WRITE: Duration = Duration::from_secs(15);

/// Failed fences of `target` in crm_mon's history as `from` sees it.
fn failed_fences(w: &WardenCluster, from: &str, target: &str) -> anyhow::Result<usize> {
    let doc = crm_xml::parse(&w.c.crm_mon(from)?.raw)?;
    Ok(doc
        .fence_history
        .iter()
        .flat_map(|h| &h.events)
        .filter(|e| e.target == target && e.status == crm_xml::model::FenceStatus::Failed)
        .count())
}

#[test]
fn an_operators_confirm_after_failed_fencing_lets_the_survivor_go_on() {
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/confirm", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 10);

    // node2's fencing fails from now on; then node2 loses power.
    warden_harness::fence_agent::set_fails(w.c.root(), "node2", true).or_fail(&w);
    let cut = Instant::now();
    w.c.crash("node2").or_fail(&w);

    // Pacemaker tries to fence node2 and fails; node1 has no proof that
    // node2 is down, so it takes no write, and says why.
    poll("a failed fence of node2", SETTLE, || {
        Ok((failed_fences(&w, "node1", "node2")? > 0).then_some(()))
    })
    .or_fail(&w);
    let reason = poll("node1 to wait for a fence of node2", SETTLE, || {
        let r = w.reason("node1")?;
        Ok(r.contains("not yet fenced").then_some(r))
    })
    .or_fail(&w);
    eprintln!("fencing failed, node1: {reason}");
    // The window: a few more failed fences and passes of node1's daemon.
    let window_end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < window_end {
        if let Some(a) = writer.first_ack_after(None, cut + Duration::from_millis(500)) {
            panic!(
                "a write was acknowledged through {} without proof that node2 is down: {a:?}\n{}",
                a.node,
                w.reason("node1").unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    // The operator confirms that node2 is off.
    let confirm = Instant::now();
    let out =
        w.c.exec_ok("node1", &["stonith_admin", "--confirm", "node2"])
            .or_fail(&w);
    eprintln!("stonith_admin --confirm node2: {out:?}");
    let ack = writer
        .wait_ack_after(Some("node1"), confirm, FAILOVER)
        .or_fail(&w);
    let took = ack.at.saturating_duration_since(confirm);
    eprintln!(
        "confirm -> first write through node1: {:.2}s",
        took.as_secs_f64()
    );
    assert!(
        took <= CONFIRM_TO_WRITE,
        "node1 took {took:?} from the operator's confirm to its first write"
    );

    // node2 is powered on (its fencing works again): it rejoins as a voter.
    warden_harness::fence_agent::set_fails(w.c.root(), "node2", false).or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    let (c, _) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    eprintln!("node2 rejoined as a voter (cluster {c:x}, before {cid:x})");
    let acks = writer.finish();
    w.check_writes(&acks, "/confirm", &all).or_fail(&w);
    eprintln!("confirm: {} acknowledged writes checked", acks.len());
    w.c.stop();
}
