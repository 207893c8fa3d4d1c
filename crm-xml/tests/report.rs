//! The report built from a two-node etcd cluster with fencing: conditions,
//! fence attribution from the CIB (not device names), addresses never
//! invented, transition times kept, and the health verdicts on it.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::collections::BTreeMap;

use crm_xml::cib::FenceTargets;
use crm_xml::health::{Severity, Thresholds, Verdict, evaluate, to_text};
use crm_xml::report::{
    self, ConditionStatus, EtcdMember, EtcdRole, EtcdSection, FencingMethod, Options, Report,
};
use time::OffsetDateTime;
use time::macros::datetime;

#[derive(Clone)]
struct NodeState {
    online: bool,
    unclean: bool,
    standby: bool,
}

const UP: NodeState = NodeState {
    online: true,
    unclean: false,
    standby: false,
};

/// A crm_mon document for master-0/master-1 with kubelet and etcd clones and
/// two fence devices whose ids deliberately do not name their targets.
fn cluster(a: &NodeState, b: &NodeState, extra: &str) -> String {
    let node = |name: &str, id: u32, s: &NodeState| {
        format!(
            r#"<node name="{name}" id="{id}" online="{}" standby="{}" standby_onfail="false" maintenance="false" pending="false" unclean="{}" shutdown="false" expected_up="{}" is_dc="{}" resources_running="3" type="member"/>"#,
            s.online,
            s.standby,
            s.unclean,
            s.online,
            id == 1
        )
    };
    let inst = |id: &str, agent: &str, on: Option<&str>| match on {
        Some(n) => format!(
            r#"<resource id="{id}" resource_agent="{agent}" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="{n}" id="1" cached="true"/></resource>"#
        ),
        None => format!(
            r#"<resource id="{id}" resource_agent="{agent}" role="Stopped" active="false" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="0"/>"#
        ),
    };
    let up = |n: &'static str, s: &NodeState| if s.online { Some(n) } else { None };
    let survivor = if a.online { "master-0" } else { "master-1" };
    format!(
        r#"<pacemaker-result api-version="2.25" request="crm_mon">
  <summary>
    <current_dc present="true" version="2.1.5" name="master-0" id="1" with_quorum="true" mixed_version="false"/>
    <cluster_options stonith-enabled="true" maintenance-mode="false"/>
  </summary>
  <nodes>{}{}</nodes>
  <resources>
    <clone id="kubelet-clone" multi_state="false" unique="false" managed="true" disabled="false" failed="false" failure_ignored="false">{}{}</clone>
    <clone id="etcd-clone" multi_state="false" unique="false" managed="true" disabled="false" failed="false" failure_ignored="false">{}{}</clone>
    {}
    {}
  </resources>
  {extra}
  <status code="0" message="OK"/>
</pacemaker-result>"#,
        node("master-0", 1, a),
        node("master-1", 2, b),
        inst("kubelet", "systemd:kubelet", up("master-0", a)),
        inst("kubelet", "systemd:kubelet", up("master-1", b)),
        inst("etcd", "ocf:heartbeat:podman-etcd", up("master-0", a)),
        inst("etcd", "ocf:heartbeat:podman-etcd", up("master-1", b)),
        inst("bmc-alpha", "stonith:fence_redfish", Some(survivor)),
        inst("bmc-beta", "stonith:fence_ipmilan", Some(survivor)),
    )
}

const CIB: &str = r#"<cib><configuration><resources>
  <primitive id="bmc-alpha" class="stonith" type="fence_redfish"><instance_attributes id="a"><nvpair id="a1" name="pcmk_host_list" value="master-1"/></instance_attributes></primitive>
  <primitive id="bmc-beta" class="stonith" type="fence_ipmilan"><instance_attributes id="b"><nvpair id="b1" name="pcmk_host_map" value="master-0:3"/></instance_attributes></primitive>
</resources></configuration></cib>"#;

fn opts() -> Options {
    let mut addrs = BTreeMap::new();
    addrs.insert("master-0".to_owned(), vec!["192.0.2.10".to_owned()]);
    addrs.insert("master-1".to_owned(), vec!["2001:db8::11".to_owned()]);
    Options {
        node_addresses: addrs,
        fence_targets: Some(FenceTargets::from_cib(CIB).unwrap()),
        profile: report::Profile::OpenShift,
        ..Options::default()
    }
}

fn build(xml: &str, o: &Options, prev: Option<&Report>, now: OffsetDateTime) -> Report {
    report::build(&crm_xml::parse(xml).unwrap(), o, prev, now)
}

fn status_of<'a>(r: &'a Report, node: &str, kind: &str) -> &'a report::Condition {
    let n = r.status.nodes.iter().find(|n| n.node_name == node).unwrap();
    n.conditions.iter().find(|c| c.kind == kind).unwrap()
}

const T0: OffsetDateTime = datetime!(2026-11-30 10:00:00 UTC);

#[test]
fn healthy_two_node_cluster() {
    let r = build(&cluster(&UP, &UP, ""), &opts(), None, T0);
    common::check_status(&common::schema(), &r.status).unwrap();
    assert_eq!(
        r.status.conditions[0].status,
        ConditionStatus::True,
        "{:#?}",
        r.status.conditions
    );
    // Fence devices are attributed by pcmk_host_list/map, with the method from the agent type.
    let m0 = &r.status.nodes[0];
    assert_eq!(m0.fencing_agents.len(), 1);
    assert_eq!(m0.fencing_agents[0].name, "bmc-beta");
    assert_eq!(m0.fencing_agents[0].method, FencingMethod::Ipmi);
    assert_eq!(r.status.nodes[1].fencing_agents[0].name, "bmc-alpha");
    assert_eq!(
        r.status.nodes[1].fencing_agents[0].method,
        FencingMethod::Redfish
    );
    assert_eq!(r.status.nodes[1].addresses[0].address, "2001:db8::11");
    let e = evaluate(&r, T0, &Thresholds::default());
    assert_eq!(e.verdict, Verdict::Healthy, "{:#?}", e.findings);
    // The monitoring-plugin line: state, what was found, perfdata.
    assert_eq!(
        to_text(&e),
        "HEALTHY - report updated 2026-11-30T10:00:00Z, 0s ago, no finding | age=0s;;300 nodes_online=2;;;0;2 findings=0;;;0\n"
    );
}

#[test]
fn fenced_node_degrades_and_transition_times_are_kept() {
    let healthy = build(&cluster(&UP, &UP, ""), &opts(), None, T0);
    let down = NodeState {
        online: false,
        unclean: false,
        standby: false,
    };
    let fence = r#"<fence_history><fence_event action="reboot" target="master-1" client="pacemaker-controld.1" origin="master-0" status="success" delegate="master-0" completed="2026-11-30 10:00:20.5Z"/></fence_history>"#;
    let t1 = T0 + time::Duration::seconds(30);
    let fenced = build(&cluster(&UP, &down, fence), &opts(), Some(&healthy), t1);
    common::check_status(&common::schema(), &fenced.status).unwrap();
    assert_eq!(
        status_of(&fenced, "master-1", "Online").status,
        ConditionStatus::False
    );
    assert_eq!(
        status_of(&fenced, "master-1", "Online").last_transition_time,
        "2026-11-30T10:00:30Z"
    );
    // Unchanged conditions keep the old time.
    assert_eq!(
        status_of(&fenced, "master-0", "Online").last_transition_time,
        "2026-11-30T10:00:00Z"
    );
    assert_eq!(
        fenced.pacemaker.fence_history[0].completed.as_deref(),
        Some("2026-11-30T10:00:20.500000Z")
    );
    let mut with_etcd = fenced.clone();
    with_etcd.etcd = Some(EtcdSection {
        members: vec![EtcdMember {
            id: "8e9e05c52164694d".into(),
            name: "master-0".into(),
            role: EtcdRole::Voter,
            peer_urls: vec![],
            learner_since: None,
        }],
        ..EtcdSection::default()
    });
    let e = evaluate(
        &with_etcd,
        t1 + time::Duration::seconds(12),
        &Thresholds::default(),
    );
    assert_eq!(e.verdict, Verdict::Degraded);
    // The first line names the worst finding and counts the others; each
    // finding follows on its own line.
    let text = to_text(&e);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(format!(
            "DEGRADED - {} (and {} more) | age=12s;;300 nodes_online=1;;;0;2 etcd_voters=1;;;0 etcd_learners=0;;;0 findings={};;;0",
            e.findings[0].message,
            e.findings.len() - 1,
            e.findings.len()
        ))
        .as_deref(),
        "{text}"
    );
    assert_eq!(lines.count(), e.findings.len(), "{text}");
    assert!(
        text.contains("Degraded: NodeOffline: node master-1 is offline\n"),
        "{text}"
    );
    assert!(
        e.findings
            .iter()
            .any(|f| f.code == "NodeOffline" && f.message.contains("master-1")),
        "{:#?}",
        e.findings
    );

    // Back: Healthy again, Online's transition time is the return.
    let t2 = t1 + time::Duration::seconds(60);
    let back = build(&cluster(&UP, &UP, fence), &opts(), Some(&fenced), t2);
    assert_eq!(
        status_of(&back, "master-1", "Online").last_transition_time,
        "2026-11-30T10:01:30Z"
    );
    assert_eq!(
        status_of(&back, "master-0", "Online").last_transition_time,
        "2026-11-30T10:00:00Z"
    );
    assert_eq!(
        evaluate(&back, t2, &Thresholds::default()).verdict,
        Verdict::Healthy
    );
}

#[test]
fn unclean_node_and_stale_report() {
    let lost = NodeState {
        online: false,
        unclean: true,
        standby: false,
    };
    let r = build(&cluster(&UP, &lost, ""), &opts(), None, T0);
    assert_eq!(
        status_of(&r, "master-1", "Clean").status,
        ConditionStatus::False
    );
    // Staleness from lastUpdated alone: a fresh checker sees it at once.
    let healthy = build(&cluster(&UP, &UP, ""), &opts(), None, T0);
    let e = evaluate(
        &healthy,
        T0 + time::Duration::minutes(6),
        &Thresholds::default(),
    );
    assert_eq!(e.verdict, Verdict::Degraded);
    assert_eq!(e.findings[0].code, "StatusStale");
}

#[test]
fn addresses_are_never_invented() {
    let o = Options {
        node_addresses: BTreeMap::from([(
            "master-0".to_owned(),
            vec!["0.0.0.0".to_owned(), "127.0.0.1".to_owned()],
        )]),
        ..opts()
    };
    let r = build(&cluster(&UP, &UP, ""), &o, None, T0);
    assert!(r.status.nodes.is_empty());
    assert_eq!(r.pacemaker.omitted_nodes.len(), 2);
    assert!(
        r.pacemaker.omitted_nodes[0]
            .reason
            .contains("global-unicast")
    );
    assert!(
        r.pacemaker.omitted_nodes[1]
            .reason
            .contains("address unknown")
    );
    common::check_status(&common::schema(), &r.status).unwrap();
    let e = evaluate(&r, T0, &Thresholds::default());
    assert!(e.findings.iter().any(|f| f.code == "NodeNotReported"));
}

#[test]
fn without_cib_fencing_is_unknown_not_guessed() {
    let o = Options {
        fence_targets: None,
        ..opts()
    };
    let r = build(&cluster(&UP, &UP, ""), &o, None, T0);
    assert!(r.status.nodes.iter().all(|n| n.fencing_agents.is_empty()));
    let c = status_of(&r, "master-0", "FencingAvailable");
    assert_eq!(c.status, ConditionStatus::False);
    assert!(c.message.contains("no CIB"), "{}", c.message);
}

#[test]
fn quorum_fencing_failures_and_learners_are_findings() {
    let now = T0;
    let failures = r#"
<failures><failure op_key="etcd_monitor_30000" node="master-1" exitstatus="not running" exitreason="gone" exitcode="7" call="9" status="complete" last-rc-change="2026-11-30 09:58:00Z" task="monitor" interval="30000"/></failures>
<fence_history><fence_event action="reboot" target="master-1" client="c" origin="master-0" status="failed" delegate="master-0" exit-reason="BMC unreachable" completed="2026-11-30 01:00:00 +00:00"/></fence_history>"#;
    let xml = cluster(&UP, &UP, failures)
        .replace(r#"with_quorum="true""#, r#"with_quorum="false""#)
        .replace(r#"stonith-enabled="true""#, r#"stonith-enabled="false""#);
    let mut o = opts();
    o.etcd = Some(EtcdSection {
        cluster_id: Some("cdf818194e3a8c32".into()),
        leader: Some("8e9e05c52164694d".into()),
        members: vec![EtcdMember {
            id: "91bc3c398fb3c146".into(),
            name: "master-1".into(),
            role: EtcdRole::Learner,
            peer_urls: vec![],
            learner_since: Some("2026-11-30T09:50:00Z".into()),
        }],
        ..EtcdSection::default()
    });
    let r = build(&xml, &o, None, now);
    assert_eq!(r.pacemaker.failed_actions[0].resource, "etcd");
    assert_eq!(r.pacemaker.failed_actions[0].operation, "monitor");
    let e = evaluate(&r, now, &Thresholds::default());
    let codes: Vec<&str> = e.findings.iter().map(|f| f.code).collect();
    for want in [
        "NoQuorum",
        "FencingDisabled",
        "FenceFailed",
        "FailedAction",
        "LearnerNotPromoted",
    ] {
        assert!(codes.contains(&want), "{want} missing from {codes:?}");
    }
    assert_eq!(e.verdict, Verdict::Degraded);
    // Outside the windows, the old failures are not findings.
    let later = now + time::Duration::days(1);
    let e = evaluate(
        &r,
        later,
        &Thresholds {
            stale_after: std::time::Duration::from_secs(10 * 86400),
            ..Thresholds::default()
        },
    );
    let codes: Vec<&str> = e.findings.iter().map(|f| f.code).collect();
    assert!(
        !codes.contains(&"FenceFailed") && !codes.contains(&"FailedAction"),
        "{codes:?}"
    );
    assert!(
        e.findings
            .iter()
            .all(|f| f.severity == Severity::Degraded || f.severity == Severity::Warning)
    );
}

#[test]
fn standby_and_maintenance() {
    let sb = NodeState {
        online: true,
        unclean: false,
        standby: true,
    };
    let r = build(&cluster(&UP, &sb, ""), &opts(), None, T0);
    assert_eq!(status_of(&r, "master-1", "Active").reason, "Standby");
    let xml =
        cluster(&UP, &UP, "").replace(r#"maintenance-mode="false""#, r#"maintenance-mode="true""#);
    let r = build(&xml, &opts(), None, T0);
    assert_eq!(r.status.conditions[1].reason, "InMaintenance");
    let e = evaluate(&r, T0, &Thresholds::default());
    assert!(e.findings.iter().any(|f| f.code == "ClusterInMaintenance"));
}

#[test]
fn last_updated_never_goes_backwards() {
    let r1 = build(&cluster(&UP, &UP, ""), &opts(), None, T0);
    let r2 = build(
        &cluster(&UP, &UP, ""),
        &opts(),
        Some(&r1),
        T0 - time::Duration::minutes(1),
    );
    assert_eq!(r2.status.last_updated, r1.status.last_updated);
}

#[test]
fn the_etcd_section_names_each_nodes_archives() {
    let now = T0;
    let mut o = opts();
    let archive = "/var/lib/etcd.archive/1796036400-stale-peer-has-epoch-4";
    o.etcd = Some(EtcdSection {
        nodes: [(
            "master-1".to_string(),
            report::WardenNodeState {
                state: report::WardenState::Rejoining,
                since: Some("2026-11-30T11:00:00Z".into()),
                archives: vec![archive.into()],
                reason: Some("learner catching up".into()),
                resolve_command: None,
                db: None,
            },
        )]
        .into_iter()
        .collect(),
        ..EtcdSection::default()
    });
    let r = build(&cluster(&UP, &UP, ""), &o, None, now);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v["etcd"]["nodes"]["master-1"]["archives"],
        serde_json::json!([archive])
    );
    // The CR's status is unchanged by it and still valid.
    common::check_status(&common::schema(), &r.status).unwrap();
    let back: Report = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(back, r);
    // Without a reason or a command, neither key is written.
    assert!(
        v["etcd"]["nodes"]["master-1"]
            .get("resolveCommand")
            .is_none()
    );

    // A section written before archives were reported still reads.
    let old: EtcdSection =
        serde_json::from_str(r#"{"nodes": {"master-0": {"state": "member"}}}"#).unwrap();
    assert!(old.nodes["master-0"].archives.is_empty());
}

#[test]
fn a_refusing_daemon_is_a_finding_with_its_command() {
    let now = T0;
    let mut o = opts();
    let cmd = "etcd-warden recover force-new-cluster --node master-1";
    o.etcd = Some(EtcdSection {
        nodes: [(
            "master-1".to_string(),
            report::WardenNodeState {
                state: report::WardenState::Stopped,
                since: None,
                archives: vec![],
                reason: Some(format!(
                    "resolve with '{cmd}': alone since boot, master-0 unseen"
                )),
                resolve_command: Some(cmd.into()),
                db: None,
            },
        )]
        .into_iter()
        .collect(),
        ..EtcdSection::default()
    });
    let r = build(&cluster(&UP, &UP, ""), &o, None, now);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["etcd"]["nodes"]["master-1"]["resolveCommand"], cmd);
    let e = evaluate(&r, now, &Thresholds::default());
    let f = e
        .findings
        .iter()
        .find(|f| f.code == "NeedsOperator")
        .expect("a NeedsOperator finding");
    assert!(
        f.message.contains(cmd) && f.message.contains("master-1"),
        "{}",
        f.message
    );
    assert_eq!(e.verdict, Verdict::Degraded);
}

#[test]
fn an_etcd_alarm_degrades_with_its_cure() {
    let now = T0;
    let mut o = opts();
    let node = |alarms: Vec<String>| report::WardenNodeState {
        state: report::WardenState::Member,
        since: None,
        archives: vec![],
        reason: None,
        resolve_command: None,
        db: Some(report::NodeDb {
            size: 2_147_483_648,
            size_in_use: 2_000_000_000,
            alarms,
            last_defrag: Some("2026-11-30T11:00:00Z".into()),
            last_defrag_ms: Some(1200),
        }),
    };
    o.etcd = Some(EtcdSection {
        nodes: [
            ("master-0".to_string(), node(vec!["NOSPACE".into()])),
            ("master-1".to_string(), node(vec!["NOSPACE".into()])),
        ]
        .into_iter()
        .collect(),
        ..EtcdSection::default()
    });
    let r = build(&cluster(&UP, &UP, ""), &o, None, now);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v["etcd"]["nodes"]["master-0"]["db"]["sizeInUse"],
        2_000_000_000_i64
    );
    assert_eq!(v["etcd"]["nodes"]["master-0"]["db"]["lastDefragMs"], 1200);
    let back: Report = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
    let e = evaluate(&r, now, &Thresholds::default());
    let alarms: Vec<_> = e
        .findings
        .iter()
        .filter(|f| f.code == "EtcdAlarm")
        .collect();
    // One finding per alarm, however many nodes report it.
    assert_eq!(alarms.len(), 1, "{:?}", e.findings);
    let m = &alarms[0].message;
    assert!(
        m.contains("NOSPACE")
            && m.contains("compact")
            && m.contains("defrag")
            && m.contains("alarm disarm"),
        "{m}"
    );
    assert_eq!(e.verdict, Verdict::Degraded);

    // Without an alarm the database alone is no finding.
    o.etcd = Some(EtcdSection {
        nodes: [("master-0".to_string(), node(vec![]))]
            .into_iter()
            .collect(),
        ..EtcdSection::default()
    });
    let r = build(&cluster(&UP, &UP, ""), &o, None, now);
    let e = evaluate(&r, now, &Thresholds::default());
    assert!(
        e.findings.iter().all(|f| f.code != "EtcdAlarm"),
        "{:?}",
        e.findings
    );
    // CORRUPT names its own cure.
    assert!(crm_xml::health::alarm_message("CORRUPT").contains("hashkv"));
}
