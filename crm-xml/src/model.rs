//! The typed model of a crm_mon XML document. Names follow Pacemaker's
//! attributes; values are normalised (roles, `fencing-*` vs `stonith-*`) so
//! that consumers never see version differences.

use std::collections::BTreeMap;
use std::fmt;

/// Which root element the document had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// `<pacemaker-result api-version=…>` (crm_mon --output-as=xml, Pacemaker 2.0.3+).
    PacemakerResult {
        /// The `api-version` attribute, e.g. "2.25".
        api_version: String,
    },
    /// Legacy `<crm_mon version=…>` (crm_mon --as-xml, and 2.0.0–2.0.2).
    Legacy {
        /// The `version` attribute (the Pacemaker version), if any.
        version: Option<String>,
    },
}

/// A whole crm_mon document.
#[derive(Debug, Clone, PartialEq)]
pub struct CrmMon {
    /// Root element kind and version.
    pub format: Format,
    /// `<pacemakerd state=…>`, if present.
    pub pacemakerd_state: Option<String>,
    /// `<summary>`; defaults when the section was excluded.
    pub summary: Summary,
    /// `<nodes>`.
    pub nodes: Vec<Node>,
    /// `<resources>`: top-level resources in document order.
    pub resources: Vec<Resource>,
    /// `<node_attributes>`: node name → attribute name → value.
    pub node_attributes: BTreeMap<String, BTreeMap<String, String>>,
    /// `<node_history>`.
    pub node_history: Vec<NodeHistory>,
    /// `<failures>`.
    pub failures: Vec<Failure>,
    /// `<fence_history>`; `None` when the section is absent (e.g. under
    /// `CIB_file`, where crm_mon never shows it).
    pub fence_history: Option<FenceHistory>,
    /// `<tickets>`.
    pub tickets: Vec<Ticket>,
    /// `<bans>`.
    pub bans: Vec<Ban>,
    /// `<status code message>` of a `pacemaker-result`.
    pub status: Option<ResultStatus>,
}

/// `<summary>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// `stack@type` ("corosync", or "unknown" under `CIB_file`).
    pub stack: Option<String>,
    /// The designated controller, if there is one.
    pub dc: Option<Dc>,
    /// `current_dc@with_quorum`; false when there is no DC.
    pub with_quorum: bool,
    /// `last_update@time`, as printed.
    pub last_update: Option<String>,
    /// `nodes_configured@number`.
    pub nodes_configured: Option<u32>,
    /// `resources_configured@number`.
    pub resources_configured: Option<u32>,
    /// `cluster_options`.
    pub options: ClusterOptions,
}

/// The DC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dc {
    /// Node name.
    pub name: String,
    /// Node id.
    pub id: Option<String>,
    /// Pacemaker version on the DC.
    pub version: Option<String>,
}

/// `<cluster_options>`. `fencing_*` are read from the 3.0.2 names first and
/// fall back to the older `stonith-*` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// `fencing-enabled` / `stonith-enabled`; Pacemaker's default is true.
    pub fencing_enabled: bool,
    /// `maintenance-mode`.
    pub maintenance_mode: bool,
    /// `no-quorum-policy`.
    pub no_quorum_policy: Option<String>,
    /// `stop-all-resources`.
    pub stop_all_resources: bool,
    /// `fencing-timeout-ms` / `stonith-timeout-ms`.
    pub fencing_timeout_ms: Option<u64>,
    /// `priority-fencing-delay-ms`.
    pub priority_fencing_delay_ms: Option<u64>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            fencing_enabled: true,
            maintenance_mode: false,
            no_quorum_policy: None,
            stop_all_resources: false,
            fencing_timeout_ms: None,
            priority_fencing_delay_ms: None,
        }
    }
}

/// `node@type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    /// A full cluster node.
    Member,
    /// A remote or guest (bundle) node.
    Remote,
    /// A ping node (removed in 3.0).
    Ping,
    /// Type not known to Pacemaker.
    Unknown,
}

impl NodeType {
    /// The spelling crm_mon uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Remote => "remote",
            Self::Ping => "ping",
            Self::Unknown => "unknown",
        }
    }
}

/// `<nodes><node>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `name`.
    pub name: String,
    /// `id` (corosync node id, or a UUID in old CIBs).
    pub id: String,
    /// `online`.
    pub online: bool,
    /// `standby`.
    pub standby: bool,
    /// `standby_onfail`.
    pub standby_onfail: bool,
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
    /// `resources_running`.
    pub resources_running: u32,
    /// `type`.
    pub node_type: NodeType,
    /// `health` (red/yellow/green), if printed.
    pub health: Option<String>,
    /// `container_id` / `id_as_resource` of guest nodes.
    pub container_id: Option<String>,
}

/// A resource role, normalised across Pacemaker versions: Master ≡ Promoted,
/// Slave ≡ Unpromoted, and a Started instance of a promotable clone ≡
/// Unpromoted (what crm_mon 2.1+ prints anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Stopped.
    Stopped,
    /// Started.
    Started,
    /// Unpromoted (Slave).
    Unpromoted,
    /// Promoted (Master).
    Promoted,
    /// Pending start.
    Starting,
    /// Pending stop.
    Stopping,
    /// Pending promote.
    Promoting,
    /// Pending demote.
    Demoting,
    /// Pending migration.
    Migrating,
    /// Pacemaker's own "Unknown".
    Unknown,
}

impl Role {
    /// Parse any spelling crm_mon (or a CIB `target-role`) uses, case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "stopped" => Self::Stopped,
            "started" => Self::Started,
            "unpromoted" | "slave" => Self::Unpromoted,
            "promoted" | "master" => Self::Promoted,
            "starting" => Self::Starting,
            "stopping" => Self::Stopping,
            "promoting" => Self::Promoting,
            "demoting" => Self::Demoting,
            "migrating" => Self::Migrating,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }

    /// Canonical (Pacemaker 2.1+) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stopped => "Stopped",
            Self::Started => "Started",
            Self::Unpromoted => "Unpromoted",
            Self::Promoted => "Promoted",
            Self::Starting => "Starting",
            Self::Stopping => "Stopping",
            Self::Promoting => "Promoting",
            Self::Demoting => "Demoting",
            Self::Migrating => "Migrating",
            Self::Unknown => "Unknown",
        }
    }

    /// Whether the instance runs and serves (Started, Unpromoted or Promoted).
    pub fn is_running(self) -> bool {
        matches!(self, Self::Started | Self::Unpromoted | Self::Promoted)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A resource in the `<resources>` tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Resource {
    /// `<resource>`.
    Primitive(Primitive),
    /// `<group>`.
    Group(Group),
    /// `<clone>`.
    Clone(Clone),
    /// `<bundle>`.
    Bundle(Bundle),
}

impl Resource {
    /// The resource's id.
    pub fn id(&self) -> &str {
        match self {
            Self::Primitive(p) => &p.id,
            Self::Group(g) => &g.id,
            Self::Clone(c) => &c.id,
            Self::Bundle(b) => &b.id,
        }
    }
}

/// One instance of a primitive (`<resource>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Primitive {
    /// `id` (clone instances share it).
    pub id: String,
    /// `resource_agent`, e.g. `ocf:heartbeat:podman-etcd`, `stonith:fence_redfish`.
    pub agent: String,
    /// `role`, normalised.
    pub role: Role,
    /// `target_role`, normalised, if configured.
    pub target_role: Option<Role>,
    /// `active`.
    pub active: bool,
    /// `orphaned` (or 3.0.2 `removed`).
    pub orphaned: bool,
    /// `blocked`.
    pub blocked: bool,
    /// `managed`.
    pub managed: bool,
    /// `failed`.
    pub failed: bool,
    /// `failure_ignored`.
    pub failure_ignored: bool,
    /// `maintenance` (newer Pacemaker only).
    pub maintenance: bool,
    /// `nodes_running_on`.
    pub nodes_running_on: u32,
    /// `pending` operation, e.g. "Monitoring".
    pub pending: Option<String>,
    /// `locked_to` (shutdown lock).
    pub locked_to: Option<String>,
    /// Names of the nodes it runs on (child `<node name>`).
    pub nodes: Vec<String>,
}

/// `<group>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// `id`.
    pub id: String,
    /// `managed`.
    pub managed: bool,
    /// `disabled`.
    pub disabled: bool,
    /// `maintenance`.
    pub maintenance: bool,
    /// Member primitives.
    pub members: Vec<Primitive>,
}

/// `<clone>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Clone {
    /// `id`.
    pub id: String,
    /// `multi_state`: the clone is promotable.
    pub promotable: bool,
    /// `unique`.
    pub unique: bool,
    /// `managed`.
    pub managed: bool,
    /// `disabled`.
    pub disabled: bool,
    /// `failed`.
    pub failed: bool,
    /// `maintenance`.
    pub maintenance: bool,
    /// `target_role`.
    pub target_role: Option<Role>,
    /// Instances: primitives or groups.
    pub children: Vec<Resource>,
}

/// `<bundle>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    /// `id`.
    pub id: String,
    /// `type` (docker, podman, rkt).
    pub container_type: Option<String>,
    /// `image`.
    pub image: Option<String>,
    /// `unique`.
    pub unique: bool,
    /// `managed`.
    pub managed: bool,
    /// `failed`.
    pub failed: bool,
    /// `maintenance`.
    pub maintenance: bool,
    /// `<replica>`s.
    pub replicas: Vec<Replica>,
}

/// `<replica id>` of a bundle: its IP, container and remote connection, plus
/// the bundled resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// `id`.
    pub id: String,
    /// The primitives inside the replica.
    pub primitives: Vec<Primitive>,
}

/// `<node_history><node>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHistory {
    /// Node name.
    pub node: String,
    /// Per-resource histories.
    pub resources: Vec<ResourceHistory>,
}

/// `<resource_history>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceHistory {
    /// Resource id.
    pub id: String,
    /// `orphan` / `removed`.
    pub orphan: bool,
    /// `fail-count`.
    pub fail_count: Option<String>,
    /// `migration-threshold`.
    pub migration_threshold: Option<String>,
    /// Operations.
    pub operations: Vec<Operation>,
}

/// `<operation_history>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// `call` id.
    pub call: Option<i64>,
    /// `task`.
    pub task: String,
    /// `interval`, as printed (e.g. "10000ms").
    pub interval: Option<String>,
    /// `rc`.
    pub rc: i32,
    /// `rc_text`.
    pub rc_text: Option<String>,
    /// `exit-reason`.
    pub exit_reason: Option<String>,
    /// `last-rc-change`, as printed.
    pub last_rc_change: Option<String>,
}

/// `<failures><failure>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `op_key` (or `id` in older versions), e.g. `dummy_monitor_5000`.
    pub op_key: String,
    /// `node`.
    pub node: String,
    /// `exitstatus` (text).
    pub exit_status: Option<String>,
    /// `exitreason`.
    pub exit_reason: Option<String>,
    /// `exitcode`.
    pub exit_code: Option<i32>,
    /// `call`.
    pub call: Option<i64>,
    /// `status` (execution status text).
    pub status: Option<String>,
    /// `last-rc-change`, as printed.
    pub last_rc_change: Option<String>,
    /// `task`.
    pub task: Option<String>,
    /// `interval` in ms.
    pub interval_ms: Option<u64>,
}

impl Failure {
    /// The resource id, derived from the operation key
    /// `<rsc>_<task>_<interval>` (resource ids may themselves contain `_`).
    pub fn resource(&self) -> &str {
        // With the task known, strip exactly `_<task>_<interval>`, so that
        // tasks containing `_` (migrate_to) are handled.
        if let Some(task) = &self.task
            && let Some(i) = self.op_key.rfind(&format!("_{task}_"))
            && i > 0
        {
            return &self.op_key[..i];
        }
        let mut rest = self.op_key.as_str();
        for _ in 0..2 {
            match rest.rfind('_') {
                Some(i) => rest = &rest[..i],
                None => return &self.op_key,
            }
        }
        rest
    }

    /// The operation name, from `task` or the operation key.
    pub fn operation(&self) -> String {
        if let Some(t) = &self.task {
            return t.clone();
        }
        let rsc = self.resource();
        self.op_key
            .get(rsc.len()..)
            .and_then(|s| s.strip_prefix('_'))
            .and_then(|s| s.rsplit_once('_'))
            .map_or_else(String::new, |(task, _)| task.to_owned())
    }
}

/// `<fence_history>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FenceHistory {
    /// `status`: set only when the history query failed (the rc).
    pub query_status: Option<i32>,
    /// Events, newest first as crm_mon prints them.
    pub events: Vec<FenceEvent>,
}

/// `fence_event@status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceStatus {
    /// Done and succeeded.
    Success,
    /// Done and failed.
    Failed,
    /// Still in progress.
    Pending,
}

impl FenceStatus {
    /// Pacemaker's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failed => "failed",
            Self::Pending => "pending",
        }
    }
}

/// `<fence_event>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceEvent {
    /// `target` node.
    pub target: String,
    /// `action` (reboot, off, on).
    pub action: String,
    /// `status`.
    pub status: FenceStatus,
    /// `completed`, parsed; absent on pending events.
    pub completed: Option<time::OffsetDateTime>,
    /// `delegate`: the node that executed it.
    pub delegate: Option<String>,
    /// `origin`: the node that asked.
    pub origin: Option<String>,
    /// `client`, e.g. `pacemaker-controld.1234`.
    pub client: Option<String>,
    /// `exit-reason` (failed events, 2.1.3+).
    pub exit_reason: Option<String>,
}

/// `<tickets><ticket>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// `id`.
    pub id: String,
    /// `status` == granted.
    pub granted: bool,
    /// `standby`.
    pub standby: bool,
    /// `last-granted`, as printed.
    pub last_granted: Option<String>,
}

/// `<bans><ban>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ban {
    /// Constraint id.
    pub id: String,
    /// Banned resource.
    pub resource: String,
    /// Node it is banned from.
    pub node: String,
    /// Score.
    pub weight: String,
    /// Ban applies only to the promoted role.
    pub promoted_only: bool,
}

/// `<status code message>` closing a `pacemaker-result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultStatus {
    /// Exit code crm_mon reports.
    pub code: i32,
    /// Its text.
    pub message: Option<String>,
    /// `<errors><error>` texts.
    pub errors: Vec<String>,
}

impl CrmMon {
    /// Every primitive instance with its parent id and whether it belongs to a
    /// promotable clone, depth first in document order.
    pub fn primitive_instances(&self) -> Vec<Instance<'_>> {
        let mut out = Vec::new();
        for r in &self.resources {
            collect_instances(r, None, false, &mut out);
        }
        out
    }

    /// The node with this name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// A primitive instance in context.
#[derive(Debug, Clone, Copy)]
pub struct Instance<'a> {
    /// The primitive.
    pub primitive: &'a Primitive,
    /// The immediate parent (group, clone or bundle) id.
    pub parent: Option<&'a str>,
    /// Inside a promotable clone.
    pub promotable: bool,
}

fn collect_instances<'a>(
    r: &'a Resource,
    parent: Option<&'a str>,
    promotable: bool,
    out: &mut Vec<Instance<'a>>,
) {
    match r {
        Resource::Primitive(p) => out.push(Instance {
            primitive: p,
            parent,
            promotable,
        }),
        Resource::Group(g) => {
            for p in &g.members {
                out.push(Instance {
                    primitive: p,
                    parent: Some(&g.id),
                    promotable,
                });
            }
        }
        Resource::Clone(c) => {
            for child in &c.children {
                collect_instances(child, Some(&c.id), promotable || c.promotable, out);
            }
        }
        Resource::Bundle(b) => {
            for rep in &b.replicas {
                for p in &rep.primitives {
                    out.push(Instance {
                        primitive: p,
                        parent: Some(&b.id),
                        promotable,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_resource_and_operation() {
        let f = Failure {
            op_key: "my_rsc_monitor_5000".into(),
            node: "n".into(),
            exit_status: None,
            exit_reason: None,
            exit_code: None,
            call: None,
            status: None,
            last_rc_change: None,
            task: None,
            interval_ms: None,
        };
        assert_eq!(f.resource(), "my_rsc");
        assert_eq!(f.operation(), "monitor");
        let g = Failure {
            op_key: "x".into(),
            ..f
        };
        assert_eq!(g.resource(), "x");
        assert_eq!(g.operation(), "");
    }

    #[test]
    fn roles() {
        assert_eq!(Role::parse("Master"), Some(Role::Promoted));
        assert_eq!(Role::parse("slave"), Some(Role::Unpromoted));
        assert_eq!(Role::parse("started"), Some(Role::Started));
        assert_eq!(Role::parse("bogus"), None);
    }
}
