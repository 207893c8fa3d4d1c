//! `etcd-warden collect --from-file` and `etcd-warden health` on files, with
//! real Pacemaker tools producing the input: every fixture through the CLI,
//! generated cluster configurations rendered by `CIB_file=… crm_mon` and
//! compared with crm_mon's and crm_resource's own (text) view, bad input, and
//! the health exit codes.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crm_xml::report::Report;

fn warden() -> PathBuf {
    warden_integration::bins::warden().unwrap()
}

fn fixtures_root() -> PathBuf {
    warden_integration::bins::workspace().join("crm-xml/tests/fixtures/crm_mon")
}

fn collect(args: &[&str]) -> Output {
    Command::new(warden())
        .arg("collect")
        .args(args)
        .output()
        .unwrap()
}

fn fixtures() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![fixtures_root()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "xml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_through_the_cli() {
    let all = fixtures();
    assert!(all.len() >= 843, "{} fixtures", all.len());
    for f in &all {
        let out = collect(&["--from-file", f.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let r = Report::from_json(std::str::from_utf8(&out.stdout).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(r.etcd.is_none(), "no etcd section with --from-file");
        // The CLI reports what the library parses (the library is checked
        // against an independent reader in crm-xml's own tests).
        let doc = crm_xml::parse(&std::fs::read_to_string(f).unwrap()).unwrap();
        assert_eq!(r.pacemaker.nodes.len(), doc.nodes.len(), "{}", f.display());
        assert_eq!(
            r.pacemaker.resources.len(),
            doc.primitive_instances().len(),
            "{}",
            f.display()
        );
    }
}

fn assert_clean_failure(out: &Output, what: &str, needle: &str) {
    assert!(!out.status.success(), "{what}: exit {:?}", out.status);
    assert!(
        out.stdout.is_empty(),
        "{what}: partial stdout {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error") && err.contains(needle),
        "{what}: stderr {err:?}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
}

#[test]
fn bad_input_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let good =
        std::fs::read_to_string(fixtures_root().join("live-2.1.5/10-two-node-online.xml")).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "empty document"),
        (
            "truncated",
            good.as_bytes()[..good.len() / 2].to_vec(),
            "not well-formed",
        ),
        (
            "not-xml",
            b"Error: cluster is not available on this node\n".to_vec(),
            "not well-formed",
        ),
        (
            "html",
            b"<html><body>hi</body></html>".to_vec(),
            "unexpected root",
        ),
        (
            "garbage-bool",
            good.replacen("online=\"true\"", "online=\"perhaps\"", 1)
                .into_bytes(),
            "online",
        ),
        (
            "garbage-count",
            good.replacen("resources_running=\"", "resources_running=\"x", 1)
                .into_bytes(),
            "resources_running",
        ),
        (
            "garbage-role",
            good.replacen("role=\"Started\"", "role=\"Dancing\"", 1)
                .into_bytes(),
            "role",
        ),
        (
            "not-utf8",
            b"<pacemaker-result api-version=\"2\">\xff\xfe</pacemaker-result>".to_vec(),
            "UTF-8",
        ),
        (
            "huge",
            {
                let mut v = good.clone().into_bytes();
                v.extend(std::iter::repeat_n(b' ', 2 * 1024 * 1024));
                v
            },
            "larger than",
        ),
    ];
    for (name, bytes, needle) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes).unwrap();
        let out = collect(&[
            "--from-file",
            p.to_str().unwrap(),
            "--max-output",
            "1048576",
        ]);
        assert_clean_failure(&out, name, needle);
    }
    let out = collect(&["--from-file", "/nonexistent/crm_mon.xml"]);
    assert_clean_failure(&out, "missing file", "cannot open");
    // Bad flags are clear errors too.
    let f = fixtures_root().join("live-2.1.5/10-two-node-online.xml");
    let out = collect(&[
        "--from-file",
        f.to_str().unwrap(),
        "--node-address",
        "nodeA=not-an-ip",
    ]);
    assert_clean_failure(&out, "bad address", "not an IP address");
    // The live path with a crm_mon that prints garbage, hangs, or floods.
    let out = collect(&[
        "--crm-mon-cmd",
        "echo <oops",
        "--cib-file",
        "/dev/null",
        "--cmapctl-cmd",
        "true",
    ]);
    assert_clean_failure(&out, "crm_mon garbage", "cannot parse crm_mon output");
    let out = collect(&[
        "--crm-mon-cmd",
        "sleep 30",
        "--timeout",
        "0.5",
        "--cib-file",
        "/dev/null",
        "--cmapctl-cmd",
        "true",
    ]);
    assert_clean_failure(&out, "crm_mon hangs", "did not finish");
    let out = collect(&[
        "--crm-mon-cmd",
        "yes",
        "--max-output",
        "100000",
        "--cib-file",
        "/dev/null",
        "--cmapctl-cmd",
        "true",
    ]);
    assert_clean_failure(&out, "crm_mon floods", "more than 100000 bytes");
    let out = collect(&[
        "--crm-mon-cmd",
        "false",
        "--cib-file",
        "/dev/null",
        "--cmapctl-cmd",
        "true",
    ]);
    assert_clean_failure(&out, "crm_mon fails", "exited");
}

/// A tiny deterministic generator (xorshift), so that the configurations are
/// varied but every run tests the same ones.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn coin(&mut self) -> bool {
        self.below(2) == 0
    }
}

struct Generated {
    cib: String,
    nodes: Vec<String>,
    up: Vec<String>,
}

fn generate(seed: u64) -> Generated {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let n = 1 + r.below(4) as usize;
    let nodes: Vec<String> = (1..=n).map(|i| format!("node-{i}")).collect();
    let mut node_xml = String::new();
    for (i, name) in nodes.iter().enumerate() {
        let mut attrs = String::new();
        if r.below(4) == 0 {
            attrs.push_str(&format!(
                r#"<nvpair id="{name}-sb" name="standby" value="on"/>"#
            ));
        }
        if r.below(6) == 0 {
            attrs.push_str(&format!(
                r#"<nvpair id="{name}-mt" name="maintenance" value="true"/>"#
            ));
        }
        node_xml.push_str(&format!(
            r#"<node id="{}" uname="{name}"><instance_attributes id="{name}-ia">{attrs}</instance_attributes></node>"#,
            i + 1
        ));
    }
    let mut res = String::new();
    let stopped = |r: &mut Rng, id: &str| {
        if r.below(5) == 0 {
            format!(
                r#"<meta_attributes id="{id}-m"><nvpair id="{id}-tr" name="target-role" value="Stopped"/></meta_attributes>"#
            )
        } else {
            String::new()
        }
    };
    for i in 0..(1 + r.below(3)) {
        let id = format!("d{i}");
        let m = stopped(&mut r, &id);
        res.push_str(&format!(
            r#"<primitive id="{id}" class="ocf" provider="pacemaker" type="Dummy">{m}</primitive>"#
        ));
    }
    if r.coin() {
        let m = stopped(&mut r, "c");
        res.push_str(&format!(r#"<clone id="c-clone">{m}<primitive id="c" class="ocf" provider="pacemaker" type="Dummy"/></clone>"#));
    }
    if r.coin() {
        res.push_str(r#"<clone id="s-clone"><meta_attributes id="s-m"><nvpair id="s-p" name="promotable" value="true"/></meta_attributes><primitive id="s" class="ocf" provider="pacemaker" type="Stateful"/></clone>"#);
    }
    if r.coin() {
        res.push_str(r#"<group id="g"><primitive id="g1" class="ocf" provider="pacemaker" type="Dummy"/><primitive id="g2" class="ocf" provider="pacemaker" type="Dummy"/></group>"#);
    }
    let mode = if r.coin() { "true" } else { "false" };
    let cib = format!(
        r#"<cib crm_feature_set="3.16.1" validate-with="pacemaker-3.9" epoch="1" num_updates="0" admin_epoch="0">
  <configuration>
    <crm_config><cluster_property_set id="opts"><nvpair id="o1" name="stonith-enabled" value="false"/><nvpair id="o2" name="maintenance-mode" value="{}"/></cluster_property_set></crm_config>
    <nodes>{node_xml}</nodes>
    <resources>{res}</resources>
    <constraints/>
  </configuration>
  <status/>
</cib>"#,
        if r.below(8) == 0 { mode } else { "false" }
    );
    let up = nodes.iter().filter(|_| r.below(4) != 0).cloned().collect();
    Generated { cib, nodes, up }
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// crm_mon's own node view from its text output:
/// name → (online, standby, maintenance).
fn crm_mon_text_nodes(cib: &Path, names: &[String]) -> BTreeMap<String, (bool, bool, bool)> {
    let text = run_ok(Command::new("crm_mon").env("CIB_file", cib).args([
        "-1",
        "--output-as=text",
        "--exclude=all",
        "--include=nodes",
    ]));
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim().trim_start_matches("* ");
        let list = |prefix: &str| {
            line.strip_prefix(prefix).map(|rest| {
                rest.trim_matches(|c| c == '[' || c == ']' || c == ' ')
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
        };
        if let Some(l) = list("Online:") {
            for n in l {
                out.insert(n, (true, false, false));
            }
        } else if let Some(l) = list("OFFLINE:") {
            for n in l {
                out.insert(n, (false, false, false));
            }
        } else if let Some(rest) = line.strip_prefix("Node ").filter(|_| line != "Node List:") {
            let (name, state) = rest.split_once(':').unwrap();
            let online = !state.contains("OFFLINE");
            out.insert(
                name.to_owned(),
                (
                    online,
                    state.contains("standby"),
                    state.contains("maintenance"),
                ),
            );
        }
    }
    assert_eq!(
        out.len(),
        names.len(),
        "crm_mon text view of {names:?}:\n{text}"
    );
    out
}

/// crm_resource's own view of where a resource runs.
fn crm_resource_locate(cib: &Path, id: &str) -> BTreeSet<String> {
    let text = run_ok(
        Command::new("crm_resource")
            .env("CIB_file", cib)
            .args(["--locate", "-r", id]),
    );
    text.lines()
        .filter_map(|l| l.split_once(" is running on: "))
        .map(|(_, n)| n.split_whitespace().next().unwrap().to_owned())
        .collect()
}

#[test]
fn generated_configurations_agree_with_crm_mon() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 1..=30u64 {
        let g = generate(seed);
        let cib0 = dir.path().join(format!("{seed}-in.xml"));
        let cib1 = dir.path().join(format!("{seed}-step.xml"));
        let cib = dir.path().join(format!("{seed}-cib.xml"));
        std::fs::write(&cib0, &g.cib).unwrap();
        // Bring the chosen nodes up, let the scheduler probe and start what
        // it can, then run it once more so that resources settle.
        let mut sim = Command::new("crm_simulate");
        sim.args([
            "-S",
            "-q",
            "1",
            "-x",
            cib0.to_str().unwrap(),
            "-O",
            cib1.to_str().unwrap(),
        ]);
        for n in &g.up {
            sim.args(["--node-up", n]);
        }
        run_ok(&mut sim);
        run_ok(Command::new("crm_simulate").args([
            "-S",
            "-q",
            "1",
            "-x",
            cib1.to_str().unwrap(),
            "-O",
            cib.to_str().unwrap(),
        ]));
        let xml_path = dir.path().join(format!("{seed}-crm_mon.xml"));
        let xml = run_ok(Command::new("crm_mon").env("CIB_file", &cib).args([
            "-1",
            "--inactive",
            "--output-as=xml",
        ]));
        std::fs::write(&xml_path, &xml).unwrap();

        let out = collect(&[
            "--from-file",
            xml_path.to_str().unwrap(),
            "--cib-file",
            cib.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "seed {seed}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = Report::from_json(std::str::from_utf8(&out.stdout).unwrap()).unwrap();

        let view = crm_mon_text_nodes(&cib, &g.nodes);
        for n in &r.pacemaker.nodes {
            let (online, standby, maint) = view[&n.name];
            assert_eq!(n.online, online, "seed {seed}: {} online", n.name);
            assert_eq!(n.standby, standby, "seed {seed}: {} standby", n.name);
            // crm_mon's text names one state per node, standby before
            // maintenance, so maintenance is comparable only without standby.
            if !standby {
                assert_eq!(n.maintenance, maint, "seed {seed}: {} maintenance", n.name);
            }
        }
        let ids: BTreeSet<&str> = r
            .pacemaker
            .resources
            .iter()
            .map(|x| x.id.as_str())
            .collect();
        for id in ids {
            let ours: BTreeSet<String> = r
                .pacemaker
                .resources
                .iter()
                .filter(|x| x.id == id)
                .flat_map(|x| x.nodes.iter().cloned())
                .collect();
            assert_eq!(
                ours,
                crm_resource_locate(&cib, id),
                "seed {seed}: {id} nodes"
            );
        }
        assert_eq!(r.pacemaker.dc, None, "CIB_file has no DC");
    }
}

fn health(report: &Path, format: &str) -> Output {
    Command::new(warden())
        .args([
            "health",
            "--report",
            report.to_str().unwrap(),
            "--format",
            format,
        ])
        .output()
        .unwrap()
}

#[test]
fn health_exit_codes_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    // A healthy two-node report: nodes named as Kubernetes would, addresses
    // given, the CIB attributing one fence device to each node.
    let xml = std::fs::read_to_string(fixtures_root().join("live-2.1.5/10-two-node-online.xml"))
        .unwrap()
        .replace("nodeA", "master-0")
        .replace("nodeB", "master-1");
    let doc = crm_xml::parse(&xml).unwrap();
    let agents: Vec<&str> = doc
        .primitive_instances()
        .iter()
        .map(|i| i.primitive.agent.as_str())
        .collect();
    let xml_path = dir.path().join("crm_mon.xml");
    std::fs::write(&xml_path, &xml).unwrap();
    let out_path = dir.path().join("report.json");
    let out = collect(&[
        "--from-file",
        xml_path.to_str().unwrap(),
        "--output",
        out_path.to_str().unwrap(),
        "--node-address",
        "master-0=192.0.2.10",
        "--node-address",
        "master-1=192.0.2.11",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&out_path).unwrap(),
        out.stdout,
        "file and stdout agree"
    );
    let r = Report::from_json(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(r.status.nodes.len(), 2, "agents {agents:?}");

    // This fixture has no kubelet/etcd/fence devices: degraded, with reasons.
    let h = health(&out_path, "text");
    assert_eq!(
        h.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&h.stdout)
    );
    let text = String::from_utf8_lossy(&h.stdout);
    assert!(text.starts_with("DEGRADED - "), "{text}");
    assert!(
        text.contains("ResourceUnhealthy") && text.contains("FencingUnavailable"),
        "{text}"
    );
    let h = health(&out_path, "json");
    let v: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    assert_eq!(v["verdict"], "Degraded");
    assert!(v["findings"].as_array().unwrap().len() >= 2);

    // Healthy: a report whose conditions are all True, freshly stamped.
    let mut healthy = r.clone();
    for n in &mut healthy.status.nodes {
        for c in n
            .conditions
            .iter_mut()
            .chain(n.resources.iter_mut().flat_map(|x| x.conditions.iter_mut()))
        {
            c.status = crm_xml::report::ConditionStatus::True;
        }
    }
    let p = dir.path().join("healthy.json");
    std::fs::write(&p, healthy.to_json()).unwrap();
    let h = health(&p, "text");
    assert_eq!(
        h.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&h.stdout)
    );

    // Warning: a pending node only.
    let mut warn = healthy.clone();
    let ready = warn.status.nodes[0]
        .conditions
        .iter_mut()
        .find(|c| c.kind == "Ready")
        .unwrap();
    ready.status = crm_xml::report::ConditionStatus::False;
    std::fs::write(&p, warn.to_json()).unwrap();
    assert_eq!(health(&p, "text").status.code(), Some(1));

    // Stale: lastUpdated an hour ago degrades, whatever else it says.
    let mut stale = healthy.clone();
    stale.status.last_updated = "2020-01-01T00:00:00Z".into();
    std::fs::write(&p, stale.to_json()).unwrap();
    let h = health(&p, "text");
    assert_eq!(h.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&h.stdout).contains("StatusStale"));

    // Unknown: unreadable or not a report.
    std::fs::write(&p, "{\"apiVersion\": \"v1\"").unwrap();
    assert_eq!(health(&p, "text").status.code(), Some(3));
    assert_eq!(
        health(&dir.path().join("missing.json"), "json")
            .status
            .code(),
        Some(3)
    );
}

#[test]
fn transition_times_survive_across_collect_runs() {
    let dir = tempfile::tempdir().unwrap();
    let online = std::fs::read_to_string(fixtures_root().join("live-2.1.5/10-two-node-online.xml"))
        .unwrap()
        .replace("nodeA", "node-a")
        .replace("nodeB", "node-b");
    let xml = dir.path().join("in.xml");
    let out = dir.path().join("report.json");
    let args = |x: &Path, o: &Path| {
        vec![
            "--from-file".to_owned(),
            x.display().to_string(),
            "--output".to_owned(),
            o.display().to_string(),
            "--node-address".to_owned(),
            "node-a=192.0.2.1".to_owned(),
            "--node-address".to_owned(),
            "node-b=192.0.2.2".to_owned(),
        ]
    };
    std::fs::write(&xml, &online).unwrap();
    let first = Command::new(warden())
        .arg("collect")
        .args(args(&xml, &out))
        .output()
        .unwrap();
    assert!(first.status.success());
    let r1 = Report::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    // A second run, with a previous report whose times are older, keeps them.
    let mut aged = r1.clone();
    for n in &mut aged.status.nodes {
        for c in &mut n.conditions {
            c.last_transition_time = "2026-01-01T00:00:00Z".into();
        }
    }
    aged.status.last_updated = "2026-01-01T00:00:00Z".into();
    std::fs::write(&out, aged.to_json()).unwrap();
    // node-b goes standby: only its Active (and the aggregates) change.
    std::fs::write(
        &xml,
        online.replace(
            r#"name="node-b" id="2" online="true" standby="false""#,
            r#"name="node-b" id="2" online="true" standby="true""#,
        ),
    )
    .unwrap();
    let second = Command::new(warden())
        .arg("collect")
        .args(args(&xml, &out))
        .output()
        .unwrap();
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let r2 = Report::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let cond = |r: &Report, node: &str, kind: &str| {
        r.status
            .nodes
            .iter()
            .find(|n| n.node_name == node)
            .unwrap()
            .conditions
            .iter()
            .find(|c| c.kind == kind)
            .unwrap()
            .clone()
    };
    assert_eq!(
        cond(&r2, "node-a", "Online").last_transition_time,
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(
        cond(&r2, "node-b", "Online").last_transition_time,
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(cond(&r2, "node-b", "Active").reason, "Standby");
    assert_ne!(
        cond(&r2, "node-b", "Active").last_transition_time,
        "2026-01-01T00:00:00Z"
    );
    // A corrupt previous report is ignored with a warning, not fatal.
    std::fs::write(&out, "garbage").unwrap();
    let third = Command::new(warden())
        .arg("collect")
        .args(args(&xml, &out))
        .output()
        .unwrap();
    assert!(third.status.success());
    assert!(String::from_utf8_lossy(&third.stderr).contains("previous report"));
}

/// The live path takes node addresses from corosync.conf when it agrees with
/// crm_mon's membership (names and node ids) and then starts no
/// corosync-cmapctl; when it disagrees, Corosync's runtime answers; a
/// malformed file named with --corosync-conf is an error naming file:line.
/// crm_mon is the real one on a two-node CIB (master-0 id 1, master-1 id 2).
#[test]
fn live_node_addresses_from_corosync_conf_or_cmapctl() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let cib = warden_integration::bins::workspace().join("crm-xml/benches/two_node_cib.xml");
    let conf = dir.path().join("corosync.conf");
    // The stand-in for corosync-cmapctl prints a runtime node list and
    // leaves a mark, so the test sees whether it was started at all.
    let mark = dir.path().join("cmapctl-was-run");
    let cmapctl = dir.path().join("cmapctl");
    std::fs::write(
        &cmapctl,
        format!(
            "#!/bin/sh\ntouch {}\necho 'nodelist.node.0.name (str) = master-0'\n\
             echo 'nodelist.node.0.ring0_addr (str) = 198.51.100.1'\n\
             echo 'nodelist.node.1.name (str) = master-1'\n\
             echo 'nodelist.node.1.ring0_addr (str) = 198.51.100.2'\n",
            mark.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cmapctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("report.json");
    let run = || {
        let _ = std::fs::remove_file(&mark);
        Command::new(warden())
            .arg("collect")
            .env("CIB_file", &cib)
            .arg("--cmapctl-cmd")
            .arg(&cmapctl)
            .arg("--cib-file")
            .arg(&cib)
            .arg("--corosync-conf")
            .arg(&conf)
            .arg("--output")
            .arg(&out)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let addresses = || -> BTreeMap<String, Vec<String>> {
        let r = Report::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap();
        r.status
            .nodes
            .iter()
            .map(|n| {
                let a = n.addresses.iter().map(|a| a.address.clone()).collect();
                (n.node_name.clone(), a)
            })
            .collect()
    };
    let node = |name: &str, id: u32, addr: &str| {
        format!("  node {{\n    name: {name}\n    nodeid: {id}\n    ring0_addr: {addr}\n  }}\n")
    };

    // Agrees with crm_mon: addresses from the file, no cmapctl process.
    std::fs::write(
        &conf,
        format!(
            "totem {{\n  version: 2\n}}\nnodelist {{\n{}{}}}\n",
            node("master-0", 1, "192.0.2.1"),
            node("master-1", 2, "192.0.2.2")
        ),
    )
    .unwrap();
    let o = run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !mark.exists(),
        "cmapctl was started although the file agrees"
    );
    assert_eq!(addresses()["master-0"], ["192.0.2.1"]);
    assert_eq!(addresses()["master-1"], ["192.0.2.2"]);

    // Another cluster's file (master-1 has another id): the runtime answers.
    std::fs::write(
        &conf,
        format!(
            "nodelist {{\n{}{}}}\n",
            node("master-0", 1, "192.0.2.1"),
            node("master-1", 3, "192.0.2.2")
        ),
    )
    .unwrap();
    let o = run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(mark.exists(), "cmapctl was not asked");
    assert_eq!(addresses()["master-0"], ["198.51.100.1"]);
    assert_eq!(addresses()["master-1"], ["198.51.100.2"]);

    // Malformed: a clear error with file and line, nothing written.
    let _ = std::fs::remove_file(&out);
    std::fs::write(&conf, "nodelist {\n  node {\n    name master-0\n  }\n}\n").unwrap();
    let o = run();
    assert_clean_failure(
        &o,
        "malformed corosync.conf",
        &format!("{}:3: ", conf.display()),
    );
    assert!(!out.exists());
}
