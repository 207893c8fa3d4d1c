//! The app's work on request: an OCF action (within its deadline, as a
//! task that outlives a late reply), the reconciler's ports, the
//! defragmentation policy.

use std::sync::Arc;
use std::time::{Duration, Instant};

use warden_api::{ActionReply, ActionRequest, Outcome};

use crate::pacemaker::Pacemaker;
use crate::reconcile::ports::Ports;

use super::App;

impl App {
    /// What the defragmentation policy reads from.
    pub(crate) fn defrag_sources(&self) -> crate::defrag::facts::Sources<'_> {
        crate::defrag::facts::Sources {
            settings: &self.settings,
            etcd: &self.etcd,
            connector: &self.connector,
            pacemaker: &self.pacemaker,
            failover: self.failover.as_deref(),
        }
    }

    /// Run the defragmentation policy now (the daemon's loop, or
    /// `etcd-warden defrag`).
    pub(crate) async fn defrag(
        &self,
        mode: crate::defrag::policy::Mode,
    ) -> warden_api::DefragReply {
        self.defrag
            .attempt(
                &self.defrag_sources(),
                mode,
                self.settings.timeouts.probe_timeout,
            )
            .await
    }

    /// Carry out one OCF action; always answers within the request's deadline.
    pub(crate) async fn action(self: &Arc<Self>, req: ActionRequest) -> ActionReply {
        let started = Instant::now();
        let deadline = Duration::from_millis(req.deadline_ms);
        let action = req.action;
        tracing::info!(?action, depth = req.depth, deadline_ms = req.deadline_ms, instance = ?req.instance, "action");
        // The work runs as a task of its own: when the deadline passes, the
        // reply goes out and the work (e.g. a stop's SIGKILL) still finishes;
        // a shutdown waits for it (bounded, see `crate::tasks`).
        // Boxed once here: each wrapper on the way into the task (the
        // watchdog ticket, the cancellation, the tracker) would otherwise
        // copy the whole future, which holds the live check's etcd calls.
        let me = self.clone();
        let work = self.work.spawn_action(
            deadline,
            Box::pin(async move { me.do_action(req, deadline).await }),
        );
        let reply = match tokio::time::timeout(deadline, work).await {
            Ok(Ok(Some(r))) => r,
            Ok(Ok(None)) => ActionReply {
                outcome: Outcome::Failed,
                reason: Some(format!(
                    "the {action:?} action was abandoned: the daemon is shutting down"
                )),
            },
            Ok(Err(e)) => ActionReply {
                outcome: Outcome::Failed,
                reason: Some(format!("the {action:?} action failed internally: {e}")),
            },
            Err(_) => ActionReply {
                outcome: Outcome::Failed,
                reason: Some(format!(
                    "the {action:?} action did not finish within {deadline:?}"
                )),
            },
        };
        self.metrics.action(action, started.elapsed());
        tracing::info!(?action, outcome = ?reply.outcome, reason = ?reply.reason, took = ?started.elapsed(), "action done");
        reply
    }
    async fn do_action(&self, req: ActionRequest, deadline: Duration) -> ActionReply {
        // Leave a margin so that the reply itself fits in the deadline.
        let budget = deadline.saturating_sub(Duration::from_millis(200).min(deadline / 4));
        let failover = self.failover.as_deref();
        crate::reconcile::agent::action(failover, &self.ports(), &req, budget).await
    }

    /// What the reconciler acts through: this app's etcd client and
    /// supervision, and its Pacemaker.
    pub(crate) fn ports(&self) -> Ports<'_, dyn Pacemaker, App, App> {
        Ports {
            pacemaker: &*self.pacemaker,
            etcd: self,
            supervisor: self,
            settings: &self.settings,
        }
    }
}
