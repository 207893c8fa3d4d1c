//! The `PacemakerCluster` report: the CR's `status`, plus what the CRD
//! cannot hold (`pacemaker`, `etcd`).
//!
//! Two [`Profile`]s: under `openshift` the status is valid for the CRD by
//! construction (node names are RFC 1123 subdomains, every node has a
//! canonical global-unicast address, at most five nodes, kubelet judged on
//! every node, only Redfish and IPMI fence devices listed); under `generic`
//! (the default) the same shape reports any Pacemaker cluster: every member
//! node whatever its name or address, kubelet only where a kubelet resource
//! is configured, every fence device. etcd and fencing are judged under both.
//!
//! [`build`] is a pure function of the parsed document, the options, the
//! previous report (to keep `lastTransitionTime` of conditions whose status
//! did not change) and the current time.

use std::collections::BTreeMap;

use time::{OffsetDateTime, UtcOffset};

use crate::cib::FenceTargets;
use crate::model::{CrmMon, Node, NodeType};
use crate::timefmt::{format_k8s, parse_k8s};

mod conditions;
mod node;
mod pacemaker;
mod shape;

use conditions::{Cond, cond, is_true};
pub use conditions::{valid_crd_address, valid_node_name};
use node::NodeBuilder;
use pacemaker::pacemaker_section;
pub use shape::*;
/// `apiVersion` of the report.
pub const API_VERSION: &str = "etcd.openshift.io/v1";
/// `kind` of the report.
pub const KIND: &str = "PacemakerCluster";
/// The CR is a singleton named `cluster`.
pub const NAME: &str = "cluster";
/// CRD limit on `status.nodes`.
pub const MAX_STATUS_NODES: usize = 5;
/// CRD limit on `fencingAgents` per node.
pub const MAX_FENCING_AGENTS: usize = 8;
/// CRD limit on addresses per node.
pub const MAX_ADDRESSES: usize = 8;
/// Which resources are which, and where addresses and fence targets come
/// from.
#[derive(Debug, Clone)]
pub struct Options {
    /// Agents of the etcd resource; `*` at the end matches a prefix.
    pub etcd_agents: Vec<String>,
    /// Agents of the kubelet resource.
    pub kubelet_agents: Vec<String>,
    /// Agents of fence devices.
    pub fence_agents: Vec<String>,
    /// Expected number of member nodes.
    pub expected_node_count: usize,
    /// Node name → addresses (from Corosync or the daemon's configuration).
    pub node_addresses: BTreeMap<String, Vec<String>>,
    /// Fence device targets from the CIB; `None` when no CIB was read.
    pub fence_targets: Option<FenceTargets>,
    /// Offset assumed for crm_mon times printed without a zone.
    pub local_offset: UtcOffset,
    /// etcd section to embed, if any.
    pub etcd: Option<EtcdSection>,
    /// The rules the report follows.
    pub profile: Profile,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            etcd_agents: vec![
                "ocf:etcd-warden:etcd".into(),
                "ocf:heartbeat:podman-etcd".into(),
            ],
            kubelet_agents: vec!["systemd:kubelet".into()],
            fence_agents: vec!["stonith:*".into()],
            expected_node_count: 2,
            node_addresses: BTreeMap::new(),
            fence_targets: None,
            local_offset: UtcOffset::UTC,
            etcd: None,
            profile: Profile::default(),
        }
    }
}

/// Build the report. Pure: same inputs, same output.
pub fn build(
    doc: &CrmMon,
    opts: &Options,
    previous: Option<&Report>,
    now: OffsetDateTime,
) -> Report {
    let now_s = format_k8s(never_before(previous, now));
    let instances = doc.primitive_instances();
    let members: Vec<&Node> = doc
        .nodes
        .iter()
        .filter(|n| n.node_type == NodeType::Member)
        .collect();
    let (nodes, omitted) = NodeBuilder::new(doc, opts, &instances, &now_s).nodes(&members);
    let conditions = cluster_conditions(
        ClusterFacts {
            count: members.len(),
            expected: opts.expected_node_count,
            in_service: !doc.summary.options.maintenance_mode,
        },
        &nodes,
        &omitted,
        &now_s,
    );
    let mut report = Report {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        metadata: Metadata { name: NAME.into() },
        profile: opts.profile,
        status: ClusterStatus {
            last_updated: now_s,
            conditions,
            nodes,
        },
        pacemaker: pacemaker_section(doc, &instances, opts, omitted),
        etcd: opts.etcd.clone(),
    };
    if let Some(prev) = previous {
        carry_transition_times(&mut report.status, &prev.status);
    }
    report
}

/// `now`, or the previous report's time if the clock went back:
/// lastUpdated may never go backwards (CRD rule), even if the clock did.
fn never_before(previous: Option<&Report>, now: OffsetDateTime) -> OffsetDateTime {
    match previous.and_then(|p| parse_k8s(&p.status.last_updated)) {
        Some(prev) if prev > now => prev,
        _ => now,
    }
}

/// What the cluster's own conditions are judged on besides its nodes.
#[derive(Clone, Copy)]
struct ClusterFacts {
    /// Member nodes in the document.
    count: usize,
    /// Member nodes expected.
    expected: usize,
    /// Not in maintenance mode.
    in_service: bool,
}

/// The cluster's conditions: `Healthy`, `InService`, `NodeCountAsExpected`.
fn cluster_conditions(
    facts: ClusterFacts,
    nodes: &[NodeStatus],
    omitted: &[OmittedNode],
    now_s: &str,
) -> Vec<Condition> {
    let ClusterFacts {
        count,
        expected,
        in_service,
    } = facts;
    let count_ok = count == expected;
    let count_reason = if count < expected {
        "InsufficientNodes"
    } else {
        "ExcessiveNodes"
    };
    let problems = cluster_problems(&facts, nodes, omitted);
    let healthy = problems.is_empty();
    vec![
        cond(
            Cond {
                kind: "Healthy",
                ok: healthy,
                true_reason: "ClusterHealthy",
                false_reason: "ClusterUnhealthy",
                message: if healthy {
                    "cluster is healthy".into()
                } else {
                    problems.join("; ")
                },
            },
            now_s,
        ),
        cond(
            Cond {
                kind: "InService",
                ok: in_service,
                true_reason: "InService",
                false_reason: "InMaintenance",
                message: if in_service {
                    "cluster is in service".into()
                } else {
                    "cluster is in maintenance mode".into()
                },
            },
            now_s,
        ),
        Condition {
            kind: "NodeCountAsExpected".into(),
            status: if count_ok {
                ConditionStatus::True
            } else {
                ConditionStatus::False
            },
            reason: if count_ok { "AsExpected" } else { count_reason }.into(),
            message: format!("{count} member node(s), expected {expected}"),
            last_transition_time: now_s.to_owned(),
        },
    ]
}

/// What keeps the cluster from being healthy, for the `Healthy` message.
fn cluster_problems(
    facts: &ClusterFacts,
    nodes: &[NodeStatus],
    omitted: &[OmittedNode],
) -> Vec<String> {
    let unhealthy_nodes: Vec<&str> = nodes
        .iter()
        .filter(|n| !is_true(&n.conditions, "Healthy"))
        .map(|n| n.node_name.as_str())
        .collect();
    let mut problems = Vec::new();
    if facts.count != facts.expected {
        problems.push(format!(
            "{} member node(s), expected {}",
            facts.count, facts.expected
        ));
    }
    if !facts.in_service {
        problems.push("cluster is in maintenance mode".to_owned());
    }
    if !unhealthy_nodes.is_empty() {
        problems.push(format!("unhealthy node(s): {}", unhealthy_nodes.join(", ")));
    }
    for o in omitted {
        problems.push(format!("{} not reported: {}", o.name, o.reason));
    }
    if nodes.is_empty() {
        problems.push("no node can be reported".to_owned());
    }
    problems
}

/// Keep each condition's `lastTransitionTime` from the previous report when
/// its status did not change: that time says how long a node has been
/// offline, which is lost if every run writes a fresh time.
pub(crate) fn carry_transition_times(new: &mut ClusterStatus, old: &ClusterStatus) {
    carry(&mut new.conditions, &old.conditions);
    for n in &mut new.nodes {
        let Some(o) = old.nodes.iter().find(|o| o.node_name == n.node_name) else {
            continue;
        };
        carry(&mut n.conditions, &o.conditions);
        for r in &mut n.resources {
            if let Some(or) = o.resources.iter().find(|x| x.name == r.name) {
                carry(&mut r.conditions, &or.conditions);
            }
        }
        for a in &mut n.fencing_agents {
            if let Some(oa) = o.fencing_agents.iter().find(|x| x.name == a.name) {
                carry(&mut a.conditions, &oa.conditions);
            }
        }
    }
}

fn carry(new: &mut [Condition], old: &[Condition]) {
    for c in new {
        if let Some(o) = old.iter().find(|o| o.kind == c.kind)
            && o.status == c.status
            // A transition time in the future would be a lie; recompute.
            && o.last_transition_time <= c.last_transition_time
        {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
}

/// Error reading a report file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Not JSON of the report's shape.
    #[error("not a PacemakerCluster report: {0}")]
    Shape(#[from] serde_json::Error),
    /// Wrong apiVersion/kind.
    #[error(
        "not a PacemakerCluster report: apiVersion {api_version:?} kind {kind:?} (expected {API_VERSION:?} {KIND:?})"
    )]
    Kind {
        /// What the file says.
        api_version: String,
        /// What the file says.
        kind: String,
    },
    /// lastUpdated unreadable.
    #[error("status.lastUpdated {0:?} is not an RFC 3339 time")]
    LastUpdated(String),
}

impl Report {
    /// Parse a report from JSON, checking that it is one.
    pub fn from_json(text: &str) -> Result<Self, ReportError> {
        let r: Report = serde_json::from_str(text)?;
        if r.api_version != API_VERSION || r.kind != KIND {
            return Err(ReportError::Kind {
                api_version: r.api_version,
                kind: r.kind,
            });
        }
        if parse_k8s(&r.status.last_updated).is_none() {
            return Err(ReportError::LastUpdated(r.status.last_updated));
        }
        Ok(r)
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Serialising plain structs with string keys cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}
