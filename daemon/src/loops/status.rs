//! The status notifier: systemd's STATUS= follows the node state.

use std::sync::Arc;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;

use crate::app::App;

/// STATUS= follows the node state.
pub(crate) async fn run(app: Arc<App>, cancel: CancellationToken) -> anyhow::Result<()> {
    let mut state_rx = app.subscribe_state();
    loop {
        tokio::select! {
            r = state_rx.changed() => {
                if r.is_err() {
                    // The app outlives the loop.
                    cancel.cancelled().await;
                    return Ok(());
                }
                let s = state_rx.borrow_and_update().clone();
                super::notify(&[NotifyState::Status(&format!("etcd {s}"))]);
            }
            () = cancel.cancelled() => return Ok(()),
        }
    }
}
