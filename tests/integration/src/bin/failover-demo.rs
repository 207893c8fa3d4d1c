//! The headline demo (`make demo` runs it through `warden-demo`): two nodes
//! with etcd under Pacemaker and an etcd-warden daemon each, a client
//! writing, a node crash, the fence, the survivor writing again, the fenced
//! node rejoining as learner then voter, a summary of what was measured,
//! and a teardown that leaves nothing behind.

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use warden_harness::{crm, process, progress};
use warden_integration::twonode::{Topology, WardenCluster};

/// How often a step that is still running says what it waits for.
const TICK: Duration = Duration::from_secs(5);

struct Progress {
    t0: Instant,
    step: Instant,
    /// The running step's label and start, for the ticker thread.
    current: Arc<Mutex<Option<(String, Instant)>>>,
    _ticker: progress::Ticker,
}

impl Progress {
    fn new() -> Self {
        let now = Instant::now();
        let current: Arc<Mutex<Option<(String, Instant)>>> = Arc::new(Mutex::new(None));
        let shared = current.clone();
        // A step that takes long (the first cluster boot, a fence) prints
        // every TICK what it is waiting for, so the demo never looks hung.
        let ticker = progress::Ticker::start(TICK, move || {
            let step = shared.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let (label, since) = step?;
            let waiting = progress::current().unwrap_or_else(|| "working".into());
            Some(format!(
                "[{:6.1}s]   … {:.1}s into \"{label}\": {waiting}",
                now.elapsed().as_secs_f64(),
                since.elapsed().as_secs_f64(),
            ))
        });
        Self {
            t0: now,
            step: now,
            current,
            _ticker: ticker,
        }
    }

    fn set(&self, step: Option<(String, Instant)>) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = step;
    }

    fn start(&mut self, what: &str) {
        self.step = Instant::now();
        println!("[{:6.1}s] {what} …", self.t0.elapsed().as_secs_f64());
        let short: String = what.chars().take(60).collect();
        self.set(Some((short, self.step)));
    }

    fn done(&mut self, what: &str) {
        self.set(None);
        println!(
            "[{:6.1}s]   {what} (took {:.1}s)",
            self.t0.elapsed().as_secs_f64(),
            self.step.elapsed().as_secs_f64()
        );
    }
}

fn members_line(w: &WardenCluster, node: &str) -> String {
    match w.members(node) {
        Ok((cid, ms)) => format!(
            "cluster {cid:x}: {}",
            ms.iter()
                .map(|m| format!(
                    "{} {:x} ({})",
                    if m.name.is_empty() { "?" } else { &m.name },
                    m.id,
                    if m.is_learner { "learner" } else { "voter" }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => format!("member list unavailable: {e:#}"),
    }
}

fn demo(p: &mut Progress) -> Result<()> {
    let wait = Duration::from_secs(60);
    let (survivor, victim) = ("node1", "node2");

    p.start("two-node Corosync/Pacemaker cluster, an etcd-warden daemon per node, etcd under ocf:etcd-warden:etcd");
    let w = WardenCluster::start(2, Topology::TwoNode)?;
    let all = w.nodes();
    w.wait_voters(survivor, &all, Duration::from_secs(90))?;
    p.done(&format!(
        "{survivor}={} {victim}={}; {}",
        w.c.addr(survivor)?,
        w.c.addr(victim)?,
        members_line(&w, survivor)
    ));

    p.start(&format!("a client writes to {survivor}'s etcd every 20 ms"));
    let writer = w.writer("/demo", &[survivor.to_string()])?;
    writer.wait_ack_after(Some(survivor), Instant::now(), wait)?;
    p.done(&writer.summary());

    p.start(&format!(
        "crashing {victim} (SIGKILL of everything in it, no warning)"
    ));
    let t_crash = Instant::now();
    let killed = w.c.crash(victim)?;
    // A write sent before every process was gone may still have been
    // committed by the pair; the failover's first write is sent after.
    let t_dead = Instant::now();
    p.done(&format!("{} processes of {victim} killed", killed.len()));

    p.start(&format!(
        "Pacemaker on {survivor} fences {victim}; the daemon forces a one-member cluster"
    ));
    w.c.wait_for(survivor, crm::fenced(victim), wait)?;
    let fenced = w.fence_done_at(victim);
    p.done(&format!("{victim} fenced"));
    p.start(&format!("waiting for {survivor} to acknowledge a write"));
    let ack = writer.wait_ack_after(Some(survivor), t_dead, wait)?;
    let crash_to_write = ack.at.duration_since(t_crash);
    let fence_to_write = fenced.and_then(|f| ack.wall.duration_since(f).ok());
    p.done(&format!(
        "write {} acknowledged at revision {}; {}",
        ack.key,
        ack.revision,
        members_line(&w, survivor)
    ));

    p.start(&format!(
        "powering {victim} on: it archives its stale data, joins as a learner, is promoted"
    ));
    let t_boot = Instant::now();
    w.boot(victim, wait)?;
    w.wait_voters(survivor, &all, Duration::from_secs(90))?;
    let rejoin = t_boot.elapsed();
    w.wait_started(&all, wait)?;
    p.done(&members_line(&w, survivor));
    println!("{}", w.c.crm_mon_text(survivor)?);

    p.start("checking every acknowledged write on both members");
    let acks = writer.finish();
    w.check_writes(&acks, "/demo", &all)?;
    let archives = w.archives(victim)?;
    p.done(&format!(
        "{} writes acknowledged, all present, no revision acknowledged twice",
        acks.len()
    ));

    println!("summary:");
    println!(
        "  peer crash -> first acknowledged write: {:.2} s",
        crash_to_write.as_secs_f64()
    );
    match fence_to_write {
        Some(d) => println!(
            "  fence done -> first acknowledged write: {:.2} s",
            d.as_secs_f64()
        ),
        None => println!("  fence done -> first acknowledged write: (fence log not found)"),
    }
    println!(
        "  fenced node powered on -> voter again:  {:.2} s",
        rejoin.as_secs_f64()
    );
    println!("  writes acknowledged and verified:       {}", acks.len());
    for a in &archives {
        println!(
            "  {victim}'s old data archived (not deleted) at {}",
            a.display()
        );
    }

    p.start("tearing everything down");
    let netns = w.c.netns_names();
    let root = w.c.root().to_path_buf();
    let mut pids = Vec::new();
    for n in &all {
        pids.push(w.c.holder_pid(n)?);
        pids.extend(w.c.node_pids(n)?);
    }
    w.c.stop();
    let alive: Vec<i32> = pids.into_iter().filter(|&p| process::alive(p)).collect();
    ensure!(alive.is_empty(), "processes left behind: {alive:?}");
    let left: Vec<_> = netns
        .iter()
        .filter(|n| Path::new("/run/netns").join(n).exists())
        .collect();
    ensure!(left.is_empty(), "namespaces left behind: {left:?}");
    ensure!(!root.exists(), "{} left behind", root.display());
    p.done("no namespace, process or temp dir left");
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = warden_harness::teardown_on_signals().context("signal handlers") {
        eprintln!("failover-demo: {e:#}");
        return ExitCode::FAILURE;
    }
    let mut p = Progress::new();
    match demo(&mut p) {
        Ok(()) => {
            println!("demo finished in {:.1}s", p.t0.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("failover-demo failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}
