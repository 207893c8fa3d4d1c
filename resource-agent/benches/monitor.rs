//! Monitor latency as Pacemaker pays it: a fresh agent process per check,
//! against a standalone daemon with a running etcd, beside the cost of the
//! shell agent podman-etcd's style of check (one `etcdctl` or `crm_attribute`
//! process per check), all measured in the same run.
//!
//!     cargo build --release -p etcd-warden
//!     cargo bench -p etcd-warden-agent --bench monitor [-- N]
//!
//! A plain program (no criterion): what matters is the wall time of whole
//! processes, percentiles included, not a statistically tuned inner loop.
//! It prints a Markdown table.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use warden_api::client::Client;
use warden_api::{NodeStatus, paths};

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let agent = PathBuf::from(env!("CARGO_BIN_EXE_etcd-warden-agent"));
    let warden = find_warden(&agent);
    let dir = tempfile::Builder::new()
        .prefix("warden-bench-")
        .tempdir()
        .expect("tempdir");
    let log = dir.path().join("daemon.log");
    let mut daemon = Daemon(
        Command::new(&warden)
            .arg("daemon")
            .arg("--standalone")
            .arg(dir.path())
            .arg("--autostart")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the daemon"),
    );
    let socket = dir.path().join("api.sock");
    let status = wait_running(&socket, Duration::from_secs(30));
    let client_url = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("etcd client:")
                .map(|u| u.trim().to_string())
        })
        .expect("the daemon prints the etcd client URL");
    let cib = dir.path().join("cib.xml");
    let empty = Command::new("cibadmin").arg("--empty").output();
    let have_crm = empty.as_ref().is_ok_and(|o| o.status.success());
    if let Ok(o) = &empty {
        std::fs::write(&cib, &o.stdout).expect("cib");
    }

    println!(
        "monitor latency, {n} runs each, agent {}, daemon {} (etcd pid {:?})\n",
        agent.display(),
        warden.display(),
        status.etcd_pid
    );
    println!("| check | p50 ms | p99 ms | max ms |\n|---|---|---|---|");
    let agent_cmd = |depth: &str| {
        let mut c = Command::new(&agent);
        c.arg("monitor")
            .env_clear()
            .env("OCF_RESKEY_socket", &socket)
            .env("OCF_RESKEY_CRM_meta_timeout", "30000")
            .env("OCF_RESKEY_CRM_meta_interval", "10000")
            .env("OCF_CHECK_LEVEL", depth);
        c
    };
    report(
        "agent monitor, depth 0 (fresh process)",
        n,
        agent_cmd("0"),
        0,
    );
    report(
        "agent monitor, depth 10 (fresh process)",
        n,
        agent_cmd("10"),
        0,
    );
    let mut etcdctl = Command::new("etcdctl");
    etcdctl
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &client_url, "endpoint", "health"]);
    report("podman-etcd style: etcdctl endpoint health", n, etcdctl, 0);
    if have_crm {
        let mut attr = Command::new("crm_attribute");
        attr.env("CIB_file", &cib).args([
            "--node",
            "nodeA",
            "--name",
            "member_id",
            "--lifetime",
            "forever",
            "--query",
        ]);
        // A missing attribute exits 105 (CRM_EX_NOSUCH): that is the
        // answer, not an error.
        report(
            "podman-etcd style: crm_attribute --query (CIB file)",
            n,
            attr,
            105,
        );
    }
    daemon.stop();
}

/// Runs `cmd` `n` times (after 10 warm-up runs) and prints percentiles.
fn report(what: &str, n: usize, mut cmd: Command, ok_code: i32) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + 10 {
        let t0 = Instant::now();
        let status = cmd.status().expect("run");
        let took = t0.elapsed();
        let code = status.code().unwrap_or(-1);
        assert!(code == 0 || code == ok_code, "{what}: exit {code}");
        if i >= 10 {
            samples.push(took);
        }
    }
    samples.sort();
    let pct = |p: f64| {
        let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[i].as_secs_f64() * 1000.0
    };
    println!(
        "| {what} | {:.2} | {:.2} | {:.2} |",
        pct(0.50),
        pct(0.99),
        pct(1.0)
    );
}

/// The etcd-warden binary next to the agent (same profile), else in the
/// other profile.
fn find_warden(agent: &Path) -> PathBuf {
    let dir = agent.parent().expect("agent dir");
    let target = dir.parent().expect("target dir");
    for p in [
        dir.join("etcd-warden"),
        target.join("release/etcd-warden"),
        target.join("debug/etcd-warden"),
    ] {
        if p.exists() {
            return p;
        }
    }
    panic!("build the daemon first: cargo build --release -p etcd-warden");
}

fn wait_running(socket: &Path, timeout: Duration) -> NodeStatus {
    let deadline = Instant::now() + timeout;
    let client = Client::new(socket);
    loop {
        if let Ok(s) = client.get::<NodeStatus>(paths::STATUS, Duration::from_secs(2))
            && s.etcd_running
            && s.quorum
        {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "etcd not running under the daemon"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The daemon, stopped by PID (SIGTERM, then SIGKILL) also on panic.
struct Daemon(Child);

impl Daemon {
    fn stop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.stop();
        }
    }
}
