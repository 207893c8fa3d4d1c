//! The two-node failover scenarios (docs/failover.md §9) as sequences of facts, each step checked
//! against what `decide` must (and must not) do.

use warden_api::Outcome;
use warden_failover::{
    Claim, ClusterView, DataRecord, EtcdView, Facts, FenceAction, FenceEvent, FenceStatus,
    LiveEtcd, LocalData, LocalMarkers, MemberInfo, NodeView, Notification, NotifyPhase,
    PacemakerView, RaftPosition, ResourceState, Stamp, StartMode, Step, Topology, Trigger, decide,
};

const A: &str = "n1";
const B: &str = "n2";
// Real etcd member ids are above 2^53, beyond what a float holds exactly.
const ID_A: u64 = 0x8e9e_05c5_2164_694d;
const ID_B: u64 = 0xa1b2_c3d4_e5f6_0718;
const ID_B2: u64 = 0xfedc_ba98_7654_3210;
const CLUSTER: u64 = 0x1c3e_5a7b_9d0f_2468;

fn boot(node: &str) -> String {
    format!("{node}-boot1")
}

fn record(node: &str, has_data: bool, epoch: u64) -> DataRecord {
    DataRecord {
        boot_id: boot(node),
        has_data,
        formed: has_data,
        epoch,
        cluster_id: has_data.then_some(CLUSTER),
        departed: false,
        archives: 0,
        bootstrap_token: None,
        lost_member: None,
        learner: false,
        removed: false,
        joined_without_data: false,
        pending_epoch: None,
        voter_ids: Default::default(),
        state_lost: false,
        added_by: Default::default(),
    }
}

fn node(name: &str, epoch: u64) -> NodeView {
    NodeView {
        name: name.into(),
        online: true,
        unclean: false,
        expected_up: true,
        shutdown: false,
        standby: false,
        maintenance: false,
        last_seen: None,
        etcd: ResourceState::Started,
        record: Some(record(name, true, epoch)),
        claim: None,
        start_failed_without_daemon: None,
    }
}

fn member(id: u64, node: &str, is_learner: bool, in_sync: bool) -> MemberInfo {
    MemberInfo {
        id,
        name: if in_sync { node.into() } else { String::new() },
        started: true,
        node: node.into(),
        is_learner,
        in_sync,
    }
}

fn live(member_id: u64, members: Vec<MemberInfo>, quorate: bool, is_leader: bool) -> LiveEtcd {
    LiveEtcd {
        member_id,
        cluster_id: CLUSTER,
        is_learner: members.iter().any(|m| m.id == member_id && m.is_learner),
        has_leader: quorate,
        is_leader,
        linearizable_ok: quorate,
        members,
        leave_lock: None,
        position: RaftPosition {
            term: 7,
            index: 1200,
        },
        hung_ms: None,
    }
}

fn data(member_id: u64, epoch: u64, voters: &[&str]) -> LocalData {
    LocalData {
        exists: true,
        formed: true,
        epoch,
        cluster_id: Some(CLUSTER),
        member_id: Some(member_id),
        voters: voters.iter().map(|v| v.to_string()).collect(),
        position: Some(RaftPosition {
            term: 7,
            index: 1200,
        }),
        departed: false,
        archives: 0,
        member_dir: "/var/lib/etcd/member".into(),
        bootstrap_token: None,
        joining: false,
        pending_epoch: None,
        voter_ids: Default::default(),
        state_lost: false,
        added_by: Default::default(),
    }
}

/// A healthy two-node cluster seen from `me`: both voters, `n1` leads.
fn healthy(me: &str) -> Facts {
    let id = if me == A { ID_A } else { ID_B };
    Facts {
        node: me.into(),
        boot_id: boot(me),
        topology: Topology::TwoNode,
        trigger: Trigger::Monitor,
        notify: None,
        pacemaker: PacemakerView {
            quorate: true,
            nodes: vec![node(A, 0), node(B, 0)],
            fence_history: vec![],
            ..Default::default()
        },
        etcd: EtcdView::Running(live(
            id,
            vec![member(ID_A, A, false, true), member(ID_B, B, false, true)],
            true,
            me == A,
        )),
        cluster: None,
        data: data(id, 0, &[A, B]),
        local: LocalMarkers {
            in_sync_boot: Some(boot(me)),
        },
        alerts: vec![],
    }
}

fn peer_mut<'a>(f: &'a mut Facts, name: &str) -> &'a mut NodeView {
    f.pacemaker
        .nodes
        .iter_mut()
        .find(|n| n.name == name)
        .expect("node in the facts")
}

fn live_mut(f: &mut Facts) -> &mut LiveEtcd {
    match &mut f.etcd {
        EtcdView::Running(l) => l,
        EtcdView::NotRunning => panic!("etcd not running in these facts"),
    }
}

/// `n1`'s view once `n2` is lost: etcd has no leader, n2 unclean.
fn peer_lost() -> Facts {
    let mut f = healthy(A);
    let l = live_mut(&mut f);
    l.has_leader = false;
    l.linearizable_ok = false;
    l.is_leader = false;
    l.members[1].in_sync = false;
    let b = peer_mut(&mut f, B);
    b.online = false;
    b.unclean = true;
    b.etcd = ResourceState::Unknown;
    f
}

fn fenced(target: &str, at: u64) -> FenceEvent {
    FenceEvent {
        target: target.into(),
        action: FenceAction::Reboot,
        status: FenceStatus::Success,
        completed: Some(Stamp(at)),
    }
}

/// `target` fenced at `at`, as Pacemaker records it: the fence in the
/// history, and the node's last membership ended (offline, not unclean, not
/// expected up).
fn fence(f: &mut Facts, target: &str, at: u64) {
    f.pacemaker.fence_history.push(fenced(target, at));
    let n = peer_mut(f, target);
    n.online = false;
    n.unclean = false;
    n.expected_up = false;
}

fn acts(f: &Facts) -> Vec<Step> {
    decide(f).steps.into_iter().filter(|s| s.acts()).collect()
}

fn has(f: &Facts, pred: impl Fn(&Step) -> bool) -> bool {
    decide(f).steps.iter().any(pred)
}

fn forces(f: &Facts) -> bool {
    has(f, |s| {
        matches!(s, Step::ForceNewCluster { .. } | Step::SetClaim { .. })
    })
}

fn membership_change(s: &Step) -> bool {
    matches!(
        s,
        Step::AddLearner { .. } | Step::PromoteLearner { .. } | Step::RemoveMember { .. }
    )
}

// ---- the fresh-bootstrap scenario --------------------

fn fresh(me: &str) -> Facts {
    let mut f = healthy(me);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.data = LocalData::default();
    f.local = LocalMarkers::default();
    for n in &mut f.pacemaker.nodes {
        n.record = Some(record(&n.name.clone(), false, 0));
        n.etcd = ResourceState::Starting;
    }
    f
}

#[test]
fn fresh_bootstrap_of_two_nodes() {
    let f = fresh(A);
    assert_eq!(
        acts(&f),
        vec![Step::StartEtcd {
            mode: StartMode::New
        }]
    );
    // Until the peer's daemon has said it has no data, wait, without
    // holding Pacemaker up: the start returns at once with the reason (a
    // start in flight holds the peer's start back, which may be the very
    // thing this one waits for), and monitors say degraded meanwhile.
    let mut f = fresh(A);
    peer_mut(&mut f, B).record = None;
    assert!(acts(&f).is_empty());
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Success, "{d:?}");
    assert!(
        d.reason.as_deref().unwrap_or("").contains("record"),
        "{d:?}"
    );
    f.trigger = Trigger::Monitor;
    peer_mut(&mut f, A).etcd = ResourceState::Started;
    assert_eq!(decide(&f).outcome, Outcome::Degraded);
    // Archived data anywhere: a fresh bootstrap would lose it; refuse.
    let mut f = fresh(A);
    peer_mut(&mut f, B).record.as_mut().unwrap().archives = 1;
    let d = decide(&f);
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("archived"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover restore-archive --node n2");
}

#[test]
fn a_half_done_bootstrap_is_completed_not_deadlocked() {
    // n2 started `new` but never reached quorum; n1 (data lost to a fence
    // before it wrote any) starts `new` too and completes the bootstrap.
    let mut f = fresh(A);
    let r = peer_mut(&mut f, B).record.as_mut().unwrap();
    r.has_data = true;
    r.formed = false;
    assert_eq!(
        acts(&f),
        vec![Step::StartEtcd {
            mode: StartMode::New
        }]
    );
    // Once the peer's data formed a cluster, never bootstrap beside it.
    peer_mut(&mut f, B).record.as_mut().unwrap().formed = true;
    assert!(acts(&f).is_empty());
}

// ---- the adoption scenario --------------------

#[test]
fn adopts_an_existing_member_without_changing_ids() {
    let mut f = healthy(A);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.local = LocalMarkers::default();
    peer_mut(&mut f, B).etcd = ResourceState::Starting;
    assert_eq!(
        acts(&f),
        vec![Step::StartEtcd {
            mode: StartMode::Existing
        }]
    );
    // With the peer already serving, its member list names our id: adopt.
    f.cluster = Some(ClusterView {
        cluster_id: CLUSTER,
        epoch: 0,
        members: vec![member(ID_A, A, false, false), member(ID_B, B, false, true)],
        leave_lock: None,
    });
    assert_eq!(
        acts(&f),
        vec![Step::StartEtcd {
            mode: StartMode::Existing
        }]
    );
}

// ---- the peer-crash and stale-data-archived scenarios --------------------

#[test]
fn peer_crash_fence_survivor_rejoin_learner_voter() {
    // a. Lost, not fenced yet: wait; never force on "no leader" alone.
    let f = peer_lost();
    let d = decide(&f);
    assert!(!forces(&f), "{d:?}");
    assert_eq!(d.outcome, Outcome::Degraded);
    assert!(d.reason.as_deref().unwrap().contains("fence"), "{d:?}");

    // b. Fenced, and Pacemaker recorded it against the node: claim first.
    let mut f = peer_lost();
    fence(&mut f, B, 150);
    assert_eq!(acts(&f), vec![Step::SetClaim { epoch: 1 }]);

    // b'. The alert's fence proves it as well once Pacemaker's record of
    // the node shows its membership ended; while crm_mon still shows the
    // node unclean, the alert alone proves nothing (the fence it reports
    // may be from before the node's last join).
    let mut g = peer_lost();
    g.alerts.push(fenced(B, 150));
    assert!(!forces(&g), "{:?}", decide(&g));
    assert!(acts(&g).is_empty(), "{:?}", decide(&g));
    let b = peer_mut(&mut g, B);
    b.unclean = false;
    b.expected_up = false;
    assert_eq!(acts(&g), vec![Step::SetClaim { epoch: 1 }]);

    // b''. An operator's manual confirmation (`stonith_admin --confirm`)
    // is in the history as a fence ("off"); Pacemaker records it against
    // the node the same way.
    let mut h = peer_lost();
    fence(&mut h, B, 150);
    h.pacemaker.fence_history[0].action = FenceAction::Off;
    assert_eq!(acts(&h), vec![Step::SetClaim { epoch: 1 }]);

    // c. Own claim visible: force, keeping the data.
    peer_mut(&mut f, A).claim = Some(Claim {
        owner: A.into(),
        boot_id: boot(A),
        epoch: 1,
        at: Stamp(160),
    });
    assert_eq!(acts(&f), vec![Step::ForceNewCluster { epoch: 1 }]);

    // d. Alone with quorum: the owner clears its claim; degraded, not failed.
    let mut f2 = f.clone();
    f2.data.epoch = 1;
    f2.data.voters = vec![A.into()];
    f2.etcd = EtcdView::Running(live(ID_A, vec![member(ID_A, A, false, true)], true, true));
    peer_mut(&mut f2, A).record = Some(record(A, true, 1));
    let d = decide(&f2);
    assert!(d.steps.contains(&Step::ClearClaim), "{d:?}");
    assert_eq!(d.outcome, Outcome::Degraded);

    // e. (the stale-data-archived scenario) The fenced node boots: its data is stale, so it is archived,
    // never deleted and never joined over.
    let cluster = ClusterView {
        cluster_id: CLUSTER,
        epoch: 1,
        members: vec![member(ID_A, A, false, true)],
        leave_lock: None,
    };
    let mut b = healthy(B);
    b.trigger = Trigger::Start;
    b.etcd = EtcdView::NotRunning;
    b.local = LocalMarkers::default();
    b.cluster = Some(cluster.clone());
    peer_mut(&mut b, A).record = Some(record(A, true, 1));
    let steps = acts(&b);
    assert!(
        matches!(steps.as_slice(), [Step::ArchiveDataDir { .. }]),
        "{steps:?}"
    );
    assert!(!has(&b, |s| matches!(s, Step::StartEtcd { .. })));

    // f. The survivor's leader adds it as a learner once its daemon is up.
    peer_mut(&mut f2, A).claim = None;
    let mut b_view = node(B, 0);
    b_view.record = Some(record(B, false, 0));
    b_view.record.as_mut().unwrap().archives = 1;
    b_view.etcd = ResourceState::Starting;
    *peer_mut(&mut f2, B) = b_view;
    assert_eq!(acts(&f2), vec![Step::AddLearner { node: B.into() }]);

    // g. The archived node joins as that learner, with the cluster's epoch.
    b.data = LocalData {
        archives: 1,
        ..LocalData::default()
    };
    b.cluster = Some(ClusterView {
        members: vec![member(ID_A, A, false, true), member(ID_B2, B, true, false)],
        ..cluster
    });
    assert_eq!(
        acts(&b),
        vec![
            Step::PublishRecord,
            Step::StartEtcd {
                mode: StartMode::Join { epoch: 1 }
            }
        ]
    );

    // h. Promote only once etcd reports the learner in sync.
    let mut f3 = f2.clone();
    live_mut(&mut f3)
        .members
        .push(member(ID_B2, B, true, false));
    assert!(!has(&f3, membership_change), "{:?}", decide(&f3));
    live_mut(&mut f3).members[1].in_sync = true;
    assert_eq!(
        acts(&f3),
        vec![Step::PromoteLearner {
            id: ID_B2,
            node: B.into()
        }]
    );
}

/// A fence from before the peer's last membership: the peer joined after
/// it and is lost again, so Pacemaker shows it unclean. Whatever the
/// stamps say (the fence's may even read later than the join, after a
/// clock step), it proves nothing.
#[test]
fn a_fence_older_than_the_last_join_proves_nothing() {
    let mut f = peer_lost();
    f.pacemaker.fence_history.push(fenced(B, 90));
    assert!(!forces(&f));
    let mut f = peer_lost();
    f.pacemaker.fence_history.push(fenced(B, 1_000_000));
    assert!(!forces(&f));
    assert!(acts(&f).is_empty(), "{:?}", decide(&f));
    // Offline and not unclean, but expected up: Pacemaker has not recorded
    // the end of its membership.
    let mut f = peer_lost();
    f.pacemaker.fence_history.push(fenced(B, 150));
    peer_mut(&mut f, B).unclean = false;
    assert!(!forces(&f));
    // A failed fence or an unfence proves nothing either.
    let mut f = peer_lost();
    f.pacemaker.fence_history.push(FenceEvent {
        status: FenceStatus::Failed,
        ..fenced(B, 150)
    });
    f.pacemaker.fence_history.push(FenceEvent {
        action: FenceAction::On,
        ..fenced(B, 151)
    });
    assert!(!forces(&f));
}

// ---- the partition scenario --------------------

#[test]
fn partition_fence_race_exactly_one_survivor() {
    // Both sides see the other unclean: neither claims, neither forces.
    let f = peer_lost();
    assert!(acts(&f).is_empty(), "{:?}", decide(&f));
    // The winner has Pacemaker's proof; if it still sees a valid claim of
    // the peer it yields (a wait, never an error 6).
    let mut f = peer_lost();
    fence(&mut f, B, 150);
    peer_mut(&mut f, B).claim = Some(Claim {
        owner: B.into(),
        boot_id: boot(B),
        epoch: 1,
        at: Stamp(140),
    });
    // The fence at 150 came after that claim: the claim died with its owner.
    assert_eq!(acts(&f), vec![Step::SetClaim { epoch: 1 }]);
    // A claim written after the fence (a new boot) stands: yield.
    peer_mut(&mut f, B).claim = Some(Claim {
        owner: B.into(),
        boot_id: boot(B),
        epoch: 1,
        at: Stamp(170),
    });
    let d = decide(&f);
    assert!(!forces(&f), "{d:?}");
    assert_ne!(d.outcome, Outcome::NotConfigured);
}

// ---- the etcd-crash scenario --------------------

#[test]
fn local_etcd_crash_is_restarted_in_place() {
    let mut f = healthy(A);
    f.trigger = Trigger::Reconcile;
    f.etcd = EtcdView::NotRunning;
    assert_eq!(
        acts(&f),
        vec![Step::StartEtcd {
            mode: StartMode::Existing
        }]
    );
    // Monitor meanwhile reports the failure (never success for a dead etcd).
    f.trigger = Trigger::Monitor;
    assert_eq!(decide(&f).outcome, Outcome::Failed);
    // On the peer: no leader while ours restarts, but we are online and not
    // stopped: no claim, no force, no membership change.
    let mut b = peer_lost();
    let a = peer_mut(&mut b, B);
    a.online = true;
    a.unclean = false;
    a.etcd = ResourceState::Started;
    assert!(acts(&b).is_empty(), "{:?}", decide(&b));
}

#[test]
fn a_hung_etcd_fails_its_monitor_its_stop_ends_it_and_the_peer_forces_on_that_stop() {
    // n1's etcd exists but answers nothing: the daemon's stand-in (no
    // leader, the state file's voters).
    let mut f = healthy(A);
    let l = live_mut(&mut f);
    l.has_leader = false;
    l.linearizable_ok = false;
    l.is_leader = false;
    // Silent for less than the bound: degraded, waiting.
    assert_eq!(decide(&f).outcome, Outcome::Degraded);
    // Past the bound: failed with the reason, and neither the monitor nor
    // the daemon's loop acts on it (Pacemaker recovers it).
    live_mut(&mut f).hung_ms = Some(5200);
    for t in [Trigger::Monitor, Trigger::Reconcile, Trigger::Start] {
        f.trigger = t;
        let d = decide(&f);
        assert_eq!(d.outcome, Outcome::Failed, "{d:?}");
        assert!(
            d.reason
                .as_deref()
                .is_some_and(|r| r.contains("has not answered for 5.2 s")),
            "{d:?}"
        );
        assert!(d.first_act().is_none(), "{d:?}");
    }
    // A notify is never failed.
    f.trigger = Trigger::Notify(Notification {
        phase: NotifyPhase::Pre,
        operation: "stop".into(),
        start: vec![],
        stop: vec![A.into()],
    });
    assert_eq!(decide(&f).outcome, Outcome::Success);
    // Pacemaker's stop ends the process (SIGKILL after the grace) and
    // clears the in-sync marker; it never leaves the member list.
    f.trigger = Trigger::Stop;
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Success);
    assert_eq!(d.steps, vec![Step::ClearInSync, Step::StopEtcd], "{d:?}");

    // The same from the peer's side (n1 seeing n2 hang): no leader, and
    // an etcd Pacemaker shows started is no proof.
    let mut b = peer_lost();
    let a = peer_mut(&mut b, B);
    a.online = true;
    a.unclean = false;
    a.etcd = ResourceState::Started;
    assert!(acts(&b).is_empty(), "{:?}", decide(&b));
    // The stop completed: the peer claims, and forces once it sees its claim.
    peer_mut(&mut b, B).etcd = ResourceState::Stopped { at: Stamp(100) };
    assert!(
        has(&b, |s| matches!(s, Step::SetClaim { .. })),
        "{:?}",
        decide(&b)
    );
}

// ---- the daemon-restart scenario --------------------

#[test]
fn a_restarted_daemon_leaves_a_serving_etcd_alone() {
    for me in [A, B] {
        let mut f = healthy(me);
        f.trigger = Trigger::Reconcile;
        let d = decide(&f);
        assert!(d.first_act().is_none(), "{d:?}");
        assert_eq!(d.outcome, Outcome::Success);
    }
    // Even with the /run marker gone, it only sets the marker again.
    let mut f = healthy(A);
    f.local = LocalMarkers::default();
    assert_eq!(acts(&f), vec![Step::MarkInSync]);
}

// ---- the double-power-loss scenario --------------------

#[test]
fn after_both_power_cycled_the_newer_data_wins() {
    // n1 forced a new cluster (epoch 1) before the outage; n2 holds epoch 0.
    let mut a = healthy(A);
    a.trigger = Trigger::Start;
    a.etcd = EtcdView::NotRunning;
    a.local = LocalMarkers::default();
    a.data = data(ID_A, 1, &[A]);
    peer_mut(&mut a, A).record = Some(record(A, true, 1));
    assert_eq!(
        acts(&a),
        vec![Step::StartEtcd {
            mode: StartMode::Existing
        }]
    );
    let mut b = healthy(B);
    b.trigger = Trigger::Start;
    b.etcd = EtcdView::NotRunning;
    b.local = LocalMarkers::default();
    peer_mut(&mut b, A).record = Some(record(A, true, 1));
    assert!(matches!(acts(&b).as_slice(), [Step::ArchiveDataDir { .. }]));
    // n1 is up but its daemon has not published its record yet: n2 cannot
    // tell whose data is newer, so it waits instead of starting its own.
    let mut b = healthy(B);
    b.trigger = Trigger::Start;
    b.etcd = EtcdView::NotRunning;
    b.local = LocalMarkers::default();
    peer_mut(&mut b, A).record = None;
    let d = decide(&b);
    assert!(d.first_act().is_none(), "{d:?}");
    assert!(d.reason.unwrap().contains("record"));
    // Equal epochs of the same cluster: both start, quorum forms again.
    let mut b = healthy(B);
    b.trigger = Trigger::Start;
    b.etcd = EtcdView::NotRunning;
    b.local = LocalMarkers::default();
    assert_eq!(
        acts(&b),
        vec![Step::StartEtcd {
            mode: StartMode::Existing
        }]
    );
    // Equal epochs of different clusters: divergent; refuse and say how.
    peer_mut(&mut b, A).record.as_mut().unwrap().cluster_id = Some(CLUSTER + 1);
    let d = decide(&b);
    let (reason, cmd) = d.refusal().expect("divergent histories must refuse");
    assert!(reason.contains("divergent"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover keep-data-of --node n2");
    assert!(d.reason.as_deref().unwrap().contains(cmd));
}

// ---- the total-outage scenario --------------------

#[test]
fn a_lone_node_after_a_total_outage_waits_and_says_why() {
    // Booted alone: wait_for_all keeps corosync inquorate.
    let mut f = healthy(A);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.local = LocalMarkers::default();
    f.pacemaker.quorate = false;
    let b = peer_mut(&mut f, B);
    b.online = false;
    b.last_seen = None;
    b.expected_up = false;
    b.record = None;
    let d = decide(&f);
    assert!(d.first_act().is_none(), "{d:?}");
    // A start arrives only from a quorate Pacemaker, so this view is behind
    // it: the start is held (a failed start counts against the node), not
    // acted on.
    assert_eq!(d.outcome, Outcome::Success);
    let (reason, cmd) = d.refusal().expect("a lone node refuses and says why");
    assert!(reason.contains("alone") && reason.contains(B), "{reason}");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n1");
    // Pacemaker keeps 128 characters of an exit reason: the command must
    // be within them for node names of a usual length.
    let shown = d.reason.clone().unwrap();
    assert!(
        shown.starts_with(&format!("resolve with '{cmd}': ")),
        "{shown}"
    );
    let long = shown.replace("n1", "node1").replace("n2", "node2");
    assert!(long.len() <= 128, "{} characters: {long}", long.len());
    // Pacemaker, without quorum, only probes: the probe fails with the
    // reason, so that crm_mon shows it as the exit reason (a "not running"
    // probe shows none). The daemon's own loop reports it as not running.
    f.trigger = Trigger::Monitor;
    peer_mut(&mut f, A).etcd = ResourceState::Unknown;
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Failed);
    assert_eq!(d.refusal().map(|r| r.1), Some(cmd));
    f.trigger = Trigger::Reconcile;
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::NotRunning);
    assert!(d.first_act().is_none() && d.refusal().is_some(), "{d:?}");
    // Once the operator ran the command (the in-sync marker of this boot),
    // it only waits for quorum.
    f.local.in_sync_boot = Some(boot(A));
    f.trigger = Trigger::Start;
    let d = decide(&f);
    assert!(d.refusal().is_none() && d.first_act().is_none(), "{d:?}");
    assert!(d.reason.unwrap().contains("quorum"));
    // Without data there is nothing to keep: it just waits.
    f.local = LocalMarkers::default();
    f.data = LocalData::default();
    let d = decide(&f);
    assert!(d.refusal().is_none(), "{d:?}");
    assert!(
        !d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })),
        "{d:?}"
    );
    // The peer joins: quorum, and no refusal any more.
    let mut f = healthy(A);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.local = LocalMarkers::default();
    assert!(decide(&f).refusal().is_none());

    // Quorum unblocked by hand and the peer fenced: this node's data is not
    // known complete (it was never in quorum this boot). Refuse, name the
    // command.
    let mut f = peer_lost();
    f.local = LocalMarkers::default();
    fence(&mut f, B, 150);
    let d = decide(&f);
    assert!(!forces(&f), "{d:?}");
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("since it booted"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n1");
    assert_eq!(d.outcome, Outcome::Degraded);
    assert!(d.reason.as_deref().unwrap().contains(cmd));
    // A marker from an earlier boot does not count.
    f.local.in_sync_boot = Some("n1-boot0".into());
    assert!(decide(&f).refusal().is_some());
}

// ---- the graceful-reboot scenario --------------------

#[test]
fn graceful_reboot_leaves_and_the_other_goes_on_without_forcing() {
    let mut f = healthy(B);
    f.trigger = Trigger::Stop;
    // The marker goes first: from now on n1 may go on without us.
    assert_eq!(acts(&f), vec![Step::ClearInSync, Step::AcquireLeaveLock]);
    f.local = LocalMarkers::default();
    live_mut(&mut f).leave_lock = Some(B.into());
    assert_eq!(
        acts(&f),
        vec![
            Step::RecordDeparture,
            Step::RemoveMember {
                id: ID_B,
                node: B.into()
            }
        ]
    );
    // The survivor is sole voter with quorum: no claim, no force.
    let mut a = healthy(A);
    live_mut(&mut a).members.truncate(1);
    live_mut(&mut a).leave_lock = Some(B.into());
    let b = peer_mut(&mut a, B);
    b.online = false;
    b.expected_up = false;
    b.shutdown = true;
    b.record = None;
    assert!(!forces(&a));
    assert_eq!(decide(&a).outcome, Outcome::Degraded);
    // The departed node back: it never forces, and while the peer's etcd
    // is not started it starts nothing; with the live cluster up it
    // archives and joins.
    let mut back = healthy(B);
    back.trigger = Trigger::Start;
    back.etcd = EtcdView::NotRunning;
    back.local = LocalMarkers::default();
    back.data.departed = true;
    peer_mut(&mut back, A).etcd = ResourceState::Starting;
    assert!(!forces(&back));
    assert!(
        acts(&back)
            .iter()
            .all(|s| !matches!(s, Step::StartEtcd { .. }))
    );
    back.cluster = Some(ClusterView {
        cluster_id: CLUSTER,
        epoch: 0,
        members: vec![member(ID_A, A, false, true)],
        leave_lock: Some(B.into()),
    });
    assert!(
        acts(&back)
            .iter()
            .any(|s| matches!(s, Step::ArchiveDataDir { .. }))
    );
    // Even with the peer fenced, a departed node never forces: its WAL holds
    // its own removal, and etcd panics forcing from it.
    let mut d = peer_lost();
    d.data.departed = true;
    fence(&mut d, B, 150);
    assert!(!forces(&d));
    assert!(decide(&d).refusal().is_some());
    // Its start is held, not failed: a failed start is fatal to the node in
    // Pacemaker's eyes, and the node must still join once the peer is back.
    d.trigger = Trigger::Start;
    d.etcd = EtcdView::NotRunning;
    let held = decide(&d);
    assert!(held.refusal().is_some());
    assert_eq!(held.outcome, Outcome::Success, "{held:?}");
}

/// A graceful leave cut off between the departure record and the removal
/// (etcd exited, or the node lost power): the member list is unchanged,
/// and the peer's member, started, waits for this one's vote. The
/// departed node starts its member on its data: a plain start in its own
/// membership, never a force, so it serves only with the peer's vote; a
/// member whose removal did take effect is rejected by the peer and exits.
#[test]
fn a_leave_cut_off_before_the_removal_restarts_the_member() {
    // n2 recorded its departure, then its etcd exited before the removal;
    // n1's member (started, no quorum) waits for n2's vote, and no quorate
    // cluster answers.
    let mut f = healthy(B);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.local = LocalMarkers::default();
    f.data.departed = true;
    peer_mut(&mut f, B).record.as_mut().unwrap().departed = true;
    let d = decide(&f);
    assert_eq!(
        acts(&f),
        vec![Step::StartEtcd {
            mode: StartMode::Existing
        }],
        "{d:?}"
    );
    assert_eq!(d.outcome, Outcome::Success);
    assert!(!forces(&f));
    // The daemon's loop does the same while Pacemaker shows the instance
    // started here (etcd exited under it).
    let mut r = f.clone();
    r.trigger = Trigger::Reconcile;
    peer_mut(&mut r, B).etcd = ResourceState::Started;
    assert!(has(&r, |s| matches!(s, Step::StartEtcd { .. })));
    // Not while the peer holds a valid claim, nor beside newer data (it
    // is archived), nor when the peer's etcd is not started, nor when the
    // data's last membership no longer lists this node as a voter.
    let mut claimed = f.clone();
    peer_mut(&mut claimed, A).claim = Some(Claim {
        owner: A.into(),
        boot_id: boot(A),
        epoch: 1,
        at: Stamp(10),
    });
    assert!(!has(&claimed, |s| matches!(s, Step::StartEtcd { .. })));
    let mut newer = f.clone();
    peer_mut(&mut newer, A).record.as_mut().unwrap().epoch = 1;
    assert!(!has(&newer, |s| matches!(s, Step::StartEtcd { .. })));
    let mut stopped = f.clone();
    peer_mut(&mut stopped, A).etcd = ResourceState::Unknown;
    assert!(!has(&stopped, |s| matches!(s, Step::StartEtcd { .. })));
    let mut removed = f.clone();
    removed.data.voters = vec![A.into()];
    assert!(!has(&removed, |s| matches!(s, Step::StartEtcd { .. })));
    // Running again with the peer: a quorate voter clears the departure.
    let mut back = healthy(B);
    back.data.departed = true;
    assert!(has(&back, |s| *s == Step::ClearDeparture));
}

/// A leave whose removal committed on the leaving node while the peer's
/// persisted commit index did not catch up (the peer lost power right after
/// applying it: etcd syncs a commit index change only with new entries).
/// After a total outage the peer's member, same cluster and epoch, still
/// lists the leaver as a voter and waits for its vote; the leaver's data
/// shows its own removal, so its member never votes again. No automatic
/// path is safe (the peer's last acknowledged writes may lie past its
/// persisted commit index, which a forced restart drops), so both daemons
/// name the peer as holding the newest data, and the one command; with
/// the operator's marker set by that command, the peer claims and forces.
#[test]
fn a_removal_the_peer_did_not_persist_names_the_peer_and_the_command() {
    use warden_failover::decide::expected_record;
    // n1 left: its data's last quorate membership lists only n2.
    let mut leaver = healthy(A);
    leaver.trigger = Trigger::Start;
    leaver.etcd = EtcdView::NotRunning;
    leaver.local = LocalMarkers::default();
    leaver.data.departed = true;
    leaver.data.voters = vec![B.into()];
    let rec = expected_record(&leaver);
    assert!(rec.removed && rec.departed, "{rec:?}");
    peer_mut(&mut leaver, A).record = Some(rec.clone());
    let d = decide(&leaver);
    assert!(!forces(&leaver), "{d:?}");
    assert!(
        !has(&leaver, |s| matches!(s, Step::StartEtcd { .. })),
        "{d:?}"
    );
    let (reason, cmd) = d.refusal().expect("the leaver names the peer");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n2");
    assert!(reason.contains("newest data is on n2"), "{reason}");
    // Held: the start returns at once, a monitor says degraded.
    assert_eq!(d.outcome, Outcome::Success);
    let mut monitor = leaver.clone();
    monitor.trigger = Trigger::Monitor;
    assert_eq!(decide(&monitor).outcome, Outcome::Degraded);
    // Not while the peer's etcd is not started, nor once a quorate
    // cluster answers (the peer's member recorded the removal after all
    // and elected itself): then the usual archive and join.
    let mut stopped = leaver.clone();
    peer_mut(&mut stopped, B).etcd = ResourceState::Unknown;
    assert!(decide(&stopped).refusal().is_none());
    let mut elected = leaver.clone();
    elected.cluster = Some(ClusterView {
        cluster_id: CLUSTER,
        epoch: 0,
        members: vec![member(ID_B, B, false, true)],
        leave_lock: None,
    });
    assert!(has(&elected, |s| matches!(s, Step::ArchiveDataDir { .. })));

    // n2, after the total outage: its member lists both, has no leader.
    let mut peer = healthy(B);
    let l = live_mut(&mut peer);
    l.has_leader = false;
    l.linearizable_ok = false;
    peer.local = LocalMarkers::default();
    peer_mut(&mut peer, A).record = Some(rec.clone());
    let d = decide(&peer);
    assert!(!forces(&peer), "{d:?}");
    let (reason, cmd) = d.refusal().expect("the peer names itself");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n2");
    assert!(
        reason.contains("this node holds the newest data"),
        "{reason}"
    );
    assert_eq!(d.outcome, Outcome::Degraded);
    // The operator's command sets the marker for this boot: claim, force.
    let mut allowed = peer.clone();
    allowed.local.in_sync_boot = Some(boot(B));
    assert!(
        has(&allowed, |s| matches!(s, Step::SetClaim { .. })),
        "{:?}",
        decide(&allowed)
    );
    // No proof from a record of another epoch, from a leaver whose data
    // still lists itself, or from a peer Pacemaker has lost.
    let mut other_epoch = allowed.clone();
    peer_mut(&mut other_epoch, A).record.as_mut().unwrap().epoch = 1;
    assert!(!forces(&other_epoch));
    let mut listed = allowed.clone();
    peer_mut(&mut listed, A).record.as_mut().unwrap().removed = false;
    assert!(!forces(&listed));
    let mut lost = allowed.clone();
    peer_mut(&mut lost, A).unclean = true;
    peer_mut(&mut lost, A).online = false;
    assert!(!forces(&lost));
}

/// n1 left and its removal committed; n2 went on alone, then came back
/// as a replaced machine (no data, no state file). n1 must not name n2's
/// force (there is nothing on n2 to force) but its own: its data is the
/// newest there is, and the command restores it as a one-member cluster.
#[test]
fn a_removed_leaver_beside_a_blank_peer_names_its_own_data() {
    use warden_failover::decide::expected_record;
    let mut leaver = healthy(A);
    leaver.trigger = Trigger::Start;
    leaver.etcd = EtcdView::NotRunning;
    leaver.cluster = None;
    leaver.local = LocalMarkers::default();
    leaver.data.departed = true;
    leaver.data.voters = vec![B.into()];
    let rec = expected_record(&leaver);
    peer_mut(&mut leaver, A).record = Some(rec);
    // Pacemaker shows etcd started on n2 (its start returned: held).
    peer_mut(&mut leaver, B).record = Some(record(B, false, 0));
    let d = decide(&leaver);
    assert!(!forces(&leaver), "{d:?}");
    assert!(
        !has(&leaver, |s| matches!(s, Step::StartEtcd { .. })),
        "{d:?}"
    );
    let (reason, cmd) = d.refusal().expect("the leaver names a command");
    assert_eq!(
        cmd, "etcd-warden recover force-new-cluster --node n1",
        "{reason}"
    );
    assert!(reason.contains("n2 holds no etcd data"), "{reason}");
    // Not while n2's daemon has not said so this boot, nor while its
    // record says it holds data.
    let mut unknown = leaver.clone();
    peer_mut(&mut unknown, B).record = None;
    assert!(
        decide(&unknown)
            .refusal()
            .is_none_or(|(_, c)| !c.contains("--node n1"))
    );
    let mut holds = leaver.clone();
    peer_mut(&mut holds, B).record = Some(record(B, true, 0));
    assert!(
        decide(&holds)
            .refusal()
            .is_none_or(|(_, c)| !c.contains("--node n1"))
    );
}

/// n1 forced alone (epoch 1); n2 archived its older data (epoch 0) to
/// join and its join never received the data; then n1 came back as a
/// replaced machine. The epoch-1 data is gone; the newest left is n2's
/// archive, older than n2's state file names. Both name the restore with
/// `--allow-older-epoch` (without it the restore refuses).
#[test]
fn a_join_that_never_got_the_data_beside_a_blank_peer_names_the_older_archive() {
    use warden_failover::decide::expected_record;
    const COMMAND: &str = "etcd-warden recover restore-archive --node n2 --allow-older-epoch";
    let mut joiner = fresh(B);
    joiner.data = LocalData {
        exists: false,
        formed: true,
        epoch: 1,
        cluster_id: Some(CLUSTER),
        member_id: Some(ID_B),
        joining: true,
        archives: 1,
        ..LocalData::default()
    };
    let rec = expected_record(&joiner);
    assert!(rec.joined_without_data && !rec.has_data, "{rec:?}");
    peer_mut(&mut joiner, B).record = Some(rec.clone());
    let d = decide(&joiner);
    let (reason, cmd) = d.refusal().expect("the joiner names a command");
    assert_eq!(cmd, COMMAND, "{reason}");
    assert!(reason.contains("writes of epoch 1 are lost"), "{reason}");
    // Not while the peer holds an archive (it may hold epoch 1).
    let mut archived = joiner.clone();
    peer_mut(&mut archived, A).record.as_mut().unwrap().archives = 1;
    assert_ne!(decide(&archived).refusal().map(|(_, c)| c), Some(COMMAND));

    // n1, blank, sees n2's record.
    let mut blank = fresh(A);
    peer_mut(&mut blank, B).record = Some(rec);
    let d = decide(&blank);
    let (reason, cmd) = d.refusal().expect("the blank node names a command");
    assert_eq!(cmd, COMMAND, "{reason}");
    assert!(!forces(&blank) && !has(&blank, |s| matches!(s, Step::StartEtcd { .. })));
}

// ---- the both-stopped scenario --------------------

#[test]
fn both_stopped_at_once_neither_leaves_then_a_clean_start() {
    let mut f = healthy(A);
    f.trigger = Trigger::Stop;
    f.local = LocalMarkers::default();
    peer_mut(&mut f, B).etcd = ResourceState::Stopping;
    assert_eq!(acts(&f), vec![Step::StopEtcd]);
    // The notify data attached to the stop says so too, before the CIB
    // shows the peer's stop (a hint, but enough to stay put).
    let mut g = healthy(A);
    g.local = LocalMarkers::default();
    g.trigger = Trigger::Stop;
    g.notify = Some(Notification {
        phase: NotifyPhase::Pre,
        operation: "stop".into(),
        start: vec![],
        stop: vec![A.into(), B.into()],
    });
    assert_eq!(acts(&g), vec![Step::StopEtcd]);
    // The peer holds the leave lock: just stop.
    let mut h = healthy(A);
    h.trigger = Trigger::Stop;
    h.local = LocalMarkers::default();
    live_mut(&mut h).leave_lock = Some(B.into());
    assert_eq!(acts(&h), vec![Step::StopEtcd]);
    // A clean start afterwards: both voters, both start their members.
    for me in [A, B] {
        let mut s = healthy(me);
        s.trigger = Trigger::Start;
        s.etcd = EtcdView::NotRunning;
        s.local = LocalMarkers::default();
        assert_eq!(
            acts(&s),
            vec![Step::StartEtcd {
                mode: StartMode::Existing
            }]
        );
    }
}

// ---- rules not tied to one scenario ---------------------------------------

#[test]
fn a_member_list_without_a_linearizable_read_is_not_quorum() {
    // etcd 3.4 answers MemberList from the local member without a leader.
    let mut f = healthy(A);
    live_mut(&mut f).linearizable_ok = false;
    assert_ne!(decide(&f).outcome, Outcome::Success);
    assert!(!has(&f, membership_change));
}

#[test]
fn a_claim_from_an_earlier_boot_is_cleared_by_its_owner() {
    let mut f = healthy(A);
    peer_mut(&mut f, A).claim = Some(Claim {
        owner: A.into(),
        boot_id: "n1-boot0".into(),
        epoch: 1,
        at: Stamp(10),
    });
    assert_eq!(acts(&f)[0], Step::ClearClaim);
}

#[test]
fn a_claim_given_up_when_the_peer_returns_before_the_force() {
    let mut f = peer_lost();
    let b = peer_mut(&mut f, B);
    b.online = true;
    b.unclean = false;
    b.etcd = ResourceState::Starting;
    peer_mut(&mut f, A).claim = Some(Claim {
        owner: A.into(),
        boot_id: boot(A),
        epoch: 1,
        at: Stamp(160),
    });
    assert_eq!(acts(&f), vec![Step::ClearClaim]);
}

#[test]
fn a_starting_node_waits_while_the_peer_forces() {
    let mut f = healthy(B);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.local = LocalMarkers::default();
    peer_mut(&mut f, A).claim = Some(Claim {
        owner: A.into(),
        boot_id: boot(A),
        epoch: 1,
        at: Stamp(160),
    });
    assert!(acts(&f).is_empty(), "{:?}", decide(&f));
}

#[test]
fn notify_never_fails_and_pre_start_adds_the_joiner() {
    let mut f = healthy(A);
    live_mut(&mut f).members.truncate(1);
    let b = peer_mut(&mut f, B);
    b.record = Some(record(B, false, 0));
    b.etcd = ResourceState::Starting;
    f.trigger = Trigger::Notify(Notification {
        phase: NotifyPhase::Pre,
        operation: "start".into(),
        start: vec![B.into()],
        stop: vec![],
    });
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Success);
    assert_eq!(acts(&f), vec![Step::AddLearner { node: B.into() }]);
}

#[test]
fn only_the_leader_changes_membership_and_one_learner_at_a_time() {
    let mut f = healthy(B); // n2 is not the leader
    live_mut(&mut f).members[0] = member(ID_A, A, true, true);
    assert!(!has(&f, membership_change));
    let mut g = healthy(A);
    live_mut(&mut g).members[1] = member(ID_B2, B, true, false);
    assert!(!has(&g, membership_change));
}

#[test]
fn promote_and_demote_are_not_implemented_for_a_plain_clone() {
    let mut f = healthy(A);
    f.trigger = Trigger::Promote;
    assert_eq!(decide(&f).outcome, Outcome::Unimplemented);
}

#[test]
fn a_node_missing_from_pacemaker_fails_transiently_with_a_reason() {
    let mut f = healthy(A);
    f.node = "n9".into();
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Failed);
    assert!(d.reason.unwrap().contains("n9"));
}

// ---- HA ---------------------------------------------------------------------

/// The HA cluster as a quorate member answers: the two healthy voters and
/// `third`, whatever n3's member is.
fn ha_cluster_with(third: MemberInfo) -> ClusterView {
    ClusterView {
        cluster_id: CLUSTER,
        epoch: 0,
        members: vec![
            member(ID_A, A, false, true),
            member(ID_B, B, false, true),
            third,
        ],
        leave_lock: None,
    }
}

fn ha(me: &str, quorate: bool) -> Facts {
    let mut f = healthy(me);
    f.topology = Topology::Ha;
    f.pacemaker.nodes.push(node("n3", 0));
    let l = live_mut(&mut f);
    l.members.push(member(3, "n3", false, true));
    l.has_leader = quorate;
    l.linearizable_ok = quorate;
    f
}

#[test]
fn ha_never_forces_a_new_cluster() {
    let mut f = ha(A, false);
    for n in f.pacemaker.nodes.iter_mut().filter(|n| n.name != A) {
        n.online = false;
        n.expected_up = false;
    }
    fence(&mut f, B, 150);
    fence(&mut f, "n3", 150);
    assert!(!forces(&f));
    assert_eq!(decide(&f).outcome, Outcome::Degraded);
}

#[test]
fn ha_replacement_is_learner_promote_remove_one_change_at_a_time() {
    // n3 was replaced by n4 in the configuration.
    let mut f = ha(A, true);
    f.pacemaker.nodes.retain(|n| n.name != "n3");
    let mut n4 = node("n4", 0);
    n4.record = Some(record("n4", false, 0));
    f.pacemaker.nodes.push(n4);
    assert_eq!(acts(&f), vec![Step::AddLearner { node: "n4".into() }]);
    // Learner in sync, and its node now publishes that it holds data:
    // promote (one extra voter for a moment).
    live_mut(&mut f).members.push(member(4, "n4", true, true));
    peer_mut(&mut f, "n4").record = Some(record("n4", true, 0));
    assert_eq!(
        acts(&f),
        vec![Step::PromoteLearner {
            id: 4,
            node: "n4".into()
        }]
    );
    // Then remove the old voter.
    live_mut(&mut f).members[3].is_learner = false;
    assert_eq!(
        acts(&f),
        vec![Step::RemoveMember {
            id: 3,
            node: "n3".into()
        }]
    );
    // No change while a member that stays is unhealthy.
    live_mut(&mut f).members[1].in_sync = false;
    assert!(!has(&f, membership_change));
}

/// n3's disk was replaced (same machine, same peer URL): its daemon
/// publishes "no data", and its state file still names the cluster.
fn ha_n3_lost_its_disk() -> Facts {
    let mut f = ha(A, true);
    let l = live_mut(&mut f);
    l.members[2].in_sync = false;
    l.members[2].name = "n3".into();
    let mut r = record("n3", false, 0);
    r.cluster_id = Some(CLUSTER);
    r.formed = true;
    peer_mut(&mut f, "n3").record = Some(r);
    peer_mut(&mut f, "n3").etcd = ResourceState::Starting;
    f
}

#[test]
fn ha_same_machine_with_an_empty_disk_is_removed_first_then_learner_promote() {
    let mut f = ha_n3_lost_its_disk();
    // etcd refuses a second member with n3's peer URL, and the old member
    // can never vote again: it is removed first.
    assert_eq!(
        acts(&f),
        vec![Step::RemoveMember {
            id: 3,
            node: "n3".into()
        }]
    );
    assert_eq!(decide(&f).outcome, Outcome::Degraded);
    // Only the leader changes membership.
    live_mut(&mut f).is_leader = false;
    assert!(!has(&f, membership_change));
    live_mut(&mut f).is_leader = true;
    // Removed: n3 is added as a new learner.
    live_mut(&mut f).members.pop();
    assert_eq!(acts(&f), vec![Step::AddLearner { node: "n3".into() }]);
    // In sync, but n3's record (as this node's CIB shows it) still says "no
    // data": not promoted yet, so that a stale record can never make the
    // new voter look like a member whose data is gone.
    live_mut(&mut f).members.push(member(9, "n3", true, true));
    assert!(!has(&f, membership_change));
    peer_mut(&mut f, "n3").record = Some(record("n3", true, 0));
    assert_eq!(
        acts(&f),
        vec![Step::PromoteLearner {
            id: 9,
            node: "n3".into()
        }]
    );
    // A promoted voter that does not answer for a moment is never removed
    // while its node says it has data.
    let l = live_mut(&mut f);
    l.members[2].is_learner = false;
    l.members[2].in_sync = false;
    assert!(!has(&f, membership_change));
}

#[test]
fn ha_no_membership_change_while_another_member_is_unhealthy() {
    // n3 lost its disk, but n2 does not answer either: no change at all.
    let mut f = ha_n3_lost_its_disk();
    live_mut(&mut f).members[1].in_sync = false;
    assert!(!has(&f, membership_change));
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Degraded);
    assert!(d.reason.unwrap().contains("n2"));
    // Without quorum nothing changes and nothing is forced.
    let mut f = ha_n3_lost_its_disk();
    let l = live_mut(&mut f);
    l.has_leader = false;
    l.linearizable_ok = false;
    l.is_leader = false;
    assert!(!has(&f, membership_change));
    assert!(!forces(&f));
}

#[test]
fn ha_a_member_of_a_fresh_bootstrap_not_started_yet_is_not_removed() {
    // n3 has not started etcd yet in a fresh bootstrap: no data, but its
    // record names no cluster and no archive, so it never held data. (A
    // record published before the node's first start says the same while
    // its member runs.)
    let mut f = ha_n3_lost_its_disk();
    peer_mut(&mut f, "n3").record = Some(record("n3", false, 0));
    assert!(!has(&f, membership_change));
    // A new machine of the same name (no data, no state file, no archive)
    // names the member it saw had run as its lost one: that member can
    // never vote again, and is removed.
    let mut r = record("n3", false, 0);
    r.lost_member = Some(3);
    peer_mut(&mut f, "n3").record = Some(r);
    assert!(has(&f, |s| matches!(s, Step::RemoveMember { id: 3, .. })));
    // A node that is offline is not judged by its attributes.
    let mut f = ha_n3_lost_its_disk();
    peer_mut(&mut f, "n3").online = false;
    assert!(!has(&f, membership_change));
    // The record of an earlier archive counts as having held data.
    let mut f = ha_n3_lost_its_disk();
    let mut r = record("n3", false, 0);
    r.archives = 1;
    peer_mut(&mut f, "n3").record = Some(r);
    assert!(has(&f, |s| matches!(s, Step::RemoveMember { id: 3, .. })));
}

/// The record a new machine of the same name publishes in HA mode: the
/// member the quorate cluster lists at it, if that member has run (a
/// member of a bootstrap that never ran is the node's own to start, and
/// in two-node mode only a learner is named).
#[test]
fn a_blank_node_names_its_old_member_that_ran() {
    use warden_failover::decide::expected_record;
    let mut f = ha("n3", true);
    f.data = LocalData::default();
    f.local = LocalMarkers::default();
    f.cluster = Some(ha_cluster_with(member(3, "n3", false, false)));
    assert_eq!(expected_record(&f).lost_member, Some(3));
    f.cluster = Some(ha_cluster_with(never_ran(3)));
    assert_eq!(expected_record(&f).lost_member, None);
    f.cluster = Some(ha_cluster_with(member(3, "n3", false, false)));
    f.topology = Topology::TwoNode;
    assert_eq!(expected_record(&f).lost_member, None);
    // A node that archived data, or whose state file names a cluster, is
    // no new machine: its record says so in other words.
    f.topology = Topology::Ha;
    f.data.archives = 1;
    assert_eq!(expected_record(&f).lost_member, None);
}

/// n3's member of a bootstrap, never started: its name is the initial
/// cluster's, but etcd lists no client URLs for it.
fn never_ran(id: u64) -> MemberInfo {
    MemberInfo {
        started: false,
        name: "n3".into(),
        ..member(id, "n3", false, false)
    }
}

/// n3 in a fresh HA bootstrap it was late for: n1 and n2 started `new`
/// and formed quorum, and their membership lists n3's member of that
/// bootstrap, which never ran. n3 has no data and no history.
fn ha_late_n3() -> Facts {
    let mut f = ha("n3", true);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.data = LocalData::default();
    f.local = LocalMarkers::default();
    peer_mut(&mut f, "n3").record = Some(record("n3", false, 0));
    f.cluster = Some(ha_cluster_with(never_ran(3)));
    f
}

#[test]
fn ha_a_node_late_for_the_bootstrap_starts_its_member_that_never_ran() {
    let mut f = ha_late_n3();
    assert_eq!(
        acts(&f),
        vec![Step::StartEtcd {
            mode: StartMode::Join { epoch: 0 }
        }]
    );
    assert_eq!(decide(&f).outcome, Outcome::Success);
    // The daemon's loop, Pacemaker holding the instance started: the same
    // step, reported degraded with what it does.
    f.trigger = Trigger::Reconcile;
    let d = decide(&f);
    assert!(d.steps.contains(&Step::StartEtcd {
        mode: StartMode::Join { epoch: 0 }
    }));
    assert_eq!(d.outcome, Outcome::Degraded);
    assert!(d.reason.unwrap().contains("never started"));
    // The leader never removes that member meanwhile, even when n3 keeps
    // archives of other data: they are not this member's.
    let mut g = ha(A, true);
    let l = live_mut(&mut g);
    l.members[2] = never_ran(3);
    let mut r = record("n3", false, 0);
    r.archives = 2;
    peer_mut(&mut g, "n3").record = Some(r);
    peer_mut(&mut g, "n3").etcd = ResourceState::Starting;
    assert!(!has(&g, membership_change), "{:?}", decide(&g));
}

#[test]
fn ha_a_member_that_ran_is_never_started_empty() {
    // The member has client URLs: it ran, so it may hold entries the
    // others lack. n3 waits for its removal and a learner's join instead.
    let mut f = ha_late_n3();
    f.cluster.as_mut().unwrap().members[2].started = true;
    assert!(!has(&f, |s| matches!(s, Step::StartEtcd { .. })));
    assert!(decide(&f).reason.unwrap().contains("old member 3"));
    // No client URLs, but n3's state file says it ran that very member
    // (a publication that never committed): the same.
    let mut f = ha_late_n3();
    f.data.cluster_id = Some(CLUSTER);
    f.data.member_id = Some(3);
    assert!(!has(&f, |s| matches!(s, Step::StartEtcd { .. })));
    // It answers: not a member that never ran either.
    let mut f = ha_late_n3();
    f.cluster.as_mut().unwrap().members[2].in_sync = true;
    assert!(!has(&f, |s| matches!(s, Step::StartEtcd { .. })));
}

#[test]
fn ha_a_bootstrap_begun_by_one_node_is_completed_by_the_others() {
    // n1 started `new` ahead of the others and waits without quorum; n2
    // and n3 hold nothing. n3 completes the bootstrap.
    let mut f = ha_late_n3();
    f.cluster = None;
    let mut r1 = record(A, true, 0);
    r1.formed = false;
    peer_mut(&mut f, A).record = Some(r1.clone());
    peer_mut(&mut f, B).record = Some(record(B, false, 0));
    assert_eq!(
        acts(&f),
        vec![Step::StartEtcd {
            mode: StartMode::New
        }]
    );
    // n1's data formed a cluster once: never a bootstrap beside it.
    let mut g = f.clone();
    peer_mut(&mut g, A).record = Some(record(A, true, 0));
    assert!(!has(&g, |s| matches!(s, Step::StartEtcd { .. })));
    // n1 holds a learner's data, or data of a forced cluster: the same.
    let mut g = f.clone();
    let mut r = r1.clone();
    r.learner = true;
    peer_mut(&mut g, A).record = Some(r);
    assert!(!has(&g, |s| matches!(s, Step::StartEtcd { .. })));
    let mut g = f.clone();
    let mut r = r1.clone();
    r.epoch = 1;
    peer_mut(&mut g, A).record = Some(r);
    assert!(!has(&g, |s| matches!(s, Step::StartEtcd { .. })));
    // n2 offline: wait for it (its record may be out of date).
    let mut g = f.clone();
    peer_mut(&mut g, B).online = false;
    assert!(!has(&g, |s| matches!(s, Step::StartEtcd { .. })));
    // n3's own state file says it was part of a cluster: no bootstrap.
    let mut g = f;
    g.data.cluster_id = Some(CLUSTER);
    assert!(!has(&g, |s| matches!(s, Step::StartEtcd { .. })));
}

/// n3 after its disk was replaced, asked to start: no data (it once held
/// member 3's), etcd not running, no in-sync marker.
fn ha_empty_n3_starting() -> Facts {
    let mut f = ha("n3", true);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.data = LocalData {
        exists: false,
        ..data(3, 0, &[A, B, "n3"])
    };
    f.local = LocalMarkers::default();
    f
}

#[test]
fn ha_empty_disk_waits_and_says_why() {
    // n3 after its disk was replaced: no data, etcd not running.
    let mut f = ha_empty_n3_starting();
    // n2 is down and n1 alone has no quorum: nobody answers.
    let b = peer_mut(&mut f, B);
    b.online = false;
    b.unclean = true;
    let d = decide(&f);
    assert!(!forces(&f));
    assert!(!has(&f, |s| matches!(s, Step::StartEtcd { .. })), "{d:?}");
    let why = d.reason.unwrap();
    assert!(
        why.contains("no member answers with quorum") && why.contains(B),
        "{why}"
    );
    // n2 back: the cluster answers and still lists n3's old member.
    peer_mut(&mut f, B).online = true;
    peer_mut(&mut f, B).unclean = false;
    f.cluster = Some(ha_cluster_with(member(3, "n3", false, false)));
    let why = decide(&f).reason.unwrap();
    assert!(
        why.contains("old member 3") && why.contains("remove"),
        "{why}"
    );
    assert!(!has(&f, |s| matches!(s, Step::StartEtcd { .. })));
    // Added as a learner: join.
    let c = f.cluster.as_mut().unwrap();
    c.members.pop();
    c.members.push(member(9, "n3", true, false));
    assert!(has(&f, |s| *s
        == Step::StartEtcd {
            mode: StartMode::Join { epoch: 0 }
        }));
}

#[test]
fn ha_a_start_is_done_once_etcd_runs_even_without_quorum() {
    // Pacemaker starts no other instance while this start is in flight, and
    // the majority this member waits for needs those starts: the start
    // ends (running, degraded) instead of waiting.
    let mut f = ha(A, false);
    f.trigger = Trigger::Start;
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Degraded);
    assert!(!d.steps.iter().any(|s| matches!(s, Step::Wait { .. })));
    assert!(d.reason.unwrap().contains("no quorum"));
    assert!(!forces(&f));
    // A learner catching up: the same.
    let mut f = ha("n3", true);
    f.trigger = Trigger::Start;
    let l = live_mut(&mut f);
    l.member_id = 3;
    l.is_leader = false;
    l.is_learner = true;
    l.members[2].is_learner = true;
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Degraded);
    assert!(!d.steps.iter().any(|s| matches!(s, Step::Wait { .. })));
    // Monitor and the daemon's loop still wait (and report degraded).
    f.trigger = Trigger::Monitor;
    assert!(has(&f, |s| matches!(s, Step::Wait { .. })));
}

#[test]
fn ha_an_empty_node_does_not_wait_in_its_start_and_monitors_say_degraded() {
    // n3 has an empty disk and nobody answers with quorum; n2 came back and
    // Pacemaker has yet to start its etcd. n3's start must not sit in the
    // wait (Pacemaker would hold n2's start until it ended) nor fail (it
    // would be retried ahead of n2's start until the node was banned): it
    // succeeds with the reason, and monitors report 190 until n3 is added.
    let mut f = ha_empty_n3_starting();
    peer_mut(&mut f, A).etcd = ResourceState::Starting;
    peer_mut(&mut f, B).etcd = ResourceState::Unknown;
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Success, "{d:?}");
    assert!(
        d.reason.as_deref().is_some_and(|r| r.contains("learner")),
        "{d:?}"
    );
    assert!(d.steps.iter().any(|s| matches!(s, Step::Wait { .. })));
    assert!(!has(&f, |s| matches!(s, Step::StartEtcd { .. })));
    assert!(!forces(&f));
    // Pacemaker now holds the instance started: monitors and the loop's
    // passes say degraded, never "not running" (that would be recovered
    // by a stop and a start, the same loop again).
    peer_mut(&mut f, "n3").etcd = ResourceState::Started;
    for t in [Trigger::Monitor, Trigger::Reconcile] {
        f.trigger = t;
        let d = decide(&f);
        assert_eq!(d.outcome, Outcome::Degraded, "{d:?}");
        assert!(!has(&f, |s| matches!(s, Step::StartEtcd { .. })));
    }
    // The leader added n3 as a learner: the loop starts etcd to join, and
    // a monitor in between still says degraded, not failed (Pacemaker
    // would stop and start it in the middle of the join).
    f.cluster = Some(ha_cluster_with(member(9, "n3", true, false)));
    for t in [Trigger::Monitor, Trigger::Reconcile] {
        f.trigger = t;
        let d = decide(&f);
        assert_eq!(d.outcome, Outcome::Degraded, "{d:?}");
        assert!(
            matches!(
                d.steps.last(),
                Some(Step::StartEtcd {
                    mode: StartMode::Join { .. }
                })
            ),
            "{d:?}"
        );
    }
    // Not started by Pacemaker: plainly not running.
    f.cluster = None;
    peer_mut(&mut f, "n3").etcd = ResourceState::Stopped { at: Stamp(1) };
    f.trigger = Trigger::Monitor;
    assert_eq!(decide(&f).outcome, Outcome::NotRunning);
}

// ---- Missing member directories ---------------------------------------------

/// `me` after a total outage whose data volume is not mounted: no member
/// directory, but the state file still names the cluster it was part of.
fn lost(me: &str) -> Facts {
    let mut f = fresh(me);
    let id = if me == A { ID_A } else { ID_B };
    f.data = LocalData {
        exists: false,
        ..data(id, 2, &[A, B])
    };
    for n in &mut f.pacemaker.nodes {
        let r = n.record.as_mut().expect("a record");
        r.has_data = false;
        r.formed = true;
        r.epoch = 2;
        r.cluster_id = Some(CLUSTER);
    }
    f
}

#[test]
fn both_member_dirs_missing_no_bootstrap_each_refuses_and_names_the_restore() {
    for me in [A, B] {
        let f = lost(me);
        let d = decide(&f);
        assert!(
            !d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })),
            "{me} must not start anything: {d:?}"
        );
        let (reason, cmd) = d.refusal().expect("must refuse");
        assert!(reason.contains("/var/lib/etcd/member"), "{reason}");
        assert!(reason.contains(&format!("{CLUSTER:x}")), "{reason}");
        assert_eq!(
            cmd,
            format!("etcd-warden recover restore-snapshot --node {me} --snapshot <FILE>")
        );
        // The start does not hold Pacemaker up; monitors say degraded.
        assert_eq!(d.outcome, Outcome::Success);
        let mut m = lost(me);
        m.trigger = Trigger::Monitor;
        peer_mut(&mut m, me).etcd = ResourceState::Started;
        assert_eq!(decide(&m).outcome, Outcome::Degraded);
        // With an archive here, the command restores it instead.
        let mut a = lost(me);
        a.data.archives = 1;
        let da = decide(&a);
        let (_, cmd) = da.refusal().expect("must refuse");
        assert_eq!(
            cmd,
            format!("etcd-warden recover restore-archive --node {me}")
        );
    }
    // Of one epoch, only n2 keeps an archive: both name it, n1 too.
    let mut f = lost(A);
    peer_mut(&mut f, B).record.as_mut().unwrap().archives = 1;
    let d = decide(&f);
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert_eq!(
        cmd, "etcd-warden recover restore-archive --node n2",
        "{reason}"
    );
    let mut f = lost(B);
    f.data.archives = 1;
    let d = decide(&f);
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert_eq!(
        cmd, "etcd-warden recover restore-archive --node n2",
        "{reason}"
    );
    // The peer's state file names a newer epoch: its data was the newest.
    let mut f = lost(A);
    peer_mut(&mut f, B).record.as_mut().unwrap().epoch = 3;
    let d = decide(&f);
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("newest data known was on n2"), "{reason}");
    assert!(cmd.contains("--node n2"), "{cmd}");
}

#[test]
fn a_blank_node_never_bootstraps_beside_a_peer_that_lost_its_data() {
    // n1 has no state at all (a new machine); n2's data is gone but its
    // state file names the cluster: a bootstrap would replace it.
    let mut f = fresh(A);
    let r = peer_mut(&mut f, B).record.as_mut().unwrap();
    r.formed = true;
    r.epoch = 1;
    r.cluster_id = Some(CLUSTER);
    let d = decide(&f);
    assert!(
        !d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })),
        "{d:?}"
    );
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("n2 lost its data"), "{reason}");
    assert!(cmd.contains("--node n2"), "{cmd}");
}

#[test]
fn a_lone_node_without_its_member_dir_refuses_and_says_where() {
    let mut f = lost(A);
    f.pacemaker.quorate = false;
    let b = peer_mut(&mut f, B);
    b.online = false;
    b.record = None;
    b.etcd = ResourceState::Unknown;
    for trigger in [Trigger::Start, Trigger::Monitor, Trigger::Reconcile] {
        f.trigger = trigger;
        let d = decide(&f);
        let (reason, cmd) = d.refusal().expect("must refuse");
        assert!(reason.contains("/var/lib/etcd/member"), "{reason}");
        assert!(reason.contains("n2 has not said"), "{reason}");
        assert!(cmd.contains("--node n1"), "{cmd}");
        assert!(!d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })));
    }
}

#[test]
fn one_member_dir_missing_the_node_with_data_forces_and_the_other_joins() {
    // n1's data is gone (state file kept); n2's is intact, a voter of the
    // two-member cluster, running without quorum after the outage.
    let mut b = healthy(B);
    b.trigger = Trigger::Reconcile;
    b.local = LocalMarkers::default();
    b.data.epoch = 2;
    *live_mut(&mut b) = live(
        ID_B,
        vec![member(ID_A, A, false, false), member(ID_B, B, false, true)],
        false,
        false,
    );
    let a = peer_mut(&mut b, A);
    let r = a.record.as_mut().unwrap();
    r.has_data = false;
    r.epoch = 2;
    a.etcd = ResourceState::Started;
    // n1 runs no member and holds nothing newer, but after a total outage
    // n2's persisted commit index may lag its log: without the in-sync
    // marker it refuses and names itself as the node with the only data.
    let d = decide(&b);
    assert!(!forces(&b), "{d:?}");
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("holds the only data"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n2");
    // With the marker (n1 crashed and came back empty while n2 ran on as a
    // quorate voter, no fence yet): n2 claims, then forces.
    b.local = LocalMarkers {
        in_sync_boot: Some(boot(B)),
    };
    assert_eq!(
        acts(&b),
        vec![Step::PublishRecord, Step::SetClaim { epoch: 3 }]
    );
    peer_mut(&mut b, B).claim = Some(Claim {
        owner: B.into(),
        boot_id: boot(B),
        epoch: 3,
        at: Stamp(200),
    });
    assert!(has(&b, |s| *s == Step::ForceNewCluster { epoch: 3 }));
    // n1's state file names a newer epoch: n2's data may lack its writes.
    let mut newer = b.clone();
    peer_mut(&mut newer, A).record.as_mut().unwrap().epoch = 3;
    assert!(!forces(&newer), "{:?}", decide(&newer));
    // n1's daemon has not said anything yet: no proof.
    let mut silent = b.clone();
    peer_mut(&mut silent, A).record = None;
    assert!(!forces(&silent));
    // n1 (no data) waits for n2's cluster, without holding its start.
    let mut a = lost(A);
    let r = peer_mut(&mut a, B).record.as_mut().unwrap();
    r.has_data = true;
    let d = decide(&a);
    assert!(!d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })));
    assert_eq!(d.outcome, Outcome::Success, "{d:?}");
    assert!(d.refusal().is_none());
}

/// A compound fault: both nodes lost power, n1 came back
/// with its member directory gone (a replaced disk), n2 with its data,
/// whose member runs without quorum and waits for n1's vote. In a
/// two-member membership every acknowledged write is in n2's log, so n1
/// restarts its old voter on an empty directory and n2's member fills it:
/// no operator, no force. Only beside a peer whose data is a voter's of
/// the same cluster at n1's epoch, whose etcd runs, and only for n1's own
/// voter.
#[test]
fn one_member_dir_missing_beside_the_peers_waiting_member_restarts_the_old_voter() {
    let mut a = lost(A);
    let b = peer_mut(&mut a, B);
    b.etcd = ResourceState::Started;
    b.record.as_mut().expect("a record").has_data = true;
    let reseed = Step::StartEtcd {
        mode: StartMode::Reseed,
    };
    let d = decide(&a);
    assert!(d.steps.contains(&reseed), "{d:?}");
    assert_eq!(d.outcome, Outcome::Success, "{d:?}");
    assert!(d.refusal().is_none(), "{d:?}");
    let reason = d.reason.clone().unwrap_or_default();
    assert!(reason.contains("n2's member fills"), "{reason}");

    // Every case below keeps n1 from restarting its old voter.
    let not_reseeded = |f: &Facts, what: &str| {
        let d = decide(f);
        assert!(!d.steps.contains(&reseed), "{what}: {d:?}");
    };
    let with_peer = |change: &dyn Fn(&mut NodeView)| {
        let mut f = a.clone();
        change(peer_mut(&mut f, B));
        f
    };
    // n2's etcd is not running: nothing serves the member list yet.
    not_reseeded(
        &with_peer(&|n| n.etcd = ResourceState::Starting),
        "peer etcd starting",
    );
    // n2 is unclean or offline.
    not_reseeded(&with_peer(&|n| n.unclean = true), "peer unclean");
    not_reseeded(&with_peer(&|n| n.online = false), "peer offline");
    // n2's data is a learner's, older, of another cluster, or a leaver's.
    let rec = |change: &dyn Fn(&mut DataRecord)| {
        with_peer(&|n| change(n.record.as_mut().expect("a record")))
    };
    not_reseeded(&rec(&|r| r.learner = true), "learner's data");
    not_reseeded(&rec(&|r| r.epoch = 1), "older data");
    not_reseeded(&rec(&|r| r.epoch = 3), "newer data");
    not_reseeded(
        &rec(&|r| r.cluster_id = Some(CLUSTER + 1)),
        "another cluster",
    );
    not_reseeded(
        &rec(&|r| {
            r.departed = true;
            r.removed = true;
        }),
        "a leaver's data",
    );
    // n2 holds a valid claim: it is about to force.
    not_reseeded(
        &with_peer(&|n| {
            n.claim = Some(Claim {
                owner: B.into(),
                boot_id: boot(B),
                epoch: 3,
                at: Stamp(200),
            })
        }),
        "peer claims",
    );
    // n1 left gracefully, or its lost data was a join in flight.
    let mut departed = a.clone();
    departed.data.departed = true;
    not_reseeded(&departed, "departed");
    let mut joining = a.clone();
    joining.data.joining = true;
    not_reseeded(&joining, "joining");
    // A quorate cluster answers: n1 joins it as a learner instead.
    let mut quorate = a.clone();
    quorate.cluster = Some(ClusterView {
        cluster_id: CLUSTER,
        epoch: 3,
        members: vec![member(ID_B, B, false, true)],
        leave_lock: None,
    });
    not_reseeded(&quorate, "quorate cluster");
}

/// n2's view after its epoch-3 member directory went missing, beside n1
/// whose etcd runs on data of `n1_epoch` (a learner's if `learner`).
fn n2_lost_epoch_3_beside(n1_epoch: u64, learner: bool) -> Facts {
    let mut f = lost(B);
    f.data.epoch = 3;
    let a = peer_mut(&mut f, A);
    a.etcd = ResourceState::Started;
    let r = a.record.as_mut().expect("a record");
    r.has_data = true;
    r.epoch = n1_epoch;
    r.learner = learner;
    f
}

/// n1 was lost and fenced, n2 forced epoch 3 and took writes alone, then
/// n2 lost power and its member directory. n1's data (epoch 2) lacks those
/// writes, and its member waits for n2's vote: no automatic path is safe.
/// n2 refuses and names what is missing, where, the node whose state file
/// names the newest data (itself), and the restore.
#[test]
fn the_newest_member_dir_missing_beside_older_data_refuses_and_names_the_restore() {
    let mut f = n2_lost_epoch_3_beside(2, false);
    for trigger in [Trigger::Start, Trigger::Monitor, Trigger::Reconcile] {
        f.trigger = trigger;
        let d = decide(&f);
        assert!(
            !d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })),
            "{d:?}"
        );
        let (reason, cmd) = d.refusal().expect("must refuse");
        assert!(reason.contains("/var/lib/etcd/member"), "{reason}");
        assert!(
            reason.contains("n1 holds only older data (epoch 2)"),
            "{reason}"
        );
        assert!(reason.contains("newest data known was on n2"), "{reason}");
        assert_eq!(
            cmd,
            "etcd-warden recover restore-snapshot --node n2 --snapshot <FILE>"
        );
    }
    // The start returns at once, with the command first in the reason.
    f.trigger = Trigger::Start;
    let d = decide(&f);
    assert_eq!(d.outcome, Outcome::Success);
    assert!(
        d.reason.as_deref().is_some_and(
            |r| r.starts_with("resolve with 'etcd-warden recover restore-snapshot --node n2")
        ),
        "{d:?}"
    );
    // With an archive on n2, the command restores it.
    f.data.archives = 1;
    let d = decide(&f);
    let (_, cmd) = d.refusal().expect("must refuse");
    assert_eq!(cmd, "etcd-warden recover restore-archive --node n2");
    // n1, its epoch-2 member running without quorum, names the same node
    // and command instead of waiting for a fence of an online peer.
    let mut older = healthy(A);
    older.trigger = Trigger::Monitor;
    older.local = LocalMarkers::default();
    older.data.epoch = 2;
    *live_mut(&mut older) = live(
        ID_A,
        vec![member(ID_A, A, false, true), member(ID_B, B, false, false)],
        false,
        false,
    );
    let r = peer_mut(&mut older, B).record.as_mut().unwrap();
    r.has_data = false;
    r.epoch = 3;
    let d = decide(&older);
    assert!(!forces(&older), "{d:?}");
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("newest data known was on n2"), "{reason}");
    assert_eq!(
        cmd,
        "etcd-warden recover restore-snapshot --node n2 --snapshot <FILE>"
    );
    assert_eq!(d.outcome, Outcome::Degraded);
    // n1's data as new as n2's state file says: n2 waits to join it.
    let current = n2_lost_epoch_3_beside(3, false);
    let d = decide(&current);
    assert!(d.refusal().is_none(), "{d:?}");
}

/// The same loss right after n1 rejoined n2's cluster as a learner that
/// was not promoted yet: a learner counts for no commit, so its data may
/// lack acknowledged writes. Its record says so (`learner`), and n2
/// refuses and names itself instead of waiting on that learner.
#[test]
fn the_newest_member_dir_missing_beside_a_learner_refuses_and_names_the_restore() {
    let f = n2_lost_epoch_3_beside(3, true);
    let d = decide(&f);
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(
        reason.contains("n1 holds only a learner's data"),
        "{reason}"
    );
    assert!(reason.contains("newest data known was on n2"), "{reason}");
    assert_eq!(
        cmd,
        "etcd-warden recover restore-snapshot --node n2 --snapshot <FILE>"
    );
    assert!(!d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })));
}

/// What a node publishes about its data: a learner's data that has not
/// been a voter yet is no holder's copy. A join starts it (no voter
/// membership, or the join not answered yet); the first look as a voter
/// with quorum lists this node among the voters and ends it.
#[test]
fn a_learners_record_says_it_holds_no_voters_copy() {
    use warden_failover::decide::expected_record;
    let voter = healthy(A);
    assert!(!expected_record(&voter).learner);
    assert!(expected_record(&voter).has_data);
    let mut joined = healthy(A);
    joined.data.voters = Vec::new();
    assert!(expected_record(&joined).learner);
    assert!(expected_record(&joined).has_data);
    let mut joining = healthy(A);
    joining.data.joining = true;
    assert!(expected_record(&joining).learner);
    // A bootstrap that has not formed a cluster has no cluster id yet: no
    // learner (a peer may complete that bootstrap).
    let mut bootstrap = fresh(A);
    bootstrap.data.exists = true;
    assert!(!expected_record(&bootstrap).learner);
    // No data, no learner.
    assert!(!expected_record(&lost(A)).learner);
}

#[test]
fn a_stale_member_steps_aside_when_the_peer_forced_a_newer_epoch() {
    // n1 came back from a fence and runs its old two-member data (epoch 1,
    // no quorum); n2 forced epoch 2 meanwhile and is online.
    let mut f = healthy(A);
    f.trigger = Trigger::Reconcile;
    f.local = LocalMarkers::default();
    f.data.epoch = 1;
    *live_mut(&mut f) = live(
        ID_A,
        vec![member(ID_A, A, false, true), member(ID_B, B, false, false)],
        false,
        false,
    );
    peer_mut(&mut f, B).record.as_mut().unwrap().epoch = 2;
    assert!(has(&f, |s| *s == Step::StopEtcd), "{:?}", decide(&f));
    assert!(!forces(&f));
}

#[test]
fn every_bootstrap_gets_a_fresh_token_that_both_nodes_agree_on() {
    use warden_failover::decide::bootstrap_token;
    let (a, b) = (fresh(A), fresh(B));
    assert_eq!(bootstrap_token(&a), bootstrap_token(&b));
    // Another boot of either node: another token, so other etcd ids.
    let mut a2 = fresh(A);
    a2.boot_id = "n1-boot2".into();
    assert_ne!(bootstrap_token(&a2), bootstrap_token(&a));
    // Completing a half-done bootstrap uses the peer's recorded token.
    let mut c = fresh(A);
    let r = peer_mut(&mut c, B).record.as_mut().unwrap();
    r.has_data = true;
    r.formed = false;
    r.bootstrap_token = Some("etcd-warden:n1=x,n2=y".into());
    assert_eq!(bootstrap_token(&c), "etcd-warden:n1=x,n2=y");
}

// ---- operator actions ---------------------------------------------------------

/// Sets one of the operator's pauses in the facts.
type Pause = fn(&mut Facts);

/// Maintenance mode, an unmanaged etcd resource, or a node in maintenance:
/// no automatic step at all (no force with a proof at hand, no restart of a
/// dead etcd), the reason says which, and the in-sync marker is kept: a
/// pause changes nothing about the data (an etcd exit, which a hand stop
/// is, clears it when the daemon finds etcd not running).
#[test]
fn maintenance_pauses_every_automatic_step() {
    let pauses: [(&str, Pause); 4] = [
        ("cluster in maintenance mode", |f| {
            f.pacemaker.maintenance_mode = true
        }),
        ("unmanaged", |f| f.pacemaker.etcd_unmanaged = true),
        ("node n1 in maintenance", |f| {
            peer_mut(f, A).maintenance = true
        }),
        ("node n2 in maintenance", |f| {
            peer_mut(f, B).maintenance = true
        }),
    ];
    for (why, set) in pauses {
        // A proof and the marker: without the pause this claims.
        let mut f = peer_lost();
        fence(&mut f, B, 150);
        set(&mut f);
        let d = decide(&f);
        assert_eq!(acts(&f), Vec::<Step>::new(), "{why}: {d:?}");
        let reason = d.reason.clone().unwrap_or_default();
        assert!(
            reason.starts_with("automatic failover paused") && reason.contains(why),
            "{why}: {reason}"
        );
        // etcd dead where Pacemaker believes it started: not restarted.
        let mut f = healthy(A);
        f.trigger = Trigger::Reconcile;
        f.etcd = EtcdView::NotRunning;
        set(&mut f);
        assert_eq!(acts(&f), Vec::<Step>::new(), "{why}: {:?}", decide(&f));
        // A healthy pair stays healthy and says it is paused.
        let mut f = healthy(A);
        set(&mut f);
        let d = decide(&f);
        assert_eq!(d.outcome, Outcome::Success, "{why}: {d:?}");
        // A stop only an operator can send (Pacemaker sends none for an
        // unmanaged resource): etcd stops in place, without leaving.
        let mut f = healthy(A);
        f.trigger = Trigger::Stop;
        set(&mut f);
        assert_eq!(
            acts(&f),
            vec![Step::ClearInSync, Step::StopEtcd],
            "{why}: {:?}",
            decide(&f)
        );
    }
}

/// A partition cuts the follower off before it learns of the leader's
/// last commits; the node that wins the fence race then forces from its
/// own log. So the leader belongs on that node: a leader elsewhere hands
/// its leadership over, and only in a healthy pair.
#[test]
fn a_leader_on_the_fence_race_loser_hands_leadership_to_the_winner() {
    let leading_b = || {
        let mut f = healthy(B);
        f.trigger = Trigger::Reconcile;
        f.pacemaker.fence_race_winner = Some(A.into());
        let l = live_mut(&mut f);
        l.is_leader = true;
        f
    };
    let transfers = |f: &Facts| {
        decide(f)
            .steps
            .into_iter()
            .filter(|s| matches!(s, Step::TransferLeadership { .. }))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        transfers(&leading_b()),
        vec![Step::TransferLeadership {
            id: ID_A,
            node: A.into()
        }]
    );

    // The winner leads already, or no node wins: nothing to move.
    let mut f = leading_b();
    f.pacemaker.fence_race_winner = Some(B.into());
    assert!(transfers(&f).is_empty());
    let mut f = leading_b();
    f.pacemaker.fence_race_winner = None;
    assert!(transfers(&f).is_empty());
    let mut f = healthy(A);
    f.trigger = Trigger::Reconcile;
    f.pacemaker.fence_race_winner = Some(A.into());
    assert!(transfers(&f).is_empty(), "a follower never transfers");

    // Only in a healthy pair, and never from a monitor.
    let mut f = leading_b();
    peer_mut(&mut f, A).online = false;
    assert!(transfers(&f).is_empty());
    let mut f = leading_b();
    peer_mut(&mut f, A).etcd = ResourceState::Stopping;
    assert!(transfers(&f).is_empty());
    let mut f = leading_b();
    live_mut(&mut f).members[0].in_sync = false;
    assert!(
        transfers(&f).is_empty(),
        "the winner's member does not answer"
    );
    let mut f = leading_b();
    live_mut(&mut f).members[0].is_learner = true;
    assert!(transfers(&f).is_empty(), "beside a learner");
    let mut f = leading_b();
    f.trigger = Trigger::Monitor;
    assert!(transfers(&f).is_empty());
    let mut f = leading_b();
    f.pacemaker.maintenance_mode = true;
    assert!(transfers(&f).is_empty(), "maintenance pauses it");
}

/// n1 was lost and fenced, n2 decided a forced restart to epoch 3 (its
/// state file: epoch 2, pending 3) and took writes alone before any look
/// confirmed the epoch, then lost power and its member directory. n1's
/// data at epoch 2 looks as new as n2's confirmed epoch, but lacks what n2
/// may have acknowledged alone: n2 neither reseeds from it nor waits to
/// join it; it refuses, names the unconfirmed force and itself.
#[test]
fn an_unconfirmed_force_counts_when_the_member_dir_is_lost() {
    let mut f = n2_lost_epoch_3_beside(2, false);
    f.data.epoch = 2;
    f.data.pending_epoch = Some(3);
    for trigger in [Trigger::Start, Trigger::Monitor, Trigger::Reconcile] {
        f.trigger = trigger;
        let d = decide(&f);
        assert!(
            !d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })),
            "{d:?}"
        );
        let (reason, cmd) = d.refusal().expect("must refuse");
        assert!(
            reason.contains("forced a new cluster (epoch 3) that was never confirmed"),
            "{reason}"
        );
        assert!(
            reason
                .contains("n1 holds only older data (epoch 2), which lacks the writes of epoch 3"),
            "{reason}"
        );
        assert!(reason.contains("newest data known was on n2"), "{reason}");
        assert_eq!(
            cmd,
            "etcd-warden recover restore-snapshot --node n2 --snapshot <FILE>"
        );
    }
    // The record says so, for the peer.
    let r = warden_failover::decide::expected_record(&f);
    assert_eq!((r.epoch, r.pending_epoch), (2, Some(3)));
    // Without the pending epoch (the force confirmed as refuted), n1's
    // epoch-2 data is current: n2 restarts its voter beside it.
    f.data.pending_epoch = None;
    f.trigger = Trigger::Start;
    let d = decide(&f);
    assert!(d.refusal().is_none(), "{d:?}");
}

/// The other side of the same loss: n1's epoch-2 member runs without
/// quorum and n2's record says its data is gone with a forced restart to
/// epoch 3 unconfirmed. n2 holds no data n1 lacks only if nothing was
/// acknowledged alone, which nobody can tell: n1 neither takes n2 for a
/// peer without data (a force proof) nor waits for a fence; it names n2
/// and the restore.
#[test]
fn a_peers_unconfirmed_force_is_no_proof_that_it_holds_nothing() {
    let mut f = healthy(A);
    f.trigger = Trigger::Monitor;
    f.data.epoch = 2;
    *live_mut(&mut f) = live(
        ID_A,
        vec![member(ID_A, A, false, true), member(ID_B, B, false, false)],
        false,
        false,
    );
    let r = peer_mut(&mut f, B).record.as_mut().unwrap();
    r.has_data = false;
    r.epoch = 2;
    r.pending_epoch = Some(3);
    let d = decide(&f);
    assert!(!forces(&f), "{d:?}");
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("epoch 3 (a forced restart"), "{reason}");
    assert!(reason.contains("newest data known was on n2"), "{reason}");
    assert_eq!(
        cmd,
        "etcd-warden recover restore-snapshot --node n2 --snapshot <FILE>"
    );
    // A confirmed-equal peer without data is the proof it always was.
    peer_mut(&mut f, B).record.as_mut().unwrap().pending_epoch = None;
    assert!(forces(&f), "{:?}", decide(&f));
}

/// After a total outage n1 comes back with its data intact but without its
/// state file (an OS disk reimaged): its ids come from the data, its epoch
/// is unknown. n2's record (epoch 1) lists n1's member as a voter of the
/// same cluster, so n1's data is part of that membership: n1 starts it,
/// never archiving it as stale for n2's higher epoch.
fn n1_state_lost() -> Facts {
    let mut f = healthy(A);
    f.trigger = Trigger::Start;
    f.etcd = EtcdView::NotRunning;
    f.local = LocalMarkers::default();
    f.data = LocalData {
        exists: true,
        formed: true,
        cluster_id: Some(CLUSTER),
        member_id: Some(ID_A),
        state_lost: true,
        member_dir: "/var/lib/etcd/member".into(),
        ..LocalData::default()
    };
    let b = peer_mut(&mut f, B);
    let r = b.record.as_mut().expect("a record");
    r.epoch = 1;
    r.voter_ids = [(A.to_string(), ID_A), (B.to_string(), ID_B)].into();
    f
}

#[test]
fn a_lost_state_file_beside_a_peer_listing_its_member_starts_the_data() {
    let f = n1_state_lost();
    let d = decide(&f);
    assert!(
        d.steps.contains(&Step::StartEtcd {
            mode: StartMode::Existing
        }),
        "{d:?}"
    );
    assert!(
        !has(&f, |s| matches!(s, Step::ArchiveDataDir { .. })),
        "{d:?}"
    );
    // The record says the epoch is unknown, not 0.
    let r = warden_failover::decide::expected_record(&f);
    assert!(r.state_lost && r.has_data && r.epoch == 0, "{r:?}");
    // Running without quorum beside n2's higher epoch: not stopped as stale.
    let mut running = f.clone();
    running.trigger = Trigger::Monitor;
    running.etcd = EtcdView::Running(live(
        ID_A,
        vec![member(ID_A, A, false, true), member(ID_B, B, false, false)],
        false,
        false,
    ));
    assert!(
        !has(&running, |s| matches!(s, Step::StopEtcd)),
        "{:?}",
        decide(&running)
    );
}

/// The same loss beside a peer whose record does not list n1's member (it
/// went on without it, or names another member for n1): which data is
/// newest is unknown, so n1 starts nothing, refuses and names the peer,
/// whose state file is intact, and the command that keeps its data.
#[test]
fn a_lost_state_file_beside_a_peer_not_listing_its_member_refuses() {
    let mut f = n1_state_lost();
    peer_mut(&mut f, B)
        .record
        .as_mut()
        .unwrap()
        .voter_ids
        .insert(A.to_string(), ID_B2);
    let d = decide(&f);
    assert!(
        !d.steps
            .iter()
            .any(|s| matches!(s, Step::StartEtcd { .. } | Step::ArchiveDataDir { .. })),
        "{d:?}"
    );
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("state file is missing"), "{reason}");
    assert!(reason.contains("epoch unknown"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover keep-data-of --node n2");
    // A quorate cluster that does not list n1's member: archive and join.
    let mut f = n1_state_lost();
    f.cluster = Some(ClusterView {
        cluster_id: CLUSTER,
        epoch: 1,
        members: vec![member(ID_B, B, false, true)],
        leave_lock: None,
    });
    assert!(
        has(&f, |s| matches!(s, Step::ArchiveDataDir { .. })),
        "{:?}",
        decide(&f)
    );
}

/// A start of etcd on this node failed while its daemon was down or
/// restarting (the agent found no daemon to answer): once the daemon
/// answers, it clears that failure so that Pacemaker starts etcd again,
/// beside whatever else it decides; not while the cluster is in
/// maintenance.
#[test]
fn a_start_failed_without_the_daemon_is_cleared() {
    let mut f = healthy(B);
    f.trigger = Trigger::Reconcile;
    f.etcd = EtcdView::NotRunning;
    peer_mut(&mut f, B).etcd = ResourceState::Unknown;
    peer_mut(&mut f, B).start_failed_without_daemon = Some("etcd".into());
    let clear = Step::ClearFailedStart {
        resource: "etcd".into(),
    };
    assert!(decide(&f).steps.contains(&clear), "{:?}", decide(&f));
    f.pacemaker.maintenance_mode = true;
    assert!(!decide(&f).steps.contains(&clear), "{:?}", decide(&f));
    f.pacemaker.maintenance_mode = false;
    peer_mut(&mut f, B).start_failed_without_daemon = None;
    assert!(!decide(&f).steps.contains(&clear), "{:?}", decide(&f));
}

/// n1 forced, added n2 as a learner and lost power with its state file
/// before n2 was a voter (a campaign round, seed 6035726886597519176):
/// n2's learner has no leader and can never be one. n2's record says its
/// data is a learner's added by n1's member, so everything it holds came
/// from n1's data: n1 starts its data (raft then needs the votes n1's own
/// membership names, and a learner votes for a leader that lists it as a
/// voter). With no record of who added the learner (a daemon from before
/// the record said so), n1 refuses and names itself: a learner's data
/// counts for no commit, so n1's data is the newest.
#[test]
fn a_lost_state_file_beside_its_own_learner_starts_the_data() {
    let learner = |added_by: &[(&str, u64)]| {
        let mut f = n1_state_lost();
        let r = peer_mut(&mut f, B).record.as_mut().unwrap();
        r.epoch = 37;
        r.formed = false;
        r.learner = true;
        r.voter_ids = Default::default();
        r.added_by = added_by
            .iter()
            .map(|(n, id)| (n.to_string(), *id))
            .collect();
        f
    };
    let f = learner(&[(A, ID_A)]);
    let d = decide(&f);
    assert!(
        d.steps.contains(&Step::StartEtcd {
            mode: StartMode::Existing
        }),
        "{d:?}"
    );
    assert!(
        d.reason
            .as_deref()
            .is_some_and(|r| r.contains("added n2's learner")),
        "{d:?}"
    );
    assert!(
        !has(&f, |s| matches!(s, Step::ArchiveDataDir { .. })),
        "{d:?}"
    );
    // Added by nobody the record names (a join an earlier daemon
    // recorded): no start, and the refusal names n1, whose voter data is
    // the newest. Added by another member of n1 (this data is older than
    // that member's was): which is newest is unknown, and the refusal names
    // the peer, as for any record that does not list n1's member.
    for (other, wanted) in [
        (
            learner(&[]),
            "etcd-warden recover force-new-cluster --node n1",
        ),
        (
            learner(&[(A, ID_B2)]),
            "etcd-warden recover keep-data-of --node n2",
        ),
    ] {
        let d = decide(&other);
        assert!(
            !d.steps
                .iter()
                .any(|s| matches!(s, Step::StartEtcd { .. } | Step::ArchiveDataDir { .. })),
            "{d:?}"
        );
        let (_, cmd) = d.refusal().expect("must refuse");
        assert_eq!(cmd, wanted);
    }
    // The learner's own record publishes who added it, only while it is a
    // learner's data.
    let mut joined = healthy(B);
    joined.data.voters = Vec::new();
    joined.data.added_by = [(A.to_string(), ID_A)].into();
    let r = warden_failover::decide::expected_record(&joined);
    assert!(r.learner, "{r:?}");
    assert_eq!(r.added_by, joined.data.added_by);
    joined.data.voters = vec![A.to_string(), B.to_string()];
    assert!(
        warden_failover::decide::expected_record(&joined)
            .added_by
            .is_empty(),
        "a voter's record names no one who added it"
    );
}

/// A replaced machine (no data, no state file, no archive) beside n1,
/// whose member runs without quorum after a total outage, waiting for the
/// vote of n2's old member. n2 names n1 and the command that lets n1 go on
/// alone; n1 takes the blank peer as proof that no other member runs but,
/// without the in-sync marker, refuses with the same command; with the
/// marker (n1 ran throughout), it forces by itself.
#[test]
fn a_replaced_machine_beside_a_waiting_member_names_the_command() {
    let mut blank = fresh(B);
    blank.trigger = Trigger::Start;
    let a = peer_mut(&mut blank, A);
    a.etcd = ResourceState::Started;
    *a.record.as_mut().unwrap() = record(A, true, 2);
    let d = decide(&blank);
    assert!(
        !d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })),
        "{d:?}"
    );
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("new or replaced machine"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n1");

    let mut survivor = healthy(A);
    survivor.local = LocalMarkers::default();
    survivor.data.epoch = 2;
    *live_mut(&mut survivor) = live(
        ID_A,
        vec![member(ID_A, A, false, true), member(ID_B, B, false, false)],
        false,
        false,
    );
    *peer_mut(&mut survivor, B).record.as_mut().unwrap() = record(B, false, 0);
    let d = decide(&survivor);
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("new or replaced machine"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n1");
    survivor.local = LocalMarkers {
        in_sync_boot: Some(boot(A)),
    };
    assert!(
        has(&survivor, |s| matches!(s, Step::SetClaim { .. })),
        "{:?}",
        decide(&survivor)
    );
}

/// A replaced machine (n2: no data, no state file, no archive) beside n1,
/// whose data is a learner's that was never promoted (n1 rejoined as a
/// learner and n2, the voter it learnt from, was then replaced). A
/// learner's data may lack acknowledged writes, but it is the newest
/// there is, whatever n1's archives hold (they were made before n1
/// rejoined): both name `force-new-cluster` on n1, which etcd cannot do
/// with a learner's data itself, so the command restores its backend as a
/// new cluster. A campaign round ended stuck when both named
/// `restore-archive` on n1, which refuses while n1 has data in place.
#[test]
fn a_replaced_voter_beside_its_learner_names_the_learners_node() {
    let mut blank = fresh(B);
    blank.trigger = Trigger::Start;
    let a = peer_mut(&mut blank, A);
    a.etcd = ResourceState::Started;
    let mut learner = record(A, true, 16);
    learner.learner = true;
    learner.formed = false;
    learner.archives = 12;
    *a.record.as_mut().unwrap() = learner;
    let d = decide(&blank);
    assert!(
        !d.steps.iter().any(|s| matches!(s, Step::StartEtcd { .. })),
        "{d:?}"
    );
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("holds only a learner's data"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n1");

    let mut me = healthy(A);
    me.local = LocalMarkers::default();
    me.data.epoch = 16;
    me.data.voters = vec![];
    me.data.archives = 12;
    *live_mut(&mut me) = live(
        ID_A,
        vec![member(ID_A, A, true, true), member(ID_B, B, false, false)],
        false,
        false,
    );
    *peer_mut(&mut me, B).record.as_mut().unwrap() = record(B, false, 0);
    let d = decide(&me);
    let (reason, cmd) = d.refusal().expect("must refuse");
    assert!(reason.contains("new or replaced machine"), "{reason}");
    assert_eq!(cmd, "etcd-warden recover force-new-cluster --node n1");
}

/// Right after a start that held back and returned success (Pacemaker
/// shows the instance started, no etcd runs), every monitor agrees with
/// it: degraded (190) with the reason, whether the node still waits or
/// the daemon now starts etcd to join, complete a bootstrap or restart its
/// member on an empty directory. Never failed: Pacemaker would recover the
/// member it just started with a stop and a start.
#[test]
fn monitors_after_a_held_start_report_degraded_with_the_reason() {
    let mut cases: Vec<(&str, Facts)> = Vec::new();
    // Waiting for the voter to add this node as a learner.
    let mut waiting = fresh(B);
    let a = peer_mut(&mut waiting, A);
    a.etcd = ResourceState::Started;
    *a.record.as_mut().expect("a record") = record(A, true, 1);
    waiting.data.archives = 1;
    waiting.cluster = Some(ClusterView {
        cluster_id: CLUSTER,
        epoch: 1,
        members: vec![member(ID_A, A, false, true)],
        leave_lock: None,
    });
    cases.push(("waiting to be added", waiting.clone()));
    // The learner was added: the daemon starts etcd to join.
    let mut join = waiting;
    join.cluster = Some(ClusterView {
        members: vec![
            member(ID_A, A, false, true),
            MemberInfo {
                started: false,
                ..member(ID_B2, B, true, false)
            },
        ],
        ..join.cluster.clone().expect("a cluster")
    });
    cases.push(("joining", join));
    // Completing a bootstrap the peer began alone.
    let mut bootstrap = fresh(B);
    let a = peer_mut(&mut bootstrap, A);
    a.etcd = ResourceState::Started;
    let r = a.record.as_mut().expect("a record");
    r.has_data = true;
    r.formed = false;
    cases.push(("completing the bootstrap", bootstrap));
    for (what, mut f) in cases {
        f.trigger = Trigger::Monitor;
        peer_mut(&mut f, B).etcd = ResourceState::Started;
        let d = decide(&f);
        assert_eq!(d.outcome, Outcome::Degraded, "{what}: {d:?}");
        assert!(
            d.reason.as_deref().is_some_and(|r| !r.is_empty()),
            "{what}: {d:?}"
        );
    }
}
