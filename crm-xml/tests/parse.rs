//! Parser behaviour beyond the fixtures: the legacy root, old and new role
//! names, transitional roles, fencing-* vs stonith-* options, remote/guest
//! nodes, bundles, fence-history time variants, and error messages that name
//! the element path and line:column.

#![allow(clippy::unwrap_used)] // tests may unwrap

use crm_xml::model::{FenceStatus, Format, NodeType, Resource, Role};
use crm_xml::{ParseError, parse};

const LEGACY: &str = r#"<?xml version="1.0"?>
<crm_mon version="2.0.1">
  <summary>
    <current_dc present="true" version="2.0.1" name="n1" id="1" with_quorum="true"/>
    <cluster_options stonith-enabled="false" maintenance-mode="false"/>
  </summary>
  <nodes>
    <node name="n1" id="1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="true" resources_running="2" type="member"/>
    <node name="n2" id="2" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="false" resources_running="1" type="member"/>
  </nodes>
  <resources>
    <clone id="ms" multi_state="true" unique="false" managed="true" failed="false" failure_ignored="false">
      <resource id="st" resource_agent="ocf::pacemaker:Stateful" role="Master" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="n1" id="1" cached="false"/></resource>
      <resource id="st" resource_agent="ocf::pacemaker:Stateful" role="Slave" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="n2" id="2" cached="false"/></resource>
    </clone>
    <resource id="mover" resource_agent="ocf::pacemaker:Dummy" role="Migrating" active="true" orphaned="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="n1" id="1" cached="false"/></resource>
  </resources>
</crm_mon>
"#;

#[test]
fn legacy_root_and_old_roles() {
    let d = parse(LEGACY).unwrap();
    assert_eq!(
        d.format,
        Format::Legacy {
            version: Some("2.0.1".into())
        }
    );
    assert!(!d.summary.options.fencing_enabled);
    let roles: Vec<Role> = d
        .primitive_instances()
        .iter()
        .map(|i| i.primitive.role)
        .collect();
    assert_eq!(roles, [Role::Promoted, Role::Unpromoted, Role::Migrating]);
    assert!(d.primitive_instances()[0].promotable);
    assert_eq!(d.summary.dc.as_ref().unwrap().name, "n1");
}

fn doc(body: &str) -> String {
    format!(
        "<pacemaker-result api-version=\"2.42\" request=\"crm_mon\">\n{body}\n<status code=\"0\" message=\"OK\"/>\n</pacemaker-result>\n"
    )
}

#[test]
fn fencing_names_win_over_stonith_names() {
    let d = parse(&doc(r#"<summary><cluster_options fencing-enabled="false" stonith-enabled="true" fencing-timeout-ms="5000" stonith-timeout-ms="1"/></summary>"#)).unwrap();
    assert!(!d.summary.options.fencing_enabled);
    assert_eq!(d.summary.options.fencing_timeout_ms, Some(5000));
    let d = parse(&doc(
        r#"<summary><cluster_options stonith-enabled="false"/></summary>"#,
    ))
    .unwrap();
    assert!(!d.summary.options.fencing_enabled);
    let d = parse(&doc("")).unwrap();
    assert!(d.summary.options.fencing_enabled, "Pacemaker's default");
    assert!(d.summary.dc.is_none() && !d.summary.with_quorum);
}

#[test]
fn transitional_roles_and_started_in_promotable() {
    for (text, role) in [
        ("Starting", Role::Starting),
        ("Stopping", Role::Stopping),
        ("Promoting", Role::Promoting),
        ("Demoting", Role::Demoting),
        ("Migrating", Role::Migrating),
        ("Unpromoted", Role::Unpromoted),
        ("Promoted", Role::Promoted),
    ] {
        let d = parse(&doc(&format!(
            r#"<resources><resource id="r" resource_agent="ocf:pacemaker:Dummy" role="{text}" active="true" orphaned="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="0"/></resources>"#
        )))
        .unwrap();
        assert_eq!(d.primitive_instances()[0].primitive.role, role);
    }
    let d = parse(&doc(r#"<resources><clone id="c" multi_state="true" unique="false" managed="true" disabled="false" failed="false" failure_ignored="false"><resource id="r" resource_agent="ocf:pacemaker:Stateful" role="Started" target_role="master" active="true" orphaned="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="a" id="1" cached="true"/></resource></clone></resources>"#)).unwrap();
    let i = d.primitive_instances()[0];
    assert_eq!(i.primitive.role, Role::Unpromoted);
    assert_eq!(i.primitive.target_role, Some(Role::Promoted));
    assert_eq!(i.parent, Some("c"));
}

#[test]
fn remote_guest_bundle_group_ticket_ban() {
    let d = parse(&doc(r#"
<nodes>
  <node name="r1" id="r1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="false" is_dc="false" resources_running="0" type="remote"/>
  <node name="g1" id="g1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="false" is_dc="false" resources_running="0" type="remote" id_as_resource="vm1"/>
  <node name="p" id="p" online="false" type="ping"/>
</nodes>
<resources>
  <bundle id="b" type="podman" image="img" unique="false" managed="true" failed="false">
    <replica id="0">
      <resource id="b-ip-0" resource_agent="ocf:heartbeat:IPaddr2" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="n1" id="1" cached="true"/></resource>
      <resource id="b-podman-0" resource_agent="ocf:heartbeat:podman" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="n1" id="1" cached="true"/></resource>
    </replica>
  </bundle>
  <group id="g" number_resources="1" managed="true" disabled="false">
    <resource id="gm" resource_agent="ocf:pacemaker:Dummy" role="Stopped" active="false" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="0"/>
  </group>
  <future_thing id="x"/>
</resources>
<node_attributes><node name="n1"><attribute name="etcd-role" value="voter"/></node></node_attributes>
<tickets><ticket id="t" status="granted" standby="false"/></tickets>
<bans><ban id="b1" resource="gm" node="n1" weight="-INFINITY" master_only="true"/></bans>
<unknown_section><x/></unknown_section>"#)).unwrap();
    assert_eq!(d.nodes[0].node_type, NodeType::Remote);
    assert_eq!(d.nodes[1].container_id.as_deref(), Some("vm1"));
    assert_eq!(d.nodes[2].node_type, NodeType::Ping);
    assert!(matches!(&d.resources[0], Resource::Bundle(b) if b.replicas[0].primitives.len() == 2));
    let inst = d.primitive_instances();
    assert_eq!(inst.len(), 3);
    assert_eq!(inst[0].parent, Some("b"));
    assert_eq!(inst[2].parent, Some("g"));
    assert_eq!(d.node_attributes["n1"]["etcd-role"], "voter");
    assert!(d.tickets[0].granted);
    assert!(d.bans[0].promoted_only);
}

#[test]
fn fence_history_time_variants() {
    let d = parse(&doc(r#"<fence_history>
  <fence_event action="reboot" target="b" client="pacemaker-controld.1" origin="a" status="success" delegate="a" completed="2026-11-30 07:36:38.123456 +01:00"/>
  <fence_event action="off" target="b" client="stonith_admin.2" origin="a" status="failed" delegate="a" exit-reason="timed out" completed="2026-11-30 07:36:38Z"/>
  <fence_event action="reboot" target="b" client="c" origin="a" status="pending" extended-status="1"/>
</fence_history>"#)).unwrap();
    let h = d.fence_history.unwrap();
    assert_eq!(h.events.len(), 3);
    assert_eq!(
        h.events[0].completed.unwrap().to_string(),
        "2026-11-30 7:36:38.123456 +01:00:00"
    );
    assert_eq!(h.events[1].status, FenceStatus::Failed);
    assert_eq!(h.events[1].exit_reason.as_deref(), Some("timed out"));
    assert!(h.events[2].completed.is_none());
}

#[test]
fn errors_name_path_and_position() {
    let text = doc(r#"<nodes>
  <node name="a" id="1" online="true"/>
  <node name="b" id="2" online="yes please"/>
</nodes>"#);
    let e = parse(&text).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("/pacemaker-result/nodes/node[2]"), "{msg}");
    assert!(msg.contains("line 4, column 3"), "{msg}");
    assert!(msg.contains("online"), "{msg}");

    let e = parse(&doc(r#"<nodes><node id="1" online="true"/></nodes>"#)).unwrap_err();
    assert!(
        matches!(&e, ParseError::MissingAttribute { attribute, .. } if attribute == "name"),
        "{e}"
    );

    let e = parse(&doc(r#"<resources><resource id="r" resource_agent="x" role="Dancing" active="true"/></resources>"#)).unwrap_err();
    assert!(e.to_string().contains("role"), "{e}");

    let e = parse(&doc(r#"<fence_history><fence_event action="reboot" target="b" status="success" completed="yesterday"/></fence_history>"#)).unwrap_err();
    assert!(e.to_string().contains("completed"), "{e}");

    let e = parse(&doc(
        r#"<nodes><node name="a" id="1" online="true" resources_running="-3"/></nodes>"#,
    ))
    .unwrap_err();
    assert!(e.to_string().contains("resources_running"), "{e}");

    assert!(matches!(
        parse("<html><body/></html>"),
        Err(ParseError::UnexpectedRoot { .. })
    ));
    assert!(matches!(
        parse("<pacemaker-result/>"),
        Err(ParseError::MissingAttribute { .. })
    ));
    assert!(matches!(parse(""), Err(ParseError::Empty)));
    let trunc = &text[..text.len() / 2];
    assert!(
        matches!(parse(trunc), Err(ParseError::Syntax { .. })),
        "truncated"
    );
    assert!(matches!(
        parse(
            r#"<pacemaker-result api-version="2.25"><crm-mon-disconnected description="Not connected" pacemakerd-state="remote"/></pacemaker-result>"#
        ),
        Err(ParseError::Disconnected { .. })
    ));
    assert!(crm_xml::parse_bytes(b"<a>\xff</a>").is_err());
}
