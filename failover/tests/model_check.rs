//! The model checker over the real `decide`, and mutation tests proving it
//! finds a violation when a rule is broken on purpose.
//!
//! The runs that check the real `decide` take their bounds from the
//! environment, so that a deeper run is the same test with larger numbers
//! (never a skipped one): `WARDEN_MODEL_DEPTH` (events per run),
//! `WARDEN_MODEL_FAULTS` (fault events per run), `WARDEN_MODEL_WRITES`
//! (client writes per run). With the defaults, the two-node run from a
//! healthy cluster and both HA runs explore their whole state space; the
//! test asserts that.

use warden_failover::model::explore::{Counterexample, Model, Report, explore};
use warden_failover::model::{Config, EtcdModel, Event, Initial, State};
use warden_failover::{Mutated, Mutation};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

fn depth_from_env(default: usize) -> usize {
    env_or("WARDEN_MODEL_DEPTH", default)
}

/// Whether the bounds were raised from the environment (then a complete
/// exploration is not promised).
fn bounds_raised() -> bool {
    ["WARDEN_MODEL_FAULTS", "WARDEN_MODEL_WRITES"]
        .iter()
        .any(|v| std::env::var(v).is_ok())
}

fn with_env_bounds(mut config: Config) -> Config {
    config.max_faults = env_or("WARDEN_MODEL_FAULTS", config.max_faults);
    config.max_writes = env_or("WARDEN_MODEL_WRITES", config.max_writes);
    config
}

fn run(name: &str, config: Config, depth: usize) -> Report<Event, State> {
    let report = explore(&EtcdModel::new(config), depth);
    eprintln!(
        "{name}: explored {} states, {} transitions, depth {} (bound {depth}, cut off: {}), in {:?}",
        report.states, report.transitions, report.depth, report.bounded, report.elapsed
    );
    report
}

fn expect_holds(name: &str, config: Config, depth: usize, must_reach: &[&str]) {
    expect_holds_report(name, config, depth, must_reach);
}

fn expect_holds_report(
    name: &str,
    config: Config,
    depth: usize,
    must_reach: &[&str],
) -> Report<Event, State> {
    let report = run(name, with_env_bounds(config), depth);
    if let Some(cx) = &report.violation {
        panic!("{name}: {}", cx.render());
    }
    eprintln!("{name}: witnessed {:?}", report.witnessed);
    for w in must_reach {
        assert!(
            report.witnessed.contains_key(w),
            "{name}: the exploration never reached '{w}', so the check would hold vacuously"
        );
    }
    report
}

fn expect_complete(name: &str, report: &Report<Event, State>) {
    if !bounds_raised() {
        assert!(
            !report.bounded,
            "{name}: the default depth no longer covers the whole state space (reached {})",
            report.depth
        );
    }
}

/// What a two-node run with graceful stops and one write must reach.
const ONE_FAULT_REACH: &[&str] = &[
    "fenced",
    "forced a new cluster",
    "rejoined as voter after a force",
    "left the member list",
    "write acknowledged",
];

/// The run holds and covers its whole state space.
fn expect_whole_space(name: &str, config: Config, must_reach: &[&str]) {
    let report = expect_holds_report(name, config, depth_from_env(80), must_reach);
    expect_complete(name, &report);
}

/// Settling checked after two faults, with Pacemaker's serial starts.
/// Graceful stops are left out to keep the runs small;
/// `graceful_stops_settle_after_two_faults` checks them after two faults.
fn two_faults(config: Config) -> Config {
    Config {
        serial_starts: true,
        liveness_faults: 2,
        graceful_stops: false,
        ..config
    }
}

#[test]
fn two_node_from_a_healthy_cluster_holds() {
    let report = expect_holds_report(
        "two-node healthy",
        Config::two_node(),
        depth_from_env(80),
        &[
            "fenced",
            "claim held",
            "forced a new cluster",
            "forced cluster accepts writes",
            "leave lock held",
            "left the member list",
            "decision in flight",
            "write acknowledged",
            "data archived",
            "learner added",
            "rejoined as voter after a force",
        ],
    );
    expect_complete("two-node healthy", &report);
}

#[test]
fn two_node_from_a_fresh_bootstrap_holds() {
    let config = Config {
        initial: Initial::Fresh,
        ..Config::two_node()
    };
    expect_holds(
        "two-node fresh",
        config,
        depth_from_env(18),
        &[
            "write acknowledged",
            "fenced",
            "claim held",
            "decision in flight",
        ],
    );
}

#[test]
fn ha_three_voters_hold_and_never_force() {
    let config = Config {
        max_faults: 2,
        ..Config::ha()
    };
    let report = expect_holds_report(
        "HA",
        config,
        depth_from_env(40),
        &["write acknowledged", "decision in flight"],
    );
    expect_complete("HA", &report);
    assert!(
        !report.witnessed.contains_key("forced a new cluster")
            && !report.witnessed.contains_key("claim held"),
        "HA mode must never claim or force: {:?}",
        report.witnessed
    );
}

/// A fresh HA bootstrap whose nodes decide in any order: two that start
/// first form a quorate cluster that lists the third's member, never
/// started; the third, with no data, must still end up a voter (no node
/// may wait for a removal that no rule makes), with any one fault on top.
#[test]
fn ha_from_a_fresh_bootstrap_settles_whatever_node_is_late() {
    let config = Config {
        initial: Initial::Fresh,
        max_faults: 1,
        ..Config::ha()
    };
    let report = expect_holds_report(
        "HA fresh",
        config,
        depth_from_env(40),
        &["write acknowledged"],
    );
    expect_complete("HA fresh", &report);
}

/// The rule before (a late node waits for a learner's addition, or for no
/// data anywhere) leaves a fresh HA cluster short of a voter for good.
#[test]
fn a_node_waiting_out_a_bootstrap_it_was_late_for_is_caught() {
    let config = Config {
        initial: Initial::Fresh,
        max_faults: 1,
        ..Config::ha()
    };
    let cx = expect_violation(Mutation::HaLateBootstrapWaits, "liveness", config, 40);
    assert!(cx.violation.detail.contains("waiting"), "{}", cx.render());
}

#[test]
fn ha_member_replacement_holds() {
    let config = Config {
        spare: true,
        max_faults: 2,
        ..Config::ha()
    };
    let report = expect_holds_report(
        "HA replacement",
        config,
        depth_from_env(40),
        &[
            "learner added",
            "replacement promoted",
            "replaced member removed",
        ],
    );
    expect_complete("HA replacement", &report);
}

/// A node's disk is swapped for an empty one (same machine, same peer URL):
/// the dead member is removed, the node joins as a new learner and is
/// promoted, with any other fault on top (a second node lost while the
/// first is empty is the degraded case: no change until it is back).
#[test]
fn ha_disk_swap_holds() {
    let config = Config {
        disk_swap: true,
        max_faults: 2,
        ..Config::ha()
    };
    let report = expect_holds_report(
        "HA disk swap",
        config,
        depth_from_env(40),
        &[
            "data archived",
            "learner added",
            "swapped disk rejoined as a new voter",
            "write acknowledged",
        ],
    );
    expect_complete("HA disk swap", &report);
    assert!(
        !report.witnessed.contains_key("forced a new cluster")
            && !report.witnessed.contains_key("claim held"),
        "HA mode must never claim or force: {:?}",
        report.witnessed
    );
}

/// With the power-loss window modelled (a follower learns of a
/// commit only from the leader's next message), forcing from the survivor
/// can lose an acknowledged write. The checker must find that trace; the
/// default model assumes the window closed, as docs/failover.md explains.
#[test]
fn the_power_loss_window_is_found_when_modelled() {
    let config = Config {
        power_loss_window: true,
        check_liveness: false,
        ..Config::two_node()
    };
    let report = run("power-loss window", config, 20);
    let cx = report
        .violation
        .expect("the checker must find the power-loss window");
    eprintln!("{}", cx.render());
    assert_eq!(cx.violation.rule, "lost write", "{}", cx.render());
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::Crash(_) | Event::Partition(_))),
        "{}",
        cx.render()
    );
}

fn expect_violation(
    mutation: Mutation,
    rule: &str,
    mut config: Config,
    depth: usize,
) -> Counterexample<Event, State> {
    config.policy = Mutated {
        mutation: Some(mutation),
    };
    let report = run(&format!("{mutation:?}"), config, depth);
    let cx = report
        .violation
        .unwrap_or_else(|| panic!("{mutation:?}: the checker found no violation"));
    eprintln!("{mutation:?} caught:\n{}", cx.render());
    assert_eq!(cx.violation.rule, rule, "{mutation:?}: {}", cx.render());
    cx
}

#[test]
fn forcing_on_no_leader_alone_is_caught_as_split_brain() {
    // Both sides also claim (the one-claim rule), and the partitioned side keeps an
    // in-sync marker its data no longer deserves (the lost-write rule); set those aside
    // to show the split brain itself is caught.
    let config = Config {
        unchecked: &["two claims", "lost write"],
        check_liveness: false,
        ..Config::two_node()
    };
    expect_violation(Mutation::ForceOnNoLeader, "split brain", config, 14);
}

#[test]
fn claiming_on_no_leader_is_caught_as_two_claims() {
    expect_violation(
        Mutation::ClaimOnNoLeader,
        "two claims",
        Config::two_node(),
        14,
    );
}

#[test]
fn forcing_from_data_not_known_complete_is_caught_as_lost_write() {
    expect_violation(
        Mutation::ForceWithoutInSync,
        "lost write",
        Config::two_node(),
        30,
    );
}

#[test]
fn joining_without_archive_is_caught() {
    expect_violation(
        Mutation::JoinWithoutArchive,
        "data deleted",
        Config::two_node(),
        30,
    );
}

#[test]
fn promoting_an_unsynced_learner_is_caught() {
    expect_violation(
        Mutation::PromoteUnsynced,
        "no voter",
        Config::two_node(),
        30,
    );
}

#[test]
fn leaving_without_the_lock_is_caught() {
    expect_violation(
        Mutation::LeaveWithoutArbitration,
        "no voter",
        Config::two_node(),
        30,
    );
}

#[test]
fn leaving_with_only_the_peer_stop_check_is_caught() {
    // The CIB's view of the peer's stop lags; only the lock arbitrates.
    expect_violation(
        Mutation::LeaveWithoutLock,
        "no voter",
        Config::two_node(),
        30,
    );
}

/// Data volumes that are not mounted at boot: a powered-off node's member
/// directory is gone while its state file stays. The rule before this was
/// modelled bootstrapped a new, empty cluster whenever no node had a member
/// directory; the checker finds the acknowledged write that this loses.
#[test]
fn bootstrapping_over_lost_member_dirs_is_caught_as_lost_write() {
    let config = Config {
        lose_member_dir: true,
        check_liveness: false,
        ..Config::two_node()
    };
    expect_violation(Mutation::BootstrapOverHistory, "lost write", config, 24);
}

/// The same model with the real `decide`: no node serves a cluster without
/// the data, however the member directories go missing (one or both, before
/// or after a write, with crashes and partitions around it), and a single
/// lost directory always heals by itself (the liveness check).
#[test]
fn lost_member_dirs_never_lose_a_write() {
    let config = Config {
        lose_member_dir: true,
        ..Config::two_node()
    };
    let report = expect_holds_report(
        "two-node lost member dirs",
        config,
        depth_from_env(80),
        &[
            "write acknowledged",
            "fenced",
            "forced a new cluster",
            "learner added",
        ],
    );
    expect_complete("two-node lost member dirs", &report);
}

/// The rule before fence proofs came from Pacemaker's own records: a fence
/// proved the peer down when it completed after this daemon's own note of
/// the peer's last join (a file on /run), and any fence did when the note
/// was missing. With a fence from before the run in the history, a note
/// lost while the peer is partitioned off turns that old fence into proof:
/// the node forces while its peer still runs, takes a write, and the peer
/// (which fences it) forces in turn without that write.
#[test]
fn a_lost_join_note_turning_an_old_fence_into_proof_is_caught() {
    let config = Config {
        join_records: true,
        prior_fences: true,
        check_liveness: false,
        ..Config::two_node()
    };
    let report = run(
        "lost join note",
        config_with(config, Mutation::ProofFromLocalJoinRecord),
        24,
    );
    let cx = report
        .violation
        .expect("the checker must find the force on an old fence");
    eprintln!("{}", cx.render());
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::LoseJoinRecord(_))),
        "{}",
        cx.render()
    );
    assert!(
        ["split brain", "lost write"].contains(&cx.violation.rule),
        "{}",
        cx.render()
    );
}

/// The same rule with the daemon's clock stepped back: the peer's rejoin
/// after a fence is noted at a time earlier than that fence, so the fence
/// proves the peer's next loss, a partition.
#[test]
fn a_clock_step_turning_an_old_fence_into_proof_is_caught() {
    let config = Config {
        join_records: true,
        clock_steps: true,
        max_faults: 3,
        check_liveness: false,
        ..Config::two_node()
    };
    let report = run(
        "clock step",
        config_with(config, Mutation::ProofFromLocalJoinRecord),
        40,
    );
    let cx = report
        .violation
        .expect("the checker must find the force on an old fence");
    eprintln!("{}", cx.render());
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::ClockStepBack(_))),
        "{}",
        cx.render()
    );
    assert!(
        ["split brain", "lost write"].contains(&cx.violation.rule),
        "{}",
        cx.render()
    );
}

/// The real `decide` takes no proof from a clock or a /run file: with old
/// fences in the history, join notes lost and clocks stepped back, nothing
/// is lost and everything settles.
#[test]
fn proofs_from_pacemakers_records_hold_over_lost_notes_and_clock_steps() {
    let config = Config {
        join_records: true,
        clock_steps: true,
        prior_fences: true,
        ..Config::two_node()
    };
    let report = expect_holds_report(
        "join notes and clock steps",
        config,
        depth_from_env(80),
        &["fenced", "forced a new cluster", "write acknowledged"],
    );
    expect_complete("join notes and clock steps", &report);
}

/// Fencing fails (a BMC unreachable) and the lost node is off: only an
/// operator's `stonith_admin --confirm` says so. Pacemaker records it as it
/// records a fence, so the survivor forces from it, and the confirmed node
/// rejoins when it is powered on (the liveness check).
#[test]
fn an_operators_confirm_is_a_fence() {
    let config = Config {
        fence_fails: true,
        ..Config::two_node()
    };
    let report = expect_holds_report(
        "operator confirm",
        config,
        depth_from_env(80),
        &[
            "fenced",
            "forced a new cluster",
            "forced cluster accepts writes",
            "rejoined as voter after a force",
        ],
    );
    expect_complete("operator confirm", &report);
}

/// A daemon that ignores Pacemaker's maintenance mode goes on changing
/// etcd while the operator works by hand.
#[test]
fn acting_in_maintenance_mode_is_caught() {
    let config = Config {
        maintenance: true,
        check_liveness: false,
        ..Config::two_node()
    };
    expect_violation(Mutation::IgnoreMaintenance, "maintenance", config, 20);
}

/// The real `decide` changes nothing while maintenance mode holds (the
/// checker flags any step decided then), never loses a write around it, and
/// the pair settles once it ends.
#[test]
fn maintenance_mode_pauses_every_step() {
    let config = Config {
        maintenance: true,
        ..Config::two_node()
    };
    let report = expect_holds_report(
        "maintenance",
        config,
        depth_from_env(80),
        &[
            "maintenance mode on",
            "fenced",
            "forced a new cluster",
            "write acknowledged",
        ],
    );
    expect_complete("maintenance", &report);
}

fn config_with(mut config: Config, mutation: Mutation) -> Config {
    config.policy = Mutated {
        mutation: Some(mutation),
    };
    config
}

/// Pacemaker begins no start (and no fence) while another start is in
/// flight, and a start ends as the daemon's start action ends: the real
/// `decide` keeps every rule, and the pair settles after any one fault.
#[test]
fn serial_starts_hold() {
    expect_whole_space(
        "serial starts",
        Config {
            serial_starts: true,
            ..Config::two_node()
        },
        ONE_FAULT_REACH,
    );
}

/// Two power losses in any order and at any moment (the survivor lost
/// while the fenced node returns, before it is added, as a learner, right
/// after its promotion; power losses in a row; a total outage), with
/// Pacemaker's serial starts: once the faults stop, the pair settles with
/// two voters. Graceful stops are checked apart
/// (`graceful_stops_settle_after_two_faults`).
#[test]
fn two_faults_settle_with_serial_starts() {
    expect_whole_space(
        "serial starts, settling after two faults",
        two_faults(Config::two_node()),
        &[
            "fenced",
            "forced a new cluster",
            "rejoined as voter after a force",
            "learner added",
            "write acknowledged",
        ],
    );
}

/// The start action before: it returned only once etcd ran. The returning
/// node's start waits for its peer's etcd, Pacemaker begins no start of the
/// peer while it is in flight, and the pair waits on itself.
#[test]
fn a_start_waiting_inside_its_action_is_caught_as_a_stuck_pair() {
    let config = two_faults(Config::two_node());
    let cx = expect_violation(Mutation::StartWaitsInAction, "liveness", config, 80);
    assert!(
        cx.events
            .iter()
            .filter(|e| matches!(e, Event::Crash(_)))
            .count()
            == 2,
        "{}",
        cx.render()
    );
}

/// Fencing fails and an operator confirms, with Pacemaker's serial starts
/// and two faults: the pair settles with the real `decide`.
#[test]
fn an_operators_confirm_settles_after_two_faults() {
    let config = two_faults(Config {
        fence_fails: true,
        ..Config::two_node()
    });
    expect_whole_space(
        "operator confirm, serial starts, two faults",
        config,
        &[
            "fenced",
            "forced a new cluster",
            "rejoined as voter after a force",
        ],
    );
}

/// The same with the start action before: after the confirm and the
/// confirmed node's return, the two starts wait on each other.
#[test]
fn a_start_waiting_after_an_operators_confirm_is_caught() {
    let config = two_faults(Config {
        fence_fails: true,
        ..Config::two_node()
    });
    let cx = expect_violation(Mutation::StartWaitsInAction, "liveness", config, 80);
    assert!(
        cx.events.iter().any(|e| matches!(e, Event::Confirm(..))),
        "{}",
        cx.render()
    );
}

/// The forced restart before: the new epoch was written first, and a power
/// loss before the restart left it on the old two-member data. The fenced
/// peer, back, calls its data stale and archives it; the forcing node's
/// member waits for that peer's vote: no voter can ever get quorum again
/// without an operator. (The real rule raises the epoch only once the
/// forced membership shows; `two_faults_settle_with_serial_starts` covers
/// a power loss at every step of a force.)
#[test]
fn an_epoch_written_before_the_forced_restart_is_caught() {
    let config = Config {
        liveness_faults: 2,
        graceful_stops: false,
        ..Config::two_node()
    };
    let cx = expect_violation(Mutation::EpochBeforeForce, "liveness", config, 80);
    assert!(
        matches!(cx.events.last(), Some(Event::Crash(_))),
        "{}",
        cx.render()
    );
}

/// The in-sync marker before: a flag for the boot, naming no data and not
/// cleared when etcd exits. A node whose member directory went missing
/// rejoins as a learner and is promoted (marker set), its etcd exits, the
/// peer goes on without it, and it rejoins again: the marker from the
/// first membership now vouches for an empty learner. The real marker
/// (cleared whenever etcd is found not running, and valid only for the
/// cluster, member and epoch it names) never does:
/// `lost_member_dirs_never_lose_a_write` checks the same invariant.
#[test]
fn a_marker_outliving_an_etcd_exit_is_caught() {
    let config = Config {
        lose_member_dir: true,
        check_liveness: false,
        ..Config::two_node()
    };
    let cx = expect_violation(Mutation::MarkerOutlivesEtcdExit, "lost write", config, 80);
    assert!(
        cx.events.iter().any(|e| matches!(e, Event::EtcdCrash(_))),
        "{}",
        cx.render()
    );
}

/// The daemon carries a decision's whole plan out on the facts of one
/// gathering (not one step per look), and gathers again only right before a
/// forced restart: the real `decide` keeps every rule, and the pair
/// settles after any one fault.
#[test]
fn plans_carried_out_on_one_gathering_hold() {
    expect_whole_space(
        "plans",
        Config {
            plans: true,
            ..Config::two_node()
        },
        ONE_FAULT_REACH,
    );
}

/// Everything added for compound faults at once: serial starts, whole
/// plans, and settling checked after any two power losses, partitions,
/// etcd crashes or daemon restarts.
#[test]
fn plans_and_serial_starts_settle_after_two_faults() {
    expect_whole_space(
        "plans, serial starts, settling after two faults",
        two_faults(Config {
            plans: true,
            ..Config::two_node()
        }),
        &[
            "fenced",
            "forced a new cluster",
            "rejoined as voter after a force",
            "write acknowledged",
        ],
    );
}

/// The forced restart before: carried out on the facts its plan was made
/// from. Maintenance mode goes on between the decision and the restart,
/// and etcd is forced while the operator works by hand. The fresh
/// gathering right before the force sees the pause and abandons it
/// (`maintenance_mode_pauses_every_step` holds with the same check).
#[test]
fn a_force_on_its_plans_facts_is_caught_in_maintenance() {
    let config = Config {
        maintenance: true,
        plans: true,
        check_liveness: false,
        ..Config::two_node()
    };
    let cx = expect_violation(Mutation::ForceOnPlanFacts, "maintenance", config, 40);
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::Maintenance(true))),
        "{}",
        cx.render()
    );
}

/// Outside maintenance, a force carried out on the facts of its plan
/// breaks none of the split-brain, lost-write, nothing-deleted, one-claim
/// and voter rules: whatever changed since (the peer back, its
/// record, a write), the claim, visible before the force, makes the
/// returning peer yield. The fresh gathering before a force guards the
/// pause, and is defence in depth for the rest.
#[test]
fn a_force_on_its_plans_facts_breaks_no_rule_outside_maintenance() {
    let config = Config {
        plans: true,
        ..Config::two_node()
    };
    expect_whole_space(
        "plans, force on the plan's facts",
        config_with(config, Mutation::ForceOnPlanFacts),
        &["forced a new cluster", "forced cluster accepts writes"],
    );
}

/// Fencing fails, the lost node is off, and an operator confirms it: the
/// survivor forces and runs alone while its peer stays off (a directed
/// trace: the liveness check powers every node on, which would end this
/// wait without the confirm).
#[test]
fn after_an_operators_confirm_the_survivor_runs_alone() {
    let model = EtcdModel::new(Config {
        fence_fails: true,
        ..Config::two_node()
    });
    let mut s = model.init().remove(0);
    for e in [Event::Write(0), Event::Crash(0), Event::Confirm(1, 0)] {
        s = model
            .apply(&s, &e)
            .unwrap_or_else(|| panic!("{e:?} changed nothing"));
    }
    // n2's daemon looks and acts until nothing changes; n1 stays off.
    for _ in 0..20 {
        for e in [Event::Observe(1), Event::Act(1), Event::SyncCib] {
            if let Some(next) = model.apply(&s, &e) {
                s = next;
            }
        }
    }
    let n2 = &s.nodes[1];
    let alone = n2.etcd
        && n2
            .data
            .as_ref()
            .is_some_and(|d| d.epoch == 1 && d.config.len() == 1 && d.log == [1]);
    assert!(alone, "n2 does not run alone after the confirm:\n{s:?}");
}

/// Graceful stops with settling checked after two faults: a leave cut off
/// between the departure record and the removal (an etcd exit, a power
/// loss) ends with the departed node starting its member on its data,
/// which the peer's member waits for; the pair settles.
#[test]
fn graceful_stops_settle_after_two_faults() {
    let config = Config {
        graceful_stops: true,
        ..two_faults(Config::two_node())
    };
    expect_whole_space(
        "graceful stops, settling after two faults",
        config,
        ONE_FAULT_REACH,
    );
}

/// The rule before: a departed node waited for its peer's etcd whatever
/// it did. The leave is cut off before the removal (the departure is
/// recorded, etcd exits), and the departed node waits for its peer while
/// the peer's member, in the unchanged two-member list, waits for its vote.
#[test]
fn a_departed_node_waiting_for_its_peer_is_caught_as_a_stuck_pair() {
    let config = Config {
        graceful_stops: true,
        ..two_faults(Config::two_node())
    };
    let cx = expect_violation(Mutation::DepartedWaitsForPeer, "liveness", config, 80);
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::GracefulStop(_))),
        "{}",
        cx.render()
    );
    assert!(
        cx.violation
            .detail
            .contains("left the member list gracefully"),
        "{}",
        cx.render()
    );
}

/// Member directories lost with settling checked after two faults: the
/// pair settles, or every node that refuses names the node whose data
/// (or, for a missing directory, whose state file) is newest.
#[test]
fn lost_member_dirs_settle_or_name_the_newest_data_after_two_faults() {
    expect_whole_space(
        "lost member dirs, settling or refusing after two faults",
        lost_dirs_two_faults(),
        &["fenced", "forced a new cluster", "write acknowledged"],
    );
}

/// Member directories lost, settling checked after two faults, and a
/// refusal that names the newest data accepted as the end.
fn lost_dirs_two_faults() -> Config {
    two_faults(Config {
        lose_member_dir: true,
        refusal_ends: true,
        ..Config::two_node()
    })
}

/// A compound fault: a write, then both nodes lose power
/// and n1's member directory with it, n2's data intact; they boot in
/// either order. No refusal counts as an end here: n1 restarts its old
/// voter on an empty directory, n2's member leads with every write, and
/// the pair is whole again by itself. Under the rule before (`NoReseed`)
/// the same events end with n2 refusing and n1 waiting.
#[test]
fn one_lost_member_dir_after_a_total_outage_settles_without_an_operator() {
    let story = |policy: Mutated, first_up: usize| {
        let model = EtcdModel::new(Config {
            policy,
            ..two_faults(Config {
                lose_member_dir: true,
                ..Config::two_node()
            })
        });
        let mut s = model.init().remove(0);
        for ev in [
            Event::Write(0),
            Event::Write(1),
            Event::CrashLosingMemberDir(0),
            Event::Crash(1),
            Event::PowerOn(first_up),
        ] {
            s = model
                .apply(&s, &ev)
                .unwrap_or_else(|| panic!("{ev:?} is not possible here: {s:?}"));
        }
        assert_eq!(s.acked.len(), 2, "{s:?}");
        model.settle(&s)
    };
    for first_up in [0, 1] {
        if let Err(v) = story(Mutated::default(), first_up) {
            panic!("n{} up first: {}: {}", first_up + 1, v.rule, v.detail);
        }
        let before = story(
            Mutated {
                mutation: Some(Mutation::NoReseed),
            },
            first_up,
        )
        .expect_err("the rule before settled a lost data volume by itself");
        assert_eq!(before.rule, "liveness", "{}", before.detail);
    }
}

/// A node whose member directory is gone restarting its old voter beside
/// any data its peer holds: beside older data (the peer was fenced, this
/// node forced and took writes alone, then lost its directory) the
/// reseeded pair leads with the peer's older log, and a write this node
/// acknowledged alone is gone.
#[test]
fn reseeding_beside_older_data_is_caught_as_a_lost_write() {
    expect_after_a_lost_dir(Mutation::ReseedFromAnyData, "lost write", 40);
}

/// The checker's trace on a rule before that left a pair with a lost
/// member directory waiting: a liveness violation after such a loss.
fn expect_stuck_after_a_lost_dir(mutation: Mutation) -> Counterexample<Event, State> {
    expect_after_a_lost_dir(mutation, "liveness", 80)
}

/// The checker's trace on a rule before: a violation of `rule` after a
/// member directory was lost, in the lost-directory run with two faults.
fn expect_after_a_lost_dir(
    mutation: Mutation,
    rule: &str,
    depth: usize,
) -> Counterexample<Event, State> {
    let cx = expect_violation(mutation, rule, lost_dirs_two_faults(), depth);
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::CrashLosingMemberDir(_))),
        "{}",
        cx.render()
    );
    cx
}

/// The rule before: a node whose member directory is gone waited to join
/// whenever its peer's record said it held data. n1 is lost and fenced,
/// n2 forces, then loses power and its member directory: n1's older data
/// waits for n2's vote and n2 waits to join n1, and nothing names the
/// missing directory or the restore.
#[test]
fn waiting_on_older_data_after_a_lost_member_dir_is_caught() {
    expect_stuck_after_a_lost_dir(Mutation::WaitOnOlderData);
}

/// The same wait on a learner's data (the record's `learner` ignored): the
/// directory is lost right after the other node rejoined as a learner that
/// has not been promoted; that learner waits for the leader whose data is
/// gone, and the node without data waits for the learner.
#[test]
fn waiting_on_a_learners_data_after_a_lost_member_dir_is_caught() {
    let cx = expect_stuck_after_a_lost_dir(Mutation::WaitOnLearnerData);
    assert!(cx.violation.detail.contains("learner"), "{}", cx.render());
}

/// A forced restart's epoch is an intent until a quorate look shows the
/// forcing member alone. The rule before ignored the intent: n1 is lost
/// and fenced, n2 forces and acknowledges a write alone before any look
/// confirms the epoch, then loses power and its member directory. Its
/// state file still names the old epoch, so n1's older data looks
/// current, n2 restarts its old voter on an empty directory beside it,
/// and the write n2 acknowledged alone is gone (found with the liveness
/// check off, as the shorter trace below ends first).
#[test]
fn ignoring_an_unconfirmed_force_is_caught_as_a_lost_write() {
    let config = Config {
        lose_member_dir: true,
        check_liveness: false,
        ..Config::two_node()
    };
    let cx = expect_violation(Mutation::IgnorePendingEpoch, "lost write", config, 40);
    let wrote_alone = cx
        .events
        .windows(2)
        .any(|w| matches!(w, [Event::Act(x), Event::Write(y)] if x == y));
    let lost_dir = cx
        .events
        .iter()
        .any(|e| matches!(e, Event::CrashLosingMemberDir(_)));
    assert!(wrote_alone && lost_dir, "{}", cx.render());
}

/// The rule before also names the wrong node: both member directories
/// lost, one of them right after its unconfirmed force, and each node's
/// refusal names its own state file's epoch, so the one without the
/// newest data sends the operator to restore its own.
#[test]
fn ignoring_an_unconfirmed_force_names_the_wrong_node() {
    let cx = expect_after_a_lost_dir(Mutation::IgnorePendingEpoch, "liveness", 40);
    assert!(
        cx.violation.detail.contains("pending: Some(1)"),
        "{}",
        cx.render()
    );
}

/// The same events, step by step: the force's two halves, a write before
/// any look confirms the epoch, the power loss that takes the member
/// directory, both nodes booting. The real rule settles on refusals that
/// name n2 (its unconfirmed epoch is the newest data), never on a pair
/// that serves without the write; the rule before loses the write.
#[test]
fn an_unconfirmed_force_followed_by_a_lost_member_dir_names_the_forcing_node() {
    let story = |policy: Mutated, first_up: usize| {
        let model = EtcdModel::new(Config {
            policy,
            ..lost_dirs_two_faults()
        });
        let mut s = model.init().remove(0);
        for ev in [
            Event::Crash(0),
            Event::Fence(1, 0),
            Event::Observe(1),
            Event::Act(1),
            Event::Observe(1),
            Event::Act(1),
            Event::Act(1),
            Event::Write(1),
            Event::CrashLosingMemberDir(1),
            Event::PowerOn(first_up),
        ] {
            s = model
                .apply(&s, &ev)
                .unwrap_or_else(|| panic!("{ev:?} is not possible here: {s:?}"));
        }
        let lost = s.nodes[1].lost.unwrap_or_else(|| panic!("{s:?}"));
        assert_eq!((lost.epoch, lost.pending), (0, Some(1)), "{s:?}");
        assert_eq!(s.acked, [1], "{s:?}");
        model.settle(&s)
    };
    for first_up in [0, 1] {
        if let Err(v) = story(Mutated::default(), first_up) {
            panic!("n{} up first: {}: {}", first_up + 1, v.rule, v.detail);
        }
        let before = story(
            Mutated {
                mutation: Some(Mutation::IgnorePendingEpoch),
            },
            first_up,
        )
        .expect_err("the rule before kept the write n2 acknowledged alone");
        assert_eq!(before.rule, "lost write", "{}", before.detail);
    }
}

/// A daemon restarted between a forced restart's stop and its restart
/// finds etcd stopped. The rule before cleared the in-sync marker then, as
/// for any etcd exit, and the survivor, the only node with the data,
/// refused to force again: writes stayed down until the fenced peer came
/// back or an operator acted (the liveness check, which lets the peer
/// return, does not see that outage). The real rule keeps the marker while
/// its own force is unconfirmed (no other member can take a write
/// meanwhile) and forces again at once.
#[test]
fn a_daemon_restarted_in_the_middle_of_a_force_forces_again() {
    let story = |policy: Mutated| {
        let model = EtcdModel::new(Config {
            policy,
            ..Config::two_node()
        });
        let mut s = model.init().remove(0);
        for ev in [
            Event::Crash(0),
            Event::Fence(1, 0),
            Event::Observe(1),
            Event::Act(1),
            Event::Observe(1),
            Event::Act(1),
            Event::DaemonRestart(1),
            Event::Observe(1),
        ] {
            s = model
                .apply(&s, &ev)
                .unwrap_or_else(|| panic!("{ev:?} is not possible here: {s:?}"));
        }
        // The peer stays off; the survivor's daemon goes on.
        for _ in 0..8 {
            for ev in [Event::Observe(1), Event::Act(1)] {
                s = model.apply(&s, &ev).unwrap_or(s);
            }
        }
        s
    };
    let serving = |s: &State| {
        s.nodes[1].etcd
            && s.nodes[1]
                .data
                .as_ref()
                .is_some_and(|d| d.config.len() == 1 && d.epoch == 1)
    };
    let s = story(Mutated::default());
    assert!(serving(&s), "{s:?}");
    let before = story(Mutated {
        mutation: Some(Mutation::ClearMarkerMidForce),
    });
    assert!(!serving(&before), "{before:?}");
    assert!(!before.nodes[1].in_sync, "{before:?}");
}

/// State files lost (data intact) and machines replaced (no data, no state
/// file, no archive) at any moment, with settling checked after two
/// faults: no write is ever lost, and the pair settles or every refusal
/// names a node with the newest data.
fn lost_state_two_faults() -> Config {
    two_faults(Config {
        lose_state_file: true,
        refusal_ends: true,
        ..Config::two_node()
    })
}

#[test]
fn lost_state_files_and_replaced_machines_settle_or_name_the_newest_data() {
    expect_whole_space(
        "lost state files and replaced machines, two faults",
        lost_state_two_faults(),
        &["fenced", "forced a new cluster", "write acknowledged"],
    );
}

/// The rule before: a missing state file read as "epoch 0, never formed".
/// n1 is lost and fenced, n2 forces, n1 rejoins and is promoted; both lose
/// power and n2's state file is gone. n2 takes its own voter data for stale
/// beside n1's epoch and archives it, then waits to join n1, whose member
/// waits for n2's vote.
#[test]
fn a_lost_state_file_read_as_new_is_caught() {
    let cx = expect_violation(
        Mutation::StateLossReadsAsNew,
        "liveness",
        lost_state_two_faults(),
        80,
    );
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::CrashLosingStateFile(_))),
        "{}",
        cx.render()
    );
}

/// The rule before: a node whose state file was lost started its data
/// only where the peer's record listed its member as a voter. n1 is
/// replaced and joins; n2 adds it as a learner and loses power with its
/// state file before the promotion; n1 fences n2. n2 comes back and
/// refuses beside the learner it added, naming n1's learner data as the
/// one to keep, while n1's learner waits for n2's voter.
#[test]
fn a_refusal_beside_the_nodes_own_learner_is_caught() {
    let cx = expect_violation(
        Mutation::RefuseBesideOwnLearner,
        "liveness",
        lost_state_two_faults(),
        80,
    );
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::CrashLosingStateFile(_))),
        "{}",
        cx.render()
    );
}

/// The rule before: a replaced machine (no data, no state file) was no
/// proof that no other member runs. After a total outage its peer's member
/// waits for the old member's vote and for a fence that never comes, the
/// new machine waits for that member to serve, and neither names a command.
#[test]
fn a_blank_peer_taken_for_no_proof_is_caught() {
    let cx = expect_violation(
        Mutation::BlankPeerIsNoProof,
        "liveness",
        lost_state_two_faults(),
        80,
    );
    assert!(
        cx.events
            .iter()
            .any(|e| matches!(e, Event::CrashReplacingDisks(_))),
        "{}",
        cx.render()
    );
}

/// Maintenance mode before: the in-sync marker was cleared the moment it
/// began. n2 loses power inside the window; once it ends Pacemaker fences
/// n2, and n1, an in-sync voter throughout, refused to force: writes
/// stayed down until n2 came back. The real rule keeps the marker (a pause
/// changes no data) and n1 forces by itself; `maintenance_mode_pauses_every_step`
/// checks that no write is lost with hand stops and starts inside the
/// window.
#[test]
fn a_peer_lost_inside_maintenance_is_forced_past_once_it_ends() {
    let story = |policy: Mutated| {
        let model = EtcdModel::new(Config {
            policy,
            maintenance: true,
            ..Config::two_node()
        });
        let mut s = model.init().remove(0);
        for ev in [
            Event::Maintenance(true),
            Event::Observe(0),
            Event::Act(0),
            Event::Crash(1),
            Event::Observe(0),
            Event::Maintenance(false),
            Event::Fence(0, 1),
        ] {
            s = model.apply(&s, &ev).unwrap_or(s);
        }
        for _ in 0..8 {
            for ev in [Event::Observe(0), Event::Act(0)] {
                s = model.apply(&s, &ev).unwrap_or(s);
            }
        }
        s
    };
    let serving = |s: &State| {
        s.nodes[0].etcd
            && s.nodes[0]
                .data
                .as_ref()
                .is_some_and(|d| d.config.len() == 1)
    };
    let s = story(Mutated::default());
    assert!(serving(&s), "{s:?}");
    let before = story(Mutated {
        mutation: Some(Mutation::ClearMarkerInMaintenance),
    });
    assert!(!serving(&before), "{before:?}");
}
