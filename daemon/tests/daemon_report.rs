//! The daemon's own report writer (`[report]`), on real components: the real
//! `etcd-warden daemon` with a real etcd, and the real crm_mon reading a CIB
//! file (`CIB_file`) instead of a live cluster.
//!
//! The report file appears within a deadline, validates against the shipped
//! JSON Schema, carries the live etcd section, keeps a condition's
//! lastTransitionTime across cycles, and survives a broken crm_mon whole
//! while the failures are logged and counted.

#![allow(clippy::unwrap_used)]

mod common;

#[path = "../../crm-xml/tests/common/mod.rs"]
#[allow(unused_imports)]
mod crm_common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{BIN, Daemon, metric, wait_for};
use crm_xml::report::Report;

/// The CIB of a two-node cluster with status (master-0 id 1, master-1 id 2).
const CIB: &str = include_str!("fixtures/two_node_cib.xml");

/// The Corosync configuration of that cluster, so that the nodes get
/// addresses (and so appear in the status) without corosync-cmapctl.
const COROSYNC_CONF: &str = include_str!("fixtures/two_node_corosync.conf");

/// The shipped JSON Schema of the CR's status.
fn schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crm-xml/schema/pacemakercluster-status.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

/// A standalone daemon with etcd, writing the report every second from
/// `CIB_file=<dir>/cib.xml`; returns it and the report's path.
fn start() -> (Daemon, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    // <dir>/run does not exist: the daemon creates the report's directory.
    let report = dir.path().join("run/report.json");
    start_in(dir, report, CIB)
}

/// A standalone daemon in `dir` writing `report` every second from
/// `CIB_file=<dir>/cib.xml`, which holds `cib` at the start; returns it,
/// the report's path and the CIB's.
fn start_in(dir: tempfile::TempDir, report: PathBuf, cib_text: &str) -> (Daemon, PathBuf, PathBuf) {
    let cib = dir.path().join("cib.xml");
    let conf = dir.path().join("corosync.conf");
    std::fs::write(&cib, cib_text).unwrap();
    std::fs::write(&conf, COROSYNC_CONF).unwrap();
    // A drop-in next to the standalone configuration the daemon generates.
    std::fs::create_dir_all(dir.path().join("config.d")).unwrap();
    std::fs::write(
        dir.path().join("config.d/50-report.toml"),
        format!(
            "[report]\npath = {report:?}\ninterval_ms = 1000\ncrm_mon_timeout_ms = 5000\ncib_file = {cib:?}\ncorosync_conf = {conf:?}\nexpected_nodes = 2\n"
        ),
    )
    .unwrap();
    let mut d = Daemon::in_dir(dir, &[("CIB_file", &cib.display().to_string())]);
    d.spawn(true);
    (d, report, cib)
}

fn read_report(path: &Path) -> Option<Report> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(Report::from_json(&text).unwrap_or_else(|e| panic!("{e}: {text}")))
}

/// The first report that carries the live etcd `member` (the very first
/// cycle may run before etcd answers).
fn report_with_member(path: &Path, member: &str) -> Report {
    wait_for(
        "a report with the etcd member",
        Duration::from_secs(20),
        || {
            read_report(path).filter(|r| {
                r.etcd
                    .as_ref()
                    .is_some_and(|e| e.members.iter().any(|m| m.id == member))
            })
        },
    )
}

fn cycles(d: &Daemon, result: &str) -> f64 {
    let (code, text) = d.http_get("/metrics").unwrap();
    assert_eq!(code, 200);
    metric(
        &text,
        &format!("etcd_warden_report_cycles_total{{result=\"{result}\"}}"),
    )
    .unwrap_or_else(|| panic!("no report cycle metric in {text}"))
}

#[test]
fn the_daemon_writes_the_report_and_keeps_it_whole_when_crm_mon_breaks() {
    let (mut d, path, cib) = start();
    d.wait_ready();
    let member = format!("{:x}", d.status().member_id.unwrap());
    let first = report_with_member(&path, &member);
    crm_common::check_status(&schema(), &first.status).unwrap_or_else(|e| panic!("{e}"));
    // `health` without --report reads the report the configuration names.
    let health = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new(BIN)
            .arg("health")
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let configured = health(&[
        "--config".as_ref(),
        d.dir.path().join("config.toml").as_ref(),
    ]);
    let given = health(&["--report".as_ref(), path.as_ref()]);
    assert!(configured.1.contains(" | age="), "{configured:?}");
    assert_eq!(configured, given);
    let etcd = first.etcd.as_ref().unwrap();
    assert_eq!(etcd.leader.as_deref(), Some(member.as_str()), "{etcd:?}");
    assert_eq!(etcd.members.len(), 1, "{etcd:?}");
    // The CIB and the Corosync file were read: both nodes with their
    // addresses, and the fence devices attributed.
    let names: Vec<&str> = first
        .status
        .nodes
        .iter()
        .map(|n| n.node_name.as_str())
        .collect();
    assert_eq!(names, ["master-0", "master-1"], "{first:?}");
    assert_eq!(first.status.nodes[0].addresses[0].address, "192.0.2.10");
    assert!(
        first
            .status
            .nodes
            .iter()
            .all(|n| !n.fencing_agents.is_empty()),
        "{:?}",
        first.status.nodes
    );

    // A later cycle (at least two seconds on, so that a reset transition
    // time would differ) keeps every unchanged condition's transition time.
    let first_updated = crm_xml::timefmt::parse_k8s(&first.status.last_updated).unwrap();
    let later = wait_for("a later report", Duration::from_secs(20), || {
        read_report(&path).filter(|r| {
            crm_xml::timefmt::parse_k8s(&r.status.last_updated)
                .is_some_and(|t| t - first_updated >= time::Duration::seconds(2))
        })
    });
    crm_common::check_status(&schema(), &later.status).unwrap_or_else(|e| panic!("{e}"));
    for c in &first.status.conditions {
        let now = later
            .status
            .conditions
            .iter()
            .find(|l| l.kind == c.kind)
            .unwrap();
        assert_eq!(now.status, c.status, "{:?}", c.kind);
        assert_eq!(
            now.last_transition_time, c.last_transition_time,
            "{:?} lost its transition time",
            c.kind
        );
    }
    assert!(cycles(&d, "success") >= 2.0);

    // /v1/report is built from the same inputs: the same nodes, addresses
    // and fence devices as the written report.
    let body = d
        .client()
        .get_raw(warden_api::paths::REPORT, Duration::from_secs(10))
        .unwrap();
    let api: Report = serde_json::from_slice(&body).unwrap();
    assert_eq!(api.status.nodes.len(), later.status.nodes.len());
    for (a, w) in api.status.nodes.iter().zip(&later.status.nodes) {
        assert_eq!(a.node_name, w.node_name);
        assert_eq!(a.addresses, w.addresses);
        assert_eq!(a.fencing_agents, w.fencing_agents);
    }

    // crm_mon breaks: the CIB it reads is garbage. Cycles fail, are
    // counted and logged, and the report stays the last good one, whole.
    let failed_before = cycles(&d, "failure");
    std::fs::write(&cib, "garbage, not a CIB\n").unwrap();
    wait_for("a failed cycle", Duration::from_secs(20), || {
        (cycles(&d, "failure") > failed_before).then_some(())
    });
    let kept = std::fs::read_to_string(&path).unwrap();
    let failed = cycles(&d, "failure");
    wait_for("two more failed cycles", Duration::from_secs(20), || {
        (cycles(&d, "failure") >= failed + 2.0).then_some(())
    });
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        kept,
        "a failed cycle changed the report"
    );
    let kept = Report::from_json(&kept).unwrap();
    crm_common::check_status(&schema(), &kept.status).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kept.status.nodes.len(), 2);
    // Nothing but the report in its directory: no temp file left behind.
    let entries: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, [path.file_name().unwrap()], "{entries:?}");
    let log = d.log();
    assert!(
        log.contains("report cycle failed") && log.contains("crm_mon failed"),
        "{log}"
    );
    // The daemon is still serving.
    assert_eq!(d.http_get("/healthz").unwrap().0, 200);
    let (code, metrics) = d.http_get("/metrics").unwrap();
    assert_eq!(code, 200);
    let last = metric(
        &metrics,
        "etcd_warden_report_last_success_timestamp_seconds",
    )
    .unwrap();
    assert!(last > 0.0, "{metrics}");

    // Repaired, the next cycle writes again.
    std::fs::write(&cib, CIB).unwrap();
    let ok = cycles(&d, "success");
    wait_for(
        "a successful cycle after the repair",
        Duration::from_secs(20),
        || (cycles(&d, "success") > ok).then_some(()),
    );
}

/// `etcd-warden ARGS` as root: (exit code, stdout, stderr).
fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The lost peer of [`CIB`]: master-1 out of the membership, its
/// resources never seen to stop (crm_mon shows it offline and unclean).
fn with_peer_lost(cib: &str) -> String {
    let up = r#"uname="master-1" in_ccm="true" crmd="online" join="member" expected="member""#;
    assert!(cib.contains(up));
    cib.replace(
        up,
        r#"uname="master-1" in_ccm="false" crmd="offline" join="down" expected="down""#,
    )
}

#[test]
fn status_shows_the_lost_peer_pacemaker_and_fencing_and_this_node_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("run/report.json");
    let (mut d, _, cib) = start_in(dir, report, "no CIB yet\n");
    d.wait_ready();
    // The CIB's first node is this daemon's own (its etcd member's name).
    let me = d.status().node;
    std::fs::write(&cib, with_peer_lost(&CIB.replace("master-0", &me))).unwrap();
    let config = d.dir.path().join("config.toml");
    let status = |json: bool| {
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["status".as_ref(), "--config".as_ref(), config.as_ref()];
        if json {
            args.push("--json".as_ref());
        }
        run(&args)
    };

    // This node is healthy (exit 0); the peer's loss shows in its rows.
    let (code, out, err) = status(false);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("health      healthy\n"), "{out}");
    assert!(out.contains("pacemaker   quorum "), "{out}");
    let mine = format!("  {me:<9} online; etcd ");
    let line = |prefix: &str| {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {out}"))
            .to_string()
    };
    assert!(line(&mine).ends_with("; member voter (this node)"), "{out}");
    assert!(
        line("  master-1  offline, unclean; etcd ").ends_with("; member absent"),
        "{out}"
    );
    assert!(
        line("fencing     enabled; ").contains("bmc-1 started on"),
        "{out}"
    );
    assert_eq!(
        line("last fence  "),
        "last fence  none in Pacemaker's fence history"
    );
    // The JSON: the status answer with the report beside it.
    let (code, json, err) = status(true);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["node"], me.as_str());
    let nodes = v["report"]["pacemaker"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{json}");
    assert!(v.get("reportError").is_none(), "{json}");

    // crm_mon fails: this node still shows, Pacemaker is said unavailable.
    std::fs::write(&cib, "garbage, not a CIB\n").unwrap();
    let (code, out, err) = status(false);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("health      healthy\n"), "{out}");
    assert!(
        line_starting(&out, "pacemaker   unavailable (no Pacemaker report: "),
        "{out}"
    );
    let (_, json, _) = status(true);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        v["reportError"].as_str().unwrap().contains("crm_mon"),
        "{json}"
    );
    assert!(v.get("report").is_none(), "{json}");

    // The daemon is down: said so, with where to look, exit 3.
    d.kill_daemon();
    let (code, out, err) = status(false);
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(
        err.contains("is not reachable")
            && err.contains("`systemctl status etcd-warden`")
            && err.contains("`journalctl -u etcd-warden`"),
        "{err}"
    );
}

fn line_starting(text: &str, prefix: &str) -> bool {
    text.lines().any(|l| l.starts_with(prefix))
}

/// The mode the packaged unit gives the daemon's runtime directory.
fn unit_runtime_mode() -> u32 {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd/etcd-warden.service");
    let text = std::fs::read_to_string(unit).unwrap();
    let mode = text
        .lines()
        .find_map(|l| l.strip_prefix("RuntimeDirectoryMode="))
        .unwrap();
    u32::from_str_radix(mode.trim(), 8).unwrap()
}

#[test]
fn a_user_in_no_group_of_the_daemon_runs_health_on_the_configured_report() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (it switches to nobody)"
    );
    // As on a node: the report in a runtime directory with the unit's
    // mode, the way down to it passable as /run is.
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("run/etcd-warden");
    std::fs::create_dir_all(&runtime).unwrap();
    let mode = unit_runtime_mode();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(mode)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let (mut d, path, _) = start_in(dir, runtime.join("report.json"), CIB);
    d.wait_ready();
    let member = format!("{:x}", d.status().member_id.unwrap());
    report_with_member(&path, &member);
    let config = d.dir.path().join("config.toml");
    let nobody = || {
        let out = Command::new("setpriv")
            .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
            .arg(BIN)
            .arg("health")
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, out, err) = nobody();
    let (root_code, root_out, _) = run(&["health".as_ref(), "--config".as_ref(), config.as_ref()]);
    // The same verdict and findings as root's; the first line in the
    // monitoring-plugin form.
    assert_eq!(code, root_code, "nobody: {out}{err}\nroot: {root_out}");
    assert!(matches!(code, Some(0..=2)), "{out}{err}");
    let first = out.lines().next().unwrap();
    let state =
        ["HEALTHY - ", "WARNING - ", "DEGRADED - "][usize::try_from(code.unwrap()).unwrap()];
    assert!(
        first.starts_with(state) && first.contains(" | age="),
        "{out}"
    );
    assert_eq!(
        out.lines().skip(1).collect::<Vec<_>>(),
        root_out.lines().skip(1).collect::<Vec<_>>()
    );

    // With the directory closed to others, the same user cannot read it:
    // the mode above is what lets it in.
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o750)).unwrap();
    let (code, out, err) = nobody();
    assert_eq!(code, Some(3), "{out}{err}");
    assert!(
        out.starts_with("UNKNOWN - cannot read ") && out.contains("Permission denied"),
        "{out}"
    );
}
