//! What the report needs from the cluster configuration (CIB) that crm_mon
//! does not print: which nodes each fence device can fence. Guessing the
//! target from the device's id (`<node>_redfish`) breaks on any other naming;
//! the CIB's `pcmk_host_list` / `pcmk_host_map` say it.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::ParseError;
use crate::xml::{Element, parse_tree};

/// The targets of every stonith primitive in a CIB, by device id.
/// `None` means the device's targets are not configured statically
/// (`pcmk_host_check=dynamic-list`, Pacemaker's default): Pacemaker asks the
/// device at fence time, and we cannot know in advance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FenceTargets {
    /// device id → target node names.
    pub devices: BTreeMap<String, Option<Vec<String>>>,
    /// Nodes whose fencing is delayed (`pcmk_delay_base` or
    /// `pcmk_delay_max` above zero on a device that fences them, or their
    /// entry of a per-node delay map).
    pub delayed: BTreeSet<String>,
}

impl FenceTargets {
    /// Parse a CIB document (`cibadmin --query` output or a `cib.xml` file;
    /// the output of `--scope configuration` or `--scope resources` too).
    pub fn from_cib(input: &str) -> Result<Self, ParseError> {
        let doc = parse_tree(input)?;
        let root = Element::root(&doc);
        let mut out = Self::default();
        let resources = match root.name() {
            "resources" => Some(root),
            "configuration" => root.child("resources"),
            _ => root
                .child("configuration")
                .and_then(|c| c.child("resources")),
        };
        if let Some(resources) = resources {
            collect(resources, &mut out, 0);
        }
        Ok(out)
    }

    /// Targets of `device`, if known.
    pub fn targets(&self, device: &str) -> Option<&[String]> {
        self.devices.get(device).and_then(|t| t.as_deref())
    }

    /// The node of `nodes` that wins a fence race: the only one whose
    /// fencing is delayed (it fences its peer at once while its own fencing
    /// waits). `None` when none is delayed, or more than one.
    pub fn fence_race_winner(&self, nodes: &[String]) -> Option<String> {
        let delayed: Vec<&String> = nodes.iter().filter(|n| self.delayed.contains(*n)).collect();
        match delayed.as_slice() {
            [one] if nodes.len() >= 2 => Some((*one).clone()),
            _ => None,
        }
    }
}

fn collect(el: Element<'_>, out: &mut FenceTargets, depth: usize) {
    for child in el.children() {
        match child.name() {
            "primitive" if child.attr("class") == Some("stonith") => {
                if let Some(id) = child.attr("id") {
                    let targets = targets_of(child);
                    out.delayed.extend(delayed_of(child, targets.as_deref()));
                    out.devices.insert(id.to_owned(), targets);
                }
            }
            // Stonith devices are not normally grouped or cloned, but the
            // schema allows it; recursion stops at depth 8.
            "group" | "clone" | "master" | "bundle" if depth < 8 => collect(child, out, depth + 1),
            _ => {}
        }
    }
}

/// The nodes a device delays fencing of: all its targets for a plain
/// positive delay, or the nodes with a positive entry in a per-node map
/// (`node1:0s;node2:5s`).
fn delayed_of(primitive: Element<'_>, targets: Option<&[String]>) -> Vec<String> {
    let mut out = Vec::new();
    for ia in primitive.children_named("instance_attributes") {
        for nv in ia.children_named("nvpair") {
            if !matches!(nv.attr("name"), Some("pcmk_delay_base" | "pcmk_delay_max")) {
                continue;
            }
            let Some(v) = nv.attr("value") else { continue };
            if v.contains(':') {
                for pair in split_list(v) {
                    if let Some((node, d)) = pair.split_once(':')
                        && positive_duration(d)
                    {
                        out.push(node.trim().to_owned());
                    }
                }
            } else if positive_duration(v) {
                out.extend(targets.unwrap_or_default().iter().cloned());
            }
        }
    }
    out
}

/// Whether a Pacemaker duration ("2s", "2000ms", "2", "1min") is above
/// zero: only its number matters, not its unit.
fn positive_duration(v: &str) -> bool {
    let number: String = v
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number.parse::<f64>().is_ok_and(|d| d > 0.0)
}

fn targets_of(primitive: Element<'_>) -> Option<Vec<String>> {
    let mut list = None;
    let mut map = None;
    for ia in primitive.children_named("instance_attributes") {
        for nv in ia.children_named("nvpair") {
            match nv.attr("name") {
                Some("pcmk_host_list") => list = nv.attr("value").map(split_list),
                Some("pcmk_host_map") => map = nv.attr("value").map(split_map),
                _ => {}
            }
        }
    }
    // Pacemaker consults the map first, then the list.
    let mut targets: Vec<String> = map.into_iter().chain(list).flatten().collect();
    if targets.is_empty() {
        return None;
    }
    targets.sort();
    targets.dedup();
    Some(targets)
}

/// `pcmk_host_list`: names separated by spaces, commas or semicolons.
fn split_list(v: &str) -> Vec<String> {
    v.split([' ', ',', ';', '\t', '\n'])
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `pcmk_host_map`: `node:port` pairs separated by `;`, `,` or spaces.
fn split_map(v: &str) -> Vec<String> {
    v.split([' ', ',', ';', '\t', '\n'])
        .filter_map(|pair| pair.split_once(['=', ':']).map(|(n, _)| n.trim()))
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Node names and addresses from Corosync's node list, either
/// `corosync-cmapctl` output (`nodelist.node.0.ring0_addr (str) = 10.0.0.1`)
/// or a `corosync.conf` file (`nodelist { node { ring0_addr: … name: … } }`,
/// read by [`corosync_conf::parse`] with Corosync's own rules; a file
/// Corosync would reject gives no addresses, since a misread one would be a
/// wrong address). Returns name → addresses in ring order (ring0 first).
pub fn corosync_addresses(text: &str) -> BTreeMap<String, Vec<String>> {
    if !text.contains("nodelist.node.") {
        return corosync_conf::parse(text)
            .map(|nodes| corosync_conf::addresses(&nodes))
            .unwrap_or_default();
    }
    let mut by_index: BTreeMap<String, (Option<String>, BTreeMap<u32, String>)> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("nodelist.node.") else {
            continue;
        };
        let Some((key, value)) = rest.split_once('=') else {
            continue;
        };
        let key = key.split_whitespace().next().unwrap_or_default();
        let value = value.trim().to_owned();
        let Some((idx, field)) = key.split_once('.') else {
            continue;
        };
        record(&mut by_index, idx.to_owned(), field, value);
    }
    let mut out = BTreeMap::new();
    for (_, (name, rings)) in by_index {
        let addrs: Vec<String> = rings.into_values().collect();
        if let Some(name) = name {
            out.insert(name, addrs);
        }
    }
    out
}

fn record(
    by_index: &mut BTreeMap<String, (Option<String>, BTreeMap<u32, String>)>,
    idx: String,
    field: &str,
    value: String,
) {
    let entry = by_index.entry(idx).or_default();
    if field == "name" {
        entry.0 = Some(value);
    } else if let Some(ring) = field
        .strip_prefix("ring")
        .and_then(|r| r.strip_suffix("_addr"))
        .and_then(|n| n.parse::<u32>().ok())
    {
        entry.1.insert(ring, value);
    }
}

pub mod corosync_conf {
    //! The node list of a `corosync.conf`, read the way Corosync reads it, so
    //! that `collect` gets node addresses without running `corosync-cmapctl`.
    //!
    //! Corosync's own parser (coroparse) works line by line: surrounding blanks
    //! are ignored, a line whose first character is `#` is a comment (a `#`
    //! later in a line is part of the value), a line holding `{` opens a section
    //! named by what precedes it, otherwise a line holding `:` is `key: value`
    //! split at the first colon (so IPv6 addresses stay whole), otherwise a line
    //! holding `}` closes the section; anything else is an error. This parser
    //! follows the same rules in the same order and rejects what Corosync would
    //! reject, so a file it accepts means the same to both.

    use std::collections::BTreeMap;

    /// Corosync (knet) supports links 0–7: `ring0_addr` … `ring7_addr`.
    const MAX_LINKS: u32 = 8;

    /// One `nodelist { node { … } }` block.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct ConfNode {
        /// `name`, the node's name in Pacemaker.
        pub name: Option<String>,
        /// `nodeid`, the id crm_mon prints as the node's `id`.
        pub nodeid: Option<u32>,
        /// `ringN_addr` by link number.
        pub addrs: BTreeMap<u32, String>,
        /// Line of the block's `node {`, for messages.
        pub line: usize,
    }

    /// What a malformed file is: the (1-based) line and what is wrong there.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[error("line {line}: {message}")]
    pub struct ConfError {
        /// 1-based line number.
        pub line: usize,
        /// What is wrong.
        pub message: String,
    }

    fn err(line: usize, message: impl Into<String>) -> ConfError {
        ConfError {
            line,
            message: message.into(),
        }
    }

    /// The node blocks of `nodelist` sections, in file order.
    pub fn parse(text: &str) -> Result<Vec<ConfNode>, ConfError> {
        // Open sections, outermost first, with the line that opened each.
        let mut stack: Vec<(&str, usize)> = Vec::new();
        let mut nodes: Vec<ConfNode> = Vec::new();
        for (idx, raw) in text.lines().enumerate() {
            let line_no = idx + 1;
            let line = raw.trim_matches([' ', '\t', '\r']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some((before, after)) = line.split_once('{') {
                let name = before.trim_matches([' ', '\t']);
                if name.is_empty() {
                    return Err(err(line_no, "missing section name before '{'"));
                }
                if !after.trim_matches([' ', '\t']).is_empty() {
                    return Err(err(line_no, "extra characters after '{'"));
                }
                let in_nodelist = stack.len() == 1 && stack[0].0 == "nodelist";
                if in_nodelist && name == "node" {
                    nodes.push(ConfNode {
                        line: line_no,
                        ..ConfNode::default()
                    });
                }
                stack.push((name, line_no));
                continue;
            }
            if let Some((key, value)) = line.split_once(':') {
                let key = key.trim_matches([' ', '\t']);
                let value = value.trim_matches([' ', '\t']);
                if key.is_empty() {
                    return Err(err(line_no, "empty key before ':'"));
                }
                let in_node = stack.len() == 2 && stack[0].0 == "nodelist" && stack[1].0 == "node";
                if let (true, Some(node)) = (in_node, nodes.last_mut()) {
                    node_key(node, key, value, line_no)?;
                }
                continue;
            }
            if let Some((_, after)) = line.split_once('}') {
                if !after.trim_matches([' ', '\t']).is_empty() {
                    return Err(err(line_no, "extra characters after '}'"));
                }
                if stack.pop().is_none() {
                    return Err(err(line_no, "'}' without an open section"));
                }
                continue;
            }
            return Err(err(
                line_no,
                format!("{line:?} is neither `name {{`, `key: value` nor `}}`"),
            ));
        }
        if let Some((name, opened)) = stack.last() {
            return Err(err(
                opened.to_owned(),
                format!("section {name:?} is never closed"),
            ));
        }
        Ok(nodes)
    }

    /// Corosync keeps the last of repeated keys; so does this.
    fn node_key(node: &mut ConfNode, key: &str, value: &str, line: usize) -> Result<(), ConfError> {
        if key == "name" {
            if value.is_empty() {
                return Err(err(line, "empty node name"));
            }
            node.name = Some(value.to_owned());
        } else if key == "nodeid" {
            let id: u32 = value
                .parse()
                .map_err(|_| err(line, format!("nodeid {value:?} is not a number")))?;
            if id == 0 {
                return Err(err(line, "nodeid 0 is reserved"));
            }
            node.nodeid = Some(id);
        } else if let Some(link) = key
            .strip_prefix("ring")
            .and_then(|r| r.strip_suffix("_addr"))
        {
            let link: u32 = link
                .parse()
                .ok()
                .filter(|l| *l < MAX_LINKS)
                .ok_or_else(|| err(line, format!("{key}: links are ring0_addr to ring7_addr")))?;
            if value.is_empty() {
                return Err(err(line, format!("empty {key}")));
            }
            node.addrs.insert(link, value.to_owned());
        }
        // Other keys (e.g. `quorum_votes`) say nothing about addresses.
        Ok(())
    }

    /// Name → addresses in link order, for the nodes that have a name (the
    /// report identifies nodes by name; an unnamed one cannot be matched).
    pub fn addresses(nodes: &[ConfNode]) -> BTreeMap<String, Vec<String>> {
        nodes
            .iter()
            .filter_map(|n| {
                let name = n.name.clone()?;
                Some((name, n.addrs.values().cloned().collect()))
            })
            .collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// What the test harness writes for each cluster (tests/harness pcmk.rs).
        const HARNESS: &str = "totem {\n  version: 2\n  cluster_name: c1\n  transport: knet\n  crypto_cipher: none\n  crypto_hash: none\n  token: 1000\n}\n\
            logging {\n  to_stderr: no\n  to_syslog: no\n  to_logfile: yes\n  logfile: /var/log/pacemaker/corosync.log\n  timestamp: on\n}\n\
            quorum {\n  provider: corosync_votequorum\n  two_node: 1\n}\n\
            nodelist {\n  node {\n    name: c1n1\n    nodeid: 1\n    ring0_addr: 10.77.0.1\n  }\n  node {\n    name: c1n2\n    nodeid: 2\n    ring0_addr: 10.77.0.2\n  }\n}\n";

        #[test]
        fn harness_file() {
            let nodes = parse(HARNESS).unwrap();
            assert_eq!(nodes.len(), 2);
            assert_eq!(nodes[0].name.as_deref(), Some("c1n1"));
            assert_eq!(nodes[0].nodeid, Some(1));
            assert_eq!(nodes[1].line, 26);
            let a = addresses(&nodes);
            assert_eq!(a["c1n1"], ["10.77.0.1"]);
            assert_eq!(a["c1n2"], ["10.77.0.2"]);
        }

        /// Debian's packaged file: tabs, comment lines inside sections, a
        /// commented-out second link.
        #[test]
        fn debian_default_file() {
            let text = "# Please read the corosync.conf.5 manual page\ntotem {\n\tversion: 2\n\t# comment\n\tcluster_name: debian\n}\n\n\
                nodelist {\n\t# Change/uncomment/add node sections\n\n\tnode {\n\t\t# Hostname of the node\n\t\tname: node1\n\t\tnodeid: 1\n\t\tring0_addr: 127.0.0.1\n\t\t#ring1_addr: 192.168.1.1\n\t}\n\t# ...\n}\n";
            let nodes = parse(text).unwrap();
            assert_eq!(nodes.len(), 1);
            assert_eq!(addresses(&nodes)["node1"], ["127.0.0.1"]);
        }

        #[test]
        fn links_ipv6_crlf_and_hash_in_values() {
            let text = "nodelist {\r\n node {\r\n  ring1_addr: fd00::2\r\n  ring0_addr: 2001:db8::1\r\n  name: a#1\r\n  nodeid: 7\r\n }\r\n node {\r\n  ring0_addr: 192.0.2.9\r\n }\r\n}\r\n";
            let nodes = parse(text).unwrap();
            assert_eq!(nodes[0].name.as_deref(), Some("a#1"));
            let a = addresses(&nodes);
            // Link order, not file order; the unnamed node has no entry.
            assert_eq!(a["a#1"], ["2001:db8::1", "fd00::2"]);
            assert_eq!(a.len(), 1);
        }

        #[test]
        fn sections_elsewhere_are_not_nodes() {
            // `node` outside nodelist, and a subsection of a node, carry no
            // node list entries.
            let text = "totem {\n node {\n  name: x\n }\n}\nnodelist {\n node {\n  name: n\n  extra {\n   ring0_addr: 192.0.2.5\n  }\n  ring0_addr: 192.0.2.1\n }\n}\n";
            let nodes = parse(text).unwrap();
            assert_eq!(nodes.len(), 1);
            assert_eq!(addresses(&nodes)["n"], ["192.0.2.1"]);
        }

        #[test]
        fn malformed_files_name_the_line() {
            let cases: [(&str, usize, &str); 10] = [
                ("nodelist {\n node {\n  name n1\n }\n}\n", 3, "neither"),
                ("nodelist {\n node {\n  name: n1\n }\n", 1, "never closed"),
                ("nodelist {\n}\n}\n", 3, "without an open section"),
                ("totem {\n}\n{\n}\n", 3, "missing section name"),
                ("nodelist { node\n}\n", 1, "extra characters after '{'"),
                ("nodelist {\n } x\n", 2, "extra characters after '}'"),
                (
                    "nodelist {\n node {\n  nodeid: one\n }\n}\n",
                    3,
                    "not a number",
                ),
                (
                    "nodelist {\n node {\n  ring9_addr: 192.0.2.1\n }\n}\n",
                    3,
                    "ring7_addr",
                ),
                (
                    "nodelist {\n node {\n  : 192.0.2.1\n }\n}\n",
                    3,
                    "empty key",
                ),
                (
                    "nodelist {\n node {\n\n  ring0_addr:\n }\n}\n",
                    4,
                    "empty ring0_addr",
                ),
            ];
            for (text, line, needle) in cases {
                let e = parse(text).unwrap_err();
                assert_eq!(e.line, line, "{text:?}: {e}");
                assert!(e.to_string().contains(needle), "{text:?}: {e}");
            }
        }

        #[test]
        fn empty_and_nodeless_files() {
            assert!(parse("").unwrap().is_empty());
            assert!(parse("# nothing\n\n").unwrap().is_empty());
            assert!(parse("totem {\n version: 2\n}\n").unwrap().is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(target: &str, extra: &str) -> String {
        format!(
            r#"<primitive id="fence-{target}" class="stonith" type="fence_ipmilan">
                 <instance_attributes id="fence-{target}-ia">
                   <nvpair id="fence-{target}-hl" name="pcmk_host_list" value="{target}"/>{extra}
                 </instance_attributes>
               </primitive>"#
        )
    }

    fn winner(resources: &str) -> Option<String> {
        let nodes = ["node1".to_string(), "node2".to_string()];
        FenceTargets::from_cib(resources)
            .unwrap()
            .fence_race_winner(&nodes)
    }

    #[test]
    fn the_node_whose_fencing_is_delayed_wins_the_fence_race() {
        let delayed = r#"<nvpair id="d" name="pcmk_delay_base" value="2s"/>"#;
        let xml = format!(
            "<resources>{}{}</resources>",
            device("node1", delayed),
            device("node2", "")
        );
        assert_eq!(winner(&xml), Some("node1".into()));
        // The whole CIB and the configuration scope read the same.
        let cib = format!("<cib><configuration>{xml}</configuration><status/></cib>");
        assert_eq!(winner(&cib), Some("node1".into()));
        let conf = format!("<configuration>{xml}</configuration>");
        assert_eq!(winner(&conf), Some("node1".into()));
    }

    #[test]
    fn no_delay_zero_delays_or_two_delays_give_no_winner() {
        let none = format!(
            "<resources>{}{}</resources>",
            device("node1", ""),
            device("node2", "")
        );
        assert_eq!(winner(&none), None);
        let both = format!(
            "<resources>{}{}</resources>",
            device(
                "node1",
                r#"<nvpair id="d1" name="pcmk_delay_max" value="5"/>"#
            ),
            device(
                "node2",
                r#"<nvpair id="d2" name="pcmk_delay_base" value="1000ms"/>"#
            )
        );
        assert_eq!(winner(&both), None);
        let zero = format!(
            "<resources>{}{}</resources>",
            device(
                "node1",
                r#"<nvpair id="d1" name="pcmk_delay_base" value="0s"/>"#
            ),
            device("node2", "")
        );
        assert_eq!(winner(&zero), None);
    }

    #[test]
    fn a_shared_device_with_a_per_node_delay_map() {
        let xml = r#"<resources><primitive id="fence" class="stonith" type="fence_ipmilan">
            <instance_attributes id="ia">
              <nvpair id="hl" name="pcmk_host_list" value="node1,node2"/>
              <nvpair id="d" name="pcmk_delay_base" value="node1:0s;node2:5s"/>
            </instance_attributes></primitive></resources>"#;
        assert_eq!(winner(xml), Some("node2".into()));
    }

    #[test]
    fn a_delay_on_anything_but_a_fence_device_is_ignored() {
        let xml = r#"<resources><primitive id="etcd" class="ocf" provider="etcd-warden" type="etcd">
            <instance_attributes id="ia"><nvpair id="d" name="pcmk_delay_base" value="5s"/>
            <nvpair id="hl" name="pcmk_host_list" value="node1"/></instance_attributes>
            </primitive></resources>"#;
        assert_eq!(winner(xml), None);
    }

    #[test]
    fn fence_targets_from_list_and_map() {
        let cib = r#"<cib><configuration><resources>
          <primitive id="f1" class="stonith" type="fence_redfish">
            <instance_attributes id="f1-ia"><nvpair id="a" name="pcmk_host_list" value="node1, node2"/></instance_attributes>
          </primitive>
          <primitive id="f2" class="stonith" type="fence_ipmilan">
            <instance_attributes id="f2-ia"><nvpair id="b" name="pcmk_host_map" value="node3:4;node4:5"/></instance_attributes>
          </primitive>
          <primitive id="f3" class="stonith" type="fence_xvm"/>
          <primitive id="d" class="ocf" provider="pacemaker" type="Dummy"/>
        </resources></configuration></cib>"#;
        let t = FenceTargets::from_cib(cib).unwrap();
        assert_eq!(t.targets("f1").unwrap(), ["node1", "node2"]);
        assert_eq!(t.targets("f2").unwrap(), ["node3", "node4"]);
        assert_eq!(t.targets("f3"), None);
        assert!(!t.devices.contains_key("d"));
    }

    #[test]
    fn corosync_cmapctl_and_conf() {
        let cmap = "nodelist.local_node_pos (u32) = 0\n\
            nodelist.node.0.name (str) = nodeA\n\
            nodelist.node.0.nodeid (u32) = 1\n\
            nodelist.node.0.ring0_addr (str) = 10.0.0.1\n\
            nodelist.node.1.name (str) = nodeB\n\
            nodelist.node.1.ring0_addr (str) = 10.0.0.2\n\
            nodelist.node.1.ring1_addr (str) = 10.1.0.2\n";
        let a = corosync_addresses(cmap);
        assert_eq!(a["nodeA"], ["10.0.0.1"]);
        assert_eq!(a["nodeB"], ["10.0.0.2", "10.1.0.2"]);
        let conf = "totem {\n version: 2\n}\nnodelist {\n  node {\n    # x\n    ring0_addr: 192.0.2.1\n    name: n1\n    nodeid: 1\n  }\n  node {\n    name: n2\n    ring0_addr: 192.0.2.2\n  }\n}\n";
        let a = corosync_addresses(conf);
        assert_eq!(a["n1"], ["192.0.2.1"]);
        assert_eq!(a["n2"], ["192.0.2.2"]);
        // Corosync's rules: a `#` later in a line is part of the value (so
        // no valid address here), and a file it would reject gives none.
        let a = corosync_addresses(&conf.replace(
            "    # x\n    ring0_addr: 192.0.2.1",
            "    ring0_addr: 192.0.2.1 # x",
        ));
        assert_eq!(a["n1"], ["192.0.2.1 # x"]);
        assert!(corosync_addresses("nodelist {\n node {\n  name n1\n }\n}\n").is_empty());
    }
}
