//! What `decide` returns: the actions the daemon carries out, in order, and
//! what to tell Pacemaker.
//!
//! The daemon carries out the actions in order and stops at the first that
//! fails; it then observes again and decides again. Every action is
//! idempotent, and its effect is checked against fresh facts rather than
//! against the call's result (an etcd call can report failure yet have
//! taken effect): a daemon killed between two
//! actions simply decides again.

use serde::{Deserialize, Serialize};
use warden_api::Outcome;

/// How to start the local etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartMode {
    /// Bootstrap a new cluster of all configured nodes
    /// (`--initial-cluster-state=new`); only with no data anywhere.
    New,
    /// Restart the member from its data directory.
    Existing,
    /// Join a running cluster as the learner already added for this node
    /// (`--initial-cluster-state=existing`, empty data directory). The daemon
    /// records `epoch` as the data's lineage first.
    Join {
        /// The cluster's epoch.
        epoch: u64,
    },
    /// Restart this node's own voter, whose member directory is gone, on
    /// an empty data directory (`--initial-cluster-state=existing`, the
    /// member id found by this node's peer URL in the member list the
    /// peer's member serves without quorum). Its empty log votes for the
    /// peer's member, which then leads the unchanged two-member
    /// membership and sends it the data: nothing is forced and no entry
    /// is dropped.
    Reseed,
}

/// One step for the daemon.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "action")]
pub enum Step {
    /// Publish this boot's [`crate::facts::DataRecord`] (transient attribute).
    PublishRecord,
    /// Start etcd.
    StartEtcd {
        /// How.
        mode: StartMode,
    },
    /// Stop etcd (SIGTERM, then SIGKILL at the deadline). Keeps the data.
    StopEtcd,
    /// Write this node's force-new-cluster claim (transient attribute, owner
    /// this node, lifetime reboot; it carries boot id and epoch).
    SetClaim {
        /// The epoch the new cluster will have.
        epoch: u64,
    },
    /// Delete this node's own claim. Only ever the owner's claim.
    ClearClaim,
    /// Clear Pacemaker's record of a failed start of `resource` on this
    /// node that no daemon answered, so that Pacemaker starts it again.
    ClearFailedStart {
        /// The etcd resource's id.
        resource: String,
    },
    /// Record `epoch` in the state file (fsync), then restart the local
    /// member alone with `--force-new-cluster`, keeping its data.
    ForceNewCluster {
        /// The new lineage.
        epoch: u64,
    },
    /// Move the member directory aside (rename within the filesystem, with a
    /// checksum of the db; retention configurable), log and report the path.
    /// Never a delete (the nothing-deleted rule).
    ArchiveDataDir {
        /// Why, for the log and the report.
        reason: String,
    },
    /// `MemberAdd(is_learner=true)` for the node's peer URL, reconciled from
    /// the member list afterwards; retried through "unhealthy cluster".
    AddLearner {
        /// The node to add.
        node: String,
    },
    /// `MemberPromote` of a learner that etcd reports in sync.
    PromoteLearner {
        /// Member id.
        id: u64,
        /// Its node, for the log.
        node: String,
    },
    /// `MemberRemove`.
    RemoveMember {
        /// Member id.
        id: u64,
        /// Its node, for the log.
        node: String,
    },
    /// Move etcd's leadership from this member, the leader, to the voter
    /// `id` on `node`, the node that wins fence races: a partition then
    /// leaves the leader, which knows every entry it committed, on the side
    /// that forces, so no write it acknowledged is lost. Only a leader can
    /// transfer its leadership; the transfer waits for the target to catch
    /// up, and writes pause for about one round trip while it runs.
    TransferLeadership {
        /// Member id of the new leader.
        id: u64,
        /// Its node, for the log.
        node: String,
    },
    /// Take the leave lock in etcd: a transaction that writes this node's
    /// name only if the key is absent. At most one node can hold it.
    AcquireLeaveLock,
    /// Delete the leave lock (only once its holder is a voter again).
    ReleaseLeaveLock,
    /// Write the departure marker into the state file (fsync) before leaving.
    RecordDeparture,
    /// Clear a departure marker that the live member list contradicts.
    ClearDeparture,
    /// Set the reboot-scoped in-sync marker (this member is a voter with
    /// quorum now).
    MarkInSync,
    /// Clear the in-sync marker (etcd is being stopped, so the peer may go on
    /// without this node).
    ClearInSync,
    /// Nothing to do yet; decide again when facts change.
    Wait {
        /// What we wait for.
        reason: String,
    },
    /// No automatic answer is safe (the refusal rule). Do nothing, show why, and name
    /// the one command that resolves it.
    Refuse {
        /// Exactly why.
        reason: String,
        /// `etcd-warden recover …`.
        resolve_command: String,
    },
}

impl Step {
    /// Whether the step changes anything (Wait and Refuse do not).
    pub fn acts(&self) -> bool {
        !matches!(self, Step::Wait { .. } | Step::Refuse { .. })
    }

    /// Whether the step changes etcd's member list.
    pub fn changes_membership(&self) -> bool {
        matches!(
            self,
            Step::AddLearner { .. } | Step::PromoteLearner { .. } | Step::RemoveMember { .. }
        )
    }
}

/// The result of one decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// In order.
    pub steps: Vec<Step>,
    /// What to report to Pacemaker. For start and stop: what the action
    /// reports once the steps are done (while it still waits: what it reports
    /// if its deadline passes now). For monitor and reconcile: etcd as it is
    /// now; a monitor never carries steps out itself, the daemon's loop does.
    pub outcome: Outcome,
    /// The exit reason shown in crm_mon, for anything but plain success.
    pub reason: Option<String>,
}

impl Decision {
    /// The first step that changes anything.
    pub fn first_act(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.acts())
    }

    /// The refusal, if the decision is one.
    pub fn refusal(&self) -> Option<(&str, &str)> {
        self.steps.iter().find_map(|s| match s {
            Step::Refuse {
                reason,
                resolve_command,
            } => Some((reason.as_str(), resolve_command.as_str())),
            _ => None,
        })
    }
}
