//! Acceptance tests of the harness's etcd clusters on real etcd.

#![allow(clippy::unwrap_used)] // tests may unwrap, helpers included

use std::path::Path;
use std::time::{Duration, Instant};

use warden_harness::EtcdCluster;
use warden_harness::etcd::EtcdOptions;
use warden_harness::process::alive;

const T: Duration = Duration::from_secs(30);

#[test]
fn single_member_write_read_kill_restart_and_cleanup() {
    let t = Instant::now();
    let etcd = EtcdCluster::start(1).unwrap();
    eprintln!("single etcd healthy after {:?}", t.elapsed());
    assert!(etcd.is_healthy(0));
    assert!(etcd.client_url(0).starts_with("http://127.0.0.1:"));

    etcd.put("/warden/k", "v1").unwrap();
    assert_eq!(etcd.get("/warden/k").unwrap().as_deref(), Some("v1"));
    assert_eq!(etcd.get("/warden/missing").unwrap(), None);

    // kill by PID is observed: the process is gone and /health stops answering
    let pid = etcd.pid(0).unwrap();
    assert!(alive(pid));
    etcd.kill(0).unwrap();
    assert!(!alive(pid));
    assert_eq!(etcd.pid(0), None);
    assert!(!etcd.is_healthy(0));
    assert!(etcd.kill(0).is_err(), "killing a dead member must say so");

    // restart on the same data dir keeps the data
    let pid2 = etcd.restart(0).unwrap();
    assert_ne!(pid, pid2);
    etcd.wait_healthy(T).unwrap();
    assert_eq!(etcd.get("/warden/k").unwrap().as_deref(), Some("v1"));

    let dir = etcd.dir().to_path_buf();
    assert!(dir.join("m0.etcd").is_dir());
    drop(etcd);
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert!(!alive(pid2), "etcd PID {pid2} survived drop");
}

#[test]
fn three_members_replicate_survive_a_dead_member_and_clean_up() {
    let t = Instant::now();
    let etcd = EtcdCluster::start(3).unwrap();
    eprintln!("3-member etcd healthy after {:?}", t.elapsed());
    assert_eq!(etcd.len(), 3);
    let eps = etcd.endpoints();
    assert_eq!(eps.len(), 3);
    let mut sorted = eps.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 3, "distinct client URLs: {eps:?}");

    // member list through etcdctl shows all three
    let list = etcd
        .etcdctl(&["member", "list"])
        .unwrap()
        .ok()
        .unwrap()
        .stdout;
    for i in 0..3 {
        assert!(list.contains(&etcd.peer_url(i)), "{list}");
    }

    // a write is readable from a single other member's endpoint
    etcd.put("/warden/three", "x").unwrap();
    let out = std::process::Command::new(warden_harness::etcd::etcdctl_bin())
        .env_remove("ETCDCTL_ENDPOINTS")
        .args([
            "--endpoints",
            &etcd.client_url(2),
            "get",
            "--print-value-only",
            "/warden/three",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "x");

    // SIGSTOP: the member stops answering but the cluster keeps working
    etcd.pause(1).unwrap();
    assert!(!etcd.is_healthy(1));
    etcd.put("/warden/paused", "y").unwrap();
    etcd.resume(1).unwrap();
    etcd.wait_members_healthy(&[1], T).unwrap();

    // one member killed: observed dead, the other two stay healthy and writable
    let pids: Vec<i32> = (0..3).map(|i| etcd.pid(i).unwrap()).collect();
    etcd.kill(2).unwrap();
    assert!(!alive(pids[2]));
    etcd.wait_members_healthy(&[0, 1], T).unwrap();
    etcd.put("/warden/two-left", "z").unwrap();
    etcd.restart(2).unwrap();
    etcd.wait_healthy(T).unwrap();

    let dir = etcd.dir().to_path_buf();
    let now: Vec<i32> = (0..3).map(|i| etcd.pid(i).unwrap()).collect();
    drop(etcd);
    assert!(!Path::new(&dir).exists(), "{} left behind", dir.display());
    for p in now {
        assert!(!alive(p), "etcd PID {p} survived drop");
    }
}

#[test]
fn a_missing_etcd_binary_is_a_clear_error() {
    let bad = "/nonexistent/etcd-for-test";
    let mut opts = EtcdOptions::new(1);
    opts.etcd_bin = bad.into();
    let msg = format!("{:#}", EtcdCluster::start_with(opts).unwrap_err());
    assert!(msg.contains(bad), "{msg}");
}
