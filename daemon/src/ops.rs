//! Typed etcd operations for the failover logic (a later issue): start,
//! stop, force-new-cluster restart and membership changes, all on a trait so
//! that the decision logic can be driven against a fake in unit tests.

use std::sync::Arc;
use std::time::Duration;

use crate::core::Core;
use crate::etcd::{EtcdError, Member};
use crate::etcd_conf::StartMode;

/// Pacemaker's confirmation that the peer node is down (fenced). Forcing a
/// new cluster needs one: the type makes the rule impossible to forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerDown {
    /// The fenced node.
    pub node: String,
    /// What Pacemaker said (e.g. the fencing history entry), for the log.
    pub evidence: String,
}

/// An operation failure.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// Starting or stopping etcd failed.
    #[error("{0}")]
    Supervise(String),
    /// An etcd call failed.
    #[error(transparent)]
    Etcd(#[from] EtcdError),
}

/// What the failover logic may do to etcd.
pub trait EtcdOps: Send + Sync {
    /// Start etcd in `mode` and wait until it answers.
    fn start(
        &self,
        mode: StartMode,
        deadline: Duration,
    ) -> impl Future<Output = Result<u32, OpsError>> + Send;
    /// Stop etcd (graceful within `grace`, then SIGKILL).
    fn stop(&self, grace: Duration) -> impl Future<Output = Result<(), OpsError>> + Send;
    /// Stop etcd and start it again with `--force-new-cluster`.
    fn restart_force_new_cluster(
        &self,
        peer_down: PeerDown,
        deadline: Duration,
    ) -> impl Future<Output = Result<u32, OpsError>> + Send;
    /// Add a member as a learner.
    fn add_learner(
        &self,
        peer_urls: Vec<String>,
        deadline: Duration,
    ) -> impl Future<Output = Result<(Member, Vec<Member>), OpsError>> + Send;
    /// Promote a learner.
    fn promote(
        &self,
        id: u64,
        deadline: Duration,
    ) -> impl Future<Output = Result<Vec<Member>, OpsError>> + Send;
    /// Remove a member.
    fn remove(
        &self,
        id: u64,
        deadline: Duration,
    ) -> impl Future<Output = Result<Vec<Member>, OpsError>> + Send;
}

impl EtcdOps for Arc<Core> {
    async fn start(&self, mode: StartMode, deadline: Duration) -> Result<u32, OpsError> {
        self.start_etcd(mode, deadline)
            .await
            .map_err(OpsError::Supervise)
    }

    async fn stop(&self, grace: Duration) -> Result<(), OpsError> {
        self.stop_etcd(grace)
            .await
            .map(|_| ())
            .map_err(|e| OpsError::Supervise(e.to_string()))
    }

    async fn restart_force_new_cluster(
        &self,
        peer_down: PeerDown,
        deadline: Duration,
    ) -> Result<u32, OpsError> {
        tracing::warn!(
            peer = %peer_down.node,
            evidence = %peer_down.evidence,
            "restarting etcd with --force-new-cluster"
        );
        let started = std::time::Instant::now();
        self.stop(self.settings.timeouts.stop_grace.min(deadline / 2))
            .await?;
        let left = deadline.saturating_sub(started.elapsed());
        let pid = self.start(StartMode::ForceNewCluster, left).await?;
        // The flag must not survive into the next start: rewrite the
        // configuration for a normal start now that the one-member cluster
        // exists on disk.
        if let Err(e) = crate::etcd_conf::write(&self.settings, &StartMode::Normal) {
            tracing::error!(error = %e, "cannot rewrite the etcd configuration without --force-new-cluster");
        }
        Ok(pid)
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
}
