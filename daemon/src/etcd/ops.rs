//! What the failover logic reads from and does to etcd, as traits: one
//! member's reads ([`EtcdReads`]) and the cluster's operations
//! ([`EtcdOps`]). [`LiveEtcd`] reads any member; the daemon's app
//! implements [`EtcdOps`] with its client (`crate::app`); tests put fakes
//! behind them.

use std::future::Future;
use std::time::Duration;

use super::raft_progress::{ProgressError, RaftProgress};
use super::{EtcdError, LiveEtcd, Member, MemberStatus};

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

/// Reads of one etcd member, each live under its deadline.
pub trait EtcdReads: Send + Sync {
    /// The member's Status.
    fn status(
        &self,
        deadline: Duration,
    ) -> impl Future<Output = Result<MemberStatus, EtcdError>> + Send;
    /// A linearizable read (proof of quorum); the revision read.
    fn linearizable_read(
        &self,
        deadline: Duration,
    ) -> impl Future<Output = Result<i64, EtcdError>> + Send;
    /// The member list as this member answers it.
    fn member_list(
        &self,
        deadline: Duration,
    ) -> impl Future<Output = Result<Vec<Member>, EtcdError>> + Send;
    /// The node holding the leave lock, if any.
    fn leave_lock(
        &self,
        deadline: Duration,
    ) -> impl Future<Output = Result<Option<String>, EtcdError>> + Send;
}

/// What the failover logic reads from and does to etcd: the local member's
/// reads, the other members', membership changes and the leave lock.
pub trait EtcdOps: EtcdReads {
    /// Another member, asked at its client URL.
    type Peer: EtcdReads;
    /// The member at `client_url`.
    fn peer(&self, client_url: &str) -> Self::Peer;
    /// The raft progress the local member tracks for each member (only a
    /// leader tracks any).
    fn raft_progress(
        &self,
        deadline: Duration,
    ) -> impl Future<Output = Result<RaftProgress, ProgressError>> + Send;
    /// Every member's Status, each at its own client URL, all at once.
    fn statuses(
        &self,
        members: &[Member],
        deadline: Duration,
    ) -> impl Future<Output = Vec<(Member, Result<MemberStatus, EtcdError>)>> + Send;
    /// Take the leave lock for `node`; returns the holder after the attempt.
    fn acquire_leave_lock(
        &self,
        node: &str,
        deadline: Duration,
    ) -> impl Future<Output = Result<String, EtcdError>> + Send;
    /// Release `node`'s leave lock (never another node's).
    fn release_leave_lock(
        &self,
        node: &str,
        deadline: Duration,
    ) -> impl Future<Output = Result<(), EtcdError>> + Send;
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
    /// Hand the leadership of the local member, the leader, to member `id`.
    fn move_leader(
        &self,
        id: u64,
        deadline: Duration,
    ) -> impl Future<Output = Result<(), OpsError>> + Send;
}

impl EtcdReads for LiveEtcd {
    async fn status(&self, deadline: Duration) -> Result<MemberStatus, EtcdError> {
        LiveEtcd::status(self, deadline).await
    }
    async fn linearizable_read(&self, deadline: Duration) -> Result<i64, EtcdError> {
        LiveEtcd::linearizable_read(self, deadline).await
    }
    async fn member_list(&self, deadline: Duration) -> Result<Vec<Member>, EtcdError> {
        LiveEtcd::member_list(self, deadline).await
    }
    async fn leave_lock(&self, deadline: Duration) -> Result<Option<String>, EtcdError> {
        LiveEtcd::leave_lock(self, deadline).await
    }
}
