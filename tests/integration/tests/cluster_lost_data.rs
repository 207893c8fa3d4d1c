//! Member directories that are missing at boot (a data volume not mounted,
//! a replaced disk) on real Corosync, Pacemaker, fencing and etcd, with an
//! `etcd-warden daemon` in every node.
//!
//! The daemons' state files (kept apart from the data) still say a cluster
//! existed. No node may then serve a cluster without the data: an empty
//! bootstrap would answer clients with nothing, under the same ids as the
//! old cluster if its token were reused. Each daemon refuses, names what is
//! missing and where, and the command that restores it; once the data is
//! back the pair recovers by itself. With one node's data intact, that node
//! holds every acknowledged write and the pair recovers with no admin step.
//!
//! A "missing" member directory is moved aside into the node's work
//! directory (never deleted), as an unmounted volume keeps it.
//!
//! Last, what a power loss did not keep: a leave whose removal the peer
//! applied but had not persisted (its disk is put back to an image taken
//! with etcd paused just before the leave, which is what the power loss
//! left), so that no automatic path is safe and both daemons name the
//! node with the newest data and the command.

mod failover_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use failover_support::{OrFail, SETTLE, healthy, wait_acks_everywhere};
use warden_integration::twonode::{Topology, WardenCluster, etcd_stopped_on, poll};

/// Where a node's member directory waits while "its volume is not mounted".
fn unmounted(w: &WardenCluster, node: &str) -> PathBuf {
    unmounted_at(w, node, "unmounted-volume")
}

/// `place` in `node`'s work directory.
fn unmounted_at(w: &WardenCluster, node: &str, place: &str) -> PathBuf {
    w.c.node_dir(node)
        .map(|d| d.join(place))
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Takes `node`'s member directory away (the node is powered off).
fn unmount(w: &WardenCluster, node: &str) {
    unmount_as(w, node, "unmounted-volume");
}

/// Takes `node`'s member directory away into `place` in its work directory.
fn unmount_as(w: &WardenCluster, node: &str, place: &str) {
    let from = w.data_dir(node).or_fail(w).join("member");
    let to = unmounted_at(w, node, place);
    std::fs::create_dir_all(&to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    std::fs::rename(&from, to.join("member"))
        .unwrap_or_else(|e| panic!("moving {} aside: {e}", from.display()));
}

/// Puts `node`'s member directory back (the operator mounts the volume).
fn mount(w: &WardenCluster, node: &str) {
    let from = unmounted(w, node).join("member");
    let to = w.data_dir(node).or_fail(w).join("member");
    std::fs::rename(&from, &to).unwrap_or_else(|e| panic!("moving {} back: {e}", from.display()));
}

/// Waits until `node`'s daemon refuses for the missing data, and returns
/// its reason. The reason names the member directory and a recover command.
fn wait_refusal(w: &WardenCluster, node: &str) -> String {
    let member = w.data_dir(node).or_fail(w).join("member");
    let reason = poll(
        &format!("{node}'s daemon to refuse for its missing data"),
        SETTLE,
        || {
            let r = w.reason(node)?;
            Ok(r.contains("etcd data missing").then_some(r))
        },
    )
    .or_fail(w);
    assert!(
        reason.contains(&member.display().to_string()),
        "{node}'s refusal must say where the data was expected ({}): {reason}",
        member.display()
    );
    assert!(
        reason.contains("etcd-warden recover restore-"),
        "{node}'s refusal must name the command that restores the data: {reason}"
    );
    reason
}

/// Checks, for `window`, that no etcd runs on any of `nodes`.
fn assert_no_etcd(w: &WardenCluster, nodes: &[&str], window: Duration) {
    let until = Instant::now() + window;
    while Instant::now() < until {
        for n in nodes {
            if let Some(pid) = w.etcd_pid(n).or_fail(w) {
                panic!(
                    "{n} started etcd (pid {pid}) without its data: {}",
                    w.reason(n).unwrap_or_default()
                );
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Both nodes lose power; neither data volume is there at the cold boot.
/// First one node boots alone, then the other: neither ever starts etcd,
/// both say what is missing, where, and the command. The volumes come back
/// and the pair recovers by itself with every acknowledged write.
#[test]
fn both_member_dirs_missing_at_a_cold_boot_no_node_serves_without_the_data() {
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/lost", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let acks = finish_with_sentinel(&w, writer, "node1");

    w.c.crash("node1").or_fail(&w);
    w.c.crash("node2").or_fail(&w);
    unmount(&w, "node1");
    unmount(&w, "node2");

    // A lone node without its data.
    w.boot("node1", SETTLE).or_fail(&w);
    let lone = wait_refusal(&w, "node1");
    eprintln!("lone node1: {lone}");
    assert!(
        lone.contains("--node node1"),
        "the lone node holds the newest data it knows of: {lone}"
    );
    assert_no_etcd(&w, &["node1"], Duration::from_secs(5));

    // Both nodes up, both without data.
    w.boot("node2", SETTLE).or_fail(&w);
    for n in ["node1", "node2"] {
        let r = poll(
            &format!("{n} to refuse with its peer online"),
            SETTLE,
            || {
                let r = wait_refusal(&w, n);
                Ok(r.contains("lost its data too").then_some(r))
            },
        )
        .or_fail(&w);
        eprintln!("{n}: {r}");
    }
    assert_no_etcd(&w, &["node1", "node2"], Duration::from_secs(10));

    // The operator mounts the volumes: the pair recovers by itself.
    mount(&w, "node1");
    mount(&w, "node2");
    let (c, _) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    assert_eq!(c, cid, "the recovered cluster is the old one");
    w.check_writes(&acks, "/lost", &all).or_fail(&w);
    eprintln!("both missing: {} acknowledged writes checked", acks.len());
    w.c.stop();
}

/// Stops `writer` and makes one more write through `node`, acknowledged:
/// every write the writer had acknowledged is then covered by the commit
/// index both members persisted with that last entry (etcd syncs a commit
/// index only together with new entries), so a power loss right after
/// cannot leave one of them past a persisted commit index. The last write
/// itself is not checked.
fn finish_with_sentinel(
    w: &WardenCluster,
    writer: warden_integration::writer::Writer,
    node: &str,
) -> Vec<warden_integration::writer::Ack> {
    let acks = writer.finish();
    poll("a last write to be acknowledged", SETTLE, || {
        Ok(w.put(node, "/sentinel", "last").ok())
    })
    .or_fail(w);
    acks
}

/// The operator's one command, `recover force-new-cluster --node NODE
/// --confirm` on `node`, then the wait for two voters with etcd started on
/// both; prints how long that took, under `label`.
fn operator_forces(w: &WardenCluster, node: &str, label: &str) {
    let all = w.nodes();
    let t = Instant::now();
    let args = ["recover", "force-new-cluster", "--node", node, "--confirm"];
    let out = w.warden_cli(node, &args).or_fail(w);
    eprintln!("{out}");
    w.wait_voters(node, &all, SETTLE).or_fail(w);
    w.wait_started(&all, SETTLE).or_fail(w);
    eprintln!(
        "{label}: operator command -> two voters {:.2}s",
        t.elapsed().as_secs_f64()
    );
}

/// Both nodes lose power; one comes back with an empty data directory (a
/// replaced disk), the other with its data, whose member waits for the
/// first one's vote. In a two-member cluster every acknowledged write is
/// in the intact node's log, so the node without data restarts its old
/// member (same id, found by its peer URL) on an empty directory; the
/// intact node's member leads and fills it. The pair is whole again with
/// no operator and no force: the same cluster and member ids, nothing
/// archived, and every acknowledged write there, the last ones included
/// (a force would drop those past the persisted commit index). Twice:
/// node1's directory lost and node2 booted first, then node2's lost and
/// node2 booted first.
#[test]
fn one_member_dir_missing_after_a_total_outage_heals_without_an_operator() {
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let ids = |node: &str| {
        let (c, members) = w.members(node).or_fail(&w);
        let mut ids: Vec<u64> = members.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        (c, ids)
    };
    let before = ids("node1");
    assert_eq!(before.0, cid);
    for (round, (lost, first, then)) in [("node1", "node2", "node1"), ("node2", "node2", "node1")]
        .into_iter()
        .enumerate()
    {
        let prefix = format!("/onelost{round}");
        let writer = w.writer(&prefix, &all).or_fail(&w);
        wait_acks_everywhere(&writer, &all, 20);
        let acks = writer.finish();

        w.c.crash("node1").or_fail(&w);
        w.c.crash("node2").or_fail(&w);
        unmount_as(&w, lost, &format!("unmounted-volume-{round}"));
        let t = Instant::now();
        w.boot(first, SETTLE).or_fail(&w);
        w.boot(then, SETTLE).or_fail(&w);
        w.wait_voters("node1", &all, SETTLE).or_fail(&w);
        w.wait_started(&all, SETTLE).or_fail(&w);
        eprintln!(
            "{lost}'s directory lost, {first} booted first: both booted -> two voters {:.2}s",
            t.elapsed().as_secs_f64()
        );
        assert_eq!(ids("node1"), before, "the same cluster and members");
        assert_eq!(ids("node2"), before, "the same cluster and members");
        w.check_writes(&acks, &prefix, &all).or_fail(&w);
        for n in ["node1", "node2"] {
            let archives = w.archives(n).or_fail(&w);
            assert!(archives.is_empty(), "{n} archived: {archives:?}");
        }
        eprintln!(
            "{lost}'s directory lost: {} acknowledged writes checked, none archived",
            acks.len()
        );
    }
    w.c.stop();
}

/// The parts of `node`'s disk a power loss decides on: its etcd member
/// directory and its daemon's state directory, each with a name.
fn disk_parts(w: &WardenCluster, node: &str) -> [(PathBuf, &'static str); 2] {
    let dir = w.c.node_dir(node).or_fail(w);
    [
        (w.data_dir(node).or_fail(w).join("member"), "member"),
        (dir.join("state"), "state"),
    ]
}

/// A copy of `node`'s member directory and state file as they are now,
/// taken with its etcd paused, so that the copy is what a power loss at
/// this moment would have left on its disk.
fn image_of(w: &WardenCluster, node: &str) -> PathBuf {
    use nix::sys::signal::Signal;
    use warden_harness::process::signal;
    let image = w.c.node_dir(node).or_fail(w).join("disk-image");
    std::fs::create_dir_all(&image).unwrap_or_else(|e| panic!("{}: {e}", image.display()));
    let pid = w
        .etcd_pid(node)
        .or_fail(w)
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or_else(|| panic!("{node}'s etcd is not running"));
    signal(pid, Signal::SIGSTOP).or_fail(w);
    let copied = disk_parts(w, node)
        .iter()
        .map(|(from, to)| {
            std::process::Command::new("cp")
                .arg("-a")
                .arg(from)
                .arg(image.join(to))
                .status()
        })
        .collect::<Result<Vec<_>, _>>();
    // Resumed before any check, so that a failed copy leaves no etcd paused.
    let resumed = signal(pid, Signal::SIGCONT);
    let statuses = copied.unwrap_or_else(|e| panic!("copying {node}'s disk: {e}"));
    assert!(
        statuses.iter().all(|s| s.success()),
        "cp failed: {statuses:?}"
    );
    resumed.or_fail(w);
    image
}

/// Puts `node`'s disk back as `image` recorded it (the node is powered
/// off); what the disk held meanwhile is kept beside it, not deleted.
fn restore_image(w: &WardenCluster, node: &str, image: &std::path::Path) {
    let later = w.c.node_dir(node).or_fail(w).join("disk-after");
    std::fs::create_dir_all(&later).unwrap_or_else(|e| panic!("{}: {e}", later.display()));
    for (live, name) in disk_parts(w, node) {
        std::fs::rename(&live, later.join(name))
            .unwrap_or_else(|e| panic!("moving {} aside: {e}", live.display()));
        std::fs::rename(image.join(name), &live)
            .unwrap_or_else(|e| panic!("putting {name} back: {e}"));
    }
}

/// A graceful leave whose removal the peer did not persist: node1 leaves
/// the member list (standby); node2 applies the removal, but a power loss
/// takes node2's disk back to before it (etcd syncs a commit index change
/// only with new entries: node2's disk here is the image taken just before
/// the leave). After a total outage node2's member lists node1 as a voter
/// and waits for its vote, which node1's removed member never gives. No
/// automatic path is safe: both daemons name node2 as holding the newest
/// data and the one command; that command forces a one-member cluster on
/// node2, node1 archives its data and rejoins, and every acknowledged
/// write is there.
#[test]
fn a_leave_the_peer_did_not_persist_names_the_peer_and_the_command() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/unpersisted", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let acks = finish_with_sentinel(&w, writer, "node2");
    let image = image_of(&w, "node2");

    w.standby("node2", "node1", true).or_fail(&w);
    poll("node2 to run as the only voter", SETTLE, || {
        let (_, members) = w.members("node2")?;
        Ok((members.len() == 1 && w.etcd_pid("node1")?.is_none()).then_some(()))
    })
    .or_fail(&w);
    // The leave is over once Pacemaker has seen node1's stop complete: its
    // etcd is gone as soon as it has applied its removal, a moment before
    // its daemon has written down what the leave did.
    w.c.wait_for("node2", etcd_stopped_on("node1"), SETTLE)
        .or_fail(&w);

    w.c.crash("node2").or_fail(&w);
    w.c.crash("node1").or_fail(&w);
    restore_image(&w, "node2", &image);
    w.boot("node2", SETTLE).or_fail(&w);
    w.boot("node1", SETTLE).or_fail(&w);
    w.standby("node2", "node1", false).or_fail(&w);

    let command = "etcd-warden recover force-new-cluster --node node2";
    let peer = poll("node2 to name itself and the command", SETTLE, || {
        // Until node1's start has run, its stopped etcd is the proof
        // named; then its record's removal.
        let r = w.reason("node2")?;
        Ok((r.contains(command) && r.contains("this node holds the newest data")).then_some(r))
    })
    .or_fail(&w);
    eprintln!("unpersisted leave, node2: {peer}");
    let leaver = poll("node1 to name node2 and the command", SETTLE, || {
        let r = w.reason("node1")?;
        Ok((r.contains(command) && r.contains("the newest data is on node2")).then_some(r))
    })
    .or_fail(&w);
    eprintln!("unpersisted leave, node1: {leaver}");
    assert!(
        w.put("node2", "/unpersisted/probe", "x").is_err(),
        "node2 took a write without quorum"
    );

    operator_forces(&w, "node2", "unpersisted leave");
    w.check_writes(&acks, "/unpersisted", &all).or_fail(&w);
    assert!(
        !w.archives("node1").or_fail(&w).is_empty(),
        "node1's departed data must be archived, not reused"
    );
    assert!(
        !w.wal_copies("node2").or_fail(&w).is_empty(),
        "the force must keep the WAL's tail"
    );
    eprintln!(
        "unpersisted leave: {} acknowledged writes checked",
        acks.len()
    );
    w.c.stop();
}

/// Both member directories lost after a failover, with only node2's
/// archive of its stale data left (a voter's data of the epoch before the
/// failover): both daemons name `restore-archive --node node2`; the
/// restore first refuses the archive's older epoch and names the flag; with
/// it, the restored data is the operator's choice, the daemon forces a
/// one-member cluster from it by itself (node1's daemon says it holds no
/// data), moving the revision on, and node1 joins. Every write acknowledged
/// before the failover is back, the later ones are lost with the member
/// directories, and no revision is acknowledged twice (the lost writes'
/// included). Afterwards a restore beside the live pair is refused.
#[test]
fn both_member_dirs_lost_after_a_failover_restore_the_archive_without_reusing_revisions() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/archived", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let kept = finish_with_sentinel(&w, writer, "node1");

    // A failover: node2's power cut and fenced, node1 alone, then node2
    // back: its stale data archived, a learner, a voter.
    w.crash_fenced("node2", "node1", SETTLE).or_fail(&w);
    w.wait_voters("node1", &["node1".to_owned()], SETTLE)
        .or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    assert_eq!(w.archives("node2").or_fail(&w).len(), 1, "node2 archived");
    let writer = w.writer("/archived-later", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let later = writer.finish();

    // Both member directories gone at a total outage.
    w.c.crash("node1").or_fail(&w);
    w.c.crash("node2").or_fail(&w);
    unmount(&w, "node1");
    unmount(&w, "node2");
    w.boot("node1", SETTLE).or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    const COMMAND: &str = "etcd-warden recover restore-archive --node node2";
    for n in ["node1", "node2"] {
        let r = poll(&format!("{n} to name node2's archive"), SETTLE, || {
            let r = wait_refusal(&w, n);
            Ok(r.contains("lost its data too").then_some(r))
        })
        .or_fail(&w);
        assert!(r.contains(COMMAND), "{n}: {r}");
    }
    let base = ["recover", "restore-archive", "--node", "node2", "--confirm"];
    let refused = w.warden_cli("node2", &base).expect_err("an older epoch");
    assert!(
        format!("{refused:#}").contains("--allow-older-epoch"),
        "{refused:#}"
    );
    let t = Instant::now();
    let out = w
        .warden_cli("node2", &[&base[..], &["--allow-older-epoch"]].concat())
        .or_fail(&w);
    eprintln!("{out}");
    w.wait_voters("node2", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    let to_voters = t.elapsed();

    let writer = w.writer("/archived-after", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let after = writer.finish();
    w.check_writes(&kept, "/archived", &all).or_fail(&w);
    w.check_writes(&after, "/archived-after", &all).or_fail(&w);
    let every: Vec<_> = [&kept[..], &later[..], &after[..]].concat();
    warden_integration::writer::check_unique_revisions(&every).or_fail(&w);
    let first_after = after.iter().map(|a| a.revision).min().unwrap_or_default();
    let last_lost = later.iter().map(|a| a.revision).max().unwrap_or_default();
    assert!(
        first_after > last_lost,
        "revision {first_after} after the restore, {last_lost} before the loss"
    );
    eprintln!(
        "archive restored: command -> two voters {:.2}s; {} writes before the failover back, {} after it lost with the member directories (revisions up to {last_lost}), first revision after the restore {first_after}",
        to_voters.as_secs_f64(),
        kept.len(),
        later.len()
    );
    // A restore beside the live cluster is refused and names its leader.
    let leader = w.leader_node(SETTLE).or_fail(&w);
    let other = if leader == "node1" { "node2" } else { "node1" };
    let args = ["recover", "restore-archive", "--node", other, "--confirm"];
    let beside = w.warden_cli(other, &args).expect_err("a cluster leads");
    assert!(
        format!("{beside:#}").contains(&format!("etcd on {leader} leads a cluster")),
        "{beside:#}"
    );
    w.c.stop();
}
