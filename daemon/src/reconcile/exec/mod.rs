//! Carrying out a [`Decision`]'s steps, in order, stopping at the first
//! that fails. The caller observes again and decides again afterwards: a
//! step's effect is read back from fresh facts, never from the call's
//! result (an etcd call can report failure yet have taken effect).
//!
//! The split-brain rule and the nothing-deleted rule are checked here
//! again, against the facts the decision was made from, so that a wrong
//! decision cannot force a new cluster without Pacemaker's proof that the
//! peer is down, nor start over or delete data.
//!
//! One function per step, grouped by concern: Pacemaker's attributes
//! (`attrs`), starting and stopping etcd (`start`), the forced new cluster
//! (`force`), the member list and the leave lock (`membership`), archiving
//! a member directory (`archive`), and this node's own markers (`markers`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use warden_failover::{Facts, Step};

use super::local::{LocalError, LocalPaths};
use super::ports::{EtcdOps, OpsError, Ports, Supervisor};
use crate::config::Settings;
use crate::pacemaker::{Pacemaker, PcmkError};

mod archive;
mod attrs;
mod force;
mod markers;
mod membership;
mod start;

/// A step that could not be carried out.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    /// The step would break a safety rule on these facts; not carried out.
    #[error("refused to carry out {step}: {why}")]
    Unsafe {
        /// The step, for the log.
        step: String,
        /// Which rule and why.
        why: String,
    },
    /// etcd or its supervision failed.
    #[error("{step} failed: {source}")]
    Ops {
        /// The step.
        step: String,
        /// The error.
        source: OpsError,
    },
    /// Pacemaker's tools failed.
    #[error("{step} failed: {source}")]
    Pcmk {
        /// The step.
        step: String,
        /// The error.
        source: PcmkError,
    },
    /// A local file operation failed.
    #[error("{step} failed: {source}")]
    Local {
        /// The step.
        step: String,
        /// The error.
        source: LocalError,
    },
    /// The leave lock is held by another node.
    #[error("the leave lock is held by {0}")]
    LockHeld(String),
    /// etcd was started and runs, but had not answered when the short wait
    /// of a restart or a join ended: expected while a learner receives a
    /// large snapshot or a restarted member waits for its majority.
    #[error(
        "{step}: etcd runs but did not answer within {waited:?}; deciding again on what it answers next"
    )]
    NotAnsweringYet {
        /// The step.
        step: String,
        /// How long the step waited.
        waited: Duration,
    },
}

/// Why a step failed, before the step's name is attached (see
/// [`Fault::at`]): what the step functions return, so that `?` wraps each
/// source error.
#[derive(Debug)]
enum Fault {
    /// See [`StepError::Unsafe`]: why the step would break a safety rule.
    Unsafe(String),
    /// See [`StepError::Ops`].
    Ops(OpsError),
    /// See [`StepError::Pcmk`].
    Pcmk(PcmkError),
    /// See [`StepError::Local`].
    Local(LocalError),
    /// See [`StepError::LockHeld`]: the holder.
    LockHeld(String),
    /// See [`StepError::NotAnsweringYet`]: how long the step waited.
    NotAnsweringYet(Duration),
}

impl Fault {
    /// A refusal: the step would break a safety rule, for this reason.
    fn refused(why: impl Into<String>) -> Self {
        Self::Unsafe(why.into())
    }

    /// The error of the step named `step`.
    fn at(self, step: String) -> StepError {
        match self {
            Self::Unsafe(why) => StepError::Unsafe { step, why },
            Self::Ops(source) => StepError::Ops { step, source },
            Self::Pcmk(source) => StepError::Pcmk { step, source },
            Self::Local(source) => StepError::Local { step, source },
            Self::LockHeld(holder) => StepError::LockHeld(holder),
            Self::NotAnsweringYet(waited) => StepError::NotAnsweringYet { step, waited },
        }
    }
}

impl From<OpsError> for Fault {
    fn from(e: OpsError) -> Self {
        Self::Ops(e)
    }
}

impl From<PcmkError> for Fault {
    fn from(e: PcmkError) -> Self {
        Self::Pcmk(e)
    }
}

impl From<LocalError> for Fault {
    fn from(e: LocalError) -> Self {
        Self::Local(e)
    }
}

/// What was done.
#[derive(Debug, Default)]
pub struct ExecReport {
    /// Steps carried out, in order.
    pub(crate) done: Vec<Step>,
    /// The step that failed, and why; later steps were not tried.
    pub failed: Option<(Step, String)>,
    /// Archive directories created.
    pub(crate) archived: Vec<PathBuf>,
    /// Their checksums, being written on threads of their own (see
    /// [`super::local::record_checksum`]); nothing waits for them but
    /// tests.
    pub checksums: Vec<std::thread::JoinHandle<()>>,
}

fn name(s: &Step) -> String {
    match s {
        Step::ArchiveDataDir { .. } => "ArchiveDataDir".into(),
        Step::Wait { .. } => "Wait".into(),
        Step::Refuse { .. } => "Refuse".into(),
        other => format!("{other:?}"),
    }
}

/// What every step is carried out with.
struct Ctx<'a, P: ?Sized, E, S> {
    /// The world, behind the reconciler's ports.
    ports: &'a Ports<'a, P, E, S>,
    /// This node's files.
    paths: &'a LocalPaths,
    /// The facts the decision was made from.
    facts: &'a Facts,
    /// The time left before the deadline of the whole decision.
    left: Duration,
}

impl<'a, P: ?Sized, E, S> Ctx<'a, P, E, S> {
    fn settings(&self) -> &'a Settings {
        self.ports.settings
    }

    /// This node's name.
    fn me(&self) -> &'a str {
        self.ports.settings.node_name.as_str()
    }

    /// The deadline of one attribute or leave-lock call.
    fn attr_deadline(&self) -> Duration {
        let probe = self.settings().timeouts.probe_timeout;
        self.left.min(probe.max(Duration::from_secs(2)))
    }
}

/// Whether the local etcd process exists (as its supervisor sees it),
/// answering or not.
async fn etcd_runs<P: ?Sized, E, S: Supervisor>(ports: &Ports<'_, P, E, S>) -> bool {
    ports.supervisor.state().await.pid().is_some()
}

/// Carry out `steps` (decided from `facts`) in order within `deadline`.
pub async fn execute<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
    ports: &Ports<'_, P, E, S>,
    local: &LocalPaths,
    facts: &Facts,
    steps: &[Step],
    deadline: Duration,
) -> ExecReport {
    let started = Instant::now();
    let mut report = ExecReport::default();
    for step in steps {
        let left = deadline.saturating_sub(started.elapsed());
        if left.is_zero() {
            report.failed = Some((step.clone(), "no time left before the deadline".into()));
            break;
        }
        let cx = Ctx {
            ports,
            paths: local,
            facts,
            left,
        };
        match one(&cx, step, &mut report).await {
            Ok(()) => report.done.push(step.clone()),
            Err(e) => {
                log_failure(step, &e);
                report.failed = Some((step.clone(), e.to_string()));
                break;
            }
        }
    }
    report
}

/// A start still waiting for etcd's first answer is expected, not a
/// failure: it is said at info level.
fn log_failure(step: &Step, e: &StepError) {
    if matches!(e, StepError::NotAnsweringYet { .. }) {
        tracing::info!(step = %name(step), "{e}");
    } else {
        tracing::warn!(step = %name(step), error = %e, "step failed; deciding again");
    }
}

/// Carry out one step: the function for its kind.
async fn one<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
    cx: &Ctx<'_, P, E, S>,
    step: &Step,
    report: &mut ExecReport,
) -> Result<(), StepError> {
    let done = match step {
        Step::Wait { .. } | Step::Refuse { .. } => Ok(()),
        Step::PublishRecord => attrs::publish_record(cx).await,
        Step::SetClaim { epoch } => attrs::set_claim(cx, *epoch).await,
        Step::ClearFailedStart { resource } => attrs::clear_failed_start(cx, resource).await,
        Step::ClearClaim => attrs::clear_claim(cx).await,
        Step::StartEtcd { mode } => start::start_etcd(cx, mode).await,
        Step::StopEtcd => start::stop_etcd(cx).await,
        Step::ForceNewCluster { epoch } => force::force_new_cluster(cx, *epoch).await,
        Step::ArchiveDataDir { reason } => archive::archive_data_dir(cx, reason, report),
        Step::AddLearner { node } => membership::add_learner(cx, node).await,
        Step::PromoteLearner { id, node } => membership::promote_learner(cx, *id, node).await,
        Step::RemoveMember { id, node } => membership::remove_member(cx, *id, node).await,
        Step::TransferLeadership { id, node } => {
            membership::transfer_leadership(cx, *id, node).await
        }
        Step::AcquireLeaveLock => membership::acquire_leave_lock(cx).await,
        Step::ReleaseLeaveLock => membership::release_leave_lock(cx).await,
        Step::RecordDeparture => markers::record_departure(cx),
        Step::ClearDeparture => markers::clear_departure(cx),
        Step::MarkInSync => markers::mark_in_sync(cx),
        Step::ClearInSync => markers::clear_in_sync(cx),
    };
    done.map_err(|f| f.at(name(step)))
}

#[cfg(test)]
mod tests;
