//! `make failover-bench`: failover timings on the namespace harness.
//!
//! One two-node cluster (Corosync token 1000 ms, fencing by the harness's
//! agent, a daemon in every node, the agent under Pacemaker); `RUNS` times
//! (default 10): node2 loses power, node1 must take writes again, node2 boots
//! and rejoins. Per run it prints the figures; at the end it rewrites the
//! failover section of docs/benchmarks.md and prints, as its last line,
//! `failover: fence->write p50 X s p95 Y s; crash->write p50 Z s; rejoin->voter p50 W s (N runs)`.
//!
//! `failover-bench --db-size 1G` runs the same cycle on a cluster filled to
//! that database size (see `warden_integration::fill`), on the etcd named by
//! `WARDEN_ETCD_BIN` (default `etcd` on PATH), and in the same run measures
//! the floor: plain etcd's forced restart and learner catch-up on a copy of
//! the fenced node's data (see `warden_integration::floor`), one floor run
//! right after each cluster run, so that both see the machine at the same
//! speed. It takes `/tmp/warden-cluster.lock` itself (do not wrap it in
//! `flock`), and records its table in its own section of docs/benchmarks.md.
//!
//! `failover-bench --field` measures the same three figures on the field
//! cluster (two Debian nodes booted with systemd as PID 1, the `.deb`, pcs,
//! fencing by `fence_ipmilan` over IPMI; see `warden_harness::field`): one
//! cluster, booted once, `RUNS` times (default 5) node-b loses power through
//! its BMC, is fenced, powered on and rejoins. It takes
//! `/tmp/warden-field.lock` itself (do not wrap it in `flock`) and records
//! its table in its own section of docs/benchmarks.md, beside the namespace
//! one. `failover-bench --both` runs the namespace half, then the field half,
//! in one process (the namespace half needs the cluster lock as usual).

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, ensure};
use warden_integration::bench::{Cycle, crash_cycle, quantile, unix_ms};
use warden_integration::bins::workspace;
use warden_integration::fill::{self, mib};
use warden_integration::floor::{self, FloorRun};
use warden_integration::twonode::{Topology, WardenCluster, logged_ms, poll};

const BEGIN: &str = "<!-- failover-bench:begin (rewritten by `make failover-bench`) -->";
const END: &str = "<!-- failover-bench:end -->";

fn runs() -> Result<usize> {
    match std::env::var("RUNS") {
        Err(_) => Ok(10),
        Ok(s) if s.trim().is_empty() => Ok(10),
        Ok(s) => {
            let n: usize = s
                .trim()
                .parse()
                .with_context(|| format!("RUNS={s:?} is not a number of runs"))?;
            ensure!(n >= 1, "RUNS must be at least 1, not {n}");
            Ok(n)
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn fmt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "n/a".into())
}

struct Summary {
    fence_p50: Option<f64>,
    fence_p95: Option<f64>,
    crash_p50: Option<f64>,
    crash_p95: Option<f64>,
    rejoin_p50: Option<f64>,
    rejoin_p95: Option<f64>,
    start_p50: Option<f64>,
    start_p95: Option<f64>,
    crash_fence_p50: Option<f64>,
    n: usize,
}

fn summarise(cycles: &[Cycle]) -> Summary {
    let fence: Vec<f64> = cycles
        .iter()
        .filter_map(|c| c.fence_to_write)
        .map(secs)
        .collect();
    let crash: Vec<f64> = cycles.iter().map(|c| secs(c.crash_to_write)).collect();
    let rejoin: Vec<f64> = cycles.iter().map(|c| secs(c.rejoin_to_voter)).collect();
    let start: Vec<f64> = cycles
        .iter()
        .filter_map(|c| c.start_to_voter)
        .map(secs)
        .collect();
    let cf: Vec<f64> = cycles
        .iter()
        .filter_map(|c| c.crash_to_fence)
        .map(secs)
        .collect();
    Summary {
        fence_p50: quantile(&fence, 0.5),
        fence_p95: quantile(&fence, 0.95),
        crash_p50: quantile(&crash, 0.5),
        crash_p95: quantile(&crash, 0.95),
        rejoin_p50: quantile(&rejoin, 0.5),
        rejoin_p95: quantile(&rejoin, 0.95),
        start_p50: quantile(&start, 0.5),
        start_p95: quantile(&start, 0.95),
        crash_fence_p50: quantile(&cf, 0.5),
        n: cycles.len(),
    }
}

fn last_line(s: &Summary) -> String {
    format!(
        "failover: fence->write p50 {} s p95 {} s; crash->write p50 {} s; rejoin->voter p50 {} s ({} runs)",
        fmt(s.fence_p50),
        fmt(s.fence_p95),
        fmt(s.crash_p50),
        fmt(s.rejoin_p50),
        s.n
    )
}

/// One line per run: crash → write / fence → write / rejoin → voter / writes.
fn run_lines(cycles: &[Cycle]) -> String {
    cycles
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "- run {}: {:.2} / {} / {:.2} / {}\n",
                i + 1,
                secs(c.crash_to_write),
                fmt(c.fence_to_write.map(secs)),
                secs(c.rejoin_to_voter),
                c.writes
            )
        })
        .collect()
}

fn section(s: &Summary, cycles: &[Cycle], runs: usize) -> String {
    let mut t = format!(
        "{BEGIN}\n## Failover on the namespace harness\n\n\
         Measured with `make failover-bench RUNS={runs}` (`RUNS={runs} cargo run --release -p warden-integration --bin failover-bench`):\n\
         one two-node cluster (Corosync token 1000 ms, `fence_warden_testns`, release daemon and agent), \
         node2 loses power {runs} times; a client writes to node1's etcd throughout and every acknowledged write is read back afterwards.\n\n\
         | figure | p50 | p95 | goal |\n|---|---|---|---|\n\
         | fence done → first acknowledged write on the survivor | {} s | {} s | p50 ≤ 1.5 s |\n\
         | peer crash → first acknowledged write | {} s | {} s | p50 ≤ 6 s |\n\
         | peer crash → fence done | {} s | | |\n\
         | fenced node powered on → voter again | {} s | {} s | |\n\n\
         Per run (s): crash→write / fence→write / rejoin→voter / writes checked\n\n",
        fmt(s.fence_p50),
        fmt(s.fence_p95),
        fmt(s.crash_p50),
        fmt(s.crash_p95),
        fmt(s.crash_fence_p50),
        fmt(s.rejoin_p50),
        fmt(s.rejoin_p95),
    );
    t.push_str(&run_lines(cycles));
    t.push_str(&format!("\n`{}`\n{END}\n", last_line(s)));
    t
}

/// Replaces the marked section of docs/benchmarks.md (or appends it).
fn record(path: &Path, section: &str) -> Result<()> {
    record_between(path, BEGIN, END, section)
}

/// Replaces the section of `path` between `begin` and `end` (markers
/// included in `section`), or appends it.
fn record_between(path: &Path, begin: &str, end: &str, section: &str) -> Result<()> {
    let old = std::fs::read_to_string(path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let new = match (old.find(begin), old.find(end)) {
        (Some(b), Some(e)) if e > b => {
            format!(
                "{}{section}{}",
                &old[..b],
                &old[e + end.len()..].trim_start_matches('\n')
            )
        }
        _ => format!(
            "{}\n{section}",
            old.trim_end_matches('\n').to_string() + "\n"
        ),
    };
    let tmp = path.with_extension("md.tmp");
    std::fs::write(&tmp, new).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))
}

fn bench() -> Result<Summary> {
    let runs = runs()?;
    println!("failover-bench: {runs} runs; starting a two-node cluster");
    let t0 = Instant::now();
    let w = WardenCluster::start(2, Topology::TwoNode)?;
    let all = w.nodes();
    w.wait_voters(&all[0], &all, Duration::from_secs(120))?;
    println!("cluster healthy after {:.1}s", t0.elapsed().as_secs_f64());
    let mut cycles = Vec::new();
    for i in 1..=runs {
        let c = crash_cycle(
            &w,
            "node2",
            &format!("/bench/{i}"),
            Duration::from_secs(120),
        )
        .with_context(|| format!("run {i}\n{}", w.daemon_log_tail("node1")))?;
        println!(
            "run {i}/{runs}: crash->write {:.2}s fence->write {}s crash->fence {}s rejoin->voter {:.2}s ({} writes checked)",
            secs(c.crash_to_write),
            fmt(c.fence_to_write.map(secs)),
            fmt(c.crash_to_fence.map(secs)),
            secs(c.rejoin_to_voter),
            c.writes
        );
        cycles.push(c);
    }
    w.c.stop();
    let s = summarise(&cycles);
    let path = workspace().join("docs/benchmarks.md");
    record(&path, &section(&s, &cycles, runs))?;
    println!("recorded in {}", path.display());
    println!("{}", last_line(&s));
    Ok(s)
}

/// What the command line asks for.
enum Mode {
    /// The namespace cluster (no argument).
    Namespace,
    /// `--db-size SIZE`.
    DbSize(String, u64),
    /// `--field`: the field cluster only.
    Field,
    /// `--both`: the namespace cluster, then the field cluster.
    Both,
}

const USAGE: &str =
    "usage: failover-bench [--db-size SIZE | --field | --both] (RUNS=N in the environment)";

fn mode_arg() -> Result<Mode> {
    let mut args = std::env::args().skip(1);
    let mut mode = None;
    while let Some(a) = args.next() {
        let m = match a.as_str() {
            "--db-size" => {
                let v = args
                    .next()
                    .context("--db-size needs a size such as 100M, 1G or 2G")?;
                let size = fill::parse_size(&v)?;
                Mode::DbSize(v, size)
            }
            "--field" => Mode::Field,
            "--both" => Mode::Both,
            other => anyhow::bail!("unknown argument {other:?}; {USAGE}"),
        };
        ensure!(mode.is_none(), "one of --db-size, --field, --both; {USAGE}");
        mode = Some(m);
    }
    Ok(mode.unwrap_or(Mode::Namespace))
}

/// The etcd binary as an absolute path (the daemon's configuration wants
/// one) and its version.
fn etcd_binary() -> Result<(std::path::PathBuf, String)> {
    let bin = warden_harness::etcd::etcd_bin();
    let bin = if bin.components().count() > 1 {
        bin.canonicalize()
            .with_context(|| format!("{}", bin.display()))?
    } else {
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join(&bin))
            .find(|p| p.is_file())
            .with_context(|| format!("{} is not on PATH", bin.display()))?
    };
    let out = std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("etcd Version:"))
        .map(|v| v.trim().to_string())
        .with_context(|| format!("{} --version: {text}", bin.display()))?;
    Ok((bin, version))
}

/// The machine-wide cluster lock, held while the cluster runs.
fn cluster_lock() -> Result<nix::fcntl::Flock<std::fs::File>> {
    lock("/tmp/warden-cluster.lock")
}

/// The exclusive lock `path`, waited for with a line a minute.
fn lock(path: &str) -> Result<nix::fcntl::Flock<std::fs::File>> {
    use nix::fcntl::{Flock, FlockArg};
    let t0 = Instant::now();
    let mut said = None;
    loop {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {path}"))?;
        match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
            Ok(l) => return Ok(l),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                let mins = t0.elapsed().as_secs() / 60;
                if said != Some(mins) {
                    println!(
                        "waiting for {path} (another cluster run holds it; this bench takes it itself, do not wrap it in flock), {mins} min so far"
                    );
                    said = Some(mins);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            Err((_, e)) => return Err(e).with_context(|| format!("locking {path}")),
        }
    }
}

/// The directory holding an etcd `member` directory under `dir`.
fn member_parent(dir: &Path, depth: u32) -> Option<std::path::PathBuf> {
    if dir.join("member").is_dir() {
        return Some(dir.to_path_buf());
    }
    if depth == 0 {
        return None;
    }
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.path().is_dir())
        .find_map(|e| member_parent(&e.path(), depth - 1))
}

fn q(v: &[f64], p: f64) -> Option<f64> {
    quantile(v, p)
}

fn db_bench(label: &str, size: u64) -> Result<()> {
    let runs = runs()?;
    let (etcd, version) = etcd_binary()?;
    let flags = floor::Flags {
        etcd: etcd.clone(),
        // Above etcd's 2 GiB default, which a 2 GiB database would hit.
        quota_backend_bytes: 8 << 30,
        snapshot_count: 10_000,
    };
    let toml = format!(
        "binary = \"{}\"\nquota_backend_bytes = {}\nsnapshot_count = {}\n",
        etcd.display(),
        flags.quota_backend_bytes,
        flags.snapshot_count
    );
    // The fenced node's stale data, which its rejoin archived, for the floor.
    let keep = tempfile::Builder::new()
        .prefix("warden-dbbench-")
        .tempdir_in("/var/tmp")
        .context("creating the bench's temp dir")?;
    let kept = keep.path().to_path_buf();
    let _keep_on_signal = warden_harness::OnSignal::new(move || {
        let _ = std::fs::remove_dir_all(&kept);
    });
    let image = keep.path().join("image.etcd");
    println!("failover-bench: etcd {version}, db size {label}, {runs} runs");
    let timeout = Duration::from_secs(900);
    let lock = cluster_lock()?;
    let t0 = Instant::now();
    let w = WardenCluster::start_tuned(2, Topology::TwoNode, &toml)?;
    let all = w.nodes();
    w.wait_voters(&all[0], &all, Duration::from_secs(120))?;
    println!("cluster healthy after {:.1}s", t0.elapsed().as_secs_f64());
    let ep = fill::url(w.client_addr("node1")?);
    let f = fill::fill(&ep, size, "/fill", Some(&w.netns("node1")?))?;
    println!(
        "filled to {} (in use {}) in {:.1} s: {} small keys, {} large values",
        mib(f.db_size),
        mib(f.in_use),
        f.took.as_secs_f64(),
        f.small_keys,
        f.large_puts
    );
    w.wait_voters(&all[0], &all, timeout)?;
    // Each cluster run is followed at once by a floor run, the cluster idle
    // meanwhile (writer stopped, both members voters): this machine's speed
    // drifts over minutes, and a floor measured only after all the cluster
    // runs compared the two at different speeds.
    let mut cycles = Vec::new();
    let mut floors: Vec<FloorRun> = Vec::new();
    for i in 1..=runs {
        let since = unix_ms(SystemTime::now());
        let c = crash_cycle(&w, "node2", &format!("/bench/{i}"), timeout)
            .with_context(|| format!("run {i}\n{}", w.daemon_log_tail("node1")))?;
        println!(
            "run {i}/{runs}: crash->write {:.2}s fence->write {}s power on->voter {:.2}s start->voter {}s ({} writes checked)",
            secs(c.crash_to_write),
            fmt(c.fence_to_write.map(secs)),
            secs(c.rejoin_to_voter),
            fmt(c.start_to_voter.map(secs)),
            c.writes
        );
        cycles.push(c);
        // The rejoin's archive is checksummed on a paced thread; the floor
        // waits for it so that it does not share the disk and the CPU.
        poll(
            "node2's archive checksum (recorded or given up)",
            timeout,
            || {
                Ok(logged_ms(
                    &w.daemon_log("node2"),
                    &["the archived database's checksum"],
                )
                .into_iter()
                .any(|t| t >= since)
                .then_some(()))
            },
        )?;
        // The first run's archive is the floor's data (the fenced member's
        // data as the power loss left it); later ones are removed so that
        // archives of GBs do not pile up.
        if i == 1 {
            let a = w.archives("node2")?;
            let src = a
                .first()
                .and_then(|a| member_parent(a, 3))
                .context("the rejoin left no archive of node2's data")?;
            std::fs::rename(&src, &image)
                .with_context(|| format!("moving {} to {}", src.display(), image.display()))?;
        }
        for a in w.archives("node2")? {
            std::fs::remove_dir_all(&a).with_context(|| format!("removing {}", a.display()))?;
        }
        let r = floor::run(&flags, &image, &keep.path().join("floor"), timeout)
            .with_context(|| format!("floor run {i}"))?;
        println!(
            "floor {i}/{runs}: forced restart -> write {:.2}s, learner add -> in sync {:.2}s, promote accepted {:.2}s",
            secs(r.forced_restart),
            secs(r.learner_in_sync),
            secs(r.learner_catch_up)
        );
        floors.push(r);
    }
    let (end_size, end_used) = fill::db_size(&ep, Some(&w.netns("node1")?)).unwrap_or((0, 0));
    w.c.stop();
    drop(lock);
    let s = summarise(&cycles);
    let forced: Vec<f64> = floors.iter().map(|r| secs(r.forced_restart)).collect();
    // The rejoin is judged against the learner's catch-up by the rule it
    // promotes by (in sync with the leader's commit index); etcd's own
    // promote check, which accepts a learner at 90 % of the log, is shown
    // beside it.
    let learner: Vec<f64> = floors.iter().map(|r| secs(r.learner_in_sync)).collect();
    let accepted: Vec<f64> = floors.iter().map(|r| secs(r.learner_catch_up)).collect();
    let (fp50, fp95) = (q(&forced, 0.5), q(&forced, 0.95));
    let (lp50, lp95) = (q(&learner, 0.5), q(&learner, 0.95));
    let (ap50, ap95) = (q(&accepted, 0.5), q(&accepted, 0.95));
    let diff = s.fence_p50.zip(fp50).map(|(a, b)| a - b);
    let ratio = s.start_p50.zip(lp50).map(|(a, b)| a / b);
    let ratio_accepted = s.start_p50.zip(ap50).map(|(a, b)| a / b);
    let spread = s.start_p95.zip(s.start_p50).map(|(a, b)| a / b);
    let goal = |ok: Option<bool>| match ok {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "n/a",
    };
    let g1 = goal(diff.map(|d| d <= 0.5));
    let g2 = goal(s.start_p50.zip(lp50).map(|(r, l)| r <= 1.2 * l + 1.0));
    let g3 = goal(spread.map(|x| x <= 1.5));
    let begin = format!("<!-- failover-bench-db etcd {version} {label}:begin -->");
    let end = format!("<!-- failover-bench-db etcd {version} {label}:end -->");
    let mut t = format!(
        "{begin}\n### etcd {version}, {label} database\n\n\
         `RUNS={runs} WARDEN_ETCD_BIN={} failover-bench --db-size {label}`: filled to {} (in use {}) in {:.0} s \
         ({} small keys, {} large values); {} (in use {}) after the runs.\n\n\
         | figure | p50 | p95 | plain etcd p50 | p95 | goal |\n|---|---|---|---|---|---|\n\
         | fence → write | {} s | {} s | forced restart → write {} s | {} s | ≤ plain + 0.5 s: {} ({:+.2} s) |\n\
         | crash → write | {} s | {} s | | | |\n\
         | rejoin → voter (Pacemaker's start on the returning node → promoted) | {} s | {} s | learner add → in sync (leader's progress) {} s | {} s | ≤ 1.2 × plain + 1 s: {} (×{:.2}); p95 ≤ 1.5 × p50: {} (×{:.2}) |\n\
         | | | | learner add → promote accepted (etcd's 90 % rule) {} s | {} s | for reference: rejoin → voter is ×{:.2} this |\n\
         | power on → voter (adds the boot, Pacemaker's join and probes) | {} s | {} s | | | |\n\n\
         Per run (s): crash→write / fence→write / rejoin→voter / power on→voter; plain forced restart / learner in sync / promote accepted\n\n",
        etcd.display(),
        mib(f.db_size),
        mib(f.in_use),
        f.took.as_secs_f64(),
        f.small_keys,
        f.large_puts,
        mib(end_size),
        mib(end_used),
        fmt(s.fence_p50),
        fmt(s.fence_p95),
        fmt(fp50),
        fmt(fp95),
        g1,
        diff.unwrap_or(f64::NAN),
        fmt(s.crash_p50),
        fmt(s.crash_p95),
        fmt(s.start_p50),
        fmt(s.start_p95),
        fmt(lp50),
        fmt(lp95),
        g2,
        ratio.unwrap_or(f64::NAN),
        g3,
        spread.unwrap_or(f64::NAN),
        fmt(ap50),
        fmt(ap95),
        ratio_accepted.unwrap_or(f64::NAN),
        fmt(s.rejoin_p50),
        fmt(s.rejoin_p95),
    );
    for (i, (c, r)) in cycles.iter().zip(&floors).enumerate() {
        t.push_str(&format!(
            "- run {}: {:.2} / {} / {} / {:.2}; {:.2} / {:.2} / {:.2}\n",
            i + 1,
            secs(c.crash_to_write),
            fmt(c.fence_to_write.map(secs)),
            fmt(c.start_to_voter.map(secs)),
            secs(c.rejoin_to_voter),
            secs(r.forced_restart),
            secs(r.learner_in_sync),
            secs(r.learner_catch_up)
        ));
    }
    t.push_str(&format!("{end}\n"));
    let path = workspace().join("docs/benchmarks.md");
    record_between(&path, &begin, &end, &t)?;
    println!("{t}");
    println!(
        "failover-db: etcd {version} {label}: fence->write p50 {} s (plain {} s, {g1}); rejoin->voter p50 {} s p95 {} s (plain in sync {} s, {g2}, spread {g3}; promote accepted {} s) ({} runs)",
        fmt(s.fence_p50),
        fmt(fp50),
        fmt(s.start_p50),
        fmt(s.start_p95),
        fmt(lp50),
        fmt(ap50),
        s.n
    );
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = warden_harness::teardown_on_signals() {
        eprintln!("failover-bench: {e:#}");
        return ExitCode::FAILURE;
    }
    let res = match mode_arg() {
        Ok(Mode::DbSize(label, size)) => db_bench(&label, size),
        Ok(Mode::Namespace) => bench().map(|_| ()),
        Ok(Mode::Field) => field_bench(None),
        Ok(Mode::Both) => bench().and_then(|s| field_bench(Some(&s))),
        Err(e) => Err(e),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("failover-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

const FIELD_BEGIN: &str =
    "<!-- failover-bench-field:begin (rewritten by `failover-bench --field`) -->";
const FIELD_END: &str = "<!-- failover-bench-field:end -->";

/// `RUNS` for the field cluster: default 5 (a cycle there takes a minute).
fn field_runs() -> Result<usize> {
    if std::env::var("RUNS").is_ok_and(|s| !s.trim().is_empty()) {
        runs()
    } else {
        Ok(5)
    }
}

/// The field half: the power-cut cycle of field_power `RUNS` times on one
/// booted field cluster. `namespace` holds the namespace half's figures
/// when the same process measured them (`--both`).
fn field_bench(namespace: Option<&Summary>) -> Result<()> {
    use warden_integration::field;
    let runs = field_runs()?;
    let suite = field::suite();
    println!("failover-bench --field: {runs} runs on Debian {suite} field nodes");
    let _lock = lock("/tmp/warden-field.lock")?;
    let t0 = Instant::now();
    let (c, _work) = field::cluster_on(&suite)?;
    field::wait_all_voters(&c, "node-a", Duration::from_secs(120))?;
    let setup = t0.elapsed();
    println!("field cluster healthy after {:.1}s", secs(setup));
    let versions = c
        .node_sh_ok(
            "node-a",
            "dpkg-query -W -f='${Package} ${Version}\\n' pacemaker corosync etcd-server fence-agents-ipmilan",
        )?
        .stdout
        .lines()
        .collect::<Vec<_>>()
        .join(", ");
    let mut cycles = Vec::new();
    let mut writes = Vec::new();
    for i in 1..=runs {
        let w = field::writer(&c, &format!("/bench-field/{i}"))?;
        let p = field::power_cycle(&c, &w, "node-b").with_context(|| format!("field run {i}"))?;
        let n = field::check_writes(&c, w, "node-a")
            .with_context(|| format!("checking field run {i}'s writes"))?;
        println!(
            "field run {i}/{runs}: power off->dead {:.2}s dead->write {:.2}s fence->write {}s power off->fence seen {:.2}s \
             power on->booted {:.2}s rejoin->voter {:.2}s ({n} writes checked)",
            secs(p.gone),
            secs(p.crash_to_write),
            fmt(p.fence_to_write.map(secs)),
            secs(p.fenced),
            secs(p.on_to_booted),
            secs(p.rejoin_to_voter),
        );
        // Each rejoin archives node-b's old member directory; the bench's
        // archives are of no use and would pile up on the node's disk.
        field::remove_archives(&c, "node-b")?;
        cycles.push(Cycle {
            crash_to_write: p.crash_to_write,
            fence_to_write: p.fence_to_write,
            crash_to_fence: Some(p.fenced),
            rejoin_to_voter: p.rejoin_to_voter,
            start_to_voter: None,
            writes: n,
        });
        writes.push(p);
    }
    drop(c);
    let s = summarise(&cycles);
    let booted: Vec<f64> = writes.iter().map(|p| secs(p.on_to_booted)).collect();
    let gone: Vec<f64> = writes.iter().map(|p| secs(p.gone)).collect();
    let ns = |f: fn(&Summary) -> Option<f64>| {
        namespace
            .map(|n| format!("{} s", fmt(f(n))))
            .unwrap_or_else(|| "see above".into())
    };
    let mut t = format!(
        "{FIELD_BEGIN}\n## Failover on field nodes\n\n\
         Measured with `make failover-bench-field FIELD_RUNS={runs}` (`RUNS={runs} failover-bench --field`, \
         release daemon and agent in the `.deb`): \
         two Debian {suite} nodes booted with systemd as PID 1 ({versions}), the cluster made with pcs, \
         fencing by `fence_ipmilan` over IPMI to OpenIPMI `ipmi_sim` BMCs (`stonith-action=off`); one cluster \
         (set up in {:.0} s), node-b loses power through its BMC {runs} times; a client writes to both nodes' etcd \
         throughout and every acknowledged write is read back after each run. {}\n\n\
         | figure | field p50 | field p95 | namespace p50 |\n|---|---|---|---|\n\
         | fence done (Pacemaker's fence history) → first acknowledged write on the survivor | {} s | {} s | {} |\n\
         | node dead (its last process gone) → first acknowledged write on the survivor | {} s | {} s | {} |\n\
         | IPMI power off → node dead (the BMC's SIGTERM to the node's launcher, then the kill of every process) | {} s | {} s | |\n\
         | IPMI power off → the fence's success seen in crm_mon (polled every 0.5 s) | {} s | {} s | |\n\
         | IPMI power on → node booted (systemd `running`) | {} s | {} s | |\n\
         | IPMI power on → voter again | {} s | {} s | {} |\n\n\
         Per run (s): node dead→write / fence→write / power on→voter / writes checked\n\n",
        secs(setup),
        if namespace.is_some() {
            "The namespace column is from the same process (`failover-bench --both`)."
        } else {
            "The namespace column refers to the section above, measured by a separate `failover-bench` \
             (a combined run is `failover-bench --both`, or `failover-bench` then `failover-bench --field` in one session)."
        },
        fmt(s.fence_p50),
        fmt(s.fence_p95),
        ns(|n| n.fence_p50),
        fmt(s.crash_p50),
        fmt(s.crash_p95),
        ns(|n| n.crash_p50),
        fmt(quantile(&gone, 0.5)),
        fmt(quantile(&gone, 0.95)),
        fmt(s.crash_fence_p50),
        fmt(quantile(
            &cycles
                .iter()
                .filter_map(|c| c.crash_to_fence)
                .map(secs)
                .collect::<Vec<_>>(),
            0.95
        )),
        fmt(quantile(&booted, 0.5)),
        fmt(quantile(&booted, 0.95)),
        fmt(s.rejoin_p50),
        fmt(s.rejoin_p95),
        ns(|n| n.rejoin_p50),
    );
    t.push_str(&run_lines(&cycles));
    let last = format!(
        "failover-field: fence->write p50 {} s p95 {} s; crash->write p50 {} s; rejoin->voter p50 {} s ({} runs)",
        fmt(s.fence_p50),
        fmt(s.fence_p95),
        fmt(s.crash_p50),
        fmt(s.rejoin_p50),
        s.n
    );
    t.push_str(&format!("\n`{last}`\n{FIELD_END}\n"));
    let path = workspace().join("docs/benchmarks.md");
    record_between(&path, FIELD_BEGIN, FIELD_END, &t)?;
    println!("recorded in {}", path.display());
    println!("{last}");
    Ok(())
}
