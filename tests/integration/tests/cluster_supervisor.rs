//! The survivor's own daemon dies while it holds the only copy of the
//! newest writes: node2 lost power and was fenced, node1 forced a
//! one-member cluster and took writes, then node1's daemon is SIGKILLed and
//! stays down for 60 s while node2 powers on. The OCF agent judges etcd
//! itself meanwhile (monitor passes a healthy etcd within
//! `daemon_down_grace`), so Pacemaker neither recovers etcd nor fences
//! node1; writes on node1 go on throughout; once the daemon is back the
//! pair ends with two voters and every acknowledged write.
//!
//! A writer per node writes to its own node's etcd all along, as in the
//! failover scenarios.
//!
//! Issue 29: a SIGTERMed daemon (`systemctl restart etcd-warden`, an
//! upgrade, needrestart) on each node in turn and on both at once leaves
//! the Pacemaker-owned etcd serving, and the next daemon adopts it: same
//! etcd PID, nobody fenced, no write gap beyond 2 s, every write kept.

mod failover_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use failover_support::{FAILOVER, OrFail, SETTLE, fail, healthy, wait_acks_everywhere};
use warden_harness::crm;
use warden_integration::twonode::{Topology, WardenCluster, is_etcd, poll};
use warden_integration::writer::longest_gap;

/// How long the survivor's daemon stays down.
const DAEMON_DOWN: Duration = Duration::from_secs(60);

/// Whether Pacemaker, asked on `node`, shows etcd active and not failed
/// there.
fn etcd_fine_on(w: &WardenCluster, node: &str) -> bool {
    w.c.crm_mon(node).is_ok_and(|m| {
        m.resources
            .iter()
            .any(|r| is_etcd(r) && r.active && !r.failed && r.nodes.iter().any(|n| n == node))
    })
}

#[test]
fn a_dead_daemon_on_the_survivor_fences_nobody_and_writes_go_on() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let (survivor, victim) = ("node1", "node2");
    let writer = w.writer("/supervisor", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);

    // node2 loses power; Pacemaker fences it; node1 goes on alone.
    w.c.crash(victim).or_fail(&w);
    let t_dead = Instant::now();
    w.c.wait_for(survivor, crm::fenced(victim), FAILOVER)
        .or_fail(&w);
    writer
        .wait_ack_after(Some(survivor), t_dead, FAILOVER)
        .or_fail(&w);
    w.wait_voters(survivor, &[survivor.to_string()], FAILOVER)
        .or_fail(&w);
    let fenced = (
        w.fence_count(survivor, survivor).or_fail(&w),
        w.fence_count(survivor, victim).or_fail(&w),
    );
    let etcd = w.etcd_pid(survivor).or_fail(&w).expect("etcd on node1");

    // node1's daemon dies (SIGKILL, by its PID) and stays down.
    let daemon = w.daemon_pid(survivor).expect("a daemon on node1");
    let t_kill = Instant::now();
    w.c.exec_ok(survivor, &["kill", "-KILL", &daemon.to_string()])
        .or_fail(&w);
    // node2 powers on meanwhile (its own daemon first, as at boot).
    w.boot(victim, SETTLE).or_fail(&w);
    let booted = t_kill.elapsed();
    // Throughout the outage: nobody fenced, etcd on node1 never failed or
    // stopped by Pacemaker, node1 taking writes.
    let mut checks = 0;
    while t_kill.elapsed() < DAEMON_DOWN {
        assert_eq!(
            (
                w.fence_count(survivor, survivor).or_fail(&w),
                w.fence_count(survivor, victim).or_fail(&w)
            ),
            fenced,
            "a node was fenced while node1's daemon was down\n{}",
            w.c.crm_mon_text(survivor).unwrap_or_default()
        );
        assert!(
            etcd_fine_on(&w, survivor),
            "Pacemaker shows etcd failed or stopped on node1 with its daemon down\n{}",
            w.c.crm_mon_text(survivor).unwrap_or_default()
        );
        let t = Instant::now();
        writer
            .wait_ack_after(Some(survivor), t, Duration::from_secs(10))
            .or_fail(&w);
        checks += 1;
    }
    let t_back = Instant::now();

    // The daemon is back: it adopts the etcd it left, and the pair heals.
    w.spawn_daemon(survivor).or_fail(&w);
    let adopted = poll("the new daemon to report etcd", FAILOVER, || {
        w.etcd_pid(survivor)
    })
    .or_fail(&w);
    assert_eq!(
        adopted, etcd,
        "etcd on node1 was restarted instead of adopted"
    );
    w.wait_started(&all, SETTLE).or_fail(&w);
    w.wait_voters(survivor, &all, SETTLE).or_fail(&w);
    let healed = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), healed, FAILOVER).or_fail(&w);
    }
    assert_eq!(
        (
            w.fence_count(survivor, survivor).or_fail(&w),
            w.fence_count(survivor, victim).or_fail(&w)
        ),
        fenced,
        "a node was fenced after node1's daemon came back"
    );

    let acks = writer.finish();
    let gap = longest_gap(&acks, Some(survivor), t_kill, t_back);
    let during = acks
        .iter()
        .filter(|a| a.node == survivor && a.at >= t_kill && a.at <= t_back)
        .count();
    eprintln!(
        "node1's daemon down {:.1} s (node2 booted after {:.1} s, {checks} checks): {during} \
         writes acknowledged by node1, longest gap {:.2} s",
        t_back.duration_since(t_kill).as_secs_f64(),
        booted.as_secs_f64(),
        gap.as_secs_f64()
    );
    assert!(
        gap < Duration::from_secs(5),
        "node1 stopped taking writes for {gap:?} while its daemon was down"
    );
    w.check_writes(&acks, "/supervisor", &all).or_fail(&w);
    w.c.stop();
}

/// The longest pause between acknowledged writes that issue 29 allows
/// while daemons are restarted (per node and for the cluster).
const RESTART_GAP: Duration = Duration::from_secs(2);
/// What systemd gives a stopping daemon (`TimeoutStopSec=` of the shipped
/// unit) before it SIGKILLs it; a daemon still there after this was not
/// stopped by its SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(45);
/// The daemon's log line when it exits and leaves etcd to the next one.
const LEFT_RUNNING: &str = "leaving etcd running for the next daemon to adopt";

/// How one node's daemon restart went.
struct Restarted {
    node: String,
    /// SIGTERM → the old daemon gone.
    exit: Duration,
    /// SIGTERM → the new daemon answers and reports the adopted etcd.
    down: Duration,
}

/// `systemctl restart etcd-warden` on each of `nodes` at the same time:
/// SIGTERM to the daemon (by the PID the harness recorded), its exit
/// awaited, etcd found still running, a new daemon started, and its status
/// awaited until it reports etcd with the PID in `etcd`.
fn restart_daemons(
    w: &WardenCluster,
    nodes: &[&str],
    etcd: &HashMap<String, i64>,
) -> anyhow::Result<Vec<Restarted>> {
    let one = |node: &str| -> anyhow::Result<Restarted> {
        let pid = w
            .daemon_pid(node)
            .ok_or_else(|| anyhow::anyhow!("no daemon on {node}"))?;
        let etcd_pid = etcd[node];
        let left_before = w.daemon_log(node).matches(LEFT_RUNNING).count();
        let t = Instant::now();
        // SIGTERM, then SIGKILL only after the grace (as systemd does).
        w.c.stop_process(node, pid, STOP_GRACE)?;
        let exit = t.elapsed();
        anyhow::ensure!(
            exit < STOP_GRACE,
            "{node}'s daemon (PID {pid}) did not exit on SIGTERM within {STOP_GRACE:?}"
        );
        anyhow::ensure!(
            w.daemon_log(node).matches(LEFT_RUNNING).count() > left_before,
            "{node}'s daemon did not log that it leaves etcd running\n{}",
            w.daemon_log_tail(node)
        );
        anyhow::ensure!(
            warden_harness::process::alive(i32::try_from(etcd_pid)?),
            "etcd (PID {etcd_pid}) on {node} did not outlive its SIGTERMed daemon\n{}",
            w.daemon_log_tail(node)
        );
        w.spawn_daemon(node)?;
        let adopted = poll(
            &format!("{node}'s new daemon to report etcd"),
            FAILOVER,
            || w.etcd_pid(node),
        )?;
        anyhow::ensure!(
            adopted == etcd_pid,
            "{node}'s etcd was restarted (PID {etcd_pid} → {adopted}) instead of adopted\n{}",
            w.daemon_log_tail(node)
        );
        Ok(Restarted {
            node: node.to_string(),
            exit,
            down: t.elapsed(),
        })
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = nodes.iter().map(|n| s.spawn(move || one(n))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|e| Err(anyhow::anyhow!("a restart thread panicked: {e:?}")))
            })
            .collect()
    })
}

#[test]
fn a_sigtermed_daemon_leaves_etcd_serving_and_the_next_one_adopts_it() {
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer("/restart", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let etcd: HashMap<String, i64> = all
        .iter()
        .map(|n| {
            let pid = w.etcd_pid(n).or_fail(&w);
            (n.clone(), pid.unwrap_or_else(|| panic!("etcd runs on {n}")))
        })
        .collect();
    let fences = |w: &WardenCluster| -> Vec<usize> {
        all.iter()
            .map(|n| w.fence_count("node1", n).or_fail(w))
            .collect()
    };
    let fenced = fences(&w);

    let start = Instant::now();
    let rounds: [&[&str]; 3] = [&["node1"], &["node2"], &["node1", "node2"]];
    let mut report = Vec::new();
    for round in rounds {
        let t_round = Instant::now();
        let restarted = restart_daemons(&w, round, &etcd).or_fail(&w);
        let t_back = Instant::now();
        // Both nodes take writes again, through the etcd they had all along.
        for n in &all {
            writer.wait_ack_after(Some(n), t_back, FAILOVER).or_fail(&w);
        }
        for n in &all {
            assert_eq!(
                w.etcd_pid(n).or_fail(&w),
                Some(etcd[n]),
                "{n}'s etcd changed after restarting the daemons of {round:?}"
            );
            assert!(
                etcd_fine_on(&w, n),
                "Pacemaker shows etcd failed or stopped on {n} after restarting the daemons \
                 of {round:?}\n{}",
                w.c.crm_mon_text(n).unwrap_or_default()
            );
        }
        assert_eq!(
            fences(&w),
            fenced,
            "a node was fenced when the daemons of {round:?} were restarted\n{}",
            w.c.crm_mon_text("node1").unwrap_or_default()
        );
        report.push((round, t_round, Instant::now(), restarted));
    }
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    let end = Instant::now();
    assert_eq!(fences(&w), fenced, "a node was fenced");

    let acks = writer.finish();
    for (round, from, to, restarted) in &report {
        let per: Vec<String> = all
            .iter()
            .map(|n| {
                let g = longest_gap(&acks, Some(n), *from, *to);
                format!("{n} {:.2} s", g.as_secs_f64())
            })
            .collect();
        let downs: Vec<String> = restarted
            .iter()
            .map(|r| {
                format!(
                    "{}: exited {:.2} s, back {:.2} s",
                    r.node,
                    r.exit.as_secs_f64(),
                    r.down.as_secs_f64()
                )
            })
            .collect();
        eprintln!(
            "restart of {round:?} ({}): longest write gap {}; cluster {:.2} s",
            downs.join("; "),
            per.join(", "),
            longest_gap(&acks, None, *from, *to).as_secs_f64()
        );
    }
    let mut gaps = Vec::new();
    for n in &all {
        gaps.push((n.clone(), longest_gap(&acks, Some(n), start, end)));
    }
    gaps.push(("cluster".to_string(), longest_gap(&acks, None, start, end)));
    eprintln!(
        "three rounds of daemon restarts in {:.1} s, {} writes acknowledged: longest write gap {}",
        end.duration_since(start).as_secs_f64(),
        acks.iter().filter(|a| a.at >= start && a.at <= end).count(),
        gaps.iter()
            .map(|(n, g)| format!("{n} {:.2} s", g.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (n, g) in &gaps {
        assert!(
            *g <= RESTART_GAP,
            "{n}: a write gap of {g:?} while daemons restarted (bound {RESTART_GAP:?})"
        );
    }
    w.check_writes(&acks, "/restart", &all).or_fail(&w);
    warden_integration::writer::check_real_time_order(&acks).or_fail(&w);
    w.c.stop();
}

/// Whether `node`'s Pacemaker lists a failed start of etcd on `on` with the
/// agent's reason for "no daemon answered"; `false` while crm_mon does not
/// answer (the cluster busy with the node's join).
fn start_failed_without_daemon(w: &WardenCluster, node: &str, on: &str) -> anyhow::Result<bool> {
    let Ok(m) = w.c.crm_mon(node) else {
        return Ok(false);
    };
    let doc = crm_xml::parse(&m.raw)?;
    Ok(doc.failures.iter().any(|f| {
        f.node == on
            && f.task.as_deref() == Some("start")
            && f.exit_reason
                .as_deref()
                .is_some_and(|r| r.contains(warden_api::DAEMON_UNREACHABLE))
    }))
}

/// node2 boots while its own daemon is down (systemd still restarting it,
/// a slow start after a crash loop): Pacemaker's start of etcd there fails,
/// the agent finding no daemon, and a failed start keeps etcd off the node
/// until the failure expires (`failure-timeout`, 10 min). The stop that
/// follows succeeds without a record of etcd (no etcd process runs in the
/// node's namespace), so node2 is not fenced for its daemon. Once node2's
/// daemon answers, it clears that failure; Pacemaker starts etcd again and
/// node2 is a voter, nobody is fenced, every write is kept. On failure the
/// message carries node1's Pacemaker log lines on fencing and etcd's
/// operations.
#[test]
fn a_start_that_failed_without_its_daemon_is_retried_once_the_daemon_is_back() {
    const PREFIX: &str = "/start-without-daemon";
    let (w, _) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer(PREFIX, &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let t_dead = Instant::now();
    w.crash_fenced("node2", "node1", SETTLE).or_fail(&w);
    writer
        .wait_ack_after(Some("node1"), t_dead, FAILOVER)
        .or_fail(&w);
    let fences = w.fence_count("node1", "node1").or_fail(&w);

    // node2 boots; its daemon does not start with it.
    w.c.power_on_with("node2", SETTLE, || Ok(())).or_fail(&w);
    poll(
        "Pacemaker's start of etcd on node2 to fail without its daemon",
        SETTLE,
        || Ok(start_failed_without_daemon(&w, "node1", "node2")?.then_some(())),
    )
    .unwrap_or_else(|e| {
        let log =
            w.c.log_dir("node1")
                .ok()
                .and_then(|d| std::fs::read_to_string(d.join("log-pacemaker/pacemaker.log")).ok())
                .unwrap_or_default();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| {
                ["fence", "Fence", "stonith", "node2", "etcd_"]
                    .iter()
                    .any(|k| l.contains(k))
                    && (l.contains("error") || l.contains("warning") || l.contains("notice"))
            })
            .collect();
        let tail = lines[lines.len().saturating_sub(60)..].join("\n");
        fail(&w, anyhow::anyhow!("{e:#}\nnode1's pacemaker.log:\n{tail}"))
    });
    let t_back = Instant::now();
    w.spawn_daemon("node2").or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    let voter = t_back.elapsed();
    assert!(
        !start_failed_without_daemon(&w, "node1", "node2").or_fail(&w),
        "the failure is still listed"
    );
    assert_eq!(
        w.fence_count("node1", "node1").or_fail(&w),
        fences,
        "node1 was fenced"
    );
    let t_up = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), t_up, SETTLE).or_fail(&w);
    }
    let acks = writer.finish();
    w.check_writes(&acks, PREFIX, &all).or_fail(&w);
    eprintln!(
        "node2's daemon back -> two voters {:.1}s; {} acknowledged writes checked",
        voter.as_secs_f64(),
        acks.len()
    );
    w.c.stop();
}
