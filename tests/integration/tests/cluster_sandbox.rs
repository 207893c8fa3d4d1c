//! The shipped unit on a Debian host's layout: node2's daemon runs in the
//! sandbox of `systemd/etcd-warden.service` (read-only `/`, the unit's
//! `ReadWritePaths=` and managed directories as writable mounts of their
//! own, its capability bounding set, no new privileges; see
//! `warden_integration::sandbox`), with the default configuration paths on
//! a disk prepared as Debian's etcd-server package leaves it
//! (`/var/lib/etcd` owned by `etcd:etcd`, mode 0700).
//!
//! Checked: etcd runs as the `etcd` user in its own 0700 data directory and
//! answers; after node2 is fenced and the survivor forced a new cluster,
//! node2's daemon archives its stale data (moved with its SHA-256, nothing
//! deleted) and rejoins, etcd again as `etcd`; no acknowledged write is
//! lost.
//!
//! `WARDEN_UNIT=<file>` runs the same test against another unit file (an
//! older one fails it).

mod failover_support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use failover_support::{FAILOVER, OrFail, SETTLE, wait_acks_everywhere};
use warden_harness::crm;
use warden_integration::sandbox::{self, Unit};
use warden_integration::twonode::{Topology, WardenCluster, poll};

fn io<T>(r: std::io::Result<T>) -> anyhow::Result<T> {
    Ok(r?)
}

fn etcd_uid() -> u32 {
    nix::unistd::User::from_name("etcd")
        .expect("cannot read the user database")
        .expect("no user etcd (Debian's etcd-server package creates it)")
        .uid
        .as_raw()
}

fn sha256(p: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(p)
        .output()
        .expect("sha256sum runs");
    assert!(out.status.success(), "sha256sum {}", p.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// etcd on `node` runs as the `etcd` user, in a 0700 data directory of its
/// own, and answers a write.
fn etcd_is_etcds(w: &WardenCluster, node: &str, data: &Path, key: &str) {
    let pid = poll("etcd's PID", SETTLE, || w.etcd_pid(node)).or_fail(w);
    // The PID is the node's (its own PID namespace): read /proc there.
    let status =
        w.c.exec_ok(node, &["cat", &format!("/proc/{pid}/status")])
            .or_fail(w)
            .stdout;
    let uid: u32 = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
        .expect("a Uid line");
    assert_eq!(uid, etcd_uid(), "etcd {pid} on {node} does not run as etcd");
    let m = io(std::fs::metadata(data)).or_fail(w);
    assert_eq!(
        (m.uid(), m.mode() & 0o777),
        (etcd_uid(), 0o700),
        "{} is not etcd's 0700 directory",
        data.display()
    );
    let member = io(std::fs::metadata(data.join("member"))).or_fail(w);
    assert_eq!(member.uid(), etcd_uid(), "member/ is not etcd's");
    w.put(node, key, "x").or_fail(w);
}

#[test]
fn the_units_sandbox_archives_and_runs_etcd_as_etcd() {
    let unit_path = std::env::var_os("WARDEN_UNIT")
        .map(PathBuf::from)
        .unwrap_or_else(sandbox::shipped_unit);
    let unit = Unit::read(&unit_path).unwrap();
    eprintln!("unit {}: {unit:?}", unit_path.display());
    // Mount points this test adds to the machine go again, also on a panic.
    let _made = Made(
        unit.disk_paths()
            .into_iter()
            .filter(|p| !p.exists())
            .collect(),
    );
    let (survivor, victim) = ("node1", "node2");
    let w = WardenCluster::start_sandboxed(2, Topology::TwoNode, victim, unit)
        .expect("the cluster with node2 in the unit's sandbox");
    let all = w.nodes();
    let lib = w.disk(victim).or_fail(&w).join("var/lib/etcd-warden");
    let data = lib.join("data");
    etcd_is_etcds(&w, victim, &data, "/sandbox/first");

    let writer = w.writer("/sbx", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);

    // node2 loses power, is fenced; node1 forces a one-member cluster.
    let t_crash = Instant::now();
    // The sandbox is a mount namespace of its own, which the harness's
    // power loss (every process in the node's mount namespace) does not
    // reach: the daemon and its etcd (its children) lose power here.
    let sandboxed = w.daemon_pid(victim).expect("node2's daemon");
    let mut doomed = children(sandboxed);
    doomed.push(sandboxed);
    w.c.crash(victim).or_fail(&w);
    for pid in doomed {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    w.c.wait_for(survivor, crm::fenced(victim), FAILOVER)
        .or_fail(&w);
    writer
        .wait_ack_after(Some(survivor), t_crash, FAILOVER)
        .or_fail(&w);
    w.wait_voters(survivor, &[survivor.to_string()], FAILOVER)
        .or_fail(&w);
    let db = data.join("member/snap/db");
    let stale_sum = sha256(&db);

    // node2 boots: its daemon (in the sandbox again) archives the stale
    // data, and etcd rejoins as the etcd user.
    w.boot(victim, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    w.wait_voters(survivor, &all, SETTLE).or_fail(&w);
    let archives: Vec<PathBuf> = io(std::fs::read_dir(lib.join("data.archive")))
        .or_fail(&w)
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(archives.len(), 1, "one archive: {archives:?}");
    let a = &archives[0];
    // The checksum is written after the move, while the rejoin goes on.
    let recorded = poll("the archive's db.sha256", SETTLE, || {
        Ok(std::fs::read_to_string(a.join("db.sha256")).ok())
    })
    .or_fail(&w);
    assert!(
        recorded.starts_with(&stale_sum),
        "db.sha256 {recorded:?} is not the stale db's {stale_sum}"
    );
    assert_eq!(
        sha256(&a.join("member/snap/db")),
        stale_sum,
        "the archived db is the stale db, moved intact"
    );
    assert!(
        w.daemon_log(victim)
            .contains("archived the etcd member directory"),
        "{}",
        w.daemon_log_tail(victim)
    );
    etcd_is_etcds(&w, victim, &data, "/sandbox/after");

    wait_acks_everywhere(&writer, &all, writer.acks().len() / 2 + 5);
    let acks = writer.finish();
    w.check_writes(&acks, "/sbx", &all).or_fail(&w);
    eprintln!(
        "sandbox: {} acknowledged writes checked; archive {}",
        acks.len(),
        a.display()
    );
    w.c.stop();
}

/// Host PIDs whose parent is `pid`.
fn children(pid: i32) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|t| {
                    let rest = &t[t.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// Empty directories to remove on drop.
struct Made(Vec<PathBuf>);

impl Drop for Made {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_dir(p);
        }
    }
}
