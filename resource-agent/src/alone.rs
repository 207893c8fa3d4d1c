//! What the agent does when the daemon does not answer (not listening, or
//! gone in the middle of a request): it judges and stops etcd itself, from
//! the record the daemon keeps beside its socket
//! ([`warden_api::EtcdRecord`]: PID and start time, backend and unit,
//! client URL, stop grace).
//!
//! - monitor: the recorded process must still be the same process (PID
//!   *and* start time) and etcd's `/health` must answer healthy within a
//!   short deadline; then a healthy etcd passes for `daemon_down_grace`
//!   from when the agent first found the daemon down (a file beside the
//!   socket, on the boot clock), with "daemon down" in the reason. After
//!   that, or with etcd not running or unhealthy, monitor fails as it
//!   would without this.
//! - stop: the recorded process is stopped (the systemd unit through
//!   `systemctl`, else SIGTERM, then SIGKILL), each signal only after the
//!   PID is checked against the start time, and the stop succeeds once the
//!   process is gone. A failed stop makes Pacemaker fence the node, which
//!   on a two-node cluster may be the only node holding the newest writes.
//!
//! Everything that touches the system goes through [`Node`], so the logic
//! is tested with a fake.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use warden_api::client::ClientError;
use warden_api::{EtcdRecord, Outcome};

use crate::budget::Budget;

/// The file beside the socket in which the agent keeps since when (boot
/// clock, ms) it finds the daemon down.
pub const DOWN_MARKER: &str = "agent-daemon-down";

/// The longest health read: a healthy etcd answers `/health` in
/// milliseconds; the monitor must stay fast.
const HEALTH_DEADLINE: Duration = Duration::from_secs(2);

/// How often a stopping etcd is looked for.
const POLL: Duration = Duration::from_millis(50);

/// A signal the agent sends etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    /// SIGCONT: a frozen etcd must run to act on SIGTERM.
    Cont,
    /// SIGTERM: etcd stops cleanly.
    Term,
    /// SIGKILL.
    Kill,
}

/// The system, as the agent needs it without the daemon. A trait so that
/// unit tests can stand in for processes and etcd.
pub trait Node {
    /// Whether `pid` is still the process that started at `start_ticks`
    /// and alive.
    fn is_running(&self, pid: u32, start_ticks: u64) -> bool;
    /// Sends `sig` to the recorded etcd (its process group when it leads
    /// one).
    fn signal(&self, etcd: &EtcdRecord, sig: Sig) -> Result<(), String>;
    /// etcd's health at `client_url` within `timeout`; `Ok` says what was
    /// checked.
    fn health(&self, client_url: &str, timeout: Duration) -> Result<String, String>;
    /// Asks systemd to stop `unit` (without waiting for the stop).
    fn stop_unit(&self, unit: &str, timeout: Duration) -> Result<(), String>;
    /// Time since boot (suspend included), comparable across processes.
    fn boot_clock(&self) -> Duration;
    /// The processes named `etcd` in this node's network namespace (the
    /// one etcd's URLs are served in).
    fn etcd_processes(&self) -> Vec<u32>;
}

/// Whether `e` means that no daemon is there to answer: nothing listens, or
/// the connection broke without an answer. A daemon that is there but slow
/// or refusing is not down.
pub fn daemon_is_down(e: &ClientError) -> bool {
    matches!(e, ClientError::Connect { .. } | ClientError::Io(_))
}

/// The daemon answered: it is not down (any more).
pub fn daemon_answered(socket: &Path) {
    let _ = std::fs::remove_file(marker_path(socket));
}

/// Whether the agent already found the daemon down (a previous action).
pub fn daemon_known_down(socket: &Path) -> bool {
    marker_path(socket).exists()
}

fn marker_path(socket: &Path) -> PathBuf {
    socket.with_file_name(DOWN_MARKER)
}

/// The record beside `socket`: `None` when there is none (the daemon saw
/// etcd stopped, or never ran).
fn read_record(socket: &Path) -> Result<Option<EtcdRecord>, String> {
    let path = warden_api::etcd_record_path(socket);
    match std::fs::read(&path) {
        Ok(text) => serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| format!("the record of etcd {} does not parse: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Since when (boot clock) the daemon is known down: from the marker, or
/// now, which is then recorded.
fn down_since(socket: &Path, now: Duration) -> Result<Duration, String> {
    let path = marker_path(socket);
    let recorded = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        // A time after now was written in another boot.
        .filter(|t| *t <= now);
    if let Some(t) = recorded {
        return Ok(t);
    }
    std::fs::write(&path, format!("{}\n", now.as_millis())).map_err(|e| {
        format!(
            "cannot record since when the daemon is down in {}: {e}",
            path.display()
        )
    })?;
    Ok(now)
}

/// Monitor without the daemon. `down` says how the daemon failed; every
/// reason starts with it.
pub fn monitor(
    node: &dyn Node,
    socket: &Path,
    grace: Duration,
    budget: &Budget,
    down: &str,
) -> (Outcome, String) {
    let fail = |why: String| (Outcome::Failed, format!("{down}; daemon down: {why}"));
    let etcd = match read_record(socket) {
        Ok(Some(r)) => r,
        // A boot whose daemon has not come up: with no etcd process at
        // all, etcd is not running (a probe's answer, not a failure).
        Ok(None) if node.etcd_processes().is_empty() => {
            return (
                Outcome::NotRunning,
                format!(
                    "{down}; daemon down: no record of etcd's process at {} and no etcd process runs on this node",
                    warden_api::etcd_record_path(socket).display()
                ),
            );
        }
        Ok(None) => {
            return fail(format!(
                "no record of etcd's process at {}, so the agent cannot judge etcd",
                warden_api::etcd_record_path(socket).display()
            ));
        }
        Err(e) => return fail(e),
    };
    let now = node.boot_clock();
    let since = match down_since(socket, now) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    if !node.is_running(etcd.pid, etcd.start_ticks) {
        return fail(format!("etcd (pid {}) is not running either", etcd.pid));
    }
    let deadline = HEALTH_DEADLINE.min(budget.client_left() / 2);
    let checked = match node.health(&etcd.client_url, deadline) {
        Ok(c) => c,
        Err(e) => {
            return fail(format!(
                "etcd (pid {}) runs but is not healthy: {e}",
                etcd.pid
            ));
        }
    };
    let down_for = now.saturating_sub(since).as_secs();
    if now.saturating_sub(since) >= grace {
        return fail(format!(
            "for {down_for} s, beyond daemon_down_grace ({} s); etcd (pid {}) is healthy \
             ({checked}) but unsupervised",
            grace.as_secs(),
            etcd.pid
        ));
    }
    (
        Outcome::Success,
        format!(
            "{down}; daemon down for {down_for} s (daemon_down_grace {} s): etcd (pid {}) is \
             healthy, judged by the agent ({checked})",
            grace.as_secs(),
            etcd.pid
        ),
    )
}

/// Stop without the daemon: the recorded etcd is stopped within the
/// budget. `down` says how the daemon failed; every reason starts with it.
pub fn stop(node: &dyn Node, socket: &Path, budget: &Budget, down: &str) -> (Outcome, String) {
    let fail = |why: String| (Outcome::Failed, format!("{down}; daemon down: {why}"));
    let etcd = match read_record(socket) {
        Ok(Some(r)) => r,
        // The daemon removes the record when it sees etcd gone, and a boot
        // starts without one: no etcd process at all on this node is then
        // the proof that etcd is stopped (a start that failed before its
        // daemon came up is stopped so, never by a fence). With any etcd
        // process, nobody can say whether it is this resource's.
        Ok(None) => {
            let running = node.etcd_processes();
            if running.is_empty() {
                return (
                    Outcome::Success,
                    format!(
                        "{down}; daemon down: no record of etcd's process at {} and no etcd process runs on this node",
                        warden_api::etcd_record_path(socket).display()
                    ),
                );
            }
            return fail(format!(
                "no record of etcd's process at {}, and etcd processes {running:?} run on this node, so the agent cannot confirm that this resource's etcd is stopped",
                warden_api::etcd_record_path(socket).display()
            ));
        }
        Err(e) => return fail(e),
    };
    let gone = |how: &str| {
        (
            Outcome::Success,
            format!("{down}; daemon down: etcd (pid {}) {how}", etcd.pid),
        )
    };
    if !node.is_running(etcd.pid, etcd.start_ticks) {
        return gone("was not running");
    }
    let left = budget.client_left();
    let grace = Duration::from_millis(etcd.stop_grace_ms).min(left * 6 / 10);
    let mut notes = Vec::new();
    let asked_systemd = match &etcd.unit {
        Some(unit) => match node.stop_unit(unit, (left / 4).min(Duration::from_secs(5))) {
            Ok(()) => true,
            Err(e) => {
                notes.push(format!("systemd did not take the stop of {unit}: {e}"));
                false
            }
        },
        None => false,
    };
    if !asked_systemd {
        for sig in [Sig::Cont, Sig::Term] {
            if let Err(e) = signal_checked(node, &etcd, sig) {
                notes.push(e);
            }
        }
    }
    let term_until = Instant::now() + grace;
    if wait_gone(node, &etcd, || Instant::now() < term_until) {
        let how = if asked_systemd {
            "was stopped through systemd"
        } else {
            "was stopped with SIGTERM by the agent"
        };
        return gone(how);
    }
    if let Err(e) = signal_checked(node, &etcd, Sig::Kill) {
        notes.push(e);
    }
    if wait_gone(node, &etcd, || budget.client_left() > POLL) {
        return gone(&format!(
            "did not stop within {} ms of SIGTERM and was killed with SIGKILL by the agent",
            grace.as_millis()
        ));
    }
    notes.insert(
        0,
        format!("etcd (pid {}) is still running after SIGKILL", etcd.pid),
    );
    fail(notes.join("; "))
}

/// Sends `sig` only while the PID is still etcd's (start time checked
/// right before).
fn signal_checked(node: &dyn Node, etcd: &EtcdRecord, sig: Sig) -> Result<(), String> {
    if !node.is_running(etcd.pid, etcd.start_ticks) {
        return Ok(());
    }
    node.signal(etcd, sig)
        .map_err(|e| format!("cannot send {sig:?} to etcd (pid {}): {e}", etcd.pid))
}

/// Polls until etcd is gone (`true`) or `more` says to stop waiting.
fn wait_gone(node: &dyn Node, etcd: &EtcdRecord, more: impl Fn() -> bool) -> bool {
    loop {
        if !node.is_running(etcd.pid, etcd.start_ticks) {
            return true;
        }
        if !more() {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

/// This host: /proc, signals, etcd over HTTP, `systemctl`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostNode;

impl Node for HostNode {
    fn is_running(&self, pid: u32, start_ticks: u64) -> bool {
        warden_api::procfs::same_process(pid, start_ticks)
    }

    fn signal(&self, etcd: &EtcdRecord, sig: Sig) -> Result<(), String> {
        use nix::errno::Errno;
        use nix::sys::signal::{Signal, kill, killpg};
        use nix::unistd::Pid;
        let signal = match sig {
            Sig::Cont => Signal::SIGCONT,
            Sig::Term => Signal::SIGTERM,
            Sig::Kill => Signal::SIGKILL,
        };
        let pid = i32::try_from(etcd.pid)
            .map(Pid::from_raw)
            .map_err(|_| format!("pid {} is out of range", etcd.pid))?;
        let leads_group = etcd.own_group
            && warden_api::procfs::stat(etcd.pid).is_some_and(|s| s.pgrp == etcd.pid);
        let sent = if leads_group {
            killpg(pid, signal)
        } else {
            kill(pid, signal)
        };
        match sent {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    fn health(&self, client_url: &str, timeout: Duration) -> Result<String, String> {
        health(client_url, timeout)
    }

    fn stop_unit(&self, unit: &str, timeout: Duration) -> Result<(), String> {
        run_bounded(
            std::process::Command::new("systemctl").args(["stop", "--no-block", "--", unit]),
            timeout,
        )
    }

    fn boot_clock(&self) -> Duration {
        use nix::time::{ClockId, clock_gettime};
        clock_gettime(ClockId::CLOCK_BOOTTIME)
            .map(Duration::from)
            .unwrap_or_default()
    }

    fn etcd_processes(&self) -> Vec<u32> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let netns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        let ours = netns("self");
        // The agent's own file is named `etcd` too (ocf:etcd-warden:etcd):
        // this and every other run of it are not etcd.
        let me = std::env::current_exe().ok();
        let exe = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| me.is_none() || exe(*pid) != me)
            // An etcd in another network namespace serves other addresses
            // (another node of a test harness, a container).
            .filter(|pid| ours.is_none() || netns(&pid.to_string()) == ours)
            .filter(|pid| {
                // The executable's name, else (a kernel thread, a process
                // gone meanwhile) the command name.
                exe(*pid)
                    .and_then(|p| p.file_name().map(|n| n == "etcd"))
                    .unwrap_or_else(|| {
                        std::fs::read_to_string(format!("/proc/{pid}/comm"))
                            .is_ok_and(|c| c.trim() == "etcd")
                    })
            })
            .collect()
    }
}

/// etcd's `/health` at `client_url` (plain HTTP); for an `https://` URL,
/// whether its client port accepts connections (the agent carries no TLS
/// client).
pub fn health(client_url: &str, timeout: Duration) -> Result<String, String> {
    let authority = |rest: &str| rest.split('/').next().unwrap_or_default().to_string();
    if let Some(rest) = client_url.strip_prefix("http://") {
        let body = warden_api::client::get_tcp(&authority(rest), "/health", timeout)
            .map_err(|e| format!("{client_url}/health: {}", describe(&e)))?;
        let answer: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| format!("{client_url}/health answered no JSON: {e}"))?;
        return match answer.get("health").and_then(serde_json::Value::as_str) {
            Some("true") => Ok("GET /health answered healthy".into()),
            _ => Err(format!("{client_url}/health answered {answer}")),
        };
    }
    if let Some(rest) = client_url.strip_prefix("https://") {
        use std::net::ToSocketAddrs;
        let addr = authority(rest);
        let target = addr
            .to_socket_addrs()
            .map_err(|e| format!("{addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr} resolves to no address"))?;
        std::net::TcpStream::connect_timeout(&target, timeout)
            .map_err(|e| format!("{addr}: {e}"))?;
        return Ok(
            "its https client port accepts connections; /health is not read without \
                   etcd's TLS client files"
                .into(),
        );
    }
    Err(format!(
        "{client_url} is neither an http:// nor an https:// URL"
    ))
}

/// A client error in words about etcd (the client's own messages speak of
/// the daemon).
fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Connect { error, .. } => format!("cannot connect: {error}"),
        ClientError::Timeout(t) => format!("no answer within {} ms", t.as_millis()),
        ClientError::Io(e) => format!("I/O error: {e}"),
        ClientError::Protocol(m) => format!("malformed answer: {m}"),
        ClientError::Status { status, message } => format!("HTTP {status}: {message}"),
    }
}

/// Runs `cmd` (no input, output discarded) for at most `timeout`; killed
/// after that.
fn run_bounded(cmd: &mut std::process::Command, timeout: Duration) -> Result<(), String> {
    use std::process::Stdio;
    let name = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{name} did not run: {e}"))?;
    let until = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(()),
            Ok(Some(st)) => return Err(format!("{name} failed ({st})")),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{name} did not finish within {} ms",
                    timeout.as_millis()
                ));
            }
            Err(e) => return Err(format!("{name}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests_support {
    use std::cell::{Cell, RefCell};

    use super::*;

    /// An etcd process and its `/health`, scripted.
    pub(super) struct Fake {
        pub(super) alive: Cell<bool>,
        /// The signal that ends it (`None`: none does).
        pub(super) dies_on: Option<Sig>,
        pub(super) healthy: Result<String, String>,
        pub(super) unit: Result<(), String>,
        pub(super) now: Duration,
        pub(super) signals: RefCell<Vec<Sig>>,
        pub(super) units: RefCell<Vec<String>>,
    }

    impl Fake {
        pub(super) fn running() -> Self {
            Fake {
                alive: Cell::new(true),
                dies_on: Some(Sig::Term),
                healthy: Ok("GET /health answered healthy".into()),
                unit: Err("systemctl did not run".into()),
                now: Duration::from_secs(1000),
                signals: RefCell::new(Vec::new()),
                units: RefCell::new(Vec::new()),
            }
        }
    }

    impl Node for Fake {
        fn is_running(&self, pid: u32, start_ticks: u64) -> bool {
            self.alive.get() && pid == 4242 && start_ticks == 77
        }
        fn signal(&self, _etcd: &EtcdRecord, sig: Sig) -> Result<(), String> {
            self.signals.borrow_mut().push(sig);
            if self.dies_on == Some(sig) || sig == Sig::Kill && self.dies_on.is_some() {
                self.alive.set(false);
            }
            Ok(())
        }
        fn health(&self, _url: &str, timeout: Duration) -> Result<String, String> {
            assert!(timeout <= HEALTH_DEADLINE);
            self.healthy.clone()
        }
        fn stop_unit(&self, unit: &str, _timeout: Duration) -> Result<(), String> {
            self.units.borrow_mut().push(unit.to_string());
            if self.unit.is_ok() {
                self.alive.set(false);
            }
            self.unit.clone()
        }
        fn boot_clock(&self) -> Duration {
            self.now
        }
        fn etcd_processes(&self) -> Vec<u32> {
            if self.alive.get() {
                vec![4242]
            } else {
                Vec::new()
            }
        }
    }

    /// A run dir with the daemon's record of etcd (pid 4242, start 77).
    pub(super) fn run_dir(unit: Option<&str>) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let socket = d.path().join("api.sock");
        let record = EtcdRecord {
            backend: if unit.is_some() { "systemd" } else { "process" }.into(),
            pid: 4242,
            start_ticks: 77,
            own_group: true,
            unit: unit.map(str::to_string),
            client_url: "http://127.0.0.1:2379".into(),
            stop_grace_ms: 300,
        };
        std::fs::write(
            warden_api::etcd_record_path(&socket),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        (d, socket)
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;

    fn budget(ms: u64) -> Budget {
        Budget::new(Instant::now(), Duration::from_millis(ms))
    }

    const GRACE: Duration = Duration::from_secs(300);

    #[test]
    fn a_healthy_etcd_passes_monitor_within_the_grace_then_fails() {
        let (_d, socket) = run_dir(None);
        let mut node = Fake::running();
        let (o, why) = monitor(
            &node,
            &socket,
            GRACE,
            &budget(30_000),
            "monitor: unreachable",
        );
        assert_eq!(o, Outcome::Success, "{why}");
        assert!(
            why.starts_with("monitor: unreachable; daemon down for 0 s"),
            "{why}"
        );
        assert!(why.contains("pid 4242"), "{why}");
        assert!(daemon_known_down(&socket));

        // The grace counts from the first monitor that found the daemon
        // down, not from each one.
        node.now += Duration::from_secs(299);
        let (o, why) = monitor(&node, &socket, GRACE, &budget(30_000), "x");
        assert_eq!(o, Outcome::Success, "{why}");
        assert!(why.contains("daemon down for 299 s"), "{why}");
        node.now += Duration::from_secs(1);
        let (o, why) = monitor(&node, &socket, GRACE, &budget(30_000), "x");
        assert_eq!(o, Outcome::Failed);
        assert!(why.contains("beyond daemon_down_grace (300 s)"), "{why}");

        // The daemon answers again: the next outage has its own grace.
        daemon_answered(&socket);
        assert!(!daemon_known_down(&socket));
        let (o, _) = monitor(&node, &socket, GRACE, &budget(30_000), "x");
        assert_eq!(o, Outcome::Success);
    }

    #[test]
    fn monitor_fails_without_a_record_a_process_or_health_or_with_no_grace() {
        let d = tempfile::tempdir().unwrap();
        let node = Fake::running();
        let (o, why) = monitor(
            &node,
            &d.path().join("api.sock"),
            GRACE,
            &budget(30_000),
            "x",
        );
        assert_eq!(o, Outcome::Failed);
        assert!(why.contains("no record of etcd's process"), "{why}");
        // No record and no etcd process at all: not running.
        let none = Fake {
            alive: std::cell::Cell::new(false),
            ..Fake::running()
        };
        let (o, why) = monitor(
            &none,
            &d.path().join("api.sock"),
            GRACE,
            &budget(30_000),
            "x",
        );
        assert_eq!(o, Outcome::NotRunning, "{why}");

        let (_d, socket) = run_dir(None);
        let (o, why) = monitor(&node, &socket, Duration::ZERO, &budget(30_000), "x");
        assert_eq!(o, Outcome::Failed);
        assert!(why.contains("beyond daemon_down_grace (0 s)"), "{why}");

        let sick = Fake {
            healthy: Err("http://127.0.0.1:2379/health: HTTP 503".into()),
            ..Fake::running()
        };
        let (o, why) = monitor(&sick, &socket, GRACE, &budget(30_000), "x");
        assert_eq!(o, Outcome::Failed);
        assert!(why.contains("runs but is not healthy: http"), "{why}");

        let dead = Fake::running();
        dead.alive.set(false);
        let (o, why) = monitor(&dead, &socket, GRACE, &budget(30_000), "x");
        assert_eq!(o, Outcome::Failed);
        assert!(why.contains("(pid 4242) is not running either"), "{why}");
    }

    #[test]
    fn stop_terms_then_kills_the_recorded_etcd_and_succeeds_once_it_is_gone() {
        let (_d, socket) = run_dir(None);
        let node = Fake::running();
        let (o, why) = stop(&node, &socket, &budget(10_000), "stop: unreachable");
        assert_eq!(o, Outcome::Success, "{why}");
        assert!(why.contains("stopped with SIGTERM"), "{why}");
        assert_eq!(*node.signals.borrow(), [Sig::Cont, Sig::Term]);

        // Deaf to SIGTERM: SIGKILL after the recorded grace (300 ms).
        let deaf = Fake {
            dies_on: Some(Sig::Kill),
            ..Fake::running()
        };
        let t0 = Instant::now();
        let (o, why) = stop(&deaf, &socket, &budget(10_000), "x");
        assert_eq!(o, Outcome::Success, "{why}");
        assert!(t0.elapsed() >= Duration::from_millis(300));
        assert!(why.contains("SIGKILL"), "{why}");
        assert_eq!(*deaf.signals.borrow(), [Sig::Cont, Sig::Term, Sig::Kill]);

        // Already gone, or its PID reused by another process: success, and
        // no signal at all.
        let gone = Fake::running();
        gone.alive.set(false);
        let (o, why) = stop(&gone, &socket, &budget(10_000), "x");
        assert_eq!(o, Outcome::Success);
        assert!(why.contains("was not running"), "{why}");
        assert!(gone.signals.borrow().is_empty());
    }

    #[test]
    fn stop_fails_in_time_when_etcd_survives_or_nothing_is_recorded() {
        let (_d, socket) = run_dir(None);
        let immortal = Fake {
            dies_on: None,
            ..Fake::running()
        };
        let t0 = Instant::now();
        let b = budget(1500);
        let (o, why) = stop(&immortal, &socket, &b, "x");
        assert!(
            t0.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(o, Outcome::Failed);
        assert!(why.contains("still running after SIGKILL"), "{why}");

        let d = tempfile::tempdir().unwrap();
        let (o, why) = stop(&Fake::running(), &d.path().join("api.sock"), &b, "x");
        assert_eq!(o, Outcome::Failed);
        assert!(
            why.contains("cannot confirm that this resource's etcd is stopped"),
            "{why}"
        );
        // No record and no etcd process at all (a boot whose daemon never
        // came up): stopped.
        let none = Fake {
            alive: std::cell::Cell::new(false),
            ..Fake::running()
        };
        let (o, why) = stop(&none, &d.path().join("api.sock"), &b, "x");
        assert_eq!(o, Outcome::Success, "{why}");
        assert!(why.contains("no etcd process runs on this node"), "{why}");
    }

    #[test]
    fn stop_with_the_systemd_backend_stops_the_unit_else_signals() {
        let (_d, socket) = run_dir(Some("etcd-warden-etcd.service"));
        let node = Fake {
            unit: Ok(()),
            ..Fake::running()
        };
        let (o, why) = stop(&node, &socket, &budget(10_000), "x");
        assert_eq!(o, Outcome::Success, "{why}");
        assert!(why.contains("through systemd"), "{why}");
        assert_eq!(*node.units.borrow(), ["etcd-warden-etcd.service"]);
        assert!(node.signals.borrow().is_empty());

        // systemctl missing or refusing: the process is signalled.
        let node = Fake::running();
        let (o, why) = stop(&node, &socket, &budget(10_000), "x");
        assert_eq!(o, Outcome::Success, "{why}");
        assert_eq!(*node.signals.borrow(), [Sig::Cont, Sig::Term]);
    }

    #[test]
    fn health_reads_etcds_answer() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for body in [r#"{"health":"true","reason":""}"#, r#"{"health":"false"}"#] {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).unwrap();
                let status = if body.contains("true") {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                write!(
                    s,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
            }
        });
        let url = format!("http://{addr}");
        assert!(health(&url, Duration::from_secs(2)).is_ok());
        let e = health(&url, Duration::from_secs(2)).unwrap_err();
        assert!(e.contains("HTTP 503"), "{e}");
        server.join().unwrap();
        let e = health("unix:///x", Duration::from_secs(1)).unwrap_err();
        assert!(e.contains("neither"), "{e}");
    }
}

#[cfg(test)]
mod run_tests {
    use std::collections::BTreeMap;

    use warden_api::{ActionReply, ActionRequest};

    use super::tests_support::*;
    use super::*;
    use crate::run::{Daemon, run_on};

    /// A daemon that is not there.
    struct Absent;

    impl Daemon for Absent {
        fn action(
            &self,
            socket: &Path,
            _req: &ActionRequest,
            _timeout: Duration,
        ) -> Result<ActionReply, ClientError> {
            Err(ClientError::Connect {
                path: socket.to_path_buf(),
                error: std::io::ErrorKind::ConnectionRefused.into(),
            })
        }
    }

    fn act(action: &str, socket: &Path, node: &dyn Node) -> (u8, String, Duration) {
        let env: BTreeMap<String, String> = [
            ("OCF_RESKEY_socket", socket.to_str().unwrap()),
            ("OCF_RESKEY_daemon_wait", "1"),
            ("OCF_RESKEY_CRM_meta_timeout", "5000"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let t0 = Instant::now();
        let e = run_on(&[action.to_string()], &env, &Absent, node, t0);
        (e.code(), e.reason.unwrap_or_default(), t0.elapsed())
    }

    #[test]
    fn without_the_daemon_monitor_passes_stop_stops_start_fails_notify_passes() {
        let (_d, socket) = run_dir(None);
        let node = Fake::running();
        let (code, why, _) = act("monitor", &socket, &node);
        assert_eq!(code, 0, "{why}");
        assert!(why.contains("daemon down for 0 s"), "{why}");
        let (code, why, took) = act("start", &socket, &node);
        assert_eq!(code, 1, "{why}");
        assert!(
            why.starts_with("start: the etcd-warden daemon is not reachable"),
            "{why}"
        );
        assert!(took < Duration::from_secs(5), "{took:?}");
        let (code, why, _) = act("notify", &socket, &node);
        assert_eq!(code, 0, "{why}");
        // Stop waits daemon_wait (1 s) for a daemon being restarted, then
        // stops etcd itself.
        let (code, why, took) = act("stop", &socket, &node);
        assert_eq!(code, 0, "{why}");
        assert!(took >= Duration::from_secs(1), "{took:?}");
        assert_eq!(*node.signals.borrow(), [Sig::Cont, Sig::Term]);
    }
}
