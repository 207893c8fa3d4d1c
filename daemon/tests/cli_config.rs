//! `etcd-warden check-config` on broken configurations, and the other
//! subcommands on a refused configuration or a daemon that is not there:
//! the real binary, real files in a temporary directory, exit codes and
//! messages as an operator sees them.

#![allow(clippy::unwrap_used)]

mod common;
mod tls_support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::BIN;
use tls_support::{Pki, make_pki};

/// A valid two-node configuration with TLS on both sides, everything
/// under `dir`, etcd run as root (an account every host has).
fn good(dir: &Path, pki: &Pki) -> String {
    format!(
        r#"node_name = "a"
topology = "two-node"

[[nodes]]
name = "a"
peer_urls = ["https://127.0.0.1:2380"]
client_urls = ["https://127.0.0.1:2379"]

[[nodes]]
name = "b"
peer_urls = ["https://127.0.0.2:2380"]
client_urls = ["https://127.0.0.2:2379"]

[etcd]
binary = "/bin/true"
data_dir = "{dir}/etcd/data"
user = "root"

[tls.client]
cert_file = "{server_cert}"
key_file = "{server_key}"
trusted_ca_file = "{ca}"

[tls.peer]
cert_file = "{peer_cert}"
key_file = "{peer_key}"
trusted_ca_file = "{ca}"

[api]
socket = "{dir}/api.sock"

[paths]
state_dir = "{dir}/state"
"#,
        dir = dir.display(),
        server_cert = pki.server_cert.display(),
        server_key = pki.server_key.display(),
        peer_cert = pki.peer_cert.display(),
        peer_key = pki.peer_key.display(),
        ca = pki.ca.display(),
    )
}

/// A directory with a PKI and the good main file, `config.toml`.
struct Setup {
    dir: tempfile::TempDir,
    pki: Pki,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        std::fs::create_dir(&pki_dir).unwrap();
        let pki = make_pki(&pki_dir);
        let s = Setup { dir, pki };
        s.write("config.toml", &good(s.dir.path(), &s.pki));
        s
    }

    fn main(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `etcd-warden ARGS --config <main>`.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .arg("--config")
            .arg(self.main())
            .output()
            .unwrap()
    }
}

/// Asserts that `out` exited with `code` (its stderr in the message);
/// returns its stderr.
fn exit_code(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    stderr
}

/// One broken configuration: what the file says and what the error must
/// name.
struct Case {
    what: &'static str,
    /// The file written (`config.toml` replaces the good main file; any
    /// other name is a drop-in beside it).
    file: &'static str,
    text: String,
    key: &'static str,
    /// The line, where the file has one for the error.
    line: Option<usize>,
}

fn case(what: &'static str, file: &'static str, text: &str, key: &'static str) -> Case {
    Case {
        what,
        file,
        text: text.to_string(),
        key,
        line: None,
    }
}

impl Case {
    fn at(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }
}

const DROPIN: &str = "config.d/50-edit.toml";

/// The good configuration's `[[nodes]]`, with `a`'s URLs and `b`'s name
/// given.
fn nodes(a_peer: &str, a_client: &str, b_name: &str) -> String {
    format!(
        "[[nodes]]\nname = \"a\"\npeer_urls = [\"{a_peer}\"]\nclient_urls = [\"{a_client}\"]\n\n\
         [[nodes]]\nname = \"{b_name}\"\npeer_urls = [\"https://127.0.0.2:2380\"]\nclient_urls = [\"https://127.0.0.2:2379\"]\n"
    )
}

fn cases(s: &Setup) -> Vec<Case> {
    let good = good(s.dir.path(), &s.pki);
    let dir = s.dir.path().display().to_string();
    let ca = s.pki.ca.display().to_string();
    let ok_peer = "https://127.0.0.1:2380";
    let ok_client = "https://127.0.0.1:2379";
    vec![
        case(
            "an unterminated string",
            DROPIN,
            "[etcd]\ndata_dir = \"/var/lib/x\n",
            "etcd.data_dir",
        )
        .at(2),
        case(
            "a key without `=`",
            DROPIN,
            "# node\nnode_name \"a\"\n",
            "node_name",
        )
        .at(2),
        case(
            "an unclosed table header",
            DROPIN,
            "[timeouts\nprobe_interval_ms = 5\n",
            "timeouts",
        )
        .at(1),
        case(
            "a syntax error in the main file",
            "config.toml",
            &good.replace("topology = \"two-node\"", "topology = two-node"),
            "topology",
        )
        .at(2),
        case(
            "an unknown key",
            DROPIN,
            "[etcd]\n\nextra_flags = [\"--force-new-cluster\"]\n",
            "etcd.extra_flags",
        )
        .at(3),
        case(
            "an unknown section",
            DROPIN,
            "[etcdd]\nbinary = \"/usr/bin/etcd\"\n",
            "etcdd",
        ),
        case(
            "a string for a number",
            DROPIN,
            "[timeouts]\nprobe_interval_ms = \"2s\"\n",
            "timeouts.probe_interval_ms",
        )
        .at(2),
        case(
            "a string for a boolean",
            DROPIN,
            "autostart = \"yes\"\n",
            "autostart",
        )
        .at(1),
        case(
            "a URL without a scheme",
            DROPIN,
            &nodes("127.0.0.1:2380", ok_client, "b"),
            "nodes[0].peer_urls",
        )
        .at(3),
        case(
            "a URL with a host name etcd cannot listen on",
            DROPIN,
            &nodes(ok_peer, "https://etcd-a.example:2379", "b"),
            "nodes[0].client_urls",
        )
        .at(4),
        case(
            "a URL with a path",
            DROPIN,
            &nodes(ok_peer, "https://127.0.0.1:2379/v3", "b"),
            "nodes[0].client_urls",
        )
        .at(4),
        case(
            "a duplicate node name",
            DROPIN,
            &nodes(ok_peer, ok_client, "a"),
            "nodes[1].name",
        )
        .at(7),
        case(
            "the local node missing from the nodes",
            DROPIN,
            "\nnode_name = \"c\"\n",
            "node_name",
        )
        .at(2),
        case(
            "three nodes for a two-node topology",
            DROPIN,
            &format!(
                "{}\n[[nodes]]\nname = \"c\"\npeer_urls = [\"https://127.0.0.3:2380\"]\nclient_urls = [\"https://127.0.0.3:2379\"]\n",
                nodes(ok_peer, ok_client, "b")
            ),
            "nodes",
        ),
        case(
            "an unknown topology",
            DROPIN,
            "topology = \"pair\"\n",
            "topology",
        )
        .at(1),
        case(
            "a duration of 0",
            DROPIN,
            "[timeouts]\nprobe_interval_ms = 0\n",
            "timeouts.probe_interval_ms",
        )
        .at(2),
        case(
            "a duration out of range",
            DROPIN,
            "[report]\ninterval_ms = 1\n",
            "report.interval_ms",
        )
        .at(2),
        case(
            "a pending interval longer than the stable one",
            DROPIN,
            "[failover]\nreconcile_interval_ms = 2000\nreconcile_pending_interval_ms = 3000\n",
            "failover.reconcile_pending_interval_ms",
        )
        .at(3),
        case(
            "a heartbeat etcd's election timeout cannot follow",
            DROPIN,
            "[etcd]\nheartbeat_interval_ms = 500\n",
            "etcd.heartbeat_interval_ms",
        )
        .at(2),
        case(
            "a compaction retention that is no duration",
            DROPIN,
            "[etcd]\nauto_compaction_retention = \"1 day\"\n",
            "etcd.auto_compaction_retention",
        )
        .at(2),
        case(
            "a relative data directory",
            DROPIN,
            "[etcd]\ndata_dir = \"etcd/data\"\n",
            "etcd.data_dir",
        )
        .at(2),
        case(
            "a user this host does not have",
            DROPIN,
            "[etcd]\nuser = \"no-such-etcd-user\"\n",
            "etcd.user",
        )
        .at(2),
        case(
            "an unknown backend",
            DROPIN,
            "[etcd]\nbackend = \"docker\"\n",
            "etcd.backend",
        )
        .at(2),
        case(
            "an etcd binary that is not there",
            DROPIN,
            &format!("[etcd]\nbinary = \"{dir}/no/etcd\"\n"),
            "etcd.binary",
        )
        .at(2),
        case(
            "an HTTP address others could reach",
            DROPIN,
            "[api]\nhttp_addr = \"0.0.0.0:9481\"\n",
            "api.http_addr",
        )
        .at(2),
        case(
            "an archive directory inside the data directory",
            DROPIN,
            &format!("[failover]\narchive_dir = \"{dir}/etcd/data/archive\"\n"),
            "failover.archive_dir",
        )
        .at(2),
        case(
            "a TLS certificate that is not there",
            DROPIN,
            &format!("[tls.client]\ncert_file = \"{dir}/pki/missing.crt\"\n"),
            "tls.client.cert_file",
        )
        .at(2),
        case(
            "a certificate where the key belongs",
            DROPIN,
            &format!("[tls.peer]\n\nkey_file = \"{ca}\"\n"),
            "tls.peer.key_file",
        )
        .at(3),
        case(
            "a CA bundle that holds no certificate",
            DROPIN,
            &format!(
                "[tls.client]\ntrusted_ca_file = \"{}\"\n",
                s.pki.server_key.display()
            ),
            "tls.client.trusted_ca_file",
        )
        .at(2),
        case(
            "https URLs without TLS files",
            "config.toml",
            &good[..good.find("[tls.client]").unwrap()],
            "nodes[0].client_urls",
        )
        .at(7),
        case(
            "no node name anywhere",
            "config.toml",
            &good.replace("node_name = \"a\"\n", ""),
            "node_name",
        ),
    ]
}

/// Restore the good main file and remove the drop-ins.
fn reset(s: &Setup) {
    s.write("config.toml", &good(s.dir.path(), &s.pki));
    let dropins = s.path("config.d");
    if dropins.exists() {
        std::fs::remove_dir_all(dropins).unwrap();
    }
}

#[test]
fn check_config_says_ok_in_one_line_and_refuses_each_broken_configuration_naming_file_and_key() {
    let s = Setup::new();
    let out = s.run(&["check-config"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = exit_code(&out, 0);
    assert_eq!(
        stderr, "",
        "nothing on stderr when the configuration is valid"
    );
    assert_eq!(
        stdout,
        format!(
            "configuration OK: node a of 2 (two-node), read {}\n",
            s.main().display()
        )
    );

    let cases = cases(&s);
    assert!(cases.len() >= 20, "{} cases", cases.len());
    for c in &cases {
        reset(&s);
        let file = s.write(c.file, &c.text);
        let out = s.run(&["check-config"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{}: {stderr}", c.what);
        assert!(out.stdout.is_empty(), "{}: something on stdout", c.what);
        assert!(
            stderr.contains(&format!("key `{}`", c.key)),
            "{}: the key `{}` is not named: {stderr}",
            c.what,
            c.key
        );
        let at = match c.line {
            Some(line) => format!("{}:{line}: ", file.display()),
            None => file.display().to_string(),
        };
        assert!(
            stderr.contains(&at),
            "{}: {at} is not named: {stderr}",
            c.what
        );
        assert_eq!(stderr.lines().count(), 1, "{}: {stderr}", c.what);
    }
}

/// Whether two paths are on different filesystems.
fn apart(a: &Path, b: &Path) -> bool {
    std::fs::metadata(a).unwrap().dev() != std::fs::metadata(b).unwrap().dev()
}

#[test]
fn check_config_refuses_the_state_beside_the_data_on_a_filesystem_without_the_configuration() {
    let s = Setup::new();
    let shm = Path::new("/dev/shm");
    assert!(
        apart(shm, s.dir.path()),
        "/dev/shm must be another filesystem than {} for this test",
        s.dir.path().display()
    );
    let other = tempfile::TempDir::new_in(shm).unwrap();
    let o = other.path().display();
    let dropin = s.write(
        DROPIN,
        &format!("[etcd]\ndata_dir = \"{o}/data\"\n[paths]\nstate_dir = \"{o}/state\"\n"),
    );
    let out = s.run(&["check-config"]);
    let stderr = exit_code(&out, 78);
    assert!(
        stderr.contains(&format!("{}:4: key `paths.state_dir`", dropin.display())),
        "{stderr}"
    );
    // Said why: accepted.
    s.write(
        DROPIN,
        &format!(
            "[etcd]\ndata_dir = \"{o}/data\"\n[paths]\nstate_dir = \"{o}/state\"\nstate_on_data_mount = \"one volume for a test\"\n"
        ),
    );
    let out = s.run(&["check-config"]);
    exit_code(&out, 0);
}

#[test]
fn check_config_refuses_tls_files_etcds_user_cannot_read() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::new();
    let nogroup = primary_gid("nobody");
    s.write(DROPIN, "[etcd]\nuser = \"nobody\"\n");
    let mode = |p: &Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    };
    for f in [&s.pki.server_cert, &s.pki.peer_cert, &s.pki.ca] {
        mode(f, 0o644);
    }
    mode(&s.pki.server_key, 0o600);
    mode(&s.pki.peer_key, 0o600);
    let out = s.run(&["check-config"]);
    let stderr = exit_code(&out, 78);
    // The key's own line in the main file, though the user is set in a
    // drop-in.
    let want = format!(
        "{}:21: key `tls.client.key_file`: etcd runs as nobody (etcd.user) but cannot read {} (mode 0600, root:",
        s.main().display(),
        s.pki.server_key.display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    // Given to nobody's group, as the message says: accepted.
    for k in [&s.pki.server_key, &s.pki.peer_key] {
        std::os::unix::fs::chown(k, None, Some(nogroup)).unwrap();
        mode(k, 0o640);
    }
    let out = s.run(&["check-config"]);
    exit_code(&out, 0);
}

/// A user's primary gid, from /etc/passwd.
fn primary_gid(name: &str) -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.split(':').next() == Some(name))
        .unwrap_or_else(|| panic!("no user {name} in /etc/passwd"));
    line.split(':').nth(3).unwrap().parse().unwrap()
}

#[test]
fn check_config_names_a_main_file_that_is_not_there() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("config.toml");
    let out = Command::new(BIN)
        .args(["check-config", "--config"])
        .arg(&main)
        .output()
        .unwrap();
    let stderr = exit_code(&out, 78);
    assert!(
        stderr.contains(&format!(
            "cannot read configuration file {}: no such file\n",
            main.display()
        )),
        "{stderr}"
    );
}

#[test]
fn every_subcommand_that_reads_the_configuration_refuses_a_broken_one_the_same_way() {
    let s = Setup::new();
    let dropin = s.write(DROPIN, "[timeouts]\nprobe_interval_ms = \"2s\"\n");
    let want = format!("{}:2: key `timeouts.probe_interval_ms`", dropin.display());
    for args in [
        &["check-config"][..],
        &["status"],
        &["status", "--json"],
        &["members"],
        &["start"],
        &["stop"],
        &["defrag"],
        &["snapshot", "save", "/nonexistent/snap.db"],
        &[
            "snapshot",
            "save",
            "/nonexistent/snap.db",
            "--endpoint",
            "https://127.0.0.1:2379",
        ],
        &["recover", "force-new-cluster", "--node", "a"],
        &["health"],
        &["reload"],
    ] {
        let out = s.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{args:?}: {stderr}");
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
    }
    // etcdctl's own arguments come last.
    let out = Command::new(BIN)
        .args(["etcdctl", "--config"])
        .arg(s.main())
        .args(["endpoint", "health"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "etcdctl: {stderr}");
    assert!(stderr.contains(&want), "etcdctl: {stderr}");
}

#[test]
fn status_without_the_daemon_names_the_socket_and_where_to_look() {
    let s = Setup::new();
    let out = s.run(&["status"]);
    let stderr = exit_code(&out, 3);
    assert!(out.stdout.is_empty());
    let socket = s.path("api.sock");
    for want in [
        format!(
            "the etcd-warden daemon is not reachable at {}",
            socket.display()
        ),
        "`systemctl status etcd-warden`".to_string(),
        "`journalctl -u etcd-warden`".to_string(),
    ] {
        assert!(stderr.contains(&want), "{want}: {stderr}");
    }
    // The other clients of the daemon say the same (and fail).
    let out = s.run(&["members"]);
    let stderr = exit_code(&out, 1);
    assert!(
        stderr.contains("not reachable at") && stderr.contains("journalctl -u etcd-warden"),
        "{stderr}"
    );
}

/// `etcd-warden SUB --standalone DIR ARGS` against `d`.
fn standalone(d: &common::Daemon, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg(args[0])
        .arg("--standalone")
        .arg(d.dir.path())
        .args(&args[1..])
        .output()
        .unwrap()
}

#[test]
fn status_exits_by_the_nodes_health_and_etcdctl_reaches_the_nodes_etcd() {
    let mut d = common::Daemon::start(false);
    // etcd not started: the table, and exit 2 with the reason.
    let out = standalone(&d, &["status"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("health      not healthy: etcd is not running on this node\n"),
        "{stdout}"
    );
    let out = standalone(&d, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["etcdRunning"], false, "{json}");

    let out = standalone(&d, &["start"]);
    exit_code(&out, 0);
    d.wait_ready();
    let out = standalone(&d, &["status"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("health      healthy\n"), "{stdout}");

    // etcdctl with the node's endpoint: what it writes, the daemon's etcd
    // holds (read back through etcdctl, and the daemon's revision moves).
    let before = d.status().revision.unwrap();
    let out = standalone(&d, &["etcdctl", "put", "/warden-test/k", "v1"]);
    exit_code(&out, 0);
    let out = standalone(
        &d,
        &["etcdctl", "get", "/warden-test/k", "--print-value-only"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "v1\n");
    let after = d.status().revision.unwrap();
    assert!(after > before, "revision {before} -> {after}");
    // Without any configuration, snapshot save works from --endpoint alone.
    let conf = std::fs::read_to_string(d.dir.path().join("config.toml")).unwrap();
    let at = conf.find("client_urls = [\"").unwrap() + "client_urls = [\"".len();
    let endpoint = &conf[at..at + conf[at..].find('"').unwrap()];
    let none = d.dir.path().join("none/config.toml");
    let snap = d.dir.path().join("endpoint-only.db");
    let out = Command::new(BIN)
        .args(["snapshot", "save"])
        .arg(&snap)
        .arg("--config")
        .arg(&none)
        .args(["--endpoint", endpoint])
        .output()
        .unwrap();
    exit_code(&out, 0);
    assert!(std::fs::metadata(&snap).unwrap().len() > 0);
    // etcdctl's exit code is the command's.
    let out = standalone(&d, &["etcdctl", "no-such-command"]);
    assert!(!out.status.success());
    exit_code(&out, 1);
}

#[test]
fn reload_applies_the_policy_keys_names_the_rest_and_refuses_a_broken_file() {
    let mut d = tls_support::daemon_with_dropin(true, |_| String::new());
    d.wait_ready();
    let etcd = d.status().etcd_pid.unwrap();
    let dropin = d.dir.path().join("config.d/50-test.toml");
    let out = standalone(&d, &["reload"]);
    exit_code(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no change: the daemon runs with what the files say"),
        "{stdout}"
    );

    std::fs::write(
        &dropin,
        "[defrag]\nfragmentation_percent = 60\n[timeouts]\nhung_after_ms = 8000\n[etcd]\nquota_backend_bytes = 4294967296\n",
    )
    .unwrap();
    let out = standalone(&d, &["reload"]);
    exit_code(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for want in [
        "defrag.fragmentation_percent: applied now\n",
        "timeouts.hung_after_ms: take effect when the daemon restarts (etcd keeps running): `systemctl restart etcd-warden`\n",
        "etcd.quota_backend_bytes: take effect when etcd restarts on this node",
    ] {
        assert!(stdout.contains(want), "{want}: {stdout}");
    }
    assert!(stdout.contains(&dropin.display().to_string()), "{stdout}");
    // The applied key is now what the daemon runs with; the others still wait.
    let out = standalone(&d, &["reload", "--json"]);
    exit_code(&out, 0);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["applied"], serde_json::json!([]), "{json}");
    assert_eq!(
        json["atDaemonRestart"],
        serde_json::json!(["timeouts.hung_after_ms"]),
        "{json}"
    );
    assert_eq!(
        json["atEtcdRestart"],
        serde_json::json!(["etcd.quota_backend_bytes"]),
        "{json}"
    );

    // A broken file changes nothing: exit 78 with its line and key.
    std::fs::write(&dropin, "[defrag]\nfragmentation_percent = \"many\"\n").unwrap();
    let key = format!("{}:2: key `defrag.fragmentation_percent`", dropin.display());
    let out = standalone(&d, &["reload"]);
    let stderr = exit_code(&out, 78);
    assert!(stderr.contains(&key), "{stderr}");
    // Asked on its socket alone, the daemon refuses it the same way.
    let out = Command::new(BIN)
        .args(["reload", "--socket"])
        .arg(d.socket())
        .output()
        .unwrap();
    let stderr = exit_code(&out, 78);
    assert!(stderr.contains(&key), "{stderr}");
    assert!(stderr.contains("runs on unchanged"), "{stderr}");
    assert!(
        d.log().contains("configuration not reloaded"),
        "{}",
        d.log()
    );
    let s = d.status();
    assert_eq!(s.etcd_pid, Some(etcd), "etcd was restarted: {s:?}");
    assert!(s.quorum, "{s:?}");
}

/// The backend's applied index (bbolt's `meta/consistent_index`) of a
/// member stopped gracefully is the raft index it reported, on etcd 3.4
/// (Debian's) and 3.5.
#[test]
fn the_backend_index_of_a_stopped_member_is_the_index_it_applied() {
    let etcd35 = tls_support::etcd35("etcd");
    for binary in [None, Some(etcd35)] {
        let mut d = tls_support::daemon_with_dropin(true, |_| match &binary {
            Some(b) => format!("[etcd]\nbinary = \"{}\"\n", b.display()),
            None => String::new(),
        });
        d.wait_ready();
        for i in 0..30 {
            let key = format!("/warden-test/backend/{i}");
            exit_code(&standalone(&d, &["etcdctl", "put", &key, "v"]), 0);
        }
        let applied = d.status().raft_index.unwrap();
        exit_code(&standalone(&d, &["stop"]), 0);
        let db = d.dir.path().join("etcd/member/snap/db");
        let index = etcd_warden::reconcile::backend_index::consistent_index(&db)
            .unwrap_or_else(|e| panic!("{binary:?}: {e}"));
        // The stop may append nothing the backend applies after the last
        // status; a leader's entries between them are few.
        assert!(
            (applied..applied + 5).contains(&index),
            "{binary:?}: backend index {index}, raft index {applied} before the stop"
        );
    }
}

/// The help of `etcd-warden PATH…`, or None when that is no command.
fn help_of(path: &[&str]) -> Option<String> {
    let out = Command::new(BIN).args(path).arg("--help").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The subcommand names a help text lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Every `etcd-warden …` command quoted in a file under `roots` (in
/// backticks or single quotes, as messages and docs quote them), with the
/// file it is in. A shell pipe, substitution or list ends the command.
fn quoted_commands(roots: &[&Path]) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let mut files: Vec<PathBuf> = roots.iter().map(|p| p.to_path_buf()).collect();
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if !matches!(p.extension().and_then(|e| e.to_str()), Some("rs" | "md")) {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for quote in ['`', '\''] {
            let open = format!("{quote}etcd-warden ");
            for (at, _) in text.match_indices(&open) {
                let rest = &text[at + 1..];
                let Some(end) = rest.find(quote) else {
                    continue;
                };
                let cmd = rest[..end]
                    .split(['|', ';', '&', '$', '\n'])
                    .next()
                    .unwrap_or_default();
                found.push((p.clone(), cmd.trim().to_string()));
            }
        }
    }
    found
}

/// Every `etcd-warden` command that a message of the daemon, the agent or
/// the report, or a page of docs/, tells the operator to run names
/// subcommands and options that exist (values and placeholders aside).
#[test]
fn every_command_the_messages_and_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let roots: Vec<PathBuf> = [
        "daemon/src",
        "resource-agent/src",
        "crm-xml/src",
        "docs",
        "README.md",
    ]
    .iter()
    .map(|r| root.join(r))
    .collect();
    let roots: Vec<&Path> = roots.iter().map(PathBuf::as_path).collect();
    let commands = quoted_commands(&roots);
    assert!(
        commands.len() > 50,
        "only {} commands found",
        commands.len()
    );
    let mut wrong = Vec::new();
    for (file, cmd) in &commands {
        let words: Vec<&str> = cmd
            .split_whitespace()
            .skip(1)
            .map(|w| w.trim_matches(['[', ']']))
            .collect();
        let mut path: Vec<&str> = Vec::new();
        let mut help = help_of(&[]).unwrap();
        for w in &words {
            // etcdctl's own arguments follow it.
            if path.last() == Some(&"etcdctl") || w.starts_with('-') {
                break;
            }
            // Listed, or hidden from the list (`generate`) and answering.
            let mut longer = path.clone();
            longer.push(w);
            let listed = subcommands(&help).iter().any(|s| s == w);
            match help_of(&longer) {
                Some(h) if listed || w.chars().all(|c| c.is_ascii_lowercase() || c == '-') => {
                    path = longer;
                    help = h;
                }
                _ => break,
            }
        }
        let flags = words
            .iter()
            .filter(|w| w.starts_with("--") && w.len() > 2)
            .map(|w| w.split('=').next().unwrap_or(w));
        for flag in flags {
            if path.last() != Some(&"etcdctl")
                && !help.contains(&format!("{flag} "))
                && !help.contains(&format!("{flag}\n"))
            {
                wrong.push(format!(
                    "{}: `{cmd}`: etcd-warden {} has no {flag}",
                    file.display(),
                    path.join(" ")
                ));
            }
        }
        let next = words.get(path.len());
        if next.is_some_and(|w| {
            !w.starts_with('-')
                && !subcommands(&help).is_empty()
                && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        }) {
            wrong.push(format!(
                "{}: `{cmd}`: etcd-warden {} has no subcommand {}",
                file.display(),
                path.join(" "),
                next.unwrap_or(&"")
            ));
        }
    }
    eprintln!("{} commands checked", commands.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn health_without_a_configured_report_is_unknown_and_says_why() {
    let s = Setup::new();
    let out = s.run(&["health"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.starts_with(&format!(
            "UNKNOWN - the configuration ({}) sets no [report] path",
            s.main().display()
        )),
        "{stdout}"
    );
}
