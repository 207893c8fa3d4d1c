//! `etcd-warden crm-config` / `pcs-config`: the generated configuration
//! passes the real `crm_verify` (merged into an empty CIB with cibadmin),
//! the crmsh rendering loads with the real crmsh into a CIB file and says the
//! same as the XML, and bad arguments are refused with a clear message.

// Tests may unwrap (clippy.toml allows it in #[test] functions; this
// extends that to the helpers of this file).
#![allow(clippy::unwrap_used)]

mod agent_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent_support::{agent, code, install_agent, run, text, warden};

const T: Duration = Duration::from_secs(60);

const TWO: &[&str] = &[
    "--node",
    "nodeA=192.0.2.1",
    "--node",
    "nodeB=192.0.2.2",
    "--fence-agent",
    "fence_xyz",
    "--fence-option",
    "k=v",
];

fn crm_config(args: &[&str]) -> String {
    let out = run(Command::new(warden()).arg("crm-config").args(args), T);
    assert_eq!(code(&out), 0, "crm-config {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn empty_cib(dir: &Path) -> std::path::PathBuf {
    let cib = dir.join("cib.xml");
    let out = run(Command::new("cibadmin").arg("--empty"), T);
    assert_eq!(code(&out), 0);
    std::fs::write(&cib, &out.stdout).unwrap();
    cib
}

fn cibadmin(cib: &Path, args: &[&str]) -> std::process::Output {
    run(Command::new("cibadmin").env("CIB_file", cib).args(args), T)
}

fn crm_verify(cib: &Path) -> (i32, String) {
    let out = run(
        Command::new("crm_verify")
            .arg("--xml-file")
            .arg(cib)
            .arg("-V"),
        T,
    );
    (
        code(&out),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

/// `cibadmin --query --xpath X` on a CIB file: the matches, or None.
fn xpath(cib: &Path, x: &str) -> Option<String> {
    let out = cibadmin(cib, &["--query", "--xpath", x]);
    out.status.success().then(|| text(&out.stdout))
}

fn merged_xml_cib(dir: &Path, args: &[&str]) -> std::path::PathBuf {
    let frag = dir.join("frag.xml");
    std::fs::write(&frag, crm_config(&[&["--format", "xml"], args].concat())).unwrap();
    let cib = empty_cib(dir);
    // --after names a resource that must exist: the schema forbids
    // constraints on unknown ids.
    if let Some(i) = args.iter().position(|a| *a == "--after") {
        let clone = args[i + 1];
        let out = cibadmin(
            &cib,
            &[
                "--create",
                "-o",
                "resources",
                "--xml-text",
                &format!(
                    "<clone id=\"{clone}\"><primitive id=\"{clone}-dummy\" class=\"ocf\" provider=\"pacemaker\" type=\"Dummy\"/></clone>"
                ),
            ],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = cibadmin(&cib, &["--modify", "--xml-file", frag.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "cibadmin --modify: {}",
        text(&out.stderr)
    );
    cib
}

#[test]
fn xml_fragment_passes_crm_verify_and_puts_meta_where_it_belongs() {
    let dir = tempfile::tempdir().unwrap();
    let cib = merged_xml_cib(dir.path(), TWO);
    let (rc, out) = crm_verify(&cib);
    assert_eq!(rc, 0, "crm_verify: {out}");

    // The clone carries notify/interleave; the primitive does not (a
    // misplaced `meta` in a pcs call puts them on the primitive).
    assert!(
        xpath(
            &cib,
            "//clone[@id='etcd-clone']/meta_attributes/nvpair[@name='notify'][@value='true']"
        )
        .is_some()
    );
    assert!(
        xpath(
            &cib,
            "//clone[@id='etcd-clone']/meta_attributes/nvpair[@name='interleave'][@value='true']"
        )
        .is_some()
    );
    assert!(
        xpath(
            &cib,
            "//primitive[@id='etcd']/meta_attributes/nvpair[@name='notify']"
        )
        .is_none()
    );
    assert!(xpath(&cib, "//clone[@id='etcd-clone']/primitive[@id='etcd'][@class='ocf'][@provider='etcd-warden'][@type='etcd']").is_some());
    // One fence device per node; only the favoured node's device waits.
    for node in ["nodeA", "nodeB"] {
        let x = format!(
            "//primitive[@class='stonith'][@type='fence_xyz']/instance_attributes/nvpair[@name='pcmk_host_list'][@value='{node}']"
        );
        assert!(xpath(&cib, &x).is_some(), "{x}");
        assert!(
            xpath(
                &cib,
                &format!("//rsc_location[@rsc='fence-{node}'][@node='{node}'][@score='-INFINITY']")
            )
            .is_some()
        );
    }
    assert!(
        xpath(
            &cib,
            "//primitive[@id='fence-nodeA']//nvpair[@name='pcmk_delay_base'][@value='10s']"
        )
        .is_some()
    );
    assert!(
        xpath(
            &cib,
            "//primitive[@id='fence-nodeB']//nvpair[@name='pcmk_delay_base']"
        )
        .is_none()
    );
    assert!(
        xpath(
            &cib,
            "//primitive[@id='fence-nodeB']//nvpair[@name='k'][@value='v']"
        )
        .is_some()
    );
    assert!(
        xpath(
            &cib,
            "//alerts/alert[@id='etcd-warden']/recipient[@value='/run/etcd-warden/api.sock']"
        )
        .is_some()
    );
    assert!(
        xpath(
            &cib,
            "//cluster_property_set/nvpair[@name='stonith-enabled'][@value='true']"
        )
        .is_some()
    );

    // crm_verify can fail: without the fence devices, stonith-enabled=true
    // has nothing to fence with.
    // (Their location constraints go first: the schema forbids dangling
    // references.)
    for node in ["nodeA", "nodeB"] {
        for element in [
            format!("<rsc_location id=\"fence-{node}-avoids-{node}\"/>"),
            format!("<primitive id=\"fence-{node}\"/>"),
        ] {
            let out = cibadmin(&cib, &["--delete", "--xml-text", &element]);
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
    }
    let (rc, out) = crm_verify(&cib);
    assert_ne!(rc, 0, "crm_verify accepted a config without fencing: {out}");
}

#[test]
fn one_and_three_node_configurations_verify() {
    for args in [
        &["--node", "solo=192.0.2.1"][..],
        &[
            "--node",
            "n1=192.0.2.1",
            "--node",
            "n2=192.0.2.2",
            "--node",
            "n3=2001:db8::3",
            "--after",
            "kubelet-clone",
            "--socket",
            "/run/ew/api.sock",
        ][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cib = merged_xml_cib(dir.path(), args);
        if args.contains(&"--after") {
            assert!(
                xpath(
                    &cib,
                    "//rsc_order[@first='kubelet-clone'][@then='etcd-clone']"
                )
                .is_some()
            );
            assert!(xpath(&cib, "//primitive[@id='etcd']/instance_attributes/nvpair[@name='socket'][@value='/run/ew/api.sock']").is_some());
        }
        let (rc, out) = crm_verify(&cib);
        assert_eq!(rc, 0, "{args:?}: {out}");
        // No fence race without exactly two nodes: no delays.
        assert!(
            xpath(&cib, "//nvpair[@name='pcmk_delay_base']").is_none(),
            "{args:?}"
        );
    }
}

#[test]
fn operations_match_the_agents_advertised_timeouts() {
    // Pacemaker never reads timeouts from meta-data, so the configuration
    // repeats them; they must agree with what the agent advertises.
    let md = text(&run(Command::new(agent()).arg("meta-data"), T).stdout);
    let xml = crm_config(&[&["--format", "xml"], TWO].concat());
    for action in md.split("<action ").skip(1) {
        let attr = |name: &str| {
            action
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|s| s.split('"').next())
                .map(str::to_string)
        };
        let name = attr("name").unwrap();
        if ["meta-data", "validate-all"].contains(&name.as_str()) {
            continue;
        }
        let interval = attr("interval").unwrap_or_else(|| "0s".into());
        let timeout = attr("timeout").unwrap();
        let op = format!("name=\"{name}\" interval=\"{interval}\" timeout=\"{timeout}\"");
        assert!(xml.contains(&op), "{op} missing in\n{xml}");
    }
}

#[test]
fn crmsh_rendering_loads_and_agrees_with_the_xml() {
    // crmsh checks every agent's meta-data, so the agent must be installed
    // and the fence agent real (fence_dummy ships with fence-agents).
    install_agent();
    let args = [
        "--node",
        "nodeA=192.0.2.1",
        "--node",
        "nodeB=192.0.2.2",
        "--fence-agent",
        "fence_dummy",
        "--fence-option",
        "type=file",
    ];
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("etcd.crm");
    std::fs::write(&conf, crm_config(&args)).unwrap();
    let cib = empty_cib(dir.path());
    let out = run(
        Command::new("crm")
            .env("CIB_file", &cib)
            .args(["configure", "load", "update"])
            .arg(&conf),
        T,
    );
    assert!(
        out.status.success(),
        "crm configure load: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let (rc, v) = crm_verify(&cib);
    assert_eq!(rc, 0, "{v}");

    let xml_dir = tempfile::tempdir().unwrap();
    let xml_cib = merged_xml_cib(xml_dir.path(), &args);
    for x in [
        "//clone[@id='etcd-clone']/meta_attributes/nvpair[@name='notify'][@value='true']",
        "//clone[@id='etcd-clone']/meta_attributes/nvpair[@name='interleave'][@value='true']",
        "//primitive[@id='etcd']/meta_attributes/nvpair[@name='migration-threshold'][@value='10']",
        "//primitive[@id='etcd']/operations/op[@name='monitor'][@interval='60s']//nvpair[@name='OCF_CHECK_LEVEL'][@value='10']",
        "//primitive[@id='etcd']/operations/op[@name='start'][@timeout='300s']",
        "//primitive[@id='etcd']/operations/op[@name='stop'][@timeout='120s']",
        "//primitive[@id='fence-nodeA']//nvpair[@name='pcmk_delay_base'][@value='10s']",
        "//primitive[@id='fence-nodeB']//nvpair[@name='pcmk_host_list'][@value='nodeB']",
        "//rsc_location[@rsc='fence-nodeA'][@node='nodeA']",
        "//primitive[@id='etcd']/meta_attributes/nvpair[@name='failure-timeout'][@value='10min']",
        "//alerts/alert[@path='/usr/libexec/etcd-warden/alert']/recipient[@value='/run/etcd-warden/api.sock']",
    ] {
        assert!(xpath(&cib, x).is_some(), "crmsh CIB lacks {x}");
        assert!(xpath(&xml_cib, x).is_some(), "XML CIB lacks {x}");
    }
    // Nothing cluster-wide that other resources would inherit.
    for x in [
        "//nvpair[@name='start-failure-is-fatal']",
        "//rsc_defaults//nvpair",
    ] {
        assert!(xpath(&cib, x).is_none(), "crmsh CIB has {x}");
        assert!(xpath(&xml_cib, x).is_none(), "XML CIB has {x}");
    }
}

#[test]
fn pcs_rendering_builds_one_cib_file_and_reads_back() {
    let out = run(Command::new(warden()).arg("pcs-config").args(TWO), T);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let pcs = text(&out.stdout);
    for needle in [
        "pcs cluster setup etcd-warden nodeA addr=192.0.2.1 nodeB addr=192.0.2.2",
        "pcs -f etcd-warden.cib.xml stonith create fence-nodeA fence_xyz pcmk_host_list=nodeA pcmk_delay_base=10s k=v",
        "pcs -f etcd-warden.cib.xml resource clone etcd etcd-clone",
        "pcs -f etcd-warden.cib.xml resource meta etcd-clone interleave=true notify=true",
        "op monitor interval=60s timeout=30s OCF_CHECK_LEVEL=10",
        "pcs cluster cib-push etcd-warden.cib.xml diff-against=etcd-warden.cib.orig.xml",
        "cibadmin --query --xpath",
    ] {
        assert!(pcs.contains(needle), "missing {needle:?} in\n{pcs}");
    }
}

#[test]
fn bad_arguments_are_refused_with_a_clear_message() {
    for (args, needle) in [
        (&["--node", "nodeA"][..], "NAME=ADDRESS"),
        (
            &["--node", "nodeA=999.1.1.1"][..],
            "not an IPv4 or IPv6 address",
        ),
        (
            &["--node", "a=192.0.2.1", "--node", "a=192.0.2.2"][..],
            "twice",
        ),
        (
            &["--node", "a=192.0.2.1", "--fence-option", "novalue"][..],
            "KEY=VALUE",
        ),
        (
            &["--node", "a=192.0.2.1", "--survivor", "b"][..],
            "--survivor",
        ),
        (&[][..], "--node"),
    ] {
        for sub in ["crm-config", "pcs-config"] {
            let out = run(Command::new(warden()).arg(sub).args(args), T);
            assert_ne!(code(&out), 0, "{sub} {args:?}");
            assert!(
                out.stdout.is_empty(),
                "{sub} {args:?} printed a partial config"
            );
            let err = text(&out.stderr);
            assert!(err.contains(needle), "{sub} {args:?}: {err}");
        }
    }
}
