//! Reading what Pacemaker passes: the action argument and the `OCF_*`
//! environment. Pure functions over a map, so tests need no process
//! environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use warden_api::NotifyData;

use crate::spec::{self, DAEMON_DOWN_GRACE, DAEMON_WAIT, SOCKET};

/// The environment, as a map (the process environment in `main`).
pub type Env = BTreeMap<String, String>;

/// Prefix of instance parameters.
const RESKEY: &str = "OCF_RESKEY_";
/// Prefix of Pacemaker's meta attributes among the parameters.
const META: &str = "OCF_RESKEY_CRM_meta_";

/// A parameter value the agent cannot use; the message names the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parameter '{param}' = {value:?} is invalid: {why}")]
pub struct ParamError {
    /// The parameter name (without `OCF_RESKEY_`).
    pub param: String,
    /// The value as given.
    pub value: String,
    /// What is wrong with it.
    pub why: String,
}

/// The agent's own parameters, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentParams {
    /// The daemon's API socket.
    pub socket: PathBuf,
    /// How long a non-monitor action waits for an absent daemon.
    pub daemon_wait: Duration,
    /// How long monitor keeps a healthy etcd whose daemon is down.
    pub daemon_down_grace: Duration,
}

/// The longest Unix socket path Linux accepts (`sun_path` is 108 bytes
/// including the terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The largest `daemon_wait` accepted; anything longer than an hour is a
/// typo (and every action's timeout bounds it anyway).
const MAX_DAEMON_WAIT_S: u64 = 3600;

/// The largest `daemon_down_grace` accepted: a day. A daemon down longer
/// is no restart but an outage an operator must see.
const MAX_DAEMON_DOWN_GRACE_S: u64 = 86_400;

impl AgentParams {
    /// Parses and checks the agent's parameters. Unset parameters take
    /// their advertised defaults; an empty value counts as unset, because
    /// that is how `pcs resource update x socket=` removes one.
    pub fn parse(env: &Env) -> Result<Self, ParamError> {
        let socket = PathBuf::from(value_or_default(env, SOCKET));
        check_socket(&socket)?;
        let wait = seconds(env, DAEMON_WAIT, MAX_DAEMON_WAIT_S)?;
        let grace = seconds(env, DAEMON_DOWN_GRACE, MAX_DAEMON_DOWN_GRACE_S)?;
        Ok(AgentParams {
            socket,
            daemon_wait: wait,
            daemon_down_grace: grace,
        })
    }

    /// Like [`AgentParams::parse`], but a bad value falls back to its
    /// default, with a warning. Used by monitor and stop: configuration
    /// errors are reported by validate-all and start, while the actions
    /// that judge whether etcd is running must still reach the daemon.
    pub fn parse_lenient(env: &Env) -> (Self, Vec<String>) {
        let mut warnings = Vec::new();
        let mut env = env.clone();
        // At most one retry per parameter: each pass removes the bad one.
        for _ in 0..=spec::PARAMS.len() {
            match Self::parse(&env) {
                Ok(p) => return (p, warnings),
                Err(e) => {
                    warnings.push(format!(
                        "{e}; using the default {:?}",
                        spec::param(&e.param).map_or("", |p| p.default)
                    ));
                    env.remove(&format!("{RESKEY}{}", e.param));
                }
            }
        }
        // Unreachable in practice: the defaults always parse.
        (
            AgentParams {
                socket: PathBuf::from(warden_api::DEFAULT_SOCKET),
                daemon_wait: Duration::ZERO,
                daemon_down_grace: Duration::ZERO,
            },
            warnings,
        )
    }
}

/// The whole number of seconds in parameter `name`, at most `max`.
fn seconds(env: &Env, name: &str, max: u64) -> Result<Duration, ParamError> {
    let text = value_or_default(env, name);
    let err = |why: String| ParamError {
        param: name.into(),
        value: text.to_string(),
        why,
    };
    let s = text
        .trim()
        .parse::<u64>()
        .map_err(|_| err("expected a whole number of seconds (e.g. 10)".into()))?;
    if s > max {
        return Err(err(format!("at most {max} seconds")));
    }
    Ok(Duration::from_secs(s))
}

fn value_or_default<'a>(env: &'a Env, name: &str) -> &'a str {
    let default = spec::param(name).map_or("", |p| p.default);
    match env.get(&format!("{RESKEY}{name}")) {
        Some(v) if !v.trim().is_empty() => v,
        _ => default,
    }
}

fn check_socket(path: &Path) -> Result<(), ParamError> {
    let text = path.to_string_lossy();
    let err = |why: &str| ParamError {
        param: SOCKET.into(),
        value: text.to_string(),
        why: why.into(),
    };
    if !path.is_absolute() {
        return Err(err("must be an absolute path"));
    }
    if text.len() > MAX_SOCKET_PATH {
        return Err(err(&format!(
            "longer than the {MAX_SOCKET_PATH} bytes a Unix socket path may have"
        )));
    }
    if text.ends_with('/') {
        return Err(err("names a directory, not a socket"));
    }
    Ok(())
}

/// The instance parameters to forward to the daemon: every `OCF_RESKEY_*`
/// except Pacemaker's meta attributes, its feature set and the agent's own.
pub fn passthrough_params(env: &Env) -> BTreeMap<String, String> {
    env.iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix(RESKEY)?;
            if k.starts_with(META) || name == "crm_feature_set" || spec::param(name).is_some() {
                return None;
            }
            Some((name.to_string(), v.clone()))
        })
        .collect()
}

/// The action's timeout: `OCF_RESKEY_CRM_meta_timeout` (milliseconds), else
/// the advertised default. A value that is not a number is Pacemaker's
/// doing, not the user's, so it falls back to the default with a warning.
pub fn timeout(env: &Env, action: &str) -> (Duration, Option<String>) {
    let default = spec::default_timeout(action);
    // crm_resource passes the meta attributes without the OCF_RESKEY_ prefix
    // in some versions; accept both.
    let raw = env
        .get("OCF_RESKEY_CRM_meta_timeout")
        .or_else(|| env.get("CRM_meta_timeout"));
    match raw {
        None => (default, None),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => (Duration::from_millis(ms), None),
            _ => (
                default,
                Some(format!(
                    "OCF_RESKEY_CRM_meta_timeout={v:?} is not a positive number of milliseconds; \
                     using {} s",
                    default.as_secs()
                )),
            ),
        },
    }
}

/// Whether this monitor is a probe (interval 0 or absent).
pub fn is_probe(env: &Env) -> bool {
    env.get("OCF_RESKEY_CRM_meta_interval")
        .map(|v| v.trim().parse::<u64>().unwrap_or(0) == 0)
        .unwrap_or(true)
}

/// The monitor depth to request: `OCF_CHECK_LEVEL` rounded down to a level
/// the agent supports (0 or 10), as OCF asks ("fall back to the next lower
/// supported level").
pub fn check_level(env: &Env) -> (u32, Option<String>) {
    match env.get("OCF_CHECK_LEVEL") {
        None => (0, None),
        Some(v) if v.trim().is_empty() => (0, None),
        Some(v) => match v.trim().parse::<u32>() {
            Ok(n) if n >= 10 => (10, None),
            Ok(_) => (0, None),
            Err(_) => (
                0,
                Some(format!(
                    "OCF_CHECK_LEVEL={v:?} is not a number; checking at depth 0"
                )),
            ),
        },
    }
}

/// The lists of node names Pacemaker passes with clone notifications, with
/// the pre-2.1 names (`master`, `slave`) folded into the new ones.
const NOTIFY_LISTS: &[(&str, &[&str])] = &[
    ("active", &["active"]),
    ("inactive", &["inactive"]),
    ("start", &["start"]),
    ("stop", &["stop"]),
    ("promote", &["promote"]),
    ("demote", &["demote"]),
    ("promoted", &["promoted", "master"]),
    ("unpromoted", &["unpromoted", "slave"]),
];

/// Clone notification data, if Pacemaker passed any. For a notify action it
/// carries `kind` (pre/post) and `operation`; Pacemaker also attaches the
/// lists to the clone's start, stop, promote and demote actions, where they
/// are forwarded with an empty kind and operation. The daemon treats them as
/// hints and checks the live cluster before acting.
pub fn notify_data(env: &Env) -> Option<NotifyData> {
    let get = |k: &str| {
        env.get(&format!("{META}notify_{k}"))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let mut nodes = BTreeMap::new();
    for (key, sources) in NOTIFY_LISTS {
        if let Some(list) = sources.iter().find_map(|s| get(&format!("{s}_uname"))) {
            nodes.insert(
                (*key).to_string(),
                list.split_whitespace().map(str::to_string).collect(),
            );
        }
    }
    let kind = get("type").unwrap_or_default();
    let operation = get("operation").unwrap_or_default();
    if kind.is_empty() && operation.is_empty() && nodes.is_empty() {
        return None;
    }
    Some(NotifyData {
        kind,
        operation,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_apply_when_unset_or_empty() {
        let p = AgentParams::parse(&env(&[])).unwrap();
        assert_eq!(p.socket, PathBuf::from(warden_api::DEFAULT_SOCKET));
        assert_eq!(p.daemon_wait, Duration::from_secs(10));
        assert_eq!(p.daemon_down_grace, Duration::from_secs(300));
        let p = AgentParams::parse(&env(&[("OCF_RESKEY_socket", " ")])).unwrap();
        assert_eq!(p.socket, PathBuf::from(warden_api::DEFAULT_SOCKET));
    }

    #[test]
    fn bad_socket_names_the_parameter() {
        for bad in [
            "relative/api.sock",
            "/run/",
            &format!("/{}", "x".repeat(120)),
        ] {
            let e = AgentParams::parse(&env(&[("OCF_RESKEY_socket", bad)])).unwrap_err();
            assert_eq!(e.param, "socket");
            assert!(e.to_string().starts_with("parameter 'socket'"), "{e}");
        }
    }

    #[test]
    fn non_numeric_wait_names_the_parameter() {
        for bad in ["ten", "-1", "1.5", "99999"] {
            let e = AgentParams::parse(&env(&[("OCF_RESKEY_daemon_wait", bad)])).unwrap_err();
            assert_eq!(e.param, "daemon_wait", "{bad}");
            assert!(e.to_string().contains(bad), "{e}");
        }
        for bad in ["soon", "86401"] {
            let e = AgentParams::parse(&env(&[("OCF_RESKEY_daemon_down_grace", bad)])).unwrap_err();
            assert_eq!(e.param, "daemon_down_grace", "{bad}");
        }
        let p = AgentParams::parse(&env(&[("OCF_RESKEY_daemon_down_grace", "0")])).unwrap();
        assert_eq!(p.daemon_down_grace, Duration::ZERO);
    }

    #[test]
    fn lenient_parse_falls_back_per_parameter() {
        let (p, w) = AgentParams::parse_lenient(&env(&[
            ("OCF_RESKEY_socket", "/tmp/x.sock"),
            ("OCF_RESKEY_daemon_wait", "soon"),
        ]));
        assert_eq!(p.socket, PathBuf::from("/tmp/x.sock"));
        assert_eq!(p.daemon_wait, Duration::from_secs(10));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("daemon_wait"), "{w:?}");
    }

    #[test]
    fn passthrough_excludes_meta_and_own_params() {
        let p = passthrough_params(&env(&[
            ("OCF_RESKEY_socket", "/x"),
            ("OCF_RESKEY_daemon_wait", "1"),
            ("OCF_RESKEY_daemon_down_grace", "60"),
            ("OCF_RESKEY_CRM_meta_timeout", "20000"),
            ("OCF_RESKEY_crm_feature_set", "3.16.2"),
            ("OCF_RESKEY_data_dir", "/var/lib/etcd"),
            ("OCF_ROOT", "/usr/lib/ocf"),
        ]));
        assert_eq!(
            p.into_iter().collect::<Vec<_>>(),
            vec![("data_dir".to_string(), "/var/lib/etcd".to_string())]
        );
    }

    #[test]
    fn timeout_from_meta_or_default() {
        let (t, w) = timeout(&env(&[("OCF_RESKEY_CRM_meta_timeout", "20000")]), "start");
        assert_eq!(t, Duration::from_secs(20));
        assert!(w.is_none());
        let (t, _) = timeout(&env(&[]), "start");
        assert_eq!(t, Duration::from_secs(300));
        let (t, w) = timeout(&env(&[("OCF_RESKEY_CRM_meta_timeout", "soon")]), "monitor");
        assert_eq!(t, Duration::from_secs(30));
        assert!(w.unwrap().contains("soon"));
        let (t, _) = timeout(&env(&[("CRM_meta_timeout", "1500")]), "monitor");
        assert_eq!(t, Duration::from_millis(1500));
    }

    #[test]
    fn check_levels_round_down() {
        assert_eq!(check_level(&env(&[])).0, 0);
        assert_eq!(check_level(&env(&[("OCF_CHECK_LEVEL", "10")])).0, 10);
        assert_eq!(check_level(&env(&[("OCF_CHECK_LEVEL", "20")])).0, 10);
        assert_eq!(check_level(&env(&[("OCF_CHECK_LEVEL", "5")])).0, 0);
        let (l, w) = check_level(&env(&[("OCF_CHECK_LEVEL", "deep")]));
        assert_eq!(l, 0);
        assert!(w.is_some());
    }

    #[test]
    fn probes_are_interval_zero() {
        assert!(is_probe(&env(&[("OCF_RESKEY_CRM_meta_interval", "0")])));
        assert!(is_probe(&env(&[])));
        assert!(!is_probe(&env(&[(
            "OCF_RESKEY_CRM_meta_interval",
            "10000"
        )])));
    }

    #[test]
    fn notify_lists_are_split_and_legacy_names_folded() {
        let n = notify_data(&env(&[
            ("OCF_RESKEY_CRM_meta_notify_type", "pre"),
            ("OCF_RESKEY_CRM_meta_notify_operation", "start"),
            ("OCF_RESKEY_CRM_meta_notify_active_uname", "nodeA "),
            ("OCF_RESKEY_CRM_meta_notify_start_uname", "nodeB  nodeC"),
            ("OCF_RESKEY_CRM_meta_notify_master_uname", "nodeA"),
            ("OCF_RESKEY_CRM_meta_notify_stop_uname", " "),
        ]))
        .unwrap();
        assert_eq!(n.kind, "pre");
        assert_eq!(n.operation, "start");
        assert_eq!(n.nodes["active"], vec!["nodeA"]);
        assert_eq!(n.nodes["start"], vec!["nodeB", "nodeC"]);
        assert_eq!(n.nodes["promoted"], vec!["nodeA"]);
        assert!(!n.nodes.contains_key("stop"));
        assert!(notify_data(&env(&[])).is_none());
    }
}
