//! The upgrade procedure of docs/operations.md ("Upgrading etcd-warden
//! without losing quorum") on real Corosync, Pacemaker, fencing and etcd,
//! with an `etcd-warden daemon` in every node, one node at a time:
//!
//! 1. `crm_attribute --node N --name standby --update on`: Pacemaker stops
//!    etcd on N, which leaves the member list; the peer goes on alone as a
//!    one-member cluster (no fence, no forced new cluster);
//! 2. the new binary is installed and the daemon restarted from it (a
//!    separate copy of the build, so the test can tell which binary runs);
//! 3. `crm_attribute --node N --name standby --delete`: etcd starts on N,
//!    joins as a learner and is promoted; the next node waits for two
//!    voters.
//!
//! A writer through both nodes runs throughout, and a sampler watches the
//! member list. Checked: the cluster always had a voter with a leader, no
//! node was fenced, the peer's etcd kept running (same PID) while N was
//! upgraded, every acknowledged write is present at the end, and the longest
//! pause between acknowledged writes stays under the bound the operations
//! guide states.

mod failover_support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use failover_support::{OrFail, SETTLE, check_seen, healthy, wait_acks_everywhere};
use warden_integration::twonode::{Topology, WardenCluster, poll};
use warden_integration::writer::Ack;

/// The longest pause between two acknowledged writes (through either node)
/// while the procedure runs, as docs/operations.md states it. The pause
/// comes from etcd moving its leadership when the node in standby leaves
/// the member list and when it is promoted back.
const WRITE_GAP: Duration = Duration::from_secs(5);
/// Grace of the daemon's stop ("systemctl restart" gives it the unit's
/// TimeoutStopSec; the daemon runs no etcd here, so it stops at once).
const STOP_GRACE: Duration = Duration::from_secs(30);

/// Installs a copy of the daemon binary at `dest` the way a package does: a
/// new file renamed over the old path, so a running process keeps its own.
/// Returns the new file's inode.
fn install_binary(from: &Path, dest: &Path) -> anyhow::Result<u64> {
    let dir = dest
        .parent()
        .ok_or_else(|| anyhow::anyhow!("{} has no parent", dest.display()))?;
    std::fs::create_dir_all(dir)?;
    let part = dir.join(".etcd-warden.part");
    std::fs::copy(from, &part)?;
    std::fs::rename(&part, dest)?;
    Ok(std::fs::metadata(dest)?.ino())
}

/// The inode of the binary process `pid` runs (on the host: the node's
/// processes share its filesystem).
fn exe_inode(pid: i32) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(format!("/proc/{pid}/exe"))?.ino())
}

/// The standby attribute of `node`, set (`on`) or removed, as the guide
/// does it without pcs.
fn standby(w: &WardenCluster, node: &str, on: bool) {
    let mut argv = vec!["crm_attribute", "--node", node, "--name", "standby"];
    if on {
        argv.extend(["--update", "on"]);
    } else {
        argv.push("--delete");
    }
    let peer = w.peer(node);
    w.c.exec_ok(&peer, &argv).or_fail(w);
}

/// The longest pause between consecutive acknowledged writes (through any
/// node) answered after `from`, and when it ended.
fn longest_gap(acks: &[Ack], from: Instant) -> (Duration, Option<Instant>) {
    let mut at: Vec<Instant> = acks.iter().map(|a| a.at).filter(|t| *t >= from).collect();
    at.sort();
    at.windows(2)
        .map(|p| (p[1].duration_since(p[0]), Some(p[1])))
        .max_by_key(|(d, _)| *d)
        .unwrap_or((Duration::ZERO, None))
}

#[test]
fn a_rolling_upgrade_keeps_quorum_and_every_write() {
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let new_binary: PathBuf = w.c.root().join("upgrade/sbin/etcd-warden");
    let built = warden_integration::bins::warden().or_fail(&w);
    let new_inode = install_binary(&built, &new_binary).or_fail(&w);

    let writer = w.writer("/upgrade", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 10);
    let mon = w.monitor(&all).or_fail(&w);
    let start = Instant::now();

    for node in &all {
        let peer = w.peer(node);
        let t0 = Instant::now();
        let peer_etcd = w.etcd_pid(&peer).or_fail(&w);
        assert!(peer_etcd.is_some(), "{peer}'s etcd is not running");

        // 1. Standby: etcd stops on the node and leaves the member list;
        //    the peer is a sole voter and takes writes.
        standby(&w, node, true);
        poll(
            &format!("{node}'s etcd to stop for standby"),
            SETTLE,
            || Ok(w.etcd_pid(node)?.is_none().then_some(())),
        )
        .or_fail(&w);
        w.wait_voters(&peer, std::slice::from_ref(&peer), SETTLE)
            .or_fail(&w);
        let alone = Instant::now();
        writer
            .wait_ack_after(Some(&peer), alone, SETTLE)
            .or_fail(&w);

        // 2. The new binary, and the daemon restarted from it.
        let old = w.daemon_pid(node).expect("a daemon on the node");
        assert_ne!(exe_inode(old).or_fail(&w), new_inode);
        w.c.stop_process(node, old, STOP_GRACE).or_fail(&w);
        let pid = w.spawn_daemon_from(node, &new_binary).or_fail(&w);
        assert_eq!(
            exe_inode(pid).or_fail(&w),
            new_inode,
            "{node}'s daemon does not run the new binary"
        );
        assert_eq!(
            w.etcd_pid(node).or_fail(&w),
            None,
            "{node}'s new daemon started etcd while the node is in standby"
        );

        // 3. Unstandby: etcd starts, joins as a learner, is promoted.
        standby(&w, node, false);
        w.wait_voters(&peer, &all, SETTLE).or_fail(&w);
        w.wait_started(&all, SETTLE).or_fail(&w);
        let back = Instant::now();
        for n in &all {
            writer.wait_ack_after(Some(n), back, SETTLE).or_fail(&w);
        }
        assert_eq!(
            w.etcd_pid(&peer).or_fail(&w),
            peer_etcd,
            "{peer}'s etcd was restarted while {node} was upgraded"
        );
        let (gap, _) = longest_gap(&writer.acks(), t0);
        eprintln!(
            "{node} upgraded in {:.1}s; longest write gap so far {:.2}s",
            t0.elapsed().as_secs_f64(),
            gap.as_secs_f64()
        );
    }

    let seen = mon.finish();
    check_seen(&seen, 2);
    assert!(
        seen.cluster_ids
            .values()
            .all(|ids| ids.len() == 1 && ids.contains(&cid)),
        "a node answered from another cluster: {seen:?}"
    );
    for n in &all {
        assert_eq!(
            w.fence_count(&w.peer(n), n).or_fail(&w),
            0,
            "{n} was fenced during the upgrade"
        );
    }
    let acks = writer.finish();
    w.check_writes(&acks, "/upgrade", &all).or_fail(&w);
    warden_integration::writer::check_real_time_order(&acks).or_fail(&w);
    let (gap, ended) = longest_gap(&acks, start);
    let ended = ended.map(|t| t.duration_since(start).as_secs_f64());
    eprintln!(
        "rolling upgrade of {} nodes in {:.1}s: {} acknowledged writes present, longest write gap {:.2}s (ending {:.1}s in), {} member-list samples, min voters {}",
        all.len(),
        start.elapsed().as_secs_f64(),
        acks.len(),
        gap.as_secs_f64(),
        ended.unwrap_or_default(),
        seen.samples,
        seen.min_voters
    );
    assert!(
        gap <= WRITE_GAP,
        "a write gap of {gap:?} during the upgrade (bound {WRITE_GAP:?})"
    );
    w.c.stop();
}
