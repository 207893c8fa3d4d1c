//! The daemon app's side of the reconciler's ports
//! ([`crate::reconcile::ports`]): its live etcd client as [`EtcdOps`], its
//! supervision of the local etcd as [`Supervisor`]. The reconciler sees
//! only the traits; this is the one place they meet the app.

use std::time::Duration;

use crate::app::App;
use crate::etcd::conf::StartMode;
use crate::etcd::raft_progress::{ProgressError, RaftProgress};
use crate::etcd::{EtcdError, LiveEtcd, Member, MemberStatus, status_of_members};
use crate::reconcile::ports::{EtcdOps, EtcdReads, OpsError, PeerDown, Probe, Supervisor};
use crate::supervise::ProcState;

impl EtcdReads for App {
    async fn status(&self, deadline: Duration) -> Result<MemberStatus, EtcdError> {
        self.local_status(deadline).await
    }
    async fn linearizable_read(&self, deadline: Duration) -> Result<i64, EtcdError> {
        self.etcd.linearizable_read(deadline).await
    }
    async fn member_list(&self, deadline: Duration) -> Result<Vec<Member>, EtcdError> {
        self.etcd.member_list(deadline).await
    }
    async fn leave_lock(&self, deadline: Duration) -> Result<Option<String>, EtcdError> {
        self.etcd.leave_lock(deadline).await
    }
}

impl EtcdOps for App {
    type Peer = LiveEtcd;

    fn peer(&self, client_url: &str) -> LiveEtcd {
        LiveEtcd::new(client_url.to_string(), self.connector.clone())
    }

    async fn raft_progress(&self, deadline: Duration) -> Result<RaftProgress, ProgressError> {
        self.etcd.raft_progress(deadline).await
    }

    async fn statuses(
        &self,
        members: &[Member],
        deadline: Duration,
    ) -> Vec<(Member, Result<MemberStatus, EtcdError>)> {
        status_of_members(&self.connector, members, deadline).await
    }

    async fn acquire_leave_lock(
        &self,
        node: &str,
        deadline: Duration,
    ) -> Result<String, EtcdError> {
        self.etcd.acquire_leave_lock(node, deadline).await
    }

    async fn release_leave_lock(&self, node: &str, deadline: Duration) -> Result<(), EtcdError> {
        self.etcd.release_leave_lock(node, deadline).await
    }

    async fn add_learner(
        &self,
        peer_urls: Vec<String>,
        deadline: Duration,
    ) -> Result<(Member, Vec<Member>), OpsError> {
        Ok(self.etcd.add_learner(&peer_urls, deadline).await?)
    }

    async fn promote(&self, id: u64, deadline: Duration) -> Result<Vec<Member>, OpsError> {
        Ok(self.etcd.promote(id, deadline).await?)
    }

    async fn remove(&self, id: u64, deadline: Duration) -> Result<Vec<Member>, OpsError> {
        Ok(self.etcd.remove(id, deadline).await?)
    }

    async fn move_leader(&self, id: u64, deadline: Duration) -> Result<(), OpsError> {
        Ok(self.etcd.move_leader(id, deadline).await?)
    }
}

impl Supervisor for App {
    async fn state(&self) -> ProcState {
        self.proc_state().await
    }

    async fn probe(&self, deadline: Duration, read: bool) -> Probe {
        let p = App::probe(self, deadline, read).await;
        self.record(&p);
        p
    }

    async fn start(&self, mode: StartMode, deadline: Duration) -> Result<u32, OpsError> {
        self.start_etcd(mode, deadline)
            .await
            .map_err(OpsError::Supervise)
    }

    async fn stop(&self, grace: Duration) -> Result<bool, OpsError> {
        self.stop_etcd(grace)
            .await
            .map_err(|e| OpsError::Supervise(e.to_string()))
    }

    async fn start_moving_revision(
        &self,
        at_risk: u64,
        deadline: Duration,
    ) -> Result<u32, OpsError> {
        self.start_holding_clients(at_risk, false, deadline)
            .await
            .map_err(OpsError::Supervise)
    }

    async fn restart_force_new_cluster(
        &self,
        peer_down: PeerDown,
        at_risk: u64,
        deadline: Duration,
    ) -> Result<u32, OpsError> {
        tracing::warn!(
            peer = %peer_down.node,
            evidence = %peer_down.evidence,
            at_risk,
            "restarting etcd with --force-new-cluster"
        );
        let started = std::time::Instant::now();
        Supervisor::stop(self, self.settings.timeouts.stop_grace.min(deadline / 2)).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let pid = if at_risk == 0 {
            Supervisor::start(self, StartMode::ForceNewCluster, left).await?
        } else {
            self.start_holding_clients(at_risk, true, left)
                .await
                .map_err(OpsError::Supervise)?
        };
        // The flag must not survive into the next start: rewrite the
        // configuration for a normal start now that the one-member cluster
        // exists on disk.
        if let Err(e) = crate::etcd::conf::write(&self.settings, &StartMode::Normal) {
            tracing::error!(error = %e, "cannot rewrite the etcd configuration without --force-new-cluster");
        }
        Ok(pid)
    }
}
