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
