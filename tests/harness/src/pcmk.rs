//! Real Corosync + Pacemaker clusters of one, two or three nodes, each node
//! in its own network, mount and UTS namespace on this one machine.
//!
//! Layout of a cluster (`ID` is unique per cluster, e.g. `wh4711-0`):
//!
//! ```text
//! /tmp/warden-h-ID/                 root: harness_root of the fence devices
//!   .warden-harness                 marker (owner PID), checked by the fence agent
//!   corosync.conf  seed-cib.xml  netns  fence.log
//!   nodeN/holder.pid                the process that keeps the namespaces alive
//!   nodeN/lib-pacemaker/ log-pacemaker/ lib-corosync/   bound over /var/lib/pacemaker, …
//!   nodeN/work/                     free for tests (daemon data, sockets)
//!   nodeN/*.log                     stdout/stderr of corosync, pacemakerd, spawned processes
//! ```
//!
//! Network: node N has address 198.51.100.N/32 on its loopback. Every pair of
//! nodes is linked by its own veth pair (`to-nodeM` inside node N) with a /32
//! host route to the peer, so a full mesh for three nodes. A partition between
//! two nodes is just that pair's links going down; no bridge, no host-side
//! interface, and the TEST-NET addresses never exist outside the namespaces.
//! Because each cluster has its own namespaces, clusters running at the same
//! time may use the same addresses.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use nix::unistd::{Gid, Group, Uid, User, chown};

use crate::crm::{self, CrmMon, Expect};
use crate::fence_agent;
use crate::process::{self, CmdOutput};
use crate::teardown::{self, Teardown};

/// Prefix of every cluster's temp dir.
pub const ROOT_PREFIX: &str = "/tmp/warden-h-";
/// Marker file in a cluster root; holds the owning process's PID.
pub const MARKER: &str = ".warden-harness";

/// Set this env var to keep a cluster's temp dir (logs, CIB) after teardown.
pub const KEEP_ENV: &str = "WARDEN_HARNESS_KEEP";

const CMD_TIMEOUT: Duration = Duration::from_secs(60);

// What a node's fresh /run holds before anything starts (libqb's /run/crm,
// lock and agent state dirs), at boot and at every power-on.
const RUN_DIRS: &str = "mkdir -p /run/crm /run/lock /run/resource-agents /run/fence-agents\n\
     chown hacluster:haclient /run/crm; chmod 750 /run/crm; chmod 1777 /run/lock";
const POLL: Duration = Duration::from_millis(250);

/// How to build a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of nodes, 1 to 3.
    pub nodes: usize,
    /// Corosync totem token timeout in ms.
    pub token_ms: u32,
    /// Fencing on (one `fence_warden_testns` device per node). Default: on for
    /// two and three nodes, off for one.
    pub stonith: bool,
    /// `stonith-timeout` cluster property.
    pub stonith_timeout: String,
    /// `cluster-recheck-interval` cluster property.
    pub recheck_interval: String,
    /// `pcmk_delay_base` on the device that fences node1, so that in a
    /// two-node split node1 wins the fence race (the product's generated
    /// configuration delays fencing of the alphabetically first node the same
    /// way). `None`: no delay, and both sides may shoot each other.
    pub node1_fence_delay: Option<Duration>,
    /// How long [`Cluster::start`] waits for every node to be online.
    pub start_timeout: Duration,
}

impl ClusterOptions {
    /// Defaults for an `n`-node cluster.
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            token_ms: 1000,
            stonith: nodes >= 2,
            stonith_timeout: "30s".into(),
            recheck_interval: "30s".into(),
            node1_fence_delay: Some(Duration::from_secs(2)),
            start_timeout: Duration::from_secs(90),
        }
    }
}

#[derive(Debug)]
struct NodeSpec {
    name: String,
    addr: Ipv4Addr,
    netns: String,
    dir: PathBuf,
}

#[derive(Debug, Default)]
struct NodeProcs {
    holder: Option<i32>,
    corosync: Option<i32>,
    pacemakerd: Option<i32>,
    // Processes tests started inside the node: (PID, label).
    spawned: Vec<(i32, String)>,
}

#[derive(Debug)]
struct State {
    torn_down: bool,
    nodes: Vec<NodeProcs>,
    // Network namespaces created so far (teardown deletes exactly these).
    netns: Vec<String>,
}

#[derive(Debug)]
struct Inner {
    id: String,
    root: PathBuf,
    opts: ClusterOptions,
    nodes: Vec<NodeSpec>,
    state: Mutex<State>,
}

/// A running test cluster; everything of it is torn down on drop.
#[derive(Debug)]
pub struct Cluster {
    inner: Arc<Inner>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn unique_id() -> String {
    loop {
        let id = format!(
            "wh{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        // A process killed before teardown may have left a cluster under the
        // same PID-derived name; never reuse it.
        if !Path::new(&format!("{ROOT_PREFIX}{id}")).exists()
            && !Path::new(&format!("/run/netns/{id}-node1")).exists()
        {
            return id;
        }
    }
}

fn ip(args: &[&str]) -> Result<()> {
    process::run(Command::new("ip").args(args), CMD_TIMEOUT)?
        .ok()
        .map(|_| ())
}

fn hacluster_ids() -> Result<(Uid, Gid)> {
    let u = User::from_name("hacluster")?
        .context("user hacluster does not exist (is pacemaker installed?)")?;
    let g = Group::from_name("haclient")?.context("group haclient does not exist")?;
    Ok((u.uid, g.gid))
}

impl Cluster {
    /// Starts a cluster and waits until every node is online with a DC elected.
    pub fn start(opts: ClusterOptions) -> Result<Self> {
        ensure!(
            (1..=3).contains(&opts.nodes),
            "a test cluster has 1 to 3 nodes, not {}",
            opts.nodes
        );
        ensure!(
            Uid::effective().is_root(),
            "Pacemaker test clusters need root"
        );
        cleanup_stale();
        process::become_subreaper();
        if opts.stonith {
            fence_agent::install()?;
        }
        let id = unique_id();
        let root = PathBuf::from(format!("{ROOT_PREFIX}{id}"));
        fs::create_dir(&root).with_context(|| format!("creating {}", root.display()))?;
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755))?;
        fs::write(root.join(MARKER), format!("{}\n", std::process::id()))?;
        let nodes = (0..opts.nodes)
            .map(|i| {
                let name = format!("node{}", i + 1);
                NodeSpec {
                    addr: Ipv4Addr::new(198, 51, 100, (i + 1) as u8),
                    netns: format!("{id}-{name}"),
                    dir: root.join(&name),
                    name,
                }
            })
            .collect();
        let inner = Arc::new(Inner {
            id,
            root,
            opts,
            nodes,
            state: Mutex::new(State {
                torn_down: false,
                nodes: (0..3).map(|_| NodeProcs::default()).collect(),
                netns: Vec::new(),
            }),
        });
        let weak: std::sync::Weak<dyn Teardown> =
            Arc::downgrade(&(inner.clone() as Arc<dyn Teardown>));
        teardown::register(weak);
        // From here on, Drop of `c` cleans up whatever was built if a step fails.
        let c = Self { inner };
        let t0 = Instant::now();
        c.write_config()?;
        c.prepare_nodes()?;
        c.create_network()?;
        for i in 0..c.len() {
            c.start_holder(i)?;
        }
        for i in 0..c.len() {
            c.start_corosync(i)?;
        }
        for i in 0..c.len() {
            c.wait_corosync(i)?;
            c.start_pacemakerd(i)?;
        }
        let names = c.node_names();
        let first = names[0].clone();
        let timeout = c.inner.opts.start_timeout;
        c.wait_for(
            &first,
            crm::all_online(&names).and(crm::dc_present()),
            timeout,
        )?;
        for i in 0..c.len() {
            c.wait_joined(i, timeout)?;
        }
        tracing::info!("cluster {} online after {:?}", c.id(), t0.elapsed());
        Ok(c)
    }

    /// Unique id of this cluster (also its Corosync cluster name).
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The cluster's temp dir (the fence devices' `harness_root`).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.inner.nodes.len()
    }

    /// Always false: a cluster has at least one node.
    pub fn is_empty(&self) -> bool {
        self.inner.nodes.is_empty()
    }

    /// Node names: `node1`, `node2`, …
    pub fn node_names(&self) -> Vec<String> {
        self.inner.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// Names of the network namespaces (one per node).
    pub fn netns_names(&self) -> Vec<String> {
        self.inner.nodes.iter().map(|n| n.netns.clone()).collect()
    }

    fn idx(&self, node: &str) -> Result<usize> {
        self.inner
            .nodes
            .iter()
            .position(|n| n.name == node)
            .with_context(|| {
                format!(
                    "no node {node:?} in cluster {} ({:?})",
                    self.id(),
                    self.node_names()
                )
            })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node's cluster address (198.51.100.N), reachable from the other nodes.
    pub fn addr(&self, node: &str) -> Result<Ipv4Addr> {
        Ok(self.inner.nodes[self.idx(node)?].addr)
    }

    /// A per-node directory for tests (daemon data, sockets). Same path inside
    /// the node and on the host, removed on teardown.
    pub fn node_dir(&self, node: &str) -> Result<PathBuf> {
        Ok(self.inner.nodes[self.idx(node)?].dir.join("work"))
    }

    /// Where the node's logs are (corosync, pacemaker, spawned processes).
    pub fn log_dir(&self, node: &str) -> Result<PathBuf> {
        Ok(self.inner.nodes[self.idx(node)?].dir.clone())
    }

    /// PID of the process holding the node's namespaces.
    pub fn holder_pid(&self, node: &str) -> Result<i32> {
        let i = self.idx(node)?;
        self.state().nodes[i]
            .holder
            .context("node has no holder (torn down?)")
    }

    /// Every live process of the node (its mount namespace), holder excluded.
    pub fn node_pids(&self, node: &str) -> Result<Vec<i32>> {
        let holder = self.holder_pid(node)?;
        let ns = process::mount_ns(holder).with_context(|| format!("holder of {node} is gone"))?;
        Ok(process::pids_in_mount_ns(&ns, &[holder]))
    }

    /// PIDs of the node's corosync and pacemakerd as the harness started them
    /// (they may have been killed since by a fence).
    pub fn daemon_pids(&self, node: &str) -> Result<(Option<i32>, Option<i32>)> {
        let i = self.idx(node)?;
        let st = self.state();
        Ok((st.nodes[i].corosync, st.nodes[i].pacemakerd))
    }

    fn write_config(&self) -> Result<()> {
        let o = &self.inner.opts;
        let mut conf = format!(
            "totem {{\n  version: 2\n  cluster_name: {}\n  transport: knet\n  crypto_cipher: none\n  crypto_hash: none\n  token: {}\n}}\n\
             logging {{\n  to_stderr: no\n  to_syslog: no\n  to_logfile: yes\n  logfile: /var/log/pacemaker/corosync.log\n  timestamp: on\n}}\n\
             quorum {{\n  provider: corosync_votequorum\n",
            self.id(),
            o.token_ms
        );
        // two_node: a survivor keeps quorum alone (fencing settles the split);
        // it implies wait_for_all, so both nodes must be seen once at start.
        if self.len() == 2 {
            conf.push_str("  two_node: 1\n");
        }
        conf.push_str("}\nnodelist {\n");
        for (i, n) in self.inner.nodes.iter().enumerate() {
            let _ = write!(
                conf,
                "  node {{\n    name: {}\n    nodeid: {}\n    ring0_addr: {}\n  }}\n",
                n.name,
                i + 1,
                n.addr
            );
        }
        conf.push_str("}\n");
        fs::write(self.root().join("corosync.conf"), conf)?;

        // Seed CIB: dc-deadtime=2s, otherwise the first DC election waits 20 s.
        let seed = self.root().join("seed-cib.xml");
        let empty = process::run(Command::new("cibadmin").arg("--empty"), CMD_TIMEOUT)?.ok()?;
        fs::write(&seed, empty.stdout)?;
        let props = [
            ("dc-deadtime", "2s"),
            ("stonith-enabled", if o.stonith { "true" } else { "false" }),
            ("stonith-timeout", o.stonith_timeout.as_str()),
            ("cluster-recheck-interval", o.recheck_interval.as_str()),
        ];
        for (k, v) in props {
            process::run(
                Command::new("crm_attribute").env("CIB_file", &seed).args([
                    "-t",
                    "crm_config",
                    "-n",
                    k,
                    "-v",
                    v,
                ]),
                CMD_TIMEOUT,
            )?
            .ok()?;
        }
        if o.stonith {
            for (i, n) in self.inner.nodes.iter().enumerate() {
                let name = &n.name;
                let delay = match o.node1_fence_delay {
                    Some(d) if i == 0 => format!(
                        r#"<nvpair id="fence-{name}-delay" name="pcmk_delay_base" value="{}ms"/>"#,
                        d.as_millis()
                    ),
                    _ => String::new(),
                };
                let xml = format!(
                    r#"<primitive id="fence-{name}" class="stonith" type="{agent}">
  <instance_attributes id="fence-{name}-ia">
    <nvpair id="fence-{name}-hl" name="pcmk_host_list" value="{name}"/>
    <nvpair id="fence-{name}-hc" name="pcmk_host_check" value="static-list"/>
    <nvpair id="fence-{name}-root" name="harness_root" value="{root}"/>{delay}
  </instance_attributes>
  <operations><op id="fence-{name}-mon" name="monitor" interval="60s"/></operations>
</primitive>"#,
                    agent = fence_agent::AGENT_NAME,
                    root = self.root().display(),
                );
                process::run(
                    Command::new("cibadmin").env("CIB_file", &seed).args([
                        "-C",
                        "-o",
                        "resources",
                        "-X",
                        &xml,
                    ]),
                    CMD_TIMEOUT,
                )?
                .ok()?;
            }
        }
        Ok(())
    }

    fn prepare_nodes(&self) -> Result<()> {
        let (uid, gid) = hacluster_ids()?;
        let seed = self.root().join("seed-cib.xml");
        for n in &self.inner.nodes {
            let lib = n.dir.join("lib-pacemaker");
            for sub in ["cib", "pengine", "blackbox", "cores"] {
                fs::create_dir_all(lib.join(sub))?;
                chown(&lib.join(sub), Some(uid), Some(gid))?;
                fs::set_permissions(lib.join(sub), fs::Permissions::from_mode(0o750))?;
            }
            chown(&lib, Some(uid), Some(gid))?;
            let log = n.dir.join("log-pacemaker");
            fs::create_dir_all(&log)?;
            chown(&log, Some(uid), Some(gid))?;
            fs::set_permissions(&log, fs::Permissions::from_mode(0o770))?;
            fs::create_dir_all(n.dir.join("lib-corosync"))?;
            fs::create_dir_all(n.dir.join("work"))?;
            let cib = lib.join("cib/cib.xml");
            fs::copy(&seed, &cib)?;
            chown(&cib, Some(uid), Some(gid))?;
            fs::set_permissions(&cib, fs::Permissions::from_mode(0o600))?;
        }
        Ok(())
    }

    fn create_network(&self) -> Result<()> {
        let mut names = Vec::new();
        for n in &self.inner.nodes {
            ip(&["netns", "add", &n.netns])
                .with_context(|| format!("creating network namespace {}", n.netns))?;
            {
                let mut st = self.state();
                st.netns.push(n.netns.clone());
                fs::write(self.root().join("netns"), st.netns.join("\n") + "\n")?;
            }
            ip(&["-n", &n.netns, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                &n.netns,
                "addr",
                "add",
                &format!("{}/32", n.addr),
                "dev",
                "lo",
            ])?;
            names.push(n.netns.clone());
        }
        for a in 0..self.len() {
            for b in a + 1..self.len() {
                let (na, nb) = (&self.inner.nodes[a], &self.inner.nodes[b]);
                // Created directly inside the two namespaces: no host interface.
                ip(&[
                    "link",
                    "add",
                    &format!("to-{}", nb.name),
                    "netns",
                    &na.netns,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &format!("to-{}", na.name),
                    "netns",
                    &nb.netns,
                ])
                .with_context(|| format!("linking {} and {}", na.name, nb.name))?;
                self.link_up(a, b)?;
            }
        }
        Ok(())
    }

    // Brings the a<->b veth pair up and (re)adds the host routes, which the
    // kernel deletes whenever a link goes down.
    fn link_up(&self, a: usize, b: usize) -> Result<()> {
        for (x, y) in [(a, b), (b, a)] {
            let (nx, ny) = (&self.inner.nodes[x], &self.inner.nodes[y]);
            let dev = format!("to-{}", ny.name);
            ip(&["-n", &nx.netns, "link", "set", &dev, "up"])?;
            ip(&[
                "-n",
                &nx.netns,
                "route",
                "replace",
                &format!("{}/32", ny.addr),
                "dev",
                &dev,
                "src",
                &nx.addr.to_string(),
            ])?;
        }
        Ok(())
    }

    fn start_holder(&self, i: usize) -> Result<()> {
        let n = &self.inner.nodes[i];
        let d = n.dir.display();
        let ready = n.dir.join("holder.ready");
        // A private /run (corosync.pid, libqb's /run/crm, agent state) and
        // /dev/shm, and Pacemaker's and Corosync's hard-coded state dirs bound
        // from the node's dir. Every later exec keeps this PID.
        let script = format!(
            "set -e\n\
             hostname {name}\n\
             mount -t tmpfs -o mode=755 tmpfs /run\n\
             {run_dirs}\n\
             mount -t tmpfs -o mode=1777 tmpfs /dev/shm\n\
             mount --bind {d}/lib-pacemaker /var/lib/pacemaker\n\
             mount --bind {d}/log-pacemaker /var/log/pacemaker\n\
             mount --bind {d}/lib-corosync /var/lib/corosync\n\
             : > {ready}\n\
             exec sleep infinity\n",
            name = n.name,
            ready = ready.display(),
            run_dirs = RUN_DIRS,
        );
        let log = File::create(n.dir.join("holder.log"))?;
        let mut st = self.state();
        ensure!(!st.torn_down, "cluster {} is torn down", self.id());
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &n.netns,
                "unshare",
                "-m",
                "-u",
                "--propagation",
                "private",
                "sh",
                "-c",
            ])
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .context("starting the namespace holder")?;
        let pid = i32::try_from(child.id())?;
        drop(child);
        st.nodes[i].holder = Some(pid);
        fs::write(n.dir.join("holder.pid"), format!("{pid}\n"))?;
        drop(st);
        process::poll(
            &format!("namespace holder of {}", n.name),
            Duration::from_secs(10),
            Duration::from_millis(10),
            || {
                if ready.exists() {
                    Ok(())
                } else if !process::alive(pid) {
                    Err(format!(
                        "holder exited: {}",
                        fs::read_to_string(n.dir.join("holder.log"))
                            .unwrap_or_default()
                            .trim()
                    ))
                } else {
                    Err("mounts not ready".into())
                }
            },
        )
    }

    fn nsenter(&self, i: usize) -> Result<Command> {
        let holder = self.state().nodes[i]
            .holder
            .with_context(|| format!("{} has no namespace holder", self.inner.nodes[i].name))?;
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &holder.to_string(), "-n", "-m", "-u", "--"]);
        Ok(cmd)
    }

    // Spawns a long-running process inside node i, returns its PID (nsenter
    // execs it, so the PID is the program's own).
    fn spawn_in(&self, i: usize, args: &[&str], envs: &[(&str, &str)], log: &str) -> Result<i32> {
        ensure!(!args.is_empty(), "nothing to run");
        let out = File::options()
            .create(true)
            .append(true)
            .open(self.inner.nodes[i].dir.join(log))?;
        let mut cmd = self.nsenter(i)?;
        cmd.args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0);
        let st = self.state();
        ensure!(!st.torn_down, "cluster {} is torn down", self.id());
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {args:?} in {}", self.inner.nodes[i].name))?;
        let pid = i32::try_from(child.id())?;
        drop(child);
        drop(st);
        Ok(pid)
    }

    fn start_corosync(&self, i: usize) -> Result<()> {
        let conf = self.root().join("corosync.conf");
        let conf = conf.to_string_lossy();
        let pid = self.spawn_in(i, &["corosync", "-f", "-c", &conf], &[], "corosync.stdout")?;
        self.state().nodes[i].corosync = Some(pid);
        Ok(())
    }

    fn wait_corosync(&self, i: usize) -> Result<()> {
        let name = self.inner.nodes[i].name.clone();
        process::poll(
            &format!("corosync on {name} to answer"),
            Duration::from_secs(20),
            Duration::from_millis(100),
            || {
                let out = self
                    .exec_idx(i, &["corosync-quorumtool", "-s"], Duration::from_secs(5))
                    .map_err(|e| e.to_string())?;
                if out.stdout.contains("Quorate:") {
                    Ok(())
                } else {
                    Err(format!("{} {}", out.stdout.trim(), out.stderr.trim()))
                }
            },
        )
    }

    fn start_pacemakerd(&self, i: usize) -> Result<()> {
        let pid = self.spawn_in(
            i,
            &["pacemakerd"],
            &[("PCMK_logfile", "/var/log/pacemaker/pacemaker.log")],
            "pacemakerd.stdout",
        )?;
        self.state().nodes[i].pacemakerd = Some(pid);
        Ok(())
    }

    fn exec_idx(&self, i: usize, args: &[&str], timeout: Duration) -> Result<CmdOutput> {
        ensure!(!args.is_empty(), "nothing to run");
        let mut cmd = self.nsenter(i)?;
        cmd.args(args);
        process::run(&mut cmd, timeout)
    }

    /// Runs a command inside the node's namespaces and captures its output
    /// (any exit status; see [`CmdOutput::ok`]). Bounded by 60 s.
    pub fn exec(&self, node: &str, args: &[&str]) -> Result<CmdOutput> {
        self.exec_idx(self.idx(node)?, args, CMD_TIMEOUT)
    }

    /// Like [`exec`](Self::exec), failing on a non-zero exit status.
    pub fn exec_ok(&self, node: &str, args: &[&str]) -> Result<CmdOutput> {
        self.exec(node, args)?.ok()
    }

    /// Starts a long-running process inside the node, with extra environment,
    /// logging stdout/stderr to `<log_dir>/<label>.log`. It is tracked: killed
    /// by [`stop_process`](Self::stop_process), a crash or fence of the node,
    /// or teardown. Returns its PID.
    pub fn spawn(
        &self,
        node: &str,
        label: &str,
        args: &[&str],
        envs: &[(&str, &str)],
    ) -> Result<i32> {
        let i = self.idx(node)?;
        let pid = self.spawn_in(i, args, envs, &format!("{label}.log"))?;
        self.state().nodes[i].spawned.push((pid, label.to_owned()));
        Ok(pid)
    }

    /// SIGTERMs a process started with [`spawn`](Self::spawn), SIGKILL after `grace`.
    pub fn stop_process(&self, node: &str, pid: i32, grace: Duration) -> Result<()> {
        let i = self.idx(node)?;
        {
            let mut st = self.state();
            let sp = &mut st.nodes[i].spawned;
            let pos = sp
                .iter()
                .position(|(p, _)| *p == pid)
                .with_context(|| format!("PID {pid} was not spawned in {node} by the harness"))?;
            sp.remove(pos);
        }
        let left = process::terminate(&[pid], grace);
        ensure!(left.is_empty(), "PID {pid} in {node} survived SIGKILL");
        Ok(())
    }

    /// crm_mon's XML view from inside `node`, with the full fence history.
    pub fn crm_mon(&self, node: &str) -> Result<CrmMon> {
        let out = self
            .exec(
                node,
                &["crm_mon", "-1", "--output-as=xml", "--fence-history=3"],
            )?
            .ok()?;
        CrmMon::parse(&out.stdout)
    }

    /// crm_mon's text view (`crm_mon -1`) from inside `node`.
    pub fn crm_mon_text(&self, node: &str) -> Result<String> {
        Ok(self
            .exec_ok(node, &["crm_mon", "-1", "--fence-history=1"])?
            .stdout)
    }

    /// Polls crm_mon on `from` until `expect` holds; the error names the last
    /// state seen. Returns the matching view.
    pub fn wait_for(&self, from: &str, expect: Expect, timeout: Duration) -> Result<CrmMon> {
        process::poll(
            &format!("{} (seen from {from})", expect.description()),
            timeout,
            POLL,
            || match self.crm_mon(from) {
                Ok(m) if expect.matches(&m) => Ok(m),
                Ok(m) => Err(m.summary()),
                Err(e) => Err(format!("crm_mon failed: {e:#}")),
            },
        )
        .with_context(|| {
            format!(
                "logs: {}",
                self.log_dir(from)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            )
        })
    }

    /// Kills every process of `node` except its namespace holder, like pulling
    /// the power cord, without Pacemaker noticing first. Returns the victims.
    pub fn crash(&self, node: &str) -> Result<Vec<i32>> {
        let i = self.idx(node)?;
        // A process forked while the sweep ran (an agent execd started, a
        // crm_mon of the daemon) is in no list yet and would outlive a single
        // sweep, as it would never outlive a power cut: sweep until the
        // node's namespace is empty (CI: "node3 is not powered off" at the
        // next power-on).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut killed = Vec::new();
        loop {
            let pids = self.node_pids(node)?;
            if pids.is_empty() {
                break;
            }
            ensure!(
                std::time::Instant::now() < deadline,
                "processes {pids:?} of {node} keep appearing after 10 s of SIGKILL sweeps"
            );
            let left = process::kill_all(&pids);
            ensure!(
                left.is_empty(),
                "processes {left:?} of {node} survived SIGKILL"
            );
            killed.extend(pids);
        }
        self.forget_dead(i);
        Ok(killed)
    }

    // Drops PIDs of node i that are no longer alive, reaping what is ours.
    fn forget_dead(&self, i: usize) {
        let mut st = self.state();
        let np = &mut st.nodes[i];
        for slot in [&mut np.corosync, &mut np.pacemakerd] {
            if let Some(p) = *slot {
                process::reap(p);
                if !process::alive(p) {
                    *slot = None;
                }
            }
        }
        np.spawned.retain(|(p, _)| {
            process::reap(*p);
            process::alive(*p)
        });
        drop(st);
        reap_daemon_zombies();
    }

    /// Whether corosync of `node` runs.
    pub fn is_running(&self, node: &str) -> Result<bool> {
        let i = self.idx(node)?;
        self.forget_dead(i);
        Ok(self.state().nodes[i].corosync.is_some())
    }

    /// "Powers on" a crashed or fenced node: clears the stale pid file and IPC
    /// files, starts Corosync and Pacemaker, and waits (up to `timeout`) until
    /// the node has joined: its controller is past `S_PENDING` and every other
    /// running node sees it online.
    pub fn power_on(&self, node: &str, timeout: Duration) -> Result<()> {
        self.power_on_with(node, timeout, || Ok(()))
    }

    /// [`power_on`](Self::power_on) with `before_pacemaker` run once
    /// Corosync answers and before pacemakerd starts: where a host's units
    /// start what Pacemaker's first probe must find (a daemon an agent talks
    /// to is ordered before pacemaker.service), so the probe sees it as a
    /// real boot would. An error stops the power-on before Pacemaker starts.
    pub fn power_on_with(
        &self,
        node: &str,
        timeout: Duration,
        before_pacemaker: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let i = self.idx(node)?;
        self.forget_dead(i);
        let leftovers = self.node_pids(node)?;
        ensure!(
            leftovers.is_empty(),
            "{node} is not powered off: processes {leftovers:?} still run"
        );
        // A reboot starts with an empty /run and /dev/shm: no stale pid or
        // IPC files, and nothing a daemon kept "for this boot only" (its
        // boot identity, markers) survives into the next one.
        let fresh = format!(
            "set -e\n\
             find /run /dev/shm -mindepth 1 -maxdepth 1 -exec rm -rf {{}} +\n\
             {RUN_DIRS}\n"
        );
        self.exec_ok(node, &["sh", "-c", &fresh])?;
        self.start_corosync(i)?;
        self.wait_corosync(i)?;
        before_pacemaker().with_context(|| format!("booting {node} before Pacemaker"))?;
        self.start_pacemakerd(i)?;
        self.wait_joined(i, timeout)
    }

    /// The state of `node`'s controller (`S_NOT_DC`, `S_IDLE`, …), asked
    /// locally: asking a node that is down would hang crmadmin.
    pub fn controller_state(&self, node: &str) -> Result<String> {
        let i = self.idx(node)?;
        let out = self
            .exec_idx(
                i,
                &["crmadmin", "-S", node, "--output-as=xml", "-t", "5000"],
                Duration::from_secs(10),
            )?
            .ok()?;
        let doc = roxmltree::Document::parse(&out.stdout).context("crmadmin output is not XML")?;
        doc.descendants()
            .find(|n| n.has_tag_name("crmd"))
            .and_then(|n| n.attribute("state"))
            .map(str::to_owned)
            .with_context(|| format!("no controller state in {:?}", out.stdout))
    }

    // Waits until node i has completed its join: its controller left
    // S_PENDING (a node still joining looks online in its own stale CIB,
    // and a node cut off before its join completes is not fenced, as
    // Pacemaker never counted it in), and every other running node sees it
    // online.
    fn wait_joined(&self, i: usize, timeout: Duration) -> Result<()> {
        let name = self.inner.nodes[i].name.clone();
        let others: Vec<usize> = (0..self.len())
            .filter(|&j| j != i && self.state().nodes[j].corosync.is_some_and(process::alive))
            .collect();
        process::poll(
            &format!("{name} to join the cluster"),
            timeout,
            POLL,
            || {
                let st = self.controller_state(&name).map_err(|e| format!("{e:#}"))?;
                if !matches!(
                    st.as_str(),
                    "S_NOT_DC" | "S_IDLE" | "S_POLICY_ENGINE" | "S_TRANSITION_ENGINE"
                ) {
                    return Err(format!("{name}'s controller in {st}"));
                }
                for &j in &others {
                    let from = &self.inner.nodes[j].name;
                    let m = self
                        .crm_mon(from)
                        .map_err(|e| format!("crm_mon on {from}: {e:#}"))?;
                    if !m.node(&name).is_some_and(|s| s.online) {
                        return Err(format!("{from} sees {}", m.summary()));
                    }
                }
                Ok(())
            },
        )
    }

    /// Fences `node` with `stonith_admin --reboot`, asked from another running
    /// node; returns when fenced reports the result.
    pub fn fence(&self, node: &str) -> Result<()> {
        let i = self.idx(node)?;
        let from = (0..self.len())
            .filter(|&j| j != i)
            .find(|&j| self.state().nodes[j].corosync.is_some_and(process::alive))
            .with_context(|| format!("no running node left to fence {node} from"))?;
        self.exec_idx(
            from,
            &["stonith_admin", "--reboot", node, "--timeout", "60"],
            Duration::from_secs(90),
        )?
        .ok()
        .with_context(|| format!("fencing {node} from {}", self.inner.nodes[from].name))?;
        self.forget_dead(i);
        Ok(())
    }

    /// Cuts the network between two nodes (their veth pair goes down on both sides).
    pub fn cut(&self, a: &str, b: &str) -> Result<()> {
        let (ia, ib) = (self.idx(a)?, self.idx(b)?);
        ensure!(ia != ib, "cannot cut {a} from itself");
        for (x, y) in [(ia, ib), (ib, ia)] {
            let dev = format!("to-{}", self.inner.nodes[y].name);
            ip(&[
                "-n",
                &self.inner.nodes[x].netns,
                "link",
                "set",
                &dev,
                "down",
            ])?;
        }
        Ok(())
    }

    /// Heals a cut made by [`cut`](Self::cut).
    pub fn heal(&self, a: &str, b: &str) -> Result<()> {
        let (ia, ib) = (self.idx(a)?, self.idx(b)?);
        ensure!(ia != ib, "cannot heal {a} with itself");
        self.link_up(ia, ib)
    }

    /// Waits until the cluster has no pending actions (`crm_resource --wait`,
    /// asked on `node`), e.g. before disturbing it on purpose.
    pub fn wait_idle(&self, node: &str, timeout: Duration) -> Result<()> {
        let secs = format!("--timeout={}s", timeout.as_secs().max(1));
        self.exec_idx(
            self.idx(node)?,
            &["crm_resource", "--wait", &secs],
            timeout + Duration::from_secs(10),
        )?
        .ok()
        .map(|_| ())
        .with_context(|| format!("cluster {} did not settle within {timeout:?}", self.id()))
    }

    /// Creates a resource from raw CIB XML (`cibadmin -C -o resources`) on `node`.
    pub fn add_resource(&self, node: &str, xml: &str) -> Result<()> {
        self.exec_ok(node, &["cibadmin", "-C", "-o", "resources", "-X", xml])
            .map(|_| ())
    }

    /// Tears the cluster down now (Drop does the same).
    pub fn stop(self) {
        self.inner.teardown();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.inner.teardown();
    }
}

// Our own zombie children that were Pacemaker or Corosync daemons (orphans of
// a killed pacemakerd re-parented to us as subreaper). Only reaped, never
// signalled: the name check only keeps us from stealing the exit status of
// unrelated children (e.g. a concurrent `process::run`).
fn reap_daemon_zombies() {
    let me = std::process::id().to_string();
    let Ok(entries) = fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let mut rest = stat[close + 1..].split_whitespace();
        let (state, ppid) = (rest.next(), rest.next());
        if state == Some("Z")
            && ppid == Some(me.as_str())
            && (comm.starts_with("pacemaker")
                || comm.starts_with("corosync")
                || comm == "fence_warden_tes")
        {
            process::reap(pid);
        }
    }
}

impl Teardown for Inner {
    fn teardown(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.torn_down {
            return;
        }
        st.torn_down = true;
        let n = self.nodes.len();
        // 1. what tests started inside the nodes
        let spawned: Vec<i32> = st
            .nodes
            .iter_mut()
            .flat_map(|p| p.spawned.drain(..).map(|x| x.0))
            .collect();
        process::terminate(&spawned, Duration::from_secs(3));
        // 2. Pacemaker, all nodes at once (nobody is left to fence a leaving
        //    peer). A clean stop takes about a second; but a DC whose
        //    transition still waits on a node that just left (e.g. right after
        //    a power-on) sits on its own shutdown request until Corosync goes
        //    away (15-20 s seen with 2.1.5, whatever the stop order), so the
        //    grace period is short and SIGKILL finishes the job.
        let pcmk: Vec<i32> = st.nodes[..n]
            .iter_mut()
            .filter_map(|p| p.pacemakerd.take())
            .collect();
        process::terminate(&pcmk, Duration::from_secs(5));
        // 3. Corosync
        let coro: Vec<i32> = st.nodes[..n]
            .iter_mut()
            .filter_map(|p| p.corosync.take())
            .collect();
        process::terminate(&coro, Duration::from_secs(5));
        // 4. anything left in the nodes' mount namespaces, then the holders
        for p in &mut st.nodes[..n] {
            if let Some(h) = p.holder.take() {
                if let Some(ns) = process::mount_ns(h) {
                    let rest = process::pids_in_mount_ns(&ns, &[h]);
                    let left = process::kill_all(&rest);
                    if !left.is_empty() {
                        tracing::error!("{}: PIDs {left:?} survived SIGKILL", self.id);
                    }
                }
                process::kill_all(&[h]);
            }
        }
        reap_daemon_zombies();
        // 5. network namespaces (their veths go with them); the mounts lived
        //    only in the holders' mount namespaces, which died with them.
        for ns in st.netns.drain(..) {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                tracing::error!("deleting network namespace {ns}: {e:#}");
            }
        }
        // 6. the temp dir, unless kept for a post-mortem
        if std::env::var_os(KEEP_ENV).is_some() {
            let _ = fs::remove_file(self.root.join(MARKER));
            eprintln!("{KEEP_ENV} set: keeping {}", self.root.display());
        } else if let Err(e) = fs::remove_dir_all(&self.root) {
            tracing::warn!("removing {}: {e}", self.root.display());
        }
    }
}

/// Tears down clusters left behind by harness processes that died without
/// running teardown (SIGKILL, e.g. a test timeout): their root has a marker
/// whose owner PID is no longer alive. Called by [`Cluster::start`].
pub fn cleanup_stale() {
    let Ok(entries) = fs::read_dir("/tmp") else {
        return;
    };
    for e in entries.flatten() {
        let root = e.path();
        if !root.to_string_lossy().starts_with(ROOT_PREFIX) {
            continue;
        }
        let Ok(owner) = process::read_pid(&root.join(MARKER)) else {
            continue;
        };
        if process::alive(owner) {
            continue;
        }
        tracing::warn!("cleaning up stale test cluster {}", root.display());
        let Ok(dirs) = fs::read_dir(&root) else {
            continue;
        };
        for d in dirs.flatten() {
            let Ok(h) = process::read_pid(&d.path().join("holder.pid")) else {
                continue;
            };
            // Only a holder still in its own (non-host) mount namespace.
            let Some(ns) = process::mount_ns(h) else {
                continue;
            };
            if Some(&ns) == process::mount_ns(1).as_ref() {
                continue;
            }
            process::kill_all(&process::pids_in_mount_ns(&ns, &[h]));
            process::kill_all(&[h]);
        }
        if let Ok(list) = fs::read_to_string(root.join("netns")) {
            for ns in list.lines().filter(|l| !l.is_empty()) {
                let _ = ip(&["netns", "del", ns]);
            }
        }
        let _ = fs::remove_dir_all(&root);
    }
}
