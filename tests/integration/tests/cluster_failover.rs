//! The two-node failover scenarios (docs/failover.md §9) on real Corosync, Pacemaker,
//! fencing and etcd, with an `etcd-warden daemon` in every node and the
//! agent under Pacemaker, configured by `etcd-warden crm-config`.
//!
//! In every scenario one writer per node writes to that node's etcd
//! throughout the fault, and afterwards: no revision was acknowledged twice
//! (two clusters never accepted writes at once: no split brain), and every
//! acknowledged write reads back with its value and revision from the
//! surviving / rejoined cluster (nothing acknowledged was lost). A member-list
//! sampler checks that there is always a voter and never more than two.
//!
//! Scenarios share a cluster where the end state of one is the start of the
//! next (the fresh-bootstrap scenario → the peer-crash scenario → the stale-data-archived scenario, the etcd-crash scenario → the daemon-restart scenario, the double-power-loss scenario → the total-outage scenario, the graceful-reboot scenario → the both-stopped scenario); each step names itself
//! in its failure message.

mod failover_support;

use std::time::{Duration, Instant, SystemTime};

use failover_support::{
    FAILOVER, OrFail, SETTLE, check_seen, daemon_report, etcd_exit_reasons, healthy,
    report_exit_reasons, wait_acks_everywhere,
};
use warden_harness::crm;
use warden_integration::twonode::{Topology, WardenCluster, poll};

fn names(ns: &[&str]) -> Vec<String> {
    ns.iter().map(|s| s.to_string()).collect()
}

/// Kills `pid` inside `node` with SIGKILL.
fn kill9(w: &WardenCluster, node: &str, pid: i64) {
    w.c.exec_ok(node, &["kill", "-KILL", &pid.to_string()])
        .or_fail(w);
}

/// A fresh bootstrap → the peer's crash, fence, the survivor writable, the peer
/// back as learner then voter → the fenced node's old data archived.
#[test]
fn bootstrap_crash_fence_rejoin_archive() {
    // the fresh-bootstrap scenario: both fresh, both voters, one cluster.
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let (survivor, victim) = ("node1", "node2");
    let (_, before) = w.members(survivor).or_fail(&w);
    let old_victim_id = before
        .iter()
        .find(|m| m.name == victim)
        .map(|m| m.id)
        .expect("victim is a member");
    let writer = w.writer("/s3", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let mon = w.monitor(&[survivor.to_string()]).or_fail(&w);

    // the peer-crash scenario: the peer loses power; Pacemaker fences it; the survivor forces a
    // one-member cluster and takes writes again.
    let t_crash = Instant::now();
    w.c.crash(victim).or_fail(&w);
    // Every process of the victim is gone now; a write sent before this may
    // still have been committed by the pair while they died.
    let t_dead = Instant::now();
    w.c.wait_for(survivor, crm::fenced(victim), FAILOVER)
        .or_fail(&w);
    let fenced_at = w.fence_done_at(victim);
    let ack = writer
        .wait_ack_after(Some(survivor), t_dead, FAILOVER)
        .or_fail(&w);
    if let Some(f) = fenced_at {
        assert!(
            ack.wall >= f,
            "the survivor acked writes after the crash but before the fence ({ack:?})"
        );
        eprintln!(
            "the peer-crash scenario: crash -> first write {:.2}s; fence -> first write {:.2}s",
            ack.at.duration_since(t_crash).as_secs_f64(),
            ack.wall.duration_since(f).unwrap_or_default().as_secs_f64()
        );
    }
    let (c1, ms) = w
        .wait_voters(survivor, &names(&[survivor]), FAILOVER)
        .or_fail(&w);
    assert_eq!(c1, cid, "forcing a new cluster keeps the cluster id");
    assert_eq!(ms.len(), 1, "the survivor is alone: {ms:?}");

    // Before forcing, the survivor kept its write-ahead log's tail (the
    // entries a forced restart may drop), apart from the archives of whole
    // data that a restore may pick.
    let copies = w.wal_copies(survivor).or_fail(&w);
    assert_eq!(copies.len(), 1, "one WAL copy per force: {copies:?}");
    let segments: Vec<_> = std::fs::read_dir(copies[0].join("wal"))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        segments
            .iter()
            .any(|p| p.extension().is_some_and(|x| x == "wal")
                && p.metadata().is_ok_and(|m| m.len() > 0)),
        "the WAL copy {} holds no segment: {segments:?}",
        copies[0].display()
    );
    assert!(
        copies[0].join("reason").is_file(),
        "the WAL copy says why it exists"
    );
    assert!(
        w.archives(survivor).or_fail(&w).is_empty(),
        "the WAL copy must not read as an archive of whole data"
    );

    // The peer comes back: archives its stale data, joins as a learner, is
    // promoted to voter.
    w.boot(victim, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    let (_, ms) = w.wait_voters(survivor, &all, SETTLE).or_fail(&w);
    let new_victim_id = ms.iter().find(|m| m.name == victim).map(|m| m.id);
    assert_ne!(
        new_victim_id,
        Some(old_victim_id),
        "the fenced node must rejoin as a new member (its old data archived)"
    );
    wait_acks_everywhere(&writer, &all, writer.acks().len() / 2 + 5);
    let seen = mon.finish();
    check_seen(&seen, 2);
    if seen.member_ids.get(victim).is_some_and(|ids| ids.len() > 1) {
        assert!(
            seen.learners.contains(victim)
                || seen
                    .learners
                    .iter()
                    .any(|l| new_victim_id.is_some_and(|id| *l == format!("{id:x}"))),
            "{victim} became a voter without being a learner first: {seen:?}"
        );
    }

    // the stale-data-archived scenario: the old data is archived, not deleted, and the log says where.
    let archives = w.archives(victim).or_fail(&w);
    assert!(
        !archives.is_empty(),
        "no archive of {victim}'s old data under {}",
        w.c.node_dir(victim).unwrap().display()
    );
    let log = w.daemon_log(victim);
    assert!(
        archives
            .iter()
            .any(|a| log.contains(&a.display().to_string())),
        "the daemon log of {victim} does not name the archive {archives:?}"
    );

    let acks = writer.finish();
    w.check_writes(&acks, "/s3", &all).or_fail(&w);
    eprintln!(
        "fresh bootstrap, peer crash, stale data archived: {} acknowledged writes checked",
        acks.len()
    );
    w.c.stop();
}

/// the adoption scenario: an etcd member and its data, started by another manager (here: by
/// hand), are taken over by Pacemaker and the daemons without changing the
/// member or cluster ids.
#[test]
fn adoption_keeps_member_and_cluster_ids() {
    let w = WardenCluster::start_daemons(2, Topology::TwoNode).unwrap_or_else(|e| panic!("{e:#}"));
    let all = w.nodes();
    let initial = all
        .iter()
        .map(|n| format!("{n}=http://{}:2380", w.c.addr(n).unwrap()))
        .collect::<Vec<_>>()
        .join(",");
    let mut manual = Vec::new();
    for n in &all {
        let a = w.c.addr(n).unwrap();
        let data = w.data_dir(n).unwrap();
        let argv = [
            "/usr/bin/etcd".to_string(),
            format!("--name={n}"),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls=http://{a}:2379"),
            format!("--advertise-client-urls=http://{a}:2379"),
            format!("--listen-peer-urls=http://{a}:2380"),
            format!("--initial-advertise-peer-urls=http://{a}:2380"),
            format!("--initial-cluster={initial}"),
            "--initial-cluster-state=new".to_string(),
            "--initial-cluster-token=etcd-warden".to_string(),
        ];
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        manual.push((
            n.clone(),
            w.c.spawn(n, "etcd-manual", &argv, &[]).or_fail(&w),
        ));
    }
    let (cid, before) = w.wait_voters(&all[0], &all, SETTLE).or_fail(&w);
    let writer = w.writer("/s2", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);

    // The hand-off: the old manager stops its etcd (SIGTERM, data kept),
    // Pacemaker takes over with the same data dirs.
    for (n, pid) in &manual {
        w.c.stop_process(n, *pid, Duration::from_secs(10))
            .or_fail(&w);
    }
    w.configure_pacemaker().or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    let (cid2, after) = w.wait_voters(&all[0], &all, SETTLE).or_fail(&w);
    assert_eq!(cid, cid2, "adoption changed the cluster id");
    let ids = |ms: &[warden_integration::gateway::Member]| {
        let mut v: Vec<(String, u64)> = ms.iter().map(|m| (m.name.clone(), m.id)).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&before), ids(&after), "adoption changed member ids");
    let t = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), t, FAILOVER).or_fail(&w);
    }
    for n in &all {
        assert!(
            w.archives(n).unwrap().is_empty(),
            "adoption archived {n}'s data"
        );
    }
    let acks = writer.finish();
    w.check_writes(&acks, "/s2", &all).or_fail(&w);
    w.c.stop();
}

/// the partition scenario: the network between the nodes is cut; both race to fence; exactly one
/// survives (node1: the configuration delays fencing it) and takes writes;
/// the loser comes back and rejoins.
#[test]
fn partition_fence_race_one_survivor_rejoins() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/s4", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let mon = w.monitor(&all).or_fail(&w);

    let t_cut = Instant::now();
    w.c.cut("node1", "node2").or_fail(&w);
    // Exactly one survivor: the race is decided once one node is fenced.
    let (survivor, loser) = poll("one node fenced", FAILOVER, || {
        let up: Vec<bool> = all
            .iter()
            .map(|n| w.c.is_running(n).unwrap_or(false))
            .collect();
        Ok(match (up[0], up[1]) {
            (true, false) => Some(("node1", "node2")),
            (false, true) => Some(("node2", "node1")),
            (false, false) => anyhow::bail!("both nodes were fenced"),
            (true, true) => None,
        })
    })
    .or_fail(&w);
    assert_eq!(survivor, "node1", "the fence race went to the delayed node");
    let ack = writer
        .wait_ack_after(Some(survivor), t_cut, FAILOVER)
        .or_fail(&w);
    eprintln!(
        "the partition scenario: cut -> first write on {survivor} {:.2}s",
        ack.at.duration_since(t_cut).as_secs_f64()
    );
    assert!(
        !w.c.is_running(loser).or_fail(&w),
        "two survivors of a fence race"
    );

    w.c.heal("node1", "node2").or_fail(&w);
    w.boot(loser, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    w.wait_voters(survivor, &all, SETTLE).or_fail(&w);
    check_seen(&mon.finish(), 2);
    let acks = writer.finish();
    w.check_writes(&acks, "/s4", &all).or_fail(&w);
    w.c.stop();
}

/// the etcd-crash scenario: etcd crashes on a live node: restarted in place, same member ids and
/// cluster id, no fence, no forced cluster. the daemon-restart scenario: the daemon is killed and
/// restarted: etcd keeps serving throughout and is adopted, not restarted.
#[test]
fn local_etcd_crash_and_daemon_restart() {
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let (_, before) = w.members("node1").or_fail(&w);
    let writer = w.writer("/s5", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let mon = w.monitor(&["node1".to_string()]).or_fail(&w);

    // the etcd-crash scenario
    let old = w.etcd_pid("node2").or_fail(&w).expect("etcd runs on node2");
    let t = Instant::now();
    kill9(&w, "node2", old);
    let new = poll("etcd running again on node2", FAILOVER, || {
        Ok(w.etcd_pid("node2")?.filter(|p| *p != old))
    })
    .or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    writer
        .wait_ack_after(Some("node2"), t, FAILOVER)
        .or_fail(&w);
    let (cid2, after) = w.members("node2").or_fail(&w);
    assert_eq!(cid, cid2, "an etcd crash changed the cluster id");
    assert_eq!(before, after, "an etcd crash changed the membership");
    assert_eq!(
        w.fence_count("node1", "node2").or_fail(&w),
        0,
        "node2 was fenced"
    );
    eprintln!(
        "the etcd-crash scenario: etcd {old} -> {new} on node2 after {:?}",
        t.elapsed()
    );

    // the daemon-restart scenario
    let etcd = w.etcd_pid("node1").or_fail(&w).expect("etcd runs on node1");
    let daemon = w.daemon_pid("node1").expect("daemon on node1");
    let t = Instant::now();
    w.c.exec_ok("node1", &["kill", "-KILL", &daemon.to_string()])
        .or_fail(&w);
    // Restarted at once, as its unit would (Restart=always): the daemon is
    // gone for well under Pacemaker's 10 s monitor interval.
    w.spawn_daemon("node1").or_fail(&w);
    // etcd served throughout.
    writer
        .wait_ack_after(Some("node1"), t, FAILOVER)
        .or_fail(&w);
    let pid = poll("the new daemon to report etcd", FAILOVER, || {
        w.etcd_pid("node1")
    })
    .or_fail(&w);
    assert_eq!(
        pid, etcd,
        "the restarted daemon restarted etcd instead of adopting it"
    );
    let t = Instant::now();
    writer
        .wait_ack_after(Some("node1"), t, FAILOVER)
        .or_fail(&w);
    let (_, after) = w.members("node1").or_fail(&w);
    assert_eq!(before, after, "a daemon restart changed the membership");
    check_seen(&mon.finish(), 2);
    let acks = writer.finish();
    w.check_writes(&acks, "/s5", &all).or_fail(&w);
    w.c.stop();
}

/// the double-power-loss scenario: both nodes lose power, node2 first: node1 went on alone (fenced node2,
/// forced, took writes), so node1's data is newer. the total-outage scenario: node2 boots alone
/// after the total outage: it waits (no etcd, no writes accepted) and says
/// why, with the one command that resolves it, where an operator looks:
/// crm_mon's exit reason and the daemon's report (the refusal rule). Then node1
/// boots: its newer data wins, node2 archives its stale data and rejoins,
/// and nothing acknowledged is lost.
#[test]
fn total_outage_newer_data_wins_lone_node_waits() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/s7", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);

    let t = Instant::now();
    w.c.crash("node2").or_fail(&w);
    w.c.wait_for("node1", crm::fenced("node2"), FAILOVER)
        .or_fail(&w);
    writer
        .wait_ack_after(Some("node1"), t, FAILOVER)
        .or_fail(&w);
    let t = Instant::now();
    writer
        .wait_ack_after(Some("node1"), t, FAILOVER)
        .or_fail(&w);
    // node1's last writes exist only in its data now.
    w.c.crash("node1").or_fail(&w);
    let t_out = Instant::now();

    // the total-outage scenario: node2 alone, with the older data.
    w.boot("node2", SETTLE).or_fail(&w);
    let command = "etcd-warden recover force-new-cluster --node node2";
    let shown = poll("crm_mon on node2 to say why etcd waits", SETTLE, || {
        Ok(etcd_exit_reasons(&w, "node2", "node2")?
            .into_iter()
            .find(|r| r.contains("etcd-warden recover")))
    })
    .or_fail(&w);
    eprintln!("the total-outage scenario: crm_mon on node2 shows: {shown}");
    assert!(
        shown.contains(command),
        "the exit reason must name `{command}`: {shown}"
    );
    let reported = poll("node2's daemon report to say why", FAILOVER, || {
        Ok(report_exit_reasons(&daemon_report(&w, "node2")?, "node2")
            .into_iter()
            .find(|r| r.contains(command)))
    })
    .or_fail(&w);
    assert_eq!(reported, shown, "the report and crm_mon disagree");
    assert_eq!(
        w.etcd_pid("node2").or_fail(&w),
        None,
        "a lone node with older data started etcd after a total outage"
    );
    assert!(
        writer.first_ack_after(Some("node2"), t_out).is_none(),
        "a lone node with older data accepted writes after a total outage"
    );

    // the double-power-loss scenario: node1 comes back; its newer data wins.
    w.boot("node1", SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    assert!(
        !w.archives("node2").or_fail(&w).is_empty(),
        "node2 rejoined without archiving its stale data"
    );
    assert!(
        w.archives("node1").or_fail(&w).is_empty(),
        "node1's newer data was archived"
    );
    let acks = writer.finish();
    w.check_writes(&acks, "/s7", &all).or_fail(&w);
    eprintln!(
        "the double-power-loss scenario/the total-outage scenario: {} acknowledged writes checked",
        acks.len()
    );
    w.c.stop();
}

/// Stops Pacemaker on `node` the way a graceful reboot does (SIGTERM to
/// pacemakerd: it stops every resource first, then leaves), then Corosync.
fn graceful_stop(w: &WardenCluster, node: &str) {
    let (corosync, pacemakerd) = w.c.daemon_pids(node).or_fail(w);
    let pcmk = pacemakerd.expect("pacemakerd runs");
    w.c.exec_ok(node, &["kill", "-TERM", &pcmk.to_string()])
        .or_fail(w);
    poll(&format!("pacemakerd on {node} to stop"), SETTLE, || {
        Ok((!warden_harness::process::alive(pcmk)).then_some(()))
    })
    .or_fail(w);
    if let Some(c) = corosync {
        w.c.exec_ok(node, &["kill", "-TERM", &c.to_string()])
            .or_fail(w);
    }
}

/// the graceful-reboot scenario: node2 reboots gracefully: node1 goes on without a fence and without
/// forcing a new cluster (the cluster id stays). the both-stopped scenario: both stop gracefully at
/// once: no corruption; both start cleanly afterwards with every write.
#[test]
fn graceful_reboot_and_graceful_stop_of_both() {
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/s9", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let mon = w.monitor(&["node1".to_string()]).or_fail(&w);

    // the graceful-reboot scenario
    let t = Instant::now();
    graceful_stop(&w, "node2");
    w.c.crash("node2").or_fail(&w); // what the reboot ends: the daemon
    writer
        .wait_ack_after(Some("node1"), t, FAILOVER)
        .or_fail(&w);
    assert_eq!(
        w.fence_count("node1", "node2").or_fail(&w),
        0,
        "a graceful reboot was fenced"
    );
    let (c1, _) = w.members("node1").or_fail(&w);
    assert_eq!(
        c1, cid,
        "the survivor of a graceful reboot forced a new cluster"
    );
    w.boot("node2", SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    check_seen(&mon.finish(), 2);
    // node2 left the member list on its way down, so its old data is
    // archived once, when it rejoins; never during the stop itself.
    let archived = w.archives("node2").or_fail(&w);
    assert_eq!(
        archived.len(),
        1,
        "node2's data must be archived exactly once, at its rejoin: {archived:?}"
    );

    // the both-stopped scenario
    let t_stop = SystemTime::now();
    std::thread::scope(|s| {
        let a = s.spawn(|| graceful_stop(&w, "node1"));
        let b = s.spawn(|| graceful_stop(&w, "node2"));
        assert!(
            a.join().is_ok() && b.join().is_ok(),
            "a graceful stop failed"
        );
    });
    for n in &all {
        w.c.crash(n).or_fail(&w);
    }
    eprintln!("the both-stopped scenario: both stopped at {t_stop:?}");
    for n in &all {
        assert!(
            w.data_dir(n).unwrap().join("member").is_dir(),
            "{n}'s data dir is gone after a graceful stop"
        );
    }
    // A clean start: both nodes boot; the same cluster, every write there.
    std::thread::scope(|s| {
        let a = s.spawn(|| w.boot("node1", SETTLE));
        let b = s.spawn(|| w.boot("node2", SETTLE));
        a.join().unwrap().or_fail(&w);
        b.join().unwrap().or_fail(&w);
    });
    w.wait_started(&all, SETTLE).or_fail(&w);
    let (c2, _) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    assert_eq!(
        c2, cid,
        "a clean start after a graceful stop forced a new cluster"
    );
    assert_eq!(w.fence_count("node1", "node2").or_fail(&w), 0);
    // Neither left nor archived anything: both kept their data.
    assert!(w.archives("node1").or_fail(&w).is_empty());
    assert_eq!(w.archives("node2").or_fail(&w), archived);
    let acks = writer.finish();
    w.check_writes(&acks, "/s9", &all).or_fail(&w);
    w.c.stop();
}
