//! etcd's own rules: every configuration etcd would refuse is refused at
//! load, naming the file, the line and the key.

use std::path::PathBuf;

use super::*;

// One node on plain HTTP, so that TLS cases add only what they test.
use super::tests_layers::MINIMAL as BASE;

const TLS_FILES: &str =
    "cert_file = \"/c.crt\"\nkey_file = \"/c.key\"\ntrusted_ca_file = \"/ca.crt\"\n";

fn load(dropin: &str) -> Result<Settings, ConfigError> {
    from_texts(&[
        (PathBuf::from("/etc/etcd-warden/config.toml"), BASE.into()),
        (
            PathBuf::from("/etc/etcd-warden/config.d/50-x.toml"),
            dropin.into(),
        ),
    ])
}

/// The error for `dropin`, checked to start with file, line and key.
fn refused(dropin: &str, line: usize, key: &str) -> String {
    let e = load(dropin).unwrap_err().to_string();
    let at = format!("/etc/etcd-warden/config.d/50-x.toml:{line}: key `{key}`");
    assert!(e.starts_with(&at), "expected {at}\n got {e}");
    e
}

/// The error for a main file with `nodes` instead of BASE's.
fn refused_nodes(peer: &str, client: &str, extra: &str, line: usize, key: &str) -> String {
    let text = format!(
        "node_name = \"a\"\ntopology = \"ha\"\n{extra}\n[[nodes]]\nname = \"a\"\npeer_urls = [{peer}]\nclient_urls = [{client}]\n"
    );
    let e = from_texts(&[(PathBuf::from("/c.toml"), text)])
        .unwrap_err()
        .to_string();
    let at = format!("/c.toml:{line}: key `{key}`");
    assert!(e.starts_with(&at), "expected {at}\n got {e}");
    e
}

#[test]
fn a_heartbeat_alone_against_etcds_default_election_timeout_is_refused() {
    // etcd: "--election-timeout[1000ms] should be at least as 5 times as
    // --heartbeat-interval[500ms]".
    let e = refused(
        "[etcd]\nheartbeat_interval_ms = 500\n",
        2,
        "etcd.heartbeat_interval_ms",
    );
    assert!(e.contains("1000 ms, etcd's default"), "{e}");
    assert!(e.contains("at least 2500"), "{e}");
    // Raised with it, the pair is accepted.
    let s = load("[etcd]\nheartbeat_interval_ms = 500\nelection_timeout_ms = 2500\n").unwrap();
    assert_eq!(s.etcd.tuning.heartbeat_ms(), 500);
    assert_eq!(s.etcd.tuning.election_ms(), 2500);
}

#[test]
fn an_election_timeout_is_checked_against_the_heartbeat_and_etcds_maximum() {
    let e = refused(
        "[etcd]\nheartbeat_interval_ms = 100\n\nelection_timeout_ms = 499\n",
        4,
        "etcd.election_timeout_ms",
    );
    assert!(
        e.contains("below 5 × the heartbeat interval (100 ms)"),
        "{e}"
    );
    let e = refused(
        "[etcd]\nelection_timeout_ms = 400\n",
        2,
        "etcd.election_timeout_ms",
    );
    assert!(e.contains("100 ms, etcd's default"), "{e}");
    let e = refused(
        "[etcd]\nelection_timeout_ms = 50001\n",
        2,
        "etcd.election_timeout_ms",
    );
    assert!(e.contains("at most 50000 ms"), "{e}");
    load("[etcd]\nelection_timeout_ms = 50000\n").unwrap();
    load("[etcd]\nheartbeat_interval_ms = 100\nelection_timeout_ms = 500\n").unwrap();
    for key in ["heartbeat_interval_ms", "election_timeout_ms"] {
        let e = refused(&format!("[etcd]\n{key} = 0\n"), 2, &format!("etcd.{key}"));
        assert!(e.contains("greater than 0"), "{e}");
    }
}

#[test]
fn the_forced_start_default_follows_a_changed_timing() {
    // The shipped 500 ms is below 5 × 200 ms; it is brought into range
    // when the forced start is written, so the load succeeds.
    let s = load("[etcd]\nheartbeat_interval_ms = 200\nelection_timeout_ms = 2000\n").unwrap();
    assert_eq!(s.failover.force_election_timeout_ms, Some(500));
}

#[test]
fn quota_and_snapshot_count_stay_within_etcds_limits() {
    let e = refused(
        "[etcd]\nquota_backend_bytes = 0\n",
        2,
        "etcd.quota_backend_bytes",
    );
    assert!(e.contains("greater than 0"), "{e}");
    let e = refused(
        "[etcd]\nquota_backend_bytes = 8589934593\n",
        2,
        "etcd.quota_backend_bytes",
    );
    assert!(e.contains("8 GiB"), "{e}");
    let s = load("[etcd]\nquota_backend_bytes = 8589934592\n").unwrap();
    assert_eq!(s.etcd.tuning.quota_backend_bytes, Some(8 << 30));
    let e = refused("[etcd]\nsnapshot_count = 0\n", 2, "etcd.snapshot_count");
    assert!(e.contains("greater than 0"), "{e}");
}

#[test]
fn url_schemes_and_hosts_are_etcds() {
    let http_c = "\"http://127.0.0.1:2379\"";
    let http_p = "\"http://127.0.0.1:2380\"";
    let e = refused_nodes(
        "\"tcp://127.0.0.1:2380\"",
        http_c,
        "",
        6,
        "nodes[0].peer_urls",
    );
    assert!(e.contains("http, https, unix and unixs"), "{e}");
    let e = refused_nodes(
        http_p,
        "\"http://etcd-a.example:2379\"",
        "",
        7,
        "nodes[0].client_urls",
    );
    assert!(e.contains("IP address or localhost"), "{e}");
    let e = refused_nodes(
        "\"http://127.0.0.1:2380/\"",
        http_c,
        "",
        6,
        "nodes[0].peer_urls",
    );
    assert!(e.contains("path"), "{e}");
    let e = refused_nodes(
        "\"unix://localhost:2380\"",
        http_c,
        "",
        6,
        "nodes[0].peer_urls",
    );
    assert!(e.contains("cannot reach a Unix socket"), "{e}");
    let e = refused_nodes(
        http_p,
        "\"unix://localhost:2379\"",
        "",
        7,
        "nodes[0].client_urls",
    );
    assert!(e.contains("first client URL"), "{e}");
    // A Unix socket after a TCP client URL, and localhost, are accepted.
    let text = BASE.replace(
        "client_urls = [\"http://127.0.0.1:2379\"]",
        "client_urls = [\"http://localhost:2379\", \"unix://localhost:2381\"]",
    );
    from_texts(&[(PathBuf::from("/c.toml"), text)]).unwrap();
}

#[test]
fn secure_urls_need_their_sides_tls_files() {
    let http_c = "\"http://127.0.0.1:2379\"";
    let http_p = "\"http://127.0.0.1:2380\"";
    let e = refused_nodes(
        "\"https://127.0.0.1:2380\"",
        http_c,
        "",
        6,
        "nodes[0].peer_urls",
    );
    assert!(e.contains("needs TLS: set tls.peer.cert_file"), "{e}");
    let e = refused_nodes(
        http_p,
        "\"http://127.0.0.1:2379\", \"unixs://localhost:2381\"",
        "",
        7,
        "nodes[0].client_urls",
    );
    assert!(e.contains("needs TLS: set tls.client.cert_file"), "{e}");
    // The other side's files do not count.
    let peer_tls = format!("[tls.peer]\n{TLS_FILES}");
    refused_nodes(
        http_p,
        "\"https://127.0.0.1:2379\"",
        &peer_tls,
        11,
        "nodes[0].client_urls",
    );
    let client_tls = format!("[tls.client]\n{TLS_FILES}");
    let text = format!(
        "{}\n{client_tls}",
        BASE.replace("http://127.0.0.1:2379", "https://127.0.0.1:2379")
    );
    let s = from_texts(&[(PathBuf::from("/c.toml"), text)]).unwrap();
    assert!(s.etcd.client_tls.is_some() && s.etcd.peer_tls.is_none());
}

#[test]
fn tls_files_come_as_a_set() {
    let e = refused(
        "[tls.client]\n\ncert_file = \"/c.crt\"\n",
        3,
        "tls.client.cert_file",
    );
    assert!(e.contains("needs tls.client.key_file as well"), "{e}");
    let e = refused(
        "[tls.peer]\nkey_file = \"/p.key\"\ncert_file = \"/p.crt\"\n",
        3,
        "tls.peer.cert_file",
    );
    assert!(e.contains("needs tls.peer.trusted_ca_file"), "{e}");
    // client_cert_auth written alone asks for TLS that is not there.
    let e = refused(
        "[tls.client]\nclient_cert_auth = false\n",
        2,
        "tls.client.client_cert_auth",
    );
    assert!(e.contains("needs tls.client.cert_file"), "{e}");
}

#[test]
fn a_config_error_maps_to_ex_config() {
    let e = anyhow::Error::from(load("[etcd]\nheartbeat_interval_ms = 500\n").unwrap_err())
        .context("cannot load /etc/etcd-warden/config.toml");
    assert!(is_config_error(&e));
    assert!(!is_config_error(&anyhow::anyhow!("etcd did not answer")));
    assert_eq!(EXIT_CONFIG, 78);
}

#[test]
fn auto_compaction_and_defragmentation_are_on_by_default() {
    let s = load("").unwrap();
    assert_eq!(
        s.etcd.tuning.auto_compaction,
        Some((CompactionMode::Periodic, "1h".into()))
    );
    let d = &s.defrag;
    assert!(d.enabled);
    assert_eq!(d.fragmentation_percent, 45);
    assert_eq!(d.min_db_size_bytes, 100 * 1024 * 1024);
    assert_eq!(d.check_interval, std::time::Duration::from_secs(60));
    // The retention alone changes the default mode's window; "0" turns
    // etcd's compaction off.
    let s = load("[etcd]\nauto_compaction_retention = \"0\"\n").unwrap();
    assert_eq!(
        s.etcd.tuning.auto_compaction,
        Some((CompactionMode::Periodic, "0".into()))
    );
    let s = load("[defrag]\nenabled = false\nfragmentation_percent = 10\n").unwrap();
    assert!(!s.defrag.enabled);
    assert_eq!(s.defrag.fragmentation_percent, 10);
}

#[test]
fn a_defragmentation_threshold_out_of_range_is_refused() {
    let e = refused(
        "[defrag]\nfragmentation_percent = 100\n",
        2,
        "defrag.fragmentation_percent",
    );
    assert!(e.contains("use 1 to 99"), "{e}");
    refused(
        "[defrag]\nfragmentation_percent = 0\n",
        2,
        "defrag.fragmentation_percent",
    );
    let e = refused(
        "[defrag]\ncheck_interval_ms = 10\n",
        2,
        "defrag.check_interval_ms",
    );
    assert!(e.contains("out of range"), "{e}");
    refused("[defrag]\ntimeout_ms = 0\n", 2, "defrag.timeout_ms");
    refused("[defrag]\nthreshold = 3\n", 2, "defrag.threshold");
}
