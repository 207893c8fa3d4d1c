//! The facts the defragmentation policy decides on, each asked now: the
//! local member's Status and a linearizable read, the member list and every
//! member's own Status, the failover logic's state, Pacemaker's view and the
//! defragmentation lock.

use std::collections::BTreeMap;
use std::time::Duration;

use crm_xml::model::{CrmMon, FenceStatus};
use warden_failover::ResourceState;

use super::policy::{DbSize, Facts, MemberFact, MemberView, PacemakerFacts};
use crate::config::Settings;
use crate::etcd::{Connector, LiveEtcd, status_of_members};
use crate::pacemaker::SharedPacemaker;
use crate::reconcile::Reconciler;

/// What the gathering reads from.
pub(crate) struct Sources<'a> {
    /// The settings.
    pub(crate) settings: &'a Settings,
    /// The local member.
    pub(crate) etcd: &'a LiveEtcd,
    /// For the other members.
    pub(crate) connector: &'a Connector,
    /// Pacemaker's tools.
    pub(crate) pacemaker: &'a SharedPacemaker,
    /// The failover driver, when it runs.
    pub(crate) failover: Option<&'a Reconciler>,
}

/// Gather the facts, each call under `deadline`.
pub(crate) async fn gather(src: &Sources<'_>, deadline: Duration) -> Facts {
    let local = src
        .etcd
        .status(deadline)
        .await
        .map(|s| s.member_id)
        .map_err(|e| e.to_string());
    let quorum = src.etcd.linearizable_read(deadline).await.is_ok();
    let members = match src.etcd.member_list(deadline).await {
        Ok(ms) => Ok(status_of_members(src.connector, &ms, deadline)
            .await
            .into_iter()
            .map(|(m, st)| MemberFact {
                id: m.id,
                name: m.name,
                is_learner: m.is_learner,
                status: st
                    .map(|s| MemberView {
                        leader: s.leader,
                        db: DbSize {
                            size: s.db_size,
                            in_use: s.db_size_in_use,
                        },
                        alarms: s.alarms(),
                    })
                    .map_err(|e| e.to_string()),
            })
            .collect()),
        Err(e) => Err(e.to_string()),
    };
    let pacemaker = if crate::reconcile::enabled(src.settings) {
        match src.pacemaker.crm_mon(deadline.max(CRM_MON_DEADLINE)).await {
            Ok(doc) => pacemaker_facts(&doc, src.settings),
            Err(e) => PacemakerFacts::Unreadable(e.to_string()),
        }
    } else {
        PacemakerFacts::NotUsed
    };
    let lock_holder = src.etcd.defrag_lock(deadline).await.unwrap_or_else(|e| {
        // An unreadable lock is a held one: never two at once.
        Some(format!("the lock could not be read: {e}"))
    });
    Facts {
        local,
        members,
        quorum,
        failover: src.failover.map(|f| f.warden_state().0),
        pacemaker,
        lock_holder,
    }
}

/// crm_mon needs tens of milliseconds on a quiet node and seconds on a busy
/// one; a probe's deadline is too short for it.
const CRM_MON_DEADLINE: Duration = Duration::from_secs(5);

/// Pacemaker's view of the configured nodes: each must be online, clean,
/// not in standby, maintenance or shutdown, not being fenced, with etcd
/// started.
pub(crate) fn pacemaker_facts(doc: &CrmMon, s: &Settings) -> PacemakerFacts {
    let names: Vec<String> = s.nodes.iter().map(|n| n.name.clone()).collect();
    let view = crate::pacemaker::view(doc, &names, &BTreeMap::new());
    let fencing: Vec<&str> = doc
        .fence_history
        .iter()
        .flat_map(|h| &h.events)
        .filter(|e| e.status == FenceStatus::Pending)
        .map(|e| e.target.as_str())
        .collect();
    let trouble = view
        .nodes
        .iter()
        .filter_map(|n| {
            let why = if n.unclean {
                "unclean (fencing pending)"
            } else if fencing.contains(&n.name.as_str()) {
                "being fenced"
            } else if !n.online {
                "offline"
            } else if n.standby {
                "in standby"
            } else if n.maintenance {
                "in maintenance"
            } else if n.shutdown {
                "shutting down"
            } else if n.etcd != ResourceState::Started {
                "without a started etcd"
            } else {
                return None;
            };
            Some((n.name.clone(), why.to_string()))
        })
        .collect();
    PacemakerFacts::Seen {
        maintenance_mode: view.maintenance_mode || view.etcd_unmanaged,
        trouble,
    }
}
