//! `etcd-warden pcs-config` and `etcd-warden crm-config`: print what
//! configures a Pacemaker cluster for the agent `ocf:etcd-warden:etcd`.
//!
//! One model ([`Plan`]) is built and checked from the arguments and rendered
//! three ways: pcs commands, crmsh configuration, and a CIB XML fragment
//! (`<configuration>`, applied with `cibadmin --modify --xml-file`). The XML
//! is what the tests run through `crm_verify`.
//!
//! Choices, and why:
//! - An anonymous clone with `interleave=true notify=true`: each node runs
//!   one etcd member; notifications let the daemons react to a peer's stop or
//!   start in the same transition. Not promotable: etcd cannot demote a voter
//!   to a learner, and learner promotion is gated by etcd ("in sync"), not by
//!   Pacemaker's scheduler; Pacemaker deciding promotion would be a second
//!   owner of membership beside the daemon, and two owners undo each other's
//!   changes. See docs/agent.md.
//! - One fence device per node (`pcmk_host_list=<node>`). In a two-node
//!   cluster the device that fences the favoured node (the first `--node`, or
//!   `--survivor`) waits `pcmk_delay_base` (10 s by default) and the other
//!   none, so in a fence race the favoured node always shoots first and
//!   survives. `priority-fencing-delay` cannot break this tie: it favours the
//!   node with more resource priority, and an anonymous clone runs the same
//!   on both nodes.
//! - Meta attributes of the etcd resource only, no cluster-wide defaults:
//!   `migration-threshold=10` and `failure-timeout=10min`. A failed start
//!   (e.g. a learner that could not catch up in time) keeps etcd off that
//!   node (Pacemaker's `start-failure-is-fatal`, left at its default for
//!   the other resources of the cluster) until `failure-timeout` expires
//!   the failure, so the node is tried again after 10 minutes instead of
//!   being blocked for ever; `pcs resource cleanup` retries at once.
//! - pcs output edits a copy of the CIB and pushes only the difference
//!   (`cib-push … diff-against=`), so an edit made meanwhile by someone
//!   else is kept, not overwritten.
//! - An alert (the `etcd-warden alert` wrapper) with the daemon's socket as
//!   recipient: Pacemaker sends node, fencing and resource events to it by
//!   default, so the daemon learns of a completed fence when it happens.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

mod plan;
mod render;
#[cfg(test)]
mod tests;

pub(crate) use plan::Plan;
use plan::{check_node_name, warn_secrets};
use render::corosync_token_note;
pub(crate) use render::{render_crm, render_pcs, render_xml};

/// Where the alert wrapper (`exec etcd-warden alert`) is installed.
/// Pacemaker runs an alert's path with no arguments, so it needs an
/// executable of its own.
pub(crate) const DEFAULT_ALERT_PATH: &str = "/usr/libexec/etcd-warden/alert";

/// Corosync's token timeout set by default (ms): Corosync 3's own default,
/// written out so that the configuration says what the runbook's timings
/// assume whatever the installed version's default. A shorter token fences
/// a dead peer sooner but also a live one whose host stalls for longer than
/// the token (a loaded VM, a busy network); 3 s tolerates such stalls.
pub(crate) const DEFAULT_COROSYNC_TOKEN_MS: u32 = 3000;
/// Bounds of `--corosync-token`: below 200 ms ordinary scheduling delays
/// lose the token; above a minute a dead node holds etcd's writes that long.
const MIN_COROSYNC_TOKEN_MS: i64 = 200;
const MAX_COROSYNC_TOKEN_MS: i64 = 60_000;

/// A node and its cluster (ring) address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeSpec {
    /// The Pacemaker node name.
    pub(crate) name: String,
    /// Its ring address.
    pub(crate) addr: IpAddr,
}

impl FromStr for NodeSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, addr) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected NAME=ADDRESS, e.g. nodeA=192.0.2.1"))?;
        check_node_name(name).map_err(|e| format!("{s:?}: {e}"))?;
        // Brackets are how IPv6 addresses appear in URLs; accept them here too.
        let bare = addr.trim_start_matches('[').trim_end_matches(']');
        let addr = bare
            .parse::<IpAddr>()
            .map_err(|_| format!("{s:?}: {addr:?} is not an IPv4 or IPv6 address"))?;
        Ok(NodeSpec {
            name: name.to_string(),
            addr,
        })
    }
}

/// `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyValue {
    /// The key.
    pub(crate) key: String,
    /// The value.
    pub(crate) value: String,
}

impl FromStr for KeyValue {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: expected KEY=VALUE"))?;
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "{s:?}: the key must be letters, digits, '_' or '-'"
            ));
        }
        if value.chars().any(|c| c.is_control()) {
            return Err(format!("{s:?}: the value contains a control character"));
        }
        Ok(KeyValue {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

/// `NODE:KEY=VALUE`, a fence option for one node's device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeKeyValue {
    /// The node whose device gets it.
    pub(crate) node: String,
    /// The option.
    pub(crate) kv: KeyValue,
}

impl FromStr for NodeKeyValue {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (node, kv) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: expected NODE:KEY=VALUE, e.g. nodeA:ip=10.0.0.11"))?;
        Ok(NodeKeyValue {
            node: node.to_string(),
            kv: kv.parse()?,
        })
    }
}

/// What both subcommands take.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ClusterArgs {
    /// A cluster node and its ring address, NAME=ADDRESS (IPv4 or IPv6).
    /// Repeat for every node. In a two-node cluster the first one survives a
    /// fence race unless --survivor says otherwise.
    #[arg(long = "node", value_name = "NAME=ADDRESS", required = true)]
    pub(crate) nodes: Vec<NodeSpec>,
    /// The id of the etcd primitive.
    #[arg(long, default_value = "etcd")]
    pub(crate) resource_id: String,
    /// The id of its clone (default: RESOURCE_ID-clone).
    #[arg(long)]
    pub(crate) clone_id: Option<String>,
    /// The daemon's API socket, when not the default.
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
    /// The fence agent of the per-node fence devices.
    #[arg(long, default_value = "fence_redfish", value_name = "AGENT")]
    pub(crate) fence_agent: String,
    /// An option for every fence device (e.g. username=admin). Repeatable.
    #[arg(long = "fence-option", value_name = "KEY=VALUE")]
    pub(crate) fence_options: Vec<KeyValue>,
    /// An option for one node's fence device (e.g. nodeA:ip=10.0.0.11).
    /// Repeatable; overrides --fence-option.
    #[arg(long = "fence-node-option", value_name = "NODE:KEY=VALUE")]
    pub(crate) fence_node_options: Vec<NodeKeyValue>,
    /// Two nodes only: the node that wins a fence race (default: the first
    /// --node).
    #[arg(long, value_name = "NODE")]
    pub(crate) survivor: Option<String>,
    /// Two nodes only: pcmk_delay_base of the device that fences the
    /// survivor, e.g. 10s or 500ms.
    #[arg(long, default_value = "10s", value_name = "DELAY")]
    pub(crate) fence_delay: String,
    /// Path of the alert agent wrapper on every node.
    #[arg(long, default_value = DEFAULT_ALERT_PATH, value_name = "PATH")]
    pub(crate) alert_path: PathBuf,
    /// A clone etcd must start after and run with (e.g. kubelet-clone).
    /// Repeatable.
    #[arg(long = "after", value_name = "RESOURCE")]
    pub(crate) after: Vec<String>,
    /// Cluster name for `pcs cluster setup`.
    #[arg(long, default_value = "etcd-warden")]
    pub(crate) cluster_name: String,
    /// Corosync's token timeout in milliseconds: how long a silent node has
    /// before Corosync declares it lost and Pacemaker fences it. Set by
    /// `pcs cluster setup` (`totem token=`); for crmsh and an existing
    /// cluster the output says how to set it.
    #[arg(
        long,
        default_value_t = DEFAULT_COROSYNC_TOKEN_MS,
        value_name = "MS",
        value_parser = clap::value_parser!(u32).range(MIN_COROSYNC_TOKEN_MS..=MAX_COROSYNC_TOKEN_MS),
    )]
    pub(crate) corosync_token: u32,
}

/// Arguments of `etcd-warden pcs-config`.
#[derive(Debug, clap::Args)]
pub(crate) struct PcsConfigArgs {
    /// The cluster.
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
    /// Leave out the `pcs host auth` / `pcs cluster setup` steps (for a
    /// cluster that exists).
    #[arg(long)]
    pub(crate) no_setup: bool,
}

/// Output format of `etcd-warden crm-config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CrmFormat {
    /// crmsh configuration (`crm configure load update FILE`).
    Crm,
    /// A CIB `<configuration>` fragment (`cibadmin --modify --xml-file FILE`).
    Xml,
}

/// Arguments of `etcd-warden crm-config`.
#[derive(Debug, clap::Args)]
pub(crate) struct CrmConfigArgs {
    /// The cluster.
    #[command(flatten)]
    pub(crate) cluster: ClusterArgs,
    /// What to print.
    #[arg(long, value_enum, default_value = "crm")]
    pub(crate) format: CrmFormat,
}

/// Print the pcs commands that configure a cluster for this agent.
pub(crate) fn run_pcsconfig(args: PcsConfigArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::build(&args.cluster)?;
    warn_secrets(&plan);
    print!("{}", render_pcs(&plan, &args.cluster, !args.no_setup));
    Ok(ExitCode::SUCCESS)
}

/// Print the crmsh configuration (or CIB XML) for this agent.
pub(crate) fn run_crmconfig(args: CrmConfigArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::build(&args.cluster)?;
    warn_secrets(&plan);
    match args.format {
        CrmFormat::Crm => print!("{}", render_crm(&plan)),
        CrmFormat::Xml => {
            print!("{}", render_xml(&plan));
            // Corosync's configuration is not part of the CIB.
            eprintln!("etcd-warden: {}", corosync_token_note(&plan));
        }
    }
    Ok(ExitCode::SUCCESS)
}
