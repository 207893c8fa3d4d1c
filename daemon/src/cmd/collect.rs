//! `etcd-warden collect`: run crm_mon (bounded in time and output), build the
//! PacemakerCluster report and write it atomically, or build it from a saved
//! document with `--from-file`. The cycle is [`crate::report_cycle`], the
//! one the daemon runs too; this module only turns flags into its inputs
//! and prints the result.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use crm_xml::cib::FenceTargets;
use crm_xml::report::{EtcdSection, Options};

use crate::atomic_file::Replace;
use crate::report_cycle::{
    CibSource, CorosyncSource, Cycle, DEFAULT_COROSYNC_CONF, Gathered, LIVE_CIB_FILE,
    addresses_from_file, read_capped, read_previous,
};

/// Arguments: Build the PacemakerCluster report from crm_mon and write it.
#[derive(Debug, clap::Args)]
pub(crate) struct CollectArgs {
    /// Build the report from a saved crm_mon XML document instead of running
    /// crm_mon; the report goes to stdout (and to --output if given).
    #[arg(long, value_name = "FILE")]
    pub(crate) from_file: Option<PathBuf>,

    /// The crm_mon command, split on whitespace (no shell).
    #[arg(
        long,
        default_value = "crm_mon --one-shot --inactive --output-as=xml --fence-history=2"
    )]
    pub(crate) crm_mon_cmd: String,

    /// Deadline for each external command, in seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub(crate) timeout: f64,

    /// Largest output accepted from crm_mon or cibadmin (bytes); more is an error.
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_name = "BYTES")]
    pub(crate) max_output: usize,

    /// Write the report here, atomically (temp file, fsync, rename). The
    /// previous report at this path supplies unchanged conditions'
    /// lastTransitionTime.
    #[arg(long, value_name = "PATH")]
    pub(crate) output: Option<PathBuf>,

    /// Also print the report on stdout (the default when --output is absent).
    #[arg(long)]
    pub(crate) stdout: bool,

    /// Previous report to carry transition times from (default: --output).
    #[arg(long, value_name = "FILE")]
    pub(crate) previous: Option<PathBuf>,

    /// Read fence device targets (pcmk_host_list / pcmk_host_map) from this
    /// CIB file. Default without --from-file: /var/lib/pacemaker/cib/cib.xml,
    /// falling back to --cibadmin-cmd when it cannot be read.
    #[arg(long, value_name = "FILE")]
    pub(crate) cib_file: Option<PathBuf>,

    /// Command printing the live CIB (fallback; not used with --from-file).
    #[arg(long, default_value = "cibadmin --query")]
    pub(crate) cibadmin_cmd: String,

    /// Corosync configuration to read node addresses from (default
    /// /etc/corosync/corosync.conf). Used when its node list agrees with
    /// crm_mon's (names and node ids); with --from-file it may also hold
    /// saved corosync-cmapctl output.
    #[arg(long, value_name = "FILE")]
    pub(crate) corosync_conf: Option<PathBuf>,

    /// Command printing Corosync's runtime node list, run only when the
    /// Corosync configuration is absent, malformed or disagrees with crm_mon
    /// (not used with --from-file).
    #[arg(long, default_value = "corosync-cmapctl nodelist.node")]
    pub(crate) cmapctl_cmd: String,

    /// A node's address, NAME=IP (repeatable); overrides Corosync's.
    #[arg(long = "node-address", value_name = "NAME=IP")]
    pub(crate) node_addresses: Vec<String>,

    /// Resource agent of etcd (repeatable; `*` at the end matches a prefix).
    /// Default: ocf:etcd-warden:etcd and ocf:heartbeat:podman-etcd.
    #[arg(long = "etcd-resource-agent", value_name = "AGENT")]
    pub(crate) etcd_agents: Vec<String>,

    /// Resource agent of kubelet (repeatable). Default: systemd:kubelet.
    #[arg(long = "kubelet-resource-agent", value_name = "AGENT")]
    pub(crate) kubelet_agents: Vec<String>,

    /// Resource agent of fence devices (repeatable). Default: stonith:*.
    #[arg(long = "fence-resource-agent", value_name = "AGENT")]
    pub(crate) fence_agents: Vec<String>,

    /// Number of member nodes the cluster should have.
    #[arg(long, default_value_t = 2)]
    pub(crate) expected_nodes: usize,

    /// JSON file holding the `etcd` section (as the daemon writes it).
    #[arg(long, value_name = "FILE")]
    pub(crate) etcd_json: Option<PathBuf>,

    /// The rules the report follows: `generic` for any Pacemaker cluster,
    /// `openshift` for a status valid for the PacemakerCluster CRD (see
    /// docs/report.md).
    #[arg(long, value_enum, default_value = "generic", value_name = "PROFILE")]
    pub(crate) profile: super::health::ProfileArg,
}

/// Build the PacemakerCluster report from crm_mon and write it.
pub(crate) fn run_collect(args: CollectArgs) -> anyhow::Result<ExitCode> {
    let timeout = duration(args.timeout)?;
    let mut opts = Options {
        expected_node_count: args.expected_nodes,
        profile: args.profile.into(),
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
    let etcd = match &args.etcd_json {
        Some(path) => {
            let text = read_capped(path, args.max_output)?;
            let section: EtcdSection = serde_json::from_str(&text)
                .with_context(|| format!("{}: not an etcd section", path.display()))?;
            Some(section)
        }
        None => None,
    };
    let explicit = parse_node_addresses(&args.node_addresses)?;
    // The commands matter only on the live path (--from-file runs none).
    let live = args.from_file.is_none();
    let cmd = |c: &str, flag: &str| {
        if live {
            split_cmd(c, flag)
        } else {
            Ok(Vec::new())
        }
    };
    let crm_mon_cmd = cmd(&args.crm_mon_cmd, "--crm-mon-cmd")?;
    let cibadmin_cmd = cmd(&args.cibadmin_cmd, "--cibadmin-cmd")?;
    let cmapctl_cmd = cmd(&args.cmapctl_cmd, "--cmapctl-cmd")?;
    let cycle = Cycle {
        crm_mon_cmd,
        timeout,
        max_output: args.max_output,
        cib: match &args.cib_file {
            Some(p) => CibSource::File(p.clone()),
            None => CibSource::FileOrCommand(PathBuf::from(LIVE_CIB_FILE), cibadmin_cmd),
        },
        corosync: CorosyncSource {
            conf: args
                .corosync_conf
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_COROSYNC_CONF)),
            required: args.corosync_conf.is_some(),
            cmapctl_cmd,
        },
        previous: args.previous.clone().or_else(|| args.output.clone()),
        output: args.output.clone(),
        options: opts,
        fallback_addresses: BTreeMap::new(),
        override_addresses: explicit,
    };
    let mut warn = |w: &str| eprintln!("etcd-warden: warning: {w}");

    let report = if let Some(path) = &args.from_file {
        let g = from_file(&cycle, path, &mut warn)?;
        let report = cycle.build(g, etcd);
        if let Some(out) = &args.output {
            crate::atomic_file::write_with_mode(
                out,
                report.to_json().as_bytes(),
                Replace::Fast,
                crate::report_cycle::REPORT_MODE,
            )?;
        }
        report
    } else {
        cycle.run(etcd, &mut warn)?
    };
    if args.output.is_none() || args.stdout || args.from_file.is_some() {
        let json = report.to_json();
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(json.as_bytes())
            .and_then(|()| stdout.flush())
            .context("cannot write the report to stdout")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--from-file`: the saved crm_mon document, and the CIB and node list
/// only when named (nothing live is asked).
fn from_file(
    cycle: &Cycle,
    path: &std::path::Path,
    warn: &mut dyn FnMut(&str),
) -> anyhow::Result<Gathered> {
    let xml = read_capped(path, cycle.max_output)?;
    let cib = match &cycle.cib {
        CibSource::File(p) => Some(read_capped(p, cycle.max_output)?),
        CibSource::FileOrCommand(..) => None,
    };
    let corosync = if cycle.corosync.required {
        Some(addresses_from_file(&cycle.corosync.conf)?)
    } else {
        None
    };
    let doc = crm_xml::parse(&xml).context("cannot parse crm_mon output")?;
    let fence_targets = match cib {
        Some(cib) => Some(FenceTargets::from_cib(&cib).context("cannot parse the CIB")?),
        None => None,
    };
    let previous = match &cycle.previous {
        Some(p) => read_previous(p, warn),
        None => None,
    };
    Ok(Gathered {
        doc,
        fence_targets,
        node_addresses: corosync.unwrap_or_default(),
        previous,
    })
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

fn split_cmd(cmd: &str, flag: &str) -> anyhow::Result<Vec<String>> {
    let argv: Vec<String> = cmd.split_whitespace().map(str::to_owned).collect();
    if argv.is_empty() {
        bail!("{flag} is empty");
    }
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_address_flags() {
        let m = parse_node_addresses(&["a=192.0.2.1".into(), "a=2001:db8::1".into()]).unwrap();
        assert_eq!(m["a"], ["192.0.2.1", "2001:db8::1"]);
        assert!(parse_node_addresses(&["a".into()]).is_err());
        assert!(parse_node_addresses(&["a=nope".into()]).is_err());
    }

    #[test]
    fn empty_commands_are_refused_by_flag() {
        let e = split_cmd("  ", "--crm-mon-cmd").unwrap_err();
        assert_eq!(e.to_string(), "--crm-mon-cmd is empty");
    }
}
