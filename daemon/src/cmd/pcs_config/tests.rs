//! The plan and its renderings from arguments as clap parses them.

use super::*;
use clap::Parser;

#[derive(Debug, Parser)]
struct T {
    #[command(flatten)]
    c: ClusterArgs,
}

fn args(extra: &[&str]) -> Result<ClusterArgs, String> {
    let mut v = vec!["t"];
    v.extend_from_slice(extra);
    T::try_parse_from(v).map(|t| t.c).map_err(|e| e.to_string())
}

fn two() -> Vec<&'static str> {
    vec!["--node", "nodeA=192.0.2.1", "--node", "nodeB=192.0.2.2"]
}

#[test]
fn two_nodes_favour_the_first_with_a_delay() {
    let p = Plan::build(&args(&two()).unwrap()).unwrap();
    assert_eq!(p.fence.len(), 2);
    assert!(
        p.fence[0]
            .params
            .contains(&("pcmk_delay_base".into(), "10s".into()))
    );
    assert!(
        !p.fence[1]
            .params
            .iter()
            .any(|(k, _)| k == "pcmk_delay_base")
    );
    assert_eq!(p.clone_id, "etcd-clone");
    assert!(p.clone_meta.contains(&("notify", "true")));
}

#[test]
fn survivor_and_options_are_applied() {
    let mut a = two();
    a.extend([
        "--survivor",
        "nodeB",
        "--fence-delay",
        "5",
        "--fence-agent",
        "fence_xyz",
        "--fence-option",
        "username=admin",
        "--fence-node-option",
        "nodeA:ip=10.0.0.11",
    ]);
    let p = Plan::build(&args(&a).unwrap()).unwrap();
    assert_eq!(p.fence[0].agent, "fence_xyz");
    assert!(
        p.fence[0]
            .params
            .contains(&("ip".into(), "10.0.0.11".into()))
    );
    assert!(
        p.fence[1]
            .params
            .contains(&("pcmk_delay_base".into(), "5s".into()))
    );
    assert!(
        p.fence[1]
            .params
            .contains(&("username".into(), "admin".into()))
    );
}

#[test]
fn three_nodes_have_no_delay() {
    let mut a = two();
    a.extend(["--node", "nodeC=2001:db8::3"]);
    let p = Plan::build(&args(&a).unwrap()).unwrap();
    assert!(
        p.fence
            .iter()
            .all(|d| !d.params.iter().any(|(k, _)| k == "pcmk_delay_base"))
    );
}

#[test]
fn bad_input_names_the_option() {
    assert!(
        args(&["--node", "nodeA"])
            .unwrap_err()
            .contains("NAME=ADDRESS")
    );
    assert!(
        args(&["--node", "nodeA=300.1.1.1"])
            .unwrap_err()
            .contains("not an IPv4 or IPv6")
    );
    assert!(
        args(&["--node", "a b=192.0.2.1"])
            .unwrap_err()
            .contains("node name")
    );
    assert!(args(&["--fence-option", "=x"]).unwrap_err().contains("key"));
    let cases: &[(&[&str], &str)] = &[
        (
            &["--node", "nodeA=192.0.2.1", "--node", "nodeA=192.0.2.2"],
            "twice",
        ),
        (
            &["--node", "nodeA=192.0.2.1", "--node", "nodeB=192.0.2.1"],
            "two nodes",
        ),
        (
            &["--node", "a=192.0.2.1", "--resource-id", "1etcd"],
            "--resource-id",
        ),
        (
            &["--node", "a=192.0.2.1", "--socket", "api.sock"],
            "--socket",
        ),
        (
            &["--node", "a=192.0.2.1", "--fence-agent", "fence x"],
            "--fence-agent",
        ),
        (
            &["--node", "a=192.0.2.1", "--fence-delay", "soon"],
            "--fence-delay",
        ),
        (&["--node", "a=192.0.2.1", "--survivor", "b"], "--survivor"),
        (
            &[
                "--node",
                "a=192.0.2.1",
                "--fence-option",
                "pcmk_host_list=a",
            ],
            "pcmk_host_list",
        ),
        (
            &["--node", "a=192.0.2.1", "--fence-node-option", "b:ip=1"],
            "not a --node",
        ),
    ];
    for (argv, needle) in cases {
        let e = Plan::build(&args(argv).unwrap()).unwrap_err().to_string();
        assert!(e.contains(needle), "{argv:?}: {e}");
    }
}

#[test]
fn the_corosync_token_is_set_at_setup_and_explained_otherwise() {
    let c = args(&two()).unwrap();
    let p = Plan::build(&c).unwrap();
    let setup = "pcs cluster setup etcd-warden nodeA addr=192.0.2.1 nodeB addr=192.0.2.2 totem token=3000\n";
    assert!(render_pcs(&p, &c, true).contains(setup));
    let existing = render_pcs(&p, &c, false);
    assert!(!existing.contains("pcs cluster setup"), "{existing}");
    assert!(
        existing.contains(
            "#   pcs cluster config update totem token=3000 && pcs cluster reload corosync\n"
        ),
        "{existing}"
    );
    assert!(render_crm(&p).contains("crm corosync set totem.token 3000"));

    let mut a = two();
    a.extend(["--corosync-token", "1000"]);
    let c = args(&a).unwrap();
    let p = Plan::build(&c).unwrap();
    assert!(render_pcs(&p, &c, true).contains(" totem token=1000\n"));
    assert!(render_crm(&p).contains("(1000 ms)"));
    for bad in ["100", "60001", "3s", ""] {
        let mut a = two();
        a.extend(["--corosync-token", bad]);
        let e = args(&a).unwrap_err();
        assert!(e.contains("--corosync-token"), "{bad}: {e}");
    }
}

#[test]
fn renderings_quote_values() {
    let mut a = two();
    a.extend(["--fence-option", "password_script=/etc/x y's"]);
    let c = args(&a).unwrap();
    let p = Plan::build(&c).unwrap();
    let pcs = render_pcs(&p, &c, true);
    assert!(pcs.contains("password_script='/etc/x y'\\''s'"), "{pcs}");
    assert!(
        pcs.contains("pcs cluster setup etcd-warden nodeA addr=192.0.2.1 nodeB addr=192.0.2.2")
    );
    let crm = render_crm(&p);
    assert!(crm.contains("password_script=\"/etc/x y's\""), "{crm}");
    let xml = render_xml(&p);
    assert!(xml.contains("value=\"/etc/x y&apos;s\""), "{xml}");
    assert!(xml.contains("name=\"OCF_CHECK_LEVEL\" value=\"10\""));
}

#[test]
fn ipv6_brackets_are_accepted() {
    let n: NodeSpec = "n1=[2001:db8::1]".parse().unwrap();
    assert_eq!(n.addr.to_string(), "2001:db8::1");
}

/// Nothing cluster-wide beyond fencing and quorum: the retry policy is the
/// etcd resource's own meta, in all three renderings.
#[test]
fn retry_policy_is_the_resources_own_meta() {
    let c = args(&two()).unwrap();
    let p = Plan::build(&c).unwrap();
    let pcs = render_pcs(&p, &c, false);
    let crm = render_crm(&p);
    let xml = render_xml(&p);
    for (name, text) in [("pcs", &pcs), ("crm", &crm), ("xml", &xml)] {
        assert!(!text.contains("start-failure-is-fatal"), "{name}: {text}");
        assert!(!text.contains("rsc_defaults"), "{name}: {text}");
        assert!(!text.contains("rsc-defaults"), "{name}: {text}");
    }
    assert!(
        pcs.contains(" meta migration-threshold=10 failure-timeout=10min\n"),
        "{pcs}"
    );
    assert!(
        pcs.contains(
            "pcs -f etcd-warden.cib.xml property set stonith-enabled=true no-quorum-policy=stop\n"
        ),
        "{pcs}"
    );
    assert!(
        xml.contains("id=\"etcd-meta_attributes-failure-timeout\""),
        "{xml}"
    );
}

/// The pcs output pushes the difference to the copy it started from, never
/// the whole file: a change made meanwhile by someone else survives.
#[test]
fn pcs_pushes_the_difference_to_its_starting_copy() {
    let c = args(&two()).unwrap();
    let p = Plan::build(&c).unwrap();
    let pcs = render_pcs(&p, &c, false);
    let lines: Vec<&str> = pcs.lines().collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| *l == needle)
            .unwrap_or_else(|| panic!("no line {needle:?} in\n{pcs}"))
    };
    let cib = at("pcs cluster cib etcd-warden.cib.xml");
    let copy = at("cp etcd-warden.cib.xml etcd-warden.cib.orig.xml");
    let push = at("pcs cluster cib-push etcd-warden.cib.xml diff-against=etcd-warden.cib.orig.xml");
    assert_eq!(copy, cib + 1, "{pcs}");
    // Every edit goes to the working file, between the copy and the push.
    let edits: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].starts_with("pcs -f "))
        .collect();
    assert!(!edits.is_empty());
    assert!(edits.iter().all(|i| *i > copy && *i < push), "{pcs}");
    assert!(!pcs.contains("--config"), "{pcs}");
    assert_eq!(pcs.matches("cib-push").count(), 1, "{pcs}");
}
