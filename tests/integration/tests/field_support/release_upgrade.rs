//! docs/operations.md, "Upgrading Debian 12 to 13 on a live pair", node by
//! node on a Debian 12 pair (etcd 3.4.23, Pacemaker 2.1.5) with a writer on
//! both nodes throughout: `pcs node standby` (a graceful leave: the peer
//! goes on alone with quorum), the release's sources, `apt-get
//! full-upgrade`, a reboot (powered on over IPMI, as the reboot scenario
//! does), `pcs node unstandby` (the node rejoins as a learner and is
//! promoted). Between the two nodes the pair runs mixed: etcd 3.4 and 3.5,
//! Pacemaker 2.1 and 3.0. The pair ends on Debian 13 with two voters,
//! nobody fenced, every acknowledged write present; the longest write gap
//! and each node's time are reported.
//!
//! A field node reaches no mirror: the release's packages come from a
//! local repository (`tests/images/build-upgrade-repo.sh`, what apt itself
//! resolves for this upgrade), bound read-only into every node; the
//! runbook's sources line names a mirror instead.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use warden_harness::field::FieldCluster;
use warden_harness::process;

use super::upgrade::{standby, unstandby};
use super::{
    FieldOptions, assert_no_failed_action, assert_no_new_fence, begin, check_writes, cluster_with,
    longest_write_gap, power_on,
};

/// Where every node sees the local repository.
pub const REPO: &str = "/var/lib/warden-upgrade-repo";

/// `opts` with the Debian 13 upgrade's packages bound at [`REPO`] in
/// every node (the repository built, or found cached, first).
pub fn with_repo(opts: &mut FieldOptions) -> Result<()> {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/build-upgrade-repo.sh");
    let out = std::process::Command::new(&script)
        .args(["bookworm", "trixie"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(out.status.success(), "{} failed", script.display());
    let repo = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    opts.binds_ro.push((repo.into(), REPO.into()));
    Ok(())
}

/// A Debian 12 field cluster whose nodes see the Debian 13 upgrade's
/// packages at [`REPO`].
pub fn cluster() -> Result<(FieldCluster, tempfile::TempDir)> {
    let mut opts = FieldOptions::new("bookworm", std::path::Path::new(""));
    with_repo(&mut opts)?;
    cluster_with(&opts)
}

/// The node's release, etcd's and Pacemaker's versions, in one line.
fn versions(c: &FieldCluster, node: &str) -> Result<String> {
    Ok(c.node_sh_ok(
        node,
        "echo \"Debian $(cat /etc/debian_version), $(etcd --version | head -1), $(pacemakerd --version | head -1)\"",
    )?
    .stdout
    .trim()
    .to_owned())
}

/// The release's sources (the local repository), then `apt-get
/// full-upgrade`, as the runbook's step 2.
fn full_upgrade(c: &FieldCluster, node: &str) -> Result<()> {
    let script = format!(
        "set -e
         rm -f /etc/apt/sources.list.d/*
         echo 'deb [trusted=yes] file:{REPO} ./' > /etc/apt/sources.list
         apt-get -q update
         DEBIAN_FRONTEND=noninteractive apt-get -q -y \
             -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold full-upgrade </dev/null"
    );
    let out = c.node_cmd_stdin(node, &["bash", "-c", &script], "", Duration::from_secs(900))?;
    ensure!(
        out.status.success(),
        "apt-get full-upgrade on {node} failed: {}{}",
        out.stdout
            .lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .join("\n"),
        out.stderr
    );
    Ok(())
}

/// `systemctl reboot` of `node` (in standby: nothing of the cluster runs
/// there), then its power on over IPMI once the shutdown completed, and its
/// boot.
fn reboot(c: &FieldCluster, node: &str) -> Result<()> {
    let _ = c.node_sh(node, "systemctl reboot");
    process::poll(
        &format!("{node}'s shutdown to complete"),
        Duration::from_secs(300),
        Duration::from_millis(500),
        || match c.launcher(node) {
            None => Ok(()),
            Some(_) => Err("still running".to_owned()),
        },
    )
    .map_err(anyhow::Error::msg)?;
    power_on(c, node)?;
    c.wait_booted(node, Duration::from_secs(300))?;
    Ok(())
}

/// The runbook, node-b then node-a.
pub fn release_upgrade(c: &FieldCluster) {
    let (w, fences_before) = begin(c, "/field-release-upgrade");
    let start = Instant::now();
    let mut steps = Vec::new();
    for (node, peer) in [("node-b", "node-a"), ("node-a", "node-b")] {
        let before = versions(c, node).unwrap();
        let t = Instant::now();
        standby(c, node, peer);
        full_upgrade(c, node).unwrap();
        let upgraded = t.elapsed();
        reboot(c, node).unwrap();
        unstandby(c, node, peer);
        let after = versions(c, node).unwrap();
        eprintln!(
            "field_release_upgrade: {node}: {before} -> {after}; standby -> upgraded {:.1} s -> voter again {:.1} s; peer {}",
            upgraded.as_secs_f64(),
            t.elapsed().as_secs_f64(),
            versions(c, peer).unwrap()
        );
        assert!(
            after.starts_with("Debian 13"),
            "{node} is not on Debian 13: {after}"
        );
        steps.push(t.elapsed());
        let t = Instant::now();
        for n in [node, peer] {
            w.wait_ack_after(Some(n), t, Duration::from_secs(60))
                .unwrap();
        }
    }
    assert_no_new_fence(c, fences_before, "the release upgrade fenced a node");
    assert_no_failed_action(c);
    let gap = longest_write_gap(&w, start);
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_release_upgrade: Debian 12 -> 13, node-b {:.1} s, node-a {:.1} s, whole {:.1} s; longest write gap {:.2} s; {n} acknowledged writes, all present; no fence",
        steps[0].as_secs_f64(),
        steps[1].as_secs_f64(),
        start.elapsed().as_secs_f64(),
        gap.as_secs_f64()
    );
}
