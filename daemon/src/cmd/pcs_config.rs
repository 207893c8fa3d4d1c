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
//! - `start-failure-is-fatal=false` with `migration-threshold=10` and
//!   `failure-timeout=10min`: a start that fails (e.g. a learner that could
//!   not catch up in time) is retried, and a node that used up its retries is
//!   tried again later instead of being blocked for ever.
//! - An alert (the `etcd-warden alert` wrapper) with the daemon's socket as
//!   recipient: Pacemaker sends node, fencing and resource events to it by
//!   default, so the daemon learns of a completed fence when it happens.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use anyhow::{Context, bail};

/// Where the alert wrapper (`exec etcd-warden alert`) is installed.
/// Pacemaker runs an alert's path with no arguments, so it needs an
/// executable of its own.
pub const DEFAULT_ALERT_PATH: &str = "/usr/libexec/etcd-warden/alert";

/// A node and its cluster (ring) address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// The Pacemaker node name.
    pub name: String,
    /// Its ring address.
    pub addr: IpAddr,
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
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
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
pub struct NodeKeyValue {
    /// The node whose device gets it.
    pub node: String,
    /// The option.
    pub kv: KeyValue,
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
pub struct ClusterArgs {
    /// A cluster node and its ring address, NAME=ADDRESS (IPv4 or IPv6).
    /// Repeat for every node. In a two-node cluster the first one survives a
    /// fence race unless --survivor says otherwise.
    #[arg(long = "node", value_name = "NAME=ADDRESS", required = true)]
    pub nodes: Vec<NodeSpec>,
    /// The id of the etcd primitive.
    #[arg(long, default_value = "etcd")]
    pub resource_id: String,
    /// The id of its clone (default: RESOURCE_ID-clone).
    #[arg(long)]
    pub clone_id: Option<String>,
    /// The daemon's API socket, when not the default.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// The fence agent of the per-node fence devices.
    #[arg(long, default_value = "fence_redfish", value_name = "AGENT")]
    pub fence_agent: String,
    /// An option for every fence device (e.g. username=admin). Repeatable.
    #[arg(long = "fence-option", value_name = "KEY=VALUE")]
    pub fence_options: Vec<KeyValue>,
    /// An option for one node's fence device (e.g. nodeA:ip=10.0.0.11).
    /// Repeatable; overrides --fence-option.
    #[arg(long = "fence-node-option", value_name = "NODE:KEY=VALUE")]
    pub fence_node_options: Vec<NodeKeyValue>,
    /// Two nodes only: the node that wins a fence race (default: the first
    /// --node).
    #[arg(long, value_name = "NODE")]
    pub survivor: Option<String>,
    /// Two nodes only: pcmk_delay_base of the device that fences the
    /// survivor, e.g. 10s or 500ms.
    #[arg(long, default_value = "10s", value_name = "DELAY")]
    pub fence_delay: String,
    /// Path of the alert agent wrapper on every node.
    #[arg(long, default_value = DEFAULT_ALERT_PATH, value_name = "PATH")]
    pub alert_path: PathBuf,
    /// A clone etcd must start after and run with (e.g. kubelet-clone).
    /// Repeatable.
    #[arg(long = "after", value_name = "RESOURCE")]
    pub after: Vec<String>,
    /// Cluster name for `pcs cluster setup`.
    #[arg(long, default_value = "etcd-warden")]
    pub cluster_name: String,
}

/// Arguments of `etcd-warden pcs-config`.
#[derive(Debug, clap::Args)]
pub struct PcsConfigArgs {
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Leave out the `pcs host auth` / `pcs cluster setup` steps (for a
    /// cluster that exists).
    #[arg(long)]
    pub no_setup: bool,
}

/// Output format of `etcd-warden crm-config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CrmFormat {
    /// crmsh configuration (`crm configure load update FILE`).
    Crm,
    /// A CIB `<configuration>` fragment (`cibadmin --modify --xml-file FILE`).
    Xml,
}

/// Arguments of `etcd-warden crm-config`.
#[derive(Debug, clap::Args)]
pub struct CrmConfigArgs {
    /// The cluster.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// What to print.
    #[arg(long, value_enum, default_value = "crm")]
    pub format: CrmFormat,
}

/// Print the pcs commands that configure a cluster for this agent.
pub fn run_pcsconfig(args: PcsConfigArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::build(&args.cluster)?;
    warn_secrets(&plan);
    print!("{}", render_pcs(&plan, &args.cluster, !args.no_setup));
    Ok(ExitCode::SUCCESS)
}

/// Print the crmsh configuration (or CIB XML) for this agent.
pub fn run_crmconfig(args: CrmConfigArgs) -> anyhow::Result<ExitCode> {
    let plan = Plan::build(&args.cluster)?;
    warn_secrets(&plan);
    match args.format {
        CrmFormat::Crm => print!("{}", render_crm(&plan)),
        CrmFormat::Xml => print!("{}", render_xml(&plan)),
    }
    Ok(ExitCode::SUCCESS)
}

/// A resource operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// Action name.
    pub name: &'static str,
    /// Interval in seconds (0 = not recurring).
    pub interval_s: u64,
    /// Timeout in seconds.
    pub timeout_s: u64,
    /// `OCF_CHECK_LEVEL`, for a deep monitor.
    pub depth: Option<u32>,
}

/// The operations configured on the etcd primitive. They repeat the
/// agent's advertised timeouts (its meta-data is the source; a test checks
/// that the two agree) because Pacemaker itself never reads timeouts from
/// meta-data: without explicit ops every action would get 20 s.
/// promote/demote are absent: the clone is not promotable.
pub const ETCD_OPS: &[Op] = &[
    Op {
        name: "start",
        interval_s: 0,
        timeout_s: 300,
        depth: None,
    },
    Op {
        name: "stop",
        interval_s: 0,
        timeout_s: 120,
        depth: None,
    },
    Op {
        name: "monitor",
        interval_s: 10,
        timeout_s: 30,
        depth: None,
    },
    Op {
        name: "monitor",
        interval_s: 60,
        timeout_s: 30,
        depth: Some(10),
    },
    Op {
        name: "notify",
        interval_s: 0,
        timeout_s: 60,
        depth: None,
    },
    Op {
        name: "reload",
        interval_s: 0,
        timeout_s: 60,
        depth: None,
    },
];

/// A fence device for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FenceDevice {
    /// Resource id.
    pub id: String,
    /// The node it fences.
    pub target: String,
    /// Fence agent.
    pub agent: String,
    /// Instance attributes, in order.
    pub params: Vec<(String, String)>,
}

/// Everything the configuration consists of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Cluster properties.
    pub properties: Vec<(&'static str, &'static str)>,
    /// One per node.
    pub fence: Vec<FenceDevice>,
    /// The etcd primitive's id.
    pub resource_id: String,
    /// Its clone's id.
    pub clone_id: String,
    /// The primitive's instance attributes.
    pub resource_params: Vec<(String, String)>,
    /// The primitive's meta attributes.
    pub resource_meta: Vec<(&'static str, &'static str)>,
    /// The clone's meta attributes.
    pub clone_meta: Vec<(&'static str, &'static str)>,
    /// Clones etcd starts after and runs with.
    pub after: Vec<String>,
    /// Alert id.
    pub alert_id: String,
    /// Alert agent path.
    pub alert_path: String,
    /// Alert recipient: the daemon's socket.
    pub alert_recipient: String,
}

/// Alert timeout. The alert agent only hands the event to the daemon (a
/// local socket); anything slower means the daemon is stuck, and the crm_mon
/// poll reconciles what an alert missed.
const ALERT_TIMEOUT: &str = "10s";
/// Monitor interval of the fence devices.
const FENCE_MONITOR: &str = "60s";

impl Plan {
    /// Checks the arguments and builds the plan. Every error names the
    /// offending option and value.
    pub fn build(a: &ClusterArgs) -> anyhow::Result<Plan> {
        if a.nodes.is_empty() {
            bail!("at least one --node NAME=ADDRESS is needed");
        }
        let mut names = BTreeSet::new();
        let mut addrs = BTreeSet::new();
        for n in &a.nodes {
            if !names.insert(n.name.as_str()) {
                bail!("--node {}: the node is given twice", n.name);
            }
            if !addrs.insert(n.addr) {
                bail!(
                    "--node {}={}: the address is given to two nodes",
                    n.name,
                    n.addr
                );
            }
        }
        check_id("--resource-id", &a.resource_id)?;
        let clone_id = a
            .clone_id
            .clone()
            .unwrap_or_else(|| format!("{}-clone", a.resource_id));
        check_id("--clone-id", &clone_id)?;
        if clone_id == a.resource_id {
            bail!("--clone-id {clone_id}: must differ from --resource-id");
        }
        for id in &a.after {
            check_id("--after", id)?;
            if *id == clone_id || *id == a.resource_id {
                bail!("--after {id}: etcd cannot start after itself");
            }
        }
        if a.fence_agent.is_empty()
            || !a
                .fence_agent
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            bail!(
                "--fence-agent {:?}: expected the name of a fence agent, e.g. fence_redfish",
                a.fence_agent
            );
        }
        let socket = match &a.socket {
            Some(p) => {
                let s = p
                    .to_str()
                    .with_context(|| format!("--socket {}: not UTF-8", p.display()))?;
                if !p.is_absolute() {
                    bail!("--socket {s}: must be an absolute path");
                }
                Some(s.to_string())
            }
            None => None,
        };
        let alert_path = a
            .alert_path
            .to_str()
            .with_context(|| format!("--alert-path {}: not UTF-8", a.alert_path.display()))?;
        if !a.alert_path.is_absolute() {
            bail!("--alert-path {alert_path}: must be an absolute path");
        }
        for kv in a
            .fence_options
            .iter()
            .chain(a.fence_node_options.iter().map(|n| &n.kv))
        {
            if kv.key == "pcmk_host_list" || kv.key == "pcmk_host_map" {
                bail!(
                    "fence option {}: etcd-warden sets the targets itself (one device per node)",
                    kv.key
                );
            }
        }
        for n in &a.fence_node_options {
            if !names.contains(n.node.as_str()) {
                bail!(
                    "--fence-node-option {}:{}={}: {} is not a --node",
                    n.node,
                    n.kv.key,
                    n.kv.value,
                    n.node
                );
            }
        }
        let two_node = a.nodes.len() == 2;
        let survivor = match &a.survivor {
            Some(s) if !names.contains(s.as_str()) => {
                bail!("--survivor {s}: not one of the --node names")
            }
            Some(_) if !two_node => {
                bail!("--survivor: only meaningful for exactly two nodes")
            }
            Some(s) => s.clone(),
            None => a.nodes[0].name.clone(),
        };
        let delay = parse_delay(&a.fence_delay)?;

        let fence = a
            .nodes
            .iter()
            .map(|n| {
                let mut params = vec![("pcmk_host_list".to_string(), n.name.clone())];
                // Only a two-node cluster has a fence race: with three or
                // more, quorum decides who may fence.
                if two_node && n.name == survivor {
                    params.push(("pcmk_delay_base".to_string(), delay.clone()));
                }
                for kv in &a.fence_options {
                    set(&mut params, &kv.key, &kv.value);
                }
                for o in a.fence_node_options.iter().filter(|o| o.node == n.name) {
                    set(&mut params, &o.kv.key, &o.kv.value);
                }
                FenceDevice {
                    id: format!("fence-{}", n.name),
                    target: n.name.clone(),
                    agent: a.fence_agent.clone(),
                    params,
                }
            })
            .collect();

        Ok(Plan {
            properties: vec![
                ("stonith-enabled", "true"),
                ("start-failure-is-fatal", "false"),
                ("no-quorum-policy", "stop"),
            ],
            fence,
            resource_id: a.resource_id.clone(),
            clone_id,
            resource_params: socket
                .clone()
                .map(|s| vec![("socket".to_string(), s)])
                .unwrap_or_default(),
            resource_meta: vec![("migration-threshold", "10"), ("failure-timeout", "10min")],
            clone_meta: vec![("interleave", "true"), ("notify", "true")],
            after: a.after.clone(),
            alert_id: "etcd-warden".to_string(),
            alert_path: alert_path.to_string(),
            alert_recipient: socket.unwrap_or_else(|| warden_api::DEFAULT_SOCKET.to_string()),
        })
    }
}

/// Sets `key` in an ordered parameter list, replacing an earlier value.
fn set(params: &mut Vec<(String, String)>, key: &str, value: &str) {
    match params.iter_mut().find(|(k, _)| k == key) {
        Some(p) => p.1 = value.to_string(),
        None => params.push((key.to_string(), value.to_string())),
    }
}

fn check_node_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty node name".into());
    }
    if name.len() > 253
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err(format!(
            "{name:?} is not a node name (letters, digits, '-', '_', '.')"
        ));
    }
    Ok(())
}

/// A CIB id must be an XML ID: a letter or '_' first, then letters, digits,
/// '-', '_' or '.'.
fn check_id(option: &str, id: &str) -> anyhow::Result<()> {
    let mut chars = id.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !ok {
        bail!(
            "{option} {id:?}: not a valid CIB id (a letter first, then letters, digits, '-', '_', '.')"
        );
    }
    Ok(())
}

/// Accepts `10`, `10s`, `500ms`, `1min`; returns Pacemaker's spelling.
fn parse_delay(s: &str) -> anyhow::Result<String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("--fence-delay {s:?}: expected e.g. 10s or 500ms"))?;
    let unit = match unit {
        "" | "s" => "s",
        "ms" => "ms",
        "m" | "min" => "min",
        _ => bail!("--fence-delay {s:?}: the unit must be ms, s or min"),
    };
    Ok(format!("{n}{unit}"))
}

/// Warns (stderr) about secrets that would end up in the CIB and in the
/// process list of whoever runs the commands.
fn warn_secrets(plan: &Plan) {
    let secret = plan
        .fence
        .iter()
        .flat_map(|d| d.params.iter())
        .any(|(k, _)| k == "password" || k == "passwd");
    if secret {
        eprintln!(
            "etcd-warden: warning: a fence password given as an option is stored in the CIB in \
             clear text; prefer password_script= (or the agent's equivalent) pointing to a \
             root-only file"
        );
    }
}

/// Quotes a word for a POSIX shell when needed.
fn sh(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Quotes a value for crmsh.
fn crm_value(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:@%+,".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

fn xml_attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

fn kv_words(
    pairs: impl IntoIterator<Item = (String, String)>,
    quote: fn(&str) -> String,
) -> String {
    pairs
        .into_iter()
        .map(|(k, v)| format!(" {k}={}", quote(&v)))
        .collect()
}

fn op_words(op: &Op) -> String {
    let mut s = format!(
        " op {} interval={}s timeout={}s",
        op.name, op.interval_s, op.timeout_s
    );
    if let Some(d) = op.depth {
        let _ = write!(s, " OCF_CHECK_LEVEL={d}");
    }
    s
}

const HEADER: &str = "generated by etcd-warden for ocf:etcd-warden:etcd";

/// pcs commands. Everything after the cluster setup goes into one CIB file
/// that is pushed at once, so the cluster never sees a half configuration
/// (e.g. a primitive not yet cloned, started on one node).
pub fn render_pcs(p: &Plan, a: &ClusterArgs, setup: bool) -> String {
    let f = "etcd-warden.cib.xml";
    let mut o = format!("# {HEADER}\nset -e\n");
    if setup {
        let hosts: String = a
            .nodes
            .iter()
            .map(|n| format!(" {} addr={}", sh(&n.name), n.addr))
            .collect();
        o.push_str("# The cluster (skip for an existing one). With two nodes pcs sets corosync's two_node (and so wait_for_all).\n");
        let _ = writeln!(o, "pcs host auth{hosts}");
        let _ = writeln!(o, "pcs cluster setup {}{hosts}", sh(&a.cluster_name));
        o.push_str("pcs cluster start --all\n");
    }
    o.push_str("# Everything else is built in a CIB file and pushed at once.\n");
    let _ = writeln!(o, "pcs cluster cib {f}");
    let props: String = p
        .properties
        .iter()
        .map(|(k, v)| format!(" {k}={v}"))
        .collect();
    let _ = writeln!(o, "pcs -f {f} property set{props}");
    for d in &p.fence {
        let _ = writeln!(
            o,
            "pcs -f {f} stonith create {} {}{} op monitor interval={FENCE_MONITOR}",
            sh(&d.id),
            sh(&d.agent),
            kv_words(d.params.clone(), sh)
        );
        // A device never runs on the node it fences: that node may be the
        // one that is gone.
        let _ = writeln!(
            o,
            "pcs -f {f} constraint location {} avoids {}",
            sh(&d.id),
            sh(&d.target)
        );
    }
    let ops: String = ETCD_OPS.iter().map(op_words).collect();
    let meta: String = p
        .resource_meta
        .iter()
        .map(|(k, v)| format!(" {k}={v}"))
        .collect();
    let _ = writeln!(
        o,
        "pcs -f {f} resource create {} ocf:etcd-warden:etcd{}{ops} meta{meta}",
        sh(&p.resource_id),
        kv_words(p.resource_params.clone(), sh)
    );
    // Clone meta set with `resource meta` on the clone's id: the spelling of
    // clone options in `resource create … clone` differs between pcs
    // versions, and a misplaced `meta` once put notify=true on the primitive.
    let _ = writeln!(
        o,
        "pcs -f {f} resource clone {} {}",
        sh(&p.resource_id),
        sh(&p.clone_id)
    );
    let cmeta: String = p
        .clone_meta
        .iter()
        .map(|(k, v)| format!(" {k}={v}"))
        .collect();
    let _ = writeln!(o, "pcs -f {f} resource meta {}{cmeta}", sh(&p.clone_id));
    for dep in &p.after {
        let _ = writeln!(
            o,
            "pcs -f {f} constraint order start {} then start {}",
            sh(dep),
            sh(&p.clone_id)
        );
        let _ = writeln!(
            o,
            "pcs -f {f} constraint colocation add {} with {} INFINITY",
            sh(&p.clone_id),
            sh(dep)
        );
    }
    // pcs cannot set <select>; without it Pacemaker sends node, fencing and
    // resource alerts, which is what the daemon wants.
    let _ = writeln!(
        o,
        "pcs -f {f} alert create id={} path={} meta timeout={ALERT_TIMEOUT}",
        sh(&p.alert_id),
        sh(&p.alert_path)
    );
    let _ = writeln!(
        o,
        "pcs -f {f} alert recipient add {} value={} id={}-socket",
        sh(&p.alert_id),
        sh(&p.alert_recipient),
        p.alert_id
    );
    let _ = writeln!(o, "crm_verify --xml-file {f} -V");
    let _ = writeln!(o, "pcs cluster cib-push {f} --config");
    o.push_str("# Read back what landed instead of trusting exit codes:\n");
    let _ = writeln!(
        o,
        "cibadmin --query --xpath \"//clone[@id='{}']/meta_attributes/nvpair[@name='notify'][@value='true']\"",
        p.clone_id
    );
    o
}

/// crmsh configuration for `crm configure load update FILE`.
pub fn render_crm(p: &Plan) -> String {
    let mut o = format!("# {HEADER}\n");
    let props: String = p
        .properties
        .iter()
        .map(|(k, v)| format!(" {k}={v}"))
        .collect();
    let _ = writeln!(o, "property cib-bootstrap-options:{props}");
    for d in &p.fence {
        let _ = writeln!(
            o,
            "primitive {} stonith:{} params{} op monitor interval={FENCE_MONITOR}",
            d.id,
            d.agent,
            kv_words(d.params.clone(), crm_value)
        );
        let _ = writeln!(
            o,
            "location {}-avoids-{} {} -inf: {}",
            d.id, d.target, d.id, d.target
        );
    }
    let params = if p.resource_params.is_empty() {
        String::new()
    } else {
        format!(" params{}", kv_words(p.resource_params.clone(), crm_value))
    };
    let ops: String = ETCD_OPS.iter().map(op_words).collect();
    let meta: String = p
        .resource_meta
        .iter()
        .map(|(k, v)| format!(" {k}={v}"))
        .collect();
    let _ = writeln!(
        o,
        "primitive {} ocf:etcd-warden:etcd{params}{ops} meta{meta}",
        p.resource_id
    );
    let cmeta: String = p
        .clone_meta
        .iter()
        .map(|(k, v)| format!(" {k}={v}"))
        .collect();
    let _ = writeln!(o, "clone {} {} meta{cmeta}", p.clone_id, p.resource_id);
    for dep in &p.after {
        let _ = writeln!(
            o,
            "order {}-after-{dep} Mandatory: {dep} {}",
            p.clone_id, p.clone_id
        );
        let _ = writeln!(
            o,
            "colocation {}-with-{dep} inf: {} {dep}",
            p.clone_id, p.clone_id
        );
    }
    let _ = writeln!(
        o,
        "alert {} {} meta timeout={ALERT_TIMEOUT} to {}",
        p.alert_id,
        crm_value(&p.alert_path),
        crm_value(&p.alert_recipient)
    );
    o
}

fn nvset(o: &mut String, indent: &str, element: &str, id: &str, pairs: &[(String, String)]) {
    if pairs.is_empty() {
        return;
    }
    let _ = writeln!(o, "{indent}<{element} id=\"{}\">", xml_attr(id));
    for (k, v) in pairs {
        let _ = writeln!(
            o,
            "{indent}  <nvpair id=\"{}\" name=\"{}\" value=\"{}\"/>",
            xml_attr(&format!("{id}-{k}")),
            xml_attr(k),
            xml_attr(v)
        );
    }
    let _ = writeln!(o, "{indent}</{element}>");
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A CIB `<configuration>` fragment; apply with
/// `cibadmin --modify --xml-file FILE` (merges by id).
pub fn render_xml(p: &Plan) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!-- {HEADER}; apply with: cibadmin --modify --xml-file FILE -->"
    );
    o.push_str("<configuration>\n  <crm_config>\n");
    nvset(
        &mut o,
        "    ",
        "cluster_property_set",
        "cib-bootstrap-options",
        &owned(&p.properties),
    );
    o.push_str("  </crm_config>\n  <resources>\n");
    for d in &p.fence {
        let _ = writeln!(
            o,
            "    <primitive id=\"{}\" class=\"stonith\" type=\"{}\">",
            xml_attr(&d.id),
            xml_attr(&d.agent)
        );
        nvset(
            &mut o,
            "      ",
            "instance_attributes",
            &format!("{}-instance_attributes", d.id),
            &d.params,
        );
        let _ = writeln!(
            o,
            "      <operations>\n        <op id=\"{}-monitor-interval-{FENCE_MONITOR}\" name=\"monitor\" interval=\"{FENCE_MONITOR}\"/>\n      </operations>\n    </primitive>",
            xml_attr(&d.id)
        );
    }
    let _ = writeln!(o, "    <clone id=\"{}\">", xml_attr(&p.clone_id));
    nvset(
        &mut o,
        "      ",
        "meta_attributes",
        &format!("{}-meta_attributes", p.clone_id),
        &owned(&p.clone_meta),
    );
    let _ = writeln!(
        o,
        "      <primitive id=\"{}\" class=\"ocf\" provider=\"etcd-warden\" type=\"etcd\">",
        xml_attr(&p.resource_id)
    );
    nvset(
        &mut o,
        "        ",
        "instance_attributes",
        &format!("{}-instance_attributes", p.resource_id),
        &p.resource_params,
    );
    nvset(
        &mut o,
        "        ",
        "meta_attributes",
        &format!("{}-meta_attributes", p.resource_id),
        &owned(&p.resource_meta),
    );
    o.push_str("        <operations>\n");
    for op in ETCD_OPS {
        let id = format!("{}-{}-interval-{}s", p.resource_id, op.name, op.interval_s);
        let _ = write!(
            o,
            "          <op id=\"{}\" name=\"{}\" interval=\"{}s\" timeout=\"{}s\"",
            xml_attr(&id),
            op.name,
            op.interval_s,
            op.timeout_s
        );
        match op.depth {
            None => o.push_str("/>\n"),
            Some(d) => {
                o.push_str(">\n");
                nvset(
                    &mut o,
                    "            ",
                    "instance_attributes",
                    &format!("{id}-instance_attributes"),
                    &[("OCF_CHECK_LEVEL".to_string(), d.to_string())],
                );
                o.push_str("          </op>\n");
            }
        }
    }
    o.push_str("        </operations>\n      </primitive>\n    </clone>\n  </resources>\n  <constraints>\n");
    for d in &p.fence {
        let _ = writeln!(
            o,
            "    <rsc_location id=\"{}\" rsc=\"{}\" node=\"{}\" score=\"-INFINITY\"/>",
            xml_attr(&format!("{}-avoids-{}", d.id, d.target)),
            xml_attr(&d.id),
            xml_attr(&d.target)
        );
    }
    for dep in &p.after {
        let _ = writeln!(
            o,
            "    <rsc_order id=\"{}\" first=\"{}\" first-action=\"start\" then=\"{}\" then-action=\"start\" kind=\"Mandatory\"/>",
            xml_attr(&format!("{}-after-{dep}", p.clone_id)),
            xml_attr(dep),
            xml_attr(&p.clone_id)
        );
        let _ = writeln!(
            o,
            "    <rsc_colocation id=\"{}\" rsc=\"{}\" with-rsc=\"{}\" score=\"INFINITY\"/>",
            xml_attr(&format!("{}-with-{dep}", p.clone_id)),
            xml_attr(&p.clone_id),
            xml_attr(dep)
        );
    }
    o.push_str("  </constraints>\n  <alerts>\n");
    let _ = writeln!(
        o,
        "    <alert id=\"{}\" path=\"{}\">",
        xml_attr(&p.alert_id),
        xml_attr(&p.alert_path)
    );
    nvset(
        &mut o,
        "      ",
        "meta_attributes",
        &format!("{}-meta_attributes", p.alert_id),
        &[("timeout".to_string(), ALERT_TIMEOUT.to_string())],
    );
    let _ = writeln!(
        o,
        "      <recipient id=\"{}-socket\" value=\"{}\"/>\n    </alert>\n  </alerts>\n</configuration>",
        xml_attr(&p.alert_id),
        xml_attr(&p.alert_recipient)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        c: ClusterArgs,
    }

    fn args(extra: &[&str]) -> Result<ClusterArgs, String> {
        let mut v = vec!["t"];
        v.extend_from_slice(extra);
        T::try_parse_from(v).map(|t| t.c).map_err(|e| e.to_string())
    }

    fn two() -> Vec<&'static str> {
        vec!["--node", "nodeA=192.0.2.1", "--node", "nodeB=192.0.2.2"]
    }

    #[test]
    fn two_nodes_favour_the_first_with_a_delay() {
        let p = Plan::build(&args(&two()).unwrap()).unwrap();
        assert_eq!(p.fence.len(), 2);
        assert!(
            p.fence[0]
                .params
                .contains(&("pcmk_delay_base".into(), "10s".into()))
        );
        assert!(
            !p.fence[1]
                .params
                .iter()
                .any(|(k, _)| k == "pcmk_delay_base")
        );
        assert_eq!(p.clone_id, "etcd-clone");
        assert!(p.clone_meta.contains(&("notify", "true")));
    }

    #[test]
    fn survivor_and_options_are_applied() {
        let mut a = two();
        a.extend([
            "--survivor",
            "nodeB",
            "--fence-delay",
            "5",
            "--fence-agent",
            "fence_xyz",
            "--fence-option",
            "username=admin",
            "--fence-node-option",
            "nodeA:ip=10.0.0.11",
        ]);
        let p = Plan::build(&args(&a).unwrap()).unwrap();
        assert_eq!(p.fence[0].agent, "fence_xyz");
        assert!(
            p.fence[0]
                .params
                .contains(&("ip".into(), "10.0.0.11".into()))
        );
        assert!(
            p.fence[1]
                .params
                .contains(&("pcmk_delay_base".into(), "5s".into()))
        );
        assert!(
            p.fence[1]
                .params
                .contains(&("username".into(), "admin".into()))
        );
    }

    #[test]
    fn three_nodes_have_no_delay() {
        let mut a = two();
        a.extend(["--node", "nodeC=2001:db8::3"]);
        let p = Plan::build(&args(&a).unwrap()).unwrap();
        assert!(
            p.fence
                .iter()
                .all(|d| !d.params.iter().any(|(k, _)| k == "pcmk_delay_base"))
        );
    }

    #[test]
    fn bad_input_names_the_option() {
        assert!(
            args(&["--node", "nodeA"])
                .unwrap_err()
                .contains("NAME=ADDRESS")
        );
        assert!(
            args(&["--node", "nodeA=300.1.1.1"])
                .unwrap_err()
                .contains("not an IPv4 or IPv6")
        );
        assert!(
            args(&["--node", "a b=192.0.2.1"])
                .unwrap_err()
                .contains("node name")
        );
        assert!(args(&["--fence-option", "=x"]).unwrap_err().contains("key"));
        let cases: &[(&[&str], &str)] = &[
            (
                &["--node", "nodeA=192.0.2.1", "--node", "nodeA=192.0.2.2"],
                "twice",
            ),
            (
                &["--node", "nodeA=192.0.2.1", "--node", "nodeB=192.0.2.1"],
                "two nodes",
            ),
            (
                &["--node", "a=192.0.2.1", "--resource-id", "1etcd"],
                "--resource-id",
            ),
            (
                &["--node", "a=192.0.2.1", "--socket", "api.sock"],
                "--socket",
            ),
            (
                &["--node", "a=192.0.2.1", "--fence-agent", "fence x"],
                "--fence-agent",
            ),
            (
                &["--node", "a=192.0.2.1", "--fence-delay", "soon"],
                "--fence-delay",
            ),
            (&["--node", "a=192.0.2.1", "--survivor", "b"], "--survivor"),
            (
                &[
                    "--node",
                    "a=192.0.2.1",
                    "--fence-option",
                    "pcmk_host_list=a",
                ],
                "pcmk_host_list",
            ),
            (
                &["--node", "a=192.0.2.1", "--fence-node-option", "b:ip=1"],
                "not a --node",
            ),
        ];
        for (argv, needle) in cases {
            let e = Plan::build(&args(argv).unwrap()).unwrap_err().to_string();
            assert!(e.contains(needle), "{argv:?}: {e}");
        }
    }

    #[test]
    fn renderings_quote_values() {
        let mut a = two();
        a.extend(["--fence-option", "password_script=/etc/x y's"]);
        let c = args(&a).unwrap();
        let p = Plan::build(&c).unwrap();
        let pcs = render_pcs(&p, &c, true);
        assert!(pcs.contains("password_script='/etc/x y'\\''s'"), "{pcs}");
        assert!(
            pcs.contains("pcs cluster setup etcd-warden nodeA addr=192.0.2.1 nodeB addr=192.0.2.2")
        );
        let crm = render_crm(&p);
        assert!(crm.contains("password_script=\"/etc/x y's\""), "{crm}");
        let xml = render_xml(&p);
        assert!(xml.contains("value=\"/etc/x y&apos;s\""), "{xml}");
        assert!(xml.contains("name=\"OCF_CHECK_LEVEL\" value=\"10\""));
    }

    #[test]
    fn ipv6_brackets_are_accepted() {
        let n: NodeSpec = "n1=[2001:db8::1]".parse().unwrap();
        assert_eq!(n.addr.to_string(), "2001:db8::1");
    }
}
