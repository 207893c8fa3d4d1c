//! How the CLI finds the daemon (and, for snapshots, etcd): `--socket`, or
//! the configuration (`--config`, default /etc/etcd-warden/config.toml), or a
//! standalone directory (`--standalone DIR`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use warden_api::client::Client;

use crate::config::Settings;

/// Where the daemon is.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Target {
    /// The daemon's API socket (overrides the configuration).
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
    /// The daemon's configuration file.
    #[arg(long, value_name = "PATH", default_value = crate::config::DEFAULT_CONFIG)]
    pub(crate) config: PathBuf,
    /// A standalone directory (see `etcd-warden daemon --standalone`).
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    pub(crate) standalone: Option<PathBuf>,
    /// How long to wait for an answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub(crate) timeout: u64,
}

impl Target {
    /// The settings, when a configuration is there.
    pub(crate) fn settings(&self) -> anyhow::Result<Settings> {
        match &self.standalone {
            Some(dir) => crate::standalone::load(dir),
            None => crate::config::load(&self.config)
                .map(crate::data_layout::effective)
                .with_context(|| format!("cannot load {}", self.config.display())),
        }
    }

    /// A client for the daemon's socket.
    pub(crate) fn client(&self) -> Client {
        if let Some(s) = &self.socket {
            return Client::new(s);
        }
        if let Some(dir) = &self.standalone {
            return Client::new(dir.join("api.sock"));
        }
        match crate::config::load(&self.config) {
            Ok(s) => Client::new(s.api.socket),
            Err(_) => Client::new(warden_api::DEFAULT_SOCKET),
        }
    }

    /// The answer deadline.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout.max(1))
    }
}
