//! The `pacemaker` section: what crm_mon shows that the CR's status has no
//! field for (quorum, DC, every node and resource, fence history, failed
//! actions).

use super::{
    OmittedNode, Options, PacemakerSection, PmFailedAction, PmFenceEvent, PmNode, PmResource,
};
use crate::model::{CrmMon, Instance};
use crate::timefmt::{format_k8s, format_rfc3339_micro, parse_pacemaker_time};

pub(super) fn pacemaker_section(
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
