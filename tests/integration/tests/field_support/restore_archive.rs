//! docs/operations.md §6, "Where is my old data? Restoring an archive",
//! all three steps, on a running pair with a writer on both nodes, after
//! both member directories are gone and only an archive is left: node-b in
//! standby and back (it leaves the member list; rejoining, its daemon
//! archives its old member directory), more writes, then the cluster
//! stopped (`pcs cluster stop --all`), both data directories taken away
//! (moved aside where a cleanup run on both nodes would delete them), the
//! cluster started. Both daemons refuse and name the same command; step 1
//! finds the archive, step 2 checks it, step 3 restores it on node-b (the
//! archive ends with node-b's own removal, so its database becomes a new
//! one-member cluster, the revision moved on); node-a joins it. Every write acknowledged before node-b's standby is
//! read back, the later ones are lost with the data directories and
//! reported, and no revision is acknowledged twice. Nobody is fenced.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use warden_harness::field::FieldCluster;
use warden_harness::process;
use warden_integration::campaign::named_command;
use warden_integration::writer::{self, Ack};

use super::restore::{plan_of, read_back, wait_etcd};
use super::upgrade::{standby, unstandby};
use super::{ARCHIVE_DIR, DATA_DIR, archives, assert_no_new_fence, begin, wait_all_voters};

const CLONE: &str = "etcd-clone";
/// Where the test keeps each node's removed data directory (never deleted).
const REMOVED: &str = "/var/lib/etcd-warden-removed-data";

/// The runbook on a running pair.
pub fn restore_archive(c: &FieldCluster) {
    let (w, fences) = begin(c, "/field-restore-archive");
    let prefix = w.prefix().to_owned();
    let before = archives(c, "node-b").unwrap();
    // Writes node-b's member holds when it leaves.
    process::poll(
        "40 writes acknowledged",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            let n = w.acks().len();
            if n >= 40 {
                Ok(())
            } else {
                Err(format!("{n} acknowledged"))
            }
        },
    )
    .unwrap();

    // An archive on node-b: its member leaves and rejoins.
    let t_standby = Instant::now();
    standby(c, "node-b", "node-a");
    unstandby(c, "node-b", "node-a");
    let made: Vec<String> = archives(c, "node-b")
        .unwrap()
        .into_iter()
        .filter(|a| !before.contains(a))
        .collect();
    assert_eq!(
        made.len(),
        1,
        "node-b archived its old member once: {made:?}"
    );
    let t_more = Instant::now();
    for n in ["node-a", "node-b"] {
        w.wait_ack_after(Some(n), t_more, Duration::from_secs(60))
            .unwrap();
    }

    assert_no_new_fence(c, fences, "a standby must not fence anyone");

    // Both member directories gone, the archive left. Stopping the whole
    // cluster empties the fencer's history: from here on, any entry is a
    // fence.
    let t_stop = Instant::now();
    c.node_sh_ok("node-a", "pcs cluster stop --all").unwrap();
    for n in ["node-a", "node-b"] {
        c.node_sh_ok(
            n,
            &format!("test ! -e {REMOVED} && mv {DATA_DIR} {REMOVED}"),
        )
        .unwrap();
    }
    c.node_sh_ok("node-a", "pcs cluster start --all").unwrap();
    let named = both_refuse(c).unwrap();
    let refused = t_stop.elapsed();
    assert_eq!(
        named,
        ("restore-archive".to_owned(), "node-b".to_owned()),
        "both daemons name node-b's archive"
    );

    // Steps 1 and 2: find the archive and check it.
    let dir = format!("{ARCHIVE_DIR}/{}", made[0]);
    let status = c
        .node_sh("node-b", "etcd-warden status")
        .and_then(|o| o.ok_with(process::STATUS_ANSWERED))
        .unwrap()
        .stdout;
    eprintln!("{}", status.trim_end());
    assert!(status.contains(&dir), "status lists {dir}: {status}");
    c.node_sh_ok(
        "node-b",
        &format!(
            "cd {dir} && test \"$(sha256sum member/snap/db | cut -d' ' -f1)\" = \"$(cut -d' ' -f1 db.sha256)\""
        ),
    )
    .unwrap();

    // Step 3: the plan, the restore, etcd started again.
    let t_restore = Instant::now();
    c.node_sh_ok("node-a", &format!("pcs resource ban {CLONE} node-b"))
        .unwrap();
    wait_etcd(c, "node-b", false).unwrap();
    let cmd = "etcd-warden recover restore-archive --node node-b";
    let plan = plan_of(c, "node-b", cmd);
    // The runbook's third form names the archive: the same plan.
    let named = plan_of(c, "node-b", &format!("{cmd} --archive {dir}"));
    assert_eq!(
        plan_lines(&named),
        plan_lines(&plan),
        "--archive {dir} plans what the newest archive does"
    );
    let done = c.node_sh_ok("node-b", &format!("{cmd} --confirm")).unwrap();
    eprintln!("{}", done.stdout.trim_end());
    c.node_sh_ok("node-a", &format!("pcs resource clear {CLONE} node-b"))
        .unwrap();
    let first = w
        .wait_ack_after(Some("node-b"), t_restore, Duration::from_secs(180))
        .unwrap();
    wait_all_voters(c, "node-b", Duration::from_secs(300)).unwrap();
    c.node_sh_ok("node-a", "pcs resource cleanup").unwrap();
    c.wait_cluster_healthy(Duration::from_secs(300)).unwrap();
    let voters = t_restore.elapsed();
    let t_up = Instant::now();
    w.wait_ack_after(Some("node-a"), t_up, Duration::from_secs(60))
        .unwrap();
    assert_no_new_fence(c, 0, "restoring an archive must not fence anyone");

    let acks = w.finish();
    let kvs = read_back(c, "node-b", &prefix).unwrap();
    let kept: Vec<Ack> = acks.iter().filter(|a| a.at < t_standby).cloned().collect();
    let (old, after): (Vec<Ack>, Vec<Ack>) = acks.iter().cloned().partition(|a| a.at < t_restore);
    writer::check_all_present(&kept, &kvs).unwrap();
    writer::check_all_present(&after, &kvs).unwrap();
    let lost = writer::lost_acks(&old, &kvs).len();
    writer::check_unique_revisions(&acks).unwrap();
    eprintln!(
        "field_restore_archive: stop, data directories gone, start -> both refuse {:.1} s; \
         ban node-b -> first write on the restored archive {:.1} s, -> two voters {:.1} s; \
         {} writes before the standby all present; {lost} of {} acknowledged up to the loss \
         lost with the data directories; {} after the restore all present; no revision twice; \
         no fence",
        refused.as_secs_f64(),
        first.at.duration_since(t_restore).as_secs_f64(),
        voters.as_secs_f64(),
        kept.len(),
        old.len(),
        after.len()
    );
}

/// Waits until the daemons of both nodes refuse and name one command, the
/// same on both; returns it (subcommand, node).
fn both_refuse(c: &FieldCluster) -> Result<(String, String)> {
    let mut named = Vec::new();
    for n in ["node-a", "node-b"] {
        let cmd = process::poll(
            &format!("{n}'s daemon to refuse and name a command"),
            Duration::from_secs(240),
            Duration::from_millis(500),
            || {
                let reason = own_reason(c, n)?;
                named_command(&reason).ok_or(reason)
            },
        )?;
        eprintln!("{n} names: etcd-warden recover {} --node {}", cmd.0, cmd.1);
        named.push(cmd);
    }
    ensure!(
        named[0] == named[1],
        "the two daemons name different commands: {named:?}"
    );
    named.pop().context("no command named")
}

/// The reason `node`'s daemon gives for its own state (`etcd-warden status
/// --json`, `reason`), or what was read instead.
fn own_reason(c: &FieldCluster, node: &str) -> std::result::Result<String, String> {
    let st = c.warden_status(node).map_err(|e| format!("{e:#}"))?;
    let v: serde_json::Value = serde_json::from_str(&st).map_err(|e| format!("{e}: {st}"))?;
    v.get("reason")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| st.chars().take(400).collect())
}

/// A plan's lines without the cluster token, which every plan draws anew.
fn plan_lines(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.contains("will:"))
        .map(|l| match l.find("cluster token ") {
            Some(i) => l[..i].to_owned(),
            None => l.to_owned(),
        })
        .collect()
}
