//! The steps on etcd's member list and on the leave lock: adding a learner,
//! promoting it, removing a member, handing the leadership over, and taking
//! or giving back the lock a graceful leave holds.

use std::time::{Duration, Instant};

use super::{Ctx, Fault, etcd_runs};
use crate::etcd::EtcdError;
use crate::reconcile::ports::{EtcdOps, OpsError, Supervisor};

/// How long one membership step may keep retrying through etcd's "unhealthy
/// cluster" window after a restart.
const MEMBERSHIP_RETRY: Duration = Duration::from_secs(10);

/// The deadline of one membership call within that budget. etcd 3.5 may not
/// answer a change at all while another one is pending (a removal just
/// after a promotion) and the call times out; a shorter attempt leaves time
/// to ask again once the pending change has been applied.
pub(super) const MEMBERSHIP_ATTEMPT: Duration = Duration::from_secs(3);
/// How long a leadership transfer may take: etcd waits for the target to
/// catch up, then gives up after an election timeout; writes pause while it
/// runs, so a transfer that cannot finish soon is abandoned, not retried.
const LEADER_TRANSFER: Duration = Duration::from_secs(3);

/// Retry `f` while etcd answers with a transient error (unavailable, a
/// timeout, or a precondition such as a learner not yet in sync), by the
/// gRPC code. Each attempt gets at most [`MEMBERSHIP_ATTEMPT`].
async fn retrying<T, F, Fut>(budget: Duration, mut f: F) -> Result<T, OpsError>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<T, OpsError>>,
{
    let started = Instant::now();
    loop {
        let left = budget.saturating_sub(started.elapsed());
        let attempt = left.min(MEMBERSHIP_ATTEMPT).max(Duration::from_millis(100));
        match f(attempt).await {
            Ok(v) => return Ok(v),
            Err(OpsError::Etcd(e))
                if (e.is_unreachable() || matches!(e, EtcdError::FailedPrecondition(_)))
                    && started.elapsed() + Duration::from_millis(200) < budget =>
            {
                tracing::debug!(error = %e, "etcd not ready for a membership change yet; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Add `node` as a learner, at the peer URLs it is configured with.
pub(super) async fn add_learner<P: ?Sized, E: EtcdOps, S>(
    cx: &Ctx<'_, P, E, S>,
    node: &str,
) -> Result<(), Fault> {
    let urls = cx
        .settings()
        .nodes
        .iter()
        .find(|n| n.name == node)
        .map(|n| n.peer_urls.clone())
        .ok_or_else(|| Fault::refused(format!("{node} is not a configured node")))?;
    let (m, _) = retrying(cx.left.min(MEMBERSHIP_RETRY), |d| {
        cx.ports.etcd.add_learner(urls.clone(), d)
    })
    .await?;
    tracing::info!(node, id = m.id, "added as a learner");
    crate::kill_point::reached("learner-added");
    Ok(())
}

/// Promote the learner `id` (of `node`) to a voter.
pub(super) async fn promote_learner<P: ?Sized, E: EtcdOps, S>(
    cx: &Ctx<'_, P, E, S>,
    id: u64,
    node: &str,
) -> Result<(), Fault> {
    retrying(cx.left.min(MEMBERSHIP_RETRY), |d| {
        cx.ports.etcd.promote(id, d)
    })
    .await?;
    tracing::info!(node, id, "promoted to voter");
    Ok(())
}

/// Remove the member `id` (of `node`) from the member list.
pub(super) async fn remove_member<P: ?Sized, E: EtcdOps, S: Supervisor>(
    cx: &Ctx<'_, P, E, S>,
    id: u64,
    node: &str,
) -> Result<(), Fault> {
    let me = cx.me();
    let own = node == me;
    retrying(cx.left.min(MEMBERSHIP_RETRY), |d| async move {
        if own {
            remove_own_member(cx, id, d).await
        } else {
            cx.ports.etcd.remove(id, d).await
        }
    })
    .await?;
    tracing::info!(node, id, "removed from the member list");
    // etcd answers a removal once it has applied it, so it is committed:
    // the data's last membership no longer lists this node. Written down
    // now, because this member exits as soon as it has applied its own
    // removal, before a live look could see the new membership; the
    // record's `removed` rests on it (the peer may not have persisted that
    // commit, see `decide`).
    if own {
        cx.paths.update_state(|st| st.voters.retain(|v| v != me))?;
    }
    Ok(())
}

/// Ask for the removal of this node's own member. A member stops once it
/// has applied its own removal (about a second later, or at once when the
/// peer tells it first), sometimes before its answer is out, and a call in
/// flight then waits for its whole deadline. Once etcd has stopped no
/// answer can come: whether the removal took effect is read from the
/// cluster on the next look (see `gather`). Biased, so that a stopped etcd
/// is not sent the request.
async fn remove_own_member<P: ?Sized, E: EtcdOps, S: Supervisor>(
    cx: &Ctx<'_, P, E, S>,
    id: u64,
    deadline: Duration,
) -> Result<Vec<crate::etcd::Member>, OpsError> {
    let etcd_gone = async {
        while etcd_runs(cx.ports).await {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::select! {
        biased;
        () = etcd_gone => Err(OpsError::Supervise(
            "etcd stopped before answering this node's own removal; the next look asks the cluster whether it took effect".into(),
        )),
        answer = cx.ports.etcd.remove(id, deadline) => answer,
    }
}

/// Hand the leadership to the member `id` (of `node`), the node that wins
/// fence races.
pub(super) async fn transfer_leadership<P: ?Sized, E: EtcdOps, S>(
    cx: &Ctx<'_, P, E, S>,
    id: u64,
    node: &str,
) -> Result<(), Fault> {
    let started = Instant::now();
    cx.ports
        .etcd
        .move_leader(id, cx.left.min(LEADER_TRANSFER))
        .await?;
    tracing::info!(
        node,
        id,
        took_ms = started.elapsed().as_millis() as u64,
        "leadership handed to the node that wins fence races"
    );
    Ok(())
}

/// Take the leave lock; a failure when another node holds it.
pub(super) async fn acquire_leave_lock<P: ?Sized, E: EtcdOps, S>(
    cx: &Ctx<'_, P, E, S>,
) -> Result<(), Fault> {
    let holder = cx
        .ports
        .etcd
        .acquire_leave_lock(cx.me(), cx.attr_deadline())
        .await
        .map_err(OpsError::Etcd)?;
    if holder == cx.me() {
        Ok(())
    } else {
        Err(Fault::LockHeld(holder))
    }
}

/// Give the leave lock back.
pub(super) async fn release_leave_lock<P: ?Sized, E: EtcdOps, S>(
    cx: &Ctx<'_, P, E, S>,
) -> Result<(), Fault> {
    cx.ports
        .etcd
        .release_leave_lock(cx.me(), cx.attr_deadline())
        .await
        .map_err(OpsError::Etcd)?;
    Ok(())
}
