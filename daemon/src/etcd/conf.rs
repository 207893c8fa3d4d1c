//! etcd's configuration file, generated from [`Settings`].
//!
//! etcd 3.4 reads a YAML config file; JSON is valid YAML, so the file is
//! written as JSON with serde_json (no YAML crate needed) and only with keys
//! that etcd 3.4, 3.5 and 3.6 all understand. The file is written to a
//! temporary name, fsynced and renamed, so that etcd never reads half a file.

use serde_json::{Map, Value, json};

use crate::atomic_file::Replace;
use crate::config::{BackendKind, CompactionMode, Settings, TlsFiles};

/// Where etcd writes its log under the process backend: `STATE_DIR/etcd.log`
/// (also its stdout and stderr, for Go runtime messages).
pub(crate) fn log_path(s: &Settings) -> std::path::PathBuf {
    s.state_dir.join("etcd.log")
}

/// How etcd is to be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartMode {
    /// Bootstrap or restart: a fresh data dir bootstraps a new cluster with
    /// every configured node (with the configured token: the standalone and
    /// autostart modes); an existing data dir is reused as it is.
    Normal,
    /// Bootstrap a new cluster of every configured node with this
    /// `initial-cluster-token`. The failover logic gives every bootstrap a
    /// fresh token: etcd derives member and cluster ids from the token and
    /// the peer URLs alone, so a cluster bootstrapped again with the same
    /// token would carry the old cluster's ids, and nothing could tell it
    /// from the data it replaced.
    Bootstrap {
        /// The token.
        token: String,
    },
    /// Join a running cluster as a member that was just added (as a learner)
    /// under this node's name; `initial_cluster` is `name=peerurl,…` as the
    /// cluster knows it.
    JoinExisting {
        /// The `initial-cluster` value.
        initial_cluster: String,
    },
    /// Restart as a one-member cluster from the existing data. Only the
    /// failover logic asks for it, and only with Pacemaker's confirmation
    /// that the peer is down (see [`crate::reconcile::ports::PeerDown`]).
    ForceNewCluster,
    /// A start whose clients are held off: etcd serves clients only at
    /// `client_url` (plain HTTP on a loopback port only the daemon knows),
    /// so that the daemon can move the revision past what a forced restart
    /// dropped before any client writes; with `force`, the forced restart
    /// itself. A normal start follows.
    ClientsHeld {
        /// The one client URL.
        client_url: String,
        /// Whether this start is the forced restart (`--force-new-cluster`).
        force: bool,
    },
}

impl StartMode {
    /// Whether etcd starts with `--force-new-cluster`.
    pub(crate) fn forces(&self) -> bool {
        matches!(
            self,
            StartMode::ForceNewCluster | StartMode::ClientsHeld { force: true, .. }
        )
    }
}

/// `--initial-cluster` naming every configured node at its peer URLs.
pub(crate) fn every_node(s: &Settings) -> String {
    s.nodes
        .iter()
        .flat_map(|n| n.peer_urls.iter().map(move |u| format!("{}={u}", n.name)))
        .collect::<Vec<_>>()
        .join(",")
}

/// `snapshot-count` for `mode`. A held start snapshots after every other
/// entry: the normal start that follows then loads its raft log from that
/// snapshot, so a member added later is sent the backend itself instead of
/// replaying the log from its start. After a forced restart the two can
/// differ: the backend may have applied an entry past the commit index the
/// log persisted, which the force drops from the log, and the new entry
/// given that index is then skipped by this backend (it counts as applied)
/// but applied by a member replaying the log, so the two would answer the
/// same revision for different writes.
fn snapshot_count(s: &Settings, mode: &StartMode) -> Option<u64> {
    match mode {
        StartMode::ClientsHeld { .. } => Some(HELD_SNAPSHOT_COUNT),
        _ => s.etcd.tuning.snapshot_count,
    }
}

/// `snapshot-count` of a held start (see [`snapshot_count`]).
const HELD_SNAPSHOT_COUNT: u64 = 1;

/// Build the configuration document for `mode`.
pub(crate) fn render(s: &Settings, mode: &StartMode) -> Value {
    let local = s.local_node();
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("name", json!(local.name));
    put("data-dir", json!(s.etcd.data_dir.to_string_lossy()));
    let clients = match mode {
        StartMode::ClientsHeld { client_url, .. } => client_url.clone(),
        _ => local.client_urls.join(","),
    };
    put("listen-client-urls", json!(clients));
    put("advertise-client-urls", json!(clients));
    put("listen-peer-urls", json!(local.peer_urls.join(",")));
    put(
        "initial-advertise-peer-urls",
        json!(local.peer_urls.join(",")),
    );
    let token = match mode {
        StartMode::Bootstrap { token } => token.as_str(),
        _ => s.etcd.initial_cluster_token.as_str(),
    };
    put("initial-cluster-token", json!(token));
    match mode {
        StartMode::Normal
        | StartMode::ForceNewCluster
        | StartMode::ClientsHeld { .. }
        | StartMode::Bootstrap { .. } => {
            put("initial-cluster", json!(every_node(s)));
            put("initial-cluster-state", json!("new"));
        }
        StartMode::JoinExisting { initial_cluster } => {
            put("initial-cluster", json!(initial_cluster));
            put("initial-cluster-state", json!("existing"));
        }
    }
    put("force-new-cluster", json!(mode.forces()));
    // etcd 3.5 and 3.6 default to it, 3.4 does not: a member that cannot
    // win an election keeps its term and its vote. A leader that lost its
    // peer then still reads as the leader of its last term in its own log
    // when it forces, so the force drops nothing a peer could have
    // acknowledged (see `reconcile/held.rs`, `ForceDrop::led`); and a
    // member back from a partition does not depose a working leader.
    put("pre-vote", json!(true));
    put("logger", json!("zap"));
    match s.etcd.backend {
        // A file, not stderr: a pipe to the daemon would die with the daemon
        // (and etcd with it, of SIGPIPE), while a file lets etcd outlive a
        // daemon restart and be adopted. The daemon follows the file.
        BackendKind::Process => put("log-outputs", json!([log_path(s).to_string_lossy()])),
        // The unit's stderr goes to its journal.
        BackendKind::Systemd => put("log-outputs", json!(["stderr"])),
    }
    let t = &s.etcd.tuning;
    if let Some(v) = t.quota_backend_bytes {
        put("quota-backend-bytes", json!(v));
    }
    if let Some((mode, retention)) = &t.auto_compaction {
        let mode = match mode {
            CompactionMode::Periodic => "periodic",
            CompactionMode::Revision => "revision",
        };
        put("auto-compaction-mode", json!(mode));
        put("auto-compaction-retention", json!(retention));
    }
    if let Some(v) = snapshot_count(s, mode) {
        put("snapshot-count", json!(v));
    }
    if let Some(v) = t.heartbeat_interval_ms {
        put("heartbeat-interval", json!(v));
    }
    let election = match mode {
        m if m.forces() => forced_election_timeout_ms(s),
        _ => None,
    };
    if let Some(v) = election.or(t.election_timeout_ms) {
        put("election-timeout", json!(v));
    }
    if let Some(tls) = &s.etcd.client_tls {
        put("client-transport-security", tls_section(tls));
    }
    if let Some(tls) = &s.etcd.peer_tls {
        put("peer-transport-security", tls_section(tls));
    }
    Value::Object(m)
}

/// The election timeout of a start with `--force-new-cluster`, when it
/// differs from the normal one. etcd 3.4 and 3.5 fast-forward the election
/// ticks of a restarted member only when its member list holds it alone,
/// and a member forced into a new cluster still lists the dead peer when
/// that check runs (the removal is applied later, from the WAL): the lone
/// member waits one full randomized election timeout before it elects
/// itself. A shorter timeout for this one start shortens fence -> first
/// write. It lasts until etcd's next start, whose configuration is
/// rewritten for a normal start right after the forced one. Kept at or above
/// 5 x the heartbeat interval (etcd refuses less) and never above the normal
/// value.
fn forced_election_timeout_ms(s: &Settings) -> Option<u64> {
    let t = &s.etcd.tuning;
    let (floor, normal) = (5 * t.heartbeat_ms(), t.election_ms());
    s.failover
        .force_election_timeout_ms
        .map(|v| v.max(floor).min(normal))
}

fn tls_section(t: &TlsFiles) -> Value {
    json!({
        "cert-file": t.cert_file.to_string_lossy(),
        "key-file": t.key_file.to_string_lossy(),
        "trusted-ca-file": t.trusted_ca_file.to_string_lossy(),
        "client-cert-auth": t.client_cert_auth,
    })
}

/// Render and write the etcd configuration for `mode`.
pub(crate) fn write(s: &Settings, mode: &StartMode) -> std::io::Result<()> {
    let doc = render(s, mode);
    let text = serde_json::to_vec_pretty(&doc).map_err(std::io::Error::other)?;
    crate::atomic_file::write(&s.etcd_config_path(), &text, Replace::Durable).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn settings() -> Settings {
        crate::config::from_texts(&[(
            PathBuf::from("/c.toml"),
            r#"
node_name = "b"
topology = "two-node"
[etcd]
data_dir = "/var/lib/etcd"
snapshot_count = 10000
auto_compaction_mode = "periodic"
auto_compaction_retention = "1h"
[tls.client]
cert_file = "/etc/pki/c.crt"
key_file = "/etc/pki/c.key"
trusted_ca_file = "/etc/pki/ca.crt"
[tls.peer]
cert_file = "/etc/pki/p.crt"
key_file = "/etc/pki/p.key"
trusted_ca_file = "/etc/pki/ca.crt"
client_cert_auth = false
[[nodes]]
name = "a"
peer_urls = ["https://[2001:db8::1]:2380"]
client_urls = ["https://[2001:db8::1]:2379"]
[[nodes]]
name = "b"
peer_urls = ["https://192.0.2.2:2380"]
client_urls = ["https://192.0.2.2:2379"]
"#
            .to_string(),
        )])
        .unwrap()
    }

    #[test]
    fn fresh_two_node_lists_every_node() {
        let v = render(&settings(), &StartMode::Normal);
        assert_eq!(v["name"], "b");
        assert_eq!(
            v["initial-cluster"],
            "a=https://[2001:db8::1]:2380,b=https://192.0.2.2:2380"
        );
        assert_eq!(v["initial-cluster-state"], "new");
        assert_eq!(v["force-new-cluster"], false);
        assert_eq!(v["logger"], "zap");
        assert_eq!(v["pre-vote"], true, "3.4 defaults to false");
        assert_eq!(v["log-outputs"], json!(["/var/lib/etcd-warden/etcd.log"]));
        assert_eq!(v["snapshot-count"], 10000);
        assert_eq!(v["auto-compaction-retention"], "1h");
        assert_eq!(v["client-transport-security"]["client-cert-auth"], true);
        assert_eq!(v["peer-transport-security"]["cert-file"], "/etc/pki/p.crt");
        assert_eq!(v["peer-transport-security"]["client-cert-auth"], false);
    }

    #[test]
    fn force_new_cluster_and_join_modes() {
        let v = render(&settings(), &StartMode::ForceNewCluster);
        assert_eq!(v["force-new-cluster"], true);
        let v = render(
            &settings(),
            &StartMode::JoinExisting {
                initial_cluster: "a=https://[2001:db8::1]:2380,b=https://192.0.2.2:2380".into(),
            },
        );
        assert_eq!(v["initial-cluster-state"], "existing");
    }

    #[test]
    fn a_held_start_snapshots_so_that_a_later_member_is_sent_the_backend() {
        let mut s = settings();
        s.etcd.tuning.snapshot_count = Some(20000);
        for force in [true, false] {
            let held = StartMode::ClientsHeld {
                client_url: "http://127.0.0.1:40001".into(),
                force,
            };
            assert_eq!(render(&s, &held)["snapshot-count"], 1, "force {force}");
        }
        assert_eq!(render(&s, &StartMode::Normal)["snapshot-count"], 20000);
        assert_eq!(
            render(&s, &StartMode::ForceNewCluster)["snapshot-count"],
            20000
        );
    }

    #[test]
    fn the_systemd_backend_logs_to_the_units_journal() {
        let mut s = settings();
        s.etcd.backend = BackendKind::Systemd;
        let v = render(&s, &StartMode::Normal);
        assert_eq!(v["log-outputs"], json!(["stderr"]));
    }

    #[test]
    fn a_forced_start_elects_sooner_within_what_etcd_accepts() {
        // Defaults: etcd's 100 ms heartbeat and 1000 ms election timeout,
        // 500 ms for the forced start only.
        let s = settings();
        let v = render(&s, &StartMode::ForceNewCluster);
        assert_eq!(v["election-timeout"], 500);
        assert!(
            render(&s, &StartMode::Normal)
                .get("election-timeout")
                .is_none()
        );
        let join = StartMode::JoinExisting {
            initial_cluster: "b=https://192.0.2.2:2380".into(),
        };
        assert!(render(&s, &join).get("election-timeout").is_none());

        // Never below 5 x the heartbeat in effect.
        let mut s = settings();
        s.etcd.tuning.heartbeat_interval_ms = Some(150);
        s.etcd.tuning.election_timeout_ms = Some(2000);
        assert_eq!(
            render(&s, &StartMode::ForceNewCluster)["election-timeout"],
            750
        );
        assert_eq!(render(&s, &StartMode::Normal)["election-timeout"], 2000);

        // Never above the configured election timeout.
        let mut s = settings();
        s.etcd.tuning.heartbeat_interval_ms = Some(50);
        s.etcd.tuning.election_timeout_ms = Some(400);
        assert_eq!(
            render(&s, &StartMode::ForceNewCluster)["election-timeout"],
            400
        );

        // 0 in the configuration (None here) keeps the normal value.
        s.failover.force_election_timeout_ms = None;
        assert_eq!(
            render(&s, &StartMode::ForceNewCluster)["election-timeout"],
            400
        );
        let mut s = settings();
        s.failover.force_election_timeout_ms = None;
        assert!(
            render(&s, &StartMode::ForceNewCluster)
                .get("election-timeout")
                .is_none()
        );
    }
}
