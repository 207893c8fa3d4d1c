//! Configuration: TOML in `/etc/etcd-warden/config.toml` plus drop-ins in
//! `config.d/*.toml`, merged in that order (drop-ins sorted by file name, a
//! later file wins key by key), then validated into typed [`Settings`].
//!
//! Fragments keep every value's origin (file and line) so that a validation
//! error long after parsing can still say where the bad value was written.

use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

/// Default location of the main configuration file.
pub const DEFAULT_CONFIG: &str = "/etc/etcd-warden/config.toml";

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file.
    pub file: Arc<PathBuf>,
    /// 1-based line number.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// A configuration error. Every variant names the file (and, where there is
/// one, the line and key) so that an operator can fix it without guessing.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key has the wrong type or is unknown.
    #[error("{file}:{line}: key `{key}`: {message}")]
    Parse {
        /// The file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// Dotted key path (`etcd.data_dir`, `nodes[1].peer_urls`).
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A value parsed but makes no sense.
    #[error("{origin}: key `{key}`: {message}")]
    Invalid {
        /// Where it was written.
        origin: Origin,
        /// Dotted key path.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A required key is set nowhere.
    #[error("key `{key}` is required but set in none of: {files}")]
    Missing {
        /// Dotted key path.
        key: String,
        /// The files that were read.
        files: String,
    },
}

// ---------------------------------------------------------------------------
// Fragments: what one file says. Every field is optional.

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fragment {
    node_name: Option<Spanned<String>>,
    topology: Option<Spanned<String>>,
    autostart: Option<Spanned<bool>>,
    nodes: Option<Spanned<Vec<NodeFragment>>>,
    #[serde(default)]
    etcd: EtcdFragment,
    #[serde(default)]
    tls: TlsFragment,
    #[serde(default)]
    api: ApiFragment,
    #[serde(default)]
    paths: PathsFragment,
    #[serde(default)]
    timeouts: TimeoutsFragment,
    #[serde(default)]
    failover: FailoverFragment,
    #[serde(default)]
    report: ReportFragment,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeFragment {
    name: Spanned<String>,
    peer_urls: Spanned<Vec<String>>,
    client_urls: Spanned<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EtcdFragment {
    binary: Option<Spanned<PathBuf>>,
    data_dir: Option<Spanned<PathBuf>>,
    backend: Option<Spanned<String>>,
    unit_name: Option<Spanned<String>>,
    initial_cluster_token: Option<Spanned<String>>,
    quota_backend_bytes: Option<Spanned<u64>>,
    auto_compaction_mode: Option<Spanned<String>>,
    auto_compaction_retention: Option<Spanned<String>>,
    snapshot_count: Option<Spanned<u64>>,
    heartbeat_interval_ms: Option<Spanned<u64>>,
    election_timeout_ms: Option<Spanned<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFragment {
    #[serde(default)]
    client: TlsFilesFragment,
    #[serde(default)]
    peer: TlsFilesFragment,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFilesFragment {
    cert_file: Option<Spanned<PathBuf>>,
    key_file: Option<Spanned<PathBuf>>,
    trusted_ca_file: Option<Spanned<PathBuf>>,
    client_cert_auth: Option<Spanned<bool>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApiFragment {
    socket: Option<Spanned<PathBuf>>,
    socket_group: Option<Spanned<String>>,
    allowed_users: Option<Spanned<Vec<String>>>,
    http_addr: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathsFragment {
    state_dir: Option<Spanned<PathBuf>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutsFragment {
    probe_interval_ms: Option<Spanned<u64>>,
    probe_timeout_ms: Option<Spanned<u64>>,
    start_timeout_ms: Option<Spanned<u64>>,
    stop_grace_ms: Option<Spanned<u64>>,
    restart_delay_ms: Option<Spanned<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FailoverFragment {
    archive_dir: Option<Spanned<PathBuf>>,
    archive_keep: Option<Spanned<u32>>,
    reconcile_interval_ms: Option<Spanned<u64>>,
    reconcile_pending_interval_ms: Option<Spanned<u64>>,
    force_election_timeout_ms: Option<Spanned<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportFragment {
    path: Option<Spanned<PathBuf>>,
    interval_ms: Option<Spanned<u64>>,
    crm_mon_timeout_ms: Option<Spanned<u64>>,
    cib_file: Option<Spanned<PathBuf>>,
    corosync_conf: Option<Spanned<PathBuf>>,
    etcd_agents: Option<Spanned<Vec<String>>>,
    kubelet_agents: Option<Spanned<Vec<String>>>,
    fence_agents: Option<Spanned<Vec<String>>>,
    expected_nodes: Option<Spanned<u64>>,
}

// ---------------------------------------------------------------------------
// Typed settings.

/// The cluster's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Two nodes with fencing: the survivor may force a new cluster once
    /// Pacemaker confirms the peer is fenced.
    TwoNode,
    /// Three or more nodes (or a single one): plain etcd quorum.
    Ha,
}

impl Topology {
    /// The name used in configuration and in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::TwoNode => "two-node",
            Topology::Ha => "ha",
        }
    }
}

/// How etcd is supervised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// etcd is the daemon's child process.
    Process,
    /// etcd is a transient systemd unit (survives daemon restarts).
    Systemd,
}

/// etcd's auto-compaction mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionMode {
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
    pub client_urls: Vec<String>,
}

/// TLS files for one side (clients or peers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate.
    pub cert_file: PathBuf,
    /// Private key.
    pub key_file: PathBuf,
    /// CA bundle to verify the other side.
    pub trusted_ca_file: PathBuf,
    /// Whether the other side must present a certificate.
    pub client_cert_auth: bool,
}

/// The closed set of etcd settings an operator may tune. Deliberately not a
/// free-form flag map: flags such as `--initial-cluster-state` or
/// `--force-new-cluster` belong to the failover logic alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTuning {
    /// `quota-backend-bytes`.
    pub quota_backend_bytes: Option<u64>,
    /// `auto-compaction-mode` and `auto-compaction-retention`.
    pub auto_compaction: Option<(CompactionMode, String)>,
    /// `snapshot-count`.
    pub snapshot_count: Option<u64>,
    /// `heartbeat-interval` in ms.
    pub heartbeat_interval_ms: Option<u64>,
    /// `election-timeout` in ms.
    pub election_timeout_ms: Option<u64>,
}

/// etcd settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdSettings {
    /// The etcd binary.
    pub binary: PathBuf,
    /// The data directory.
    pub data_dir: PathBuf,
    /// How etcd is supervised.
    pub backend: BackendKind,
    /// systemd unit name (systemd backend).
    pub unit_name: String,
    /// `initial-cluster-token`.
    pub initial_cluster_token: String,
    /// The tunable extras.
    pub tuning: EtcdTuning,
    /// TLS for clients.
    pub client_tls: Option<TlsFiles>,
    /// TLS for peers.
    pub peer_tls: Option<TlsFiles>,
}

/// The local API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiSettings {
    /// The Unix socket.
    pub socket: PathBuf,
    /// Group owning the socket (mode 0660).
    pub socket_group: String,
    /// User names allowed to talk to the socket (checked with SO_PEERCRED).
    pub allowed_users: Vec<String>,
    /// Localhost TCP listener for /healthz, /readyz, /metrics, /status.
    pub http_addr: Option<SocketAddr>,
}

/// Timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// How often the daemon probes etcd.
    pub probe_interval: Duration,
    /// Deadline of one live etcd call.
    pub probe_timeout: Duration,
    /// How long a start may take until etcd answers.
    pub start_timeout: Duration,
    /// How long a graceful stop may take before SIGKILL.
    pub stop_grace: Duration,
    /// Delay before the daemon restarts an etcd that died (autostart only).
    pub restart_delay: Duration,
}

/// Default of `failover.reconcile_interval_ms`: how often the failover loop
/// decides while nothing is pending.
pub const DEFAULT_RECONCILE_INTERVAL: Duration = Duration::from_secs(5);
/// Default of `failover.reconcile_pending_interval_ms`: how often it decides
/// while a step is pending.
pub const DEFAULT_RECONCILE_PENDING_INTERVAL: Duration = Duration::from_secs(1);
/// Default of `failover.force_election_timeout_ms`.
pub const DEFAULT_FORCE_ELECTION_TIMEOUT_MS: u64 = 500;
/// etcd's own defaults, which apply when `[etcd]` does not set them.
pub const ETCD_DEFAULT_HEARTBEAT_MS: u64 = 100;
/// See [`ETCD_DEFAULT_HEARTBEAT_MS`].
pub const ETCD_DEFAULT_ELECTION_MS: u64 = 1000;
/// The shortest pending interval accepted: below it the loop would spend
/// its time asking crm_mon.
const MIN_PENDING_INTERVAL_MS: u64 = 100;
/// The longest stable interval accepted: the timer is the fallback of every
/// pushed event, so it must come round within minutes.
const MAX_RECONCILE_INTERVAL_MS: u64 = 300_000;

/// The failover loop's settings (`[failover]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverSettings {
    /// Where replaced member directories are archived (default
    /// `<data_dir>.archive`). On the data directory's filesystem: archiving
    /// is a rename, never a copy followed by a delete.
    pub archive_dir: PathBuf,
    /// Keep at most this many archives made by etcd-warden, removing the
    /// oldest beyond it; 0 (the default) keeps every archive.
    pub archive_keep: u32,
    /// How often the loop decides while nothing is pending.
    pub reconcile_interval: Duration,
    /// How often it decides while a step is pending.
    pub reconcile_pending_interval: Duration,
    /// etcd's `election-timeout` (ms) for a start with
    /// `--force-new-cluster` only; `None` keeps the normal value.
    pub force_election_timeout_ms: Option<u64>,
}

impl EtcdTuning {
    /// The heartbeat interval etcd runs with (ms): the configured one or
    /// etcd's default.
    pub fn heartbeat_ms(&self) -> u64 {
        self.heartbeat_interval_ms
            .unwrap_or(ETCD_DEFAULT_HEARTBEAT_MS)
    }

    /// The election timeout etcd runs with (ms): the configured one or
    /// etcd's default.
    pub fn election_ms(&self) -> u64 {
        self.election_timeout_ms.unwrap_or(ETCD_DEFAULT_ELECTION_MS)
    }
}

/// Shortest `report.interval_ms`: each cycle runs crm_mon, and a status
/// that changes within a second is read from `/v1/report` instead.
pub const MIN_REPORT_INTERVAL_MS: u64 = 1000;

/// Longest `report.interval_ms` (an hour: a report older than that is
/// stale for every reader).
pub const MAX_REPORT_INTERVAL_MS: u64 = 3_600_000;

/// Default `report.interval_ms`, as the collect timer's.
pub const DEFAULT_REPORT_INTERVAL_MS: u64 = 30_000;

/// Default `report.crm_mon_timeout_ms`, as `collect --timeout`'s.
pub const DEFAULT_REPORT_CRM_MON_TIMEOUT_MS: u64 = 10_000;

/// The range `report.crm_mon_timeout_ms` accepts: crm_mon needs tens of
/// milliseconds on a healthy node, and the cycle holds its slot that long.
pub const REPORT_CRM_MON_TIMEOUT_RANGE_MS: std::ops::RangeInclusive<u64> = 100..=600_000;

/// The daemon's own report writer (`[report]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSettings {
    /// Where the daemon writes the PacemakerCluster report; `None` (the
    /// default) writes none. `/v1/report` still answers either way.
    pub path: Option<PathBuf>,
    /// How often a cycle runs.
    pub interval: Duration,
    /// Deadline of each command of a cycle (crm_mon, cibadmin,
    /// corosync-cmapctl).
    pub crm_mon_timeout: Duration,
    /// The CIB file fence targets are read from (cibadmin is the fallback).
    pub cib_file: PathBuf,
    /// The Corosync configuration node addresses are read from
    /// (corosync-cmapctl is the fallback).
    pub corosync_conf: PathBuf,
    /// Resource agents of etcd (`*` at the end matches a prefix).
    pub etcd_agents: Vec<String>,
    /// Resource agents of kubelet.
    pub kubelet_agents: Vec<String>,
    /// Resource agents of fence devices.
    pub fence_agents: Vec<String>,
    /// Member nodes the cluster should have (default: `[[nodes]]` count).
    pub expected_nodes: usize,
}

/// Validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// This node's name.
    pub node_name: String,
    /// The topology.
    pub topology: Topology,
    /// Start etcd without waiting for Pacemaker (standalone, development).
    pub autostart: bool,
    /// All nodes, this one included.
    pub nodes: Vec<NodeSettings>,
    /// etcd.
    pub etcd: EtcdSettings,
    /// The local API.
    pub api: ApiSettings,
    /// Daemon state (generated etcd config, PID files).
    pub state_dir: PathBuf,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// The failover loop: archives, intervals, the forced start.
    pub failover: FailoverSettings,
    /// The daemon's report writer.
    pub report: ReportSettings,
    /// The files that were read, in order.
    pub sources: Vec<PathBuf>,
}

impl Settings {
    /// This node's entry in [`Settings::nodes`].
    pub fn local_node(&self) -> &NodeSettings {
        // validate() guarantees the entry exists; fall back to the first
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

// ---------------------------------------------------------------------------
// Loading.

/// The files that make up the configuration rooted at `main`: the main file
/// (when present) and `config.d/*.toml` next to it, sorted by name.
pub fn config_files(main: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let mut files = Vec::new();
    if main.exists() {
        files.push(main.to_path_buf());
    }
    let dir = main.parent().unwrap_or(Path::new(".")).join("config.d");
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            let mut dropins: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            dropins.sort();
            files.extend(dropins);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(ConfigError::Read { path: dir, source }),
    }
    if files.is_empty() {
        return Err(ConfigError::Read {
            path: main.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    Ok(files)
}

/// Load and validate the configuration rooted at `main`.
pub fn load(main: &Path) -> Result<Settings, ConfigError> {
    let files = config_files(main)?;
    let mut texts = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|source| ConfigError::Read {
            path: f.clone(),
            source,
        })?;
        texts.push((f.clone(), text));
    }
    from_texts(&texts)
}

/// Validate configuration given as `(file name, text)` pairs, merged in order.
pub fn from_texts(texts: &[(PathBuf, String)]) -> Result<Settings, ConfigError> {
    let mut merged = Inputs::default();
    for (path, text) in texts {
        let frag = parse_fragment(path, text)?;
        let ctx = FileCtx {
            file: Arc::new(path.clone()),
            text,
        };
        merged.absorb(frag, &ctx);
    }
    merged.validate(texts.iter().map(|(p, _)| p.clone()).collect())
}

fn parse_fragment(path: &Path, text: &str) -> Result<Fragment, ConfigError> {
    let line_of =
        |span: Option<std::ops::Range<usize>>| span.map(|s| line_at(text, s.start)).unwrap_or(1);
    let de = toml::Deserializer::parse(text).map_err(|e| ConfigError::Parse {
        file: path.to_path_buf(),
        line: line_of(e.span()),
        key: "-".into(),
        message: e.message().trim().to_string(),
    })?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        // Spanned<T> shows up in the path as a private field; the operator
        // wants the key as written.
        let key = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "")
            .replace("$__serde_spanned_private_value", "");
        let inner = e.into_inner();
        ConfigError::Parse {
            file: path.to_path_buf(),
            line: line_of(inner.span()),
            key,
            message: inner.message().trim().to_string(),
        }
    })
}

fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset.min(text.len()))
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

struct FileCtx<'a> {
    file: Arc<PathBuf>,
    text: &'a str,
}

impl FileCtx<'_> {
    fn locate<T>(&self, s: Spanned<T>) -> Located<T> {
        let origin = Origin {
            file: self.file.clone(),
            line: line_at(self.text, s.span().start),
        };
        Located {
            value: s.into_inner(),
            origin,
        }
    }
}

#[derive(Debug, Clone)]
struct Located<T> {
    value: T,
    origin: Origin,
}

impl<T> Located<T> {
    fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            origin: self.origin.clone(),
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// Merged, unvalidated values with their origins.
#[derive(Debug, Default)]
struct Inputs {
    node_name: Option<Located<String>>,
    topology: Option<Located<String>>,
    autostart: Option<Located<bool>>,
    nodes: Option<Located<Vec<LocatedNode>>>,
    binary: Option<Located<PathBuf>>,
    data_dir: Option<Located<PathBuf>>,
    backend: Option<Located<String>>,
    unit_name: Option<Located<String>>,
    initial_cluster_token: Option<Located<String>>,
    quota_backend_bytes: Option<Located<u64>>,
    auto_compaction_mode: Option<Located<String>>,
    auto_compaction_retention: Option<Located<String>>,
    snapshot_count: Option<Located<u64>>,
    heartbeat_interval_ms: Option<Located<u64>>,
    election_timeout_ms: Option<Located<u64>>,
    client_tls: TlsInputs,
    peer_tls: TlsInputs,
    socket: Option<Located<PathBuf>>,
    socket_group: Option<Located<String>>,
    allowed_users: Option<Located<Vec<String>>>,
    http_addr: Option<Located<String>>,
    state_dir: Option<Located<PathBuf>>,
    probe_interval_ms: Option<Located<u64>>,
    probe_timeout_ms: Option<Located<u64>>,
    start_timeout_ms: Option<Located<u64>>,
    stop_grace_ms: Option<Located<u64>>,
    restart_delay_ms: Option<Located<u64>>,
    archive_dir: Option<Located<PathBuf>>,
    archive_keep: Option<Located<u32>>,
    reconcile_interval_ms: Option<Located<u64>>,
    reconcile_pending_interval_ms: Option<Located<u64>>,
    force_election_timeout_ms: Option<Located<u64>>,
    report: ReportInputs,
}

#[derive(Debug, Default)]
struct TlsInputs {
    cert_file: Option<Located<PathBuf>>,
    key_file: Option<Located<PathBuf>>,
    trusted_ca_file: Option<Located<PathBuf>>,
    client_cert_auth: Option<Located<bool>>,
}

#[derive(Debug, Clone)]
struct LocatedNode {
    name: Located<String>,
    peer_urls: Located<Vec<String>>,
    client_urls: Located<Vec<String>>,
}

/// A later file's value replaces an earlier one.
fn set<T>(dst: &mut Option<Located<T>>, src: Option<Spanned<T>>, ctx: &FileCtx<'_>) {
    if let Some(v) = src {
        *dst = Some(ctx.locate(v));
    }
}

impl TlsInputs {
    fn absorb(&mut self, f: TlsFilesFragment, ctx: &FileCtx<'_>) {
        set(&mut self.cert_file, f.cert_file, ctx);
        set(&mut self.key_file, f.key_file, ctx);
        set(&mut self.trusted_ca_file, f.trusted_ca_file, ctx);
        set(&mut self.client_cert_auth, f.client_cert_auth, ctx);
    }

    fn validate(self, side: &str) -> Result<Option<TlsFiles>, ConfigError> {
        let any = self.cert_file.is_some()
            || self.key_file.is_some()
            || self.trusted_ca_file.is_some()
            || self.client_cert_auth.is_some();
        if !any {
            return Ok(None);
        }
        let need = |v: Option<Located<PathBuf>>, name: &str| {
            v.map(|l| l.value).ok_or_else(|| ConfigError::Missing {
                key: format!("tls.{side}.{name}"),
                files: format!("(needed because another tls.{side} key is set)"),
            })
        };
        Ok(Some(TlsFiles {
            cert_file: need(self.cert_file, "cert_file")?,
            key_file: need(self.key_file, "key_file")?,
            trusted_ca_file: need(self.trusted_ca_file, "trusted_ca_file")?,
            client_cert_auth: self.client_cert_auth.map(|l| l.value).unwrap_or(true),
        }))
    }
}

impl Inputs {
    fn absorb(&mut self, f: Fragment, ctx: &FileCtx<'_>) {
        set(&mut self.node_name, f.node_name, ctx);
        set(&mut self.topology, f.topology, ctx);
        set(&mut self.autostart, f.autostart, ctx);
        if let Some(nodes) = f.nodes {
            let located = ctx.locate(nodes);
            self.nodes = Some(Located {
                origin: located.origin,
                value: located
                    .value
                    .into_iter()
                    .map(|n| LocatedNode {
                        name: ctx.locate(n.name),
                        peer_urls: ctx.locate(n.peer_urls),
                        client_urls: ctx.locate(n.client_urls),
                    })
                    .collect(),
            });
        }
        let e = f.etcd;
        set(&mut self.binary, e.binary, ctx);
        set(&mut self.data_dir, e.data_dir, ctx);
        set(&mut self.backend, e.backend, ctx);
        set(&mut self.unit_name, e.unit_name, ctx);
        set(
            &mut self.initial_cluster_token,
            e.initial_cluster_token,
            ctx,
        );
        set(&mut self.quota_backend_bytes, e.quota_backend_bytes, ctx);
        set(&mut self.auto_compaction_mode, e.auto_compaction_mode, ctx);
        set(
            &mut self.auto_compaction_retention,
            e.auto_compaction_retention,
            ctx,
        );
        set(&mut self.snapshot_count, e.snapshot_count, ctx);
        set(
            &mut self.heartbeat_interval_ms,
            e.heartbeat_interval_ms,
            ctx,
        );
        set(&mut self.election_timeout_ms, e.election_timeout_ms, ctx);
        self.client_tls.absorb(f.tls.client, ctx);
        self.peer_tls.absorb(f.tls.peer, ctx);
        set(&mut self.socket, f.api.socket, ctx);
        set(&mut self.socket_group, f.api.socket_group, ctx);
        set(&mut self.allowed_users, f.api.allowed_users, ctx);
        set(&mut self.http_addr, f.api.http_addr, ctx);
        set(&mut self.state_dir, f.paths.state_dir, ctx);
        let t = f.timeouts;
        set(&mut self.probe_interval_ms, t.probe_interval_ms, ctx);
        set(&mut self.probe_timeout_ms, t.probe_timeout_ms, ctx);
        set(&mut self.start_timeout_ms, t.start_timeout_ms, ctx);
        set(&mut self.stop_grace_ms, t.stop_grace_ms, ctx);
        set(&mut self.restart_delay_ms, t.restart_delay_ms, ctx);
        let fo = f.failover;
        set(&mut self.archive_dir, fo.archive_dir, ctx);
        set(&mut self.archive_keep, fo.archive_keep, ctx);
        set(
            &mut self.reconcile_interval_ms,
            fo.reconcile_interval_ms,
            ctx,
        );
        set(
            &mut self.reconcile_pending_interval_ms,
            fo.reconcile_pending_interval_ms,
            ctx,
        );
        set(
            &mut self.force_election_timeout_ms,
            fo.force_election_timeout_ms,
            ctx,
        );
        self.report.absorb(f.report, ctx);
    }

    fn validate(self, sources: Vec<PathBuf>) -> Result<Settings, ConfigError> {
        let files = sources
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let missing = |key: &str| ConfigError::Missing {
            key: key.into(),
            files: files.clone(),
        };

        let node_name = self.node_name.ok_or_else(|| missing("node_name"))?;
        let topology_l = self.topology.ok_or_else(|| missing("topology"))?;
        let topology = match topology_l.value.as_str() {
            "two-node" => Topology::TwoNode,
            "ha" => Topology::Ha,
            other => {
                return Err(topology_l.invalid(
                    "topology",
                    format!("unknown topology {other:?}, expected \"two-node\" or \"ha\""),
                ));
            }
        };
        let nodes_l = self.nodes.ok_or_else(|| missing("nodes"))?;
        let mut nodes = Vec::new();
        let mut names = BTreeSet::new();
        for (i, n) in nodes_l.value.iter().enumerate() {
            let key = |k: &str| format!("nodes[{i}].{k}");
            if n.name.value.is_empty() || !valid_member_name(&n.name.value) {
                return Err(n.name.invalid(
                    &key("name"),
                    format!(
                        "invalid node name {:?}: use letters, digits, '-', '_' and '.'",
                        n.name.value
                    ),
                ));
            }
            if !names.insert(n.name.value.clone()) {
                return Err(n
                    .name
                    .invalid(&key("name"), format!("duplicate node {:?}", n.name.value)));
            }
            for (field, urls) in [("peer_urls", &n.peer_urls), ("client_urls", &n.client_urls)] {
                if urls.value.is_empty() {
                    return Err(urls.invalid(&key(field), "at least one URL is required"));
                }
                for u in &urls.value {
                    check_url(u).map_err(|m| urls.invalid(&key(field), m))?;
                }
            }
            nodes.push(NodeSettings {
                name: n.name.value.clone(),
                peer_urls: n.peer_urls.value.clone(),
                client_urls: n.client_urls.value.clone(),
            });
        }
        match topology {
            Topology::TwoNode if nodes.len() != 2 => {
                return Err(nodes_l.invalid(
                    "nodes",
                    format!(
                        "topology \"two-node\" needs exactly 2 nodes, {} given",
                        nodes.len()
                    ),
                ));
            }
            Topology::Ha if nodes.is_empty() => {
                return Err(nodes_l.invalid("nodes", "at least one node is required"));
            }
            _ => {}
        }
        if !names.contains(&node_name.value) {
            return Err(node_name.invalid(
                "node_name",
                format!(
                    "node {:?} is not among the configured nodes ({})",
                    node_name.value,
                    names.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }

        let backend = match self.backend {
            None => BackendKind::Process,
            Some(b) => match b.value.as_str() {
                "process" => BackendKind::Process,
                "systemd" => BackendKind::Systemd,
                other => {
                    return Err(b.invalid(
                        "etcd.backend",
                        format!("unknown backend {other:?}, expected \"process\" or \"systemd\""),
                    ));
                }
            },
        };
        let unit_name = match self.unit_name {
            None => "etcd-warden-etcd.service".to_string(),
            Some(u) if u.value.ends_with(".service") && !u.value.contains('/') => u.value,
            Some(u) => {
                return Err(u.invalid(
                    "etcd.unit_name",
                    "a unit name ending in \".service\" is required",
                ));
            }
        };
        let auto_compaction = match (self.auto_compaction_mode, self.auto_compaction_retention) {
            (None, None) => None,
            (Some(m), r) => {
                let mode = match m.value.as_str() {
                    "periodic" => CompactionMode::Periodic,
                    "revision" => CompactionMode::Revision,
                    other => {
                        return Err(m.invalid(
                            "etcd.auto_compaction_mode",
                            format!(
                                "unknown mode {other:?}, expected \"periodic\" or \"revision\""
                            ),
                        ));
                    }
                };
                let r = r.ok_or_else(|| missing("etcd.auto_compaction_retention"))?;
                check_retention(mode, &r.value)
                    .map_err(|m| r.invalid("etcd.auto_compaction_retention", m))?;
                Some((mode, r.value))
            }
            (None, Some(r)) => {
                return Err(r.invalid(
                    "etcd.auto_compaction_retention",
                    "needs etcd.auto_compaction_mode as well",
                ));
            }
        };
        let positive = |v: Option<Located<u64>>, key: &str| -> Result<Option<u64>, ConfigError> {
            match v {
                Some(l) if l.value == 0 => Err(l.invalid(key, "must be greater than 0")),
                Some(l) => Ok(Some(l.value)),
                None => Ok(None),
            }
        };
        let heartbeat = positive(self.heartbeat_interval_ms, "etcd.heartbeat_interval_ms")?;
        let election_l = self.election_timeout_ms.clone();
        let election = positive(self.election_timeout_ms, "etcd.election_timeout_ms")?;
        // etcd refuses to start unless election timeout >= 5 x heartbeat;
        // say so here rather than in etcd's log.
        if let Some(l) = election_l {
            let hb = heartbeat.unwrap_or(100);
            if l.value < 5 * hb {
                return Err(l.invalid(
                    "etcd.election_timeout_ms",
                    format!("must be at least 5 x heartbeat interval ({hb} ms)"),
                ));
            }
        }
        let tuning = EtcdTuning {
            quota_backend_bytes: positive(self.quota_backend_bytes, "etcd.quota_backend_bytes")?,
            auto_compaction,
            snapshot_count: positive(self.snapshot_count, "etcd.snapshot_count")?,
            heartbeat_interval_ms: heartbeat,
            election_timeout_ms: election,
        };

        let http_addr = match self.http_addr {
            None => None,
            Some(a) => {
                let addr: SocketAddr = a.value.parse().map_err(|_| {
                    a.invalid(
                        "api.http_addr",
                        format!("{:?} is not an address like 127.0.0.1:9481", a.value),
                    )
                })?;
                // The TCP listener carries no authentication: it must never
                // be reachable from another host.
                if !addr.ip().is_loopback() {
                    return Err(a.invalid(
                        "api.http_addr",
                        format!("{addr} is not a loopback address (127.0.0.0/8 or ::1)"),
                    ));
                }
                Some(addr)
            }
        };
        let allowed_users = match self.allowed_users {
            None => vec!["root".into(), "hacluster".into()],
            Some(l) if l.value.is_empty() => {
                return Err(l.invalid("api.allowed_users", "the list must not be empty"));
            }
            Some(l) => l.value,
        };

        let ms =
            |v: Option<Located<u64>>, key: &str, default: u64| -> Result<Duration, ConfigError> {
                let v = match v {
                    Some(l) => NonZeroU64::new(l.value)
                        .ok_or_else(|| l.invalid(key, "must be greater than 0"))?
                        .get(),
                    None => default,
                };
                Ok(Duration::from_millis(v))
            };
        let timeouts = Timeouts {
            probe_interval: ms(self.probe_interval_ms, "timeouts.probe_interval_ms", 2000)?,
            probe_timeout: ms(self.probe_timeout_ms, "timeouts.probe_timeout_ms", 1000)?,
            start_timeout: ms(self.start_timeout_ms, "timeouts.start_timeout_ms", 60_000)?,
            stop_grace: ms(self.stop_grace_ms, "timeouts.stop_grace_ms", 20_000)?,
            restart_delay: ms(self.restart_delay_ms, "timeouts.restart_delay_ms", 3000)?,
        };

        let absolute = |v: Option<Located<PathBuf>>, key: &str, default: &str| match v {
            Some(l) if !l.value.is_absolute() => Err(l.invalid(key, "must be an absolute path")),
            Some(l) => Ok(l.value),
            None => Ok(PathBuf::from(default)),
        };
        let data_dir = absolute(self.data_dir, "etcd.data_dir", "/var/lib/etcd")?;
        let failover = FailoverInputs {
            archive_dir: self.archive_dir,
            archive_keep: self.archive_keep,
            reconcile_interval_ms: self.reconcile_interval_ms,
            reconcile_pending_interval_ms: self.reconcile_pending_interval_ms,
            force_election_timeout_ms: self.force_election_timeout_ms,
        }
        .validate(&data_dir, &tuning)?;
        let report = self.report.validate(nodes.len())?;
        Ok(Settings {
            node_name: node_name.value,
            topology,
            autostart: self.autostart.map(|l| l.value).unwrap_or(false),
            nodes,
            etcd: EtcdSettings {
                binary: absolute(self.binary, "etcd.binary", "/usr/bin/etcd")?,
                data_dir,
                backend,
                unit_name,
                initial_cluster_token: self
                    .initial_cluster_token
                    .map(|l| l.value)
                    .unwrap_or_else(|| "etcd-warden".into()),
                tuning,
                client_tls: self.client_tls.validate("client")?,
                peer_tls: self.peer_tls.validate("peer")?,
            },
            api: ApiSettings {
                socket: absolute(self.socket, "api.socket", warden_api::DEFAULT_SOCKET)?,
                socket_group: self
                    .socket_group
                    .map(|l| l.value)
                    .unwrap_or_else(|| "haclient".into()),
                allowed_users,
                http_addr,
            },
            state_dir: absolute(self.state_dir, "paths.state_dir", "/var/lib/etcd-warden")?,
            timeouts,
            failover,
            report,
            sources,
        })
    }
}

/// The `[failover]` values, validated apart from the rest because they
/// depend on the data directory and etcd's timing.
struct FailoverInputs {
    archive_dir: Option<Located<PathBuf>>,
    archive_keep: Option<Located<u32>>,
    reconcile_interval_ms: Option<Located<u64>>,
    reconcile_pending_interval_ms: Option<Located<u64>>,
    force_election_timeout_ms: Option<Located<u64>>,
}

impl FailoverInputs {
    fn validate(
        self,
        data_dir: &Path,
        tuning: &EtcdTuning,
    ) -> Result<FailoverSettings, ConfigError> {
        let archive_dir = match self.archive_dir {
            None => default_archive_dir(data_dir),
            Some(l) => {
                check_archive_dir(&l.value, data_dir)
                    .map_err(|m| l.invalid("failover.archive_dir", m))?;
                l.value
            }
        };

        let stable = match &self.reconcile_interval_ms {
            None => DEFAULT_RECONCILE_INTERVAL,
            Some(l)
                if !(MIN_PENDING_INTERVAL_MS..=MAX_RECONCILE_INTERVAL_MS).contains(&l.value) =>
            {
                return Err(l.invalid(
                    "failover.reconcile_interval_ms",
                    format!(
                        "{} is out of range: use {MIN_PENDING_INTERVAL_MS} to {MAX_RECONCILE_INTERVAL_MS} ms",
                        l.value
                    ),
                ));
            }
            Some(l) => Duration::from_millis(l.value),
        };
        let pending = match &self.reconcile_pending_interval_ms {
            None => DEFAULT_RECONCILE_PENDING_INTERVAL.min(stable),
            Some(l) if l.value < MIN_PENDING_INTERVAL_MS => {
                return Err(l.invalid(
                    "failover.reconcile_pending_interval_ms",
                    format!(
                        "{} ms is too short: at least {MIN_PENDING_INTERVAL_MS} ms (each pass asks crm_mon and etcd)",
                        l.value
                    ),
                ));
            }
            Some(l) => Duration::from_millis(l.value),
        };
        // Unset, the pending interval follows a shorter stable one, so only
        // a pending interval written in a file can be the longer one.
        if let Some(l) = &self.reconcile_pending_interval_ms
            && pending > stable
        {
            return Err(l.invalid(
                "failover.reconcile_pending_interval_ms",
                format!(
                    "the pending interval ({} ms) must not be longer than failover.reconcile_interval_ms ({} ms): the loop comes back sooner while a step is pending, never later",
                    pending.as_millis(),
                    stable.as_millis()
                ),
            ));
        }

        let force_election_timeout_ms = match self.force_election_timeout_ms {
            None => Some(DEFAULT_FORCE_ELECTION_TIMEOUT_MS),
            Some(l) if l.value == 0 => None,
            Some(l) => {
                let (hb, el) = (tuning.heartbeat_ms(), tuning.election_ms());
                if l.value < 5 * hb {
                    return Err(l.invalid(
                        "failover.force_election_timeout_ms",
                        format!(
                            "{} ms is below 5 x the heartbeat interval ({hb} ms), which etcd refuses; use at least {} or 0 to keep the normal election timeout",
                            l.value,
                            5 * hb
                        ),
                    ));
                }
                if l.value > el {
                    return Err(l.invalid(
                        "failover.force_election_timeout_ms",
                        format!(
                            "{} ms is longer than the election timeout ({el} ms): it exists to shorten the forced start, use at most {el} or 0",
                            l.value
                        ),
                    ));
                }
                Some(l.value)
            }
        };

        Ok(FailoverSettings {
            archive_dir,
            archive_keep: self.archive_keep.map(|l| l.value).unwrap_or(0),
            reconcile_interval: stable,
            reconcile_pending_interval: pending,
            force_election_timeout_ms,
        })
    }
}

/// The `[report]` values with their origins.
#[derive(Debug, Default)]
struct ReportInputs {
    path: Option<Located<PathBuf>>,
    interval_ms: Option<Located<u64>>,
    crm_mon_timeout_ms: Option<Located<u64>>,
    cib_file: Option<Located<PathBuf>>,
    corosync_conf: Option<Located<PathBuf>>,
    etcd_agents: Option<Located<Vec<String>>>,
    kubelet_agents: Option<Located<Vec<String>>>,
    fence_agents: Option<Located<Vec<String>>>,
    expected_nodes: Option<Located<u64>>,
}

impl ReportInputs {
    fn absorb(&mut self, f: ReportFragment, ctx: &FileCtx<'_>) {
        set(&mut self.path, f.path, ctx);
        set(&mut self.interval_ms, f.interval_ms, ctx);
        set(&mut self.crm_mon_timeout_ms, f.crm_mon_timeout_ms, ctx);
        set(&mut self.cib_file, f.cib_file, ctx);
        set(&mut self.corosync_conf, f.corosync_conf, ctx);
        set(&mut self.etcd_agents, f.etcd_agents, ctx);
        set(&mut self.kubelet_agents, f.kubelet_agents, ctx);
        set(&mut self.fence_agents, f.fence_agents, ctx);
        set(&mut self.expected_nodes, f.expected_nodes, ctx);
    }

    fn validate(self, node_count: usize) -> Result<ReportSettings, ConfigError> {
        let file = |v: Option<Located<PathBuf>>, key: &str, default: &str| match v {
            None => Ok(PathBuf::from(default)),
            Some(l) if !l.value.is_absolute() => Err(l.invalid(key, "must be an absolute path")),
            Some(l) => Ok(l.value),
        };
        let path = match self.path {
            None => None,
            Some(l) if !l.value.is_absolute() => {
                return Err(l.invalid("report.path", "must be an absolute path"));
            }
            Some(l) if l.value.file_name().is_none() => {
                return Err(l.invalid("report.path", "must name a file, not a directory"));
            }
            Some(l) => Some(l.value),
        };
        let ranged = |v: Option<Located<u64>>,
                      key: &str,
                      range: std::ops::RangeInclusive<u64>,
                      default: u64|
         -> Result<Duration, ConfigError> {
            match v {
                None => Ok(Duration::from_millis(default)),
                Some(l) if !range.contains(&l.value) => Err(l.invalid(
                    key,
                    format!(
                        "{} is out of range: use {} to {} ms",
                        l.value,
                        range.start(),
                        range.end()
                    ),
                )),
                Some(l) => Ok(Duration::from_millis(l.value)),
            }
        };
        let interval = ranged(
            self.interval_ms,
            "report.interval_ms",
            MIN_REPORT_INTERVAL_MS..=MAX_REPORT_INTERVAL_MS,
            DEFAULT_REPORT_INTERVAL_MS,
        )?;
        let crm_mon_timeout = ranged(
            self.crm_mon_timeout_ms,
            "report.crm_mon_timeout_ms",
            REPORT_CRM_MON_TIMEOUT_RANGE_MS,
            DEFAULT_REPORT_CRM_MON_TIMEOUT_MS,
        )?;
        let defaults = crm_xml::report::Options::default();
        let agents = |v: Option<Located<Vec<String>>>, key: &str, default: Vec<String>| match v {
            None => Ok(default),
            Some(l) if l.value.is_empty() => Err(l.invalid(key, "the list must not be empty")),
            Some(l) => match l
                .value
                .iter()
                .find(|a| a.trim().is_empty() || a.trim() != *a)
            {
                Some(bad) => Err(l.invalid(
                    key,
                    format!("{bad:?} is not a resource agent like \"ocf:etcd-warden:etcd\""),
                )),
                None => Ok(l.value),
            },
        };
        let expected_nodes = match self.expected_nodes {
            None => node_count,
            Some(l) => match usize::try_from(l.value) {
                Ok(n) if (1..=MAX_EXPECTED_NODES).contains(&n) => n,
                _ => {
                    return Err(l.invalid(
                        "report.expected_nodes",
                        format!("{} is out of range: use 1 to {MAX_EXPECTED_NODES}", l.value),
                    ));
                }
            },
        };
        Ok(ReportSettings {
            path,
            interval,
            crm_mon_timeout,
            cib_file: file(
                self.cib_file,
                "report.cib_file",
                crate::report_cycle::LIVE_CIB_FILE,
            )?,
            corosync_conf: file(
                self.corosync_conf,
                "report.corosync_conf",
                crate::report_cycle::DEFAULT_COROSYNC_CONF,
            )?,
            etcd_agents: agents(self.etcd_agents, "report.etcd_agents", defaults.etcd_agents)?,
            kubelet_agents: agents(
                self.kubelet_agents,
                "report.kubelet_agents",
                defaults.kubelet_agents,
            )?,
            fence_agents: agents(
                self.fence_agents,
                "report.fence_agents",
                defaults.fence_agents,
            )?,
            expected_nodes,
        })
    }
}

/// Largest `report.expected_nodes`: far above any Corosync cluster, a
/// bound against a typo rather than a limit of the report.
const MAX_EXPECTED_NODES: usize = 256;

/// `<data_dir>.archive`, beside the data directory.
pub fn default_archive_dir(data_dir: &Path) -> PathBuf {
    let base = data_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "etcd".into());
    data_dir.with_file_name(format!("{base}.archive"))
}

/// An archive directory must be absolute, apart from the data directory
/// (etcd owns the data directory; an archive directory holding the data
/// directory would list the live data as an archive), and on the same
/// filesystem: archiving moves the member directory with one rename, which
/// cannot cross filesystems, and a copy would need a delete of the source.
fn check_archive_dir(archive: &Path, data_dir: &Path) -> Result<(), String> {
    if !archive.is_absolute() {
        return Err("must be an absolute path".into());
    }
    if archive.starts_with(data_dir) {
        return Err(format!(
            "{} is inside the data directory {} (etcd owns that directory); put it beside it",
            archive.display(),
            data_dir.display()
        ));
    }
    if data_dir.starts_with(archive) {
        return Err(format!(
            "{} contains the data directory {}; put it beside it",
            archive.display(),
            data_dir.display()
        ));
    }
    let (a, d) = (nearest_existing(archive), nearest_existing(data_dir));
    if let (Some((a_at, a_dev)), Some((d_at, d_dev))) = (a, d)
        && a_dev != d_dev
    {
        return Err(format!(
            "{} ({} is on device {a_dev:#x}) is not on the data directory's filesystem ({} is on device {d_dev:#x}): archiving moves the member directory with a rename, which cannot cross filesystems; choose a directory on the same filesystem as {}",
            archive.display(),
            a_at.display(),
            d_at.display(),
            data_dir.display()
        ));
    }
    Ok(())
}

/// The path itself or its nearest existing ancestor, with its device.
fn nearest_existing(p: &Path) -> Option<(PathBuf, u64)> {
    use std::os::unix::fs::MetadataExt;
    p.ancestors().find_map(|a| {
        std::fs::metadata(a)
            .ok()
            .map(|m| (a.to_path_buf(), m.dev()))
    })
}

fn valid_member_name(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Checks `scheme://host:port` with an IPv4 address, a bracketed IPv6
/// address or a host name.
fn check_url(u: &str) -> Result<(), String> {
    let rest = u
        .strip_prefix("http://")
        .or_else(|| u.strip_prefix("https://"))
        .ok_or_else(|| format!("{u:?} must start with http:// or https://"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.parse::<SocketAddr>().is_ok() {
        return Ok(());
    }
    if rest.starts_with('[') {
        return Err(format!(
            "{u:?}: an IPv6 address must be written [addr]:port"
        ));
    }
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("{u:?} has no port"))?;
    port.parse::<u16>()
        .map_err(|_| format!("{u:?} has an invalid port {port:?}"))?;
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return Err(format!("{u:?} has an invalid host {host:?}"));
    }
    Ok(())
}

fn check_retention(mode: CompactionMode, r: &str) -> Result<(), String> {
    match mode {
        CompactionMode::Revision => r
            .parse::<u64>()
            .map(|_| ())
            .map_err(|_| format!("{r:?} is not a number of revisions")),
        CompactionMode::Periodic => {
            let digits = r.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            let unit = &r[digits.len()..];
            if digits.parse::<u64>().is_ok() && matches!(unit, "" | "s" | "m" | "h") {
                Ok(())
            } else {
                Err(format!("{r:?} is not a duration like \"1h\" or \"30m\""))
            }
        }
    }
}

/// Render settings back to TOML (used by `--standalone` to write the
/// configuration it generated, so that the CLI can read it later).
pub fn render_toml(s: &Settings) -> String {
    use std::fmt::Write;
    let q = |v: &str| toml_quote(v);
    let list = |v: &[String]| {
        format!(
            "[{}]",
            v.iter()
                .map(|s| toml_quote(s))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut out = String::new();
    let _ = writeln!(out, "# Generated by etcd-warden --standalone.");
    let _ = writeln!(out, "node_name = {}", q(&s.node_name));
    let _ = writeln!(out, "topology = {}", q(s.topology.as_str()));
    let _ = writeln!(out, "autostart = {}", s.autostart);
    let _ = writeln!(out, "\n[etcd]");
    let _ = writeln!(out, "binary = {}", q(&s.etcd.binary.to_string_lossy()));
    let _ = writeln!(out, "data_dir = {}", q(&s.etcd.data_dir.to_string_lossy()));
    let _ = writeln!(out, "\n[api]");
    let _ = writeln!(out, "socket = {}", q(&s.api.socket.to_string_lossy()));
    let _ = writeln!(out, "socket_group = {}", q(&s.api.socket_group));
    let _ = writeln!(out, "allowed_users = {}", list(&s.api.allowed_users));
    if let Some(a) = s.api.http_addr {
        let _ = writeln!(out, "http_addr = {}", q(&a.to_string()));
    }
    let _ = writeln!(out, "\n[paths]");
    let _ = writeln!(out, "state_dir = {}", q(&s.state_dir.to_string_lossy()));
    let t = &s.timeouts;
    let _ = writeln!(out, "\n[timeouts]");
    let _ = writeln!(out, "probe_interval_ms = {}", t.probe_interval.as_millis());
    let _ = writeln!(out, "probe_timeout_ms = {}", t.probe_timeout.as_millis());
    let _ = writeln!(out, "start_timeout_ms = {}", t.start_timeout.as_millis());
    let _ = writeln!(out, "stop_grace_ms = {}", t.stop_grace.as_millis());
    let _ = writeln!(out, "restart_delay_ms = {}", t.restart_delay.as_millis());
    let fo = &s.failover;
    let _ = writeln!(out, "\n[failover]");
    let _ = writeln!(
        out,
        "archive_dir = {}",
        q(&fo.archive_dir.to_string_lossy())
    );
    let _ = writeln!(out, "archive_keep = {}", fo.archive_keep);
    let _ = writeln!(
        out,
        "reconcile_interval_ms = {}",
        fo.reconcile_interval.as_millis()
    );
    let _ = writeln!(
        out,
        "reconcile_pending_interval_ms = {}",
        fo.reconcile_pending_interval.as_millis()
    );
    let _ = writeln!(
        out,
        "force_election_timeout_ms = {}",
        fo.force_election_timeout_ms.unwrap_or(0)
    );
    for n in &s.nodes {
        let _ = writeln!(out, "\n[[nodes]]");
        let _ = writeln!(out, "name = {}", q(&n.name));
        let _ = writeln!(out, "peer_urls = {}", list(&n.peer_urls));
        let _ = writeln!(out, "client_urls = {}", list(&n.client_urls));
    }
    out
}

fn toml_quote(s: &str) -> String {
    // A JSON string literal is a valid TOML basic string.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

#[cfg(test)]
mod tests {
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
client_urls = ["https://[2001:db8::2]:2379", "http://b.example:2379"]
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
        assert!(s.etcd.client_tls.is_none());
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
        assert!(msg.contains("etcd"), "{msg}");
        assert!(msg.contains("force_new_cluster"), "{msg}");
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
        assert!(e.to_string().starts_with("/c.toml:2:"), "{e}");
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
    fn urls_accept_ipv4_ipv6_and_names() {
        assert!(check_url("http://127.0.0.1:2379").is_ok());
        assert!(check_url("https://[::1]:2379").is_ok());
        assert!(check_url("https://etcd-a.example:2379/").is_ok());
        assert!(check_url("https://::1:2379").is_err());
        assert!(check_url("tcp://127.0.0.1:2379").is_err());
        assert!(check_url("http://127.0.0.1").is_err());
    }

    #[test]
    fn rendered_standalone_config_round_trips() {
        let s = load(&[("/c.toml", GOOD)]).unwrap();
        let text = render_toml(&s);
        let back = load(&[("/c.toml", &text)]).unwrap();
        assert_eq!(back.nodes, s.nodes);
        assert_eq!(back.timeouts, s.timeouts);
        assert_eq!(back.api, s.api);
        assert_eq!(back.failover, s.failover);
    }

    #[test]
    fn failover_defaults() {
        let s = load(&[("/c.toml", GOOD)]).unwrap();
        let f = &s.failover;
        assert_eq!(f.archive_dir, PathBuf::from("/var/lib/etcd.archive"));
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

        let e = failover_error("[failover]\narchive_dir = \"/var/lib/etcd/archive\"\n");
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
}
