//! The probe loop: etcd asked every `probe_interval_ms`, what it shows
//! recorded, and a dead etcd restarted (autostart only).

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::etcd::conf::StartMode;
use crate::supervise::ProcState;
use crate::tasks::Heartbeat;

/// The probe loop: a probe per `probe_interval_ms`, the node state and
/// metrics it records, and etcd's restart after an unexpected exit
/// (autostart only).
pub(crate) async fn run(
    app: Arc<App>,
    beat: Arc<Heartbeat>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let t = &app.settings.timeouts;
    let mut next = Instant::now();
    let mut restart_at: Option<Instant> = None;
    let mut seen_death: Option<u32> = None;
    loop {
        beat.idle_until(next);
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = cancel.cancelled() => return Ok(()),
        }
        beat.busy_for(t.probe_timeout);
        let p = app.probe(t.probe_timeout, true).await;
        app.record(&p);
        if let ProcState::Died { pid, how } = &p.proc {
            if seen_death != Some(*pid) {
                seen_death = Some(*pid);
                app.metrics.unexpected_exit();
                tracing::error!(pid, %how, "etcd died");
                if app.should_restart() {
                    restart_at = Some(Instant::now() + t.restart_delay);
                }
            }
            if let Some(at) = restart_at
                && Instant::now() >= at
            {
                restart_at = None;
                app.metrics.restarted();
                tracing::warn!("restarting etcd (autostart)");
                let c = app.clone();
                let limit = t.start_timeout;
                app.work.spawn(async move {
                    if let Err(e) = c.start_etcd(StartMode::Normal, limit).await {
                        tracing::error!(error = %e, "restarting etcd failed");
                    }
                });
            }
        } else {
            restart_at = None;
        }
        next = Instant::now() + t.probe_interval;
    }
}
