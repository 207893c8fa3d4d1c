//! API round trip and idle cost of the daemon, against a real etcd.
//!
//! Starts `etcd-warden daemon --standalone TMP --autostart`, waits for
//! /readyz, then measures over the Unix socket, one connection per request
//! as the OCF agent does:
//! - `GET /v1/status` (live Status + linearizable read of the local member),
//! - `POST /v1/action` monitor depth 0 (process check + live Status);
//!
//! and afterwards the daemon's idle RSS (VmRSS) and idle CPU over
//! `IDLE_SECS` seconds (default 30) with etcd running.
//!
//! Run: `cargo bench -p etcd-warden --bench api_roundtrip`
//! (`N=…` requests per route, `IDLE_SECS=…`).

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use warden_api::client::Client;
use warden_api::{Action, ActionReply, ActionRequest, NodeStatus, Outcome, paths};

struct Running {
    daemon: Child,
    etcd: Option<u32>,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        if let Some(pid) = self.etcd {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn measure(name: &str, n: usize, mut f: impl FnMut()) {
    for _ in 0..n / 10 {
        f();
    }
    let mut t = Vec::with_capacity(n);
    for _ in 0..n {
        let s = Instant::now();
        f();
        t.push(s.elapsed());
    }
    t.sort();
    println!(
        "{name:<40} n={n} p50={:?} p90={:?} p99={:?} max={:?}",
        percentile(&t, 0.5),
        percentile(&t, 0.9),
        percentile(&t, 0.99),
        t[t.len() - 1]
    );
}

fn proc_field(pid: u32, key: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(key))
        .map(|l| l[key.len()..].trim().to_string())
}

fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn main() {
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let idle: u64 = std::env::var("IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let daemon = Command::new(env!("CARGO_BIN_EXE_etcd-warden"))
        .arg("daemon")
        .arg("--standalone")
        .arg(dir.path())
        .arg("--http-addr")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--autostart")
        .env("RUST_LOG", "warn")
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut run = Running {
        daemon,
        etcd: None,
        _dir: dir,
    };
    let sock = run._dir.path().join("api.sock");
    let client = Client::new(&sock);
    let started = Instant::now();
    let status = loop {
        if let Ok(s) = client.get::<NodeStatus>(paths::STATUS, Duration::from_secs(2))
            && s.quorum
        {
            break s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "daemon not ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    run.etcd = status.etcd_pid;
    println!(
        "ready after {:?} (etcd pid {:?})",
        started.elapsed(),
        status.etcd_pid
    );

    measure("GET /v1/status (Status + linearizable)", n, || {
        let s: NodeStatus = client.get(paths::STATUS, Duration::from_secs(2)).unwrap();
        assert!(s.quorum);
    });
    let req = ActionRequest {
        action: Action::Monitor,
        depth: 0,
        deadline_ms: 2000,
        params: Default::default(),
        notify: None,
        instance: None,
    };
    measure("POST /v1/action monitor depth 0", n, || {
        let r: ActionReply = client
            .post(paths::ACTION, &req, Duration::from_secs(3))
            .unwrap();
        assert_eq!(r.outcome, Outcome::Success);
    });
    let req10 = ActionRequest {
        depth: 10,
        ..req.clone()
    };
    measure("POST /v1/action monitor depth 10", n, || {
        let r: ActionReply = client
            .post(paths::ACTION, &req10, Duration::from_secs(3))
            .unwrap();
        assert_eq!(r.outcome, Outcome::Success);
    });

    let pid = run.daemon.id();
    // Let allocations from the burst settle before sampling idle cost.
    std::thread::sleep(Duration::from_secs(2));
    let t0 = cpu_ticks(pid);
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(idle));
    let ticks = cpu_ticks(pid) - t0;
    let secs = w0.elapsed().as_secs_f64();
    // USER_HZ is 100 on Linux.
    let cpu = ticks as f64 / 100.0 / secs * 100.0;
    println!(
        "daemon idle: VmRSS {} VmHWM {} CPU {:.2}% over {:.0} s ({} ticks), probe interval 1 s",
        proc_field(pid, "VmRSS:").unwrap_or_default(),
        proc_field(pid, "VmHWM:").unwrap_or_default(),
        cpu,
        secs,
        ticks
    );
    if let Some(e) = run.etcd {
        println!(
            "etcd (for reference): VmRSS {}",
            proc_field(e, "VmRSS:").unwrap_or_default()
        );
    }
}
