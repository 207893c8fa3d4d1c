//! Named steps at which the daemon can be made to kill itself (SIGKILL, as
//! an OOM kill or a power-cut supervisor would), so that tests prove that a
//! daemon dying between two steps of a start, a force or a join leaves
//! nothing the next daemon cannot adopt, finish or undo.
//!
//! Armed only by the environment variable [`ENV`] (a comma-separated list
//! of [`POINTS`]); the packaged unit never sets it. Each armed point fires
//! once per process: the next daemon starts without it.

use std::sync::OnceLock;

/// The environment variable naming the points to die at.
pub const ENV: &str = "ETCD_WARDEN_KILL_AT";

/// Every point, in the order a force passes them (then a start, a join).
pub const POINTS: [&str; 8] = [
    // The force's epoch is recorded as an intent; etcd still runs.
    "force-intent-recorded",
    // etcd stopped for the force; its WAL tail kept; the revision debt
    // recorded.
    "force-stopped",
    // The forced etcd runs with clients held off, the revision not moved.
    "force-clients-held",
    // The forced etcd serves clients; the debt not yet cleared.
    "force-restarted",
    // etcd spawned, its PID file not yet written.
    "start-spawned",
    // A join recorded in the state file, etcd not yet started.
    "join-recorded",
    // This node's stale data archived, nothing started.
    "archive-done",
    // This node added the peer as a learner, the step not yet reported.
    "learner-added",
];

fn armed() -> &'static [String] {
    static ARMED: OnceLock<Vec<String>> = OnceLock::new();
    ARMED.get_or_init(|| parse(std::env::var(ENV).ok().as_deref()))
}

/// The known points named in `value`; unknown names are reported and
/// ignored.
fn parse(value: Option<&str>) -> Vec<String> {
    let Some(value) = value else {
        return Vec::new();
    };
    value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .filter(|p| {
            let known = POINTS.contains(p);
            if !known {
                tracing::warn!(point = %p, env = ENV, known = ?POINTS, "ignoring an unknown kill point");
            }
            known
        })
        .map(str::to_string)
        .collect()
}

/// Kills this process with SIGKILL when `point` is armed.
pub(crate) fn reached(point: &'static str) {
    debug_assert!(POINTS.contains(&point), "{point} is not in POINTS");
    if !armed().iter().any(|p| p == point) {
        return;
    }
    // Written straight to stderr: the tracing writer may buffer.
    eprintln!("etcd-warden: {ENV} names {point}: killing this daemon (SIGKILL)");
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_points_are_armed() {
        assert!(parse(None).is_empty());
        assert_eq!(
            parse(Some(" force-stopped, nonsense ,,start-spawned")),
            ["force-stopped", "start-spawned"]
        );
    }
}
