//! The contract between the etcd-warden daemon and its clients (the OCF agent,
//! the CLI, the alert agent).
//!
//! The daemon serves HTTP/1.1 with JSON bodies on a Unix socket
//! (`/run/etcd-warden/api.sock` by default). Every route is versioned under
//! `/v1`. The OCF agent is deliberately thin: it sends one [`ActionRequest`]
//! and maps the [`ActionReply`]'s [`Outcome`] to an OCF exit code with
//! [`Outcome::ocf_code`], the one place where that mapping lives.
//!
//! | method | path | body | reply |
//! |---|---|---|---|
//! | POST | [`paths::ACTION`] | [`ActionRequest`] | [`ActionReply`] |
//! | POST | [`paths::EVENT`] | [`ClusterEvent`] | [`Ack`] |
//! | GET | [`paths::STATUS`] | – | [`NodeStatus`]'s fields, plus `archiveDir`, `archives` and `lastArchive` (the daemon's failover archives) |
//! | GET | [`paths::MEMBERS`] | – | `Vec<`[`Member`]`>` |
//! | GET | [`paths::REPORT`] | – | the PacemakerCluster report (JSON) |
//! | GET | [`paths::EVENTS`] | – | server-sent [`LeaderEvent`]s |
//!
//! Errors are a non-2xx status with an [`ApiError`] body.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![warn(missing_docs)]

pub mod client;
pub mod procfs;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Default path of the daemon's API socket.
pub const DEFAULT_SOCKET: &str = "/run/etcd-warden/api.sock";

/// What the OCF agent's exit reason says when an action found no daemon to
/// answer it; the daemon, once back, recognises its own absence by it in
/// Pacemaker's failure record.
pub const DAEMON_UNREACHABLE: &str = "the etcd-warden daemon is not reachable";

/// Route paths, shared so that client and server cannot drift apart.
pub mod paths {
    /// Run one OCF action (start, stop, monitor, …).
    pub const ACTION: &str = "/v1/action";
    /// Push a cluster event (from the alert agent).
    pub const EVENT: &str = "/v1/event";
    /// This node's status.
    pub const STATUS: &str = "/v1/status";
    /// etcd's live member list.
    pub const MEMBERS: &str = "/v1/members";
    /// The PacemakerCluster report with its etcd section.
    pub const REPORT: &str = "/v1/report";
    /// Leader changes as server-sent events (`event: leader`, data
    /// [`super::LeaderEvent`]).
    pub const EVENTS: &str = "/v1/events";
    /// Resolve what the failover logic refused (`etcd-warden recover`),
    /// under the daemon's one-pass-at-a-time lock.
    pub const RECOVER: &str = "/v1/recover";
    /// Defragment the local member if the policy allows it now
    /// (`etcd-warden defrag`).
    pub const DEFRAG: &str = "/v1/defrag";
    /// Read the configuration files again, apply what a running daemon can
    /// and say when the rest takes effect (`etcd-warden reload`).
    pub const RELOAD: &str = "/v1/reload";
}

/// The name of the file, in the directory of the daemon's socket, in which
/// the daemon records the etcd it runs ([`EtcdRecord`]).
pub const ETCD_RECORD: &str = "etcd-record.json";

/// Where the daemon listening on `socket` keeps its [`EtcdRecord`]: beside
/// the socket, in the run directory, where the OCF agent finds it without
/// reading the daemon's configuration.
pub fn etcd_record_path(socket: &std::path::Path) -> std::path::PathBuf {
    socket.with_file_name(ETCD_RECORD)
}

/// The etcd the daemon runs, as the daemon last saw it: what the OCF agent
/// needs to judge and stop etcd when the daemon itself is down. Written
/// when the daemon sees a new etcd process (started or adopted), removed
/// when it sees etcd gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcdRecord {
    /// The supervisor backend: `process` or `systemd`.
    pub backend: String,
    /// etcd's PID.
    pub pid: u32,
    /// etcd's start time (field 22 of /proc/PID/stat, clock ticks since
    /// boot): with the PID, it tells etcd from a process that reused its PID.
    pub start_ticks: u64,
    /// Whether etcd leads a process group of its own (stop signals go to
    /// the group).
    pub own_group: bool,
    /// The systemd unit etcd runs in (the `systemd` backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// etcd's client URL on this node (`http://…` or `https://…`).
    pub client_url: String,
    /// How long the daemon lets etcd stop after SIGTERM before SIGKILL.
    pub stop_grace_ms: u64,
}

/// One defragmentation of the local member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefragRun {
    /// When it started (Unix milliseconds).
    pub started_at_ms: u64,
    /// How long etcd's defragment took (ms).
    pub duration_ms: u64,
    /// The database file before.
    pub db_size_before: i64,
    /// Bytes in use before.
    pub db_size_in_use_before: i64,
    /// The database file after, when etcd answered.
    #[serde(default)]
    pub db_size_after: Option<i64>,
    /// The member the leadership was handed to first, when this one led.
    #[serde(default)]
    pub leader_moved_to: Option<String>,
    /// Asked by `etcd-warden defrag` rather than the daemon's own policy.
    #[serde(default)]
    pub by_hand: bool,
    /// Why it failed, when it did.
    #[serde(default)]
    pub error: Option<String>,
}

/// The defragmentation policy's record on this node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefragStatus {
    /// The latest defragmentations of the local member, oldest first.
    #[serde(default)]
    pub runs: Vec<DefragRun>,
    /// The policy's latest answer (why it did not defragment, or what it
    /// did).
    #[serde(default)]
    pub answer: Option<String>,
}

/// `POST /v1/defrag`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefragRequest {
    /// Defragment even below the threshold (every other rule holds).
    #[serde(default)]
    pub below_threshold: bool,
}

/// The answer to `POST /v1/defrag`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DefragReply {
    /// Whether the local member was defragmented.
    pub done: bool,
    /// What was done, or why not.
    pub message: String,
    /// Each step taken, in order.
    #[serde(default)]
    pub steps: Vec<String>,
    /// The defragmentation, when one ran.
    #[serde(default)]
    pub run: Option<DefragRun>,
}

/// The answer to `POST /v1/reload`: the configuration files read again and
/// compared with the settings the daemon runs with, key by key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadReply {
    /// Why the files were refused (file, line and key), when they were;
    /// the daemon then runs on as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The files read, in merge order.
    #[serde(default)]
    pub sources: Vec<String>,
    /// Keys applied by this reload.
    #[serde(default)]
    pub applied: Vec<String>,
    /// Keys that take effect at the daemon's next start (etcd keeps
    /// running across `systemctl restart etcd-warden`).
    #[serde(default)]
    pub at_daemon_restart: Vec<String>,
    /// Keys that take effect when the daemon next starts etcd on this node
    /// (a restarted daemon restarts etcd when its configuration changed).
    #[serde(default)]
    pub at_etcd_restart: Vec<String>,
    /// Keys that name the node, its cluster or the place of its data: not
    /// changed on a running member.
    #[serde(default)]
    pub identity: Vec<String>,
}

/// What `etcd-warden recover` resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoverWhat {
    /// Let the node force a new cluster from its data (sets the in-sync
    /// marker of this boot on the operator's word).
    ForceNewCluster,
    /// Keep the named node's data: raise its epoch there, archive the local
    /// data on the other node.
    KeepDataOf,
    /// Move an archive back in place.
    RestoreArchive,
    /// Restore a snapshot as a new one-member cluster.
    RestoreSnapshot,
}

/// `POST /v1/recover`: a resolution, planned and (with `confirm`) done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverRequest {
    /// The resolution.
    pub what: RecoverWhat,
    /// The node named on the command line.
    pub node: String,
    /// The archive to restore (`restore-archive`; default: the newest).
    #[serde(default)]
    pub archive: Option<std::path::PathBuf>,
    /// The snapshot file (`restore-snapshot`), an absolute path.
    #[serde(default)]
    pub snapshot: Option<std::path::PathBuf>,
    /// Do it; without, only the plan is returned.
    #[serde(default)]
    pub confirm: bool,
    /// `restore-archive`: restore an archive whose epoch is older than the
    /// one the state file names (refused without).
    #[serde(default)]
    pub allow_older_epoch: bool,
}

/// The answer to a [`RecoverRequest`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverReply {
    /// The node that answered.
    pub node: String,
    /// What the resolution does, one line each.
    pub plan: Vec<String>,
    /// What was done (empty without `confirm`).
    pub done: Vec<String>,
}

/// A leader change observed by the daemon's probes, as sent on
/// [`paths::EVENTS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderEvent {
    /// The new leader (None = no leader).
    #[serde(default, with = "opt_u64_as_string")]
    pub leader_id: Option<u64>,
    /// The previous leader.
    #[serde(default, with = "opt_u64_as_string")]
    pub previous_id: Option<u64>,
    /// Raft term when observed.
    #[serde(default)]
    pub raft_term: Option<u64>,
    /// Unix time in milliseconds.
    pub at_ms: u64,
}

/// The OCF actions the daemon carries out for the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Start etcd on this node.
    Start,
    /// Stop etcd on this node.
    Stop,
    /// Check etcd on this node.
    Monitor,
    /// Make this node's member a voter (promotable clone only).
    Promote,
    /// Give up the voter role (promotable clone only).
    Demote,
    /// A clone notification (pre/post start/stop/promote/demote).
    Notify,
    /// Apply non-unique parameters without a restart.
    Reload,
    /// Check the parameters and the daemon's configuration.
    ValidateAll,
}

/// Clone notification data, as Pacemaker passes it in
/// `OCF_RESKEY_CRM_meta_notify_*`. It is a hint: the daemon checks it against
/// the live cluster before acting on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifyData {
    /// `pre` or `post`.
    pub kind: String,
    /// `start`, `stop`, `promote` or `demote`.
    pub operation: String,
    /// Node names per list (`active`, `inactive`, `start`, `stop`, `promote`,
    /// `demote`, `promoted`, `unpromoted`), as given.
    pub nodes: BTreeMap<String, Vec<String>>,
}

/// One request from the OCF agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRequest {
    /// What to do.
    pub action: Action,
    /// `OCF_CHECK_LEVEL` for monitor (0 or 10).
    #[serde(default)]
    pub depth: u32,
    /// How long the daemon may take before it must answer, in milliseconds.
    /// The agent derives it from `OCF_RESKEY_CRM_meta_timeout`, minus a margin.
    pub deadline_ms: u64,
    /// The resource's instance parameters (`OCF_RESKEY_*` without the
    /// prefix, meta attributes excluded).
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Set for [`Action::Notify`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<NotifyData>,
    /// The resource instance name (`OCF_RESOURCE_INSTANCE`), for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// What came of an action, in terms the agent can map to OCF exit codes
/// without further judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Done, or running as a plain (unpromoted) instance.
    Success,
    /// Running as a voter in a promotable clone.
    RunningPromoted,
    /// Cleanly not running.
    NotRunning,
    /// Transient trouble: Pacemaker may retry or recover it here.
    Failed,
    /// Failed while promoted.
    FailedPromoted,
    /// The configuration is wrong and no retry anywhere can fix it.
    /// Only ever for a bad configuration, never for a race.
    NotConfigured,
    /// A needed program or file is missing on this node.
    NotInstalled,
    /// A parameter or the configuration is invalid on this node; another
    /// node may still run the resource.
    InvalidArgs,
    /// The action is not implemented.
    Unimplemented,
    /// Running but degraded (e.g. a learner catching up).
    Degraded,
    /// Running promoted but degraded.
    DegradedPromoted,
}

impl Outcome {
    /// The OCF 1.1 exit code for this outcome.
    ///
    /// OCF_ERR_PERM (4) is never used: it makes Pacemaker ban the resource
    /// from the node for what is usually a transient ownership problem.
    pub fn ocf_code(self) -> i32 {
        match self {
            Outcome::Success => 0,
            Outcome::Failed => 1,
            Outcome::InvalidArgs => 2,
            Outcome::Unimplemented => 3,
            Outcome::NotInstalled => 5,
            Outcome::NotConfigured => 6,
            Outcome::NotRunning => 7,
            Outcome::RunningPromoted => 8,
            Outcome::FailedPromoted => 9,
            Outcome::Degraded => 190,
            Outcome::DegradedPromoted => 191,
        }
    }
}

/// The daemon's answer to an [`ActionRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionReply {
    /// What came of it.
    pub outcome: Outcome,
    /// Why, for anything but a plain success. The agent prints it as
    /// `ocf-exit-reason:` so that it shows in crm_mon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A cluster event pushed by the alert agent (Pacemaker's `CRM_alert_*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterEvent {
    /// `node`, `fencing`, `resource` or `attribute`.
    pub kind: String,
    /// The node the event is about.
    #[serde(default)]
    pub node: Option<String>,
    /// The task/action (e.g. `reboot`, `off`, `start`, `monitor`).
    #[serde(default)]
    pub task: Option<String>,
    /// Pacemaker's `CRM_alert_desc`.
    #[serde(default)]
    pub desc: Option<String>,
    /// `CRM_alert_rc` (0 = success).
    #[serde(default)]
    pub rc: Option<i32>,
    /// `CRM_alert_status`.
    #[serde(default)]
    pub status: Option<i32>,
    /// `CRM_alert_timestamp_epoch`.
    #[serde(default)]
    pub timestamp_epoch: Option<i64>,
    /// `CRM_alert_rsc` for resource events.
    #[serde(default)]
    pub resource: Option<String>,
    /// Every other `CRM_alert_*` variable, for the log.
    #[serde(default)]
    pub extra: BTreeMap<String, String>,
}

/// A plain acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    /// Always true when the request was accepted.
    pub accepted: bool,
}

/// An error body for any non-2xx answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// What went wrong, for a person.
    pub error: String,
}

/// A member of the etcd cluster, as etcd reports it now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    /// etcd's member ID. Always a u64 end to end: IDs above 2^53 are common
    /// and a float anywhere on the way corrupts them.
    #[serde(with = "u64_as_string")]
    pub id: u64,
    /// The member's name (empty for a member added but not started).
    pub name: String,
    /// Peer URLs.
    pub peer_urls: Vec<String>,
    /// Client URLs.
    pub client_urls: Vec<String>,
    /// Whether it is a learner (non-voting).
    pub is_learner: bool,
}

/// The local member's database, version and alarms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EtcdDb {
    /// etcd's version (`3.5.17`).
    pub version: String,
    /// Size of the backend database file, in bytes.
    pub db_size: i64,
    /// Bytes of it in use (a defragment gives back the rest).
    pub db_size_in_use: i64,
    /// Active alarms (`NOSPACE`, `CORRUPT`).
    #[serde(default)]
    pub alarms: Vec<String>,
}

/// This node's view of itself and its etcd, as answered by the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    /// This node's name.
    pub node: String,
    /// `two-node` or `ha`.
    pub topology: String,
    /// The daemon's own state for this node (e.g. `stopped`, `running`,
    /// `standalone`, `recovering`, `rejoining`).
    pub state: String,
    /// Whether the supervised etcd process is running.
    pub etcd_running: bool,
    /// PID of etcd, when running.
    #[serde(default)]
    pub etcd_pid: Option<u32>,
    /// Whether a linearizable read just succeeded (live, never cached).
    pub quorum: bool,
    /// The local member's ID, when known.
    #[serde(default, with = "opt_u64_as_string")]
    pub member_id: Option<u64>,
    /// The current leader's member ID, when there is one.
    #[serde(default, with = "opt_u64_as_string")]
    pub leader_id: Option<u64>,
    /// Whether the local member is a learner.
    #[serde(default)]
    pub is_learner: bool,
    /// Raft term.
    #[serde(default)]
    pub raft_term: Option<u64>,
    /// Raft index.
    #[serde(default)]
    pub raft_index: Option<u64>,
    /// Store revision.
    #[serde(default)]
    pub revision: Option<i64>,
    /// etcd cluster ID.
    #[serde(default, with = "opt_u64_as_string")]
    pub cluster_id: Option<u64>,
    /// etcd's database, version and alarms, from its last Status answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_db: Option<EtcdDb>,
    /// The defragmentation policy's record (the daemon fills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defrag: Option<DefragStatus>,
    /// Why the node is in this state, when it is not plainly healthy.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Serialise u64 IDs as decimal strings in JSON, so that no JSON reader that
/// uses doubles (jq ≤ 1.6, JavaScript) can round them.
pub(crate) mod u64_as_string {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    /// Write as a string.
    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    /// Read a string (or, leniently, a JSON integer).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            S(String),
            N(u64),
        }
        match Either::deserialize(d)? {
            Either::S(s) => s.parse().map_err(D::Error::custom),
            Either::N(n) => Ok(n),
        }
    }
}

/// [`u64_as_string`] for optional values.
pub(crate) mod opt_u64_as_string {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Write as a string or null.
    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => super::u64_as_string::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    /// Read a string, an integer or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        struct W(#[serde(with = "super::u64_as_string")] u64);
        Ok(Option::<W>::deserialize(d)?.map(|w| w.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_ids_survive_json_above_2_pow_53() {
        let m = Member {
            id: 0x8e9e05c52164694d,
            name: "a".into(),
            peer_urls: vec![],
            client_urls: vec![],
            is_learner: true,
        };
        let s = serde_json::to_string(&m).unwrap();
        assert!(s.contains("\"10276657743932975437\""), "{s}");
        let back: Member = serde_json::from_str(&s).unwrap();
        assert_eq!(back.id, m.id);
    }

    #[test]
    fn ocf_codes_follow_ocf_1_1() {
        assert_eq!(Outcome::Success.ocf_code(), 0);
        assert_eq!(Outcome::Failed.ocf_code(), 1);
        assert_eq!(Outcome::NotConfigured.ocf_code(), 6);
        assert_eq!(Outcome::NotRunning.ocf_code(), 7);
        assert_eq!(Outcome::RunningPromoted.ocf_code(), 8);
        assert_eq!(Outcome::Degraded.ocf_code(), 190);
    }

    #[test]
    fn leader_events_keep_u64_ids() {
        let e = LeaderEvent {
            leader_id: Some(u64::MAX),
            previous_id: None,
            raft_term: Some(3),
            at_ms: 1,
        };
        let s = serde_json::to_string(&e).unwrap();
        assert!(s.contains("\"18446744073709551615\""), "{s}");
        assert_eq!(serde_json::from_str::<LeaderEvent>(&s).unwrap(), e);
    }

    #[test]
    fn action_names_are_kebab_case() {
        let r: ActionRequest =
            serde_json::from_str(r#"{"action":"validate-all","deadline_ms":1000}"#).unwrap();
        assert_eq!(r.action, Action::ValidateAll);
    }
}
