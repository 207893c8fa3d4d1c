//! The cluster's rows of `etcd-warden status`: every Pacemaker node (its
//! state, the etcd resource on it, its etcd member role), Pacemaker's own
//! state and fencing (devices, the last fence), read from the daemon's
//! live report (`GET /v1/report`).

use std::time::Duration;

use crm_xml::report::{PmFenceEvent, PmNode, PmResource, Report, ResourceName};
use warden_api::client::{Client, ClientError};
use warden_api::paths;

/// How long `status` waits for the report: the daemon bounds its crm_mon
/// call by 5 s, so an answer after this is not coming.
pub(crate) const REPORT_DEADLINE: Duration = Duration::from_secs(7);

/// The cluster as the daemon reports it, or why it cannot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cluster {
    /// The daemon's live report.
    Report(Box<Report>),
    /// No report: the daemon's or the client's reason.
    Unavailable(String),
}

impl Cluster {
    /// Ask the daemon for its live report within `deadline`.
    pub(crate) fn fetch(client: &Client, deadline: Duration) -> Self {
        match client.get::<Report>(paths::REPORT, deadline) {
            Ok(r) => Self::Report(Box::new(r)),
            // A 503 carries the daemon's reason (crm_mon failing, no
            // Pacemaker at all).
            Err(ClientError::Status { message, .. }) => Self::Unavailable(message),
            Err(e) => Self::Unavailable(e.to_string()),
        }
    }

    /// The report, when there is one.
    pub(crate) fn report(&self) -> Option<&Report> {
        match self {
            Self::Report(r) => Some(r),
            Self::Unavailable(_) => None,
        }
    }

    /// The rows: `pacemaker`, one per member node (its name indented),
    /// `fencing` and `last fence`; `this_node` is marked.
    pub(crate) fn rows(&self, this_node: &str) -> String {
        match self {
            Self::Unavailable(why) => row("pacemaker", &format!("unavailable ({why})")),
            Self::Report(r) => report_rows(r, this_node),
        }
    }
}

fn row(key: &str, value: &str) -> String {
    format!("{key:<11} {value}\n")
}

fn report_rows(r: &Report, this_node: &str) -> String {
    let pm = &r.pacemaker;
    let mut out = row(
        "pacemaker",
        &format!(
            "quorum {}, maintenance-mode {}, DC {}",
            if pm.quorate { "yes" } else { "no" },
            if pm.maintenance_mode { "on" } else { "off" },
            pm.dc.as_deref().unwrap_or("none"),
        ),
    );
    for n in pm.nodes.iter().filter(|n| n.kind == "member") {
        let mut line = node_line(r, n);
        if n.name == this_node {
            line.push_str(" (this node)");
        }
        out.push_str(&row(&format!("  {}", n.name), &line));
    }
    out.push_str(&row("fencing", &fencing_line(r)));
    out.push_str(&row(
        "last fence",
        &last_fence(&pm.fence_history).map_or_else(
            || "none in Pacemaker's fence history".to_string(),
            fence_line,
        ),
    ));
    out
}

/// `online, DC; etcd healthy; member voter`.
fn node_line(r: &Report, n: &PmNode) -> String {
    let mut state = vec![if n.online { "online" } else { "offline" }];
    for (set, word) in [
        (n.unclean, "unclean"),
        (n.standby, "standby"),
        (n.maintenance, "maintenance"),
        (n.pending, "pending"),
        (n.shutdown, "shutting down"),
        (n.is_dc, "DC"),
    ] {
        if set {
            state.push(word);
        }
    }
    let etcd = r
        .status
        .nodes
        .iter()
        .find(|s| s.node_name == n.name)
        .and_then(|s| s.resources.iter().find(|x| x.name == ResourceName::Etcd))
        .map_or("not reported", |x| x.state());
    let member = match &r.etcd {
        None => "unknown (no etcd section)",
        // A cluster has at least one member: an empty list is etcd not
        // answering here, not a node without a member.
        Some(e) if e.members.is_empty() => "unknown (no member list: etcd does not answer here)",
        Some(e) => e
            .members
            .iter()
            .find(|m| m.name == n.name)
            .map_or("absent", |m| match m.role {
                crm_xml::report::EtcdRole::Voter => "voter",
                crm_xml::report::EtcdRole::Learner => "learner",
            }),
    };
    format!("{}; etcd {etcd}; member {member}", state.join(", "))
}

/// `enabled; DEVICE started on NODE, ...` or `DISABLED ...`.
fn fencing_line(r: &Report) -> String {
    let pm = &r.pacemaker;
    let devices: Vec<String> = pm
        .resources
        .iter()
        .filter(|x| x.agent.starts_with("stonith:"))
        .map(device_state)
        .collect();
    let devices = match devices.as_slice() {
        [] => "no fence device".to_string(),
        d => d.join(", "),
    };
    if pm.fencing_enabled {
        format!("enabled; {devices}")
    } else {
        format!("DISABLED (stonith-enabled=false: a lost node is assumed down); {devices}")
    }
}

/// `ID started on NODE`, `ID stopped`, with `FAILED`, `unmanaged`,
/// `blocked` when so.
fn device_state(x: &PmResource) -> String {
    let mut s = format!("{} {}", x.id, x.role.to_lowercase());
    if !x.nodes.is_empty() {
        s.push_str(&format!(" on {}", x.nodes.join(" ")));
    }
    for (set, word) in [
        (x.failed, " FAILED"),
        (!x.managed, " unmanaged"),
        (x.blocked, " blocked"),
    ] {
        if set {
            s.push_str(word);
        }
    }
    s
}

/// The fence event to show: one in progress, else the latest completed.
fn last_fence(history: &[PmFenceEvent]) -> Option<&PmFenceEvent> {
    history
        .iter()
        .find(|e| e.status == "pending")
        .or_else(|| history.iter().max_by(|a, b| a.completed.cmp(&b.completed)))
}

/// `reboot of NODE: success at TIME by NODE` (and the failure's reason).
fn fence_line(e: &PmFenceEvent) -> String {
    let mut s = format!("{} of {}: {}", e.action, e.target, e.status);
    if let Some(at) = &e.completed {
        s.push_str(&format!(" at {at}"));
    }
    if let Some(by) = &e.delegate {
        s.push_str(&format!(" by {by}"));
    }
    if let Some(why) = &e.exit_reason {
        s.push_str(&format!(": {why}"));
    }
    s
}

#[cfg(test)]
pub(super) mod tests {
    use crm_xml::report::{self, EtcdMember, EtcdRole, EtcdSection, Options};
    use time::macros::datetime;

    use super::*;

    /// crm_mon after nodeB was fenced: nodeB offline, etcd on nodeA only,
    /// the fence in the history.
    pub(crate) const FENCED_PEER: &str = include_str!("../../reconcile/fixtures/fenced-peer.xml");

    /// A healthy pair: both nodes online, etcd cloned on both, one fence
    /// device per node.
    const HEALTHY_PAIR: &str = r#"<pacemaker-result api-version="2.25" request="crm_mon">
  <summary>
    <current_dc present="true" version="2.1.5" name="nodeB" id="2" with_quorum="true" mixed_version="false"/>
    <cluster_options stonith-enabled="true" maintenance-mode="false"/>
  </summary>
  <nodes>
    <node name="nodeA" id="1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="false" resources_running="2" type="member"/>
    <node name="nodeB" id="2" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="true" resources_running="2" type="member"/>
  </nodes>
  <resources>
    <clone id="etcd-clone" multi_state="false" unique="false" managed="true" disabled="false" failed="false" failure_ignored="false">
      <resource id="etcd" resource_agent="ocf:etcd-warden:etcd" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="nodeA" id="1" cached="true"/></resource>
      <resource id="etcd" resource_agent="ocf:etcd-warden:etcd" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="nodeB" id="2" cached="true"/></resource>
    </clone>
    <resource id="fence-a" resource_agent="stonith:fence_ipmilan" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="nodeB" id="2" cached="true"/></resource>
    <resource id="fence-b" resource_agent="stonith:fence_ipmilan" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="nodeA" id="1" cached="true"/></resource>
  </resources>
  <status code="0" message="OK"/>
</pacemaker-result>"#;

    pub(crate) fn member(name: &str, role: EtcdRole) -> EtcdMember {
        EtcdMember {
            id: format!("{:x}", name.len()),
            name: name.into(),
            role,
            peer_urls: vec![],
            learner_since: None,
        }
    }

    pub(crate) fn report_of(xml: &str, members: Vec<EtcdMember>) -> Report {
        let opts = Options {
            etcd: Some(EtcdSection {
                members,
                ..EtcdSection::default()
            }),
            ..Options::default()
        };
        let doc = crm_xml::parse(xml).unwrap();
        report::build(&doc, &opts, None, datetime!(2026-11-30 07:37:00 UTC))
    }

    #[test]
    fn a_healthy_pair_shows_both_nodes_as_voters_and_fencing_enabled() {
        let r = report_of(
            HEALTHY_PAIR,
            vec![
                member("nodeA", EtcdRole::Voter),
                member("nodeB", EtcdRole::Voter),
            ],
        );
        let text = Cluster::Report(Box::new(r)).rows("nodeA");
        assert_eq!(
            text,
            [
                "pacemaker   quorum yes, maintenance-mode off, DC nodeB",
                "  nodeA     online; etcd healthy; member voter (this node)",
                "  nodeB     online, DC; etcd healthy; member voter",
                "fencing     enabled; fence-a started on nodeB, fence-b started on nodeA",
                "last fence  none in Pacemaker's fence history",
                "",
            ]
            .join("\n")
        );
    }

    #[test]
    fn a_fenced_peer_is_offline_absent_and_the_last_fence_says_by_whom() {
        let r = report_of(FENCED_PEER, vec![member("nodeA", EtcdRole::Voter)]);
        let text = Cluster::Report(Box::new(r)).rows("nodeA");
        assert!(
            text.contains("  nodeA     online, DC; etcd healthy; member voter (this node)\n"),
            "{text}"
        );
        assert!(
            text.contains("  nodeB     offline; etcd stopped; member absent\n"),
            "{text}"
        );
        assert!(
            text.contains("fencing     enabled; fence-testns started on nodeA\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "last fence  reboot of nodeB: success at 2026-11-30T07:36:21.000000Z by nodeA\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_fence_shown_is_the_one_in_progress_else_the_latest() {
        let ev = |status: &str, completed: Option<&str>| PmFenceEvent {
            target: "nodeB".into(),
            action: "reboot".into(),
            status: status.into(),
            completed: completed.map(Into::into),
            delegate: None,
            origin: None,
            client: None,
            exit_reason: (status == "failed").then(|| "timed out".into()),
        };
        let old = ev("success", Some("2026-11-30T07:00:00.000000Z"));
        let failed = ev("failed", Some("2026-11-30T08:00:00.000000Z"));
        let pending = ev("pending", None);
        let h = [old.clone(), failed.clone()];
        assert_eq!(last_fence(&h), Some(&failed));
        assert_eq!(
            fence_line(&failed),
            "reboot of nodeB: failed at 2026-11-30T08:00:00.000000Z: timed out"
        );
        let h = [old, pending.clone(), failed];
        assert_eq!(last_fence(&h), Some(&pending));
        assert_eq!(fence_line(&pending), "reboot of nodeB: pending");
        assert_eq!(last_fence(&[]), None);
    }

    #[test]
    fn disabled_fencing_and_a_learner_are_said() {
        let mut r = report_of(
            HEALTHY_PAIR,
            vec![
                member("nodeA", EtcdRole::Voter),
                member("nodeB", EtcdRole::Learner),
            ],
        );
        r.pacemaker.fencing_enabled = false;
        r.pacemaker.maintenance_mode = true;
        let text = Cluster::Report(Box::new(r)).rows("nodeB");
        assert!(
            text.contains("pacemaker   quorum yes, maintenance-mode on, DC nodeB\n"),
            "{text}"
        );
        assert!(
            text.contains("  nodeB     online, DC; etcd healthy; member learner (this node)\n"),
            "{text}"
        );
        assert!(
            text.contains("fencing     DISABLED (stonith-enabled=false"),
            "{text}"
        );
    }

    #[test]
    fn without_a_member_list_the_role_is_unknown_not_absent() {
        let r = report_of(FENCED_PEER, vec![]);
        let text = Cluster::Report(Box::new(r)).rows("nodeA");
        assert!(
            text.contains(
                "  nodeB     offline; etcd stopped; member unknown (no member list: etcd does not answer here)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn without_a_report_the_reason_is_shown() {
        let c = Cluster::Unavailable("no Pacemaker report: crm_mon: not found".into());
        assert_eq!(
            c.rows("nodeA"),
            "pacemaker   unavailable (no Pacemaker report: crm_mon: not found)\n"
        );
        assert!(c.report().is_none());
    }
}
