//! The daemon's start and end: the [`App`] built from its services, the
//! sockets, the first probe, READY=1, then its loops ([`crate::loops`]) as
//! tasks owned by one tracker ([`crate::tasks::Work`]). The top-level
//! `select!` only waits: for the shutdown future (SIGTERM/SIGINT in the
//! binary) or for a loop to end, which brings the daemon down naming it.
//! See docs/architecture.md for the picture.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use sd_notify::NotifyState;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::app::{App, Services};
use crate::config::Settings;
use crate::etcd::conf::StartMode;
use crate::loops::{self, Listeners, notify};
use crate::reconcile::ports::SharedPacemaker;
use crate::supervise::AnySupervisor;
use crate::tasks::SHUTDOWN_GRACE;

/// How the daemon runs, beyond its settings.
#[derive(Default)]
pub struct Options {
    /// Print where everything is (the standalone setup's banner).
    pub print_paths: bool,
    /// Pacemaker as the failover reconciler sees it, instead of its
    /// command-line tools (a test's fake, e.g. one whose crm_mon is slow).
    pub pacemaker: Option<SharedPacemaker>,
}

/// Resolves on the first SIGTERM or SIGINT; the handlers are installed when
/// this is called, so a signal that comes before the future is awaited is
/// not lost.
pub(crate) fn signals() -> anyhow::Result<impl Future<Output = ()> + Send + 'static> {
    let mut sigterm = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = sigterm.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = sigint.recv() => tracing::info!("SIGINT: shutting down"),
        }
    })
}

/// Run the daemon until `shutdown` resolves or one of its loops ends. The
/// shutdown: STOPPING=1, the loops are cancelled (no new pass, probe, cycle
/// or connection starts), work in flight gets [`SHUTDOWN_GRACE`] to finish
/// and is abandoned after it, then etcd is stopped (process backend) or left
/// running (systemd backend), then the socket is removed.
pub async fn run_with(
    settings: Settings,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let settings = Arc::new(settings);
    std::fs::create_dir_all(&settings.state_dir)
        .with_context(|| format!("cannot create {}", settings.state_dir.display()))?;
    // Only the failover logic archives: a node that cannot must not start.
    if crate::reconcile::enabled(&settings) {
        crate::supervise::preflight::archive_probe(&settings).map_err(anyhow::Error::msg)?;
    }
    let mut services = Services::new(settings.clone(), AnySupervisor::take_over(&settings).await?);
    if let Some(p) = options.pacemaker {
        services = services.with_pacemaker(p);
    }
    let app = Arc::new(App::new(services.with_failover()));
    log_failover(&app);
    let listeners = listen(&settings).await?;
    let http_addr = listeners.tcp.as_ref().and_then(|l| l.local_addr().ok());
    if options.print_paths {
        print_paths(&settings, http_addr);
    }
    tracing::info!(
        node = %settings.node_name,
        topology = settings.topology.as_str(),
        backend = app.supervisor.name(),
        socket = %settings.api.socket.display(),
        http = ?http_addr,
        "etcd-warden daemon starting"
    );
    first_probe(&app).await;

    let cancel = CancellationToken::new();
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(&format!("etcd {}", app.state())),
    ]);
    let mut owned = loops::spawn(&app, listeners, &cancel);
    let outcome: anyhow::Result<()> = tokio::select! {
        () = shutdown => Ok(()),
        e = loops::first_end(&mut owned) => Err(e),
    };

    notify(&[NotifyState::Stopping, NotifyState::Status("shutting down")]);
    cancel.cancel();
    app.work.shut_down(SHUTDOWN_GRACE).await;
    leave_etcd(&app).await;
    let _ = std::fs::remove_file(&settings.api.socket);
    outcome
}

fn log_failover(app: &App) {
    if let Some(f) = &app.failover {
        tracing::info!(
            state_file = %f.paths.state_file.display(),
            archives = %f.paths.archive_dir.display(),
            markers = %f.paths.run_dir.display(),
            "failover enabled"
        );
    }
}

/// The API socket, and the HTTP listener when `api.http_addr` is set.
async fn listen(settings: &Settings) -> anyhow::Result<Listeners> {
    let unix = crate::server::bind_unix(&settings.api.socket, &settings.api.socket_group)
        .with_context(|| format!("cannot listen on {}", settings.api.socket.display()))?;
    let tcp = match settings.api.http_addr {
        Some(a) => Some(
            tokio::net::TcpListener::bind(a)
                .await
                .with_context(|| format!("cannot listen on {a}"))?,
        ),
        None => None,
    };
    Ok(Listeners { unix, tcp })
}

fn print_paths(settings: &Settings, http_addr: Option<std::net::SocketAddr>) {
    println!("etcd-warden standalone");
    println!("  configuration: {}", settings.layout.main.display());
    println!("  API socket:    {}", settings.api.socket.display());
    if let Some(a) = http_addr {
        println!("  HTTP:          http://{a}/readyz /metrics /status");
    }
    println!("  etcd client:   {}", settings.local_client_url());
    println!("  etcd data:     {}", settings.etcd.data_dir.display());
    println!("  state:         {}", settings.state_dir.display());
    println!("  autostart:     {}", settings.autostart);
}

/// The first look at etcd: either backend may have found the etcd of a
/// previous daemon instance still running and adopted it as it is; with
/// autostart, etcd is started (or, adopted, remembered as wanted).
async fn first_probe(app: &App) {
    let t = &app.settings.timeouts;
    let first = app.probe(t.probe_timeout, false).await;
    if let Some(pid) = first.proc.pid() {
        tracing::info!(pid, "adopted a running etcd");
        app.record(&first);
    }
    if app.settings.autostart && first.proc.pid().is_none() {
        if let Err(e) = app.start_etcd(StartMode::Normal, t.start_timeout).await {
            tracing::error!(error = %e, "autostart failed");
        }
    } else if app.settings.autostart {
        // Adopted: remember that it should keep running.
        let _ = app.start_etcd(StartMode::Normal, t.probe_timeout).await;
    }
    let p = app.probe(t.probe_timeout, true).await;
    app.record(&p);
}

/// etcd at the daemon's exit.
async fn leave_etcd(app: &App) {
    match &app.supervisor {
        // Pacemaker owns etcd: only its stop action stops it. A daemon
        // restart (an upgrade, needrestart, a watchdog restart) leaves it
        // serving, and the next daemon adopts it by its PID file.
        AnySupervisor::Process(p) if app.failover.is_some() => {
            p.leave_running();
            tracing::info!("leaving etcd running for the next daemon to adopt (Pacemaker stops it)")
        }
        // Without Pacemaker the daemon alone runs etcd: it goes with it.
        AnySupervisor::Process(_) => {
            if let Err(e) = app.stop_etcd(app.settings.timeouts.stop_grace).await {
                tracing::error!(error = %e, "stopping etcd failed");
            }
        }
        // The transient unit outlives the daemon by design.
        AnySupervisor::Systemd(_) => tracing::info!("leaving the etcd unit running"),
    }
}
