//! The defragmentation loop.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::app::App;

/// The defragmentation policy ([defrag]): a look per `check_interval_ms`,
/// the first one interval after the start (a starting cluster is no time
/// for it). A defragment runs inside the loop's task: the next look waits
/// for it. Not watched by the watchdog: a defragment of a large database
/// legitimately takes minutes, and nothing else waits for this loop. The
/// interval and `enabled` are read at each look, so a reload changes them.
pub(crate) async fn run(app: Arc<App>, cancel: CancellationToken) -> anyhow::Result<()> {
    loop {
        let every = app.defrag.settings().check_interval;
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = cancel.cancelled() => return Ok(()),
        }
        if !app.defrag.settings().enabled {
            continue;
        }
        let r = app.defrag(crate::defrag::policy::Mode::Auto).await;
        if r.done {
            tracing::info!(steps = ?r.steps, "{}", r.message);
        } else {
            tracing::debug!("{}", r.message);
        }
    }
}
