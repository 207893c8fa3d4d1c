//! Starting and stopping the local etcd. A start never goes over existing
//! data (the nothing-deleted rule): a bootstrap, a join and a reseed need
//! an empty data directory, a restart needs data, and a bootstrap also
//! needs a state file that names no cluster.

use std::time::Duration;

use warden_failover::{ClusterView, MemberInfo, StartMode as Mode, decide::bootstrap_token};

use super::{Ctx, Fault, etcd_runs};
use crate::config::Settings;
use crate::etcd::conf::StartMode;
use crate::reconcile::local::LocalPaths;
use crate::reconcile::ports::Supervisor;
use crate::reconcile::revision_step;

/// How long a restart from existing data waits for etcd to answer before
/// the step is left to the next round (see [`start_etcd`]).
pub(super) const RESTART_ANSWER: Duration = Duration::from_secs(5);

/// Start etcd in `mode`, after the checks and the state-file notes that
/// mode needs.
pub(super) async fn start_etcd<P: ?Sized, E, S: Supervisor>(
    cx: &Ctx<'_, P, E, S>,
    mode: &Mode,
) -> Result<(), Fault> {
    let m = start_mode(cx, mode)?;
    // A member restarted while the majority is down answers nothing until
    // the majority is back (in HA mode it may wait for the very start
    // Pacemaker holds back while this one is in flight; in a two-node pair
    // after a total outage, for a peer whose data is gone and that will
    // never start a member). A joining learner answers only once the leader
    // has sent it the data: never, if the leader's node lost power
    // meanwhile, and only after the whole snapshot of a large database.
    // Either way, wait only briefly; the next round decides on "running,
    // not answering", and a start does not hold Pacemaker's transition (and
    // so the peer's own start) up.
    let short = matches!(mode, Mode::Existing | Mode::Join { .. } | Mode::Reseed);
    let wait = if short {
        cx.left.min(RESTART_ANSWER)
    } else {
        cx.left
    };
    let owed = match m {
        StartMode::Normal => cx.paths.read_state()?.revision_bump_owed,
        _ => None,
    };
    if let Some(at_risk) = owed {
        return start_moving_revision(cx, at_risk).await;
    }
    let Err(e) = cx.ports.supervisor.start(m, wait).await else {
        return Ok(());
    };
    if short && etcd_runs(cx.ports).await {
        Err(Fault::NotAnsweringYet(wait))
    } else {
        Err(e.into())
    }
}

/// Restart this data after a forced restart that did not finish moving the
/// revision on past the `at_risk` revisions it dropped.
async fn start_moving_revision<P: ?Sized, E, S: Supervisor>(
    cx: &Ctx<'_, P, E, S>,
    at_risk: u64,
) -> Result<(), Fault> {
    tracing::warn!(
        at_risk,
        "a forced restart of this data did not finish moving the revision on; starting with clients held off"
    );
    cx.ports
        .supervisor
        .start_moving_revision(at_risk, cx.left)
        .await?;
    revision_step::clear(cx.paths)?;
    Ok(())
}

/// How etcd starts for `mode`, once the data directory and the state file
/// allow it.
fn start_mode<P: ?Sized, E, S>(cx: &Ctx<'_, P, E, S>, mode: &Mode) -> Result<StartMode, Fault> {
    let has = cx.paths.has_data();
    match mode {
        Mode::New if has => Err(over_data(cx.paths, "bootstrap")),
        Mode::New => bootstrap(cx),
        Mode::Join { .. } if has => Err(over_data(cx.paths, "join")),
        Mode::Reseed if has => Err(over_data(cx.paths, "reseed")),
        Mode::Reseed => reseed(cx),
        Mode::Existing if !has => Err(Fault::refused("no data to restart from")),
        Mode::Existing => Ok(StartMode::Normal),
        Mode::Join { epoch } => join(cx, *epoch),
    }
}

/// The refusal of a `what` over the member directory's data.
fn over_data(paths: &LocalPaths, what: &str) -> Fault {
    Fault::refused(format!(
        "{} already holds a member: a {what} would start over its data",
        paths.member_dir().display()
    ))
}

/// A bootstrap of a new cluster, with a fresh token noted first.
fn bootstrap<P: ?Sized, E, S>(cx: &Ctx<'_, P, E, S>) -> Result<StartMode, Fault> {
    let paths = cx.paths;
    // Read again here, not from the facts: a bootstrap over a history
    // replaces data that existed with an empty cluster.
    let st = paths.read_state()?;
    if st.had_cluster() {
        return Err(Fault::refused(format!(
            "the state file {} says this node's data was part of cluster {} (epoch {}): a bootstrap would replace it with an empty cluster",
            paths.state_file.display(),
            st.cluster_id.map_or("?".into(), |c| format!("{c:x}")),
            st.epoch
        )));
    }
    let token = bootstrap_token(cx.facts);
    paths.update_state(|st| st.bootstrap_token = Some(token.clone()))?;
    tracing::warn!(%token, "bootstrapping a new etcd cluster with a fresh cluster token");
    Ok(StartMode::Bootstrap { token })
}

/// A restart of this node's own member on an empty data directory, the
/// member and cluster the state file names.
fn reseed<P: ?Sized, E, S>(cx: &Ctx<'_, P, E, S>) -> Result<StartMode, Fault> {
    let st = cx.paths.read_state()?;
    let (Some(member), Some(cluster)) = (st.member_id, st.cluster_id) else {
        return Err(Fault::refused(
            "the state file names no member and cluster to restart",
        ));
    };
    // Until a quorate look lists this member as a voter, its data may be
    // anything from empty to whole (the snapshot may still be on its way):
    // empty voters make the record say it holds only a learner's data, so a
    // peer whose own data goes missing meanwhile never takes this one for
    // the holder of the writes.
    cx.paths.update_state(|st| {
        st.voters = Vec::new();
        st.added_by.clear();
        st.joining = false;
        st.reseeding = true;
        st.pending_epoch = None;
    })?;
    // The peer's member serves no client request without quorum, only its
    // member list on the peer URL, which etcd itself reads at this start:
    // it takes the id of the member listed at this node's peer URL and
    // refuses to start when the list does not match the configured nodes.
    tracing::warn!(
        member = format!("{member:x}"),
        cluster = format!("{cluster:x}"),
        "restarting this node's member on an empty data directory; the peer's member sends it the data"
    );
    Ok(StartMode::JoinExisting {
        initial_cluster: crate::etcd::conf::every_node(cx.settings()),
    })
}

/// A join of the quorate cluster that answered, at its `epoch`.
fn join<P: ?Sized, E, S>(cx: &Ctx<'_, P, E, S>, epoch: u64) -> Result<StartMode, Fault> {
    let cluster = cx
        .facts
        .cluster
        .as_ref()
        .ok_or_else(|| Fault::refused("no quorate cluster answered to join"))?;
    record_join(cx.paths, cx.settings(), cluster, epoch)?;
    crate::kill_point::reached("join-recorded");
    Ok(StartMode::JoinExisting {
        initial_cluster: initial_cluster(cx.settings(), &cluster.members),
    })
}

/// Note in the state file the member a join's data belongs to.
///
/// The data this start creates belongs to the member the cluster lists for
/// this node, in this cluster: the learner added for it, or the voter of a
/// bootstrap it was late for, which never ran. Recorded before etcd runs:
/// otherwise a stop before the first live look left the old member's ids
/// here, the next start archived the new data as stale and joined again,
/// empty, as a member the leader knows has entries (etcd panics:
/// "tocommit(…) is out of range").
fn record_join(
    paths: &LocalPaths,
    s: &Settings,
    cluster: &ClusterView,
    epoch: u64,
) -> Result<(), Fault> {
    let joined = cluster
        .members
        .iter()
        .find(|m| m.node == s.node_name && (m.is_learner || !m.started))
        .map(|m| m.id);
    paths.update_state(|st| {
        st.epoch = epoch;
        st.pending_epoch = None;
        st.epoch_unknown = false;
        st.bootstrap_token = None;
        st.joining = true;
        st.departed = false;
        st.formed = false;
        st.cluster_id = Some(cluster.cluster_id);
        st.member_id = joined;
        // The joined data has been a voter in no membership yet: until the
        // first look as a quorate voter lists this node, the record says it
        // holds only a learner's data, which a peer whose own newer data is
        // gone must not wait on (a directory lost without an archive keeps
        // the old voters here otherwise).
        st.voters = Vec::new();
        // Everything the learner receives comes from these voters until it
        // is promoted.
        st.added_by = cluster
            .members
            .iter()
            .filter(|m| !m.is_learner)
            .filter(|m| m.node != s.node_name)
            .map(|m| (m.node.clone(), m.id))
            .collect();
    })?;
    Ok(())
}

/// `initial-cluster` for joining: every named member as the cluster lists
/// it, and this node (the learner just added, not yet named).
pub(super) fn initial_cluster(s: &Settings, members: &[MemberInfo]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for m in members {
        if m.name.is_empty() || m.name == s.node_name {
            continue;
        }
        if let Some(n) = s
            .nodes
            .iter()
            .find(|n| n.name == m.node || n.name == m.name)
        {
            for u in &n.peer_urls {
                parts.push(format!("{}={u}", m.name));
            }
        }
    }
    for u in &s.local_node().peer_urls {
        parts.push(format!("{}={u}", s.node_name));
    }
    parts.join(",")
}

/// Stop etcd, within its grace and most of the time left.
pub(super) async fn stop_etcd<P: ?Sized, E, S: Supervisor>(
    cx: &Ctx<'_, P, E, S>,
) -> Result<(), Fault> {
    let grace = cx.settings().timeouts.stop_grace.min(cx.left.mul_f32(0.7));
    cx.ports.supervisor.stop(grace).await?;
    Ok(())
}
