//! The systemd backend against a real `dbus-daemon` with a stand-in for
//! systemd's manager object (this machine has no systemd as PID 1).
//!
//! The stand-in implements the part of org.freedesktop.systemd1 the backend
//! uses (StartTransientUnit, StopUnit, GetUnit, ResetFailedUnit, Subscribe,
//! the JobRemoved signal, Unit.ActiveState and Service.MainPID) and really
//! spawns the unit's ExecStart, so that the etcd it runs outlives a SIGKILLed
//! daemon exactly as a transient unit would, and the adoption is real.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use warden_api::{Action, Outcome};
use zbus::object_server::SignalEmitter;
use zbus::{OwnedObjectPath, OwnedVariant};

#[derive(Debug, Clone)]
struct UnitInfo {
    pid: u32,
    active: String,
}

type Units = Arc<Mutex<HashMap<String, UnitInfo>>>;

#[derive(zbus::DBusError, Debug)]
#[zbus(prefix = "org.freedesktop.systemd1")]
enum SdError {
    #[zbus(error)]
    ZBus(zbus::Error),
    NoSuchUnit(String),
    UnitExists(String),
    InvalidArgs(String),
    AlreadySubscribed(String),
}

fn unit_path(name: &str) -> OwnedObjectPath {
    let escaped: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("_{b:02x}")
            }
        })
        .collect();
    OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/unit/{escaped}")).unwrap()
}

struct Manager {
    units: Units,
    jobs: Arc<Mutex<u32>>,
    children: Arc<Mutex<Vec<u32>>>,
    log: std::path::PathBuf,
    /// Bus names that called Subscribe().
    subscribers: Arc<Mutex<std::collections::HashSet<String>>>,
}

struct UnitObj {
    name: String,
    units: Units,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Unit")]
impl UnitObj {
    #[zbus(property)]
    fn active_state(&self) -> String {
        self.units
            .lock()
            .unwrap()
            .get(&self.name)
            .map(|u| u.active.clone())
            .unwrap_or_else(|| "inactive".into())
    }
}

struct ServiceObj {
    name: String,
    units: Units,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Service")]
impl ServiceObj {
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> u32 {
        self.units
            .lock()
            .unwrap()
            .get(&self.name)
            .map(|u| u.pid)
            .unwrap_or(0)
    }
}

impl Manager {
    fn next_job(&self) -> OwnedObjectPath {
        let mut j = self.jobs.lock().unwrap();
        *j += 1;
        OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{}", *j)).unwrap()
    }
}

fn alive_pid(pid: u32) -> bool {
    alive(pid)
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Manager {
    async fn start_transient_unit(
        &self,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        #[zbus(object_server)] server: &zbus::ObjectServer,
        name: String,
        _mode: String,
        properties: Vec<(String, OwnedVariant)>,
        _aux: Vec<(String, Vec<(String, OwnedVariant)>)>,
    ) -> Result<OwnedObjectPath, SdError> {
        if self.units.lock().unwrap().contains_key(&name) {
            return Err(SdError::UnitExists(format!("Unit {name} already exists.")));
        }
        let exec = properties
            .into_iter()
            .find(|(k, _)| k == "ExecStart")
            .ok_or_else(|| SdError::InvalidArgs("no ExecStart".into()))?
            .1;
        let exec: Vec<(String, Vec<String>, bool)> = exec
            .try_into()
            .map_err(|e| SdError::InvalidArgs(format!("bad ExecStart: {e}")))?;
        let (path, argv, _) = exec
            .into_iter()
            .next()
            .ok_or_else(|| SdError::InvalidArgs("empty ExecStart".into()))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = std::process::Command::new(&path)
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .map_err(|e| SdError::InvalidArgs(format!("{path}: {e}")))?;
        let pid = child.id();
        self.children.lock().unwrap().push(pid);
        self.units.lock().unwrap().insert(
            name.clone(),
            UnitInfo {
                pid,
                active: "active".into(),
            },
        );
        let upath = unit_path(&name);
        server
            .at(
                &upath,
                UnitObj {
                    name: name.clone(),
                    units: self.units.clone(),
                },
            )
            .await?;
        server
            .at(
                &upath,
                ServiceObj {
                    name: name.clone(),
                    units: self.units.clone(),
                },
            )
            .await?;
        // Like systemd: a unit whose main process exits on its own fails.
        let units = self.units.clone();
        let watched = name.clone();
        std::thread::spawn(move || {
            let mut child = child;
            let _ = child.wait();
            let mut u = units.lock().unwrap();
            if let Some(info) = u.get_mut(&watched)
                && info.pid == pid
                && info.active == "active"
            {
                info.active = "failed".into();
                info.pid = 0;
            }
        });
        let job = self.next_job();
        Self::job_removed(&emitter, 1, job.as_ref(), &name, "done").await?;
        Ok(job)
    }

    async fn stop_unit(
        &self,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        name: String,
        _mode: String,
    ) -> Result<OwnedObjectPath, SdError> {
        let pid = {
            let mut u = self.units.lock().unwrap();
            let info = u
                .get_mut(&name)
                .ok_or_else(|| SdError::NoSuchUnit(format!("Unit {name} not loaded.")))?;
            info.active = "deactivating".into();
            info.pid
        };
        let job = self.next_job();
        let units = self.units.clone();
        let job2 = job.clone();
        let emitter = emitter.into_owned();
        tokio::spawn(async move {
            if pid != 0 {
                kill(pid, 15);
                for _ in 0..200 {
                    if !alive_pid(pid) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if alive_pid(pid) {
                    kill(pid, 9);
                }
            }
            // A stopped transient unit is garbage-collected.
            units.lock().unwrap().remove(&name);
            let _ = Manager::job_removed(&emitter, 2, job2.as_ref(), &name, "done").await;
        });
        Ok(job)
    }

    fn get_unit(&self, name: String) -> Result<OwnedObjectPath, SdError> {
        if self.units.lock().unwrap().contains_key(&name) {
            Ok(unit_path(&name))
        } else {
            Err(SdError::NoSuchUnit(format!("Unit {name} not loaded.")))
        }
    }

    fn reset_failed_unit(&self, name: String) -> Result<(), SdError> {
        let mut u = self.units.lock().unwrap();
        if u.get(&name).is_some_and(|i| i.active == "failed") {
            u.remove(&name);
        }
        Ok(())
    }

    /// As systemd: a second Subscribe() from the same connection is an
    /// error.
    fn subscribe(&self, #[zbus(header)] hdr: zbus::message::Header<'_>) -> Result<(), SdError> {
        let sender = hdr.sender().map(|s| s.to_string()).unwrap_or_default();
        if !self.subscribers.lock().unwrap().insert(sender) {
            return Err(SdError::AlreadySubscribed(
                "Client is already subscribed.".into(),
            ));
        }
        Ok(())
    }

    #[zbus(signal)]
    async fn job_removed(
        emitter: &SignalEmitter<'_>,
        id: u32,
        job: zbus::ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

/// A private bus plus the stand-in manager; everything it spawned is killed
/// by PID on drop.
struct FakeSystemd {
    bus: Child,
    address: String,
    children: Arc<Mutex<Vec<u32>>>,
    units: Units,
    _rt: std::thread::JoinHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FakeSystemd {
    fn start(dir: &std::path::Path) -> FakeSystemd {
        // The socket in the test's own directory: the session
        // configuration's `unix:tmpdir=/tmp` leaves a socket file in /tmp
        // behind every bus, which the test ends with a kill.
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--print-address", "--nofork"])
            .arg(format!("--address=unix:dir={}", dir.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon (package dbus) is needed");
        let mut line = String::new();
        BufReader::new(bus.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let address = line.trim().to_string();
        assert!(!address.is_empty(), "dbus-daemon printed no address");
        let children = Arc::new(Mutex::new(Vec::new()));
        let units: Units = Arc::default();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let mgr = Manager {
            units: units.clone(),
            jobs: Arc::default(),
            children: children.clone(),
            log: dir.join("unit.log"),
            subscribers: Arc::default(),
        };
        let addr = address.clone();
        let rt = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let conn = zbus::connection::Builder::address(addr.as_str())
                    .name("org.freedesktop.systemd1")
                    .serve_at("/org/freedesktop/systemd1", mgr)
                    .build()
                    .await
                    .unwrap();
                ready_tx.send(()).unwrap();
                let _ = stop_rx.await;
                drop(conn);
            });
        });
        ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        FakeSystemd {
            bus,
            address,
            children,
            units,
            _rt: rt,
            stop: Some(stop_tx),
        }
    }

    fn main_pid(&self, unit: &str) -> Option<u32> {
        self.units
            .lock()
            .unwrap()
            .get(unit)
            .map(|u| u.pid)
            .filter(|p| *p != 0)
    }
}

impl Drop for FakeSystemd {
    fn drop(&mut self) {
        for pid in self.children.lock().unwrap().iter() {
            if alive(*pid) {
                kill(*pid, 18);
                kill(*pid, 9);
            }
        }
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = self.bus.kill();
        let _ = self.bus.wait();
    }
}

const UNIT: &str = "etcd-warden-test-etcd.service";

fn write_config(dir: &std::path::Path, http: u16) -> std::path::PathBuf {
    let (client, peer) = (free_port(), free_port());
    let etcd = etcd_warden::standalone::find_etcd().display().to_string();
    let text = format!(
        r#"node_name = "n1"
topology = "ha"
autostart = true

[etcd]
backend = "systemd"
# The daemon's own user: the test's directories are root's.
user = "root"
unit_name = "{UNIT}"
binary = "{etcd}"
data_dir = "{d}/etcd"

[api]
socket = "{d}/api.sock"
allowed_users = ["root"]
http_addr = "127.0.0.1:{http}"

[paths]
state_dir = "{d}/state"

[timeouts]
probe_interval_ms = 1000
stop_grace_ms = 10000

[[nodes]]
name = "n1"
peer_urls = ["http://127.0.0.1:{peer}"]
client_urls = ["http://127.0.0.1:{client}"]
"#,
        d = dir.display()
    );
    let p = dir.join("config.toml");
    std::fs::write(&p, text).unwrap();
    p
}

struct Proc(Option<Child>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn_daemon(config: &std::path::Path, bus: &str, log: &std::path::Path) -> Proc {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Proc(Some(
        Command::new(BIN)
            .arg("daemon")
            .arg("--config")
            .arg(config)
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
            .env_remove("NOTIFY_SOCKET")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    ))
}

fn status(sock: &std::path::Path) -> Option<warden_api::NodeStatus> {
    warden_api::client::Client::new(sock)
        .get(warden_api::paths::STATUS, Duration::from_secs(5))
        .ok()
}

fn action(sock: &std::path::Path, a: Action, deadline_ms: u64) -> warden_api::ActionReply {
    warden_api::client::Client::new(sock)
        .post(
            warden_api::paths::ACTION,
            &warden_api::ActionRequest {
                action: a,
                depth: 0,
                deadline_ms,
                params: Default::default(),
                notify: None,
                instance: None,
            },
            Duration::from_millis(deadline_ms + 2000),
        )
        .unwrap()
}

#[test]
fn systemd_backend_starts_a_transient_unit_and_adopts_it_after_a_daemon_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let sd = FakeSystemd::start(dir.path());
    let http = free_port();
    let config = write_config(dir.path(), http);
    let log = dir.path().join("daemon.log");
    let sock = dir.path().join("api.sock");

    let mut daemon = spawn_daemon(&config, &sd.address, &log);
    wait_for("/readyz = 200", Duration::from_secs(20), || {
        http_get(http, "/readyz").filter(|(c, _)| *c == 200)
    });
    let unit_pid = sd.main_pid(UNIT).expect("the unit runs");
    let s = status(&sock).unwrap();
    assert_eq!(s.etcd_pid, Some(unit_pid), "{s:?}");
    assert!(s.quorum);
    let member = s.member_id;

    // SIGKILL the daemon: the unit (and etcd) are systemd's, not its own.
    let mut c = daemon.0.take().unwrap();
    c.kill().unwrap();
    c.wait().unwrap();
    assert!(
        alive(unit_pid),
        "etcd must outlive the daemon under systemd"
    );

    // A new daemon adopts the running etcd: same PID, no restart.
    daemon = spawn_daemon(&config, &sd.address, &log);
    wait_for("/readyz = 200 again", Duration::from_secs(20), || {
        http_get(http, "/readyz").filter(|(c, _)| *c == 200)
    });
    let s = status(&sock).unwrap();
    assert_eq!(s.etcd_pid, Some(unit_pid), "adopted, not restarted: {s:?}");
    assert_eq!(s.member_id, member);
    assert_eq!(sd.main_pid(UNIT), Some(unit_pid));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("adopted a running etcd"), "{text}");

    // Monitor and stop go through systemd.
    assert_eq!(
        action(&sock, Action::Monitor, 2000).outcome,
        Outcome::Success
    );
    assert_eq!(
        action(&sock, Action::Stop, 15_000).outcome,
        Outcome::Success
    );
    assert!(!alive(unit_pid));
    assert_eq!(sd.main_pid(UNIT), None);
    assert_eq!(
        action(&sock, Action::Monitor, 2000).outcome,
        Outcome::NotRunning
    );

    // Start again, then SIGTERM the daemon: the unit keeps running.
    assert_eq!(
        action(&sock, Action::Start, 30_000).outcome,
        Outcome::Success
    );
    let pid2 = sd.main_pid(UNIT).unwrap();
    assert_ne!(pid2, unit_pid);
    let mut c = daemon.0.take().unwrap();
    kill(c.id(), 15);
    let st = wait_for("daemon exit", Duration::from_secs(15), || {
        c.try_wait().unwrap()
    });
    assert!(st.success());
    assert!(alive(pid2), "a SIGTERMed daemon leaves the unit running");
}

#[test]
fn systemd_backend_reports_a_killed_unit_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let sd = FakeSystemd::start(dir.path());
    let http = free_port();
    let config = write_config(dir.path(), http);
    let log = dir.path().join("daemon.log");
    let sock = dir.path().join("api.sock");
    let _daemon = spawn_daemon(&config, &sd.address, &log);
    wait_for("/readyz = 200", Duration::from_secs(20), || {
        http_get(http, "/readyz").filter(|(c, _)| *c == 200)
    });
    let pid = sd.main_pid(UNIT).unwrap();
    kill(pid, 9);
    // The first failed monitor may come from etcd no longer answering,
    // before the manager has marked the unit failed; wait for the unit's own
    // state to show in the reason.
    let r = wait_for(
        "monitor = failed, naming the unit",
        Duration::from_secs(10),
        || {
            let r = action(&sock, Action::Monitor, 2000);
            (r.outcome == Outcome::Failed
                && r.reason.as_deref().is_some_and(|s| s.contains("failed")))
            .then_some(r)
        },
    );
    assert_eq!(r.outcome, Outcome::Failed);
}
