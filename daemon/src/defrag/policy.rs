//! The defragmentation policy as one pure decision: may this member be
//! defragmented now, given what every member, the failover logic and
//! Pacemaker said just before? Nothing here asks anything; `super::facts`
//! gathers the answers and `super` carries the decision out.
//!
//! A defragment blocks the member's reads and writes for as long as it
//! rewrites the database (seconds per GB). On the only voter, or while the
//! other member is down, fenced, catching up or being replaced, that stall
//! is a stall of the whole cluster, so every doubt is a refusal.

use crm_xml::report::WardenState;

/// When a database counts as fragmented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Threshold {
    /// Free space, in percent of the database file.
    pub(crate) percent: u64,
    /// The smallest database file worth a defragment (bytes).
    pub(crate) min_size: u64,
}

/// A member's database file: its size and the bytes in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DbSize {
    /// Size of the file.
    pub(crate) size: i64,
    /// Bytes in use (the rest is free space a defragment gives back).
    pub(crate) in_use: i64,
}

impl DbSize {
    /// The free part of the file, in percent (0 for an empty file).
    pub(crate) fn free_percent(&self) -> u64 {
        let size = u64::try_from(self.size).unwrap_or(0);
        let in_use = u64::try_from(self.in_use).unwrap_or(0);
        (size.saturating_sub(in_use) * 100)
            .checked_div(size)
            .unwrap_or(0)
    }
}

impl Threshold {
    /// Whether `db` is past the threshold.
    pub(crate) fn exceeded(&self, db: &DbSize) -> bool {
        u64::try_from(db.size).unwrap_or(0) >= self.min_size && db.free_percent() >= self.percent
    }
}

/// What one member answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberView {
    /// The leader it knows (0: none).
    pub(crate) leader: u64,
    /// Its database file.
    pub(crate) db: DbSize,
    /// Its active alarms (`NOSPACE`, `CORRUPT`).
    pub(crate) alarms: Vec<String>,
}

/// One member of the member list, with its own Status answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberFact {
    /// Member ID.
    pub(crate) id: u64,
    /// Member name; empty for a member added but not started yet.
    pub(crate) name: String,
    /// Whether it is a learner.
    pub(crate) is_learner: bool,
    /// Its Status, or why it did not answer.
    pub(crate) status: Result<MemberView, String>,
}

/// Pacemaker's view, as far as it matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PacemakerFacts {
    /// Pacemaker does not manage this cluster (no failover logic).
    NotUsed,
    /// crm_mon did not answer.
    Unreadable(String),
    /// What crm_mon showed.
    Seen {
        /// The cluster's maintenance mode.
        maintenance_mode: bool,
        /// Each configured node that is not plainly up with etcd started,
        /// and why (offline, unclean, being fenced, in standby…).
        trouble: Vec<(String, String)>,
    },
}

/// Everything the decision reads, gathered just before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The local member's ID, or why its Status failed.
    pub(crate) local: Result<u64, String>,
    /// Every member, or why the member list failed.
    pub(crate) members: Result<Vec<MemberFact>, String>,
    /// Whether a linearizable read just succeeded.
    pub(crate) quorum: bool,
    /// What the failover logic is doing here (`None`: no failover logic).
    pub(crate) failover: Option<WardenState>,
    /// Pacemaker's view.
    pub(crate) pacemaker: PacemakerFacts,
    /// The holder of the defragmentation lock, when one holds it.
    pub(crate) lock_holder: Option<String>,
}

/// Who asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The daemon's own loop: only past the threshold.
    Auto,
    /// `etcd-warden defrag`; `below_threshold` defragments a database the
    /// threshold would leave alone (every other rule still holds).
    Manual {
        /// Ignore the threshold for the local member.
        below_threshold: bool,
    },
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Defragment the local member now.
    Defragment,
    /// The local member leads: hand the leadership to `to` first, then
    /// defragment (a leader's stall is every client's stall).
    MoveLeaderThenDefragment {
        /// The member to lead.
        to: u64,
        /// Its name.
        to_name: String,
    },
}

/// Why not now. Each says what it waits for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The local member did not answer.
    #[error("the local etcd member did not answer ({0})")]
    LocalUnreachable(String),
    /// The member list did not answer.
    #[error("etcd's member list did not answer ({0})")]
    MembersUnknown(String),
    /// The local member is a learner.
    #[error(
        "the local member is a learner (catching up): it is not defragmented until it is a voter"
    )]
    LocalLearner,
    /// No linearizable read: no quorum.
    #[error("the cluster has no quorum")]
    NoQuorum,
    /// The local member is the only voter: its stall would be the cluster's.
    #[error("this member is the only voter: a defragment would stop every write until it ends")]
    OnlyVoter,
    /// A learner is present: a member is rejoining.
    #[error("member {0} is a learner (a rejoin is in progress)")]
    LearnerPresent(String),
    /// A member was added but has not started.
    #[error("member {0:x} has not started yet (a rejoin is in progress)")]
    MemberNotStarted(u64),
    /// A member did not answer its Status.
    #[error("member {0} did not answer ({1})")]
    MemberUnreachable(String, String),
    /// The members do not agree on one leader.
    #[error("the members do not agree on a leader")]
    NoLeader,
    /// A member reports data corruption.
    #[error("member {0} reports the CORRUPT alarm: its data must be repaired first")]
    Corrupt(String),
    /// The failover logic is not in its ordinary state.
    #[error("the failover logic is not in its ordinary state here ({0})")]
    Failover(String),
    /// crm_mon did not answer.
    #[error("Pacemaker's view could not be read ({0})")]
    PacemakerUnreadable(String),
    /// The cluster is in maintenance mode.
    #[error("the cluster is in maintenance mode")]
    Maintenance,
    /// A node is not plainly up.
    #[error("node {0} is {1}")]
    NodeTrouble(String, String),
    /// Another defragment is under way.
    #[error("another defragment is under way ({0})")]
    Busy(String),
    /// Below the threshold.
    #[error(
        "not needed: {free}% of the {size} B database is free space (threshold: {percent}% of at least {min_size} B)"
    )]
    NotNeeded {
        /// Free space in percent.
        free: u64,
        /// The file's size.
        size: i64,
        /// The threshold's percentage.
        percent: u64,
        /// The threshold's smallest size.
        min_size: u64,
    },
    /// The local member leads and others are past the threshold: they go
    /// first.
    #[error("this member leads: it goes last, after {0}")]
    LeaderLast(String),
}

/// May the local member be defragmented now, and how? Every rule that says
/// no is a [`Refusal`].
pub(crate) fn decide(f: &Facts, th: &Threshold, mode: Mode) -> Result<Decision, Refusal> {
    let local = f.local.clone().map_err(Refusal::LocalUnreachable)?;
    let members = f
        .members
        .as_ref()
        .map_err(|e| Refusal::MembersUnknown(e.clone()))?;
    let me = members
        .iter()
        .find(|m| m.id == local)
        .ok_or_else(|| Refusal::MembersUnknown(format!("member {local:x} is not in the list")))?;
    if me.is_learner {
        return Err(Refusal::LocalLearner);
    }
    if !f.quorum {
        return Err(Refusal::NoQuorum);
    }
    if members.iter().filter(|m| !m.is_learner).count() < 2 {
        return Err(Refusal::OnlyVoter);
    }
    if let Some(l) = members.iter().find(|m| m.is_learner) {
        return Err(Refusal::LearnerPresent(label(l)));
    }
    if let Some(m) = members.iter().find(|m| m.name.is_empty()) {
        return Err(Refusal::MemberNotStarted(m.id));
    }
    let mut views = Vec::new();
    for m in members {
        match &m.status {
            Ok(v) => views.push((m, v)),
            Err(e) => return Err(Refusal::MemberUnreachable(label(m), e.clone())),
        }
    }
    let leader = views[0].1.leader;
    if leader == 0 || views.iter().any(|(_, v)| v.leader != leader) {
        return Err(Refusal::NoLeader);
    }
    if let Some((m, _)) = views
        .iter()
        .find(|(_, v)| v.alarms.iter().any(|a| a == "CORRUPT"))
    {
        return Err(Refusal::Corrupt(label(m)));
    }
    if let Some(s) = f.failover
        && s != WardenState::Member
    {
        return Err(Refusal::Failover(format!("{s:?}").to_lowercase()));
    }
    match &f.pacemaker {
        PacemakerFacts::NotUsed => {}
        PacemakerFacts::Unreadable(e) => return Err(Refusal::PacemakerUnreadable(e.clone())),
        PacemakerFacts::Seen {
            maintenance_mode, ..
        } if *maintenance_mode => return Err(Refusal::Maintenance),
        PacemakerFacts::Seen { trouble, .. } => {
            if let Some((node, why)) = trouble.first() {
                return Err(Refusal::NodeTrouble(node.clone(), why.clone()));
            }
        }
    }
    if let Some(h) = &f.lock_holder {
        return Err(Refusal::Busy(h.clone()));
    }
    let mine = views
        .iter()
        .find(|(m, _)| m.id == local)
        .map(|(_, v)| v.db)
        .unwrap_or_default();
    let below_ok = matches!(
        mode,
        Mode::Manual {
            below_threshold: true
        }
    );
    if !below_ok && !th.exceeded(&mine) {
        return Err(Refusal::NotNeeded {
            free: mine.free_percent(),
            size: mine.size,
            percent: th.percent,
            min_size: th.min_size,
        });
    }
    if leader != local {
        return Ok(Decision::Defragment);
    }
    let waiting: Vec<String> = views
        .iter()
        .filter(|(m, v)| m.id != local && th.exceeded(&v.db))
        .map(|(m, _)| label(m))
        .collect();
    if !waiting.is_empty() {
        return Err(Refusal::LeaderLast(waiting.join(", ")));
    }
    // Checked above: at least one other voter, every member a voter.
    let (to, _) = views
        .iter()
        .filter(|(m, _)| m.id != local)
        .min_by_key(|(m, _)| m.id)
        .ok_or(Refusal::OnlyVoter)?;
    Ok(Decision::MoveLeaderThenDefragment {
        to: to.id,
        to_name: to.name.clone(),
    })
}

fn label(m: &MemberFact) -> String {
    if m.name.is_empty() {
        format!("{:x}", m.id)
    } else {
        format!("{} ({:x})", m.name, m.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TH: Threshold = Threshold {
        percent: 45,
        min_size: 100,
    };

    fn member(id: u64, leader: u64, size: i64, in_use: i64) -> MemberFact {
        MemberFact {
            id,
            name: format!("node{id}"),
            is_learner: false,
            status: Ok(MemberView {
                leader,
                db: DbSize { size, in_use },
                alarms: vec![],
            }),
        }
    }

    /// node1 (local, follower, 60 % free of 1000 B) and node2 (leader,
    /// not fragmented), both healthy; Pacemaker sees both up.
    fn healthy() -> Facts {
        Facts {
            local: Ok(1),
            members: Ok(vec![member(1, 2, 1000, 400), member(2, 2, 1000, 900)]),
            quorum: true,
            failover: Some(WardenState::Member),
            pacemaker: PacemakerFacts::Seen {
                maintenance_mode: false,
                trouble: vec![],
            },
            lock_holder: None,
        }
    }

    fn refused(f: &Facts) -> Refusal {
        decide(f, &TH, Mode::Auto).unwrap_err()
    }

    #[test]
    fn a_fragmented_follower_of_a_healthy_pair_is_defragmented() {
        assert_eq!(
            decide(&healthy(), &TH, Mode::Auto),
            Ok(Decision::Defragment)
        );
    }

    #[test]
    fn a_fragmented_leader_hands_the_leadership_over_first() {
        let mut f = healthy();
        f.members = Ok(vec![member(1, 1, 1000, 400), member(2, 1, 1000, 900)]);
        assert_eq!(
            decide(&f, &TH, Mode::Auto),
            Ok(Decision::MoveLeaderThenDefragment {
                to: 2,
                to_name: "node2".into()
            })
        );
    }

    #[test]
    fn the_leader_goes_last() {
        let mut f = healthy();
        f.members = Ok(vec![member(1, 1, 1000, 400), member(2, 1, 1000, 300)]);
        assert!(matches!(refused(&f), Refusal::LeaderLast(w) if w.contains("node2")));
    }

    #[test]
    fn below_the_threshold_nothing_is_done_unless_asked() {
        let mut f = healthy();
        f.members = Ok(vec![member(1, 2, 1000, 600), member(2, 2, 1000, 900)]);
        assert!(matches!(refused(&f), Refusal::NotNeeded { free: 40, .. }));
        // Too small a file, however fragmented.
        f.members = Ok(vec![member(1, 2, 99, 1), member(2, 2, 1000, 900)]);
        assert!(matches!(refused(&f), Refusal::NotNeeded { .. }));
        assert_eq!(
            decide(
                &f,
                &TH,
                Mode::Manual {
                    below_threshold: true
                }
            ),
            Ok(Decision::Defragment)
        );
        assert!(matches!(
            decide(
                &f,
                &TH,
                Mode::Manual {
                    below_threshold: false
                }
            ),
            Err(Refusal::NotNeeded { .. })
        ));
    }

    #[test]
    fn the_only_voter_is_never_defragmented() {
        let mut f = healthy();
        f.members = Ok(vec![member(1, 1, 1000, 100)]);
        f.failover = Some(WardenState::Member);
        assert_eq!(refused(&f), Refusal::OnlyVoter);
        // Even by hand, below the threshold or not.
        assert_eq!(
            decide(
                &f,
                &TH,
                Mode::Manual {
                    below_threshold: true
                }
            ),
            Err(Refusal::OnlyVoter)
        );
    }

    #[test]
    fn a_rejoining_peer_blocks_it() {
        let mut f = healthy();
        let mut learner = member(2, 1, 1000, 900);
        learner.is_learner = true;
        f.members = Ok(vec![
            member(1, 1, 1000, 100),
            member(3, 1, 1000, 900),
            learner,
        ]);
        assert!(matches!(refused(&f), Refusal::LearnerPresent(n) if n.contains("node2")));
        // Added, not started.
        let mut f = healthy();
        let mut added = member(2, 2, 0, 0);
        added.name.clear();
        f.members = Ok(vec![
            member(1, 2, 1000, 100),
            member(3, 2, 1000, 100),
            added,
        ]);
        assert_eq!(refused(&f), Refusal::MemberNotStarted(2));
        // The failover logic rejoining this node.
        let mut f = healthy();
        f.failover = Some(WardenState::Rejoining);
        assert_eq!(refused(&f), Refusal::Failover("rejoining".into()));
        f.failover = Some(WardenState::Standalone);
        assert_eq!(refused(&f), Refusal::Failover("standalone".into()));
    }

    #[test]
    fn the_local_member_as_a_learner_waits() {
        let mut f = healthy();
        if let Ok(ms) = &mut f.members {
            ms[0].is_learner = true;
        }
        assert_eq!(refused(&f), Refusal::LocalLearner);
    }

    #[test]
    fn an_unreachable_or_leaderless_cluster_blocks_it() {
        let mut f = healthy();
        f.local = Err("timeout".into());
        assert!(matches!(refused(&f), Refusal::LocalUnreachable(_)));
        let mut f = healthy();
        f.members = Err("unavailable".into());
        assert!(matches!(refused(&f), Refusal::MembersUnknown(_)));
        let mut f = healthy();
        f.quorum = false;
        assert_eq!(refused(&f), Refusal::NoQuorum);
        let mut f = healthy();
        if let Ok(ms) = &mut f.members {
            ms[1].status = Err("connection refused".into());
        }
        assert!(matches!(refused(&f), Refusal::MemberUnreachable(n, _) if n.contains("node2")));
        let mut f = healthy();
        f.members = Ok(vec![member(1, 2, 1000, 400), member(2, 0, 1000, 900)]);
        assert_eq!(refused(&f), Refusal::NoLeader);
        f.members = Ok(vec![member(1, 1, 1000, 400), member(2, 2, 1000, 900)]);
        assert_eq!(refused(&f), Refusal::NoLeader);
    }

    #[test]
    fn a_corrupt_member_blocks_it() {
        let mut f = healthy();
        if let Ok(ms) = &mut f.members
            && let Ok(v) = &mut ms[1].status
        {
            v.alarms = vec!["CORRUPT".into()];
        }
        assert!(matches!(refused(&f), Refusal::Corrupt(n) if n.contains("node2")));
        // NOSPACE does not: a defragment is part of its cure.
        let mut f = healthy();
        if let Ok(ms) = &mut f.members
            && let Ok(v) = &mut ms[0].status
        {
            v.alarms = vec!["NOSPACE".into()];
        }
        assert_eq!(decide(&f, &TH, Mode::Auto), Ok(Decision::Defragment));
    }

    #[test]
    fn pacemaker_trouble_blocks_it() {
        let mut f = healthy();
        f.pacemaker = PacemakerFacts::Unreadable("crm_mon timed out".into());
        assert!(matches!(refused(&f), Refusal::PacemakerUnreadable(_)));
        f.pacemaker = PacemakerFacts::Seen {
            maintenance_mode: true,
            trouble: vec![],
        };
        assert_eq!(refused(&f), Refusal::Maintenance);
        f.pacemaker = PacemakerFacts::Seen {
            maintenance_mode: false,
            trouble: vec![("node2".into(), "unclean (fencing pending)".into())],
        };
        assert_eq!(
            refused(&f),
            Refusal::NodeTrouble("node2".into(), "unclean (fencing pending)".into())
        );
        // Without Pacemaker (a plain etcd cluster) only etcd's view counts.
        f.pacemaker = PacemakerFacts::NotUsed;
        f.failover = None;
        assert_eq!(decide(&f, &TH, Mode::Auto), Ok(Decision::Defragment));
    }

    #[test]
    fn one_member_at_a_time() {
        let mut f = healthy();
        f.lock_holder = Some("node2 since 1700000000000".into());
        assert!(matches!(refused(&f), Refusal::Busy(h) if h.contains("node2")));
    }

    #[test]
    fn free_percent_and_threshold() {
        let db = DbSize {
            size: 200,
            in_use: 110,
        };
        assert_eq!(db.free_percent(), 45);
        assert!(TH.exceeded(&db));
        assert_eq!(DbSize::default().free_percent(), 0);
        assert!(!TH.exceeded(&DbSize {
            size: 99,
            in_use: 0
        }));
    }
}
