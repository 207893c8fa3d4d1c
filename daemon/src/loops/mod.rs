//! The daemon's loops, one file each, every one a task owned by
//! [`crate::tasks::Work`]: [`probe`] (etcd asked every
//! `probe_interval_ms`), [`reconcile`] (the failover passes), [`report`]
//! (the PacemakerCluster report), [`defrag`], [`status`] (systemd's
//! STATUS=) and [`watchdog`] (WATCHDOG=1 while every loop keeps its
//! promise), beside the API servers ([`crate::server`]). [`spawn`] starts
//! them; [`first_end`] resolves when one ends, naming it.

pub(crate) mod defrag;
pub(crate) mod probe;
pub(crate) mod reconcile;
pub(crate) mod report;
pub(crate) mod status;
pub(crate) mod watchdog;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use sd_notify::NotifyState;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::server::{self, AllowList};
use crate::tasks::{Loops, OVERRUN_ALLOWANCE};

/// A loop's task, by the name a failure gives it.
pub(crate) type Owned = Vec<(&'static str, JoinHandle<Option<anyhow::Result<()>>>)>;

/// sd_notify, never fatal: without systemd (NOTIFY_SOCKET unset) it is a
/// no-op, and a failure is only logged.
pub(crate) fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!(error = %e, "sd_notify failed");
    }
}

/// The API's listeners.
pub(crate) struct Listeners {
    /// The Unix socket (`api.socket`).
    pub(crate) unix: tokio::net::UnixListener,
    /// The HTTP listener (`api.http_addr`), if configured.
    pub(crate) tcp: Option<tokio::net::TcpListener>,
}

/// Start every loop of `app` as a task of its own: nothing one waits for
/// (a probe of a hung etcd, a 60 s join, crm_mon) delays another, an
/// accept or the watchdog.
pub(crate) fn spawn(app: &Arc<App>, listeners: Listeners, cancel: &CancellationToken) -> Owned {
    let work = &app.work;
    let loops = Loops::default();
    let allow = AllowList::resolve(&app.settings.api.allowed_users);
    let mut owned: Owned = vec![(
        "the API socket server",
        work.spawn(server_loop(server::serve_unix(
            listeners.unix,
            app.clone(),
            allow,
            cancel.clone(),
        ))),
    )];
    if let Some(l) = listeners.tcp {
        let serve = server::serve_tcp(l, app.clone(), cancel.clone());
        owned.push(("the HTTP server", work.spawn(server_loop(serve))));
    }
    let probe = probe::run(app.clone(), loops.probe.clone(), cancel.clone());
    owned.push(("the probe loop", work.spawn(probe)));
    match app.failover.clone() {
        Some(r) => {
            let pass = reconcile::run(app.clone(), r, loops.reconcile.clone(), cancel.clone());
            owned.push(("the failover loop", work.spawn(pass)));
        }
        None => loops.reconcile.off(),
    }
    match app.settings.report.path.clone() {
        Some(path) => {
            let cycle = report::run(app.clone(), path, loops.report.clone(), cancel.clone());
            owned.push(("the report writer", work.spawn(cycle)));
        }
        None => loops.report.off(),
    }
    let d = defrag::run(app.clone(), cancel.clone());
    owned.push(("the defragmentation loop", work.spawn(d)));
    let s = status::run(app.clone(), cancel.clone());
    owned.push(("the status notifier", work.spawn(s)));
    if let Some(w) = spawn_watchdog(app, loops, cancel) {
        owned.push(("the watchdog", w));
    }
    owned
}

/// The watchdog, when systemd asked for one: a ping at half its interval.
fn spawn_watchdog(
    app: &App,
    loops: Loops,
    cancel: &CancellationToken,
) -> Option<JoinHandle<Option<anyhow::Result<()>>>> {
    let interval = sd_notify::watchdog_enabled()?;
    let every = interval / 2;
    tracing::info!(
        every_ms = every.as_millis() as u64,
        allowance_ms = OVERRUN_ALLOWANCE.as_millis() as u64,
        "watchdog enabled"
    );
    let w = watchdog::run(
        loops,
        app.work.clone(),
        every,
        OVERRUN_ALLOWANCE,
        cancel.clone(),
        || notify(&[NotifyState::Watchdog]),
    );
    Some(app.work.spawn(async move {
        w.await;
        Ok(())
    }))
}

/// An API server as a loop: its error, if it stops.
async fn server_loop(serve: impl Future<Output = std::io::Result<()>>) -> anyhow::Result<()> {
    serve.await.map_err(anyhow::Error::new)
}

/// The first owned loop to end, as an error naming it (a loop ends only on
/// cancellation, which comes after this is no longer awaited).
pub(crate) async fn first_end(owned: &mut Owned) -> anyhow::Error {
    std::future::poll_fn(|cx| {
        for (name, h) in owned.iter_mut() {
            if let Poll::Ready(r) = Pin::new(h).poll(cx) {
                return Poll::Ready(task_end(name, r));
            }
        }
        Poll::Pending
    })
    .await
}

fn task_end(
    what: &str,
    r: Result<Option<anyhow::Result<()>>, tokio::task::JoinError>,
) -> anyhow::Error {
    match r {
        Ok(Some(Ok(()))) | Ok(None) => anyhow::anyhow!("{what} stopped"),
        Ok(Some(Err(e))) => e.context(format!("{what} failed")),
        Err(e) => anyhow::Error::new(e).context(format!("{what} panicked")),
    }
}
