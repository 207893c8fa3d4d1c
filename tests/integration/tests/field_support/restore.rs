//! docs/operations.md, "Restore from a snapshot", command for command on a
//! running pair, with a writer on both nodes throughout: a scheduled
//! snapshot (the unit the timer runs) on node-a; more writes; then the
//! runbook, as for data lost on both nodes: etcd banned from both nodes,
//! the restore's plan (exit 2) and the restore (node-a's data archived
//! first), etcd cleared on node-a (one voter, the snapshot's keys), then on
//! node-b (its data archived, a learner, a voter). Every write acknowledged up to the snapshot's revision is read
//! back; the writes after it are lost by design and reported; every write
//! acknowledged after the restore is read back too. Nobody is fenced.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use warden_harness::field::{FieldCluster, etcd_started_on};
use warden_integration::gateway::{self, NetNs};
use warden_integration::writer::{self, Ack};

use super::{ARCHIVE_DIR, archives, assert_no_new_fence, begin, members, wait_all_voters};

const CLONE: &str = "etcd-clone";
const SNAPSHOTS: &str = "/var/lib/etcd-warden/snapshots";

/// The newest snapshot of node-a the snapshot unit wrote, and its revision
/// (etcd's own tool: `etcdutl` on etcd 3.5, `etcdctl` on 3.4).
fn scheduled_snapshot(c: &FieldCluster) -> Result<(String, u64)> {
    c.node_sh_ok("node-a", "systemctl start etcd-warden-snapshot.service")?;
    let path = c
        .node_sh_ok(
            "node-a",
            &format!("ls -1 {SNAPSHOTS}/etcd-warden-snapshot-node-a-*.db | tail -n 1"),
        )?
        .stdout
        .trim()
        .to_owned();
    ensure!(
        !path.is_empty(),
        "the snapshot unit wrote nothing in {SNAPSHOTS}"
    );
    let status = c.node_sh_ok(
        "node-a",
        &format!(
            "if command -v etcdutl >/dev/null; then etcdutl snapshot status {path} -w json; \
             else ETCDCTL_API=3 etcdctl snapshot status {path} -w json; fi"
        ),
    )?;
    let v: serde_json::Value = serde_json::from_str(status.stdout.trim())
        .with_context(|| format!("snapshot status: {}", status.stdout))?;
    let revision = v
        .get("revision")
        .and_then(serde_json::Value::as_u64)
        .with_context(|| format!("no revision in {v}"))?;
    Ok((path, revision))
}

/// docs/operations.md "Backups", the one-file form by hand on node-a:
/// `etcd-warden snapshot save /backup/etcd.db`, a verified file of mode
/// 0600 that etcd's own tool reads. Returns what it checked.
fn manual_snapshot(c: &FieldCluster) -> Result<String> {
    let out = c.node_sh_ok(
        "node-a",
        "set -e
         mkdir -p /backup
         etcd-warden snapshot save /backup/etcd.db
         stat -c %a /backup/etcd.db
         if command -v etcdutl >/dev/null; then etcdutl snapshot status /backup/etcd.db -w json; \
         else ETCDCTL_API=3 etcdctl snapshot status /backup/etcd.db -w json; fi",
    )?;
    let mut lines = out.stdout.lines().rev();
    let status = lines.next().unwrap_or_default();
    let mode = lines.next().unwrap_or_default().trim();
    ensure!(mode == "600", "/backup/etcd.db has mode {mode}, not 600");
    let v: serde_json::Value =
        serde_json::from_str(status).with_context(|| format!("snapshot status: {status}"))?;
    let keys = v
        .get("totalKey")
        .and_then(serde_json::Value::as_u64)
        .with_context(|| format!("no totalKey in {v}"))?;
    Ok(format!(
        "manual snapshot /backup/etcd.db: mode 0600, {keys} keys at revision {}",
        v.get("revision").unwrap_or(&serde_json::Value::Null)
    ))
}

/// A `recover` command without `--confirm` on `node`: its plan, printed,
/// which must exit 2 (nothing done).
pub fn plan_of(c: &FieldCluster, node: &str, cmd: &str) -> String {
    let plan = c.node_sh(node, cmd).unwrap();
    assert_eq!(
        plan.status.code(),
        Some(2),
        "the plan of `{cmd}` exits 2 and changes nothing: {}{}",
        plan.stdout,
        plan.stderr
    );
    eprintln!("{}", plan.stdout.trim_end());
    plan.stdout
}

/// Waits until Pacemaker shows etcd `started` (or not) on `node`.
pub fn wait_etcd(c: &FieldCluster, node: &str, started: bool) -> Result<()> {
    let what = format!(
        "etcd {} on {node}",
        if started { "started" } else { "stopped" }
    );
    c.wait_crm("node-a", &what, Duration::from_secs(180), |m| {
        etcd_started_on(m, node) == started
    })
    .map(|_| ())
}

/// Every key under `prefix`, as `node`'s etcd answers it.
pub fn read_back(c: &FieldCluster, node: &str, prefix: &str) -> Result<Vec<gateway::Kv>> {
    let n = c.node(node)?;
    let addr = n.client_addr();
    let prefix = prefix.to_owned();
    NetNs::of_pid(n.netns_holder)?
        .run(move || gateway::range_prefix(addr, &prefix, Duration::from_secs(10)))
}

/// The runbook on a running pair.
pub fn restore(c: &FieldCluster) {
    let (w, fences_before) = begin(c, "/field-restore");
    let prefix = w.prefix().to_owned();
    let t0 = Instant::now();
    w.wait_ack_after(Some("node-a"), t0, Duration::from_secs(30))
        .unwrap();
    let manual = manual_snapshot(c).unwrap();
    let (snapshot, revision) = scheduled_snapshot(c).unwrap();
    eprintln!("{manual}; snapshot {snapshot} at revision {revision}");
    let t_snap = Instant::now();
    for n in ["node-a", "node-b"] {
        w.wait_ack_after(Some(n), t_snap, Duration::from_secs(30))
            .unwrap();
    }

    // 1. etcd stopped on both nodes and kept from starting.
    let t_ban = Instant::now();
    for n in ["node-b", "node-a"] {
        c.node_sh_ok("node-a", &format!("pcs resource ban {CLONE} {n}"))
            .unwrap();
    }
    for n in ["node-a", "node-b"] {
        wait_etcd(c, n, false).unwrap();
    }
    let down = t_ban.elapsed();
    // 2. The plan (node-a's data archived first), then the restore.
    let restore =
        format!("etcd-warden recover restore-snapshot --node node-a --snapshot {snapshot}");
    let plan = plan_of(c, "node-a", &restore);
    assert!(
        plan.contains("nothing deleted"),
        "the plan archives node-a's data first: {plan}"
    );
    let archived = archives(c, "node-a").unwrap().len();
    let done = c
        .node_sh_ok("node-a", &format!("{restore} --confirm"))
        .unwrap();
    eprintln!("{}", done.stdout.trim_end());
    assert_eq!(
        archives(c, "node-a").unwrap().len(),
        archived + 1,
        "node-a's data is archived, not deleted"
    );
    // 3. etcd on node-a: one voter (node-b may be listed as a learner that
    // has not started).
    let t_clear = Instant::now();
    c.node_sh_ok("node-a", &format!("pcs resource clear {CLONE} node-a"))
        .unwrap();
    wait_etcd(c, "node-a", true).unwrap();
    let first = w
        .wait_ack_after(Some("node-a"), t_clear, Duration::from_secs(120))
        .unwrap();
    let alone = members(c, "node-a").unwrap();
    assert_eq!(
        alone
            .iter()
            .filter(|m| !m.is_learner)
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>(),
        ["node-a"],
        "the restored cluster has one voter: {alone:?}"
    );
    // 4. node-b rejoins: archived, a learner, a voter.
    c.node_sh_ok("node-a", &format!("pcs resource clear {CLONE} node-b"))
        .unwrap();
    wait_all_voters(c, "node-a", Duration::from_secs(300)).unwrap();
    let voters = t_clear.elapsed();
    let t_up = Instant::now();
    w.wait_ack_after(Some("node-b"), t_up, Duration::from_secs(60))
        .unwrap();
    assert_no_new_fence(c, fences_before, "a restore must not fence anyone");

    let acks = w.finish();
    let kvs = read_back(c, "node-a", &prefix).unwrap();
    let (before, after): (Vec<Ack>, Vec<Ack>) = acks.into_iter().partition(|a| a.at < t_clear);
    let (kept, past): (Vec<Ack>, Vec<Ack>) =
        before.into_iter().partition(|a| a.revision <= revision);
    writer::check_all_present(&kept, &kvs).unwrap();
    let lost: Vec<&Ack> = writer::lost_acks(&past, &kvs);
    writer::check_unique_revisions(&after).unwrap();
    writer::check_all_present(&after, &kvs).unwrap();
    let inspected = inspect_archive(c, &prefix, &lost).unwrap();
    let lost = lost.len();
    eprintln!(
        "field_restore: banned -> etcd stopped on both {:.1} s; cleared node-a -> first write {:.1} s, \
         -> two voters {:.1} s; {} writes up to the snapshot's revision {revision} all present; \
         {lost} of {} acknowledged after it lost (by design), each in the archive the restore made \
         ({inspected}); {} after the restore all present; no fence",
        down.as_secs_f64(),
        first.at.duration_since(t_clear).as_secs_f64(),
        voters.as_secs_f64(),
        kept.len(),
        past.len(),
        after.len()
    );
}

/// docs/operations.md §6, "Where is my old data?", steps 1 and 2, on the
/// archive the restore made of node-a's data: `etcd-warden status` lists
/// it; its database matches `db.sha256`; a throw-away etcd on a copy, on
/// loopback ports, serves every write the restore lost. Returns what the
/// inspection read.
fn inspect_archive(c: &FieldCluster, prefix: &str, lost: &[&Ack]) -> Result<String> {
    let newest = archives(c, "node-a")?
        .last()
        .cloned()
        .context("node-a has no archive")?;
    let dir = format!("{ARCHIVE_DIR}/{newest}");
    let status = c.node_sh_ok("node-a", "etcd-warden status")?.stdout;
    ensure!(
        status.contains(&dir),
        "etcd-warden status does not list {dir}: {status}"
    );
    c.node_sh_ok(
        "node-a",
        &format!(
            "cd {dir} && test \"$(sha256sum member/snap/db | cut -d' ' -f1)\" = \"$(cut -d' ' -f1 db.sha256)\""
        ),
    )
    .context("the archive's database does not match db.sha256")?;
    // The runbook's throw-away etcd, as a transient unit of the node's
    // systemd so that it is stopped by name of the unit this test made.
    c.node_sh_ok(
        "node-a",
        &format!(
            "rm -rf {INSPECT} && cp -a {dir} {INSPECT} && \
             systemd-run --unit={INSPECT_UNIT} --collect etcd --data-dir {INSPECT} --force-new-cluster \
               --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
               --listen-peer-urls http://127.0.0.1:23800"
        ),
    )?;
    let get = format!(
        "ETCDCTL_API=3 etcdctl --endpoints 127.0.0.1:23790 --command-timeout=3s get --prefix {prefix} --keys-only"
    );
    let keys = warden_harness::process::poll(
        "the throw-away etcd on the archive's copy to answer",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || match c.node_sh("node-a", &get) {
            Ok(o) if o.status.success() => Ok(o.stdout),
            Ok(o) => Err(o.stderr),
            Err(e) => Err(format!("{e:#}")),
        },
    );
    c.node_sh_ok(
        "node-a",
        &format!("systemctl stop {INSPECT_UNIT} || true; rm -rf {INSPECT}"),
    )?;
    let keys = keys?;
    let held: std::collections::HashSet<&str> = keys.lines().map(str::trim).collect();
    let missing: Vec<&str> = lost
        .iter()
        .map(|a| a.key.as_str())
        .filter(|k| !held.contains(k))
        .collect();
    ensure!(
        missing.is_empty(),
        "{} of the {} writes the restore lost are not in {dir} either, e.g. {:?}",
        missing.len(),
        lost.len(),
        &missing[..missing.len().min(5)]
    );
    Ok(format!(
        "{} keys under {prefix} read from a copy of {newest}",
        held.iter().filter(|k| !k.is_empty()).count()
    ))
}

/// Where the inspection copies the archive, and its etcd's unit.
const INSPECT: &str = "/tmp/warden-inspect";
/// See [`INSPECT`].
const INSPECT_UNIT: &str = "warden-inspect";
