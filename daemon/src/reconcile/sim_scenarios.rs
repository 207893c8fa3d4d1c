//! The two-node failover scenarios (docs/failover.md §9) through the real reconciler:
//! each test plays a scenario's fact sequence in the simulated cluster
//! ([`super::sim`]) and checks what the reconciler did (which start mode,
//! a force only after Pacemaker's fence, a learner join, archives instead
//! of deletes) and what it answered Pacemaker.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use warden_api::{Action, ActionReply, ActionRequest, Outcome};

use super::Reconciler;
use super::sim::{A, B, Res, Sim, SimMember, World, record};
use crate::pacemaker::CLAIM_ATTR;

const CLUSTER: u64 = 0x1c3e;

fn req(action: Action) -> ActionRequest {
    ActionRequest {
        action,
        depth: 0,
        deadline_ms: 5_000,
        params: Default::default(),
        notify: None,
        instance: None,
    }
}

async fn act(r: &Reconciler, sim: &Sim, action: Action, budget: Duration) -> ActionReply {
    r.action(&sim.ports(), &req(action), budget).await.unwrap()
}

async fn start(r: &Reconciler, sim: &Sim) -> ActionReply {
    act(r, sim, Action::Start, Duration::from_secs(3)).await
}

fn node(me: &str) -> (tempfile::TempDir, Sim, Reconciler) {
    let t = tempfile::tempdir().unwrap();
    let sim = Sim::new(me, t.path());
    let r = Reconciler::with_paths(sim.paths.clone());
    (t, sim, r)
}

fn has(log: &[String], s: &str) -> bool {
    log.iter().any(|l| l.starts_with(s))
}

fn pos(log: &[String], s: &str) -> usize {
    log.iter()
        .position(|l| l.starts_with(s))
        .unwrap_or_else(|| panic!("no {s:?} in {log:?}"))
}

#[tokio::test]
async fn fresh_pair_bootstraps_once_the_peer_says_it_has_no_data() {
    let (_t, sim, r) = node(A);
    sim.with(|w| w.nodes.values_mut().for_each(|n| n.etcd = Res::Starting));
    // The peer's daemon has not published its record: wait, start returns.
    let reply = start(&r, &sim).await;
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
    assert!(reply.reason.unwrap_or_default().contains("record"));
    assert!(!has(&sim.take_log(), "start"), "started without the record");
    // It says it has none: a bootstrap, with a fresh token on disk first.
    sim.publish(B, record("n2-boot", false, 0, None));
    let reply = start(&r, &sim).await;
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
    let log = sim.take_log();
    assert_eq!(
        log.iter().filter(|l| l.starts_with("start")).count(),
        1,
        "{log:?}"
    );
    assert!(has(&log, "start new"), "{log:?}");
    let st = sim.paths.read_state().unwrap();
    assert!(st.formed || st.bootstrap_token.is_some(), "{st:?}");
}

#[tokio::test]
async fn archived_data_anywhere_refuses_a_bootstrap_and_names_the_restore() {
    let (_t, sim, r) = node(A);
    let mut rec = record("n2-boot", false, 0, None);
    rec.archives = 1;
    sim.publish(B, rec);
    let reply = start(&r, &sim).await;
    assert_ne!(reply.outcome, Outcome::Success, "{reply:?}");
    assert!(
        reply
            .reason
            .unwrap_or_default()
            .contains("recover restore-archive --node n2"),
    );
    assert!(!has(&sim.take_log(), "start"));
}

#[tokio::test]
async fn an_existing_member_is_started_on_its_data_with_its_ids() {
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 0, false);
    sim.with(|w| w.members[0].up = false);
    let id = sim.member_of(A).unwrap().id;
    let reply = start(&r, &sim).await;
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
    let log = sim.take_log();
    assert!(has(&log, "start existing"), "{log:?}");
    assert!(!has(&log, "start new") && !has(&log, "add") && !has(&log, "remove"));
    assert_eq!(sim.paths.read_state().unwrap().member_id, Some(id));
    assert!(sim.paths.has_data());
}

#[tokio::test]
async fn peer_lost_fenced_survivor_forces_then_the_peer_rejoins_as_a_learner() {
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 0, true);
    assert!(!r.tick(&sim.ports()).await || sim.take_log().is_empty());
    // a. Lost, not fenced: degraded, no claim, no force.
    sim.lose(B);
    r.tick(&sim.ports()).await;
    let log = sim.take_log();
    assert!(
        !has(&log, "set n1 etcd-warden-claim") && !has(&log, "force"),
        "{log:?}"
    );
    let m = act(&r, &sim, Action::Monitor, Duration::from_secs(3)).await;
    assert_eq!(m.outcome, Outcome::Degraded, "{m:?}");
    assert!(m.reason.unwrap_or_default().contains("fence"));
    // A fence older than the peer's last join proves nothing.
    sim.fence(B, 1_000);
    r.tick(&sim.ports()).await;
    assert!(!has(&sim.take_log(), "force"));
    // b–d. Fenced now: claim, force (keeping the data), clear the claim.
    sim.fence_now(B);
    for _ in 0..3 {
        r.tick(&sim.ports()).await;
    }
    let log = sim.take_log();
    let claim = pos(&log, &format!("set {A} {CLAIM_ATTR}"));
    let force = pos(&log, "force (peer n2 down)");
    assert!(claim < force, "{log:?}");
    assert!(
        has(&log[force..], &format!("delete {A} {CLAIM_ATTR}")),
        "{log:?}"
    );
    assert!(sim.paths.has_data());
    assert_eq!(sim.paths.read_state().unwrap().epoch, 1);
    assert_eq!(sim.claim(A), None);
    let m = act(&r, &sim, Action::Monitor, Duration::from_secs(3)).await;
    assert_eq!(m.outcome, Outcome::Degraded, "{m:?}");

    // f. The fenced node is back without data: the leader adds a learner.
    let mut rec = record("n2-boot2", false, 0, None);
    rec.archives = 1;
    sim.publish(B, rec);
    sim.with(|w| {
        let n = w.nodes.get_mut(B).unwrap();
        n.online = true;
        n.expected_up = true;
        n.etcd = Res::Starting;
    });
    r.tick(&sim.ports()).await;
    let log = sim.take_log();
    assert!(has(&log, "add learner n2"), "{log:?}");
    // h. Promoted only once etcd reports it in sync.
    sim.with(|w| {
        w.members
            .iter_mut()
            .filter(|m| m.node == B)
            .for_each(|m| m.up = true)
    });
    r.tick(&sim.ports()).await;
    assert!(
        !has(&sim.take_log(), "promote"),
        "promoted a learner behind"
    );
    // i. A learner that caught up from a snapshot answers no Status until
    // etcd publishes it: silent and not replicated, it is not promoted;
    // silent and replicated up to the commit index in the leader's raft
    // progress, it is, without waiting for its Status.
    let silent = |replicated: bool| {
        move |w: &mut World| {
            w.members.iter_mut().filter(|m| m.node == B).for_each(|m| {
                m.up = false;
                m.replicated = replicated;
            })
        }
    };
    sim.with(silent(false));
    r.tick(&sim.ports()).await;
    assert!(
        !has(&sim.take_log(), "promote"),
        "promoted a silent learner the leader does not replicate to"
    );
    // While the leader's progress can be read, it alone judges a learner:
    // one whose Status says caught up but that the leader does not yet
    // replicate to is not promoted, and the learner is never asked (its
    // silence would hold every pass of a snapshot catch-up for the whole
    // member limit).
    sim.with(|w| {
        w.asked.clear();
        w.members
            .iter_mut()
            .filter(|m| m.node == B)
            .for_each(|m| (m.up, m.in_sync, m.replicated) = (true, true, false))
    });
    r.tick(&sim.ports()).await;
    assert!(
        !has(&sim.take_log(), "promote"),
        "promoted a learner the leader does not replicate to"
    );
    let asked = sim.with(|w| std::mem::take(&mut w.asked));
    assert!(
        !asked.iter().any(|n| n == B),
        "asked the learner for its Status: {asked:?}"
    );
    sim.with(silent(true));
    r.tick(&sim.ports()).await;
    assert!(has(&sim.take_log(), "promote"));
    assert!(sim.member_of(B).is_some_and(|m| !m.learner));
}

#[tokio::test]
async fn the_fenced_node_archives_its_stale_data_and_joins_as_a_learner() {
    let (_t, sim, r) = node(B);
    sim.healthy(CLUSTER, 0, false);
    // n1 forced epoch 1 while n2 was fenced: n1 alone in the member list.
    sim.with(|w| w.members.retain(|m| m.node == A));
    sim.publish(A, record("n1-boot", true, 1, Some(CLUSTER)));
    sim.with(|w| w.nodes.get_mut(B).unwrap().etcd = Res::Starting);
    let reply = act(&r, &sim, Action::Start, Duration::from_secs(2)).await;
    let log = sim.take_log();
    assert!(!has(&log, "start"), "started over stale data: {log:?}");
    assert_eq!(sim.paths.archives().len(), 1, "archived, not deleted");
    assert!(!sim.paths.has_data());
    let archived = sim.paths.archives()[0].join("member/snap/db");
    assert_eq!(std::fs::read(archived).unwrap(), b"db");
    // The start returns at once, saying what it waits for.
    assert!(reply.reason.unwrap_or_default().contains("learner"));
    // n1's leader adds the learner; n2 joins it with the cluster's epoch.
    sim.with(|w| {
        w.members.push(SimMember {
            id: 0x777,
            node: B.into(),
            learner: true,
            up: false,
            in_sync: false,
            replicated: false,
        })
    });
    let reply = start(&r, &sim).await;
    let log = sim.take_log();
    assert!(has(&log, "start join"), "{log:?}");
    assert!(!has(&log, "start new") && !has(&log, "force"));
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
    let st = sim.paths.read_state().unwrap();
    assert_eq!((st.epoch, st.member_id), (1, Some(0x777)), "{st:?}");
    // The voter that added the learner is written down with the join.
    let voter = sim.with(|w| w.members.iter().find(|m| m.node == A).map(|m| m.id));
    assert_eq!(
        st.added_by,
        [(A.to_string(), voter.unwrap())].into(),
        "{st:?}"
    );
}

#[tokio::test]
async fn partition_neither_side_claims_without_a_fence_and_a_newer_claim_wins() {
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 0, true);
    sim.lose(B);
    r.tick(&sim.ports()).await;
    assert!(!has(&sim.take_log(), &format!("set {A} {CLAIM_ATTR}")));
    // Pacemaker fenced the peer, but the peer's claim was written after that
    // fence (a new boot of it): the claim stands, so this node yields and
    // never forces beside it.
    sim.fence(B, 2_000_000_000 - 100);
    let claim = warden_failover::Claim {
        owner: B.into(),
        boot_id: "n2-boot".into(),
        epoch: 1,
        at: warden_failover::Stamp(2_000_000_000),
    };
    sim.with(|w| {
        w.attrs.insert(
            (B.into(), CLAIM_ATTR.into()),
            serde_json::to_string(&claim).unwrap(),
        )
    });
    r.tick(&sim.ports()).await;
    let log = sim.take_log();
    assert!(
        !has(&log, "force") && !has(&log, "set n1 etcd-warden-claim"),
        "{log:?}"
    );
}

#[tokio::test]
async fn a_crashed_local_etcd_is_restarted_in_place() {
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 0, true);
    sim.with(|w| w.members[0].up = false);
    let m = act(&r, &sim, Action::Monitor, Duration::from_secs(3)).await;
    assert_eq!(m.outcome, Outcome::Failed, "{m:?}");
    r.tick(&sim.ports()).await;
    let log = sim.take_log();
    assert_eq!(
        log.iter()
            .filter(|l| l.starts_with("start"))
            .collect::<Vec<_>>(),
        ["start existing"],
        "{log:?}"
    );
    assert!(!has(&log, "force") && !has(&log, "set n1 etcd-warden-claim"));
}

#[tokio::test]
async fn a_restarted_daemon_leaves_a_serving_etcd_alone() {
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 0, false);
    r.tick(&sim.ports()).await;
    let log = sim.take_log();
    assert!(
        !has(&log, "start") && !has(&log, "stop") && !has(&log, "add") && !has(&log, "remove"),
        "{log:?}"
    );
    // The marker lost with /run is set again.
    assert!(sim.paths.in_sync().is_some());
    let m = act(&r, &sim, Action::Monitor, Duration::from_secs(3)).await;
    assert_eq!(m.outcome, Outcome::Success, "{m:?}");
}

#[tokio::test]
async fn after_both_power_cycled_the_older_data_is_archived() {
    let (_t, sim, r) = node(B);
    sim.healthy(CLUSTER, 0, false);
    sim.with(|w| {
        w.members.iter_mut().for_each(|m| m.up = false);
        w.nodes.values_mut().for_each(|n| n.etcd = Res::Starting);
    });
    sim.publish(A, record("n1-boot", true, 1, Some(CLUSTER)));
    let _ = act(&r, &sim, Action::Start, Duration::from_secs(1)).await;
    let log = sim.take_log();
    assert!(!has(&log, "start"), "{log:?}");
    assert_eq!(sim.paths.archives().len(), 1);
    // Equal epochs of the same cluster: both start on their data.
    let (_t2, sim2, r2) = node(B);
    sim2.healthy(CLUSTER, 0, false);
    sim2.with(|w| w.members.iter_mut().for_each(|m| m.up = false));
    let reply = start(&r2, &sim2).await;
    assert!(has(&sim2.take_log(), "start existing"), "{reply:?}");
}

#[tokio::test]
async fn a_lone_node_after_a_total_outage_refuses_and_names_the_command() {
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 0, false);
    sim.with(|w| {
        w.quorate = false;
        w.members.iter_mut().for_each(|m| m.up = false);
        w.attrs.clear();
        let b = w.nodes.get_mut(B).unwrap();
        b.online = false;
        b.expected_up = false;
    });
    // Held, not failed: a start comes only from a quorate Pacemaker, so the
    // lone view is behind it; the reason and command are still said.
    let reply = start(&r, &sim).await;
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
    assert!(
        reply
            .reason
            .unwrap_or_default()
            .contains("recover force-new-cluster --node n1")
    );
    let log = sim.take_log();
    assert!(!has(&log, "start") && !has(&log, "force"), "{log:?}");
}

#[tokio::test]
async fn a_graceful_stop_leaves_the_cluster_under_the_leave_lock() {
    let (_t, sim, r) = node(B);
    sim.healthy(CLUSTER, 0, true);
    let id = sim.member_of(B).unwrap().id;
    let reply = act(&r, &sim, Action::Stop, Duration::from_secs(5)).await;
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
    let log = sim.take_log();
    let lock = pos(&log, "lock n2");
    let remove = pos(&log, &format!("remove {id:x}"));
    assert!(lock < remove, "{log:?}");
    // A removed member's etcd exits by itself; the stop is then done.
    assert!(sim.member_of(B).is_none());
    assert!(sim.paths.read_state().unwrap().departed);
    assert!(sim.paths.in_sync().is_none());
    assert!(sim.member_of(B).is_none());
    // The survivor, sole voter with quorum: degraded, never a claim.
    let (_t2, a, ra) = node(A);
    a.healthy(CLUSTER, 0, true);
    a.with(|w| {
        w.members.retain(|m| m.node == A);
        w.leave_lock = Some(B.into());
        w.attrs
            .remove(&(B.into(), crate::pacemaker::RECORD_ATTR.into()));
        let b = w.nodes.get_mut(B).unwrap();
        b.online = false;
        b.expected_up = false;
        b.shutdown = true;
        b.etcd = Res::Inactive;
    });
    ra.tick(&a.ports()).await;
    let log = a.take_log();
    assert!(
        !has(&log, "force") && !has(&log, "set n1 etcd-warden-claim"),
        "{log:?}"
    );
    let m = act(&ra, &a, Action::Monitor, Duration::from_secs(3)).await;
    assert_eq!(m.outcome, Outcome::Degraded, "{m:?}");
}

#[tokio::test]
async fn a_leave_whose_removal_answer_is_lost_learns_the_removal_from_the_cluster() {
    let (_t, sim, r) = node(B);
    sim.healthy(CLUSTER, 0, true);
    let id = sim.member_of(B).unwrap().id;
    // The removal takes effect, and the member stops before its answer
    // arrives: the stop cannot hear it, and must not retry for nothing.
    sim.with(|w| w.lose_remove_reply = true);
    let t0 = std::time::Instant::now();
    let reply = act(&r, &sim, Action::Stop, Duration::from_secs(8)).await;
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
    // Well before the call's own deadline (3 s).
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let log = sim.take_log();
    assert_eq!(
        log.iter()
            .filter(|l| **l == format!("remove {id:x}"))
            .count(),
        1,
        "{log:?}"
    );
    // The cluster (A, quorate alone) no longer lists B's member: the data's
    // last membership is A alone, and B's record says it left for good.
    let st = sim.paths.read_state().unwrap();
    assert!(st.departed);
    assert_eq!(st.voters, vec![A.to_string()]);
    let published = sim
        .with(|w| {
            w.attrs
                .get(&(B.into(), crate::pacemaker::RECORD_ATTR.into()))
                .cloned()
        })
        .unwrap();
    let rec: warden_failover::DataRecord = serde_json::from_str(&published).unwrap();
    assert!(rec.departed && rec.removed, "{rec:?}");
}

#[tokio::test]
async fn both_stopped_at_once_neither_leaves() {
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 0, false);
    sim.with(|w| w.nodes.get_mut(B).unwrap().etcd = Res::Stopping);
    let reply = act(&r, &sim, Action::Stop, Duration::from_secs(5)).await;
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
    let log = sim.take_log();
    assert!(has(&log, "stop"), "{log:?}");
    assert!(!has(&log, "lock") && !has(&log, "remove"), "{log:?}");
    assert!(sim.member_of(A).is_some());
}

#[tokio::test]
async fn a_slow_crm_mon_holds_the_pass_not_the_answer_of_a_monitor() {
    // A monitor whose Pacemaker view cannot be read in time is answered by
    // the live check (see `agent::action`).
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 0, true);
    sim.with(|w| w.crm_mon_delay = Duration::from_secs(30));
    let budget = Duration::from_millis(700);
    let started = std::time::Instant::now();
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        super::agent::action(Some(&r), &sim.ports(), &req(Action::Monitor), budget),
    )
    .await
    .expect("answered");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(reply.outcome, Outcome::Success, "{reply:?}");
}

#[tokio::test]
async fn a_joined_voter_takes_the_epoch_its_peer_published_after_a_force() {
    // A joined B's cluster with the epoch B had published before its force
    // (B's new record came a pass later); promoted and quorate with B, its
    // data is B's lineage: the next look raises its epoch to B's, so that
    // losing B later does not make A's copy look stale.
    let (_t, sim, r) = node(A);
    sim.healthy(CLUSTER, 14, true);
    sim.publish(B, record("n2-boot", true, 15, Some(CLUSTER)));
    r.tick(&sim.ports()).await;
    assert_eq!(sim.paths.read_state().unwrap().epoch, 15);
    // Another cluster's record with a higher epoch changes nothing.
    let (_t2, sim2, r2) = node(A);
    sim2.healthy(CLUSTER, 14, true);
    sim2.publish(B, record("n2-boot", true, 16, Some(CLUSTER + 1)));
    r2.tick(&sim2.ports()).await;
    assert_eq!(sim2.paths.read_state().unwrap().epoch, 14);
}
