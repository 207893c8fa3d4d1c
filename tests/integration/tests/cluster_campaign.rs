//! A small fixed-seed sample of `make campaign` (randomised compound
//! faults, every round judged for lost writes, broken real-time order,
//! split brain and a pair that stays stuck), meant to run in every CI run;
//! docs/benchmarks.md records long campaigns.
//!
//! Run it alone with
//! `cargo test -p warden-integration --test cluster_campaign` or
//! `make campaign ROUNDS=3 SEED=20261201`.

use warden_integration::campaign;

/// The seed of the sample: fixed, so that a failure replays with
/// `make campaign ROUNDS=3 SEED=20261201`.
const SEED: u64 = 20_261_201;

#[test]
fn a_fixed_seed_sample_of_the_campaign_passes() {
    let tally =
        campaign::run(3, SEED, |line| eprintln!("{line}")).unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("{tally}");
    assert!(tally.ok(), "{tally}");
}

/// The campaign's node-life faults, each once, judged as a campaign round
/// (writers and watchers on both nodes): a node's state file lost while it
/// is powered off, then a node replaced by a blank machine beside its peer.
#[test]
fn a_lost_state_file_and_a_replaced_node_pass_as_rounds() {
    use std::time::Duration;
    use warden_integration::campaign::Fault;
    each_passes_as_a_round(&[
        Fault::LostStateFile {
            node: "node2",
            back_after: Duration::from_secs(2),
        },
        Fault::ReplacedNode {
            node: "node1",
            back_after: Duration::from_secs(2),
        },
    ]);
}

/// The campaign's supervisor faults, each once, judged as a campaign round:
/// a hung etcd on the leader's node, a daemon down for 45 s, and
/// maintenance windows with a power loss, a daemon kill and an etcd kill
/// inside them.
#[test]
fn hung_members_long_daemon_outages_and_faults_in_maintenance_pass_as_rounds() {
    use std::time::Duration;
    use warden_integration::campaign::{Fault, Inside};
    let window = Duration::from_secs(4);
    each_passes_as_a_round(&[
        Fault::EtcdHang {
            node: "node1",
            lasts: Duration::from_secs(20),
        },
        Fault::DaemonKill {
            node: "node2",
            restart_after: Duration::from_secs(45),
        },
        Fault::MaintenanceWith {
            lasts: window,
            inside: Inside::PowerLoss("node2"),
        },
        Fault::MaintenanceWith {
            lasts: window,
            inside: Inside::DaemonKill("node1"),
        },
        Fault::MaintenanceWith {
            lasts: window,
            inside: Inside::EtcdKill("node2"),
        },
    ]);
}

/// Each of `faults` alone, as one campaign round on one fresh cluster, in
/// order; fails at the first round that does not pass.
fn each_passes_as_a_round(faults: &[warden_integration::campaign::Fault]) {
    use warden_integration::campaign::{Rng, Verdict};
    let w = campaign::fresh_cluster().unwrap_or_else(|e| panic!("{e:#}"));
    let mut rng = Rng::new(SEED);
    for (n, fault) in faults.iter().enumerate() {
        let judged = campaign::round_of(&w, n + 1, std::slice::from_ref(fault), &mut rng);
        eprintln!("[{fault}] {}", judged.verdict.word());
        if judged.verdict != Verdict::Passed {
            w.c.stop();
            panic!("[{fault}] {:?}", judged.verdict);
        }
    }
    w.c.stop();
}
