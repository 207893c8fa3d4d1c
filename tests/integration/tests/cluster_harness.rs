//! Acceptance tests of the harness's Pacemaker clusters: real Corosync,
//! Pacemaker and fencing in network namespaces (root needed). Each test keeps
//! one cluster for several checks, to keep the file's run time modest.

#![allow(clippy::unwrap_used)] // tests may unwrap, helpers included

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use warden_harness::crm::{self, CrmMon};
use warden_harness::process::{alive, start_ticks};
use warden_harness::{Cluster, ClusterOptions};

const T: Duration = Duration::from_secs(60);

/// What a cluster leaves on the machine, recorded before drop.
struct Footprint {
    root: PathBuf,
    netns: Vec<String>,
    pids: Vec<(i32, Option<u64>)>,
}

fn footprint(c: &Cluster) -> Footprint {
    let mut pids = Vec::new();
    for n in c.node_names() {
        pids.push(c.holder_pid(&n).unwrap());
        pids.extend(c.node_pids(&n).unwrap());
    }
    // With its start time, a PID names one process: on a host whose PIDs
    // wrap (pid_max 32768) and that runs other tests beside, a PID of the
    // cluster may name another process soon after the teardown.
    let pids = pids.into_iter().map(|p| (p, start_ticks(p))).collect();
    Footprint {
        root: c.root().to_path_buf(),
        netns: c.netns_names(),
        pids,
    }
}

fn assert_gone(f: &Footprint) {
    assert!(!f.root.exists(), "{} left behind", f.root.display());
    for ns in &f.netns {
        assert!(
            !Path::new("/run/netns").join(ns).exists(),
            "namespace {ns} left behind"
        );
    }
    for &(p, start) in &f.pids {
        assert!(
            !(alive(p) && start_ticks(p) == start),
            "PID {p} of the cluster survived teardown"
        );
    }
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let root = f.root.to_string_lossy();
    for line in mounts.lines() {
        assert!(!line.contains(root.as_ref()), "mount left behind: {line}");
        for ns in &f.netns {
            assert!(
                !line.contains(&format!("/run/netns/{ns}")),
                "mount left behind: {line}"
            );
        }
    }
}

fn online_everywhere(c: &Cluster) {
    let names = c.node_names();
    for n in &names {
        let m = c.crm_mon(n).unwrap();
        for x in &names {
            assert!(
                m.node(x).is_some_and(|s| s.online),
                "{n} sees {x} not online: {}",
                m.summary()
            );
        }
        assert!(m.dc.is_some(), "{n} sees no DC");
    }
}

#[test]
fn cluster_one_node_comes_up_and_goes_away() {
    let t = Instant::now();
    let c = Cluster::start(ClusterOptions::new(1)).unwrap();
    eprintln!("TIMING one node online: {:?}", t.elapsed());
    online_everywhere(&c);
    // the node has its own UTS namespace and cluster address
    assert_eq!(
        c.exec_ok("node1", &["hostname"]).unwrap().stdout.trim(),
        "node1"
    );
    let addrs = c
        .exec_ok("node1", &["ip", "-4", "-o", "addr", "show"])
        .unwrap()
        .stdout;
    assert!(addrs.contains("198.51.100.1/32"), "{addrs}");
    let e = c.exec("node9", &["true"]).unwrap_err().to_string();
    assert!(e.contains("no node \"node9\""), "{e}");
    // Pacemaker's state dir is the node's own
    let cib = c
        .log_dir("node1")
        .unwrap()
        .join("lib-pacemaker/cib/cib.xml");
    assert!(cib.exists());
    let f = footprint(&c);
    let t = Instant::now();
    drop(c);
    eprintln!("TIMING one node teardown: {:?}", t.elapsed());
    assert_gone(&f);
}

#[test]
fn cluster_three_nodes_online_crash_and_power_on() {
    let t = Instant::now();
    let c = Cluster::start(ClusterOptions::new(3)).unwrap();
    eprintln!("TIMING three nodes online: {:?}", t.elapsed());
    online_everywhere(&c);

    // full mesh: every node reaches the others' cluster addresses
    for (from, to) in [("node1", "node2"), ("node1", "node3"), ("node2", "node3")] {
        let addr = c.addr(to).unwrap().to_string();
        c.exec_ok(from, &["ping", "-c", "1", "-W", "2", &addr])
            .unwrap();
    }
    // but the TEST-NET addresses do not exist on the host
    let host = std::process::Command::new("ip")
        .args(["-4", "-o", "addr"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&host.stdout).contains("198.51.100."));

    // a crash of node3 (no Pacemaker involved) is fenced by the majority
    let t = Instant::now();
    let killed = c.crash("node3").unwrap();
    assert!(!killed.is_empty());
    let m = c
        .wait_for(
            "node1",
            crm::fenced("node3").and(crm::node_offline("node3")),
            T,
        )
        .unwrap();
    eprintln!(
        "TIMING three nodes: crash -> node3 fenced: {:?}",
        t.elapsed()
    );
    assert!(m.node("node1").unwrap().online && m.node("node2").unwrap().online);
    assert!(m.with_quorum, "two of three keep quorum: {}", m.summary());

    let t = Instant::now();
    c.power_on("node3", T).unwrap();
    c.wait_for("node1", crm::all_online(&c.node_names()), T)
        .unwrap();
    eprintln!(
        "TIMING three nodes: node3 power-on -> online: {:?}",
        t.elapsed()
    );

    let f = footprint(&c);
    let t = Instant::now();
    drop(c);
    eprintln!("TIMING three nodes teardown: {:?}", t.elapsed());
    assert_gone(&f);
}

fn successes(m: &CrmMon, node: &str) -> usize {
    m.fence_successes(node).len()
}

#[test]
fn cluster_two_nodes_fence_power_on_and_partition() {
    let t = Instant::now();
    let c = Cluster::start(ClusterOptions::new(2)).unwrap();
    eprintln!("TIMING two nodes online: {:?}", t.elapsed());
    online_everywhere(&c);

    // a process a test spawns inside a node is tracked, sees the node's dir,
    // and reaches the peer's address
    let dir = c.node_dir("node2").unwrap();
    let marker = dir.join("spawned-was-here");
    let script = format!("touch {}; exec sleep 600", marker.display());
    let bg = c.spawn("node2", "bg", &["sh", "-c", &script], &[]).unwrap();
    assert!(alive(bg));
    c.exec_ok(
        "node2",
        &[
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            &c.addr("node1").unwrap().to_string(),
        ],
    )
    .unwrap();

    // manual fence through Pacemaker: seen in fence_history, node2 killed
    let t = Instant::now();
    c.fence("node2").unwrap();
    let m = c
        .wait_for(
            "node1",
            crm::fenced("node2").and(crm::node_offline("node2")),
            T,
        )
        .unwrap();
    eprintln!(
        "TIMING manual fence (stonith_admin --reboot) -> seen: {:?}",
        t.elapsed()
    );
    let ev = m.fence_successes("node2")[0];
    assert_eq!(ev.action, "reboot");
    assert!(ev.client.starts_with("stonith_admin"), "{ev:?}");
    assert!(
        !alive(bg),
        "fencing must kill processes spawned in the node"
    );
    assert!(marker.exists());
    assert!(
        c.node_pids("node2").unwrap().is_empty(),
        "node2 not powered off"
    );
    assert!(c.is_running("node1").unwrap());

    let t = Instant::now();
    c.power_on("node2", T).unwrap();
    c.wait_for("node1", crm::all_online(&c.node_names()), T)
        .unwrap();
    eprintln!("TIMING power on node2 -> both online: {:?}", t.elapsed());

    c.wait_idle("node1", T).unwrap();

    // partition: both sides lose each other; node1's fence device has a
    // delay, so node1 fences node2 and exactly one side survives
    let (coro1, pcmk1) = c.daemon_pids("node1").unwrap();
    let node1_pids = [coro1.unwrap(), pcmk1.unwrap()];
    let t = Instant::now();
    c.cut("node1", "node2").unwrap();
    let m = c
        .wait_for(
            "node1",
            crm::fenced_times("node2", 2).and(crm::node_offline("node2")),
            T,
        )
        .unwrap();
    eprintln!("TIMING partition -> node2 fenced: {:?}", t.elapsed());
    assert_eq!(
        successes(&m, "node1"),
        0,
        "node1 must not be fenced: {}",
        m.summary()
    );
    assert!(m.node("node1").unwrap().online);
    assert!(
        c.node_pids("node2").unwrap().is_empty(),
        "node2 must be powered off"
    );
    for p in &node1_pids {
        assert!(
            alive(*p),
            "node1's PID {p} died: only one side may be fenced"
        );
    }
    let events = m.fence_successes("node2");
    assert!(
        events
            .iter()
            .any(|e| e.client.starts_with("pacemaker-controld")),
        "{events:?}"
    );

    // heal and bring node2 back
    c.heal("node1", "node2").unwrap();
    c.power_on("node2", T).unwrap();
    c.wait_for("node1", crm::all_online(&c.node_names()), T)
        .unwrap();
    // still exactly the two fences of node2, none of node1
    let m = c.crm_mon("node2").unwrap();
    assert_eq!(successes(&m, "node1"), 0, "{}", m.summary());

    let f = footprint(&c);
    let t = Instant::now();
    drop(c);
    eprintln!("TIMING two nodes teardown: {:?}", t.elapsed());
    assert_gone(&f);
}

#[test]
fn cluster_bad_size_is_a_clear_error() {
    let e = Cluster::start(ClusterOptions::new(4))
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 to 3 nodes"), "{e}");
    let e = Cluster::start(ClusterOptions::new(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 to 3 nodes"), "{e}");
}

#[test]
fn cluster_drop_on_panic_cleans_up() {
    let r = std::panic::catch_unwind(|| {
        let c = Cluster::start(ClusterOptions::new(1)).unwrap();
        let f = footprint(&c);
        std::panic::panic_any(f);
    });
    let payload = r.unwrap_err();
    let f = payload.downcast::<Footprint>().unwrap();
    assert_gone(&f);
}

#[test]
fn cluster_stale_leftovers_of_a_killed_test_are_cleaned_up() {
    use std::process::{Command, Stdio};
    // What a SIGKILLed test process leaves: a root whose owner is dead, a
    // holder in its own mount namespace, and a network namespace.
    let mut owner = Command::new("true").spawn().unwrap();
    let dead = owner.id();
    owner.wait().unwrap();
    let root = PathBuf::from(format!("{}stale{dead}", warden_harness::pcmk::ROOT_PREFIX));
    let node = root.join("node1");
    fs::create_dir_all(&node).unwrap();
    fs::write(root.join(warden_harness::pcmk::MARKER), format!("{dead}\n")).unwrap();
    let netns = format!("whstale{dead}-node1");
    let st = Command::new("ip")
        .args(["netns", "add", &netns])
        .status()
        .unwrap();
    assert!(st.success());
    fs::write(root.join("netns"), format!("{netns}\n")).unwrap();
    let mut holder = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sleep", "600"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let hpid = holder.id() as i32;
    // unshare execs sleep once the namespace exists
    let host_ns = fs::read_link("/proc/self/ns/mnt").unwrap();
    warden_harness::process::poll(
        "the holder's own mount namespace",
        Duration::from_secs(5),
        Duration::from_millis(5),
        || match fs::read_link(format!("/proc/{hpid}/ns/mnt")) {
            Ok(ns) if ns != host_ns => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .unwrap();
    fs::write(node.join("holder.pid"), format!("{hpid}\n")).unwrap();

    warden_harness::pcmk::cleanup_stale();

    assert!(!alive(hpid), "stale holder survived");
    // cleanup_stale reaped our child already, or it is a zombie to reap here
    let _ = holder.try_wait();
    assert!(
        !Path::new("/run/netns").join(&netns).exists(),
        "stale namespace survived"
    );
    assert!(!root.exists(), "stale root survived");
}
