//! `recover force-new-cluster` on a learner's data, on a real etcd 3.4
//! (`etcdctl`) and 3.5 (`etcdutl`): etcd itself cannot force a learner's
//! data into a cluster (`--force-new-cluster` ends in its "removed all
//! voters" panic, checked here first), so the command archives the
//! learner's member directory and restores its backend as a new one-member
//! cluster. Every key the learner had is read back, the member is a voter,
//! and the revision has moved past what the lost voter could have handed
//! out, with the older revisions compacted.

#![allow(clippy::unwrap_used)]

mod common;
mod tls_support;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::*;
use tls_support::{etcd35, etcdctl, etcdctl_ok, text};
use warden_api::{Action, Outcome};

const KEYS: usize = 40;

/// A plain etcd child, ended by its PID when dropped (SIGKILL, also on
/// panic).
struct Etcd {
    child: Child,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Ends `e` with SIGTERM (etcd commits its backend as it stops) and waits.
fn stop_gracefully(mut e: Etcd) {
    kill(e.child.id(), 15);
    let status = wait_for("etcd ends after SIGTERM", READY_LIMIT, || {
        e.child.try_wait().unwrap()
    });
    assert!(status.code().is_some() || status.signal().is_some());
}

/// Starts etcd `name` on `data` with these (client, peer) ports: a new
/// one-member cluster, or with `join` (an `--initial-cluster`) a member
/// joining an existing one.
fn etcd(bin: &Path, name: &str, data: &Path, ports: (u16, u16), join: Option<&str>) -> Etcd {
    let (client, peer) = ports;
    let mut cmd = Command::new(bin);
    cmd.arg("--name")
        .arg(name)
        .arg("--data-dir")
        .arg(data)
        .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
        .arg(format!(
            "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
        ))
        .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
        .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(data.with_extension("log")).unwrap());
    match join {
        Some(cluster) => cmd
            .arg(format!("--initial-cluster={cluster}"))
            .arg("--initial-cluster-state=existing"),
        None => cmd.arg(format!("--initial-cluster={name}=http://127.0.0.1:{peer}")),
    };
    Etcd {
        child: cmd.spawn().unwrap(),
    }
}

/// `endpoint status` of one endpoint, as JSON.
fn status(tool: &Path, client: u16) -> Option<serde_json::Value> {
    let out = etcdctl(tool, client, &["endpoint", "status", "-w", "json"]);
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(v[0]["Status"].clone())
}

/// Learner data of member `b` in `data`, caught up with a one-member
/// cluster `a` that got KEYS keys; both processes are ended (SIGKILL, as a
/// power loss) before this returns. Returns the state file a daemon writes
/// for such data (cluster id, member id, the voters without `b`).
fn learner_data(bin: &Path, tool: &Path, work: &Path, data: &Path, b: (u16, u16)) -> String {
    let a = (free_port(), free_port());
    let voter = etcd(bin, "a", &work.join("a"), a, None);
    wait_for("etcd a answers", READY_LIMIT, || {
        etcdctl(tool, a.0, &["put", "/learner/k000", "value 0"])
            .status
            .success()
            .then_some(())
    });
    for i in 1..KEYS {
        etcdctl_ok(
            tool,
            a.0,
            &["put", &format!("/learner/k{i:03}"), &format!("value {i}")],
        );
    }
    let add = etcdctl_ok(
        tool,
        a.0,
        &[
            "member",
            "add",
            "b",
            "--learner",
            &format!("--peer-urls=http://127.0.0.1:{}", b.1),
        ],
    );
    let cluster = format!("a=http://127.0.0.1:{},b=http://127.0.0.1:{}", a.1, b.1);
    let learner = etcd(bin, "b", data, b, Some(&cluster));
    let voter_status = status(tool, a.0).unwrap();
    let target = voter_status["raftIndex"].as_u64().unwrap();
    let learner_status = wait_for("the learner catches up", READY_LIMIT, || {
        status(tool, b.0).filter(|s| s["raftAppliedIndex"].as_u64() >= Some(target))
    });
    assert_eq!(learner_status["isLearner"], true, "{add}\n{learner_status}");
    drop(learner);
    drop(voter);
    serde_json::json!({
        "epoch": 3,
        "formed": false,
        "cluster_id": voter_status["header"]["cluster_id"],
        "member_id": learner_status["header"]["member_id"],
        "voters": ["a"],
    })
    .to_string()
}

/// b's configuration: with `a` (its lost voter's ports), the two-node
/// pair the command acts in (the daemon's failover then finds no
/// Pacemaker, and acts on nothing); without, b alone, whose start needs no
/// Pacemaker.
fn dropin(binary: &Path, b: (u16, u16), a: Option<(u16, u16)>) -> String {
    let mut conf = format!(
        r#"node_name = "b"
{}[etcd]
user = "root"
binary = "{}"
[[nodes]]
name = "b"
peer_urls = ["http://127.0.0.1:{}"]
client_urls = ["http://127.0.0.1:{}"]
"#,
        if a.is_some() {
            "topology = \"two-node\"\n"
        } else {
            ""
        },
        binary.display(),
        b.1,
        b.0
    );
    if let Some(a) = a {
        conf.push_str(&format!(
            "[[nodes]]\nname = \"a\"\npeer_urls = [\"http://127.0.0.1:{}\"]\nclient_urls = [\"http://127.0.0.1:{}\"]\n",
            a.1, a.0
        ));
    }
    conf
}

/// The whole case with the binaries of one etcd release; returns what the
/// command printed.
fn learner_becomes_a_cluster(bin: &Path, tool: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let b = (free_port(), free_port());
    let data = dir.path().join("etcd");
    let state = learner_data(bin, tool, &work, &data, b);

    // etcd's own force on a copy of the learner's data: it panics.
    let copy = work.join("forced");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(&data)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    let mut force = Command::new(bin);
    force
        .arg("--name=b")
        .arg("--data-dir")
        .arg(&copy)
        .arg("--force-new-cluster")
        .arg(format!(
            "--listen-peer-urls=http://127.0.0.1:{}",
            free_port()
        ))
        .arg(format!(
            "--listen-client-urls=http://127.0.0.1:{}",
            free_port()
        ))
        .arg("--advertise-client-urls=http://127.0.0.1:2379");
    let out = run_with_deadline(&mut force, Duration::from_secs(60));
    assert!(
        text(&out).contains("removed all voters"),
        "etcd's own force of a learner's data: {}",
        text(&out)
    );

    // The daemon for b, with the learner's data and its state file.
    std::fs::create_dir_all(dir.path().join("config.d")).unwrap();
    let conf = dir.path().join("config.d/50-test.toml");
    std::fs::write(&conf, dropin(bin, b, Some((free_port(), free_port())))).unwrap();
    std::fs::create_dir_all(dir.path().join("state")).unwrap();
    std::fs::write(dir.path().join("state/failover-state.json"), &state).unwrap();
    let mut old_db = std::fs::read(data.join("member/snap/db")).unwrap();
    let mut d = Daemon::in_dir(dir, &[("CIB_file", "/nonexistent/etcd-warden-cib.xml")]);
    d.spawn(false);
    let warden = |args: &[&str]| {
        Command::new(BIN)
            .args(["recover", "force-new-cluster", "--node", "b"])
            .args(args)
            .arg("--standalone")
            .arg(d.dir.path())
            .output()
            .unwrap()
    };
    let plan = warden(&[]);
    assert_eq!(plan.status.code(), Some(2), "{}", text(&plan));
    assert!(text(&plan).contains("a learner's"), "{}", text(&plan));
    // The learner was killed as by a power loss: its backend may lag its
    // log, and then nothing is done.
    let mut out = warden(&["--confirm"]);
    if !out.status.success() {
        assert!(text(&out).contains("applies its log"), "{}", text(&out));
        assert_eq!(std::fs::read(data.join("member/snap/db")).unwrap(), old_db);
        eprintln!("the backend lagged the log after the kill: {}", text(&out));
        // etcd started on the data alone (no leader) applies its log;
        // a graceful stop commits the backend.
        let alone = etcd(bin, "b", &data, (free_port(), free_port()), None);
        let member = data.join("member");
        let applied = wait_for("the learner alone applies its log", READY_LIMIT, || {
            etcd_warden::reconcile::backend_index::applied_and_lacking(&member)
                .ok()
                .filter(|(_, lacking)| *lacking == 0)
        });
        eprintln!("etcd alone on the learner's data: applied, requests lacking {applied:?}");
        stop_gracefully(alone);
        old_db = std::fs::read(data.join("member/snap/db")).unwrap();
        out = warden(&["--confirm"]);
    }
    let said = text(&out);
    assert!(out.status.success(), "{said}\n{}", d.log());
    let st: serde_json::Value = serde_json::from_slice(
        &std::fs::read(d.dir.path().join("state/failover-state.json")).unwrap(),
    )
    .unwrap();
    assert!(st["epoch"].as_u64().unwrap() > 3, "{st}");
    assert_eq!(st["voters"], serde_json::json!(["b"]), "{st}");
    // The learner's data is archived whole.
    let archived = std::fs::read_dir(d.dir.path().join("etcd.archive"))
        .unwrap()
        .map(|e| e.unwrap().path().join("member/snap/db"))
        .filter(|db| std::fs::read(db).is_ok_and(|b| b == old_db))
        .count();
    assert_eq!(archived, 1, "{said}");

    // b alone now: the daemon, restarted with b's own configuration,
    // starts the restored data: every key, one voter, and the
    // revision moved on past the old ones, which read as compacted.
    d.kill_daemon();
    std::fs::write(&conf, dropin(bin, b, None)).unwrap();
    d.spawn(false);
    let r = d.action(Action::Start, 0, 60_000);
    assert_eq!(r.outcome, Outcome::Success, "{r:?}\n{}", d.log());
    d.wait_ready();
    for i in 0..KEYS {
        let got = etcdctl_ok(
            tool,
            b.0,
            &["get", &format!("/learner/k{i:03}"), "--print-value-only"],
        );
        assert_eq!(got.trim(), format!("value {i}"), "key {i}");
    }
    let members = etcdctl_ok(tool, b.0, &["member", "list", "-w", "json"]);
    let members: serde_json::Value = serde_json::from_str(&members).unwrap();
    let list = members["members"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{members}");
    assert!(list[0]["isLearner"].as_bool() != Some(true), "{members}");
    let put = etcdctl_ok(tool, b.0, &["put", "/learner/after", "x", "-w", "json"]);
    let revision = serde_json::from_str::<serde_json::Value>(&put).unwrap()["header"]["revision"]
        .as_u64()
        .unwrap();
    assert!(revision > 1000 + KEYS as u64, "revision {revision}\n{said}");
    let old = etcdctl(tool, b.0, &["get", "/learner/k001", "--rev", "5"]);
    assert!(
        text(&old).contains("compacted"),
        "revision 5 after the restore: {}",
        text(&old)
    );
    said
}

/// Runs `cmd` to its end, killing it (by PID) past `limit`.
fn run_with_deadline(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            kill(pid, 9);
            panic!("{cmd:?} did not end within {limit:?}");
        }
    }
}

#[test]
fn a_learners_data_becomes_a_cluster_on_etcd34() {
    let bin = PathBuf::from("/usr/bin/etcd");
    let said = learner_becomes_a_cluster(&bin, Path::new("/usr/bin/etcdctl"));
    assert!(said.contains("the daemon moves it on by 1000"), "{said}");
}

#[test]
fn a_learners_data_becomes_a_cluster_on_etcd35() {
    let said = learner_becomes_a_cluster(&etcd35("etcd"), &etcd35("etcdctl"));
    assert!(said.contains("--bump-revision"), "{said}");
}
