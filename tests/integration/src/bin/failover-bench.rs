//! `make failover-bench`: failover timings on the namespace harness.
//!
//! One two-node cluster (Corosync token 1000 ms, fencing by the harness's
//! agent, a daemon in every node, the agent under Pacemaker); `RUNS` times
//! (default 10): node2 loses power, node1 must take writes again, node2 boots
//! and rejoins. Per run it prints the figures; at the end it rewrites the
//! failover section of docs/benchmarks.md and prints, as its last line,
//! `failover: fence->write p50 X s p95 Y s; crash->write p50 Z s; rejoin->voter p50 W s (N runs)`.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use warden_integration::bench::{Cycle, crash_cycle, quantile};
use warden_integration::bins::workspace;
use warden_integration::twonode::{Topology, WardenCluster};

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
    for (i, c) in cycles.iter().enumerate() {
        t.push_str(&format!(
            "- run {}: {:.2} / {} / {:.2} / {}\n",
            i + 1,
            secs(c.crash_to_write),
            fmt(c.fence_to_write.map(secs)),
            secs(c.rejoin_to_voter),
            c.writes
        ));
    }
    t.push_str(&format!("\n`{}`\n{END}\n", last_line(s)));
    t
}

/// Replaces the marked section of docs/benchmarks.md (or appends it).
fn record(path: &Path, section: &str) -> Result<()> {
    let old = std::fs::read_to_string(path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let new = match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if e > b => {
            format!(
                "{}{section}{}",
                &old[..b],
                &old[e + END.len()..].trim_start_matches('\n')
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

fn bench() -> Result<()> {
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
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = warden_harness::teardown_on_signals() {
        eprintln!("failover-bench: {e:#}");
        return ExitCode::FAILURE;
    }
    match bench() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("failover-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
