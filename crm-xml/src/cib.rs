//! What the report needs from the cluster configuration (CIB) that crm_mon
//! does not print: which nodes each fence device can fence. The incumbent
//! guessed the target from the device's id (`<node>_redfish`); the CIB's
//! `pcmk_host_list` / `pcmk_host_map` say it.

use std::collections::BTreeMap;

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
}

impl FenceTargets {
    /// Parse a CIB document (`cibadmin --query` output or a `cib.xml` file).
    pub fn from_cib(input: &str) -> Result<Self, ParseError> {
        let root = parse_tree(input)?;
        let mut devices = BTreeMap::new();
        if let Some(resources) = root
            .child("configuration")
            .and_then(|c| c.child("resources"))
        {
            collect(resources, &mut devices, 0);
        }
        Ok(Self { devices })
    }

    /// Targets of `device`, if known.
    pub fn targets(&self, device: &str) -> Option<&[String]> {
        self.devices.get(device).and_then(|t| t.as_deref())
    }
}

fn collect(el: &Element<'_>, out: &mut BTreeMap<String, Option<Vec<String>>>, depth: usize) {
    for child in &el.children {
        match child.name {
            "primitive" if child.attr("class") == Some("stonith") => {
                if let Some(id) = child.attr("id") {
                    out.insert(id.to_owned(), targets_of(child));
                }
            }
            // Stonith devices are not normally grouped or cloned, but the
            // schema allows it; the element tree is depth-bounded anyway.
            "group" | "clone" | "master" | "bundle" if depth < 8 => collect(child, out, depth + 1),
            _ => {}
        }
    }
}

fn targets_of(primitive: &Element<'_>) -> Option<Vec<String>> {
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
/// or a `corosync.conf` file (`nodelist { node { ring0_addr: … name: … } }`).
/// Returns name → addresses in ring order (ring0 first).
pub fn corosync_addresses(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut by_index: BTreeMap<String, (Option<String>, BTreeMap<u32, String>)> = BTreeMap::new();
    if text.contains("nodelist.node.") {
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
    } else {
        // corosync.conf: track `nodelist { node { key: value } }` blocks.
        let mut stack: Vec<String> = Vec::new();
        let mut node_no = 0usize;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if let Some(name) = line.strip_suffix('{') {
                let name = name.trim().to_owned();
                if name == "node" && stack.last().map(String::as_str) == Some("nodelist") {
                    node_no += 1;
                }
                stack.push(name);
            } else if line == "}" {
                stack.pop();
            } else if let Some((k, v)) = line.split_once(':')
                && stack.len() == 2
                && stack[0] == "nodelist"
                && stack[1] == "node"
            {
                record(
                    &mut by_index,
                    node_no.to_string(),
                    k.trim(),
                    v.trim().to_owned(),
                );
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let conf = "totem {\n version: 2\n}\nnodelist {\n  node {\n    ring0_addr: 192.0.2.1 # x\n    name: n1\n    nodeid: 1\n  }\n  node {\n    name: n2\n    ring0_addr: 192.0.2.2\n  }\n}\n";
        let a = corosync_addresses(conf);
        assert_eq!(a["n1"], ["192.0.2.1"]);
        assert_eq!(a["n2"], ["192.0.2.2"]);
    }
}
