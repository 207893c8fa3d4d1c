//! HA mode on a three-node harness cluster (three voters, `topology = "ha"`):
//! etcd keeps quorum by majority, so the daemons never claim and never force
//! a new cluster. Replacing a member goes learner → promote → remove the old
//! one, with at most one extra voter during the change, and no change while
//! another member is unhealthy.
//!
//! As in the two-node scenarios, writers run throughout and every
//! acknowledged write is read back afterwards.

mod failover_support;

use std::time::Instant;

use failover_support::{FAILOVER, OrFail, SETTLE, check_seen, healthy, wait_acks_everywhere};
use warden_integration::twonode::{Topology, poll};

/// One node lost: the other two keep quorum and take writes at once, the
/// cluster id and the membership stay (nothing forced, nothing removed), and
/// the node comes back as the same member.
#[test]
// Run with `cargo nextest run -p warden-integration --run-ignored all`.
#[ignore = "issue 6 open: HA mode not yet passing on the three-node harness (node3 does not rejoin after its crash)"]
fn ha_lose_one_node_keeps_quorum_without_forcing() {
    let (w, cid) = healthy(3, Topology::Ha);
    let all = w.nodes();
    let (_, before) = w.members("node1").or_fail(&w);
    let pair = vec!["node1".to_string(), "node2".to_string()];
    let writer = w.writer("/ha1", &pair).or_fail(&w);
    wait_acks_everywhere(&writer, &pair, 20);
    let mon = w.monitor(&pair).or_fail(&w);

    let t = Instant::now();
    w.c.crash("node3").or_fail(&w);
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

/// node3's disk is replaced (its old data moved to an archive dir, as an
/// operator swapping the disk would) while node2 is down: the cluster is
/// degraded, so no membership change happens and node3's daemon says why.
/// Once node2 is back, node3 is replaced: a learner first, then a voter, and
/// the old member removed, never more than one extra voter.
#[test]
// Run with `cargo nextest run -p warden-integration --run-ignored all`.
#[ignore = "issue 6 open: HA member replacement not yet passing on the three-node harness"]
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

    // node2 down: degraded, quorum kept by node1 and node3.
    w.c.crash("node2").or_fail(&w);
    let t = Instant::now();
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
    let why = poll("node3's daemon to explain why it waits", SETTLE, || {
        let r = w.reason("node3")?;
        Ok((!r.ends_with("reason=")).then_some(r))
    })
    .or_fail(&w);
    eprintln!("HA: node3 with an empty disk while node2 is down says: {why}");
    // No membership change while degraded (MemberList answers from node1's
    // own view even without quorum on etcd 3.4).
    let (c, during) = w.members("node1").or_fail(&w);
    assert_eq!(c, cid, "a degraded HA cluster forced a new cluster");
    assert_eq!(
        before, during,
        "a membership change while a member was down"
    );

    // node2 back: healthy again, so the replacement proceeds.
    let mon = w.monitor(&["node1".to_string()]).or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    let (c, after) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    assert_eq!(c, cid, "the replacement forced a new cluster");
    let new3 = after.iter().find(|m| m.name == "node3").map(|m| m.id);
    assert_ne!(new3, Some(old3), "node3 was not replaced by a new member");
    assert!(
        !after.iter().any(|m| m.id == old3),
        "the old node3 member was not removed: {after:?}"
    );
    let seen = mon.finish();
    check_seen(&seen, 4);
    assert!(
        !seen.learners.is_empty(),
        "the new member was never seen as a learner: {seen:?}"
    );
    let acks = writer.finish();
    w.check_writes(&acks, "/ha2", &all).or_fail(&w);
    w.c.stop();
}
