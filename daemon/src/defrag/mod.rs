//! The defragmentation policy: when a member's database file is mostly
//! free space (`[defrag]` threshold), defragment it, one member at a time,
//! never while the cluster is degraded, never the only voter, the leader
//! last and only after it handed the leadership over.
//!
//! Every daemon runs the policy for its own member. One member at a time
//! across daemons comes from a lock in etcd itself ([`DEFRAG_LOCK_KEY`],
//! under a lease): a daemon takes it before it moves leadership or
//! defragments, and releases it after. While one member is defragmented it
//! answers no Status, so every other daemon's policy refuses anyway; the
//! lock closes the window between two daemons' checks. See
//! docs/architecture.md.
//!
//! [`policy`] is the pure decision, [`facts`] asks for what it reads, and
//! [`Defrag::attempt`] carries a decision out.
//!
//! [`DEFRAG_LOCK_KEY`]: crate::etcd::DEFRAG_LOCK_KEY

pub(crate) mod facts;
pub(crate) mod policy;

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use warden_api::{DefragReply, DefragRun, DefragStatus};

use crate::config::DefragSettings;
use crate::metrics::DefragMetrics;
use facts::Sources;
use policy::{Decision, Mode, Threshold};

/// How many defragmentations the status keeps.
const KEEP_RUNS: usize = 16;

/// The longest a leadership transfer may take to show: a few election
/// timeouts of etcd's default timing.
const MOVE_LEADER_WAIT: Duration = Duration::from_secs(10);

/// What one attempt fixed when it began.
struct ThisRun {
    mode: Mode,
    started_at_ms: u64,
    /// `[defrag] timeout_ms` as the attempt read it (its lock lasts as
    /// long, whatever a reload sets meanwhile).
    timeout: Duration,
}

/// The policy's state on this node: its record and its one-at-a-time lock.
#[derive(Debug)]
pub(crate) struct Defrag {
    // Replaced by a reload (`etcd-warden reload`); read once per attempt.
    settings: Mutex<DefragSettings>,
    node: String,
    runs: Mutex<VecDeque<DefragRun>>,
    answer: Mutex<Option<String>>,
    // The loop and `etcd-warden defrag` never run the policy at once.
    serial: tokio::sync::Mutex<()>,
    metrics: DefragMetrics,
}

impl Defrag {
    /// The policy of `node` with `settings`, counting into `metrics`.
    pub(crate) fn new(node: &str, settings: DefragSettings, metrics: DefragMetrics) -> Self {
        Defrag {
            settings: Mutex::new(settings),
            node: node.to_string(),
            runs: Mutex::new(VecDeque::new()),
            answer: Mutex::new(None),
            serial: tokio::sync::Mutex::new(()),
            metrics,
        }
    }

    /// The policy's settings now.
    pub(crate) fn settings(&self) -> DefragSettings {
        self.settings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Apply `settings` from the next attempt on.
    pub(crate) fn set_settings(&self, settings: DefragSettings) {
        *self.settings.lock().unwrap_or_else(|e| e.into_inner()) = settings;
    }

    /// The record shown in the status.
    pub(crate) fn status(&self) -> DefragStatus {
        DefragStatus {
            runs: self
                .runs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect(),
            answer: self
                .answer
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// The latest defragmentation, if any.
    pub(crate) fn last(&self) -> Option<DefragRun> {
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .back()
            .cloned()
    }

    fn answered(&self, s: &str) {
        *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.to_string());
    }

    /// A refusal, recorded as the latest answer.
    fn refused(&self, message: String) -> DefragReply {
        self.answered(&message);
        DefragReply {
            done: false,
            message,
            steps: Vec::new(),
            run: None,
        }
    }

    /// Ask the policy now and, when it allows, defragment the local member
    /// (after handing the leadership over, when it leads). `deadline`
    /// bounds each question asked (Status, crm_mon, the lock).
    pub(crate) async fn attempt(
        &self,
        src: &Sources<'_>,
        mode: Mode,
        deadline: Duration,
    ) -> DefragReply {
        let _one = self.serial.lock().await;
        let settings = self.settings();
        let th = Threshold {
            percent: settings.fragmentation_percent,
            min_size: settings.min_db_size_bytes,
        };
        let f = facts::gather(src, deadline).await;
        let decision = match policy::decide(&f, &th, mode) {
            Ok(d) => d,
            Err(r) => {
                if !matches!(r, policy::Refusal::NotNeeded { .. }) {
                    tracing::info!(why = %r, "defragmentation refused");
                }
                return self.refused(format!("not defragmenting: {r}"));
            }
        };
        let started_at_ms = now_unix_ms();
        let ttl = settings.timeout + MOVE_LEADER_WAIT + Duration::from_secs(30);
        let value = format!("{} since {started_at_ms}", self.node);
        let lease = match src.etcd.acquire_defrag_lock(&value, ttl, deadline).await {
            Ok(Ok(lease)) => lease,
            Ok(Err(holder)) => {
                return self.refused(format!(
                    "not defragmenting: {}",
                    policy::Refusal::Busy(holder)
                ));
            }
            Err(e) => {
                return self.refused(format!(
                    "not defragmenting: the lock could not be taken: {e}"
                ));
            }
        };
        let mut steps = vec![format!("took the defragmentation lock ({value})")];
        let result = self
            .carry_out(
                src,
                &decision,
                &ThisRun {
                    mode,
                    started_at_ms,
                    timeout: settings.timeout,
                },
                deadline,
                &mut steps,
            )
            .await;
        match src.etcd.release_defrag_lock(lease, deadline).await {
            Ok(()) => steps.push("released the defragmentation lock".into()),
            Err(e) => {
                tracing::warn!(error = %e, "releasing the defragmentation lock failed; its lease ends it");
                steps.push(format!(
                    "could not release the lock ({e}); its lease ends it within {}s",
                    ttl.as_secs()
                ));
            }
        }
        let (done, message, run) = match result {
            Ok(run) => {
                let message = format!(
                    "defragmented: {} -> {} in {:.2}s",
                    human(run.db_size_before),
                    run.db_size_after.map_or_else(|| "?".into(), human),
                    run.duration_ms as f64 / 1000.0
                );
                (true, message, Some(run))
            }
            Err((msg, run)) => (false, format!("defragmentation failed: {msg}"), run),
        };
        if let Some(r) = &run {
            let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
            runs.push_back(r.clone());
            while runs.len() > KEEP_RUNS {
                runs.pop_front();
            }
        }
        self.answered(&message);
        DefragReply {
            done,
            message,
            steps,
            run,
        }
    }

    /// Under the lock: move the leadership when the decision says so, then
    /// defragment and record it.
    async fn carry_out(
        &self,
        src: &Sources<'_>,
        decision: &Decision,
        this: &ThisRun,
        deadline: Duration,
        steps: &mut Vec<String>,
    ) -> Result<DefragRun, (String, Option<DefragRun>)> {
        let mut moved = None;
        if let Decision::MoveLeaderThenDefragment { to, to_name } = decision {
            steps.push(format!(
                "this member leads: handing the leadership to {to_name}"
            ));
            tracing::info!(to = %to_name, "moving etcd's leadership before defragmenting");
            src.etcd
                .move_leader(*to, deadline.max(MOVE_LEADER_WAIT))
                .await
                .map_err(|e| (format!("moving the leadership to {to_name}: {e}"), None))?;
            wait_leader(src, *to).await.map_err(|e| (e, None))?;
            steps.push(format!("{to_name} leads"));
            moved = Some(to_name.clone());
        }
        let before = src
            .etcd
            .status(deadline)
            .await
            .map_err(|e| (format!("the local member's Status: {e}"), None))?;
        steps.push(format!(
            "defragmenting the local member: {} file, {} in use",
            human(before.db_size),
            human(before.db_size_in_use)
        ));
        tracing::info!(
            db_size = before.db_size,
            in_use = before.db_size_in_use,
            "defragmenting the local member"
        );
        let t0 = Instant::now();
        let r = src.etcd.defragment(this.timeout).await;
        let took = t0.elapsed();
        let after = src.etcd.status(deadline).await.ok().map(|s| s.db_size);
        let run = DefragRun {
            started_at_ms: this.started_at_ms,
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            db_size_before: before.db_size,
            db_size_in_use_before: before.db_size_in_use,
            db_size_after: after,
            leader_moved_to: moved,
            by_hand: matches!(this.mode, Mode::Manual { .. }),
            error: r.as_ref().err().map(|e| e.to_string()),
        };
        self.metrics
            .ran(now_unix_secs(this.started_at_ms), took, r.is_ok());
        match r {
            Ok(()) => {
                tracing::info!(
                    took_ms = run.duration_ms,
                    before = run.db_size_before,
                    after = ?run.db_size_after,
                    "defragmented the local member"
                );
                steps.push(format!("defragmented in {:.2}s", took.as_secs_f64()));
                Ok(run)
            }
            Err(e) => {
                tracing::error!(error = %e, "defragmenting the local member failed");
                Err((e.to_string(), Some(run)))
            }
        }
    }
}

/// Wait until the local member sees `to` lead.
async fn wait_leader(src: &Sources<'_>, to: u64) -> Result<(), String> {
    let until = Instant::now() + MOVE_LEADER_WAIT;
    loop {
        if let Ok(s) = src.etcd.status(Duration::from_secs(1)).await
            && s.leader == to
        {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(format!(
                "member {to:x} did not lead within {}s of the transfer",
                MOVE_LEADER_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

fn now_unix_secs(ms: u64) -> i64 {
    i64::try_from(ms / 1000).unwrap_or(i64::MAX)
}

/// A database size in MiB (the unit etcd's own logs use for it).
fn human(b: i64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}
