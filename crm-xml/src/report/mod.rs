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
use std::net::IpAddr;

use time::{OffsetDateTime, UtcOffset};

use crate::cib::FenceTargets;
use crate::model::{CrmMon, Instance};
use crate::timefmt::{format_k8s, parse_k8s};

mod conditions;
mod pacemaker;
mod shape;

use conditions::{
    Cond, Placement, agent_matches, cond, fencing_method, is_true, place, resource_conditions,
    valid_agent_name,
};
pub use conditions::{valid_crd_address, valid_node_name};
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
    // lastUpdated may never go backwards (CRD rule), even if the clock did.
    let mut now = now;
    if let Some(prev) = previous.and_then(|p| parse_k8s(&p.status.last_updated))
        && prev > now
    {
        now = prev;
    }
    let now_s = format_k8s(now);
    let instances = doc.primitive_instances();
    let cluster_maint = doc.summary.options.maintenance_mode;

    let fence_instances: Vec<&Instance<'_>> = instances
        .iter()
        .filter(|i| agent_matches(&opts.fence_agents, &i.primitive.agent))
        .collect();

    let mut nodes = Vec::new();
    let mut omitted = Vec::new();
    let members: Vec<_> = doc
        .nodes
        .iter()
        .filter(|n| n.node_type == crate::model::NodeType::Member)
        .collect();
    let openshift = opts.profile == Profile::OpenShift;
    // Under `generic`, kubelet is judged only where the cluster has one.
    let judge_kubelet = openshift
        || instances
            .iter()
            .any(|i| agent_matches(&opts.kubelet_agents, &i.primitive.agent));
    for n in &members {
        if openshift && !valid_node_name(&n.name) {
            omitted.push(OmittedNode {
                name: n.name.clone(),
                reason: "node name is not an RFC 1123 subdomain, which the CRD requires".into(),
            });
            continue;
        }
        let known = opts.node_addresses.get(&n.name).into_iter().flatten();
        let addrs: Vec<NodeAddress> = if openshift {
            known
                .filter(|a| valid_crd_address(a))
                .take(MAX_ADDRESSES)
                .cloned()
                .collect()
        } else {
            // Any IP, written canonically, each once.
            let mut v: Vec<String> = Vec::new();
            for ip in known.filter_map(|a| a.parse::<IpAddr>().ok()) {
                let ip = ip.to_string();
                if !v.contains(&ip) {
                    v.push(ip);
                }
            }
            v
        }
        .into_iter()
        .map(|address| NodeAddress {
            kind: "InternalIP".into(),
            address,
        })
        .collect();
        if openshift && addrs.is_empty() {
            omitted.push(OmittedNode {
                name: n.name.clone(),
                reason: if opts.node_addresses.contains_key(&n.name) {
                    "no configured address is a canonical global-unicast IP".into()
                } else {
                    "address unknown (no Corosync node list or configured address for it)".into()
                },
            });
            continue;
        }
        if openshift && nodes.len() >= MAX_STATUS_NODES {
            omitted.push(OmittedNode {
                name: n.name.clone(),
                reason: format!("the CRD allows at most {MAX_STATUS_NODES} nodes"),
            });
            continue;
        }
        let node_maint = cluster_maint || n.maintenance;

        // Resources.
        let mut resources = Vec::new();
        if judge_kubelet {
            let kubelet = place(&instances, &opts.kubelet_agents, &n.name, "kubelet");
            resources.push(ResourceStatus {
                name: ResourceName::Kubelet,
                conditions: resource_conditions(&kubelet, node_maint, &now_s),
            });
        }
        let etcd = place(&instances, &opts.etcd_agents, &n.name, "etcd");
        resources.push(ResourceStatus {
            name: ResourceName::Etcd,
            conditions: resource_conditions(&etcd, node_maint, &now_s),
        });

        // Fence devices that target this node (by the CIB, never by id).
        let mut fencing_agents = Vec::new();
        let mut any_available = false;
        let mut all_healthy = true;
        let mut device_count = 0usize;
        let mut device_notes = Vec::new();
        if let Some(targets) = &opts.fence_targets {
            let mut seen = std::collections::BTreeSet::new();
            for f in &fence_instances {
                let id = f.primitive.id.as_str();
                if !targets
                    .targets(id)
                    .is_some_and(|t| t.iter().any(|x| x == &n.name))
                {
                    continue;
                }
                // A cloned device has several instances; judge by a running one.
                if !seen.insert(id) {
                    continue;
                }
                let best = fence_instances
                    .iter()
                    .filter(|g| g.primitive.id == id)
                    .find(|g| !g.primitive.nodes.is_empty())
                    .unwrap_or(f);
                let placement = Placement {
                    primitive: Some(best.primitive),
                    running_here: !best.primitive.nodes.is_empty(),
                    desc: format!("fence device {id}"),
                };
                let conds = resource_conditions(&placement, cluster_maint, &now_s);
                device_count += 1;
                let available = is_true(&conds, "Active")
                    && is_true(&conds, "Started")
                    && is_true(&conds, "Operational");
                any_available |= available;
                all_healthy &= is_true(&conds, "Healthy");
                let method = fencing_method(&best.primitive.agent)
                    .or((!openshift).then_some(FencingMethod::Other));
                match method {
                    Some(method)
                        if !openshift
                            || (valid_agent_name(id)
                                && fencing_agents.len() < MAX_FENCING_AGENTS) =>
                    {
                        fencing_agents.push(FencingAgentStatus {
                            name: id.to_owned(),
                            method,
                            conditions: conds,
                        });
                    }
                    _ => device_notes.push(format!(
                        "{id} ({}) is not listed: its method is neither Redfish nor IPMI",
                        best.primitive.agent
                    )),
                }
            }
        }
        let fencing_msg = if !doc.summary.options.fencing_enabled {
            "fencing is disabled in the cluster options".to_owned()
        } else if opts.fence_targets.is_none() {
            "fence device targets unknown: no CIB was read".to_owned()
        } else if device_count == 0 {
            format!(
                "no fence device lists {} in pcmk_host_list or pcmk_host_map",
                n.name
            )
        } else {
            let mut m = format!("{device_count} fence device(s) can fence {}", n.name);
            for note in &device_notes {
                m.push_str("; ");
                m.push_str(note);
            }
            m
        };
        let fencing_available = doc.summary.options.fencing_enabled && any_available;
        let fencing_healthy = fencing_available && device_count > 0 && all_healthy;

        let mk = |kind, ok, t, f, msg: String| {
            cond(
                Cond {
                    kind,
                    ok,
                    true_reason: t,
                    false_reason: f,
                    message: msg,
                },
                &now_s,
            )
        };
        let name = &n.name;
        let online = n.online;
        let in_service = !n.maintenance;
        let active = !(n.standby || n.standby_onfail);
        let ready = !n.pending;
        let clean = !n.unclean;
        let member = n.node_type == crate::model::NodeType::Member;
        let res_ok = resources.iter().all(|r| is_true(&r.conditions, "Healthy"));
        let mut failures = Vec::new();
        for (ok, what) in [
            (online, "offline"),
            (in_service, "in maintenance mode"),
            (active, "in standby mode"),
            (ready, "pending"),
            (clean, "unclean (fencing/communication issue)"),
            (member, "not a cluster member"),
            (fencing_available, "fencing unavailable"),
            (fencing_healthy, "fencing unhealthy"),
        ] {
            if !ok {
                failures.push(what.to_owned());
            }
        }
        for r in &resources {
            if !is_true(&r.conditions, "Healthy") {
                failures.push(format!("{:?} is unhealthy", r.name));
            }
        }
        let healthy = failures.is_empty() && res_ok;
        let conditions = vec![
            mk(
                "Healthy",
                healthy,
                "NodeHealthy",
                "NodeUnhealthy",
                if healthy {
                    format!("{name} is healthy")
                } else {
                    format!("{name}: {}", failures.join(", "))
                },
            ),
            mk(
                "Online",
                online,
                "Online",
                "Offline",
                format!("{name} is {}", if online { "online" } else { "offline" }),
            ),
            mk(
                "InService",
                in_service,
                "InService",
                "InMaintenance",
                format!(
                    "{name} is {}",
                    if in_service {
                        "in service"
                    } else {
                        "in maintenance mode"
                    }
                ),
            ),
            mk(
                "Active",
                active,
                "Active",
                "Standby",
                format!("{name} is {}", if active { "active" } else { "in standby" }),
            ),
            mk(
                "Ready",
                ready,
                "Ready",
                "Pending",
                format!("{name} is {}", if ready { "ready" } else { "pending" }),
            ),
            mk(
                "Clean",
                clean,
                "Clean",
                "Unclean",
                format!("{name} is {}", if clean { "clean" } else { "unclean" }),
            ),
            mk(
                "Member",
                member,
                "Member",
                "NotMember",
                format!("{name} is a cluster member"),
            ),
            mk(
                "FencingAvailable",
                fencing_available,
                "FencingAvailable",
                "FencingUnavailable",
                fencing_msg.clone(),
            ),
            mk(
                "FencingHealthy",
                fencing_healthy,
                "FencingHealthy",
                "FencingUnhealthy",
                fencing_msg,
            ),
        ];
        nodes.push(NodeStatus {
            node_name: n.name.clone(),
            addresses: addrs,
            conditions,
            resources,
            fencing_agents,
        });
    }

    // Cluster conditions.
    let count = members.len();
    let expected = opts.expected_node_count;
    let count_ok = count == expected;
    let count_reason = if count < expected {
        "InsufficientNodes"
    } else {
        "ExcessiveNodes"
    };
    let in_service = !cluster_maint;
    let unhealthy_nodes: Vec<&str> = nodes
        .iter()
        .filter(|n| !is_true(&n.conditions, "Healthy"))
        .map(|n| n.node_name.as_str())
        .collect();
    let mut problems = Vec::new();
    if !count_ok {
        problems.push(format!("{count} member node(s), expected {expected}"));
    }
    if !in_service {
        problems.push("cluster is in maintenance mode".to_owned());
    }
    if !unhealthy_nodes.is_empty() {
        problems.push(format!("unhealthy node(s): {}", unhealthy_nodes.join(", ")));
    }
    for o in &omitted {
        problems.push(format!("{} not reported: {}", o.name, o.reason));
    }
    if nodes.is_empty() {
        problems.push("no node can be reported".to_owned());
    }
    let healthy = problems.is_empty();
    let conditions = vec![
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
            &now_s,
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
            &now_s,
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
            last_transition_time: now_s.clone(),
        },
    ];

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
