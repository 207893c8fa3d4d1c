//! The validated, typed settings the rest of the daemon reads.
//!
//! Nothing here parses or checks: [`super::validate`] builds a [`Settings`]
//! only from a configuration that passed every check.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::Layout;

/// The cluster's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topology {
    /// Two nodes with fencing: the survivor may force a new cluster once
    /// Pacemaker confirms the peer is fenced.
    TwoNode,
    /// Three or more nodes (or a single one): plain etcd quorum.
    Ha,
}

impl Topology {
    /// The name used in configuration and in the API.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Topology::TwoNode => "two-node",
            Topology::Ha => "ha",
        }
    }
}

/// How etcd is supervised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackendKind {
    /// etcd is the daemon's child process.
    Process,
    /// etcd is a transient systemd unit (survives daemon restarts).
    Systemd,
}

/// etcd's auto-compaction mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompactionMode {
    /// Retention is a duration (`1h`, `30m`).
    Periodic,
    /// Retention is a number of revisions.
    Revision,
}

/// One node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSettings {
    /// The node's name (also its etcd member name).
    pub name: String,
    /// etcd peer URLs.
    pub peer_urls: Vec<String>,
    /// etcd client URLs.
    pub(crate) client_urls: Vec<String>,
}

/// TLS files for one side (clients or peers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// Certificate.
    pub(crate) cert_file: PathBuf,
    /// Private key.
    pub(crate) key_file: PathBuf,
    /// CA bundle to verify the other side.
    pub(crate) trusted_ca_file: PathBuf,
    /// Whether the other side must present a certificate.
    pub(crate) client_cert_auth: bool,
}

/// The closed set of etcd settings an operator may tune. Deliberately not a
/// free-form flag map: flags such as `--initial-cluster-state` or
/// `--force-new-cluster` belong to the failover logic alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EtcdTuning {
    /// `quota-backend-bytes`.
    pub(crate) quota_backend_bytes: Option<u64>,
    /// `auto-compaction-mode` and `auto-compaction-retention`.
    pub(crate) auto_compaction: Option<(CompactionMode, String)>,
    /// `snapshot-count`.
    pub(crate) snapshot_count: Option<u64>,
    /// `heartbeat-interval` in ms.
    pub(crate) heartbeat_interval_ms: Option<u64>,
    /// `election-timeout` in ms.
    pub(crate) election_timeout_ms: Option<u64>,
}

/// The account etcd runs as: the daemon drops to it in etcd's process
/// alone, between fork and exec, and etcd owns its data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunAs {
    /// The user name, as configured.
    pub(crate) name: String,
    /// Its uid.
    pub(crate) uid: u32,
    /// Its primary gid.
    pub(crate) gid: u32,
}

impl RunAs {
    /// Whether etcd runs under another uid than the daemon's, which then
    /// drops privileges for it.
    pub(crate) fn drops(&self) -> bool {
        self.uid != nix::unistd::geteuid().as_raw()
    }
}

/// etcd settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdSettings {
    /// The etcd binary.
    pub(crate) binary: PathBuf,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The account etcd runs as (`etcd.user`), resolved when the
    /// configuration is loaded.
    pub(crate) user: RunAs,
    /// How etcd is supervised.
    pub(crate) backend: BackendKind,
    /// systemd unit name (systemd backend).
    pub(crate) unit_name: String,
    /// `initial-cluster-token`.
    pub(crate) initial_cluster_token: String,
    /// The tunable extras.
    pub(crate) tuning: EtcdTuning,
    /// TLS for clients.
    pub(crate) client_tls: Option<TlsFiles>,
    /// TLS for peers.
    pub(crate) peer_tls: Option<TlsFiles>,
}

/// The local API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiSettings {
    /// The Unix socket.
    pub(crate) socket: PathBuf,
    /// Group owning the socket (mode 0660).
    pub(crate) socket_group: String,
    /// User names allowed to talk to the socket (checked with SO_PEERCRED).
    pub(crate) allowed_users: Vec<String>,
    /// Localhost TCP listener for /healthz, /readyz, /metrics, /status.
    pub(crate) http_addr: Option<SocketAddr>,
}

/// Timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// How often the daemon probes etcd.
    pub(crate) probe_interval: Duration,
    /// Deadline of one live etcd call.
    pub(crate) probe_timeout: Duration,
    /// How long a start may take until etcd answers.
    pub(crate) start_timeout: Duration,
    /// How long a graceful stop may take before SIGKILL.
    pub(crate) stop_grace: Duration,
    /// How long an etcd that answered may go without answering, its
    /// process still there, before it counts as hung.
    pub(crate) hung_after: Duration,
    /// Delay before the daemon restarts an etcd that died (autostart only).
    pub(crate) restart_delay: Duration,
}

/// `failover.reconcile_interval_ms` of the shipped defaults, for the
/// reconciler's tests and fallbacks (a test checks it equals the file).
#[cfg(test)]
pub(crate) const DEFAULT_RECONCILE_INTERVAL: Duration = Duration::from_secs(5);
/// `failover.reconcile_pending_interval_ms` of the shipped defaults (a test
/// checks it equals the file).
#[cfg(test)]
pub(crate) const DEFAULT_RECONCILE_PENDING_INTERVAL: Duration = Duration::from_secs(1);
/// etcd's own defaults, which apply when `[etcd]` does not set them.
pub(crate) const ETCD_DEFAULT_HEARTBEAT_MS: u64 = 100;
/// See [`ETCD_DEFAULT_HEARTBEAT_MS`].
pub(crate) const ETCD_DEFAULT_ELECTION_MS: u64 = 1000;
/// The longest election timeout etcd accepts (it refuses to start above
/// it: "--election-timeout[…] is too long").
pub(crate) const ETCD_MAX_ELECTION_MS: u64 = 50_000;
/// The largest `quota-backend-bytes` accepted: 8 GiB, the maximum etcd 3.4
/// and 3.5 document for normal environments (etcd warns beyond it, and
/// snapshots and restores of a larger database take minutes).
pub(crate) const ETCD_MAX_QUOTA_BACKEND_BYTES: u64 = 8 * 1024 * 1024 * 1024;
/// The shortest pending interval accepted: below it the loop would spend
/// its time asking crm_mon.
pub(crate) const MIN_PENDING_INTERVAL_MS: u64 = 100;
/// The longest stable interval accepted: the timer is the fallback of every
/// pushed event, so it must come round within minutes.
pub(crate) const MAX_RECONCILE_INTERVAL_MS: u64 = 300_000;

/// The failover loop's settings (`[failover]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverSettings {
    /// Where replaced member directories are archived (default
    /// `<data_dir>.archive`). On the data directory's filesystem: archiving
    /// is a rename, never a copy followed by a delete.
    pub archive_dir: PathBuf,
    /// Keep at most this many archives made by etcd-warden, removing the
    /// oldest beyond it; 0 (the default) keeps every archive.
    pub(crate) archive_keep: u32,
    /// How often the loop decides while nothing is pending.
    pub(crate) reconcile_interval: Duration,
    /// How often it decides while a step is pending.
    pub(crate) reconcile_pending_interval: Duration,
    /// etcd's `election-timeout` (ms) for a start with
    /// `--force-new-cluster` only; `None` keeps the normal value.
    pub(crate) force_election_timeout_ms: Option<u64>,
}

impl EtcdTuning {
    /// The heartbeat interval etcd runs with (ms): the configured one or
    /// etcd's default.
    pub(crate) fn heartbeat_ms(&self) -> u64 {
        self.heartbeat_interval_ms
            .unwrap_or(ETCD_DEFAULT_HEARTBEAT_MS)
    }

    /// The election timeout etcd runs with (ms): the configured one or
    /// etcd's default.
    pub(crate) fn election_ms(&self) -> u64 {
        self.election_timeout_ms.unwrap_or(ETCD_DEFAULT_ELECTION_MS)
    }
}

/// Shortest `report.interval_ms`: each cycle runs crm_mon, and a status
/// that changes within a second is read from `/v1/report` instead.
pub(crate) const MIN_REPORT_INTERVAL_MS: u64 = 1000;

/// Longest `report.interval_ms` (an hour: a report older than that is
/// stale for every reader).
pub(crate) const MAX_REPORT_INTERVAL_MS: u64 = 3_600_000;

/// The range `report.crm_mon_timeout_ms` accepts: crm_mon needs tens of
/// milliseconds on a healthy node, and the cycle holds its slot that long.
pub(crate) const REPORT_CRM_MON_TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 100..=600_000;

/// The daemon's own report writer (`[report]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReportSettings {
    /// Where the daemon writes the PacemakerCluster report; `None` (the
    /// default) writes none. `/v1/report` still answers either way.
    pub(crate) path: Option<PathBuf>,
    /// How often a cycle runs.
    pub(crate) interval: Duration,
    /// Deadline of each command of a cycle (crm_mon, cibadmin,
    /// corosync-cmapctl).
    pub(crate) crm_mon_timeout: Duration,
    /// The CIB file fence targets are read from (cibadmin is the fallback).
    pub(crate) cib_file: PathBuf,
    /// The Corosync configuration node addresses are read from
    /// (corosync-cmapctl is the fallback).
    pub(crate) corosync_conf: PathBuf,
    /// Resource agents of etcd (`*` at the end matches a prefix).
    pub(crate) etcd_agents: Vec<String>,
    /// Resource agents of kubelet.
    pub(crate) kubelet_agents: Vec<String>,
    /// Resource agents of fence devices.
    pub(crate) fence_agents: Vec<String>,
    /// Member nodes the cluster should have (default: `[[nodes]]` count).
    pub(crate) expected_nodes: usize,
    /// The rules the report and its health follow (`report.profile`).
    pub(crate) profile: crm_xml::report::Profile,
}

/// The range `defrag.check_interval_ms` accepts: a check asks every member
/// for its Status and Pacemaker for its view, so not more often than a
/// second; and at least once an hour.
pub const DEFRAG_CHECK_INTERVAL_RANGE_MS: std::ops::RangeInclusive<u64> = 1000..=3_600_000;

/// The range `defrag.timeout_ms` accepts: etcd's defragment of a database
/// of several GB takes minutes on slow disks.
pub const DEFRAG_TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 1000..=3_600_000;

/// The defragmentation policy (`[defrag]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefragSettings {
    /// Whether the daemon defragments on its own (`etcd-warden defrag`
    /// works either way).
    pub enabled: bool,
    /// Defragment once this percentage of the database file is free
    /// space: (size − in use) / size.
    pub fragmentation_percent: u64,
    /// ... and only a database file at least this large.
    pub min_db_size_bytes: u64,
    /// How often the policy looks.
    pub check_interval: Duration,
    /// The longest one defragment may take.
    pub timeout: Duration,
}

/// Validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// This node's name.
    pub(crate) node_name: String,
    /// The topology.
    pub(crate) topology: Topology,
    /// Start etcd without waiting for Pacemaker (standalone, development).
    pub(crate) autostart: bool,
    /// All nodes, this one included.
    pub nodes: Vec<NodeSettings>,
    /// etcd.
    pub etcd: EtcdSettings,
    /// The local API.
    pub(crate) api: ApiSettings,
    /// Daemon state (generated etcd config, PID files).
    pub state_dir: PathBuf,
    /// Timeouts.
    pub(crate) timeouts: Timeouts,
    /// The failover loop: archives, intervals, the forced start.
    pub failover: FailoverSettings,
    /// The daemon's report writer.
    pub(crate) report: ReportSettings,
    /// The defragmentation policy.
    pub(crate) defrag: DefragSettings,
    /// The files that were read, in order (the built-in defaults are not
    /// a file and are not listed).
    pub(crate) sources: Vec<PathBuf>,
    /// Where the configuration was read from, to read it again the same
    /// way (`validate-all`).
    pub(crate) layout: Layout,
}

impl Settings {
    /// This node's entry in [`Settings::nodes`].
    pub fn local_node(&self) -> &NodeSettings {
        // Validation guarantees the entry exists; fall back to the first
        // node rather than panicking should that ever be broken.
        self.nodes
            .iter()
            .find(|n| n.name == self.node_name)
            .unwrap_or(&self.nodes[0])
    }

    /// The URL the daemon uses to reach its local etcd.
    pub fn local_client_url(&self) -> &str {
        self.local_node()
            .client_urls
            .first()
            .map(String::as_str)
            .unwrap_or("http://127.0.0.1:2379")
    }

    /// Where the generated etcd configuration is written.
    pub fn etcd_config_path(&self) -> PathBuf {
        self.state_dir.join("etcd.conf.json")
    }
}
