//! What differs between the settings a daemon runs with and the ones its
//! files say now, key by key, and when each difference can take effect on a
//! running node (`etcd-warden reload`, `systemctl reload etcd-warden`).

use super::Settings;

/// When a changed key takes effect on a running node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Takes {
    /// Applied by the reload itself.
    Now,
    /// At the daemon's next start; etcd keeps running across
    /// `systemctl restart etcd-warden`.
    DaemonRestart,
    /// When the daemon next starts etcd: a daemon that finds etcd's
    /// configuration changed restarts etcd on this node.
    EtcdRestart,
    /// The node's identity in the cluster or the place of its data: not a
    /// setting to change on a running member.
    Identity,
}

/// One changed key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// The key as the configuration files spell it.
    pub(crate) key: &'static str,
    /// When it takes effect.
    pub(crate) takes: Takes,
}

/// The keys that differ between `running` and `new`, in file order.
pub(crate) fn between(running: &Settings, new: &Settings) -> Vec<Change> {
    [
        identity(running, new),
        etcd(running, new),
        daemon(running, new),
        live(running, new),
    ]
    .into_iter()
    .flatten()
    .filter_map(|(key, takes, differs)| differs.then_some(Change { key, takes }))
    .collect()
}

/// A key, when it takes effect, and whether it differs.
type Row = (&'static str, Takes, bool);

fn identity(r: &Settings, n: &Settings) -> Vec<Row> {
    use Takes::Identity as I;
    vec![
        ("node_name", I, r.node_name != n.node_name),
        ("topology", I, r.topology != n.topology),
        ("nodes", I, r.nodes != n.nodes),
        ("etcd.data_dir", I, r.etcd.data_dir != n.etcd.data_dir),
        (
            "etcd.initial_cluster_token",
            I,
            r.etcd.initial_cluster_token != n.etcd.initial_cluster_token,
        ),
        ("paths.state_dir", I, r.state_dir != n.state_dir),
        (
            "failover.archive_dir",
            I,
            r.failover.archive_dir != n.failover.archive_dir,
        ),
    ]
}

fn etcd(r: &Settings, n: &Settings) -> Vec<Row> {
    use Takes::EtcdRestart as E;
    let (a, b) = (&r.etcd, &n.etcd);
    let (ta, tb) = (&a.tuning, &b.tuning);
    vec![
        ("etcd.binary", E, a.binary != b.binary),
        ("etcd.user", E, a.user != b.user),
        ("etcd.backend", E, a.backend != b.backend),
        ("etcd.unit_name", E, a.unit_name != b.unit_name),
        (
            "etcd.quota_backend_bytes",
            E,
            ta.quota_backend_bytes != tb.quota_backend_bytes,
        ),
        (
            "etcd.auto_compaction_mode/retention",
            E,
            ta.auto_compaction != tb.auto_compaction,
        ),
        (
            "etcd.snapshot_count",
            E,
            ta.snapshot_count != tb.snapshot_count,
        ),
        (
            "etcd.heartbeat_interval_ms",
            E,
            ta.heartbeat_interval_ms != tb.heartbeat_interval_ms,
        ),
        (
            "etcd.election_timeout_ms",
            E,
            ta.election_timeout_ms != tb.election_timeout_ms,
        ),
        ("tls.client", E, a.client_tls != b.client_tls),
        ("tls.peer", E, a.peer_tls != b.peer_tls),
    ]
}

fn daemon(r: &Settings, n: &Settings) -> Vec<Row> {
    use Takes::DaemonRestart as D;
    let (t, u) = (&r.timeouts, &n.timeouts);
    let (f, g) = (&r.failover, &n.failover);
    vec![
        ("autostart", D, r.autostart != n.autostart),
        ("api.socket", D, r.api.socket != n.api.socket),
        (
            "api.socket_group",
            D,
            r.api.socket_group != n.api.socket_group,
        ),
        (
            "api.allowed_users",
            D,
            r.api.allowed_users != n.api.allowed_users,
        ),
        ("api.http_addr", D, r.api.http_addr != n.api.http_addr),
        (
            "timeouts.probe_interval_ms",
            D,
            t.probe_interval != u.probe_interval,
        ),
        (
            "timeouts.probe_timeout_ms",
            D,
            t.probe_timeout != u.probe_timeout,
        ),
        (
            "timeouts.start_timeout_ms",
            D,
            t.start_timeout != u.start_timeout,
        ),
        ("timeouts.stop_grace_ms", D, t.stop_grace != u.stop_grace),
        ("timeouts.hung_after_ms", D, t.hung_after != u.hung_after),
        (
            "timeouts.restart_delay_ms",
            D,
            t.restart_delay != u.restart_delay,
        ),
        (
            "failover.reconcile_interval_ms",
            D,
            f.reconcile_interval != g.reconcile_interval,
        ),
        (
            "failover.reconcile_pending_interval_ms",
            D,
            f.reconcile_pending_interval != g.reconcile_pending_interval,
        ),
        (
            "failover.force_election_timeout_ms",
            D,
            f.force_election_timeout_ms != g.force_election_timeout_ms,
        ),
        ("report", D, r.report != n.report),
    ]
}

fn live(r: &Settings, n: &Settings) -> Vec<Row> {
    use Takes::Now as N;
    let (d, e) = (&r.defrag, &n.defrag);
    vec![
        (
            "failover.archive_keep",
            N,
            r.failover.archive_keep != n.failover.archive_keep,
        ),
        ("defrag.enabled", N, d.enabled != e.enabled),
        (
            "defrag.fragmentation_percent",
            N,
            d.fragmentation_percent != e.fragmentation_percent,
        ),
        (
            "defrag.min_db_size_bytes",
            N,
            d.min_db_size_bytes != e.min_db_size_bytes,
        ),
        (
            "defrag.check_interval_ms",
            N,
            d.check_interval != e.check_interval,
        ),
        ("defrag.timeout_ms", N, d.timeout != e.timeout),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::PathBuf;

    use super::*;

    fn with(extra: &str) -> Settings {
        let mut texts = vec![(
            PathBuf::from("main.toml"),
            crate::config::tests_layers::MINIMAL.to_string(),
        )];
        if !extra.is_empty() {
            texts.push((PathBuf::from("10-edit.toml"), extra.to_string()));
        }
        crate::config::from_texts(&texts).unwrap()
    }

    fn keys(extra: &str) -> Vec<(&'static str, Takes)> {
        between(&with(""), &with(extra))
            .into_iter()
            .map(|c| (c.key, c.takes))
            .collect()
    }

    #[test]
    fn the_same_files_change_nothing() {
        assert!(keys("").is_empty());
    }

    #[test]
    fn each_kind_of_key_takes_effect_when_it_can() {
        assert_eq!(
            keys("[defrag]\nfragmentation_percent = 60\n[failover]\narchive_keep = 3\n"),
            [
                ("failover.archive_keep", Takes::Now),
                ("defrag.fragmentation_percent", Takes::Now),
            ]
        );
        assert_eq!(
            keys("[timeouts]\nhung_after_ms = 8000\n"),
            [("timeouts.hung_after_ms", Takes::DaemonRestart)]
        );
        assert_eq!(
            keys("[etcd]\nquota_backend_bytes = 4294967296\n"),
            [("etcd.quota_backend_bytes", Takes::EtcdRestart)]
        );
        assert_eq!(
            keys("[etcd]\ndata_dir = \"/srv/etcd\"\n"),
            // The archives' default place follows the data.
            [
                ("etcd.data_dir", Takes::Identity),
                ("failover.archive_dir", Takes::Identity)
            ]
        );
        assert_eq!(
            keys("[report]\ninterval_ms = 60000\n"),
            [("report", Takes::DaemonRestart)]
        );
    }
}
