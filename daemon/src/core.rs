//! The daemon's core: etcd supervision, live checks, OCF actions and the
//! node state shown to operators.
//!
//! No answer about health, quorum or membership comes from memory: each is a
//! live call to etcd under a deadline. The state kept here (the node state
//! string, the last leader seen) is for display, metrics and the leader event
//! stream only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, watch};
use warden_api::{ActionReply, ActionRequest, NodeStatus, Outcome};

use crm_xml::report::{EtcdMember, EtcdRole, EtcdSection, WardenNodeState, WardenState};

use crate::config::Settings;
use crate::etcd::{Connector, EtcdError, LiveEtcd, MemberStatus, status_of_members};
use crate::etcd_conf::StartMode;
use crate::metrics::{Metrics, Role};
use crate::reconcile::agent::live_reason;
use crate::reconcile::archives::ArchiveInfo;
use crate::reconcile::local::LocalPaths;
use crate::reconcile::pcmk::CrmTools;
use crate::reconcile::ports::{Ports, SharedPacemaker};
use crate::supervise::silence::{Change, Silence};
use crate::supervise::{AnySupervisor, ProcState, SuperviseError, Supervisor};

pub(crate) use crate::reconcile::ports::Probe;

/// A leader change, as sent on the event stream.
pub use warden_api::LeaderEvent;

/// The daemon core, shared by the API handlers and the probe loop.
#[derive(Debug)]
pub struct Core {
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
    /// The failover driver, when Pacemaker manages a multi-node cluster
    /// (set once by the daemon's main loop; see [`crate::reconcile`]).
    pub(crate) failover: std::sync::OnceLock<Arc<crate::reconcile::Reconciler>>,
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
    /// How long etcd has gone without answering (see [`Core::proc_state`]).
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

impl Core {
    /// A core for `settings` with `supervisor`.
    pub fn new(settings: Arc<Settings>, supervisor: AnySupervisor) -> Self {
        let connector = Connector::new(&settings);
        let etcd = LiveEtcd::new(settings.local_client_url().to_string(), connector.clone());
        let (state_tx, _) = watch::channel("stopped".to_string());
        let (leader_tx, _) = broadcast::channel(64);
        let metrics = Metrics::default();
        let defrag = crate::defrag::Defrag::new(
            &settings.node_name,
            settings.defrag.clone(),
            metrics.defrag(),
        );
        let etcd_record = crate::supervise::record::RecordKeeper::new(&settings, supervisor.name());
        let settings_hung_after = settings.timeouts.hung_after;
        let archive_keep = AtomicU32::new(settings.failover.archive_keep);
        Core {
            settings,
            supervisor,
            etcd,
            connector,
            pacemaker: SharedPacemaker::new(CrmTools),
            metrics,
            work: crate::tasks::Work::default(),
            failover: std::sync::OnceLock::new(),
            defrag,
            archive_keep,
            want_running: AtomicBool::new(false),
            state_tx,
            leader_tx,
            last_leader: std::sync::Mutex::new(None),
            etcd_record,
            silence: Silence::new(settings_hung_after),
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

    /// etcd's process state, `Hung` once a process that answered before
    /// has not answered for `timeouts.hung_after_ms` (or one stopped by a
    /// signal has been so for that long).
    pub(crate) async fn proc_state(&self) -> ProcState {
        let (state, change) = self
            .silence
            .judge(self.supervisor.state().await, Instant::now());
        self.silence_changed(change);
        state
    }

    /// The local member's Status, noted for the hang check.
    pub(crate) async fn local_status(&self, deadline: Duration) -> Result<MemberStatus, EtcdError> {
        let st = self.etcd.status(deadline).await;
        let change = self.silence.answered(st.is_ok(), Instant::now());
        self.silence_changed(change);
        st
    }

    fn silence_changed(&self, change: Option<Change>) {
        let bound = self.silence.bound();
        match change {
            Some(Change::Hung { pid, silent }) => {
                self.metrics.etcd_hung();
                tracing::warn!(
                    pid,
                    silent_ms = u64::try_from(silent.as_millis()).unwrap_or(u64::MAX),
                    hung_after_ms = u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
                    "etcd's process exists but has not answered for timeouts.hung_after_ms: it counts as hung, and monitor fails it"
                );
            }
            Some(Change::Answers { pid }) => {
                tracing::info!(pid, "etcd answers again after a hang");
            }
            None => {}
        }
    }

    /// Ask etcd now: process state, Status and (when `read`) a
    /// linearizable read, all within `deadline`.
    pub(crate) async fn probe(&self, deadline: Duration, read: bool) -> Probe {
        let started = Instant::now();
        let proc = self.proc_state().await;
        // A hung etcd is asked too (it may answer again), unless it is
        // stopped by a signal and cannot.
        let asked = match &proc {
            ProcState::Running { .. } => true,
            ProcState::Hung { pid, .. } => !crate::supervise::is_frozen(*pid),
            _ => false,
        };
        let (status, lin) = if asked {
            {
                let st = self.local_status(deadline).await;
                let leaderless = matches!(&st, Ok(s) if !s.has_leader());
                let lin = if read && leaderless {
                    // Without a leader the read can only time out, and the
                    // probe runs in the daemon's one loop: waiting the whole
                    // deadline there held up the failover pass a fence alert
                    // had just asked for (bench: alert → claim up to 1.9 s).
                    Some(Err(EtcdError::Unavailable(
                        "etcd has no leader (the read was not attempted)".into(),
                    )))
                } else if read {
                    let left = deadline.saturating_sub(started.elapsed());
                    Some(self.etcd.linearizable_read(left).await)
                } else {
                    None
                };
                (Some(st), lin)
            }
        } else {
            (None, None)
        };
        Probe {
            proc,
            status,
            read: lin,
        }
    }

    /// Record what a probe saw: node state, metrics, leader changes.
    pub(crate) fn record(&self, p: &Probe) {
        self.etcd_record.observe(&p.proc);
        let (role, up) = match &p.status {
            Some(Ok(s)) if s.is_learner => (Role::Learner, true),
            Some(Ok(s)) if s.leader == s.member_id && s.leader != 0 => (Role::Leader, true),
            Some(Ok(_)) => (Role::Follower, true),
            _ => (Role::None, false),
        };
        let quorum = matches!(p.read, Some(Ok(_)));
        self.metrics.observe(role, quorum, up);
        self.metrics
            .observe_hung(matches!(p.proc, ProcState::Hung { .. }));
        if let Some(Ok(s)) = &p.status {
            self.metrics.observe_etcd(s)
        }
        if p.status.as_ref().is_some_and(|s| s.is_err()) {
            self.metrics.probe_failed();
        }
        let state = match (&p.proc, &p.status) {
            (ProcState::Stopped, _) => "stopped",
            (ProcState::Died { .. }, _) => "failed",
            (ProcState::Frozen { .. }, _) => "failed",
            (ProcState::Hung { .. }, _) => "hung",
            (ProcState::Running { .. }, Some(Ok(s))) if s.is_learner => "learner",
            (ProcState::Running { .. }, Some(Ok(s))) if s.has_leader() => "running",
            (ProcState::Running { .. }, Some(Ok(_))) => "no-leader",
            (ProcState::Running { .. }, _) => "unresponsive",
        };
        self.set_state(state);
        if let Some(Ok(s)) = &p.status {
            let now = (s.leader != 0).then_some(s.leader);
            let mut last = self.last_leader.lock().unwrap_or_else(|e| e.into_inner());
            if *last != now {
                if last.is_some() || now.is_some() {
                    self.metrics.leader_changed();
                }
                let ev = LeaderEvent {
                    leader_id: now,
                    previous_id: *last,
                    raft_term: Some(s.raft_term),
                    at_ms: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                        .unwrap_or_default(),
                };
                tracing::info!(leader = ?now, previous = ?*last, "leader change");
                *last = now;
                let _ = self.leader_tx.send(ev);
            }
        }
    }

    /// `/metrics`: the content type and the exposition, with the failover
    /// state as of now.
    pub(crate) fn metrics_text(&self) -> (&'static str, String) {
        if let Some(f) = self.failover.get() {
            self.metrics.failover_state(f.warden_state().0);
        }
        (crate::metrics::CONTENT_TYPE, self.metrics.render())
    }

    /// The node's status, asked live.
    pub(crate) async fn node_status(&self, deadline: Duration) -> NodeStatus {
        let p = self.probe(deadline, true).await;
        self.record(&p);
        let mut st = NodeStatus {
            node: self.settings.node_name.clone(),
            topology: self.settings.topology.as_str().to_string(),
            state: self.state(),
            etcd_running: p.proc.pid().is_some(),
            etcd_pid: p.proc.pid(),
            quorum: matches!(p.read, Some(Ok(_))),
            member_id: None,
            leader_id: None,
            is_learner: false,
            raft_term: None,
            raft_index: None,
            revision: None,
            cluster_id: None,
            etcd_db: None,
            defrag: Some(self.defrag.status()),
            // A refusal first: it names what only an operator can resolve
            // and the command (etcd may run without answering meanwhile);
            // then the process's own trouble; then why the failover logic
            // holds back.
            reason: {
                let (decided, refused) = self.decision_reason();
                match refused {
                    Some(_) => decided,
                    None => live_reason(&p).or(decided),
                }
            },
        };
        if let Some(Ok(s)) = &p.status {
            st.member_id = Some(s.member_id);
            st.leader_id = (s.leader != 0).then_some(s.leader);
            st.is_learner = s.is_learner;
            st.raft_term = Some(s.raft_term);
            st.raft_index = Some(s.raft_index);
            st.revision = Some(s.revision);
            st.cluster_id = Some(s.cluster_id);
            st.etcd_db = Some(s.db());
        }
        st
    }

    /// The latest failover decision's reason, and the resolving command when
    /// that decision refused to go on by itself.
    pub(crate) fn decision_reason(&self) -> (Option<String>, Option<String>) {
        let Some(d) = self.failover.get().and_then(|f| f.last()) else {
            return (None, None);
        };
        let command = d.steps.iter().find_map(|s| match s {
            warden_failover::Step::Refuse {
                resolve_command, ..
            } => Some(resolve_command.clone()),
            _ => None,
        });
        (d.reason, command)
    }

    /// This node's failover files: the failover driver's when it runs, the
    /// configuration's otherwise (archives may exist from `recover`).
    pub(crate) fn local_paths(&self) -> LocalPaths {
        match self.failover.get() {
            Some(f) => f.paths.clone(),
            None => crate::reconcile::paths_for(&self.settings),
        }
    }

    /// The archives kept on this node, oldest first (read from the archive
    /// directory now, off the async workers).
    pub(crate) async fn archives(&self) -> Vec<ArchiveInfo> {
        let paths = self.local_paths();
        tokio::task::spawn_blocking(move || paths.archive_infos())
            .await
            .unwrap_or_default()
    }

    /// `GET /status`: the live node status and this node's archives.
    pub async fn status_doc(&self, deadline: Duration) -> StatusDoc {
        let (node, archives) = tokio::join!(self.node_status(deadline), self.archives());
        let last_archive = archives.last().map(|a| LastArchive {
            path: a.path.clone(),
            reason: a.reason.clone(),
        });
        StatusDoc {
            node,
            archive_dir: Some(self.local_paths().archive_dir),
            archives,
            last_archive,
            resolve_command: self.decision_reason().1,
        }
    }

    /// The etcd section of the report (`crm_xml::report::EtcdSection`),
    /// asked now.
    pub async fn etcd_section(
        &self,
        deadline: Duration,
    ) -> (
        NodeStatus,
        Result<Vec<crate::etcd::Member>, EtcdError>,
        EtcdSection,
    ) {
        let (node, archives) = tokio::join!(self.node_status(deadline), self.archives());
        let members = self.etcd.member_list(deadline).await;
        // With failover, what the daemon is doing (standalone, recovering,
        // rejoining) comes from its latest decision over live facts.
        let (state, since) = match self.failover.get() {
            Some(f) => {
                let (st, at) = f.warden_state();
                let since = i64::try_from(at)
                    .ok()
                    .and_then(|t| time::OffsetDateTime::from_unix_timestamp(t).ok())
                    .map(crm_xml::timefmt::format_k8s);
                (st, since)
            }
            None if node.etcd_running => (WardenState::Member, None),
            None => (WardenState::Stopped, None),
        };
        let (reason, resolve_command) = self.decision_reason();
        let section = EtcdSection {
            cluster_id: node.cluster_id.map(|i| format!("{i:x}")),
            leader: node.leader_id.map(|i| format!("{i:x}")),
            raft_index: node.raft_index,
            raft_term: node.raft_term,
            revision: node.revision,
            members: members
                .as_ref()
                .map(|ms| {
                    ms.iter()
                        .map(|m| EtcdMember {
                            id: format!("{:x}", m.id),
                            name: m.name.clone(),
                            role: if m.is_learner {
                                EtcdRole::Learner
                            } else {
                                EtcdRole::Voter
                            },
                            peer_urls: m.peer_urls.clone(),
                            learner_since: None,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            nodes: [(
                self.settings.node_name.clone(),
                WardenNodeState {
                    state,
                    since,
                    archives: archives
                        .iter()
                        .map(|a| a.path.to_string_lossy().into_owned())
                        .collect(),
                    reason,
                    resolve_command,
                    db: node.etcd_db.as_ref().map(|db| self.node_db(db)),
                },
            )]
            .into_iter()
            .collect(),
        };
        (node, members, section)
    }

    /// The report's view of the local database: etcd's figures and this
    /// daemon's last defragmentation.
    fn node_db(&self, db: &warden_api::EtcdDb) -> crm_xml::report::NodeDb {
        let last = self.defrag.last();
        crm_xml::report::NodeDb {
            size: db.db_size,
            size_in_use: db.db_size_in_use,
            alarms: db.alarms.clone(),
            last_defrag: last.as_ref().and_then(|r| {
                let ms = i128::from(r.started_at_ms) * 1_000_000;
                time::OffsetDateTime::from_unix_timestamp_nanos(ms)
                    .ok()
                    .map(crm_xml::timefmt::format_k8s)
            }),
            last_defrag_ms: last.map(|r| r.duration_ms),
        }
    }

    /// What the defragmentation policy reads from.
    pub(crate) fn defrag_sources(&self) -> crate::defrag::facts::Sources<'_> {
        crate::defrag::facts::Sources {
            settings: &self.settings,
            etcd: &self.etcd,
            connector: &self.connector,
            pacemaker: &self.pacemaker,
            failover: self.failover.get().map(|f| f.as_ref()),
        }
    }

    /// Run the defragmentation policy now (the daemon's loop, or
    /// `etcd-warden defrag`).
    pub(crate) async fn defrag(
        &self,
        mode: crate::defrag::policy::Mode,
    ) -> warden_api::DefragReply {
        self.defrag
            .attempt(
                &self.defrag_sources(),
                mode,
                self.settings.timeouts.probe_timeout,
            )
            .await
    }

    /// The report: Pacemaker's view from crm_mon (bounded by
    /// [`CRM_MON_DEADLINE`] or `report.crm_mon_timeout_ms`, whichever is
    /// shorter) with the live etcd section. It is built by the same cycle as
    /// the report the daemon writes (same CIB, Corosync node list and
    /// previous report at `report.path` for transition times), only not
    /// written, so the two never disagree. Without Pacemaker (standalone,
    /// crm_mon failing) the error and the etcd part alone.
    pub(crate) async fn report(
        &self,
        deadline: Duration,
    ) -> Result<serde_json::Value, serde_json::Value> {
        let mut cycle = crate::report_cycle::Cycle::for_daemon(&self.settings);
        cycle.output = None;
        cycle.timeout = cycle.timeout.min(CRM_MON_DEADLINE);
        let gather = tokio::task::spawn_blocking(move || {
            // Logged at debug only: the daemon's writer logs the same
            // warnings at each cycle, and an API call is no reason to repeat
            // them.
            let g = cycle.gather(&mut |w| tracing::debug!(warning = w, "report"));
            (cycle, g)
        });
        let (crm, (_, members, section)) = tokio::join!(gather, self.etcd_section(deadline));
        let crm = match crm {
            Ok((cycle, Ok(g))) => Ok((cycle, g)),
            Ok((_, Err(e))) => Err(e.to_string()),
            Err(e) => Err(format!("the report cycle panicked: {e}")),
        };
        match crm {
            Ok((cycle, g)) => {
                let r = cycle.build(g, Some(section));
                serde_json::to_value(&r).map_err(|e| serde_json::json!({"error": e.to_string()}))
            }
            Err(e) => {
                // Each member's own Status, for an operator without Pacemaker.
                let live = match &members {
                    Ok(ms) => status_of_members(&self.connector, ms, deadline)
                        .await
                        .into_iter()
                        .map(|(m, r)| match r {
                            Ok(s) => serde_json::json!({"id": format!("{:x}", m.id), "name": m.name, "reachable": true,
                                "leader": (s.leader != 0).then(|| format!("{:x}", s.leader)),
                                "raftTerm": s.raft_term, "isLearner": s.is_learner, "version": s.version}),
                            Err(e) => serde_json::json!({"id": format!("{:x}", m.id), "name": m.name, "reachable": false, "error": e.to_string()}),
                        })
                        .collect(),
                    Err(_) => vec![],
                };
                Err(serde_json::json!({
                    "error": format!("no Pacemaker report: {e}"),
                    "etcd": section,
                    "memberStatus": live,
                }))
            }
        }
    }

    /// Whether the local member is a voter and the cluster has a leader,
    /// asked now.
    pub(crate) async fn ready(&self, deadline: Duration) -> Result<(), String> {
        match self.etcd.status(deadline).await {
            Ok(s) if s.is_learner => Err("the local member is a learner".into()),
            Ok(s) if !s.has_leader() => Err("the cluster has no leader".into()),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Start etcd and wait until the local member answers Status.
    pub(crate) async fn start_etcd(
        &self,
        mode: StartMode,
        deadline: Duration,
    ) -> Result<u32, String> {
        let started = Instant::now();
        let pid = self.launch(mode).await?;
        loop {
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(format!(
                    "etcd (pid {pid}) did not answer within {deadline:?} of being started"
                ));
            }
            let probe_limit = left.min(self.settings.timeouts.probe_timeout);
            let p = self.probe(probe_limit, false).await;
            self.record(&p);
            match (&p.proc, &p.status) {
                (ProcState::Running { .. }, Some(Ok(_))) => return Ok(pid),
                (ProcState::Died { how, .. }, _) => {
                    return Err(format!("etcd exited while starting ({how})"));
                }
                (ProcState::Stopped, _) => return Err("etcd was stopped while starting".into()),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(100).min(left)).await;
        }
    }

    /// Start etcd in `mode` unless it runs already; its PID.
    pub(crate) async fn launch(&self, mode: StartMode) -> Result<u32, String> {
        self.want_running.store(true, Ordering::SeqCst);
        if let ProcState::Running { pid } = self.supervisor.state().await {
            return Ok(pid);
        }
        // A forced restart starts alone, its peers down by proof.
        if !matches!(
            mode,
            StartMode::ForceNewCluster | StartMode::ClientsHeld { force: true, .. }
        ) {
            crate::etcd_version::check_start(&self.settings, &self.connector).await?;
        }
        self.set_state("starting");
        self.etcd.reset().await;
        if matches!(mode, StartMode::JoinExisting { .. }) {
            // A joining member may be sent the whole database.
            crate::supervise::writeback::watch_incoming(&self.settings.etcd.data_dir);
        }
        self.supervisor.start(mode).await.map_err(|e| e.to_string())
    }

    /// Stop etcd gracefully within `grace`, then SIGKILL.
    pub async fn stop_etcd(&self, grace: Duration) -> Result<bool, SuperviseError> {
        self.want_running.store(false, Ordering::SeqCst);
        self.set_state("stopping");
        let r = self.supervisor.stop(grace).await;
        let p = self
            .probe(self.settings.timeouts.probe_timeout, false)
            .await;
        self.record(&p);
        r
    }

    /// Whether the daemon should restart a dead etcd itself.
    pub(crate) fn should_restart(&self) -> bool {
        self.settings.autostart && self.want_running.load(Ordering::SeqCst)
    }

    /// Carry out one OCF action; always answers within the request's deadline.
    pub(crate) async fn action(self: &Arc<Self>, req: ActionRequest) -> ActionReply {
        let started = Instant::now();
        let deadline = Duration::from_millis(req.deadline_ms);
        let action = req.action;
        tracing::info!(?action, depth = req.depth, deadline_ms = req.deadline_ms, instance = ?req.instance, "action");
        // The work runs as a task of its own: when the deadline passes, the
        // reply goes out and the work (e.g. a stop's SIGKILL) still finishes;
        // a shutdown waits for it (bounded, see `crate::tasks`).
        // Boxed once here: each wrapper on the way into the task (the
        // watchdog ticket, the cancellation, the tracker) would otherwise
        // copy the whole future, which holds the live check's etcd calls.
        let me = self.clone();
        let work = self.work.spawn_action(
            deadline,
            Box::pin(async move { me.do_action(req, deadline).await }),
        );
        let reply = match tokio::time::timeout(deadline, work).await {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => ActionReply {
                outcome: Outcome::Failed,
                reason: Some(format!(
                    "the {action:?} action was abandoned: the daemon is shutting down"
                )),
            },
            Ok(Err(e)) => ActionReply {
                outcome: Outcome::Failed,
                reason: Some(format!("the {action:?} action failed internally: {e}")),
            },
            Err(_) => ActionReply {
                outcome: Outcome::Failed,
                reason: Some(format!(
                    "the {action:?} action did not finish within {deadline:?}"
                )),
            },
        };
        self.metrics.action(action, started.elapsed());
        tracing::info!(?action, outcome = ?reply.outcome, reason = ?reply.reason, took = ?started.elapsed(), "action done");
        reply
    }
    async fn do_action(&self, req: ActionRequest, deadline: Duration) -> ActionReply {
        // Leave a margin so that the reply itself fits in the deadline.
        let budget = deadline.saturating_sub(Duration::from_millis(200).min(deadline / 4));
        let failover = self.failover.get().map(|f| &**f);
        crate::reconcile::agent::action(failover, &self.ports(), &req, budget).await
    }

    /// What the reconciler acts through: this core's etcd client and
    /// supervision, and its Pacemaker.
    pub(crate) fn ports(&self) -> Ports<'_, SharedPacemaker, Core, Core> {
        Ports {
            pacemaker: &self.pacemaker,
            etcd: self,
            supervisor: self,
            settings: &self.settings,
        }
    }
}

/// How long crm_mon may take for a report.
pub(crate) const CRM_MON_DEADLINE: Duration = Duration::from_secs(5);
