//! The agent with its daemon down (SIGKILLed, as a crash leaves it: etcd
//! running, the socket file still there), against a real etcd started by
//! `etcd-warden daemon --standalone DIR`: monitor judges etcd itself and
//! passes a healthy one within `daemon_down_grace`, stop stops etcd by its
//! recorded PID and start time, start fails cleanly, and a restarted
//! daemon takes over again.

// Tests may unwrap (clippy.toml allows it in #[test] functions; this
// extends that to the helpers of this file).
#![allow(clippy::unwrap_used)]

mod agent_support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use agent_support::{StandaloneDaemon, agent, alive, code, run, text};

const T: Duration = Duration::from_secs(120);

/// Runs the agent like Pacemaker would, with `daemon_wait` 1 s so that a
/// dead daemon is not waited for long.
fn ocf(d: &StandaloneDaemon, action: &str, extra: &[(&str, &str)]) -> (Output, Duration) {
    let mut cmd = Command::new(agent());
    cmd.arg(action)
        .env_clear()
        .env("OCF_ROOT", "/usr/lib/ocf")
        .env("OCF_RESOURCE_INSTANCE", "etcd:0")
        .env("OCF_RESKEY_socket", d.socket())
        .env("OCF_RESKEY_daemon_wait", "1")
        .env("OCF_RESKEY_CRM_meta_timeout", "20000");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let t0 = Instant::now();
    let out = run(&mut cmd, T);
    (out, t0.elapsed())
}

fn reason(o: &Output) -> String {
    text(&o.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("ocf-exit-reason:"))
        .unwrap_or_default()
        .to_string()
}

/// The daemon's record of etcd beside its socket.
fn record(d: &StandaloneDaemon) -> Option<warden_api::EtcdRecord> {
    let text = std::fs::read(warden_api::etcd_record_path(&d.socket())).ok()?;
    Some(serde_json::from_slice(&text).unwrap())
}

#[test]
fn monitor_and_stop_judge_etcd_while_the_daemon_is_down() {
    let mut d = StandaloneDaemon::start();
    let (out, _) = ocf(&d, "start", &[]);
    assert_eq!(code(&out), 0, "start: {}\n{}", text(&out.stderr), d.log());
    let pid = d.status().etcd_pid.expect("etcd pid");
    let rec = record(&d).expect("the daemon records the etcd it started");
    assert_eq!(rec.pid, pid);
    assert!(warden_api::procfs::same_process(rec.pid, rec.start_ticks));

    d.crash();
    assert!(alive(rec.pid as i32), "etcd outlives its daemon");

    // Monitor, both depths: healthy etcd, daemon down, within the grace.
    for depth in ["0", "10"] {
        let (out, took) = ocf(
            &d,
            "monitor",
            &[
                ("OCF_CHECK_LEVEL", depth),
                ("OCF_RESKEY_CRM_meta_interval", "10000"),
            ],
        );
        assert_eq!(code(&out), 0, "depth {depth}: {}", text(&out.stderr));
        let why = reason(&out);
        assert!(why.contains("daemon down for"), "{why}");
        assert!(why.contains(&format!("pid {pid}")), "{why}");
        assert!(took < Duration::from_secs(3), "depth {depth}: {took:?}");
    }
    // Once the daemon is known down, monitor does not wait for it again.
    let (out, took) = ocf(&d, "monitor", &[]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(took < Duration::from_millis(900), "{took:?}");
    // Past the grace (here 0 s) it fails as it did before, naming why.
    let (out, _) = ocf(&d, "monitor", &[("OCF_RESKEY_daemon_down_grace", "0")]);
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    assert!(
        reason(&out).contains("beyond daemon_down_grace (0 s)"),
        "{}",
        reason(&out)
    );

    // Start needs the daemon: rc 1 with a reason, well within its timeout.
    let (out, took) = ocf(&d, "start", &[("OCF_RESKEY_CRM_meta_timeout", "5000")]);
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    assert!(reason(&out).contains("not reachable"), "{}", reason(&out));
    assert!(took < Duration::from_secs(5), "{took:?}");

    // Stop: the agent stops etcd itself, by PID and start time.
    let (out, _) = ocf(&d, "stop", &[]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(reason(&out).contains("daemon down"), "{}", reason(&out));
    assert!(
        !warden_api::procfs::same_process(rec.pid, rec.start_ticks),
        "etcd still runs after the stop"
    );
    let (out, _) = ocf(&d, "monitor", &[]);
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    assert!(
        reason(&out).contains("is not running either"),
        "{}",
        reason(&out)
    );
    let (out, _) = ocf(&d, "stop", &[]);
    assert_eq!(code(&out), 0, "a second stop: {}", text(&out.stderr));

    // A record whose PID now belongs to another process (same PID, other
    // start time) never gets that process signalled.
    let mut other = Command::new("sleep").arg("60").spawn().unwrap();
    let stranger = warden_api::EtcdRecord {
        pid: other.id(),
        ..rec.clone()
    };
    std::fs::write(
        warden_api::etcd_record_path(&d.socket()),
        serde_json::to_vec(&stranger).unwrap(),
    )
    .unwrap();
    let (out, _) = ocf(&d, "stop", &[]);
    let still_there = other.try_wait().unwrap().is_none();
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        still_there,
        "the agent signalled a process that is not etcd"
    );

    // The daemon back: it answers again, sees etcd stopped, and the agent
    // forgets that the daemon was down.
    d.restart();
    let (out, _) = ocf(&d, "monitor", &[]);
    assert_eq!(code(&out), 7, "{}\n{}", text(&out.stderr), d.log());
    assert!(
        !d.socket().with_file_name("agent-daemon-down").exists(),
        "the down marker outlived the daemon's return"
    );
    assert!(record(&d).is_none(), "a record of a stopped etcd");
    let (out, _) = ocf(&d, "start", &[]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    d.status();
}
