//! The etcd client: [`LiveEtcd`] asks one member over gRPC, each call under
//! its own deadline; [`Connector`] holds the client-side TLS files.

use std::time::Duration;

use etcd_client::{
    Certificate, Client, ConnectOptions, GetOptions, Identity, MemberAddOptions, TlsOptions,
};
use tokio::sync::Mutex;

use super::{EtcdError, Member, MemberStatus};
use crate::config::{Settings, TlsFiles};

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

    /// The raft progress this member tracks (see [`crate::etcd::raft_progress`]):
    /// each member's match index, if it is the leader.
    pub async fn raft_progress(
        &self,
        deadline: Duration,
    ) -> Result<crate::etcd::raft_progress::RaftProgress, crate::etcd::raft_progress::ProgressError>
    {
        crate::etcd::raft_progress::read(&self.endpoint, self.connector.tls.as_ref(), deadline)
            .await
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
