//! The report writer: the PacemakerCluster report written every
//! `report.interval_ms` to `report.path`.

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::tasks::Heartbeat;

/// The report writer ([report] path): a cycle per tick, as a task of its own
/// so that crm_mon never holds up the loop; a tick that comes while the
/// previous cycle still runs is skipped, never queued.
pub(crate) async fn run(
    app: Arc<App>,
    path: std::path::PathBuf,
    beat: Arc<Heartbeat>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    // Without systemd's RuntimeDirectory= (or under another path) the
    // directory may not exist yet; every cycle would fail on it.
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot create the report's directory");
    }
    let r = &app.settings.report;
    tracing::info!(
        path = %path.display(),
        interval_ms = r.interval.as_millis(),
        "writing the PacemakerCluster report"
    );
    // A cycle runs up to three commands (crm_mon, cibadmin,
    // corosync-cmapctl) and the live etcd section (Status, read, members).
    let bound = r.crm_mon_timeout * 3 + app.settings.timeouts.probe_timeout * 3;
    let mut tick = tokio::time::interval(r.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut cycle: Option<JoinHandle<Option<()>>> = None;
    beat.idle_until(Instant::now());
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = cancel.cancelled() => return Ok(()),
        }
        if cycle.as_ref().is_some_and(|t| !t.is_finished()) {
            app.metrics.report_skipped();
            tracing::debug!("report cycle still running: tick skipped");
            continue;
        }
        beat.busy_for(bound);
        let (c, b, every) = (app.clone(), beat.clone(), r.interval);
        cycle = Some(app.work.spawn(async move {
            report_cycle(c).await;
            // The next tick is at most one interval away.
            b.idle_until(Instant::now() + every);
        }));
    }
}

/// One cycle of the report writer: the live etcd section, then the shared
/// cycle (crm_mon, CIB, Corosync, previous report, atomic write) off the
/// async workers. A failure is logged and counted; the previous report is
/// left as it was and ages into staleness, which readers see.
async fn report_cycle(app: Arc<App>) {
    let (_, _, section) = app.etcd_section(app.settings.timeouts.probe_timeout).await;
    let cycle = crate::report_cycle::Cycle::for_daemon(&app.settings);
    let run = tokio::task::spawn_blocking(move || {
        cycle.run(Some(section), &mut |w| {
            tracing::warn!(warning = w, "report cycle");
        })
    })
    .await;
    match run {
        Ok(Ok(_)) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
                .unwrap_or_default();
            app.metrics.report_written(now);
        }
        Ok(Err(e)) => {
            app.metrics.report_failed();
            tracing::warn!(error = %e, "report cycle failed; the previous report is left as it was");
        }
        Err(e) => {
            app.metrics.report_failed();
            tracing::warn!(error = %e, "report cycle panicked; the previous report is left as it was");
        }
    }
}
