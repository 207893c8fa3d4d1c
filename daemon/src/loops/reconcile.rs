//! The failover loop: the reconciler's passes.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::reconcile::Reconciler;
use crate::tasks::Heartbeat;

/// The failover loop: a pass at once, then on a timer (sooner while
/// something is pending), on a kick (fence alert, agent notification) and on
/// every leader change etcd shows. It publishes "in a pass since T, due by
/// T + the pass's limit" so that the watchdog can tell a long pass from a
/// wedged one.
pub(crate) async fn run(
    app: Arc<App>,
    reconciler: Arc<Reconciler>,
    beat: Arc<Heartbeat>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    // The longest one pass may take (the watchdog holds the loop to it).
    let limit = app.settings.timeouts.start_timeout;
    let mut at = Instant::now();
    let mut leader_rx = app.subscribe_leader();
    loop {
        beat.idle_until(at);
        tokio::select! {
            () = tokio::time::sleep_until(at) => {}
            () = reconciler.kicked() => {}
            () = caught_up(&app, &reconciler) => {
                tracing::debug!("a learner this member leads is in sync");
            }
            r = leader_rx.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r {
                    // The app outlives the loop; never seen, but a closed
                    // channel must not spin the loop.
                    leader_rx = app.subscribe_leader();
                }
            }
            () = cancel.cancelled() => return Ok(()),
        }
        beat.busy_for(limit);
        let pending = pass(&app, &reconciler).await;
        let fo = &app.settings.failover;
        at = Instant::now()
            + if pending {
                fo.reconcile_pending_interval
            } else {
                fo.reconcile_interval
            };
    }
}

/// One pass, then archive retention; whether something is pending, so that
/// the next pass comes sooner.
async fn pass(app: &App, reconciler: &Arc<Reconciler>) -> bool {
    let pending = reconciler.tick(&app.ports()).await;
    prune_archives(reconciler, app.archive_keep()).await;
    pending
}

/// How often the loop reads the leader's raft progress while a learner it
/// leads catches up (one HTTP read of the local member).
const LEARNER_WATCH: Duration = Duration::from_millis(50);

/// Resolves when a learner the last pass saw behind is in sync, so that its
/// promotion need not wait for the next timed pass; never resolves when
/// there is none.
async fn caught_up(app: &App, reconciler: &Reconciler) {
    let Some(id) = reconciler.catching_up() else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(LEARNER_WATCH).await;
        match app.etcd.raft_progress(LEARNER_WATCH).await {
            Ok(p) if p.in_sync(id) => return,
            // No longer the leader: the next pass sees why.
            Ok(p) if !p.is_leader => return,
            _ => {}
        }
    }
}

/// `failover.archive_keep`: after each pass (so within one interval of a
/// new archive), the oldest archives beyond the newest N are removed. 0, the
/// default, removes nothing.
async fn prune_archives(f: &Arc<crate::reconcile::Reconciler>, keep: u32) {
    if keep == 0 {
        return;
    }
    let paths = f.paths.clone();
    // Removing a large db is file-system work: off the async workers.
    match tokio::task::spawn_blocking(move || paths.prune_archives(keep)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "archive retention failed"),
        Err(e) => tracing::error!(error = %e, "archive retention panicked"),
    }
}
