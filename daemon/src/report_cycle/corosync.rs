//! Node addresses from Corosync for the report: its configuration file
//! when that agrees with crm_mon's membership, saved node lists for
//! `collect`, and the reasons a file cannot be trusted.

use std::collections::BTreeMap;
use std::path::Path;

use crm_xml::cib::corosync_addresses;
use crm_xml::model::NodeType;

use super::{CycleError, MAX_COROSYNC_TEXT, corosync_conf, read_capped};

/// Corosync's configuration as far as a cycle can use it.
pub(crate) enum ConfState {
    /// Its node blocks.
    Nodes(Vec<corosync_conf::ConfNode>),
    /// Why not (absent, unreadable or malformed default file).
    Unusable(String),
}

/// Read and parse the Corosync configuration. A required file (named by the
/// operator) must be readable and well-formed; a default one may be absent
/// (Corosync not configured here) or malformed, and then the runtime is
/// asked instead.
pub(crate) fn read_corosync_conf(path: &Path, required: bool) -> Result<ConfState, CycleError> {
    let text = match read_capped(path, MAX_COROSYNC_TEXT) {
        Ok(t) => t,
        Err(e) if required => return Err(CycleError::Read(e)),
        Err(e) => return Ok(ConfState::Unusable(e.to_string())),
    };
    match corosync_conf::parse(&text) {
        Ok(nodes) => Ok(ConfState::Nodes(nodes)),
        Err(e) if required => Err(CycleError::CorosyncConf {
            path: path.to_path_buf(),
            line: e.line,
            message: e.message,
        }),
        Err(e) => Ok(ConfState::Unusable(format!(
            "{}:{}: {}",
            path.display(),
            e.line,
            e.message
        ))),
    }
}

/// A saved node list: a `corosync.conf`, or saved `corosync-cmapctl` output
/// (recognised by its `nodelist.node.` keys).
pub(crate) fn addresses_from_file(
    path: &Path,
) -> Result<BTreeMap<String, Vec<String>>, CycleError> {
    let text = read_capped(path, MAX_COROSYNC_TEXT).map_err(CycleError::Read)?;
    if text.contains("nodelist.node.") {
        return Ok(corosync_addresses(&text));
    }
    let nodes = corosync_conf::parse(&text).map_err(|e| CycleError::CorosyncConf {
        path: path.to_path_buf(),
        line: e.line,
        message: e.message,
    })?;
    Ok(corosync_conf::addresses(&nodes))
}

/// The addresses of the configured nodes that agree with crm_mon (same
/// name, node id equal to crm_mon's `id`), and, if any cluster node crm_mon
/// shows is missing or differs, why the file cannot be trusted as a whole.
pub(crate) fn agreeing_addresses(
    nodes: &[corosync_conf::ConfNode],
    doc: &crm_xml::CrmMon,
) -> (BTreeMap<String, Vec<String>>, Option<String>) {
    let mut agreed = BTreeMap::new();
    let mut missing = Vec::new();
    for n in doc.nodes.iter().filter(|n| n.node_type == NodeType::Member) {
        let found = nodes.iter().find(|c| {
            c.name.as_deref() == Some(n.name.as_str())
                && c.nodeid.is_some_and(|id| id.to_string() == n.id)
        });
        match found {
            Some(c) => {
                agreed.insert(n.name.clone(), c.addrs.values().cloned().collect());
            }
            None => missing.push(format!("{} (id {})", n.name, n.id)),
        }
    }
    let why = (!missing.is_empty()).then(|| {
        format!(
            "no node block with the name and nodeid crm_mon shows for {}",
            missing.join(", ")
        )
    });
    (agreed, why)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// crm_mon's view of a two-node cluster plus a remote node (which has
    /// no Corosync node block and must not count against the file).
    pub(crate) const TWO_NODES: &str = r#"<pacemaker-result api-version="2.25" request="crm_mon">
  <summary><current_dc present="true" name="n1" id="1" with_quorum="true"/></summary>
  <nodes>
    <node name="n1" id="1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="true" resources_running="0" type="member"/>
    <node name="n2" id="2" online="false" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="false" is_dc="false" resources_running="0" type="member"/>
    <node name="r1" id="r1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="false" is_dc="false" resources_running="0" type="remote"/>
  </nodes>
  <status code="0" message="OK"/>
</pacemaker-result>"#;

    fn conf_nodes(text: &str) -> Vec<corosync_conf::ConfNode> {
        corosync_conf::parse(text).unwrap()
    }

    #[test]
    fn configuration_used_only_when_it_agrees_with_crm_mon() {
        let doc = crm_xml::parse(TWO_NODES).unwrap();
        let good = "nodelist {\n node {\n  name: n1\n  nodeid: 1\n  ring0_addr: 192.0.2.1\n }\n node {\n  name: n2\n  nodeid: 2\n  ring0_addr: 192.0.2.2\n  ring1_addr: 198.51.100.2\n }\n}\n";
        let (a, why) = agreeing_addresses(&conf_nodes(good), &doc);
        assert_eq!(why, None);
        assert_eq!(a["n1"], ["192.0.2.1"]);
        assert_eq!(a["n2"], ["192.0.2.2", "198.51.100.2"]);

        // Another cluster's file (the harness's nodes are node1..N; a host
        // file may say node1 too): only agreeing nodes, and a reason.
        let other_ids = good.replace("nodeid: 2", "nodeid: 3");
        let (a, why) = agreeing_addresses(&conf_nodes(&other_ids), &doc);
        assert_eq!(a.keys().collect::<Vec<_>>(), ["n1"]);
        assert!(why.unwrap().contains("n2 (id 2)"));

        let no_ids = good.replace("  nodeid: 1\n", "");
        let (a, why) = agreeing_addresses(&conf_nodes(&no_ids), &doc);
        assert!(!a.contains_key("n1"));
        assert!(why.unwrap().contains("n1 (id 1)"));

        let (a, why) = agreeing_addresses(&[], &doc);
        assert!(a.is_empty());
        assert!(why.unwrap().contains("n1 (id 1), n2 (id 2)"));
    }

    #[test]
    fn corosync_conf_errors_name_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("corosync.conf");
        std::fs::write(&p, "nodelist {\n node {\n  name n1\n }\n}\n").unwrap();
        // Required: an error. The default file: a reason to ask the runtime
        // instead.
        let e = read_corosync_conf(&p, true).err().unwrap();
        assert!(
            e.to_string().starts_with(&format!("{}:3: ", p.display())),
            "{e}"
        );
        let e = addresses_from_file(&p).unwrap_err();
        assert!(e.to_string().contains("corosync.conf:3: "), "{e}");
        match read_corosync_conf(&p, false).unwrap() {
            ConfState::Unusable(why) => assert!(why.contains(":3: "), "{why}"),
            ConfState::Nodes(_) => panic!("malformed file accepted"),
        }
        let missing = d.path().join("absent.conf");
        assert!(read_corosync_conf(&missing, true).is_err());
        assert!(matches!(
            read_corosync_conf(&missing, false).unwrap(),
            ConfState::Unusable(_)
        ));
        // Saved corosync-cmapctl output is accepted as a saved node list.
        std::fs::write(
            &p,
            "nodelist.node.0.name (str) = n1\nnodelist.node.0.ring0_addr (str) = 192.0.2.1\n",
        )
        .unwrap();
        assert_eq!(addresses_from_file(&p).unwrap()["n1"], ["192.0.2.1"]);
    }
}
