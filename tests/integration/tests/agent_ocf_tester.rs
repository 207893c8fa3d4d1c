//! The agent against a real daemon (`etcd-warden daemon --standalone DIR`)
//! and real etcd: ocf-tester's whole sequence, the agent's own view of a
//! killed and a hung etcd, and the alert agent's hand-off.

// Tests may unwrap (clippy.toml allows it in #[test] functions; this
// extends that to the helpers of this file).
#![allow(clippy::unwrap_used)]

mod agent_support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use agent_support::{StandaloneDaemon, agent, alive, code, kill, run, text, warden};

const T: Duration = Duration::from_secs(120);

/// Runs the agent like Pacemaker would: the action as the only argument,
/// everything else in `OCF_*` variables.
fn ocf(d: &StandaloneDaemon, action: &str, extra: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(agent());
    cmd.arg(action)
        .env_clear()
        .env("OCF_ROOT", "/usr/lib/ocf")
        .env("OCF_RESOURCE_INSTANCE", "etcd:0")
        .env("OCF_RESKEY_socket", d.socket())
        .env("OCF_RESKEY_CRM_meta_timeout", "20000");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    run(&mut cmd, T)
}

fn reason(o: &Output) -> String {
    text(&o.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("ocf-exit-reason:"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn ocf_tester_passes_against_a_standalone_daemon() {
    let d = StandaloneDaemon::start();
    let out = run(
        Command::new("ocf-tester")
            .arg("-n")
            .arg("etcd")
            .arg("-o")
            .arg(format!("socket={}", d.socket().display()))
            .arg(agent()),
        T,
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        code(&out),
        0,
        "ocf-tester:\n{all}\ndaemon log:\n{}",
        d.log()
    );
    assert!(all.contains("passed all tests"), "{all}");
    // promote and demote both answer 3: not a partly promotable agent.
    assert!(all.contains("does not support promotable clones"), "{all}");
    // ocf-tester ends with the resource stopped: the daemon agrees.
    let s = d.status();
    assert!(!s.etcd_running, "{s:?}");
}

#[test]
fn monitor_sees_a_killed_and_a_hung_etcd_within_its_timeout() {
    let d = StandaloneDaemon::start();
    assert_eq!(code(&ocf(&d, "monitor", &[])), 7, "probe before start");
    let out = ocf(&d, "start", &[]);
    assert_eq!(code(&out), 0, "start: {}\n{}", text(&out.stderr), d.log());
    assert_eq!(code(&ocf(&d, "monitor", &[])), 0);
    assert_eq!(code(&ocf(&d, "monitor", &[("OCF_CHECK_LEVEL", "10")])), 0);
    let s = d.status();
    assert!(s.etcd_running && s.quorum, "{s:?}");
    let pid = i32::try_from(s.etcd_pid.expect("etcd pid")).unwrap();

    // Killed by hand: monitor reports a soft failure (1, never 6) with a
    // reason, within its budget.
    assert!(kill(pid, 9));
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = ocf(&d, "monitor", &[("OCF_RESKEY_CRM_meta_interval", "10000")]);
        if code(&out) != 0 || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    assert!(!reason(&out).is_empty(), "no exit reason");
    // Pacemaker's recovery: stop, start.
    assert_eq!(code(&ocf(&d, "stop", &[])), 0);
    assert_eq!(code(&ocf(&d, "monitor", &[])), 7);
    assert_eq!(code(&ocf(&d, "start", &[])), 0);
    assert_eq!(code(&ocf(&d, "monitor", &[])), 0);

    // Hung (SIGSTOP): both depths answer inside a 3 s timeout.
    let pid = i32::try_from(d.status().etcd_pid.expect("etcd pid")).unwrap();
    assert!(kill(pid, 19));
    for depth in ["0", "10"] {
        let t0 = Instant::now();
        let out = ocf(
            &d,
            "monitor",
            &[
                ("OCF_CHECK_LEVEL", depth),
                ("OCF_RESKEY_CRM_meta_timeout", "3000"),
            ],
        );
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "depth {depth}: {:?}",
            t0.elapsed()
        );
        assert_eq!(code(&out), 1, "depth {depth}: {}", text(&out.stderr));
        assert!(!reason(&out).is_empty());
    }
    assert!(kill(pid, 18));
    let out = ocf(&d, "stop", &[]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        !alive(pid)
            || std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map_or(true, |c| c.trim() != "etcd")
    );
}

#[test]
fn validate_all_and_notify_reach_the_daemon() {
    let d = StandaloneDaemon::start();
    assert_eq!(code(&ocf(&d, "validate-all", &[])), 0);
    let out = ocf(
        &d,
        "notify",
        &[
            ("OCF_RESKEY_CRM_meta_notify_type", "pre"),
            ("OCF_RESKEY_CRM_meta_notify_operation", "start"),
            ("OCF_RESKEY_CRM_meta_notify_start_uname", "nodeB"),
            ("OCF_RESKEY_CRM_meta_notify_active_uname", "nodeA"),
        ],
    );
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(code(&ocf(&d, "reload-agent", &[])), 0);
    // A drop-in etcd itself would refuse: validate-all answers 2 (this
    // node's configuration is invalid; never 6, which would stop etcd on
    // every node) naming file, line and key.
    let dropins = d.socket().parent().unwrap().join("config.d");
    std::fs::create_dir_all(&dropins).unwrap();
    let bad = dropins.join("50-timing.toml");
    std::fs::write(&bad, "[etcd]\nheartbeat_interval_ms = 500\n").unwrap();
    let out = ocf(&d, "validate-all", &[]);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 2, "{said}");
    let want = format!("{}:2: key `etcd.heartbeat_interval_ms`", bad.display());
    assert!(said.contains(&want), "{said}");
}

#[test]
fn alert_agent_hands_events_to_the_daemon() {
    let d = StandaloneDaemon::start();
    let warden = warden();
    let alert = |socket: &std::path::Path| {
        run(
            Command::new(&warden)
                .arg("alert")
                .env("CRM_alert_kind", "fencing")
                .env("CRM_alert_node", "nodeB")
                .env("CRM_alert_task", "st_notify_fence")
                .env("CRM_alert_rc", "0")
                .env(
                    "CRM_alert_desc",
                    "Operation reboot of nodeB by nodeA for pacemaker-controld.1@nodeA: OK (ref=x)",
                )
                .env("CRM_alert_recipient", socket),
            T,
        )
    };
    let out = alert(&d.socket());
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    // The daemon logged what it received.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !d.log().contains("nodeB") {
        assert!(
            Instant::now() < deadline,
            "daemon never logged the event:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // No daemon: a clear error, fast.
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = alert(&dir.path().join("api.sock"));
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_ne!(code(&out), 0);
    assert!(
        text(&out.stderr).contains("forwarding the fencing event about nodeB"),
        "{}",
        text(&out.stderr)
    );
}
