//! Who owns the daemon's tasks, and how each loop shows its progress to
//! the systemd watchdog ([`crate::loops::watchdog`]).
//!
//! Every task the daemon starts (its loops, the API connections, the OCF
//! action work, etcd restarts, report cycles) is spawned through [`Work`]:
//! one [`TaskTracker`], so that a shutdown can wait for all of them, and one
//! "abandon" token, so that work still running when the shutdown's grace
//! ([`SHUTDOWN_GRACE`]) is over is dropped at its next await point instead
//! of holding the exit (and etcd's stop) for as long as it likes.
//!
//! Every loop publishes a [`Heartbeat`]: the instant by which it promises to
//! report again. A loop waiting for its next tick promises the tick; a loop
//! in a pass promises the pass's own deadline. The watchdog task pings
//! systemd as long as no promise is more than [`OVERRUN_ALLOWANCE`] late; a
//! pass that legitimately runs up to its deadline (a join that waits 60 s
//! for etcd) is progress, not a wedge.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a shutdown waits for work in flight (an OCF action, a failover
/// pass, a report cycle, an API connection) before it abandons it and goes
/// on to stop etcd. Abandoning drops the work at an await point, which is no
/// different from the daemon being killed there (as systemd does after
/// `TimeoutStopSec=`): the failover steps are written to survive that.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How late past its promise a loop may be before the watchdog calls it
/// wedged and stops pinging systemd (which then restarts the daemon). It
/// covers what a promise leaves out: archive retention after a pass (file
/// removal), a slow D-Bus answer, a scheduler delay.
pub(crate) const OVERRUN_ALLOWANCE: Duration = Duration::from_secs(30);

/// The owner of every task the daemon starts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Work {
    tracker: TaskTracker,
    abandon: CancellationToken,
    actions: Arc<InFlight>,
}

impl Work {
    /// Spawn `fut` as a task owned by the daemon: a shutdown waits for it
    /// (up to [`SHUTDOWN_GRACE`]), then drops it.
    pub(crate) fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let abandon = self.abandon.clone();
        self.tracker
            .spawn(async move { abandon.run_until_cancelled(fut).await })
    }

    /// Spawn the work of an OCF action that must be done by `deadline` from
    /// now; while it runs it counts as a promise the watchdog checks (see
    /// [`Loops::wedged`]).
    pub(crate) fn spawn_action<F>(
        &self,
        deadline: Duration,
        fut: F,
    ) -> tokio::task::JoinHandle<Option<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let ticket = self.actions.enter(Instant::now() + deadline);
        self.spawn(async move {
            let _ticket = ticket;
            fut.await
        })
    }

    /// The latest deadline of the OCF action work in flight, if any.
    pub(crate) fn actions_due(&self) -> Option<Instant> {
        self.actions.latest()
    }

    /// Wait for every task: no new task is accepted after this; work still
    /// running after `grace` is abandoned (dropped at its next await point).
    /// Returns whether everything ended within the grace.
    pub(crate) async fn shut_down(&self, grace: Duration) -> bool {
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
        {
            return true;
        }
        tracing::warn!(
            tasks = self.tracker.len(),
            grace_ms = grace.as_millis() as u64,
            "work still running at shutdown: abandoned"
        );
        self.abandon.cancel();
        // A task only ends at an await point; one that never reaches one is
        // not waited for forever.
        let _ = tokio::time::timeout(grace, self.tracker.wait()).await;
        false
    }

    /// Whether no task is alive.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }
}

/// OCF action work in flight, each with its deadline.
#[derive(Debug, Default)]
struct InFlight {
    next: AtomicU64,
    dues: Mutex<Vec<(u64, Instant)>>,
}

impl InFlight {
    fn enter(self: &Arc<Self>, due: Instant) -> Ticket {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.dues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, due));
        Ticket {
            id,
            of: self.clone(),
        }
    }

    fn latest(&self) -> Option<Instant> {
        self.dues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, d)| *d)
            .max()
    }
}

/// One piece of action work in flight; leaves the set when dropped.
struct Ticket {
    id: u64,
    of: Arc<InFlight>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.of
            .dues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| *id != self.id);
    }
}

/// What a loop is doing, as last published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting for its next tick or event.
    Idle,
    /// In a pass since this instant.
    Busy {
        /// When the pass began.
        since: Instant,
    },
}

/// A loop's promise: what it is doing, and by when it reports again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Promise {
    /// What the loop is doing.
    pub(crate) phase: Phase,
    /// By when it reports again (the end of its tick wait, or its pass's
    /// deadline).
    pub(crate) due: Instant,
}

/// One loop's progress.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    name: &'static str,
    // Whether the loop may queue behind OCF action work (the failover pass
    // takes the same lock as an action's pass).
    queues_behind_actions: bool,
    promise: Mutex<Promise>,
    beats: AtomicU64,
}

impl Heartbeat {
    /// A loop called `name`, idle and due now.
    pub(crate) fn new(name: &'static str) -> Arc<Self> {
        Self::with_queue(name, false)
    }

    fn with_queue(name: &'static str, queues_behind_actions: bool) -> Arc<Self> {
        Arc::new(Heartbeat {
            name,
            queues_behind_actions,
            promise: Mutex::new(Promise {
                phase: Phase::Idle,
                due: Instant::now(),
            }),
            beats: AtomicU64::new(0),
        })
    }

    fn set(&self, p: Promise) {
        *self.promise.lock().unwrap_or_else(|e| e.into_inner()) = p;
        self.beats.fetch_add(1, Ordering::Relaxed);
    }

    /// The loop waits until `due` (its next tick).
    pub(crate) fn idle_until(&self, due: Instant) {
        self.set(Promise {
            phase: Phase::Idle,
            due,
        });
    }

    /// The loop starts a pass that ends within `limit`.
    pub(crate) fn busy_for(&self, limit: Duration) {
        let now = Instant::now();
        self.set(Promise {
            phase: Phase::Busy { since: now },
            due: now + limit,
        });
    }

    /// The loop does not run in this daemon (no failover, no report
    /// path): it promises nothing the watchdog could find late.
    pub(crate) fn off(&self) {
        // Thirty years: what tokio itself takes for "never".
        self.idle_until(Instant::now() + Duration::from_secs(86_400 * 365 * 30));
    }

    /// The latest promise.
    pub(crate) fn promise(&self) -> Promise {
        *self.promise.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The loops the watchdog checks.
#[derive(Debug, Clone)]
pub(crate) struct Loops {
    /// The probe loop (a probe per `probe_interval_ms`).
    pub(crate) probe: Arc<Heartbeat>,
    /// The failover loop (a pass per interval, alert or leader change).
    pub(crate) reconcile: Arc<Heartbeat>,
    /// The report writer (a cycle per `report.interval_ms`).
    pub(crate) report: Arc<Heartbeat>,
}

impl Default for Loops {
    fn default() -> Self {
        Loops {
            probe: Heartbeat::new("probe"),
            reconcile: Heartbeat::with_queue("reconcile", true),
            report: Heartbeat::new("report"),
        }
    }
}

/// A loop (or action work) found past its promise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wedged {
    /// The loop's name, or `action` for OCF action work.
    pub(crate) name: &'static str,
    /// Its promise.
    pub(crate) phase: Phase,
    /// How late it is past its promise.
    pub(crate) late: Duration,
}

impl Loops {
    fn all(&self) -> [&Arc<Heartbeat>; 3] {
        [&self.probe, &self.reconcile, &self.report]
    }

    /// The first loop more than `allowance` past its promise at `now`. A
    /// loop that may queue behind OCF action work (the failover pass) is
    /// held to the later of its own deadline and the latest action's, and
    /// the action work to its deadline.
    pub(crate) fn wedged(
        &self,
        now: Instant,
        actions_due: Option<Instant>,
        allowance: Duration,
    ) -> Option<Wedged> {
        if let Some(due) = actions_due
            && now > due + allowance
        {
            return Some(Wedged {
                name: "action",
                phase: Phase::Busy { since: due },
                late: now - due,
            });
        }
        self.all().into_iter().find_map(|h| {
            let p = h.promise();
            let due = match (h.queues_behind_actions, p.phase, actions_due) {
                (true, Phase::Busy { .. }, Some(a)) => p.due.max(a),
                _ => p.due,
            };
            (now > due + allowance).then(|| Wedged {
                name: h.name,
                phase: p.phase,
                late: now - due,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[tokio::test(start_paused = true)]
    async fn the_failover_pass_may_queue_behind_an_action_until_its_deadline() {
        let loops = Loops::default();
        let work = Work::default();
        loops
            .probe
            .idle_until(Instant::now() + Duration::from_secs(3600));
        loops
            .report
            .idle_until(Instant::now() + Duration::from_secs(3600));
        loops.reconcile.busy_for(Duration::from_secs(60));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        // An agent start with a 300 s deadline holds the pass's lock.
        let action = work.spawn_action(Duration::from_secs(300), async move {
            let _ = rx.await;
        });
        tokio::time::sleep(Duration::from_secs(200)).await;
        let now = Instant::now();
        assert_eq!(
            loops.wedged(now, work.actions_due(), OVERRUN_ALLOWANCE),
            None
        );
        // The probe loop is held to its own promise all the same.
        assert_eq!(
            loops
                .wedged(
                    now + Duration::from_secs(3600),
                    work.actions_due(),
                    OVERRUN_ALLOWANCE
                )
                .map(|w| w.name),
            Some("action")
        );
        let _ = tx.send(());
        action.await.unwrap();
        assert_eq!(work.actions_due(), None);
        let w = loops
            .wedged(Instant::now(), None, OVERRUN_ALLOWANCE)
            .unwrap();
        assert_eq!(w.name, "reconcile");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_waits_for_work_then_abandons_it() {
        let work = Work::default();
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        work.spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            d.fetch_add(1, Ordering::SeqCst);
        });
        let stuck = work.spawn(std::future::pending::<()>());
        let started = Instant::now();
        assert!(!work.shut_down(SHUTDOWN_GRACE).await);
        assert_eq!(done.load(Ordering::SeqCst), 1, "finished within the grace");
        assert_eq!(stuck.await.unwrap(), None, "abandoned");
        assert!(started.elapsed() < SHUTDOWN_GRACE * 2);
        assert!(work.is_empty());
    }
}
