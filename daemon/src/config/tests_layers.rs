//! The layers: which files are read, in which order, what masks what, and
//! the one source of defaults.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::fragments::{self, FileCtx};
use super::*;

/// The smallest operator configuration: only what has no default.
pub(super) const MINIMAL: &str = r#"
node_name = "a"
topology = "ha"

[[nodes]]
name = "a"
peer_urls = ["http://127.0.0.1:2380"]
client_urls = ["http://127.0.0.1:2379"]
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn timeouts(probe_interval: u64, probe_timeout: u64) -> String {
    format!(
        "[timeouts]\nprobe_interval_ms = {probe_interval}\nprobe_timeout_ms = {probe_timeout}\n"
    )
}

#[test]
fn layers_merge_in_order_and_same_names_replace_and_mask() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let l = Layout::under(r);
    let vendor = r.join("usr/lib/etcd-warden/config.d");
    let etc = r.join("etc/etcd-warden/config.d");
    let run = r.join("run/etcd-warden/config.d");
    // Shipped: lowest, even below the main file.
    write(&vendor.join("00-defaults.toml"), &timeouts(1001, 1001));
    write(
        &vendor.join("50-vendor.toml"),
        "[timeouts]\nstop_grace_ms = 1002\n",
    );
    write(
        &vendor.join("60-vendor.toml"),
        "[timeouts]\nstart_timeout_ms = 1003\n",
    );
    // The main file overrides the shipped files.
    write(&l.main, &format!("{MINIMAL}\n{}", timeouts(2000, 2000)));
    // Drop-ins override the main file, in name order across /etc and /run.
    write(&etc.join("10-early.toml"), &timeouts(3100, 3100));
    write(
        &run.join("30-late.toml"),
        "[timeouts]\nprobe_interval_ms = 4100\n",
    );
    // The same name: /run's file is read and /etc's is not.
    write(
        &etc.join("20-site.toml"),
        "[timeouts]\nrestart_delay_ms = 3333\n",
    );
    write(&run.join("20-site.toml"), "[etcd]\nsnapshot_count = 4000\n");
    // An /etc file replaces a shipped one of the same name.
    write(
        &etc.join("60-vendor.toml"),
        "[timeouts]\nstart_timeout_ms = 3600\n",
    );
    // A symlink to /dev/null masks a shipped file.
    symlink("/dev/null", etc.join("50-vendor.toml")).unwrap();
    // Not drop-ins: hidden files and other extensions.
    write(&etc.join(".90-editor.toml"), "not = toml = at all");
    write(&etc.join("README"), "not toml either [");

    let s = l.load().unwrap();
    let t = &s.timeouts;
    assert_eq!(
        t.probe_interval,
        Duration::from_millis(4100),
        "last name wins"
    );
    assert_eq!(
        t.probe_timeout,
        Duration::from_millis(3100),
        "drop-ins over main"
    );
    assert_eq!(
        t.start_timeout,
        Duration::from_millis(3600),
        "/etc replaces /usr/lib"
    );
    assert_eq!(
        t.stop_grace,
        Duration::from_secs(20),
        "masked: the built-in default"
    );
    assert_eq!(
        t.restart_delay,
        Duration::from_secs(3),
        "/run replaces /etc"
    );
    assert_eq!(s.etcd.tuning.snapshot_count, Some(4000));
    assert_eq!(
        s.sources,
        [
            vendor.join("00-defaults.toml"),
            l.main.clone(),
            etc.join("10-early.toml"),
            run.join("20-site.toml"),
            run.join("30-late.toml"),
            etc.join("60-vendor.toml"),
        ]
    );
    assert_eq!(s.layout, l);
    assert_eq!(reload(&s).unwrap(), s);
}

#[test]
fn drop_ins_alone_are_a_configuration_and_nothing_is_an_error() {
    let root = tempfile::tempdir().unwrap();
    let l = Layout::under(root.path());
    let e = l.load().unwrap_err().to_string();
    assert!(e.contains(&l.main.display().to_string()), "{e}");
    // The shipped files alone are not a configuration either.
    write(
        &root
            .path()
            .join("usr/lib/etcd-warden/config.d/00-defaults.toml"),
        BUILTIN_DEFAULTS,
    );
    let e = l.load().unwrap_err().to_string();
    assert!(e.contains("cannot read configuration file"), "{e}");
    write(&l.dropin_dirs[1].join("10-node.toml"), MINIMAL);
    assert_eq!(l.load().unwrap().node_name, "a");
}

#[test]
fn an_error_in_a_drop_in_names_it() {
    let root = tempfile::tempdir().unwrap();
    let l = Layout::under(root.path());
    write(&l.main, MINIMAL);
    let bad = l.dropin_dirs[0].join("30-bad.toml");
    write(&bad, "# tuning\n[etcd]\n\nheartbeat_interval_ms = 500\n");
    let e = l.load().unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "{}:4: key `etcd.heartbeat_interval_ms`",
            bad.display()
        )),
        "{e}"
    );
}

#[test]
fn the_default_path_means_the_system_layout_and_another_path_its_directory() {
    assert_eq!(
        Layout::for_main(Path::new(DEFAULT_CONFIG)),
        Layout::system()
    );
    let s = Layout::system();
    assert_eq!(
        s.vendor_dir,
        Some(PathBuf::from("/usr/lib/etcd-warden/config.d"))
    );
    assert_eq!(
        s.dropin_dirs,
        [
            PathBuf::from("/etc/etcd-warden/config.d"),
            PathBuf::from("/run/etcd-warden/config.d")
        ]
    );
    let b = Layout::for_main(Path::new("/tmp/x/warden.toml"));
    assert_eq!(b.vendor_dir, None);
    assert_eq!(b.main, PathBuf::from("/tmp/x/warden.toml"));
    assert_eq!(b.dropin_dirs, [PathBuf::from("/tmp/x/config.d")]);
}

#[test]
fn the_built_in_defaults_are_the_shipped_file() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/00-defaults.toml");
    assert_eq!(std::fs::read_to_string(shipped).unwrap(), BUILTIN_DEFAULTS);
    assert_eq!(
        Layout::system()
            .vendor_dir
            .unwrap()
            .join(DEFAULTS_FILE_NAME),
        PathBuf::from("/usr/lib/etcd-warden/config.d/00-defaults.toml")
    );
    // Installed, the file changes nothing: the same values, one source.
    let root = tempfile::tempdir().unwrap();
    let l = Layout::under(root.path());
    write(&l.main, MINIMAL);
    let without = l.load().unwrap();
    write(
        &l.vendor_dir.clone().unwrap().join(DEFAULTS_FILE_NAME),
        BUILTIN_DEFAULTS,
    );
    let with = l.load().unwrap();
    assert_eq!(with.sources.len(), 2);
    assert_eq!(
        Settings {
            sources: vec![],
            ..with
        },
        Settings {
            sources: vec![],
            ..without
        }
    );
}

#[test]
fn the_defaults_agree_with_the_constants_other_modules_use() {
    let s = from_texts(&[("/c.toml".into(), MINIMAL.into())]).unwrap();
    assert_eq!(s.failover.reconcile_interval, DEFAULT_RECONCILE_INTERVAL);
    assert_eq!(
        s.failover.reconcile_pending_interval,
        DEFAULT_RECONCILE_PENDING_INTERVAL
    );
    assert_eq!(s.api.socket, PathBuf::from(warden_api::DEFAULT_SOCKET));
    // The move from the old layout applies to the default paths only.
    assert_eq!(
        crate::data_layout::Layout::of(&s).map(|l| l.data),
        Some(PathBuf::from(crate::data_layout::DATA_DIR))
    );
    assert_eq!(
        s.report.cib_file,
        PathBuf::from(crate::report_cycle::LIVE_CIB_FILE)
    );
    assert_eq!(
        s.report.corosync_conf,
        PathBuf::from(crate::report_cycle::DEFAULT_COROSYNC_CONF)
    );
    let agents = crm_xml::report::Options::default();
    assert_eq!(s.report.etcd_agents, agents.etcd_agents);
    assert_eq!(s.report.kubelet_agents, agents.kubelet_agents);
    assert_eq!(s.report.fence_agents, agents.fence_agents);
}

/// The defaults file declares no key the loader does not know, and every
/// key it sets is marked as a default.
#[test]
fn the_defaults_parse_as_a_fragment() {
    let file = FileCtx {
        file: std::sync::Arc::new(PathBuf::from("00-defaults.toml")),
        text: BUILTIN_DEFAULTS,
        defaults: true,
    };
    let f = fragments::parse(&file).unwrap();
    assert!(f.node_name.is_none() && f.nodes.is_none() && f.topology.is_none());
    let archive_keep = f.failover.archive_keep.unwrap();
    assert!(archive_keep.from_defaults);
    assert_eq!(archive_keep.key, "failover.archive_keep");
    assert!(archive_keep.origin.line > 1);
}

/// Every key survives a write and a read: a fragment that sets every key,
/// serialised and loaded again, gives the same settings.
#[test]
fn a_serialised_fragment_loads_as_the_same_settings() {
    let every_key = r#"
node_name = "b"
topology = "two-node"
autostart = true

[etcd]
binary = "/opt/etcd/bin/etcd"
data_dir = "/srv/etcd"
backend = "systemd"
unit_name = "x.service"
initial_cluster_token = "tok"
quota_backend_bytes = 4294967296
auto_compaction_mode = "periodic"
auto_compaction_retention = "1h"
snapshot_count = 5000
heartbeat_interval_ms = 200
election_timeout_ms = 2000

[tls.client]
cert_file = "/c.crt"
key_file = "/c.key"
trusted_ca_file = "/ca.crt"
client_cert_auth = false

[tls.peer]
cert_file = "/p.crt"
key_file = "/p.key"
trusted_ca_file = "/ca.crt"
client_cert_auth = true

[api]
socket = "/run/x/api.sock"
socket_group = "wheel"
allowed_users = ["root", "1000"]
http_addr = "127.0.0.1:9481"

[paths]
state_dir = "/srv/state"

[timeouts]
probe_interval_ms = 1
probe_timeout_ms = 2
start_timeout_ms = 3
stop_grace_ms = 4
restart_delay_ms = 5

[failover]
archive_dir = "/srv/etcd-old"
archive_keep = 7
reconcile_interval_ms = 4000
reconcile_pending_interval_ms = 300
force_election_timeout_ms = 1000

[report]
path = "/run/r.json"
interval_ms = 2000
crm_mon_timeout_ms = 3000
cib_file = "/x/cib.xml"
corosync_conf = "/x/corosync.conf"
etcd_agents = ["ocf:x:etcd"]
kubelet_agents = ["systemd:k"]
fence_agents = ["stonith:f"]
expected_nodes = 3

[[nodes]]
name = "a"
peer_urls = ["https://127.0.0.1:2380"]
client_urls = ["https://127.0.0.1:2379"]

[[nodes]]
name = "b"
peer_urls = ["https://[::1]:2380"]
client_urls = ["https://[::1]:2379", "unixs://localhost:2379"]
"#;
    let file = FileCtx {
        file: std::sync::Arc::new(PathBuf::from("/c.toml")),
        text: every_key,
        defaults: false,
    };
    let fragment = fragments::parse(&file).unwrap();
    let text = render("header", &fragment).unwrap();
    assert!(text.starts_with("# header\n"), "{text}");
    let direct = from_texts(&[("/c.toml".into(), every_key.into())]).unwrap();
    let back = from_texts(&[("/c.toml".into(), text.clone())]).unwrap();
    assert_eq!(back, direct, "{text}");
    // Nothing came from the defaults: every key was written, and read back.
    let defaults = from_texts(&[("/c.toml".into(), MINIMAL.into())]).unwrap();
    assert_ne!(direct.timeouts, defaults.timeouts);
    assert_ne!(direct.report, defaults.report);
    assert_ne!(direct.failover, defaults.failover);
    assert_ne!(direct.api, defaults.api);
    assert_ne!(direct.etcd, defaults.etcd);
}
