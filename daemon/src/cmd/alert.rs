//! `etcd-warden alert`: the Pacemaker alert agent.
//!
//! Pacemaker runs an alert agent on every cluster node for every node,
//! fencing and resource event, with the event in `CRM_alert_*` variables.
//! This one hands the event to the local daemon (`POST /v1/event`) and exits:
//! the daemon learns of a completed fence the moment it happens instead of
//! at its next crm_mon poll or monitor. It decides nothing itself, and it
//! never waits long: Pacemaker runs alerts in parallel and kills them at the
//! alert's timeout, and the daemon's crm_mon poll reconciles a lost alert.
//!
//! Pacemaker runs an alert's `path` with no arguments, so it is installed
//! through a wrapper (`exec etcd-warden alert`, see
//! `resource-agent/install.sh`). The recipient configured by
//! `etcd-warden pcs-config`/`crm-config` is the daemon's socket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use warden_api::client::Client;
use warden_api::{Ack, ClusterEvent, paths};

/// Arguments of `etcd-warden alert`.
#[derive(Debug, clap::Args)]
pub(crate) struct AlertArgs {
    /// The daemon's API socket. Default: CRM_alert_recipient when it is an
    /// absolute path (the configured recipient), else the default socket.
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
    /// How long to wait for the daemon, in milliseconds. Keep it below the
    /// alert's timeout in the CIB (10 s as generated).
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub(crate) timeout_ms: u64,
    /// Print the event as JSON instead of sending it (for checking an alert
    /// configuration by hand).
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// Pacemaker alert agent: forward CRM_alert_* events to the daemon.
pub(crate) fn run_alert(args: AlertArgs) -> anyhow::Result<ExitCode> {
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k.starts_with(PREFIX))
        .collect();
    let event = event_from_env(&env)?;
    if args.dry_run {
        println!("{}", serde_json::to_string_pretty(&event)?);
        return Ok(ExitCode::SUCCESS);
    }
    let socket = socket_for(args.socket.as_deref(), &env);
    let ack: Ack = Client::new(&socket)
        .post(
            paths::EVENT,
            &event,
            Duration::from_millis(args.timeout_ms.max(1)),
        )
        .with_context(|| {
            format!(
                "forwarding the {} event{} to the daemon at {}",
                event.kind,
                event
                    .node
                    .as_deref()
                    .map(|n| format!(" about {n}"))
                    .unwrap_or_default(),
                socket.display()
            )
        })?;
    if !ack.accepted {
        bail!(
            "the daemon at {} did not accept the {} event",
            socket.display(),
            event.kind
        );
    }
    Ok(ExitCode::SUCCESS)
}

const PREFIX: &str = "CRM_alert_";

/// The socket: `--socket`, else the alert's recipient if it is a path, else
/// the default.
fn socket_for(arg: Option<&Path>, env: &BTreeMap<String, String>) -> PathBuf {
    if let Some(p) = arg {
        return p.to_path_buf();
    }
    match env.get("CRM_alert_recipient") {
        Some(r) if Path::new(r).is_absolute() => PathBuf::from(r),
        _ => PathBuf::from(warden_api::DEFAULT_SOCKET),
    }
}

/// Builds the event from the `CRM_alert_*` variables. Variables the event
/// has no field for go to `extra` (without the prefix), so nothing Pacemaker
/// said is lost; a number that does not parse is kept there too.
pub(crate) fn event_from_env(env: &BTreeMap<String, String>) -> anyhow::Result<ClusterEvent> {
    let get = |k: &str| {
        env.get(&format!("{PREFIX}{k}"))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let Some(kind) = get("kind") else {
        bail!(
            "CRM_alert_kind is not set: `etcd-warden alert` is run by Pacemaker as an alert agent \
             (see `etcd-warden pcs-config`)"
        );
    };
    let mut extra = BTreeMap::new();
    let consumed = [
        "kind",
        "node",
        "task",
        "desc",
        "rc",
        "status",
        "timestamp_epoch",
        "rsc",
    ];
    for (k, v) in env {
        if let Some(name) = k.strip_prefix(PREFIX)
            && !consumed.contains(&name)
        {
            extra.insert(name.to_string(), v.clone());
        }
    }
    let mut number = |name: &str| -> Option<i64> {
        let text = get(name)?;
        match text.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                extra.insert(name.to_string(), text);
                None
            }
        }
    };
    let rc = number("rc").and_then(|n| i32::try_from(n).ok());
    let status = number("status").and_then(|n| i32::try_from(n).ok());
    let timestamp_epoch = number("timestamp_epoch");
    let desc = get("desc");
    let mut task = get("task");
    if kind == "fencing" {
        // For fencing, CRM_alert_task is the notification type
        // (st_notify_fence); the action is only in the description:
        // "Operation reboot of node2 by node1 for …: OK (ref=…)".
        if let Some(action) = desc.as_deref().and_then(fence_action)
            && let Some(t) = task.replace(action)
        {
            extra.insert("notification".to_string(), t);
        }
    }
    Ok(ClusterEvent {
        kind,
        node: get("node"),
        task,
        desc,
        rc,
        status,
        timestamp_epoch,
        resource: get("rsc"),
        extra,
    })
}

/// The fence action (`reboot`, `off`, `on`) from a fencing description.
fn fence_action(desc: &str) -> Option<String> {
    let mut words = desc.split_whitespace();
    if words.next()? != "Operation" {
        return None;
    }
    let action = words.next()?;
    (words.next()? == "of").then(|| action.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn fencing_event_carries_the_action_and_target() {
        let e = event_from_env(&env(&[
            ("CRM_alert_kind", "fencing"),
            ("CRM_alert_node", "nodeB"),
            ("CRM_alert_task", "st_notify_fence"),
            ("CRM_alert_rc", "0"),
            (
                "CRM_alert_desc",
                "Operation reboot of nodeB by nodeA for pacemaker-controld.123@nodeA: OK (ref=1)",
            ),
            ("CRM_alert_timestamp_epoch", "1796000000"),
            ("CRM_alert_version", "2.1.5"),
        ]))
        .unwrap();
        assert_eq!(e.kind, "fencing");
        assert_eq!(e.node.as_deref(), Some("nodeB"));
        assert_eq!(e.task.as_deref(), Some("reboot"));
        assert_eq!(e.rc, Some(0));
        assert_eq!(e.timestamp_epoch, Some(1_796_000_000));
        assert_eq!(e.extra["notification"], "st_notify_fence");
        assert_eq!(e.extra["version"], "2.1.5");
    }

    #[test]
    fn node_and_resource_events() {
        let e = event_from_env(&env(&[
            ("CRM_alert_kind", "node"),
            ("CRM_alert_node", "nodeB"),
            ("CRM_alert_desc", "lost"),
            ("CRM_alert_nodeid", "2"),
        ]))
        .unwrap();
        assert_eq!(e.desc.as_deref(), Some("lost"));
        assert_eq!(e.extra["nodeid"], "2");
        let e = event_from_env(&env(&[
            ("CRM_alert_kind", "resource"),
            ("CRM_alert_node", "nodeA"),
            ("CRM_alert_rsc", "etcd"),
            ("CRM_alert_task", "monitor"),
            ("CRM_alert_rc", "7"),
            ("CRM_alert_status", "x"),
        ]))
        .unwrap();
        assert_eq!(e.resource.as_deref(), Some("etcd"));
        assert_eq!(e.task.as_deref(), Some("monitor"));
        assert_eq!(e.rc, Some(7));
        assert_eq!(e.status, None);
        assert_eq!(e.extra["status"], "x");
    }

    #[test]
    fn without_a_kind_it_explains_itself() {
        let e = event_from_env(&env(&[])).unwrap_err().to_string();
        assert!(e.contains("CRM_alert_kind"), "{e}");
    }

    #[test]
    fn socket_comes_from_the_recipient() {
        let r = env(&[("CRM_alert_recipient", "/run/x/api.sock")]);
        assert_eq!(socket_for(None, &r), PathBuf::from("/run/x/api.sock"));
        let r = env(&[("CRM_alert_recipient", "someone@example")]);
        assert_eq!(
            socket_for(None, &r),
            PathBuf::from(warden_api::DEFAULT_SOCKET)
        );
        assert_eq!(socket_for(Some(Path::new("/a")), &r), PathBuf::from("/a"));
    }

    #[test]
    fn fence_action_parsing() {
        assert_eq!(
            fence_action("Operation off of n2 by n1: OK").as_deref(),
            Some("off")
        );
        assert_eq!(fence_action("something else"), None);
    }
}
