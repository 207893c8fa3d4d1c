//! The daemon in standalone mode against a real etcd: start, readiness,
//! noticing a killed or hung etcd, the daemon's own death, clean shutdown.

mod common;

use std::time::{Duration, Instant};

use common::*;
use warden_api::{Action, Outcome};

#[test]
fn autostart_is_ready_and_reports_a_live_voter() {
    let t = Instant::now();
    // No Pacemaker for the report, deterministically (even if a cluster
    // runs on this host).
    let mut d = Daemon::start_with_env(true, &[("CIB_file", "/nonexistent/etcd-warden-cib.xml")]);
    d.wait_ready();
    eprintln!("ready after {:?}", t.elapsed());
    let s = d.status();
    assert_eq!(s.state, "running", "{s:?}");
    assert!(s.etcd_running && s.quorum && !s.is_learner, "{s:?}");
    assert!(s.member_id.is_some() && s.leader_id == s.member_id, "{s:?}");
    let (code, metrics) = d.http_get("/metrics").unwrap();
    assert_eq!(code, 200);
    assert_eq!(
        metric(&metrics, "etcd_warden_member_role{role=\"leader\"}"),
        Some(1.0)
    );
    assert_eq!(metric(&metrics, "etcd_warden_etcd_up"), Some(1.0));
    // No Pacemaker cluster here: 503 with the reason and the live etcd part.
    let (code, body) = d.http_get("/status").unwrap();
    assert_eq!(code, 503, "{body}");
    let report: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        report["error"].as_str().unwrap().contains("crm_mon"),
        "{report}"
    );
    assert_eq!(report["etcd"]["members"][0]["role"], "voter", "{report}");
    assert_eq!(report["memberStatus"][0]["reachable"], true, "{report}");
    assert_eq!(d.http_get("/healthz").unwrap().0, 200);
}

#[test]
fn without_autostart_etcd_runs_only_when_asked() {
    let mut d = Daemon::start(false);
    let s = d.status();
    assert!(!s.etcd_running);
    assert_eq!(s.state, "stopped");
    assert_eq!(
        d.action(Action::Monitor, 0, 2000).outcome,
        Outcome::NotRunning
    );
    assert_eq!(d.http_get("/readyz").unwrap().0, 503);

    assert_eq!(d.action(Action::Start, 0, 30_000).outcome, Outcome::Success);
    d.wait_ready();
    assert_eq!(d.action(Action::Monitor, 0, 2000).outcome, Outcome::Success);
    assert_eq!(
        d.action(Action::Monitor, 10, 2000).outcome,
        Outcome::Success
    );
    // Start is idempotent.
    assert_eq!(d.action(Action::Start, 0, 10_000).outcome, Outcome::Success);
    let pid = d.status().etcd_pid.unwrap();

    assert_eq!(d.action(Action::Stop, 0, 20_000).outcome, Outcome::Success);
    assert!(!alive(pid), "etcd {pid} still alive after stop");
    assert_eq!(
        d.action(Action::Monitor, 0, 2000).outcome,
        Outcome::NotRunning
    );
    // The data dir is reused: the same member comes back.
    let before = std::fs::read_dir(d.dir.path().join("etcd"))
        .unwrap()
        .count();
    assert!(before > 0);
    assert_eq!(d.action(Action::Start, 0, 30_000).outcome, Outcome::Success);
    d.wait_ready();
}

/// Waits until the probe loop has counted one unexpected etcd exit. It runs
/// every second (standalone default), so 2.5 s is one interval plus margin;
/// the metric is the probe loop's own record of the death.
fn wait_death_counted(d: &Daemon) {
    wait_for(
        "the probe to count the death",
        Duration::from_millis(2500),
        || {
            let (_, m) = d.http_get("/metrics")?;
            (metric(&m, "etcd_warden_etcd_unexpected_exits_total") == Some(1.0)).then_some(())
        },
    );
}

#[test]
fn a_sigkilled_etcd_is_noticed_within_one_probe_interval() {
    let mut d = Daemon::start(false);
    assert_eq!(d.action(Action::Start, 0, 30_000).outcome, Outcome::Success);
    d.wait_ready();
    let pid = d.status().etcd_pid.unwrap();
    kill(pid, 9);
    let t = Instant::now();
    wait_death_counted(&d);
    eprintln!("noticed after {:?}", t.elapsed());
    let s = d.status();
    assert_eq!(s.state, "failed", "{s:?}");
    assert!(!s.etcd_running);
    assert!(
        s.reason.as_deref().unwrap_or("").contains("signal 9"),
        "{s:?}"
    );
    let r = d.action(Action::Monitor, 0, 2000);
    assert_eq!(r.outcome, Outcome::Failed, "{r:?}");
    assert!(r.reason.unwrap().contains("exited unexpectedly"));
    // Without autostart the daemon leaves recovery to Pacemaker.
    std::thread::sleep(Duration::from_secs(3));
    assert!(!d.status().etcd_running);
    // A stop turns "failed" into "cleanly stopped".
    assert_eq!(d.action(Action::Stop, 0, 5000).outcome, Outcome::Success);
    assert_eq!(
        d.action(Action::Monitor, 0, 2000).outcome,
        Outcome::NotRunning
    );
}

#[test]
fn with_autostart_a_dead_etcd_is_restarted_and_counted() {
    let mut d = Daemon::start(true);
    d.wait_ready();
    let pid = d.status().etcd_pid.unwrap();
    kill(pid, 9);
    let new = wait_for("a new etcd", Duration::from_secs(15), || {
        let s = d.status();
        s.etcd_pid.filter(|p| *p != pid && s.quorum)
    });
    assert_ne!(new, pid);
    let (_, m) = d.http_get("/metrics").unwrap();
    assert_eq!(
        metric(&m, "etcd_warden_supervision_restarts_total"),
        Some(1.0)
    );
}

#[test]
fn a_hung_etcd_is_failed_within_the_deadline_and_never_blocks_the_api() {
    let mut d = Daemon::start(true);
    d.wait_ready();
    let pid = d.status().etcd_pid.unwrap();
    kill(pid, 19); // SIGSTOP
    let t = Instant::now();
    let r = d.action(Action::Monitor, 10, 2000);
    let took = t.elapsed();
    assert_eq!(r.outcome, Outcome::Failed, "{r:?}");
    assert!(took < Duration::from_millis(2000), "monitor took {took:?}");
    // Meanwhile every other route answers promptly.
    for path in ["/healthz", "/metrics", "/readyz"] {
        let t = Instant::now();
        let (code, _) = d.http_get(path).unwrap();
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{path} took {:?}",
            t.elapsed()
        );
        assert!(code == 200 || code == 503, "{path}: {code}");
    }
    let t = Instant::now();
    let s = d.status();
    assert!(t.elapsed() < Duration::from_millis(1500));
    assert_eq!(s.state, "failed");
    assert!(!s.quorum);
    kill(pid, 18); // SIGCONT
    d.wait_ready();
    assert_eq!(
        d.action(Action::Monitor, 10, 2000).outcome,
        Outcome::Success
    );
}

#[test]
fn a_hung_etcd_is_stopped_within_the_stop_deadline() {
    let mut d = Daemon::start(true);
    d.wait_ready();
    let pid = d.status().etcd_pid.unwrap();
    kill(pid, 19);
    let t = Instant::now();
    let r = d.action(Action::Stop, 0, 5000);
    assert_eq!(r.outcome, Outcome::Success, "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(!alive(pid));
}

#[test]
fn process_backend_after_daemon_sigkill_adopts_the_running_etcd() {
    // docs/daemon.md: etcd outlives a SIGKILLed daemon (its log is a file,
    // not a pipe), and the next daemon adopts it: same PID, no restart.
    let mut d = Daemon::start(true);
    d.wait_ready();
    let before = d.status();
    let old = before.etcd_pid.unwrap();
    // etcd's log goes to STATE_DIR/etcd.log and is forwarded to tracing.
    let etcd_log = d.dir.path().join("state/etcd.log");
    wait_for("etcd's log forwarded", Duration::from_secs(5), || {
        d.log().contains("serving client traffic").then_some(())
    });
    assert!(
        std::fs::read_to_string(&etcd_log)
            .unwrap()
            .contains("serving client traffic")
    );
    d.kill_daemon();
    assert!(alive(old), "etcd should outlive a SIGKILLed daemon");
    d.spawn(true);
    d.wait_ready();
    let after = d.status();
    assert_eq!(
        after.etcd_pid,
        Some(old),
        "the restarted daemon restarted etcd instead of adopting it"
    );
    assert_eq!(after.member_id, before.member_id);
    assert_eq!(after.state, "running", "{after:?}");
    assert!(d.log().contains("adopted the etcd left running"));
    assert_eq!(
        d.action(Action::Monitor, 10, 2000).outcome,
        Outcome::Success
    );
    // A second SIGKILL of the daemon: adopted again, still the same etcd.
    d.kill_daemon();
    d.spawn(true);
    d.wait_ready();
    assert_eq!(d.status().etcd_pid, Some(old));
    // The adopted etcd's death is noticed (it is not the daemon's child:
    // /proc is polled) and, with autostart, it is restarted.
    kill(old, 9);
    let new = wait_for("a new etcd", Duration::from_secs(15), || {
        let s = d.status();
        s.etcd_pid.filter(|p| *p != old && s.quorum)
    });
    let (_, m) = d.http_get("/metrics").unwrap();
    assert_eq!(
        metric(&m, "etcd_warden_etcd_unexpected_exits_total"),
        Some(1.0)
    );
    assert!(
        d.log()
            .contains("an adopted etcd is not the daemon's child")
    );
    assert_ne!(new, old);
}

#[test]
fn an_adopted_etcd_is_reported_dead_and_stopped_through_the_api() {
    let mut d = Daemon::start(false);
    assert_eq!(d.action(Action::Start, 0, 30_000).outcome, Outcome::Success);
    d.wait_ready();
    let first = d.status().etcd_pid.unwrap();
    d.kill_daemon();
    d.spawn(false);
    // Adopted without autostart too: Pacemaker started it, it still runs.
    assert_eq!(d.status().etcd_pid, Some(first));
    d.wait_ready();
    assert_eq!(d.action(Action::Monitor, 0, 2000).outcome, Outcome::Success);

    // SIGKILL of the adopted etcd: noticed within a probe interval.
    kill(first, 9);
    let t = Instant::now();
    wait_death_counted(&d);
    eprintln!("adopted etcd's death noticed after {:?}", t.elapsed());
    let s = d.status();
    assert_eq!(s.state, "failed", "{s:?}");
    assert!(!s.etcd_running, "{s:?}");
    let r = d.action(Action::Monitor, 0, 2000);
    assert_eq!(r.outcome, Outcome::Failed, "{r:?}");
    assert!(r.reason.unwrap().contains("exited unexpectedly"));
    assert_eq!(d.action(Action::Stop, 0, 5000).outcome, Outcome::Success);

    // Start again, kill the daemon, adopt, and stop the adopted etcd
    // through the API: SIGTERM to its group, gone within the grace.
    assert_eq!(d.action(Action::Start, 0, 30_000).outcome, Outcome::Success);
    d.wait_ready();
    let second = d.status().etcd_pid.unwrap();
    assert_ne!(second, first);
    d.kill_daemon();
    d.spawn(false);
    assert_eq!(d.status().etcd_pid, Some(second));
    let t = Instant::now();
    let r = d.action(Action::Stop, 0, 20_000);
    assert_eq!(r.outcome, Outcome::Success, "{r:?}");
    eprintln!("adopted etcd stopped after {:?}", t.elapsed());
    assert!(!alive(second), "the adopted etcd {second} survived a stop");
    assert!(d.log().contains("etcd stopped"));
    assert_eq!(
        d.action(Action::Monitor, 0, 2000).outcome,
        Outcome::NotRunning
    );
    assert!(
        !d.dir.path().join("state/etcd.pid").exists(),
        "the PID file outlived its etcd"
    );
}

#[test]
fn an_etcd_started_for_another_configuration_is_stopped_not_adopted() {
    let mut d = Daemon::start(true);
    d.wait_ready();
    let old = d.status().etcd_pid.unwrap();
    d.kill_daemon();
    // The configuration the running etcd was started with no longer matches
    // what the daemon would run (here: its data dir), so it cannot be
    // adopted: it is stopped, and a fresh etcd is started.
    let conf = d.dir.path().join("state/etcd.conf.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&conf).unwrap()).unwrap();
    v["data-dir"] = serde_json::json!("/nonexistent/elsewhere");
    std::fs::write(&conf, serde_json::to_vec(&v).unwrap()).unwrap();
    d.spawn(true);
    wait_for("the orphan to be stopped", Duration::from_secs(25), || {
        (!alive(old)).then_some(())
    });
    d.wait_ready();
    assert_ne!(d.status().etcd_pid, Some(old));
    let log = d.log();
    assert!(log.contains("cannot be adopted"), "{log}");
    assert!(log.contains("data-dir"), "{log}");
}

#[test]
fn sigterm_stops_etcd_and_the_daemon_cleanly() {
    let mut d = Daemon::start(true);
    d.wait_ready();
    let pid = d.status().etcd_pid.unwrap();
    let mut child = d.child.take().unwrap();
    kill(child.id(), 15);
    let t = Instant::now();
    let status = wait_for("the daemon to exit", Duration::from_secs(15), || {
        child.try_wait().unwrap()
    });
    assert!(status.success(), "{status:?}");
    assert!(t.elapsed() < Duration::from_secs(12));
    assert!(!alive(pid), "etcd {pid} outlived the daemon's SIGTERM");
    assert!(!d.socket().exists(), "the socket is removed on exit");
}

#[test]
fn leader_changes_are_a_server_sent_event_stream() {
    use std::io::{BufRead, BufReader, Write};
    let mut d = Daemon::start(false);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", d.http)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    assert_eq!(d.action(Action::Start, 0, 30_000).outcome, Outcome::Success);
    let member = wait_for("member id", Duration::from_secs(10), || {
        d.status().leader_id
    });
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "stream ended");
        if let Some(data) = line.strip_prefix("data: ") {
            let v: serde_json::Value = serde_json::from_str(data).unwrap();
            assert_eq!(v["leaderId"], member.to_string());
            break;
        }
    }
}
