//! What the reconciler asks of the world, as traits: Pacemaker's view and
//! attributes ([`Pacemaker`]), the etcd client calls ([`EtcdOps`]) and the
//! supervision of the local etcd ([`Supervisor`]). The daemon's core
//! implements them (see `crate::adapters`); tests put fakes and a simulated
//! Pacemaker behind them, so that the real gather → decide → execute runs
//! without a cluster.
//!
//! The reconciler depends on these traits only, never on the daemon's core:
//! the core holds the reconciler and hands it the ports for each call.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crm_xml::CrmMon;

use crate::config::Settings;
use crate::etcd::{EtcdError, Member, MemberStatus};
use crate::etcd_conf::StartMode;
use crate::raft_progress::{ProgressError, RaftProgress};
use crate::supervise::ProcState;

pub use super::pcmk::{Pacemaker, PcmkError};

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

/// Result of one probe of the local etcd.
#[derive(Debug)]
pub struct Probe {
    /// Process state.
    pub(crate) proc: ProcState,
    /// Local Status, or why it failed.
    pub(crate) status: Option<Result<MemberStatus, EtcdError>>,
    /// Linearizable read, when asked for.
    pub(crate) read: Option<Result<i64, EtcdError>>,
}

/// The local etcd's supervision: is it running, start it in a mode, stop
/// it, restart it as a new one-member cluster.
pub trait Supervisor: Send + Sync {
    /// The process's state, now.
    fn state(&self) -> impl Future<Output = ProcState> + Send;
    /// Ask the local etcd now (process, Status, and a linearizable read
    /// when `read`), recording what was seen for operators.
    fn probe(&self, deadline: Duration, read: bool) -> impl Future<Output = Probe> + Send;
    /// Start etcd in `mode` and wait until it answers.
    fn start(
        &self,
        mode: StartMode,
        deadline: Duration,
    ) -> impl Future<Output = Result<u32, OpsError>> + Send;
    /// Stop etcd (graceful within `grace`, then SIGKILL). Returns whether
    /// it ended by the graceful signal.
    fn stop(&self, grace: Duration) -> impl Future<Output = Result<bool, OpsError>> + Send;
    /// Stop etcd and start it again with `--force-new-cluster`. When the
    /// forced restart drops log entries that may hold `at_risk` revisions
    /// a peer acknowledged, clients are held off until the revision has
    /// moved past them.
    fn restart_force_new_cluster(
        &self,
        peer_down: PeerDown,
        at_risk: u64,
        deadline: Duration,
    ) -> impl Future<Output = Result<u32, OpsError>> + Send;
    /// Start etcd on its data with clients held off, move the revision
    /// past `at_risk` revisions if the data is a forced one-member
    /// cluster, then restart it normally: the end of a forced restart
    /// whose revision step was cut off.
    fn start_moving_revision(
        &self,
        at_risk: u64,
        deadline: Duration,
    ) -> impl Future<Output = Result<u32, OpsError>> + Send;
}

/// Everything one reconciler call acts through.
pub struct Ports<'a, P, E, S> {
    /// Pacemaker's view and attributes.
    pub pacemaker: &'a P,
    /// The etcd client calls.
    pub etcd: &'a E,
    /// The local etcd's supervision.
    pub supervisor: &'a S,
    /// Validated settings (nodes, URLs, timeouts).
    pub settings: &'a Settings,
}

/// A boxed future, for [`DynPacemaker`].
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`Pacemaker`] as an object, so that the daemon can hold either the real
/// tools or (in tests) a fake chosen at run time.
pub trait DynPacemaker: Send + Sync + std::fmt::Debug {
    /// See [`Pacemaker::crm_mon`].
    fn crm_mon_dyn(&self, deadline: Duration) -> BoxFuture<'_, Result<CrmMon, PcmkError>>;
    /// See [`Pacemaker::get_attr`].
    fn get_attr_dyn<'a>(
        &'a self,
        node: &'a str,
        name: &'a str,
        deadline: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, PcmkError>>;
    /// See [`Pacemaker::set_attr`].
    fn set_attr_dyn<'a>(
        &'a self,
        node: &'a str,
        name: &'a str,
        value: &'a str,
        deadline: Duration,
    ) -> BoxFuture<'a, Result<(), PcmkError>>;
    /// See [`Pacemaker::delete_attr`].
    fn delete_attr_dyn<'a>(
        &'a self,
        node: &'a str,
        name: &'a str,
        deadline: Duration,
    ) -> BoxFuture<'a, Result<(), PcmkError>>;
    /// See [`Pacemaker::clear_failed_start`].
    fn clear_failed_start_dyn<'a>(
        &'a self,
        resource: &'a str,
        node: &'a str,
        deadline: Duration,
    ) -> BoxFuture<'a, Result<(), PcmkError>>;
    /// See [`Pacemaker::fence_race_winner`].
    fn fence_race_winner_dyn<'a>(
        &'a self,
        nodes: &'a [String],
        deadline: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, PcmkError>>;
}

impl<T: Pacemaker + std::fmt::Debug> DynPacemaker for T {
    fn crm_mon_dyn(&self, deadline: Duration) -> BoxFuture<'_, Result<CrmMon, PcmkError>> {
        Box::pin(self.crm_mon(deadline))
    }
    fn get_attr_dyn<'a>(
        &'a self,
        node: &'a str,
        name: &'a str,
        deadline: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, PcmkError>> {
        Box::pin(self.get_attr(node, name, deadline))
    }
    fn set_attr_dyn<'a>(
        &'a self,
        node: &'a str,
        name: &'a str,
        value: &'a str,
        deadline: Duration,
    ) -> BoxFuture<'a, Result<(), PcmkError>> {
        Box::pin(self.set_attr(node, name, value, deadline))
    }
    fn delete_attr_dyn<'a>(
        &'a self,
        node: &'a str,
        name: &'a str,
        deadline: Duration,
    ) -> BoxFuture<'a, Result<(), PcmkError>> {
        Box::pin(self.delete_attr(node, name, deadline))
    }
    fn clear_failed_start_dyn<'a>(
        &'a self,
        resource: &'a str,
        node: &'a str,
        deadline: Duration,
    ) -> BoxFuture<'a, Result<(), PcmkError>> {
        Box::pin(self.clear_failed_start(resource, node, deadline))
    }
    fn fence_race_winner_dyn<'a>(
        &'a self,
        nodes: &'a [String],
        deadline: Duration,
    ) -> BoxFuture<'a, Result<Option<String>, PcmkError>> {
        Box::pin(self.fence_race_winner(nodes, deadline))
    }
}

/// A shared Pacemaker chosen at run time. A struct rather than a bare
/// `Arc<dyn …>`, whose implicit object lifetime defeats the `Send` proofs
/// of the futures holding it.
#[derive(Debug, Clone)]
pub struct SharedPacemaker(Arc<dyn DynPacemaker>);

impl SharedPacemaker {
    /// Share `p`.
    pub fn new(p: impl DynPacemaker + 'static) -> Self {
        SharedPacemaker(Arc::new(p))
    }
}

impl Pacemaker for SharedPacemaker {
    async fn crm_mon(&self, deadline: Duration) -> Result<CrmMon, PcmkError> {
        self.0.crm_mon_dyn(deadline).await
    }
    async fn get_attr(
        &self,
        node: &str,
        name: &str,
        deadline: Duration,
    ) -> Result<Option<String>, PcmkError> {
        self.0.get_attr_dyn(node, name, deadline).await
    }
    async fn set_attr(
        &self,
        node: &str,
        name: &str,
        value: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError> {
        self.0.set_attr_dyn(node, name, value, deadline).await
    }
    async fn delete_attr(
        &self,
        node: &str,
        name: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError> {
        self.0.delete_attr_dyn(node, name, deadline).await
    }
    async fn clear_failed_start(
        &self,
        resource: &str,
        node: &str,
        deadline: Duration,
    ) -> Result<(), PcmkError> {
        self.0
            .clear_failed_start_dyn(resource, node, deadline)
            .await
    }
    async fn fence_race_winner(
        &self,
        nodes: &[String],
        deadline: Duration,
    ) -> Result<Option<String>, PcmkError> {
        self.0.fence_race_winner_dyn(nodes, deadline).await
    }
}
