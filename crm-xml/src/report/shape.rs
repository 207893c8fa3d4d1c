//! The report's serialized shape: the `PacemakerCluster` CR (metadata and
//! status, whose field names and limits the CRD fixes) and the sections
//! the CRD cannot hold.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

impl ResourceStatus {
    /// The resource's state in one word or two, judged from its conditions
    /// in this order: `healthy`, `failed` (not Operational), `stopped`,
    /// `not active`, `unmanaged`, else `unhealthy`.
    pub fn state(&self) -> &'static str {
        let t = |kind: &str| {
            self.conditions
                .iter()
                .any(|c| c.kind == kind && c.status == ConditionStatus::True)
        };
        if t("Healthy") {
            "healthy"
        } else if !t("Operational") {
            "failed"
        } else if !t("Started") {
            "stopped"
        } else if !t("Active") {
            "not active"
        } else if !t("Managed") {
            "unmanaged"
        } else {
            "unhealthy"
        }
    }
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
    /// Set when the daemon refuses to go on by itself (no automatic
    /// answer is safe): the one command that resolves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_command: Option<String>,
    /// The node's etcd database as its member answered last: size, bytes
    /// in use, active alarms and the last defragmentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db: Option<NodeDb>,
}

/// A node's etcd database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeDb {
    /// Size of the database file (bytes).
    pub size: i64,
    /// Bytes of it in use (a defragment gives back the rest).
    pub size_in_use: i64,
    /// Active alarms (`NOSPACE`, `CORRUPT`); etcd raises them for the whole
    /// cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<String>,
    /// When the last defragmentation by this node's daemon started
    /// (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_defrag: Option<String>,
    /// How long it took (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_defrag_ms: Option<u64>,
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
