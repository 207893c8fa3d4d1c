//! Field nodes: a two-node cluster (or a three-node one) as operators run
//! it.
//!
//! Each node is a Debian root (built and cached by
//! `tests/images/build-node-image.sh`) booted with systemd as PID 1 by
//! `systemd-nspawn`, on a copy-on-write overlay of the image (the node's
//! disk: it survives power cuts), in a network namespace of its own. A veth
//! pair links two nodes (192.0.2.0/24, the cluster network; three or more
//! are linked through a bridge). A second
//! network, the management network, links each node to a bridge inside a
//! harness-made namespace where one OpenIPMI `ipmi_sim` per node plays that
//! node's BMC (198.51.100.0/24).
//!
//! Each BMC's `startcmd` is the node's launcher: `unshare --pid --fork
//! --kill-child=SIGKILL systemd-nspawn …`. IPMI power on starts it (the node
//! boots); IPMI power off sends it SIGTERM, and `--kill-child` then kills
//! every process of the node at once: a power cut. So `fence_ipmilan` inside
//! the survivor really powers its peer off over the network, and nothing
//! else in the tests kills a node's processes.
//!
//! Installation and cluster creation follow docs/operations.md section 1 and
//! 2: the cluster's certificates made on the first node (`field_tls`),
//! `dpkg -i` of the project's `.deb` on each node, Debian's etcd service
//! masked, the node's TLS files installed and named in its configuration
//! (https on both of etcd's sides, client certificates required), `pcs host auth`, `pcs cluster setup`, `pcs cluster start --all`,
//! then the output of `etcd-warden pcs-config --no-setup` run through `pcs`.
//! The `hacluster` password reaches `chpasswd` and `pcs host auth` on their
//! standard input, and the BMC password lives in root-only files (the BMC's
//! `lan.conf` on the host side, `/etc/pacemaker/bmc.secret` on the nodes, read
//! by fence_ipmilan's `password_script`): neither is ever on a command line.
//!
//! Everything is tracked by PID and torn down on drop, also on panic:
//! BMCs, node launchers (which take their nodes with them), the namespaces'
//! holder processes, the overlay mounts and the work directory.

use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use nix::sys::signal::Signal;

use crate::crm::CrmMon;
use crate::process::{self, CmdOutput};
use crate::teardown::{self, Teardown};

/// The cluster network: node `i` has `192.0.2.{i+1}`.
const RING_NET: &str = "192.0.2";
/// The management network: BMC `i` answers on `198.51.100.{i+1}`, node `i`'s
/// management interface has `198.51.100.{i+11}`.
const MGMT_NET: &str = "198.51.100";
/// The BMC user fence_ipmilan logs in as.
pub const BMC_USER: &str = "admin";
/// The cluster name `pcs cluster setup` gets.
pub const CLUSTER_NAME: &str = "etcd-warden";
/// Where the nodes keep the BMC password (root only).
const BMC_SECRET: &str = "/etc/pacemaker/bmc.secret";
/// fence_ipmilan's `password_script`: prints the BMC password.
/// A permanent node attribute the tests set on the live CIB while
/// pcs-config.sh edits its copy; the script's push must keep it.
const CONCURRENT_EDIT: &str = "etcd-warden-test-concurrent-edit";
const BMC_PASSWORD_SCRIPT: &str = "/usr/local/sbin/bmc-password";

/// What the field cluster is built from.
#[derive(Debug, Clone)]
pub struct FieldOptions {
    /// Debian suite of the node image (`trixie`, `bookworm`).
    pub suite: String,
    /// The etcd-warden `.deb` every node installs with `dpkg -i`.
    pub deb: PathBuf,
    /// Node names: two with `topology = "two-node"`, three or more with
    /// `"ha"`.
    pub names: Vec<String>,
    /// The daemon's `topology`: `two-node` (fencing decides who goes on)
    /// or `ha` (three or more etcd voters, a majority decides; also a 2+1
    /// arbiter cluster).
    pub topology: String,
    /// Configuration drop-ins every node gets in
    /// `/etc/etcd-warden/config.d/` before its first start, as an operator
    /// writes them: (file name, TOML).
    pub drop_ins: Vec<(String, String)>,
    /// TLS on both of etcd's sides, as section 1 installs it (the
    /// default); without it, http URLs, as installations made before TLS
    /// was the default.
    pub tls: bool,
    /// Host directories every node sees read-only at a path of its own
    /// (`systemd-nspawn --bind-ro`): (host path, node path).
    pub binds_ro: Vec<(PathBuf, String)>,
}

impl FieldOptions {
    /// Two nodes, `node-a` and `node-b`, on `suite`.
    pub fn new(suite: &str, deb: &Path) -> Self {
        Self {
            suite: suite.to_owned(),
            deb: deb.to_owned(),
            names: vec!["node-a".into(), "node-b".into()],
            topology: "two-node".into(),
            drop_ins: Vec::new(),
            tls: true,
            binds_ro: Vec::new(),
        }
    }

    /// Three nodes, `node-a`, `node-b` and `node-c`, on `suite`, in the
    /// `ha` topology.
    pub fn three_node(suite: &str, deb: &Path) -> Self {
        Self {
            names: vec!["node-a".into(), "node-b".into(), "node-c".into()],
            topology: "ha".into(),
            ..Self::new(suite, deb)
        }
    }
}

/// One node's fixed facts.
#[derive(Debug, Clone)]
pub struct FieldNode {
    /// Host name, Pacemaker node name and etcd member name.
    pub name: String,
    /// Address on the cluster network.
    pub addr: String,
    /// Its BMC's address on the management network.
    pub bmc_addr: String,
    /// PID of the process holding its network namespace (alive across
    /// power cuts, so writers can stay inside the namespace).
    pub netns_holder: i32,
    pub(crate) dir: PathBuf,
}

impl FieldNode {
    /// etcd's client address on this node.
    pub fn client_addr(&self) -> SocketAddr {
        // Only ever built from the harness's own constants.
        format!("{}:2379", self.addr)
            .parse()
            .expect("harness addresses are valid")
    }
}

struct Inner {
    dir: PathBuf,
    mgmt_holder: Mutex<Option<Child>>,
    holders: Mutex<Vec<Child>>,
    bmcs: Mutex<Vec<(String, Child)>>,
    node_dirs: Vec<PathBuf>,
    /// The cgroup directories made for the nodes (removed at teardown).
    cgroups: Vec<PathBuf>,
    done: Mutex<bool>,
}

impl Teardown for Inner {
    fn teardown(&self) {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if *done {
            return;
        }
        *done = true;
        // BMCs first, so that none starts a node again, then the nodes'
        // launchers (each takes its whole node with it).
        for (_, mut bmc) in self
            .bmcs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = bmc.kill();
            let _ = bmc.wait();
        }
        for d in &self.node_dirs {
            if let Ok(pid) = process::read_pid(&d.join("launcher.pid")) {
                // The file is ours; the launcher may be gone already.
                if process::alive(pid) {
                    process::kill_all(&[pid]);
                }
            }
        }
        for d in &self.node_dirs {
            let root = d.join("root");
            let deadline = Instant::now() + Duration::from_secs(10);
            while is_mounted(&root) && Instant::now() < deadline {
                let _ = Command::new("umount").arg(&root).status();
                if is_mounted(&root) {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            if is_mounted(&root) {
                let _ = Command::new("umount").arg("-l").arg(&root).status();
            }
        }
        for g in &self.cgroups {
            remove_cgroup(g);
        }
        for mut h in self
            .holders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = h.kill();
            let _ = h.wait();
        }
        if let Some(mut h) = self
            .mgmt_holder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            let _ = h.kill();
            let _ = h.wait();
        }
        if std::env::var_os("WARDEN_FIELD_KEEP").is_some() {
            eprintln!("field: kept {}", self.dir.display());
        } else if !self.node_dirs.iter().any(|d| is_mounted(&d.join("root"))) {
            let _ = Command::new("rm")
                .args(["-rf", "--one-file-system"])
                .arg(&self.dir)
                .status();
        }
    }
}

/// A setup that fails before the cluster exists drops the last handle
/// here: what it had made (namespace holders, BMCs, mounts, the work
/// directory) goes with it.
impl Drop for Inner {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Where the cgroup hierarchies that nspawn and the nodes' systemd use are
/// mounted: the unified (v2) one and, on a hybrid host, the named v1
/// `name=systemd` one.
fn cgroup_mounts() -> Vec<PathBuf> {
    let Ok(m) = fs::read_to_string("/proc/self/mounts") else {
        return Vec::new();
    };
    m.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let (dir, fstype, opts) = (f.get(1)?, f.get(2)?, f.get(3)?);
            (*fstype == "cgroup2"
                || (*fstype == "cgroup" && opts.split(',').any(|o| o == "name=systemd")))
            .then(|| PathBuf::from(dir))
        })
        .collect()
}

/// This process's cgroup in the hierarchy mounted at `mount`.
fn own_cgroup(mount: &Path) -> String {
    let v2 = fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(&*mount.to_string_lossy()) && l.contains(" cgroup2 "));
    fs::read_to_string("/proc/self/cgroup")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(':')?;
            let (ctrl, path) = rest.split_once(':')?;
            ((v2 && ctrl.is_empty()) || (!v2 && ctrl == "name=systemd")).then(|| path.to_owned())
        })
        .unwrap_or_else(|| "/".into())
}

/// Removes a cgroup directory and its children, deepest first (a cgroup
/// with processes left is kept: a few retries while they are reaped).
fn remove_cgroup(dir: &Path) {
    fn rm(d: &Path) -> bool {
        if let Ok(entries) = fs::read_dir(d) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    rm(&e.path());
                }
            }
        }
        fs::remove_dir(d).is_ok() || !d.exists()
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !rm(dir) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn is_mounted(p: &Path) -> bool {
    let Ok(m) = fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let p = p.to_string_lossy();
    m.lines().any(|l| l.split(' ').nth(1) == Some(&*p))
}

/// The cluster's `/etc/hosts` lines.
pub(crate) fn hosts_lines(nodes: &[FieldNode]) -> String {
    nodes
        .iter()
        .map(|n| format!("{} {}\n", n.addr, n.name))
        .collect()
}

/// Mounts node `n`'s disk, an overlay whose upper layer holds everything
/// the node ever wrote (fresh when `upper` is new), and writes what the
/// machine comes with from the harness: its host name, the cluster's names
/// in `/etc/hosts`, and the package in `/root`, as an operator copies it.
pub(crate) fn mount_disk(n: &FieldNode, image: &Path, hosts: &str, deb: &Path) -> Result<()> {
    let d = &n.dir;
    for sub in ["upper", "work", "root"] {
        fs::create_dir_all(d.join(sub))?;
    }
    let root = d.join("root");
    sh_run(
        &format!(
            "mount -t overlay overlay -o lowerdir={},upperdir={},workdir={} {}",
            image.display(),
            d.join("upper").display(),
            d.join("work").display(),
            root.display()
        ),
        Duration::from_secs(20),
    )?;
    fs::write(root.join("etc/hostname"), format!("{}\n", n.name))?;
    let mut h = fs::read_to_string(root.join("etc/hosts")).unwrap_or_default();
    if !h.contains(hosts) {
        h.push_str(hosts);
    }
    fs::write(root.join("etc/hosts"), h)?;
    let deb_name = deb.file_name().context("the .deb path has no file name")?;
    fs::copy(deb, root.join("root").join(deb_name))
        .with_context(|| format!("copying {} into {}", deb.display(), n.name))?;
    Ok(())
}

/// A running field cluster; torn down on drop.
pub struct FieldCluster {
    inner: Arc<Inner>,
    /// The nodes, in `--node` order.
    pub nodes: Vec<FieldNode>,
    /// The node image (read-only lower layer).
    pub image: PathBuf,
    /// The package the nodes installed (`FieldOptions::deb`).
    pub deb: PathBuf,
    pub(crate) hacluster_password: String,
    pub(crate) bmc_password_file: PathBuf,
    drop_ins: Vec<(String, String)>,
    /// Whether the nodes' etcd uses TLS: installed so (see
    /// [`FieldOptions::tls`]), or moved to it since ([`FieldCluster::set_tls`]).
    tls: std::sync::atomic::AtomicBool,
    /// The daemon's topology (see [`FieldOptions::topology`]).
    pub topology: String,
    /// Seconds each setup stage took, for the benchmarks.
    pub timings: Vec<(String, Duration)>,
}

impl Drop for FieldCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_journals();
        }
        self.inner.teardown();
    }
}

/// Hex of `n` random bytes from the kernel.
pub fn random_hex(n: usize) -> Result<String> {
    let mut b = vec![0u8; n];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom")?;
    Ok(b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    }))
}

pub(crate) fn write_file(path: &Path, body: &str, mode: u32) -> Result<()> {
    fs::write(path, body).with_context(|| format!("writing {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

fn sh_run(cmd: &str, timeout: Duration) -> Result<CmdOutput> {
    process::run(Command::new("sh").args(["-c", cmd]), timeout)?.ok()
}

/// A process that does nothing but hold a new network namespace.
fn netns_holder() -> Result<Child> {
    let c = Command::new("unshare")
        .args(["--net", "--", "sleep", "infinity"])
        .stdin(Stdio::null())
        .spawn()
        .context("starting a network namespace holder (unshare --net)")?;
    let pid = c.id() as i32;
    // unshare execs sleep once the namespace exists.
    process::poll(
        "the namespace holder to exec sleep",
        Duration::from_secs(5),
        Duration::from_millis(10),
        || match fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(s) if s.trim() == "sleep" => Ok(()),
            Ok(s) => Err(s.trim().to_owned()),
            Err(e) => Err(e.to_string()),
        },
    )?;
    Ok(c)
}

/// Runs `cmd` (a shell line) inside the network namespace of `pid`.
fn in_netns(pid: i32, cmd: &str) -> Result<CmdOutput> {
    sh_run(
        &format!("nsenter --net=/proc/{pid}/ns/net sh -c '{cmd}'"),
        Duration::from_secs(20),
    )
}

/// The children of `pid`, from /proc.
fn children(pid: i32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = s[s.rfind(')')? + 1..].to_owned();
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

fn comm(pid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// The cluster network (`ring0` in every node, 192.0.2.0/24): one veth
/// pair between two nodes; with more, a bridge (`ring`) in the management
/// network's namespace, which carries no address on it, so that the nodes
/// reach each other only through it.
fn cluster_network(mgmt_pid: i32, nodes: &[FieldNode]) -> Result<()> {
    if let [a, b] = nodes {
        in_netns(
            a.netns_holder,
            &format!(
                "ip link add ring0 type veth peer name ring0 netns {}",
                b.netns_holder
            ),
        )?;
    } else {
        in_netns(
            mgmt_pid,
            "ip link add ring type bridge && ip link set ring up",
        )?;
        for (i, n) in nodes.iter().enumerate() {
            in_netns(
                mgmt_pid,
                &format!(
                    "ip link add r{i} type veth peer name ring0 netns {} && ip link set r{i} master ring && ip link set r{i} up",
                    n.netns_holder
                ),
            )?;
        }
    }
    for n in nodes {
        in_netns(
            n.netns_holder,
            &format!(
                "ip addr add {}/24 dev ring0 && ip link set ring0 up",
                n.addr
            ),
        )?;
    }
    Ok(())
}

/// Builds (or finds in the cache) the node image of `suite`.
pub fn node_image(suite: &str) -> Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../images/build-node-image.sh");
    let start = Instant::now();
    let out = Command::new(&script)
        .arg(suite)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    ensure!(
        out.status.success(),
        "{} {suite} failed ({})",
        script.display(),
        out.status
    );
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    eprintln!(
        "field: node image {} ready after {:.1} s",
        p.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(p)
}

impl FieldCluster {
    /// Boots the nodes and their BMCs, installs the package and creates
    /// the cluster with pcs; returns once every node is online, every
    /// fence device and every etcd instance started.
    pub fn start(opts: &FieldOptions) -> Result<Self> {
        match opts.topology.as_str() {
            "two-node" => ensure!(
                opts.names.len() == 2,
                "a two-node field cluster has two nodes, not {}",
                opts.names.len()
            ),
            "ha" => ensure!(
                (3..=9).contains(&opts.names.len()),
                "an ha field cluster has 3 to 9 nodes, not {}",
                opts.names.len()
            ),
            t => bail!("topology {t:?}: the field cluster runs two-node or ha"),
        }
        process::become_subreaper();
        let mut timings = Vec::new();
        let t = Instant::now();
        let image = node_image(&opts.suite)?;
        timings.push(("image (build or cache)".into(), t.elapsed()));

        let dir = tempfile::Builder::new()
            .prefix("etcd-warden-field.")
            .tempdir_in("/var/tmp")
            .context("creating the field work directory")?
            .keep();
        let node_dirs: Vec<PathBuf> = opts.names.iter().map(|n| dir.join(n)).collect();
        // Each node's processes in a cgroup of its own. nspawn puts the
        // container under its own cgroup (`…/payload`); two nodes started
        // from one cgroup would share one tree, and a unit of the same name
        // on both (etcd-warden-etcd.service, corosync.service) would be one
        // cgroup: `systemctl kill -s KILL` on one node (cgroup.kill) would
        // kill the other node's processes too.
        let group = dir
            .file_name()
            .context("the work directory has no name")?
            .to_string_lossy()
            .into_owned();
        let cgroups: Vec<PathBuf> = cgroup_mounts()
            .into_iter()
            .map(|m| {
                let own = own_cgroup(&m);
                m.join(own.trim_start_matches('/')).join(&group)
            })
            .collect();
        let inner = Arc::new(Inner {
            dir: dir.clone(),
            mgmt_holder: Mutex::new(None),
            holders: Mutex::new(Vec::new()),
            bmcs: Mutex::new(Vec::new()),
            node_dirs: node_dirs.clone(),
            cgroups: cgroups.clone(),
            done: Mutex::new(false),
        });
        teardown::register(Arc::downgrade(&inner) as std::sync::Weak<dyn Teardown>);

        let hacluster_password = random_hex(12)?;
        let bmc_password = random_hex(8)?;
        let bmc_password_file = dir.join("bmc-password");
        write_file(&bmc_password_file, &format!("{bmc_password}\n"), 0o600)?;

        // The management network: a bridge in a namespace of its own,
        // carrying every BMC address.
        let mgmt = netns_holder()?;
        let mgmt_pid = mgmt.id() as i32;
        *inner.mgmt_holder.lock().unwrap_or_else(|e| e.into_inner()) = Some(mgmt);
        let mut bridge =
            "ip link set lo up && ip link add br0 type bridge && ip link set br0 up".to_string();
        for i in 0..opts.names.len() {
            let _ = write!(bridge, " && ip addr add {MGMT_NET}.{}/24 dev br0", i + 1);
        }
        in_netns(mgmt_pid, &bridge)?;

        let mut nodes = Vec::new();
        for (i, name) in opts.names.iter().enumerate() {
            let holder = netns_holder()?;
            let hp = holder.id() as i32;
            inner
                .holders
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(holder);
            in_netns(hp, "ip link set lo up")?;
            in_netns(
                mgmt_pid,
                &format!(
                    "ip link add m{i} type veth peer name mgmt0 netns {hp} && ip link set m{i} master br0 && ip link set m{i} up"
                ),
            )?;
            in_netns(
                hp,
                &format!(
                    "ip addr add {MGMT_NET}.{}/24 dev mgmt0 && ip link set mgmt0 up",
                    i + 11
                ),
            )?;
            nodes.push(FieldNode {
                name: name.clone(),
                addr: format!("{RING_NET}.{}", i + 1),
                bmc_addr: format!("{MGMT_NET}.{}", i + 1),
                netns_holder: hp,
                dir: node_dirs[i].clone(),
            });
        }
        cluster_network(mgmt_pid, &nodes)?;

        let hosts = hosts_lines(&nodes);
        let mut binds = String::new();
        for (host, node) in &opts.binds_ro {
            ensure!(
                host.is_dir() && node.starts_with('/') && !node.contains(':'),
                "bad read-only bind {} -> {node}",
                host.display()
            );
            let _ = write!(binds, " --bind-ro={}:{node}", host.display());
        }
        let deb_name = opts
            .deb
            .file_name()
            .context("the .deb path has no file name")?
            .to_owned();
        for (i, n) in nodes.iter().enumerate() {
            let d = &n.dir;
            for sub in ["root", "bmc-state"] {
                fs::create_dir_all(d.join(sub))?;
            }
            mount_disk(n, &image, &hosts, &opts.deb)?;
            let mut join_cgroup = String::new();
            for g in &cgroups {
                let cg = g.join(&n.name);
                fs::create_dir_all(&cg)
                    .with_context(|| format!("creating the cgroup {}", cg.display()))?;
                let _ = writeln!(join_cgroup, "echo 0 > {}/cgroup.procs", cg.display());
            }
            write_file(
                &d.join("nspawn.sh"),
                &format!(
                    "#!/bin/sh\n\
                     # The node's own cgroup (see FieldCluster::start), then the node.\n\
                     {join_cgroup}\
                     export SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1\n\
                     exec systemd-nspawn --quiet --register=no --keep-unit{binds} \
                     -M {name} --hostname={name} -D {dir}/root --network-namespace-path=/proc/{hp}/ns/net -b\n",
                    dir = d.display(),
                    name = n.name,
                    hp = n.netns_holder,
                    binds = binds
                ),
                0o755,
            )?;
            write_file(
                &d.join("launch.sh"),
                &format!(
                    "#!/bin/sh\n\
                     # Power on: started by this node's BMC (ipmi_sim startcmd). The\n\
                     # BMC's power off SIGTERMs this process; --kill-child then kills\n\
                     # the whole node at once. A reboot inside the node ends\n\
                     # systemd-nspawn (status 133) and so this process: the BMC then\n\
                     # reports power off, and IPMI power on boots the node again.\n\
                     echo $$ > {dir}/launcher.pid\n\
                     exec unshare --pid --fork --kill-child=SIGKILL {dir}/nspawn.sh \
                     >>{dir}/console.log 2>&1 </dev/null\n",
                    dir = d.display(),
                ),
                0o755,
            )?;
            write_file(
                &d.join("lan.conf"),
                &format!(
                    "name \"bmc-{name}\"\n\
                     set_working_mc 0x20\n\
                     startlan 1\n\
                     addr {addr} 623\n\
                     priv_limit admin\n\
                     allowed_auths_callback md2 md5\n\
                     allowed_auths_user md2 md5\n\
                     allowed_auths_operator md2 md5\n\
                     allowed_auths_admin md2 md5\n\
                     guid {guid}\n\
                     endlan\n\
                     serial 15 127.0.0.1 {port} codec VM\n\
                     startcmd \"{dir}/launch.sh\"\n\
                     startnow true\n\
                     poweroff_wait 1\n\
                     kill_wait 2\n\
                     user 2 true \"{BMC_USER}\" \"{bmc_password}\" admin 10 md2 md5\n",
                    name = n.name,
                    addr = n.bmc_addr,
                    guid = random_hex(16)?,
                    port = 9100 + i,
                    dir = d.display(),
                ),
                0o600,
            )?;
            write_file(
                &d.join("bmc.emu"),
                "mc_setbmc 0x20\n\
                 mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\n\
                 sel_enable 0x20 1000 0x0a\n\
                 mc_enable 0x20\n",
                0o600,
            )?;
        }

        let mut me = Self {
            inner,
            nodes,
            image,
            deb: opts.deb.clone(),
            hacluster_password,
            bmc_password_file,
            drop_ins: opts.drop_ins.clone(),
            tls: std::sync::atomic::AtomicBool::new(opts.tls),
            topology: opts.topology.clone(),
            timings,
        };
        // A setup that fails returns an error, not a panic: the journals
        // are printed here then, before the nodes are torn down.
        if let Err(e) = me.boot_and_create(&deb_name.to_string_lossy()) {
            eprintln!("field: setup failed: {e:#}");
            me.dump_journals();
            return Err(e);
        }
        Ok(me)
    }

    /// Prints what each running node's journal says about etcd-warden,
    /// Pacemaker and Corosync (the tail), and its crm_mon view, for a test
    /// that failed.
    pub fn dump_journals(&self) {
        for n in &self.nodes {
            if self.pid1(&n.name).is_none() {
                // A node that is off (fenced, powered off) still has its disk:
                // its persistent journal, read from the host.
                let journal = n.dir.join("upper/var/log/journal");
                let read = |args: &[&str]| {
                    process::run(
                        Command::new("journalctl")
                            .arg("-D")
                            .arg(&journal)
                            .arg("--no-pager")
                            .args(args),
                        Duration::from_secs(30),
                    )
                    .map(|o| o.stdout)
                    .unwrap_or_else(|e| format!("(no journal: {e:#})\n"))
                };
                let pcmk = read(&["-n", "120", "-u", "pacemaker", "-u", "corosync"]);
                // The daemon's structured fields only show in the verbose form.
                let warden: String = read(&["-n", "80", "-o", "verbose", "-u", "etcd-warden"])
                    .lines()
                    .filter(|l| {
                        !l.starts_with(' ')
                            || l.starts_with("    MESSAGE=")
                            || l.starts_with("    F_")
                    })
                    .map(|l| format!("{l}\n"))
                    .collect();
                eprintln!(
                    "--- {}: not running; its journal on disk ---\n{pcmk}--- etcd-warden (verbose) ---\n{warden}",
                    n.name
                );
                continue;
            }
            match self.node_sh(
                &n.name,
                // The daemon's structured fields (the error, the step) are
                // journal fields of their own: only the verbose form shows
                // them.
                "journalctl --no-pager -n 120 -u pacemaker -u corosync
                 echo '--- etcd-warden (verbose) ---'
                 journalctl --no-pager -n 80 -o verbose -u etcd-warden | grep -E '^[^ ]|^    (MESSAGE|F_[A-Z_]+)='
                 echo '--- systemd about etcd-warden-etcd.service (systemd backend) ---'
                 journalctl --no-pager -n 20 _PID=1 | grep etcd-warden-etcd
                 crm_mon -1 -r",
            ) {
                Ok(j) => eprintln!("--- {} journal ---\n{}{}", n.name, j.stdout, j.stderr),
                Err(e) => eprintln!("--- {}: no journal: {e:#} ---", n.name),
            }
        }
    }

    /// Powers the nodes on through their BMCs, installs the package and
    /// creates the cluster.
    fn boot_and_create(&mut self, deb_name: &str) -> Result<()> {
        let me = self;
        let mgmt_pid = me.mgmt_pid()?;

        // Power on: each BMC starts its node (startnow).
        let t = Instant::now();
        for n in &me.nodes {
            let d = &n.dir;
            let log = fs::File::create(d.join("bmc.log"))?;
            let bmc = Command::new("nsenter")
                .arg(format!("--net=/proc/{mgmt_pid}/ns/net"))
                .arg("ipmi_sim")
                .args(["-n", "-c"])
                .arg(d.join("lan.conf"))
                .arg("-f")
                .arg(d.join("bmc.emu"))
                .arg("-s")
                .arg(d.join("bmc-state"))
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .context("starting ipmi_sim")?;
            me.inner
                .bmcs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((n.name.clone(), bmc));
        }
        for i in 0..me.nodes.len() {
            let name = me.nodes[i].name.clone();
            me.wait_booted(&name, Duration::from_secs(120))?;
        }
        me.timings.push(("every node booted".into(), t.elapsed()));
        if me.tls() {
            let t = Instant::now();
            me.make_pki()?;
            me.timings
                .push(("certificates made and copied".into(), t.elapsed()));
        }

        // Both nodes at once: each installs on its own disk, as two operators
        // (or one with a parallel shell) would.
        let t = Instant::now();
        let names: Vec<String> = me.nodes.iter().map(|n| n.name.clone()).collect();
        let this = &*me;
        std::thread::scope(|s| {
            let installs: Vec<_> = names
                .iter()
                .map(|n| s.spawn(move || this.install(n, deb_name)))
                .collect();
            installs
                .into_iter()
                .zip(&names)
                .try_for_each(|(h, n)| match h.join() {
                    Ok(r) => r.with_context(|| format!("installing on {n}")),
                    Err(_) => Err(anyhow::anyhow!("the install on {n} panicked")),
                })
        })?;
        me.timings
            .push(("package installed and configured".into(), t.elapsed()));
        let t = Instant::now();
        me.create_cluster()?;
        me.timings
            .push(("pcs cluster created, etcd on both".into(), t.elapsed()));
        for (what, d) in &me.timings {
            eprintln!("field: {what}: {:.1} s", d.as_secs_f64());
        }
        Ok(())
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Result<&FieldNode> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .with_context(|| format!("no field node {name}"))
    }

    /// The node's launcher PID (the process its BMC started), if powered.
    pub fn launcher(&self, name: &str) -> Option<i32> {
        let n = self.node(name).ok()?;
        process::read_pid(&n.dir.join("launcher.pid"))
            .ok()
            .filter(|&p| process::alive(p))
    }

    /// What the node's console (systemd-nspawn's output: the boot and
    /// shutdown messages of every power cycle) has shown so far.
    pub fn console(&self, name: &str) -> Result<String> {
        let n = self.node(name)?;
        let p = n.dir.join("console.log");
        let b = fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// The node's systemd (PID 1 inside), if it is running: the child of
    /// systemd-nspawn, below the launcher.
    pub fn pid1(&self, name: &str) -> Option<i32> {
        let mut level = vec![self.launcher(name)?];
        for _ in 0..3 {
            let mut next = Vec::new();
            for p in level {
                for c in children(p) {
                    if comm(c) == "systemd" && comm(p) == "systemd-nspawn" {
                        return Some(c);
                    }
                    next.push(c);
                }
            }
            level = next;
        }
        None
    }

    /// Runs `args` inside the node (all its namespaces), with `stdin` fed.
    pub fn node_cmd_stdin(
        &self,
        name: &str,
        args: &[&str],
        stdin: &str,
        timeout: Duration,
    ) -> Result<CmdOutput> {
        let pid = self
            .pid1(name)
            .with_context(|| format!("{name} is not running"))?;
        let mut child = Command::new("nsenter")
            .arg("-t")
            .arg(pid.to_string())
            .arg("-a")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting nsenter")?;
        if let Some(mut i) = child.stdin.take() {
            i.write_all(stdin.as_bytes())?;
        }
        let pid_c = child.id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(timeout) {
            Ok(o) => o?,
            Err(_) => {
                let _ = process::signal(pid_c, Signal::SIGKILL);
                bail!(
                    "`{}` in {name} did not finish within {timeout:?}",
                    args.join(" ")
                );
            }
        };
        Ok(CmdOutput {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            cmdline: format!("{name}: {}", args.join(" ")),
        })
    }

    /// Runs a shell line inside the node (bash -c), returning its output
    /// whatever the exit status.
    pub fn node_sh(&self, name: &str, cmd: &str) -> Result<CmdOutput> {
        self.node_cmd_stdin(name, &["bash", "-c", cmd], "", Duration::from_secs(120))
    }

    /// Runs a shell line inside the node and fails on a non-zero exit.
    pub fn node_sh_ok(&self, name: &str, cmd: &str) -> Result<CmdOutput> {
        self.node_sh(name, cmd)?.ok()
    }

    /// Waits until the node's systemd reports `running` or `degraded`.
    pub fn wait_booted(&self, name: &str, timeout: Duration) -> Result<String> {
        process::poll(
            &format!("{name} to boot (systemctl is-system-running)"),
            timeout,
            Duration::from_millis(200),
            || {
                let Some(_) = self.pid1(name) else {
                    return Err("no systemd yet".into());
                };
                match self.node_cmd_stdin(
                    name,
                    &["systemctl", "is-system-running"],
                    "",
                    Duration::from_secs(10),
                ) {
                    Ok(o) => {
                        let s = o.stdout.trim().to_owned();
                        if s == "running" || s == "degraded" {
                            Ok(s)
                        } else {
                            Err(s)
                        }
                    }
                    Err(e) => Err(format!("{e:#}")),
                }
            },
        )
    }

    /// Writes node `name`'s `/etc/etcd-warden/config.toml` as section 1
    /// shows it: https URLs and both TLS sections with `tls`, else the
    /// http URLs of an installation from before TLS was the default.
    pub fn write_config(&self, name: &str, tls: bool) -> Result<()> {
        let me = self.node(name)?;
        let scheme = if tls { "https" } else { "http" };
        let mut config = format!(
            "node_name = \"{}\"\ntopology = \"{}\"\n",
            me.name, self.topology
        );
        for n in &self.nodes {
            let _ = write!(
                config,
                "\n[[nodes]]\nname = \"{}\"\npeer_urls = [\"{scheme}://{}:2380\"]\nclient_urls = [\"{scheme}://{}:2379\"]\n",
                n.name, n.addr, n.addr
            );
        }
        if tls {
            config.push_str(&crate::field_tls::tls_config());
        }
        config.push_str("\n[report]\npath = \"/run/etcd-warden/report.json\"\n");
        self.node_cmd_stdin(
            name,
            &["sh", "-c", "cat > /etc/etcd-warden/config.toml"],
            &config,
            Duration::from_secs(20),
        )?
        .ok()?;
        Ok(())
    }

    /// Whether the nodes' etcd uses TLS now (a node installed later gets
    /// the same).
    pub fn tls(&self) -> bool {
        self.tls.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records that the pair was moved to TLS (or back), so that a node
    /// installed afterwards is installed the same way.
    pub fn set_tls(&self, on: bool) {
        self.tls.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// docs/operations.md section 1 on one node, command for command.
    pub fn install(&self, name: &str, deb: &str) -> Result<()> {
        let tls = if self.tls() {
            crate::field_tls::install_tls_commands()
        } else {
            String::new()
        };
        self.node_sh_ok(
            name,
            &format!(
                "set -e
                 dpkg -i /root/{deb}
                 systemctl disable --now etcd.service
                 systemctl mask etcd.service
                 # The runbook's checks: masked, and nothing on etcd's ports.
                 test \"$(systemctl is-enabled etcd.service || true)\" = masked
                 test -z \"$(ss -Htlnp '( sport = :2379 or sport = :2380 )')\"
                 {tls}
                 # A container has no IPMI kernel driver.
                 systemctl disable --now openipmi.service || true
                 systemctl reset-failed"
            ),
        )?;
        self.write_config(name, self.tls())?;
        for (file, body) in &self.drop_ins {
            ensure!(
                !file.is_empty() && !file.contains('/'),
                "bad drop-in name {file:?}"
            );
            self.node_cmd_stdin(
                name,
                &[
                    "sh",
                    "-c",
                    &format!(
                        "mkdir -p /etc/etcd-warden/config.d && cat > /etc/etcd-warden/config.d/{file}"
                    ),
                ],
                body,
                Duration::from_secs(20),
            )?
            .ok()?;
        }
        self.node_sh_ok(name, "systemctl enable --now etcd-warden")?;
        // The hacluster password, on stdin only.
        self.node_cmd_stdin(
            name,
            &["chpasswd"],
            &format!("hacluster:{}\n", self.hacluster_password),
            Duration::from_secs(20),
        )?
        .ok()?;
        // The BMC password: a root-only file, and the script fence_ipmilan
        // runs to read it (password_script), so that it is neither in the
        // CIB nor on a command line.
        let bmc_password = fs::read_to_string(&self.bmc_password_file)?;
        self.node_cmd_stdin(
            name,
            &["sh", "-c", &format!("umask 077 && cat > {BMC_SECRET}")],
            &bmc_password,
            Duration::from_secs(20),
        )?
        .ok()?;
        self.node_sh_ok(
            name,
            &format!(
                "printf '#!/bin/sh\\nexec cat {BMC_SECRET}\\n' > {BMC_PASSWORD_SCRIPT} && chmod 0700 {BMC_PASSWORD_SCRIPT}
                 # Debian's packages leave a one-node default corosync.conf behind;
                 # pcs cluster setup refuses a host that looks like a cluster member.
                 pcs cluster destroy --force >/dev/null 2>&1 || pcs cluster destroy"
            ),
        )?;
        Ok(())
    }

    /// docs/operations.md section 2: the cluster with pcs, then
    /// etcd-warden's resource and fencing from `etcd-warden pcs-config`.
    fn create_cluster(&self) -> Result<()> {
        let first = self.nodes[0].name.clone();
        let members: String = self
            .nodes
            .iter()
            .map(|n| format!(" {} addr={}", n.name, n.addr))
            .collect();
        for n in &self.nodes {
            self.wait_unit_active(&n.name, "pcsd.service", Duration::from_secs(120))?;
        }
        let creds = format!("hacluster\n{}\n", self.hacluster_password);
        self.node_cmd_stdin(
            &first,
            &["bash", "-c", &format!("pcs host auth{members}")],
            &creds,
            Duration::from_secs(120),
        )?
        .ok()?;
        self.node_sh_ok(
            &first,
            &format!(
                "pcs cluster setup {CLUSTER_NAME}{members} && pcs cluster start --all && pcs cluster enable --all"
            ),
        )?;
        let names: Vec<String> = self.nodes.iter().map(|n| n.name.clone()).collect();
        self.wait_crm(&first, "every node online", Duration::from_secs(120), |m| {
            m.dc.is_some() && names.iter().all(|n| m.node(n).is_some_and(|s| s.online))
        })?;
        // The test machine runs other clusters on two cores (load 5-8):
        // Pacemaker's default load-threshold (80%) then throttles the whole
        // cluster to one action at a time, and the first etcd start (which
        // waits for its peer's member) holds that slot while the peer's start
        // is never dispatched. Not part of the operator's procedure.
        // stonith-action=off: a fenced node stays powered off until it is
        // powered on through its BMC, so that the tests see the survivor
        // alone first (with the default reboot it is back within seconds).
        self.node_sh_ok(
            &first,
            "pcs property set load-threshold=2000% stonith-action=off",
        )?;
        let mut pcs_config = format!(
            "etcd-warden pcs-config --no-setup --fence-agent fence_ipmilan \
             --fence-option username={BMC_USER} --fence-option password_script={BMC_PASSWORD_SCRIPT} \
             --fence-option lanplus=1 --fence-option cipher=3"
        );
        for n in &self.nodes {
            let _ = write!(
                pcs_config,
                " --node {}={} --fence-node-option {}:ip={}",
                n.name, n.addr, n.name, n.bmc_addr
            );
        }
        // Someone else edits the configuration while the script works on
        // its copy of the CIB: a permanent node attribute, set on the live
        // CIB right after the script took its copy. The script's push must
        // keep it (a push of the whole configuration section drops it).
        let edit = format!("crm_attribute --node {first} --name {CONCURRENT_EDIT} --update kept");
        let copy = "cp etcd-warden.cib.xml etcd-warden.cib.orig.xml";
        // A script of a dozen pcs commands, each a Python start and a CIB
        // update: on a loaded machine (load 15 on two cores) it has taken
        // more than node_sh's 120 s.
        self.node_cmd_stdin(
            &first,
            &[
                "bash",
                "-c",
                &format!(
                    "cd /root && {pcs_config} > pcs-config.sh && grep -qx '{copy}' pcs-config.sh \
                     && sed -i 's/^{copy}$/&\\n{edit}/' pcs-config.sh && bash pcs-config.sh"
                ),
            ],
            "",
            Duration::from_secs(360),
        )?
        .ok()?;
        self.wait_cluster_healthy(Duration::from_secs(240))?;
        let kept = self.node_sh_ok(
            &first,
            &format!("crm_attribute --node {first} --name {CONCURRENT_EDIT} --query --quiet"),
        )?;
        ensure!(
            kept.stdout.trim() == "kept",
            "pcs-config.sh lost a change made to the CIB while it ran: {CONCURRENT_EDIT} on {first} is {:?}",
            kept.stdout.trim()
        );
        Ok(())
    }

    /// Waits until every node is online, every fence device started and
    /// etcd started on every node, as the first running node's crm_mon
    /// sees it.
    pub fn wait_cluster_healthy(&self, timeout: Duration) -> Result<()> {
        let names: Vec<String> = self.nodes.iter().map(|n| n.name.clone()).collect();
        let viewer = self
            .nodes
            .iter()
            .find(|n| self.pid1(&n.name).is_some())
            .map(|n| n.name.clone())
            .context("no node running")?;
        self.wait_crm(
            &viewer,
            "both online, fence devices and etcd started everywhere",
            timeout,
            |m| {
                names.iter().all(|n| {
                    m.node(n).is_some_and(|s| s.online)
                        && etcd_started_on(m, n)
                        && m.resource(&format!("fence-{n}")).is_some_and(|r| r.active)
                })
            },
        )?;
        Ok(())
    }

    /// crm_mon's XML view from inside `node`.
    pub fn crm_mon(&self, node: &str) -> Result<CrmMon> {
        let o = self.node_cmd_stdin(
            node,
            &["crm_mon", "-1", "--output-as=xml", "--fence-history=3"],
            "",
            Duration::from_secs(30),
        )?;
        CrmMon::parse(&o.stdout)
    }

    /// Polls `node`'s crm_mon until `pred` holds.
    pub fn wait_crm(
        &self,
        node: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&CrmMon) -> bool,
    ) -> Result<CrmMon> {
        process::poll(what, timeout, Duration::from_millis(500), || {
            match self.crm_mon(node) {
                Ok(m) if pred(&m) => Ok(m),
                Ok(m) => Err(m.summary()),
                Err(e) => Err(format!("{e:#}")),
            }
        })
    }

    /// Waits until `unit` is active on `node`.
    pub fn wait_unit_active(&self, node: &str, unit: &str, timeout: Duration) -> Result<()> {
        process::poll(
            &format!("{unit} active on {node}"),
            timeout,
            Duration::from_millis(300),
            || match self.node_sh(node, &format!("systemctl is-active {unit}")) {
                Ok(o) if o.stdout.trim() == "active" => Ok(()),
                Ok(o) => Err(o.stdout.trim().to_owned()),
                Err(e) => Err(format!("{e:#}")),
            },
        )
    }

    /// `ipmitool chassis power ACTION` against `node`'s BMC, over the
    /// management network, with the BMC password from a file (`-f`).
    pub fn ipmi_power(&self, node: &str, action: &str) -> Result<String> {
        let n = self.node(node)?;
        let o = self.ipmitool(
            &n.bmc_addr,
            &self.bmc_password_file,
            &["chassis", "power", action],
        )?;
        Ok(o.stdout.trim().to_owned())
    }

    /// The PID holding the management network's namespace.
    pub(crate) fn mgmt_pid(&self) -> Result<i32> {
        self.inner
            .mgmt_holder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|c| c.id() as i32)
            .context("no management network")
    }

    /// The cluster's work directory on the host (root only).
    pub(crate) fn inner_dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Copies a host file into a running node's file system (its overlay),
    /// as an operator copies a package to a host; `dest` is absolute.
    pub fn copy_in(&self, name: &str, src: &Path, dest: &str) -> Result<()> {
        let n = self.node(name)?;
        let rel = dest.trim_start_matches('/');
        ensure!(
            !rel.is_empty() && !rel.split('/').any(|c| c == ".."),
            "bad destination {dest}"
        );
        let to = n.dir.join("root").join(rel);
        fs::copy(src, &to)
            .with_context(|| format!("copying {} to {name}:{dest}", src.display()))?;
        Ok(())
    }

    /// The node's `etcd-warden status --json`, parsed loosely (as text).
    pub fn warden_status(&self, node: &str) -> Result<String> {
        let out = self.node_sh(node, "etcd-warden status --json")?;
        Ok(out.ok_with(crate::process::STATUS_ANSWERED)?.stdout)
    }
}

/// An instance of the etcd clone is active on `node`, in any role: also
/// while it is being started or stopped (then it is not "Started", but
/// the operation has not ended).
pub fn etcd_active_on(m: &CrmMon, node: &str) -> bool {
    m.resources
        .iter()
        .any(|r| r.agent == "ocf:etcd-warden:etcd" && r.active && r.nodes.iter().any(|n| n == node))
}

/// An instance of the etcd clone is started on `node`.
pub fn etcd_started_on(m: &CrmMon, node: &str) -> bool {
    m.resources.iter().any(|r| {
        r.agent == "ocf:etcd-warden:etcd"
            && r.active
            && !r.failed
            && r.role == "Started"
            && r.nodes.iter().any(|n| n == node)
    })
}
