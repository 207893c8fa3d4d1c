//! The daemon's side of `etcd-warden recover` (`POST /v1/recover`): the
//! plan and its doing under the failover reconciler's lock, and the stop
//! of a leaderless etcd a resolution replaces the data of.

use std::time::Duration;

use warden_api::{RecoverReply, RecoverRequest, RecoverWhat};

use crate::app::App;

impl App {
    /// `POST /v1/recover`: plan an operator's resolution and, confirmed,
    /// carry it out, under the failover reconciler's one-pass-at-a-time lock
    /// (no pass or agent action acts on the files meanwhile). A plan that
    /// needs etcd stopped is refused while it runs.
    pub(crate) async fn recover(&self, req: RecoverRequest) -> Result<RecoverReply, String> {
        let why = |e: anyhow::Error| format!("{e:#}");
        crate::recover::check_node(&self.settings, &req.node).map_err(why)?;
        let _one = match self.failover.as_ref() {
            Some(f) => Some(f.exclusive().await),
            None => None,
        };
        let paths = self.local_paths();
        let me = self.settings.node_name.clone();
        let etcd = crate::recover::local_etcd(&self.settings);
        if matches!(
            req.what,
            RecoverWhat::RestoreArchive | RecoverWhat::RestoreSnapshot
        ) {
            self.no_live_cluster_elsewhere(&me).await?;
        }
        let (r, p, m) = (req.clone(), paths.clone(), me.clone());
        // Reading the data directory and verifying a snapshot are file work:
        // off the async workers.
        let plan = tokio::task::spawn_blocking(move || crate::recover::plan(&r, &m, &p, &etcd))
            .await
            .map_err(|e| format!("planning failed internally: {e}"))?
            .map_err(why)?;
        let mut reply = RecoverReply {
            node: me.clone(),
            plan: plan.describe.clone(),
            done: Vec::new(),
        };
        if !req.confirm {
            return Ok(reply);
        }
        if plan.needs_etcd_stopped
            && let Some(pid) = self.supervisor.state().await.pid()
        {
            return Err(format!(
                "etcd runs on {me} (pid {pid}): stop it first (`pcs resource ban <etcd clone> {me}`, with crmsh `crm resource ban <etcd clone> {me}`), then run this again"
            ));
        }
        if plan.stops_etcd {
            self.stop_leaderless_etcd(&me).await?;
        }
        tracing::warn!(what = ?req.what, node = %req.node, plan = ?plan.describe, "recover: carrying out an operator's resolution");
        let done = tokio::task::spawn_blocking(move || {
            crate::recover::apply(&plan.action, &paths, &mut |p| {
                tracing::info!(progress = p, "recover")
            })
        })
        .await
        .map_err(|e| format!("the resolution failed internally: {e}"))?
        .map_err(why)?;
        for d in &done {
            tracing::warn!(done = %d, "recover");
        }
        reply.done = done;
        Ok(reply)
    }

    /// Stops etcd for a resolution that replaces its data, only while it
    /// has no leader (it then serves nothing); a member with a leader is
    /// part of a working cluster, and the resolution is refused.
    async fn stop_leaderless_etcd(&self, me: &str) -> Result<(), String> {
        let Some(pid) = self.supervisor.state().await.pid() else {
            return Ok(());
        };
        let probe = self.settings.timeouts.probe_timeout;
        // A learner keeps the last leader it heard of (it never campaigns),
        // so the leader it names must answer as the leader itself.
        if let Ok(st) = self.local_status(probe).await
            && st.has_leader()
            && let Some(node) = self.leading_peer(st.leader).await
        {
            return Err(format!(
                "etcd on {me} (pid {pid}) has a leader (member {:x} on {node}, which answers as the leader): it is part of a working cluster, which it catches up with; nothing to force",
                st.leader
            ));
        }
        tracing::warn!(
            pid,
            "recover: stopping etcd, which has no leader, before its data is replaced"
        );
        self.stop_etcd(self.settings.timeouts.stop_grace)
            .await
            .map_err(|e| format!("cannot stop etcd on {me} (pid {pid}): {e}"))?;
        Ok(())
    }

    /// A restore makes this node's data the cluster's: refused while the
    /// etcd of another node leads a cluster, whose data is live (this node
    /// follows or rejoins it by itself; a restore beside it would start a
    /// second history). A member without a leader serves nothing: its data
    /// may be the stale one a refusal names the restore for.
    async fn no_live_cluster_elsewhere(&self, me: &str) -> Result<(), String> {
        const ASK: Duration = Duration::from_millis(500);
        let live = crate::etcd::status_of_other_nodes(&self.settings, &self.connector, ASK).await;
        let Some((node, st)) = live
            .iter()
            .find(|(_, st)| st.leader != 0 && st.leader == st.member_id)
        else {
            return Ok(());
        };
        Err(format!(
            "etcd on {node} leads a cluster (member {:x}): live data exists there, which {me} follows or rejoins by itself, and a restore on {me} would start a second history beside it. Restore only once no etcd leads on any node (`pcs resource ban <etcd clone> {node}`, with crmsh `crm resource ban <etcd clone> {node}`)",
            st.member_id
        ))
    }

    /// The other node whose etcd answers as member `leader`, leading.
    async fn leading_peer(&self, leader: u64) -> Option<String> {
        const ASK: Duration = Duration::from_millis(500);
        crate::etcd::status_of_other_nodes(&self.settings, &self.connector, ASK)
            .await
            .into_iter()
            .find(|(_, st)| st.leader == leader && st.member_id == leader)
            .map(|(node, _)| node)
    }
}
