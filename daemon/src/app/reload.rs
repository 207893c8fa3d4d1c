//! `etcd-warden reload` (`POST /v1/reload`, `systemctl reload
//! etcd-warden`): the configuration files read again, as the daemon read
//! them at its start, and compared with what it runs with. The keys a
//! running daemon can take (the defragmentation policy, archive retention)
//! are applied; the others are named with when they take effect. Files that
//! do not validate change nothing.

use std::sync::atomic::Ordering;

use warden_api::ReloadReply;

use crate::app::App;
use crate::config::changes::{self, Change, Takes};
use crate::config::{ConfigError, Settings};

impl App {
    /// Read the configuration again and apply what can be applied now.
    pub(crate) async fn reload(&self) -> ReloadReply {
        let running = self.running_settings();
        let read = {
            let base = running.clone();
            tokio::task::spawn_blocking(move || read_again(&base)).await
        };
        let new = match read {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return refused(e.to_string()),
            Err(e) => return refused(format!("the configuration could not be read: {e}")),
        };
        let changed = changes::between(&running, &new);
        if changed.iter().any(|c| c.takes == Takes::Now) {
            self.defrag.set_settings(new.defrag.clone());
            self.archive_keep
                .store(new.failover.archive_keep, Ordering::SeqCst);
        }
        let reply = reply(&new, &changed);
        log(&reply);
        reply
    }

    /// `failover.archive_keep` now (the start's, or the last reload's).
    pub(crate) fn archive_keep(&self) -> u32 {
        self.archive_keep.load(Ordering::SeqCst)
    }

    /// The settings the daemon runs with now: those it started with, with
    /// the keys a reload applied.
    fn running_settings(&self) -> Settings {
        let mut s = (*self.settings).clone();
        s.defrag = self.defrag.settings();
        s.failover.archive_keep = self.archive_keep();
        s
    }
}

/// The files again, through the same layers and the same choice of data
/// directory as at the daemon's start.
fn read_again(running: &Settings) -> Result<Settings, ConfigError> {
    crate::config::reload(running).map(crate::data_layout::effective)
}

fn refused(why: String) -> ReloadReply {
    tracing::warn!(error = %why, "configuration not reloaded; the daemon runs on as before");
    ReloadReply {
        refused: Some(why),
        ..ReloadReply::default()
    }
}

fn reply(new: &Settings, changed: &[Change]) -> ReloadReply {
    let keys = |t: Takes| -> Vec<String> {
        changed
            .iter()
            .filter(|c| c.takes == t)
            .map(|c| c.key.to_string())
            .collect()
    };
    ReloadReply {
        refused: None,
        sources: new
            .sources
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        applied: keys(Takes::Now),
        at_daemon_restart: keys(Takes::DaemonRestart),
        at_etcd_restart: keys(Takes::EtcdRestart),
        identity: keys(Takes::Identity),
    }
}

fn log(r: &ReloadReply) {
    tracing::info!(
        applied = ?r.applied,
        at_daemon_restart = ?r.at_daemon_restart,
        at_etcd_restart = ?r.at_etcd_restart,
        identity = ?r.identity,
        "configuration reloaded"
    );
}
