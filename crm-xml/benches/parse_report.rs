//! Criterion benchmarks: parse + report of a generated large status (32
//! nodes, 5,120 primitive instances) and of every fixture; and the whole
//! `etcd-warden collect` cycle against the crm_mon call alone.
//!
//! The collect-cycle group needs a release build of `etcd-warden` (path in
//! `WARDEN_BIN`, default `target/release/etcd-warden`) and Pacemaker's
//! crm_mon; it is skipped with a message when either is missing.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;

use criterion::{Criterion, criterion_group, criterion_main};
use crm_xml::report::{self, Options};

/// A crm_mon document with `nodes` nodes and `clones` clones of one instance
/// per node, plus a fence device per node.
fn large_status(nodes: usize, clones: usize) -> String {
    let mut s = String::from(
        r#"<pacemaker-result api-version="2.25" request="crm_mon --output-as=xml">
  <summary>
    <stack type="corosync"/>
    <current_dc present="true" version="2.1.5" name="node-1" id="1" with_quorum="true" mixed_version="false"/>
    <cluster_options stonith-enabled="true" maintenance-mode="false"/>
  </summary>
  <nodes>
"#,
    );
    for n in 1..=nodes {
        s.push_str(&format!(
            r#"    <node name="node-{n}" id="{n}" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="{}" resources_running="{clones}" type="member"/>
"#,
            n == 1
        ));
    }
    s.push_str("  </nodes>\n  <resources>\n");
    for n in 1..=nodes {
        s.push_str(&format!(
            r#"    <resource id="fence-{n}" resource_agent="stonith:fence_ipmilan" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="node-{}" id="1" cached="true"/></resource>
"#,
            n % nodes + 1
        ));
    }
    for c in 0..clones {
        let agent = match c {
            0 => "ocf:heartbeat:podman-etcd",
            1 => "systemd:kubelet",
            _ => "ocf:pacemaker:Dummy",
        };
        s.push_str(&format!(
            r#"    <clone id="c{c}-clone" multi_state="{}" unique="false" managed="true" disabled="false" failed="false" failure_ignored="false">
"#,
            c % 10 == 3
        ));
        for n in 1..=nodes {
            s.push_str(&format!(
                r#"      <resource id="c{c}" resource_agent="{agent}" role="Started" active="true" orphaned="false" blocked="false" managed="true" failed="false" failure_ignored="false" nodes_running_on="1"><node name="node-{n}" id="{n}" cached="true"/></resource>
"#
            ));
        }
        s.push_str("    </clone>\n");
    }
    s.push_str("  </resources>\n  <status code=\"0\" message=\"OK\"/>\n</pacemaker-result>\n");
    s
}

fn fixtures() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crm_mon");
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if let Ok(t) = std::fs::read_to_string(&p) {
                out.push(t);
            }
        }
    }
    out
}

fn options_for(doc: &crm_xml::CrmMon) -> Options {
    let mut o = Options::default();
    for (i, n) in doc.nodes.iter().enumerate() {
        o.node_addresses
            .insert(n.name.clone(), vec![format!("192.0.2.{}", 1 + i % 250)]);
    }
    o
}

fn parse_and_report(c: &mut Criterion) {
    let now = time::OffsetDateTime::UNIX_EPOCH;
    let big = large_status(32, 160);
    let doc = crm_xml::parse(&big).expect("generated status parses");
    assert!(doc.primitive_instances().len() >= 5000);
    let opts = options_for(&doc);
    let mut g = c.benchmark_group("large-32-nodes-5152-instances");
    g.sample_size(20);
    g.bench_function("parse", |b| b.iter(|| crm_xml::parse(black_box(&big))));
    g.bench_function("parse+report", |b| {
        b.iter(|| {
            let d = crm_xml::parse(black_box(&big)).expect("parses");
            report::build(&d, &opts, None, now).to_json()
        })
    });
    g.finish();

    let all = fixtures();
    let mut g = c.benchmark_group("fixtures");
    g.sample_size(10);
    g.bench_function(format!("parse+report all {}", all.len()), |b| {
        b.iter(|| {
            for text in &all {
                let d = crm_xml::parse(black_box(text)).expect("fixture parses");
                black_box(report::build(&d, &Options::default(), None, now).to_json());
            }
        })
    });
    g.finish();
}

fn warden_bin() -> PathBuf {
    std::env::var_os("WARDEN_BIN").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/etcd-warden"),
        PathBuf::from,
    )
}

/// `CIB_file=… crm_mon --one-shot --inactive --output-as=xml` alone, versus
/// `etcd-warden collect` running that same command (CIB and Corosync data
/// from files, report written atomically to a file on tmpfs).
fn collect_cycle(c: &mut Criterion) {
    let bin = warden_bin();
    if !bin.exists() || Command::new("crm_mon").arg("--version").output().is_err() {
        eprintln!(
            "collect-cycle skipped: build `cargo build --release -p etcd-warden` and install Pacemaker"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("crm-xml-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cib = dir.join("cib.xml");
    std::fs::write(&cib, BENCH_CIB).expect("write cib");
    let coro = dir.join("corosync.conf");
    std::fs::write(
        &coro,
        "nodelist {\n node {\n  ring0_addr: 192.0.2.1\n  name: master-0\n  nodeid: 1\n }\n node {\n  ring0_addr: 192.0.2.2\n  name: master-1\n  nodeid: 2\n }\n}\n",
    )
    .expect("write corosync.conf");
    // The report goes to tmpfs, as the systemd unit writes it (/run).
    let shm = Path::new("/dev/shm");
    let out = if shm.is_dir() {
        shm.join(format!("crm-xml-bench-{}.json", std::process::id()))
    } else {
        dir.join("report.json")
    };
    let mut g = c.benchmark_group("collect-cycle");
    g.sample_size(50);
    g.bench_function("crm_mon alone", |b| {
        b.iter(|| {
            let o = Command::new("crm_mon")
                .env("CIB_file", &cib)
                .args(["--one-shot", "--inactive", "--output-as=xml"])
                .output()
                .expect("crm_mon runs");
            assert!(o.status.success());
        })
    });
    g.bench_function("etcd-warden collect", |b| {
        b.iter(|| {
            let o = Command::new(&bin)
                .env("CIB_file", &cib)
                .arg("collect")
                .arg("--cib-file")
                .arg(&cib)
                .arg("--cmapctl-cmd")
                .arg("true")
                .arg("--corosync-conf")
                .arg(&coro)
                .arg("--output")
                .arg(&out)
                .output()
                .expect("collect runs");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        })
    });
    g.finish();
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A two-node etcd cluster with kubelet, etcd and two fence devices, with
/// status so that crm_mon shows everything running.
const BENCH_CIB: &str = include_str!("two_node_cib.xml");

criterion_group!(benches, parse_and_report, collect_cycle);
criterion_main!(benches);
