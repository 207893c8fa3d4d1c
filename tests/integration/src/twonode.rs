//! A Pacemaker cluster (two nodes with fencing, or three in HA mode) with an
//! `etcd-warden daemon` in every node, configured as the docs say: a TOML
//! per node listing every node with peer/client URLs on the nodes' namespace
//! addresses, and the CIB from `etcd-warden crm-config --format xml`.
//!
//! Each node's daemon runs inside the node (`Cluster::spawn`), so its socket
//! `/run/etcd-warden/api.sock` lies in the node's private /run, where the
//! agent looks by default. Data and state live in the node's work dir,
//! which survives a crash or fence like a disk does.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use warden_harness::crm::ResourceState;
use warden_harness::{Cluster, ClusterOptions, CrmMon, Expect};

use crate::bins;
use crate::gateway::{self, Kv, Member, NetNs};
use crate::writer::Writer;

/// The daemon's socket inside a node (its /run is private).
pub const SOCKET: &str = "/run/etcd-warden/api.sock";
/// etcd's client port on every node address.
pub const CLIENT_PORT: u16 = 2379;
/// etcd's peer port.
pub const PEER_PORT: u16 = 2380;
/// Deadline of one gateway call from the test.
const CALL: Duration = Duration::from_secs(3);

/// `two-node` (fencing, forced new cluster after a fence) or `ha`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Exactly two nodes, fencing.
    TwoNode,
    /// Three or more voters, never forcing.
    Ha,
}

impl Topology {
    fn as_str(self) -> &'static str {
        match self {
            Topology::TwoNode => "two-node",
            Topology::Ha => "ha",
        }
    }
}

/// The cluster with a daemon in every node.
pub struct WardenCluster {
    /// The harness cluster (exec, crash, fence, cut, crm_mon …).
    pub c: Cluster,
    warden: PathBuf,
    topology: Topology,
    daemons: Mutex<Vec<(String, i32)>>,
    /// A node whose daemon runs in the shipped unit's sandbox, with the
    /// default paths on the node's disk (see [`crate::sandbox`]).
    sandbox: Option<(String, crate::sandbox::Unit)>,
    /// TOML appended to every node's configuration (a test's own
    /// sections, e.g. a small defragmentation threshold).
    extra: String,
    /// Extra `[etcd]` lines of every node's configuration (another etcd
    /// binary, a larger quota).
    etcd_toml: String,
}

/// Polls `f` every 100 ms until it returns `Some`, failing with `what` and
/// the last error after `timeout`.
pub fn poll<T>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("nothing observed yet");
    let _stage = warden_harness::progress::waiting_for(what);
    loop {
        match f() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => {
                last = format!("{e:#}");
                warden_harness::progress::observed(&last);
            }
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}; last: {last}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
/// Unix milliseconds now (to compare with the daemon log's stamps, see
/// [`logged_ms`]).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Unix milliseconds of the last line of a daemon `log` that contains every
/// one of `needles` (see [`logged_ms`]).
pub fn last_logged_ms(log: &str, needles: &[&str]) -> Option<u64> {
    logged_ms(log, needles).last().copied()
}

/// Unix milliseconds of each line of a daemon `log` that contains every one
/// of `needles` (matched without terminal colour codes), in order, from the
/// RFC 3339 UTC stamp that begins the line.
pub fn logged_ms(log: &str, needles: &[&str]) -> Vec<u64> {
    log.lines()
        .map(strip_colour)
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .filter_map(|l| stamp_ms(&l))
        .collect()
}

fn stamp_ms(plain: &str) -> Option<u64> {
    let stamp = plain.split_whitespace().next()?;
    let (date, clock) = stamp.strip_suffix('Z')?.split_once('T')?;
    let mut d = date.split('-').map(|v| v.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, "0"));
    let mut t = hms.split(':').map(|v| v.parse::<i64>());
    let (hh, mm, ss) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    let ms: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    // Days from the civil date (proleptic Gregorian), 1970-01-01 = 0.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms).ok()
}

/// The last `own` lines the daemon logged itself and the last `etcd` lines
/// it forwarded from etcd (target `etcd`), each without colour codes.
fn split_log_tail(log: &str, own: usize, etcd: usize) -> (Vec<String>, Vec<String>) {
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    for line in log.lines().map(strip_colour) {
        if line.split_whitespace().nth(2) == Some("etcd:") {
            theirs.push(line);
        } else {
            mine.push(line);
        }
    }
    let last = |v: Vec<String>, n: usize| v[v.len().saturating_sub(n)..].to_vec();
    (last(mine, own), last(theirs, etcd))
}

/// A log line without its terminal colour codes.
pub fn strip_colour(line: &str) -> String {
    let mut plain = String::new();
    let mut esc = false;
    for c in line.chars() {
        match (esc, c) {
            (false, '\u{1b}') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => plain.push(c),
        }
    }
    plain
}

/// Whether `r` is an instance of the etcd resource (a clone's carry `:N`).
pub fn is_etcd(r: &ResourceState) -> bool {
    r.id == "etcd" || r.id.starts_with("etcd:")
}

/// No etcd instance is active on `node`: Pacemaker has seen its stop
/// complete (an instance being stopped is still active).
pub fn etcd_stopped_on(node: &str) -> Expect {
    let node = node.to_string();
    Expect::new(format!("etcd stopped on {node}"), move |m: &CrmMon| {
        !m.resources
            .iter()
            .any(|r| is_etcd(r) && r.active && r.nodes.contains(&node))
    })
}

/// Every node in `nodes` runs an active, not failed etcd instance.
pub fn etcd_started_on(nodes: Vec<String>) -> Expect {
    Expect::new(format!("etcd started on {nodes:?}"), move |m: &CrmMon| {
        nodes.iter().all(|n| {
            m.resources
                .iter()
                .any(|r| is_etcd(r) && r.active && !r.failed && r.nodes.contains(n))
        })
    })
}

impl WardenCluster {
    /// Starts the cluster, writes every node's configuration, starts the
    /// daemons and applies the generated CIB; returns once Pacemaker shows
    /// etcd started on every node.
    pub fn start(nodes: usize, topology: Topology) -> Result<Self> {
        Self::start_full(nodes, topology, "", "")
    }

    /// As [`Self::start`], with `extra` (TOML sections) appended to every
    /// node's configuration.
    pub fn start_with(nodes: usize, topology: Topology, extra: &str) -> Result<Self> {
        Self::start_full(nodes, topology, "", extra)
    }

    /// As [`Self::start`], with `etcd_toml` (lines of the `[etcd]` table,
    /// such as `binary = "…"` or `quota_backend_bytes = …`) in every node's
    /// configuration.
    pub fn start_tuned(nodes: usize, topology: Topology, etcd_toml: &str) -> Result<Self> {
        Self::start_full(nodes, topology, etcd_toml, "")
    }

    fn start_full(nodes: usize, topology: Topology, etcd_toml: &str, extra: &str) -> Result<Self> {
        let w = Self::start_daemons_with(nodes, topology, None, etcd_toml, extra)?;
        w.configure_pacemaker()?;
        w.wait_started(&w.c.node_names(), Duration::from_secs(120))?;
        Ok(w)
    }

    /// The cluster and the daemons, without etcd in the CIB yet (adoption
    /// starts etcd by hand first).
    pub fn start_daemons(nodes: usize, topology: Topology) -> Result<Self> {
        Self::start_daemons_with(nodes, topology, None, "", "")
    }

    /// As [`Self::start_daemons`], with `etcd_toml` as in
    /// [`Self::start_tuned`].
    pub fn start_daemons_tuned(nodes: usize, topology: Topology, etcd_toml: &str) -> Result<Self> {
        Self::start_daemons_with(nodes, topology, None, etcd_toml, "")
    }

    /// As [`Self::start`], with `node`'s daemon in `unit`'s sandbox and on
    /// the default paths (data in /var/lib/etcd-warden/data, etcd as the
    /// `etcd` user), its /var/lib/etcd prepared as Debian's package leaves
    /// it.
    pub fn start_sandboxed(
        nodes: usize,
        topology: Topology,
        node: &str,
        unit: crate::sandbox::Unit,
    ) -> Result<Self> {
        let w = Self::start_daemons_with(nodes, topology, Some((node.to_string(), unit)), "", "")?;
        w.configure_pacemaker()?;
        w.wait_started(&w.c.node_names(), Duration::from_secs(120))?;
        Ok(w)
    }

    /// The node's disk behind the sandbox's /var/lib paths.
    pub fn disk(&self, node: &str) -> Result<PathBuf> {
        Ok(self.c.node_dir(node)?.join("disk"))
    }

    fn start_daemons_with(
        nodes: usize,
        topology: Topology,
        sandbox: Option<(String, crate::sandbox::Unit)>,
        etcd_toml: &str,
        extra: &str,
    ) -> Result<Self> {
        bins::install_agent()?;
        let warden = bins::warden()?;
        let mut opts = ClusterOptions::new(nodes);
        // The generated configuration brings the fence devices; the harness
        // only installs its fence agent.
        opts.stonith = false;
        warden_harness::fence_agent::install()?;
        let c = Cluster::start(opts)?;
        let w = Self {
            c,
            warden,
            topology,
            daemons: Mutex::new(Vec::new()),
            sandbox,
            etcd_toml: etcd_toml.to_string(),
            extra: extra.to_string(),
        };
        if let Some((node, unit)) = &w.sandbox {
            crate::sandbox::prepare_disk(unit, &w.disk(node)?)?;
        }
        for node in w.c.node_names() {
            w.write_config(&node)?;
            w.spawn_daemon(&node)?;
        }
        Ok(w)
    }

    /// The node names.
    pub fn nodes(&self) -> Vec<String> {
        self.c.node_names()
    }

    /// The other node of a two-node cluster.
    pub fn peer(&self, node: &str) -> String {
        self.nodes()
            .into_iter()
            .find(|n| n != node)
            .unwrap_or_default()
    }

    /// The node's configuration file (a sandboxed node's is on its disk,
    /// seen in its sandbox as /etc/etcd-warden/config.toml).
    pub fn config_path(&self, node: &str) -> Result<PathBuf> {
        if self.sandbox.as_ref().is_some_and(|(n, _)| n == node) {
            return Ok(self.disk(node)?.join("etc/etcd-warden/config.toml"));
        }
        Ok(self.c.node_dir(node)?.join("warden/config.toml"))
    }

    /// The node's etcd data directory.
    pub fn data_dir(&self, node: &str) -> Result<PathBuf> {
        Ok(self.c.node_dir(node)?.join("etcd"))
    }

    /// The daemon's state directory of `node`: `paths.state_dir` as its
    /// configuration names it.
    pub fn state_dir(&self, node: &str) -> Result<PathBuf> {
        let cfg = self.config_path(node)?;
        let text =
            std::fs::read_to_string(&cfg).with_context(|| format!("reading {}", cfg.display()))?;
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("state_dir"))
            .filter_map(|rest| rest.trim().strip_prefix('='))
            .map(|v| PathBuf::from(v.trim().trim_matches('"')))
            .next()
            .with_context(|| format!("{} names no state_dir", cfg.display()))
    }

    /// The archive directory of `node`: the default `<data_dir>.archive`
    /// (the harness's configuration sets no `failover.archive_dir`).
    pub fn archive_dir(&self, node: &str) -> Result<PathBuf> {
        let data = self.data_dir(node)?;
        let mut name = data.file_name().unwrap_or_default().to_os_string();
        name.push(".archive");
        Ok(data.with_file_name(name))
    }

    /// etcd's client address of `node`.
    pub fn client_addr(&self, node: &str) -> Result<SocketAddr> {
        Ok(SocketAddr::new(IpAddr::V4(self.c.addr(node)?), CLIENT_PORT))
    }

    /// The node's network namespace.
    pub fn netns(&self, node: &str) -> Result<NetNs> {
        NetNs::of_pid(self.c.holder_pid(node)?)
    }

    fn write_config(&self, node: &str) -> Result<()> {
        let dir = self.c.node_dir(node)?;
        let mut toml = format!(
            "# Written by the failover tests: this node in a {} cluster.\n\
             node_name = \"{node}\"\ntopology = \"{}\"\n\n",
            self.topology.as_str(),
            self.topology.as_str()
        );
        for n in self.nodes() {
            let a = self.c.addr(&n)?;
            toml.push_str(&format!(
                "[[nodes]]\nname = \"{n}\"\npeer_urls = [\"http://{a}:{PEER_PORT}\"]\nclient_urls = [\"http://{a}:{CLIENT_PORT}\"]\n\n"
            ));
        }
        if self.sandbox.as_ref().is_some_and(|(n, _)| n == node) {
            // The defaults, as a host's configuration leaves them.
            toml.push_str("[timeouts]\nprobe_interval_ms = 500\nstop_grace_ms = 5000\n");
            let path = self.config_path(node)?;
            std::fs::create_dir_all(path.parent().context("config dir")?)?;
            return std::fs::write(&path, toml)
                .with_context(|| format!("writing {}", path.display()));
        }
        toml.push_str(&format!(
            "[etcd]\ndata_dir = \"{}\"\n\
             # etcd as root: the node's work dir is root's.\n\
             user = \"root\"\n{}\n\
             [api]\nsocket = \"{SOCKET}\"\nsocket_group = \"haclient\"\nallowed_users = [\"root\", \"hacluster\"]\n\n\
             [paths]\nstate_dir = \"{}\"\n\n\
             # Probe often: the tests measure how fast a failover completes.\n\
             [timeouts]\nprobe_interval_ms = 500\nstop_grace_ms = 5000\n",
            dir.join("etcd").display(),
            self.etcd_toml,
            dir.join("state").display()
        ));
        toml.push_str(&self.extra);
        let path = self.config_path(node)?;
        std::fs::create_dir_all(path.parent().context("config dir")?)?;
        std::fs::write(&path, toml).with_context(|| format!("writing {}", path.display()))
    }

    /// Starts the node's daemon (as a boot would) and waits for its API.
    pub fn spawn_daemon(&self, node: &str) -> Result<i32> {
        self.spawn_daemon_from(node, &self.warden)
    }

    /// As [`Self::spawn_daemon`], from the binary at `warden` (an upgrade
    /// restarts the daemon from a newly installed binary).
    pub fn spawn_daemon_from(&self, node: &str, warden: &Path) -> Result<i32> {
        let pid = self.spawn_daemon_env(node, warden, &[])?;
        poll(
            &format!("the daemon's API on {node}"),
            Duration::from_secs(30),
            || self.status(node).map(Some),
        )
        .with_context(|| self.daemon_log_tail(node))?;
        Ok(pid)
    }

    /// Starts the node's daemon armed to kill itself at the named steps
    /// (`ETCD_WARDEN_KILL_AT`, comma-separated; see the daemon's
    /// `kill_point`), without waiting for its API: it may die before it
    /// answers.
    pub fn spawn_daemon_killed_at(&self, node: &str, points: &str) -> Result<i32> {
        let env = etcd_warden::kill_point::ENV;
        self.spawn_daemon_env(node, &self.warden, &[(env, points)])
    }

    /// Ends `node`'s daemon with SIGTERM (etcd keeps running) and starts
    /// one armed to kill itself at `point`, once its API answers.
    pub fn rearm_daemon(&self, node: &str, point: &str) -> Result<i32> {
        let pid = self
            .daemon_pid(node)
            .with_context(|| format!("no daemon on {node}"))?;
        self.c.stop_process(node, pid, Duration::from_secs(45))?;
        let armed = self.spawn_daemon_killed_at(node, point)?;
        poll(
            &format!("{node}'s armed daemon's API"),
            Duration::from_secs(30),
            || self.status(node).map(Some),
        )?;
        Ok(armed)
    }

    fn spawn_daemon_env(&self, node: &str, warden: &Path, envs: &[(&str, &str)]) -> Result<i32> {
        let cfg = self.config_path(node)?;
        let argv = [
            warden.to_str().context("warden path")?,
            "daemon",
            "--config",
            cfg.to_str().context("config path")?,
        ];
        let in_sandbox = [
            argv[0],
            "daemon",
            "--config",
            "/etc/etcd-warden/config.toml",
        ];
        let wrapped = match &self.sandbox {
            Some((n, unit)) if n == node => unit.wrap(&self.disk(node)?, &in_sandbox),
            _ => argv.iter().map(|a| a.to_string()).collect(),
        };
        let wrapped: Vec<&str> = wrapped.iter().map(String::as_str).collect();
        let pid = self.c.spawn(node, "etcd-warden", &wrapped, envs)?;
        self.daemons
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((node.to_string(), pid));
        Ok(pid)
    }

    /// The PID of the daemon last started on `node`.
    pub fn daemon_pid(&self, node: &str) -> Option<i32> {
        self.daemons
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .rev()
            .find(|(n, _)| n == node)
            .map(|(_, p)| *p)
    }

    /// The last lines of the node's daemon log (for failure messages): the
    /// daemon's own decisions and actions, then etcd's forwarded output
    /// apart, so that a chatty etcd cannot push the decisions out of view.
    pub fn daemon_log_tail(&self, node: &str) -> String {
        let (own, etcd) = split_log_tail(&self.daemon_log(node), 40, 10);
        format!(
            "daemon log of {node} (its last {} lines of its own):\n{}\n\
             etcd's last {} lines there:\n{}",
            own.len(),
            own.join("\n"),
            etcd.len(),
            etcd.join("\n")
        )
    }

    /// The node's whole daemon log.
    pub fn daemon_log(&self, node: &str) -> String {
        self.c
            .log_dir(node)
            .map(|d| std::fs::read_to_string(d.join("etcd-warden.log")).unwrap_or_default())
            .unwrap_or_default()
    }

    /// `etcd-warden ARGS… --config <node's config>` inside the node, as an
    /// operator runs it there; fails unless it exits 0.
    pub fn warden_cli(&self, node: &str, args: &[&str]) -> Result<String> {
        let w = self.warden.to_str().context("warden path")?;
        let cfg = self.config_path(node)?;
        let cfg = cfg.to_str().context("config path")?;
        let mut argv = vec![w];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--config", cfg, "--socket", SOCKET]);
        let out = self.c.exec(node, &argv)?;
        ensure!(
            out.status.success(),
            "etcd-warden {} on {node}: {}{}",
            args.join(" "),
            out.stdout,
            out.stderr
        );
        Ok(out.stdout)
    }

    /// The node whose etcd leads, as its daemon reports it, waited for up
    /// to `timeout`.
    pub fn leader_node(&self, timeout: Duration) -> Result<String> {
        poll("a node whose etcd leads", timeout, || {
            Ok(self.nodes().into_iter().find(|n| {
                self.status(n).is_ok_and(|s| {
                    let id = |k: &str| s.get(k).and_then(Value::as_str).map(str::to_owned);
                    id("memberId").is_some() && id("memberId") == id("leaderId")
                })
            }))
        })
    }

    /// `etcd-warden status --json` inside the node.
    pub fn status(&self, node: &str) -> Result<Value> {
        let w = self.warden.to_str().context("warden path")?;
        let out = self
            .c
            .exec(node, &[w, "status", "--json", "--socket", SOCKET])?;
        // 0 healthy, 2 not healthy: either way the daemon answered.
        ensure!(
            out.status
                .code()
                .is_some_and(|c| warden_harness::process::STATUS_ANSWERED.contains(&c)),
            "etcd-warden status on {node}: {}{}",
            out.stdout,
            out.stderr
        );
        serde_json::from_str(&out.stdout).context("status is not JSON")
    }

    /// Applies `etcd-warden crm-config --format xml` (fencing by the
    /// harness's agent, node1 wins a fence race).
    pub fn configure_pacemaker(&self) -> Result<()> {
        let nodes = self.nodes();
        let mut args = vec!["crm-config".to_string(), "--format".into(), "xml".into()];
        for node in &nodes {
            args.push("--node".into());
            args.push(format!("{node}={}", self.c.addr(node)?));
        }
        for a in [
            "--fence-agent",
            "fence_warden_testns",
            "--fence-option",
            &format!("harness_root={}", self.c.root().display()),
            "--fence-option",
            "pcmk_host_check=static-list",
            "--fence-delay",
            "2s",
        ] {
            args.push(a.to_string());
        }
        let out = std::process::Command::new(&self.warden)
            .args(&args)
            .output()
            .context("etcd-warden crm-config")?;
        ensure!(
            out.status.success(),
            "crm-config: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let frag = self.c.node_dir(&nodes[0])?.join("etcd-warden.xml");
        std::fs::write(&frag, &out.stdout)?;
        self.c
            .exec_ok(
                &nodes[0],
                &[
                    "cibadmin",
                    "--modify",
                    "--xml-file",
                    frag.to_str().context("path")?,
                ],
            )
            .map(|_| ())
    }

    /// Waits until crm_mon (asked on the first of `nodes`) shows etcd
    /// started on every one of `nodes`.
    pub fn wait_started(&self, nodes: &[String], timeout: Duration) -> Result<CrmMon> {
        let from = nodes.first().context("no node")?;
        self.c
            .wait_for(from, etcd_started_on(nodes.to_vec()), timeout)
            .with_context(|| {
                let mut s = self.c.crm_mon_text(from).unwrap_or_default();
                for n in nodes {
                    s.push_str(&self.daemon_log_tail(n));
                }
                s
            })
    }

    /// The member list (and cluster id) as `node`'s etcd answers it.
    pub fn members(&self, node: &str) -> Result<(u64, Vec<Member>)> {
        let addr = self.client_addr(node)?;
        self.netns(node)?
            .run(move || gateway::member_list(addr, CALL))
    }

    /// Waits until `node`'s etcd lists exactly `voters` as voters (by name)
    /// and no learner, and answers a linearizable read: the cluster is back
    /// to full strength. Returns the cluster id and members.
    pub fn wait_voters(
        &self,
        node: &str,
        voters: &[String],
        timeout: Duration,
    ) -> Result<(u64, Vec<Member>)> {
        let mut want: Vec<String> = voters.to_vec();
        want.sort();
        poll(
            &format!("{want:?} as the only voters, seen from {node}"),
            timeout,
            || {
                let (cid, ms) = self.members(node)?;
                let mut v: Vec<String> = ms
                    .iter()
                    .filter(|m| !m.is_learner)
                    .map(|m| m.name.clone())
                    .collect();
                v.sort();
                if v != want || ms.iter().any(|m| m.is_learner) {
                    bail!("members now {ms:?}");
                }
                self.read(node, "/warden-test/probe")?;
                Ok(Some((cid, ms)))
            },
        )
        .with_context(|| self.daemon_log_tail(node))
    }

    /// Linearizable read of every key under `prefix` through `node`'s etcd.
    pub fn read(&self, node: &str, prefix: &str) -> Result<Vec<Kv>> {
        let addr = self.client_addr(node)?;
        let prefix = prefix.to_string();
        self.netns(node)?
            .run(move || gateway::range_prefix(addr, &prefix, CALL))
    }

    /// One put through `node`'s etcd (the test's own marker writes).
    pub fn put(&self, node: &str, key: &str, value: &str) -> Result<u64> {
        let addr = self.client_addr(node)?;
        let (k, v) = (key.to_string(), value.to_string());
        let ans = self
            .netns(node)?
            .run(move || gateway::put(addr, &k, &v, CALL))?;
        gateway::header(&ans)
            .2
            .context("put answer without a revision")
    }

    /// A writer per node in `nodes`, each writing to its own node's etcd.
    pub fn writer(&self, prefix: &str, nodes: &[String]) -> Result<Writer> {
        let mut targets = Vec::new();
        for n in nodes {
            targets.push((n.clone(), self.netns(n)?, self.client_addr(n)?));
        }
        Writer::start(prefix, targets)
    }

    /// "Boots" a crashed or fenced node in the order of a host's units:
    /// Corosync, then the daemon (its unit is ordered before
    /// pacemaker.service), then Pacemaker, whose first probe of etcd thus
    /// reaches the daemon, as on a real host. Returns once the node joined.
    pub fn boot(&self, node: &str, timeout: Duration) -> Result<()> {
        self.c
            .power_on_with(node, timeout, || self.spawn_daemon(node).map(|_| ()))
    }

    /// Time of the last fence of `node` that killed it, from the harness
    /// fence agent's log (`HH:MM:SS.nnnnnnnnn … plug=NODE killed: …`, in the
    /// machine's time zone, UTC here): the moment the fence was done, with
    /// sub-second precision that crm_mon's fence history lacks.
    pub fn fence_done_at(&self, node: &str) -> Option<SystemTime> {
        let log = std::fs::read_to_string(self.c.root().join("fence.log")).ok()?;
        let line = log
            .lines()
            .rev()
            .find(|l| l.contains(&format!("plug={node} ")) && l.contains("killed:"))?;
        let tod = line.split_whitespace().next()?;
        let mut it = tod.split(':');
        let h: f64 = it.next()?.parse().ok()?;
        let m: f64 = it.next()?.parse().ok()?;
        let s: f64 = it.next()?.parse().ok()?;
        let secs_of_day = h * 3600.0 + m * 60.0 + s;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()?
            .as_secs_f64();
        let midnight = (now / 86400.0).floor() * 86400.0;
        let mut t = midnight + secs_of_day;
        // A fence just before midnight, read just after.
        if t > now + 1.0 {
            t -= 86400.0;
        }
        Some(UNIX_EPOCH + Duration::from_secs_f64(t))
    }

    /// Archived data directories of `node`: anything under its work dir whose
    /// name says "archive" and that holds an etcd `member` directory.
    pub fn archives(&self, node: &str) -> Result<Vec<PathBuf>> {
        let root = self.c.node_dir(node)?;
        let mut out = Vec::new();
        find_archives(&root, 3, &mut out);
        Ok(out)
    }

    /// The copies of etcd's write-ahead log that `node`'s daemon kept before
    /// a forced restart (`<archive dir>/<time>-wal-before-force-epoch-N`),
    /// oldest first.
    pub fn wal_copies(&self, node: &str) -> Result<Vec<PathBuf>> {
        let root = self.c.node_dir(node)?;
        let mut out = Vec::new();
        find_named(&root, 4, "-wal-before-force-epoch-", &mut out);
        out.sort();
        Ok(out)
    }

    /// Whether `node`'s daemon holds its in-sync marker (its data is known
    /// to hold every acknowledged write: the one fact that lets it force a
    /// new cluster once its peer is fenced). Read inside the node.
    pub fn in_sync(&self, node: &str) -> Result<bool> {
        let path = format!("/run/etcd-warden/{node}/in-sync");
        Ok(self.c.exec(node, &["test", "-s", &path])?.status.success())
    }

    /// The daemon's own word on why it does what it does (`reason` of its
    /// status, or its state).
    pub fn reason(&self, node: &str) -> Result<String> {
        let s = self.status(node)?;
        Ok(format!(
            "state={} reason={}",
            s.get("state").and_then(Value::as_str).unwrap_or("?"),
            s.get("reason").and_then(Value::as_str).unwrap_or("")
        ))
    }
}

fn find_archives(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    find_dirs(
        dir,
        depth,
        &|name, p| name.contains("archive") && has_member_dir(p, 3),
        out,
    );
}

fn find_named(dir: &Path, depth: u32, needle: &str, out: &mut Vec<PathBuf>) {
    find_dirs(dir, depth, &|name, _| name.contains(needle), out);
}

/// Directories under `dir`, at most `depth` levels down, for which `hit`
/// holds on their lower-cased name and path; a hit is not searched further.
fn find_dirs(dir: &Path, depth: u32, hit: &dyn Fn(&str, &Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().to_lowercase();
        if hit(&name, &p) {
            out.push(p);
        } else if depth > 0 {
            find_dirs(&p, depth - 1, hit, out);
        }
    }
}

fn has_member_dir(dir: &Path, depth: u32) -> bool {
    if dir.join("member").is_dir() {
        return true;
    }
    depth > 0
        && std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.path().is_dir() && has_member_dir(&e.path(), depth - 1))
            })
            .unwrap_or(false)
}

impl WardenCluster {
    /// A member-list sampler on each of `nodes` (each asks its own etcd).
    pub fn monitor(&self, nodes: &[String]) -> Result<crate::monitor::MemberMonitor> {
        let mut targets = Vec::new();
        for n in nodes {
            targets.push((n.clone(), self.netns(n)?, self.client_addr(n)?));
        }
        Ok(crate::monitor::MemberMonitor::start(targets))
    }

    /// etcd's PID on `node` as its daemon reports it, when running.
    pub fn etcd_pid(&self, node: &str) -> Result<Option<i64>> {
        let s = self.status(node)?;
        let running = s
            .get("etcdRunning")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(running
            .then(|| s.get("etcdPid").and_then(Value::as_i64))
            .flatten())
    }

    /// Puts `node` in standby (`on`) or out of it, asked on node `from`
    /// (`crm_attribute --node NODE --name standby --update on|off`).
    pub fn standby(&self, from: &str, node: &str, on: bool) -> Result<()> {
        let value = if on { "on" } else { "off" };
        let args = [
            "crm_attribute",
            "--node",
            node,
            "--name",
            "standby",
            "--update",
            value,
        ];
        self.c.exec_ok(from, &args)?;
        Ok(())
    }

    /// Cuts `node`'s power and waits (up to `timeout`) until Pacemaker,
    /// asked on `from`, has fenced it, as it does with every node lost
    /// uncleanly while the others keep quorum. Booting a node before that
    /// fence lands races it: the fence agent empties the node's namespace
    /// until nothing is left, so it kills the new boot's Pacemaker too, and
    /// the node never joins.
    pub fn crash_fenced(&self, node: &str, from: &str, timeout: Duration) -> Result<()> {
        let before = self.fence_count(from, node)?;
        self.c.crash(node)?;
        poll(
            &format!("Pacemaker on {from} to fence {node}"),
            timeout,
            || Ok((self.fence_count(from, node)? > before).then_some(())),
        )
    }

    /// Successful fences of `node` in crm_mon's history, seen from `from`.
    pub fn fence_count(&self, from: &str, node: &str) -> Result<usize> {
        Ok(self.c.crm_mon(from)?.fence_successes(node).len())
    }

    /// Checks the writes of a finished writer: no revision acknowledged twice
    /// (no split brain), and every acknowledged write read back, with its
    /// value and revision, through each of `readers`.
    pub fn check_writes(
        &self,
        acks: &[crate::writer::Ack],
        prefix: &str,
        readers: &[String],
    ) -> Result<()> {
        ensure!(!acks.is_empty(), "no write was acknowledged at all");
        crate::writer::check_unique_revisions(acks)?;
        for r in readers {
            let kvs = poll(
                &format!("a linearizable read of {prefix} through {r}"),
                Duration::from_secs(30),
                || self.read(r, prefix).map(Some),
            )?;
            crate::writer::check_all_present(acks, &kvs)
                .with_context(|| format!("read back through {r}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{last_logged_ms, logged_ms, split_log_tail};

    #[test]
    fn a_log_stamp_reads_as_unix_milliseconds() {
        let log = "\u{1b}[2m2026-12-01T21:17:53.337892Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m etcd_warden::reconcile::exec: promoted to voter node=\"node2\"\n\
                   \u{1b}[2m2026-12-01T21:17:54.000Z\u{1b}[0m INFO etcd_warden::core: action \u{1b}[3maction\u{1b}[0m\u{1b}[2m=\u{1b}[0mStart";
        assert_eq!(
            last_logged_ms(log, &["promoted to voter"]),
            Some(1_796_159_873_337)
        );
        assert_eq!(
            logged_ms(log, &[": action action=Start"]),
            vec![1_796_159_874_000]
        );
        assert_eq!(last_logged_ms(log, &["action=Stop"]), None);
        assert_eq!(last_logged_ms("nothing here", &["promoted"]), None);
    }

    #[test]
    fn the_failure_tail_keeps_the_daemons_lines_apart_from_etcds() {
        let mut log = String::from(
            "\u{1b}[2m2026-12-01T21:17:53.3Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m \u{1b}[2metcd_warden::core\u{1b}[0m\u{1b}[2m:\u{1b}[0m decided\n",
        );
        for i in 0..50 {
            log.push_str(&format!(
                "2026-12-01T21:17:54.0Z  INFO etcd: {{\"msg\":\"raft {i}\"}}\n"
            ));
        }
        log.push_str("2026-12-01T21:17:55.0Z  WARN etcd_warden::reconcile: held\n");
        let (own, etcd) = split_log_tail(&log, 40, 3);
        assert_eq!(
            own,
            vec![
                "2026-12-01T21:17:53.3Z  INFO etcd_warden::core: decided",
                "2026-12-01T21:17:55.0Z  WARN etcd_warden::reconcile: held",
            ]
        );
        assert_eq!(etcd.len(), 3);
        assert!(etcd[2].ends_with("raft 49\"}"), "{etcd:?}");
    }
}
