//! `etcd-warden collect`: run crm_mon (bounded in time and output), build the
//! PacemakerCluster report and write it atomically, or build it from a saved
//! document with `--from-file`. The report logic is `crm_xml::report::build`;
//! this module only gathers inputs and writes the result.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use crm_xml::cib::{FenceTargets, corosync_addresses};
use crm_xml::report::{self, EtcdSection, Options, Report};

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

    /// Corosync configuration to read node addresses from. Without
    /// --from-file, `corosync-cmapctl` is asked first and this file is the
    /// fallback.
    #[arg(long, value_name = "FILE")]
    pub corosync_conf: Option<PathBuf>,

    /// Command printing Corosync's node list (not used with --from-file).
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

    let (xml, cib, corosync) = if let Some(path) = &args.from_file {
        let xml = read_capped(path, args.max_output)?;
        let cib = args
            .cib_file
            .as_deref()
            .map(|p| read_capped(p, args.max_output))
            .transpose()?;
        let corosync = args
            .corosync_conf
            .as_deref()
            .map(|p| read_capped(p, 1024 * 1024))
            .transpose()?;
        (xml, cib, corosync)
    } else {
        gather_live(&args, timeout)?
    };

    let doc = crm_xml::parse(&xml).context("cannot parse crm_mon output")?;
    if let Some(cib) = cib {
        opts.fence_targets = Some(FenceTargets::from_cib(&cib).context("cannot parse the CIB")?);
    }
    if let Some(text) = corosync {
        opts.node_addresses = corosync_addresses(&text);
    }
    for (name, addr) in explicit {
        opts.node_addresses.insert(name, addr);
    }

    let previous_path = args.previous.as_ref().or(args.output.as_ref());
    let previous = match previous_path {
        Some(p) => read_previous(p)?,
        None => None,
    };
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

/// Run crm_mon, and in parallel read the CIB and ask Corosync for its node
/// list, so that the cycle costs about one crm_mon call. Corosync's runtime
/// node list is asked rather than `/etc/corosync/corosync.conf` read first,
/// because corosync may run with another file (`-c`), and the runtime is
/// what the cluster uses.
fn gather_live(
    args: &CollectArgs,
    timeout: Duration,
) -> anyhow::Result<(String, Option<String>, Option<String>)> {
    let crm_mon = split_cmd(&args.crm_mon_cmd, "--crm-mon-cmd")?;
    let cibadmin = split_cmd(&args.cibadmin_cmd, "--cibadmin-cmd")?;
    let cmapctl = split_cmd(&args.cmapctl_cmd, "--cmapctl-cmd")?;
    let max = args.max_output;
    std::thread::scope(|s| {
        let cib = match &args.cib_file {
            Some(p) => {
                let p = p.clone();
                s.spawn(move || read_capped(&p, max))
            }
            // The CIB manager keeps the configuration in this file; reading
            // it costs far less than a cibadmin process competing with
            // crm_mon for the CPU. cibadmin is the fallback.
            None => s.spawn(move || {
                read_capped(Path::new(LIVE_CIB_FILE), max)
                    .or_else(|_| run_bounded(&cibadmin, timeout, max))
            }),
        };
        let coro = s.spawn(move || run_bounded(&cmapctl, timeout, 1024 * 1024));
        let xml = run_bounded(&crm_mon, timeout, max).context("crm_mon failed")?;
        // Without the CIB the report cannot attribute fence devices; it then
        // says so in FencingAvailable's message rather than guessing.
        let cib = match cib.join() {
            Ok(Ok(c)) => Some(c),
            Ok(Err(e)) => {
                eprintln!("etcd-warden: warning: no CIB, fence targets unknown: {e:#}");
                None
            }
            Err(_) => bail!("CIB reader thread panicked"),
        };
        let corosync = match coro.join() {
            Ok(Ok(c)) if c.contains("nodelist.node.") => Some(c),
            Ok(other) => {
                let conf = args
                    .corosync_conf
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("/etc/corosync/corosync.conf"));
                match read_capped(&conf, 1024 * 1024) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        let first = other.err().map(|x| format!("{x:#}; ")).unwrap_or_default();
                        eprintln!(
                            "etcd-warden: warning: no Corosync node list, node addresses unknown: {first}{e:#}"
                        );
                        None
                    }
                }
            }
            Err(_) => bail!("Corosync reader thread panicked"),
        };
        Ok((xml, cib, corosync))
    })
}

fn split_cmd(cmd: &str, flag: &str) -> anyhow::Result<Vec<String>> {
    let argv: Vec<String> = cmd.split_whitespace().map(str::to_owned).collect();
    if argv.is_empty() {
        bail!("{flag} is empty");
    }
    Ok(argv)
}

/// Run a command with a deadline and an output cap. The child is killed (by
/// its own handle, never by name) when either is exceeded.
pub fn run_bounded(
    argv: &[String],
    timeout: Duration,
    max_output: usize,
) -> anyhow::Result<String> {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    use std::sync::mpsc;

    enum Event {
        Exited,
        Overflow,
    }

    let (prog, rest) = argv.split_first().context("empty command")?;
    let mut child = Command::new(prog)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {prog}"))?;
    let mut stdout = child.stdout.take().context("no stdout pipe")?;
    let mut stderr = child.stderr.take().context("no stderr pipe")?;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).context("pid out of range")?);
    let limit = u64::try_from(max_output)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        let tx_out = tx.clone();
        let out = s.spawn(move || {
            let mut buf = Vec::new();
            let r = (&mut stdout).take(limit).read_to_end(&mut buf);
            if buf.len() > max_output {
                let _ = tx_out.send(Event::Overflow);
            }
            (buf, r)
        });
        let err = s.spawn(move || {
            let mut buf = Vec::new();
            let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut buf);
            buf
        });
        // Wait for the exit without reaping (WNOWAIT): until we reap it, the
        // pid stays ours, so a kill on timeout cannot hit another process.
        s.spawn(move || {
            let _ = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT);
            let _ = tx.send(Event::Exited);
        });
        let outcome = rx.recv_timeout(timeout);
        let problem = match outcome {
            Ok(Event::Exited) => None,
            Ok(Event::Overflow) => Some(format!(
                "{prog} printed more than {max_output} bytes (--max-output)"
            )),
            Err(_) => Some(format!(
                "{prog} did not finish within {:.1}s",
                timeout.as_secs_f64()
            )),
        };
        if problem.is_some() {
            let _ = child.kill();
        }
        // Reaps the child; the waiter thread has then returned or returns now.
        let status = child.wait();
        let (buf, read) = out.join().unwrap_or_else(|_| (Vec::new(), Ok(0)));
        let errbuf = err.join().unwrap_or_default();
        if let Some(p) = problem {
            bail!(p);
        }
        let status = status.with_context(|| format!("cannot wait for {prog}"))?;
        read.with_context(|| format!("cannot read the output of {prog}"))?;
        if buf.len() > max_output {
            bail!("{prog} printed more than {max_output} bytes (--max-output)");
        }
        if !status.success() {
            let stderr = String::from_utf8_lossy(&errbuf);
            bail!("{prog} exited with {status}: {}", stderr.trim());
        }
        String::from_utf8(buf).with_context(|| format!("{prog} printed invalid UTF-8"))
    })
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

    #[test]
    fn node_address_flags() {
        let m = parse_node_addresses(&["a=192.0.2.1".into(), "a=2001:db8::1".into()]).unwrap();
        assert_eq!(m["a"], ["192.0.2.1", "2001:db8::1"]);
        assert!(parse_node_addresses(&["a".into()]).is_err());
        assert!(parse_node_addresses(&["a=nope".into()]).is_err());
    }
}
