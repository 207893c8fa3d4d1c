//! A forced restart that holds clients off until the revision has moved
//! past what the force dropped.
//!
//! `--force-new-cluster` keeps the member's log up to the commit index it
//! persisted. A follower learns of a commit only from the leader's next
//! message, so when the leader is lost the survivor may hold, past that
//! index, writes the leader had acknowledged. etcd drops them and gives
//! their revisions to the next writes: a client could read the same
//! revision for two different writes, and a watcher resuming from a
//! revision it saw would be sent different events as if they were the
//! ones it missed. So when the log's tail may hold such writes (the
//! reconciler reads it before the force), etcd first starts forced with
//! clients only on a loopback port the daemon picks, the revision is moved
//! past every revision the dropped entries could have taken, the history
//! up to there is compacted, and etcd is restarted normally.
//!
//! The reconciler writes the count down before the force and clears it
//! after: a daemon that died in between leaves it, and the next start of
//! that data goes the same way without the force ([`App::start_holding_clients`]
//! with `force` off), moving the revision on if the data shows the forced
//! one-member cluster.

use std::time::{Duration, Instant};

use crate::app::App;
use crate::etcd::conf::StartMode;
use crate::etcd::{Connector, LiveEtcd};
use crate::supervise::ProcState;

/// How often the held start is asked whether it answers.
const POLL: Duration = Duration::from_millis(20);

impl App {
    /// Start etcd with clients held off (forced with `force`), move the
    /// revision past `at_risk` revisions when its member list holds this
    /// member alone, then restart it normally. etcd must be stopped.
    /// Returns the PID of the normal start.
    pub(crate) async fn start_holding_clients(
        &self,
        at_risk: u64,
        force: bool,
        deadline: Duration,
    ) -> Result<u32, String> {
        let started = Instant::now();
        let left = || deadline.saturating_sub(started.elapsed());
        let client_url = format!("http://127.0.0.1:{}", free_loopback_port()?);
        let pid = self
            .launch(StartMode::ClientsHeld {
                client_url: client_url.clone(),
                force,
            })
            .await?;
        let held = LiveEtcd::new(client_url, Connector::plain());
        self.wait_held(&held, pid, left()).await?;
        crate::kill_point::reached("force-clients-held");
        let members = held
            .member_list(left())
            .await
            .map_err(|e| format!("the held start's member list: {e}"))?;
        if members.len() == 1 {
            self.move_revision(&held, at_risk, left()).await?;
        } else {
            tracing::info!(
                members = members.len(),
                "the data is not a forced one-member cluster: nothing was dropped, no revision to move"
            );
        }
        let grace = self.settings.timeouts.stop_grace.min(left() / 2);
        self.stop_etcd(grace).await.map_err(|e| e.to_string())?;
        self.start_etcd(StartMode::Normal, left()).await
    }

    async fn move_revision(
        &self,
        held: &LiveEtcd,
        at_risk: u64,
        deadline: Duration,
    ) -> Result<(), String> {
        let (before, after) = held
            .move_revision_past(at_risk, deadline)
            .await
            .map_err(|e| format!("cannot move the revision on after the forced restart: {e}"))?;
        tracing::warn!(
            entries = at_risk,
            from = before,
            to = after,
            "the forced restart dropped log entries past the persisted commit index; \
             moved the revision past them and compacted the history before them"
        );
        Ok(())
    }

    /// Wait until the held start answers Status, or fail when etcd exits
    /// or `deadline` passes.
    async fn wait_held(&self, held: &LiveEtcd, pid: u32, deadline: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(format!(
                    "etcd (pid {pid}), started with its clients held off, did not answer within {deadline:?}"
                ));
            }
            let ask = left.min(self.settings.timeouts.probe_timeout);
            if held.status(ask).await.is_ok() {
                return Ok(());
            }
            match self.supervisor.state().await {
                ProcState::Died { how, .. } => {
                    return Err(format!("etcd exited while starting ({how})"));
                }
                ProcState::Stopped => return Err("etcd was stopped while starting".into()),
                _ => {}
            }
            tokio::time::sleep(POLL.min(left)).await;
        }
    }
}

/// A loopback port free now (the kernel's pick, released at once for etcd).
fn free_loopback_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port for the held start: {e}"))
}
