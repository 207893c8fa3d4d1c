//! The loader's and the validator's tests: values, merges, and errors
//! naming file, line and key.

use std::path::PathBuf;
use std::time::Duration;

use super::*;

const GOOD: &str = r#"
node_name = "a"
topology = "two-node"

[[nodes]]
name = "a"
peer_urls = ["https://192.0.2.1:2380"]
client_urls = ["https://192.0.2.1:2379"]

[[nodes]]
name = "b"
peer_urls = ["https://[2001:db8::2]:2380"]
client_urls = ["https://[2001:db8::2]:2379", "unix://localhost:2379"]

[tls.client]
cert_file = "/etc/etcd/pki/server.crt"
key_file = "/etc/etcd/pki/server.key"
trusted_ca_file = "/etc/etcd/pki/ca.crt"

[tls.peer]
cert_file = "/etc/etcd/pki/peer.crt"
key_file = "/etc/etcd/pki/peer.key"
trusted_ca_file = "/etc/etcd/pki/ca.crt"
client_cert_auth = false
"#;

fn load(files: &[(&str, &str)]) -> Result<Settings, ConfigError> {
    let texts: Vec<(PathBuf, String)> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    from_texts(&texts)
}

#[test]
fn good_config_with_defaults() {
    let s = load(&[("/etc/etcd-warden/config.toml", GOOD)]).unwrap();
    assert_eq!(s.topology, Topology::TwoNode);
    assert_eq!(s.nodes.len(), 2);
    assert_eq!(s.local_node().name, "a");
    assert_eq!(s.etcd.backend, BackendKind::Process);
    assert_eq!(s.api.allowed_users, vec!["root", "hacluster"]);
    assert_eq!(s.api.socket, PathBuf::from("/run/etcd-warden/api.sock"));
    let client = s.etcd.client_tls.as_ref().unwrap();
    assert_eq!(client.key_file, PathBuf::from("/etc/etcd/pki/server.key"));
    assert!(
        client.client_cert_auth,
        "the default asks clients for a certificate"
    );
    assert!(!s.etcd.peer_tls.as_ref().unwrap().client_cert_auth);
}

#[test]
fn dropin_overrides_key_by_key() {
    let s = load(&[
        ("/etc/etcd-warden/config.toml", GOOD),
        (
            "/etc/etcd-warden/config.d/10-tune.toml",
            "[etcd]\nsnapshot_count = 5000\n[timeouts]\nprobe_interval_ms = 500\n",
        ),
        (
            "/etc/etcd-warden/config.d/20-node.toml",
            "node_name = \"b\"\n",
        ),
    ])
    .unwrap();
    assert_eq!(s.node_name, "b");
    assert_eq!(s.etcd.tuning.snapshot_count, Some(5000));
    assert_eq!(s.timeouts.probe_interval, Duration::from_millis(500));
}

#[test]
fn unknown_key_names_file_line_and_key() {
    let e = load(&[
        ("/etc/etcd-warden/config.toml", GOOD),
        (
            "/etc/etcd-warden/config.d/50-x.toml",
            "# comment\n[etcd]\nsnapshot_count = 5\nforce_new_cluster = true\n",
        ),
    ])
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("/etc/etcd-warden/config.d/50-x.toml:4:"),
        "{msg}"
    );
    assert!(msg.contains("key `etcd.force_new_cluster`"), "{msg}");
}

#[test]
fn wrong_type_names_file_line_and_key() {
    let e = load(&[(
        "/c.toml",
        "node_name = \"a\"\n\n[timeouts]\nprobe_interval_ms = \"fast\"\n",
    )])
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.starts_with("/c.toml:4: key `timeouts.probe_interval_ms`"),
        "{msg}"
    );
}

#[test]
fn syntax_error_names_file_and_line() {
    let e = load(&[("/c.toml", "node_name = \"a\"\ntopology = \n")]).unwrap_err();
    assert!(
        e.to_string().starts_with("/c.toml:2: key `topology`"),
        "{e}"
    );
}

#[test]
fn a_syntax_error_names_the_key_its_line_was_writing() {
    let cases = [
        // Under a table, and in the second entry of an array of tables.
        (
            "[etcd]\n# c\ndata_dir = /x\n",
            "/c.toml:3: key `etcd.data_dir`",
        ),
        (
            "[[nodes]]\nname = \"a\"\n[[nodes]]\nname = \"b\n",
            "/c.toml:4: key `nodes[1].name`",
        ),
        // Inside a multi-line array.
        (
            "[[nodes]]\nname = \"a\"\npeer_urls = [\n  \"http://127.0.0.1:2380\",\n  http://x\n]\n",
            "/c.toml:5: key `nodes[0].peer_urls`",
        ),
        // A header that does not close, a key without `=`.
        ("[report\n", "/c.toml:1: key `report`"),
        ("[api]\nsocket \"/x\"\n", "/c.toml:2: key `api.socket`"),
    ];
    for (text, want) in cases {
        let e = load(&[("/c.toml", text)]).unwrap_err().to_string();
        assert!(e.starts_with(want), "{text:?}: {e}");
    }
}

#[test]
fn invalid_values_name_their_origin() {
    let bad_url = GOOD.replace("https://192.0.2.1:2380", "192.0.2.1:2380");
    let e = load(&[("/c.toml", &bad_url)]).unwrap_err().to_string();
    assert!(e.starts_with("/c.toml:7: key `nodes[0].peer_urls`"), "{e}");

    let e = load(&[("/c.toml", GOOD), ("/d.toml", "node_name = \"zz\"\n")])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/d.toml:1: key `node_name`"), "{e}");

    let e = load(&[
        ("/c.toml", GOOD),
        ("/d.toml", "\n[api]\nhttp_addr = \"0.0.0.0:80\"\n"),
    ])
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("/d.toml:3: key `api.http_addr`"), "{e}");
    assert!(e.contains("loopback"), "{e}");

    let e = load(&[(
        "/c.toml",
        &format!("{GOOD}\n[etcd]\nheartbeat_interval_ms = 100\nelection_timeout_ms = 200\n"),
    )])
    .unwrap_err()
    .to_string();
    assert!(e.contains("etcd.election_timeout_ms"), "{e}");
}

#[test]
fn two_node_needs_two_nodes() {
    let one = GOOD
        .split("[[nodes]]")
        .take(2)
        .collect::<Vec<_>>()
        .join("[[nodes]]");
    let e = load(&[("/c.toml", &one)]).unwrap_err().to_string();
    assert!(e.contains("exactly 2 nodes"), "{e}");
}

#[test]
fn missing_key_lists_files() {
    let e = load(&[("/c.toml", "topology = \"ha\"\n")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`node_name`") && e.contains("/c.toml"), "{e}");
}

#[test]
fn failover_defaults() {
    let s = load(&[("/c.toml", GOOD)]).unwrap();
    let f = &s.failover;
    assert_eq!(
        f.archive_dir,
        PathBuf::from("/var/lib/etcd-warden/data.archive")
    );
    assert_eq!(f.archive_keep, 0, "the default never removes an archive");
    assert_eq!(f.reconcile_interval, Duration::from_secs(5));
    assert_eq!(f.reconcile_pending_interval, Duration::from_secs(1));
    assert_eq!(f.force_election_timeout_ms, Some(500));
    // The default archive directory follows the data directory.
    let s = load(&[
        ("/c.toml", GOOD),
        ("/d.toml", "[etcd]\ndata_dir = \"/srv/etcd/data\"\n"),
    ])
    .unwrap();
    assert_eq!(
        s.failover.archive_dir,
        PathBuf::from("/srv/etcd/data.archive")
    );
}

#[test]
fn failover_keys_merge_from_dropins() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("etcd");
    let archive = t.path().join("old-etcd");
    let s = load(&[
            (
                "/c.toml",
                &format!(
                    "{GOOD}\n[etcd]\ndata_dir = {data:?}\n[failover]\narchive_keep = 3\nreconcile_interval_ms = 2000\n"
                ),
            ),
            (
                "/d/10.toml",
                &format!(
                    "[failover]\narchive_dir = {archive:?}\narchive_keep = 5\nreconcile_pending_interval_ms = 250\nforce_election_timeout_ms = 0\n"
                ),
            ),
        ])
        .unwrap();
    let f = &s.failover;
    assert_eq!(f.archive_dir, archive);
    assert_eq!(f.archive_keep, 5);
    assert_eq!(f.reconcile_interval, Duration::from_millis(2000));
    assert_eq!(f.reconcile_pending_interval, Duration::from_millis(250));
    assert_eq!(f.force_election_timeout_ms, None);
    // An unset pending interval follows a shorter stable one.
    let s = load(&[(
        "/c.toml",
        &format!("{GOOD}\n[failover]\nreconcile_interval_ms = 400\n"),
    )])
    .unwrap();
    assert_eq!(
        s.failover.reconcile_pending_interval,
        Duration::from_millis(400)
    );
}

fn failover_error(extra: &str) -> String {
    load(&[("/c.toml", GOOD), ("/d.toml", extra)])
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_failover_values_name_file_line_and_key() {
    let e = failover_error("[failover]\n\nreconcile_pending_interval_ms = 50\n");
    assert!(
        e.starts_with("/d.toml:3: key `failover.reconcile_pending_interval_ms`"),
        "{e}"
    );
    assert!(e.contains("at least 100 ms"), "{e}");

    let e = failover_error(
        "[failover]\nreconcile_interval_ms = 1000\nreconcile_pending_interval_ms = 2000\n",
    );
    assert!(
        e.starts_with("/d.toml:3: key `failover.reconcile_pending_interval_ms`"),
        "{e}"
    );
    assert!(e.contains("must not be longer"), "{e}");

    for v in ["0", "99", "300001"] {
        let e = failover_error(&format!("[failover]\nreconcile_interval_ms = {v}\n"));
        assert!(
            e.starts_with("/d.toml:2: key `failover.reconcile_interval_ms`"),
            "{e}"
        );
        assert!(e.contains("out of range"), "{e}");
    }

    let e = failover_error("[failover]\narchive_keep = -1\n");
    assert!(
        e.starts_with("/d.toml:2: key `failover.archive_keep`"),
        "{e}"
    );

    let e = failover_error("[failover]\narchive_dir = \"relative/dir\"\n");
    assert!(
        e.starts_with("/d.toml:2: key `failover.archive_dir`"),
        "{e}"
    );
    assert!(e.contains("absolute"), "{e}");

    let e = failover_error("[failover]\narchive_dir = \"/var/lib/etcd-warden/data/archive\"\n");
    assert!(e.contains("inside the data directory"), "{e}");
    let e = failover_error("[failover]\narchive_dir = \"/var/lib\"\n");
    assert!(e.contains("contains the data directory"), "{e}");

    let e = failover_error("[failover]\narchive = \"/x\"\n");
    assert!(e.starts_with("/d.toml:2:"), "{e}");
    assert!(e.contains("archive"), "{e}");
}

#[test]
fn an_archive_dir_on_another_filesystem_is_refused() {
    // /proc is always its own filesystem; the data directory's nearest
    // existing ancestor (/var/lib or /) is not on it.
    let e = failover_error("[failover]\narchive_dir = \"/proc/etcd-archive\"\n");
    assert!(
        e.starts_with("/d.toml:2: key `failover.archive_dir`"),
        "{e}"
    );
    assert!(e.contains("cannot cross filesystems"), "{e}");
    // Beside the data directory, on its filesystem: accepted.
    let t = tempfile::tempdir().unwrap();
    let extra = format!(
        "[etcd]\ndata_dir = {:?}\n[failover]\narchive_dir = {:?}\n",
        t.path().join("etcd"),
        t.path().join("keep/etcd-archives")
    );
    load(&[("/c.toml", GOOD), ("/d.toml", &extra)]).unwrap();
}

/// A configuration file on /dev/shm (a tmpfs of its own), with the state
/// and data directories wherever `extra` puts them.
fn with_config_on_shm(extra: &str) -> Result<Settings, ConfigError> {
    use std::os::unix::fs::MetadataExt;
    let shm = std::path::Path::new("/dev/shm");
    assert!(
        std::fs::metadata(shm).unwrap().dev() != std::fs::metadata("/").unwrap().dev(),
        "/dev/shm must be a filesystem of its own for this test"
    );
    load(&[
        ("/dev/shm/etcd-warden-test/c.toml", GOOD),
        ("/d.toml", extra),
    ])
}

#[test]
fn a_state_dir_on_the_data_filesystem_is_refused_unless_the_configuration_is_on_it() {
    // The defaults, /var/lib/etcd-warden and /var/lib/etcd-warden/data, share
    // the root filesystem, which here does not hold the configuration.
    let e = with_config_on_shm("").unwrap_err().to_string();
    assert!(e.contains("key `paths.state_dir`"), "{e}");
    assert!(
        e.contains("the state directory /var/lib/etcd-warden and the data directory /var/lib/etcd-warden/data are on one filesystem"),
        "{e}"
    );
    assert!(e.contains("mounted at /)"), "{e}");
    assert!(
        e.contains("configuration file /dev/shm/etcd-warden-test/c.toml"),
        "{e}"
    );
    assert!(
        e.contains("paths.state_on_data_mount = \"<reason>\""),
        "{e}"
    );
    // With the configuration on that filesystem: one volume holds
    // everything, and without it nothing runs.
    load(&[("/c.toml", GOOD)]).unwrap();
    // Said why: accepted; an empty reason is none.
    with_config_on_shm(
        "[paths]\nstate_on_data_mount = \"one disk, the config is on /dev/shm for a test\"\n",
    )
    .unwrap();
    let e = with_config_on_shm("[paths]\nstate_on_data_mount = \" \"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/d.toml:2: key `paths.state_on_data_mount`"),
        "{e}"
    );
    // The data on another filesystem than the state: nothing to say.
    let t = tempfile::TempDir::new_in("/dev/shm").unwrap();
    let apart = format!("[etcd]\ndata_dir = {:?}\n", t.path().join("etcd"));
    load(&[("/c.toml", GOOD), ("/d.toml", &apart)]).unwrap();
    // The state beside the data on that other filesystem, the
    // configuration on the root one: refused, naming the file and line.
    let together = format!("{apart}[paths]\nstate_dir = {:?}\n", t.path().join("state"));
    let e = load(&[("/c.toml", GOOD), ("/d.toml", &together)])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/d.toml:4: key `paths.state_dir`"), "{e}");
    assert!(e.contains("mounted at /dev/shm)"), "{e}");
}

#[test]
fn force_election_timeout_stays_within_what_etcd_accepts() {
    let e = failover_error(
        "[etcd]\nheartbeat_interval_ms = 200\nelection_timeout_ms = 2000\n[failover]\nforce_election_timeout_ms = 600\n",
    );
    assert!(
        e.starts_with("/d.toml:5: key `failover.force_election_timeout_ms`"),
        "{e}"
    );
    assert!(e.contains("5 x the heartbeat interval (200 ms)"), "{e}");
    let e = failover_error("[failover]\nforce_election_timeout_ms = 1500\n");
    assert!(
        e.contains("longer than the election timeout (1000 ms)"),
        "{e}"
    );
    let s = load(&[
        ("/c.toml", GOOD),
        ("/d.toml", "[failover]\nforce_election_timeout_ms = 700\n"),
    ])
    .unwrap();
    assert_eq!(s.failover.force_election_timeout_ms, Some(700));
}

#[test]
fn report_defaults() {
    let s = load(&[("/c.toml", GOOD)]).unwrap();
    let r = &s.report;
    assert_eq!(r.path, None, "no report is written unless asked");
    assert_eq!(r.interval, Duration::from_secs(30));
    assert_eq!(r.crm_mon_timeout, Duration::from_secs(10));
    assert_eq!(r.cib_file, PathBuf::from("/var/lib/pacemaker/cib/cib.xml"));
    assert_eq!(
        r.corosync_conf,
        PathBuf::from("/etc/corosync/corosync.conf")
    );
    assert_eq!(
        r.etcd_agents,
        ["ocf:etcd-warden:etcd", "ocf:heartbeat:podman-etcd"]
    );
    assert_eq!(r.kubelet_agents, ["systemd:kubelet"]);
    assert_eq!(r.fence_agents, ["stonith:*"]);
    assert_eq!(r.expected_nodes, 2, "the number of [[nodes]]");
}

#[test]
fn report_keys_merge_from_dropins() {
    let s = load(&[
            (
                "/c.toml",
                &format!("{GOOD}\n[report]\npath = \"/run/etcd-warden/report.json\"\ninterval_ms = 5000\n"),
            ),
            (
                "/d.toml",
                "[report]\ninterval_ms = 1000\ncrm_mon_timeout_ms = 2500\ncib_file = \"/tmp/cib.xml\"\ncorosync_conf = \"/tmp/corosync.conf\"\netcd_agents = [\"ocf:x:etcd\"]\nkubelet_agents = [\"systemd:k\"]\nfence_agents = [\"stonith:fence_*\"]\nexpected_nodes = 3\n",
            ),
        ])
        .unwrap();
    let r = &s.report;
    assert_eq!(r.path, Some(PathBuf::from("/run/etcd-warden/report.json")));
    assert_eq!(r.interval, Duration::from_secs(1));
    assert_eq!(r.crm_mon_timeout, Duration::from_millis(2500));
    assert_eq!(r.cib_file, PathBuf::from("/tmp/cib.xml"));
    assert_eq!(r.corosync_conf, PathBuf::from("/tmp/corosync.conf"));
    assert_eq!(r.etcd_agents, ["ocf:x:etcd"]);
    assert_eq!(r.kubelet_agents, ["systemd:k"]);
    assert_eq!(r.fence_agents, ["stonith:fence_*"]);
    assert_eq!(r.expected_nodes, 3);
}

fn report_error(extra: &str) -> String {
    load(&[("/c.toml", GOOD), ("/d.toml", extra)])
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_report_values_name_file_line_and_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("path = \"report.json\"", "report.path", "absolute path"),
        ("path = \"/\"", "report.path", "must name a file"),
        (
            "interval_ms = 999",
            "report.interval_ms",
            "use 1000 to 3600000 ms",
        ),
        (
            "interval_ms = 3600001",
            "report.interval_ms",
            "out of range",
        ),
        (
            "crm_mon_timeout_ms = 99",
            "report.crm_mon_timeout_ms",
            "use 100 to 600000 ms",
        ),
        (
            "crm_mon_timeout_ms = 600001",
            "report.crm_mon_timeout_ms",
            "out of range",
        ),
        ("cib_file = \"cib.xml\"", "report.cib_file", "absolute path"),
        (
            "corosync_conf = \"c.conf\"",
            "report.corosync_conf",
            "absolute path",
        ),
        (
            "etcd_agents = []",
            "report.etcd_agents",
            "must not be empty",
        ),
        (
            "kubelet_agents = [\"\"]",
            "report.kubelet_agents",
            "is not a resource agent",
        ),
        (
            "fence_agents = [\" stonith:*\"]",
            "report.fence_agents",
            "is not a resource agent",
        ),
        (
            "expected_nodes = 0",
            "report.expected_nodes",
            "use 1 to 256",
        ),
        (
            "expected_nodes = 257",
            "report.expected_nodes",
            "out of range",
        ),
    ];
    for (line, key, needle) in cases {
        let e = report_error(&format!("# drop-in\n[report]\n{line}\n"));
        assert!(
            e.starts_with(&format!("/d.toml:3: key `{key}`")),
            "{line}: {e}"
        );
        assert!(e.contains(needle), "{line}: {e}");
    }
    // Wrong types and unknown keys: file, line and key from the parser.
    let e = report_error("[report]\n\ninterval_ms = \"30s\"\n");
    assert!(e.starts_with("/d.toml:3: key `report.interval_ms`"), "{e}");
    let e = report_error("[report]\nexpected_nodes = -1\n");
    assert!(
        e.starts_with("/d.toml:2: key `report.expected_nodes`"),
        "{e}"
    );
    let e = report_error("[report]\npath = \"/run/r.json\"\nintervall_ms = 1000\n");
    assert!(e.starts_with("/d.toml:3:"), "{e}");
    assert!(e.contains("intervall_ms"), "{e}");
}

#[test]
fn report_profile_defaults_to_generic_and_names_a_bad_value() {
    use crm_xml::report::Profile;
    let s = load(&[("/c.toml", GOOD)]).unwrap();
    assert_eq!(s.report.profile, Profile::Generic);
    let s = load(&[
        ("/c.toml", GOOD),
        ("/d.toml", "[report]\nprofile = \"openshift\"\n"),
    ])
    .unwrap();
    assert_eq!(s.report.profile, Profile::OpenShift);
    let e = load(&[
        ("/c.toml", GOOD),
        ("/d.toml", "[report]\nprofile = \"k8s\"\n"),
    ])
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("/d.toml:2: key `report.profile`"), "{e}");
    assert!(e.contains("\"generic\" or \"openshift\""), "{e}");
}

#[test]
fn etcd_user_must_exist_and_defaults_to_etcd() {
    let s = load(&[("/c.toml", GOOD)]).unwrap();
    assert_eq!(s.etcd.user.name, "etcd");
    assert_eq!(s.etcd.data_dir, PathBuf::from("/var/lib/etcd-warden/data"));
    let e = load(&[
        ("/c.toml", GOOD),
        ("/d.toml", "[etcd]\nuser = \"no-such-user-here\"\n"),
    ])
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("/d.toml:2: key `etcd.user`"), "{e}");
    assert!(e.contains("no user \"no-such-user-here\""), "{e}");
}
