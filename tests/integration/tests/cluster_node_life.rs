//! What a node's disks keep over its life, on real Corosync, Pacemaker,
//! fencing and etcd, with an `etcd-warden daemon` in every node (issue 28).
//!
//! - The daemon's state file (kept apart from the data, in `paths.state_dir`)
//!   is lost while the data volume is intact (an OS disk reimaged): the
//!   daemon writes it again from the data's write-ahead log, starts the data
//!   where the peer's record lists its member, and writes the epoch down
//!   again at the first quorate look. Nothing is archived.
//! - A node comes back as a replaced machine (neither data, nor state file,
//!   nor archive) beside an intact peer after a total outage: nothing shows
//!   whether the lost disk held writes the peer lacks, so no node serves and
//!   both daemons name the operator's command; once the operator runs it the
//!   pair recovers by itself.
//!
//! Throughout, a writer per node writes to its own node's etcd and a watch
//! per node follows the prefix: every acknowledged write is read back, no
//! revision is acknowledged or delivered twice. What a lost disk held is
//! moved aside into the node's work directory, never deleted.

mod failover_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use warden_integration::twonode::{Topology, WardenCluster, logged_ms, now_ms, poll};
use warden_integration::watcher::Watcher;
use warden_integration::writer::{Ack, Writer, check_unique_revisions};

use failover_support::{FAILOVER, OrFail, SETTLE, fail, healthy, wait_acks_everywhere};

/// What node1's daemon logs when it writes a missing state file again.
const REWRITTEN: &str =
    "the state file was missing beside etcd data: wrote it again from the data's write-ahead log";
/// What it logs when the first quorate look writes the epoch down again.
const RELEARNED: &str = "wrote the lost state file down again from a quorate look";

/// Waits until node1 has forced a new epoch above `old`'s and seen it
/// confirmed (node2 down); returns that epoch.
fn node1_forced(w: &WardenCluster, old: &State) -> u64 {
    poll("node1 to force and confirm a new epoch", FAILOVER, || {
        let s = state(w, "node1")?;
        Ok((s.epoch > old.epoch && s.pending_epoch.is_none()).then_some(s.epoch))
    })
    .or_fail(w)
}

/// The daemon's state directory of `node`.
fn state_dir(w: &WardenCluster, node: &str) -> PathBuf {
    w.state_dir(node).or_fail(w)
}

/// The daemon's state file of `node`.
fn state_file(w: &WardenCluster, node: &str) -> PathBuf {
    state_dir(w, node).join("failover-state.json")
}

/// What a state file says, as far as these tests look.
#[derive(Debug, Clone, Default)]
struct State {
    epoch: u64,
    pending_epoch: Option<u64>,
    epoch_unknown: bool,
    member_id: Option<u64>,
    voters: Vec<String>,
    voter_ids: BTreeMap<String, u64>,
    added_by: BTreeMap<String, u64>,
}

/// A `{node: member id}` map of a state file.
fn ids_by_node(v: &Value, key: &str) -> BTreeMap<String, u64> {
    v.get(key)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(n, id)| Some((n.clone(), id.as_u64()?)))
        .collect()
}

/// `node`'s state file as it is on disk now.
fn state(w: &WardenCluster, node: &str) -> anyhow::Result<State> {
    let path = state_file(w, node);
    let v: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    let mut voters: Vec<String> = v
        .get("voters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    voters.sort();
    Ok(State {
        epoch: v.get("epoch").and_then(Value::as_u64).unwrap_or(0),
        pending_epoch: v.get("pending_epoch").and_then(Value::as_u64),
        epoch_unknown: v
            .get("epoch_unknown")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        member_id: v.get("member_id").and_then(Value::as_u64),
        voters,
        voter_ids: ids_by_node(&v, "voter_ids"),
        added_by: ids_by_node(&v, "added_by"),
    })
}

/// The archive directory of `node`.
fn archive_dir(w: &WardenCluster, node: &str) -> PathBuf {
    w.archive_dir(node).or_fail(w)
}

/// The entries of `node`'s archive directory that hold a whole member
/// directory (archived data; a copy of the WAL's tail before a force is
/// `wal/` alone), by name.
fn archived_data(w: &WardenCluster, node: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(archive_dir(w, node))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().join("member").is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Moves `from` (a file or directory) into `dir`, keeping its name.
fn move_into(from: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let to = dir.join(from.file_name().unwrap_or_default());
    std::fs::rename(from, &to)
        .unwrap_or_else(|e| panic!("moving {} to {}: {e}", from.display(), to.display()));
}

/// Moves every entry of `from` into `dir` (`from` stays, empty).
fn move_entries(from: &Path, dir: &Path) -> Vec<String> {
    let mut moved = Vec::new();
    let Ok(rd) = std::fs::read_dir(from) else {
        return moved;
    };
    for e in rd.flatten() {
        move_into(&e.path(), dir);
        moved.push(e.file_name().to_string_lossy().into_owned());
    }
    moved
}

/// The watches of `prefix` on every node of `w`, etcdctl's messages in the
/// cluster root.
fn watch(w: &WardenCluster, prefix: &str) -> Watcher {
    Watcher::on_every_node(w, prefix).or_fail(w)
}

/// The longest time between two acknowledgements in a row (of any node),
/// and how long after `t0` it began.
fn longest_gap(acks: &[Ack], t0: Instant) -> (Duration, Duration) {
    let mut at: Vec<Instant> = acks.iter().map(|a| a.at).collect();
    at.sort();
    at.windows(2)
        .map(|p| (p[1] - p[0], p[0].saturating_duration_since(t0)))
        .max()
        .unwrap_or_default()
}

/// Whether `node`'s daemon logged a line with every one of `needles` at or
/// after `since_ms`.
fn logged_since(w: &WardenCluster, node: &str, needles: &[&str], since_ms: u64) -> bool {
    logged_ms(&w.daemon_log(node), needles)
        .into_iter()
        .any(|ms| ms >= since_ms)
}

/// The member ids `node`'s etcd lists, by member name.
fn member_ids(w: &WardenCluster, node: &str) -> BTreeMap<String, u64> {
    let (_, members) = w.members(node).or_fail(w);
    members.into_iter().map(|m| (m.name, m.id)).collect()
}

/// Fails unless nobody serves since `since` (the total outage): no write
/// of `writer` answered after it, and no node's etcd answering a
/// linearizable read.
fn check_nobody_serves(w: &WardenCluster, writer: &Writer, watcher: &Watcher, since: Instant) {
    let late: Vec<Ack> = writer.acks().into_iter().filter(|a| a.at > since).collect();
    let mut broken = Vec::new();
    if let Some(a) = late.first() {
        broken.push(format!(
            "{} writes acknowledged after the total outage, the first by {}: {} at revision {} ({:.1}s after it)",
            late.len(),
            a.node,
            a.key,
            a.revision,
            a.at.duration_since(since).as_secs_f64()
        ));
    }
    for n in w.nodes() {
        if w.read(&n, "/warden-test/probe").is_ok() {
            broken.push(format!(
                "{n}'s etcd answered a linearizable read as a quorate cluster"
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
    }
    e.push_str(&format!(
        "\nwriters: {}\nwatches: {}",
        writer.summary(),
        watcher.report().summary()
    ));
    fail(w, anyhow::anyhow!(e));
}

/// Waits until the watches delivered the newest revision under `prefix`,
/// stops them, and checks what they delivered against that read: one
/// history, no revision twice, nothing skipped.
fn check_watches(w: &WardenCluster, watcher: Watcher, prefix: &str) -> String {
    watcher
        .finish_checked(w, prefix, SETTLE)
        .or_fail(w)
        .summary()
}

/// node2 loses power and is fenced; node1 forces a one-member cluster
/// (a new epoch) and takes writes alone; node2 boots, archives its stale
/// data, rejoins as a learner and is promoted. Then a total outage, and
/// node1 comes back with its data but without its state file. node1's
/// daemon writes the state file again from the data, starts that data
/// (the peer's record lists its member), archives nothing, and writes the
/// forced epoch down again at its first quorate look; every acknowledged
/// write is there, the last ones before the outage too (no force drops
/// anything: both members restart in their own membership).
#[test]
fn a_state_file_lost_after_a_failover_is_written_again_from_the_data() {
    const PREFIX: &str = "/statelost";
    let t0 = Instant::now();
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer(PREFIX, &all).or_fail(&w);
    let watcher = watch(&w, PREFIX);
    wait_acks_everywhere(&writer, &all, 20);
    let old = state(&w, "node1").or_fail(&w);

    // node2 loses power and is fenced; node1 forces the next epoch.
    w.c.crash("node2").or_fail(&w);
    let t_dead = Instant::now();
    let epoch = node1_forced(&w, &old);
    assert_eq!(epoch, old.epoch + 1, "one force, one epoch");
    let alone = writer
        .wait_ack_after(Some("node1"), t_dead, FAILOVER)
        .or_fail(&w);
    eprintln!(
        "node2 lost power; node1 forced epoch {epoch} and acknowledged a write {:.2}s after",
        alone.at.duration_since(t_dead).as_secs_f64()
    );
    assert!(
        w.fence_count("node1", "node2").or_fail(&w) >= 1,
        "node1 forced without a fence of node2 in Pacemaker's history"
    );

    // node2 boots: stale data archived, a learner, then a voter.
    let t_boot2 = Instant::now();
    w.boot("node2", SETTLE).or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    eprintln!(
        "node2 booted -> two voters {:.2}s",
        t_boot2.elapsed().as_secs_f64()
    );
    // Both daemons have written the pair down (node2's record is what
    // tells node1's data apart once node1's state file is gone).
    let ids = member_ids(&w, "node1");
    let settled = poll(
        "both state files to name the forced epoch and both voters",
        SETTLE,
        || {
            let mut out = Vec::new();
            for n in &all {
                let s = state(&w, n)?;
                if s.epoch != epoch
                    || s.voters != all
                    || s.voter_ids.get("node1") != ids.get("node1")
                    || s.voter_ids.get("node2") != ids.get("node2")
                {
                    anyhow::bail!("{n}'s state file: {s:?}; members {ids:?}");
                }
                out.push(s);
            }
            Ok(Some(out))
        },
    )
    .or_fail(&w);
    let t_both = Instant::now();
    writer
        .wait_ack_after(Some("node2"), t_both, SETTLE)
        .or_fail(&w);
    writer
        .wait_ack_after(Some("node1"), t_both, SETTLE)
        .or_fail(&w);
    let archived_before = archived_data(&w, "node1");

    // A total outage; node1's state file does not come back.
    w.c.crash("node1").or_fail(&w);
    w.c.crash("node2").or_fail(&w);
    let t_off = Instant::now();
    let before_outage = writer.acks().len();
    let lost = state_file(&w, "node1");
    let aside = w.c.node_dir("node1").or_fail(&w).join("lost-state-file");
    move_into(&lost, &aside);
    eprintln!(
        "total outage with {before_outage} writes acknowledged; node1's {} moved to {}",
        lost.display(),
        aside.display()
    );

    let boot_ms = now_ms();
    let t_boot = Instant::now();
    w.boot("node1", SETTLE).or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    poll(
        "node1's daemon to write its state file again from its data",
        SETTLE,
        || Ok(logged_since(&w, "node1", &[REWRITTEN], boot_ms).then_some(())),
    )
    .or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    eprintln!(
        "both booted (node1 first) -> two voters {:.2}s",
        t_boot.elapsed().as_secs_f64()
    );
    assert_eq!(
        member_ids(&w, "node1"),
        ids,
        "node1 started its own data: the same members as before the outage"
    );
    let back = poll(
        "node1's state file to name the forced epoch again",
        SETTLE,
        || {
            let s = state(&w, "node1")?;
            Ok((s.epoch == epoch && !s.epoch_unknown && s.voters == all).then_some(s))
        },
    )
    .or_fail(&w);
    assert_eq!(
        back.member_id, settled[0].member_id,
        "node1's state file names its member again"
    );
    assert!(
        logged_since(&w, "node1", &[RELEARNED], boot_ms),
        "node1's daemon wrote its state down without saying so: {}",
        w.daemon_log_tail("node1")
    );
    let archived_after = archived_data(&w, "node1");
    assert_eq!(
        archived_after,
        archived_before,
        "node1 archived data after losing its state file (in {})",
        archive_dir(&w, "node1").display()
    );
    assert!(
        !logged_since(
            &w,
            "node1",
            &["archived the etcd member directory"],
            boot_ms
        ),
        "node1's daemon archived its data: {}",
        w.daemon_log_tail("node1")
    );

    let t_up = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), t_up, SETTLE).or_fail(&w);
    }
    let acks = writer.finish();
    w.check_writes(&acks, PREFIX, &all).or_fail(&w);
    let watches = check_watches(&w, watcher, PREFIX);
    let (gap, gap_at) = longest_gap(&acks, t0);
    let outage_gap = acks
        .iter()
        .filter(|a| a.at > t_off)
        .map(|a| a.at.duration_since(t_off))
        .min()
        .unwrap_or_default();
    eprintln!(
        "{} acknowledged writes checked ({before_outage} before the outage); first write {:.2}s after the outage began; longest gap {:.2}s from {:.1}s; watches: {watches}; whole run {:.1}s",
        acks.len(),
        outage_gap.as_secs_f64(),
        gap.as_secs_f64(),
        gap_at.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    eprintln!("node1 now: {}", w.reason("node1").unwrap_or_default());
    w.c.stop();
}

/// What node1's daemon logs when it starts its data beside the learner it
/// added.
const BESIDE_OWN_LEARNER: &str = "which added node2's learner";

/// node2 loses power and is fenced; node1 forces and takes writes alone.
/// node2 boots and joins; node1's daemon adds it as a learner and dies at
/// once (SIGKILL), so the learner is never promoted, and node1 loses power
/// before its daemon comes back; node1's state file does not come back
/// (an OS disk reimaged). node2 fences node1; its learner has no leader
/// and can never become one. node1's data is the newest (a learner's data
/// counts for no commit), and node2's record says node1's member added
/// it: node1 starts its data, leads, and the learner is promoted. Nothing
/// is archived on node1; every acknowledged write is kept.
/// node2 loses power and node1 forces (its epoch confirmed, a write
/// acknowledged after node2's power loss); node2 boots and joins, and node1's daemon
/// dies right after adding node2's learner (kill point `learner-added`), so
/// that nobody promotes it. Returns node1's epoch and node2's state once
/// its join is recorded and its etcd runs.
fn learner_left_unpromoted(w: &WardenCluster, writer: &Writer, old: &State) -> (u64, State) {
    let t_dead = Instant::now();
    w.crash_fenced("node2", "node1", SETTLE).or_fail(w);
    let epoch = node1_forced(w, old);
    writer
        .wait_ack_after(Some("node1"), t_dead, FAILOVER)
        .or_fail(w);
    let armed = w.rearm_daemon("node1", "learner-added").or_fail(w);
    w.boot("node2", SETTLE).or_fail(w);
    poll(
        "node1's daemon to die after adding the learner",
        SETTLE,
        || {
            warden_harness::process::reap(armed);
            Ok((!warden_harness::process::alive(armed)).then_some(()))
        },
    )
    .or_fail(w);
    let joined = poll("node2 to record its join", SETTLE, || {
        let s = state(w, "node2")?;
        Ok((!s.added_by.is_empty() && w.etcd_pid("node2")?.is_some()).then_some(s))
    })
    .or_fail(w);
    (epoch, joined)
}

#[test]
fn a_voter_that_lost_its_state_file_beside_its_own_learner_starts_again() {
    const PREFIX: &str = "/ownlearner";
    let t0 = Instant::now();
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer(PREFIX, &all).or_fail(&w);
    let watcher = watch(&w, PREFIX);
    wait_acks_everywhere(&writer, &all, 20);
    let old = state(&w, "node1").or_fail(&w);

    let (epoch, joined) = learner_left_unpromoted(&w, &writer, &old);
    let member1 = state(&w, "node1").or_fail(&w).member_id;
    assert_eq!(
        joined.added_by.get("node1"),
        member1.as_ref(),
        "node2's join names node1's member as the voter that added it: {joined:?}"
    );
    assert!(
        !joined.voters.contains(&"node2".to_string()),
        "node2 is already a voter: {joined:?}"
    );

    // node1 loses power; its state file does not come back.
    let before = writer.acks().len();
    let archived_before = archived_data(&w, "node1");
    w.crash_fenced("node1", "node2", SETTLE).or_fail(&w);
    let t_off = Instant::now();
    let lost = state_file(&w, "node1");
    let aside = w.c.node_dir("node1").or_fail(&w).join("lost-state-file");
    move_into(&lost, &aside);
    eprintln!(
        "node1 (epoch {epoch}) lost power after adding node2's learner, {before} writes acknowledged; its state file moved to {}",
        aside.display()
    );

    let boot_ms = now_ms();
    let t_boot = Instant::now();
    w.boot("node1", SETTLE).or_fail(&w);
    poll(
        "node1's daemon to start its data beside its learner",
        SETTLE,
        || Ok(logged_since(&w, "node1", &[BESIDE_OWN_LEARNER], boot_ms).then_some(())),
    )
    .or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    eprintln!(
        "node1 booted -> two voters {:.2}s",
        t_boot.elapsed().as_secs_f64()
    );
    assert!(
        logged_since(&w, "node1", &[REWRITTEN], boot_ms),
        "node1's daemon did not say it wrote its state file again: {}",
        w.daemon_log_tail("node1")
    );
    assert_eq!(
        archived_data(&w, "node1"),
        archived_before,
        "node1 archived data after losing its state file (in {})",
        archive_dir(&w, "node1").display()
    );
    poll("node1's state file to name the epoch again", SETTLE, || {
        let s = state(&w, "node1")?;
        Ok((s.epoch >= epoch && !s.epoch_unknown && s.voters == all).then_some(()))
    })
    .or_fail(&w);

    let t_up = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), t_up, SETTLE).or_fail(&w);
    }
    let acks = writer.finish();
    w.check_writes(&acks, PREFIX, &all).or_fail(&w);
    let watches = check_watches(&w, watcher, PREFIX);
    let first = acks
        .iter()
        .filter(|a| a.at > t_off)
        .map(|a| a.at.duration_since(t_off))
        .min()
        .unwrap_or_default();
    eprintln!(
        "{} acknowledged writes checked; first write {:.2}s after node1's power loss; watches: {watches}; whole run {:.1}s",
        acks.len(),
        first.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    w.c.stop();
}

/// The replaced-machine story up to the refusal: a healthy pair with
/// writes; a total outage; node2 comes back as a replaced machine (no data,
/// no state file, no archive). node1's data is intact, but nothing shows
/// whether node2's lost disk held writes node1 lacks, and node1 has no
/// in-sync marker after the outage: no node serves, and both name
/// `recover force-new-cluster --node node1`, for at least 10 s.
///
/// The writer stops before the outage and one more write is acknowledged:
/// a forced restart keeps only what the persisted commit index covers, and
/// that write's entry carries a commit index covering every earlier one
/// (the window the operator's command accepts is not what this test
/// checks). A second writer runs from the outage on: nothing may be
/// acknowledged before the operator's command.
struct Replaced {
    w: WardenCluster,
    all: Vec<String>,
    watcher: Watcher,
    writer: Writer,
    before: Vec<Ack>,
    old: State,
    old_ids: BTreeMap<String, u64>,
    t0: Instant,
    t_off: Instant,
}

const PREFIX: &str = "/replaced";
const BEFORE: &str = "/replaced/before";
const AFTER: &str = "/replaced/after";
const COMMAND: &str = "etcd-warden recover force-new-cluster --node node1";

/// `node` (powered off) becomes a replaced machine: its data, state
/// directory and archive directory moved into its work directory's
/// `replaced-machine`. Returns that directory and what was moved.
fn replaced_machine_dirs(w: &WardenCluster, node: &str) -> (PathBuf, Vec<String>, Vec<String>) {
    let old_disk = w.c.node_dir(node).or_fail(w).join("replaced-machine");
    let data = move_entries(&w.data_dir(node).or_fail(w), &old_disk.join("etcd"));
    let st = move_entries(&state_dir(w, node), &old_disk.join("state"));
    let archives = archive_dir(w, node);
    if archives.exists() {
        move_into(&archives, &old_disk);
    }
    (old_disk, data, st)
}

fn replaced_beside_intact_peer() -> Replaced {
    let t0 = Instant::now();
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let watcher = watch(&w, PREFIX);
    let writer = w.writer(BEFORE, &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let before = writer.finish();
    poll("a last write to be acknowledged", SETTLE, || {
        Ok(w.put("node1", "/sentinel", "last").ok())
    })
    .or_fail(&w);
    let old = state(&w, "node1").or_fail(&w);
    let old_ids = member_ids(&w, "node1");

    // A total outage; node2 is replaced.
    w.c.crash("node1").or_fail(&w);
    w.c.crash("node2").or_fail(&w);
    let t_off = Instant::now();
    let (old_disk, data, st) = replaced_machine_dirs(&w, "node2");
    eprintln!(
        "total outage with {} writes acknowledged; node2's data {data:?}, state {st:?} and archive directory moved to {}",
        before.len(),
        old_disk.display()
    );
    let writer = w.writer(AFTER, &all).or_fail(&w);

    w.boot("node1", SETTLE).or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    let t_boot = Instant::now();
    let mut reasons = BTreeMap::new();
    for n in ["node1", "node2"] {
        let r = poll(&format!("{n} to name {COMMAND}"), SETTLE, || {
            check_nobody_serves(&w, &writer, &watcher, t_off);
            let r = w.reason(n)?;
            let replaced = n != "node2" || r.contains("new or replaced machine");
            Ok((r.contains(COMMAND) && replaced).then_some(r))
        })
        .or_fail(&w);
        eprintln!(
            "{n} ({:.2}s after both booted): {r}",
            t_boot.elapsed().as_secs_f64()
        );
        reasons.insert(n, r);
    }
    // The refusal holds: no passing state.
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        check_nobody_serves(&w, &writer, &watcher, t_off);
        std::thread::sleep(Duration::from_millis(500));
    }
    for n in ["node1", "node2"] {
        let r = w.reason(n).or_fail(&w);
        assert!(r.contains(COMMAND), "{n} stopped naming {COMMAND}: {r}");
    }

    Replaced {
        w,
        all,
        watcher,
        writer,
        before,
        old,
        old_ids,
        t0,
        t_off,
    }
}

/// The replaced machine beside an intact peer after a total outage: no
/// node serves, both name the command (see [`replaced_beside_intact_peer`]),
/// and every write acknowledged before the outage is still on node1's data.
#[test]
fn a_replaced_node_beside_an_intact_peer_waits_for_the_operator() {
    let r = replaced_beside_intact_peer();
    let after = r.writer.finish();
    assert!(after.is_empty(), "a write was acknowledged: {after:?}");
    r.w.c.stop();
}

/// The same, then the operator runs the named command on node1: node1
/// forces, node2 joins as a learner and is promoted, and every write
/// acknowledged before the outage is there, with no revision answered
/// twice.
///
/// After the power loss node1's backend may have applied an entry past the
/// commit index its WAL persisted (etcd applies before it saves the commit
/// index). `--force-new-cluster` drops that entry from the log, not from
/// the backend, which then skips the new entry given its index; node2,
/// replaying the log, would apply that entry and answer the same revision
/// as node1 for a different write (1 run in 4 before the daemon read the
/// backend's applied index). The daemon now forces such data through the
/// held start, whose snapshot node2 is sent instead of the log.
#[test]
fn a_replaced_node_beside_an_intact_peer_recovers_after_the_operators_force() {
    let Replaced {
        w,
        all,
        watcher,
        writer,
        before,
        old,
        old_ids,
        t0,
        t_off,
    } = replaced_beside_intact_peer();
    // The operator runs the command on node1.
    let t_cmd = Instant::now();
    let cmd_ms = now_ms();
    let args = [
        "recover",
        "force-new-cluster",
        "--node",
        "node1",
        "--confirm",
    ];
    let out = w.warden_cli("node1", &args).or_fail(&w);
    eprintln!("{}", out.trim_end());
    // node1 forces. Its executor checks the decision's proof again before
    // a forced restart; a decision it refuses over and over never ends.
    let refused = "refused to carry out ForceNewCluster";
    poll("node1 to force a new epoch", SETTLE, || {
        let log = w.daemon_log("node1");
        let refusals: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(refused))
            .filter(|l| logged_ms(l, &[refused]).iter().any(|&ms| ms >= cmd_ms))
            .collect();
        if refusals.len() >= 3 {
            fail(
                &w,
                anyhow::anyhow!(
                    "node1's daemon decided to force after the operator's command, and its executor refused it {} times ({:.1}s after the command), the last: {}",
                    refusals.len(),
                    t_cmd.elapsed().as_secs_f64(),
                    refusals.last().copied().unwrap_or_default()
                ),
            );
        }
        let s = state(&w, "node1")?;
        Ok((s.epoch > old.epoch).then_some(()))
    })
    .or_fail(&w);
    let (_, members) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    eprintln!(
        "operator command -> two voters {:.2}s",
        t_cmd.elapsed().as_secs_f64()
    );
    let log1 = w.daemon_log("node1");
    let since = |needles: &[&str]| {
        logged_ms(&log1, needles)
            .into_iter()
            .find(|&ms| ms >= cmd_ms)
    };
    let added = since(&["added as a learner", "node2"]);
    let promoted = since(&["promoted to voter", "node2"]);
    assert!(
        added.is_some() && promoted.is_some() && added <= promoted,
        "node1's daemon must add node2 as a learner, then promote it (added {added:?}, promoted {promoted:?}): {}",
        w.daemon_log_tail("node1")
    );
    let forced = state(&w, "node1").or_fail(&w);
    assert!(
        forced.epoch > old.epoch,
        "node1 forced, so its epoch rises above {}: {forced:?}",
        old.epoch
    );
    assert_eq!(
        members.iter().find(|m| m.name == "node1").map(|m| m.id),
        old_ids.get("node1").copied(),
        "node1 kept its member"
    );
    assert_ne!(
        members.iter().find(|m| m.name == "node2").map(|m| m.id),
        old_ids.get("node2").copied(),
        "node2 joined as a new member"
    );
    assert!(
        !w.wal_copies("node1").or_fail(&w).is_empty(),
        "the force must keep the WAL's tail"
    );
    for n in &all {
        assert!(
            archived_data(&w, n).is_empty(),
            "{n} archived data: {:?}",
            archived_data(&w, n)
        );
    }

    for n in &all {
        writer.wait_ack_after(Some(n), t_cmd, SETTLE).or_fail(&w);
    }
    let after = writer.finish();
    assert!(
        after.iter().all(|a| a.sent > t_off),
        "the second writer started after the outage"
    );
    let first = after.iter().map(|a| a.at).min().unwrap_or(t_cmd);
    assert!(
        first > t_cmd,
        "a write was acknowledged before the operator's command"
    );
    w.check_writes(&before, BEFORE, &all).or_fail(&w);
    w.check_writes(&after, AFTER, &all).or_fail(&w);
    let mut acks = before.clone();
    acks.extend(after.iter().cloned());
    check_unique_revisions(&acks).or_fail(&w);
    let watches = check_watches(&w, watcher, PREFIX);
    // What the force read, and whether node2 was sent node1's backend.
    let read = log1
        .lines()
        .rfind(|l| l.contains("read the log entries the forced restart drops"))
        .unwrap_or("(no line)");
    let etcd1 = w
        .state_dir("node1")
        .and_then(|d| Ok(std::fs::read_to_string(d.join("etcd.log"))?))
        .unwrap_or_default();
    let sent = etcd1
        .lines()
        .filter(|l| l.contains("sent database snapshot"))
        .count();
    eprintln!("node1 {read}; database snapshots sent by node1's etcd: {sent}");
    let (gap, gap_at) = longest_gap(&after, t0);
    eprintln!(
        "{} writes acknowledged before the outage and {} after the command checked; first write {:.2}s after the command; longest gap after it {:.2}s from {:.1}s; epoch {} -> {}; watches: {watches}; whole run {:.1}s",
        before.len(),
        after.len(),
        first.duration_since(t_cmd).as_secs_f64(),
        gap.as_secs_f64(),
        gap_at.as_secs_f64(),
        old.epoch,
        forced.epoch,
        t0.elapsed().as_secs_f64()
    );
    w.c.stop();
}

/// A process of a node stopped with SIGSTOP; continued on drop unless it
/// is gone, recognised by its PID and start time.
struct Frozen {
    pid: i32,
    start: Option<u64>,
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`), in clock ticks.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

impl Frozen {
    fn freeze(pid: i32) -> anyhow::Result<Self> {
        let start = start_time(pid);
        warden_harness::process::signal(pid, nix::sys::signal::Signal::SIGSTOP)?;
        Ok(Self { pid, start })
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        if self.start.is_some() && start_time(self.pid) == self.start {
            let _ = warden_harness::process::signal(self.pid, nix::sys::signal::Signal::SIGCONT);
        }
    }
}

/// node2 is fenced and node1 forces; node2 boots and node1 adds it as a
/// learner. node1's daemon stalls (SIGSTOP) before it can promote it, so
/// the learner runs and stays a learner; then node2 loses power and comes
/// back as a replaced machine (no data, no state file, no archive). The
/// cluster still lists node2's old learner, which has run: it can never
/// run again on an empty disk. node2 waits and publishes that learner as
/// lost; node1's daemon (running again) removes it and adds node2 anew,
/// which is then promoted. Every acknowledged write is there.
#[test]
fn a_replaced_node_whose_old_learner_is_still_listed_is_added_anew() {
    const PREFIX: &str = "/oldlearner";
    let t0 = Instant::now();
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer(PREFIX, &all).or_fail(&w);
    let watcher = watch(&w, PREFIX);
    wait_acks_everywhere(&writer, &all, 20);
    let old = state(&w, "node1").or_fail(&w);

    w.c.crash("node2").or_fail(&w);
    let t_dead = Instant::now();
    node1_forced(&w, &old);
    writer
        .wait_ack_after(Some("node1"), t_dead, FAILOVER)
        .or_fail(&w);

    // node2 boots; node1's daemon stalls as soon as it added the learner.
    let daemon1 = w.daemon_pid("node1").expect("node1's daemon");
    w.boot("node2", SETTLE).or_fail(&w);
    let learner = poll("node1 to add node2 as a learner", SETTLE, || {
        let (_, ms) = w.members("node1")?;
        Ok(ms.into_iter().find(|m| m.is_learner))
    })
    .or_fail(&w);
    let frozen = Frozen::freeze(daemon1).or_fail(&w);
    let (_, ms) = w.members("node1").or_fail(&w);
    assert!(
        ms.iter().any(|m| m.id == learner.id && m.is_learner),
        "node1's daemon promoted the learner {:x} before it was stopped: {ms:?}",
        learner.id
    );
    // The learner runs (etcd publishes its name once it started).
    let ran = poll("node2's learner to run", SETTLE, || {
        let (_, ms) = w.members("node1")?;
        Ok(ms
            .into_iter()
            .find(|m| m.id == learner.id && m.is_learner && !m.name.is_empty()))
    })
    .or_fail(&w);
    eprintln!(
        "node2's learner {:x} runs; node1's daemon {daemon1} stopped",
        ran.id
    );

    // node2 loses power and comes back as a replaced machine, once
    // node1's Pacemaker has fenced it (a fence still running when the
    // machine boots would power the new boot off).
    w.crash_fenced("node2", "node1", SETTLE).or_fail(&w);
    let (old_disk, data, st) = replaced_machine_dirs(&w, "node2");
    eprintln!(
        "node2 replaced: data {data:?}, state {st:?} and archive directory moved to {}",
        old_disk.display()
    );
    drop(frozen);
    let boot_ms = now_ms();
    let t_boot = Instant::now();
    w.boot("node2", SETTLE).or_fail(&w);
    let (_, members) = w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    eprintln!(
        "replaced node2 booted -> two voters {:.2}s",
        t_boot.elapsed().as_secs_f64()
    );
    let removed = logged_since(
        &w,
        "node1",
        &["removed from the member list", &ran.id.to_string()],
        boot_ms,
    );
    let waited = logged_since(&w, "node2", &["old learner", "which has run"], boot_ms);
    assert!(
        removed,
        "node1's daemon must remove node2's old learner {} ({:x}): {}",
        ran.id,
        ran.id,
        w.daemon_log_tail("node1")
    );
    eprintln!("node2 named its old learner while it waited: {waited}");
    let now2 = members.iter().find(|m| m.name == "node2").map(|m| m.id);
    assert_ne!(now2, Some(ran.id), "node2 runs as a new member");

    let t_up = Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), t_up, SETTLE).or_fail(&w);
    }
    let acks = writer.finish();
    w.check_writes(&acks, PREFIX, &all).or_fail(&w);
    let watches = check_watches(&w, watcher, PREFIX);
    let (gap, gap_at) = longest_gap(&acks, t0);
    eprintln!(
        "{} acknowledged writes checked; longest gap {:.2}s from {:.1}s; watches: {watches}; whole run {:.1}s",
        acks.len(),
        gap.as_secs_f64(),
        gap_at.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    w.c.stop();
}

/// A voter replaced while its peer's member is still a learner: node1
/// forces after node2's power loss, adds node2 as a learner and its daemon
/// dies right after (kill point `learner-added`), so node2 is never
/// promoted; the learner catches up; node1 loses power and comes back as a
/// replaced machine. The voter's data is gone; the learner's may lack what
/// node1 acknowledged last, but it is the newest there is, and etcd cannot
/// force a learner's data into a cluster. Both daemons refuse and name
/// `recover force-new-cluster --node node2`; no node serves until the
/// operator runs it. Then node2's learner data becomes a one-member
/// cluster (its backend restored, the learner's member directory
/// archived), node1 joins and is promoted, every write acknowledged before
/// node1's power loss is there, and no revision is acknowledged twice.
#[test]
fn a_replaced_voter_beside_its_learner_recovers_with_the_named_command() {
    const PREFIX: &str = "/learnerleft";
    const COMMAND: &str = "etcd-warden recover force-new-cluster --node node2";
    let t0 = Instant::now();
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let before_prefix = format!("{PREFIX}/before");
    let writer = w.writer(&before_prefix, &all).or_fail(&w);
    let watcher = watch(&w, PREFIX);
    wait_acks_everywhere(&writer, &all, 20);
    let old = state(&w, "node1").or_fail(&w);

    learner_left_unpromoted(&w, &writer, &old);
    // The writes stop; the learner catches up with everything node1
    // acknowledged (the window in which it would not is not this test's).
    let before = writer.finish();
    let last = w.put("node1", "/sentinel", "last").or_fail(&w);
    // node1's daemon is down: its etcd is asked directly.
    let raft_index = |n: &str| -> anyhow::Result<(Option<u64>, bool)> {
        let addr = w.client_addr(n)?;
        let v = w.netns(n)?.run(move || {
            warden_integration::gateway::etcdctl(
                addr,
                &["endpoint", "status"],
                Duration::from_secs(2),
            )
        })?;
        let st = &v[0]["Status"];
        Ok((
            st["raftIndex"].as_u64(),
            st["isLearner"] == Value::Bool(true),
        ))
    };
    poll("node2's learner to catch up", SETTLE, || {
        let (voter, _) = raft_index("node1")?;
        let (learner, is_learner) = raft_index("node2")?;
        Ok((is_learner && voter.is_some() && learner >= voter).then_some(()))
    })
    .or_fail(&w);

    // node1 loses power and comes back as a replaced machine.
    w.crash_fenced("node1", "node2", SETTLE).or_fail(&w);
    let t_off = Instant::now();
    let (old_disk, data, st) = replaced_machine_dirs(&w, "node1");
    eprintln!(
        "node1 lost power with {} writes acknowledged (the last at revision {last}); its data {data:?} and state {st:?} moved to {}",
        before.len(),
        old_disk.display()
    );
    let after_prefix = format!("{PREFIX}/after");
    let writer = w.writer(&after_prefix, &all).or_fail(&w);
    w.boot("node1", SETTLE).or_fail(&w);
    let t_boot = Instant::now();
    for n in ["node1", "node2"] {
        let r = poll(&format!("{n} to name {COMMAND}"), SETTLE, || {
            check_nobody_serves(&w, &writer, &watcher, t_off);
            let r = w.reason(n)?;
            Ok(r.contains(COMMAND).then_some(r))
        })
        .or_fail(&w);
        eprintln!(
            "{n} ({:.2}s after node1 booted): {r}",
            t_boot.elapsed().as_secs_f64()
        );
    }

    // The operator runs the command on node2.
    let archived_before = archived_data(&w, "node2").len();
    let t_cmd = Instant::now();
    let out = w
        .warden_cli(
            "node2",
            &[
                "recover",
                "force-new-cluster",
                "--node",
                "node2",
                "--confirm",
            ],
        )
        .or_fail(&w);
    eprintln!("{}", out.trim_end());
    w.wait_voters("node2", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    eprintln!(
        "operator command -> two voters {:.2}s",
        t_cmd.elapsed().as_secs_f64()
    );
    assert_eq!(
        archived_data(&w, "node2").len(),
        archived_before + 1,
        "node2's learner data is archived once (in {})",
        archive_dir(&w, "node2").display()
    );
    for n in &all {
        writer.wait_ack_after(Some(n), t_cmd, SETTLE).or_fail(&w);
    }
    let after = writer.finish();
    let first = after.iter().map(|a| a.at).min().unwrap_or(t_cmd);
    assert!(
        first > t_cmd,
        "a write was acknowledged before the operator's command"
    );
    w.check_writes(&before, &before_prefix, &all).or_fail(&w);
    w.check_writes(&after, &after_prefix, &all).or_fail(&w);
    let mut acks = before.clone();
    acks.extend(after.iter().cloned());
    check_unique_revisions(&acks).or_fail(&w);
    let min_after = after.iter().map(|a| a.revision).min().unwrap_or(0);
    assert!(
        min_after > last + 1000,
        "the revision moved on past node1's last ({last}): first after the command {min_after}"
    );
    let watches = check_watches(&w, watcher, PREFIX);
    eprintln!(
        "{} writes before node1's power loss and {} after the command checked; first write {:.2}s after the command; watches: {watches}; whole run {:.1}s",
        before.len(),
        after.len(),
        first.duration_since(t_cmd).as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    w.c.stop();
}

/// node2 loses power and is fenced; node1 forces and takes writes alone;
/// then node1 loses power and comes back as a replaced machine. node2's
/// data lacks what node1 acknowledged alone, and nothing shows how much:
/// node2 names `recover force-new-cluster --node node2`. The operator runs
/// it: the writes node1 took alone are lost by that choice, but no revision
/// they were acknowledged at is acknowledged again, and no watch delivers a
/// revision twice: the forced restart moves the revision past them.
#[test]
fn an_operators_force_after_a_lost_disk_acknowledges_no_revision_twice() {
    const PREFIX: &str = "/lostdisk";
    const AFTER: &str = "/lostdisk/after";
    const COMMAND: &str = "etcd-warden recover force-new-cluster --node node2";
    const ALONE: usize = 200;
    let t0 = Instant::now();
    let (w, _cid) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let watcher = watch(&w, PREFIX);
    let writer = w.writer(&format!("{PREFIX}/before"), &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let old = state(&w, "node1").or_fail(&w);

    // node2 loses power and is fenced; node1 forces and writes alone.
    w.c.crash("node2").or_fail(&w);
    let t_dead = Instant::now();
    node1_forced(&w, &old);
    poll(
        &format!("node1 to acknowledge {ALONE} writes alone"),
        SETTLE,
        || {
            let n = writer.acks().iter().filter(|a| a.at > t_dead).count();
            Ok((n >= ALONE).then_some(()))
        },
    )
    .or_fail(&w);

    // node1 loses power and comes back as a replaced machine.
    w.c.crash("node1").or_fail(&w);
    let t_off = Instant::now();
    let acks = writer.finish();
    let alone: Vec<&Ack> = acks.iter().filter(|a| a.at > t_dead).collect();
    let top = alone.iter().map(|a| a.revision).max().unwrap_or(0);
    let (old_disk, data, st) = replaced_machine_dirs(&w, "node1");
    eprintln!(
        "node1 acknowledged {} writes alone (up to revision {top}); its data {data:?} and state {st:?} moved to {}",
        alone.len(),
        old_disk.display()
    );
    let writer = w.writer(AFTER, &all).or_fail(&w);
    w.boot("node2", SETTLE).or_fail(&w);
    w.boot("node1", SETTLE).or_fail(&w);
    let r = poll(&format!("node2 to name {COMMAND}"), SETTLE, || {
        check_nobody_serves(&w, &writer, &watcher, t_off);
        let r = w.reason("node2")?;
        Ok(r.contains(COMMAND).then_some(r))
    })
    .or_fail(&w);
    eprintln!("node2: {r}");

    let t_cmd = Instant::now();
    let args = [
        "recover",
        "force-new-cluster",
        "--node",
        "node2",
        "--confirm",
    ];
    let out = w.warden_cli("node2", &args).or_fail(&w);
    eprintln!("{}", out.trim_end());
    w.wait_voters("node2", &all, SETTLE).or_fail(&w);
    w.wait_started(&all, SETTLE).or_fail(&w);
    for n in &all {
        writer.wait_ack_after(Some(n), t_cmd, SETTLE).or_fail(&w);
    }
    let after = writer.finish();
    eprintln!(
        "operator command -> two voters and writes on both {:.2}s",
        t_cmd.elapsed().as_secs_f64()
    );
    let low = after.iter().map(|a| a.revision).min().unwrap_or(0);
    assert!(
        low > top,
        "a write after the operator's force was acknowledged at revision {low}, at or below {top}, the last revision node1 acknowledged alone"
    );
    w.check_writes(&after, AFTER, &all).or_fail(&w);
    let mut every = acks.clone();
    every.extend(after.iter().cloned());
    check_unique_revisions(&every).or_fail(&w);
    // Every node's watch goes on past the force (told the history below
    // it is compacted) and delivers the newest write.
    let newest = after.iter().map(|a| a.revision).max().unwrap_or(0);
    watcher.wait_delivered(&all, newest, SETTLE).or_fail(&w);
    let report = watcher.finish();
    report.check().or_fail(&w);
    eprintln!(
        "first revision after the force {low} (node1's last alone {top}); watches: {}; whole run {:.1}s",
        report.summary(),
        t0.elapsed().as_secs_f64()
    );
    w.c.stop();
}
