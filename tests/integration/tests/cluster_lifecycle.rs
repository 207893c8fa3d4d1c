//! A forced cluster whose new epoch is still an intent, on real Corosync,
//! Pacemaker, fencing and etcd, with an `etcd-warden daemon` in every node.
//!
//! node2 loses power and is fenced; node1 forces a one-member cluster. Its
//! daemon writes the new epoch down first as `pending_epoch` in its state
//! file; it becomes the data's `epoch` only at the first pass whose
//! Pacemaker view (crm_mon) answered and whose quorate member list shows
//! node1 alone. Here Pacemaker's view is unavailable on node1 right after
//! the force (its CIB manager, `pacemaker-based`, is stopped with SIGSTOP,
//! as a CIB that does not answer leaves it), so the state file keeps the
//! old epoch while node1 acknowledges writes alone. Then node1 loses power
//! and comes back without its member directory (its volume not mounted),
//! and node2 boots with the older data.
//!
//! node1's writes exist only in node1's missing data: no node may serve,
//! and node1's daemon names the command that brings that data back and
//! says it may hold writes of the unconfirmed epoch. Once the volume is
//! mounted again the pair recovers by itself with every write node1
//! acknowledged alone. Watches on both nodes see one history throughout.

mod failover_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;
use warden_harness::process::signal;
use warden_integration::twonode::{Topology, WardenCluster, poll};
use warden_integration::watcher::Watcher;
use warden_integration::writer::{Ack, Writer, check_all_present};

use failover_support::{FAILOVER, OrFail, SETTLE, fail, healthy, wait_acks_everywhere};

/// The writers' and watchers' key prefix.
const PREFIX: &str = "/intent";

/// The daemon's state file of `node`.
fn state_file(w: &WardenCluster, node: &str) -> PathBuf {
    w.state_dir(node).or_fail(w).join("failover-state.json")
}

/// `(epoch, pending_epoch)` as `node`'s state file holds them.
fn epochs(w: &WardenCluster, node: &str) -> anyhow::Result<(u64, Option<u64>)> {
    let path = state_file(w, node);
    let bytes = std::fs::read(&path)?;
    let v: Value = serde_json::from_slice(&bytes)?;
    Ok((
        v.get("epoch").and_then(Value::as_u64).unwrap_or(0),
        v.get("pending_epoch").and_then(Value::as_u64),
    ))
}

/// A process of a node stopped with SIGSTOP; continued on drop unless it
/// is gone (a power loss killed it), recognised by its PID and start time.
struct Stopped {
    pid: i32,
    start: Option<u64>,
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`), in clock ticks.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces; the fields after it are plain.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The parent of `pid` (field 4 of `/proc/PID/stat`).
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

impl Stopped {
    fn stop(pid: i32) -> anyhow::Result<Self> {
        let start = start_time(pid);
        signal(pid, Signal::SIGSTOP)?;
        Ok(Self { pid, start })
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if self.start.is_some() && start_time(self.pid) == self.start {
            let _ = signal(self.pid, Signal::SIGCONT);
        }
    }
}

/// node1's CIB manager: the child of the node's `pacemakerd` (as the
/// harness started it) whose executable is `pacemaker-based`, among the
/// processes of the node's mount namespace.
fn cib_manager(w: &WardenCluster, node: &str) -> anyhow::Result<i32> {
    let (_, pacemakerd) = w.c.daemon_pids(node)?;
    let pacemakerd =
        pacemakerd.ok_or_else(|| anyhow::anyhow!("{node}: the harness records no pacemakerd"))?;
    let found: Vec<i32> =
        w.c.node_pids(node)?
            .into_iter()
            .filter(|&p| parent(p) == Some(pacemakerd))
            .filter(|&p| {
                std::fs::read_link(format!("/proc/{p}/exe"))
                    .is_ok_and(|e| e.file_name().is_some_and(|n| n == "pacemaker-based"))
            })
            .collect();
    match found[..] {
        [pid] => Ok(pid),
        _ => anyhow::bail!(
            "{node}: pacemakerd {pacemakerd} has children {found:?} running pacemaker-based"
        ),
    }
}

/// The watches of `PREFIX` on every node of `w`, etcdctl's messages in the
/// cluster root.
fn watch(w: &WardenCluster) -> Watcher {
    Watcher::on_every_node(w, PREFIX).or_fail(w)
}

/// Fails unless nobody serves since `since` (node1's power loss): no write
/// answered after it, and no node's etcd answering a linearizable read
/// (when one does, says how many of `alone`, the writes node1 took alone,
/// it holds).
fn check_nobody_serves(
    w: &WardenCluster,
    writer: &Writer,
    watcher: &Watcher,
    alone: &[Ack],
    since: Instant,
) {
    let late: Vec<Ack> = writer.acks().into_iter().filter(|a| a.at > since).collect();
    let mut broken = Vec::new();
    if let Some(a) = late.first() {
        broken.push(format!(
            "{} writes acknowledged after node1's power loss (with node1's data missing), the first by {}: {} at revision {} ({:.1}s after the power loss)",
            late.len(),
            a.node,
            a.key,
            a.revision,
            a.at.duration_since(since).as_secs_f64()
        ));
    }
    for n in w.nodes() {
        if w.read(&n, "/warden-test/probe").is_ok() {
            // What that cluster holds of the writes node1 took alone.
            let held = match w.read(&n, PREFIX) {
                Ok(kvs) => match check_all_present(alone, &kvs) {
                    Ok(()) => format!("it holds all {} writes node1 took alone", alone.len()),
                    Err(e) => format!("of the writes node1 took alone: {e:#}"),
                },
                Err(e) => format!("reading {PREFIX} then failed: {e:#}"),
            };
            broken.push(format!(
                "{n}'s etcd answered a linearizable read as a quorate cluster; {held}"
            ));
        }
    }
    if broken.is_empty() {
        return;
    }
    let mut e = broken.join("; ");
    for n in w.nodes() {
        e.push_str(&format!(
            "\n{n}: {}",
            w.reason(&n).unwrap_or_else(|r| format!("no reason: {r:#}"))
        ));
        if let Ok((epoch, pending)) = epochs(w, &n) {
            e.push_str(&format!(
                " (state file: epoch {epoch}, pending_epoch {pending:?})"
            ));
        }
    }
    let report = watcher.report();
    e.push_str(&format!(
        "\nwriters: {}\nwatches: {}; {} failures: {:?}",
        writer.summary(),
        report.summary(),
        report.failures.len(),
        &report.failures[..report.failures.len().min(3)]
    ));
    fail(w, anyhow::anyhow!(e));
}

/// Where node1's member directory waits while its volume is not mounted.
fn unmounted(w: &WardenCluster, node: &str) -> PathBuf {
    w.c.node_dir(node).or_fail(w).join("unmounted-volume")
}

/// node2 is fenced, node1 forces a one-member cluster, and Pacemaker's
/// view on node1 is gone before the daemon could confirm the new epoch;
/// node1 takes writes alone, loses power, and comes back without its
/// member directory next to node2's older data. No node serves; node1's
/// daemon names the restore command and the unconfirmed epoch; with the
/// volume back the pair recovers with every write.
#[test]
fn a_force_whose_epoch_is_still_an_intent_keeps_the_writes_taken_alone() {
    let t0 = Instant::now();
    let (w, cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer(PREFIX, &all).or_fail(&w);
    let watcher = watch(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let (old_epoch, pending) = epochs(&w, "node1").or_fail(&w);
    assert_eq!(pending, None, "node1 has a pending epoch before any fault");
    let based = cib_manager(&w, "node1").or_fail(&w);

    // node2 loses power and is fenced; node1 forces. As soon as its state
    // file holds the intent, node1's CIB manager stops answering.
    w.c.crash("node2").or_fail(&w);
    let t_dead = Instant::now();
    let new_epoch = poll(
        "node1's state file to hold a pending epoch",
        FAILOVER,
        || Ok(epochs(&w, "node1")?.1.filter(|p| *p > old_epoch)),
    )
    .or_fail(&w);
    let stopped = Stopped::stop(based).or_fail(&w);
    let t_stop = Instant::now();
    eprintln!(
        "node1 forces epoch {new_epoch} (from {old_epoch}) {:.2}s after node2's power loss; pacemaker-based {based} stopped",
        t_dead.elapsed().as_secs_f64()
    );

    // node1 acknowledges writes alone while its epoch is an intent.
    poll("node1 to acknowledge 20 writes alone", FAILOVER, || {
        let n = writer
            .acks()
            .iter()
            .filter(|a| a.node == "node1" && a.sent > t_stop)
            .count();
        Ok((n >= 20).then_some(()))
    })
    .or_fail(&w);
    let on_disk = epochs(&w, "node1").or_fail(&w);
    assert_eq!(
        on_disk,
        (old_epoch, Some(new_epoch)),
        "node1 confirmed its forced epoch although its Pacemaker view was stopped {:.2}s before; the reproduction needs it unconfirmed",
        t_stop.elapsed().as_secs_f64()
    );
    let (_, members) = w.members("node1").or_fail(&w);
    assert_eq!(
        members.len(),
        1,
        "node1 took writes alone as a one-member cluster: {members:?}"
    );

    // node1 loses power with the intent on disk; its volume stays unmounted.
    w.c.crash("node1").or_fail(&w);
    let t_off = Instant::now();
    drop(stopped);
    let alone: Vec<Ack> = writer
        .acks()
        .into_iter()
        .filter(|a| a.node == "node1" && a.sent > t_dead)
        .collect();
    let on_disk = epochs(&w, "node1").or_fail(&w);
    eprintln!(
        "node1 lost power with {} writes acknowledged alone (revisions {:?}..={:?}); state file: epoch {}, pending_epoch {:?}",
        alone.len(),
        alone.iter().map(|a| a.revision).min(),
        alone.iter().map(|a| a.revision).max(),
        on_disk.0,
        on_disk.1
    );
    assert_eq!(
        on_disk,
        (old_epoch, Some(new_epoch)),
        "what node1's power loss left in its state file"
    );
    let from = w.data_dir("node1").or_fail(&w).join("member");
    let aside = unmounted(&w, "node1");
    std::fs::create_dir_all(&aside).unwrap_or_else(|e| panic!("{}: {e}", aside.display()));
    std::fs::rename(&from, aside.join("member"))
        .unwrap_or_else(|e| panic!("moving {} aside: {e}", from.display()));

    // node1 boots without its data, then node2 with the older epoch.
    w.boot("node1", SETTLE).or_fail(&w);
    check_nobody_serves(&w, &writer, &watcher, &alone, t_off);
    w.boot("node2", SETTLE).or_fail(&w);
    let snapshot = "etcd-warden recover restore-snapshot --node node1 --snapshot <FILE>";
    let archive = "etcd-warden recover restore-archive --node node1";
    let reason = poll(
        "node1's daemon to name the command that restores its data",
        SETTLE,
        || {
            check_nobody_serves(&w, &writer, &watcher, &alone, t_off);
            let r = w.reason("node1")?;
            Ok((r.contains(snapshot) || r.contains(archive)).then_some(r))
        },
    )
    .or_fail(&w);
    eprintln!("node1: {reason}");
    eprintln!(
        "node2: {}",
        w.reason("node2").unwrap_or_else(|e| format!("{e:#}"))
    );
    let lower = reason.to_lowercase();
    assert!(
        lower.contains(&format!("epoch {new_epoch}"))
            && ["unconfirmed", "not confirmed", "never confirmed", "pending"]
                .iter()
                .any(|word| lower.contains(word)),
        "node1's reason must say it may hold writes of the unconfirmed epoch {new_epoch}: {reason}"
    );
    // Nobody serves for a while longer: the refusal is not a passing state.
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        check_nobody_serves(&w, &writer, &watcher, &alone, t_off);
        std::thread::sleep(Duration::from_millis(500));
    }

    // The operator mounts the volume: the pair recovers by itself.
    let back = w.data_dir("node1").or_fail(&w).join("member");
    std::fs::rename(aside.join("member"), &back)
        .unwrap_or_else(|e| panic!("moving {} back: {e}", back.display()));
    let t_mount = Instant::now();
    let (c, _) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    eprintln!(
        "volume mounted -> two voters {:.2}s",
        t_mount.elapsed().as_secs_f64()
    );
    assert_eq!(c, cid, "the recovered cluster is node1's forced one");
    for n in &all {
        writer
            .wait_ack_after(Some(n), Instant::now(), SETTLE)
            .or_fail(&w);
    }
    let acks = writer.finish();
    w.check_writes(&acks, PREFIX, &all).or_fail(&w);
    let report = watcher.finish_checked(&w, PREFIX, SETTLE).or_fail(&w);
    eprintln!(
        "{} acknowledged writes checked ({} by node1 alone); watches: {}; whole run {:.1}s",
        acks.len(),
        alone.len(),
        report.summary(),
        t0.elapsed().as_secs_f64()
    );
    w.c.stop();
}
