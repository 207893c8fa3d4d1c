//! Shared helpers of the `agent_*` and `cluster_agent` tests: locating (and
//! building) the project's binaries, running commands with a deadline,
//! installing the agent where Pacemaker and crmsh look for it, and running a
//! standalone daemon that is cleaned up by PID.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

// Not every test file uses both.
#[allow(unused_imports)]
pub use warden_integration::bins::{INSTALLED_AGENT, workspace};

/// The OCF agent binary, freshly built (see `warden_integration::bins`).
pub fn agent() -> PathBuf {
    warden_integration::bins::agent().expect("build etcd-warden-agent")
}

/// The etcd-warden binary, freshly built.
pub fn warden() -> PathBuf {
    warden_integration::bins::warden().expect("build etcd-warden")
}

static INSTALLED: Mutex<bool> = Mutex::new(false);

/// Installs the freshly built agent (and the alert wrapper) where Pacemaker
/// and crmsh look for them, once per test process.
pub fn install_agent() -> PathBuf {
    let mut done = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if !*done {
        warden_integration::bins::install_agent().expect("resource-agent/install.sh");
        *done = true;
    }
    PathBuf::from(INSTALLED_AGENT)
}

/// Runs `cmd` to completion, killing it (by PID) if it overruns `timeout`.
pub fn run(cmd: &mut Command, timeout: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output {
        status,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
    }
}

/// Lossy UTF-8.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The exit code (panics on a signal death: that is never an OCF answer).
pub fn code(o: &Output) -> i32 {
    o.status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {o:?}"))
}

/// An `etcd-warden daemon --standalone DIR` child, stopped by PID on drop
/// together with the etcd it started (its PID is read from /v1/status while
/// it runs, so that an etcd can never outlive the test).
pub struct StandaloneDaemon {
    child: Child,
    dir: tempfile::TempDir,
    etcd_pids: Mutex<Vec<i32>>,
}

impl StandaloneDaemon {
    /// Starts the daemon and waits until its API socket answers.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("warden-agent-")
            .tempdir()
            .expect("tempdir");
        let child = spawn_standalone(dir.path());
        let d = StandaloneDaemon {
            child,
            dir,
            etcd_pids: Mutex::new(Vec::new()),
        };
        d.wait_api(Duration::from_secs(20));
        d
    }

    /// Kills the daemon with SIGKILL (by its PID), as a crash does: etcd
    /// goes on running, the socket file stays.
    pub fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the daemon again on the same directory (after [`Self::crash`]:
    /// it adopts the etcd left running) and waits for its API.
    pub fn restart(&mut self) {
        self.crash();
        self.child = spawn_standalone(self.dir.path());
        self.wait_api(Duration::from_secs(20));
    }

    /// The API socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("api.sock")
    }

    /// The daemon's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    fn wait_api(&self, timeout: Duration) {
        let client = warden_api::client::Client::new(self.socket());
        let deadline = Instant::now() + timeout;
        loop {
            match client
                .get::<warden_api::NodeStatus>(warden_api::paths::STATUS, Duration::from_secs(2))
            {
                Ok(_) => return,
                Err(e) if Instant::now() > deadline => {
                    panic!(
                        "daemon API not answering after {timeout:?}: {e}\n{}",
                        self.log()
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The daemon's status now; remembers etcd's PID for the cleanup.
    pub fn status(&self) -> warden_api::NodeStatus {
        let s: warden_api::NodeStatus = warden_api::client::Client::new(self.socket())
            .get(warden_api::paths::STATUS, Duration::from_secs(5))
            .expect("GET /v1/status");
        if let Some(pid) = s.etcd_pid {
            let mut pids = self.etcd_pids.lock().unwrap_or_else(|e| e.into_inner());
            if let Ok(pid) = i32::try_from(pid)
                && !pids.contains(&pid)
            {
                pids.push(pid);
            }
        }
        s
    }
}

/// `etcd-warden daemon --standalone DIR`, its output appended to
/// DIR/daemon.log.
fn spawn_standalone(dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("daemon.log"))
        .expect("log");
    Command::new(warden())
        .arg("daemon")
        .arg("--standalone")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("spawn etcd-warden daemon")
}

/// Sends `sig` to `pid` (by PID only).
pub fn kill(pid: i32, sig: i32) -> bool {
    let out = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .output();
    out.map(|o| o.status.success()).unwrap_or(false)
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

impl Drop for StandaloneDaemon {
    fn drop(&mut self) {
        // Let the daemon stop etcd itself first (SIGTERM, with a deadline),
        // then make sure by PID.
        let pid = i32::try_from(self.child.id()).unwrap_or(0);
        kill(pid, 15);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let pids = self.etcd_pids.lock().unwrap_or_else(|e| e.into_inner());
        for &p in pids.iter() {
            // The PID was etcd's; make sure it still is before killing it.
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            if alive(p) && comm.trim() == "etcd" {
                kill(p, 9);
            }
        }
    }
}
