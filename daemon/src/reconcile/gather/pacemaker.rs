//! What Pacemaker holds besides crm_mon's view: every node's record and
//! claim attributes, and which node wins fence races.

use std::collections::BTreeMap;
use std::time::Duration;

use warden_failover::{Claim, DataRecord, Trigger};

use super::Records;
use crate::pacemaker::{CLAIM_ATTR, Pacemaker, PcmkError, RECORD_ATTR};
use crate::reconcile::ports::Ports;

/// Every node's two attributes at once: each read is a crm_attribute
/// process, and run one after another they cost more than crm_mon itself
/// on the survivor's path from a fence to its forced restart.
pub(super) async fn records<P: Pacemaker + ?Sized>(
    pcmk: &P,
    names: &[String],
    deadline: Duration,
) -> Result<Records, PcmkError> {
    let reads = futures_util::future::join_all(names.iter().map(|n| async move {
        let (r, c) = tokio::join!(
            pcmk.get_attr(n, RECORD_ATTR, deadline),
            pcmk.get_attr(n, CLAIM_ATTR, deadline)
        );
        (n, r, c)
    }))
    .await;
    let mut out = BTreeMap::new();
    // An attribute that does not parse is treated as absent and logged: it
    // can only have been written by something else.
    for (n, r, c) in reads {
        out.insert(n.clone(), (parse_record(n, r?), parse_claim(n, c?)));
    }
    Ok(out)
}

/// `node`'s record attribute, if it holds one that parses.
fn parse_record(node: &str, value: Option<String>) -> Option<DataRecord> {
    value.and_then(|v| {
        serde_json::from_str::<DataRecord>(&v)
            .map_err(|e| tracing::warn!(node = %node, error = %e, "unreadable record attribute"))
            .ok()
    })
}

/// `node`'s claim attribute, if it holds one that parses.
fn parse_claim(node: &str, value: Option<String>) -> Option<Claim> {
    value.and_then(|v| {
        serde_json::from_str::<Claim>(&v)
            .map_err(|e| tracing::warn!(node = %node, error = %e, "unreadable claim attribute"))
            .ok()
    })
}

/// The node that wins fence races, from the fence delays. Not a proof of
/// anything, only where the leader belongs: a failed read means "no
/// preference" and never fails the gathering. Only the loop's own passes
/// decide a transfer, so only they read it, and only in a two-node pair.
pub(super) async fn fence_race_winner<P: Pacemaker + ?Sized, E, S>(
    ports: &Ports<'_, P, E, S>,
    names: &[String],
    trigger: &Trigger,
    deadline: Duration,
) -> Option<String> {
    let wants_winner = ports.settings.topology == crate::config::Topology::TwoNode
        && matches!(trigger, Trigger::Reconcile);
    if !wants_winner {
        return None;
    }
    ports
        .pacemaker
        .fence_race_winner(names, deadline)
        .await
        .map_err(|e| tracing::debug!(error = %e, "fence delays not read"))
        .ok()
        .flatten()
}
