//! The whole `etcd-warden collect` cycle against the crm_mon call alone
//! (the goal: the cycle may cost at most 1.1× the crm_mon call).
//!
//! Both run against the same two-node CIB (`CIB_file`, so no cluster is
//! needed) and the same Corosync configuration; the report goes to tmpfs, as
//! the systemd unit writes it to /run. The machine this runs on is usually
//! busy with other work, so the two are not timed in separate blocks: every
//! round runs them alternately, one process at a time, and the figures are
//! medians over all runs (wall time per run) and over rounds (CPU time of
//! the children, user + system, from `/proc/self/stat`).
//!
//! Two baselines, because crm_mon's own cost depends on where its output
//! goes: `crm_mon > /dev/null`, and `crm_mon | reader` (its output read
//! through a pipe, as every consumer of it, `collect` included, must).
//!
//! Two cycles against them: `etcd-warden collect` as the timer runs it (a
//! process per cycle), and the daemon's cycle (`[report]`): the same
//! library call the daemon makes, `report_cycle::Cycle::for_daemon` then
//! `run`, in this process, without the etcd section (no etcd here). The
//! in-process cycle's CPU is this process's own CPU during the call plus
//! its crm_mon child's.
//!
//! crm_mon reads `CIB_file` from its environment; the in-process cycle's
//! crm_mon inherits this process's, so the benchmark re-executes itself
//! once with `CIB_file` set (setting it in a running process is unsafe).
//!
//! With `BASELINE_BIN=/path/to/an/older/etcd-warden`, that build's `collect`
//! runs in the same rotation, and a last line gives this build's ratio to it.
//!
//! Run: `make bench-collect`, or
//! `cargo bench -p etcd-warden --bench collect_cycle` (`COLLECT_ROUNDS=…`
//! rounds of `COLLECT_RUNS=…` runs of each; defaults 10 × 20). Cargo builds
//! `target/release/etcd-warden` for it (the bench profile is the release
//! one) and passes its path in `CARGO_BIN_EXE_etcd-warden`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use etcd_warden::report_cycle::Cycle;

/// The two-node CIB the crm-xml benchmarks use (kubelet, etcd, two fence
/// devices, status with everything running).
const CIB: &str = include_str!("../tests/fixtures/two_node_cib.xml");

/// The Corosync configuration of that cluster: names and node ids as in the
/// CIB, so `collect` takes the addresses from it without corosync-cmapctl.
const COROSYNC_CONF: &str = include_str!("../tests/fixtures/two_node_corosync.conf");

/// The crm_mon call of the baselines: the cycle's own.
const CRM_MON: [&str; 5] = etcd_warden::pacemaker::CRM_MON_CMD;

/// The directory the parent prepared, passed to the re-executed benchmark.
const DIR_ENV: &str = "COLLECT_BENCH_DIR";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    CrmMonNull,
    CrmMonPipe,
    Collect,
    Daemon,
    /// `BASELINE_BIN collect`: an older build beside this one.
    BaselineCollect,
}

const KINDS: [Kind; 4] = [
    Kind::CrmMonNull,
    Kind::CrmMonPipe,
    Kind::Collect,
    Kind::Daemon,
];

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::CrmMonNull => "crm_mon > /dev/null",
            Kind::CrmMonPipe => "crm_mon | reader",
            Kind::Collect => "etcd-warden collect",
            Kind::Daemon => "daemon cycle (in-proc)",
            Kind::BaselineCollect => "baseline collect",
        }
    }
}

struct Setup {
    bin: PathBuf,
    /// `BASELINE_BIN`, if set.
    baseline: Option<PathBuf>,
    cib: PathBuf,
    conf: PathBuf,
    out: PathBuf,
    /// The daemon's cycle, writing to its own report file.
    cycle: Cycle,
}

/// The daemon's `[report]` settings for the bench's cluster, through the
/// daemon's own configuration loader.
fn daemon_cycle(dir: &Path) -> Cycle {
    let text = format!(
        r#"node_name = "master-0"
topology = "two-node"

[paths]
state_dir = {state:?}

[etcd]
data_dir = {data:?}

[report]
path = {out:?}
cib_file = {cib:?}
corosync_conf = {conf:?}

[[nodes]]
name = "master-0"
peer_urls = ["http://192.0.2.10:2380"]
client_urls = ["http://192.0.2.10:2379"]

[[nodes]]
name = "master-1"
peer_urls = ["http://192.0.2.11:2380"]
client_urls = ["http://192.0.2.11:2379"]
"#,
        state = dir.join("state"),
        data = dir.join("data"),
        out = dir.join("daemon-report.json"),
        cib = dir.join("cib.xml"),
        conf = dir.join("corosync.conf"),
    );
    let settings = etcd_warden::config::from_texts(&[(dir.join("config.toml"), text)]).unwrap();
    Cycle::for_daemon(&settings)
}

impl Setup {
    fn command(&self, kind: Kind) -> Command {
        let mut cmd = match kind {
            Kind::CrmMonNull | Kind::CrmMonPipe | Kind::Daemon => {
                let mut c = Command::new(CRM_MON[0]);
                c.args(&CRM_MON[1..]);
                c
            }
            Kind::Collect | Kind::BaselineCollect => {
                let bin = match (kind, &self.baseline) {
                    (Kind::BaselineCollect, Some(b)) => b,
                    _ => &self.bin,
                };
                let mut c = Command::new(bin);
                c.arg("collect")
                    .arg("--cib-file")
                    .arg(&self.cib)
                    .arg("--corosync-conf")
                    .arg(&self.conf)
                    .arg("--output")
                    .arg(&self.out);
                c
            }
        };
        // As the systemd unit runs it: no backtrace capture, which a
        // developer's RUST_BACKTRACE=1 would add to every error value.
        cmd.env("CIB_file", &self.cib)
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .stdin(Stdio::null());
        cmd.stderr(Stdio::piped());
        cmd.stdout(if kind == Kind::CrmMonPipe {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd
    }

    /// One run; its wall time from spawn to reaped exit (in-process: the
    /// call).
    fn run(&self, kind: Kind) -> Duration {
        if kind == Kind::Daemon {
            let mut warnings = Vec::new();
            let start = Instant::now();
            let r = self.cycle.run(None, &mut |w| warnings.push(w.to_owned()));
            let took = start.elapsed();
            if let Err(e) = r {
                panic!("the daemon cycle failed: {e}");
            }
            // As for collect: a warning means a path not meant to be
            // measured (a fallback to cibadmin or corosync-cmapctl).
            assert!(warnings.is_empty(), "the daemon cycle warned: {warnings:?}");
            return took;
        }
        let start = Instant::now();
        let mut child = self.command(kind).spawn().unwrap_or_else(|e| {
            panic!("cannot run {}: {e}", kind.label());
        });
        let mut out = Vec::with_capacity(64 * 1024);
        if let Some(mut s) = child.stdout.take() {
            s.read_to_end(&mut out).unwrap();
        }
        let mut err = String::new();
        if let Some(mut s) = child.stderr.take() {
            s.read_to_string(&mut err).unwrap();
        }
        let status = child.wait().unwrap();
        let took = start.elapsed();
        assert!(status.success(), "{} failed: {status}: {err}", kind.label());
        if matches!(kind, Kind::Collect | Kind::BaselineCollect) {
            // Any warning means the cycle took a path the benchmark does not
            // mean to measure (e.g. a fallback to corosync-cmapctl).
            assert!(err.is_empty(), "collect warned: {err}");
        }
        took
    }
}

/// CPU time (user + system) of this process's reaped children, in seconds,
/// from `/proc/self/stat` (fields 16 and 17, in clock ticks). A tick is
/// coarse (10 ms) but the counter is cumulative, so a round's sum is exact
/// to a tick.
fn children_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The command name (field 2) may contain spaces; fields after it are
    // plain numbers.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3, so field n is f[n - 3].
    let cutime: f64 = f[16 - 3].parse().unwrap();
    let cstime: f64 = f[17 - 3].parse().unwrap();
    (cutime + cstime) / 100.0
}

/// CPU time (user + system) of this process itself, in seconds (fields 14
/// and 15 of `/proc/self/stat`).
fn own_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f[14 - 3].parse().unwrap();
    let stime: f64 = f[15 - 3].parse().unwrap();
    (utime + stime) / 100.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and filters); nothing to select here.
    let rounds = env_usize("COLLECT_ROUNDS", 10).max(1);
    let runs = env_usize("COLLECT_RUNS", 20).max(1);

    let bin = PathBuf::from(env!("CARGO_BIN_EXE_etcd-warden"));
    if !bin.is_file() {
        eprintln!(
            "collect_cycle: {} is missing; build it with `cargo build --release -p etcd-warden`",
            bin.display()
        );
        return ExitCode::FAILURE;
    }
    if Command::new(CRM_MON[0])
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        eprintln!("collect_cycle: crm_mon is not installed (Pacemaker's CLI tools are needed)");
        return ExitCode::FAILURE;
    }
    let Some(dir) = std::env::var_os(DIR_ENV).map(PathBuf::from) else {
        // The parent: prepare the files, then run the benchmark itself
        // again with CIB_file in its environment (see the module comment).
        // tmpfs, as the systemd unit and the daemon write the report to /run.
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .unwrap();
        std::fs::write(dir.path().join("cib.xml"), CIB).unwrap();
        std::fs::write(dir.path().join("corosync.conf"), COROSYNC_CONF).unwrap();
        let me = std::env::current_exe().unwrap();
        let status = Command::new(me)
            .args(std::env::args_os().skip(1))
            .env(DIR_ENV, dir.path())
            .env("CIB_file", dir.path().join("cib.xml"))
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .status()
            .unwrap();
        return if status.success() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    };
    let setup = Setup {
        bin,
        baseline: std::env::var_os("BASELINE_BIN").map(PathBuf::from),
        cib: dir.join("cib.xml"),
        conf: dir.join("corosync.conf"),
        out: dir.join("report.json"),
        cycle: daemon_cycle(&dir),
    };

    let mut kinds = KINDS.to_vec();
    if setup.baseline.is_some() {
        kinds.push(Kind::BaselineCollect);
    }
    // Warm the page cache and the previous report the cycle reads.
    for _ in 0..3 {
        for &k in &kinds {
            setup.run(k);
        }
    }

    let load_before = load_average();
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for round in 0..rounds {
        let mut cpu_round = vec![0.0f64; kinds.len()];
        for i in 0..runs {
            // Rotate the order so that no kind always follows another.
            for j in 0..kinds.len() {
                let k = (i + round + j) % kinds.len();
                // In process, the cycle's own work is this process's CPU.
                let own = kinds[k] == Kind::Daemon;
                let before = children_cpu() + if own { own_cpu() } else { 0.0 };
                let took = setup.run(kinds[k]);
                let after = children_cpu() + if own { own_cpu() } else { 0.0 };
                cpu_round[k] += after - before;
                wall[k].push(took.as_secs_f64() * 1e3);
            }
        }
        for k in 0..kinds.len() {
            cpu[k].push(cpu_round[k] * 1e3 / runs as f64);
        }
        let per_run: Vec<String> = cpu_round
            .iter()
            .map(|c| format!("{:.1}", c * 1e3 / runs as f64))
            .collect();
        eprintln!(
            "round {}/{rounds}: CPU per run {} ms",
            round + 1,
            per_run.join(" / ")
        );
    }
    let load_after = load_average();

    let med_wall: Vec<f64> = wall.iter_mut().map(|v| median(v)).collect();
    // `median` sorted them. The 10th percentile shows the cost with the
    // least interference from other work on a busy machine.
    let p10_wall: Vec<f64> = wall.iter().map(|v| v[v.len() / 10]).collect();
    let med_cpu: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
    println!("collect cycle vs crm_mon alone: {rounds} rounds x {runs} runs of each, alternating");
    println!("load average before: {load_before}; after: {load_after}");
    println!(
        "{:<22} {:>18} {:>16} {:>22}",
        "", "median wall/run", "p10 wall/run", "median CPU/run (round)"
    );
    for (k, kind) in kinds.iter().enumerate() {
        println!(
            "{:<22} {:>15.2} ms {:>13.2} ms {:>19.1} ms",
            kind.label(),
            med_wall[k],
            p10_wall[k],
            med_cpu[k]
        );
    }
    for (c, name) in [(2, "collect"), (3, "daemon ")] {
        for base in [0, 1] {
            println!(
                "ratio {name} / {:<20} wall {:.3}x (p10 {:.3}x)   CPU {:.3}x",
                KINDS[base].label(),
                med_wall[c] / med_wall[base],
                p10_wall[c] / p10_wall[base],
                med_cpu[c] / med_cpu[base]
            );
        }
    }
    if kinds.len() > KINDS.len() {
        let b = KINDS.len();
        println!(
            "ratio collect / baseline collect        wall {:.3}x (p10 {:.3}x)   CPU {:.3}x",
            med_wall[2] / med_wall[b],
            p10_wall[2] / p10_wall[b],
            med_cpu[2] / med_cpu[b]
        );
    }
    ExitCode::SUCCESS
}
