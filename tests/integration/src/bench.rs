//! Failover timings on the namespace harness, shared by `failover-bench` and
//! usable by the demo: crash a node of a healthy two-node cluster, measure
//! until the survivor acknowledges a write, power the node back on, measure
//! until it is a voter again.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use warden_harness::crm;

use crate::twonode::{WardenCluster, last_logged_ms, logged_ms};

pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// The figures of one crash → failover → rejoin cycle.
#[derive(Debug, Clone, Copy)]
pub struct Cycle {
    /// Peer crash → the survivor's first acknowledged write.
    pub crash_to_write: Duration,
    /// Fence done (fence agent's log) → that write, when the log had it.
    pub fence_to_write: Option<Duration>,
    /// Crash → fence done.
    pub crash_to_fence: Option<Duration>,
    /// Power-on of the fenced node → it is a voter again (both voters,
    /// quorate).
    pub rejoin_to_voter: Duration,
    /// Pacemaker's start of etcd on the returning node (its daemon logs the
    /// action) → the leader's daemon logs the promotion: the part of the
    /// rejoin that is etcd-warden's and etcd's (archive, learner, catch-up,
    /// promotion), without the node's boot and Pacemaker's join and probes.
    /// What plain etcd's learner catch-up is compared with.
    pub start_to_voter: Option<Duration>,
    /// Acknowledged writes over the cycle (all checked afterwards).
    pub writes: usize,
}

/// Runs one cycle on a healthy cluster: `victim` loses power, the other
/// node must take writes again, then `victim` boots and rejoins. Every
/// acknowledged write is checked at the end (no split brain, nothing lost).
pub fn crash_cycle(
    w: &WardenCluster,
    victim: &str,
    prefix: &str,
    timeout: Duration,
) -> Result<Cycle> {
    let survivor = w.peer(victim);
    let all = w.nodes();
    let writer = w.writer(prefix, std::slice::from_ref(&survivor))?;
    let t = Instant::now();
    writer.wait_ack_after(Some(&survivor), t, timeout)?;
    // A pair just formed (or whose leader just moved) may not have marked
    // the survivor's data complete yet; a crash before that measures a
    // refusal to force, not a failover.
    crate::twonode::poll(&format!("{survivor}'s in-sync marker"), timeout, || {
        Ok(w.in_sync(&survivor)?.then_some(()))
    })?;

    let fences_before = w.fence_count(&survivor, victim)?;
    let t_crash = Instant::now();
    w.c.crash(victim)?;
    // Every process of the victim is gone now; a write sent before this may
    // still have been committed by the pair while they died.
    let t_dead = Instant::now();
    // This crash's own fence: the history also holds the earlier cycles'.
    w.c.wait_for(
        &survivor,
        crm::fenced_times(victim, fences_before + 1),
        timeout,
    )?;
    let fence = w.fence_done_at(victim);
    let ack = writer.wait_ack_after(Some(&survivor), t_dead, timeout)?;
    let crash_wall = ack.wall - ack.at.duration_since(t_crash);
    let fence_to_write = fence.and_then(|f| ack.wall.duration_since(f).ok());
    let crash_to_fence = fence.and_then(|f| f.duration_since(crash_wall).ok());

    let t_boot = Instant::now();
    let boot_ms = unix_ms(SystemTime::now());
    w.boot(victim, timeout)?;
    w.wait_voters(&survivor, &all, timeout)?;
    let rejoin_to_voter = t_boot.elapsed();
    let started = logged_ms(&w.daemon_log(victim), &[": action action=Start"])
        .into_iter()
        .find(|&t| t >= boot_ms);
    let promoted = last_logged_ms(&w.daemon_log(&survivor), &["promoted to voter"]);
    let start_to_voter = started
        .zip(promoted)
        .filter(|(s, p)| p >= s)
        .map(|(s, p)| Duration::from_millis(p - s));
    w.wait_started(&all, timeout)?;
    let acks = writer.finish();
    w.check_writes(&acks, prefix, &all)
        .context("checking the cycle's writes")?;
    Ok(Cycle {
        crash_to_write: ack.at.duration_since(t_crash),
        fence_to_write,
        crash_to_fence,
        rejoin_to_voter,
        start_to_voter,
        writes: acks.len(),
    })
}

/// The `p`-quantile (0..=1) of `v` by nearest rank; `None` when empty.
pub fn quantile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len());
    Some(s[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn nearest_rank_quantiles() {
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[3.0], 0.95), Some(3.0));
        assert_eq!(quantile(&[2.0, 1.0], 0.5), Some(1.0));
        assert_eq!(quantile(&[2.0, 1.0], 0.95), Some(2.0));
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(5.0));
        assert_eq!(quantile(&v, 0.95), Some(10.0));
    }
}
