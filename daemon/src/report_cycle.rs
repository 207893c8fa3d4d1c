//! One PacemakerCluster report cycle: run crm_mon (bounded in time and
//! output), read the CIB for fence targets and Corosync's node list for
//! addresses while it runs, carry transition times from the previous report,
//! build the report with `crm_xml::report::build` and write it atomically.
//!
//! Two callers share it, so that their reports never disagree: the
//! `etcd-warden collect` command (a timer runs it on hosts without the
//! daemon) and the daemon, which runs it every `report.interval_ms` and for
//! `/v1/report`. The code is synchronous: the daemon runs it under
//! `spawn_blocking`, and the command has nothing else to do meanwhile.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crm_xml::cib::{FenceTargets, corosync_addresses};
use crm_xml::model::NodeType;
use crm_xml::report::{self, EtcdSection, Options, Report};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

use crate::config::Settings;

pub use crm_xml::cib::corosync_conf;

/// Where Pacemaker's CIB manager stores the CIB on a cluster node.
pub const LIVE_CIB_FILE: &str = "/var/lib/pacemaker/cib/cib.xml";

/// Where Corosync reads its configuration unless started with `-c`.
pub const DEFAULT_COROSYNC_CONF: &str = "/etc/corosync/corosync.conf";

/// Largest Corosync configuration or node list accepted.
pub const MAX_COROSYNC_TEXT: usize = 1024 * 1024;

/// Largest output accepted from crm_mon or cibadmin by default (bytes).
pub const DEFAULT_MAX_OUTPUT: usize = 16 * 1024 * 1024;

/// The crm_mon call of a cycle.
pub const CRM_MON_CMD: [&str; 4] = ["crm_mon", "--one-shot", "--inactive", "--output-as=xml"];

/// The cibadmin call that prints the live CIB (when its file is unreadable).
pub const CIBADMIN_CMD: [&str; 2] = ["cibadmin", "--query"];

/// The corosync-cmapctl call that prints Corosync's runtime node list.
pub const CMAPCTL_CMD: [&str; 2] = ["corosync-cmapctl", "nodelist.node."];

/// A command that did not give its output.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// No program was given.
    #[error("empty command")]
    Empty,
    /// The socket pair for its output could not be made.
    #[error("cannot create a socket pair: {0}")]
    SocketPair(std::io::Error),
    /// It could not be started.
    #[error("cannot run {prog}: {err}")]
    Spawn {
        /// The program.
        prog: String,
        /// The OS error.
        err: std::io::Error,
    },
    /// Its pid does not fit a pid_t (never on Linux).
    #[error("pid out of range")]
    Pid,
    /// It ran past its deadline and was killed.
    #[error("{prog} did not finish within {secs:.1}s")]
    Deadline {
        /// The program.
        prog: String,
        /// The deadline, in seconds.
        secs: f64,
    },
    /// It printed more than the cap and was killed.
    #[error("{prog} printed more than {max} bytes (--max-output)")]
    Overflow {
        /// The program.
        prog: String,
        /// The cap.
        max: usize,
    },
    /// It could not be waited for.
    #[error("cannot wait for {prog}: {err}")]
    Wait {
        /// The program.
        prog: String,
        /// The OS error.
        err: std::io::Error,
    },
    /// Its output could not be read.
    #[error("cannot read the output of {prog}: {err}")]
    Read {
        /// The program.
        prog: String,
        /// The OS error.
        err: std::io::Error,
    },
    /// It exited unsuccessfully.
    #[error("{prog} exited with {status}: {stderr}")]
    Exit {
        /// The program.
        prog: String,
        /// How it exited.
        status: ExitStatus,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// Its output is not UTF-8.
    #[error("{prog} printed invalid UTF-8: {err}")]
    Utf8 {
        /// The program.
        prog: String,
        /// Where the bad byte is.
        err: std::string::FromUtf8Error,
    },
}

/// A file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It could not be opened.
    #[error("cannot open {}: {err}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// It could not be read.
    #[error("cannot read {}: {err}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// It is larger than the cap.
    #[error("{} is larger than {max} bytes (--max-output)", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        max: usize,
    },
    /// It is not UTF-8.
    #[error("{} is not UTF-8: {err}", path.display())]
    Utf8 {
        /// The file.
        path: PathBuf,
        /// Where the bad byte is.
        err: std::string::FromUtf8Error,
    },
}

/// The report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The path names no file.
    #[error("{} has no file name", path.display())]
    NoFileName {
        /// The path.
        path: PathBuf,
    },
    /// The temp file could not be created.
    #[error("cannot create {}: {err}", tmp.display())]
    Create {
        /// The temp file.
        tmp: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// The temp file could not be written or synced.
    #[error("cannot write {}: {err}", tmp.display())]
    Write {
        /// The temp file.
        tmp: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// The temp file could not replace the report.
    #[error("cannot rename {} to {}: {err}", tmp.display(), path.display())]
    Rename {
        /// The temp file.
        tmp: PathBuf,
        /// The report.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
}

/// Why a cycle produced no report. Each variant's message is complete (the
/// inner error is part of it, not a separate source), so that the CLI's
/// `{:#}` and the daemon's log print it once.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    /// crm_mon could not be run, failed, hung or flooded.
    #[error("crm_mon failed: {0}")]
    CrmMon(CommandError),
    /// crm_mon exited 0 but said it could not read the CIB and showed no
    /// node (it does so with an unreadable `CIB_file`): a report built from
    /// that would claim a cluster without nodes.
    #[error("crm_mon failed: {0}")]
    CrmMonErrors(String),
    /// crm_mon's output is not a document the parser accepts.
    #[error("cannot parse crm_mon output: {0}")]
    ParseCrmMon(crm_xml::ParseError),
    /// The CIB is not a document the parser accepts.
    #[error("cannot parse the CIB: {0}")]
    ParseCib(crm_xml::ParseError),
    /// A file named explicitly could not be read.
    #[error(transparent)]
    Read(ReadError),
    /// A Corosync configuration named explicitly is malformed.
    #[error("{}:{line}: {message}", path.display())]
    CorosyncConf {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong there.
        message: String,
    },
    /// The report could not be written.
    #[error(transparent)]
    Write(WriteError),
}

/// Where the CIB (fence device targets) comes from.
#[derive(Debug, Clone)]
pub enum CibSource {
    /// This file only; unreadable, the report says fence targets are unknown.
    File(PathBuf),
    /// This file, else this command (the CIB manager's file is cheaper to
    /// read than a cibadmin process competing with crm_mon for the CPU).
    FileOrCommand(PathBuf, Vec<String>),
}

/// Where node addresses come from.
#[derive(Debug, Clone)]
pub struct CorosyncSource {
    /// The Corosync configuration.
    pub conf: PathBuf,
    /// Whether it must be readable and well-formed (named by the operator)
    /// rather than a default that may be absent.
    pub required: bool,
    /// The command printing Corosync's runtime node list.
    pub cmapctl_cmd: Vec<String>,
}

/// Everything one cycle needs.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// The crm_mon command (no shell).
    pub crm_mon_cmd: Vec<String>,
    /// Deadline of each external command.
    pub timeout: Duration,
    /// Largest output accepted from crm_mon or cibadmin, and largest CIB.
    pub max_output: usize,
    /// The CIB.
    pub cib: CibSource,
    /// Corosync's node list.
    pub corosync: CorosyncSource,
    /// The previous report (transition times), if any.
    pub previous: Option<PathBuf>,
    /// Where the report is written atomically, if anywhere.
    pub output: Option<PathBuf>,
    /// Agents, expected node count; addresses, fence targets and the etcd
    /// section are filled in by the cycle.
    pub options: Options,
    /// Addresses of nodes Corosync gives none for (the daemon's configured
    /// peer hosts).
    pub fallback_addresses: BTreeMap<String, Vec<String>>,
    /// Addresses that replace Corosync's (`collect --node-address`).
    pub override_addresses: BTreeMap<String, Vec<String>>,
}

/// What the cycle read besides the report options it cannot fill.
#[derive(Debug)]
pub struct Gathered {
    /// crm_mon's document.
    pub doc: crm_xml::CrmMon,
    /// Fence device targets, when the CIB could be read.
    pub fence_targets: Option<FenceTargets>,
    /// Node name → addresses from Corosync.
    pub node_addresses: BTreeMap<String, Vec<String>>,
    /// The previous report, if there is a usable one.
    pub previous: Option<Report>,
}

impl Cycle {
    /// The daemon's cycle from its `[report]` settings: its CIB file with
    /// cibadmin as fallback, its Corosync configuration with
    /// corosync-cmapctl as fallback (a daemon has no operator at hand to fix
    /// a flag, so a bad file is a warning, not a failed cycle), and its
    /// configured nodes' peer hosts for nodes Corosync names no address for.
    pub fn for_daemon(settings: &Settings) -> Cycle {
        let r = &settings.report;
        let argv = |c: &[&str]| c.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        Cycle {
            crm_mon_cmd: argv(&CRM_MON_CMD),
            timeout: r.crm_mon_timeout,
            max_output: DEFAULT_MAX_OUTPUT,
            cib: CibSource::FileOrCommand(r.cib_file.clone(), argv(&CIBADMIN_CMD)),
            corosync: CorosyncSource {
                conf: r.corosync_conf.clone(),
                required: false,
                cmapctl_cmd: argv(&CMAPCTL_CMD),
            },
            previous: r.path.clone(),
            output: r.path.clone(),
            options: Options {
                etcd_agents: r.etcd_agents.clone(),
                kubelet_agents: r.kubelet_agents.clone(),
                fence_agents: r.fence_agents.clone(),
                expected_node_count: r.expected_nodes,
                profile: r.profile,
                ..Options::default()
            },
            fallback_addresses: settings
                .nodes
                .iter()
                .map(|n| {
                    let ips: Vec<String> = n.peer_urls.iter().filter_map(|u| url_ip(u)).collect();
                    (n.name.clone(), ips)
                })
                .filter(|(_, ips)| !ips.is_empty())
                .collect(),
            override_addresses: BTreeMap::new(),
        }
    }

    /// Run crm_mon and read the rest while it runs; see [`gather`].
    pub fn gather(&self, warn: &mut dyn FnMut(&str)) -> Result<Gathered, CycleError> {
        gather(self, warn)
    }

    /// The report from what [`Cycle::gather`] read, with `etcd` embedded.
    pub fn build(&self, g: Gathered, etcd: Option<EtcdSection>) -> Report {
        let mut opts = self.options.clone();
        opts.fence_targets = g.fence_targets;
        opts.node_addresses = g.node_addresses;
        for (name, addrs) in &self.fallback_addresses {
            let known = opts.node_addresses.get(name).is_some_and(|a| !a.is_empty());
            if !known {
                opts.node_addresses.insert(name.clone(), addrs.clone());
            }
        }
        for (name, addrs) in &self.override_addresses {
            opts.node_addresses.insert(name.clone(), addrs.clone());
        }
        opts.etcd = etcd;
        report::build(
            &g.doc,
            &opts,
            g.previous.as_ref(),
            time::OffsetDateTime::now_utc(),
        )
    }

    /// The whole cycle: gather, build, and write to [`Cycle::output`] when
    /// set. A failed cycle writes nothing, so the previous report stays
    /// whole (and ages into staleness, which `health` reports).
    pub fn run(
        &self,
        etcd: Option<EtcdSection>,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Report, CycleError> {
        let g = self.gather(warn)?;
        let report = self.build(g, etcd);
        if let Some(out) = &self.output {
            write_atomically(out, report.to_json().as_bytes()).map_err(CycleError::Write)?;
        }
        Ok(report)
    }
}

/// The IP host of an `http(s)://host:port` URL (a name is no address).
fn url_ip(u: &str) -> Option<String> {
    let rest = u.split_once("://")?.1;
    let rest = rest.split('/').next().unwrap_or(rest);
    let (host, _) = rest.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.parse::<std::net::IpAddr>()
        .ok()
        .map(|ip| ip.to_string())
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
fn gather(c: &Cycle, warn: &mut dyn FnMut(&str)) -> Result<Gathered, CycleError> {
    let max = c.max_output;
    let timeout = c.timeout;
    let crm_mon = Bounded::spawn(&c.crm_mon_cmd, timeout, max);

    let conf_path = &c.corosync.conf;
    let conf = read_corosync_conf(conf_path, c.corosync.required)?;
    let cmapctl = &c.corosync.cmapctl_cmd;
    // Without a usable file, the runtime is asked at once, alongside crm_mon.
    let mut cmap = match &conf {
        ConfState::Nodes(_) => None,
        ConfState::Unusable(_) => Some(Bounded::spawn(cmapctl, timeout, MAX_COROSYNC_TEXT)),
    };

    let cib_text: Result<String, String> = match &c.cib {
        CibSource::File(p) => read_capped(p, max).map_err(|e| e.to_string()),
        CibSource::FileOrCommand(p, cmd) => read_capped(p, max).or_else(|_| {
            Bounded::spawn(cmd, timeout, max)
                .finish()
                .map_err(|e| e.to_string())
        }),
    };
    // Parsed now, while crm_mon runs; a parse error is raised only after
    // crm_mon's own result, which matters more.
    let cib = cib_text.map(|t| FenceTargets::from_cib(&t));
    let previous = match &c.previous {
        Some(p) => read_previous(p, warn),
        None => None,
    };

    let xml = crm_mon.finish().map_err(CycleError::CrmMon)?;
    let doc = crm_xml::parse(&xml).map_err(CycleError::ParseCrmMon)?;
    if doc.nodes.is_empty()
        && let Some(st) = &doc.status
        && !st.errors.is_empty()
    {
        return Err(CycleError::CrmMonErrors(st.errors.join("; ")));
    }

    // Without the CIB the report cannot attribute fence devices; it then
    // says so in FencingAvailable's message rather than guessing.
    let fence_targets = match cib {
        Ok(parsed) => Some(parsed.map_err(CycleError::ParseCib)?),
        Err(e) => {
            warn(&format!("no CIB, fence targets unknown: {e}"));
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
                    return Ok(Gathered {
                        doc,
                        fence_targets,
                        node_addresses: agreed,
                        previous,
                    });
                }
                Some(why) => {
                    problems.push(format!("{}: {why}", conf_path.display()));
                    from_conf = agreed;
                    cmap = Some(Bounded::spawn(cmapctl, timeout, MAX_COROSYNC_TEXT));
                }
            }
        }
        ConfState::Unusable(why) => problems.push(why),
    }
    let node_addresses = match cmap.map(Bounded::finish) {
        Some(Ok(text)) if text.contains("nodelist.node.") => corosync_addresses(&text),
        other => {
            match other {
                Some(Ok(_)) => problems.push(format!(
                    "{} printed no node list",
                    cmapctl.first().map(String::as_str).unwrap_or_default()
                )),
                Some(Err(e)) => problems.push(e.to_string()),
                None => {}
            }
            // Then only the nodes whose name and id the file shares with
            // crm_mon get addresses: a wrong address is worse than none.
            warn(&format!(
                "no Corosync node list{}: {}",
                if from_conf.is_empty() {
                    ", node addresses unknown"
                } else {
                    ", addresses only of the nodes the configuration agrees on"
                },
                problems.join("; ")
            ));
            from_conf
        }
    };
    Ok(Gathered {
        doc,
        fence_targets,
        node_addresses,
        previous,
    })
}

/// Corosync's configuration as far as a cycle can use it.
pub(crate) enum ConfState {
    /// Its node blocks.
    Nodes(Vec<corosync_conf::ConfNode>),
    /// Why not (absent, unreadable or malformed default file).
    Unusable(String),
}

/// Read and parse the Corosync configuration. A required file (named by the
/// operator) must be readable and well-formed; a default one may be absent
/// (Corosync not configured here) or malformed, and then the runtime is
/// asked instead.
pub(crate) fn read_corosync_conf(path: &Path, required: bool) -> Result<ConfState, CycleError> {
    let text = match read_capped(path, MAX_COROSYNC_TEXT) {
        Ok(t) => t,
        Err(e) if required => return Err(CycleError::Read(e)),
        Err(e) => return Ok(ConfState::Unusable(e.to_string())),
    };
    match corosync_conf::parse(&text) {
        Ok(nodes) => Ok(ConfState::Nodes(nodes)),
        Err(e) if required => Err(CycleError::CorosyncConf {
            path: path.to_path_buf(),
            line: e.line,
            message: e.message,
        }),
        Err(e) => Ok(ConfState::Unusable(format!(
            "{}:{}: {}",
            path.display(),
            e.line,
            e.message
        ))),
    }
}

/// A saved node list: a `corosync.conf`, or saved `corosync-cmapctl` output
/// (recognised by its `nodelist.node.` keys).
pub fn addresses_from_file(path: &Path) -> Result<BTreeMap<String, Vec<String>>, CycleError> {
    let text = read_capped(path, MAX_COROSYNC_TEXT).map_err(CycleError::Read)?;
    if text.contains("nodelist.node.") {
        return Ok(corosync_addresses(&text));
    }
    let nodes = corosync_conf::parse(&text).map_err(|e| CycleError::CorosyncConf {
        path: path.to_path_buf(),
        line: e.line,
        message: e.message,
    })?;
    Ok(corosync_conf::addresses(&nodes))
}

/// The addresses of the configured nodes that agree with crm_mon (same
/// name, node id equal to crm_mon's `id`), and, if any cluster node crm_mon
/// shows is missing or differs, why the file cannot be trusted as a whole.
pub(crate) fn agreeing_addresses(
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

/// Run a command with a deadline and an output cap; see [`Bounded`].
pub fn run_bounded(
    argv: &[String],
    timeout: Duration,
    max_output: usize,
) -> Result<String, CommandError> {
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
pub(crate) struct Bounded {
    prog: String,
    max_output: usize,
    deadline: Instant,
    timeout: Duration,
    /// `None` once finished.
    pub(crate) started: Option<Result<Started, CommandError>>,
}

pub(crate) struct Started {
    child: Child,
    pub(crate) pid: Pid,
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
    pub(crate) fn spawn(argv: &[String], timeout: Duration, max_output: usize) -> Self {
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

    fn start(argv: &[String]) -> Result<Started, CommandError> {
        let (prog, rest) = argv.split_first().ok_or(CommandError::Empty)?;
        let (stdout, child_out) = UnixStream::pair().map_err(CommandError::SocketPair)?;
        let (stderr, child_err) = UnixStream::pair().map_err(CommandError::SocketPair)?;
        // The child's ends are closed here once spawned (the Command owns
        // them), so that its exit ends our reads.
        let child = Command::new(prog)
            .args(rest)
            .stdin(Stdio::null())
            .stdout(Stdio::from(OwnedFd::from(child_out)))
            .stderr(Stdio::from(OwnedFd::from(child_err)))
            .spawn()
            .map_err(|err| CommandError::Spawn {
                prog: prog.clone(),
                err,
            })?;
        let pid = Pid::from_raw(i32::try_from(child.id()).map_err(|_| CommandError::Pid)?);
        Ok(Started {
            child,
            pid,
            stdout,
            stderr,
        })
    }

    /// Wait for the command and return its stdout.
    pub(crate) fn finish(mut self) -> Result<String, CommandError> {
        let Started {
            mut child,
            pid,
            mut stdout,
            mut stderr,
        } = match self.started.take() {
            Some(s) => s?,
            // Only reachable through a second finish, which the type
            // forbids (finish consumes self); kept total without a panic.
            None => return Err(CommandError::Empty),
        };
        let prog = self.prog.clone();
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
            Some(Cut::Deadline) => {
                return Err(CommandError::Deadline {
                    prog,
                    secs: self.timeout.as_secs_f64(),
                });
            }
            Some(Cut::Overflow) => {
                return Err(CommandError::Overflow {
                    prog,
                    max: max_output,
                });
            }
            None => {}
        }
        let status = status.map_err(|err| CommandError::Wait {
            prog: prog.clone(),
            err,
        })?;
        read.map_err(|err| CommandError::Read {
            prog: prog.clone(),
            err,
        })?;
        if !status.success() {
            let mut stderr = String::from_utf8_lossy(&errbuf).trim().to_owned();
            if stderr.is_empty() {
                // Pacemaker's tools in XML mode put their reasons in
                // <error> elements on stdout and leave stderr empty.
                stderr = xml_errors(&String::from_utf8_lossy(&buf)).join("; ");
            }
            return Err(CommandError::Exit {
                prog,
                status,
                stderr,
            });
        }
        String::from_utf8(buf).map_err(|err| CommandError::Utf8 { prog, err })
    }
}

/// The texts of the `<error>` lines of a Pacemaker tool's XML output.
fn xml_errors(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("<error>")?.strip_suffix("</error>"))
        .collect()
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
pub fn read_capped(path: &Path, max: usize) -> Result<String, ReadError> {
    let file = std::fs::File::open(path).map_err(|err| ReadError::Open {
        path: path.to_path_buf(),
        err,
    })?;
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit)
        .read_to_end(&mut buf)
        .map_err(|err| ReadError::Read {
            path: path.to_path_buf(),
            err,
        })?;
    if buf.len() > max {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            max,
        });
    }
    String::from_utf8(buf).map_err(|err| ReadError::Utf8 {
        path: path.to_path_buf(),
        err,
    })
}

/// The previous report, if there is one. A missing file is normal (first
/// run); an unreadable or invalid one is a warning and ignored, because
/// refusing to write a fresh report would only make the status go stale.
pub fn read_previous(path: &Path, warn: &mut dyn FnMut(&str)) -> Option<Report> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            warn(&format!(
                "cannot read previous report {}: {e}",
                path.display()
            ));
            return None;
        }
    };
    match Report::from_json(&text) {
        Ok(r) => Some(r),
        Err(e) => {
            warn(&format!("previous report {} ignored: {e}", path.display()));
            None
        }
    }
}

/// Write via a temp file in the same directory, fsync it and rename it over
/// the target, so a reader sees the old or the new report, never a mix or a
/// truncated file, even across a crash.
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<(), WriteError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| WriteError::NoFileName {
        path: path.to_path_buf(),
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> Result<(), WriteError> {
        let mut f = std::fs::File::create(&tmp).map_err(|err| WriteError::Create {
            tmp: tmp.clone(),
            err,
        })?;
        f.write_all(data)
            .and_then(|()| f.sync_all())
            .map_err(|err| WriteError::Write {
                tmp: tmp.clone(),
                err,
            })?;
        // No fsync of the directory: it would double the cost of a cycle that
        // must stay close to one crm_mon call. If a crash loses the rename,
        // the previous complete report remains; it then ages into
        // staleness, which `health` reports, so nothing wrong is ever read.
        std::fs::rename(&tmp, path).map_err(|err| WriteError::Rename {
            tmp: tmp.clone(),
            path: path.to_path_buf(),
            err,
        })
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
        assert!(e.to_string().contains("did not finish"), "{e}");
        let e = run_bounded(&argv("yes"), Duration::from_secs(5), 1000).unwrap_err();
        assert!(e.to_string().contains("more than 1000 bytes"), "{e}");
        let e = run_bounded(&argv("false"), Duration::from_secs(5), 100).unwrap_err();
        assert!(e.to_string().contains("exited"), "{e}");
        assert!(run_bounded(&argv("/nonexistent/x"), Duration::from_secs(1), 100).is_err());
        assert!(matches!(
            run_bounded(&[], Duration::from_secs(1), 100),
            Err(CommandError::Empty)
        ));
    }

    #[test]
    fn atomic_write_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        write_atomically(&p, b"one").unwrap();
        write_atomically(&p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        // A directory that does not exist: an error naming the temp file,
        // and nothing left behind.
        let e = write_atomically(&d.path().join("no/r.json"), b"x").unwrap_err();
        assert!(e.to_string().starts_with("cannot create "), "{e}");
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
        // Required: an error. The default file: a reason to ask the runtime
        // instead.
        let e = read_corosync_conf(&p, true).err().unwrap();
        assert!(
            e.to_string().starts_with(&format!("{}:3: ", p.display())),
            "{e}"
        );
        let e = addresses_from_file(&p).unwrap_err();
        assert!(e.to_string().contains("corosync.conf:3: "), "{e}");
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
        // Saved corosync-cmapctl output is accepted as a saved node list.
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
        assert!(e.to_string().contains("did not finish within 0.3s"), "{e}");
        // Its deadline had passed already: killed at once, not 300 ms later.
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn peer_url_hosts_are_addresses_only_when_they_are_ips() {
        assert_eq!(
            url_ip("https://192.0.2.1:2380").as_deref(),
            Some("192.0.2.1")
        );
        assert_eq!(
            url_ip("https://[2001:db8::2]:2380/").as_deref(),
            Some("2001:db8::2")
        );
        assert_eq!(url_ip("http://b.example:2380"), None);
        assert_eq!(url_ip("nonsense"), None);
    }

    /// A cycle whose crm_mon prints `xml`, with no CIB and no Corosync.
    fn cycle_printing(dir: &Path, xml: &str) -> Cycle {
        let doc = dir.join("crm_mon.xml");
        std::fs::write(&doc, xml).unwrap();
        Cycle {
            crm_mon_cmd: vec!["cat".into(), doc.display().to_string()],
            timeout: Duration::from_secs(5),
            max_output: DEFAULT_MAX_OUTPUT,
            cib: CibSource::File(dir.join("absent-cib.xml")),
            corosync: CorosyncSource {
                conf: dir.join("absent-corosync.conf"),
                required: false,
                cmapctl_cmd: vec!["false".into()],
            },
            previous: Some(dir.join("report.json")),
            output: Some(dir.join("report.json")),
            options: Options::default(),
            fallback_addresses: [("n1".to_string(), vec!["192.0.2.9".to_string()])].into(),
            override_addresses: BTreeMap::new(),
        }
    }

    #[test]
    fn a_cycle_writes_and_warns_and_uses_fallback_addresses() {
        let d = tempfile::tempdir().unwrap();
        let c = cycle_printing(d.path(), TWO_NODES);
        let mut warnings = Vec::new();
        let r = c.run(None, &mut |w| warnings.push(w.to_owned())).unwrap();
        assert!(
            warnings.iter().any(|w| w.contains("no CIB")),
            "{warnings:?}"
        );
        assert!(
            warnings.iter().any(|w| w.contains("no Corosync node list")),
            "{warnings:?}"
        );
        let n1 = r.status.nodes.iter().find(|n| n.node_name == "n1").unwrap();
        assert_eq!(n1.addresses[0].address, "192.0.2.9");
        let written = std::fs::read_to_string(d.path().join("report.json")).unwrap();
        assert_eq!(Report::from_json(&written).unwrap(), r);
    }

    #[test]
    fn crm_mon_errors_without_nodes_fail_the_cycle_and_write_nothing() {
        let d = tempfile::tempdir().unwrap();
        let xml = r#"<pacemaker-result api-version="2.25" request="crm_mon">
  <status code="0" message="OK">
    <errors>
      <error>Could not connect to the CIB: Update does not conform to the configured schema</error>
    </errors>
  </status>
</pacemaker-result>"#;
        let c = cycle_printing(d.path(), xml);
        std::fs::write(d.path().join("report.json"), "previous").unwrap();
        let e = c.run(None, &mut |_| {}).unwrap_err();
        assert_eq!(
            e.to_string(),
            "crm_mon failed: Could not connect to the CIB: Update does not conform to the configured schema"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("report.json")).unwrap(),
            "previous"
        );
    }
}
