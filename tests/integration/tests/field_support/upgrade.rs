//! A package upgrade, one node at a time, exactly as docs/operations.md
//! ("Upgrading etcd-warden without losing quorum") says: `pcs node standby`,
//! `etcd-warden status` on the peer, `apt-get install ./NEW.deb`,
//! `systemctl restart etcd-warden`, `pcs node unstandby`, wait for two
//! voters, then the other node. The newer package is the one under test
//! rebuilt with a higher version. A writer of its own on both nodes runs
//! throughout: the cluster never loses quorum (the longest gap between two
//! acknowledged writes, from either node, stays under the bound the
//! procedure documents), nobody is fenced, and every acknowledged write is
//! checked at the end.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use warden_harness::field::{FieldCluster, etcd_started_on};

use super::{
    assert_no_failed_action, assert_no_new_fence, check_writes, longest_write_gap, members, ready,
    wait_all_voters, writer,
};

/// The longest time the cluster may go without acknowledging a write
/// during the procedure (docs/operations.md states it).
pub const GAP_BOUND: Duration = Duration::from_secs(10);

/// `deb` rebuilt with `+upgrade1` appended to its version.
fn newer_package(deb: &Path, dir: &Path) -> PathBuf {
    repack(deb, dir, "etcd-warden_new_amd64.deb", "+upgrade1", |_| {})
}

/// `deb` rebuilt as `dir/name`, with `suffix` appended to its version and
/// its unpacked tree (`DEBIAN/` included) changed by `edit` first.
pub fn repack(
    deb: &Path,
    dir: &Path,
    name: &str,
    suffix: &str,
    edit: impl FnOnce(&Path),
) -> PathBuf {
    let tree = dir.join(format!("{name}.tree"));
    let run = |cmd: &mut Command| {
        let o = cmd.output().unwrap();
        assert!(
            o.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    run(Command::new("dpkg-deb").arg("-R").arg(deb).arg(&tree));
    let control = tree.join("DEBIAN/control");
    let text = std::fs::read_to_string(&control).unwrap();
    let text: String = text
        .lines()
        .map(|l| match l.strip_prefix("Version: ") {
            Some(v) => format!("Version: {v}{suffix}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&control, text).unwrap();
    edit(&tree);
    let out = dir.join(name);
    // gzip: xz (dpkg-deb's default) takes most of a minute on the debug
    // binaries of a loaded machine; the package is the same either way.
    run(Command::new("dpkg-deb")
        .args(["--root-owner-group", "-Zgzip", "-b"])
        .arg(&tree)
        .arg(&out));
    out
}

/// The version of etcd-warden `node` has installed.
pub fn installed_version(c: &FieldCluster, node: &str) -> String {
    c.node_sh_ok(node, "dpkg-query -W -f '${Version}' etcd-warden")
        .unwrap()
        .stdout
        .trim()
        .to_owned()
}

/// `pcs node standby node`, then waits until etcd runs on `peer` alone
/// and `peer`'s member is the only voter.
pub fn standby(c: &FieldCluster, node: &str, peer: &str) {
    c.node_sh_ok(node, &format!("pcs node standby {node}"))
        .unwrap();
    c.wait_crm(
        peer,
        &format!("etcd stopped on {node} (standby)"),
        Duration::from_secs(120),
        |m| !etcd_started_on(m, node) && etcd_started_on(m, peer),
    )
    .unwrap();
    warden_harness::process::poll(
        &format!("{peer} the only voter"),
        Duration::from_secs(60),
        Duration::from_millis(300),
        || match members(c, peer) {
            Ok(ms) if ms.len() == 1 && ms[0].name == peer && !ms[0].is_learner => Ok(()),
            Ok(ms) => Err(format!("{} members", ms.len())),
            Err(e) => Err(format!("{e:#}")),
        },
    )
    .unwrap();
}

/// `pcs node unstandby node`, then waits for a healthy cluster of voters.
pub fn unstandby(c: &FieldCluster, node: &str, peer: &str) {
    c.node_sh_ok(node, &format!("pcs node unstandby {node}"))
        .unwrap();
    c.wait_cluster_healthy(Duration::from_secs(180)).unwrap();
    wait_all_voters(c, peer, Duration::from_secs(180)).unwrap();
}

/// docs/operations.md's upgrade, node-a then node-b, to the installed
/// package rebuilt with `+upgrade1` appended to its version.
pub fn upgrade(c: &FieldCluster) {
    ready(c);
    let old = installed_version(c, "node-a");
    let work = tempfile::tempdir().unwrap();
    let new = newer_package(&c.deb, work.path());
    let w = writer(c, "/field-upgrade").unwrap();
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(30))
        .unwrap();
    w.wait_ack_after(Some("node-a"), t, Duration::from_secs(30))
        .unwrap();
    let fences_before = c.crm_mon("node-a").unwrap().fence_history.len();
    let start = Instant::now();
    let mut steps = Vec::new();

    for (node, peer) in [("node-a", "node-b"), ("node-b", "node-a")] {
        let t = Instant::now();
        c.copy_in(node, &new, "/root/etcd-warden_NEW_amd64.deb")
            .unwrap();
        // On the peer: one voter, itself, running.
        standby(c, node, peer);
        let status = c
            .node_sh(peer, "etcd-warden status")
            .and_then(|o| o.ok_with(warden_harness::process::STATUS_ANSWERED))
            .unwrap()
            .stdout;
        eprintln!("etcd-warden status on {peer} while {node} is in standby:\n{status}");
        // As the docs say; every dependency is installed already, so apt
        // downloads nothing.
        c.node_sh_ok(
            node,
            "cd /root && DEBIAN_FRONTEND=noninteractive apt-get install -y ./etcd-warden_NEW_amd64.deb </dev/null",
        )
        .unwrap();
        assert_ne!(
            installed_version(c, node),
            old,
            "{node} still has the old package"
        );
        c.node_sh_ok(node, "systemctl restart etcd-warden").unwrap();
        c.wait_unit_active(node, "etcd-warden.service", Duration::from_secs(60))
            .unwrap();
        unstandby(c, node, peer);
        steps.push((node, t.elapsed()));
        eprintln!(
            "{node} upgraded and a voter again after {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }

    // Writes again through both nodes after the upgrade.
    let t = Instant::now();
    w.wait_ack_after(Some("node-a"), t, Duration::from_secs(60))
        .unwrap();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(60))
        .unwrap();
    assert_no_new_fence(c, fences_before, "the upgrade fenced a node");
    assert_no_failed_action(c);

    // The cluster's longest time without an acknowledged write, from either
    // node: quorum held whenever this stays short.
    let gap = longest_write_gap(&w, start);
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_upgrade: {old} -> {}; node-a {:.1} s, node-b {:.1} s (standby -> voter again); \
         longest write gap {:.2} s; {n} acknowledged writes, all present",
        installed_version(c, "node-b"),
        steps[0].1.as_secs_f64(),
        steps[1].1.as_secs_f64(),
        gap.as_secs_f64()
    );
    assert!(
        gap < GAP_BOUND,
        "the cluster took no write for {gap:?} during the upgrade (bound {GAP_BOUND:?})"
    );
}
