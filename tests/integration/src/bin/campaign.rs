//! `make campaign ROUNDS=N SEED=S`: randomised rounds of compound faults on
//! the two-node namespace harness (see `warden_integration::campaign`).
//! Prints one line per round and, last, the summary line
//! `campaign: R rounds, P passed, L lost, O order, S stuck, U unsafe`;
//! `ROUND_SEEDS=a,b` replays chosen rounds by the seeds their lines print;
//! exits 1 unless nothing was lost, reordered or unsafe and every stuck
//! round was explained by the daemons.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use warden_integration::campaign::{self, Tally};

fn env_u64(name: &str) -> Result<Option<u64>> {
    match std::env::var(name) {
        Ok(s) if !s.trim().is_empty() => {
            let v = s
                .trim()
                .parse()
                .with_context(|| format!("{name}={s:?} is not a whole number"))?;
            Ok(Some(v))
        }
        _ => Ok(None),
    }
}

fn main() -> ExitCode {
    // An interrupted campaign (Ctrl-C, a CI timeout) still tears its
    // cluster down: namespaces, daemons, Pacemaker and temp dirs.
    if let Err(e) = warden_harness::teardown_on_signals() {
        eprintln!("campaign: {e:#}");
        return ExitCode::from(2);
    }
    match run() {
        Ok(t) if t.ok() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("campaign: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<Tally> {
    // ROUND_SEEDS replays chosen rounds (the seeds the round lines print).
    if let Ok(list) = std::env::var("ROUND_SEEDS")
        && !list.trim().is_empty()
    {
        let seeds = list
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<u64>()
                    .with_context(|| format!("ROUND_SEEDS: {s:?} is not a whole number"))
            })
            .collect::<Result<Vec<_>>>()?;
        println!("campaign: replaying {} round(s)", seeds.len());
        let tally = campaign::run_rounds(&seeds, |line| println!("{line}"))?;
        println!("{tally}");
        return Ok(tally);
    }
    let rounds = env_u64("ROUNDS")?.unwrap_or(10) as usize;
    ensure!(rounds >= 1, "ROUNDS must be at least 1");
    let seed = match env_u64("SEED")? {
        Some(s) => s,
        None => SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs(),
    };
    println!("campaign: {rounds} rounds, SEED={seed} (replay with the same SEED)");
    let tally = campaign::run(rounds, seed, |line| println!("{line}"))?;
    println!("{tally}");
    Ok(tally)
}
