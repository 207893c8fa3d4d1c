//! Fragments: what one configuration file says. Every field is optional, and
//! every value keeps where it was written (file, line, dotted key), so that
//! a check long after parsing can still point at the line to fix.
//!
//! Each section is declared once, with [`section!`]: the same struct is
//! parsed from a file (serde), merged over the earlier files ([`Part`]) and
//! serialised back to TOML (the standalone configuration). Adding a key is
//! one line here, its check in `validate`, and its default (if it has one)
//! in `daemon/config/00-defaults.toml`.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{ConfigError, Origin};

/// A value with where it was written.
#[derive(Debug, Clone)]
pub(crate) struct Loc<T> {
    /// The value.
    pub(crate) value: T,
    /// Byte range in its file, from the parser.
    span: Range<usize>,
    /// File and line (set by [`Part::locate`]).
    pub(crate) origin: Origin,
    /// Dotted key path (`etcd.data_dir`, `nodes[1].peer_urls`).
    pub(crate) key: String,
    /// Whether it comes from the shipped defaults rather than from the
    /// operator: a few defaults adapt to other keys where a value the
    /// operator wrote is refused.
    pub(crate) from_defaults: bool,
}

impl<T> Loc<T> {
    /// A value written by the program (the standalone configuration).
    pub(crate) fn new(value: T) -> Self {
        Loc {
            value,
            span: 0..0,
            origin: Origin::unknown(),
            key: String::new(),
            from_defaults: false,
        }
    }

    /// The error for a value that parsed but makes no sense.
    pub(crate) fn invalid(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            origin: self.origin.clone(),
            key: self.key.clone(),
            message: message.into(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Loc<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = toml::Spanned::<T>::deserialize(d)?;
        let span = s.span();
        let mut l = Loc::new(s.into_inner());
        l.span = span;
        Ok(l)
    }
}

impl<T: Serialize> Serialize for Loc<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

/// The file a fragment was parsed from, to turn spans into lines.
pub(crate) struct FileCtx<'a> {
    pub(crate) file: Arc<PathBuf>,
    pub(crate) text: &'a str,
    /// The shipped defaults (built in, or the file of the vendor directory).
    pub(crate) defaults: bool,
}

impl FileCtx<'_> {
    fn origin(&self, span: &Range<usize>) -> Origin {
        Origin {
            file: self.file.clone(),
            line: line_at(self.text, span.start),
        }
    }
}

/// What every part of a fragment does: take a later file's part over it,
/// learn where its values were written, and tell whether it says anything
/// (an empty part is left out of serialised TOML).
pub(crate) trait Part {
    /// Merge `later` over `self`: each value `later` sets replaces ours.
    fn merge(&mut self, later: Self);
    /// Record file, line and dotted key of every value, under `key`.
    fn locate(&mut self, file: &FileCtx<'_>, key: &str);
    /// Whether nothing is set.
    fn is_unset(&self) -> bool;
}

/// What a located value holds: plain values hold nothing located; the node
/// list holds located values of its own.
pub(crate) trait Inner {
    /// Locate the values inside, under `key`.
    fn locate_inner(&mut self, _file: &FileCtx<'_>, _key: &str) {}
}

impl Inner for String {}
impl Inner for bool {}
impl Inner for u64 {}
impl Inner for u32 {}
impl Inner for PathBuf {}
impl Inner for Vec<String> {}

impl<T: Inner> Part for Loc<T> {
    fn merge(&mut self, later: Self) {
        *self = later;
    }

    fn locate(&mut self, file: &FileCtx<'_>, key: &str) {
        self.origin = file.origin(&self.span);
        self.key = key.to_string();
        self.from_defaults = file.defaults;
        self.value.locate_inner(file, key);
    }

    fn is_unset(&self) -> bool {
        false
    }
}

impl<T: Inner> Part for Option<Loc<T>> {
    fn merge(&mut self, later: Self) {
        if later.is_some() {
            *self = later;
        }
    }

    fn locate(&mut self, file: &FileCtx<'_>, key: &str) {
        if let Some(l) = self {
            l.locate(file, key);
        }
    }

    fn is_unset(&self) -> bool {
        self.is_none()
    }
}

fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

/// Declares a section once: the serde struct (unknown keys refused, unset
/// keys left out of serialised TOML) and its [`Part`] implementation.
macro_rules! section {
    ($(#[$meta:meta])* struct $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct $name {
            $(
                $(#[$fmeta])*
                #[serde(default, skip_serializing_if = "Part::is_unset")]
                pub(crate) $field: $ty,
            )*
        }

        impl Part for $name {
            fn merge(&mut self, later: Self) {
                $( self.$field.merge(later.$field); )*
            }

            fn locate(&mut self, file: &FileCtx<'_>, key: &str) {
                $( self.$field.locate(file, &join(key, stringify!($field))); )*
            }

            fn is_unset(&self) -> bool {
                true $( && self.$field.is_unset() )*
            }
        }
    };
}

section! {
    /// One file: the whole configuration, every key optional.
    struct Fragment {
        node_name: Option<Loc<String>>,
        topology: Option<Loc<String>>,
        autostart: Option<Loc<bool>>,
        etcd: EtcdFragment,
        tls: TlsFragment,
        api: ApiFragment,
        paths: PathsFragment,
        timeouts: TimeoutsFragment,
        failover: FailoverFragment,
        report: ReportFragment,
        defrag: DefragFragment,
        // Last: TOML writes arrays of tables after the plain tables.
        nodes: Option<Loc<Vec<NodeFragment>>>,
    }
}

/// One `[[nodes]]` entry. The list is replaced as a whole by a later file,
/// so an entry's keys are required (the parser names a missing one with
/// its line) and the entry is written by hand rather than with
/// [`section!`], whose keys are all optional.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NodeFragment {
    pub(crate) name: Loc<String>,
    pub(crate) peer_urls: Loc<Vec<String>>,
    pub(crate) client_urls: Loc<Vec<String>>,
}

impl NodeFragment {
    fn locate(&mut self, file: &FileCtx<'_>, key: &str) {
        self.name.locate(file, &join(key, "name"));
        self.peer_urls.locate(file, &join(key, "peer_urls"));
        self.client_urls.locate(file, &join(key, "client_urls"));
    }
}

impl Inner for Vec<NodeFragment> {
    fn locate_inner(&mut self, file: &FileCtx<'_>, key: &str) {
        for (i, n) in self.iter_mut().enumerate() {
            n.locate(file, &format!("{key}[{i}]"));
        }
    }
}

section! {
    /// `[etcd]`.
    struct EtcdFragment {
        binary: Option<Loc<PathBuf>>,
        data_dir: Option<Loc<PathBuf>>,
        user: Option<Loc<String>>,
        backend: Option<Loc<String>>,
        unit_name: Option<Loc<String>>,
        initial_cluster_token: Option<Loc<String>>,
        quota_backend_bytes: Option<Loc<u64>>,
        auto_compaction_mode: Option<Loc<String>>,
        auto_compaction_retention: Option<Loc<String>>,
        snapshot_count: Option<Loc<u64>>,
        heartbeat_interval_ms: Option<Loc<u64>>,
        election_timeout_ms: Option<Loc<u64>>,
    }
}

section! {
    /// `[tls]`.
    struct TlsFragment {
        client: TlsFilesFragment,
        peer: TlsFilesFragment,
    }
}

section! {
    /// `[tls.client]` and `[tls.peer]`.
    struct TlsFilesFragment {
        cert_file: Option<Loc<PathBuf>>,
        key_file: Option<Loc<PathBuf>>,
        trusted_ca_file: Option<Loc<PathBuf>>,
        client_cert_auth: Option<Loc<bool>>,
    }
}

section! {
    /// `[api]`.
    struct ApiFragment {
        socket: Option<Loc<PathBuf>>,
        socket_group: Option<Loc<String>>,
        allowed_users: Option<Loc<Vec<String>>>,
        http_addr: Option<Loc<String>>,
    }
}

section! {
    /// `[paths]`.
    struct PathsFragment {
        state_dir: Option<Loc<PathBuf>>,
        state_on_data_mount: Option<Loc<String>>,
    }
}

section! {
    /// `[timeouts]`.
    struct TimeoutsFragment {
        probe_interval_ms: Option<Loc<u64>>,
        probe_timeout_ms: Option<Loc<u64>>,
        start_timeout_ms: Option<Loc<u64>>,
        stop_grace_ms: Option<Loc<u64>>,
        hung_after_ms: Option<Loc<u64>>,
        restart_delay_ms: Option<Loc<u64>>,
    }
}

section! {
    /// `[failover]`.
    struct FailoverFragment {
        archive_dir: Option<Loc<PathBuf>>,
        archive_keep: Option<Loc<u32>>,
        reconcile_interval_ms: Option<Loc<u64>>,
        reconcile_pending_interval_ms: Option<Loc<u64>>,
        force_election_timeout_ms: Option<Loc<u64>>,
    }
}

section! {
    /// `[report]`.
    struct ReportFragment {
        path: Option<Loc<PathBuf>>,
        interval_ms: Option<Loc<u64>>,
        crm_mon_timeout_ms: Option<Loc<u64>>,
        cib_file: Option<Loc<PathBuf>>,
        corosync_conf: Option<Loc<PathBuf>>,
        etcd_agents: Option<Loc<Vec<String>>>,
        kubelet_agents: Option<Loc<Vec<String>>>,
        fence_agents: Option<Loc<Vec<String>>>,
        expected_nodes: Option<Loc<u64>>,
        profile: Option<Loc<String>>,
    }
}

section! {
    /// `[defrag]`.
    struct DefragFragment {
        enabled: Option<Loc<bool>>,
        fragmentation_percent: Option<Loc<u64>>,
        min_db_size_bytes: Option<Loc<u64>>,
        check_interval_ms: Option<Loc<u64>>,
        timeout_ms: Option<Loc<u64>>,
    }
}

/// Parse one file into a located fragment.
pub(crate) fn parse(file: &FileCtx<'_>) -> Result<Fragment, ConfigError> {
    let path: &Path = &file.file;
    let line_of =
        |span: Option<Range<usize>>| span.map(|s| line_at(file.text, s.start)).unwrap_or(1);
    let de = toml::Deserializer::parse(file.text).map_err(|e| {
        let line = line_of(e.span());
        ConfigError::Parse {
            file: path.to_path_buf(),
            line,
            key: key_on_line(file.text, line).unwrap_or_else(|| "-".into()),
            message: e.message().trim().to_string(),
        }
    })?;
    let mut fragment: Fragment = serde_path_to_error::deserialize(de).map_err(|e| {
        // A located value shows up in the path as the spanned wrapper's
        // private field; the operator wants the key as written.
        let key = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "")
            .replace("$__serde_spanned_private_value", "");
        let inner = e.into_inner();
        let message = inner.message().trim().to_string();
        ConfigError::Parse {
            file: path.to_path_buf(),
            line: line_of(inner.span()),
            key: with_unknown_field(key, &message),
            message,
        }
    })?;
    fragment.locate(file, "");
    Ok(fragment)
}

/// Serialise a fragment as TOML (unset keys and empty sections left out).
pub(crate) fn to_toml(fragment: &Fragment) -> Result<String, toml::ser::Error> {
    toml::to_string(fragment)
}

/// The key a line of TOML that does not parse was writing: the text before
/// its `=` (or its first word, where the `=` is missing) under the table
/// the lines above opened, the key of a multi-line array the line is
/// inside, or the table of a header line. The parser's error gives the
/// line only.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let mut table = String::new();
    let mut entries: std::collections::BTreeMap<String, usize> = Default::default();
    // The key of an array still open above the line, and its depth.
    let mut open: Option<(String, i64)> = None;
    let depth = |v: &str| v.matches('[').count() as i64 - v.matches(']').count() as i64;
    for l in text.lines().take(line.checked_sub(1)?) {
        let t = l.trim();
        if let Some((key, d)) = open.take() {
            let d = d + depth(t);
            open = (d > 0).then_some((key, d));
        } else if let Some(name) = t.strip_prefix("[[") {
            let name = name.split("]]").next().unwrap_or_default().trim();
            let n = entries.entry(name.to_string()).or_default();
            table = format!("{name}[{n}]");
            *n += 1;
        } else if let Some(name) = t.strip_prefix('[') {
            table = name
                .split(']')
                .next()
                .unwrap_or_default()
                .trim()
                .to_string();
        } else if let Some((k, v)) = t.split_once('=') {
            let d = depth(v);
            open = (d > 0).then(|| (k.trim().to_string(), d));
        }
    }
    let t = text.lines().nth(line - 1)?.trim();
    let written = match (t.split_once('='), &open) {
        (Some((k, _)), _) => k.trim(),
        (None, Some((k, _))) => k.as_str(),
        (None, None) if t.starts_with('[') => {
            let header = t
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or_default();
            return Some(header.trim().to_string()).filter(|h| !h.is_empty());
        }
        (None, None) => t.split_whitespace().next().unwrap_or_default(),
    };
    match (
        written.is_empty() || written.starts_with('#'),
        table.is_empty(),
    ) {
        (true, true) => None,
        (true, false) => Some(table),
        (false, _) => Some(join(&table, written)),
    }
}

/// serde names an unknown key by the table holding it and the key in its
/// message; the operator wants the key's whole path.
fn with_unknown_field(path: String, message: &str) -> String {
    let field = message
        .strip_prefix("unknown field `")
        .and_then(|m| m.split('`').next());
    match field {
        Some(f) if path == "." || path.is_empty() => f.to_string(),
        Some(f) if !path.ends_with(f) => join(&path, f),
        _ => path,
    }
}

/// 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset.min(text.len()))
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// A count or duration that must not be 0 (validation and the etcd rules
/// both check it).
pub(super) fn positive(l: Loc<u64>) -> Result<u64, ConfigError> {
    if l.value == 0 {
        Err(l.invalid("must be greater than 0"))
    } else {
        Ok(l.value)
    }
}
