//! What the agent declares: its parameters and actions. The meta-data, the
//! parameter parser and the default timeouts all read these tables, so the
//! advertised defaults and the applied ones cannot drift apart.

use std::time::Duration;

/// The OCF name of the agent (`ocf:etcd-warden:etcd`).
pub const AGENT_NAME: &str = "etcd";

/// The OCF provider directory the agent is installed under.
pub const PROVIDER: &str = "etcd-warden";

/// The type of an instance parameter, as meta-data states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// Free text.
    String,
    /// A decimal integer.
    Integer,
}

impl ParamType {
    /// The `content@type` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
        }
    }
}

/// One instance parameter the agent itself understands.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    /// `OCF_RESKEY_<name>`.
    pub name: &'static str,
    /// The type.
    pub kind: ParamType,
    /// The default, applied when the parameter is not set.
    pub default: &'static str,
    /// Whether two resources may not share a value (OCF's deprecated
    /// `unique`). No parameter of this agent is.
    pub unique: bool,
    /// Whether a change takes effect without a restart (OCF 1.1
    /// `reloadable`): Pacemaker then runs `reload-agent` instead of stopping
    /// and starting every clone instance. Every parameter of this agent is:
    /// each only says how to reach the daemon, and the agent reads them
    /// again at every call.
    pub reloadable: bool,
    /// One line.
    pub shortdesc: &'static str,
    /// The full description.
    pub longdesc: &'static str,
}

/// The parameter naming the daemon's API socket.
pub const SOCKET: &str = "socket";
/// The parameter bounding how long an action waits for the daemon to come up.
pub const DAEMON_WAIT: &str = "daemon_wait";
/// The parameter bounding how long monitor keeps a healthy etcd whose
/// daemon is down.
pub const DAEMON_DOWN_GRACE: &str = "daemon_down_grace";

/// Every parameter the agent consumes. Any other `OCF_RESKEY_*` instance
/// parameter is passed to the daemon unchanged, which judges it.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: SOCKET,
        kind: ParamType::String,
        default: warden_api::DEFAULT_SOCKET,
        unique: false,
        reloadable: true,
        shortdesc: "Path of the etcd-warden daemon's API socket",
        longdesc: "Absolute path of the Unix socket on which the etcd-warden daemon of this \
                   node serves its API. The agent is a thin client of that daemon: every action \
                   is one request on this socket.",
    },
    ParamSpec {
        name: DAEMON_WAIT,
        kind: ParamType::Integer,
        default: "10",
        unique: false,
        reloadable: true,
        shortdesc: "Seconds start and stop wait for the daemon",
        longdesc: "How many seconds start and stop keep trying to reach \
                   a daemon that is not (yet) listening, e.g. while systemd restarts it, before \
                   they fail with a reason. Always bounded by the action's own timeout. Monitor \
                   waits only while the daemon's socket file is still there (a daemon being \
                   restarted); a stopped daemon is reported at once, and notify and \
                   validate-all never wait. 0 disables the wait.",
    },
    ParamSpec {
        name: DAEMON_DOWN_GRACE,
        kind: ParamType::Integer,
        default: "300",
        unique: false,
        reloadable: true,
        shortdesc: "Seconds monitor keeps a healthy etcd while the daemon is down",
        longdesc: "When the daemon does not answer, monitor judges etcd itself: the etcd process \
                   the daemon recorded (PID and start time) and etcd's own health endpoint. A \
                   healthy etcd passes monitor for this many seconds after the agent first found \
                   the daemon down (long enough for systemd to restart a crashed daemon, also a \
                   few times), with \"daemon down\" in the exit reason; after that, or with etcd \
                   not running or unhealthy, monitor fails. Stop without the daemon always stops \
                   the recorded etcd itself. 0 fails monitor at once, as when no daemon answers; \
                   0-86400.",
    },
];

/// The actions the agent advertises, with their default timeouts.
#[derive(Debug, Clone, Copy)]
pub struct ActionSpec {
    /// The action name.
    pub name: &'static str,
    /// Default timeout in seconds (used when Pacemaker passes none).
    pub timeout_s: u64,
    /// Recurring interval in seconds, for monitors.
    pub interval_s: Option<u64>,
    /// `OCF_CHECK_LEVEL` for monitors.
    pub depth: Option<u32>,
}

/// The advertised actions. Sizes:
/// - start 300 s: a learner joining has to fetch a snapshot of the whole
///   database from the voter and catch up (8 GiB at the default quota takes
///   minutes on slow disks), after etcd's 5 s "unhealthy cluster" window for
///   the member add.
/// - stop 120 s: a graceful leave retries the member removal through the same
///   window, then stops etcd with its own deadline; a stop that times out gets
///   the node fenced, so it errs long.
/// - monitor 30 s: the daemon answers from a live Status (depth 0) or a
///   linearizable read (depth 10) with deadlines far below this.
/// - reload-agent 20 s: it checks the parameters and needs no daemon.
///
/// No promote or demote: the agent runs as an anonymous clone, never a
/// promotable one (docs/agent.md says why), so Pacemaker never calls them.
/// No legacy `reload`: an OCF 1.1 agent gets `reload-agent` instead.
pub const ACTIONS: &[ActionSpec] = &[
    ActionSpec::plain("start", 300),
    ActionSpec::plain("stop", 120),
    ActionSpec {
        name: "monitor",
        timeout_s: 30,
        interval_s: Some(10),
        depth: Some(0),
    },
    ActionSpec {
        name: "monitor",
        timeout_s: 30,
        interval_s: Some(60),
        depth: Some(10),
    },
    ActionSpec::plain("notify", 60),
    ActionSpec::plain("reload-agent", 20),
    ActionSpec::plain("meta-data", 5),
    ActionSpec::plain("validate-all", 30),
];

impl ActionSpec {
    const fn plain(name: &'static str, timeout_s: u64) -> Self {
        ActionSpec {
            name,
            timeout_s,
            interval_s: None,
            depth: None,
        }
    }
}

/// The default timeout of `action` (the first advertised entry of that
/// name), or Pacemaker's own default of 20 s for anything not advertised.
pub fn default_timeout(action: &str) -> Duration {
    let secs = ACTIONS
        .iter()
        .find(|a| a.name == action)
        .map_or(20, |a| a.timeout_s);
    Duration::from_secs(secs)
}

/// The spec of parameter `name`, if the agent consumes it.
pub fn param(name: &str) -> Option<&'static ParamSpec> {
    PARAMS.iter().find(|p| p.name == name)
}
