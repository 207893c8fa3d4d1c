//! The daemon's key behaviours on etcd 3.5 (Debian sid's, 3.5.30 or a later
//! 3.5; production runs 3.5/3.6, CI's Debian etcd is 3.4.23): start and
//! readiness, monitor depths, a SIGKILLed etcd, u64 member IDs in the CLI, a
//! verified snapshot cross-checked by `etcdutl`, and the two-member typed
//! operations of `etcd_ops.rs` re-run with the 3.5 binaries. The binaries
//! come from `make etcd35`; without them every test here fails with that
//! hint.

#![allow(clippy::unwrap_used)]
// etcd_ops.rs (included below) declares its own `mod common;`: two copies
// of the test helpers, harmless, and the price of not copying its body.
#![allow(clippy::duplicate_mod)]

mod common;
// The two-member scenario is etcd_ops.rs's own test body, included rather
// than copied; it finds etcd through PATH, so the 3.5 run below re-executes
// this binary with the 3.5 directory first in PATH.
#[allow(dead_code)]
#[path = "etcd_ops.rs"]
mod etcd_ops;
mod tls_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use tls_support::{cli, daemon_with_dropin, etcd35, etcd35_dir, exe_of};
use warden_api::{Action, Outcome};

/// A one-member config on free loopback ports running etcd 3.5.
fn etcd35_dropin(client: u16, peer: u16) -> impl FnOnce(&Path) -> String {
    let bin = etcd35("etcd");
    move |_dir| {
        format!(
            r#"node_name = "m35"
[etcd]
# The daemon's own user: the test's directories are root's.
user = "root"
binary = "{}"
[[nodes]]
name = "m35"
peer_urls = ["http://127.0.0.1:{peer}"]
client_urls = ["http://127.0.0.1:{client}"]
"#,
            bin.display()
        )
    }
}

fn assert_runs_etcd35(d: &mut Daemon) -> u32 {
    let pid = d.status().etcd_pid.unwrap();
    let exe = exe_of(pid);
    assert_eq!(
        exe.canonicalize().unwrap(),
        etcd35("etcd").canonicalize().unwrap(),
        "the daemon did not run the configured etcd 3.5 binary"
    );
    pid
}

#[test]
fn etcd35_is_ready_monitors_and_the_cli_shows_u64_ids_and_a_verified_snapshot() {
    let (client, peer) = (free_port(), free_port());
    let t = Instant::now();
    let mut d = daemon_with_dropin(true, etcd35_dropin(client, peer));
    d.wait_ready();
    eprintln!("etcd 3.5 ready after {:?}", t.elapsed());
    assert_runs_etcd35(&mut d);
    // etcd itself says it is 3.5.
    let (code, version) = http_get(client, "/version").unwrap();
    assert_eq!(code, 200, "{version}");
    assert!(version.contains("\"etcdserver\":\"3.5."), "{version}");

    let s = d.status();
    assert_eq!(s.state, "running", "{s:?}");
    assert!(s.etcd_running && s.quorum && !s.is_learner, "{s:?}");
    for depth in [0, 10] {
        let r = d.action(Action::Monitor, depth, 5000);
        assert_eq!(r.outcome, Outcome::Success, "depth {depth}: {r:?}");
    }

    // Member IDs are u64 (often above i64::MAX): the CLI must agree with
    // etcd's own view, bit for bit.
    let json: serde_json::Value = serde_json::from_str(&cli(&d, &["status", "--json"])).unwrap();
    assert_eq!(json["quorum"], true, "{json}");
    let id: u64 = json["memberId"]
        .as_str()
        .unwrap_or_else(|| panic!("memberId is not a string: {json}"))
        .parse()
        .unwrap();
    let out = Command::new(etcd35("etcdctl"))
        .args(["--endpoints", &format!("http://127.0.0.1:{client}")])
        .args(["member", "list", "-w", "json"])
        .env("ETCDCTL_API", "3")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let etcd_id = list["members"][0]["ID"].as_u64().unwrap();
    assert_eq!(id, etcd_id, "status --json vs etcdctl member list");
    let members = cli(&d, &["members"]);
    assert!(members.contains("voter"), "{members}");
    assert!(members.contains(&format!("{id:x}")), "{members}");
    assert!(members.contains("m35"), "{members}");

    // snapshot save verifies; etcd 3.5's etcdutl cross-checks the file.
    let snap = d.dir.path().join("snap.db");
    let out = cli(&d, &["snapshot", "save", snap.to_str().unwrap()]);
    assert!(out.contains("verified"), "{out}");
    let check = Command::new(etcd35("etcdutl"))
        .args(["snapshot", "status", "-w", "json"])
        .arg(&snap)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "etcdutl snapshot status: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let st: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert!(st["totalKey"].as_u64().unwrap() > 0, "{st}");
}

#[test]
fn a_sigkilled_etcd35_is_noticed_and_reported() {
    let (client, peer) = (free_port(), free_port());
    let mut d = daemon_with_dropin(false, etcd35_dropin(client, peer));
    let r = d.action(Action::Start, 0, 30_000);
    assert_eq!(r.outcome, Outcome::Success, "{r:?}\n{}", d.log());
    d.wait_ready();
    let pid = assert_runs_etcd35(&mut d);
    kill(pid, 9);
    wait_for(
        "the probe to count the death",
        Duration::from_secs(5),
        || {
            let (_, m) = d.http_get("/metrics")?;
            (metric(&m, "etcd_warden_etcd_unexpected_exits_total") == Some(1.0)).then_some(())
        },
    );
    let s = d.status();
    assert_eq!(s.state, "failed", "{s:?}");
    assert!(!s.etcd_running, "{s:?}");
    assert!(
        s.reason.as_deref().unwrap_or("").contains("signal 9"),
        "{s:?}"
    );
    let r = d.action(Action::Monitor, 0, 2000);
    assert_eq!(r.outcome, Outcome::Failed, "{r:?}");
    assert_eq!(d.action(Action::Stop, 0, 5000).outcome, Outcome::Success);
    assert_eq!(
        d.action(Action::Monitor, 0, 2000).outcome,
        Outcome::NotRunning
    );
}

#[test]
fn two_member_etcd35_quorum_loss_force_new_cluster_and_learner_rejoin() {
    etcd35("etcd");
    let test = "etcd_ops::quorum_loss_is_seen_by_the_linearizable_read_not_by_member_list_and_force_new_cluster_recovers";
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![etcd35_dir()];
    dirs.extend(std::env::split_paths(&path));
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // Exactly that test ran, and on etcd 3.5 (the body prints the version).
    assert!(stdout.contains("1 passed"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("etcd 3.5.") || stdout.contains("etcd 3.5."),
        "the scenario did not run on etcd 3.5:\n{stdout}\n{stderr}"
    );
}
