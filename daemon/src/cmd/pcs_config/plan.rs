//! The model both subcommands render: the arguments checked (every error
//! names its option) and turned into fence devices, the etcd primitive, its
//! clone, constraints and the alert.

use std::collections::BTreeSet;

use anyhow::{Context, bail};

use super::ClusterArgs;

/// A resource operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Op {
    /// Action name.
    pub(crate) name: &'static str,
    /// Interval in seconds (0 = not recurring).
    pub(crate) interval_s: u64,
    /// Timeout in seconds.
    pub(crate) timeout_s: u64,
    /// `OCF_CHECK_LEVEL`, for a deep monitor.
    pub(crate) depth: Option<u32>,
}

/// The operations configured on the etcd primitive. They repeat the
/// agent's advertised timeouts (its meta-data is the source; a test checks
/// that the two agree) because Pacemaker itself never reads timeouts from
/// meta-data: without explicit ops every action would get 20 s.
/// promote/demote are absent: the clone is not promotable.
pub(crate) const ETCD_OPS: &[Op] = &[
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
        name: "reload-agent",
        interval_s: 0,
        timeout_s: 20,
        depth: None,
    },
];

/// A fence device for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FenceDevice {
    /// Resource id.
    pub(crate) id: String,
    /// The node it fences.
    pub(crate) target: String,
    /// Fence agent.
    pub(crate) agent: String,
    /// Instance attributes, in order.
    pub(crate) params: Vec<(String, String)>,
}

/// Everything the configuration consists of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Cluster properties: only fencing and the quorum policy, which the
    /// pair's safety needs cluster-wide. Everything particular to etcd is
    /// the resource's own meta, so other resources of the cluster keep
    /// their behaviour.
    pub(crate) properties: Vec<(&'static str, &'static str)>,
    /// One per node.
    pub(crate) fence: Vec<FenceDevice>,
    /// The etcd primitive's id.
    pub(crate) resource_id: String,
    /// Its clone's id.
    pub(crate) clone_id: String,
    /// The primitive's instance attributes.
    pub(crate) resource_params: Vec<(String, String)>,
    /// The primitive's meta attributes.
    pub(crate) resource_meta: Vec<(&'static str, &'static str)>,
    /// The clone's meta attributes.
    pub(crate) clone_meta: Vec<(&'static str, &'static str)>,
    /// Clones etcd starts after and runs with.
    pub(crate) after: Vec<String>,
    /// Alert id.
    pub(crate) alert_id: String,
    /// Alert agent path.
    pub(crate) alert_path: String,
    /// Alert recipient: the daemon's socket.
    pub(crate) alert_recipient: String,
    /// Corosync's token timeout (ms).
    pub(crate) corosync_token_ms: u32,
}

/// Alert timeout. The alert agent only hands the event to the daemon (a
/// local socket); anything slower means the daemon is stuck, and the crm_mon
/// poll reconciles what an alert missed.
pub(super) const ALERT_TIMEOUT: &str = "10s";
/// Monitor interval of the fence devices.
pub(super) const FENCE_MONITOR: &str = "60s";

impl Plan {
    /// Checks the arguments and builds the plan. Every error names the
    /// offending option and value.
    pub(crate) fn build(a: &ClusterArgs) -> anyhow::Result<Plan> {
        let names = check_nodes(a)?;
        let clone_id = check_ids(a)?;
        check_fence_agent(&a.fence_agent)?;
        let socket = socket(a)?;
        let alert_path = alert_path(a)?;
        check_fence_options(a, &names)?;
        let two_node = a.nodes.len() == 2;
        let survivor = survivor(a, &names, two_node)?;
        let delay = parse_delay(&a.fence_delay)?;
        let fence = fence_devices(a, two_node, &survivor, &delay);

        Ok(Plan {
            properties: vec![("stonith-enabled", "true"), ("no-quorum-policy", "stop")],
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
            corosync_token_ms: a.corosync_token,
        })
    }
}

/// The node names, once at least one node is given and no name or address
/// is given twice.
fn check_nodes(a: &ClusterArgs) -> anyhow::Result<BTreeSet<&str>> {
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
    Ok(names)
}

/// The clone's id, once it, the resource's id and every `--after` id are
/// valid and distinct where they must be.
fn check_ids(a: &ClusterArgs) -> anyhow::Result<String> {
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
    Ok(clone_id)
}

/// `--fence-agent` names a fence agent: letters, digits, `_` and `-`.
fn check_fence_agent(agent: &str) -> anyhow::Result<()> {
    if agent.is_empty()
        || !agent
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        bail!("--fence-agent {agent:?}: expected the name of a fence agent, e.g. fence_redfish");
    }
    Ok(())
}

/// `--socket`, when given: an absolute UTF-8 path.
fn socket(a: &ClusterArgs) -> anyhow::Result<Option<String>> {
    let Some(p) = &a.socket else {
        return Ok(None);
    };
    let s = p
        .to_str()
        .with_context(|| format!("--socket {}: not UTF-8", p.display()))?;
    if !p.is_absolute() {
        bail!("--socket {s}: must be an absolute path");
    }
    Ok(Some(s.to_string()))
}

/// `--alert-path`: an absolute UTF-8 path.
fn alert_path(a: &ClusterArgs) -> anyhow::Result<&str> {
    let alert_path = a
        .alert_path
        .to_str()
        .with_context(|| format!("--alert-path {}: not UTF-8", a.alert_path.display()))?;
    if !a.alert_path.is_absolute() {
        bail!("--alert-path {alert_path}: must be an absolute path");
    }
    Ok(alert_path)
}

/// No fence option sets the targets (etcd-warden does, one device per
/// node), and every per-node option names a `--node`.
fn check_fence_options(a: &ClusterArgs, names: &BTreeSet<&str>) -> anyhow::Result<()> {
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
    Ok(())
}

/// The node that wins fence races: `--survivor` (only for two nodes), else
/// the first node.
fn survivor(a: &ClusterArgs, names: &BTreeSet<&str>, two_node: bool) -> anyhow::Result<String> {
    match &a.survivor {
        Some(s) if !names.contains(s.as_str()) => {
            bail!("--survivor {s}: not one of the --node names")
        }
        Some(_) if !two_node => {
            bail!("--survivor: only meaningful for exactly two nodes")
        }
        Some(s) => Ok(s.clone()),
        None => Ok(a.nodes[0].name.clone()),
    }
}

/// One fence device per node, the survivor's with the fence delay.
fn fence_devices(a: &ClusterArgs, two_node: bool, survivor: &str, delay: &str) -> Vec<FenceDevice> {
    a.nodes
        .iter()
        .map(|n| {
            let mut params = vec![("pcmk_host_list".to_string(), n.name.clone())];
            // Only a two-node cluster has a fence race: with three or
            // more, quorum decides who may fence.
            if two_node && n.name == survivor {
                params.push(("pcmk_delay_base".to_string(), delay.to_string()));
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
        .collect()
}

/// Sets `key` in an ordered parameter list, replacing an earlier value.
fn set(params: &mut Vec<(String, String)>, key: &str, value: &str) {
    match params.iter_mut().find(|(k, _)| k == key) {
        Some(p) => p.1 = value.to_string(),
        None => params.push((key.to_string(), value.to_string())),
    }
}

pub(super) fn check_node_name(name: &str) -> Result<(), String> {
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
pub(super) fn warn_secrets(plan: &Plan) {
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
