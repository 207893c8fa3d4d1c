//! `make demo`: a two-node Pacemaker cluster in network namespaces, a
//! resource under Pacemaker, a node crash, fencing, recovery, power-on, and a
//! clean teardown, with progress lines and timings.
//!
//! The managed resource is a [`Workload`]; today an `ocf:pacemaker:Dummy`.
//! Running etcd under the project's agent and daemon later means another
//! `Workload` (its CIB XML, plus daemons spawned in each node in `prepare`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use warden_harness::{Cluster, ClusterOptions, crm, process};

/// What the demo runs under Pacemaker.
struct Workload {
    /// Resource id in the CIB.
    id: &'static str,
    /// Human description for the progress lines.
    what: &'static str,
    /// The `<primitive>` (or clone) to create.
    cib_xml: &'static str,
}

impl Workload {
    fn dummy() -> Self {
        Self {
            id: "demo-dummy",
            what: "ocf:pacemaker:Dummy",
            cib_xml: r#"<primitive id="demo-dummy" class="ocf" provider="pacemaker" type="Dummy">
  <operations><op id="demo-dummy-mon" name="monitor" interval="5s" timeout="20s"/></operations>
</primitive>"#,
        }
    }

    /// Per-node preparation before the resource is created (later: start the
    /// etcd-warden daemon in every node with `Cluster::spawn`).
    fn prepare(&self, _cluster: &Cluster) -> Result<()> {
        Ok(())
    }
}

struct Progress {
    t0: Instant,
    step: Instant,
}

impl Progress {
    fn new() -> Self {
        let now = Instant::now();
        Self { t0: now, step: now }
    }

    fn start(&mut self, what: &str) {
        self.step = Instant::now();
        println!("[{:6.1}s] {what} …", self.t0.elapsed().as_secs_f64());
    }

    fn done(&mut self, what: &str) {
        println!(
            "[{:6.1}s]   {what} (took {:.1}s)",
            self.t0.elapsed().as_secs_f64(),
            self.step.elapsed().as_secs_f64()
        );
    }
}

fn demo(p: &mut Progress) -> Result<()> {
    let workload = Workload::dummy();
    let wait = Duration::from_secs(60);

    p.start("starting a two-node Corosync/Pacemaker cluster in network namespaces");
    let cluster = Cluster::start(ClusterOptions::new(2))?;
    let (a, b) = ("node1", "node2");
    p.done(&format!(
        "cluster {} online: {a}={} {b}={} (root {})",
        cluster.id(),
        cluster.addr(a)?,
        cluster.addr(b)?,
        cluster.root().display()
    ));

    p.start(&format!(
        "creating resource {} ({})",
        workload.id, workload.what
    ));
    workload.prepare(&cluster)?;
    cluster.add_resource(a, workload.cib_xml)?;
    let m = cluster.wait_for(
        a,
        crm::Expect::new(format!("{} started", workload.id), move |m| {
            m.resource(workload.id)
                .is_some_and(|r| r.active && r.role == "Started")
        }),
        wait,
    )?;
    let victim = m
        .resource(workload.id)
        .and_then(|r| r.nodes.first().cloned())
        .context("resource has no node")?;
    let survivor = if victim == a { b } else { a };
    p.done(&format!("{} started on {victim}", workload.id));
    println!("{}", cluster.crm_mon_text(a)?);

    p.start(&format!("crashing {victim} (SIGKILL of all its processes)"));
    let killed = cluster.crash(&victim)?;
    p.done(&format!("killed {} processes of {victim}", killed.len()));

    p.start(&format!(
        "waiting for {survivor} to fence {victim} and recover {}",
        workload.id
    ));
    cluster.wait_for(survivor, crm::fenced(&victim), wait)?;
    p.done(&format!("{victim} fenced"));
    p.start(&format!("waiting for {} on {survivor}", workload.id));
    cluster.wait_for(
        survivor,
        crm::resource_started_on(workload.id, survivor),
        wait,
    )?;
    p.done(&format!("{} recovered on {survivor}", workload.id));
    println!("{}", cluster.crm_mon_text(survivor)?);

    p.start(&format!("powering {victim} back on"));
    cluster.power_on(&victim, wait)?;
    cluster.wait_for(survivor, crm::all_online(&cluster.node_names()), wait)?;
    p.done("both nodes online again");
    println!("{}", cluster.crm_mon_text(survivor)?);

    p.start("tearing everything down");
    let netns = cluster.netns_names();
    let root = cluster.root().to_path_buf();
    let mut pids = Vec::new();
    for n in cluster.node_names() {
        pids.push(cluster.holder_pid(&n)?);
        pids.extend(cluster.node_pids(&n)?);
    }
    cluster.stop();
    let alive: Vec<i32> = pids.into_iter().filter(|&p| process::alive(p)).collect();
    anyhow::ensure!(alive.is_empty(), "processes left behind: {alive:?}");
    let leftover_ns: Vec<_> = netns
        .iter()
        .filter(|n| std::path::Path::new("/run/netns").join(n).exists())
        .collect();
    anyhow::ensure!(
        leftover_ns.is_empty(),
        "namespaces left behind: {leftover_ns:?}"
    );
    anyhow::ensure!(!root.exists(), "{} left behind", root.display());
    p.done("no namespace, process or temp dir left");
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = warden_harness::teardown_on_signals() {
        eprintln!("warden-demo: {e:#}");
        return ExitCode::FAILURE;
    }
    let mut p = Progress::new();
    match demo(&mut p) {
        Ok(()) => {
            println!("demo finished in {:.1}s", p.t0.elapsed().as_secs_f64());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("warden-demo failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}
