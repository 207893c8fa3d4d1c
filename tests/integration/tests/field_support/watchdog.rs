//! The systemd watchdog: the daemon on one node is stopped with SIGSTOP, so
//! it no longer pings the watchdog; systemd must kill and restart it within
//! `WatchdogSec` (plus `RestartSec`), while etcd keeps serving: both members
//! stay voters, the writers keep getting acknowledgements, and nobody is
//! fenced. Every acknowledged write of the scenario's own writer is checked
//! at the end.

use std::time::{Duration, Instant};

use warden_harness::field::FieldCluster;
use warden_harness::process;

use super::{
    assert_no_failed_action, assert_no_new_fence, begin, check_writes, ready, wait_all_voters,
    writer,
};

/// The unit's WatchdogSec plus RestartSec, and a margin for a loaded machine.
const RESTART_BOUND: Duration = Duration::from_secs(15 + 2 + 25);

/// The etcd PID in the daemon's PID file on `node`.
pub fn etcd_pid(c: &FieldCluster, node: &str) -> u32 {
    let out = c
        .node_sh_ok(node, "cat /var/lib/etcd-warden/etcd.pid")
        .unwrap()
        .stdout;
    out.split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("malformed etcd PID file on {node}: {out:?}"))
}

/// The daemon's MainPID and NRestarts on `node`.
pub fn main_pid(c: &FieldCluster, node: &str) -> Result<(u32, u32), String> {
    let out = c
        .node_sh_ok(
            node,
            "systemctl show etcd-warden -p MainPID -p NRestarts --value",
        )
        .map_err(|e| format!("{e:#}"))?
        .stdout;
    let v: Vec<u32> = out.lines().map(|l| l.trim().parse().unwrap_or(0)).collect();
    Ok((
        v.first().copied().unwrap_or(0),
        v.get(1).copied().unwrap_or(0),
    ))
}

/// The daemon on node-b SIGSTOPped: systemd's watchdog kills and restarts
/// it, the new daemon adopts etcd, nothing fails over.
pub fn watchdog(c: &FieldCluster) {
    let (w, fences_before) = begin(c, "/field-watchdog");

    let (pid, restarts) = main_pid(c, "node-b").unwrap();
    let etcd_before = etcd_pid(c, "node-b");
    let stop = Instant::now();
    c.node_sh_ok(
        "node-b",
        "systemctl kill --kill-whom=main --signal=SIGSTOP etcd-warden",
    )
    .unwrap();
    let (new_pid, new_restarts) = process::poll(
        "systemd to restart the stopped daemon on node-b",
        RESTART_BOUND,
        Duration::from_millis(500),
        || {
            // A fenced node-b has no systemd to ask: the poll then times
            // out naming that, and the fence check below says why.
            let (p, r) = main_pid(c, "node-b")?;
            let active = c
                .node_sh("node-b", "systemctl is-active etcd-warden")
                .map(|o| o.stdout.trim() == "active")
                .unwrap_or(false);
            if r > restarts && p != 0 && p != pid && active {
                Ok((p, r))
            } else {
                Err(format!("MainPID={p} NRestarts={r} active={active}"))
            }
        },
    )
    .unwrap();
    let restarted = stop.elapsed();
    let journal = c
        .node_sh_ok(
            "node-b",
            "journalctl -u etcd-warden --no-pager -o cat | grep -i watchdog",
        )
        .unwrap()
        .stdout;
    assert!(
        !journal.trim().is_empty(),
        "no watchdog line in the journal"
    );
    // The same etcd process serves on: the new daemon adopted it, neither
    // systemd nor Pacemaker restarted it.
    let adopted = c
        .node_sh_ok(
            "node-b",
            "journalctl -u etcd-warden --no-pager -o cat | grep -c 'adopted the etcd'",
        )
        .unwrap()
        .stdout;
    assert!(
        adopted.trim().parse::<u32>().unwrap_or(0) >= 1,
        "the restarted daemon did not adopt etcd"
    );

    // etcd kept serving on both nodes through the restart: writes after it
    // are acknowledged by both, both members are voters, no fence happened.
    let after = Instant::now();
    w.wait_ack_after(Some("node-b"), after, Duration::from_secs(60))
        .unwrap();
    w.wait_ack_after(Some("node-a"), after, Duration::from_secs(60))
        .unwrap();
    wait_all_voters(c, "node-a", Duration::from_secs(60)).unwrap();
    assert_eq!(
        etcd_pid(c, "node-b"),
        etcd_before,
        "etcd on node-b was restarted"
    );
    // No failed action either (a monitor that met the hung daemon and
    // failed would be recorded here even once recovered).
    assert_no_failed_action(c);
    assert_no_new_fence(c, fences_before, "a watchdog restart must not fence anyone");
    let acks = w.acks();
    let longest_gap = |node: &str| {
        let ts: Vec<Instant> = acks
            .iter()
            .filter(|a| a.node == node && a.at > stop)
            .map(|a| a.at)
            .collect();
        ts.windows(2)
            .map(|p| p[1].duration_since(p[0]))
            .max()
            .unwrap_or_default()
    };
    let (gap_a, gap_b) = (longest_gap("node-a"), longest_gap("node-b"));
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_watchdog: SIGSTOP -> restarted (PID {pid} -> {new_pid}, NRestarts {restarts} -> {new_restarts}) \
         in {:.1} s; longest write gap node-a {:.1} s, node-b {:.1} s; {n} acknowledged writes, all present",
        restarted.as_secs_f64(),
        gap_a.as_secs_f64(),
        gap_b.as_secs_f64()
    );
}
