//! Time budgets. Pacemaker kills an action that overruns its timeout and
//! records a timeout, which for stop means fencing. So the agent splits the
//! timeout in three: the daemon's deadline, a reserve in which the daemon
//! still gets to answer after its deadline, and a reserve in which the agent
//! reports that it gave up — always before Pacemaker's own timer fires.

use std::time::{Duration, Instant};

/// The budget of one action.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    started: Instant,
    timeout: Duration,
    reserve: Duration,
}

/// Smallest reserve: process start-up, connecting and printing take a few
/// milliseconds; 200 ms leaves room on a loaded machine.
const MIN_RESERVE: Duration = Duration::from_millis(200);
/// Largest reserve: beyond this the daemon's deadline would shrink for
/// nothing.
const MAX_RESERVE: Duration = Duration::from_secs(5);

impl Budget {
    /// A budget of `timeout` counted from `started` (the agent's start).
    pub fn new(started: Instant, timeout: Duration) -> Self {
        // A tenth of the timeout, within [200 ms, 5 s], and never more than a
        // third so that a tiny timeout still leaves the daemon some time.
        let reserve = (timeout / 10)
            .clamp(MIN_RESERVE, MAX_RESERVE)
            .min(timeout / 3);
        Budget {
            started,
            timeout,
            reserve,
        }
    }

    /// The whole timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Time since the action started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// How long the agent may still wait for the daemon's answer.
    pub fn client_left(&self) -> Duration {
        self.timeout
            .saturating_sub(self.reserve)
            .saturating_sub(self.elapsed())
    }

    /// The deadline to hand the daemon: what the agent may wait, minus one
    /// reserve so that the daemon's answer arrives before the agent gives up.
    pub fn daemon_deadline(&self) -> Duration {
        self.client_left().saturating_sub(self.reserve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_typical_timeout() {
        let b = Budget::new(Instant::now(), Duration::from_secs(20));
        assert!(b.client_left() <= Duration::from_secs(18));
        assert!(b.client_left() > Duration::from_millis(17_900));
        assert!(b.daemon_deadline() <= Duration::from_secs(16));
        assert!(b.daemon_deadline() > Duration::from_millis(15_900));
    }

    #[test]
    fn caps_the_reserve_for_long_timeouts() {
        let b = Budget::new(Instant::now(), Duration::from_secs(300));
        assert!(b.client_left() > Duration::from_millis(294_900));
        assert!(b.daemon_deadline() > Duration::from_millis(289_900));
    }

    #[test]
    fn tiny_timeouts_still_leave_the_daemon_time() {
        let b = Budget::new(Instant::now(), Duration::from_millis(300));
        assert!(b.daemon_deadline() > Duration::ZERO);
        assert!(b.daemon_deadline() < b.client_left());
        assert!(b.client_left() < Duration::from_millis(300));
    }

    #[test]
    fn an_exhausted_budget_is_zero_not_negative() {
        let started = Instant::now() - Duration::from_secs(10);
        let b = Budget::new(started, Duration::from_secs(1));
        assert_eq!(b.client_left(), Duration::ZERO);
        assert_eq!(b.daemon_deadline(), Duration::ZERO);
    }
}
