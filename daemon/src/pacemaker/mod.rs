//! Pacemaker's view for `decide`: crm_mon XML (with fence history) turned
//! into a [`PacemakerView`], and this project's transient node attributes
//! (the published record and the force-new-cluster claim) read and written
//! with `crm_attribute --lifetime reboot`.
//!
//! Every call runs under a deadline; the child is killed by its own handle
//! when it passes. Nothing read here is kept for a later decision.

mod tools;

use std::collections::BTreeMap;
use std::time::Duration;

use crm_xml::model::{CrmMon, FenceStatus as XmlFenceStatus};
use warden_failover::{
    Claim, DataRecord, FenceAction, FenceEvent, FenceStatus, NodeView, PacemakerView,
    ResourceState, Stamp,
};

use crate::tool::ToolError;

pub use tools::CrmTools;

/// The attribute holding a node's published record.
pub(crate) const RECORD_ATTR: &str = "etcd-warden-record";
/// The attribute holding a node's force-new-cluster claim.
pub(crate) const CLAIM_ATTR: &str = "etcd-warden-claim";
/// The OCF agent this project's etcd instances run with.
pub(crate) const AGENT: &str = "ocf:etcd-warden:etcd";

// The report cycle's commands (`crate::report_cycle`), run by the one
// runner like the reconciler's below.

/// The crm_mon call of a cycle. `--fence-history=2` adds the latest
/// successful fence of each node to the failed and pending ones crm_mon
/// shows by default, so that the report (and `status`) name the last fence.
pub const CRM_MON_CMD: [&str; 5] = [
    "crm_mon",
    "--one-shot",
    "--inactive",
    "--output-as=xml",
    "--fence-history=2",
];

/// The cibadmin call that prints the live CIB (when its file is unreadable).
pub const CIBADMIN_CMD: [&str; 2] = ["cibadmin", "--query"];

/// The corosync-cmapctl call that prints Corosync's runtime node list.
pub const CMAPCTL_CMD: [&str; 2] = ["corosync-cmapctl", "nodelist.node."];

/// A Pacemaker tool failed.
#[derive(Debug, thiserror::Error)]
pub enum PcmkError {
    /// The tool could not be run, or did not finish within its deadline
    /// or output cap (the child was killed).
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// It exited with an error.
    #[error("{tool} failed (exit code {code:?}): {message}")]
    Failed {
        /// The program.
        tool: &'static str,
        /// Its exit code.
        code: Option<i32>,
        /// stderr or crm_mon's `<error>` texts.
        message: String,
    },
    /// Its output did not parse.
    #[error("{what}: {message}")]
    Parse {
        /// What was parsed.
        what: String,
        /// Why it failed.
        message: String,
    },
}

/// What the daemon asks of Pacemaker. A trait so that the reconciler can
/// be tested against a fake or a simulated cluster; object-safe, so that
/// the daemon holds one chosen at run time ([`SharedPacemaker`]).
#[async_trait::async_trait]
pub trait Pacemaker: Send + Sync + std::fmt::Debug {
    /// crm_mon's view, now.
    async fn crm_mon(&self, deadline: Duration) -> Result<CrmMon, PcmkError>;
    /// A transient attribute of `node`; `None` when it is not set.
    async fn get_attr(
        &self,
        node: &str,
        name: &str,
        deadline: Duration,
    ) -> Result<Option<String>, PcmkError>;
    /// Set a transient (reboot lifetime) attribute of `node`.
    async fn set_attr(
        &self,
        node: &str,
        name: &str,
        value: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError>;
    /// Delete a transient attribute of `node`; absent is fine.
    async fn delete_attr(
        &self,
        node: &str,
        name: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError>;
    /// Clear Pacemaker's record of failed starts of `resource` on `node`
    /// (`crm_resource --cleanup --operation start`), so that Pacemaker may
    /// start it there again.
    async fn clear_failed_start(
        &self,
        resource: &str,
        node: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError>;
    /// The node of `nodes` that wins fence races: the only one whose
    /// fencing is delayed in the CIB's stonith resources (see
    /// `crm_xml::cib::FenceTargets::fence_race_winner`); `None` when none
    /// is. Fakes without fence devices keep the default.
    async fn fence_race_winner(
        &self,
        nodes: &[String],
        deadline: Duration,
    ) -> Result<Option<String>, PcmkError> {
        let _ = (nodes, deadline);
        Ok(None)
    }
}

/// The Pacemaker the daemon holds: its tools, or a test's stand-in.
pub type SharedPacemaker = std::sync::Arc<dyn Pacemaker>;
/// A Pacemaker timestamp as a [`Stamp`].
fn stamp(s: &str) -> Option<Stamp> {
    crm_xml::timefmt::parse_pacemaker_time(s, time::UtcOffset::UTC)
        .and_then(|t| u64::try_from(t.unix_timestamp()).ok())
        .map(Stamp)
}

/// The state of this project's etcd instance on `node`, from the resources
/// and the node's operation history.
fn resource_state(doc: &CrmMon, node: &str) -> ResourceState {
    for i in doc.primitive_instances() {
        let p = i.primitive;
        if p.agent != AGENT {
            continue;
        }
        if p.nodes.iter().any(|n| n == node) {
            return match p.pending.as_deref() {
                Some("Starting") => ResourceState::Starting,
                Some("Stopping") => ResourceState::Stopping,
                _ if p.active => ResourceState::Started,
                _ => ResourceState::Unknown,
            };
        }
    }
    // Not running there: a completed stop in the history is proof that its
    // etcd is down; the last start/stop by call id decides.
    let ids = agent_ids(doc);
    let last = doc
        .node_history
        .iter()
        .filter(|h| h.node == node)
        .flat_map(|h| &h.resources)
        .filter(|r| ids.contains(&base_id(&r.id)))
        .flat_map(|r| &r.operations)
        .filter(|o| o.task == "start" || o.task == "stop")
        .max_by_key(|o| o.call.unwrap_or(i64::MIN));
    match last {
        Some(o) if o.task == "stop" && o.rc == 0 => {
            match o.last_rc_change.as_deref().and_then(stamp) {
                Some(at) => ResourceState::Stopped { at },
                None => ResourceState::Unknown,
            }
        }
        _ => ResourceState::Unknown,
    }
}

/// A fence event of crm_mon's history.
fn fence_event(e: &crm_xml::model::FenceEvent) -> Option<FenceEvent> {
    Some(FenceEvent {
        target: e.target.clone(),
        action: fence_action(&e.action)?,
        status: match e.status {
            XmlFenceStatus::Success => FenceStatus::Success,
            XmlFenceStatus::Failed => FenceStatus::Failed,
            XmlFenceStatus::Pending => FenceStatus::Pending,
        },
        completed: e
            .completed
            .and_then(|t| u64::try_from(t.unix_timestamp()).ok())
            .map(Stamp),
    })
}

/// Pacemaker's fence action names.
pub(crate) fn fence_action(s: &str) -> Option<FenceAction> {
    match s {
        "reboot" => Some(FenceAction::Reboot),
        "off" => Some(FenceAction::Off),
        "on" => Some(FenceAction::On),
        _ => None,
    }
}

/// A fence result pushed by the alert agent, as a fact exactly like a
/// fence history entry. `None` for anything else.
pub(crate) fn alert_fence_event(ev: &warden_api::ClusterEvent) -> Option<FenceEvent> {
    if ev.kind != "fencing" {
        return None;
    }
    let target = ev.node.clone()?;
    let action = fence_action(ev.task.as_deref()?)?;
    let status = match ev.rc {
        Some(0) => FenceStatus::Success,
        Some(_) => FenceStatus::Failed,
        None => return None,
    };
    Some(FenceEvent {
        target,
        action,
        status,
        completed: ev
            .timestamp_epoch
            .and_then(|t| u64::try_from(t).ok())
            .map(Stamp),
    })
}

/// Pacemaker's view for `decide`: the configured nodes as crm_mon shows
/// them, with their attributes, the fence history (an operator's
/// `stonith_admin --confirm` included: it is recorded as a successful fence
/// with delegate "a human"), and the maintenance settings that pause
/// automatic failover.
///
/// No join time is read or kept: a fence proves a peer down only together
/// with Pacemaker's own record that the peer's membership ended (offline,
/// not unclean, not expected up; see `warden_failover::peer_down_proof`),
/// never by comparing its stamp with a clock reading of this daemon's.
pub(crate) fn view(
    doc: &CrmMon,
    configured: &[String],
    attrs: &BTreeMap<String, (Option<DataRecord>, Option<Claim>)>,
) -> PacemakerView {
    let nodes = configured
        .iter()
        .map(|name| {
            let n = doc.node(name);
            let (record, claim) = attrs.get(name).cloned().unwrap_or_default();
            NodeView {
                name: name.clone(),
                online: n.is_some_and(|n| n.online),
                unclean: n.is_some_and(|n| n.unclean),
                expected_up: n.is_some_and(|n| n.expected_up),
                shutdown: n.is_some_and(|n| n.shutdown),
                standby: n.is_some_and(|n| n.standby),
                maintenance: n.is_some_and(|n| n.maintenance),
                last_seen: None,
                etcd: resource_state(doc, name),
                record,
                claim,
                start_failed_without_daemon: start_failed_without_daemon(doc, name),
            }
        })
        .collect();
    PacemakerView {
        quorate: doc.summary.with_quorum,
        maintenance_mode: doc.summary.options.maintenance_mode,
        etcd_unmanaged: etcd_unmanaged(doc),
        // Read from the CIB's configuration by the gathering, not crm_mon.
        fence_race_winner: None,
        nodes,
        fence_history: doc
            .fence_history
            .iter()
            .flat_map(|h| &h.events)
            .filter_map(fence_event)
            .collect(),
    }
}

/// A resource id without its clone instance (`etcd:1` → `etcd`).
fn base_id(id: &str) -> &str {
    id.split(':').next().unwrap_or(id)
}

/// The ids of this project's agent's resources (clone instances folded).
fn agent_ids(doc: &CrmMon) -> Vec<&str> {
    doc.primitive_instances()
        .into_iter()
        .filter(|i| i.primitive.agent == AGENT)
        .map(|i| base_id(&i.primitive.id))
        .collect()
}

/// The etcd resource (this project's agent) whose start Pacemaker lists as
/// failed on `node` with the agent's reason for "no daemon answered".
fn start_failed_without_daemon(doc: &CrmMon, node: &str) -> Option<String> {
    let ours = agent_ids(doc);
    doc.failures
        .iter()
        .filter(|f| f.node == node && f.task.as_deref() == Some("start"))
        .filter(|f| {
            f.exit_reason
                .as_deref()
                .is_some_and(|r| r.contains(warden_api::DAEMON_UNREACHABLE))
        })
        .map(|f| base_id(f.resource()))
        .find(|r| ours.contains(r))
        .map(str::to_string)
}

/// Whether the etcd resource is not managed by Pacemaker: an instance of
/// this project's agent shows `managed="false"` (`is-managed=false`, or
/// maintenance mode, or its node in maintenance) or `maintenance="true"`.
fn etcd_unmanaged(doc: &CrmMon) -> bool {
    doc.primitive_instances()
        .iter()
        .any(|i| i.primitive.agent == AGENT && (!i.primitive.managed || i.primitive.maintenance))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Facts of nodeA with this view, for the proof.
    fn facts_for(pacemaker: PacemakerView) -> warden_failover::Facts {
        warden_failover::Facts {
            node: "nodeA".into(),
            boot_id: "boot".into(),
            topology: warden_failover::Topology::TwoNode,
            trigger: warden_failover::Trigger::Reconcile,
            notify: None,
            pacemaker,
            etcd: warden_failover::EtcdView::NotRunning,
            cluster: None,
            data: Default::default(),
            local: Default::default(),
            alerts: vec![],
        }
    }

    /// `stonith_admin --confirm nodeB` on Pacemaker 2.1.5 after nodeB's
    /// fencing failed (recorded on this host): a successful "off" by "a
    /// human", and nodeB's membership ended (`join="down"
    /// expected="down"`), which is the proof. The same confirm still in
    /// the history after nodeB rejoined and was lost again proves nothing:
    /// nodeB is unclean.
    #[test]
    fn an_operators_confirm_proves_the_peer_down_until_it_rejoins() {
        let nodes = vec!["nodeA".to_string(), "nodeB".to_string()];
        let v = view(
            &fixture("confirmed-peer-2.1.5.xml"),
            &nodes,
            &BTreeMap::new(),
        );
        assert!(v.fence_history.iter().any(|e| e.target == "nodeB"
            && e.action == FenceAction::Off
            && e.status == FenceStatus::Success));
        let proof = warden_failover::peer_down_proof(&facts_for(v.clone()), &v.nodes[1]);
        assert!(
            matches!(proof, Some(warden_failover::DownProof::Fenced { .. })),
            "{proof:?}"
        );
        let v = view(
            &fixture("confirmed-then-lost-again-2.1.5.xml"),
            &nodes,
            &BTreeMap::new(),
        );
        assert!(v.nodes[1].unclean);
        assert!(
            v.fence_history
                .iter()
                .any(|e| e.status == FenceStatus::Success)
        );
        assert_eq!(
            warden_failover::peer_down_proof(&facts_for(v.clone()), &v.nodes[1]),
            None
        );
    }

    #[test]
    fn maintenance_settings_pause_failover() {
        let nodes = vec!["cluster01".to_string(), "cluster02".to_string()];
        let v = view(
            &fixture("maintenance-mode-3.0.xml"),
            &nodes,
            &BTreeMap::new(),
        );
        assert!(v.maintenance_mode);
        assert_eq!(
            v.paused().as_deref(),
            Some("automatic failover paused: cluster in maintenance mode")
        );
        let v = view(
            &fixture("node-maintenance-3.0.xml"),
            &nodes,
            &BTreeMap::new(),
        );
        assert!(!v.maintenance_mode);
        assert!(v.nodes.iter().any(|n| n.maintenance), "{:?}", v.nodes);
        assert!(v.paused().unwrap().contains("in maintenance"));
        let v = view(&fixture("fenced-peer.xml"), &nodes, &BTreeMap::new());
        assert_eq!(v.paused(), None);
    }

    fn fixture(name: &str) -> CrmMon {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/reconcile/fixtures")
            .join(name);
        crm_xml::parse(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    #[test]
    fn fenced_peer_view() {
        let doc = fixture("fenced-peer.xml");
        let nodes = vec!["nodeA".to_string(), "nodeB".to_string()];
        let v = view(&doc, &nodes, &BTreeMap::new());
        assert!(v.quorate);
        assert!(v.nodes[0].online);
        assert!(!v.nodes[1].online);
        assert_eq!(v.nodes[0].etcd, ResourceState::Started);
        assert!(v.fence_history.iter().any(|e| e.target == "nodeB"
            && e.status == FenceStatus::Success
            && e.action == FenceAction::Reboot
            && e.completed.is_some()));
        // Pacemaker recorded the fence against nodeB: its membership ended.
        assert!(!v.nodes[1].unclean && !v.nodes[1].expected_up);
        assert!(warden_failover::peer_down_proof(&facts_for(v.clone()), &v.nodes[1]).is_some());
        assert!(!v.maintenance_mode && !v.etcd_unmanaged);
    }

    #[test]
    fn stopped_instance_has_its_stop_time() {
        let doc = fixture("stopped-on-b.xml");
        let nodes = vec!["nodeA".to_string(), "nodeB".to_string()];
        let v = view(&doc, &nodes, &BTreeMap::new());
        assert!(
            matches!(v.nodes[1].etcd, ResourceState::Stopped { .. }),
            "{:?}",
            v.nodes[1]
        );
    }

    /// A start Pacemaker records as failed because no daemon answered the
    /// agent is seen on its node; another start failure, or one of
    /// another resource, is not.
    #[test]
    fn a_start_failed_without_the_daemon_is_seen() {
        let failure = |rsc: &str, reason: &str| {
            format!(
                r#"<failures><failure op_key="{rsc}_start_0" node="nodeB" exitstatus="error" exitreason="{reason}" exitcode="1" call="19" status="complete" last-rc-change="2026-12-05 00:33:21Z" queued="0" exec="12276" interval="0" task="start"/></failures>"#
            )
        };
        let base = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/reconcile/fixtures/stopped-on-b.xml"),
        )
        .unwrap();
        let nodes = vec!["nodeA".to_string(), "nodeB".to_string()];
        let with = |f: String| {
            let xml = base.replace("</node_history>", &format!("</node_history>\n  {f}"));
            view(&crm_xml::parse(&xml).unwrap(), &nodes, &BTreeMap::new())
        };
        let unreachable = format!(
            "start: {} at /run/etcd-warden/api.sock: Connection refused (os error 111)",
            warden_api::DAEMON_UNREACHABLE
        );
        let v = with(failure("etcd", &unreachable));
        assert_eq!(
            v.nodes[1].start_failed_without_daemon.as_deref(),
            Some("etcd")
        );
        assert_eq!(v.nodes[0].start_failed_without_daemon, None);
        let v = with(failure("etcd", "etcd exited during its start"));
        assert_eq!(v.nodes[1].start_failed_without_daemon, None);
        let v = with(failure("fence-testns", &unreachable));
        assert_eq!(v.nodes[1].start_failed_without_daemon, None);
    }

    #[test]
    fn alert_events_become_fence_facts() {
        let ev = warden_api::ClusterEvent {
            kind: "fencing".into(),
            node: Some("nodeB".into()),
            task: Some("reboot".into()),
            rc: Some(0),
            timestamp_epoch: Some(1_800_000_000),
            ..Default::default()
        };
        let f = alert_fence_event(&ev).unwrap();
        assert_eq!(f.status, FenceStatus::Success);
        assert_eq!(f.completed, Some(Stamp(1_800_000_000)));
        let failed = warden_api::ClusterEvent {
            rc: Some(1),
            ..ev.clone()
        };
        assert_eq!(
            alert_fence_event(&failed).unwrap().status,
            FenceStatus::Failed
        );
        let other = warden_api::ClusterEvent {
            kind: "node".into(),
            ..ev
        };
        assert!(alert_fence_event(&other).is_none());
    }
}
