//! The topologies that never fence from etcd-warden and never force a new
//! cluster, on field nodes: three Debian nodes, each an etcd voter
//! (`topology = "ha"`), installed and created as docs/operations.md
//! sections 1 and 2 say with a third `--node`. A 2+1 arbiter cluster is
//! the same to etcd-warden (the arbiter's member is a voter like the
//! others; only what else runs there differs), so one cluster runs both
//! runbooks: node-b, a full node, is lost and comes back; node-c, the
//! arbiter, is replaced by a new machine.

use std::time::{Duration, Instant};

use anyhow::Result;
use warden_harness::field::{FieldCluster, FieldOptions};
use warden_harness::process;

use warden_integration::writer::Writer;

use super::{
    check_writes, longest_write_gap, members, power_off, power_on, ready, wait_fenced, writer,
};

/// A three-node cluster on `suite`'s node image, every node installed with
/// the package (`WARDEN_DEB`, else one built) and `topology = "ha"`.
pub fn cluster(suite: &str) -> (FieldCluster, tempfile::TempDir) {
    let opts = FieldOptions::three_node(suite, std::path::Path::new(""));
    super::cluster_with(&opts).unwrap()
}

/// The other nodes than `node`.
fn others<'a>(c: &'a FieldCluster, node: &str) -> Vec<&'a str> {
    c.nodes
        .iter()
        .map(|n| n.name.as_str())
        .filter(|n| *n != node)
        .collect()
}

/// The member list as `viewer` answers it: (name, id, learner), sorted.
fn member_ids(c: &FieldCluster, viewer: &str) -> Result<Vec<(String, u64, bool)>> {
    let mut ms: Vec<_> = members(c, viewer)?
        .into_iter()
        .map(|m| (m.name, m.id, m.is_learner))
        .collect();
    ms.sort();
    Ok(ms)
}

/// Waits until `w` has a write sent after `since` acknowledged through
/// each of `nodes`.
fn writes_through(w: &Writer, nodes: &[&str], since: Instant) {
    for n in nodes {
        w.wait_ack_after(Some(n), since, Duration::from_secs(60))
            .unwrap();
    }
}

/// The runbook's checks on `viewer` while `down` is fenced: `crm_mon -1
/// -m 3` lists it offline, `etcd-warden status` names it as the voter not
/// answering, and `etcd-warden members` still lists every member of `ids`.
fn runbook_checks(c: &FieldCluster, viewer: &str, down: &str, ids: &[(String, u64, bool)]) {
    let crm = c.node_sh_ok(viewer, "crm_mon -1 -m 3").unwrap().stdout;
    assert!(
        crm.lines()
            .any(|l| l.contains("OFFLINE") && l.contains(down)),
        "crm_mon -1 on {viewer} does not list {down} offline:\n{crm}"
    );
    let said = format!("1 of them not answering: {down}");
    let status = process::poll(
        &format!("etcd-warden status on {viewer} to name {down}"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let st = c
                .node_sh(viewer, "etcd-warden status")
                .map_err(|e| format!("{e:#}"))?;
            if st.stdout.contains(&said) {
                Ok(st.stdout)
            } else {
                Err(st.stdout.chars().take(400).collect())
            }
        },
    )
    .unwrap();
    let listed = c.node_sh_ok(viewer, "etcd-warden members").unwrap().stdout;
    for (name, id, _) in ids {
        assert!(
            listed.contains(&format!("{id:x}")),
            "etcd-warden members on {viewer} does not list {name}'s member {id:x}:\n{listed}"
        );
    }
    eprintln!(
        "field_three_node: {viewer} says: {}",
        status
            .lines()
            .find(|l| l.contains(&said))
            .unwrap_or_default()
            .trim()
    );
}

/// "When one node of three dies": `victim` loses power. Pacemaker on the
/// two others fences it; etcd keeps its quorum on them, so writes go on
/// through both with no new cluster (the member list, `victim`'s member
/// included, stays exactly as it was). Powered on again, `victim` restarts
/// its etcd as the same member with its own data (nothing archived) and
/// catches up; every acknowledged write is on its etcd.
pub fn lose_one(c: &FieldCluster, victim: &str) {
    ready(c);
    let survivors = others(c, victim);
    let viewer = survivors[0];
    let w = writer(c, "/field-ha-lose").unwrap();
    let t0 = Instant::now();
    for n in &c.nodes {
        w.wait_ack_after(Some(&n.name), t0, Duration::from_secs(30))
            .unwrap();
    }
    let before = member_ids(c, viewer).unwrap();
    let fences = c.crm_mon(viewer).unwrap().fence_successes(victim).len();
    let archives = super::archives(c, victim).unwrap();

    let dead = power_off(c, victim).unwrap();
    let mut first = Vec::new();
    for s in &survivors {
        let a = w
            .wait_ack_after(Some(s), dead, Duration::from_secs(60))
            .unwrap();
        first.push(format!(
            "{s} {:.2} s",
            a.at.duration_since(dead).as_secs_f64()
        ));
    }
    wait_fenced(c, viewer, victim, fences).unwrap();
    let fenced = dead.elapsed();
    // Writes keep coming through both after the fence, too.
    writes_through(&w, &survivors, Instant::now());
    for s in &survivors {
        assert_eq!(
            member_ids(c, s).unwrap(),
            before,
            "{s}'s member list changed while {victim} was down: something was forced or removed"
        );
    }
    runbook_checks(c, viewer, victim, &before);
    let gap = longest_write_gap(&w, dead);

    let on = Instant::now();
    power_on(c, victim).unwrap();
    c.wait_booted(victim, Duration::from_secs(180)).unwrap();
    c.wait_cluster_healthy(Duration::from_secs(300)).unwrap();
    let t_up = Instant::now();
    w.wait_ack_after(Some(victim), t_up, Duration::from_secs(60))
        .unwrap();
    let back = on.elapsed();
    assert_eq!(
        member_ids(c, victim).unwrap(),
        before,
        "{victim} came back as another member"
    );
    assert_eq!(
        super::archives(c, victim).unwrap(),
        archives,
        "{victim} archived its data: a member of a cluster that kept quorum restarts with it"
    );
    let acks = check_writes(c, w, victim).unwrap();
    eprintln!(
        "field_three_node lose one ({victim}): power off -> first write through {}; fenced after {:.1} s; \
         longest write gap {:.2} s; power on -> writing through {victim} {:.1} s; member list unchanged; \
         {acks} acknowledged writes, all present on {victim}",
        first.join(", "),
        fenced.as_secs_f64(),
        gap.as_secs_f64(),
        back.as_secs_f64()
    );
}

/// "Replacing one node of three": `victim`'s machine dies (fenced by the
/// others, which keep quorum and take writes), a new machine of the same
/// name takes its place: removed from the cluster with pcs, installed as in
/// section 1, authenticated and added back. etcd-warden on the leader
/// removes the dead member, adds the new node as a learner and promotes
/// it: three voters, the old member's id gone, never four voters, and every
/// acknowledged write present on the new machine's etcd.
pub fn replace_one(c: &FieldCluster, victim: &str) {
    ready(c);
    let survivors = others(c, victim);
    let viewer = survivors[0];
    let addr = c.node(victim).unwrap().addr.clone();
    let w = writer(c, "/field-ha-replace").unwrap();
    let t0 = Instant::now();
    w.wait_ack_after(Some(victim), t0, Duration::from_secs(30))
        .unwrap();
    let before = member_ids(c, viewer).unwrap();
    let old = super::member_id(c, viewer, victim)
        .unwrap()
        .expect("the victim is a member");
    let fences = c.crm_mon(viewer).unwrap().fence_successes(victim).len();

    let dead = power_off(c, victim).unwrap();
    wait_fenced(c, viewer, victim, fences).unwrap();
    writes_through(&w, &survivors, dead);
    // 1. The others healthy, the victim fenced.
    runbook_checks(c, viewer, victim, &before);
    c.replace_machine(victim).unwrap();

    // 2. On a survivor: the dead machine out of the cluster.
    let removed = c
        .node_sh_ok(
            viewer,
            &format!("pcs cluster node remove {victim} --skip-offline --force"),
        )
        .unwrap();
    eprintln!("{}{}", removed.stdout, removed.stderr);
    writes_through(&w, &survivors, Instant::now());

    // 3. The new machine, installed as in section 1.
    power_on(c, victim).unwrap();
    c.wait_booted(victim, Duration::from_secs(180)).unwrap();
    let t_install = Instant::now();
    c.install_node(victim).unwrap();

    // 4. Authenticated and added from a survivor.
    let t_add = Instant::now();
    c.pcs_host_auth(viewer, victim).unwrap();
    let added = c
        .node_sh_ok(
            viewer,
            &format!("pcs cluster node add {victim} addr={addr} --start --enable"),
        )
        .unwrap();
    eprintln!("{}{}", added.stdout, added.stderr);
    let most_voters = wait_replaced(c, viewer, victim, old);
    let to_voter = t_add.elapsed();
    c.wait_cluster_healthy(Duration::from_secs(300)).unwrap();
    let t_up = Instant::now();
    w.wait_ack_after(Some(victim), t_up, Duration::from_secs(60))
        .unwrap();
    assert!(
        most_voters <= 3,
        "{most_voters} voters during the replacement"
    );
    let fenced = c.crm_mon(viewer).unwrap().fence_successes(victim).len() - fences;
    assert_eq!(fenced, 1, "only the dead machine is fenced");
    let gap = longest_write_gap(&w, dead);
    let acks = check_writes(c, w, victim).unwrap();
    eprintln!(
        "field_three_node replace one ({victim}): install {:.1} s; pcs node add -> a voter again {:.1} s; \
         longest write gap {:.2} s; old member {old:x} gone; at most {most_voters} voters; \
         {acks} acknowledged writes, all present on the new machine's etcd; one fence",
        t_add.duration_since(t_install).as_secs_f64(),
        to_voter.as_secs_f64(),
        gap.as_secs_f64()
    );
}

/// Waits until `viewer`'s member list has a voter named `victim` other
/// than `old`, `old` gone, and every node a voter; returns the most voters
/// seen on the way.
fn wait_replaced(c: &FieldCluster, viewer: &str, victim: &str, old: u64) -> usize {
    let want = c.nodes.len();
    let mut most = 0;
    let mut learner_seen = false;
    process::poll(
        &format!("{victim}'s old member replaced by a new voter"),
        Duration::from_secs(300),
        Duration::from_millis(300),
        || {
            let ms = member_ids(c, viewer).map_err(|e| format!("{e:#}"))?;
            let voters = ms.iter().filter(|m| !m.2).count();
            most = most.max(voters);
            learner_seen |= ms.iter().any(|m| m.0 == victim && m.2);
            let new_voter = ms.iter().any(|m| m.0 == victim && m.1 != old && !m.2);
            if new_voter && voters == want && ms.len() == want && ms.iter().all(|m| m.1 != old) {
                Ok(())
            } else {
                Err(format!("{ms:?}"))
            }
        },
    )
    .unwrap();
    eprintln!("field_three_node: a learner seen on the way: {learner_seen}");
    most
}
