//! The steps on this node's Pacemaker attributes: its data record, its
//! claim, and its failed start of etcd. Each touches only this node's own
//! attributes.

use warden_failover::{Claim, decide::expected_record};

use super::{Ctx, Fault};
use crate::clock::now_unix;
use crate::pacemaker::{CLAIM_ATTR, Pacemaker, RECORD_ATTR};

/// Publish the record of this node's data that the facts call for.
pub(super) async fn publish_record<P: Pacemaker + ?Sized, E, S>(
    cx: &Ctx<'_, P, E, S>,
) -> Result<(), Fault> {
    let rec = expected_record(cx.facts);
    let v = serde_json::to_string(&rec).unwrap_or_default();
    cx.ports
        .pacemaker
        .set_attr(cx.me(), RECORD_ATTR, &v, cx.attr_deadline())
        .await?;
    Ok(())
}

/// Claim the right to force a new cluster at `epoch`.
pub(super) async fn set_claim<P: Pacemaker + ?Sized, E, S>(
    cx: &Ctx<'_, P, E, S>,
    epoch: u64,
) -> Result<(), Fault> {
    let claim = Claim {
        owner: cx.me().to_string(),
        boot_id: cx.facts.boot_id.clone(),
        epoch,
        at: warden_failover::Stamp(now_unix()),
    };
    tracing::warn!(epoch, "claiming the right to force a new cluster");
    let v = serde_json::to_string(&claim).unwrap_or_default();
    cx.ports
        .pacemaker
        .set_attr(cx.me(), CLAIM_ATTR, &v, cx.attr_deadline())
        .await?;
    Ok(())
}

/// Only ever this node's own failure record. Bookkeeping: a cleanup that
/// fails must not hold up the steps after it (the next pass sees the record
/// still there and tries again).
pub(super) async fn clear_failed_start<P: Pacemaker + ?Sized, E, S>(
    cx: &Ctx<'_, P, E, S>,
    resource: &str,
) -> Result<(), Fault> {
    match cx
        .ports
        .pacemaker
        .clear_failed_start(resource, cx.me(), cx.attr_deadline())
        .await
    {
        Ok(()) => tracing::info!(
            resource = %resource,
            "cleared a start of etcd that failed while no daemon answered: Pacemaker may start it again"
        ),
        Err(e) => tracing::warn!(
            resource = %resource,
            error = %e,
            "cannot clear a start of etcd that failed while no daemon answered"
        ),
    }
    Ok(())
}

/// Only ever this node's own claim: the attribute of `me`.
pub(super) async fn clear_claim<P: Pacemaker + ?Sized, E, S>(
    cx: &Ctx<'_, P, E, S>,
) -> Result<(), Fault> {
    cx.ports
        .pacemaker
        .delete_attr(cx.me(), CLAIM_ATTR, cx.attr_deadline())
        .await?;
    Ok(())
}
