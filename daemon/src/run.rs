//! The daemon: logging, sockets, the first probe, READY=1, then its loops as
//! tasks owned by one tracker ([`crate::tasks::Work`]): the API servers, the
//! probe loop, the failover loop, the report writer, the STATUS= updater and
//! the watchdog. The top-level `select!` only waits: for the shutdown future
//! (SIGTERM/SIGINT in the binary) or for a loop to end, which brings the
//! daemon down naming it. See docs/architecture.md for the picture.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use anyhow::Context;
use sd_notify::NotifyState;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::{BackendKind, Settings};
use crate::core::Core;
use crate::etcd_conf::StartMode;
use crate::server::{self, AllowList};
use crate::supervise::process::{Previous, ProcessSupervisor};
use crate::supervise::systemd::SystemdSupervisor;
use crate::supervise::{AnySupervisor, ProcState, Supervisor};
use crate::tasks::{Heartbeat, Loops, OVERRUN_ALLOWANCE, SHUTDOWN_GRACE};
/// Log to journald when stderr is connected to it (systemd sets
/// JOURNAL_STREAM), formatted to stderr otherwise (coloured only on a
/// terminal, and not when NO_COLOR is set). Uses tracing-journald, the
/// tracing layer (systemd-journal-logger is a `log` backend).
pub(crate) fn init_logging(verbose: u8) {
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
    // Colour only for a person at a terminal: a log file or a pipe to
    // another collector keeps plain text that grep and parsers read as is.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let fmt = journald.is_none().then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(colour)
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

/// A boxed future, for the [`Pass`] trait's methods.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the failover loop runs: the failover reconciler's pass, through
/// the core's ports.
pub(crate) trait Pass: Send + Sync {
    /// One pass; returns whether something is pending, so that the next
    /// pass comes sooner.
    fn run<'a>(&'a self, core: &'a Arc<Core>) -> BoxFuture<'a, bool>;
    /// Resolves when a pass is asked for now (a fence alert, an agent
    /// notification).
    fn kicked(&self) -> BoxFuture<'_, ()>;
    /// The longest one pass may take (the watchdog holds the loop to it).
    fn limit(&self) -> Duration;
    /// Resolves when a learner the last pass saw behind is in sync, so that
    /// its promotion need not wait for the next timed pass; never resolves
    /// when there is none.
    fn caught_up<'a>(&'a self, core: &'a Arc<Core>) -> BoxFuture<'a, ()>;
}

/// How often the loop reads the leader's raft progress while a learner it
/// leads catches up (one HTTP read of the local member).
const LEARNER_WATCH: Duration = Duration::from_millis(50);

/// The failover reconciler as the loop's pass: a pass, then archive
/// retention.
struct Failover {
    reconciler: Arc<crate::reconcile::Reconciler>,
    limit: Duration,
}

impl Pass for Failover {
    fn run<'a>(&'a self, core: &'a Arc<Core>) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let pending = self.reconciler.tick(&core.ports()).await;
            prune_archives(&self.reconciler, core.archive_keep()).await;
            pending
        })
    }

    fn kicked(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.reconciler.kicked())
    }

    fn limit(&self) -> Duration {
        self.limit
    }

    fn caught_up<'a>(&'a self, core: &'a Arc<Core>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(id) = self.reconciler.catching_up() else {
                return std::future::pending().await;
            };
            loop {
                tokio::time::sleep(LEARNER_WATCH).await;
                match core.etcd.raft_progress(LEARNER_WATCH).await {
                    Ok(p) if p.in_sync(id) => return,
                    // No longer the leader: the next pass sees why.
                    Ok(p) if !p.is_leader => return,
                    _ => {}
                }
            }
        })
    }
}

/// How the daemon runs, beyond its settings.
#[derive(Default)]
pub struct Options {
    /// Print where everything is (the standalone setup's banner).
    pub print_paths: bool,
    /// Pacemaker as the failover reconciler sees it, instead of its
    /// command-line tools (a test's fake, e.g. one whose crm_mon is slow).
    pub pacemaker: Option<crate::reconcile::ports::SharedPacemaker>,
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
    let mut core = Core::new(settings.clone(), supervisor);
    if let Some(p) = options.pacemaker {
        core.pacemaker = p;
    }
    let core = Arc::new(core);
    // The failover driver: only when Pacemaker manages a multi-node cluster.
    let failover = crate::reconcile::enabled(&settings).then(|| {
        Arc::new(
            crate::reconcile::Reconciler::new(&settings)
                .with_counters(core.metrics.exec_counters()),
        )
    });
    if let Some(f) = &failover {
        let _ = core.failover.set(f.clone());
        tracing::info!(
            state_file = %f.paths.state_file.display(),
            archives = %f.paths.archive_dir.display(),
            markers = %f.paths.run_dir.display(),
            "failover enabled"
        );
    }
    let pass: Option<Arc<dyn Pass>> = failover.map(|reconciler| {
        Arc::new(Failover {
            reconciler,
            limit: settings.timeouts.start_timeout,
        }) as Arc<dyn Pass>
    });

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
    if options.print_paths {
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

    let cancel = CancellationToken::new();
    let work = core.work.clone();
    let loops = Loops::default();
    notify(&[
        NotifyState::Ready,
        NotifyState::Status(&format!("etcd {}", core.state())),
    ]);

    // Each loop is a task of its own, owned by `work`: nothing one waits for
    // (a probe of a hung etcd, a 60 s join, crm_mon) delays another, an
    // accept or the watchdog.
    let mut owned: Vec<(&'static str, JoinHandle<Option<anyhow::Result<()>>>)> = vec![(
        "the API socket server",
        work.spawn(server_loop(server::serve_unix(
            unix,
            core.clone(),
            AllowList::resolve(&settings.api.allowed_users),
            cancel.clone(),
        ))),
    )];
    if let Some(l) = tcp {
        owned.push((
            "the HTTP server",
            work.spawn(server_loop(server::serve_tcp(
                l,
                core.clone(),
                cancel.clone(),
            ))),
        ));
    }
    owned.push((
        "the probe loop",
        work.spawn(probe_loop(
            core.clone(),
            loops.probe.clone(),
            cancel.clone(),
        )),
    ));
    match pass {
        Some(pass) => owned.push((
            "the failover loop",
            work.spawn(reconcile_loop(
                core.clone(),
                pass,
                loops.reconcile.clone(),
                cancel.clone(),
            )),
        )),
        None => loops.reconcile.off(),
    }
    match settings.report.path.clone() {
        Some(path) => owned.push((
            "the report writer",
            work.spawn(report_loop(
                core.clone(),
                path,
                loops.report.clone(),
                cancel.clone(),
            )),
        )),
        None => loops.report.off(),
    }
    owned.push((
        "the defragmentation loop",
        work.spawn(defrag_loop(core.clone(), cancel.clone())),
    ));
    owned.push((
        "the status notifier",
        work.spawn(status_loop(core.clone(), cancel.clone())),
    ));
    // Ping at half the watchdog interval systemd asked for.
    if let Some(interval) = sd_notify::watchdog_enabled() {
        let every = interval / 2;
        tracing::info!(
            every_ms = every.as_millis() as u64,
            allowance_ms = OVERRUN_ALLOWANCE.as_millis() as u64,
            "watchdog enabled"
        );
        let watchdog = crate::tasks::watchdog(
            loops.clone(),
            work.clone(),
            every,
            OVERRUN_ALLOWANCE,
            cancel.clone(),
            || notify(&[NotifyState::Watchdog]),
        );
        owned.push((
            "the watchdog",
            work.spawn(async move {
                watchdog.await;
                Ok(())
            }),
        ));
    }

    let outcome: anyhow::Result<()> = tokio::select! {
        () = shutdown => Ok(()),
        e = first_end(&mut owned) => Err(e),
    };

    notify(&[NotifyState::Stopping, NotifyState::Status("shutting down")]);
    cancel.cancel();
    work.shut_down(SHUTDOWN_GRACE).await;
    match &core.supervisor {
        // Pacemaker owns etcd: only its stop action stops it. A daemon
        // restart (an upgrade, needrestart, a watchdog restart) leaves it
        // serving, and the next daemon adopts it by its PID file.
        AnySupervisor::Process(p) if crate::reconcile::enabled(&settings) => {
            p.leave_running();
            tracing::info!("leaving etcd running for the next daemon to adopt (Pacemaker stops it)")
        }
        // Without Pacemaker the daemon alone runs etcd: it goes with it.
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

/// An API server as a loop: its error, if it stops.
async fn server_loop(serve: impl Future<Output = std::io::Result<()>>) -> anyhow::Result<()> {
    serve.await.map_err(anyhow::Error::new)
}

/// The first owned loop to end, as an error naming it (a loop ends only on
/// cancellation, which comes after this is no longer awaited).
async fn first_end(
    owned: &mut [(&'static str, JoinHandle<Option<anyhow::Result<()>>>)],
) -> anyhow::Error {
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

/// The probe loop: a probe per `probe_interval_ms`, the node state and
/// metrics it records, and etcd's restart after an unexpected exit
/// (autostart only).
async fn probe_loop(
    core: Arc<Core>,
    beat: Arc<Heartbeat>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let t = &core.settings.timeouts;
    let mut next = Instant::now();
    let mut restart_at: Option<Instant> = None;
    let mut seen_death: Option<u32> = None;
    loop {
        beat.idle_until(next);
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = cancel.cancelled() => return Ok(()),
        }
        beat.busy_for(t.probe_timeout);
        let p = core.probe(t.probe_timeout, true).await;
        core.record(&p);
        if let ProcState::Died { pid, how } = &p.proc {
            if seen_death != Some(*pid) {
                seen_death = Some(*pid);
                core.metrics.unexpected_exit();
                tracing::error!(pid, %how, "etcd died");
                if core.should_restart() {
                    restart_at = Some(Instant::now() + t.restart_delay);
                }
            }
            if let Some(at) = restart_at
                && Instant::now() >= at
            {
                restart_at = None;
                core.metrics.restarted();
                tracing::warn!("restarting etcd (autostart)");
                let c = core.clone();
                let limit = t.start_timeout;
                core.work.spawn(async move {
                    if let Err(e) = c.start_etcd(StartMode::Normal, limit).await {
                        tracing::error!(error = %e, "restarting etcd failed");
                    }
                });
            }
        } else {
            restart_at = None;
        }
        next = Instant::now() + t.probe_interval;
    }
}

/// The failover loop: a pass at once, then on a timer (sooner while
/// something is pending), on a kick (fence alert, agent notification) and on
/// every leader change etcd shows. It publishes "in a pass since T, due by
/// T + the pass's limit" so that the watchdog can tell a long pass from a
/// wedged one.
async fn reconcile_loop(
    core: Arc<Core>,
    pass: Arc<dyn Pass>,
    beat: Arc<Heartbeat>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let mut at = Instant::now();
    let mut leader_rx = core.subscribe_leader();
    loop {
        beat.idle_until(at);
        tokio::select! {
            () = tokio::time::sleep_until(at) => {}
            () = pass.kicked() => {}
            () = pass.caught_up(&core) => {
                tracing::debug!("a learner this member leads is in sync");
            }
            r = leader_rx.recv() => {
                if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r {
                    // The core outlives the loop; never seen, but a closed
                    // channel must not spin the loop.
                    leader_rx = core.subscribe_leader();
                }
            }
            () = cancel.cancelled() => return Ok(()),
        }
        beat.busy_for(pass.limit());
        let pending = pass.run(&core).await;
        let fo = &core.settings.failover;
        at = Instant::now()
            + if pending {
                fo.reconcile_pending_interval
            } else {
                fo.reconcile_interval
            };
    }
}

/// The report writer ([report] path): a cycle per tick, as a task of its own
/// so that crm_mon never holds up the loop; a tick that comes while the
/// previous cycle still runs is skipped, never queued.
async fn report_loop(
    core: Arc<Core>,
    path: std::path::PathBuf,
    beat: Arc<Heartbeat>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    // Without systemd's RuntimeDirectory= (or under another path) the
    // directory may not exist yet; every cycle would fail on it.
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot create the report's directory");
    }
    let r = &core.settings.report;
    tracing::info!(
        path = %path.display(),
        interval_ms = r.interval.as_millis(),
        "writing the PacemakerCluster report"
    );
    // A cycle runs up to three commands (crm_mon, cibadmin,
    // corosync-cmapctl) and the live etcd section (Status, read, members).
    let bound = r.crm_mon_timeout * 3 + core.settings.timeouts.probe_timeout * 3;
    let mut tick = tokio::time::interval(r.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut cycle: Option<JoinHandle<Option<()>>> = None;
    beat.idle_until(Instant::now());
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = cancel.cancelled() => return Ok(()),
        }
        if cycle.as_ref().is_some_and(|t| !t.is_finished()) {
            core.metrics.report_skipped();
            tracing::debug!("report cycle still running: tick skipped");
            continue;
        }
        beat.busy_for(bound);
        let (c, b, every) = (core.clone(), beat.clone(), r.interval);
        cycle = Some(core.work.spawn(async move {
            report_cycle(c).await;
            // The next tick is at most one interval away.
            b.idle_until(Instant::now() + every);
        }));
    }
}

/// The defragmentation policy ([defrag]): a look per `check_interval_ms`,
/// the first one interval after the start (a starting cluster is no time
/// for it). A defragment runs inside the loop's task: the next look waits
/// for it. Not watched by the watchdog: a defragment of a large database
/// legitimately takes minutes, and nothing else waits for this loop. The
/// interval and `enabled` are read at each look, so a reload changes them.
async fn defrag_loop(core: Arc<Core>, cancel: CancellationToken) -> anyhow::Result<()> {
    loop {
        let every = core.defrag.settings().check_interval;
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = cancel.cancelled() => return Ok(()),
        }
        if !core.defrag.settings().enabled {
            continue;
        }
        let r = core.defrag(crate::defrag::policy::Mode::Auto).await;
        if r.done {
            tracing::info!(steps = ?r.steps, "{}", r.message);
        } else {
            tracing::debug!("{}", r.message);
        }
    }
}

/// STATUS= follows the node state.
async fn status_loop(core: Arc<Core>, cancel: CancellationToken) -> anyhow::Result<()> {
    let mut state_rx = core.subscribe_state();
    loop {
        tokio::select! {
            r = state_rx.changed() => {
                if r.is_err() {
                    // The core outlives the loop.
                    cancel.cancelled().await;
                    return Ok(());
                }
                let s = state_rx.borrow_and_update().clone();
                notify(&[NotifyState::Status(&format!("etcd {s}"))]);
            }
            () = cancel.cancelled() => return Ok(()),
        }
    }
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
