//! `etcd-warden collect`: run crm_mon (bounded in time and output), build the
//! PacemakerCluster report and write it atomically, or build it from a saved
//! document with `--from-file`. The report logic is `crm_xml::report::build`;
//! this module only gathers inputs and writes the result.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use crm_xml::cib::{FenceTargets, corosync_addresses};
use crm_xml::model::NodeType;
use crm_xml::report::{self, EtcdSection, Options, Report};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

mod corosync_conf;

/// Arguments: Build the PacemakerCluster report from crm_mon and write it.
#[derive(Debug, clap::Args)]
pub struct CollectArgs {
    /// Build the report from a saved crm_mon XML document instead of running
    /// crm_mon; the report goes to stdout (and to --output if given).
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,

    /// The crm_mon command, split on whitespace (no shell).
    #[arg(long, default_value = "crm_mon --one-shot --inactive --output-as=xml")]
    pub crm_mon_cmd: String,

    /// Deadline for each external command, in seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub timeout: f64,

    /// Largest output accepted from crm_mon or cibadmin (bytes); more is an error.
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_name = "BYTES")]
    pub max_output: usize,

    /// Write the report here, atomically (temp file, fsync, rename). The
    /// previous report at this path supplies unchanged conditions'
    /// lastTransitionTime.
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// Also print the report on stdout (the default when --output is absent).
    #[arg(long)]
    pub stdout: bool,

    /// Previous report to carry transition times from (default: --output).
    #[arg(long, value_name = "FILE")]
    pub previous: Option<PathBuf>,

    /// Read fence device targets (pcmk_host_list / pcmk_host_map) from this
    /// CIB file. Default without --from-file: /var/lib/pacemaker/cib/cib.xml,
    /// falling back to --cibadmin-cmd when it cannot be read.
    #[arg(long, value_name = "FILE")]
    pub cib_file: Option<PathBuf>,

    /// Command printing the live CIB (fallback; not used with --from-file).
    #[arg(long, default_value = "cibadmin --query")]
    pub cibadmin_cmd: String,

    /// Corosync configuration to read node addresses from (default
    /// /etc/corosync/corosync.conf). Used when its node list agrees with
    /// crm_mon's (names and node ids); with --from-file it may also hold
    /// saved corosync-cmapctl output.
    #[arg(long, value_name = "FILE")]
    pub corosync_conf: Option<PathBuf>,

    /// Command printing Corosync's runtime node list, run only when the
    /// Corosync configuration is absent, malformed or disagrees with crm_mon
    /// (not used with --from-file).
    #[arg(long, default_value = "corosync-cmapctl nodelist.node")]
    pub cmapctl_cmd: String,

    /// A node's address, NAME=IP (repeatable); overrides Corosync's.
    #[arg(long = "node-address", value_name = "NAME=IP")]
    pub node_addresses: Vec<String>,

    /// Resource agent of etcd (repeatable; `*` at the end matches a prefix).
    /// Default: ocf:etcd-warden:etcd and ocf:heartbeat:podman-etcd.
    #[arg(long = "etcd-resource-agent", value_name = "AGENT")]
    pub etcd_agents: Vec<String>,

    /// Resource agent of kubelet (repeatable). Default: systemd:kubelet.
    #[arg(long = "kubelet-resource-agent", value_name = "AGENT")]
    pub kubelet_agents: Vec<String>,

    /// Resource agent of fence devices (repeatable). Default: stonith:*.
    #[arg(long = "fence-resource-agent", value_name = "AGENT")]
    pub fence_agents: Vec<String>,

    /// Number of member nodes the cluster should have.
    #[arg(long, default_value_t = 2)]
    pub expected_nodes: usize,

    /// JSON file holding the `etcd` section (as the daemon writes it).
    #[arg(long, value_name = "FILE")]
    pub etcd_json: Option<PathBuf>,
}

/// Build the PacemakerCluster report from crm_mon and write it.
pub fn run_collect(args: CollectArgs) -> anyhow::Result<ExitCode> {
    let timeout = duration(args.timeout)?;
    let mut opts = Options {
        expected_node_count: args.expected_nodes,
        ..Options::default()
    };
    if !args.etcd_agents.is_empty() {
        opts.etcd_agents.clone_from(&args.etcd_agents);
    }
    if !args.kubelet_agents.is_empty() {
        opts.kubelet_agents.clone_from(&args.kubelet_agents);
    }
    if !args.fence_agents.is_empty() {
        opts.fence_agents.clone_from(&args.fence_agents);
    }
    if let Some(path) = &args.etcd_json {
        let text = read_capped(path, args.max_output)?;
        let section: EtcdSection = serde_json::from_str(&text)
            .with_context(|| format!("{}: not an etcd section", path.display()))?;
        opts.etcd = Some(section);
    }
    let explicit = parse_node_addresses(&args.node_addresses)?;

    let (doc, previous) = if let Some(path) = &args.from_file {
        let xml = read_capped(path, args.max_output)?;
        let cib = args
            .cib_file
            .as_deref()
            .map(|p| read_capped(p, args.max_output))
            .transpose()?;
        let corosync = match args.corosync_conf.as_deref() {
            Some(p) => Some(addresses_from_file(p)?),
            None => None,
        };
        let doc = crm_xml::parse(&xml).context("cannot parse crm_mon output")?;
        if let Some(cib) = cib {
            opts.fence_targets =
                Some(FenceTargets::from_cib(&cib).context("cannot parse the CIB")?);
        }
        if let Some(addrs) = corosync {
            opts.node_addresses = addrs;
        }
        (doc, read_previous_report(&args)?)
    } else {
        let live = gather_live(&args, timeout)?;
        opts.fence_targets = live.fence_targets;
        opts.node_addresses = live.node_addresses;
        (live.doc, live.previous)
    };
    for (name, addr) in explicit {
        opts.node_addresses.insert(name, addr);
    }

    let report = report::build(
        &doc,
        &opts,
        previous.as_ref(),
        time::OffsetDateTime::now_utc(),
    );
    let json = report.to_json();
    if let Some(out) = &args.output {
        write_atomically(out, json.as_bytes())?;
    }
    if args.output.is_none() || args.stdout || args.from_file.is_some() {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(json.as_bytes())
            .and_then(|()| stdout.flush())
            .context("cannot write the report to stdout")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The previous report (`--previous`, else `--output`), if there is one.
fn read_previous_report(args: &CollectArgs) -> anyhow::Result<Option<Report>> {
    match args.previous.as_ref().or(args.output.as_ref()) {
        Some(p) => read_previous(p),
        None => Ok(None),
    }
}

fn duration(secs: f64) -> anyhow::Result<Duration> {
    if !(secs.is_finite() && secs > 0.0 && secs <= 3600.0) {
        bail!("--timeout must be between 0 and 3600 seconds, got {secs}");
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_node_addresses(items: &[String]) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in items {
        let Some((name, addr)) = item.split_once('=') else {
            bail!("--node-address {item:?}: expected NAME=IP");
        };
        let ip: std::net::IpAddr = addr
            .parse()
            .with_context(|| format!("--node-address {item:?}: {addr:?} is not an IP address"))?;
        out.entry(name.to_owned()).or_default().push(ip.to_string());
    }
    Ok(out)
}

/// Where Pacemaker's CIB manager stores the CIB on a cluster node.
const LIVE_CIB_FILE: &str = "/var/lib/pacemaker/cib/cib.xml";

/// Where Corosync reads its configuration unless started with `-c`.
const DEFAULT_COROSYNC_CONF: &str = "/etc/corosync/corosync.conf";

/// Largest Corosync configuration or node list accepted.
const MAX_COROSYNC_TEXT: usize = 1024 * 1024;

/// What the live path gathers besides the report options it cannot fill.
struct Live {
    doc: crm_xml::CrmMon,
    fence_targets: Option<FenceTargets>,
    node_addresses: BTreeMap<String, Vec<String>>,
    previous: Option<Report>,
}

/// Run crm_mon and, while it runs, read everything else: the CIB (fence
/// targets), Corosync's node list (addresses) and the previous report. The
/// cycle then costs about one crm_mon call: no other process is started
/// when the files can be read, and the reading overlaps crm_mon.
///
/// Corosync's node list comes from its configuration file when that file
/// agrees with the membership crm_mon shows (every cluster node there with
/// the same name and node id), because reading a file costs far less than a
/// `corosync-cmapctl` process. When the file is absent, malformed, or
/// disagrees (corosync may run with another file, `-c`), `corosync-cmapctl`
/// is asked, since the runtime is what the cluster uses.
fn gather_live(args: &CollectArgs, timeout: Duration) -> anyhow::Result<Live> {
    let crm_mon = split_cmd(&args.crm_mon_cmd, "--crm-mon-cmd")?;
    let cibadmin = split_cmd(&args.cibadmin_cmd, "--cibadmin-cmd")?;
    let cmapctl = split_cmd(&args.cmapctl_cmd, "--cmapctl-cmd")?;
    let max = args.max_output;

    let crm_mon = Bounded::spawn(&crm_mon, timeout, max);

    let conf_path = args
        .corosync_conf
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_COROSYNC_CONF));
    let conf = read_corosync_conf(&conf_path, args.corosync_conf.is_some())?;
    // Without a usable file, the runtime is asked at once, alongside crm_mon.
    let mut cmap = match &conf {
        ConfState::Nodes(_) => None,
        ConfState::Unusable(_) => Some(Bounded::spawn(&cmapctl, timeout, MAX_COROSYNC_TEXT)),
    };

    // The CIB manager keeps the configuration in this file; reading it
    // costs far less than a cibadmin process competing with crm_mon for the
    // CPU. cibadmin is the fallback.
    let cib_text: Result<String, anyhow::Error> = match &args.cib_file {
        Some(p) => read_capped(p, max),
        None => read_capped(Path::new(LIVE_CIB_FILE), max)
            .or_else(|_| Bounded::spawn(&cibadmin, timeout, max).finish()),
    };
    // Parsed now, while crm_mon runs; a parse error is raised only after
    // crm_mon's own result, which matters more.
    let cib = cib_text.map(|t| FenceTargets::from_cib(&t));
    let previous = read_previous_report(args)?;

    let xml = crm_mon.finish().context("crm_mon failed")?;
    let doc = crm_xml::parse(&xml).context("cannot parse crm_mon output")?;

    // Without the CIB the report cannot attribute fence devices; it then
    // says so in FencingAvailable's message rather than guessing.
    let fence_targets = match cib {
        Ok(parsed) => Some(parsed.context("cannot parse the CIB")?),
        Err(e) => {
            eprintln!("etcd-warden: warning: no CIB, fence targets unknown: {e:#}");
            None
        }
    };

    let mut problems: Vec<String> = Vec::new();
    let mut from_conf = BTreeMap::new();
    match conf {
        ConfState::Nodes(nodes) => {
            let (agreed, disagreement) = agreeing_addresses(&nodes, &doc);
            match disagreement {
                None => {
                    return Ok(Live {
                        doc,
                        fence_targets,
                        node_addresses: agreed,
                        previous,
                    });
                }
                Some(why) => {
                    problems.push(format!("{}: {why}", conf_path.display()));
                    from_conf = agreed;
                    cmap = Some(Bounded::spawn(&cmapctl, timeout, MAX_COROSYNC_TEXT));
                }
            }
        }
        ConfState::Unusable(why) => problems.push(why),
    }
    let node_addresses = match cmap.map(Bounded::finish) {
        Some(Ok(text)) if text.contains("nodelist.node.") => corosync_addresses(&text),
        other => {
            match other {
                Some(Ok(_)) => problems.push(format!("{} printed no node list", cmapctl[0])),
                Some(Err(e)) => problems.push(format!("{e:#}")),
                None => {}
            }
            // Then only the nodes whose name and id the file shares with
            // crm_mon get addresses: a wrong address is worse than none.
            eprintln!(
                "etcd-warden: warning: no Corosync node list{}: {}",
                if from_conf.is_empty() {
                    ", node addresses unknown"
                } else {
                    ", addresses only of the nodes the configuration agrees on"
                },
                problems.join("; ")
            );
            from_conf
        }
    };
    Ok(Live {
        doc,
        fence_targets,
        node_addresses,
        previous,
    })
}

/// Corosync's configuration as far as `collect` can use it.
enum ConfState {
    /// Its node blocks.
    Nodes(Vec<corosync_conf::ConfNode>),
    /// Why not (absent, unreadable or malformed default file).
    Unusable(String),
}

/// Read and parse the Corosync configuration. A file named with
/// `--corosync-conf` must be readable and well-formed (the operator asked
/// for it); the default one may be absent (Corosync not configured here) or
/// malformed, and then the runtime is asked instead.
fn read_corosync_conf(path: &Path, explicit: bool) -> anyhow::Result<ConfState> {
    let text = match read_capped(path, MAX_COROSYNC_TEXT) {
        Ok(t) => t,
        Err(e) if explicit => return Err(e),
        Err(e) => return Ok(ConfState::Unusable(format!("{e:#}"))),
    };
    match corosync_conf::parse(&text) {
        Ok(nodes) => Ok(ConfState::Nodes(nodes)),
        Err(e) if explicit => bail!("{}:{}: {}", path.display(), e.line, e.message),
        Err(e) => Ok(ConfState::Unusable(format!(
            "{}:{}: {}",
            path.display(),
            e.line,
            e.message
        ))),
    }
}

/// `--corosync-conf` with `--from-file`: a `corosync.conf`, or saved
/// `corosync-cmapctl` output (recognised by its `nodelist.node.` keys).
fn addresses_from_file(path: &Path) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let text = read_capped(path, MAX_COROSYNC_TEXT)?;
    if text.contains("nodelist.node.") {
        return Ok(corosync_addresses(&text));
    }
    let nodes = corosync_conf::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}:{}: {}", path.display(), e.line, e.message))?;
    Ok(corosync_conf::addresses(&nodes))
}

/// The addresses of the configured nodes that agree with crm_mon (same
/// name, node id equal to crm_mon's `id`), and, if any cluster node crm_mon
/// shows is missing or differs, why the file cannot be trusted as a whole.
fn agreeing_addresses(
    nodes: &[corosync_conf::ConfNode],
    doc: &crm_xml::CrmMon,
) -> (BTreeMap<String, Vec<String>>, Option<String>) {
    let mut agreed = BTreeMap::new();
    let mut missing = Vec::new();
    for n in doc.nodes.iter().filter(|n| n.node_type == NodeType::Member) {
        let found = nodes.iter().find(|c| {
            c.name.as_deref() == Some(n.name.as_str())
                && c.nodeid.is_some_and(|id| id.to_string() == n.id)
        });
        match found {
            Some(c) => {
                agreed.insert(n.name.clone(), c.addrs.values().cloned().collect());
            }
            None => missing.push(format!("{} (id {})", n.name, n.id)),
        }
    }
    let why = (!missing.is_empty()).then(|| {
        format!(
            "no node block with the name and nodeid crm_mon shows for {}",
            missing.join(", ")
        )
    });
    (agreed, why)
}

fn split_cmd(cmd: &str, flag: &str) -> anyhow::Result<Vec<String>> {
    let argv: Vec<String> = cmd.split_whitespace().map(str::to_owned).collect();
    if argv.is_empty() {
        bail!("{flag} is empty");
    }
    Ok(argv)
}

/// Run a command with a deadline and an output cap; see [`Bounded`].
pub fn run_bounded(
    argv: &[String],
    timeout: Duration,
    max_output: usize,
) -> anyhow::Result<String> {
    Bounded::spawn(argv, timeout, max_output).finish()
}

/// A started command with a deadline (counted from its start) and an output
/// cap. The caller does other work while it runs, then calls
/// [`Bounded::finish`]. The child is killed by its own pid, never by name,
/// and only while it is unreaped, so the pid is still ours; dropping an
/// unfinished one kills and reaps it.
///
/// Its stdout and stderr are Unix socket pairs rather than pipes: a socket
/// read takes a timeout, so one thread enforces the deadline and reads both,
/// with no reader or watchdog threads to start, wake and join on every
/// collect cycle.
struct Bounded {
    prog: String,
    max_output: usize,
    deadline: Instant,
    timeout: Duration,
    /// `None` once finished.
    started: Option<anyhow::Result<Started>>,
}

struct Started {
    child: Child,
    pid: Pid,
    stdout: UnixStream,
    stderr: UnixStream,
}

/// What ended the read of a command's stdout early.
enum Cut {
    Deadline,
    Overflow,
}

/// Longest pause between checks for a child that has closed its stdout but
/// not yet exited (normally it exits within microseconds of the close).
const EXIT_CHECK_MAX: Duration = Duration::from_millis(10);

/// stderr kept for the error message.
const STDERR_KEEP: usize = 64 * 1024;

impl Bounded {
    fn spawn(argv: &[String], timeout: Duration, max_output: usize) -> Self {
        let prog = argv.first().cloned().unwrap_or_default();
        let started = Some(Self::start(argv));
        Bounded {
            prog,
            max_output,
            deadline: Instant::now() + timeout,
            timeout,
            started,
        }
    }

    fn start(argv: &[String]) -> anyhow::Result<Started> {
        let (prog, rest) = argv.split_first().context("empty command")?;
        let (stdout, child_out) = UnixStream::pair().context("cannot create a socket pair")?;
        let (stderr, child_err) = UnixStream::pair().context("cannot create a socket pair")?;
        // The child's ends are closed here once spawned (the Command owns
        // them), so that its exit ends our reads.
        let child = Command::new(prog)
            .args(rest)
            .stdin(Stdio::null())
            .stdout(Stdio::from(OwnedFd::from(child_out)))
            .stderr(Stdio::from(OwnedFd::from(child_err)))
            .spawn()
            .with_context(|| format!("cannot run {prog}"))?;
        let pid = Pid::from_raw(i32::try_from(child.id()).context("pid out of range")?);
        Ok(Started {
            child,
            pid,
            stdout,
            stderr,
        })
    }

    /// Wait for the command and return its stdout.
    fn finish(mut self) -> anyhow::Result<String> {
        let Started {
            mut child,
            pid,
            mut stdout,
            mut stderr,
        } = self.started.take().context("command already finished")??;
        let prog = self.prog.as_str();
        let max_output = self.max_output;
        // Room for a small cluster's status up front: read_to_end-style
        // growth from empty starts with 32-byte reads.
        let mut buf = Vec::with_capacity(max_output.min(64 * 1024));
        let (read, mut cut) = read_until(&mut stdout, &mut buf, max_output, self.deadline);
        if cut.is_none() {
            // Closing stdout normally means exiting; wait for the exit
            // without reaping (WNOWAIT), within the same deadline.
            cut = wait_exit(pid, self.deadline).then_some(Cut::Deadline);
        }
        if cut.is_some() {
            // Unreaped, so the pid is still this child's.
            let _ = kill(pid, Signal::SIGKILL);
        }
        let status = child.wait();
        let errbuf = read_available(&mut stderr);
        match cut {
            Some(Cut::Deadline) => bail!(
                "{prog} did not finish within {:.1}s",
                self.timeout.as_secs_f64()
            ),
            Some(Cut::Overflow) => {
                bail!("{prog} printed more than {max_output} bytes (--max-output)")
            }
            None => {}
        }
        let status = status.with_context(|| format!("cannot wait for {prog}"))?;
        read.with_context(|| format!("cannot read the output of {prog}"))?;
        if !status.success() {
            let stderr = String::from_utf8_lossy(&errbuf);
            bail!("{prog} exited with {status}: {}", stderr.trim());
        }
        String::from_utf8(buf).with_context(|| format!("{prog} printed invalid UTF-8"))
    }
}

/// Read until end of file, more than `max` bytes, or the deadline.
fn read_until(
    src: &mut UnixStream,
    buf: &mut Vec<u8>,
    max: usize,
    deadline: Instant,
) -> (std::io::Result<()>, Option<Cut>) {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (Ok(()), Some(Cut::Deadline));
        }
        if let Err(e) = src.set_read_timeout(Some(left)) {
            return (Err(e), None);
        }
        match src.read(&mut chunk) {
            Ok(0) => return (Ok(()), None),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > max {
                    return (Ok(()), Some(Cut::Overflow));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (Ok(()), Some(Cut::Deadline));
            }
            Err(e) => return (Err(e), None),
        }
    }
}

/// Wait until `pid` has exited (leaving it unreaped) or the deadline has
/// passed; true if the deadline passed first. Checks at growing intervals:
/// the child has closed its stdout already, so it is normally gone at the
/// first check.
fn wait_exit(pid: Pid, deadline: Instant) -> bool {
    let mut pause = Duration::from_micros(50);
    loop {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG;
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR) => {}
            // Exited, or not waitable at all: either way nothing to wait for.
            _ => return false,
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(EXIT_CHECK_MAX);
    }
}

/// What the (exited or killed) child left on its stderr, up to
/// `STDERR_KEEP` bytes, without waiting for more.
fn read_available(src: &mut UnixStream) -> Vec<u8> {
    let mut out = Vec::new();
    if src.set_nonblocking(true).is_err() {
        return out;
    }
    let mut chunk = [0u8; 4096];
    while out.len() < STDERR_KEEP {
        match src.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n.min(STDERR_KEEP - out.len())]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    out
}

impl Drop for Bounded {
    fn drop(&mut self) {
        // Only an unfinished command is still here: an error elsewhere
        // ended the cycle while it ran. Kill it through its handle (it is
        // unreaped, so the pid is still ours) and reap it.
        if let Some(Ok(s)) = &mut self.started {
            let _ = s.child.kill();
            let _ = s.child.wait();
        }
    }
}

/// Read a file, refusing more than `max` bytes and non-UTF-8 content.
fn read_capped(path: &Path, max: usize) -> anyhow::Result<String> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit)
        .read_to_end(&mut buf)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if buf.len() > max {
        bail!(
            "{} is larger than {max} bytes (--max-output)",
            path.display()
        );
    }
    String::from_utf8(buf).with_context(|| format!("{} is not UTF-8", path.display()))
}

/// The previous report, if there is one. A missing file is normal (first
/// run); an unreadable one is reported and ignored, because refusing to
/// write a fresh report would only make the status go stale.
fn read_previous(path: &Path) -> anyhow::Result<Option<Report>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            eprintln!(
                "etcd-warden: warning: cannot read previous report {}: {e}",
                path.display()
            );
            return Ok(None);
        }
    };
    match Report::from_json(&text) {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            eprintln!(
                "etcd-warden: warning: previous report {} ignored: {e}",
                path.display()
            );
            Ok(None)
        }
    }
}

/// Write via a temp file in the same directory, fsync it and rename it over
/// the target, so a reader sees the old or the new report, never a mix or a
/// truncated file, even across a crash.
pub fn write_atomically(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> anyhow::Result<()> {
        let mut f = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(data)
            .and_then(|()| f.sync_all())
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        // No fsync of the directory: it would double the cost of a cycle that
        // must stay close to one crm_mon call. If a crash loses the rename,
        // the previous complete report remains; it then ages into
        // staleness, which `health` reports, so nothing wrong is ever read.
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn bounded_run_ok_timeout_and_cap() {
        assert_eq!(
            run_bounded(&argv("echo hi"), Duration::from_secs(5), 100).unwrap(),
            "hi\n"
        );
        let e = run_bounded(&argv("sleep 5"), Duration::from_millis(200), 100).unwrap_err();
        assert!(format!("{e:#}").contains("did not finish"), "{e:#}");
        let e = run_bounded(&argv("yes"), Duration::from_secs(5), 1000).unwrap_err();
        assert!(format!("{e:#}").contains("more than 1000 bytes"), "{e:#}");
        let e = run_bounded(&argv("false"), Duration::from_secs(5), 100).unwrap_err();
        assert!(format!("{e:#}").contains("exited"), "{e:#}");
        assert!(run_bounded(&argv("/nonexistent/x"), Duration::from_secs(1), 100).is_err());
    }

    #[test]
    fn atomic_write_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        write_atomically(&p, b"one").unwrap();
        write_atomically(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    /// crm_mon's view of a two-node cluster plus a remote node (which has
    /// no Corosync node block and must not count against the file).
    const TWO_NODES: &str = r#"<pacemaker-result api-version="2.25" request="crm_mon">
  <summary><current_dc present="true" name="n1" id="1" with_quorum="true"/></summary>
  <nodes>
    <node name="n1" id="1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="true" is_dc="true" resources_running="0" type="member"/>
    <node name="n2" id="2" online="false" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="false" is_dc="false" resources_running="0" type="member"/>
    <node name="r1" id="r1" online="true" standby="false" standby_onfail="false" maintenance="false" pending="false" unclean="false" shutdown="false" expected_up="false" is_dc="false" resources_running="0" type="remote"/>
  </nodes>
  <status code="0" message="OK"/>
</pacemaker-result>"#;

    fn conf_nodes(text: &str) -> Vec<corosync_conf::ConfNode> {
        corosync_conf::parse(text).unwrap()
    }

    #[test]
    fn configuration_used_only_when_it_agrees_with_crm_mon() {
        let doc = crm_xml::parse(TWO_NODES).unwrap();
        let good = "nodelist {\n node {\n  name: n1\n  nodeid: 1\n  ring0_addr: 192.0.2.1\n }\n node {\n  name: n2\n  nodeid: 2\n  ring0_addr: 192.0.2.2\n  ring1_addr: 198.51.100.2\n }\n}\n";
        let (a, why) = agreeing_addresses(&conf_nodes(good), &doc);
        assert_eq!(why, None);
        assert_eq!(a["n1"], ["192.0.2.1"]);
        assert_eq!(a["n2"], ["192.0.2.2", "198.51.100.2"]);

        // Another cluster's file (the harness's nodes are node1..N; a host
        // file may say node1 too): only agreeing nodes, and a reason.
        let other_ids = good.replace("nodeid: 2", "nodeid: 3");
        let (a, why) = agreeing_addresses(&conf_nodes(&other_ids), &doc);
        assert_eq!(a.keys().collect::<Vec<_>>(), ["n1"]);
        assert!(why.unwrap().contains("n2 (id 2)"));

        let no_ids = good.replace("  nodeid: 1\n", "");
        let (a, why) = agreeing_addresses(&conf_nodes(&no_ids), &doc);
        assert!(!a.contains_key("n1"));
        assert!(why.unwrap().contains("n1 (id 1)"));

        let (a, why) = agreeing_addresses(&[], &doc);
        assert!(a.is_empty());
        assert!(why.unwrap().contains("n1 (id 1), n2 (id 2)"));
    }

    #[test]
    fn corosync_conf_errors_name_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("corosync.conf");
        std::fs::write(&p, "nodelist {\n node {\n  name n1\n }\n}\n").unwrap();
        // Named explicitly: an error. The default file: a reason to ask
        // the runtime instead.
        let e = read_corosync_conf(&p, true).err().unwrap();
        assert!(
            format!("{e:#}").starts_with(&format!("{}:3: ", p.display())),
            "{e:#}"
        );
        let e = addresses_from_file(&p).unwrap_err();
        assert!(format!("{e:#}").contains("corosync.conf:3: "), "{e:#}");
        match read_corosync_conf(&p, false).unwrap() {
            ConfState::Unusable(why) => assert!(why.contains(":3: "), "{why}"),
            ConfState::Nodes(_) => panic!("malformed file accepted"),
        }
        let missing = d.path().join("absent.conf");
        assert!(read_corosync_conf(&missing, true).is_err());
        assert!(matches!(
            read_corosync_conf(&missing, false).unwrap(),
            ConfState::Unusable(_)
        ));
        // Saved corosync-cmapctl output is accepted with --from-file.
        std::fs::write(
            &p,
            "nodelist.node.0.name (str) = n1\nnodelist.node.0.ring0_addr (str) = 192.0.2.1\n",
        )
        .unwrap();
        assert_eq!(addresses_from_file(&p).unwrap()["n1"], ["192.0.2.1"]);
    }

    #[test]
    fn unfinished_command_is_killed_and_reaped_on_drop() {
        let b = Bounded::spawn(&argv("sleep 30"), Duration::from_secs(60), 100);
        let pid = b.started.as_ref().unwrap().as_ref().unwrap().pid;
        let t = Instant::now();
        drop(b);
        assert!(t.elapsed() < Duration::from_secs(5));
        // Reaped: the pid is no longer our child.
        assert!(waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG).is_err());
    }

    #[test]
    fn concurrent_commands_keep_their_own_deadlines() {
        let slow = Bounded::spawn(&argv("sleep 30"), Duration::from_millis(300), 100);
        let quick = Bounded::spawn(&argv("echo ok"), Duration::from_secs(5), 100);
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(quick.finish().unwrap(), "ok\n");
        let t = Instant::now();
        let e = slow.finish().unwrap_err();
        assert!(
            format!("{e:#}").contains("did not finish within 0.3s"),
            "{e:#}"
        );
        // Its deadline had passed already: killed at once, not 300 ms later.
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn node_address_flags() {
        let m = parse_node_addresses(&["a=192.0.2.1".into(), "a=2001:db8::1".into()]).unwrap();
        assert_eq!(m["a"], ["192.0.2.1", "2001:db8::1"]);
        assert!(parse_node_addresses(&["a".into()]).is_err());
        assert!(parse_node_addresses(&["a=nope".into()]).is_err());
    }
}
