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
