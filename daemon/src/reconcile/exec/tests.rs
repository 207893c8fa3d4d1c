//! The step executor against recording fakes behind the ports.

use std::sync::Mutex;

use warden_failover::{
    EtcdView, FenceEvent, FenceStatus, LocalData, LocalMarkers, NodeView, PacemakerView,
    ResourceState, Stamp, StartMode as Mode, Topology, Trigger,
};

use super::force::force_allowed;
use super::membership::MEMBERSHIP_ATTEMPT;
use super::start::{RESTART_ANSWER, initial_cluster};
use super::*;
use crate::etcd::conf::StartMode;
use crate::etcd::raft_progress::{ProgressError, RaftProgress};
use crate::etcd::{EtcdError, Member, MemberStatus};
use crate::pacemaker::PcmkError;
use crate::reconcile::ports::PeerDown;
use crate::reconcile::ports::{EtcdReads, Probe};
use crate::supervise::ProcState;

const CONF: &str = r#"
node_name = "a"
topology = "two-node"

[[nodes]]
name = "a"
peer_urls = ["http://127.0.0.1:12380"]
client_urls = ["http://127.0.0.1:12379"]

[[nodes]]
name = "b"
peer_urls = ["http://127.0.0.1:22380"]
client_urls = ["http://127.0.0.1:22379"]
"#;

fn settings() -> Settings {
    crate::config::from_texts(&[("/c.toml".into(), CONF.to_string())]).unwrap()
}

/// Records every call; fails the ones told to.
#[derive(Debug, Default)]
struct Fake {
    calls: Mutex<Vec<String>>,
    /// Errors to return, in order, for membership calls.
    etcd_errors: Mutex<Vec<EtcdError>>,
    fail_attrs: bool,
    /// The state file's epoch as seen at the force (must be written first).
    state: Option<LocalPaths>,
    epoch_at_force: Mutex<Option<u64>>,
    /// The revisions owed as the state file said at the force.
    owed_at_force: Mutex<Option<u64>>,
    /// The deadline each membership call was given.
    deadlines: Mutex<Vec<Duration>>,
    /// A start's wait for an answer ends without one, and etcd then runs
    /// (`Some(true)`) or has exited (`Some(false)`).
    start_unanswered: Option<bool>,
    /// The wait each start was given.
    start_waits: Mutex<Vec<Duration>>,
    /// The local etcd runs (a removal of this node's own member is sent
    /// only to a running one).
    running: bool,
}

impl Fake {
    fn log(&self, s: String) {
        self.calls.lock().unwrap().push(s);
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    fn next_err(&self) -> Result<(), OpsError> {
        let mut e = self.etcd_errors.lock().unwrap();
        if e.is_empty() {
            Ok(())
        } else {
            Err(OpsError::Etcd(e.remove(0)))
        }
    }
}

fn member(id: u64) -> Member {
    Member {
        id,
        name: String::new(),
        peer_urls: vec![],
        client_urls: vec![],
        is_learner: true,
    }
}

impl Supervisor for Fake {
    async fn state(&self) -> ProcState {
        match self.start_unanswered {
            Some(true) => ProcState::Running { pid: 1 },
            _ if self.running => ProcState::Running { pid: 1 },
            _ => ProcState::Stopped,
        }
    }
    async fn probe(&self, _d: Duration, _read: bool) -> Probe {
        Probe {
            proc: ProcState::Stopped,
            status: None,
            read: None,
        }
    }
    async fn start(&self, mode: StartMode, d: Duration) -> Result<u32, OpsError> {
        self.log(format!("start {mode:?}"));
        self.start_waits.lock().unwrap().push(d);
        match self.start_unanswered {
            None => Ok(1),
            Some(_) => Err(OpsError::Supervise(format!(
                "etcd (pid 1) did not answer within {d:?} of being started"
            ))),
        }
    }
    async fn stop(&self, _g: Duration) -> Result<bool, OpsError> {
        self.log("stop".into());
        Ok(true)
    }
    async fn start_moving_revision(&self, at_risk: u64, _d: Duration) -> Result<u32, OpsError> {
        self.log(format!("start moving the revision past {at_risk}"));
        Ok(1)
    }
    async fn restart_force_new_cluster(
        &self,
        p: PeerDown,
        at_risk: u64,
        _d: Duration,
    ) -> Result<u32, OpsError> {
        if let Some(s) = &self.state {
            let st = s.read_state().unwrap();
            *self.epoch_at_force.lock().unwrap() = st.pending_epoch;
            *self.owed_at_force.lock().unwrap() = st.revision_bump_owed;
        }
        self.log(format!("force {} (at risk {at_risk})", p.node));
        Ok(1)
    }
}

impl EtcdReads for Fake {
    async fn status(&self, _d: Duration) -> Result<MemberStatus, EtcdError> {
        unreachable!("the executor reads no status")
    }
    async fn linearizable_read(&self, _d: Duration) -> Result<i64, EtcdError> {
        unreachable!("the executor reads nothing")
    }
    async fn member_list(&self, _d: Duration) -> Result<Vec<Member>, EtcdError> {
        unreachable!("the executor lists no members")
    }
    async fn leave_lock(&self, _d: Duration) -> Result<Option<String>, EtcdError> {
        unreachable!("the executor reads no lock")
    }
}

impl EtcdOps for Fake {
    type Peer = Fake;
    fn peer(&self, _url: &str) -> Fake {
        unreachable!("the executor asks no peer")
    }
    async fn raft_progress(&self, _d: Duration) -> Result<RaftProgress, ProgressError> {
        unreachable!("the executor reads no raft progress")
    }
    async fn statuses(
        &self,
        _m: &[Member],
        _d: Duration,
    ) -> Vec<(Member, Result<MemberStatus, EtcdError>)> {
        unreachable!("the executor asks no member")
    }
    async fn acquire_leave_lock(&self, node: &str, _d: Duration) -> Result<String, EtcdError> {
        self.log(format!("lock {node}"));
        Ok("b".into())
    }
    async fn release_leave_lock(&self, node: &str, _d: Duration) -> Result<(), EtcdError> {
        self.log(format!("unlock {node}"));
        Ok(())
    }
    async fn add_learner(
        &self,
        urls: Vec<String>,
        _d: Duration,
    ) -> Result<(Member, Vec<Member>), OpsError> {
        self.log(format!("add {urls:?}"));
        self.next_err()?;
        Ok((member(7), vec![member(7)]))
    }
    async fn promote(&self, id: u64, d: Duration) -> Result<Vec<Member>, OpsError> {
        self.log(format!("promote {id}"));
        self.deadlines.lock().unwrap().push(d);
        self.next_err()?;
        Ok(vec![])
    }
    async fn remove(&self, id: u64, d: Duration) -> Result<Vec<Member>, OpsError> {
        self.log(format!("remove {id}"));
        self.deadlines.lock().unwrap().push(d);
        self.next_err()?;
        Ok(vec![])
    }
    async fn move_leader(&self, id: u64, d: Duration) -> Result<(), OpsError> {
        self.log(format!("move leader {id}"));
        self.deadlines.lock().unwrap().push(d);
        self.next_err()
    }
}

#[async_trait::async_trait]
impl Pacemaker for Fake {
    async fn crm_mon(&self, _d: Duration) -> Result<crm_xml::CrmMon, PcmkError> {
        unreachable!("the executor never reads crm_mon")
    }
    async fn get_attr(
        &self,
        _n: &str,
        _a: &str,
        _d: Duration,
    ) -> Result<Option<String>, PcmkError> {
        Ok(None)
    }
    async fn set_attr(&self, n: &str, a: &str, v: &str, _d: Duration) -> Result<(), PcmkError> {
        self.log(format!("set {n} {a} {v}"));
        if self.fail_attrs {
            return Err(PcmkError::Failed {
                tool: "crm_attribute",
                code: Some(1),
                message: "cib not connected".into(),
            });
        }
        Ok(())
    }
    async fn delete_attr(&self, n: &str, a: &str, _d: Duration) -> Result<(), PcmkError> {
        self.log(format!("delete {n} {a}"));
        Ok(())
    }
    async fn clear_failed_start(&self, r: &str, n: &str, _d: Duration) -> Result<(), PcmkError> {
        self.log(format!("cleanup {r} start on {n}"));
        Ok(())
    }
}

fn node(name: &str, online: bool) -> NodeView {
    NodeView {
        name: name.into(),
        online,
        unclean: false,
        expected_up: online,
        shutdown: false,
        standby: false,
        maintenance: false,
        last_seen: None,
        etcd: if online {
            ResourceState::Started
        } else {
            ResourceState::Unknown
        },
        record: None,
        claim: None,
        start_failed_without_daemon: None,
    }
}

/// Node a alone with its data and the in-sync marker; b lost.
fn facts(b_fenced: bool) -> Facts {
    let mut b = node("b", false);
    // A fence Pacemaker recorded against b ends its membership.
    b.unclean = !b_fenced;
    b.expected_up = !b_fenced;
    Facts {
        node: "a".into(),
        boot_id: "boot-a".into(),
        topology: Topology::TwoNode,
        trigger: Trigger::Reconcile,
        notify: None,
        pacemaker: PacemakerView {
            quorate: true,
            nodes: vec![node("a", true), b],
            fence_history: vec![],
            ..Default::default()
        },
        etcd: EtcdView::NotRunning,
        cluster: None,
        data: LocalData {
            exists: true,
            ..Default::default()
        },
        local: LocalMarkers {
            in_sync_boot: Some("boot-a".into()),
        },
        alerts: if b_fenced {
            vec![FenceEvent {
                target: "b".into(),
                action: warden_failover::FenceAction::Reboot,
                status: FenceStatus::Success,
                completed: Some(Stamp(200)),
            }]
        } else {
            vec![]
        },
    }
}

fn paths(t: &std::path::Path) -> LocalPaths {
    LocalPaths {
        data_dir: t.join("data"),
        state_file: t.join("state/failover.json"),
        run_dir: t.join("run"),
        archive_dir: t.join("data.archive"),
    }
}

async fn run(fake: &Fake, p: &LocalPaths, f: &Facts, steps: &[Step]) -> ExecReport {
    let s = settings();
    let ports = Ports {
        pacemaker: fake,
        etcd: fake,
        supervisor: fake,
        settings: &s,
    };
    execute(&ports, p, f, steps, Duration::from_secs(10)).await
}

fn with_data(t: &std::path::Path) -> LocalPaths {
    let p = paths(t);
    std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
    std::fs::write(p.member_dir().join("snap/db"), b"db").unwrap();
    p
}

/// Member 1 of cluster `cluster_id` running here without a leader.
fn leaderless(cluster_id: u64) -> EtcdView {
    EtcdView::Running(warden_failover::LiveEtcd {
        member_id: 1,
        cluster_id,
        is_learner: false,
        has_leader: false,
        is_leader: false,
        linearizable_ok: false,
        members: vec![],
        leave_lock: None,
        position: Default::default(),
        hung_ms: None,
    })
}

/// Runs one `RemoveMember` of member `id`, listed for `node`.
async fn remove(fake: &Fake, p: &LocalPaths, id: u64, node: &str) -> ExecReport {
    let step = Step::RemoveMember {
        id,
        node: node.into(),
    };
    run(fake, p, &facts(true), &[step]).await
}

#[tokio::test]
async fn never_bootstraps_over_a_state_file_that_names_a_cluster() {
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    p.update_state(|s| {
        s.formed = true;
        s.cluster_id = Some(0x1c3e);
        s.member_id = Some(7);
    })
    .unwrap();
    let fake = Fake::default();
    let mut f = facts(true);
    f.data.exists = false;
    let r = run(&fake, &p, &f, &[Step::StartEtcd { mode: Mode::New }]).await;
    let why = r.failed.expect("refused").1;
    assert!(
        why.contains("1c3e") && why.contains("empty cluster"),
        "{why}"
    );
    assert!(fake.calls().is_empty());
    // Without a history, a bootstrap gets the fresh token, recorded first.
    let t2 = tempfile::tempdir().unwrap();
    let p2 = paths(t2.path());
    let r = run(&fake, &p2, &f, &[Step::StartEtcd { mode: Mode::New }]).await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    let token = p2.read_state().unwrap().bootstrap_token.expect("recorded");
    assert_eq!(token, warden_failover::decide::bootstrap_token(&f));
    assert!(token.starts_with("etcd-warden:"), "{token}");
}

#[tokio::test]
async fn force_needs_pacemakers_proof_even_if_decided() {
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    let fake = Fake::default();
    // b is lost but not fenced: no proof, so no force, whatever was decided.
    let r = run(
        &fake,
        &p,
        &facts(false),
        &[Step::ForceNewCluster { epoch: 1 }],
    )
    .await;
    let (_, why) = r.failed.unwrap();
    assert!(
        why.contains("not proven safe") && why.contains("not confirmed that b is down"),
        "{why}"
    );
    assert!(fake.calls().is_empty());
    // Without the in-sync marker of this boot: no force either.
    let mut f = facts(true);
    f.local.in_sync_boot = Some("an-earlier-boot".into());
    let r = run(&fake, &p, &f, &[Step::ForceNewCluster { epoch: 1 }]).await;
    assert!(r.failed.unwrap().1.contains("in-sync"));
    // HA never forces.
    let mut f = facts(true);
    f.topology = Topology::Ha;
    let r = run(&fake, &p, &f, &[Step::ForceNewCluster { epoch: 1 }]).await;
    assert!(r.failed.is_some());
    assert!(fake.calls().is_empty());
}

/// A peer online whose record says it left and its own removal is
/// committed, in the cluster and at the epoch of the member running here,
/// runs no member that could vote: with this boot's in-sync marker (the
/// operator's, after an outage) that is enough for the force, checked
/// here again as Pacemaker's proof is.
#[test]
fn a_peer_whose_own_removal_is_committed_allows_a_force_with_the_marker() {
    let mut f = facts(false);
    let mut b = node("b", true);
    b.record = Some(warden_failover::DataRecord {
        boot_id: "boot-b".into(),
        has_data: true,
        formed: true,
        epoch: 0,
        cluster_id: Some(7),
        departed: true,
        archives: 0,
        bootstrap_token: None,
        lost_member: None,
        learner: true,
        removed: true,
        joined_without_data: false,
        pending_epoch: None,
        voter_ids: Default::default(),
        state_lost: false,
        added_by: Default::default(),
    });
    f.pacemaker.nodes[1] = b;
    f.data.cluster_id = Some(7);
    f.etcd = leaderless(7);
    let ok = force_allowed(&f).expect("the committed removal is the proof");
    assert!(ok.evidence.contains("removal committed"), "{}", ok.evidence);
    let mut no_marker = f.clone();
    no_marker.local.in_sync_boot = None;
    assert!(force_allowed(&no_marker).unwrap_err().contains("in-sync"));
    let mut other_cluster = f.clone();
    other_cluster.data.cluster_id = Some(8);
    assert!(force_allowed(&other_cluster).is_err());
    let mut listed = f.clone();
    if let Some(r) = listed.pacemaker.nodes[1].record.as_mut() {
        r.removed = false;
    }
    assert!(
        force_allowed(&listed)
            .unwrap_err()
            .contains("not confirmed that b is down")
    );
}

/// A replaced machine (neither data nor a state file) online beside this
/// node's formed data: no member runs there, so the force the decision
/// made is carried out (with the marker, as for every proof).
#[test]
fn a_blank_peer_allows_a_force_with_the_marker() {
    let mut f = facts(false);
    let mut b = node("b", true);
    b.record = Some(warden_failover::DataRecord {
        boot_id: "boot-b".into(),
        has_data: false,
        formed: false,
        epoch: 0,
        cluster_id: None,
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
    });
    f.pacemaker.nodes[1] = b;
    f.data.cluster_id = Some(7);
    f.data.formed = true;
    f.etcd = leaderless(7);
    let ok = force_allowed(&f).expect("a blank peer is the proof");
    assert!(
        ok.evidence.contains("neither data nor a state file"),
        "{}",
        ok.evidence
    );
    let mut no_marker = f.clone();
    no_marker.local.in_sync_boot = None;
    assert!(force_allowed(&no_marker).unwrap_err().contains("in-sync"));
    // A peer whose state file names a cluster is not blank.
    let mut lost = f.clone();
    if let Some(r) = lost.pacemaker.nodes[1].record.as_mut() {
        r.cluster_id = Some(7);
        r.epoch = 1;
    }
    assert!(force_allowed(&lost).is_err());
}

#[tokio::test]
async fn force_records_the_epoch_first() {
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    let fake = Fake {
        state: Some(p.clone()),
        ..Default::default()
    };
    let r = run(
        &fake,
        &p,
        &facts(true),
        &[Step::ForceNewCluster { epoch: 4 }],
    )
    .await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    // Stopped first, so that the log's tail can be kept, then forced; a
    // data directory without a readable log counts as 1000 at risk.
    assert_eq!(fake.calls(), vec!["stop", "force b (at risk 1000)"]);
    // On disk before the restart, as an intent: the epoch itself changes
    // only once the live member list shows this node alone.
    assert_eq!(*fake.epoch_at_force.lock().unwrap(), Some(4));
    assert_eq!(p.read_state().unwrap().epoch, 0);
}

#[tokio::test]
async fn a_force_again_after_an_interrupted_one_keeps_its_revision_debt() {
    use super::super::held::{TestRecord::*, write_test_records};
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    // The first force recorded 7 revisions at risk and died before moving
    // them; its restart appended to the log, which now shows nothing past
    // the commit index.
    write_test_records(
        &p.member_dir().join("wal"),
        0,
        0,
        &[
            Meta(1),
            Entry(1, 3, true),
            Entry(2, 3, true),
            State(3, 1, 2),
        ],
    );
    p.update_state(|st| st.revision_bump_owed = Some(7))
        .unwrap();
    let fake = Fake {
        state: Some(p.clone()),
        ..Default::default()
    };
    let r = run(
        &fake,
        &p,
        &facts(true),
        &[Step::ForceNewCluster { epoch: 5 }],
    )
    .await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    assert_eq!(fake.calls(), vec!["stop", "force b (at risk 7)"]);
    assert_eq!(*fake.owed_at_force.lock().unwrap(), Some(7));
    assert_eq!(p.read_state().unwrap().revision_bump_owed, None, "done");
}

#[tokio::test]
async fn a_force_that_drops_entries_owes_their_revisions_until_it_is_done() {
    use super::super::held::{TestRecord::*, write_test_records};
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    // A follower's log: two requests past its commit index.
    write_test_records(
        &p.member_dir().join("wal"),
        0,
        0,
        &[
            Meta(1),
            State(3, 2, 2),
            Entry(1, 3, true),
            Entry(2, 3, true),
            Entry(3, 3, true),
            Entry(4, 3, true),
        ],
    );
    let fake = Fake {
        state: Some(p.clone()),
        ..Default::default()
    };
    let r = run(
        &fake,
        &p,
        &facts(true),
        &[Step::ForceNewCluster { epoch: 4 }],
    )
    .await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    assert_eq!(fake.calls(), vec!["stop", "force b (at risk 2)"]);
    assert_eq!(
        *fake.owed_at_force.lock().unwrap(),
        Some(2),
        "written down first"
    );
    assert_eq!(p.read_state().unwrap().revision_bump_owed, None, "done");
    // A daemon that died inside that step left it owed: the next start of
    // the data holds clients off until the revision moved on.
    p.update_state(|st| st.revision_bump_owed = Some(2))
        .unwrap();
    let fake = Fake::default();
    let start = Step::StartEtcd {
        mode: Mode::Existing,
    };
    let r = run(&fake, &p, &facts(true), std::slice::from_ref(&start)).await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    assert_eq!(fake.calls(), vec!["start moving the revision past 2"]);
    assert_eq!(p.read_state().unwrap().revision_bump_owed, None);
    // Then a start is a start.
    let fake = Fake::default();
    let r = run(&fake, &p, &facts(true), &[start]).await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    assert!(
        fake.calls().iter().all(|c| !c.contains("moving")),
        "{:?}",
        fake.calls()
    );
}

#[tokio::test]
async fn steps_stop_at_the_first_failure() {
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    let fake = Fake {
        fail_attrs: true,
        ..Default::default()
    };
    let steps = [
        Step::SetClaim { epoch: 1 },
        Step::ClearInSync,
        Step::StopEtcd,
    ];
    p.update_state(|s| {
        s.cluster_id = Some(2);
        s.member_id = Some(1);
    })
    .unwrap();
    p.mark_in_sync("boot-a").unwrap();
    let r = run(&fake, &p, &facts(true), &steps).await;
    assert_eq!(r.done, vec![]);
    assert_eq!(r.failed.as_ref().unwrap().0, Step::SetClaim { epoch: 1 });
    assert_eq!(fake.calls().len(), 1);
    // The marker was not touched: the step after the failure never ran.
    assert_eq!(p.in_sync().as_deref(), Some("boot-a"));
    let ok = Fake::default();
    let r = run(&ok, &p, &facts(true), &steps).await;
    assert_eq!(r.done.len(), 3);
    assert!(p.in_sync().is_none());
    assert_eq!(ok.calls()[1], "stop");
}

#[tokio::test]
async fn never_starts_over_existing_data_and_archives_instead_of_deleting() {
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    let fake = Fake::default();
    for mode in [Mode::New, Mode::Join { epoch: 2 }] {
        let r = run(&fake, &p, &facts(true), &[Step::StartEtcd { mode }]).await;
        assert!(r.failed.unwrap().1.contains("already holds a member"));
    }
    assert!(fake.calls().is_empty());
    // Archiving while etcd runs on the data is refused too.
    let mut f = facts(true);
    f.etcd = leaderless(2);
    let archive = Step::ArchiveDataDir {
        reason: "stale".into(),
    };
    let r = run(&fake, &p, &f, std::slice::from_ref(&archive)).await;
    assert!(r.failed.is_some());
    assert!(p.has_data());
    let r = run(&fake, &p, &facts(true), &[archive]).await;
    assert!(r.failed.is_none());
    assert!(!p.has_data());
    let dest = &r.archived[0];
    assert_eq!(std::fs::read(dest.join("member/snap/db")).unwrap(), b"db");
    for c in r.checksums {
        c.join().unwrap();
    }
    let sum = std::fs::read_to_string(dest.join("db.sha256")).unwrap();
    assert!(sum.ends_with("  member/snap/db\n"), "{sum}");
}

#[tokio::test]
async fn a_restart_waits_briefly_and_a_running_silent_etcd_is_no_failure_of_etcd() {
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    let start = [Step::StartEtcd {
        mode: Mode::Existing,
    }];
    // Running but silent (a member waiting for its majority, a learner
    // receiving a snapshot): the step is left to the next round, and says
    // so, within the short wait and not the action's whole deadline.
    let fake = Fake {
        start_unanswered: Some(true),
        ..Fake::default()
    };
    let r = run(&fake, &p, &facts(true), &start).await;
    let (_, why) = r.failed.expect("the step is not done");
    assert!(
        why.contains("etcd runs but did not answer within 5s"),
        "{why}"
    );
    assert_eq!(*fake.start_waits.lock().unwrap(), vec![RESTART_ANSWER]);
    // Exited meanwhile: the supervisor's own error, as a failure.
    let fake = Fake {
        start_unanswered: Some(false),
        ..Fake::default()
    };
    let r = run(&fake, &p, &facts(true), &start).await;
    let (_, why) = r.failed.expect("the step failed");
    assert!(
        why.contains("of being started") && !why.contains("etcd runs"),
        "{why}"
    );
}

/// A member of cluster 6 as etcd lists it: `started` once it has run (a
/// learner added and not yet started has neither name nor client URLs).
fn listed(
    id: u64,
    node: &str,
    name: &str,
    started: bool,
    learner: bool,
) -> warden_failover::MemberInfo {
    warden_failover::MemberInfo {
        id,
        name: name.into(),
        started,
        node: node.into(),
        is_learner: learner,
        in_sync: started && !learner,
    }
}

/// Carries out a join at `epoch` of cluster 6, listing `members`, on node
/// `a` without data; returns the calls etcd's supervisor got.
async fn join(
    p: &LocalPaths,
    members: Vec<warden_failover::MemberInfo>,
    epoch: u64,
) -> Vec<String> {
    let mut f = facts(true);
    f.cluster = Some(warden_failover::ClusterView {
        cluster_id: 6,
        epoch,
        members,
        leave_lock: None,
    });
    f.data.exists = false;
    let fake = Fake::default();
    let r = run(
        &fake,
        p,
        &f,
        &[Step::StartEtcd {
            mode: Mode::Join { epoch },
        }],
    )
    .await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    fake.calls()
}

#[tokio::test]
async fn a_join_records_the_learner_it_starts_as_before_etcd_runs() {
    // The state file still names the member this node was before its
    // data was archived: the join must replace both ids, or a stop before
    // the first live look makes the next start archive the new data.
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    p.write_state(&super::super::local::StateFile {
        epoch: 1,
        cluster_id: Some(5),
        member_id: Some(99),
        formed: true,
        voters: vec!["a".into(), "b".into()],
        ..Default::default()
    })
    .unwrap();
    let members = vec![
        listed(11, "b", "b", true, false),
        listed(12, "a", "", false, true),
    ];
    let calls = join(&p, members, 3).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    let st = p.read_state().unwrap();
    assert_eq!(
        (st.epoch, st.cluster_id, st.member_id, st.formed),
        (3, Some(6), Some(12), false)
    );
    // The learner's data has been a voter nowhere yet: the record the next
    // look publishes says it holds only a learner's data.
    assert!(st.voters.is_empty(), "{st:?}");
}

#[tokio::test]
async fn a_node_late_for_the_bootstrap_joins_as_its_member_that_never_ran() {
    // The others formed quorum first: the cluster lists this node's
    // member of the bootstrap as a voter that never ran (its name comes
    // from the initial cluster, but it has no client URLs). The join takes
    // its id, and etcd is given the named members and this node.
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    let members = vec![
        listed(11, "b", "b", true, false),
        listed(12, "a", "a", false, false),
    ];
    let calls = join(&p, members, 0).await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        calls[0].contains("JoinExisting")
            && calls[0].contains("b=http://127.0.0.1:22380,a=http://127.0.0.1:12380"),
        "{calls:?}"
    );
    let st = p.read_state().unwrap();
    assert_eq!((st.cluster_id, st.member_id), (Some(6), Some(12)));
}

#[tokio::test]
async fn a_reseed_restarts_the_old_member_on_an_empty_directory_and_never_over_data() {
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    let old = super::super::local::StateFile {
        epoch: 2,
        cluster_id: Some(5),
        member_id: Some(99),
        formed: true,
        voters: vec!["a".into(), "b".into()],
        ..Default::default()
    };
    p.write_state(&old).unwrap();
    let mut f = facts(true);
    f.data.exists = false;
    let reseed = [Step::StartEtcd { mode: Mode::Reseed }];
    let fake = Fake::default();
    let r = run(&fake, &p, &f, &reseed).await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    // etcd reads the member list from the peer URLs itself (the peer's
    // member answers no client request without quorum): every configured
    // node, as at the bootstrap, with `existing`.
    let calls = fake.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        calls[0].contains("JoinExisting")
            && calls[0].contains("a=http://127.0.0.1:12380,b=http://127.0.0.1:22380"),
        "{calls:?}"
    );
    // The ids stay; the voters are empty until a quorate look lists this
    // member again, so the record says this data may be incomplete.
    let st = p.read_state().unwrap();
    assert_eq!(
        (st.epoch, st.cluster_id, st.member_id),
        (2, Some(5), Some(99))
    );
    assert!(st.voters.is_empty(), "{st:?}");
    // A start that failed before etcd read the peer's member list leaves
    // a member directory without a write-ahead log: no data, so the next
    // decision reseeds again instead of restarting (which would bootstrap).
    assert!(st.reseeding, "{st:?}");
    std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
    assert!(!p.has_data());
    let r = run(&Fake::default(), &p, &f, &reseed).await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    std::fs::remove_dir_all(p.member_dir()).unwrap();

    // A state file that names no member: nothing to restart.
    p.write_state(&super::super::local::StateFile {
        member_id: None,
        ..old
    })
    .unwrap();
    let fake = Fake::default();
    let (_, why) = run(&fake, &p, &f, &reseed).await.failed.expect("refused");
    assert!(why.contains("no member"), "{why}");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());

    // Never over data that exists.
    let p = with_data(t.path());
    let fake = Fake::default();
    let (_, why) = run(&fake, &p, &f, &reseed).await.failed.expect("refused");
    assert!(why.contains("already holds a member: a reseed"), "{why}");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

#[tokio::test]
async fn membership_changes_retry_through_unhealthy_cluster() {
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    let fake = Fake::default();
    fake.etcd_errors.lock().unwrap().extend([
        EtcdError::Unavailable("etcdserver: unhealthy cluster".into()),
        EtcdError::FailedPrecondition(
            "can only promote a learner member which is in sync with leader".into(),
        ),
    ]);
    let r = run(
        &fake,
        &p,
        &facts(true),
        &[Step::PromoteLearner {
            id: 7,
            node: "b".into(),
        }],
    )
    .await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    assert_eq!(fake.calls(), vec!["promote 7"; 3]);
    // A permanent error is not retried.
    fake.etcd_errors
        .lock()
        .unwrap()
        .push(EtcdError::NotFound("member".into()));
    let r = remove(&fake, &p, 9, "b").await;
    assert!(r.failed.is_some());
    assert_eq!(fake.calls().len(), 4);
}

/// A member that removed itself exits as soon as it has applied the
/// removal, often before a live look could see the new membership; the
/// state file says so at once, so that the record tells the peer that the
/// removal is committed.
#[tokio::test]
async fn removing_this_nodes_own_member_drops_it_from_the_recorded_voters() {
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    p.update_state(|s| {
        s.departed = true;
        s.voters = vec!["a".into(), "b".into()];
    })
    .unwrap();
    let fake = Fake {
        running: true,
        ..Fake::default()
    };
    // The peer's removal leaves this node's view alone (the leader's live
    // look records it).
    let r = remove(&fake, &p, 9, "b").await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    assert_eq!(p.read_state().unwrap().voters, vec!["a", "b"]);
    let r = remove(&fake, &p, 8, "a").await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    assert_eq!(p.read_state().unwrap().voters, vec!["b"]);
    // A removal etcd refused changes nothing.
    p.update_state(|s| s.voters = vec!["a".into(), "b".into()])
        .unwrap();
    fake.etcd_errors
        .lock()
        .unwrap()
        .push(EtcdError::NotFound("member".into()));
    let r = remove(&fake, &p, 8, "a").await;
    assert!(r.failed.is_some());
    assert_eq!(p.read_state().unwrap().voters, vec!["a", "b"]);
    // Nor does one never sent, to an etcd that has stopped.
    let stopped = Fake::default();
    let r = remove(&stopped, &p, 8, "a").await;
    assert!(r.failed.is_some());
    assert!(
        stopped.calls().iter().all(|c| !c.starts_with("remove")),
        "{:?}",
        stopped.calls()
    );
    assert_eq!(p.read_state().unwrap().voters, vec!["a", "b"]);
}

#[tokio::test]
async fn a_membership_call_that_times_out_is_asked_again_within_the_budget() {
    // etcd 3.5: a removal while a promotion is pending may time out
    // instead of answering; that is not an answer, so it is retried.
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    let fake = Fake::default();
    fake.etcd_errors.lock().unwrap().extend([
        EtcdError::Timeout(Duration::from_secs(3)),
        EtcdError::Timeout(Duration::from_secs(3)),
    ]);
    let r = remove(&fake, &p, 9, "b").await;
    assert!(r.failed.is_none(), "{:?}", r.failed);
    assert_eq!(fake.calls(), vec!["remove 9"; 3]);
    // Each attempt is short enough to leave room for the next one.
    let d = fake.deadlines.lock().unwrap().clone();
    assert!(
        d.iter().all(|d| *d <= MEMBERSHIP_ATTEMPT),
        "attempt deadlines {d:?}"
    );
}

#[tokio::test]
async fn leave_lock_held_elsewhere_fails_the_step_and_adds_use_the_configured_url() {
    let t = tempfile::tempdir().unwrap();
    let p = with_data(t.path());
    let fake = Fake::default();
    let r = run(
        &fake,
        &p,
        &facts(true),
        &[Step::AcquireLeaveLock, Step::RecordDeparture],
    )
    .await;
    assert!(r.failed.unwrap().1.contains("held by b"));
    assert!(!p.read_state().unwrap().departed);
    let r = run(
        &fake,
        &p,
        &facts(true),
        &[Step::AddLearner { node: "b".into() }],
    )
    .await;
    assert!(r.failed.is_none());
    assert!(
        fake.calls()
            .contains(&"add [\"http://127.0.0.1:22380\"]".to_string())
    );
}

#[test]
fn join_lists_the_cluster_and_this_node() {
    let s = settings();
    let members = vec![
        listed(1, "b", "b", true, false),
        listed(2, "a", "", false, true),
    ];
    assert_eq!(
        initial_cluster(&s, &members),
        "b=http://127.0.0.1:22380,a=http://127.0.0.1:12380"
    );
}
