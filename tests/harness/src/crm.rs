//! The harness's own small view of `crm_mon --output-as=xml`, and predicates
//! to wait on.
//!
//! This is deliberately independent of the product's `crm-xml` crate: the
//! harness checks the product, so it must not share its parser's mistakes.
//! It reads only what the harness waits on: nodes, DC, resources and the
//! fence history.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use roxmltree::{Document, Node};

/// A node as crm_mon shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// Node name.
    pub name: String,
    /// `online="true"`.
    pub online: bool,
    /// `unclean="true"`: lost and not yet fenced.
    pub unclean: bool,
    /// `pending="true"`.
    pub pending: bool,
    /// `standby="true"`.
    pub standby: bool,
    /// `shutdown="true"`.
    pub shutdown: bool,
    /// `is_dc="true"`.
    pub is_dc: bool,
}

/// A primitive resource (also inside clones, groups and bundles).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceState {
    /// Resource id (clone instances carry a `:N` suffix).
    pub id: String,
    /// `class:provider:type`.
    pub agent: String,
    /// Role (`Started`, `Stopped`, `Promoted`, …).
    pub role: String,
    /// `active="true"`.
    pub active: bool,
    /// `failed="true"`.
    pub failed: bool,
    /// Nodes it runs on.
    pub nodes: Vec<String>,
}

/// One entry of `<fence_history>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceEvent {
    /// `reboot`, `off` or `on`.
    pub action: String,
    /// The fenced node.
    pub target: String,
    /// `success`, `failed`, `pending`.
    pub status: String,
    /// The node that asked for it.
    pub origin: String,
    /// The node that executed it.
    pub delegate: String,
    /// The requesting client (e.g. `stonith_admin.123`, `pacemaker-controld.45`).
    pub client: String,
    /// Completion time as crm_mon prints it, if completed.
    pub completed: Option<String>,
}

/// A parsed `crm_mon -1 --output-as=xml --fence-history=…` document.
#[derive(Debug, Clone)]
pub struct CrmMon {
    /// Nodes in document order.
    pub nodes: Vec<NodeState>,
    /// Name of the DC, if one is elected.
    pub dc: Option<String>,
    /// The DC's partition has quorum.
    pub with_quorum: bool,
    /// Primitive resources.
    pub resources: Vec<ResourceState>,
    /// Fence history, newest first (crm_mon's order).
    pub fence_history: Vec<FenceEvent>,
    /// The XML text as read.
    pub raw: String,
}

fn flag(n: Node<'_, '_>, attr: &str) -> bool {
    n.attribute(attr) == Some("true")
}

fn text(n: Node<'_, '_>, attr: &str) -> String {
    n.attribute(attr).unwrap_or_default().to_owned()
}

fn child<'a, 'i>(n: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    n.children().find(|c| c.has_tag_name(name))
}

impl CrmMon {
    /// Parses crm_mon's XML output.
    pub fn parse(xml: &str) -> Result<Self> {
        let doc = Document::parse(xml).context("crm_mon output is not XML")?;
        let root = doc.root_element();
        if !root.has_tag_name("pacemaker-result") {
            anyhow::bail!(
                "crm_mon output has root <{}>, not <pacemaker-result>",
                root.tag_name().name()
            );
        }
        let dc = child(root, "summary")
            .and_then(|s| child(s, "current_dc"))
            .filter(|d| flag(*d, "present"));
        let nodes = child(root, "nodes")
            .map(|ns| {
                ns.children()
                    .filter(|n| n.has_tag_name("node"))
                    .map(|n| NodeState {
                        name: text(n, "name"),
                        online: flag(n, "online"),
                        unclean: flag(n, "unclean"),
                        pending: flag(n, "pending"),
                        standby: flag(n, "standby"),
                        shutdown: flag(n, "shutdown"),
                        is_dc: flag(n, "is_dc"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let resources = child(root, "resources")
            .map(|rs| {
                rs.descendants()
                    .filter(|r| r.has_tag_name("resource"))
                    .map(|r| ResourceState {
                        id: text(r, "id"),
                        agent: text(r, "resource_agent"),
                        role: text(r, "role"),
                        active: flag(r, "active"),
                        failed: flag(r, "failed"),
                        nodes: r
                            .children()
                            .filter(|n| n.has_tag_name("node"))
                            .map(|n| text(n, "name"))
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let fence_history = child(root, "fence_history")
            .map(|fh| {
                fh.children()
                    .filter(|e| e.has_tag_name("fence_event"))
                    .map(|e| FenceEvent {
                        action: text(e, "action"),
                        target: text(e, "target"),
                        status: text(e, "status"),
                        origin: text(e, "origin"),
                        delegate: text(e, "delegate"),
                        client: text(e, "client"),
                        completed: e.attribute("completed").map(str::to_owned),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            nodes,
            dc: dc.map(|d| text(d, "name")),
            with_quorum: dc.is_some_and(|d| flag(d, "with_quorum")),
            resources,
            fence_history,
            raw: xml.to_owned(),
        })
    }

    /// The node called `name`, if crm_mon lists it.
    pub fn node(&self, name: &str) -> Option<&NodeState> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The resource with id `id`.
    pub fn resource(&self, id: &str) -> Option<&ResourceState> {
        self.resources.iter().find(|r| r.id == id)
    }

    /// Successful fence events whose target is `target`.
    pub fn fence_successes(&self, target: &str) -> Vec<&FenceEvent> {
        self.fence_history
            .iter()
            .filter(|e| e.target == target && e.status == "success")
            .collect()
    }

    /// A one-line summary for progress output and error messages.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "DC={} quorum={};",
            self.dc.as_deref().unwrap_or("none"),
            if self.with_quorum { "yes" } else { "no" }
        );
        for n in &self.nodes {
            let state = if n.online {
                "online"
            } else if n.unclean {
                "UNCLEAN"
            } else if n.pending {
                "pending"
            } else {
                "offline"
            };
            let _ = write!(s, " {}={state}", n.name);
        }
        for r in &self.resources {
            let _ = write!(s, " {}={}@{}", r.id, r.role, r.nodes.join("+"));
            if r.failed {
                s.push_str("(failed)");
            }
        }
        for e in &self.fence_history {
            let _ = write!(
                s,
                " fence[{} {} {} by {}]",
                e.action, e.target, e.status, e.delegate
            );
        }
        s
    }
}

type Pred = Box<dyn Fn(&CrmMon) -> bool + Send + Sync>;

/// A described predicate on crm_mon's view, for [`crate::Cluster::wait_for`].
pub struct Expect {
    desc: String,
    pred: Pred,
}

impl std::fmt::Debug for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.desc)
    }
}

impl Expect {
    /// A custom predicate with a description for error messages.
    pub fn new(
        desc: impl Into<String>,
        pred: impl Fn(&CrmMon) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            desc: desc.into(),
            pred: Box::new(pred),
        }
    }

    /// Both predicates.
    pub fn and(self, other: Expect) -> Expect {
        let (a, b) = (self.pred, other.pred);
        Expect {
            desc: format!("{} and {}", self.desc, other.desc),
            pred: Box::new(move |m| a(m) && b(m)),
        }
    }

    /// Whether `m` satisfies the predicate.
    pub fn matches(&self, m: &CrmMon) -> bool {
        (self.pred)(m)
    }

    /// What the predicate waits for.
    pub fn description(&self) -> &str {
        &self.desc
    }
}

/// Node `name` is online.
pub fn node_online(name: &str) -> Expect {
    let n = name.to_owned();
    Expect::new(format!("{name} online"), move |m| {
        m.node(&n).is_some_and(|s| s.online)
    })
}

/// Node `name` is listed and not online (cleanly down or fenced).
pub fn node_offline(name: &str) -> Expect {
    let n = name.to_owned();
    Expect::new(format!("{name} offline"), move |m| {
        m.node(&n).is_some_and(|s| !s.online && !s.unclean)
    })
}

/// Node `name` is unclean (lost, fencing not yet confirmed).
pub fn node_unclean(name: &str) -> Expect {
    let n = name.to_owned();
    Expect::new(format!("{name} unclean"), move |m| {
        m.node(&n).is_some_and(|s| s.unclean)
    })
}

/// Every node in `names` is online.
pub fn all_online(names: &[String]) -> Expect {
    let ns = names.to_vec();
    Expect::new(format!("{} online", names.join(", ")), move |m| {
        ns.iter().all(|n| m.node(n).is_some_and(|s| s.online))
    })
}

/// A DC is elected.
pub fn dc_present() -> Expect {
    Expect::new("a DC elected", |m| m.dc.is_some())
}

/// Resource `id` is started (or promoted) on node `node` and not failed.
pub fn resource_started_on(id: &str, node: &str) -> Expect {
    let (r, n) = (id.to_owned(), node.to_owned());
    Expect::new(format!("{id} started on {node}"), move |m| {
        m.resource(&r).is_some_and(|s| {
            s.active
                && !s.failed
                && s.nodes.contains(&n)
                && matches!(
                    s.role.as_str(),
                    "Started" | "Promoted" | "Unpromoted" | "Master" | "Slave"
                )
        })
    })
}

/// At least `count` successful fence events target `node`.
pub fn fenced_times(node: &str, count: usize) -> Expect {
    let n = node.to_owned();
    Expect::new(format!("{count} successful fence(s) of {node}"), move |m| {
        m.fence_successes(&n).len() >= count
    })
}

/// A successful fence event targets `node`.
pub fn fenced(node: &str) -> Expect {
    fenced_times(node, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"<pacemaker-result api-version="2.25" request="crm_mon">
  <summary><current_dc present="true" name="node1" id="1" with_quorum="true"/></summary>
  <nodes>
    <node name="node1" id="1" online="true" standby="false" pending="false" unclean="false" shutdown="false" is_dc="true"/>
    <node name="node2" id="2" online="false" standby="false" pending="false" unclean="true" shutdown="false" is_dc="false"/>
  </nodes>
  <resources>
    <resource id="fence-node1" resource_agent="stonith:fence_warden_testns" role="Started" active="true" failed="false"><node name="node1" id="1"/></resource>
    <clone id="c" multi_state="false"><resource id="d:0" resource_agent="ocf:pacemaker:Dummy" role="Stopped" active="false" failed="false"/></clone>
  </resources>
  <node_history><node name="node1"><resource_history id="d"/></node></node_history>
  <fence_history>
    <fence_event action="reboot" target="node2" client="stonith_admin.1" origin="node1" status="success" delegate="node1" completed="2026-11-30 07:36:21Z"/>
    <fence_event action="reboot" target="node1" client="x" origin="node2" status="failed" delegate="node2"/>
  </fence_history>
  <status code="0" message="OK"/>
</pacemaker-result>"#;

    #[test]
    fn parses_nodes_resources_and_fences() {
        let m = CrmMon::parse(DOC).unwrap();
        assert_eq!(m.dc.as_deref(), Some("node1"));
        assert!(m.with_quorum);
        assert_eq!(m.nodes.len(), 2);
        assert!(m.node("node2").unwrap().unclean);
        assert_eq!(m.resources.len(), 2);
        assert_eq!(m.resource("fence-node1").unwrap().nodes, vec!["node1"]);
        assert_eq!(m.fence_successes("node2").len(), 1);
        assert!(m.fence_successes("node1").is_empty());
        assert!(node_online("node1").and(dc_present()).matches(&m));
        assert!(node_unclean("node2").matches(&m));
        assert!(!node_offline("node2").matches(&m));
        assert!(resource_started_on("fence-node1", "node1").matches(&m));
        assert!(!resource_started_on("d:0", "node1").matches(&m));
        assert!(fenced("node2").matches(&m) && !fenced("node1").matches(&m));
        let s = m.summary();
        assert!(
            s.contains("node2=UNCLEAN") && s.contains("fence[reboot node2 success"),
            "{s}"
        );
    }

    #[test]
    fn rejects_non_crm_mon_xml() {
        assert!(CrmMon::parse("<cib/>").is_err());
        assert!(CrmMon::parse("not xml").is_err());
    }

    #[test]
    fn parses_real_fixture_shapes() {
        // The live-2.1.5 documents the recipes captured have this form.
        let doc = r#"<pacemaker-result api-version="2.25" request="crm_mon -1 --output-as=xml --fence-history=3">
  <summary><current_dc present="false"/></summary>
  <nodes><node name="nodeA" id="1" online="true" unclean="false"/></nodes>
  <status code="0" message="OK"/>
</pacemaker-result>"#;
        let m = CrmMon::parse(doc).unwrap();
        assert!(m.dc.is_none());
        assert!(!dc_present().matches(&m));
        assert!(all_online(&["nodeA".to_owned()]).matches(&m));
    }
}
