//! The OCF agent under real Pacemaker: a one-node and a two-node namespace
//! cluster, configured by `etcd-warden crm-config --format xml` (properties,
//! fence devices with the harness's fence agent, the etcd clone, the alert),
//! with an `etcd-warden daemon --standalone /run/etcd-warden` in every node
//! (each node's /run is private, so the agent's default socket is that
//! node's daemon).
//!
//! Checked: crm_mon shows the clone Started on every node;
//! `crm_resource --force-check` (depth 0 and 10) works; validate-all of a bad
//! agent parameter is rc 6 naming it, of a node name another node has rc 2;
//! an etcd killed by hand is found by the recurring monitor (a fail-count
//! appears) and Pacemaker starts it again; a changed agent parameter is
//! applied by reload-agent with etcd's PIDs unchanged.
//!
//! The etcd of each node is a one-member cluster of its own: forming a
//! two-member etcd across the nodes and failing over is the failover
//! issue's business, not the agent's.

// Tests may unwrap (clippy.toml allows it in #[test] functions; this
// extends that to the helpers of this file).
#![allow(clippy::unwrap_used)]

mod agent_support;

use std::time::{Duration, Instant};

use agent_support::{install_agent, warden};
use warden_harness::{Cluster, ClusterOptions, CrmMon, Expect};
use warden_integration::twonode::is_etcd;

/// Where each node's daemon keeps everything; the default socket
/// (`/run/etcd-warden/api.sock`) lies inside it.
const WARDEN_DIR: &str = "/run/etcd-warden";

/// Every node runs an active, not failed `etcd` instance.
fn etcd_started_everywhere(nodes: Vec<String>) -> Expect {
    Expect::new(format!("etcd started on {nodes:?}"), move |m: &CrmMon| {
        nodes.iter().all(|n| {
            m.resources.iter().any(|r| {
                is_etcd(r) && r.active && !r.failed && r.role == "Started" && r.nodes.contains(n)
            })
        })
    })
}

/// Runs `cmd` in `node` and returns (exit code, stdout, stderr).
fn exec(c: &Cluster, node: &str, args: &[&str]) -> (i32, String, String) {
    let out = c.exec(node, args).unwrap();
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

/// etcd's PID as the node's daemon reports it, once etcd runs.
fn etcd_pid(c: &Cluster, node: &str) -> Option<i32> {
    let w = warden();
    let (rc, out, _) = exec(
        c,
        node,
        &[
            w.to_str().unwrap(),
            "status",
            "--json",
            "--socket",
            &format!("{WARDEN_DIR}/api.sock"),
        ],
    );
    // 0 healthy, 2 not healthy: either way the status is on stdout.
    if !warden_harness::process::STATUS_ANSWERED.contains(&rc) {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    let running = v.get("etcdRunning")?.as_bool()?;
    let pid = v.get("etcdPid")?.as_i64()?;
    running.then(|| i32::try_from(pid).ok()).flatten()
}

fn wait<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn run_cluster(n: usize) {
    let agent = install_agent();
    let warden = warden();
    let mut opts = ClusterOptions::new(n);
    // The generated configuration brings the fencing; the harness only
    // provides its fence agent.
    opts.stonith = false;
    if n >= 2 {
        warden_harness::fence_agent::install().unwrap();
    }
    let c = Cluster::start(opts).unwrap();
    let nodes = c.node_names();

    // A daemon in every node, ready once its status command answers over
    // the socket (the agent's monitor answers 7 without any daemon, so it
    // tells nothing about the daemon) and the agent's monitor says etcd is
    // not running.
    let daemon_argv = [
        warden.to_str().unwrap(),
        "daemon",
        "--standalone",
        WARDEN_DIR,
    ];
    let socket = format!("{WARDEN_DIR}/api.sock");
    let daemon_ready = |node: &str| {
        wait(
            &format!("the daemon on {node}"),
            Duration::from_secs(30),
            || {
                let status = [warden.to_str().unwrap(), "status", "--socket", &socket];
                let (rc, _, _) = exec(&c, node, &status);
                let answered = warden_harness::process::STATUS_ANSWERED.contains(&rc);
                let (rc, _, _) = exec(&c, node, &[agent.to_str().unwrap(), "monitor"]);
                (answered && rc == 7).then_some(())
            },
        );
    };
    for node in &nodes {
        let pid = c.spawn(node, "etcd-warden", &daemon_argv, &[]).unwrap();
        daemon_ready(node);
        // Pacemaker runs alert agents as hacluster: let that user (and the
        // haclient group) use the socket, as the packaged configuration
        // does; the standalone default admits root only. A restart applies
        // it.
        c.exec_ok(
            node,
            &[
                "sed",
                "-i",
                "-e",
                r#"s/^allowed_users = .*/allowed_users = ["root", "hacluster"]/"#,
                "-e",
                r#"s/^socket_group = .*/socket_group = "haclient"/"#,
                &format!("{WARDEN_DIR}/config.toml"),
            ],
        )
        .unwrap();
        c.stop_process(node, pid, Duration::from_secs(10)).unwrap();
        c.spawn(node, "etcd-warden", &daemon_argv, &[]).unwrap();
        daemon_ready(node);
    }

    // The generated configuration, applied as the docs say.
    let mut args = vec!["crm-config".to_string(), "--format".into(), "xml".into()];
    for node in &nodes {
        args.push("--node".into());
        args.push(format!("{node}={}", c.addr(node).unwrap()));
    }
    for a in [
        "--fence-agent",
        "fence_warden_testns",
        "--fence-option",
        &format!("harness_root={}", c.root().display()),
        "--fence-option",
        "pcmk_host_check=static-list",
        "--fence-delay",
        "2s",
    ] {
        args.push(a.to_string());
    }
    let out = std::process::Command::new(&warden)
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frag = c.node_dir(&nodes[0]).unwrap().join("etcd-warden.xml");
    std::fs::write(&frag, &out.stdout).unwrap();
    c.exec_ok(
        &nodes[0],
        &["cibadmin", "--modify", "--xml-file", frag.to_str().unwrap()],
    )
    .unwrap();

    let t0 = Instant::now();
    c.wait_for(
        &nodes[0],
        etcd_started_everywhere(nodes.clone()),
        Duration::from_secs(120),
    )
    .unwrap_or_else(|e| panic!("{e:#}\n{}", c.crm_mon_text(&nodes[0]).unwrap_or_default()));
    eprintln!(
        "{n} node(s): etcd started everywhere {:?} after the configuration",
        t0.elapsed()
    );
    let text = c.crm_mon_text(&nodes[0]).unwrap();
    assert!(text.contains("etcd-clone"), "{text}");
    for node in &nodes {
        assert!(
            etcd_pid(&c, node).is_some(),
            "the daemon on {node} runs no etcd"
        );
    }

    // crm_resource runs the agent outside the cluster's transitions.
    for level in ["0", "10"] {
        let (rc, out, err) = exec(
            &c,
            &nodes[0],
            &[
                "crm_resource",
                "--resource",
                "etcd",
                &format!("--force-check={level}"),
            ],
        );
        assert_eq!(rc, 0, "force-check={level}: {out}{err}");
    }
    // Bad parameters: validate-all rc 6 (OCF_ERR_CONFIGURED, wrong on every
    // node) for the agent's own, rc 2 (OCF_ERR_ARGS, wrong on this node) for
    // a node name another node has; each named.
    for (param, value, want) in [
        ("socket", "relative.sock", 6),
        ("daemon_wait", "soon", 6),
        ("node_name", "no-such-node", 2),
    ] {
        let (rc, out, err) = exec(
            &c,
            &nodes[0],
            &[
                "crm_resource",
                "--validate",
                "--class",
                "ocf",
                "--provider",
                "etcd-warden",
                "--agent",
                "etcd",
                "--option",
                &format!("{param}={value}"),
            ],
        );
        assert_eq!(rc, want, "{param}={value}: {out}{err}");
        let said = format!("{out}{err}");
        assert!(
            said.contains(&format!("'{param}'")) || said.contains(&format!("{param}=")),
            "{said}"
        );
    }

    // An etcd killed by hand: the recurring monitor finds it, Pacemaker
    // records the failure and starts etcd again on that node.
    let victim = nodes.last().unwrap().clone();
    let old = etcd_pid(&c, &victim).unwrap();
    let t0 = Instant::now();
    c.exec_ok(&victim, &["kill", "-KILL", &old.to_string()])
        .unwrap();
    let fail_count = || {
        let (rc, out, _) = exec(
            &c,
            &victim,
            &[
                "crm_failcount",
                "--query",
                "--resource",
                "etcd",
                "--node",
                &victim,
            ],
        );
        // "scope=status  name=fail-count-etcd#monitor_10000 value=1"
        (rc == 0)
            .then(|| out.rsplit("value=").next()?.trim().parse::<u64>().ok())
            .flatten()
            .filter(|v| *v >= 1)
    };
    wait(
        "a fail-count for the killed etcd",
        Duration::from_secs(60),
        fail_count,
    );
    let new = wait("etcd running again", Duration::from_secs(60), || {
        etcd_pid(&c, &victim).filter(|p| *p != old)
    });
    c.wait_for(
        &nodes[0],
        etcd_started_everywhere(nodes.clone()),
        Duration::from_secs(60),
    )
    .unwrap();
    eprintln!(
        "{n} node(s): killed etcd {old} on {victim}, Pacemaker restarted it as {new} after {:?}",
        t0.elapsed()
    );

    // The alert agent handed Pacemaker's resource events (the failed
    // monitor, the restart) to the victim's daemon as they happened.
    let log = c.log_dir(&victim).unwrap().join("etcd-warden.log");
    wait(
        "the resource alert in the daemon's log",
        Duration::from_secs(30),
        || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            text.lines()
                .any(|l| l.contains("cluster event") && l.contains("resource"))
                .then_some(())
        },
    );

    // A reloadable parameter changes by reload-agent (the agent declares
    // OCF 1.1), without a restart: etcd keeps its PID on every node.
    let before: Vec<i32> = nodes.iter().map(|n| etcd_pid(&c, n).unwrap()).collect();
    let logs: Vec<(String, std::path::PathBuf, usize)> = nodes
        .iter()
        .map(|n| {
            let log = c.log_dir(n).unwrap().join("log-pacemaker/pacemaker.log");
            let len = std::fs::read_to_string(&log).unwrap_or_default().len();
            (n.clone(), log, len)
        })
        .collect();
    c.exec_ok(
        &nodes[0],
        &[
            "crm_resource",
            "--resource",
            "etcd",
            "--set-parameter",
            "daemon_wait",
            "--parameter-value",
            "5",
        ],
    )
    .unwrap();
    // Pacemaker's own record of a successful reload-agent on every node, in
    // that node's log, after the change (its operation history records a
    // reload as a start).
    for (node, log, from) in &logs {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let new = text.get(*from..).unwrap_or_default();
            let reloads: Vec<&str> = new.lines().filter(|l| l.contains("reload")).collect();
            if reloads.iter().any(|l| {
                l.contains("Result of reload-agent operation for etcd") && l.contains(" ok")
            }) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no successful reload-agent on {node} within 60 s; its log says:\n{}",
                reloads.join("\n")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    c.wait_idle(&nodes[0], Duration::from_secs(60)).unwrap();
    let after: Vec<i32> = nodes.iter().map(|n| etcd_pid(&c, n).unwrap()).collect();
    assert_eq!(before, after, "changing daemon_wait restarted etcd");
    c.stop();
}

#[test]
fn one_node_cluster_runs_etcd_through_the_agent() {
    run_cluster(1);
}

#[test]
fn two_node_cluster_runs_etcd_through_the_agent() {
    run_cluster(2);
}
