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

use serde::{Deserialize, Serialize};
use time::{OffsetDateTime, UtcOffset};

use crate::cib::FenceTargets;
use crate::model::{CrmMon, Instance, Primitive, Role};
use crate::timefmt::{format_k8s, parse_k8s, parse_pacemaker_time};

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

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Report {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// Always [`KIND`].
    pub kind: String,
    /// `name: cluster`.
    pub metadata: Metadata,
    /// The rules the report was built by. A report without the field was
    /// written before profiles existed, in the `openshift` shape.
    #[serde(default = "Profile::unrecorded")]
    pub profile: Profile,
    /// The CR's status (valid for the CRD under the `openshift` profile).
    pub status: ClusterStatus,
    /// What crm_mon says that an operator needs.
    pub pacemaker: PacemakerSection,
    /// etcd's view, when the daemon collected it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdSection>,
}

/// Which rules a report follows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Profile {
    /// Any Pacemaker cluster: every member node whatever its name, resources
    /// judged only where they are configured (kubelet is optional; etcd and
    /// fencing are always judged).
    #[default]
    #[serde(rename = "generic")]
    Generic,
    /// OpenShift's two-node clusters: the status is valid for the
    /// `PacemakerCluster` CRD (its naming, address and size rules), and
    /// kubelet is judged on every node.
    #[serde(rename = "openshift")]
    OpenShift,
}

impl Profile {
    /// The profile of a report that records none: it was written before
    /// profiles existed, in the `openshift` shape.
    pub fn unrecorded() -> Self {
        Self::OpenShift
    }

    /// The name used in files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Generic => "generic",
            Self::OpenShift => "openshift",
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `metadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// Always [`NAME`].
    pub name: String,
}

/// `status` (`PacemakerClusterStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterStatus {
    /// RFC 3339, UTC, whole seconds.
    pub last_updated: String,
    /// Healthy, InService, NodeCountAsExpected.
    pub conditions: Vec<Condition>,
    /// One entry per member node that has a valid name and address.
    pub nodes: Vec<NodeStatus>,
}

/// `metav1.Condition` (without `observedGeneration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub kind: String,
    /// True or False.
    pub status: ConditionStatus,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: String,
}

/// `metav1.ConditionStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// "True".
    True,
    /// "False".
    False,
    /// "Unknown".
    Unknown,
}

/// One node of `status.nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeStatus {
    /// Pacemaker node name (an RFC 1123 subdomain under `openshift`).
    pub node_name: String,
    /// Under `openshift` 1–8 canonical global-unicast addresses; under
    /// `generic` the known ones (possibly none). The first is used for etcd
    /// peer URLs.
    pub addresses: Vec<NodeAddress>,
    /// The nine node conditions.
    pub conditions: Vec<Condition>,
    /// Kubelet and Etcd (under `generic`, Kubelet only where a kubelet
    /// resource is configured).
    pub resources: Vec<ResourceStatus>,
    /// Fence devices that can fence this node.
    pub fencing_agents: Vec<FencingAgentStatus>,
}

/// `PacemakerNodeAddress`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeAddress {
    /// Always "InternalIP".
    #[serde(rename = "type")]
    pub kind: String,
    /// A canonical global-unicast IP.
    pub address: String,
}

/// `PacemakerClusterResourceStatus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceStatus {
    /// Kubelet or Etcd.
    pub name: ResourceName,
    /// The eight resource conditions.
    pub conditions: Vec<Condition>,
}

/// The two resources the CRD knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ResourceName {
    /// kubelet.
    Kubelet,
    /// etcd.
    Etcd,
}

/// `PacemakerClusterFencingAgentStatus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FencingAgentStatus {
    /// The fence device's resource id.
    pub name: String,
    /// Redfish or IPMI.
    pub method: FencingMethod,
    /// The eight resource conditions.
    pub conditions: Vec<Condition>,
}

/// Fencing methods: the two the CRD knows, and `Other` for every other
/// agent (listed under the `generic` profile only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FencingMethod {
    /// fence_redfish.
    Redfish,
    /// fence_ipmilan and its aliases.
    #[serde(rename = "IPMI")]
    Ipmi,
    /// Any other fence agent (fence_xvm, fence_sbd, …).
    Other,
}

/// What crm_mon says that an operator needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PacemakerSection {
    /// crm_mon's `api-version` (or `legacy` for the `crm_mon` root).
    pub api_version: String,
    /// The DC's name.
    pub dc: Option<String>,
    /// The partition crm_mon ran in has quorum.
    pub quorate: bool,
    /// `maintenance-mode`.
    pub maintenance_mode: bool,
    /// `fencing-enabled` / `stonith-enabled`.
    pub fencing_enabled: bool,
    /// `<nodes>`.
    pub nodes: Vec<PmNode>,
    /// One entry per primitive instance.
    pub resources: Vec<PmResource>,
    /// `<fence_history>`; empty when crm_mon did not show it.
    pub fence_history: Vec<PmFenceEvent>,
    /// `<failures>`.
    pub failed_actions: Vec<PmFailedAction>,
    /// node → attribute → value.
    pub node_attributes: BTreeMap<String, BTreeMap<String, String>>,
    /// Member nodes left out of `status.nodes`, with why: the CRD has no way
    /// to list a node without a valid address, so it is said here instead.
    #[serde(default)]
    pub omitted_nodes: Vec<OmittedNode>,
}

/// A node missing from `status.nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OmittedNode {
    /// Node name.
    pub name: String,
    /// Why.
    pub reason: String,
}

/// A node as crm_mon shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PmNode {
    /// `name`.
    pub name: String,
    /// `id`.
    pub id: String,
    /// `online`.
    pub online: bool,
    /// `standby` or `standby_onfail`.
    pub standby: bool,
    /// `maintenance`.
    pub maintenance: bool,
    /// `pending`.
    pub pending: bool,
    /// `unclean`.
    pub unclean: bool,
    /// `shutdown`.
    pub shutdown: bool,
    /// `expected_up`.
    pub expected_up: bool,
    /// `is_dc`.
    pub is_dc: bool,
    /// member, remote, ping or unknown.
    #[serde(rename = "type")]
    pub kind: String,
    /// `resources_running`.
    pub resources_running: u32,
}

/// One primitive instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PmResource {
    /// Resource id (clone instances share it).
    pub id: String,
    /// `class:provider:type`.
    pub agent: String,
    /// Normalised role.
    pub role: String,
    /// Normalised target role.
    pub target_role: Option<String>,
    /// `active`.
    pub active: bool,
    /// `failed`.
    pub failed: bool,
    /// `managed`.
    pub managed: bool,
    /// `blocked`.
    pub blocked: bool,
    /// `orphaned`.
    pub orphaned: bool,
    /// Nodes it runs on.
    pub nodes: Vec<String>,
    /// Immediate parent (group, clone or bundle) id.
    pub parent: Option<String>,
    /// Inside a promotable clone.
    pub promotable: bool,
}

/// One fence event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PmFenceEvent {
    /// Fenced node.
    pub target: String,
    /// reboot, off, on.
    pub action: String,
    /// success, failed, pending.
    pub status: String,
    /// RFC 3339 (UTC, microseconds kept), null while pending.
    pub completed: Option<String>,
    /// Node that executed it.
    pub delegate: Option<String>,
    /// Node that asked.
    pub origin: Option<String>,
    /// Requesting client.
    pub client: Option<String>,
    /// Why it failed.
    pub exit_reason: Option<String>,
}

/// One failed action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PmFailedAction {
    /// Node it failed on.
    pub node: String,
    /// Resource id.
    pub resource: String,
    /// Operation (start, monitor, …).
    pub operation: String,
    /// OCF exit code.
    pub rc: Option<i32>,
    /// Its text.
    pub rc_text: Option<String>,
    /// Agent's exit reason.
    pub exit_reason: Option<String>,
    /// RFC 3339 (UTC), if crm_mon printed a time we could read.
    pub last_rc_change: Option<String>,
}

/// etcd's view, filled by the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EtcdSection {
    /// Cluster id (hex, as etcdctl prints it).
    pub cluster_id: Option<String>,
    /// Leader's member id (hex), if there is a leader.
    pub leader: Option<String>,
    /// Raft index seen by the reporting member.
    pub raft_index: Option<u64>,
    /// Raft term.
    pub raft_term: Option<u64>,
    /// Store revision.
    pub revision: Option<i64>,
    /// Members.
    #[serde(default)]
    pub members: Vec<EtcdMember>,
    /// This project's state per node name.
    #[serde(default)]
    pub nodes: BTreeMap<String, WardenNodeState>,
}

/// One etcd member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EtcdMember {
    /// Member id (hex). Strings, because JSON tools round u64 above 2^53.
    pub id: String,
    /// Member name.
    pub name: String,
    /// voter or learner.
    pub role: EtcdRole,
    /// Peer URLs.
    #[serde(default)]
    pub peer_urls: Vec<String>,
    /// When it was added as a learner (RFC 3339), while it is one.
    #[serde(default)]
    pub learner_since: Option<String>,
}

/// Voter or learner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EtcdRole {
    /// Voting member.
    Voter,
    /// Non-voting learner.
    Learner,
}

/// etcd-warden's own state of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WardenNodeState {
    /// What the daemon is doing there.
    pub state: WardenState,
    /// Since when (RFC 3339).
    #[serde(default)]
    pub since: Option<String>,
    /// The node's archives of replaced etcd data (directory paths, oldest
    /// first): data is moved there, never deleted, and restored with
    /// `etcd-warden recover restore-archive`.
    #[serde(default)]
    pub archives: Vec<String>,
    /// Why the daemon is doing what it does: the reason of its latest
    /// decision (e.g. what it waits for), when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set when the daemon refuses to go on by itself (rule 6: no automatic
    /// answer is safe): the one command that resolves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_command: Option<String>,
}

/// The daemon's states that an operator must see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WardenState {
    /// Ordinary member of a healthy cluster.
    Member,
    /// Running etcd alone after forcing a new cluster.
    Standalone,
    /// Recovering (archiving stale data, preparing to rejoin).
    Recovering,
    /// Rejoining as a learner.
    Rejoining,
    /// etcd is stopped here.
    Stopped,
}

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

fn agent_matches(patterns: &[String], agent: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => agent.starts_with(prefix),
        None => agent == p,
    })
}

/// Method of a fence agent, from its type (not its resource id).
pub fn fencing_method(agent: &str) -> Option<FencingMethod> {
    let ty = agent.rsplit(':').next().unwrap_or(agent);
    match ty {
        "fence_redfish" => Some(FencingMethod::Redfish),
        "fence_ipmilan" | "fence_ipmilanplus" | "fence_ipmitool" | "fence_idrac" | "fence_ilo3"
        | "fence_ilo4" | "fence_ilo5" | "fence_imm" => Some(FencingMethod::Ipmi),
        _ => None,
    }
}

/// The CRD's address rule: canonical, global unicast, at most 39 characters.
pub fn valid_crd_address(s: &str) -> bool {
    let Ok(ip) = s.parse::<IpAddr>() else {
        return false;
    };
    if ip.to_string() != s || s.len() > 39 {
        return false;
    }
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            let seg0 = v6.segments()[0];
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (seg0 & 0xffc0) == 0xfe80)
        }
    }
}

/// RFC 1123 subdomain, as the CRD requires of `nodeName`.
pub fn valid_node_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// `fencingAgents[].name`: 1–300 of `[a-zA-Z0-9._-]`.
fn valid_agent_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 300
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

struct Cond<'a> {
    kind: &'a str,
    ok: bool,
    true_reason: &'a str,
    false_reason: &'a str,
    message: String,
}

fn cond(c: Cond<'_>, now: &str) -> Condition {
    Condition {
        kind: c.kind.to_owned(),
        status: if c.ok {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        reason: if c.ok { c.true_reason } else { c.false_reason }.to_owned(),
        message: c.message,
        last_transition_time: now.to_owned(),
    }
}

fn is_true(conds: &[Condition], kind: &str) -> bool {
    conds
        .iter()
        .any(|c| c.kind == kind && c.status == ConditionStatus::True)
}

/// The resource's state on one node, as the conditions see it.
struct Placement<'a> {
    primitive: Option<&'a Primitive>,
    running_here: bool,
    desc: String,
}

fn resource_conditions(p: &Placement<'_>, in_maintenance: bool, now: &str) -> Vec<Condition> {
    let (managed, enabled, operational, active, started, schedulable, maint) = match p.primitive {
        Some(r) => (
            r.managed,
            r.target_role != Some(Role::Stopped),
            !r.failed,
            p.running_here && r.active,
            p.running_here && r.role.is_running(),
            !r.blocked,
            r.maintenance,
        ),
        None => (false, false, true, false, false, false, false),
    };
    let in_service = !(maint || in_maintenance);
    let healthy = managed && enabled && operational && active && started && schedulable;
    let d = &p.desc;
    let role = p.primitive.map_or("absent", |r| r.role.as_str());
    let mk = |kind, ok, t, f, msg: String| {
        cond(
            Cond {
                kind,
                ok,
                true_reason: t,
                false_reason: f,
                message: msg,
            },
            now,
        )
    };
    vec![
        mk(
            "Healthy",
            healthy,
            "ResourceHealthy",
            "ResourceUnhealthy",
            format!("{d}: {}", if healthy { "healthy" } else { "not healthy" }),
        ),
        mk(
            "InService",
            in_service,
            "InService",
            "InMaintenance",
            if in_service {
                format!("{d} is in service")
            } else {
                format!("{d} is in maintenance")
            },
        ),
        mk(
            "Managed",
            managed,
            "Managed",
            "Unmanaged",
            format!("{d} is {}managed", if managed { "" } else { "not " }),
        ),
        mk(
            "Enabled",
            enabled,
            "Enabled",
            "Disabled",
            format!(
                "{d} is {}",
                if enabled {
                    "enabled"
                } else {
                    "disabled or not configured"
                }
            ),
        ),
        mk(
            "Operational",
            operational,
            "Operational",
            "Failed",
            format!("{d} has {}failed", if operational { "not " } else { "" }),
        ),
        mk(
            "Active",
            active,
            "Active",
            "Inactive",
            format!("{d} is {}active here", if active { "" } else { "not " }),
        ),
        mk(
            "Started",
            started,
            "Started",
            "Stopped",
            format!(
                "{d} role here: {}",
                if p.running_here { role } else { "Stopped" }
            ),
        ),
        mk(
            "Schedulable",
            schedulable,
            "Schedulable",
            "Unschedulable",
            format!(
                "{d} is {}",
                if schedulable {
                    "schedulable"
                } else {
                    "blocked or not configured"
                }
            ),
        ),
    ]
}

/// Find the instance of a class of resources on `node`; fall back to an
/// inactive instance (so its configuration flags still show).
fn place<'a>(
    instances: &[Instance<'a>],
    patterns: &[String],
    node: &str,
    what: &str,
) -> Placement<'a> {
    let of_class: Vec<&Instance<'a>> = instances
        .iter()
        .filter(|i| agent_matches(patterns, &i.primitive.agent))
        .collect();
    if let Some(i) = of_class
        .iter()
        .find(|i| i.primitive.nodes.iter().any(|n| n == node))
    {
        return Placement {
            primitive: Some(i.primitive),
            running_here: true,
            desc: format!("{what} ({}) on {node}", i.primitive.id),
        };
    }
    if let Some(i) = of_class
        .iter()
        .find(|i| i.primitive.nodes.is_empty())
        .or(of_class.first())
    {
        return Placement {
            primitive: Some(i.primitive),
            running_here: false,
            desc: format!("{what} ({}) on {node}", i.primitive.id),
        };
    }
    Placement {
        primitive: None,
        running_here: false,
        desc: format!(
            "{what} (no resource with agent {} configured) on {node}",
            patterns.join(" or ")
        ),
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

fn pacemaker_section(
    doc: &CrmMon,
    instances: &[Instance<'_>],
    opts: &Options,
    omitted_nodes: Vec<OmittedNode>,
) -> PacemakerSection {
    let api_version = match &doc.format {
        crate::model::Format::PacemakerResult { api_version } => api_version.clone(),
        crate::model::Format::Legacy { .. } => "legacy".into(),
    };
    let fmt_time = |s: &Option<String>| {
        s.as_deref()
            .and_then(|s| parse_pacemaker_time(s, opts.local_offset))
            .map(format_k8s)
    };
    PacemakerSection {
        api_version,
        dc: doc.summary.dc.as_ref().map(|d| d.name.clone()),
        quorate: doc.summary.with_quorum,
        maintenance_mode: doc.summary.options.maintenance_mode,
        fencing_enabled: doc.summary.options.fencing_enabled,
        nodes: doc
            .nodes
            .iter()
            .map(|n| PmNode {
                name: n.name.clone(),
                id: n.id.clone(),
                online: n.online,
                standby: n.standby || n.standby_onfail,
                maintenance: n.maintenance,
                pending: n.pending,
                unclean: n.unclean,
                shutdown: n.shutdown,
                expected_up: n.expected_up,
                is_dc: n.is_dc,
                kind: n.node_type.as_str().into(),
                resources_running: n.resources_running,
            })
            .collect(),
        resources: instances
            .iter()
            .map(|i| PmResource {
                id: i.primitive.id.clone(),
                agent: i.primitive.agent.clone(),
                role: i.primitive.role.as_str().into(),
                target_role: i.primitive.target_role.map(|r| r.as_str().into()),
                active: i.primitive.active,
                failed: i.primitive.failed,
                managed: i.primitive.managed,
                blocked: i.primitive.blocked,
                orphaned: i.primitive.orphaned,
                nodes: i.primitive.nodes.clone(),
                parent: i.parent.map(str::to_owned),
                promotable: i.promotable,
            })
            .collect(),
        fence_history: doc
            .fence_history
            .iter()
            .flat_map(|h| &h.events)
            .map(|e| PmFenceEvent {
                target: e.target.clone(),
                action: e.action.clone(),
                status: e.status.as_str().into(),
                completed: e.completed.map(format_rfc3339_micro),
                delegate: e.delegate.clone(),
                origin: e.origin.clone(),
                client: e.client.clone(),
                exit_reason: e.exit_reason.clone(),
            })
            .collect(),
        failed_actions: doc
            .failures
            .iter()
            .map(|f| PmFailedAction {
                node: f.node.clone(),
                resource: f.resource().to_owned(),
                operation: f.operation(),
                rc: f.exit_code,
                rc_text: f.exit_status.clone(),
                exit_reason: f
                    .exit_reason
                    .clone()
                    .filter(|r| !r.is_empty() && r != "none"),
                last_rc_change: fmt_time(&f.last_rc_change),
            })
            .collect(),
        node_attributes: doc.node_attributes.clone(),
        omitted_nodes,
    }
}

fn format_rfc3339_micro(t: OffsetDateTime) -> String {
    let t = t.to_offset(UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// Keep each condition's `lastTransitionTime` from the previous report when
/// its status did not change: that time says how long a node has been
/// offline, which is lost if every run writes a fresh time.
pub fn carry_transition_times(new: &mut ClusterStatus, old: &ClusterStatus) {
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
