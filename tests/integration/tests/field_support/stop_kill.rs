//! The daemon dies in the middle of a stop: `pcs node standby node-b`, and
//! while the OCF agent's stop is in flight the daemon on node-b is killed
//! (SIGKILL, as systemd's watchdog does to a wedged daemon). The agent's
//! connection closes without an answer; systemd restarts the daemon, which
//! adopts etcd, and the agent sends the stop again to it. The stop
//! succeeds: no failed action, no fence (a failed stop is a fence), and the
//! node rejoins as a voter after `pcs node unstandby`. Every acknowledged
//! write of the scenario's writer is checked at the end.

use std::time::{Duration, Instant, SystemTime};

use warden_harness::field::{FieldCluster, etcd_active_on, etcd_started_on};
use warden_harness::process;

use super::{
    assert_no_failed_action, assert_no_new_fence, begin, check_writes, wait_all_voters, watchdog,
};

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()
}

/// The attempt whose kill landed while the stop was in flight.
struct Killed {
    /// When the standby was asked for.
    start: Instant,
    /// The killed daemon, and systemd's restart count before the kill.
    pid: u32,
    restarts: u32,
    /// The restarted daemon, and the restart count after.
    new_pid: u32,
    new_restarts: u32,
    /// From the standby to the kill, and to etcd seen stopped.
    kill_at: Duration,
    stopped_at: Duration,
}

/// `pcs node standby node-b`, the daemon on node-b killed while the agent's
/// stop is in flight: the stop must still succeed, without a fence.
pub fn stop_kill(c: &FieldCluster) {
    let (w, fences_before) = begin(c, "/field-stop-kill");
    // The kill follows the agent's start by milliseconds, but the kill can
    // still miss the stop: the old daemon may have answered before the
    // agent exited, or the whole stop may run between two looks of the
    // watcher. Such an attempt tests nothing, so the node is taken out of
    // standby and the scenario is tried again.
    const ATTEMPTS: u32 = 3;
    // Stopped, not merely no longer "Started": the stop has ended.
    let wait_stopped = || {
        c.wait_crm(
            "node-a",
            "etcd stopped on node-b (standby)",
            Duration::from_secs(150),
            |m| !etcd_active_on(m, "node-b") && etcd_started_on(m, "node-a"),
        )
        .unwrap()
    };
    let unstandby = || {
        c.node_sh_ok("node-b", "pcs node unstandby node-b").unwrap();
        c.wait_cluster_healthy(Duration::from_secs(180)).unwrap();
        wait_all_voters(c, "node-a", Duration::from_secs(180)).unwrap();
    };
    let mut attempt = 0;
    let killed = loop {
        attempt += 1;
        let (pid, restarts) = watchdog::main_pid(c, "node-b").unwrap();
        let start = Instant::now();
        let standby_at = SystemTime::now();
        // One shell inside the node: the watcher runs before the standby is
        // even asked for, so that the kill follows the agent's start by
        // milliseconds (a second exec into the node can come after a fast
        // stop has ended). The agent process running `stop` is the stop in
        // flight (the bracket keeps the pattern from matching this shell's
        // own command line).
        let killed = c
            .node_sh(
                "node-b",
                "( for i in $(seq 6000); do
                     if pgrep -f 'resource.d/etcd-warden/etc[d] stop' >/dev/null; then
                       systemctl kill --kill-whom=main --signal=SIGKILL etcd-warden && date +%s.%N && exit 0
                     fi
                     sleep 0.01
                   done
                   exit 1 ) &
                 watcher=$!
                 pcs node standby node-b >/dev/null || { kill $watcher; exit 2; }
                 wait $watcher",
            )
            .unwrap();
        assert_ne!(
            killed.status.code(),
            Some(2),
            "pcs node standby node-b failed: {}",
            killed.stderr
        );
        if !killed.success() && attempt < ATTEMPTS {
            // The whole stop ran between two looks of the watcher.
            eprintln!(
                "field_stop_kill: attempt {attempt}: no stop of the etcd agent seen in flight; trying again"
            );
            wait_stopped();
            unstandby();
            continue;
        }
        assert!(
            killed.success(),
            "no stop of the etcd agent seen in flight on node-b (attempt {attempt} of {ATTEMPTS}): {}{}",
            killed.stdout,
            killed.stderr
        );
        // The node's clock is the host's: the kill's own time, not when the
        // shell above returned (seconds later on a loaded machine).
        let kill_at = killed
            .stdout
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(|t| Duration::try_from_secs_f64(t).ok())
            .and_then(|t| t.checked_sub(since_epoch(standby_at)))
            .unwrap_or_else(|| start.elapsed());

        wait_stopped();
        let stopped_at = since_epoch(SystemTime::now()).saturating_sub(since_epoch(standby_at));
        assert_no_new_fence(c, fences_before, "a daemon killed during a stop");
        assert_no_failed_action(c);
        let (new_pid, new_restarts) = process::poll(
            "the daemon on node-b restarted",
            Duration::from_secs(60),
            Duration::from_millis(300),
            || match watchdog::main_pid(c, "node-b")? {
                (p, r) if r > restarts && p != 0 && p != pid => Ok((p, r)),
                (p, r) => Err(format!("MainPID={p} NRestarts={r}")),
            },
        )
        .unwrap();
        let journal_count = |filter: String| {
            c.node_sh_ok(
                "node-b",
                &format!("journalctl {filter} --no-pager -o cat | wc -l"),
            )
            .unwrap()
            .stdout
            .trim()
            .parse::<u32>()
            .unwrap_or(0)
        };
        // The stop was finished by the restarted daemon: the new process
        // logged a Stop action of its own.
        if journal_count(format!("_PID={new_pid} F_ACTION=Stop")) >= 1 {
            break Killed {
                start,
                pid,
                new_pid,
                restarts,
                new_restarts,
                kill_at,
                stopped_at,
            };
        }
        let answered = journal_count(format!("_PID={pid} F_ACTION=Stop 'MESSAGE=action done'"));
        assert!(
            answered >= 1 && attempt < ATTEMPTS,
            "the restarted daemon (PID {new_pid}) never received the stop again \
             (attempt {attempt} of {ATTEMPTS}; the killed daemon had answered it: {})",
            answered >= 1
        );
        eprintln!(
            "field_stop_kill: attempt {attempt}: the stop had ended before the kill \
             ({:.1} s after the standby); trying again",
            kill_at.as_secs_f64()
        );
        unstandby();
    };

    unstandby();
    let voter_at = killed.start.elapsed();
    let after = Instant::now();
    w.wait_ack_after(Some("node-b"), after, Duration::from_secs(60))
        .unwrap();
    assert_no_new_fence(c, fences_before, "a daemon killed during a stop");
    assert_no_failed_action(c);
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_stop_kill: standby -> daemon killed mid-stop {:.1} s (PID {} -> {}, NRestarts \
         {} -> {}) -> etcd stopped, seen by crm_mon {:.1} s, no fence; \
         -> unstandby, voter again {:.1} s; {n} acknowledged writes, all present",
        killed.kill_at.as_secs_f64(),
        killed.pid,
        killed.new_pid,
        killed.restarts,
        killed.new_restarts,
        killed.stopped_at.as_secs_f64(),
        voter_at.as_secs_f64()
    );
}
