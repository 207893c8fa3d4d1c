//! The cluster as another node's etcd answers it, and a note for a
//! refusal when a peer fails this node's TLS check.

use std::time::Duration;

use warden_failover::{ClusterView, EtcdView, Facts, PacemakerView};

use super::Records;
use super::members::members_info;
use crate::etcd::EtcdError;
use crate::reconcile::ports::{EtcdOps, EtcdReads, Ports};

/// The cluster as a peer answers it, asked only when the local member is
/// not quorate, and only of the nodes Pacemaker shows online.
pub(super) async fn cluster_unless_quorate<P: ?Sized, E: EtcdOps, S>(
    ports: &Ports<'_, P, E, S>,
    etcd: &EtcdView,
    pacemaker: &PacemakerView,
    records: &Records,
    deadline: Duration,
) -> Option<ClusterView> {
    if matches!(etcd, EtcdView::Running(l) if l.quorate()) {
        return None;
    }
    let online: Vec<String> = pacemaker
        .nodes
        .iter()
        .filter(|n| n.online)
        .map(|n| n.name.clone())
        .collect();
    cluster_via_peers(ports, records, &online, deadline).await
}

/// The cluster as another node's etcd answers it with quorum.
async fn cluster_via_peers<P: ?Sized, E: EtcdOps, S>(
    ports: &Ports<'_, P, E, S>,
    records: &Records,
    online: &[String],
    deadline: Duration,
) -> Option<ClusterView> {
    // Only peers Pacemaker shows online: asking a lost one costs a whole
    // connect deadline and cannot answer with quorum anyway.
    for n in ports
        .settings
        .nodes
        .iter()
        .filter(|n| n.name != ports.settings.node_name && online.contains(&n.name))
    {
        let Some(url) = n.client_urls.first() else {
            continue;
        };
        let peer = ports.etcd.peer(url);
        let Ok(st) = peer.status(deadline).await else {
            continue;
        };
        if !st.has_leader() || peer.linearizable_read(deadline).await.is_err() {
            continue;
        }
        let Ok(members) = peer.member_list(deadline).await else {
            continue;
        };
        let leader_index = st.raft_index;
        let infos = members_info(ports, &members, leader_index, false, deadline).await;
        let epoch = records
            .get(&n.name)
            .and_then(|(r, _)| r.as_ref())
            .map(|r| r.epoch)
            .unwrap_or_default();
        return Some(ClusterView {
            cluster_id: st.cluster_id,
            epoch,
            members: infos,
            leave_lock: peer.leave_lock(deadline).await.ok().flatten(),
        });
    }
    None
}

/// A note for a refusal when another node's etcd fails this node's TLS
/// check (an untrusted or expired certificate, a handshake refused): a
/// peer that cannot be verified answers nothing here, exactly as one that
/// is down or has no quorum, and the refusal's command may then be wrong.
/// Asked only when a decision refuses, never on the failover's path, and
/// only of the nodes Pacemaker shows online.
pub(crate) async fn peer_tls_failure<P: ?Sized, E: EtcdOps, S>(
    ports: &Ports<'_, P, E, S>,
    facts: &Facts,
    deadline: Duration,
) -> Option<String> {
    let online = |name: &str| {
        facts
            .pacemaker
            .nodes
            .iter()
            .any(|v| v.name == name && v.online && !v.unclean)
    };
    let me = ports.settings.node_name.as_str();
    for n in ports
        .settings
        .nodes
        .iter()
        .filter(|n| n.name != me && online(&n.name))
    {
        let Some(url) = n.client_urls.first() else {
            continue;
        };
        if let Err(e) = ports.etcd.peer(url).status(deadline).await
            && looks_like_tls(&e)
        {
            return Some(format!(
                "{}'s etcd at {url} fails this node's TLS check ({e}): fix the CA and certificates first (openssl s_client), then restart this node's daemon; the command above is for a peer that is really down or without its data",
                n.name
            ));
        }
    }
    None
}

/// Whether `e` says a TLS check failed rather than that nothing answered.
fn looks_like_tls(e: &EtcdError) -> bool {
    let m = e.to_string().to_ascii_lowercase();
    [
        "certificate",
        "tls",
        "handshake",
        "unknownissuer",
        "badsignature",
    ]
    .iter()
    .any(|w| m.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_failure_is_told_from_no_answer() {
        let tls = EtcdError::Unavailable(
            "transport error: error trying to connect: invalid peer certificate: UnknownIssuer"
                .into(),
        );
        assert!(looks_like_tls(&tls));
        let refused = EtcdError::Unavailable(
            "transport error: error trying to connect: tcp connect error: Connection refused (os error 111)".into(),
        );
        assert!(!looks_like_tls(&refused));
        assert!(!looks_like_tls(&EtcdError::Timeout(Duration::from_secs(1))));
    }
}
