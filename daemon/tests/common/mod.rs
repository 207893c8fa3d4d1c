//! Shared helpers for the daemon's integration tests: spawn the real
//! `etcd-warden` binary in standalone mode against the real etcd, wait on
//! observed state with deadlines, and clean up every process by PID (also on
//! panic, through Drop).

#![allow(dead_code)]
// Test helpers, not input paths: a failure here is a test failure.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use warden_api::client::Client;
use warden_api::{Action, ActionReply, ActionRequest, NodeStatus, paths};

pub const BIN: &str = env!("CARGO_BIN_EXE_etcd-warden");

/// How long a started daemon has to report ready: etcd's start on a
/// loaded two-core machine running the whole suite has taken over 10 s.
pub const READY_LIMIT: Duration = Duration::from_secs(60);

/// A free loopback port (bound and released; the daemon binds it next),
/// never one this test process was given before: the kernel may hand the
/// port just released out again at once, and a daemon's HTTP port equal to
/// its etcd's client port fails the start.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Poll `f` until it returns Some, or panic after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Send SIGKILL to `pid` if it still exists.
pub fn kill(pid: u32, sig: i32) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
        Err(_) => false,
    }
}

/// A daemon in standalone mode under a temp dir.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub http: u16,
    pub child: Option<Child>,
    pub etcd_pids: Vec<u32>,
    pub log: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Daemon {
    /// Start a standalone daemon (fresh dir).
    pub fn start(autostart: bool) -> Daemon {
        Self::start_with_env(autostart, &[])
    }

    /// Start a standalone daemon with extra environment variables.
    pub fn start_with_env(autostart: bool, env: &[(&str, &str)]) -> Daemon {
        let mut d = Self::in_dir(tempfile::tempdir().unwrap(), env);
        d.spawn(autostart);
        d
    }

    /// A daemon on `dir` (which may already hold configuration drop-ins),
    /// with extra environment variables; not started yet (`spawn`).
    pub fn in_dir(dir: tempfile::TempDir, env: &[(&str, &str)]) -> Daemon {
        Daemon {
            log: dir.path().join("daemon.log"),
            dir,
            http: free_port(),
            child: None,
            etcd_pids: vec![],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// (Re)spawn the daemon process on the same dir.
    pub fn spawn(&mut self, autostart: bool) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg("daemon")
            .arg("--standalone")
            .arg(self.dir.path())
            .arg("--http-addr")
            .arg(format!("127.0.0.1:{}", self.http))
            .env("RUST_LOG", "info")
            .env_remove("NOTIFY_SOCKET")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(log);
        if autostart {
            cmd.arg("--autostart");
        }
        self.child = Some(cmd.spawn().unwrap());
        let sock = self.socket();
        wait_for("the API socket", Duration::from_secs(10), || {
            Client::new(&sock)
                .get_raw("/healthz", Duration::from_secs(1))
                .ok()
        });
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("api.sock")
    }

    pub fn client(&self) -> Client {
        Client::new(self.socket())
    }

    pub fn status(&mut self) -> NodeStatus {
        let s: NodeStatus = self
            .client()
            .get(paths::STATUS, Duration::from_secs(5))
            .unwrap();
        if let Some(pid) = s.etcd_pid
            && !self.etcd_pids.contains(&pid)
        {
            self.etcd_pids.push(pid);
        }
        s
    }

    pub fn action(&self, action: Action, depth: u32, deadline_ms: u64) -> ActionReply {
        let req = ActionRequest {
            action,
            depth,
            deadline_ms,
            params: Default::default(),
            notify: None,
            instance: Some("etcd".into()),
        };
        self.client()
            .post(
                paths::ACTION,
                &req,
                Duration::from_millis(deadline_ms + 2000),
            )
            .unwrap()
    }

    /// GET over the loopback TCP listener: (status code, body).
    pub fn http_get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.http, path)
    }

    /// Wait until /readyz answers 200, within [`READY_LIMIT`]. A timeout
    /// names the last answer and ends with the daemon's log.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY_LIMIT;
        let mut last = None;
        loop {
            last = self.http_get("/readyz").or(last);
            if matches!(&last, Some((200, _))) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "not ready after {READY_LIMIT:?}; last /readyz answer: {last:?}\ndaemon log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.status();
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL the daemon (etcd is left as it is).
    pub fn kill_daemon(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Record the etcd PID from the PID file too (in case the test never
    /// asked for a status).
    fn record_pid_file(&mut self) {
        let f = self.dir.path().join("state/etcd.pid");
        if let Ok(t) = std::fs::read_to_string(f)
            && let Some(pid) = t.split_whitespace().next().and_then(|p| p.parse().ok())
            && !self.etcd_pids.contains(&pid)
        {
            self.etcd_pids.push(pid);
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.record_pid_file();
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The daemon may have been SIGKILLed: make sure no etcd it started
        // survives the test. PIDs were recorded from /v1/status; continue a
        // stopped one so that it can die.
        for pid in &self.etcd_pids {
            if alive(*pid) {
                kill(*pid, 18);
                kill(*pid, 9);
            }
        }
    }
}

/// Minimal HTTP/1.1 GET over TCP: (status, body).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let code = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|x| x.1.to_string())?;
    Some((code, body))
}

/// Write raw bytes to the Unix socket and read the answer.
pub fn raw_unix(sock: &Path, req: &[u8]) -> String {
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A metric's value from the Prometheus text.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}
