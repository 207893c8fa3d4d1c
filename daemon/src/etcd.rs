//! Live etcd checks and membership operations.
//!
//! Every call asks etcd now, under its own deadline. Nothing here caches an
//! answer: in two-node clusters a cached member health once hid a dead peer
//! and let a disruptive change through. The only thing kept between calls is
//! the gRPC channel (a connection, not an answer).
//!
//! Quorum is decided from a linearizable read or from Status with a leader,
//! never from MemberList answering: etcd 3.4 serves MemberList locally even
//! without a leader.

use std::time::Duration;

use etcd_client::{
    Certificate, Client, ConnectOptions, GetOptions, Identity, MemberAddOptions, TlsOptions,
};
use tokio::sync::Mutex;
use tonic::Code;

use crate::config::{Settings, TlsFiles};

/// A failed etcd call, typed by its gRPC status code (never by its text).
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No answer within the deadline (etcd hung, or a network partition).
    #[error("etcd did not answer within {0:?}")]
    Timeout(Duration),
    /// etcd is not reachable, or answered Unavailable (e.g. no leader).
    #[error("etcd is unavailable: {0}")]
    Unavailable(String),
    /// etcd refused because of its state (e.g. a learner not yet in sync).
    #[error("etcd refused the request in its current state: {0}")]
    FailedPrecondition(String),
    /// The member or key does not exist.
    #[error("etcd: not found: {0}")]
    NotFound(String),
    /// Authentication or permission failure.
    #[error("etcd denied access: {0}")]
    PermissionDenied(String),
    /// The TLS files could not be read.
    #[error("cannot read TLS file {path}: {source}")]
    TlsFile {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Anything else, with its gRPC code.
    #[error("etcd call failed ({code:?}): {message}")]
    Other {
        /// gRPC status code, when the error came from etcd.
        code: Option<Code>,
        /// The message.
        message: String,
    },
}

impl EtcdError {
    /// Whether this error says etcd could not be reached or answered too late.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, EtcdError::Timeout(_) | EtcdError::Unavailable(_))
    }
}

impl From<etcd_client::Error> for EtcdError {
    fn from(e: etcd_client::Error) -> Self {
        match e {
            etcd_client::Error::GRpcStatus(s) => {
                let message = s.message().to_string();
                match s.code() {
                    Code::Unavailable => EtcdError::Unavailable(message),
                    Code::DeadlineExceeded => EtcdError::Unavailable(message),
                    Code::FailedPrecondition => EtcdError::FailedPrecondition(message),
                    Code::NotFound => EtcdError::NotFound(message),
                    Code::PermissionDenied | Code::Unauthenticated => {
                        EtcdError::PermissionDenied(message)
                    }
                    code => EtcdError::Other {
                        code: Some(code),
                        message,
                    },
                }
            }
            // The cause (a refused connection, a certificate the peer does
            // not trust) is in the source chain, not in the top message.
            etcd_client::Error::TransportError(t) => EtcdError::Unavailable(with_sources(&t)),
            etcd_client::Error::IoError(io) => EtcdError::Unavailable(io.to_string()),
            other => EtcdError::Other {
                code: None,
                message: other.to_string(),
            },
        }
    }
}

/// `e`'s message followed by each source's that adds to it.
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let m = cause.to_string();
        if !out.contains(&m) {
            out.push_str(": ");
            out.push_str(&m);
        }
        next = cause.source();
    }
    out
}

/// One member's Status, as it answered just now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    /// The answering member's ID.
    pub member_id: u64,
    /// The leader it knows (0 = none).
    pub(crate) leader: u64,
    /// Raft term.
    pub(crate) raft_term: u64,
    /// Raft index.
    pub(crate) raft_index: u64,
    /// Whether it is a learner.
    pub(crate) is_learner: bool,
    /// Store revision in the response header.
    pub(crate) revision: i64,
    /// Cluster ID.
    pub cluster_id: u64,
    /// etcd version.
    pub version: String,
    /// Backend size in bytes.
    pub(crate) db_size: i64,
    /// Bytes of the backend in use (the rest is free space a defragment
    /// gives back).
    pub(crate) db_size_in_use: i64,
    /// Errors etcd itself reports (alarms such as NOSPACE).
    pub(crate) errors: Vec<String>,
}

impl MemberStatus {
    /// Whether this member knows a leader.
    pub fn has_leader(&self) -> bool {
        self.leader != 0
    }

    /// The database, version and alarms, as `/status` shows them.
    pub(crate) fn db(&self) -> warden_api::EtcdDb {
        warden_api::EtcdDb {
            version: self.version.clone(),
            db_size: self.db_size,
            db_size_in_use: self.db_size_in_use,
            alarms: self.alarms(),
        }
    }

    /// The active alarms (`NOSPACE`, `CORRUPT`): etcd lists each in the
    /// Status errors as `memberID:<id> alarm:<NAME> `.
    pub(crate) fn alarms(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .errors
            .iter()
            .flat_map(|e| e.split_whitespace())
            .filter_map(|w| w.strip_prefix("alarm:"))
            .map(str::to_string)
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// A member as MemberList reports it.
pub(crate) type Member = warden_api::Member;

/// Run `fut` under `deadline`, turning an expiry into [`EtcdError::Timeout`].
async fn within<T>(
    deadline: Duration,
    fut: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, EtcdError> {
    match tokio::time::timeout(deadline, fut).await {
        Ok(r) => r.map_err(EtcdError::from),
        Err(_) => Err(EtcdError::Timeout(deadline)),
    }
}

/// Connection settings for etcd clients.
#[derive(Debug, Clone)]
pub struct Connector {
    tls: Option<TlsFiles>,
}

impl Connector {
    /// From the settings (the client-side TLS files).
    pub(crate) fn new(s: &Settings) -> Self {
        Connector {
            tls: s.etcd.client_tls.clone(),
        }
    }

    /// Without TLS.
    pub fn plain() -> Self {
        Connector { tls: None }
    }

    /// A client for `endpoints`, connected within `deadline`.
    pub(crate) async fn connect(
        &self,
        endpoints: &[String],
        deadline: Duration,
    ) -> Result<Client, EtcdError> {
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(deadline)
            .with_keep_alive(Duration::from_secs(5), deadline);
        if let Some(t) = &self.tls {
            let read = |p: &std::path::Path| {
                std::fs::read(p).map_err(|source| EtcdError::TlsFile {
                    path: p.display().to_string(),
                    source,
                })
            };
            let ca = Certificate::from_pem(read(&t.trusted_ca_file)?);
            let id = Identity::from_pem(read(&t.cert_file)?, read(&t.key_file)?);
            opts = opts.with_tls(TlsOptions::new().ca_certificate(ca).identity(id));
        }
        within(deadline, Client::connect(endpoints, Some(opts))).await
    }
}

/// The live view of the local etcd member.
pub struct LiveEtcd {
    endpoint: String,
    connector: Connector,
    // The gRPC channel, kept so that a probe costs one round trip. A
    // connection is not an answer: every call still asks etcd.
    client: Mutex<Option<Client>>,
}

impl std::fmt::Debug for LiveEtcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveEtcd")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl LiveEtcd {
    /// A view of the local member at `endpoint`.
    pub fn new(endpoint: String, connector: Connector) -> Self {
        LiveEtcd {
            endpoint,
            connector,
            client: Mutex::new(None),
        }
    }

    /// The raft progress this member tracks (see [`crate::raft_progress`]):
    /// each member's match index, if it is the leader.
    pub async fn raft_progress(
        &self,
        deadline: Duration,
    ) -> Result<crate::raft_progress::RaftProgress, crate::raft_progress::ProgressError> {
        crate::raft_progress::read(&self.endpoint, self.connector.tls.as_ref(), deadline).await
    }

    async fn client(&self, deadline: Duration) -> Result<Client, EtcdError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let c = self
            .connector
            .connect(std::slice::from_ref(&self.endpoint), deadline)
            .await?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Forget the channel (after etcd was restarted on another port or with
    /// other certificates).
    pub(crate) async fn reset(&self) {
        *self.client.lock().await = None;
    }

    /// The local member's Status, now.
    pub async fn status(&self, deadline: Duration) -> Result<MemberStatus, EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let r = within(left, c.status()).await?;
        Ok(status_from(&r))
    }

    /// A linearizable (quorum) read; returns the revision it saw.
    pub async fn linearizable_read(&self, deadline: Duration) -> Result<i64, EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        // A count-only range read of one key: cheap, but it must go through
        // the leader's read index, so it fails without quorum.
        let r = within(
            left,
            c.get(
                "/etcd-warden/health",
                Some(GetOptions::new().with_count_only()),
            ),
        )
        .await?;
        Ok(r.header().map(|h| h.revision()).unwrap_or_default())
    }

    /// The member list, now.
    pub async fn member_list(&self, deadline: Duration) -> Result<Vec<Member>, EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let r = within(left, c.member_list()).await?;
        Ok(r.members().iter().map(member_from).collect())
    }

    /// Add a member as a learner; returns the new member and the list after.
    pub(crate) async fn add_learner(
        &self,
        peer_urls: &[String],
        deadline: Duration,
    ) -> Result<(Member, Vec<Member>), EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let r = within(
            left,
            c.member_add(peer_urls, Some(MemberAddOptions::new().with_is_learner())),
        )
        .await?;
        let added = r
            .member()
            .map(member_from)
            .ok_or_else(|| EtcdError::Other {
                code: None,
                message: "etcd answered MemberAdd without the new member".into(),
            })?;
        Ok((added, r.member_list().iter().map(member_from).collect()))
    }

    /// Promote a learner to voter.
    pub(crate) async fn promote(
        &self,
        id: u64,
        deadline: Duration,
    ) -> Result<Vec<Member>, EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let r = within(left, c.member_promote(id)).await?;
        Ok(r.members().iter().map(member_from).collect())
    }

    /// Hand this member's leadership to member `id` (etcd answers an error
    /// unless this member is the leader).
    pub(crate) async fn move_leader(&self, id: u64, deadline: Duration) -> Result<(), EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        within(left, c.move_leader(id)).await?;
        Ok(())
    }

    /// Remove a member.
    pub(crate) async fn remove(
        &self,
        id: u64,
        deadline: Duration,
    ) -> Result<Vec<Member>, EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let r = within(left, c.member_remove(id)).await?;
        Ok(r.members().iter().map(member_from).collect())
    }
}

/// The key of the leave lock: the node that holds it is the only one allowed
/// to leave the member list (the last voter never leaves).
pub(crate) const LEAVE_LOCK_KEY: &str = "/etcd-warden/leave-lock";

impl LiveEtcd {
    /// The node holding the leave lock, read linearizably now.
    pub(crate) async fn leave_lock(&self, deadline: Duration) -> Result<Option<String>, EtcdError> {
        self.read_value(LEAVE_LOCK_KEY, deadline).await
    }

    /// The value of `key`, read linearizably now.
    async fn read_value(&self, key: &str, deadline: Duration) -> Result<Option<String>, EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let r = within(left, c.get(key, None)).await?;
        Ok(r.kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
    }

    /// Take the leave lock for `node` with a compare-and-swap (only if the
    /// key is absent, or already ours). Returns the holder after the call.
    pub(crate) async fn acquire_leave_lock(
        &self,
        node: &str,
        deadline: Duration,
    ) -> Result<String, EtcdError> {
        use etcd_client::{Compare, CompareOp, Txn, TxnOp};
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let txn = Txn::new()
            .when([Compare::create_revision(
                LEAVE_LOCK_KEY,
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(LEAVE_LOCK_KEY, node, None)])
            .or_else([TxnOp::get(LEAVE_LOCK_KEY, None)]);
        let r = within(left, c.txn(txn)).await?;
        if r.succeeded() {
            return Ok(node.to_string());
        }
        Ok(holder_in(r))
    }

    /// Release the leave lock if `node` holds it (compare-and-swap on the
    /// value: never another node's lock).
    pub(crate) async fn release_leave_lock(
        &self,
        node: &str,
        deadline: Duration,
    ) -> Result<(), EtcdError> {
        use etcd_client::{Compare, CompareOp, Txn, TxnOp};
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let txn = Txn::new()
            .when([Compare::value(LEAVE_LOCK_KEY, CompareOp::Equal, node)])
            .and_then([TxnOp::delete(LEAVE_LOCK_KEY, None)]);
        within(left, c.txn(txn)).await?;
        Ok(())
    }
}

/// The key the daemon writes to move the revision on after a forced
/// restart (see [`LiveEtcd::move_revision_past`]); deleted again at once.
pub const REVISION_KEY: &str = "/etcd-warden/revision-bump";

impl LiveEtcd {
    /// Move this member's revision on by `count + 2` and compact at the
    /// result: no revision up to `count + 1` past the current one is given
    /// to any other write, and a watch that starts at any of them, or
    /// before, is told its history was compacted (so a client re-lists
    /// instead of trusting what it saw of revisions a forced restart
    /// dropped). `count + 1` puts of [`REVISION_KEY`], 64 at a time, then
    /// its delete and a compaction. Returns the revisions before and after.
    pub(crate) async fn move_revision_past(
        &self,
        count: u64,
        deadline: Duration,
    ) -> Result<(i64, i64), EtcdError> {
        use futures_util::{StreamExt, TryStreamExt};
        let started = tokio::time::Instant::now();
        let c = self.client(deadline).await?;
        let left = || deadline.saturating_sub(started.elapsed());
        let before = within(left(), c.kv_client().get(REVISION_KEY, None)).await?;
        let before = before.header().map_or(0, |h| h.revision());
        let puts = futures_util::stream::iter(0..=count)
            .map(|i| {
                let mut kv = c.kv_client();
                async move { kv.put(REVISION_KEY, i.to_string(), None).await }
            })
            .buffer_unordered(256)
            .try_for_each(|_| async { Ok(()) });
        within(left(), puts).await?;
        let deleted = within(left(), c.kv_client().delete(REVISION_KEY, None)).await?;
        let after = deleted.header().map_or(0, |h| h.revision());
        within(left(), c.kv_client().compact(after, None)).await?;
        Ok((before, after))
    }
}

/// The key of the defragmentation lock: the node that holds it is the only
/// one defragmenting (or moving leadership to do so). It lives under a
/// lease, so a daemon that dies while holding it frees it within the
/// lease's time to live.
pub const DEFRAG_LOCK_KEY: &str = "/etcd-warden/defrag-lock";

impl LiveEtcd {
    /// Defragment the local member (etcd blocks its reads and writes
    /// meanwhile).
    pub async fn defragment(&self, deadline: Duration) -> Result<(), EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        within(left, c.defragment()).await?;
        Ok(())
    }

    /// The value of the defragmentation lock, read linearizably now.
    pub async fn defrag_lock(&self, deadline: Duration) -> Result<Option<String>, EtcdError> {
        self.read_value(DEFRAG_LOCK_KEY, deadline).await
    }

    /// Take the defragmentation lock with `value` under a lease of `ttl`
    /// (compare-and-swap: only if the key is absent). `Ok(Ok(lease))` when
    /// taken, `Ok(Err(holder))` when another holds it.
    pub async fn acquire_defrag_lock(
        &self,
        value: &str,
        ttl: Duration,
        deadline: Duration,
    ) -> Result<Result<i64, String>, EtcdError> {
        use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        let secs = i64::try_from(ttl.as_secs().max(5)).unwrap_or(i64::MAX);
        let lease = within(left, c.lease_grant(secs, None)).await?.id();
        let txn = Txn::new()
            .when([Compare::create_revision(
                DEFRAG_LOCK_KEY,
                CompareOp::Equal,
                0,
            )])
            .and_then([TxnOp::put(
                DEFRAG_LOCK_KEY,
                value,
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(DEFRAG_LOCK_KEY, None)]);
        let left = deadline.saturating_sub(started.elapsed());
        let r = within(left, c.txn(txn)).await;
        let taken = matches!(&r, Ok(r) if r.succeeded());
        if !taken {
            // Not ours: the lease would only linger until its time to live.
            let _ = within(left, c.lease_revoke(lease)).await;
        }
        let r = r?;
        if taken {
            return Ok(Ok(lease));
        }
        Ok(Err(holder_in(r)))
    }

    /// Release the defragmentation lock taken under `lease` (revoking the
    /// lease deletes the key, and never another node's).
    pub async fn release_defrag_lock(
        &self,
        lease: i64,
        deadline: Duration,
    ) -> Result<(), EtcdError> {
        let started = tokio::time::Instant::now();
        let mut c = self.client(deadline).await?;
        let left = deadline.saturating_sub(started.elapsed());
        within(left, c.lease_revoke(lease)).await?;
        Ok(())
    }
}

/// The lock holder a failed compare-and-swap read back (its `or_else` get),
/// empty when the key vanished meanwhile.
fn holder_in(r: etcd_client::TxnResponse) -> String {
    r.op_responses()
        .into_iter()
        .find_map(|op| match op {
            etcd_client::TxnOpResponse::Get(g) => g
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Status of every member in `members`, each asked at its own client URL,
/// all at once, each under `deadline`.
pub(crate) async fn status_of_members(
    connector: &Connector,
    members: &[Member],
    deadline: Duration,
) -> Vec<(Member, Result<MemberStatus, EtcdError>)> {
    let mut set = tokio::task::JoinSet::new();
    for (i, m) in members.iter().enumerate() {
        let connector = connector.clone();
        let urls = m.client_urls.clone();
        set.spawn(async move {
            let r = async {
                if urls.is_empty() {
                    return Err(EtcdError::Unavailable(
                        "the member has no client URL (not started yet)".into(),
                    ));
                }
                let mut c = connector.connect(&urls, deadline).await?;
                let r = within(deadline, c.status()).await?;
                Ok(status_from(&r))
            }
            .await;
            (i, r)
        });
    }
    let mut out: Vec<Option<Result<MemberStatus, EtcdError>>> =
        members.iter().map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        if let Ok((i, r)) = joined {
            out[i] = Some(r);
        }
    }
    members
        .iter()
        .cloned()
        .zip(out)
        .map(|(m, r)| {
            let r = r.unwrap_or_else(|| {
                Err(EtcdError::Other {
                    code: None,
                    message: "status task failed".into(),
                })
            });
            (m, r)
        })
        .collect()
}

/// Status of the etcd of every configured node but this one, each asked
/// at its configured client URLs under `deadline`; a node that does not
/// answer in time is left out.
pub(crate) async fn status_of_other_nodes(
    settings: &crate::config::Settings,
    connector: &Connector,
    deadline: Duration,
) -> Vec<(String, MemberStatus)> {
    let mut out = Vec::new();
    for node in settings
        .nodes
        .iter()
        .filter(|n| n.name != settings.node_name)
    {
        let Ok(mut c) = connector.connect(&node.client_urls, deadline).await else {
            continue;
        };
        if let Ok(r) = within(deadline, c.status()).await {
            out.push((node.name.clone(), status_from(&r)));
        }
    }
    out
}

fn status_from(r: &etcd_client::StatusResponse) -> MemberStatus {
    let h = r.header();
    MemberStatus {
        member_id: h.map(|h| h.member_id()).unwrap_or_default(),
        leader: r.leader(),
        raft_term: r.raft_term(),
        raft_index: r.raft_index(),
        is_learner: r.is_learner(),
        revision: h.map(|h| h.revision()).unwrap_or_default(),
        cluster_id: h.map(|h| h.cluster_id()).unwrap_or_default(),
        version: r.version().to_string(),
        db_size: r.db_size(),
        db_size_in_use: r.raft_used_db_size(),
        errors: r.errors().to_vec(),
    }
}

fn member_from(m: &etcd_client::Member) -> Member {
    Member {
        id: m.id(),
        name: m.name().to_string(),
        peer_urls: m.peer_urls().to_vec(),
        client_urls: m.client_urls().to_vec(),
        is_learner: m.is_learner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_codes_map_to_typed_errors() {
        let e: EtcdError = etcd_client::Error::GRpcStatus(tonic::Status::new(
            Code::FailedPrecondition,
            "can only promote a learner member which is in sync with leader",
        ))
        .into();
        assert!(matches!(e, EtcdError::FailedPrecondition(_)));
        let e: EtcdError =
            etcd_client::Error::GRpcStatus(tonic::Status::new(Code::Unavailable, "x")).into();
        assert!(e.is_unreachable());
        let e: EtcdError =
            etcd_client::Error::GRpcStatus(tonic::Status::new(Code::NotFound, "x")).into();
        assert!(matches!(e, EtcdError::NotFound(_)));
        let e: EtcdError =
            etcd_client::Error::GRpcStatus(tonic::Status::new(Code::Internal, "x")).into();
        assert!(matches!(
            e,
            EtcdError::Other {
                code: Some(Code::Internal),
                ..
            }
        ));
    }

    #[test]
    fn a_message_keeps_the_causes_it_does_not_already_say() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let leaf = E("invalid peer certificate: UnknownIssuer", None);
        let mid = E("error trying to connect", Some(Box::new(leaf)));
        let top = E("transport error", Some(Box::new(mid)));
        assert_eq!(
            with_sources(&top),
            "transport error: error trying to connect: invalid peer certificate: UnknownIssuer"
        );
        let same = E(
            "transport error",
            Some(Box::new(E("transport error", None))),
        );
        assert_eq!(with_sources(&same), "transport error");
    }

    #[tokio::test]
    async fn a_dead_endpoint_fails_within_the_deadline() {
        // Nothing listens on port 1 of loopback.
        let live = LiveEtcd::new("http://127.0.0.1:1".into(), Connector { tls: None });
        let t = std::time::Instant::now();
        let e = live.status(Duration::from_millis(300)).await.unwrap_err();
        assert!(e.is_unreachable(), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}
