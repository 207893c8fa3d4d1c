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

use failover_support::{
    FAILOVER, OrFail, SETTLE, etcd_exit_reasons, healthy, wait_acks_everywhere,
};
use warden_integration::twonode::{Topology, WardenCluster, is_etcd, poll};

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
    // Its monitor says why (the exit reason crm_mon shows).
    let reason = poll("node1 to wait for a fence of node2", SETTLE, || {
        let reasons = etcd_exit_reasons(&w, "node1", "node1")?;
        Ok(reasons.into_iter().find(|r| r.contains("not yet fenced")))
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

/// No etcd instance runs anywhere, as crm_mon on `from` shows it.
fn etcd_stopped_everywhere(w: &WardenCluster, from: &str) -> anyhow::Result<bool> {
    let m = w.c.crm_mon(from)?;
    Ok(!m.resources.iter().any(|r| is_etcd(r) && r.active))
}

/// Two voters, etcd started on both nodes, and every write acknowledged so
/// far readable through both.
fn pair_is_whole(w: &WardenCluster, writer: &warden_integration::writer::Writer, after: &str) {
    let all = w.nodes();
    let t = Instant::now();
    w.wait_voters("node1", &all, SETTLE).or_fail(w);
    w.wait_started(&all, SETTLE).or_fail(w);
    // The writer goes on through both nodes: a write through each after
    // the action shows both serve again.
    let since = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), since, SETTLE).or_fail(w);
    }
    let acks = writer.acks();
    w.check_writes(&acks, writer.prefix(), &all).or_fail(w);
    eprintln!(
        "after {after}: two voters, {} acknowledged writes present ({:.1}s)",
        acks.len(),
        t.elapsed().as_secs_f64()
    );
}

/// The operator's everyday Pacemaker actions, one after another, under a
/// writer through both nodes: each leaves two voters and every
/// acknowledged write.
#[test]
fn cleanup_restart_disable_enable_standby_leave_the_pair_whole() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/ops", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 5);

    w.c.exec_ok(
        "node1",
        &["crm_resource", "--cleanup", "--resource", "etcd-clone"],
    )
    .or_fail(&w);
    pair_is_whole(&w, &writer, "crm_resource --cleanup");

    w.c.exec_ok(
        "node1",
        &[
            "crm_resource",
            "--restart",
            "--resource",
            "etcd-clone",
            "--timeout",
            "300s",
        ],
    )
    .or_fail(&w);
    pair_is_whole(&w, &writer, "crm_resource --restart");

    let target_role = |role: &str| {
        w.c.exec_ok(
            "node1",
            &[
                "crm_resource",
                "--resource",
                "etcd-clone",
                "--meta",
                "--set-parameter",
                "target-role",
                "--parameter-value",
                role,
            ],
        )
        .or_fail(&w)
    };
    target_role("Stopped");
    poll("etcd to be stopped everywhere", SETTLE, || {
        Ok(etcd_stopped_everywhere(&w, "node1")?.then_some(()))
    })
    .or_fail(&w);
    target_role("Started");
    pair_is_whole(&w, &writer, "disable and enable");

    for (value, what) in [("on", "standby"), ("off", "unstandby")] {
        w.c.exec_ok(
            "node1",
            &[
                "crm_attribute",
                "--node",
                "node2",
                "--name",
                "standby",
                "--update",
                value,
            ],
        )
        .or_fail(&w);
        if value == "on" {
            poll("node2's etcd to stop for standby", SETTLE, || {
                Ok(w.etcd_pid("node2")?.is_none().then_some(()))
            })
            .or_fail(&w);
            // node1 goes on alone, without a fence and without a force.
            let since = Instant::now();
            writer
                .wait_ack_after(Some("node1"), since, FAILOVER)
                .or_fail(&w);
            assert_eq!(w.fence_count("node1", "node2").or_fail(&w), 0);
            continue;
        }
        pair_is_whole(&w, &writer, what);
    }

    let acks = writer.finish();
    w.check_writes(&acks, "/ops", &all).or_fail(&w);
    eprintln!(
        "operator actions: {} acknowledged writes checked",
        acks.len()
    );
    w.c.stop();
}
