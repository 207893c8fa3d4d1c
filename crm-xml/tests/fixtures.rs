//! Every real crm_mon document parses, and the report agrees with facts read
//! independently by a second, deliberately simple reader (roxmltree, a few
//! lines per fact, no shared code with the parser). Every report also passes
//! the status JSON Schema and round-trips through JSON.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use crm_xml::report::{self, Report};
use time::macros::datetime;

fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
    n.children().find(|c| c.has_tag_name(name))
}

/// Canonical role as the simple reader sees it.
fn simple_role(role: &str, in_promotable: bool) -> String {
    let r = match role.to_ascii_lowercase().as_str() {
        "master" => "Promoted".to_owned(),
        "slave" => "Unpromoted".to_owned(),
        _ => {
            let mut c = role.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + &c.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        }
    };
    if in_promotable && r == "Started" {
        "Unpromoted".into()
    } else {
        r
    }
}

fn check(name: &str, text: &str, validator: &jsonschema::Validator) {
    let doc = crm_xml::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let opts = common::options_with_addresses(&doc);
    let r: Report = report::build(&doc, &opts, None, datetime!(2026-11-30 08:00:00 UTC));
    let pm = &r.pacemaker;

    let x = roxmltree::Document::parse(text).unwrap();
    let root = x.root_element();

    // DC and quorum.
    let dc = child(root, "summary").and_then(|s| child(s, "current_dc"));
    let present = dc.and_then(|d| d.attribute("present")) == Some("true");
    let want_dc = if present {
        dc.and_then(|d| d.attribute("name"))
    } else {
        None
    };
    assert_eq!(pm.dc.as_deref(), want_dc, "{name}: dc");
    let want_q = present && dc.and_then(|d| d.attribute("with_quorum")) == Some("true");
    assert_eq!(pm.quorate, want_q, "{name}: quorum");

    // Node flags.
    let xnodes: Vec<_> = child(root, "nodes")
        .map(|n| n.children().filter(|c| c.has_tag_name("node")).collect())
        .unwrap_or_default();
    assert_eq!(pm.nodes.len(), xnodes.len(), "{name}: node count");
    for (got, want) in pm.nodes.iter().zip(&xnodes) {
        let b = |a: &str| want.attribute(a) == Some("true");
        assert_eq!(got.name, want.attribute("name").unwrap(), "{name}");
        assert_eq!(got.online, b("online"), "{name}: {} online", got.name);
        assert_eq!(
            got.standby,
            b("standby") || b("standby_onfail"),
            "{name}: {} standby",
            got.name
        );
        assert_eq!(
            got.maintenance,
            b("maintenance"),
            "{name}: {} maintenance",
            got.name
        );
        assert_eq!(got.pending, b("pending"), "{name}: {} pending", got.name);
        assert_eq!(got.unclean, b("unclean"), "{name}: {} unclean", got.name);
        assert_eq!(got.shutdown, b("shutdown"), "{name}: {} shutdown", got.name);
        assert_eq!(
            got.expected_up,
            b("expected_up"),
            "{name}: {} expected_up",
            got.name
        );
        assert_eq!(got.is_dc, b("is_dc"), "{name}: {} is_dc", got.name);
        assert_eq!(
            got.kind,
            want.attribute("type").unwrap_or("member"),
            "{name}: {} type",
            got.name
        );
    }

    // Every primitive instance: role and nodes, in document order.
    let xres: Vec<_> = child(root, "resources")
        .map(|r| {
            r.descendants()
                .filter(|d| d.has_tag_name("resource"))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(pm.resources.len(), xres.len(), "{name}: instance count");
    for (got, want) in pm.resources.iter().zip(&xres) {
        let promotable = want
            .ancestors()
            .any(|a| a.has_tag_name("clone") && a.attribute("multi_state") == Some("true"));
        assert_eq!(got.id, want.attribute("id").unwrap(), "{name}");
        assert_eq!(
            got.role,
            simple_role(want.attribute("role").unwrap(), promotable),
            "{name}: {} role",
            got.id
        );
        let nodes: Vec<&str> = want
            .children()
            .filter(|c| c.has_tag_name("node"))
            .filter_map(|c| c.attribute("name"))
            .collect();
        assert_eq!(got.nodes, nodes, "{name}: {} nodes", got.id);
        assert_eq!(got.promotable, promotable, "{name}: {} promotable", got.id);
    }

    // Fence events.
    let xfence = child(root, "fence_history")
        .map(|f| {
            f.children()
                .filter(|c| c.has_tag_name("fence_event"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(pm.fence_history.len(), xfence, "{name}: fence events");

    common::check_status(validator, &r.status).unwrap_or_else(|e| panic!("{name}: schema: {e}"));
    common::round_trip(&r);
}

#[test]
fn every_fixture_parses_and_agrees_with_a_simple_reader() {
    let v = common::schema();
    let all = common::fixtures();
    for (name, text) in &all {
        check(name, text, &v);
    }
    eprintln!("checked {} fixtures", all.len());
}

#[test]
fn two_node_fence_fixture() {
    let text = std::fs::read_to_string(
        common::fixtures_dir().join("live-2.1.5/13-nodeB-crashed-auto-fenced.xml"),
    )
    .unwrap();
    let doc = crm_xml::parse(&text).unwrap();
    let r = report::build(
        &doc,
        &common::options_with_addresses(&doc),
        None,
        datetime!(2026-11-30 07:40:00 UTC),
    );
    assert_eq!(r.pacemaker.fence_history.len(), 2);
    let e = &r.pacemaker.fence_history[0];
    assert_eq!((e.target.as_str(), e.status.as_str()), ("nodeB", "success"));
    assert_eq!(e.completed.as_deref(), Some("2026-11-30T07:36:38.000000Z"));
    let b = r.status.nodes.iter().find(|n| n.node_name == "nodeb");
    assert!(
        b.is_none(),
        "node names with capitals cannot be RFC 1123 names"
    );
    assert!(r.pacemaker.omitted_nodes.iter().any(|o| o.name == "nodeB"));
}

#[test]
fn schema_rejects_what_the_crd_rejects() {
    let v = common::schema();
    let text =
        std::fs::read_to_string(common::fixtures_dir().join("live-2.1.5/10-two-node-online.xml"))
            .unwrap();
    let doc = crm_xml::parse(&text.replace("nodeA", "node-a").replace("nodeB", "node-b")).unwrap();
    let r = report::build(
        &doc,
        &common::options_with_addresses(&doc),
        None,
        datetime!(2026-11-30 08:00:00 UTC),
    );
    assert_eq!(r.status.nodes.len(), 2);
    common::check_status(&v, &r.status).unwrap();

    let mut bad = r.status.clone();
    bad.nodes[0].addresses[0].address = "0.0.0.0".into();
    assert!(
        common::check_status(&v, &bad).is_err(),
        "placeholder address"
    );
    let mut bad = r.status.clone();
    bad.nodes[0].addresses[0].address = "2001:DB8::1".into();
    assert!(
        common::check_status(&v, &bad).is_err(),
        "non-canonical IPv6"
    );
    let mut bad = r.status.clone();
    bad.nodes[0].addresses.clear();
    assert!(common::check_status(&v, &bad).is_err(), "no address");
    let mut bad = r.status.clone();
    bad.conditions.retain(|c| c.kind != "InService");
    assert!(common::check_status(&v, &bad).is_err(), "missing InService");
    let mut bad = r.status.clone();
    bad.nodes[0].conditions.pop();
    assert!(common::check_status(&v, &bad).is_err(), "8 node conditions");
    let mut bad = r.status.clone();
    bad.nodes[0].resources.pop();
    assert!(common::check_status(&v, &bad).is_err(), "missing Etcd");
    let mut bad = r.status.clone();
    let dup = bad.nodes[0].clone();
    bad.nodes.push(dup);
    assert!(common::check_status(&v, &bad).is_err(), "duplicate node");
    let mut bad = r.status.clone();
    bad.nodes[0].node_name = "Node_A".into();
    assert!(common::check_status(&v, &bad).is_err(), "node name");
    let mut bad = r.status.clone();
    bad.last_updated = "yesterday".into();
    assert!(common::check_status(&v, &bad).is_err(), "time");
}
