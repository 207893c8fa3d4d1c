//! What the app tells operators: `/metrics`, the node status, `GET
//! /status` with the archives, the report's etcd section and the report.

use std::time::Duration;

use crm_xml::report::{EtcdMember, EtcdRole, EtcdSection, WardenNodeState, WardenState};
use warden_api::NodeStatus;

use crate::etcd::{EtcdError, status_of_members};
use crate::reconcile::agent::live_reason;
use crate::reconcile::archives::ArchiveInfo;
use crate::reconcile::local::LocalPaths;

use super::{App, LastArchive, StatusDoc};

/// How long crm_mon may take for a report.
pub(crate) const CRM_MON_DEADLINE: Duration = Duration::from_secs(5);

impl App {
    /// `/metrics`: the content type and the exposition, with the failover
    /// state as of now.
    pub(crate) fn metrics_text(&self) -> (&'static str, String) {
        if let Some(f) = self.failover.as_ref() {
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
        let Some(d) = self.failover.as_ref().and_then(|f| f.last()) else {
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
        match self.failover.as_ref() {
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
        let (state, since) = match self.failover.as_ref() {
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
}
