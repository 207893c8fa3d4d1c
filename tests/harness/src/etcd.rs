//! Real etcd members on 127.0.0.1: one, or an N-member cluster.
//!
//! Binaries: `WARDEN_ETCD_BIN` / `WARDEN_ETCDCTL_BIN`, default `etcd` /
//! `etcdctl` on PATH (so a test matrix can run another etcd version).
//! Ports are leased (see [`crate::ports`]) for the cluster's whole life, so a
//! member restarts on the same URLs. Data lives in a temp dir removed on drop.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use nix::sys::signal::Signal;

use crate::ports::{self, PortLease};
use crate::process::{self, CmdOutput};
use crate::teardown::{self, Teardown};

/// Env var naming the etcd binary.
pub const ETCD_BIN_ENV: &str = "WARDEN_ETCD_BIN";
/// Env var naming the etcdctl binary.
pub const ETCDCTL_BIN_ENV: &str = "WARDEN_ETCDCTL_BIN";

/// The etcd binary to run.
pub fn etcd_bin() -> PathBuf {
    std::env::var_os(ETCD_BIN_ENV).map_or_else(|| "etcd".into(), PathBuf::from)
}

/// The etcdctl binary to run.
pub fn etcdctl_bin() -> PathBuf {
    std::env::var_os(ETCDCTL_BIN_ENV).map_or_else(|| "etcdctl".into(), PathBuf::from)
}

/// How long [`EtcdCluster::start`] waits for every member to be healthy.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
const CTL_TIMEOUT: Duration = Duration::from_secs(15);

/// How to start an etcd cluster.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// Number of members.
    pub members: usize,
    /// etcd binary (default: [`etcd_bin`]).
    pub etcd_bin: PathBuf,
    /// etcdctl binary (default: [`etcdctl_bin`]).
    pub etcdctl_bin: PathBuf,
}

impl EtcdOptions {
    /// `members` members, binaries from the environment or PATH.
    pub fn new(members: usize) -> Self {
        Self {
            members,
            etcd_bin: etcd_bin(),
            etcdctl_bin: etcdctl_bin(),
        }
    }
}

#[derive(Debug)]
struct Member {
    name: String,
    client: PortLease,
    peer: PortLease,
    data_dir: PathBuf,
    log: PathBuf,
}

/// An etcd cluster of N members on 127.0.0.1, stopped and deleted on drop.
#[derive(Debug)]
pub struct EtcdCluster {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    // Option so teardown (possibly from the signal thread) can remove it.
    dir: Mutex<Option<tempfile::TempDir>>,
    path: PathBuf,
    token: String,
    opts: EtcdOptions,
    members: Vec<Member>,
    // PID of each member's etcd while the harness believes it runs; `None`
    // once killed or stopped. The lock also orders spawns against teardown.
    pids: Mutex<Vec<Option<i32>>>,
}

impl EtcdCluster {
    /// Starts an `n`-member cluster and waits until every member is healthy.
    pub fn start(n: usize) -> Result<Self> {
        Self::start_with(EtcdOptions::new(n))
    }

    /// Starts a cluster as `opts` says and waits until every member is healthy.
    pub fn start_with(opts: EtcdOptions) -> Result<Self> {
        let c = Self::start_no_wait(opts)?;
        c.wait_healthy(START_TIMEOUT)?;
        Ok(c)
    }

    /// Starts a cluster without waiting for it to become healthy.
    pub fn start_no_wait(opts: EtcdOptions) -> Result<Self> {
        let n = opts.members;
        if n == 0 {
            bail!("an etcd cluster needs at least one member");
        }
        let dir = tempfile::Builder::new()
            .prefix("warden-etcd-")
            .tempdir()
            .context("creating the etcd temp dir")?;
        let path = dir.path().to_path_buf();
        let mut members = Vec::with_capacity(n);
        for i in 0..n {
            let name = format!("m{i}");
            members.push(Member {
                data_dir: path.join(format!("{name}.etcd")),
                log: path.join(format!("{name}.log")),
                name,
                client: ports::lease()?,
                peer: ports::lease()?,
            });
        }
        let token = format!(
            "warden-{}-{}",
            std::process::id(),
            path.file_name()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
        );
        let inner = Arc::new(Inner {
            dir: Mutex::new(Some(dir)),
            path,
            token,
            opts,
            members,
            pids: Mutex::new(vec![None; n]),
        });
        let weak: std::sync::Weak<dyn Teardown> =
            Arc::downgrade(&(inner.clone() as Arc<dyn Teardown>));
        teardown::register(weak);
        let c = Self { inner };
        for i in 0..n {
            c.spawn_member(i, &[])?;
        }
        Ok(c)
    }

    fn pids(&self) -> MutexGuard<'_, Vec<Option<i32>>> {
        self.inner.pids.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn member(&self, i: usize) -> Result<&Member> {
        self.inner
            .members
            .get(i)
            .with_context(|| format!("no etcd member {i} (cluster has {})", self.len()))
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.inner.members.len()
    }

    /// Whether the cluster has no members (never true for a started cluster).
    pub fn is_empty(&self) -> bool {
        self.inner.members.is_empty()
    }

    /// The temp dir holding data dirs and logs.
    pub fn dir(&self) -> &Path {
        &self.inner.path
    }

    /// `--initial-cluster` value for all members.
    pub fn initial_cluster(&self) -> String {
        self.inner
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer.port()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Client URL of member `i` (`http://127.0.0.1:PORT`).
    pub fn client_url(&self, i: usize) -> String {
        self.inner.members.get(i).map_or_else(String::new, |m| {
            format!("http://127.0.0.1:{}", m.client.port())
        })
    }

    /// Peer URL of member `i`.
    pub fn peer_url(&self, i: usize) -> String {
        self.inner.members.get(i).map_or_else(String::new, |m| {
            format!("http://127.0.0.1:{}", m.peer.port())
        })
    }

    /// Client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.client_url(i)).collect()
    }

    /// Client URLs joined with commas, as `etcdctl --endpoints` takes them.
    pub fn endpoints_arg(&self) -> String {
        self.endpoints().join(",")
    }

    /// Member name (`m0`, `m1`, …).
    pub fn name(&self, i: usize) -> &str {
        self.inner.members.get(i).map_or("", |m| m.name.as_str())
    }

    /// Data dir of member `i`.
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.inner
            .members
            .get(i)
            .map_or_else(PathBuf::new, |m| m.data_dir.clone())
    }

    /// Log file of member `i` (etcd's own log output).
    pub fn log_file(&self, i: usize) -> PathBuf {
        self.inner
            .members
            .get(i)
            .map_or_else(PathBuf::new, |m| m.log.clone())
    }

    /// PID of member `i`'s etcd, if the harness started it and has not stopped it.
    pub fn pid(&self, i: usize) -> Option<i32> {
        self.pids().get(i).copied().flatten()
    }

    fn spawn_member(&self, i: usize, extra: &[&str]) -> Result<i32> {
        let m = self.member(i)?;
        let mut pids = self.pids();
        if self
            .inner
            .dir
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
        {
            bail!("etcd cluster already torn down");
        }
        if let Some(pid) = pids[i].filter(|&p| process::alive(p)) {
            bail!("etcd member {} is still running (PID {pid})", m.name);
        }
        let client = format!("http://127.0.0.1:{}", m.client.port());
        let peer = format!("http://127.0.0.1:{}", m.peer.port());
        let stdout = File::options()
            .create(true)
            .append(true)
            .open(self.inner.path.join(format!("{}.stdout", m.name)))?;
        let mut cmd = Command::new(&self.inner.opts.etcd_bin);
        cmd.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &self.initial_cluster()])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &self.inner.token])
            // Fast elections keep tests short; loopback latency is tiny.
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            .args(["--logger", "zap", "--log-outputs"])
            .arg(&m.log)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(stdout.try_clone()?)
            .stderr(stdout)
            // Own process group: a Ctrl-C in the terminal reaches the harness,
            // which tears down in order, not etcd directly.
            .process_group(0);
        let child = cmd.spawn().with_context(|| {
            format!(
                "starting {} for member {}",
                self.inner.opts.etcd_bin.display(),
                m.name
            )
        })?;
        let pid = i32::try_from(child.id()).context("PID out of range")?;
        // The Child handle is dropped on purpose: the PID is ours until we
        // reap it with waitpid (process::wait_gone), so it cannot be reused.
        drop(child);
        pids[i] = Some(pid);
        Ok(pid)
    }

    /// SIGKILLs member `i` and waits until it is gone (zombies count as gone).
    pub fn kill(&self, i: usize) -> Result<()> {
        self.stop_with(i, None)
    }

    /// SIGTERMs member `i`, waits up to `grace`, then SIGKILLs.
    pub fn stop(&self, i: usize, grace: Duration) -> Result<()> {
        self.stop_with(i, Some(grace))
    }

    fn stop_with(&self, i: usize, grace: Option<Duration>) -> Result<()> {
        let name = self.member(i)?.name.clone();
        let pid = self.pids()[i].take();
        let Some(pid) = pid else {
            bail!("etcd member {name} is not running under the harness");
        };
        let left = match grace {
            Some(g) => process::terminate(&[pid], g),
            None => process::kill_all(&[pid]),
        };
        if !left.is_empty() {
            bail!("etcd member {name} (PID {pid}) did not die");
        }
        Ok(())
    }

    /// SIGSTOPs member `i` (it keeps its sockets but stops answering).
    pub fn pause(&self, i: usize) -> Result<()> {
        self.send(i, Signal::SIGSTOP)
    }

    /// SIGCONTs a paused member.
    pub fn resume(&self, i: usize) -> Result<()> {
        self.send(i, Signal::SIGCONT)
    }

    fn send(&self, i: usize, sig: Signal) -> Result<()> {
        let name = &self.member(i)?.name;
        let pid = self
            .pid(i)
            .with_context(|| format!("etcd member {name} is not running"))?;
        process::signal(pid, sig)
    }

    /// Starts member `i` again on the same data dir and ports (after kill/stop).
    pub fn restart(&self, i: usize) -> Result<i32> {
        self.spawn_member(i, &[])
    }

    /// Like [`restart`](Self::restart) with extra etcd flags, e.g.
    /// `--force-new-cluster`.
    pub fn restart_with(&self, i: usize, extra: &[&str]) -> Result<i32> {
        self.spawn_member(i, extra)
    }

    /// Whether member `i` answers `GET /health` with `"health":"true"`.
    pub fn is_healthy(&self, i: usize) -> bool {
        self.health(i).is_ok()
    }

    fn health(&self, i: usize) -> std::result::Result<(), String> {
        let m = self.member(i).map_err(|e| e.to_string())?;
        let body = http_get(m.client.port(), "/health").map_err(|e| format!("{}: {e}", m.name))?;
        if body.contains("\"health\":\"true\"") {
            Ok(())
        } else {
            Err(format!("{}: {}", m.name, body.trim()))
        }
    }

    /// Waits until every member the harness runs answers healthy.
    pub fn wait_healthy(&self, timeout: Duration) -> Result<()> {
        let running: Vec<usize> = (0..self.len()).filter(|&i| self.pid(i).is_some()).collect();
        self.wait_members_healthy(&running, timeout)
    }

    /// Waits until members `which` answer healthy.
    pub fn wait_members_healthy(&self, which: &[usize], timeout: Duration) -> Result<()> {
        process::poll(
            &format!("etcd members {which:?} healthy"),
            timeout,
            Duration::from_millis(100),
            || {
                let bad: Vec<String> = which.iter().filter_map(|&i| self.health(i).err()).collect();
                if bad.is_empty() {
                    Ok(())
                } else {
                    Err(bad.join("; "))
                }
            },
        )
        .with_context(|| format!("etcd logs are in {}", self.dir().display()))
    }

    /// Runs etcdctl against every member's endpoint (bounded).
    pub fn etcdctl(&self, args: &[&str]) -> Result<CmdOutput> {
        let mut cmd = Command::new(&self.inner.opts.etcdctl_bin);
        // etcdctl aborts if ETCDCTL_ENDPOINTS and --endpoints are both set.
        cmd.env_remove("ETCDCTL_ENDPOINTS")
            .env("ETCDCTL_API", "3")
            .args([
                "--endpoints",
                &self.endpoints_arg(),
                "--command-timeout",
                "5s",
            ])
            .args(args);
        process::run(&mut cmd, CTL_TIMEOUT)
    }

    /// `etcdctl put KEY VALUE`.
    pub fn put(&self, key: &str, value: &str) -> Result<()> {
        self.etcdctl(&["put", key, value])?.ok().map(|_| ())
    }

    /// `etcdctl get KEY`: the value, or `None` if the key does not exist.
    pub fn get(&self, key: &str) -> Result<Option<String>> {
        let out = self.etcdctl(&["get", "--print-value-only", key])?.ok()?;
        let v = out.stdout.strip_suffix('\n').unwrap_or(&out.stdout);
        Ok(if out.stdout.is_empty() {
            None
        } else {
            Some(v.to_owned())
        })
    }
}

/// A minimal HTTP/1.0 GET on 127.0.0.1 with short timeouts; returns the body.
pub fn http_get(port: u16, path: &str) -> Result<String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let t = Duration::from_secs(2);
    let mut s = TcpStream::connect_timeout(&addr, t)?;
    s.set_read_timeout(Some(t))?;
    s.set_write_timeout(Some(t))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .with_context(|| format!("malformed HTTP response: {resp:?}"))?;
    if !head.starts_with("HTTP/1.") {
        bail!("not an HTTP response: {head:?}");
    }
    Ok(body.to_owned())
}

impl Teardown for Inner {
    fn teardown(&self) {
        let mut pids = self.pids.lock().unwrap_or_else(|e| e.into_inner());
        let running: Vec<i32> = pids.iter_mut().filter_map(Option::take).collect();
        let left = process::terminate(&running, Duration::from_secs(5));
        if !left.is_empty() {
            tracing::error!("etcd PIDs {left:?} survived SIGKILL");
        }
        let dir = self.dir.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(dir) = dir
            && let Err(e) = fs::remove_dir_all(dir.path())
        {
            tracing::warn!("removing {}: {e}", dir.path().display());
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.inner.teardown();
    }
}
