//! The daemon in the shipped unit's sandbox on one machine, without a
//! cluster: the mount layout, capability bounding set and no-new-privileges
//! of `systemd/etcd-warden.service`, read from the file
//! (`warden_integration::sandbox`), with the default paths (etcd's data in
//! `/var/lib/etcd-warden/data`) on a disk laid out as Debian's etcd-server
//! package leaves it (`/var/lib/etcd` owned by `etcd:etcd`, mode 0700).
//!
//! 1. With failover enabled (two nodes, Pacemaker in charge) the daemon
//!    starts: its start-up rename probe from the data directory into the
//!    archive directory passes in this layout.
//! 2. With `autostart` (one node) it starts etcd as the `etcd` user in a
//!    0700 data directory of `etcd`'s, and etcd answers a write.
//! 3. etcd is killed: the daemon starts it again (reopening etcd's log,
//!    etcd's file by then, without CAP_FOWNER) and it answers again; the
//!    daemon's stop then signals etcd without CAP_KILL.
//! 4. `systemd-analyze security` rates the unit at most 2.5.
//!
//! `WARDEN_UNIT=<file>` runs it against another unit file. The archive of a
//! real member directory, after a fence, runs in `cluster_sandbox`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use warden_integration::{bins, sandbox};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The daemon in the sandbox; SIGTERM and a wait on drop.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(unit: &sandbox::Unit, disk: &Path, config: &Path, log: PathBuf) -> Daemon {
        let warden = bins::warden().expect("the etcd-warden binary");
        let argv = unit.wrap(
            disk,
            &[
                warden.to_str().expect("utf-8 path"),
                "daemon",
                "--config",
                config.to_str().expect("utf-8 path"),
            ],
        );
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("unshare runs");
        Daemon { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `f` every 100 ms until `Some`, failing with the log.
    fn wait<T>(&mut self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(v) = f() {
                return v;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("the daemon exited ({st}) before {what}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &Path, nodes: &[(&str, u16, u16)], autostart: bool, socket: &str) -> PathBuf {
    let mut t = format!(
        "node_name = \"a\"\ntopology = \"{}\"\nautostart = {autostart}\n[api]\nsocket = \"{socket}\"\n",
        if nodes.len() == 2 { "two-node" } else { "ha" }
    );
    for (name, peer, client) in nodes {
        t.push_str(&format!(
            "[[nodes]]\nname = \"{name}\"\npeer_urls = [\"http://127.0.0.1:{peer}\"]\nclient_urls = [\"http://127.0.0.1:{client}\"]\n"
        ));
    }
    let p = dir.join(format!("config-{}.toml", nodes.len()));
    std::fs::write(&p, t).expect("config written");
    p
}

#[test]
fn the_units_sandbox_passes_the_archive_probe_and_runs_etcd_as_etcd() {
    let unit_path = std::env::var_os("WARDEN_UNIT")
        .map(PathBuf::from)
        .unwrap_or_else(sandbox::shipped_unit);
    let unit = sandbox::Unit::read(&unit_path).expect("the unit reads");
    // Mount points this test adds to the machine go again, also on a panic.
    let _made = Made(
        unit.disk_paths()
            .into_iter()
            .chain(unit.runtime.iter().map(|(p, _)| p.clone()))
            .filter(|p| !p.exists())
            .collect(),
    );
    // Not under /tmp: the sandbox has a /tmp of its own.
    let t = tempfile::Builder::new()
        .prefix("warden-sandbox-")
        .tempdir_in("/var/tmp")
        .expect("a work dir");
    let disk = t.path().join("disk");
    sandbox::prepare_disk(&unit, &disk).expect("the disk");
    let runtime = unit
        .runtime
        .first()
        .map(|(p, _)| p.clone())
        .expect("a RuntimeDirectory=");
    let socket = runtime.join(format!("sandbox-test-{}.sock", std::process::id()));
    let socket = socket.to_str().expect("utf-8 path");

    // 1. Failover enabled: the start-up archive probe passes.
    let cfg = config(
        t.path(),
        &[
            ("a", free_port(), free_port()),
            ("b", free_port(), free_port()),
        ],
        false,
        socket,
    );
    let mut d = Daemon::start(&unit, &disk, &cfg, t.path().join("failover.log"));
    let log = d.log.clone();
    d.wait("failover enabled (after the archive probe)", || {
        std::fs::read_to_string(&log)
            .ok()?
            .contains("failover enabled")
            .then_some(())
    });
    let lib = disk.join("var/lib/etcd-warden");
    for (p, mode) in [("data", 0o700), ("data.archive", 0)] {
        let m = std::fs::metadata(lib.join(p)).expect("created at start");
        if mode != 0 {
            assert_eq!(m.mode() & 0o777, mode, "{p}");
        }
    }
    assert_eq!(
        std::fs::read_dir(lib.join("data.archive"))
            .expect("archive dir")
            .count(),
        0,
        "the probe leaves nothing behind"
    );
    drop(d);

    // 2. autostart, one node: etcd runs as etcd and answers.
    let client = free_port();
    let cfg = config(t.path(), &[("a", free_port(), client)], true, socket);
    let mut d = Daemon::start(&unit, &disk, &cfg, t.path().join("autostart.log"));
    let pid_file = disk.join("var/lib/etcd-warden/etcd.pid");
    let pid: u32 = d.wait("etcd's PID file", || pid_in(&pid_file));
    let etcd = nix::unistd::User::from_name("etcd")
        .expect("the user database")
        .expect("no user etcd (Debian's etcd-server package creates it)");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("etcd runs");
    let uid: u32 = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
        .expect("a Uid line");
    assert_eq!(uid, etcd.uid.as_raw(), "etcd {pid} does not run as etcd");
    let data = lib.join("data");
    let m = std::fs::metadata(&data).expect("the data dir");
    assert_eq!(
        (m.uid(), m.gid(), m.mode() & 0o777),
        (etcd.uid.as_raw(), etcd.gid.as_raw(), 0o700),
        "{} is not etcd:etcd 0700",
        data.display()
    );
    let endpoint = format!("http://127.0.0.1:{client}");
    d.wait("a write through etcd", || {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &endpoint, "put", "/sandbox", "ok"])
            .output()
            .ok()
            .filter(|o| o.status.success())
    });
    let member = std::fs::metadata(data.join("member")).expect("etcd's member dir");
    assert_eq!(member.uid(), etcd.uid.as_raw(), "member/ is etcd's");

    // 3. etcd dies; the daemon starts it again under the same sandbox: its
    //    log, now etcd's file, is opened again by a daemon without
    //    CAP_FOWNER, and the stop below signals etcd without CAP_KILL.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL etcd");
    let pid: u32 = d.wait("etcd started again", || {
        pid_in(&pid_file).filter(|p| *p != pid)
    });
    d.wait("a write through the restarted etcd", || {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &endpoint, "put", "/sandbox", "again"])
            .output()
            .ok()
            .filter(|o| o.status.success())
    });
    drop(d);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true),
        "etcd {pid} outlived the daemon's stop"
    );
}

/// The PID the daemon's PID file names, once it names one.
fn pid_in(pid_file: &Path) -> Option<u32> {
    std::fs::read_to_string(pid_file)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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

/// The shipped unit's exposure as `systemd-analyze security` rates it stays
/// at or under 2.5 (systemd-analyze comes with `systemd`, a dependency of
/// `systemd-container`, which `make deps` installs).
#[test]
fn the_units_exposure_is_at_most_2_5() {
    let unit = std::env::var_os("WARDEN_UNIT")
        .map(PathBuf::from)
        .unwrap_or_else(sandbox::shipped_unit);
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(&unit)
        .output()
        .expect("systemd-analyze runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let level: f64 = text
        .lines()
        .find_map(|l| {
            l.split_once("Overall exposure level for ")?
                .1
                .split_once(": ")
        })
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no overall exposure in:\n{text}"));
    assert!(level <= 2.5, "exposure {level} > 2.5:\n{text}");
}
