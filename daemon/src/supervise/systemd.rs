//! The `systemd` backend: etcd runs as a transient unit started through
//! systemd's D-Bus API (org.freedesktop.systemd1.Manager), so that restarting
//! the daemon does not restart etcd: a restarted daemon asks systemd for the
//! unit and adopts it as it is.
//!
//! Job outcomes are judged by the `JobRemoved` signal's result (`done`,
//! `failed`, `timeout`, `canceled`), not by ActiveState alone; `Subscribe()` is
//! called before the first job is queued so that no signal is missed, once
//! per bus connection: systemd answers a second `Subscribe()` from the same
//! connection with the error `AlreadySubscribed`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, OnceCell};
use zbus::{OwnedObjectPath, Variant as Value};

use super::{ProcState, SuperviseError, is_frozen};
use crate::config::Settings;
use crate::etcd::conf::{self, StartMode};

/// org.freedesktop.systemd1.Manager, the calls this backend needs.
#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
pub(crate) trait Manager {
    /// Start a transient unit.
    fn start_transient_unit(
        &self,
        name: &str,
        mode: &str,
        properties: &[(&str, Value<'_>)],
        aux: &[(&str, Vec<(&str, Value<'_>)>)],
    ) -> zbus::Result<OwnedObjectPath>;
    /// Stop a unit.
    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;
    /// The object path of a loaded unit.
    fn get_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;
    /// Forget a failed unit so that its name can be used again.
    fn reset_failed_unit(&self, name: &str) -> zbus::Result<()>;
    /// Ask for signals.
    fn subscribe(&self) -> zbus::Result<()>;
    /// A job finished.
    #[zbus(signal)]
    fn job_removed(
        &self,
        id: u32,
        job: zbus::ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

/// org.freedesktop.systemd1.Unit.
#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1"
)]
pub(crate) trait Unit {
    /// `active`, `inactive`, `failed`, `activating`, `deactivating`, …
    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;
}

/// org.freedesktop.systemd1.Service.
#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Service",
    default_service = "org.freedesktop.systemd1"
)]
pub(crate) trait Service {
    /// The main process.
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> zbus::Result<u32>;
}

/// etcd as a transient systemd unit.
#[derive(Debug)]
pub struct SystemdSupervisor {
    settings: Arc<Settings>,
    conn: OnceCell<zbus::Connection>,
    /// `Subscribe()` succeeded on `conn` (a subscription lasts as long as
    /// the connection).
    subscribed: OnceCell<()>,
    op: Mutex<()>,
}

fn dbus(e: zbus::Error) -> SuperviseError {
    SuperviseError::DBus(e.to_string())
}

impl SystemdSupervisor {
    /// A supervisor for the unit named in `settings`. The system bus is
    /// reached on first use (`DBUS_SYSTEM_BUS_ADDRESS` overrides its address).
    pub(crate) fn new(settings: Arc<Settings>) -> Self {
        SystemdSupervisor {
            settings,
            conn: OnceCell::new(),
            subscribed: OnceCell::new(),
            op: Mutex::new(()),
        }
    }

    async fn manager(&self) -> Result<ManagerProxy<'static>, SuperviseError> {
        let conn = self
            .conn
            .get_or_try_init(|| async { zbus::Connection::system().await })
            .await
            .map_err(dbus)?;
        ManagerProxy::new(conn).await.map_err(dbus)
    }

    async fn unit_state(&self) -> Result<Option<(String, u32)>, SuperviseError> {
        let m = self.manager().await?;
        let path = match m.get_unit(&self.settings.etcd.unit_name).await {
            Ok(p) => p,
            // NoSuchUnit: never started, or gone after a clean stop.
            Err(zbus::Error::MethodError(name, _, _))
                if name.as_str() == "org.freedesktop.systemd1.NoSuchUnit" =>
            {
                return Ok(None);
            }
            Err(e) => return Err(dbus(e)),
        };
        let conn = m.inner().connection();
        let unit = UnitProxy::builder(conn)
            .path(path.clone())
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(dbus)?;
        let service = ServiceProxy::builder(conn)
            .path(path)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(dbus)?;
        let active = unit.active_state().await.map_err(dbus)?;
        let pid = service.main_pid().await.map_err(dbus)?;
        Ok(Some((active, pid)))
    }

    /// Run `queue` (which queues one job) and wait for that job's result.
    async fn run_job<F, Fut>(
        &self,
        m: &ManagerProxy<'static>,
        limit: Duration,
        queue: F,
    ) -> Result<String, SuperviseError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = zbus::Result<OwnedObjectPath>>,
    {
        use futures_util::StreamExt;
        self.subscribed
            .get_or_try_init(|| async { subscribed(m.subscribe().await) })
            .await?;
        let mut removed = m.receive_job_removed().await.map_err(dbus)?;
        let job = queue().await.map_err(dbus)?;
        let wait = async {
            while let Some(sig) = removed.next().await {
                let Ok(args) = sig.args() else { continue };
                if args.job().as_str() == job.as_str() {
                    return Ok(args.result().to_string());
                }
            }
            Err(SuperviseError::DBus("the signal stream ended".into()))
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(r) => r,
            Err(_) => Err(SuperviseError::DBus(format!(
                "job {} did not finish within {limit:?}",
                job.as_str()
            ))),
        }
    }
}

/// The outcome of `Subscribe()`: systemd refuses a second subscription of
/// the same connection with `AlreadySubscribed`, which means the signals
/// already come.
fn subscribed(r: zbus::Result<()>) -> Result<(), SuperviseError> {
    match r {
        Err(zbus::Error::MethodError(name, _, _))
            if name.as_str() == "org.freedesktop.systemd1.AlreadySubscribed" =>
        {
            Ok(())
        }
        other => other.map_err(dbus),
    }
}

impl SystemdSupervisor {
    pub(crate) async fn start(&self, mode: StartMode) -> Result<u32, SuperviseError> {
        let _op = self.op.lock().await;
        if let Some((active, pid)) = self.unit_state().await?
            && matches!(active.as_str(), "active" | "activating" | "reloading")
        {
            return Err(SuperviseError::AlreadyRunning(pid));
        }
        let s = &self.settings;
        if !s.etcd.binary.exists() {
            return Err(SuperviseError::NotInstalled(
                s.etcd.binary.display().to_string(),
            ));
        }
        super::preflight::check_free(s)?;
        let as_user = super::user::prepare(s)?;
        conf::write(s, &mode).map_err(|e| {
            SuperviseError::Spawn(format!(
                "cannot write {}: {e}",
                s.etcd_config_path().display()
            ))
        })?;
        if let Some(u) = &as_user {
            super::user::share_config(s, u)?;
        }
        let m = self.manager().await?;
        let unit = s.etcd.unit_name.clone();
        // A failed unit of the same name blocks a new one.
        let _ = m.reset_failed_unit(&unit).await;
        let binary = s.etcd.binary.to_string_lossy().into_owned();
        let config = s.etcd_config_path().to_string_lossy().into_owned();
        let exec: Vec<(String, Vec<String>, bool)> = vec![(
            binary.clone(),
            vec![binary, "--config-file".into(), config],
            false,
        )];
        let stop_usec = u64::try_from(s.timeouts.stop_grace.as_micros()).unwrap_or(u64::MAX);
        let mut props: Vec<(&str, Value<'_>)> = vec![
            ("Description", Value::from("etcd supervised by etcd-warden")),
            ("ExecStart", Value::from(exec)),
            ("Type", Value::from("exec")),
            ("TimeoutStopUSec", Value::from(stop_usec)),
        ];
        // systemd drops to etcd.user for the unit (its log is the journal).
        if s.etcd.user.drops() {
            props.push(("User", Value::from(s.etcd.user.name.clone())));
        }
        let result = self
            .run_job(&m, s.timeouts.start_timeout, || {
                m.start_transient_unit(&unit, "fail", &props, &[])
            })
            .await?;
        if result != "done" {
            return Err(SuperviseError::Spawn(format!(
                "systemd's start job for {unit} ended with {result:?}"
            )));
        }
        match self.unit_state().await? {
            Some((_, pid)) if pid != 0 => {
                tracing::info!(pid, unit, ?mode, "etcd started as a transient unit");
                Ok(pid)
            }
            _ => Err(SuperviseError::Spawn(format!(
                "{unit} started but has no main process"
            ))),
        }
    }

    pub(crate) async fn stop(&self, grace: Duration) -> Result<bool, SuperviseError> {
        let _op = self.op.lock().await;
        let Some((active, _)) = self.unit_state().await? else {
            return Ok(true);
        };
        let m = self.manager().await?;
        let unit = self.settings.etcd.unit_name.clone();
        if active == "failed" {
            let _ = m.reset_failed_unit(&unit).await;
            return Ok(true);
        }
        // systemd itself sends SIGKILL after TimeoutStopUSec (= grace); allow
        // it that long plus a margin for the kill.
        let started = tokio::time::Instant::now();
        let result = self
            .run_job(&m, grace + Duration::from_secs(10), || {
                m.stop_unit(&unit, "replace")
            })
            .await?;
        if result != "done" {
            return Err(SuperviseError::Stop(format!(
                "systemd's stop job for {unit} ended with {result:?}"
            )));
        }
        Ok(started.elapsed() < grace)
    }

    pub(crate) async fn state(&self) -> ProcState {
        match self.unit_state().await {
            Ok(None) => ProcState::Stopped,
            Ok(Some((active, pid))) => match active.as_str() {
                "active" | "activating" | "reloading" | "deactivating" if pid != 0 => {
                    if is_frozen(pid) {
                        ProcState::Frozen { pid }
                    } else {
                        ProcState::Running { pid }
                    }
                }
                "failed" => ProcState::Died {
                    pid,
                    how: format!("unit {} failed", self.settings.etcd.unit_name),
                },
                _ => ProcState::Stopped,
            },
            Err(e) => ProcState::Died {
                pid: 0,
                how: format!("cannot ask systemd: {e}"),
            },
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        "systemd"
    }
}
