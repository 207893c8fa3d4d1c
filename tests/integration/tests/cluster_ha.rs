//! HA mode on a three-node harness cluster (three voters, `topology = "ha"`):
//! etcd keeps quorum by majority, so the daemons never claim and never force
//! a new cluster. Replacing a member goes learner → promote → remove the old
//! one, with at most one extra voter during the change, and no change while
//! another member is unhealthy.
//!
//! As in the two-node scenarios, writers run throughout and every
//! acknowledged write is read back afterwards.

mod failover_support;

use std::time::{Duration, Instant};

use failover_support::{FAILOVER, OrFail, SETTLE, check_seen, healthy, wait_acks_everywhere};
use warden_api::{Action, ActionReply, ActionRequest};
use warden_integration::twonode::{SOCKET, Topology, WardenCluster, poll};

/// What `node`'s daemon answers a monitor now: the outcome and the reason
/// Pacemaker's next monitor would show as the exit reason. Asked through
/// the socket in the node's private /run (reached through the namespace
/// holder's root).
fn monitor(w: &WardenCluster, node: &str) -> anyhow::Result<ActionReply> {
    let socket = format!("/proc/{}/root{SOCKET}", w.c.holder_pid(node)?);
    let req = ActionRequest {
        action: Action::Monitor,
        depth: 0,
        deadline_ms: 10_000,
        params: Default::default(),
        notify: None,
        instance: Some("etcd".into()),
    };
    warden_api::client::Client::new(&socket)
        .post(warden_api::paths::ACTION, &req, Duration::from_secs(15))
        .map_err(|e| anyhow::anyhow!("a monitor through {node}'s daemon: {e}"))
}

/// One node lost: the other two keep quorum and take writes at once, the
/// cluster id and the membership stay (nothing forced, nothing removed), and
/// the node comes back as the same member.
#[test]
fn ha_lose_one_node_keeps_quorum_without_forcing() {
    let (w, cid) = healthy(3, Topology::Ha);
    let all = w.nodes();
    let (_, before) = w.members("node1").or_fail(&w);
    let pair = vec!["node1".to_string(), "node2".to_string()];
    let writer = w.writer("/ha1", &pair).or_fail(&w);
    wait_acks_everywhere(&writer, &pair, 20);
    let mon = w.monitor(&pair).or_fail(&w);

    let t = Instant::now();
    w.crash_fenced("node3", "node1", SETTLE).or_fail(&w);
    for n in &pair {
        writer.wait_ack_after(Some(n), t, FAILOVER).or_fail(&w);
    }
    // Keep writing for a while after the loss: quorum is not a moment.
    let t2 = Instant::now();
    for n in &pair {
        writer.wait_ack_after(Some(n), t2, FAILOVER).or_fail(&w);
    }
    let (c, during) = w.members("node1").or_fail(&w);
    assert_eq!(c, cid, "losing one of three voters changed the cluster id");
    assert_eq!(
        before, during,
        "losing one of three voters changed the membership"
    );
    eprintln!(
        "HA: node3 lost; writes went on ({:?} after the crash)",
        t.elapsed()
    );

    w.boot("node3", SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    let (c, after) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    assert_eq!(c, cid);
    assert_eq!(before, after, "node3 did not come back as the same member");
    let seen = mon.finish();
    check_seen(&seen, 3);
    assert!(seen.learners.is_empty(), "a learner appeared: {seen:?}");
    let acks = writer.finish();
    w.check_writes(&acks, "/ha1", &all).or_fail(&w);
    w.c.stop();
}

/// A fresh HA bootstrap that node3 is late for (held in standby): node1 and
/// node2 start the bootstrap of all three and form quorum, so their member
/// list shows node3's member, never started (no client URLs). Once node3
/// leaves standby it starts that very member (nothing removed, nothing
/// added) and all three are voters, with the write made without it.
fn late_for_the_bootstrap(etcd_toml: &str) {
    let w = WardenCluster::start_daemons_tuned(3, Topology::Ha, etcd_toml)
        .unwrap_or_else(|e| panic!("{e:#}"));
    let all = w.nodes();
    let early = vec!["node1".to_string(), "node2".to_string()];
    let standby = |on: bool| {
        let verb: &[&str] = if on {
            &["--update", "on"]
        } else {
            &["--delete"]
        };
        let mut args = vec!["crm_attribute", "--node", "node3", "--name", "standby"];
        args.extend_from_slice(verb);
        w.c.exec_ok("node1", &args).map(|_| ()).or_fail(&w);
    };
    standby(true);
    w.configure_pacemaker().or_fail(&w);
    w.wait_started(&early, SETTLE).or_fail(&w);
    let (cid, late) = poll(
        "node1 and node2 to form quorum, listing node3's member that never ran",
        SETTLE,
        || {
            let (cid, ms) = w.members("node1")?;
            let never_ran: Vec<u64> = ms
                .iter()
                .filter(|m| m.name == "node3" && m.client_urls.is_empty() && !m.is_learner)
                .map(|m| m.id)
                .collect();
            w.read("node1", "/warden-test/probe")?;
            anyhow::ensure!(ms.len() == 3 && never_ran.len() == 1, "members now {ms:?}");
            Ok(Some((cid, never_ran[0])))
        },
    )
    .or_fail(&w);
    w.put("node1", "/late/before-node3", "v").or_fail(&w);
    eprintln!("HA: node1 and node2 quorate, node3's member {late:x} never ran");

    standby(false);
    w.wait_started(&all, SETTLE).or_fail(&w);
    let (c, after) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    assert_eq!(c, cid, "node3 came up in another cluster");
    let n3 = after.iter().find(|m| m.name == "node3").map(|m| m.id);
    assert_eq!(
        n3,
        Some(late),
        "node3 did not start its member of the bootstrap: {after:?}"
    );
    let kv = poll("node3 to serve the write made without it", SETTLE, || {
        Ok(w.read("node3", "/late/").ok().filter(|kv| !kv.is_empty()))
    })
    .or_fail(&w);
    assert_eq!(kv[0].value, "v");
    w.c.stop();
}

#[test]
fn ha_a_node_late_for_the_bootstrap_starts_its_member_that_never_ran() {
    late_for_the_bootstrap("");
}

/// The same on etcd 3.5 (`make etcd35`), whose start of a member listed
/// without client URLs is checked apart from 3.4's.
#[test]
fn ha_a_node_late_for_the_bootstrap_starts_its_member_that_never_ran_on_etcd_3_5() {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/etcd-3.5/etcd");
    let bin = bin
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e} (make etcd35 provides it)", bin.display()));
    late_for_the_bootstrap(&format!("binary = {:?}", bin.display().to_string()));
}

/// node3's disk is replaced (its old data moved to an archive dir, as an
/// operator swapping the disk would) while node2 is down: the cluster is
/// degraded, so no membership change happens and node3's daemon says why.
/// Once node2 is back, node3 is replaced by a new member: the old one, which
/// can never vote again without its data, is removed (etcd refuses a second
/// member with node3's peer URL, so it goes first), node3 joins as a
/// learner and is promoted once in sync. Never more than three voters, and
/// a learner is seen on the way.
#[test]
fn ha_replace_member_waits_while_degraded_then_learner_promote_remove() {
    let (w, cid) = healthy(3, Topology::Ha);
    let all = w.nodes();
    let (_, before) = w.members("node1").or_fail(&w);
    let old3 = before
        .iter()
        .find(|m| m.name == "node3")
        .map(|m| m.id)
        .expect("node3 is a member");
    let one = vec!["node1".to_string()];
    let writer = w.writer("/ha2", &one).or_fail(&w);
    wait_acks_everywhere(&writer, &one, 20);

    // node2 down: degraded, quorum kept by node1 and node3 (which fence it).
    let t = Instant::now();
    w.crash_fenced("node2", "node1", SETTLE).or_fail(&w);
    writer
        .wait_ack_after(Some("node1"), t, FAILOVER)
        .or_fail(&w);

    // node3's machine gets an empty disk. The test moves the old data aside
    // (never deletes it) before the node boots again.
    w.c.crash("node3").or_fail(&w);
    let data = w.data_dir("node3").unwrap();
    let aside = data.with_file_name("etcd.replaced-disk-archive");
    std::fs::rename(&data, &aside).unwrap();
    w.boot("node3", SETTLE).or_fail(&w);
    let (outcome, why) = poll("node3's daemon to explain why it waits", SETTLE, || {
        let r = monitor(&w, "node3")?;
        Ok(r.reason
            .filter(|why| why.contains("quorum"))
            .map(|why| (r.outcome, why)))
    })
    .or_fail(&w);
    // Started as far as Pacemaker knows (the start did not wait to be
    // added), and degraded (190) until it is: never "failed".
    assert_eq!(outcome, warden_api::Outcome::Degraded, "{why}");
    assert!(
        why.contains("node2"),
        "the reason does not name node2: {why}"
    );
    eprintln!("HA: node3 with an empty disk while node2 is down says: {why}");
    // No quorum anywhere (node1 alone holds data; Pacemaker even stopped and
    // restarted its etcd when corosync lost quorum, and a restarted etcd 3.4
    // serves no client before it has a leader), so the evidence that nothing
    // was forced or changed is: node3 started no etcd of its own, node1 has
    // no quorum, and no daemon tried a membership change.
    let st3 = w.status("node3").or_fail(&w);
    assert_eq!(
        st3.get("etcdRunning").and_then(|v| v.as_bool()),
        Some(false),
        "node3 started etcd with an empty disk while degraded: {st3}"
    );
    assert!(
        st3.get("reason")
            .and_then(|v| v.as_str())
            .is_some_and(|r| r.contains("learner")),
        "node3's status does not say what it waits for: {st3}"
    );
    let st1 = w.status("node1").or_fail(&w);
    assert_eq!(
        st1.get("quorum").and_then(|v| v.as_bool()),
        Some(false),
        "node1 alone has quorum: something was forced: {st1}"
    );
    for n in ["node1", "node3"] {
        let changes: Vec<String> = w
            .daemon_log(n)
            .lines()
            .filter(|l| l.contains("carrying out"))
            .filter(|l| {
                ["AddLearner", "PromoteLearner", "RemoveMember"]
                    .iter()
                    .any(|s| l.contains(s))
            })
            .map(str::to_owned)
            .collect();
        assert!(
            changes.is_empty(),
            "{n} changed membership while degraded: {changes:?}"
        );
    }

    // node2 back: healthy again, so the replacement proceeds. node3's start
    // did not wait to be added (it returned with the reason, and its
    // monitors say 190), so nothing holds Pacemaker's start of node2's etcd.
    let mon = w.monitor(&["node1".to_string()]).or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    // The old node3 member is still listed as a voter until the leader
    // removes it: wait for a new node3 member, then for three voters.
    poll("the old node3 member to be replaced", SETTLE, || {
        let (_, ms) = w.members("node1")?;
        Ok(ms
            .iter()
            .any(|m| m.name == "node3" && m.id != old3)
            .then_some(()))
    })
    .or_fail(&w);
    let (c, after) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    assert_eq!(c, cid, "the replacement forced a new cluster");
    let new3 = after.iter().find(|m| m.name == "node3").map(|m| m.id);
    assert_ne!(new3, Some(old3), "node3 was not replaced by a new member");
    assert!(
        !after.iter().any(|m| m.id == old3),
        "the old node3 member was not removed: {after:?}"
    );
    for n in ["node1", "node2"] {
        let id = |ms: &[warden_integration::gateway::Member]| {
            ms.iter().find(|m| m.name == n).map(|m| m.id)
        };
        assert_eq!(id(&before), id(&after), "{n}'s member changed");
    }
    let seen = mon.finish();
    check_seen(&seen, 3);
    assert!(
        seen.cluster_ids.values().flatten().all(|c| *c == cid),
        "another cluster id was seen: {seen:?}"
    );
    assert!(
        !seen.learners.is_empty(),
        "the new member was never seen as a learner: {seen:?}"
    );
    let acks = writer.finish();
    w.check_writes(&acks, "/ha2", &all).or_fail(&w);
    w.c.stop();
}
