//! Shared by the field tests: the package under test, the cluster, the
//! writers in the nodes' network namespaces and the final checks, and the
//! power-cut scenario the Debian 13 and Debian 12 tests share.

// Each test binary uses a part of this module.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use warden_harness::process;

use anyhow::{Context, Result, ensure};
use warden_harness::field::{FieldCluster, FieldOptions};
use warden_integration::bins;
use warden_integration::gateway::{self, NetNs};
use warden_integration::writer::{self, Writer};

/// The node image's suite: `WARDEN_FIELD_SUITE`, default Debian 13.
pub fn suite() -> String {
    std::env::var("WARDEN_FIELD_SUITE").unwrap_or_else(|_| "trixie".into())
}

/// The package every node installs: `WARDEN_DEB`, or one built by
/// dist/build-deb.sh (what `make deb` runs) from the binaries the other
/// tests run.
pub fn package(work: &Path) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("WARDEN_DEB") {
        return Ok(PathBuf::from(p));
    }
    let bindir = work.join("bin");
    std::fs::create_dir_all(&bindir)?;
    for (src, name) in [
        (bins::warden()?, "etcd-warden"),
        (bins::agent()?, "etcd-warden-agent"),
    ] {
        std::fs::copy(&src, bindir.join(name))
            .with_context(|| format!("copying {}", src.display()))?;
    }
    let out = Command::new(bins::workspace().join("dist/build-deb.sh"))
        .arg(&bindir)
        .arg(work.join("deb"))
        .output()
        .context("running dist/build-deb.sh")?;
    ensure!(
        out.status.success(),
        "build-deb.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(PathBuf::from(stdout.lines().last().unwrap_or("").trim()))
}

/// A field cluster on the default suite with a freshly built package; the
/// returned directory holds the package and must outlive the cluster.
pub fn cluster() -> Result<(FieldCluster, tempfile::TempDir)> {
    cluster_on(&suite())
}

/// A field cluster on `suite` with a freshly built package.
pub fn cluster_on(suite: &str) -> Result<(FieldCluster, tempfile::TempDir)> {
    // A test runner's SIGTERM at its deadline ends the process without
    // unwinding: tear the nodes and BMCs down from a signal thread then.
    warden_harness::teardown_on_signals()?;
    let work = tempfile::tempdir()?;
    let deb = package(work.path())?;
    let start = Instant::now();
    let c = FieldCluster::start(&FieldOptions::new(suite, &deb))?;
    eprintln!(
        "field: cluster ready in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok((c, work))
}

/// One writer per node, inside that node's network namespace, writing to
/// that node's etcd.
pub fn writer(c: &FieldCluster, prefix: &str) -> Result<Writer> {
    let mut targets = Vec::new();
    for n in &c.nodes {
        targets.push((
            n.name.clone(),
            NetNs::of_pid(n.netns_holder)?,
            n.client_addr(),
        ));
    }
    Writer::start(prefix, targets)
}

/// Stops the writer and checks every acknowledged write against what
/// `reader`'s etcd holds: present with its value and revision, and no
/// revision acknowledged twice.
pub fn check_writes(c: &FieldCluster, w: Writer, reader: &str) -> Result<usize> {
    let prefix = w.prefix().to_owned();
    let acks = w.finish();
    ensure!(!acks.is_empty(), "the writer got no acknowledgement at all");
    let n = c.node(reader)?;
    let addr = n.client_addr();
    let ns = NetNs::of_pid(n.netns_holder)?;
    let kvs = ns.run(move || gateway::range_prefix(addr, &prefix, Duration::from_secs(10)))?;
    writer::check_unique_revisions(&acks)?;
    writer::check_all_present(&acks, &kvs)?;
    Ok(acks.len())
}

/// The failed actions `node`'s crm_mon lists, one XML line each. A monitor
/// answering "degraded" (OCF 190, e.g. a sole voter waiting for its peer)
/// is listed there too but is a warning, not a failure: left out.
pub fn failed_actions(c: &FieldCluster, node: &str) -> Result<String> {
    Ok(c.node_sh_ok(
        node,
        "crm_mon -1 --output-as=xml | grep '<failure ' | grep -v 'exitcode=\"19[01]\"' || true",
    )?
    .stdout
    .trim()
    .to_owned())
}

/// etcd's member list as `node`'s etcd answers it.
pub fn members(c: &FieldCluster, node: &str) -> Result<Vec<gateway::Member>> {
    let n = c.node(node)?;
    let addr = n.client_addr();
    let ns = NetNs::of_pid(n.netns_holder)?;
    Ok(ns
        .run(move || gateway::member_list(addr, Duration::from_secs(5)))?
        .1)
}

/// Waits until `node`'s etcd lists every node as a voter.
pub fn wait_all_voters(c: &FieldCluster, node: &str, timeout: Duration) -> Result<()> {
    let want: Vec<String> = c.nodes.iter().map(|n| n.name.clone()).collect();
    warden_harness::process::poll(
        "every node an etcd voter",
        timeout,
        Duration::from_millis(300),
        || match members(c, node) {
            Ok(ms) => {
                let ok = want
                    .iter()
                    .all(|w| ms.iter().any(|m| &m.name == w && !m.is_learner));
                if ok && ms.len() == want.len() {
                    Ok(())
                } else {
                    Err(format!(
                        "{:?}",
                        ms.iter()
                            .map(|m| format!(
                                "{}{}",
                                m.name,
                                if m.is_learner { "(learner)" } else { "" }
                            ))
                            .collect::<Vec<_>>()
                    ))
                }
            }
            Err(e) => Err(format!("{e:#}")),
        },
    )
}

/// The scenario on `suite`'s node image (also run on Debian 12 by
/// field_power_bookworm).
pub fn power_cut(suite: &str) {
    let (c, _work) = cluster_on(suite).unwrap();
    wait_all_voters(&c, "node-a", Duration::from_secs(60)).unwrap();
    let w = writer(&c, "/field-power").unwrap();
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(30))
        .unwrap();
    let fences_before = c.crm_mon("node-a").unwrap().fence_successes("node-b").len();

    // Power cut of node-b, through its BMC.
    let launcher = c.launcher("node-b").unwrap();
    let cut = Instant::now();
    let answer = c.ipmi_power("node-b", "off").unwrap();
    eprintln!("ipmitool power off node-b: {answer}");
    assert!(
        process::wait_gone(&[launcher], Duration::from_secs(10)).is_empty(),
        "node-b's launcher survived the BMC's power off"
    );
    let gone = cut.elapsed();

    // Pacemaker on node-a fences node-b with fence_ipmilan.
    let m = c
        .wait_crm("node-a", "node-b fenced", Duration::from_secs(120), |m| {
            m.fence_successes("node-b").len() > fences_before
        })
        .unwrap();
    let fenced = cut.elapsed();
    let ev = m.fence_successes("node-b")[0].clone();
    assert_eq!(ev.delegate, "node-a", "the survivor runs the fence: {ev:?}");

    // The survivor takes writes.
    let ack = w
        .wait_ack_after(Some("node-a"), cut + fenced, Duration::from_secs(120))
        .unwrap();
    let write_after_fence = ack.at.duration_since(cut);
    assert!(
        c.launcher("node-b").is_none(),
        "node-b is powered again already: the survivor's write proves nothing"
    );

    // Power on over IPMI if the fence left it off (stonith-action=off), then
    // node-b boots, rejoins, and becomes a voter again.
    process::poll(
        "node-b powered (the fence's reboot, or ours)",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || {
            if c.launcher("node-b").is_some() {
                return Ok(());
            }
            match c.ipmi_power("node-b", "status") {
                Ok(s) if s.ends_with("off") => c
                    .ipmi_power("node-b", "on")
                    .map(|_| ())
                    .map_err(|e| format!("{e:#}")),
                Ok(s) => Err(s),
                Err(e) => Err(format!("{e:#}")),
            }
        },
    )
    .unwrap();
    let state = c.wait_booted("node-b", Duration::from_secs(180)).unwrap();
    let booted = cut.elapsed();
    eprintln!("node-b booted: {state}");
    c.wait_cluster_healthy(Duration::from_secs(300)).unwrap();
    wait_all_voters(&c, "node-a", Duration::from_secs(300)).unwrap();
    let voter = cut.elapsed();

    // node-b's old member directory was archived, not deleted.
    let archives = c
        .node_sh_ok("node-b", "ls /var/lib/etcd/warden.archive")
        .unwrap()
        .stdout;
    assert!(
        !archives.trim().is_empty(),
        "node-b rejoined without archiving its old member directory"
    );
    eprintln!("node-b archives: {}", archives.trim());

    // Both sides write again, then every ack is checked.
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(60))
        .unwrap();
    let n = check_writes(&c, w, "node-a").unwrap();
    eprintln!(
        "field_power ({suite}): power off -> launcher gone {:.1} s, fenced {:.1} s, survivor write {:.1} s, \
         booted {:.1} s, voter {:.1} s; {n} acknowledged writes, all present",
        gone.as_secs_f64(),
        fenced.as_secs_f64(),
        write_after_fence.as_secs_f64(),
        booted.as_secs_f64(),
        voter.as_secs_f64()
    );
}
