//! Shared code of `cluster_failover` and `cluster_ha`: the scenario-level
//! steps on top of `warden_integration::twonode` (the cluster with a daemon
//! in every node), with failure messages that carry the evidence (crm_mon,
//! the daemons' logs, the writers' counters).

#![allow(dead_code)]

use std::time::{Duration, Instant};

use warden_integration::monitor::Seen;
use warden_integration::twonode::{Topology, WardenCluster, poll};
use warden_integration::writer::Writer;

/// Deadline for a cluster to settle after a fault (fence, boot, rejoin).
pub const SETTLE: Duration = Duration::from_secs(120);
/// Deadline for the survivor's first write after a fault.
pub const FAILOVER: Duration = Duration::from_secs(60);

/// A fresh cluster of `n` nodes with both etcd members voters (the fresh-bootstrap scenario), the
/// cluster id both nodes agree on.
pub fn healthy(n: usize, topology: Topology) -> (WardenCluster, u64) {
    let t0 = Instant::now();
    let w = WardenCluster::start(n, topology).unwrap_or_else(|e| panic!("{e:#}"));
    let nodes = w.nodes();
    let (cid, _) = w
        .wait_voters(&nodes[0], &nodes, SETTLE)
        .unwrap_or_else(|e| panic!("{e:#}"));
    for n in &nodes {
        // A member that has just joined may not serve clients yet (etcd 3.4
        // answers only once it has published itself): ask until it does.
        let c = poll(&format!("{n}'s etcd to list the members"), SETTLE, || {
            Ok(w.members(n).ok().map(|(c, _)| c))
        })
        .unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(c, cid, "{n} is in another etcd cluster");
    }
    eprintln!(
        "{} nodes healthy ({} voters, cluster {cid:x}) after {:?}",
        nodes.len(),
        nodes.len(),
        t0.elapsed()
    );
    (w, cid)
}

/// Waits until every node's writer has `n` acks (the writers run).
pub fn wait_acks_everywhere(w: &Writer, nodes: &[String], n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let acks = w.acks();
        if nodes
            .iter()
            .all(|node| acks.iter().filter(|a| &a.node == node).count() >= n)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "writers did not get {n} acks each: {}",
            w.summary()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Invariants over a fault's samples: always a voter while the cluster
/// answered, at most `max_voters` voters at once, one cluster id per node.
pub fn check_seen(seen: &Seen, max_voters: usize) {
    assert!(seen.samples > 0, "the member list never answered: {seen:?}");
    assert!(seen.min_voters >= 1, "a moment without a voter: {seen:?}");
    assert!(
        seen.max_voters <= max_voters,
        "more than {max_voters} voters at once: {seen:?}"
    );
}

/// Panics with `e` and the evidence: crm_mon and both daemons' logs.
pub fn fail(w: &WardenCluster, e: anyhow::Error) -> ! {
    let mut s = format!("{e:#}\n");
    if let Some(n) = w
        .nodes()
        .iter()
        .find(|n| w.c.is_running(n).unwrap_or(false))
    {
        s.push_str(&w.c.crm_mon_text(n).unwrap_or_default());
    }
    for n in w.nodes() {
        s.push_str(&w.daemon_log_tail(&n));
        s.push('\n');
    }
    panic!("{s}")
}

/// Unwraps `r`, failing with the cluster's evidence.
pub trait OrFail<T> {
    /// The value, or a panic with crm_mon and the daemons' logs.
    fn or_fail(self, w: &WardenCluster) -> T;
}

impl<T> OrFail<T> for anyhow::Result<T> {
    fn or_fail(self, w: &WardenCluster) -> T {
        match self {
            Ok(v) => v,
            Err(e) => fail(w, e),
        }
    }
}

/// The exit reasons of etcd's failed actions on `node`, as crm_mon asked on
/// `from` shows them (Pacemaker keeps the first 128 characters).
pub fn etcd_exit_reasons(w: &WardenCluster, from: &str, node: &str) -> anyhow::Result<Vec<String>> {
    let doc = crm_xml::parse(&w.c.crm_mon(from)?.raw)?;
    Ok(doc
        .failures
        .iter()
        .filter(|f| f.node == node && f.resource().split(':').next() == Some("etcd"))
        .filter_map(|f| f.exit_reason.clone())
        .collect())
}

/// The daemon's report (`/v1/report`) on `node`, asked through its socket
/// in the node's private /run (reached through the namespace holder's
/// root, as the socket lives in the node's mount namespace).
pub fn daemon_report(w: &WardenCluster, node: &str) -> anyhow::Result<serde_json::Value> {
    let socket = format!(
        "/proc/{}/root{}",
        w.c.holder_pid(node)?,
        warden_integration::twonode::SOCKET
    );
    let body = warden_api::client::Client::new(&socket)
        .get_raw(warden_api::paths::REPORT, Duration::from_secs(10))
        .map_err(|e| anyhow::anyhow!("the report of {node}'s daemon: {e}"))?;
    Ok(serde_json::from_slice(&body)?)
}

/// The exit reasons of the failed actions a report lists for `node`.
pub fn report_exit_reasons(report: &serde_json::Value, node: &str) -> Vec<String> {
    report
        .pointer("/pacemaker/failedActions")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a.get("node").and_then(serde_json::Value::as_str) == Some(node))
        .filter_map(|a| a.get("exitReason").and_then(serde_json::Value::as_str))
        .map(str::to_owned)
        .collect()
}
