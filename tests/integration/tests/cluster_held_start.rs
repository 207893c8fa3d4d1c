//! Monitors right after a held start, on real Corosync, Pacemaker, fencing
//! and etcd with an `etcd-warden daemon` in every node.
//!
//! A start that leaves etcd running while the member still waits (to be
//! added as a learner, for a leader, for its promotion) succeeds with the
//! wait as its reason; Pacemaker then runs the first of each recurring
//! monitor (depth 0 every 10 s, depth 10 every 60 s) at once. Each of those
//! must agree with the start: 0, or 190 with its reason, never a failure
//! (a failed monitor there made Pacemaker stop the member it had just
//! started). Three ways a start is held, each with a writer on both nodes
//! and every acknowledged write checked:
//! - a fenced node returns and the survivor's daemon stalls (SIGSTOP) as
//!   soon as it added it as a learner: its etcd runs, its promotion waits;
//! - a node leaves by standby and comes back;
//! - both nodes lose power and boot together.
//!
//! For each start the node's daemon answered with a wait, every monitor it
//! answered until the next start or stop is checked, at both depths.

#![allow(clippy::unwrap_used)]

mod failover_support;

use warden_integration::twonode::{Topology, WardenCluster, logged_ms, now_ms, poll, strip_colour};

use failover_support::{FAILOVER, OrFail, SETTLE, healthy, wait_acks_everywhere};

/// One action of a daemon's log: its stamp and its line, without colour
/// codes.
struct Logged {
    ms: u64,
    line: String,
}

/// The daemon's action requests and replies on `node` from `since` on.
fn actions(w: &WardenCluster, node: &str, since: u64) -> Vec<Logged> {
    let log = w.daemon_log(node);
    let mut out = Vec::new();
    for line in log.lines().map(strip_colour) {
        if !(line.contains("action done") || line.contains(" action ")) {
            continue;
        }
        let Some(&ms) = logged_ms(&line, &[]).first() else {
            continue;
        };
        if ms >= since {
            out.push(Logged { ms, line });
        }
    }
    out
}

/// What the monitors after one held start answered.
#[derive(Debug, Default)]
struct AfterHeld {
    reason: String,
    depths: Vec<u32>,
    answers: Vec<String>,
    wrong: Vec<String>,
}

/// Every held start of `node` since `since`, with the monitors that
/// followed it up to the next start or stop request.
fn held_starts(w: &WardenCluster, node: &str, since: u64) -> Vec<AfterHeld> {
    let all = actions(w, node, since);
    let mut out = Vec::new();
    for (i, a) in all.iter().enumerate() {
        let held = a.line.contains("action done")
            && a.line.contains("action=Start")
            && a.line.contains("outcome=Success")
            && a.line.contains("reason=Some(");
        if !held {
            continue;
        }
        let mut after = AfterHeld {
            reason: field(&a.line, "reason=").unwrap_or_default(),
            ..AfterHeld::default()
        };
        for b in &all[i + 1..] {
            let request = !b.line.contains("action done");
            if request && (b.line.contains("action=Start") || b.line.contains("action=Stop")) {
                break;
            }
            if !b.line.contains("action=Monitor") {
                continue;
            }
            if request {
                if let Some(d) = field(&b.line, "depth=").and_then(|d| d.parse().ok()) {
                    after.depths.push(d);
                }
                continue;
            }
            let outcome = field(&b.line, "outcome=").unwrap_or_default();
            let reason = field(&b.line, "reason=").unwrap_or_default();
            let at = b.ms.saturating_sub(a.ms);
            after.answers.push(format!("+{at} ms {outcome}"));
            // 0, or 190 with its reason: anything else (a failure, "not
            // running") makes Pacemaker recover the member it just started.
            let agrees =
                outcome == "Success" || (outcome == "Degraded" && reason.starts_with("Some("));
            if !agrees {
                after.wrong.push(format!(
                    "{node}: monitor {at} ms after the held start: {outcome} {reason}"
                ));
            }
        }
        out.push(after);
    }
    out
}

/// The value of `key` (such as `outcome=`) in a log line: up to the next
/// space, or for `reason=Some("…")` up to its closing parenthesis.
fn field(line: &str, key: &str) -> Option<String> {
    let rest = &line[line.find(key)? + key.len()..];
    if rest.starts_with("Some(\"") {
        let end = rest.find("\")").map_or(rest.len(), |e| e + 2);
        return Some(rest[..end].to_string());
    }
    let v: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
    Some(v)
}

/// Checks the held starts of `nodes` since `since`; returns how many there
/// were.
fn check_held(w: &WardenCluster, kind: &str, nodes: &[&str], since: u64) -> usize {
    let mut count = 0;
    let mut wrong = Vec::new();
    for node in nodes {
        for a in actions(w, node, since)
            .iter()
            .filter(|a| a.line.contains("action done") && a.line.contains("action=Start"))
        {
            eprintln!("{kind}: {node}: {}", a.line);
        }
        // Pacemaker runs each depth's first monitor right after the start;
        // the check waits until both ran and every request was answered.
        let complete = |h: &AfterHeld| {
            [0, 10].iter().all(|d| h.depths.contains(d)) && h.answers.len() >= h.depths.len()
        };
        let what = format!("{node}'s monitors of both depths after each held start to answer");
        let starts = poll(&what, SETTLE, || {
            let hs = held_starts(w, node, since);
            Ok(hs.iter().all(complete).then_some(()))
        })
        .map(|()| held_starts(w, node, since))
        .unwrap_or_else(|e| {
            let hs = held_starts(w, node, since);
            panic!("{kind}: {e:#}: {hs:?}")
        });
        for h in starts {
            eprintln!(
                "{kind}: {node}'s start held ({}); monitors after it: depths {:?}, answers {:?}",
                h.reason, h.depths, h.answers
            );
            wrong.extend(h.wrong);
            count += 1;
        }
    }
    assert!(wrong.is_empty(), "{kind}:\n{}", wrong.join("\n"));
    count
}

/// Waits until `node`'s daemon logged a line with every one of `needles`
/// since `since`.
fn wait_action(w: &WardenCluster, node: &str, since: u64, needles: &[&str]) -> anyhow::Result<()> {
    poll(
        &format!("{node}'s daemon to log {needles:?}"),
        SETTLE,
        || {
            Ok(actions(w, node, since)
                .iter()
                .any(|a| needles.iter().all(|n| a.line.contains(n)))
                .then_some(()))
        },
    )
}

/// Waits for two voters and etcd started on both nodes.
fn settle(w: &WardenCluster, all: &[String]) {
    w.wait_voters("node1", all, SETTLE).or_fail(w);
    w.wait_started(all, SETTLE).or_fail(w);
}

#[test]
fn monitors_after_every_held_start_agree_with_it() {
    const PREFIX: &str = "/held-start";
    let (w, _) = healthy(2, Topology::TwoNode);
    let all = w.nodes();
    let writer = w.writer(PREFIX, &all).or_fail(&w);
    wait_acks_everywhere(&writer, &all, 20);
    let mut held = 0;

    // A fenced node returns; the survivor's daemon stalls as soon as it
    // added the returning node as a learner, so the returning node's etcd
    // runs but waits for its promotion.
    let since = now_ms();
    let t = std::time::Instant::now();
    w.crash_fenced("node2", "node1", SETTLE).or_fail(&w);
    writer
        .wait_ack_after(Some("node1"), t, FAILOVER)
        .or_fail(&w);
    let daemon1 = w.daemon_pid("node1").expect("node1's daemon");
    w.boot("node2", SETTLE).or_fail(&w);
    poll("node1 to add node2 as a learner", SETTLE, || {
        let (_, ms) = w.members("node1")?;
        Ok(ms.iter().any(|m| m.is_learner).then_some(()))
    })
    .or_fail(&w);
    let stalled = warden_harness::process::Paused::pause(daemon1).or_fail(&w);
    wait_action(&w, "node2", since, &["action done", "action=Start"]).or_fail(&w);
    // Pacemaker's first monitors of each depth follow the start at once.
    wait_action(&w, "node2", since, &["action done", "action=Monitor"]).or_fail(&w);
    drop(stalled);
    settle(&w, &all);
    held += check_held(&w, "the survivor's daemon stalled", &["node2"], since);

    // A node leaves by standby and comes back.
    let since = now_ms();
    w.standby("node1", "node2", true).or_fail(&w);
    poll("etcd to stop on node2", SETTLE, || {
        Ok(w.etcd_pid("node2")?.is_none().then_some(()))
    })
    .or_fail(&w);
    w.standby("node1", "node2", false).or_fail(&w);
    wait_action(&w, "node2", since, &["action done", "action=Start"]).or_fail(&w);
    settle(&w, &all);
    held += check_held(&w, "standby and back", &["node2"], since);

    // Both nodes lose power and boot together.
    let since = now_ms();
    w.c.crash("node1").or_fail(&w);
    w.c.crash("node2").or_fail(&w);
    std::thread::scope(|s| {
        let a = s.spawn(|| w.boot("node1", SETTLE));
        let b = s.spawn(|| w.boot("node2", SETTLE));
        a.join().unwrap().or_fail(&w);
        b.join().unwrap().or_fail(&w);
    });
    for n in ["node1", "node2"] {
        wait_action(&w, n, since, &["action done", "action=Start"]).or_fail(&w);
    }
    settle(&w, &all);
    held += check_held(&w, "both boot together", &["node1", "node2"], since);

    let t_up = std::time::Instant::now();
    for n in &all {
        writer.wait_ack_after(Some(n), t_up, SETTLE).or_fail(&w);
    }
    let acks = writer.finish();
    w.check_writes(&acks, PREFIX, &all).or_fail(&w);
    eprintln!(
        "{held} held starts checked; {} acknowledged writes checked",
        acks.len()
    );
    assert!(held >= 1, "no start was held: nothing was checked");
    w.c.stop();
}

#[test]
fn fields_of_a_log_line() {
    let l = r#"2026-12-04T20:39:38.946Z  INFO action done action=Start outcome=Success reason=Some("waiting for the voter on node1 to add this node as a learner") took=1.2s"#;
    assert_eq!(field(l, "outcome=").as_deref(), Some("Success"));
    assert_eq!(
        field(l, "reason=").as_deref(),
        Some(r#"Some("waiting for the voter on node1 to add this node as a learner")"#)
    );
    let l = "2026-12-04T20:39:38.946Z  INFO action action=Monitor depth=10 deadline_ms=18000";
    assert_eq!(field(l, "depth=").as_deref(), Some("10"));
}
