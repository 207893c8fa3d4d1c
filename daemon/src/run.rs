//! The daemon's main loop: logging, sockets, the first probe, READY=1, then
//! one `select!` over the API servers, the probe ticker, the report writer's
//! ticker, the watchdog and the signals. The first task to end brings the daemon down, naming it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sd_notify::NotifyState;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::config::{BackendKind, Settings};
use crate::core::Core;
use crate::etcd_conf::StartMode;
use crate::server::{self, AllowList};
use crate::supervise::process::{Previous, ProcessSupervisor};
use crate::supervise::systemd::SystemdSupervisor;
use crate::supervise::{AnySupervisor, ProcState, Supervisor};

/// Log to journald when stderr is connected to it (systemd sets
/// JOURNAL_STREAM), formatted to stderr otherwise. Uses tracing-journald, the
/// tracing layer (systemd-journal-logger is a `log` backend).
pub fn init_logging(verbose: u8) {
    use tracing_subscriber::prelude::*;
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let journald = std::env::var_os("JOURNAL_STREAM")
        .and_then(|_| tracing_journald::layer().ok())
        .map(|l| l.with_syslog_identifier("etcd-warden".into()));
    let fmt = journald.is_none().then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(true)
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(journald)
        .with(fmt)
        .try_init();
}

/// sd_notify, never fatal: without systemd (NOTIFY_SOCKET unset) it is a
/// no-op, and a failure is only logged.
fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!(error = %e, "sd_notify failed");
    }
}

/// Run the daemon until SIGTERM/SIGINT.
pub async fn run(settings: Settings, print_paths: bool) -> anyhow::Result<()> {
    let settings = Arc::new(settings);
    std::fs::create_dir_all(&settings.state_dir)
        .with_context(|| format!("cannot create {}", settings.state_dir.display()))?;
    let supervisor = match settings.etcd.backend {
        BackendKind::Process => {
            let p = ProcessSupervisor::new(settings.clone());
            // An etcd left running by a previous instance (killed, crashed)
            // is adopted as it is when it provably is this configuration's
            // etcd, and stopped otherwise: never two supervisors, never an
            // unsupervised etcd.
            match p.take_over(settings.timeouts.stop_grace).await {
                Ok(Previous::Adopted { .. }) | Ok(Previous::None) => {}
                Ok(Previous::Stopped { pid, why }) => {
                    tracing::warn!(pid, %why, "stopped the etcd left by a previous daemon instance")
                }
                Err(e) => anyhow::bail!("{e}"),
            }
            AnySupervisor::Process(p)
        }
        BackendKind::Systemd => AnySupervisor::Systemd(SystemdSupervisor::new(settings.clone())),
    };
    let core = Arc::new(Core::new(settings.clone(), supervisor));
    // The failover driver: only when Pacemaker manages a multi-node cluster.
    let failover = crate::reconcile::enabled(&settings)
        .then(|| Arc::new(crate::reconcile::Reconciler::new(&settings)));
    if let Some(f) = &failover {
        let _ = core.failover.set(f.clone());
        tracing::info!(
            state_file = %f.paths.state_file.display(),
            archives = %f.paths.archive_dir.display(),
            markers = %f.paths.run_dir.display(),
            "failover enabled"
        );
    }

    let unix = server::bind_unix(&settings.api.socket, &settings.api.socket_group)
        .with_context(|| format!("cannot listen on {}", settings.api.socket.display()))?;
    let tcp = match settings.api.http_addr {
        Some(a) => Some(
            tokio::net::TcpListener::bind(a)
                .await
                .with_context(|| format!("cannot listen on {a}"))?,
        ),
        None => None,
    };
    let http_addr = tcp.as_ref().and_then(|l| l.local_addr().ok());
    if print_paths {
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
    tracing::info!(
        node = %settings.node_name,
        topology = settings.topology.as_str(),
        backend = core.supervisor.name(),
        socket = %settings.api.socket.display(),
        http = ?http_addr,
        "etcd-warden daemon starting"
    );

    // Either backend may have found the etcd of a previous daemon instance
    // still running and adopted it as it is.
    let first = core.probe(settings.timeouts.probe_timeout, false).await;
    if let Some(pid) = first.proc.pid() {
        tracing::info!(pid, "adopted a running etcd");
        core.record(&first);
    }
    if settings.autostart && first.proc.pid().is_none() {
        if let Err(e) = core
            .start_etcd(StartMode::Normal, settings.timeouts.start_timeout)
            .await
        {
            tracing::error!(error = %e, "autostart failed");
        }
    } else if settings.autostart {
        // Adopted: remember that it should keep running.
        let _ = core
            .start_etcd(StartMode::Normal, settings.timeouts.probe_timeout)
            .await;
    }
    let p = core.probe(settings.timeouts.probe_timeout, true).await;
    core.record(&p);

    let shutdown = CancellationToken::new();
    let mut state_rx = core.subscribe_state();
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(&format!("etcd {}", core.state())),
    ]);

    // Ping at half the watchdog interval systemd asked for.
    let watchdog_interval = sd_notify::watchdog_enabled();
    let watchdog = watchdog_interval.is_some();
    let watchdog_every = watchdog_interval
        .map(|d| d / 2)
        .unwrap_or(Duration::from_secs(3600));
    let mut watchdog_tick = tokio::time::interval(watchdog_every);
    let mut probe_tick = tokio::time::interval(settings.timeouts.probe_interval);
    probe_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sigterm = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;

    // The servers run as tasks of their own so that nothing the loop below
    // waits for (a probe of a hung etcd) can delay an accept.
    let mut unix_task = tokio::spawn(server::serve_unix(
        unix,
        core.clone(),
        AllowList::resolve(&settings.api.allowed_users),
        shutdown.clone(),
    ));
    let mut tcp_task = match tcp {
        Some(l) => tokio::spawn(server::serve_tcp(l, core.clone(), shutdown.clone())),
        None => tokio::spawn(async { std::future::pending::<std::io::Result<()>>().await }),
    };
    let mut restart_at: Option<tokio::time::Instant> = None;
    // Failover passes: at once, then on a timer (sooner while something is
    // pending), on a fence alert or agent notification (kick), and on every
    // leader change etcd shows.
    let mut reconcile_at = tokio::time::Instant::now();
    let mut leader_rx = core.subscribe_leader();
    let mut seen_death: Option<u32> = None;
    // The report writer ([report] path): a cycle per tick, as a task of its
    // own so that crm_mon never holds up the loop; a tick that comes while
    // the previous cycle still runs is skipped, never queued.
    let report_path = settings.report.path.clone();
    let mut report_tick = tokio::time::interval(settings.report.interval);
    report_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut report_task: Option<tokio::task::JoinHandle<()>> = None;
    if let Some(p) = &report_path {
        // Without systemd's RuntimeDirectory= (or under another path) the
        // directory may not exist yet; every cycle would fail on it.
        if let Some(dir) = p.parent()
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot create the report's directory");
        }
        tracing::info!(
            path = %p.display(),
            interval_ms = settings.report.interval.as_millis(),
            "writing the PacemakerCluster report"
        );
    }

    let outcome: anyhow::Result<()> = loop {
        tokio::select! {
            r = &mut unix_task => break Err(task_end("the API socket server", r)),
            r = &mut tcp_task => break Err(task_end("the HTTP server", r)),
            _ = probe_tick.tick() => {
                let p = core.probe(settings.timeouts.probe_timeout, true).await;
                core.record(&p);
                if let ProcState::Died { pid, how } = &p.proc {
                    if seen_death != Some(*pid) {
                        seen_death = Some(*pid);
                        core.metrics.unexpected_exit();
                        tracing::error!(pid, %how, "etcd died");
                        if core.should_restart() {
                            restart_at = Some(tokio::time::Instant::now() + settings.timeouts.restart_delay);
                        }
                    }
                    if let Some(at) = restart_at && tokio::time::Instant::now() >= at {
                        restart_at = None;
                        core.metrics.restarted();
                        tracing::warn!("restarting etcd (autostart)");
                        let core = core.clone();
                        let limit = settings.timeouts.start_timeout;
                        tokio::spawn(async move {
                            if let Err(e) = core.start_etcd(StartMode::Normal, limit).await {
                                tracing::error!(error = %e, "restarting etcd failed");
                            }
                        });
                    }
                } else {
                    restart_at = None;
                }
            }
            _ = report_tick.tick(), if report_path.is_some() => {
                if report_task.as_ref().is_some_and(|t| !t.is_finished()) {
                    core.metrics.report_skipped();
                    tracing::debug!("report cycle still running: tick skipped");
                } else {
                    report_task = Some(tokio::spawn(report_cycle(core.clone())));
                }
            }
            Ok(()) = state_rx.changed() => {
                let s = state_rx.borrow_and_update().clone();
                notify(&[NotifyState::Status(&format!("etcd {s}"))]);
            }
            _ = watchdog_tick.tick(), if watchdog => notify(&[NotifyState::Watchdog]),
            _ = tokio::time::sleep_until(reconcile_at), if failover.is_some() => {
                reconcile_at = reconcile_pass(&failover, &core).await;
            }
            _ = kicked(&failover), if failover.is_some() => {
                reconcile_at = reconcile_pass(&failover, &core).await;
            }
            Ok(_) = leader_rx.recv(), if failover.is_some() => {
                reconcile_at = reconcile_pass(&failover, &core).await;
            }
            _ = sigterm.recv() => { tracing::info!("SIGTERM: shutting down"); break Ok(()) }
            _ = sigint.recv() => { tracing::info!("SIGINT: shutting down"); break Ok(()) }
        }
    };

    notify(&[NotifyState::Stopping, NotifyState::Status("shutting down")]);
    shutdown.cancel();
    match core.supervisor {
        // etcd is the daemon's child: it goes when the daemon goes.
        AnySupervisor::Process(_) => {
            if let Err(e) = core.stop_etcd(settings.timeouts.stop_grace).await {
                tracing::error!(error = %e, "stopping etcd failed");
            }
        }
        // The transient unit outlives the daemon by design.
        AnySupervisor::Systemd(_) => tracing::info!("leaving the etcd unit running"),
    }
    let _ = std::fs::remove_file(&settings.api.socket);
    outcome
}

/// One cycle of the report writer: the live etcd section, then the shared
/// cycle (crm_mon, CIB, Corosync, previous report, atomic write) off the
/// async workers. A failure is logged and counted; the previous report is
/// left as it was and ages into staleness, which readers see.
async fn report_cycle(core: Arc<Core>) {
    let (_, _, section) = core
        .etcd_section(core.settings.timeouts.probe_timeout)
        .await;
    let cycle = crate::report_cycle::Cycle::for_daemon(&core.settings);
    let run = tokio::task::spawn_blocking(move || {
        cycle.run(Some(section), &mut |w| {
            tracing::warn!(warning = w, "report cycle");
        })
    })
    .await;
    match run {
        Ok(Ok(_)) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
                .unwrap_or_default();
            core.metrics.report_written(now);
        }
        Ok(Err(e)) => {
            core.metrics.report_failed();
            tracing::warn!(error = %e, "report cycle failed; the previous report is left as it was");
        }
        Err(e) => {
            core.metrics.report_failed();
            tracing::warn!(error = %e, "report cycle panicked; the previous report is left as it was");
        }
    }
}

/// Resolves when the failover driver was asked to decide now.
async fn kicked(f: &Option<Arc<crate::reconcile::Reconciler>>) {
    match f {
        Some(f) => f.kicked().await,
        None => std::future::pending().await,
    }
}

/// One failover pass, then archive retention; returns when the next pass
/// is due (`failover.reconcile_pending_interval_ms` while a step is
/// pending, `failover.reconcile_interval_ms` otherwise).
async fn reconcile_pass(
    f: &Option<Arc<crate::reconcile::Reconciler>>,
    core: &Arc<Core>,
) -> tokio::time::Instant {
    let pending = match f {
        Some(f) => {
            let pending = f.tick(core).await;
            prune_archives(f, core.settings.failover.archive_keep).await;
            pending
        }
        None => false,
    };
    let fo = &core.settings.failover;
    tokio::time::Instant::now()
        + if pending {
            fo.reconcile_pending_interval
        } else {
            fo.reconcile_interval
        }
}

/// `failover.archive_keep`: after each pass (so within one interval of a
/// new archive), the oldest archives beyond the newest N are removed. 0, the
/// default, removes nothing.
async fn prune_archives(f: &Arc<crate::reconcile::Reconciler>, keep: u32) {
    if keep == 0 {
        return;
    }
    let paths = f.paths.clone();
    // Removing a large db is file-system work: off the async workers.
    match tokio::task::spawn_blocking(move || paths.prune_archives(keep)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "archive retention failed"),
        Err(e) => tracing::error!(error = %e, "archive retention panicked"),
    }
}

fn task_end(what: &str, r: Result<std::io::Result<()>, tokio::task::JoinError>) -> anyhow::Error {
    match r {
        Ok(Ok(())) => anyhow::anyhow!("{what} stopped"),
        Ok(Err(e)) => anyhow::Error::new(e).context(format!("{what} failed")),
        Err(e) => anyhow::Error::new(e).context(format!("{what} panicked")),
    }
}
