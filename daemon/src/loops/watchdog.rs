//! The systemd watchdog: WATCHDOG=1 at half of `WatchdogSec=` while every
//! loop keeps its promise (see [`crate::tasks::Heartbeat`]).

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::tasks::{Loops, Work};

/// The watchdog: pings every `every` (half of systemd's `WatchdogSec=`)
/// while no loop is wedged; stops pinging while one is, so that systemd
/// restarts the daemon. Never waits on a pass: it only reads promises.
pub(crate) async fn run(
    loops: Loops,
    work: Work,
    every: Duration,
    allowance: Duration,
    cancel: CancellationToken,
    mut ping: impl FnMut() + Send,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut reported: Option<&'static str> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = cancel.cancelled() => return,
        }
        match loops.wedged(Instant::now(), work.actions_due(), allowance) {
            None => {
                if let Some(name) = reported.take() {
                    tracing::warn!(task = name, "loop moving again: watchdog pings resume");
                }
                ping();
            }
            Some(w) => {
                if reported != Some(w.name) {
                    tracing::error!(
                        task = w.name,
                        phase = ?w.phase,
                        late_ms = w.late.as_millis() as u64,
                        "loop wedged past its deadline: watchdog pings stop, systemd restarts the daemon"
                    );
                    reported = Some(w.name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::OVERRUN_ALLOWANCE;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_pass_within_its_deadline_keeps_the_pings_going() {
        let loops = Loops::default();
        let now = Instant::now();
        loops.probe.idle_until(now + Duration::from_secs(1));
        loops.report.idle_until(now + Duration::from_secs(60));
        // A join that may take its whole 60 s start timeout.
        loops.reconcile.busy_for(Duration::from_secs(60));
        let pings = Arc::new(AtomicUsize::new(0));
        let p = pings.clone();
        let cancel = CancellationToken::new();
        let probe = loops.probe.clone();
        let task = tokio::spawn(run(
            loops.clone(),
            Work::default(),
            Duration::from_secs(15),
            OVERRUN_ALLOWANCE,
            cancel.clone(),
            move || {
                p.fetch_add(1, Ordering::SeqCst);
            },
        ));
        // The probe loop keeps ticking meanwhile.
        for _ in 0..80 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            probe.idle_until(Instant::now() + Duration::from_secs(1));
        }
        // 80 s: past the pass's deadline but within the allowance.
        let n = pings.load(Ordering::SeqCst);
        assert!(n >= 5, "{n} pings");
        cancel.cancel();
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_pass_past_its_deadline_and_the_allowance_stops_the_pings() {
        let loops = Loops::default();
        loops
            .probe
            .idle_until(Instant::now() + Duration::from_secs(3600));
        loops
            .report
            .idle_until(Instant::now() + Duration::from_secs(3600));
        loops.reconcile.busy_for(Duration::from_secs(60));
        let pings = Arc::new(AtomicUsize::new(0));
        let p = pings.clone();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(
            loops.clone(),
            Work::default(),
            Duration::from_secs(15),
            OVERRUN_ALLOWANCE,
            cancel.clone(),
            move || {
                p.fetch_add(1, Ordering::SeqCst);
            },
        ));
        tokio::time::sleep(Duration::from_secs(95)).await;
        let before = pings.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(pings.load(Ordering::SeqCst), before, "pinged while wedged");
        assert!(before >= 5);
        // The pass ends: pings resume.
        loops
            .reconcile
            .idle_until(Instant::now() + Duration::from_secs(10));
        tokio::time::sleep(Duration::from_secs(16)).await;
        assert!(pings.load(Ordering::SeqCst) > before);
        cancel.cancel();
        task.await.unwrap();
    }
}
