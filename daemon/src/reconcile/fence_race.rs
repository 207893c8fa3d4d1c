//! Which node wins a fence race, from Pacemaker's configuration.
//!
//! In a two-node cluster each node fences the other when they lose sight
//! of each other; a delay on the device that fences one node (its
//! `pcmk_delay_base` or `pcmk_delay_max`) lets that node shoot first, so it
//! is the node that survives a partition and forces a new cluster. The
//! daemon keeps etcd's leader there (see `Step::TransferLeadership`), and
//! reads the delays from the CIB's resources on every gathering rather
//! than from its own configuration, so that moving the delay with `pcs`
//! moves the leader too.

use std::collections::BTreeSet;

/// The configured node that wins fence races according to the stonith
/// devices of `resources_xml` (the output of `cibadmin --query --scope
/// resources`): the only one of `nodes` fenced by a delayed device while
/// the others are not. `None` when no node or more than one is delayed,
/// or when the XML does not parse.
pub(crate) fn winner(resources_xml: &str, nodes: &[String]) -> Option<String> {
    let doc = roxmltree::Document::parse(resources_xml).ok()?;
    let mut delayed = BTreeSet::new();
    for p in doc
        .descendants()
        .filter(|n| n.has_tag_name("primitive") && n.attribute("class") == Some("stonith"))
    {
        let params: Vec<(&str, &str)> = p
            .children()
            .filter(|c| c.has_tag_name("instance_attributes"))
            .flat_map(|ia| ia.children().filter(|c| c.has_tag_name("nvpair")))
            .filter_map(|nv| Some((nv.attribute("name")?, nv.attribute("value")?)))
            .collect();
        let param = |name: &str| params.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let targets: Vec<&str> = param("pcmk_host_list")
            .map(|l| l.split([' ', ',', ';']).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default();
        for key in ["pcmk_delay_base", "pcmk_delay_max"] {
            let Some(v) = param(key) else { continue };
            if v.contains(':') {
                // A per-node map ("node1:5s;node2:0s"): only the nodes
                // with a positive delay are delayed.
                for pair in v.split([';', ' ']).filter(|s| !s.is_empty()) {
                    if let Some((node, d)) = pair.split_once(':')
                        && positive(d)
                    {
                        delayed.insert(node.trim().to_string());
                    }
                }
            } else if positive(v) {
                delayed.extend(targets.iter().map(|t| t.to_string()));
            }
        }
    }
    let delayed: Vec<&String> = nodes.iter().filter(|n| delayed.contains(*n)).collect();
    match delayed.as_slice() {
        [one] if nodes.len() >= 2 => Some((*one).clone()),
        _ => None,
    }
}

/// Whether a Pacemaker duration ("2s", "2000ms", "2", "1min") is above
/// zero: only its number matters here, not its unit.
fn positive(v: &str) -> bool {
    let digits: String = v
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    digits.parse::<f64>().is_ok_and(|d| d > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<String> {
        vec!["node1".into(), "node2".into()]
    }

    fn device(target: &str, extra: &str) -> String {
        format!(
            r#"<primitive id="fence-{target}" class="stonith" type="fence_ipmilan">
                 <instance_attributes id="fence-{target}-ia">
                   <nvpair id="fence-{target}-hl" name="pcmk_host_list" value="{target}"/>{extra}
                 </instance_attributes>
               </primitive>"#
        )
    }

    #[test]
    fn the_node_whose_fencing_is_delayed_wins() {
        let xml = format!(
            "<resources>{}{}</resources>",
            device(
                "node1",
                r#"<nvpair id="d" name="pcmk_delay_base" value="2s"/>"#
            ),
            device("node2", "")
        );
        assert_eq!(winner(&xml, &nodes()), Some("node1".into()));
    }

    #[test]
    fn no_delay_or_two_delays_means_no_winner() {
        let none = format!(
            "<resources>{}{}</resources>",
            device("node1", ""),
            device("node2", "")
        );
        assert_eq!(winner(&none, &nodes()), None);
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
        assert_eq!(winner(&both, &nodes()), None);
        let zero = format!(
            "<resources>{}{}</resources>",
            device(
                "node1",
                r#"<nvpair id="d1" name="pcmk_delay_base" value="0s"/>"#
            ),
            device("node2", "")
        );
        assert_eq!(winner(&zero, &nodes()), None);
    }

    #[test]
    fn a_shared_device_with_a_per_node_delay_map() {
        let xml = r#"<resources><primitive id="fence" class="stonith" type="fence_ipmilan">
            <instance_attributes id="ia">
              <nvpair id="hl" name="pcmk_host_list" value="node1,node2"/>
              <nvpair id="d" name="pcmk_delay_base" value="node1:0s;node2:5s"/>
            </instance_attributes></primitive></resources>"#;
        assert_eq!(winner(xml, &nodes()), Some("node2".into()));
    }

    #[test]
    fn garbage_and_other_resources_give_no_winner() {
        assert_eq!(winner("<resources", &nodes()), None);
        let xml = r#"<resources><primitive id="etcd" class="ocf" provider="etcd-warden" type="etcd">
            <instance_attributes id="ia"><nvpair id="d" name="pcmk_delay_base" value="5s"/>
            <nvpair id="hl" name="pcmk_host_list" value="node1"/></instance_attributes>
            </primitive></resources>"#;
        assert_eq!(winner(xml, &nodes()), None);
    }
}
