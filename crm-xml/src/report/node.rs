//! One member node's entry in the report's `status.nodes`: its addresses,
//! its resources, the fence devices that target it and its conditions, or
//! the reason the node is left out.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::conditions::{
    Cond, Placement, agent_matches, cond, fencing_method, is_true, place, resource_conditions,
    valid_agent_name,
};
use super::{
    Condition, FencingAgentStatus, FencingMethod, MAX_ADDRESSES, MAX_FENCING_AGENTS,
    MAX_STATUS_NODES, NodeAddress, NodeStatus, OmittedNode, Options, Profile, ResourceName,
    ResourceStatus, valid_crd_address, valid_node_name,
};
use crate::model::{CrmMon, Instance, Node, NodeType};

/// What every node's entry is built from.
pub(super) struct NodeBuilder<'a> {
    doc: &'a CrmMon,
    opts: &'a Options,
    instances: &'a [Instance<'a>],
    fence_instances: Vec<&'a Instance<'a>>,
    now_s: &'a str,
    openshift: bool,
    /// Under `generic`, kubelet is judged only where the cluster has one.
    judge_kubelet: bool,
    cluster_maint: bool,
}

/// The fence devices that target one node, as its conditions see them.
struct NodeFencing {
    agents: Vec<FencingAgentStatus>,
    available: bool,
    healthy: bool,
    message: String,
}

/// The fence devices found for one node, before they are judged.
#[derive(Default)]
struct FenceDevices {
    agents: Vec<FencingAgentStatus>,
    any_available: bool,
    all_healthy: bool,
    count: usize,
    notes: Vec<String>,
}

impl<'a> NodeBuilder<'a> {
    pub(super) fn new(
        doc: &'a CrmMon,
        opts: &'a Options,
        instances: &'a [Instance<'a>],
        now_s: &'a str,
    ) -> Self {
        let openshift = opts.profile == Profile::OpenShift;
        NodeBuilder {
            doc,
            opts,
            instances,
            fence_instances: instances
                .iter()
                .filter(|i| agent_matches(&opts.fence_agents, &i.primitive.agent))
                .collect(),
            now_s,
            openshift,
            judge_kubelet: openshift
                || instances
                    .iter()
                    .any(|i| agent_matches(&opts.kubelet_agents, &i.primitive.agent)),
            cluster_maint: doc.summary.options.maintenance_mode,
        }
    }

    /// The entries of `members`, in order, and the nodes left out.
    pub(super) fn nodes(&self, members: &[&Node]) -> (Vec<NodeStatus>, Vec<OmittedNode>) {
        let mut nodes = Vec::new();
        let mut omitted = Vec::new();
        for n in members {
            match self.node(n, nodes.len()) {
                Ok(status) => nodes.push(status),
                Err(o) => omitted.push(o),
            }
        }
        (nodes, omitted)
    }

    /// One node's entry, after `listed` entries; under `openshift`, a node
    /// the CRD cannot hold is left out with the reason.
    fn node(&self, n: &Node, listed: usize) -> Result<NodeStatus, OmittedNode> {
        let omit = |reason: String| OmittedNode {
            name: n.name.clone(),
            reason,
        };
        if self.openshift && !valid_node_name(&n.name) {
            return Err(omit(
                "node name is not an RFC 1123 subdomain, which the CRD requires".into(),
            ));
        }
        let addresses = self.addresses(n);
        if self.openshift && addresses.is_empty() {
            return Err(omit(if self.opts.node_addresses.contains_key(&n.name) {
                "no configured address is a canonical global-unicast IP".into()
            } else {
                "address unknown (no Corosync node list or configured address for it)".into()
            }));
        }
        if self.openshift && listed >= MAX_STATUS_NODES {
            return Err(omit(format!(
                "the CRD allows at most {MAX_STATUS_NODES} nodes"
            )));
        }
        let resources = self.resources(n);
        let fencing = self.fencing(n);
        let conditions = self.conditions(n, &resources, &fencing);
        Ok(NodeStatus {
            node_name: n.name.clone(),
            addresses,
            conditions,
            resources,
            fencing_agents: fencing.agents,
        })
    }

    /// The node's configured addresses: under `openshift` those the CRD
    /// accepts, at most [`MAX_ADDRESSES`]; otherwise any IP, written
    /// canonically, each once.
    fn addresses(&self, n: &Node) -> Vec<NodeAddress> {
        let known = self.opts.node_addresses.get(&n.name).into_iter().flatten();
        let addresses: Vec<String> = if self.openshift {
            known
                .filter(|a| valid_crd_address(a))
                .take(MAX_ADDRESSES)
                .cloned()
                .collect()
        } else {
            let mut v: Vec<String> = Vec::new();
            for ip in known.filter_map(|a| a.parse::<IpAddr>().ok()) {
                let ip = ip.to_string();
                if !v.contains(&ip) {
                    v.push(ip);
                }
            }
            v
        };
        addresses
            .into_iter()
            .map(|address| NodeAddress {
                kind: "InternalIP".into(),
                address,
            })
            .collect()
    }

    /// The kubelet (where judged) and etcd resources on the node.
    fn resources(&self, n: &Node) -> Vec<ResourceStatus> {
        let node_maint = self.cluster_maint || n.maintenance;
        let mut resources = Vec::new();
        if self.judge_kubelet {
            let kubelet = place(
                self.instances,
                &self.opts.kubelet_agents,
                &n.name,
                "kubelet",
            );
            resources.push(ResourceStatus {
                name: ResourceName::Kubelet,
                conditions: resource_conditions(&kubelet, node_maint, self.now_s),
            });
        }
        let etcd = place(self.instances, &self.opts.etcd_agents, &n.name, "etcd");
        resources.push(ResourceStatus {
            name: ResourceName::Etcd,
            conditions: resource_conditions(&etcd, node_maint, self.now_s),
        });
        resources
    }

    /// Whether the node can be fenced, and how well.
    fn fencing(&self, n: &Node) -> NodeFencing {
        let devices = self.fence_devices(n);
        let message = self.fencing_message(n, &devices);
        let available = self.doc.summary.options.fencing_enabled && devices.any_available;
        let healthy = available && devices.count > 0 && devices.all_healthy;
        NodeFencing {
            agents: devices.agents,
            available,
            healthy,
            message,
        }
    }

    /// Fence devices that target this node (by the CIB, never by id).
    fn fence_devices(&self, n: &Node) -> FenceDevices {
        let mut found = FenceDevices {
            all_healthy: true,
            ..FenceDevices::default()
        };
        let Some(targets) = &self.opts.fence_targets else {
            return found;
        };
        let mut seen = BTreeSet::new();
        for f in &self.fence_instances {
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
            let best = self
                .fence_instances
                .iter()
                .filter(|g| g.primitive.id == id)
                .find(|g| !g.primitive.nodes.is_empty())
                .unwrap_or(f);
            self.fence_device(id, best, &mut found);
        }
        found
    }

    /// One fence device `id`, judged by its instance `best`.
    fn fence_device(&self, id: &str, best: &Instance<'_>, found: &mut FenceDevices) {
        let placement = Placement {
            primitive: Some(best.primitive),
            running_here: !best.primitive.nodes.is_empty(),
            desc: format!("fence device {id}"),
        };
        let conds = resource_conditions(&placement, self.cluster_maint, self.now_s);
        found.count += 1;
        let available = is_true(&conds, "Active")
            && is_true(&conds, "Started")
            && is_true(&conds, "Operational");
        found.any_available |= available;
        found.all_healthy &= is_true(&conds, "Healthy");
        let method = fencing_method(&best.primitive.agent)
            .or((!self.openshift).then_some(FencingMethod::Other));
        match method {
            Some(method)
                if !self.openshift
                    || (valid_agent_name(id) && found.agents.len() < MAX_FENCING_AGENTS) =>
            {
                found.agents.push(FencingAgentStatus {
                    name: id.to_owned(),
                    method,
                    conditions: conds,
                });
            }
            _ => found.notes.push(format!(
                "{id} ({}) is not listed: its method is neither Redfish nor IPMI",
                best.primitive.agent
            )),
        }
    }

    fn fencing_message(&self, n: &Node, devices: &FenceDevices) -> String {
        if !self.doc.summary.options.fencing_enabled {
            "fencing is disabled in the cluster options".to_owned()
        } else if self.opts.fence_targets.is_none() {
            "fence device targets unknown: no CIB was read".to_owned()
        } else if devices.count == 0 {
            format!(
                "no fence device lists {} in pcmk_host_list or pcmk_host_map",
                n.name
            )
        } else {
            let mut m = format!("{} fence device(s) can fence {}", devices.count, n.name);
            for note in &devices.notes {
                m.push_str("; ");
                m.push_str(note);
            }
            m
        }
    }

    /// The node's conditions: `Healthy` first, then one per state.
    fn conditions(
        &self,
        n: &Node,
        resources: &[ResourceStatus],
        fencing: &NodeFencing,
    ) -> Vec<Condition> {
        let mk = |kind, ok, t, f, msg: String| {
            cond(
                Cond {
                    kind,
                    ok,
                    true_reason: t,
                    false_reason: f,
                    message: msg,
                },
                self.now_s,
            )
        };
        let name = &n.name;
        let state = NodeState::of(n);
        let failures = failures(&state, resources, fencing);
        let healthy =
            failures.is_empty() && resources.iter().all(|r| is_true(&r.conditions, "Healthy"));
        vec![
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
                state.online,
                "Online",
                "Offline",
                format!(
                    "{name} is {}",
                    if state.online { "online" } else { "offline" }
                ),
            ),
            mk(
                "InService",
                state.in_service,
                "InService",
                "InMaintenance",
                format!(
                    "{name} is {}",
                    if state.in_service {
                        "in service"
                    } else {
                        "in maintenance mode"
                    }
                ),
            ),
            mk(
                "Active",
                state.active,
                "Active",
                "Standby",
                format!(
                    "{name} is {}",
                    if state.active { "active" } else { "in standby" }
                ),
            ),
            mk(
                "Ready",
                state.ready,
                "Ready",
                "Pending",
                format!(
                    "{name} is {}",
                    if state.ready { "ready" } else { "pending" }
                ),
            ),
            mk(
                "Clean",
                state.clean,
                "Clean",
                "Unclean",
                format!(
                    "{name} is {}",
                    if state.clean { "clean" } else { "unclean" }
                ),
            ),
            mk(
                "Member",
                state.member,
                "Member",
                "NotMember",
                format!("{name} is a cluster member"),
            ),
            mk(
                "FencingAvailable",
                fencing.available,
                "FencingAvailable",
                "FencingUnavailable",
                fencing.message.clone(),
            ),
            mk(
                "FencingHealthy",
                fencing.healthy,
                "FencingHealthy",
                "FencingUnhealthy",
                fencing.message.clone(),
            ),
        ]
    }
}

/// The node's own states, each `true` when good.
struct NodeState {
    online: bool,
    in_service: bool,
    active: bool,
    ready: bool,
    clean: bool,
    member: bool,
}

impl NodeState {
    fn of(n: &Node) -> Self {
        NodeState {
            online: n.online,
            in_service: !n.maintenance,
            active: !(n.standby || n.standby_onfail),
            ready: !n.pending,
            clean: !n.unclean,
            member: n.node_type == NodeType::Member,
        }
    }
}

/// What keeps the node from being healthy, for the `Healthy` message.
fn failures(state: &NodeState, resources: &[ResourceStatus], fencing: &NodeFencing) -> Vec<String> {
    let mut failures = Vec::new();
    for (ok, what) in [
        (state.online, "offline"),
        (state.in_service, "in maintenance mode"),
        (state.active, "in standby mode"),
        (state.ready, "pending"),
        (state.clean, "unclean (fencing/communication issue)"),
        (state.member, "not a cluster member"),
        (fencing.available, "fencing unavailable"),
        (fencing.healthy, "fencing unhealthy"),
    ] {
        if !ok {
            failures.push(what.to_owned());
        }
    }
    for r in resources {
        if !is_true(&r.conditions, "Healthy") {
            failures.push(format!("{:?} is unhealthy", r.name));
        }
    }
    failures
}
