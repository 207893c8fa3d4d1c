//! Monitor latency as Pacemaker pays it: a fresh agent process per check,
//! against a standalone daemon with a running etcd, beside the cost of the
//! shell agent podman-etcd's style of check (one `etcdctl` or `crm_attribute`
//! process per check), all measured in the same run.
//!
//!     cargo build --release -p etcd-warden
//!     cargo bench -p etcd-warden-agent --bench monitor [-- N]
//!
//! With `BASELINE_WARDEN=/path/to/an/older/etcd-warden` and
//! `BASELINE_AGENT=/path/to/its/etcd-warden-agent`, that pair runs beside
//! this build's (each daemon with its own etcd) and every check runs on both,
//! in alternating order, so that the two are compared under the same load in
//! the same run; each line then names the pair it measured.
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
    let mut pairs = Vec::new();
    match (
        std::env::var_os("BASELINE_WARDEN"),
        std::env::var_os("BASELINE_AGENT"),
    ) {
        (Some(w), Some(a)) => pairs.push(Pair::start("baseline", a.into(), w.into())),
        (None, None) => {}
        _ => panic!("set both BASELINE_WARDEN and BASELINE_AGENT, or neither"),
    }
    pairs.push(Pair::start("this build", agent, warden));
    let this = pairs.last().expect("this build's pair");
    let cib = this.dir.path().join("cib.xml");
    let empty = Command::new("cibadmin").arg("--empty").output();
    let have_crm = empty.as_ref().is_ok_and(|o| o.status.success());
    if let Ok(o) = &empty {
        std::fs::write(&cib, &o.stdout).expect("cib");
    }

    for p in &pairs {
        println!(
            "{}: agent {}, daemon {} (etcd pid {:?})",
            p.name,
            p.agent.display(),
            p.warden.display(),
            p.etcd_pid
        );
    }
    println!(
        "monitor latency, {n} runs each; load average {}\n",
        load_average()
    );
    println!("| check | p50 ms | p99 ms | max ms |\n|---|---|---|---|");
    for depth in ["0", "10"] {
        let what = format!("agent monitor, depth {depth} (fresh process)");
        let cmds = pairs
            .iter()
            .map(|p| {
                let label = if pairs.len() > 1 {
                    format!("{what} [{}]", p.name)
                } else {
                    what.clone()
                };
                (label, p.agent_cmd(depth), 0)
            })
            .collect();
        report(n, cmds);
    }
    let mut etcdctl = Command::new("etcdctl");
    etcdctl
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &this.client_url, "endpoint", "health"]);
    report(
        n,
        vec![(
            "podman-etcd style: etcdctl endpoint health".into(),
            etcdctl,
            0,
        )],
    );
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
            n,
            vec![(
                "podman-etcd style: crm_attribute --query (CIB file)".into(),
                attr,
                105,
            )],
        );
    }
    println!("\nload average after: {}", load_average());
    for p in &mut pairs {
        p.daemon.stop();
    }
}

/// An agent binary and the daemon it talks to (standalone, with its own
/// etcd and socket).
struct Pair {
    name: &'static str,
    agent: PathBuf,
    warden: PathBuf,
    socket: PathBuf,
    client_url: String,
    etcd_pid: Option<u32>,
    daemon: Daemon,
    dir: tempfile::TempDir,
}

impl Pair {
    fn start(name: &'static str, agent: PathBuf, warden: PathBuf) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("warden-bench-")
            .tempdir()
            .expect("tempdir");
        let log = dir.path().join("daemon.log");
        let daemon = Daemon(
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
        Pair {
            name,
            agent,
            warden,
            socket,
            client_url,
            etcd_pid: status.etcd_pid,
            daemon,
            dir,
        }
    }

    fn agent_cmd(&self, depth: &str) -> Command {
        let mut c = Command::new(&self.agent);
        c.arg("monitor")
            .env_clear()
            .env("OCF_RESKEY_socket", &self.socket)
            .env("OCF_RESKEY_CRM_meta_timeout", "30000")
            .env("OCF_RESKEY_CRM_meta_interval", "10000")
            .env("OCF_CHECK_LEVEL", depth);
        c
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs each command `n` times (after 10 warm-up runs of each), the
/// commands in turn and in alternating order, and prints percentiles, one
/// line per command. Each entry: its label, the command, the exit code that
/// also counts as an answer.
fn report(n: usize, mut cmds: Vec<(String, Command, i32)>) {
    for (_, cmd, _) in &mut cmds {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    }
    let mut samples = vec![Vec::with_capacity(n); cmds.len()];
    for i in 0..n + 10 {
        for j in 0..cmds.len() {
            let k = (i + j) % cmds.len();
            let (what, cmd, ok_code) = &mut cmds[k];
            let t0 = Instant::now();
            let status = cmd.status().expect("run");
            let took = t0.elapsed();
            let code = status.code().unwrap_or(-1);
            assert!(code == 0 || code == *ok_code, "{what}: exit {code}");
            if i >= 10 {
                samples[k].push(took);
            }
        }
    }
    for ((what, _, _), mut samples) in cmds.iter().zip(samples) {
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
