//! The defragmentation policy on real Corosync, Pacemaker, fencing and etcd,
//! with an `etcd-warden daemon` in every node and a small threshold (8 MiB,
//! 45 % free, a look every second) so that it runs in seconds.
//!
//! The database is fragmented past the threshold (large values written,
//! deleted and compacted away): each daemon defragments its own member, one
//! member at a time (the daemons' records, with their timestamps, never
//! overlap), while a writer per node keeps writing (the longest gap each
//! client saw is printed). Then node2 loses power and is fenced, and the
//! database of the survivor is fragmented again: no defragmentation runs
//! while node2 is down or rejoining; once the pair is whole again, it does.

mod failover_support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, UNIX_EPOCH};

use anyhow::{Context, ensure};
use failover_support::{FAILOVER, OrFail, SETTLE, daemon_report, wait_acks_everywhere};
use warden_integration::gateway;
use warden_integration::twonode::{Topology, WardenCluster, last_logged_ms, now_ms, poll};
use warden_integration::writer::Ack;

/// The test's policy: past 45 % free of at least 8 MiB, looked at every
/// second.
const DEFRAG: &str = "\n[defrag]\nfragmentation_percent = 45\nmin_db_size_bytes = 8388608\ncheck_interval_ms = 1000\n";

/// How much to write and delete: three times the threshold's size.
const FRAGMENT_MIB: usize = 24;

/// The deadline of one etcdctl call of the test's own.
const CALL: Duration = Duration::from_secs(10);

/// One defragmentation as a daemon's status records it.
#[derive(Debug, Clone)]
struct Run {
    node: String,
    start_ms: u64,
    duration_ms: u64,
    before: i64,
    in_use_before: i64,
    after: Option<i64>,
    leader_moved_to: Option<String>,
}

impl Run {
    fn end_ms(&self) -> u64 {
        self.start_ms + self.duration_ms
    }
}

/// The defragmentations `node`'s daemon recorded, and its policy's latest
/// answer.
fn runs(w: &WardenCluster, node: &str) -> anyhow::Result<(Vec<Run>, String)> {
    let st = w.status(node)?;
    let d = st
        .get("defrag")
        .context("the status has no defrag record")?;
    let runs = d
        .get("runs")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
        .map(|r| Run {
            node: node.to_string(),
            start_ms: r["startedAtMs"].as_u64().unwrap_or_default(),
            duration_ms: r["durationMs"].as_u64().unwrap_or_default(),
            before: r["dbSizeBefore"].as_i64().unwrap_or_default(),
            in_use_before: r["dbSizeInUseBefore"].as_i64().unwrap_or_default(),
            after: r["dbSizeAfter"].as_i64(),
            leader_moved_to: r["leaderMovedTo"].as_str().map(str::to_string),
        })
        .collect();
    let answer = d["answer"].as_str().unwrap_or_default().to_string();
    Ok((runs, answer))
}

fn all_runs(w: &WardenCluster) -> anyhow::Result<Vec<Run>> {
    let mut out = Vec::new();
    for n in w.nodes() {
        out.extend(runs(w, &n)?.0);
    }
    out.sort_by_key(|r| r.start_ms);
    Ok(out)
}

/// The local member's database file and bytes in use, from `node`'s status.
fn db(w: &WardenCluster, node: &str) -> anyhow::Result<(i64, i64)> {
    let st = w.status(node)?;
    let db = st.get("etcdDb").context("the status has no etcdDb")?;
    Ok((
        db["dbSize"].as_i64().unwrap_or_default(),
        db["dbSizeInUse"].as_i64().unwrap_or_default(),
    ))
}

/// Writes `mib` values of 1 MiB through `node`'s etcd, deletes them and
/// compacts the history: the database file keeps its size, mostly free.
fn fragment(w: &WardenCluster, node: &str, mib: usize) -> anyhow::Result<()> {
    let addr = w.client_addr(node)?;
    w.netns(node)?.run(move || {
        let value = vec![b'x'; 1024 * 1024 - 4096];
        let etcdctl = |args: &[&str]| {
            let mut c = Command::new("etcdctl");
            c.env("ETCDCTL_API", "3")
                .arg(format!("--endpoints=http://{addr}"))
                .arg(format!("--command-timeout={}s", CALL.as_secs()))
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            c
        };
        for i in 0..mib {
            // The value on stdin: one argument may not exceed 128 KiB.
            let mut child = etcdctl(&["put", &format!("/frag/{i:04}")])
                .stdin(Stdio::piped())
                .spawn()
                .context("running etcdctl put")?;
            child
                .stdin
                .take()
                .context("etcdctl's stdin")?
                .write_all(&value)?;
            let out = child.wait_with_output()?;
            ensure!(
                out.status.success(),
                "etcdctl put: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let v = gateway::etcdctl(addr, &["del", "--prefix", "/frag/"], CALL)?;
        let rev = gateway::header(&v)
            .2
            .context("del answer without a revision")?;
        let out = etcdctl(&["compact", &rev.to_string(), "--physical"])
            .stdin(Stdio::null())
            .output()?;
        ensure!(
            out.status.success(),
            "etcdctl compact: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    })
}

/// The longest time between two acknowledged writes of one node's writer
/// within [from, to] (wall clock, ms), and where it ended.
fn longest_gap(acks: &[Ack], node: &str, from: u64, to: u64) -> (Duration, u64) {
    let mut at: Vec<(u64, Instant)> = acks
        .iter()
        .filter(|a| a.node == node)
        .map(|a| {
            let ms = a
                .wall
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or_default();
            (ms, a.at)
        })
        .filter(|(ms, _)| (from..=to).contains(ms))
        .collect();
    at.sort_by_key(|(_, i)| *i);
    at.windows(2)
        .map(|p| (p[1].1.duration_since(p[0].1), p[1].0))
        .max()
        .unwrap_or((Duration::from_millis(to.saturating_sub(from)), to))
}

/// No two defragmentations overlap in time.
fn one_at_a_time(runs: &[Run]) {
    for p in runs.windows(2) {
        assert!(
            p[0].end_ms() <= p[1].start_ms,
            "two defragmentations overlap: {:?} and {:?}",
            p[0],
            p[1]
        );
    }
}

#[test]
fn fragmented_members_are_defragmented_one_at_a_time_and_never_while_a_peer_is_away() {
    let w =
        WardenCluster::start_with(2, Topology::TwoNode, DEFRAG).unwrap_or_else(|e| panic!("{e:#}"));
    let all = w.nodes();
    w.wait_voters(&all[0], &all, SETTLE).or_fail(&w);
    for n in &all {
        poll(&format!("{n}'s etcd to list the members"), SETTLE, || {
            Ok(w.members(n).ok().map(|_| ()))
        })
        .or_fail(&w);
    }
    let writer = w.writer("/defrag-w", &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 5);

    // 1. Fragment the pair's database past the threshold.
    let t0 = now_ms();
    fragment(&w, "node1", FRAGMENT_MIB).or_fail(&w);
    let fragmented = now_ms();
    eprintln!(
        "wrote, deleted and compacted {FRAGMENT_MIB} MiB in {:.1}s",
        (fragmented - t0) as f64 / 1000.0
    );

    // 2. Each daemon defragments its own member, one at a time.
    let done = poll("both members defragmented", Duration::from_secs(90), || {
        let r = all_runs(&w)?;
        let nodes: std::collections::BTreeSet<&str> = r
            .iter()
            .filter(|r| r.start_ms >= t0)
            .map(|r| r.node.as_str())
            .collect();
        Ok((nodes.len() == all.len()).then_some(r))
    })
    .or_fail(&w);
    one_at_a_time(&done);
    let round: Vec<&Run> = done.iter().filter(|r| r.start_ms >= t0).collect();
    for r in &round {
        eprintln!(
            "{} defragmented at +{:.2}s for {} ms: {} B ({}% free) -> {:?} B{}",
            r.node,
            (r.start_ms.saturating_sub(fragmented)) as f64 / 1000.0,
            r.duration_ms,
            r.before,
            (r.before - r.in_use_before) * 100 / r.before.max(1),
            r.after,
            r.leader_moved_to
                .as_deref()
                .map(|t| format!(" (leadership handed to {t} first)"))
                .unwrap_or_default()
        );
        assert!(
            r.after.is_some_and(|a| a < r.before),
            "the defragment of {} gave nothing back: {r:?}",
            r.node
        );
    }
    // The member that led when its turn came handed the leadership over.
    // The report carries the last defragmentation of each node.
    for n in &all {
        let rep = daemon_report(&w, n).or_fail(&w);
        let node_db = &rep["etcd"]["nodes"][n.as_str()]["db"];
        assert!(
            node_db["lastDefrag"].is_string() && node_db["lastDefragMs"].is_u64(),
            "{n}'s report has no last defragmentation: {node_db}"
        );
    }
    let end = round.iter().map(|r| r.end_ms()).max().unwrap_or(fragmented);
    let acks = writer.acks();
    for n in &all {
        let (gap, _) = longest_gap(&acks, n, 0, t0);
        eprintln!(
            "{n}'s writer: longest gap before the fragmentation (baseline): {} ms",
            gap.as_millis()
        );
    }
    for n in &all {
        let (gap, at) = longest_gap(&acks, n, fragmented, end + 1000);
        eprintln!(
            "{n}'s writer: longest gap between acknowledged writes during the defragmentations: {} ms (ended at +{:.2}s)",
            gap.as_millis(),
            at.saturating_sub(fragmented) as f64 / 1000.0
        );
        // Writes go on: a defragment of this size stalls its member for
        // well under a second; a gap of seconds would be a stalled cluster.
        assert!(
            gap < Duration::from_secs(5),
            "{n}'s writes stopped for {gap:?} during the defragmentations"
        );
    }

    // 3. node2 loses power and is fenced: the survivor, the only voter,
    // is never defragmented, however fragmented.
    let before_crash = all_runs(&w).or_fail(&w).len();
    let crash = now_ms();
    let cut = Instant::now();
    w.c.crash("node2").or_fail(&w);
    writer
        .wait_ack_after(Some("node1"), cut + Duration::from_millis(500), FAILOVER)
        .or_fail(&w);
    fragment(&w, "node1", FRAGMENT_MIB).or_fail(&w);
    // The refusals below count only once the policy would defragment a
    // healthy pair's member: node1's database past the threshold.
    let (size, in_use) = poll("node1's database past the threshold", SETTLE, || {
        let (size, in_use) = db(&w, "node1")?;
        Ok((size >= 8 << 20 && (size - in_use) * 100 >= 45 * size).then_some((size, in_use)))
    })
    .or_fail(&w);
    eprintln!(
        "node1 alone: db {size} B, {in_use} B in use ({}% free)",
        (size - in_use) * 100 / size
    );
    // Five looks of the policy, each refusing.
    let mut refusals = std::collections::BTreeSet::new();
    let window = Instant::now() + Duration::from_secs(5);
    while Instant::now() < window {
        let (_, answer) = runs(&w, "node1").or_fail(&w);
        refusals.insert(answer);
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("node1's policy while node2 is away: {refusals:?}");
    assert!(
        refusals
            .iter()
            .any(|a| a.starts_with("not defragmenting") && !a.contains("not needed")),
        "node1's policy never refused for a safety reason: {refusals:?}"
    );

    // 4. node2 comes back and rejoins: still nothing until it is a voter.
    w.boot("node2", SETTLE).or_fail(&w);
    w.wait_voters("node1", &all, SETTLE).or_fail(&w);
    // The rejoin ends at the promotion, which the leader's daemon logs; the
    // test's own look comes up to a poll later, and node2 may defragment
    // itself in between, as a voter (the policy allows it then).
    let rejoined =
        last_logged_ms(&w.daemon_log("node1"), &["promoted to voter"]).unwrap_or_else(now_ms);
    w.wait_started(&all, SETTLE).or_fail(&w);
    let during: Vec<Run> = all_runs(&w)
        .or_fail(&w)
        .into_iter()
        .filter(|r| (crash..rejoined).contains(&r.start_ms))
        .collect();
    assert!(
        during.is_empty(),
        "defragmented while node2 was fenced or rejoining (crash at {crash}, voter again at {rejoined}): {during:?}"
    );
    eprintln!(
        "no defragmentation in the {:.1}s from node2's crash to its return as a voter ({before_crash} runs before)",
        (rejoined - crash) as f64 / 1000.0
    );

    // 5. The pair is whole: the survivor's fragmented member is
    // defragmented again.
    let after = poll(
        "node1 defragmented after the rejoin",
        Duration::from_secs(90),
        || {
            let (r, _) = runs(&w, "node1")?;
            Ok(r.into_iter().find(|r| r.start_ms >= rejoined))
        },
    )
    .or_fail(&w);
    eprintln!(
        "node1 defragmented {:.2}s after node2's return, for {} ms{}",
        (after.start_ms - rejoined) as f64 / 1000.0,
        after.duration_ms,
        after
            .leader_moved_to
            .as_deref()
            .map(|t| format!(" (leadership handed to {t} first)"))
            .unwrap_or_default()
    );
    one_at_a_time(&all_runs(&w).or_fail(&w));
    let acks = writer.finish();
    w.check_writes(&acks, "/defrag-w", &all).or_fail(&w);
    eprintln!("defrag: {} acknowledged writes checked", acks.len());
    w.c.stop();
}
