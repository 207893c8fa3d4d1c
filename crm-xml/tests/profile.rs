//! The report profiles over every real crm_mon document.
//!
//! `openshift` must keep the verdicts, findings and report shape the code
//! gave before profiles existed: `golden/openshift-verdicts.txt` was written
//! by that code (one line per fixture and option set: verdict, finding
//! codes, and hashes of the report's status and pacemaker sections and of
//! the evaluation), and every line must still match. Regenerate it only on
//! purpose, with `BLESS_OPENSHIFT_GOLDEN=1`.
//!
//! Two option sets: `plain` (addresses only: no CIB, the default agents) and
//! `standins` (every fence device targets every node, as a CIB listing them
//! all would say; Pacemaker's Stateful, Dummy and ping agents stand in for
//! etcd and kubelet), so that the fixtures give every verdict.

#![allow(clippy::unwrap_used)] // tests may unwrap

mod common;

use std::fmt::Write as _;
use std::path::PathBuf;

use crm_xml::cib::FenceTargets;
use crm_xml::health::{Evaluation, Severity, Thresholds, Verdict, evaluate, evaluate_as};
use crm_xml::report::{self, Options, Profile, Report, valid_node_name};
use time::OffsetDateTime;
use time::macros::datetime;

const NOW: OffsetDateTime = datetime!(2026-11-30 08:00:00 UTC);

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/openshift-verdicts.txt")
}

/// FNV-1a, 64 bits: stable across Rust versions, unlike `DefaultHasher`.
fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The `standins` option set (see the module doc).
fn standins(doc: &crm_xml::CrmMon) -> Options {
    let nodes: Vec<String> = doc.nodes.iter().map(|n| n.name.clone()).collect();
    let devices = doc
        .primitive_instances()
        .iter()
        .filter(|i| i.primitive.agent.starts_with("stonith:"))
        .map(|i| (i.primitive.id.clone(), Some(nodes.clone())))
        .collect();
    let mut o = common::options_with_addresses(doc);
    o.fence_targets = Some(FenceTargets {
        devices,
        ..Default::default()
    });
    o.etcd_agents = vec![
        "ocf:pacemaker:Stateful".into(),
        "ocf:heartbeat:Dummy".into(),
        "ocf:pacemaker:Dummy".into(),
    ];
    o.kubelet_agents = vec!["ocf:pacemaker:ping".into(), "ocf:pacemaker:pingd".into()];
    o
}

/// The option sets of the golden file, by name.
fn option_sets(doc: &crm_xml::CrmMon) -> [(&'static str, Options); 2] {
    [
        ("plain", common::options_with_addresses(doc)),
        ("standins", standins(doc)),
    ]
}

fn openshift(o: Options) -> Options {
    Options {
        profile: Profile::OpenShift,
        ..o
    }
}

fn generic(o: Options) -> Options {
    Options {
        profile: Profile::Generic,
        ..o
    }
}

fn golden_line(name: &str, r: &Report) -> String {
    let e = evaluate(r, NOW, &Thresholds::default());
    let codes: Vec<&str> = e.findings.iter().map(|f| f.code).collect();
    let shape = format!(
        "{}{}",
        serde_json::to_string(&r.status).unwrap(),
        serde_json::to_string(&r.pacemaker).unwrap()
    );
    format!(
        "{name}\t{:?}\t{}\t{:016x}\t{:016x}",
        e.verdict,
        if codes.is_empty() {
            "-".to_owned()
        } else {
            codes.join(",")
        },
        fnv(&shape),
        fnv(&serde_json::to_string(&e).unwrap()),
    )
}

#[test]
fn openshift_keeps_the_verdicts_and_shape_of_before() {
    let mut got = String::new();
    for (name, text) in common::fixtures() {
        let doc = crm_xml::parse(&text).unwrap();
        for (set, opts) in option_sets(&doc) {
            let r = report::build(&doc, &openshift(opts), None, NOW);
            writeln!(got, "{}", golden_line(&format!("{set}:{name}"), &r)).unwrap();
        }
    }
    if std::env::var_os("BLESS_OPENSHIFT_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_path().parent().unwrap()).unwrap();
        std::fs::write(golden_path(), &got).unwrap();
    }
    let want = std::fs::read_to_string(golden_path()).unwrap();
    let (want_lines, got_lines): (Vec<&str>, Vec<&str>) =
        (want.lines().collect(), got.lines().collect());
    assert_eq!(want_lines.len(), got_lines.len(), "fixture count");
    let differ: Vec<String> = want_lines
        .iter()
        .zip(&got_lines)
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("was: {w}\nnow: {g}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} fixtures changed under openshift:\n{}",
        differ.len(),
        want_lines.len(),
        differ.join("\n")
    );
    let mut counts = std::collections::BTreeMap::new();
    for l in &got_lines {
        let set = l.split(':').next().unwrap();
        *counts
            .entry((set, l.split('\t').nth(1).unwrap()))
            .or_insert(0) += 1;
    }
    eprintln!("openshift verdicts (option set, verdict): {counts:?}");
}

/// Every member node name that is not an RFC 1123 subdomain, lowercased,
/// when lowercasing makes every name valid without a collision.
fn lowercase_map(doc: &crm_xml::CrmMon) -> Option<Vec<(String, String)>> {
    let mut map = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for n in &doc.nodes {
        let lower = n.name.to_ascii_lowercase();
        if !valid_node_name(&lower) || !seen.insert(lower.clone()) {
            return None;
        }
        if lower != n.name {
            map.push((n.name.clone(), lower));
        }
    }
    Some(map)
}

fn codes(
    findings: impl Iterator<Item = (Severity, &'static str)>,
) -> Vec<(Severity, &'static str)> {
    let mut v: Vec<_> = findings.collect();
    v.sort();
    v
}

fn worst(v: &[(Severity, &'static str)]) -> Verdict {
    match v.iter().map(|x| x.0).max() {
        None => Verdict::Healthy,
        Some(Severity::Warning) => Verdict::Warning,
        Some(Severity::Degraded) => Verdict::Degraded,
    }
}

fn has_kubelet(doc: &crm_xml::CrmMon, o: &Options) -> bool {
    doc.primitive_instances()
        .iter()
        .any(|i| o.kubelet_agents.iter().any(|k| k == &i.primitive.agent))
}

/// Under `generic`, a report judges exactly what `openshift` judges on the
/// same cluster with valid node names, except that a cluster without a
/// kubelet resource is not found wanting for it; node names never matter.
/// Checked over every fixture and both option sets; prints how many are
/// Healthy under each profile.
#[test]
fn generic_judges_like_openshift_but_any_names_and_no_kubelet_pass() {
    let mut compared = 0;
    let mut healthy = std::collections::BTreeMap::new();
    for (name, text) in common::fixtures() {
        let doc = crm_xml::parse(&text).unwrap();
        let members = doc
            .nodes
            .iter()
            .filter(|n| n.node_type == crm_xml::model::NodeType::Member)
            .count();
        let capitalised = doc.nodes.iter().any(|n| !valid_node_name(&n.name));
        for (set, opts) in option_sets(&doc) {
            let kubelet = has_kubelet(&doc, &opts);
            let g = generic(opts.clone());
            let gr = report::build(&doc, &g, None, NOW);
            assert_eq!(gr.profile, Profile::Generic);
            let ge: Evaluation =
                evaluate_as(&gr, Profile::Generic, NOW, &Thresholds::default()).unwrap();
            // Never a finding from a naming or size rule, nor from kubelet
            // when the cluster has none.
            for f in &ge.findings {
                assert_ne!(f.code, "NodeNotReported", "{set}:{name}: {}", f.message);
                assert!(
                    f.code != "NoNodes" || members == 0,
                    "{set}:{name}: {}",
                    f.message
                );
                assert!(
                    kubelet || !f.message.contains("Kubelet"),
                    "{set}:{name}: {}",
                    f.message
                );
            }
            assert_eq!(
                gr.status.nodes.len(),
                members,
                "{set}:{name}: every member listed"
            );
            // The same cluster with valid names, under openshift.
            let Some(map) = lowercase_map(&doc).filter(|_| members <= report::MAX_STATUS_NODES)
            else {
                continue;
            };
            let mut lower = text.clone();
            for (from, to) in &map {
                lower = lower.replace(&format!("\"{from}\""), &format!("\"{to}\""));
            }
            let ldoc = crm_xml::parse(&lower).unwrap();
            let lopts = option_sets(&ldoc)
                .into_iter()
                .find(|(s, _)| *s == set)
                .unwrap()
                .1;
            let or = report::build(&ldoc, &openshift(lopts), None, NOW);
            let oe = evaluate(&or, NOW, &Thresholds::default());
            let want = codes(
                oe.findings
                    .iter()
                    .filter(|f| {
                        kubelet || !(f.code == "ResourceUnhealthy" && f.message.contains("Kubelet"))
                    })
                    .map(|f| (f.severity, f.code)),
            );
            let got = codes(ge.findings.iter().map(|f| (f.severity, f.code)));
            assert_eq!(got, want, "{set}:{name}");
            assert_eq!(ge.verdict, worst(&want), "{set}:{name}");
            compared += 1;
            *healthy
                .entry((set, capitalised, "generic", ge.verdict))
                .or_insert(0) += 1;
            *healthy
                .entry((set, capitalised, "openshift", oe.verdict))
                .or_insert(0) += 1;
        }
    }
    eprintln!("compared {compared}; (set, capitalised names, profile, verdict): {healthy:?}");
    assert!(compared > 1500, "{compared}");
}

/// The real two-node fixtures (nodes `nodeA` and `nodeB`, no kubelet): under
/// `openshift` both nodes are left out (the CRD refuses the names) and the
/// report is Degraded for that alone; under `generic` both are judged, and
/// what remains is what is really wrong.
#[test]
fn capitalised_two_node_fixtures_are_judged_on_their_state_under_generic() {
    let read = |f: &str| {
        let text = std::fs::read_to_string(common::fixtures_dir().join(f)).unwrap();
        crm_xml::parse(&text).unwrap()
    };
    let judge = |f: &str, profile: Profile| {
        let doc = read(f);
        let mut o = standins(&doc);
        o.profile = profile;
        let r = report::build(&doc, &o, None, NOW);
        evaluate(&r, NOW, &Thresholds::default())
    };
    let online = "live-2.1.5/10-two-node-online.xml";
    let o = judge(online, Profile::OpenShift);
    assert_eq!(o.verdict, Verdict::Degraded);
    assert!(
        o.findings.iter().any(|f| f.code == "NodeNotReported"),
        "{o:?}"
    );
    // Healthy but for etcd's stand-in (dummy1), which runs on nodeB only.
    let g = judge(online, Profile::Generic);
    let found: Vec<(&str, &str)> = g
        .findings
        .iter()
        .map(|f| (f.code, f.message.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![("ResourceUnhealthy", "node nodeA: Etcd is stopped")],
        "{g:?}"
    );
    // Once it runs on both nodes (dummy1 cloned onto nodeA as well), the
    // cluster is Healthy under generic and still Degraded under openshift.
    let text = std::fs::read_to_string(common::fixtures_dir().join(online)).unwrap();
    let both = text.replace(
        r#"<node name="nodeB" id="2" cached="true"/>
    </resource>"#,
        r#"<node name="nodeB" id="2" cached="true"/>
    </resource>
    <resource id="dummy1" resource_agent="ocf:pacemaker:Dummy" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1">
      <node name="nodeA" id="1" cached="true"/>
    </resource>"#,
    );
    assert_ne!(both, text, "the fixture changed: update this test");
    let doc = crm_xml::parse(&both).unwrap();
    for (profile, verdict) in [
        (Profile::Generic, Verdict::Healthy),
        (Profile::OpenShift, Verdict::Degraded),
    ] {
        let mut o = standins(&doc);
        o.profile = profile;
        let r = report::build(&doc, &o, None, NOW);
        let e = evaluate(&r, NOW, &Thresholds::default());
        assert_eq!(e.verdict, verdict, "{profile}: {e:?}");
    }
    // After the crash and fence of nodeB: Degraded under generic too, for
    // the right reason.
    let g = judge(
        "live-2.1.5/13-nodeB-crashed-auto-fenced.xml",
        Profile::Generic,
    );
    assert_eq!(g.verdict, Verdict::Degraded);
    assert!(
        g.findings
            .iter()
            .any(|f| f.code == "NodeOffline" && f.message.contains("nodeB")),
        "{g:?}"
    );
}

/// A report is judged by the profile it was built with; asking for another
/// is refused, and a report without the field (written before profiles
/// existed) is an `openshift` one.
#[test]
fn profile_is_recorded_and_checked() {
    let text =
        std::fs::read_to_string(common::fixtures_dir().join("live-2.1.5/10-two-node-online.xml"))
            .unwrap();
    let doc = crm_xml::parse(&text).unwrap();
    assert_eq!(
        Options::default().profile,
        Profile::Generic,
        "generic is the default"
    );
    let r = report::build(
        &doc,
        &generic(common::options_with_addresses(&doc)),
        None,
        NOW,
    );
    assert_eq!(r.profile, Profile::Generic);
    let json = r.to_json();
    assert!(json.contains("\"profile\": \"generic\""), "{json}");
    let back = Report::from_json(&json).unwrap();
    assert_eq!(back.profile, Profile::Generic);
    let e = evaluate_as(&back, Profile::OpenShift, NOW, &Thresholds::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the report was built with the generic profile, not openshift"
    );
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v.as_object_mut().unwrap().remove("profile");
    let old = Report::from_json(&v.to_string()).unwrap();
    assert_eq!(old.profile, Profile::OpenShift);
}
