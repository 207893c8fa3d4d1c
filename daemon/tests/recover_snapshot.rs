//! The snapshot runbook on a real etcd, 3.4 (Debian's, restored with
//! `etcdctl`) and 3.5 (`make etcd35`, restored with `etcdutl`): a one-member
//! etcd under a standalone daemon gets keys, `etcd-warden snapshot save
//! --dir --keep` saves a 0600 snapshot, etcd is stopped and its data moved
//! aside, `etcd-warden recover restore-snapshot` restores it as a new
//! one-member cluster with a raised epoch, the daemon starts etcd on the
//! restored data with its generated configuration, and every key saved is
//! read back, under a new cluster id.

#![allow(clippy::unwrap_used)]

mod common;
mod tls_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use tls_support::{daemon_with_dropin, etcd35, etcdctl, etcdctl_ok, text};
use warden_api::{Action, Outcome};

const KEYS: usize = 40;

fn dropin(name: &str, binary: &Path, client: u16, peer: u16) -> impl FnOnce(&Path) -> String {
    let (name, binary) = (name.to_owned(), binary.to_owned());
    move |_dir| {
        format!(
            r#"node_name = "{name}"
[etcd]
# The daemon's own user: the test's directories are root's.
user = "root"
binary = "{}"
[[nodes]]
name = "{name}"
peer_urls = ["http://127.0.0.1:{peer}"]
client_urls = ["http://127.0.0.1:{client}"]
"#,
            binary.display()
        )
    }
}

/// The cluster id etcd reports (`endpoint status`).
fn cluster_id(tool: &Path, client: u16) -> u64 {
    let v: serde_json::Value = serde_json::from_str(&etcdctl_ok(
        tool,
        client,
        &["endpoint", "status", "-w", "json"],
    ))
    .unwrap();
    v[0]["Status"]["header"]["cluster_id"].as_u64().unwrap()
}

/// `etcd-warden ARGS --standalone DIR`.
fn warden(d: &Daemon, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--standalone")
        .arg(d.dir.path())
        .output()
        .unwrap()
}

fn state(d: &Daemon) -> serde_json::Value {
    let p = d.dir.path().join("state/failover-state.json");
    std::fs::read(&p)
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_else(|_| serde_json::json!({}))
}

/// The whole runbook with the etcd binaries in `bin_dir`; returns the tool
/// the restore said it used.
fn save_stop_restore_start(name: &str, etcd: &Path, etcdctl_tool: &Path) -> String {
    let (client, peer) = (free_port(), free_port());
    let mut d = daemon_with_dropin(true, dropin(name, etcd, client, peer));
    d.wait_ready();
    for i in 0..KEYS {
        etcdctl_ok(
            etcdctl_tool,
            client,
            &["put", &format!("/restore/k{i:03}"), &format!("value {i}")],
        );
    }
    let original = cluster_id(etcdctl_tool, client);

    // A snapshot into a directory, named by node and time, 0600, no leftovers.
    let snaps = d.dir.path().join("snapshots");
    let out = warden(
        &d,
        &[
            "snapshot",
            "save",
            "--dir",
            snaps.to_str().unwrap(),
            "--keep",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let files: Vec<PathBuf> = std::fs::read_dir(&snaps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let snap = files[0].clone();
    let fname = snap.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(
        fname.starts_with(&format!("etcd-warden-snapshot-{name}-")) && fname.ends_with("Z.db"),
        "{fname}"
    );
    let mode = std::fs::metadata(&snap).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{fname}");
    assert_eq!(
        std::fs::metadata(&snaps).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // A write after the snapshot: the restore loses it, as the docs say.
    etcdctl_ok(
        etcdctl_tool,
        client,
        &["put", "/restore/after-snapshot", "lost"],
    );

    // While etcd runs the restore refuses and touches nothing.
    let epoch_before = state(&d)["epoch"].as_u64().unwrap_or(0);
    let snap_s = snap.to_str().unwrap();
    let restore = [
        "recover",
        "restore-snapshot",
        "--node",
        name,
        "--snapshot",
        snap_s,
    ];
    let out = warden(&d, &[&restore[..], &["--confirm"]].concat());
    assert!(!out.status.success());
    assert!(text(&out).contains("stop it first"), "{}", text(&out));
    let member = d.dir.path().join("etcd/member");
    assert!(member.join("snap/db").is_file());

    // Stop etcd; its data stays where it is.
    let r = d.action(Action::Stop, 0, 30_000);
    assert_eq!(r.outcome, Outcome::Success, "{r:?}");
    let old_db = std::fs::read(member.join("snap/db")).unwrap();

    // Without --confirm: the plan (the data archived first, then the
    // restore), exit 2, nothing done.
    let out = warden(&d, &restore);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("nothing deleted"), "{}", text(&out));
    assert!(text(&out).contains("will: restore"), "{}", text(&out));
    assert_eq!(std::fs::read(member.join("snap/db")).unwrap(), old_db);

    // With --confirm: restored, epoch raised, formed, voters [name].
    let out = warden(&d, &[&restore[..], &["--confirm"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    eprintln!("{said}");
    assert!(member.join("snap/db").is_file(), "{said}");
    assert!(
        std::fs::read_dir(d.dir.path().join("etcd"))
            .unwrap()
            .all(|e| e.unwrap().file_name() == "member"),
        "nothing but member/ left in the data directory"
    );
    let st = state(&d);
    assert!(st["epoch"].as_u64().unwrap() > epoch_before, "{st}");
    assert_eq!(st["formed"], true, "{st}");
    assert_eq!(st["voters"], serde_json::json!([name]), "{st}");

    // The daemon starts etcd on the restored data with its generated
    // configuration; every key saved is back, the later write is not.
    let r = d.action(Action::Start, 0, 60_000);
    assert_eq!(r.outcome, Outcome::Success, "{r:?}\n{}", d.log());
    d.wait_ready();
    for i in 0..KEYS {
        let got = etcdctl_ok(
            etcdctl_tool,
            client,
            &["get", &format!("/restore/k{i:03}"), "--print-value-only"],
        );
        assert_eq!(got.trim(), format!("value {i}"), "key {i}");
    }
    let later = etcdctl_ok(etcdctl_tool, client, &["get", "/restore/after-snapshot"]);
    assert!(later.trim().is_empty(), "{later}");
    // The revision moved past what the lost write had (and any other made
    // after the snapshot), and the older revisions read as compacted.
    let put = etcdctl_ok(
        etcdctl_tool,
        client,
        &["put", "/restore/next", "x", "-w", "json"],
    );
    let put: serde_json::Value = serde_json::from_str(&put).unwrap();
    let revision = put["header"]["revision"].as_u64().unwrap();
    assert!(revision > 1000 + KEYS as u64, "revision {revision}\n{said}");
    let old = etcdctl(
        etcdctl_tool,
        client,
        &["get", "/restore/k001", "--rev", "3"],
    );
    assert!(text(&old).contains("compacted"), "{}", text(&old));
    let restored = cluster_id(etcdctl_tool, client);
    assert_ne!(
        restored, original,
        "the restored cluster has a new cluster id"
    );
    // Both tools log the new ids (etcdctl 3.4 as JSON, etcdutl 3.5 in
    // the console format): the state file has them at once.
    let recorded = st["cluster_id"].as_u64();
    assert_eq!(
        recorded,
        Some(restored),
        "state file vs live cluster id: {st}"
    );
    // One member, this node, a voter.
    let members = etcdctl_ok(etcdctl_tool, client, &["member", "list"]);
    assert_eq!(members.trim().lines().count(), 1, "{members}");
    assert!(
        members.contains(name) && !members.contains("true"),
        "{members}"
    );
    // The data that was in place is in the archive directory, whole.
    let archived: Vec<_> = std::fs::read_dir(d.dir.path().join("etcd.archive"))
        .unwrap()
        .map(|e| e.unwrap().path().join("member/snap/db"))
        .filter(|db| std::fs::read(db).is_ok_and(|b| b == old_db))
        .collect();
    assert_eq!(
        archived.len(),
        1,
        "the old data archived once: {archived:?}"
    );
    said
}

#[test]
fn snapshot_restore_runbook_on_etcd34_with_etcdctl() {
    let etcd = PathBuf::from("/usr/bin/etcd");
    let said = save_stop_restore_start("r34", &etcd, Path::new("/usr/bin/etcdctl"));
    assert!(said.contains("/usr/bin/etcdctl"), "{said}");
}

#[test]
fn snapshot_restore_runbook_on_etcd35_with_etcdutl() {
    let etcd = etcd35("etcd");
    let said = save_stop_restore_start("r35", &etcd, &etcd35("etcdctl"));
    assert!(said.contains("etcd-3.5/etcdutl"), "{said}");
}
