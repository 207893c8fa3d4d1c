//! A daemon killed (SIGKILL) at each step of a force, a start and a join:
//! the next daemon adopts the etcd it finds (with or without a PID file),
//! finishes or undoes the interrupted step, and the pair ends with two
//! voters, one etcd per node (the one its daemon reports), every
//! acknowledged write kept and no watch stream delivering a revision twice.
//!
//! The daemon is armed through `ETCD_WARDEN_KILL_AT` (the daemon's
//! `kill_point` module) and started again by the test 2 s after its death,
//! as systemd's `Restart=on-failure` with `RestartSec=2s` does. Each cycle:
//! node1's daemon armed at a step of the force, node2 loses power and is
//! fenced, node1 forces (its daemon dies at the step and comes back), node1
//! takes writes alone; node2 powers on armed at a step of its return (or
//! node1 armed at the step that adds node2 as a learner); two voters again.

mod failover_support;

use std::time::{Duration, Instant};

use failover_support::{FAILOVER, OrFail, SETTLE, healthy, wait_acks_everywhere};
use warden_harness::crm;
use warden_integration::twonode::{Topology, WardenCluster, poll};
use warden_integration::watcher::Watcher;
use warden_integration::writer::Writer;

const PREFIX: &str = "/kill-points";
/// systemd's `RestartSec=` in the shipped unit.
const RESTART_SEC: Duration = Duration::from_secs(2);

/// Where a daemon is armed in one cycle.
struct Cycle {
    /// node1's step of the force.
    force: &'static str,
    /// The step of node2's return: on node2 itself, or (for
    /// `learner-added`) on node1.
    rejoin: &'static str,
}

/// The etcd processes running in `node`'s network namespace: an executable
/// named etcd run with `--config-file` (as a daemon starts it, whichever
/// daemon did; the OCF agent, also named etcd, runs with an action).
fn etcd_processes(w: &WardenCluster, node: &str) -> anyhow::Result<Vec<i64>> {
    let holder = w.c.holder_pid(node)?;
    let netns = std::fs::read_link(format!("/proc/{holder}/ns/net"))?;
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i64>().ok())
        else {
            continue;
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let is_etcd = exe.file_name().and_then(|n| n.to_str()) == Some("etcd")
            && cmdline.split(|b| *b == 0).any(|a| a == b"--config-file");
        let ns = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap_or_default();
        if is_etcd && ns == netns && warden_harness::process::alive(pid as i32) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// One etcd runs on `node` and it is the one its daemon reports.
fn one_adopted_etcd(w: &WardenCluster, node: &str) -> anyhow::Result<()> {
    let reported = poll(
        &format!("{node}'s daemon to report etcd running"),
        FAILOVER,
        || w.etcd_pid(node),
    )?;
    let running = etcd_processes(w, node)?;
    anyhow::ensure!(
        running == [reported],
        "{node} runs etcd processes {running:?}; its daemon reports {reported}\n{}",
        w.daemon_log_tail(node)
    );
    Ok(())
}

/// Waits until the daemon `pid` on `node` killed itself at `point`, then
/// starts a plain daemon there after systemd's restart delay.
fn died_at_and_restarted(
    w: &WardenCluster,
    node: &str,
    pid: i32,
    point: &str,
) -> anyhow::Result<()> {
    poll(
        &format!("{node}'s daemon to die at {point}"),
        SETTLE,
        || {
            warden_harness::process::reap(pid);
            Ok((!warden_harness::process::alive(pid)).then_some(()))
        },
    )?;
    let said = format!("names {point}: killing this daemon");
    anyhow::ensure!(
        w.daemon_log(node).contains(&said),
        "{node}'s daemon (PID {pid}) ended without reaching {point}\n{}",
        w.daemon_log_tail(node)
    );
    eprintln!("{node}: daemon killed at {point}");
    let dead = Instant::now();
    while dead.elapsed() < RESTART_SEC {
        std::thread::sleep(RESTART_SEC - dead.elapsed());
    }
    w.spawn_daemon(node)?;
    Ok(())
}

fn cycle(w: &WardenCluster, writer: &Writer, c: &Cycle) -> anyhow::Result<()> {
    let all = w.nodes();
    let (survivor, victim) = ("node1", "node2");
    let armed = w.rearm_daemon(survivor, c.force)?;
    // node2 loses power and is fenced; node1's daemon dies inside the force.
    w.c.crash(victim)?;
    let t_dead = Instant::now();
    w.c.wait_for(survivor, crm::fenced(victim), FAILOVER)?;
    died_at_and_restarted(w, survivor, armed, c.force)?;
    writer.wait_ack_after(Some(survivor), t_dead, FAILOVER)?;
    w.wait_voters(survivor, &[survivor.to_string()], FAILOVER)?;
    one_adopted_etcd(w, survivor)?;
    eprintln!(
        "{}: node1 writes alone {:.1} s after node2 lost power",
        c.force,
        t_dead.elapsed().as_secs_f64()
    );

    // node2 powers on; one daemon dies at a step of its return.
    let t_boot = Instant::now();
    if c.rejoin == "learner-added" {
        let armed = w.rearm_daemon(survivor, c.rejoin)?;
        w.boot(victim, SETTLE)?;
        died_at_and_restarted(w, survivor, armed, c.rejoin)?;
    } else {
        w.c.power_on_with(victim, SETTLE, || {
            w.spawn_daemon_killed_at(victim, c.rejoin).map(|_| ())
        })?;
        let armed = w
            .daemon_pid(victim)
            .ok_or_else(|| anyhow::anyhow!("no daemon on {victim}"))?;
        died_at_and_restarted(w, victim, armed, c.rejoin)?;
    }
    w.wait_voters(survivor, &all, SETTLE)?;
    w.wait_started(&all, SETTLE)?;
    let healed = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), healed, FAILOVER)?;
        one_adopted_etcd(w, n)?;
    }
    eprintln!(
        "{}: two voters and writes on both {:.1} s after node2 powered on",
        c.rejoin,
        t_boot.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run(cycles: &[Cycle]) {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let watcher = Watcher::on_every_node(&w, PREFIX).or_fail(&w);
    let writer = w.writer(PREFIX, &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    for c in cycles {
        cycle(&w, &writer, c).or_fail(&w);
    }
    let fences = w.fence_count("node1", "node1").or_fail(&w);
    assert_eq!(fences, 0, "node1, the survivor, was fenced");
    let acks = writer.finish();
    w.check_writes(&acks, PREFIX, &all).or_fail(&w);
    let report = watcher.finish_checked(&w, PREFIX, SETTLE).or_fail(&w);
    eprintln!(
        "{} acknowledged writes checked; watches: {}",
        acks.len(),
        report.summary()
    );
    archived_nothing_acknowledged(&w);
    w.c.stop();
}

/// node1, the survivor, holds the newest writes throughout: it never
/// archives its data.
fn archived_nothing_acknowledged(w: &WardenCluster) {
    let archives = w.archives("node1").or_fail(w);
    assert!(archives.is_empty(), "node1 archived data: {archives:?}");
}

#[test]
fn a_daemon_killed_inside_a_force_or_a_rejoin_is_adopted_and_finishes_it() {
    run(&[
        Cycle {
            force: "force-intent-recorded",
            rejoin: "archive-done",
        },
        Cycle {
            force: "force-stopped",
            rejoin: "join-recorded",
        },
    ]);
}

#[test]
fn a_daemon_killed_between_spawning_etcd_and_recording_it_is_adopted() {
    run(&[
        Cycle {
            force: "start-spawned",
            rejoin: "start-spawned",
        },
        Cycle {
            force: "force-restarted",
            rejoin: "learner-added",
        },
    ]);
}
