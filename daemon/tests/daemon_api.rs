//! The local API's guards: the SO_PEERCRED allow-list, the socket's mode,
//! malformed requests, and configuration errors that name file, line, key.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::Duration;

use common::*;
use warden_api::{Action, ActionReply, Outcome};

#[test]
fn the_socket_is_0660_and_never_world_accessible() {
    let d = Daemon::start(false);
    let meta = std::fs::metadata(d.socket()).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(meta.permissions().mode() & 0o007, 0);
}

#[test]
fn a_uid_outside_the_allow_list_is_refused() {
    // The allow-list of a standalone setup run as root is root only.
    assert!(
        nix_uid_is_root(),
        "this test needs root (it switches to uid 65534)"
    );
    let d = Daemon::start(false);
    // Let uid 65534 reach the socket (directory traversal + the socket's
    // group), so that the refusal comes from the allow-list, not from file
    // permissions.
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let gid = std::fs::metadata(d.socket()).unwrap().gid();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534"])
        .arg(format!("--groups={gid}"))
        .arg(BIN)
        .arg("status")
        .arg("--socket")
        .arg(d.socket())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "uid 65534 was served: {stderr}");
    assert!(stderr.contains("403"), "{stderr}");
    assert!(stderr.contains("uid 65534 may not use"), "{stderr}");
    // Without the socket's group, the connection itself is refused: said
    // as such, not as a daemon that is down.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(BIN)
        .arg("status")
        .arg("--socket")
        .arg(d.socket())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("this user may not connect to the etcd-warden daemon's socket"),
        "{stderr}"
    );
    // root still is: the table, with exit 2 as etcd is not started.
    let out = Command::new(BIN)
        .arg("status")
        .arg("--socket")
        .arg(d.socket())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("health      not healthy"), "{stdout}");
    assert!(d.log().contains("refused an API connection"));
}

#[allow(clippy::unwrap_used)]
fn nix_uid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
}

#[test]
fn malformed_requests_get_a_4xx_with_a_message_and_never_crash() {
    let d = Daemon::start(false);
    let sock = d.socket();
    let cases: &[(&[u8], &str, &str)] = &[
        (
            b"POST /v1/action HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\nConnection: close\r\n\r\n{\"actio",
            "400",
            "malformed JSON",
        ),
        (
            b"POST /v1/action HTTP/1.1\r\nHost: x\r\nContent-Length: 37\r\nConnection: close\r\n\r\n{\"action\":\"explode\",\"deadline_ms\":10}",
            "400",
            "unknown variant",
        ),
        (
            b"POST /v1/action HTTP/1.1\r\nHost: x\r\nContent-Length: 36\r\nConnection: close\r\n\r\n{\"action\":\"monitor\",\"deadline_ms\":0}",
            "400",
            "deadline_ms",
        ),
        (
            b"GET /v1/action HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "405",
            "not allowed",
        ),
        (
            b"GET /v2/nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "404",
            "no route",
        ),
        (
            b"POST /v1/event HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]",
            "400",
            "malformed JSON",
        ),
    ];
    for (req, code, msg) in cases {
        let answer = raw_unix(&sock, req);
        let status = answer.split_whitespace().nth(1).unwrap_or_default();
        assert_eq!(status, *code, "{answer}");
        assert!(answer.contains(msg), "{answer}");
        assert!(answer.contains("\"error\""), "{answer}");
    }
    // Not HTTP at all: hyper answers 400 or closes; either way the daemon lives.
    let answer = raw_unix(&sock, b"\x00\x01garbage\r\n\r\n");
    assert!(answer.is_empty() || answer.contains(" 400 "), "{answer}");
    // A body above the limit.
    let big = format!(
        "POST /v1/event HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        4 * 1024 * 1024
    );
    let answer = raw_unix(&sock, big.as_bytes());
    assert!(answer.is_empty() || answer.contains(" 413 "), "{answer}");
    // Still serving.
    let r: ActionReply = d
        .client()
        .post(
            "/v1/action",
            &serde_json::json!({"action": "monitor", "deadline_ms": 1000}),
            Duration::from_secs(3),
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::NotRunning);
}

#[test]
fn validate_all_names_the_bad_parameter_and_checks_the_config_on_disk() {
    let d = Daemon::start(false);
    assert_eq!(
        d.action(Action::ValidateAll, 0, 2000).outcome,
        Outcome::Success
    );
    let r: ActionReply = d
        .client()
        .post(
            "/v1/action",
            &serde_json::json!({"action": "validate-all", "deadline_ms": 2000,
                                "params": {"node_name": "someone-else"}}),
            Duration::from_secs(3),
        )
        .unwrap();
    assert_eq!(r.outcome, Outcome::InvalidArgs);
    assert!(r.reason.unwrap().contains("node_name"));
    // An operator breaks a drop-in: validate-all says where.
    let dropins = d.dir.path().join("config.d");
    std::fs::create_dir_all(&dropins).unwrap();
    std::fs::write(dropins.join("50-bad.toml"), "[etcd]\nsnapshot_count = -1\n").unwrap();
    let r = d.action(Action::ValidateAll, 0, 2000);
    assert_eq!(r.outcome, Outcome::InvalidArgs);
    let reason = r.reason.unwrap();
    assert!(reason.contains("50-bad.toml:2"), "{reason}");
    assert!(reason.contains("etcd.snapshot_count"), "{reason}");
    // A value etcd itself would refuse is caught the same way.
    std::fs::write(
        dropins.join("50-bad.toml"),
        "[etcd]\nheartbeat_interval_ms = 500\n",
    )
    .unwrap();
    let r = d.action(Action::ValidateAll, 0, 2000);
    assert_eq!(r.outcome, Outcome::InvalidArgs);
    let reason = r.reason.unwrap();
    assert!(
        reason.contains("50-bad.toml:2: key `etcd.heartbeat_interval_ms`"),
        "{reason}"
    );
}

#[test]
fn events_are_acknowledged() {
    let d = Daemon::start(false);
    let ack: warden_api::Ack = d
        .client()
        .post(
            "/v1/event",
            &warden_api::ClusterEvent {
                kind: "fencing".into(),
                node: Some("peer".into()),
                task: Some("reboot".into()),
                rc: Some(0),
                ..Default::default()
            },
            Duration::from_secs(3),
        )
        .unwrap();
    assert!(ack.accepted);
    assert!(d.log().contains("cluster event"));
}

#[test]
fn a_bad_config_file_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("config.toml");
    std::fs::write(
        &main,
        "node_name = \"a\"\ntopology = \"two-node\"\n\n[timeouts]\nprobe_interval_ms = \"often\"\n",
    )
    .unwrap();
    // The daemon on `main`, run to its exit.
    let daemon = || {
        Command::new(BIN)
            .arg("daemon")
            .arg("--config")
            .arg(&main)
            .output()
            .unwrap()
    };
    let out = daemon();
    // EX_CONFIG: the unit does not restart a daemon that would fail again.
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!("{}:5: key `timeouts.probe_interval_ms`", main.display());
    assert!(stderr.contains(&want), "{stderr}");

    // A drop-in with an unknown key.
    std::fs::write(
        &main,
        "node_name = \"a\"\ntopology = \"ha\"\n[[nodes]]\nname = \"a\"\npeer_urls = [\"http://127.0.0.1:1\"]\nclient_urls = [\"http://127.0.0.1:2\"]\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("config.d")).unwrap();
    let dropin = dir.path().join("config.d/10-extra.toml");
    std::fs::write(
        &dropin,
        "[etcd]\n\nextra_flags = [\"--force-new-cluster\"]\n",
    )
    .unwrap();
    let out = daemon();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:3:", dropin.display())) && stderr.contains("extra_flags"),
        "{stderr}"
    );

    // A heartbeat etcd's default election timeout cannot follow: refused
    // at load, not by etcd after the start.
    std::fs::write(&dropin, "[etcd]\nheartbeat_interval_ms = 500\n").unwrap();
    let out = daemon();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    let want = format!("{}:2: key `etcd.heartbeat_interval_ms`", dropin.display());
    assert!(stderr.contains(&want), "{stderr}");

    // A standalone-only flag with --config is a usage error, not ignored.
    let out = Command::new(BIN)
        .args(["daemon", "--config"])
        .arg(&main)
        .args(["--http-addr", "127.0.0.1:9481"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--http-addr") && stderr.contains("--config"),
        "{stderr}"
    );
}

#[test]
fn defrag_refuses_the_only_voter_and_the_status_says_why() {
    let mut d = Daemon::start(true);
    d.wait_ready();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .arg("--standalone")
            .arg(d.dir.path())
            .output()
            .unwrap()
    };
    // Even below the threshold, the one member of a one-node cluster is
    // never defragmented: its stall would stop every write.
    let out = run(&["defrag", "--below-threshold"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("only voter"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("asking the daemon to defragment"),
        "{stderr}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&run(&["status", "--json"]).stdout).unwrap();
    assert!(
        json["defrag"]["answer"]
            .as_str()
            .is_some_and(|a| a.contains("only voter")),
        "{json}"
    );
    assert_eq!(json["defrag"]["runs"], serde_json::json!([]));
    let table = String::from_utf8(run(&["status"]).stdout).unwrap();
    assert!(
        table.contains("defrag      none by this daemon; policy: not defragmenting"),
        "{table}"
    );
}

#[test]
fn status_members_and_snapshot_commands() {
    let mut d = Daemon::start(true);
    d.wait_ready();
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .arg("--standalone")
            .arg(d.dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run(&["status"]);
    assert!(table.contains("state       running"), "{table}");
    assert!(table.contains("quorum      yes"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&run(&["status", "--json"])).unwrap();
    assert_eq!(json["quorum"], true);
    let members = run(&["members"]);
    assert!(members.contains("voter"), "{members}");
    let id = json["memberId"].as_str().unwrap().parse::<u64>().unwrap();
    assert!(members.contains(&format!("{id:x}")), "{members}");
    let snap = d.dir.path().join("snap.db");
    let out = run(&["snapshot", "save", snap.to_str().unwrap()]);
    assert!(out.contains("verified"), "{out}");
    // etcd's own tool agrees that it is a sound snapshot.
    let check = Command::new("etcdctl")
        .args(["snapshot", "status", "-w", "json"])
        .arg(&snap)
        .env("ETCDCTL_API", "3")
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(!d.dir.path().join("snap.part").exists());
}

#[test]
fn the_report_combines_crm_mon_with_the_live_etcd_section() {
    // crm_mon reads a CIB file instead of a live cluster (CIB_file), so the
    // report path is real without a running Pacemaker.
    let cib = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/two_node_cib.xml"
    );
    let mut d = Daemon::start_with_env(true, &[("CIB_file", cib)]);
    d.wait_ready();
    let member = d.status().member_id.unwrap();
    let body = d
        .client()
        .get_raw(warden_api::paths::REPORT, Duration::from_secs(10))
        .unwrap();
    let report: crm_xml::report::Report = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body)));
    assert_eq!(report.api_version, "etcd.openshift.io/v1");
    let etcd = report.etcd.expect("the etcd section");
    assert_eq!(etcd.members.len(), 1);
    assert_eq!(etcd.members[0].id, format!("{member:x}"));
    assert_eq!(etcd.leader, Some(format!("{member:x}")));
    // The TCP /status serves the same document.
    let (code, body) = d.http_get("/status").unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("etcd.openshift.io/v1"));
}
