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
//!
//! With `BASELINE_BIN=/path/to/an/older/etcd-warden`, that daemon runs
//! beside this build's (each with its own etcd) and every request goes to
//! both, in alternating order, so the two are compared under the same load
//! in the same run; each line then names the binary it measured.

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

/// A daemon under test: its binary, its client, its process.
struct Target {
    name: String,
    client: Client,
    run: Running,
}

fn start(bin: &str, name: &str) -> Target {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let daemon = Command::new(bin)
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
        "{name}: ready after {:?} (etcd pid {:?})",
        started.elapsed(),
        status.etcd_pid
    );
    Target {
        name: name.to_string(),
        client,
        run,
    }
}

/// Each request goes to every target, in alternating order; one line per
/// target.
fn measure_all(what: &str, n: usize, targets: &[Target], f: impl Fn(&Client)) {
    let load_before = load_average();
    let mut t: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); targets.len()];
    for _ in 0..n / 10 {
        for x in targets {
            f(&x.client);
        }
    }
    for i in 0..n {
        for k in 0..targets.len() {
            let k = (k + i) % targets.len();
            let s = Instant::now();
            f(&targets[k].client);
            t[k].push(s.elapsed());
        }
    }
    for (x, mut t) in targets.iter().zip(t) {
        t.sort();
        let name = if targets.len() > 1 {
            format!("{what} [{}]", x.name)
        } else {
            what.to_string()
        };
        println!(
            "{name:<52} n={n} p50={:?} p90={:?} p99={:?} max={:?}",
            percentile(&t, 0.5),
            percentile(&t, 0.9),
            percentile(&t, 0.99),
            t[t.len() - 1]
        );
    }
    println!(
        "  (load average before: {load_before}; after: {})",
        load_average()
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
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
    let mut targets = vec![];
    if let Ok(bin) = std::env::var("BASELINE_BIN") {
        targets.push(start(&bin, "baseline"));
    }
    targets.push(start(env!("CARGO_BIN_EXE_etcd-warden"), "this build"));

    measure_all("GET /v1/status (Status + linearizable)", n, &targets, |c| {
        let s: NodeStatus = c.get(paths::STATUS, Duration::from_secs(2)).unwrap();
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
    measure_all("POST /v1/action monitor depth 0", n, &targets, |c| {
        let r: ActionReply = c.post(paths::ACTION, &req, Duration::from_secs(3)).unwrap();
        assert_eq!(r.outcome, Outcome::Success);
    });
    let req10 = ActionRequest {
        depth: 10,
        ..req.clone()
    };
    measure_all("POST /v1/action monitor depth 10", n, &targets, |c| {
        let r: ActionReply = c
            .post(paths::ACTION, &req10, Duration::from_secs(3))
            .unwrap();
        assert_eq!(r.outcome, Outcome::Success);
    });

    // Let allocations from the burst settle before sampling idle cost.
    std::thread::sleep(Duration::from_secs(2));
    let pids: Vec<u32> = targets.iter().map(|x| x.run.daemon.id()).collect();
    let t0: Vec<u64> = pids.iter().map(|p| cpu_ticks(*p)).collect();
    let w0 = Instant::now();
    std::thread::sleep(Duration::from_secs(idle));
    let secs = w0.elapsed().as_secs_f64();
    for ((x, pid), t0) in targets.iter().zip(&pids).zip(t0) {
        let ticks = cpu_ticks(*pid) - t0;
        // USER_HZ is 100 on Linux.
        let cpu = ticks as f64 / 100.0 / secs * 100.0;
        println!(
            "{}: daemon idle: VmRSS {} VmHWM {} CPU {:.2}% over {:.0} s ({} ticks), probe interval 1 s",
            x.name,
            proc_field(*pid, "VmRSS:").unwrap_or_default(),
            proc_field(*pid, "VmHWM:").unwrap_or_default(),
            cpu,
            secs,
            ticks
        );
        if let Some(e) = x.run.etcd {
            println!(
                "{}: etcd (for reference): VmRSS {}",
                x.name,
                proc_field(e, "VmRSS:").unwrap_or_default()
            );
        }
    }
}
