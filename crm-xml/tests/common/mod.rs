//! Helpers shared by the integration tests of crm-xml.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crm_xml::report::{ClusterStatus, Options, Profile, Report, valid_crd_address};

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crm_mon")
}

/// Every fixture, sorted, as (relative path, contents).
pub fn fixtures() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let root = fixtures_dir();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "xml") {
                let rel = p.strip_prefix(&root).unwrap().display().to_string();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 843,
        "expected the 843 fixtures, found {}",
        out.len()
    );
    out
}

/// Options giving every node of `doc` a documentation-range address, under
/// the `openshift` profile (whose status the CRD schema checks here apply to).
pub fn options_with_addresses(doc: &crm_xml::CrmMon) -> Options {
    let mut addrs = BTreeMap::new();
    for (i, n) in doc.nodes.iter().enumerate() {
        addrs.insert(n.name.clone(), vec![format!("192.0.2.{}", 1 + i % 250)]);
    }
    Options {
        node_addresses: addrs,
        profile: Profile::OpenShift,
        ..Options::default()
    }
}

pub fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/pacemakercluster-status.schema.json"),
    )
    .unwrap();
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

/// Check a status against the JSON Schema and the CRD rules JSON Schema
/// cannot say: list-map key uniqueness, canonical global-unicast addresses.
pub fn check_status(v: &jsonschema::Validator, status: &ClusterStatus) -> Result<(), String> {
    let json = serde_json::to_value(status).unwrap();
    let errors: Vec<String> = v
        .iter_errors(&json)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    if !errors.is_empty() {
        return Err(errors.join("\n"));
    }
    let unique = |keys: Vec<&str>, what: &str| -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for k in keys {
            if !seen.insert(k) {
                return Err(format!("duplicate {what} key {k}"));
            }
        }
        Ok(())
    };
    unique(
        status.conditions.iter().map(|c| c.kind.as_str()).collect(),
        "condition",
    )?;
    unique(
        status.nodes.iter().map(|n| n.node_name.as_str()).collect(),
        "node",
    )?;
    for n in &status.nodes {
        unique(
            n.conditions.iter().map(|c| c.kind.as_str()).collect(),
            "node condition",
        )?;
        unique(
            n.fencing_agents.iter().map(|a| a.name.as_str()).collect(),
            "fencing agent",
        )?;
        let names: Vec<String> = n
            .resources
            .iter()
            .map(|r| format!("{:?}", r.name))
            .collect();
        unique(names.iter().map(String::as_str).collect(), "resource")?;
        for r in &n.resources {
            unique(
                r.conditions.iter().map(|c| c.kind.as_str()).collect(),
                "resource condition",
            )?;
        }
        for a in &n.addresses {
            if !valid_crd_address(&a.address) {
                return Err(format!("address {} fails the CEL rule", a.address));
            }
        }
    }
    Ok(())
}

pub fn round_trip(r: &Report) {
    let back = Report::from_json(&r.to_json()).unwrap();
    assert_eq!(&back, r);
}
