//! `etcd-warden status`: this node's state, etcd's live view, every
//! cluster node with Pacemaker's state and fencing, and the archives of
//! replaced etcd data.

use std::process::ExitCode;

use crm_xml::report::Report;
use warden_api::client::ClientError;
use warden_api::{NodeStatus, paths};

use super::target::Target;
use crate::app::StatusDoc;
use crate::reconcile::archives::ArchiveInfo;

mod pair;

use pair::Cluster;

/// Arguments: Show this node's state, etcd's live view, both nodes,
/// Pacemaker and fencing.
#[derive(Debug, clap::Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct StatusArgs {
    /// Where the daemon is.
    #[command(flatten)]
    pub(crate) target: Target,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Render a status as a two-column table: the `next` row, the command to
/// run, only when the daemon waits for one.
pub(crate) fn table(s: &NodeStatus, next: Option<&str>) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let next = next.map(|c| ("next", c.to_string()));
    let rows = [
        ("node", s.node.clone()),
        ("topology", s.topology.clone()),
        ("state", s.state.clone()),
        ("health", health_line(s, next.is_some())),
    ]
    .into_iter()
    .chain(next)
    .chain([
        (
            "etcd",
            match s.etcd_pid {
                Some(pid) => format!("running (pid {pid})"),
                None => "not running".into(),
            },
        ),
        ("quorum", if s.quorum { "yes" } else { "no" }.into()),
        ("member", opt(s.member_id.map(|i| format!("{i:x}")))),
        ("leader", opt(s.leader_id.map(|i| format!("{i:x}")))),
        ("learner", if s.is_learner { "yes" } else { "no" }.into()),
        ("raft term", opt(s.raft_term.map(|v| v.to_string()))),
        ("raft index", opt(s.raft_index.map(|v| v.to_string()))),
        ("revision", opt(s.revision.map(|v| v.to_string()))),
        ("failover", failover_line(s.reason.as_deref())),
        ("reason", opt(s.reason.clone())),
    ]);
    let mut out: String = rows.map(|(k, v)| format!("{k:<11} {v}\n")).collect();
    if let Some(db) = &s.etcd_db {
        out.push_str(&format!(
            "{:<11} {} (etcd {}), {} in use\n",
            "db",
            human_size(u64::try_from(db.db_size).unwrap_or(0)),
            db.version,
            human_size(u64::try_from(db.db_size_in_use).unwrap_or(0)),
        ));
        let alarms = match db.alarms.as_slice() {
            [] => "none".to_string(),
            a => alarm_text(a),
        };
        out.push_str(&format!("{:<11} {alarms}\n", "alarms"));
    }
    if let Some(d) = &s.defrag {
        out.push_str(&format!("{:<11} {}\n", "defrag", defrag_line(d)));
    }
    out
}

/// The last defragmentation (when, how long, the sizes) and the policy's
/// latest answer.
fn defrag_line(d: &warden_api::DefragStatus) -> String {
    let last = match d.runs.last() {
        None => "none by this daemon".to_string(),
        Some(r) => {
            let when = i64::try_from(r.started_at_ms / 1000)
                .ok()
                .and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok())
                .map(crm_xml::timefmt::format_k8s)
                .unwrap_or_else(|| "-".into());
            let after = r
                .db_size_after
                .map(|a| human_size(u64::try_from(a).unwrap_or(0)))
                .unwrap_or_else(|| "?".into());
            format!(
                "last {when}, took {:.2}s, {} -> {after}{}",
                r.duration_ms as f64 / 1000.0,
                human_size(u64::try_from(r.db_size_before).unwrap_or(0)),
                r.error
                    .as_deref()
                    .map(|e| format!(", failed: {e}"))
                    .unwrap_or_default()
            )
        }
    };
    match &d.answer {
        Some(a) => format!("{last}; policy: {a}"),
        None => last,
    }
}

/// The alarms and what to do about them.
pub(crate) fn alarm_text(alarms: &[String]) -> String {
    let mut t = alarms.join(", ");
    if alarms.iter().any(|a| a == "NOSPACE") {
        t.push_str(
            ": etcd refuses writes; compact and defragment (`etcd-warden etcdctl compact REV`, `etcd-warden defrag`), or raise etcd.quota_backend_bytes, then `etcd-warden etcdctl alarm disarm`",
        );
    }
    if alarms.iter().any(|a| a == "CORRUPT") {
        t.push_str(": the member's data is inconsistent with its peers; see docs/operations.md");
    }
    t
}

/// Whether automatic failover runs, or why an operator's setting in
/// Pacemaker (maintenance mode, an unmanaged etcd resource, a node in
/// maintenance) pauses it: the daemon's reason says so in words that start
/// with "automatic failover paused".
fn failover_line(reason: Option<&str>) -> String {
    const PAUSED: &str = "automatic failover paused";
    match reason.and_then(|r| r.find(PAUSED).map(|i| &r[i..])) {
        Some(paused) => paused.to_string(),
        None => "automatic".into(),
    }
}

/// The whole screen: this node's table, the cluster's rows, the archives.
pub(crate) fn screen(d: &StatusDoc, cluster: &Cluster) -> String {
    let mut out = table(&d.node, d.resolve_command.as_deref());
    out.push_str(&cluster.rows(&d.node.node));
    out.push_str(&archive_rows(d));
    out
}

/// `status --json`: the daemon's status answer with the report beside it
/// (`report`), or why there is none (`reportError`).
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusJson<'a> {
    #[serde(flatten)]
    status: &'a StatusDoc,
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<&'a Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    report_error: Option<&'a str>,
}

impl<'a> StatusJson<'a> {
    fn new(status: &'a StatusDoc, cluster: &'a Cluster) -> Self {
        Self {
            status,
            report: cluster.report(),
            report_error: match cluster {
                Cluster::Unavailable(why) => Some(why),
                Cluster::Report(_) => None,
            },
        }
    }
}

/// The archives, the newest data last, one per line: path, size, creation
/// time, epoch, raft index, reason.
fn archive_rows(d: &StatusDoc) -> String {
    let mut out = String::new();
    let dir = d
        .archive_dir
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "-".into());
    out.push_str(&format!("{:<11} {dir}\n", "archive dir"));
    if d.archives.is_empty() {
        out.push_str(&format!("{:<11} none\n", "archives"));
        return out;
    }
    out.push_str(&format!(
        "{:<11} {} (oldest data first; restore with `etcd-warden recover restore-archive`)\n",
        "archives",
        d.archives.len()
    ));
    for a in &d.archives {
        out.push_str(&format!("  {}\n", archive_line(a)));
    }
    out
}

fn archive_line(a: &ArchiveInfo) -> String {
    let when = a
        .created_unix
        .and_then(|t| i64::try_from(t).ok())
        .and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok())
        .map(crm_xml::timefmt::format_k8s)
        .unwrap_or_else(|| "-".into());
    let or_dash = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    format!(
        "{}  {}  {when}  epoch {}  raft index {}  {}",
        a.path.display(),
        human_size(a.size_bytes),
        or_dash(a.epoch),
        or_dash(a.raft_index),
        a.reason.as_deref().unwrap_or("-")
    )
}

fn human_size(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// Exit code: the daemon answered and this node is not healthy.
const EXIT_NOT_HEALTHY: u8 = 2;

/// Exit code: the daemon does not answer on its socket.
const EXIT_UNREACHABLE: u8 = 3;

/// The exit codes, for `--help` and the man page.
const EXIT_STATUS: &str = "Exit status:
  0   this node is healthy: etcd runs, is a voter, sees a leader and quorum, no alarm, and the daemon waits for no command
  1   the daemon answered with an error, or did not answer in time
  2   this node is not healthy (the health line says why; the next line, when shown, is the command to run)
  3   the daemon is not reachable at its socket (not running: see `systemctl status etcd-warden` and `journalctl -u etcd-warden`; or this user may not connect)
  78  the configuration is refused (EX_CONFIG); stderr names the file, the line and the key

The exit status judges this node only: a peer that is offline or fenced, or Pacemaker being unavailable, shows in the node, pacemaker, fencing and last fence rows but does not change it (`etcd-warden health` judges the whole cluster).";

/// What keeps this node from being healthy: the daemon does not wait for
/// an operator's command (`waits`), etcd runs here, a linearizable read
/// succeeds, the member is a voter, there is a leader, no alarm is raised.
/// Empty when healthy.
pub(crate) fn problems(s: &NodeStatus, waits: bool) -> Vec<String> {
    let mut p = Vec::new();
    if waits {
        p.push("the daemon will not go on by itself: run the next command".to_string());
    }
    if !s.etcd_running {
        p.push("etcd is not running on this node".into());
        return p;
    }
    if !s.quorum {
        p.push("no quorum (a linearizable read failed)".to_string());
    }
    if s.leader_id.is_none() {
        p.push("no leader".into());
    }
    if s.is_learner {
        p.push("the local member is a learner".into());
    }
    if let Some(db) = s.etcd_db.as_ref().filter(|db| !db.alarms.is_empty()) {
        p.push(format!("alarm {}", db.alarms.join(", ")));
    }
    p
}

/// The health line: `healthy`, or `not healthy: ` and why.
fn health_line(s: &NodeStatus, waits: bool) -> String {
    match problems(s, waits).as_slice() {
        [] => "healthy".into(),
        p => format!("not healthy: {}", p.join("; ")),
    }
}

/// Show this node's state, etcd's live view, the cluster and the archives.
/// The report is asked for beside the status, with its own shorter
/// deadline, so that a missing or slow report never hides this node.
pub(crate) fn run_status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let client = args.target.client()?;
    let timeout = args.target.timeout();
    let (status, cluster) = std::thread::scope(|scope| {
        let report = scope.spawn(|| Cluster::fetch(&client, timeout.min(pair::REPORT_DEADLINE)));
        let status = client.get::<StatusDoc>(paths::STATUS, timeout);
        let cluster = report
            .join()
            .unwrap_or_else(|_| Cluster::Unavailable("the report request panicked".into()));
        (status, cluster)
    });
    let s = match status {
        Ok(s) => s,
        Err(ClientError::Connect { path, error }) => {
            eprintln!(
                "etcd-warden: error: {}",
                args.target.unreachable(&path, &error)
            );
            return Ok(ExitCode::from(EXIT_UNREACHABLE));
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        let json = StatusJson::new(&s, &cluster);
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", screen(&s, &cluster));
    }
    Ok(
        if problems(&s.node, s.resolve_command.is_some()).is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(EXIT_NOT_HEALTHY)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeStatus {
        NodeStatus {
            node: "a".into(),
            topology: "two-node".into(),
            state: "running".into(),
            etcd_running: true,
            etcd_pid: Some(42),
            quorum: true,
            member_id: Some(0x8e9e05c52164694d),
            leader_id: Some(0x8e9e05c52164694d),
            is_learner: false,
            raft_term: Some(3),
            raft_index: Some(10),
            revision: Some(5),
            cluster_id: Some(0xcdf818194e3a8c32),
            etcd_db: None,
            defrag: None,
            reason: None,
        }
    }

    #[test]
    fn db_version_and_alarms_with_the_runbook_command() {
        let mut n = node();
        assert!(
            !table(&n, None).contains("alarms"),
            "no Status answer, no db lines"
        );
        n.etcd_db = Some(warden_api::EtcdDb {
            version: "3.5.17".into(),
            db_size: 4 * 1024 * 1024,
            db_size_in_use: 1024 * 1024,
            alarms: vec!["NOSPACE".into()],
        });
        let text = table(&n, None);
        assert!(
            text.contains("db          4.0 MiB (etcd 3.5.17), 1.0 MiB in use\n"),
            "{text}"
        );
        assert!(
            text.contains("alarms      NOSPACE: etcd refuses writes"),
            "{text}"
        );
        assert!(
            text.contains("`etcd-warden etcdctl alarm disarm`"),
            "{text}"
        );
        n.etcd_db.as_mut().unwrap().alarms.clear();
        assert!(table(&n, None).contains("alarms      none\n"));
    }

    #[test]
    fn the_last_defragmentation_and_the_policys_answer() {
        let mut n = node();
        n.defrag = Some(warden_api::DefragStatus::default());
        assert!(table(&n, None).contains("defrag      none by this daemon\n"));
        n.defrag = Some(warden_api::DefragStatus {
            runs: vec![warden_api::DefragRun {
                started_at_ms: 1_796_040_000_250,
                duration_ms: 1250,
                db_size_before: 8 * 1024 * 1024,
                db_size_in_use_before: 2 * 1024 * 1024,
                db_size_after: Some(2 * 1024 * 1024),
                leader_moved_to: None,
                by_hand: false,
                error: None,
            }],
            answer: Some("not defragmenting: the cluster has no quorum".into()),
        });
        let text = table(&n, None);
        assert!(
            text.contains(
                "defrag      last 2026-11-30T12:00:00Z, took 1.25s, 8.0 MiB -> 2.0 MiB; policy: not defragmenting: the cluster has no quorum\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn status_lists_archives_and_round_trips_as_json() {
        let d = StatusDoc {
            node: node(),
            archive_dir: Some("/var/lib/etcd.archive".into()),
            archives: vec![ArchiveInfo {
                path: "/var/lib/etcd.archive/1796040000-stale-data".into(),
                reason: Some("stale data".into()),
                created_unix: Some(1_796_040_000),
                epoch: Some(4),
                raft_index: Some(81_234),
                size_bytes: 3 * 1024 * 1024,
                made_by_warden: true,
            }],
            last_archive: Some(crate::app::LastArchive {
                path: "/var/lib/etcd.archive/1796040000-stale-data".into(),
                reason: Some("stale data".into()),
            }),
            resolve_command: None,
        };
        let text = archive_rows(&d);
        assert!(
            text.contains("archive dir /var/lib/etcd.archive\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  /var/lib/etcd.archive/1796040000-stale-data  3.0 MiB  2026-11-30T12:00:00Z  epoch 4  raft index 81234  stale data\n"
            ),
            "{text}"
        );
        let json = serde_json::to_value(&d).unwrap();
        // NodeStatus's fields stay at the top level, ids as strings.
        assert_eq!(json["memberId"], "10276657743932975437");
        assert_eq!(json["lastArchive"]["reason"], "stale data");
        let back: StatusDoc = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, d);
        // A client that knows only NodeStatus still reads the answer.
        let plain: NodeStatus = serde_json::from_value(json).unwrap();
        assert_eq!(plain, d.node);
    }

    #[test]
    fn an_answer_without_archives_still_reads() {
        let json = serde_json::to_value(node()).unwrap();
        let d: StatusDoc = serde_json::from_value(json).unwrap();
        assert!(d.archives.is_empty() && d.archive_dir.is_none());
        assert!(archive_rows(&d).contains("archives    none\n"));
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(1536), "1.5 KiB");
    }

    #[test]
    fn the_health_line_names_what_is_wrong_and_a_refusal_its_command() {
        let mut n = node();
        assert!(table(&n, None).contains("health      healthy\n"));
        assert!(problems(&n, false).is_empty());
        n.is_learner = true;
        n.leader_id = None;
        assert!(
            table(&n, None)
                .contains("health      not healthy: no leader; the local member is a learner\n")
        );
        let mut stopped = node();
        stopped.etcd_running = false;
        let cmd = "etcd-warden recover force-new-cluster --node a";
        let text = table(&stopped, Some(cmd));
        assert!(
            text.contains(
                "health      not healthy: the daemon will not go on by itself: run the next command; etcd is not running on this node\n\
                 next        etcd-warden recover force-new-cluster --node a\n"
            ),
            "{text}"
        );
        // The command round-trips in the JSON, and is left out when none.
        let d = StatusDoc {
            node: stopped,
            archive_dir: None,
            archives: vec![],
            last_archive: None,
            resolve_command: Some(cmd.into()),
        };
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["resolveCommand"], cmd);
        let back: StatusDoc = serde_json::from_value(json).unwrap();
        assert_eq!(back, d);
        let none = serde_json::to_value(StatusDoc {
            resolve_command: None,
            ..d
        })
        .unwrap();
        assert!(none.get("resolveCommand").is_none(), "{none}");
    }

    #[test]
    fn a_refusal_shows_its_command_then_both_nodes_and_the_json_has_the_report() {
        use crm_xml::report::EtcdRole;
        let mut n = node();
        n.node = "nodeA".into();
        n.etcd_running = false;
        n.etcd_pid = None;
        let cmd = "etcd-warden recover force-new-cluster --node nodeA";
        let d = StatusDoc {
            node: n,
            archive_dir: None,
            archives: vec![],
            last_archive: None,
            resolve_command: Some(cmd.into()),
        };
        let report = pair::tests::report_of(
            pair::tests::FENCED_PEER,
            vec![pair::tests::member("nodeB", EtcdRole::Voter)],
        );
        let cluster = Cluster::Report(Box::new(report.clone()));
        let text = screen(&d, &cluster);
        let next = text.find(&format!("next        {cmd}\n")).expect(&text);
        let peer = text
            .find("  nodeB     offline; etcd stopped; member voter\n")
            .expect(&text);
        let archives = text.find("archives    none\n").expect(&text);
        assert!(next < peer && peer < archives, "{text}");
        assert!(problems(&d.node, true).len() > 1);

        // JSON: the status answer's fields at the top, the report beside.
        let json = serde_json::to_value(StatusJson::new(&d, &cluster)).unwrap();
        assert_eq!(json["resolveCommand"], cmd);
        assert_eq!(json["node"], "nodeA");
        let back: Report = serde_json::from_value(json["report"].clone()).unwrap();
        assert_eq!(back, report);
        assert!(json.get("reportError").is_none(), "{json}");
        // Without a report: this node still shows, and the reason.
        let none = Cluster::Unavailable("no Pacemaker report: crm_mon failed".into());
        let text = screen(&d, &none);
        assert!(text.contains(&format!("next        {cmd}\n")), "{text}");
        assert!(
            text.contains("pacemaker   unavailable (no Pacemaker report: crm_mon failed)\n"),
            "{text}"
        );
        let json = serde_json::to_value(StatusJson::new(&d, &none)).unwrap();
        assert_eq!(json["reportError"], "no Pacemaker report: crm_mon failed");
        assert!(json.get("report").is_none(), "{json}");
    }

    #[test]
    fn a_pause_by_maintenance_has_its_own_line() {
        assert_eq!(failover_line(None), "automatic");
        assert_eq!(
            failover_line(Some("running as the only voter")),
            "automatic"
        );
        assert_eq!(
            failover_line(Some(
                "automatic failover paused: cluster in maintenance mode"
            )),
            "automatic failover paused: cluster in maintenance mode"
        );
    }
}
