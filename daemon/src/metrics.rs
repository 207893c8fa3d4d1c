//! Prometheus text-format metrics. Display only: no decision ever reads a
//! value from here.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use warden_api::Action;

/// Upper bounds of the action latency histogram, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
];

const ACTIONS: [(Action, &str); 8] = [
    (Action::Start, "start"),
    (Action::Stop, "stop"),
    (Action::Monitor, "monitor"),
    (Action::Promote, "promote"),
    (Action::Demote, "demote"),
    (Action::Notify, "notify"),
    (Action::Reload, "reload"),
    (Action::ValidateAll, "validate-all"),
];

/// The role of the local member, as last observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// etcd is not running or did not answer.
    None,
    /// A learner.
    Learner,
    /// A voting follower.
    Follower,
    /// The leader.
    Leader,
}

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

/// The daemon's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    role: AtomicI64,
    quorum: AtomicI64,
    etcd_up: AtomicI64,
    leader_changes: AtomicU64,
    restarts: AtomicU64,
    unexpected_exits: AtomicU64,
    probe_failures: AtomicU64,
    report_ok: AtomicU64,
    report_failed: AtomicU64,
    report_skipped: AtomicU64,
    report_last_success: AtomicI64,
    actions: Mutex<[Histogram; ACTIONS.len()]>,
}

impl Metrics {
    /// Record the last observation of the local member.
    pub fn observe(&self, role: Role, quorum: bool, etcd_up: bool) {
        self.role.store(role as i64, Ordering::Relaxed);
        self.quorum.store(i64::from(quorum), Ordering::Relaxed);
        self.etcd_up.store(i64::from(etcd_up), Ordering::Relaxed);
    }

    /// A leader change was observed.
    pub fn leader_changed(&self) {
        self.leader_changes.fetch_add(1, Ordering::Relaxed);
    }

    /// The daemon restarted etcd after it died.
    pub fn restarted(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    /// etcd exited without being asked to.
    pub fn unexpected_exit(&self) {
        self.unexpected_exits.fetch_add(1, Ordering::Relaxed);
    }

    /// A probe failed.
    pub fn probe_failed(&self) {
        self.probe_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// A report cycle wrote the report; `at` is the Unix time (seconds).
    pub fn report_written(&self, at: i64) {
        self.report_ok.fetch_add(1, Ordering::Relaxed);
        self.report_last_success.store(at, Ordering::Relaxed);
    }

    /// A report cycle failed (the previous report was left as it was).
    pub fn report_failed(&self) {
        self.report_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A report tick came while the previous cycle still ran.
    pub fn report_skipped(&self) {
        self.report_skipped.fetch_add(1, Ordering::Relaxed);
    }

    /// An action took `took`.
    pub fn action(&self, action: Action, took: Duration) {
        let Some(i) = ACTIONS.iter().position(|(a, _)| *a == action) else {
            return;
        };
        let secs = took.as_secs_f64();
        if let Ok(mut h) = self.actions.lock() {
            let h = &mut h[i];
            for (b, bound) in BUCKETS.iter().enumerate() {
                if secs <= *bound {
                    h.counts[b] += 1;
                }
            }
            h.sum += secs;
            h.count += 1;
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let role = self.role.load(Ordering::Relaxed);
        let _ = writeln!(
            o,
            "# HELP etcd_warden_member_role Role of the local etcd member (1 for the current role)."
        );
        let _ = writeln!(o, "# TYPE etcd_warden_member_role gauge");
        for (i, name) in ["none", "learner", "follower", "leader"].iter().enumerate() {
            let _ = writeln!(
                o,
                "etcd_warden_member_role{{role=\"{name}\"}} {}",
                i64::from(role == i as i64)
            );
        }
        let gauge = |o: &mut String, name: &str, help: &str, v: i64| {
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} gauge");
            let _ = writeln!(o, "{name} {v}");
        };
        let counter = |o: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} counter");
            let _ = writeln!(o, "{name} {v}");
        };
        gauge(
            &mut o,
            "etcd_warden_quorum",
            "1 if the last probe's linearizable read succeeded.",
            self.quorum.load(Ordering::Relaxed),
        );
        gauge(
            &mut o,
            "etcd_warden_etcd_up",
            "1 if the last probe got a Status answer from the local member.",
            self.etcd_up.load(Ordering::Relaxed),
        );
        counter(
            &mut o,
            "etcd_warden_leader_changes_total",
            "Leader changes observed by the probes.",
            self.leader_changes.load(Ordering::Relaxed),
        );
        counter(
            &mut o,
            "etcd_warden_supervision_restarts_total",
            "Times the daemon restarted an etcd that had died (autostart only).",
            self.restarts.load(Ordering::Relaxed),
        );
        counter(
            &mut o,
            "etcd_warden_etcd_unexpected_exits_total",
            "Times etcd exited without being asked to.",
            self.unexpected_exits.load(Ordering::Relaxed),
        );
        counter(
            &mut o,
            "etcd_warden_probe_failures_total",
            "Probes of the local member that failed or timed out.",
            self.probe_failures.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            o,
            "# HELP etcd_warden_report_cycles_total Report cycles of the daemon's writer ([report] path), by result."
        );
        let _ = writeln!(o, "# TYPE etcd_warden_report_cycles_total counter");
        for (result, v) in [
            ("success", &self.report_ok),
            ("failure", &self.report_failed),
        ] {
            let _ = writeln!(
                o,
                "etcd_warden_report_cycles_total{{result=\"{result}\"}} {}",
                v.load(Ordering::Relaxed)
            );
        }
        counter(
            &mut o,
            "etcd_warden_report_cycles_skipped_total",
            "Report ticks skipped because the previous cycle was still running.",
            self.report_skipped.load(Ordering::Relaxed),
        );
        gauge(
            &mut o,
            "etcd_warden_report_last_success_timestamp_seconds",
            "Unix time of the last report the daemon wrote (0: none yet).",
            self.report_last_success.load(Ordering::Relaxed),
        );
        let _ = writeln!(
            o,
            "# HELP etcd_warden_action_duration_seconds Time to answer an OCF action."
        );
        let _ = writeln!(o, "# TYPE etcd_warden_action_duration_seconds histogram");
        if let Ok(hs) = self.actions.lock() {
            for ((_, name), h) in ACTIONS.iter().zip(hs.iter()) {
                for (b, bound) in BUCKETS.iter().enumerate() {
                    let _ = writeln!(
                        o,
                        "etcd_warden_action_duration_seconds_bucket{{action=\"{name}\",le=\"{bound}\"}} {}",
                        h.counts[b]
                    );
                }
                let _ = writeln!(
                    o,
                    "etcd_warden_action_duration_seconds_bucket{{action=\"{name}\",le=\"+Inf\"}} {}",
                    h.count
                );
                let _ = writeln!(
                    o,
                    "etcd_warden_action_duration_seconds_sum{{action=\"{name}\"}} {}",
                    h.sum
                );
                let _ = writeln!(
                    o,
                    "etcd_warden_action_duration_seconds_count{{action=\"{name}\"}} {}",
                    h.count
                );
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_one_hot_role_and_cumulative_buckets() {
        let m = Metrics::default();
        m.observe(Role::Leader, true, true);
        m.leader_changed();
        m.action(Action::Monitor, Duration::from_millis(3));
        let t = m.render();
        assert!(
            t.contains("etcd_warden_member_role{role=\"leader\"} 1"),
            "{t}"
        );
        assert!(
            t.contains("etcd_warden_member_role{role=\"learner\"} 0"),
            "{t}"
        );
        assert!(t.contains("etcd_warden_quorum 1"));
        assert!(t.contains("etcd_warden_leader_changes_total 1"));
        assert!(t.contains(
            "etcd_warden_action_duration_seconds_bucket{action=\"monitor\",le=\"0.0025\"} 0"
        ));
        assert!(t.contains(
            "etcd_warden_action_duration_seconds_bucket{action=\"monitor\",le=\"0.005\"} 1"
        ));
        assert!(t.contains("etcd_warden_action_duration_seconds_count{action=\"monitor\"} 1"));
        assert!(t.contains("etcd_warden_report_cycles_total{result=\"success\"} 0"));
        assert!(t.contains("etcd_warden_report_last_success_timestamp_seconds 0"));
    }

    #[test]
    fn report_cycles_counted_by_result() {
        let m = Metrics::default();
        m.report_written(1_700_000_000);
        m.report_failed();
        m.report_failed();
        m.report_skipped();
        let t = m.render();
        assert!(
            t.contains("etcd_warden_report_cycles_total{result=\"success\"} 1"),
            "{t}"
        );
        assert!(
            t.contains("etcd_warden_report_cycles_total{result=\"failure\"} 2"),
            "{t}"
        );
        assert!(
            t.contains("etcd_warden_report_cycles_skipped_total 1"),
            "{t}"
        );
        assert!(
            t.contains("etcd_warden_report_last_success_timestamp_seconds 1700000000"),
            "{t}"
        );
    }
}
