//! How the CLI finds the daemon (and, for snapshots, etcd): `--socket`, or
//! the configuration (`--config`, default /etc/etcd-warden/config.toml), or a
//! standalone directory (`--standalone DIR`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use warden_api::client::{Client, ClientError};

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
    /// The settings: the standalone directory's, or the configuration's. A
    /// configuration that does not load is an error naming its file, line
    /// and key (exit 78), never passed over.
    pub(crate) fn settings(&self) -> anyhow::Result<Settings> {
        settings(&self.config, self.standalone.as_deref())
    }

    /// The daemon's socket: `--socket`, else the configured one.
    pub(crate) fn socket(&self) -> anyhow::Result<PathBuf> {
        match &self.socket {
            Some(s) => Ok(s.clone()),
            None => Ok(self.settings()?.api.socket),
        }
    }

    /// A client for the daemon's socket.
    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::new(self.socket()?))
    }

    /// GET `path` from the daemon; a daemon that is not there is said so
    /// with where to look ([`Target::unreachable`]).
    pub(crate) fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let answer = self.client()?.get(path, self.timeout());
        answer.map_err(|e| self.explain(e))
    }

    /// POST `body` to `path` on the daemon, as [`Target::get`].
    pub(crate) fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<T> {
        let answer = self.client()?.post(path, body, self.timeout());
        answer.map_err(|e| self.explain(e))
    }

    /// A client error as the operator reads it.
    pub(crate) fn explain(&self, e: ClientError) -> anyhow::Error {
        match e {
            ClientError::Connect { path, error } => {
                anyhow::anyhow!("{}", self.unreachable(&path, &error))
            }
            e => e.into(),
        }
    }

    /// The daemon does not answer on `socket`: say so, and where to look.
    pub(crate) fn unreachable(&self, socket: &Path, error: &std::io::Error) -> String {
        if error.kind() == std::io::ErrorKind::PermissionDenied {
            return format!(
                "this user may not connect to the etcd-warden daemon's socket {} ({error}): run as root, or as a user in the socket's group (api.socket_group) and in api.allowed_users",
                socket.display()
            );
        }
        let look = match &self.standalone {
            Some(dir) => format!(
                "start it with `etcd-warden daemon --standalone {}`",
                dir.display()
            ),
            None => "see `systemctl status etcd-warden` and `journalctl -u etcd-warden`".into(),
        };
        format!(
            "the etcd-warden daemon is not reachable at {} ({error}): {look}",
            socket.display()
        )
    }

    /// The answer deadline.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout.max(1))
    }
}

/// The settings of a standalone directory, or of the configuration rooted
/// at `config`.
pub(crate) fn settings(config: &Path, standalone: Option<&Path>) -> anyhow::Result<Settings> {
    match standalone {
        Some(dir) => crate::standalone::load(dir),
        None => Ok(crate::config::load(config).map(crate::data_layout::effective)?),
    }
}
