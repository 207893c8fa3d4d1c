//! Validation: the merged inputs become typed [`Settings`], one function per
//! section. Defaults are not written here: the built-in layer
//! (`daemon/config/00-defaults.toml`) sets every key that has one, so a key
//! is either set by some layer or required. etcd's own rules live in
//! [`super::etcd_rules`].

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::etcd_rules;
use super::fragments::{
    ApiFragment, DefragFragment, EtcdFragment, FailoverFragment, Fragment, Loc, NodeFragment,
    ReportFragment, TimeoutsFragment, TlsFilesFragment, positive,
};
use super::inputs::Inputs;
use super::settings::{
    ApiSettings, BackendKind, CompactionMode, DefragSettings, EtcdSettings, EtcdTuning,
    FailoverSettings, MAX_RECONCILE_INTERVAL_MS, MAX_REPORT_INTERVAL_MS, MIN_PENDING_INTERVAL_MS,
    MIN_REPORT_INTERVAL_MS, NodeSettings, REPORT_CRM_MON_TIMEOUT_RANGE_MS, ReportSettings, RunAs,
    Settings, Timeouts, TlsFiles, Topology,
};
use super::settings::{DEFRAG_CHECK_INTERVAL_RANGE_MS, DEFRAG_TIMEOUT_RANGE_MS};
use super::{ConfigError, Layout};

/// Largest `report.expected_nodes`: far above any Corosync cluster, a
/// bound against a typo rather than a limit of the report.
const MAX_EXPECTED_NODES: u64 = 256;

/// The files read, for errors about a key set in none of them.
struct Files(String);

impl Files {
    /// The value of a key every valid configuration has: set by the
    /// built-in defaults or required from the operator.
    fn need<T>(&self, v: Option<Loc<T>>, key: &str) -> Result<Loc<T>, ConfigError> {
        v.ok_or_else(|| ConfigError::Missing {
            key: key.into(),
            files: self.0.clone(),
        })
    }
}

/// Check the merged inputs and build the settings.
pub(crate) fn settings(inputs: Inputs, layout: Layout) -> Result<Settings, ConfigError> {
    let files = Files(
        inputs
            .files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    );
    let Fragment {
        node_name,
        topology,
        autostart,
        etcd,
        tls,
        api,
        paths,
        timeouts,
        failover,
        report,
        defrag,
        nodes,
    } = inputs.merged;
    let node_name = files.need(node_name, "node_name")?;
    let topology = self::topology(files.need(topology, "topology")?)?;
    let nodes = self::nodes(files.need(nodes, "nodes")?, topology)?;
    let node_name = self::node_name(node_name, &nodes)?;
    let client_tls = tls_files(tls.client, "client")?;
    let peer_tls = tls_files(tls.peer, "peer")?;
    etcd_rules::urls_have_tls(&nodes, client_tls.is_some(), peer_tls.is_some())?;
    let etcd = self::etcd(etcd, client_tls, peer_tls, &files)?;
    let failover = self::failover(failover, &etcd.data_dir, &etcd.tuning, &files)?;
    let state_dir = files.need(paths.state_dir, "paths.state_dir")?;
    absolute(state_dir.clone())?;
    state_dir_apart(
        &state_dir,
        &etcd.data_dir,
        paths.state_on_data_mount,
        &layout.main,
    )?;
    let node_count = nodes.value.len();
    Ok(Settings {
        node_name,
        topology,
        autostart: files.need(autostart, "autostart")?.value,
        nodes: nodes.value.into_iter().map(node_settings).collect(),
        etcd,
        api: self::api(api, &files)?,
        state_dir: state_dir.value,
        timeouts: self::timeouts(timeouts, &files)?,
        failover,
        report: self::report(report, node_count, &files)?,
        defrag: self::defrag(defrag, &files)?,
        sources: inputs.files,
        layout,
    })
}

fn topology(l: Loc<String>) -> Result<Topology, ConfigError> {
    match l.value.as_str() {
        "two-node" => Ok(Topology::TwoNode),
        "ha" => Ok(Topology::Ha),
        other => Err(l.invalid(format!(
            "unknown topology {other:?}, expected \"two-node\" or \"ha\""
        ))),
    }
}

fn nodes(
    l: Loc<Vec<NodeFragment>>,
    topology: Topology,
) -> Result<Loc<Vec<NodeFragment>>, ConfigError> {
    let mut names = BTreeSet::new();
    for n in &l.value {
        if n.name.value.is_empty() || !valid_member_name(&n.name.value) {
            return Err(n.name.invalid(format!(
                "invalid node name {:?}: use letters, digits, '-', '_' and '.'",
                n.name.value
            )));
        }
        if !names.insert(n.name.value.as_str()) {
            return Err(n.name.invalid(format!("duplicate node {:?}", n.name.value)));
        }
        for urls in [&n.peer_urls, &n.client_urls] {
            if urls.value.is_empty() {
                return Err(urls.invalid("at least one URL is required"));
            }
        }
        etcd_rules::node_urls(n)?;
    }
    match topology {
        Topology::TwoNode if l.value.len() != 2 => Err(l.invalid(format!(
            "topology \"two-node\" needs exactly 2 nodes, {} given",
            l.value.len()
        ))),
        Topology::Ha if l.value.is_empty() => Err(l.invalid("at least one node is required")),
        _ => Ok(l),
    }
}

fn node_name(l: Loc<String>, nodes: &Loc<Vec<NodeFragment>>) -> Result<String, ConfigError> {
    if nodes.value.iter().any(|n| n.name.value == l.value) {
        return Ok(l.value);
    }
    let names: BTreeSet<&str> = nodes.value.iter().map(|n| n.name.value.as_str()).collect();
    Err(l.invalid(format!(
        "node {:?} is not among the configured nodes ({})",
        l.value,
        names.into_iter().collect::<Vec<_>>().join(", ")
    )))
}

fn node_settings(n: NodeFragment) -> NodeSettings {
    NodeSettings {
        name: n.name.value,
        peer_urls: n.peer_urls.value,
        client_urls: n.client_urls.value,
    }
}

fn valid_member_name(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn etcd(
    e: EtcdFragment,
    client_tls: Option<TlsFiles>,
    peer_tls: Option<TlsFiles>,
    files: &Files,
) -> Result<EtcdSettings, ConfigError> {
    let backend = files.need(e.backend, "etcd.backend")?;
    let backend = match backend.value.as_str() {
        "process" => BackendKind::Process,
        "systemd" => BackendKind::Systemd,
        other => {
            return Err(backend.invalid(format!(
                "unknown backend {other:?}, expected \"process\" or \"systemd\""
            )));
        }
    };
    let unit_name = files.need(e.unit_name, "etcd.unit_name")?;
    if !unit_name.value.ends_with(".service") || unit_name.value.contains('/') {
        return Err(unit_name.invalid("a unit name ending in \".service\" is required"));
    }
    let (heartbeat_interval_ms, election_timeout_ms) =
        etcd_rules::timing(e.heartbeat_interval_ms, e.election_timeout_ms)?;
    let tuning = EtcdTuning {
        quota_backend_bytes: e.quota_backend_bytes.map(etcd_rules::quota).transpose()?,
        auto_compaction: compaction(e.auto_compaction_mode, e.auto_compaction_retention)?,
        snapshot_count: e.snapshot_count.map(positive).transpose()?,
        heartbeat_interval_ms,
        election_timeout_ms,
    };
    Ok(EtcdSettings {
        binary: absolute(files.need(e.binary, "etcd.binary")?)?,
        data_dir: absolute(files.need(e.data_dir, "etcd.data_dir")?)?,
        user: run_as(files.need(e.user, "etcd.user")?)?,
        backend,
        unit_name: unit_name.value,
        initial_cluster_token: files
            .need(e.initial_cluster_token, "etcd.initial_cluster_token")?
            .value,
        tuning,
        client_tls,
        peer_tls,
    })
}

/// `etcd.user`: an account that exists on this host.
fn run_as(l: Loc<String>) -> Result<RunAs, ConfigError> {
    if l.value.is_empty() {
        return Err(l.invalid("must name a user (\"root\" runs etcd as the daemon's user)"));
    }
    match nix::unistd::User::from_name(&l.value) {
        Ok(Some(u)) => Ok(RunAs {
            name: l.value.clone(),
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
        }),
        Ok(None) => Err(l.invalid(format!(
            "no user {:?} on this host (Debian's etcd-server package creates the user \"etcd\"; \"root\" runs etcd as root)",
            l.value
        ))),
        Err(e) => Err(l.invalid(format!("cannot look up user {:?}: {e}", l.value))),
    }
}

fn compaction(
    mode: Option<Loc<String>>,
    retention: Option<Loc<String>>,
) -> Result<Option<(CompactionMode, String)>, ConfigError> {
    let (m, r) = match (mode, retention) {
        (None, None) => return Ok(None),
        (None, Some(r)) => return Err(r.invalid("needs etcd.auto_compaction_mode as well")),
        (Some(m), None) => return Err(m.invalid("needs etcd.auto_compaction_retention as well")),
        (Some(m), Some(r)) => (m, r),
    };
    let mode = match m.value.as_str() {
        "periodic" => CompactionMode::Periodic,
        "revision" => CompactionMode::Revision,
        other => {
            return Err(m.invalid(format!(
                "unknown mode {other:?}, expected \"periodic\" or \"revision\""
            )));
        }
    };
    check_retention(mode, &r.value).map_err(|msg| r.invalid(msg))?;
    Ok(Some((mode, r.value)))
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

/// One side's TLS files: none of them, or all three. `client_cert_auth`
/// alone counts only when the operator wrote it (the defaults set it).
fn tls_files(t: TlsFilesFragment, side: &str) -> Result<Option<TlsFiles>, ConfigError> {
    // The first key the operator wrote: an error points at it.
    let auth_written = t.client_cert_auth.as_ref().filter(|a| !a.from_defaults);
    let written = [&t.cert_file, &t.key_file, &t.trusted_ca_file]
        .into_iter()
        .flatten()
        .map(|l| (&l.origin, &l.key))
        .chain(auth_written.map(|l| (&l.origin, &l.key)))
        .next()
        .map(|(origin, key)| (origin.clone(), key.clone()));
    let Some((origin, key)) = written else {
        return Ok(None);
    };
    let need = |v: Option<Loc<PathBuf>>, name: &str| {
        v.map(|l| l.value).ok_or_else(|| ConfigError::Invalid {
            origin: origin.clone(),
            key: key.clone(),
            message: format!(
                "needs tls.{side}.{name} as well: etcd takes the certificate and its key as a pair, and the daemon verifies etcd with the CA bundle"
            ),
        })
    };
    Ok(Some(TlsFiles {
        cert_file: need(t.cert_file, "cert_file")?,
        key_file: need(t.key_file, "key_file")?,
        trusted_ca_file: need(t.trusted_ca_file, "trusted_ca_file")?,
        client_cert_auth: t.client_cert_auth.is_none_or(|a| a.value),
    }))
}

fn api(a: ApiFragment, files: &Files) -> Result<ApiSettings, ConfigError> {
    let http_addr = match a.http_addr {
        None => None,
        Some(l) => {
            let addr: SocketAddr = l.value.parse().map_err(|_| {
                l.invalid(format!(
                    "{:?} is not an address like 127.0.0.1:9481",
                    l.value
                ))
            })?;
            // The TCP listener carries no authentication: it must never
            // be reachable from another host.
            if !addr.ip().is_loopback() {
                return Err(l.invalid(format!(
                    "{addr} is not a loopback address (127.0.0.0/8 or ::1)"
                )));
            }
            Some(addr)
        }
    };
    let allowed_users = files.need(a.allowed_users, "api.allowed_users")?;
    if allowed_users.value.is_empty() {
        return Err(allowed_users.invalid("the list must not be empty"));
    }
    Ok(ApiSettings {
        socket: absolute(files.need(a.socket, "api.socket")?)?,
        socket_group: files.need(a.socket_group, "api.socket_group")?.value,
        allowed_users: allowed_users.value,
        http_addr,
    })
}

fn timeouts(t: TimeoutsFragment, files: &Files) -> Result<Timeouts, ConfigError> {
    let ms = |v: Option<Loc<u64>>, key: &str| -> Result<Duration, ConfigError> {
        positive(files.need(v, key)?).map(Duration::from_millis)
    };
    Ok(Timeouts {
        probe_interval: ms(t.probe_interval_ms, "timeouts.probe_interval_ms")?,
        probe_timeout: ms(t.probe_timeout_ms, "timeouts.probe_timeout_ms")?,
        start_timeout: ms(t.start_timeout_ms, "timeouts.start_timeout_ms")?,
        stop_grace: ms(t.stop_grace_ms, "timeouts.stop_grace_ms")?,
        hung_after: ms(t.hung_after_ms, "timeouts.hung_after_ms")?,
        restart_delay: ms(t.restart_delay_ms, "timeouts.restart_delay_ms")?,
    })
}

fn failover(
    fo: FailoverFragment,
    data_dir: &Path,
    tuning: &EtcdTuning,
    files: &Files,
) -> Result<FailoverSettings, ConfigError> {
    let archive_dir = match fo.archive_dir {
        None => {
            let dir = default_archive_dir(data_dir);
            // The default may be refused too: the data directory's mount
            // decides where a rename can go.
            same_mount(&dir, data_dir).map_err(|m| ConfigError::Invalid {
                origin: super::Origin::unknown(),
                key: "failover.archive_dir".into(),
                message: format!("the default {}: {m}", dir.display()),
            })?;
            dir
        }
        Some(l) => {
            check_archive_dir(&l.value, data_dir).map_err(|m| l.invalid(m))?;
            l.value
        }
    };
    let stable = files.need(fo.reconcile_interval_ms, "failover.reconcile_interval_ms")?;
    let stable = ranged_ms(&stable, MIN_PENDING_INTERVAL_MS..=MAX_RECONCILE_INTERVAL_MS)?;
    let pending = files.need(
        fo.reconcile_pending_interval_ms,
        "failover.reconcile_pending_interval_ms",
    )?;
    let force = files.need(
        fo.force_election_timeout_ms,
        "failover.force_election_timeout_ms",
    )?;
    Ok(FailoverSettings {
        archive_dir,
        archive_keep: files.need(fo.archive_keep, "failover.archive_keep")?.value,
        reconcile_interval: stable,
        reconcile_pending_interval: pending_interval(pending, stable)?,
        force_election_timeout_ms: etcd_rules::forced_election(force, tuning)?,
    })
}

/// The pending interval: never shorter than what crm_mon can answer, never
/// longer than the stable one. The default follows a shorter stable
/// interval; a value the operator wrote is checked.
fn pending_interval(l: Loc<u64>, stable: Duration) -> Result<Duration, ConfigError> {
    if l.value < MIN_PENDING_INTERVAL_MS {
        return Err(l.invalid(format!(
            "{} ms is too short: at least {MIN_PENDING_INTERVAL_MS} ms (each pass asks crm_mon and etcd)",
            l.value
        )));
    }
    let pending = Duration::from_millis(l.value);
    if pending <= stable {
        return Ok(pending);
    }
    if l.from_defaults {
        return Ok(stable);
    }
    Err(l.invalid(format!(
        "the pending interval ({} ms) must not be longer than failover.reconcile_interval_ms ({} ms): the loop comes back sooner while a step is pending, never later",
        pending.as_millis(),
        stable.as_millis()
    )))
}

/// `<data_dir>.archive`, beside the data directory.
pub(crate) fn default_archive_dir(data_dir: &Path) -> PathBuf {
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
    same_mount(archive, data_dir)
}

/// Archiving renames the member directory from `data_dir` into `archive`,
/// which only works within one mount: not across filesystems, and not
/// across two bind mounts of the same filesystem either (systemd's
/// `ReadWritePaths=` makes each listed path a mount of its own, so the
/// device numbers alone agree where the rename fails). The nearest existing
/// ancestor of each path stands for it: a directory created later lands on
/// its ancestor's mount.
fn same_mount(archive: &Path, data_dir: &Path) -> Result<(), String> {
    let (Some(a_at), Some(d_at)) = (nearest_existing(archive), nearest_existing(data_dir)) else {
        return Ok(());
    };
    let (Some(a), Some(d)) = (mount_of(&a_at), mount_of(&d_at)) else {
        return Ok(());
    };
    if a == d {
        return Ok(());
    }
    let what = if a.dev == d.dev {
        "another mount of the same filesystem (a bind mount, such as each ReadWritePaths= entry of a systemd unit)"
    } else {
        "another filesystem"
    };
    Err(format!(
        "{} ({} is on the mount at {}) is on {what} than the data directory {} (mount at {}): archiving moves the member directory with a rename, which cannot cross filesystems or mounts; choose a directory on the data directory's mount, e.g. {}",
        archive.display(),
        a_at.display(),
        a.point.display(),
        data_dir.display(),
        d.point.display(),
        default_archive_dir(data_dir).display(),
    ))
}

/// The state file is the witness that data existed (a blank data directory
/// beside a state file is data lost; beside none, a new node). On one
/// filesystem with the data, a volume that fails to mount blanks both, and
/// a new cluster could be bootstrapped over the history. Refused unless
/// that filesystem also holds the configuration file `config` (without it
/// nothing runs at all: the root filesystem of a one-disk node) or
/// `paths.state_on_data_mount` says why the layout is meant.
fn state_dir_apart(
    state_dir: &Loc<PathBuf>,
    data_dir: &Path,
    reason: Option<Loc<String>>,
    config: &Path,
) -> Result<(), ConfigError> {
    if let Some(r) = reason {
        if r.value.trim().is_empty() {
            return Err(r.invalid(
                "is empty: say why the state directory may share the data directory's filesystem",
            ));
        }
        return Ok(());
    }
    match state_shares_data_filesystem(&state_dir.value, data_dir, config) {
        Some(why) => Err(state_dir.invalid(why)),
        None => Ok(()),
    }
}

/// Why `state` may not be where it is, if it may not.
fn state_shares_data_filesystem(state: &Path, data: &Path, config: &Path) -> Option<String> {
    let (s_at, d_at) = (nearest_existing(state)?, nearest_existing(data)?);
    let (s, d) = (mount_of(&s_at)?, mount_of(&d_at)?);
    if s.dev != d.dev {
        return None;
    }
    // A configuration given as text under a name that is no file's path
    // (built in memory, validated in a test) is on no filesystem to compare.
    if !config.is_absolute() && !config.is_file() {
        return None;
    }
    let c = nearest_existing(&std::path::absolute(config).ok()?).and_then(|c| mount_of(&c));
    if c.as_ref().is_some_and(|c| c.dev == s.dev) {
        return None;
    }
    let config_on = c.map_or_else(
        || "no filesystem found".to_owned(),
        |c| format!("on the filesystem mounted at {}", c.point.display()),
    );
    Some(format!(
        "the state directory {} and the data directory {} are on one filesystem (device {}, mounted at {}), which does not hold the configuration file {} ({config_on}): the state file is the witness that data existed, and if that filesystem fails to mount both look blank, so a new cluster could be bootstrapped over the old one's history; put paths.state_dir on the filesystem of the configuration file (the default /var/lib/etcd-warden on a root filesystem), or, if this layout is meant, say why with paths.state_on_data_mount = \"<reason>\"",
        state.display(),
        data.display(),
        s.dev,
        s.point.display(),
        config.display(),
    ))
}

/// The path itself or its nearest existing ancestor, canonical.
fn nearest_existing(p: &Path) -> Option<PathBuf> {
    p.ancestors().find_map(|a| std::fs::canonicalize(a).ok())
}

/// One mount, from /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountEntry {
    id: u64,
    dev: String,
    point: PathBuf,
}

/// The mount holding the canonical path `p`: the last-listed mount whose
/// mount point is the longest prefix of `p` (a later mount on the same
/// point hides the earlier one).
fn mount_of(p: &Path) -> Option<MountEntry> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<MountEntry> = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(id), Some(dev), Some(point)) = (f.first(), f.get(2), f.get(4)) else {
            continue;
        };
        let point = PathBuf::from(unescape_mountinfo(point));
        if !p.starts_with(&point) {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|b| point.components().count() >= b.point.components().count())
        {
            best = Some(MountEntry {
                id: id.parse().ok()?,
                dev: (*dev).to_string(),
                point,
            });
        }
    }
    best
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && let Some(oct) = s.get(i + 1..i + 4)
            && let Ok(v) = u8::from_str_radix(oct, 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn report(
    r: ReportFragment,
    node_count: usize,
    files: &Files,
) -> Result<ReportSettings, ConfigError> {
    let path = match r.path {
        None => None,
        Some(l) if l.value.is_absolute() && l.value.file_name().is_none() => {
            return Err(l.invalid("must name a file, not a directory"));
        }
        Some(l) => Some(absolute(l)?),
    };
    let interval = files.need(r.interval_ms, "report.interval_ms")?;
    let crm_mon_timeout = files.need(r.crm_mon_timeout_ms, "report.crm_mon_timeout_ms")?;
    let expected_nodes = match r.expected_nodes {
        None => node_count,
        Some(l) if (1..=MAX_EXPECTED_NODES).contains(&l.value) => l.value as usize,
        Some(l) => {
            return Err(l.invalid(format!(
                "{} is out of range: use 1 to {MAX_EXPECTED_NODES}",
                l.value
            )));
        }
    };
    Ok(ReportSettings {
        path,
        interval: ranged_ms(&interval, MIN_REPORT_INTERVAL_MS..=MAX_REPORT_INTERVAL_MS)?,
        crm_mon_timeout: ranged_ms(&crm_mon_timeout, REPORT_CRM_MON_TIMEOUT_RANGE_MS)?,
        cib_file: absolute(files.need(r.cib_file, "report.cib_file")?)?,
        corosync_conf: absolute(files.need(r.corosync_conf, "report.corosync_conf")?)?,
        etcd_agents: agents(files.need(r.etcd_agents, "report.etcd_agents")?)?,
        kubelet_agents: agents(files.need(r.kubelet_agents, "report.kubelet_agents")?)?,
        fence_agents: agents(files.need(r.fence_agents, "report.fence_agents")?)?,
        expected_nodes,
        profile: profile(files.need(r.profile, "report.profile")?)?,
    })
}

/// `report.profile`: `generic` (any Pacemaker cluster) or `openshift`.
fn profile(l: Loc<String>) -> Result<crm_xml::report::Profile, ConfigError> {
    use crm_xml::report::Profile;
    match l.value.as_str() {
        "generic" => Ok(Profile::Generic),
        "openshift" => Ok(Profile::OpenShift),
        other => Err(l.invalid(format!(
            "unknown profile {other:?}, expected \"generic\" or \"openshift\""
        ))),
    }
}

fn agents(l: Loc<Vec<String>>) -> Result<Vec<String>, ConfigError> {
    if l.value.is_empty() {
        return Err(l.invalid("the list must not be empty"));
    }
    match l
        .value
        .iter()
        .find(|a| a.trim().is_empty() || a.trim() != *a)
    {
        Some(bad) => Err(l.invalid(format!(
            "{bad:?} is not a resource agent like \"ocf:etcd-warden:etcd\""
        ))),
        None => Ok(l.value),
    }
}

fn absolute(l: Loc<PathBuf>) -> Result<PathBuf, ConfigError> {
    if l.value.is_absolute() {
        Ok(l.value)
    } else {
        Err(l.invalid("must be an absolute path"))
    }
}

/// `[defrag]`: the threshold and how often and how long the policy runs.
fn defrag(d: DefragFragment, files: &Files) -> Result<DefragSettings, ConfigError> {
    let percent = files.need(d.fragmentation_percent, "defrag.fragmentation_percent")?;
    if !(1..=99).contains(&percent.value) {
        return Err(percent.invalid(format!(
            "{} is out of range: use 1 to 99 (percent of the database file that is free space)",
            percent.value
        )));
    }
    let interval = files.need(d.check_interval_ms, "defrag.check_interval_ms")?;
    let timeout = files.need(d.timeout_ms, "defrag.timeout_ms")?;
    Ok(DefragSettings {
        enabled: files.need(d.enabled, "defrag.enabled")?.value,
        fragmentation_percent: percent.value,
        min_db_size_bytes: files
            .need(d.min_db_size_bytes, "defrag.min_db_size_bytes")?
            .value,
        check_interval: ranged_ms(&interval, DEFRAG_CHECK_INTERVAL_RANGE_MS)?,
        timeout: ranged_ms(&timeout, DEFRAG_TIMEOUT_RANGE_MS)?,
    })
}

fn ranged_ms(l: &Loc<u64>, range: RangeInclusive<u64>) -> Result<Duration, ConfigError> {
    if range.contains(&l.value) {
        Ok(Duration::from_millis(l.value))
    } else {
        Err(l.invalid(format!(
            "{} is out of range: use {} to {} ms",
            l.value,
            range.start(),
            range.end()
        )))
    }
}

#[cfg(test)]
mod mount_tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mountinfo("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
        assert_eq!(unescape_mountinfo("/odd\\"), "/odd\\");
    }

    #[test]
    fn paths_find_their_mount() {
        // /proc is a mount of its own; / holds it.
        let proc_ = mount_of(Path::new("/proc/self")).unwrap();
        assert_eq!(proc_.point, PathBuf::from("/proc"));
        let root = mount_of(Path::new("/")).unwrap();
        assert_ne!(proc_.id, root.id);
        let t = tempfile::tempdir().unwrap();
        same_mount(&t.path().join("a.archive"), &t.path().join("a")).unwrap();
        let e = same_mount(Path::new("/proc/x"), &t.path().join("a")).unwrap_err();
        assert!(e.contains("cannot cross filesystems or mounts"), "{e}");
    }
}
