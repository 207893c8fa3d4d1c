//! `monitor-load [--db-size 1G] [--rate 500] [--runs 300]`: the agent's
//! monitor as Pacemaker pays it (a fresh agent process per check) while etcd
//! holds a large database and takes a steady write load.
//!
//! A standalone daemon (`etcd-warden daemon --standalone DIR --autostart`)
//! runs etcd; the bench fills it to the size, starts the writer, then runs
//! the monitor at depth 0 and 10, and prints p50, p99, max, how many checks
//! failed or overran the agent's budget, and what the writer achieved.
//! Binaries: `WARDEN_BIN_ETCD_WARDEN` / `WARDEN_BIN_ETCD_WARDEN_AGENT`, else
//! built in this profile.

use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use warden_integration::bins;
use warden_integration::fill::{self, Load, mib};

/// The budget the goal sets for one monitor.
const BUDGET: Duration = Duration::from_millis(20);
/// The monitor's timeout as the generated CIB configures it.
const OP_TIMEOUT_MS: u64 = 30_000;

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Opts {
    size: u64,
    label: String,
    rate: u32,
    runs: usize,
}

fn opts() -> Result<Opts> {
    let mut o = Opts {
        size: 1 << 30,
        label: "1G".into(),
        rate: 500,
        runs: 300,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().with_context(|| format!("{a} needs a value"))?;
        match a.as_str() {
            "--db-size" => {
                o.size = fill::parse_size(&v)?;
                o.label = v;
            }
            "--rate" => o.rate = v.parse().with_context(|| format!("--rate {v:?}"))?,
            "--runs" => o.runs = v.parse().with_context(|| format!("--runs {v:?}"))?,
            _ => bail!(
                "unknown argument {a:?}; usage: monitor-load [--db-size 1G] [--rate 500] [--runs 300]"
            ),
        }
    }
    ensure!(o.runs >= 1, "--runs must be at least 1");
    Ok(o)
}

fn client_url(log: &Path, timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(u) = text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("etcd client:")
                .map(|u| u.trim().to_string())
        }) {
            return Ok(u);
        }
        ensure!(
            Instant::now() < deadline,
            "the daemon printed no etcd client URL within {timeout:?}; log:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs the agent's monitor `runs` times; returns (sorted wall times,
/// failures, overruns of the op timeout).
fn monitors(
    agent: &Path,
    socket: &Path,
    depth: &str,
    runs: usize,
) -> Result<(Vec<Duration>, usize, usize)> {
    let mut times = Vec::with_capacity(runs);
    let (mut failed, mut timed_out) = (0, 0);
    for _ in 0..runs {
        let t = Instant::now();
        let st = Command::new(agent)
            .arg("monitor")
            .env_clear()
            .env("OCF_RESKEY_socket", socket)
            .env("OCF_RESKEY_CRM_meta_timeout", OP_TIMEOUT_MS.to_string())
            .env("OCF_RESKEY_CRM_meta_interval", "10000")
            .env("OCF_CHECK_LEVEL", depth)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("running the agent")?;
        let took = t.elapsed();
        if !st.success() {
            failed += 1;
        }
        if took >= Duration::from_millis(OP_TIMEOUT_MS) {
            timed_out += 1;
        }
        times.push(took);
        // Pacemaker's monitors come at an interval, not back to back.
        std::thread::sleep(Duration::from_millis(20));
    }
    times.sort();
    Ok((times, failed, timed_out))
}

fn pct(v: &[Duration], p: f64) -> f64 {
    v.get(((v.len() as f64 - 1.0) * p).round() as usize)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
}

fn run() -> Result<()> {
    let o = opts()?;
    let warden = bins::warden()?;
    let agent = bins::agent()?;
    let dir = tempfile::Builder::new()
        .prefix("warden-monitor-load-")
        .tempdir_in("/var/tmp")
        .context("temp dir")?;
    let log = dir.path().join("daemon.log");
    let _daemon = Daemon(
        Command::new(&warden)
            .arg("daemon")
            .arg("--standalone")
            .arg(dir.path())
            .arg("--autostart")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).context("log")?)
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("spawning {}", warden.display()))?,
    );
    let socket = dir.path().join("api.sock");
    let ep = client_url(&log, Duration::from_secs(30))?;
    println!(
        "monitor-load: daemon {}, etcd at {ep}; filling to {}",
        warden.display(),
        o.label
    );
    let f = fill::fill(&ep, o.size, "/fill", None)?;
    println!(
        "filled to {} (in use {}) in {:.1} s",
        mib(f.db_size),
        mib(f.in_use),
        f.took.as_secs_f64()
    );
    // The same checks without the writer first: the machine's own noise
    // (process start-up, other work on the host), measured side by side.
    let mut rows = Vec::new();
    for depth in ["0", "10"] {
        let (t, failed, timed_out) = monitors(&agent, &socket, depth, o.runs)?;
        rows.push((
            format!("depth {depth}, no writes"),
            pct(&t, 0.5),
            pct(&t, 0.99),
            pct(&t, 1.0),
            failed,
            timed_out,
        ));
    }
    let load = Load::start(&ep, o.rate, "/load")?;
    // Let the writer reach its rate before measuring.
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    for depth in ["0", "10"] {
        let (t, failed, timed_out) = monitors(&agent, &socket, depth, o.runs)?;
        rows.push((
            format!("depth {depth}, {} writes/s", o.rate),
            pct(&t, 0.5),
            pct(&t, 0.99),
            pct(&t, 1.0),
            failed,
            timed_out,
        ));
    }
    let took = t0.elapsed();
    let l = load.stop()?;
    let (size, used) = fill::db_size(&ep, None)?;
    println!(
        "\nmonitor under load: {} database (in use {}), {:.0} writes/s for {:.0} s (asked {}; {} acknowledged, {} failed, put p50 {:.1} ms p99 {:.1} ms), {} fresh agent processes per depth\n",
        mib(size),
        mib(used),
        l.rate,
        took.as_secs_f64(),
        o.rate,
        l.acked,
        l.failed,
        l.p50.as_secs_f64() * 1000.0,
        l.p99.as_secs_f64() * 1000.0,
        o.runs
    );
    println!(
        "| monitor | p50 ms | p99 ms | max ms | failed | timed out | p99 < {} ms |",
        BUDGET.as_millis()
    );
    println!("|---|---|---|---|---|---|---|");
    let mut ok = true;
    for (what, p50, p99, max, failed, timed_out) in rows {
        let met = p99 < BUDGET.as_secs_f64() * 1000.0 && failed == 0 && timed_out == 0;
        ok &= met;
        println!(
            "| {what} | {p50:.2} | {p99:.2} | {max:.2} | {failed} | {timed_out} | {} |",
            if met { "met" } else { "MISSED" }
        );
    }
    println!(
        "\nmonitor-load: {}",
        if ok { "goal met" } else { "goal MISSED" }
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("monitor-load: {e:#}");
            ExitCode::FAILURE
        }
    }
}
