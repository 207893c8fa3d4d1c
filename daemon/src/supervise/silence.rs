//! How long the local etcd has gone without answering while its process
//! exists. A member that answered and then stops answering (stopped by a
//! signal, stuck in the kernel on a dead disk, live-locked) counts as hung
//! once its silence reaches `timeouts.hung_after_ms`; a member that has not
//! answered since it started (one waiting for its peer's vote before it
//! serves clients) does not, unless it is stopped by a signal, which no
//! member ever answers from.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ProcState;

/// A change worth a log line and a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// etcd became hung: its silence reached the bound.
    Hung {
        /// Its PID.
        pid: u32,
        /// How long it has not answered.
        silent: Duration,
    },
    /// A hung etcd answered again.
    Answers {
        /// Its PID.
        pid: u32,
    },
}

#[derive(Debug, Default)]
struct Track {
    /// The process this track is about.
    pid: Option<u32>,
    /// Its last answer, or when it was first seen stopped by a signal; the
    /// silence counts from here. `None` while it has not answered since it
    /// started.
    since: Option<Instant>,
    /// Whether the latest Status call failed.
    failing: bool,
    /// Whether it is reported hung now.
    hung: bool,
}

/// The local etcd's silence, fed by every Status call of the daemon (the
/// probe loop, the failover logic's gathering, the status API).
#[derive(Debug)]
pub(crate) struct Silence {
    bound: Duration,
    track: Mutex<Track>,
}

impl Silence {
    /// Counting against `bound` (`timeouts.hung_after_ms`).
    pub(crate) fn new(bound: Duration) -> Self {
        Self {
            bound,
            track: Mutex::new(Track::default()),
        }
    }

    /// The configured bound.
    pub(crate) fn bound(&self) -> Duration {
        self.bound
    }

    /// A Status call to the local etcd answered (`ok`) or not, at `now`.
    pub(crate) fn answered(&self, ok: bool, now: Instant) -> Option<Change> {
        let mut t = self.track.lock().unwrap_or_else(|e| e.into_inner());
        t.failing = !ok;
        if !ok {
            return None;
        }
        t.since = Some(now);
        let was = std::mem::replace(&mut t.hung, false);
        match (was, t.pid) {
            (true, Some(pid)) => Some(Change::Answers { pid }),
            _ => None,
        }
    }

    /// The backend's process state, `Hung` once a process that exists has
    /// been silent for the bound, at `now`.
    pub(crate) fn judge(&self, state: ProcState, now: Instant) -> (ProcState, Option<Change>) {
        let mut t = self.track.lock().unwrap_or_else(|e| e.into_inner());
        let (pid, frozen) = match state {
            ProcState::Running { pid } => (pid, false),
            ProcState::Frozen { pid } => (pid, true),
            other => {
                *t = Track::default();
                return (other, None);
            }
        };
        if t.pid != Some(pid) {
            *t = Track {
                pid: Some(pid),
                ..Track::default()
            };
        }
        if frozen && t.since.is_none() {
            t.since = Some(now);
        }
        let silent = t.since.map(|s| now.saturating_duration_since(s));
        match silent {
            Some(silent) if (frozen || t.failing) && silent >= self.bound => {
                let change = (!t.hung).then_some(Change::Hung { pid, silent });
                t.hung = true;
                let silent_ms = u64::try_from(silent.as_millis()).unwrap_or(u64::MAX);
                (ProcState::Hung { pid, silent_ms }, change)
            }
            _ => (state, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(5);

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_member_that_answered_and_went_silent_is_hung_at_the_bound() {
        let silence = Silence::new(BOUND);
        let t0 = Instant::now();
        let running = ProcState::Running { pid: 7 };
        assert_eq!(silence.judge(running.clone(), t0).0, running);
        assert_eq!(silence.answered(true, t0), None);
        assert_eq!(silence.answered(false, t0 + s(2)), None);
        assert_eq!(silence.judge(running.clone(), t0 + s(4)).0, running);
        let (state, change) = silence.judge(running.clone(), t0 + s(5));
        assert_eq!(
            state,
            ProcState::Hung {
                pid: 7,
                silent_ms: 5000
            }
        );
        assert_eq!(
            change,
            Some(Change::Hung {
                pid: 7,
                silent: s(5)
            })
        );
        // Reported once.
        assert_eq!(silence.judge(running.clone(), t0 + s(6)).1, None);
        assert_eq!(
            silence.answered(true, t0 + s(7)),
            Some(Change::Answers { pid: 7 })
        );
        assert_eq!(silence.judge(running.clone(), t0 + s(8)).0, running);
    }

    #[test]
    fn a_member_that_never_answered_since_its_start_is_not_hung() {
        let silence = Silence::new(BOUND);
        let t0 = Instant::now();
        let running = ProcState::Running { pid: 7 };
        silence.judge(running.clone(), t0);
        silence.answered(false, t0 + s(1));
        assert_eq!(silence.judge(running.clone(), t0 + s(60)).0, running);
    }

    #[test]
    fn silence_needs_a_failed_call_not_only_time_without_calls() {
        let silence = Silence::new(BOUND);
        let t0 = Instant::now();
        let running = ProcState::Running { pid: 7 };
        silence.judge(running.clone(), t0);
        silence.answered(true, t0);
        assert_eq!(silence.judge(running.clone(), t0 + s(30)).0, running);
    }

    #[test]
    fn a_process_stopped_by_a_signal_counts_from_when_it_was_seen_so() {
        let silence = Silence::new(BOUND);
        let t0 = Instant::now();
        let frozen = ProcState::Frozen { pid: 7 };
        assert_eq!(silence.judge(frozen.clone(), t0).0, frozen);
        assert!(matches!(
            silence.judge(frozen.clone(), t0 + s(5)).0,
            ProcState::Hung { pid: 7, .. }
        ));
    }

    #[test]
    fn a_new_process_starts_a_new_count() {
        let silence = Silence::new(BOUND);
        let t0 = Instant::now();
        silence.judge(ProcState::Running { pid: 7 }, t0);
        silence.answered(true, t0);
        silence.answered(false, t0 + s(1));
        silence.judge(ProcState::Stopped, t0 + s(2));
        let next = ProcState::Running { pid: 8 };
        assert_eq!(silence.judge(next.clone(), t0 + s(9)).0, next);
    }
}
