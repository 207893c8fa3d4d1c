//! The backend the configuration names, as one value the app holds.

use std::sync::Arc;
use std::time::Duration;

use super::process::Previous;
use super::{ProcState, SuperviseError, process, systemd};
use crate::config::{BackendKind, Settings};
use crate::etcd::conf::StartMode;

/// The backend chosen in the configuration.
#[derive(Debug)]
pub enum AnySupervisor {
    /// etcd as a child process.
    Process(process::ProcessSupervisor),
    /// etcd as a transient systemd unit.
    Systemd(systemd::SystemdSupervisor),
}

/// Each call goes to the backend in use.
impl AnySupervisor {
    /// The backend the configuration names. An etcd left running by a
    /// previous daemon instance (killed, crashed) is adopted as it is when it
    /// provably is this configuration's etcd, and stopped otherwise: never
    /// two supervisors, never an unsupervised etcd.
    pub(crate) async fn take_over(settings: &Arc<Settings>) -> Result<Self, SuperviseError> {
        Ok(match settings.etcd.backend {
            BackendKind::Process => {
                let p = process::ProcessSupervisor::new(settings.clone());
                if let Previous::Stopped { pid, why } =
                    p.take_over(settings.timeouts.stop_grace).await?
                {
                    tracing::warn!(pid, %why, "stopped the etcd left by a previous daemon instance");
                }
                AnySupervisor::Process(p)
            }
            BackendKind::Systemd => {
                AnySupervisor::Systemd(systemd::SystemdSupervisor::new(settings.clone()))
            }
        })
    }

    /// Start etcd in `mode` (the configuration is regenerated first).
    pub(crate) async fn start(&self, mode: StartMode) -> Result<u32, SuperviseError> {
        match self {
            AnySupervisor::Process(p) => p.start(mode).await,
            AnySupervisor::Systemd(s) => s.start(mode).await,
        }
    }

    /// Stop etcd: SIGTERM, then SIGKILL once `grace` has passed. Returns
    /// whether it stopped gracefully.
    pub(crate) async fn stop(&self, grace: Duration) -> Result<bool, SuperviseError> {
        match self {
            AnySupervisor::Process(p) => p.stop(grace).await,
            AnySupervisor::Systemd(s) => s.stop(grace).await,
        }
    }

    /// The process state, now.
    pub(crate) async fn state(&self) -> ProcState {
        match self {
            AnySupervisor::Process(p) => p.state().await,
            AnySupervisor::Systemd(s) => s.state().await,
        }
    }

    /// The backend's name.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            AnySupervisor::Process(p) => p.name(),
            AnySupervisor::Systemd(s) => s.name(),
        }
    }
}
