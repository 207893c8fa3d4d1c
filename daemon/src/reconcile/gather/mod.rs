//! Gathering the facts for `decide`, each read live under a deadline.
//! Nothing here is a cached decision: the only things kept between calls
//! are observations Pacemaker pushed (fence alerts). No join time is kept:
//! whether a fence proves a peer down is read from Pacemaker's own record
//! of the peer each time (see `warden_failover::peer_down_proof`).
//!
//! One gatherer per source, composed by [`gather`]: Pacemaker's view and
//! every node's attributes (`pacemaker`), the local etcd (`local_etcd`,
//! with its members from `members`), the cluster as the peers answer it
//! (`peers`), and this node's state file, kept up with what was seen
//! (`state`).

use std::collections::BTreeMap;
use std::time::Duration;

use warden_failover::{
    Claim, DataRecord, Facts, FenceEvent, LocalMarkers, Notification, Topology, Trigger,
};

use super::local::{LocalError, LocalPaths};
use super::ports::{EtcdOps, Ports, Supervisor};
use crate::etcd::EtcdError;
use crate::pacemaker::{Pacemaker, PcmkError};

mod local_etcd;
mod members;
mod pacemaker;
mod peers;
mod state;

pub(crate) use peers::peer_tls_failure;

/// Facts could not be gathered: no decision is made this round.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GatherError {
    /// Pacemaker could not be asked.
    #[error("Pacemaker's view is unavailable: {0}")]
    Pacemaker(#[from] PcmkError),
    /// The local files could not be read.
    #[error(transparent)]
    Local(#[from] LocalError),
    /// etcd runs but does not answer Status.
    #[error("etcd runs but does not answer: {0}")]
    Etcd(#[from] EtcdError),
    /// etcd's process exists but is stopped by a signal, or has not answered
    /// for the daemon's bound (`hung_ms`): it is not asked.
    #[error("etcd (pid {pid}) runs but cannot answer")]
    Silent {
        /// etcd's PID.
        pid: u32,
        /// How long it has not answered, once that reached the bound.
        hung_ms: Option<u64>,
    },
}

/// Every node's published data record and claim, by node name.
type Records = BTreeMap<String, (Option<DataRecord>, Option<Claim>)>;

/// Everything `decide` looks at, gathered now.
pub(crate) async fn gather<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
    ports: &Ports<'_, P, E, S>,
    paths: &LocalPaths,
    trigger: Trigger,
    notify: Option<Notification>,
    alerts: Vec<FenceEvent>,
    deadline: Duration,
) -> Result<Facts, GatherError> {
    let s = ports.settings;
    state::derive_lost_state(paths)?;
    let names: Vec<String> = s.nodes.iter().map(|n| n.name.clone()).collect();
    let (doc, records, etcd, winner) = tokio::join!(
        ports.pacemaker.crm_mon(deadline),
        pacemaker::records(ports.pacemaker, &names, deadline),
        local_etcd::local_etcd(ports, deadline),
        pacemaker::fence_race_winner(ports, &names, &trigger, deadline),
    );
    let doc = doc?;
    let records = records?;
    // Whether the local member itself answered (not the stand-in).
    let (etcd, answered) = match etcd {
        Err(e @ (GatherError::Etcd(_) | GatherError::Silent { .. })) => {
            (local_etcd::stand_in(s, paths, e)?, false)
        }
        r => (r?, true),
    };
    let mut pacemaker = crate::pacemaker::view(&doc, &names, &records);
    pacemaker.fence_race_winner = winner;
    let cluster = peers::cluster_unless_quorate(ports, &etcd, &pacemaker, &records, deadline).await;
    let state = state::note_what_was_seen(paths, s, &etcd, answered, cluster.as_ref(), &records)?;
    Ok(Facts {
        node: s.node_name.clone(),
        boot_id: paths.boot_id()?,
        topology: match s.topology {
            crate::config::Topology::TwoNode => Topology::TwoNode,
            crate::config::Topology::Ha => Topology::Ha,
        },
        trigger,
        notify,
        pacemaker,
        etcd,
        cluster,
        data: state::local_data(paths, &state),
        local: LocalMarkers {
            in_sync_boot: paths.in_sync(),
        },
        alerts,
    })
}
