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
use warden_harness::crm;
use warden_integration::twonode::{SOCKET, Topology, WardenCluster, is_etcd, poll};

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

    for (on, what) in [(true, "standby"), (false, "unstandby")] {
        w.standby("node1", "node2", on).or_fail(&w);
        if on {
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

/// `etcd-warden status` inside `node`, as an operator reads it there: its
/// exit code and the screen (stdout, then stderr).
fn status_screen(w: &WardenCluster, node: &str) -> anyhow::Result<(Option<i32>, String)> {
    let warden = warden_integration::bins::warden()?;
    let warden = warden.to_str().unwrap_or_default();
    let out = w.c.exec(node, &[warden, "status", "--socket", SOCKET])?;
    Ok((out.status.code(), format!("{}{}", out.stdout, out.stderr)))
}

/// The line of `screen` that starts with `prefix`.
fn row<'a>(screen: &'a str, prefix: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} row in:\n{screen}"))
}

/// `etcd-warden status` on a healthy pair, after the peer is fenced and
/// during a refusal (a lone node with older data after a total outage):
/// both nodes, Pacemaker, fencing, the last fence and the next command on
/// one screen, and the exit code by this node's health (0, 0, 2).
#[test]
fn status_shows_both_nodes_the_fence_of_the_peer_and_a_refusal() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let wait_screen_on = |node: &str, exit: i32, what: &str, want: &dyn Fn(&str) -> bool| {
        poll(what, SETTLE, || {
            let (code, screen) = status_screen(&w, node)?;
            Ok((code == Some(exit) && want(&screen)).then_some(screen))
        })
        .or_fail(&w)
    };
    let wait_screen =
        |what: &str, want: &dyn Fn(&str) -> bool| wait_screen_on("node1", 0, what, want);
    // Both members are voters before Pacemaker records both starts done:
    // wait for the etcd resource started on both as well.
    let screen = wait_screen("status on a healthy pair", &|s| {
        s.lines()
            .filter(|l| {
                l.ends_with("; etcd healthy; member voter")
                    || l.ends_with("; etcd healthy; member voter (this node)")
            })
            .count()
            == 2
    });
    eprintln!("healthy pair:\n{screen}");
    assert_eq!(row(&screen, "health "), "health      healthy");
    assert!(
        row(&screen, "pacemaker ")
            .starts_with("pacemaker   quorum yes, maintenance-mode off, DC node"),
        "{screen}"
    );
    for (n, end) in [
        ("  node1 ", "; etcd healthy; member voter (this node)"),
        ("  node2 ", "; etcd healthy; member voter"),
    ] {
        let r = row(&screen, n);
        assert!(
            r.starts_with(&format!("{n}    online")) && r.ends_with(end),
            "{screen}"
        );
    }
    assert!(
        row(&screen, "fencing ").starts_with("fencing     enabled; "),
        "{screen}"
    );
    assert!(!screen.contains("\nnext "), "{screen}");

    // node2 loses power and is fenced; node1 goes on alone, healthy.
    w.c.crash("node2").or_fail(&w);
    w.c.wait_for("node1", crm::fenced("node2"), FAILOVER)
        .or_fail(&w);
    w.wait_voters("node1", &["node1".to_string()], FAILOVER)
        .or_fail(&w);
    let screen = wait_screen("status after the fence", &|s| {
        s.contains("\n  node2     offline")
            && s.contains("\nlast fence  ")
            && !s.contains("last fence  none")
    });
    eprintln!("after the fence:\n{screen}");
    assert_eq!(row(&screen, "health "), "health      healthy");
    assert!(
        row(&screen, "  node2 ").ends_with("; member absent"),
        "{screen}"
    );
    assert!(
        row(&screen, "  node1 ").ends_with("member voter (this node)"),
        "{screen}"
    );
    let fence = row(&screen, "last fence ");
    assert!(
        fence.contains(" of node2: success at ") && fence.ends_with(" by node1"),
        "{screen}"
    );

    // A refusal: node1, alone, takes a write and loses power too; node2
    // boots alone with the older data and waits for the operator. Its
    // screen names the command and exits 2; node1 is offline on it.
    w.put("node1", "/status/after-fence", "x").or_fail(&w);
    w.c.crash("node1").or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    let command = "etcd-warden recover force-new-cluster --node node2";
    let screen = wait_screen_on(
        "node2",
        2,
        "status on node2 waiting for the operator",
        &|s| {
            s.contains(&format!("\nnext        {command}\n")) && s.contains("\n  node1     offline")
        },
    );
    eprintln!("refusal on node2:\n{screen}");
    assert!(
        row(&screen, "health ")
            .starts_with("health      not healthy: the daemon will not go on by itself"),
        "{screen}"
    );
    assert!(
        row(&screen, "  node2 ").ends_with("(this node)"),
        "{screen}"
    );

    // node1 back: its newer data wins, both voters again on the screen.
    w.boot("node1", SETTLE).or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    wait_screen("status after both rejoined", &|s| {
        s.contains("\n  node2     online")
            && s.lines().filter(|l| l.contains("member voter")).count() == 2
    });
    w.c.stop();
}
