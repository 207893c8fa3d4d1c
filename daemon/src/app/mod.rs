//! The daemon as one value: the services it is built from (settings, the
//! supervised local etcd, the etcd client, Pacemaker, the failover
//! reconciler, metrics, the defragmentation policy), each given at
//! construction, shared by the loops and the API handlers.
//!
//! No answer about health, quorum or membership comes from memory: each is a
//! live call to etcd under a deadline. The state kept here (the node state
//! string, the last leader seen) is for display, metrics and the leader event
//! stream only.
//!
//! The methods are grouped by job: [`node`] (the local etcd: probe, start,
//! stop), [`status`] (what operators read), [`action`] (OCF actions, the
//! reconciler's ports, defragmentation), [`ports`] (the reconciler's etcd
//! and supervisor ports), [`force_held`] (a start with clients held off) and
//! [`reload`].

mod action;
mod force_held;
mod node;
mod ports;
mod reload;
mod status;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32};

use tokio::sync::{broadcast, watch};

use crate::config::Settings;
use crate::etcd::{Connector, LiveEtcd};
use crate::metrics::Metrics;
use crate::pacemaker::CrmTools;
use crate::reconcile::Reconciler;
use crate::reconcile::archives::ArchiveInfo;
use crate::reconcile::ports::SharedPacemaker;
use crate::supervise::AnySupervisor;
use crate::supervise::silence::Silence;
use warden_api::NodeStatus;

pub(crate) use crate::reconcile::ports::Probe;

/// A leader change, as sent on the event stream.
pub use warden_api::LeaderEvent;

/// What the daemon is built from. [`Services::new`] gives the real ones
/// for `settings` (Pacemaker's command-line tools, no failover reconciler);
/// the `with_` methods replace one.
pub struct Services {
    settings: Arc<Settings>,
    supervisor: AnySupervisor,
    pacemaker: SharedPacemaker,
    metrics: Metrics,
    reconciler: Option<Arc<Reconciler>>,
}

impl Services {
    /// The real services for `settings`, etcd supervised by `supervisor`.
    pub fn new(settings: Arc<Settings>, supervisor: AnySupervisor) -> Self {
        Services {
            settings,
            supervisor,
            pacemaker: std::sync::Arc::new(CrmTools),
            metrics: Metrics::default(),
            reconciler: None,
        }
    }

    /// Pacemaker as `pacemaker` (a test's fake) instead of its tools.
    pub fn with_pacemaker(mut self, pacemaker: SharedPacemaker) -> Self {
        self.pacemaker = pacemaker;
        self
    }

    /// The failover reconciler, when Pacemaker manages a multi-node
    /// cluster ([`crate::reconcile::enabled`]); its step counters are the
    /// app's metrics.
    pub fn with_failover(mut self) -> Self {
        self.reconciler = crate::reconcile::enabled(&self.settings).then(|| {
            Arc::new(Reconciler::new(&self.settings).with_counters(self.metrics.exec_counters()))
        });
        self
    }
}

/// The daemon, shared by its loops and the API handlers.
#[derive(Debug)]
pub struct App {
    /// Validated settings.
    pub settings: Arc<Settings>,
    /// The supervisor backend.
    pub(crate) supervisor: AnySupervisor,
    /// The local member, live.
    pub etcd: LiveEtcd,
    /// For connections to other members.
    pub(crate) connector: Connector,
    /// Pacemaker's tools (a fake in tests).
    pub(crate) pacemaker: SharedPacemaker,
    /// Metrics.
    pub(crate) metrics: Metrics,
    /// The owner of every task the daemon starts (see [`crate::tasks`]).
    pub(crate) work: crate::tasks::Work,
    /// The failover reconciler, when Pacemaker manages a multi-node
    /// cluster (see [`crate::reconcile`]).
    pub(crate) failover: Option<Arc<Reconciler>>,
    /// The defragmentation policy's state (see [`crate::defrag`]).
    pub(crate) defrag: crate::defrag::Defrag,
    /// `failover.archive_keep`, which a reload replaces.
    pub(crate) archive_keep: AtomicU32,
    /// Whether etcd should be running (set by start, cleared by stop); the
    /// daemon restarts a dead etcd only when this is set and autostart is on.
    want_running: AtomicBool,
    state_tx: watch::Sender<String>,
    leader_tx: broadcast::Sender<LeaderEvent>,
    last_leader: std::sync::Mutex<Option<u64>>,
    /// The record of etcd's process for the OCF agent (beside the socket).
    etcd_record: crate::supervise::record::RecordKeeper,
    /// How long etcd has gone without answering (see [`App::proc_state`]).
    silence: Silence,
}

/// `GET /status` on the Unix socket: [`NodeStatus`] (its fields at the top
/// level, so that a client reading only `NodeStatus` still works) plus this
/// node's archives of replaced etcd data (nothing is deleted, and the
/// operator can see where it went).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDoc {
    /// The live node status.
    #[serde(flatten)]
    pub(crate) node: NodeStatus,
    /// Where archives go (`failover.archive_dir`).
    #[serde(default)]
    pub archive_dir: Option<std::path::PathBuf>,
    /// The archives kept, oldest first.
    #[serde(default)]
    pub archives: Vec<ArchiveInfo>,
    /// The most recent archive, if any.
    #[serde(default)]
    pub last_archive: Option<LastArchive>,
    /// The command that resolves a state the daemon refuses to fix on its
    /// own (its latest decision refused), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolve_command: Option<String>,
}

/// The most recent archive: where it is and why it was made.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastArchive {
    /// The archive directory.
    pub path: std::path::PathBuf,
    /// Why it was made, when recorded.
    #[serde(default)]
    pub(crate) reason: Option<String>,
}

impl App {
    /// The daemon built from `services`.
    pub fn new(services: Services) -> Self {
        let Services {
            settings,
            supervisor,
            pacemaker,
            metrics,
            reconciler,
        } = services;
        let connector = Connector::new(&settings);
        let etcd = LiveEtcd::new(settings.local_client_url().to_string(), connector.clone());
        let (state_tx, _) = watch::channel("stopped".to_string());
        let (leader_tx, _) = broadcast::channel(64);
        let defrag = crate::defrag::Defrag::new(
            &settings.node_name,
            settings.defrag.clone(),
            metrics.defrag(),
        );
        let etcd_record = crate::supervise::record::RecordKeeper::new(&settings, supervisor.name());
        let silence = Silence::new(settings.timeouts.hung_after);
        let archive_keep = AtomicU32::new(settings.failover.archive_keep);
        App {
            settings,
            supervisor,
            etcd,
            connector,
            pacemaker,
            metrics,
            work: crate::tasks::Work::default(),
            failover: reconciler,
            defrag,
            archive_keep,
            want_running: AtomicBool::new(false),
            state_tx,
            leader_tx,
            last_leader: std::sync::Mutex::new(None),
            etcd_record,
            silence,
        }
    }

    /// Follow state changes (for sd_notify STATUS=).
    pub(crate) fn subscribe_state(&self) -> watch::Receiver<String> {
        self.state_tx.subscribe()
    }

    /// Follow leader changes.
    pub(crate) fn subscribe_leader(&self) -> broadcast::Receiver<LeaderEvent> {
        self.leader_tx.subscribe()
    }

    fn set_state(&self, s: &str) {
        self.state_tx.send_if_modified(|cur| {
            if cur != s {
                tracing::info!(from = %cur, to = s, "node state");
                *cur = s.to_string();
                true
            } else {
                false
            }
        });
    }

    /// The node state shown to operators.
    pub(crate) fn state(&self) -> String {
        self.state_tx.borrow().clone()
    }
}
