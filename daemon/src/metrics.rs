//! The daemon's metrics, rendered by `prometheus-client` in the OpenMetrics
//! text format (which Prometheus scrapes natively). Display only: no
//! decision ever reads a value from here.
//!
//! The names, types, labels and help texts are what dashboards use; a test
//! compares them with the set the daemon has always exposed
//! (`daemon/tests/fixtures/metrics-before.prom`). In OpenMetrics a
//! counter's family is named without `_total` in `# HELP`/`# TYPE`; its
//! samples keep the `_total` names.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crm_xml::report::WardenState;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use warden_api::Action;

/// Counters of what failover passes carried out: forced new clusters and
/// archived member directories. Clones share their values.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExecCounters {
    forced_new_clusters: Counter,
    archives: Counter,
}

impl ExecCounters {
    /// A failover pass carried out `done` and archived `archives` member
    /// directories.
    pub(crate) fn executed(&self, done: &[warden_failover::Step], archives: usize) {
        for s in done {
            if matches!(s, warden_failover::Step::ForceNewCluster { .. }) {
                self.forced_new_clusters.inc();
            }
        }
        self.archives.inc_by(archives as u64);
    }
}

/// The defragmentation policy's figures: the last defragment's time and
/// duration, and the count by result. Clones share their values.
#[derive(Debug, Clone, Default)]
pub(crate) struct DefragMetrics {
    last_at: Gauge,
    last_duration: Gauge<f64, std::sync::atomic::AtomicU64>,
    runs: Family<ResultLabel, Counter>,
}

impl DefragMetrics {
    /// A defragment started at `at` (Unix seconds) took `took`.
    pub(crate) fn ran(&self, at: i64, took: Duration, ok: bool) {
        self.last_at.set(at);
        self.last_duration.set(took.as_secs_f64());
        let result = if ok { "success" } else { "failure" };
        self.runs.get_or_create(&ResultLabel { result }).inc();
    }
}

/// The content type of [`Metrics::render`].
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

const ROLES: [&str; 4] = ["none", "learner", "follower", "leader"];

const FAILOVER_STATES: [(WardenState, &str); 5] = [
    (WardenState::Member, "member"),
    (WardenState::Standalone, "standalone"),
    (WardenState::Recovering, "recovering"),
    (WardenState::Rejoining, "rejoining"),
    (WardenState::Stopped, "stopped"),
];

/// The role of the local member, as last observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// etcd is not running or did not answer.
    None,
    /// A learner.
    Learner,
    /// A voting follower.
    Follower,
    /// The leader.
    Leader,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabel {
    role: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActionLabel {
    action: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EtcdVersionLabel {
    version: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlarmLabel {
    alarm: &'static str,
}

/// The alarms etcd raises (etcdserverpb.AlarmType).
const ALARMS: [&str; 2] = ["NOSPACE", "CORRUPT"];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: &'static str,
}

type HistogramFamily = Family<ActionLabel, Histogram, fn() -> Histogram>;

fn action_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The daemon's metrics.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    // The role and failover state are kept as one value each and written
    // into their one-hot families when rendered, so that a scrape never sees
    // two roles at 1.
    role_now: AtomicI64,
    failover_now: AtomicI64,
    role: Family<RoleLabel, Gauge>,
    failover_state: Family<StateLabel, Gauge>,
    quorum: Gauge,
    etcd_up: Gauge,
    leader_changes: Counter,
    restarts: Counter,
    unexpected_exits: Counter,
    probe_failures: Counter,
    hangs: Counter,
    hung: Gauge,
    report_cycles: Family<ResultLabel, Counter>,
    report_skipped: Counter,
    report_last_success: Gauge,
    actions: HistogramFamily,
    exec: ExecCounters,
    db_size: Gauge,
    db_size_in_use: Gauge,
    etcd_version: Family<EtcdVersionLabel, Gauge>,
    alarms: Family<AlarmLabel, Gauge>,
    defrag: DefragMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All metrics at zero (the role `none`, no failover state).
    pub(crate) fn new() -> Self {
        let mut m = Self::unregistered();
        let mut r = Registry::default();
        // Registered in this order, which is the order they are rendered in.
        // Help texts are given without their final period: the library adds it.
        m.register_member(&mut r);
        m.register_supervision(&mut r);
        m.register_report(&mut r);
        m.register_actions(&mut r);
        m.register_failover(&mut r);
        m.register_etcd(&mut r);
        m.register_defrag(&mut r);
        m.registry = r;
        m
    }

    /// Every metric at zero, none registered yet.
    fn unregistered() -> Self {
        Metrics {
            registry: Registry::default(),
            role_now: AtomicI64::new(Role::None as i64),
            failover_now: AtomicI64::new(-1),
            role: Family::default(),
            failover_state: Family::default(),
            quorum: Gauge::default(),
            etcd_up: Gauge::default(),
            leader_changes: Counter::default(),
            restarts: Counter::default(),
            unexpected_exits: Counter::default(),
            probe_failures: Counter::default(),
            hangs: Counter::default(),
            hung: Gauge::default(),
            report_cycles: Family::default(),
            report_skipped: Counter::default(),
            report_last_success: Gauge::default(),
            actions: Family::new_with_constructor(action_histogram),
            exec: ExecCounters::default(),
            db_size: Gauge::default(),
            db_size_in_use: Gauge::default(),
            etcd_version: Family::default(),
            alarms: Family::default(),
            defrag: DefragMetrics::default(),
        }
    }

    /// What the probes observe of the local member: its role, quorum,
    /// whether it answers, and leader changes.
    fn register_member(&self, r: &mut Registry) {
        for name in ROLES {
            let _ = self.role.get_or_create(&RoleLabel { role: name });
        }
        r.register(
            "etcd_warden_member_role",
            "Role of the local etcd member (1 for the current role)",
            self.role.clone(),
        );
        r.register(
            "etcd_warden_quorum",
            "1 if the last probe's linearizable read succeeded",
            self.quorum.clone(),
        );
        r.register(
            "etcd_warden_etcd_up",
            "1 if the last probe got a Status answer from the local member",
            self.etcd_up.clone(),
        );
        r.register(
            "etcd_warden_leader_changes",
            "Leader changes observed by the probes",
            self.leader_changes.clone(),
        );
    }

    /// The supervision of etcd: restarts, exits, failed probes, hangs.
    fn register_supervision(&self, r: &mut Registry) {
        r.register(
            "etcd_warden_supervision_restarts",
            "Times the daemon restarted an etcd that had died (autostart only)",
            self.restarts.clone(),
        );
        r.register(
            "etcd_warden_etcd_unexpected_exits",
            "Times etcd exited without being asked to",
            self.unexpected_exits.clone(),
        );
        r.register(
            "etcd_warden_probe_failures",
            "Probes of the local member that failed or timed out",
            self.probe_failures.clone(),
        );
        r.register(
            "etcd_warden_etcd_hangs",
            "Times etcd, its process still there, went without answering for timeouts.hung_after_ms",
            self.hangs.clone(),
        );
        r.register(
            "etcd_warden_etcd_hung",
            "1 while etcd's process exists but has not answered for timeouts.hung_after_ms",
            self.hung.clone(),
        );
    }

    /// The report writer's cycles.
    fn register_report(&self, r: &mut Registry) {
        for result in ["success", "failure"] {
            let _ = self.report_cycles.get_or_create(&ResultLabel { result });
        }
        r.register(
            "etcd_warden_report_cycles",
            "Report cycles of the daemon's writer ([report] path), by result",
            self.report_cycles.clone(),
        );
        r.register(
            "etcd_warden_report_cycles_skipped",
            "Report ticks skipped because the previous cycle was still running",
            self.report_skipped.clone(),
        );
        r.register(
            "etcd_warden_report_last_success_timestamp_seconds",
            "Unix time of the last report the daemon wrote (0: none yet)",
            self.report_last_success.clone(),
        );
    }

    /// The OCF actions' latency, and the daemon's version.
    fn register_actions(&self, r: &mut Registry) {
        for (_, action) in ACTIONS {
            let _ = self.actions.get_or_create(&ActionLabel { action });
        }
        r.register(
            "etcd_warden_action_duration_seconds",
            "Time to answer an OCF action",
            self.actions.clone(),
        );
        // An OpenMetrics info: the sample is `etcd_warden_build_info`.
        r.register(
            "etcd_warden_build",
            "The running daemon's version",
            Info::new(VersionLabel {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
    }

    /// The failover logic's state, and what its passes carried out.
    fn register_failover(&self, r: &mut Registry) {
        for (_, state) in FAILOVER_STATES {
            let _ = self.failover_state.get_or_create(&StateLabel { state });
        }
        r.register(
            "etcd_warden_failover_state",
            "What the failover logic is doing on this node (1 for the current state; all 0 without failover)",
            self.failover_state.clone(),
        );
        r.register(
            "etcd_warden_forced_new_cluster",
            "Times this node restarted etcd as a new one-member cluster (--force-new-cluster)",
            self.exec.forced_new_clusters.clone(),
        );
        r.register(
            "etcd_warden_archives",
            "Member directories this daemon moved into the archive directory",
            self.exec.archives.clone(),
        );
    }

    /// What the local member's Status says: database size, version, alarms.
    fn register_etcd(&self, r: &mut Registry) {
        r.register(
            "etcd_warden_etcd_db_size_bytes",
            "Size of the local member's backend database, from its last Status answer",
            self.db_size.clone(),
        );
        r.register(
            "etcd_warden_etcd_db_size_in_use_bytes",
            "Bytes of the local member's backend in use (a defragment gives back the rest)",
            self.db_size_in_use.clone(),
        );
        r.register(
            "etcd_warden_etcd_version",
            "The local member's etcd version (1 for the version of its last Status answer)",
            self.etcd_version.clone(),
        );
        for alarm in ALARMS {
            let _ = self.alarms.get_or_create(&AlarmLabel { alarm });
        }
        r.register(
            "etcd_warden_etcd_alarm",
            "1 while etcd reports this alarm (NOSPACE: writes refused until compaction, defragment and `etcd-warden etcdctl alarm disarm`)",
            self.alarms.clone(),
        );
    }

    /// The defragmentation policy's runs.
    fn register_defrag(&self, r: &mut Registry) {
        let defrag = &self.defrag;
        for result in ["success", "failure"] {
            let _ = defrag.runs.get_or_create(&ResultLabel { result });
        }
        r.register(
            "etcd_warden_defrag_last_timestamp_seconds",
            "When the local member's last defragment started (Unix time; 0: none since the daemon started)",
            defrag.last_at.clone(),
        );
        r.register(
            "etcd_warden_defrag_last_duration_seconds",
            "How long the local member's last defragment took (its reads and writes wait meanwhile)",
            defrag.last_duration.clone(),
        );
        r.register(
            "etcd_warden_defrags",
            "Defragments of the local member by this daemon, by result",
            defrag.runs.clone(),
        );
    }

    /// Record the last observation of the local member.
    pub(crate) fn observe(&self, role: Role, quorum: bool, etcd_up: bool) {
        self.role_now.store(role as i64, Ordering::Relaxed);
        self.quorum.set(i64::from(quorum));
        self.etcd_up.set(i64::from(etcd_up));
    }

    /// What the local member's last Status answer said of its database,
    /// version and alarms.
    pub(crate) fn observe_etcd(&self, st: &crate::etcd::MemberStatus) {
        self.db_size.set(st.db_size);
        self.db_size_in_use.set(st.db_size_in_use);
        // One version only: an upgraded member's old version disappears.
        let current = EtcdVersionLabel {
            version: st.version.clone(),
        };
        if self.etcd_version.get(&current).is_none() {
            self.etcd_version.clear();
        }
        self.etcd_version.get_or_create(&current).set(1);
        let active = st.alarms();
        for alarm in ALARMS {
            self.alarms
                .get_or_create(&AlarmLabel { alarm })
                .set(i64::from(active.iter().any(|a| a == alarm)));
        }
    }

    /// The counters the failover reconciler adds to (shared: the
    /// reconciler does not depend on the rest of the metrics).
    pub(crate) fn exec_counters(&self) -> ExecCounters {
        self.exec.clone()
    }

    /// The figures the defragmentation policy adds to.
    pub(crate) fn defrag(&self) -> DefragMetrics {
        self.defrag.clone()
    }

    /// The failover logic's current state on this node.
    pub(crate) fn failover_state(&self, state: WardenState) {
        let i = FAILOVER_STATES
            .iter()
            .position(|(s, _)| *s == state)
            .map_or(-1, |i| i as i64);
        self.failover_now.store(i, Ordering::Relaxed);
    }

    /// A leader change was observed.
    pub(crate) fn leader_changed(&self) {
        self.leader_changes.inc();
    }

    /// The daemon restarted etcd after it died.
    pub(crate) fn restarted(&self) {
        self.restarts.inc();
    }

    /// etcd exited without being asked to.
    pub(crate) fn unexpected_exit(&self) {
        self.unexpected_exits.inc();
    }

    /// etcd became hung.
    pub(crate) fn etcd_hung(&self) {
        self.hangs.inc();
        self.hung.set(1);
    }

    /// Whether the last probe found etcd hung.
    pub(crate) fn observe_hung(&self, hung: bool) {
        self.hung.set(i64::from(hung));
    }

    /// A probe failed.
    pub(crate) fn probe_failed(&self) {
        self.probe_failures.inc();
    }

    /// A report cycle wrote the report; `at` is the Unix time (seconds).
    pub(crate) fn report_written(&self, at: i64) {
        self.report_cycles
            .get_or_create(&ResultLabel { result: "success" })
            .inc();
        self.report_last_success.set(at);
    }

    /// A report cycle failed (the previous report was left as it was).
    pub(crate) fn report_failed(&self) {
        self.report_cycles
            .get_or_create(&ResultLabel { result: "failure" })
            .inc();
    }

    /// A report tick came while the previous cycle still ran.
    pub(crate) fn report_skipped(&self) {
        self.report_skipped.inc();
    }

    /// An action took `took`.
    pub(crate) fn action(&self, action: Action, took: Duration) {
        let Some((_, name)) = ACTIONS.iter().find(|(a, _)| *a == action) else {
            return;
        };
        self.actions
            .get_or_create(&ActionLabel { action: name })
            .observe(took.as_secs_f64());
    }

    /// The OpenMetrics text exposition ([`CONTENT_TYPE`]).
    pub(crate) fn render(&self) -> String {
        let role = self.role_now.load(Ordering::Relaxed);
        for (i, name) in ROLES.iter().enumerate() {
            self.role
                .get_or_create(&RoleLabel { role: name })
                .set(i64::from(role == i as i64));
        }
        let state = self.failover_now.load(Ordering::Relaxed);
        for (i, (_, name)) in FAILOVER_STATES.iter().enumerate() {
            self.failover_state
                .get_or_create(&StateLabel { state: name })
                .set(i64::from(state == i as i64));
        }
        let mut o = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut o, &self.registry) {
            // Writing into a String does not fail; should the encoder ever
            // refuse a value, the scrape still gets what was written.
            tracing::warn!(error = %e, "cannot render the metrics");
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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
        assert!(
            t.contains(
                "etcd_warden_action_duration_seconds_bucket{le=\"0.0025\",action=\"monitor\"} 0"
            ),
            "{t}"
        );
        assert!(t.contains(
            "etcd_warden_action_duration_seconds_bucket{le=\"0.005\",action=\"monitor\"} 1"
        ));
        assert!(t.contains("etcd_warden_action_duration_seconds_count{action=\"monitor\"} 1"));
        assert!(t.contains("etcd_warden_report_cycles_total{result=\"success\"} 0"));
        assert!(t.contains("etcd_warden_report_last_success_timestamp_seconds 0"));
        assert!(t.ends_with("# EOF\n"), "{t}");
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

    #[test]
    fn build_info_and_failover_state() {
        let m = Metrics::default();
        let t = m.render();
        assert!(
            t.contains(&format!(
                "etcd_warden_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{t}"
        );
        assert!(t.contains("# TYPE etcd_warden_build info"), "{t}");
        assert!(!t.contains("etcd_warden_failover_state{state=\"member\"} 1"));
        m.failover_state(WardenState::Rejoining);
        let t = m.render();
        assert!(
            t.contains("etcd_warden_failover_state{state=\"rejoining\"} 1"),
            "{t}"
        );
        assert!(
            t.contains("etcd_warden_failover_state{state=\"member\"} 0"),
            "{t}"
        );
    }

    /// One sample family as a scraper sees it: type, help, and each
    /// sample's name with its label keys (values aside from `le`, whose
    /// values are parsed as numbers).
    #[derive(Debug, PartialEq)]
    struct Family {
        kind: String,
        help: String,
        samples: Vec<(String, Vec<String>)>,
    }

    /// Parse an exposition into families keyed by the name their samples
    /// are matched under: a classic text counter `x_total` and an
    /// OpenMetrics counter family `x` with samples `x_total` are both keyed
    /// `x_total`, which is what a query names.
    fn families(text: &str) -> BTreeMap<String, Family> {
        let mut out: BTreeMap<String, Family> = BTreeMap::new();
        let mut help: BTreeMap<String, String> = BTreeMap::new();
        let mut kinds: BTreeMap<String, String> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (n, h) = rest.split_once(' ').unwrap();
                help.insert(n.into(), h.into());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (n, k) = rest.split_once(' ').unwrap();
                kinds.insert(n.into(), k.into());
            } else if line.starts_with('#') || line.is_empty() {
                continue;
            } else {
                let name_end = line.find(['{', ' ']).unwrap();
                let sample = &line[..name_end];
                let mut labels: Vec<String> = match line[name_end..].strip_prefix('{') {
                    Some(l) => l[..l.find('}').unwrap()]
                        .split(',')
                        .map(|kv| {
                            let (k, v) = kv.split_once('=').unwrap();
                            let v = v.trim_matches('"');
                            if k == "le" && v != "+Inf" {
                                format!("le={}", v.parse::<f64>().unwrap())
                            } else {
                                format!("{k}={v}")
                            }
                        })
                        .collect(),
                    None => vec![],
                };
                labels.sort();
                // The family a sample belongs to: the longest TYPE name it
                // starts with.
                let fam = kinds
                    .keys()
                    .filter(|k| sample.starts_with(k.as_str()))
                    .max_by_key(|k| k.len())
                    .unwrap()
                    .clone();
                let kind = kinds[&fam].clone();
                let key = if kind == "counter" {
                    sample.to_string()
                } else {
                    fam.clone()
                };
                let e = out.entry(key).or_insert_with(|| Family {
                    kind,
                    help: help[&fam].clone(),
                    samples: vec![],
                });
                e.samples.push((sample.into(), labels));
            }
        }
        for f in out.values_mut() {
            f.samples.sort();
        }
        out
    }

    #[test]
    fn etcd_db_version_alarms_and_counters() {
        let m = Metrics::new();
        let mut st = crate::etcd::MemberStatus {
            member_id: 1,
            leader: 1,
            raft_term: 2,
            raft_index: 3,
            is_learner: false,
            revision: 4,
            cluster_id: 5,
            version: "3.5.17".into(),
            db_size: 4096,
            db_size_in_use: 1024,
            errors: vec!["memberID:1 alarm:NOSPACE ".into()],
        };
        m.observe_etcd(&st);
        // The reconciler's clone of the counters adds to the same values.
        m.exec_counters()
            .executed(&[warden_failover::Step::ForceNewCluster { epoch: 2 }], 2);
        let text = m.render();
        for line in [
            "etcd_warden_etcd_db_size_bytes 4096",
            "etcd_warden_etcd_db_size_in_use_bytes 1024",
            "etcd_warden_etcd_version{version=\"3.5.17\"} 1",
            "etcd_warden_etcd_alarm{alarm=\"NOSPACE\"} 1",
            "etcd_warden_etcd_alarm{alarm=\"CORRUPT\"} 0",
            "etcd_warden_forced_new_cluster_total 1",
            "etcd_warden_archives_total 2",
        ] {
            assert!(text.contains(line), "{line} missing in:\n{text}");
        }
        st.version = "3.5.18".into();
        st.errors.clear();
        m.observe_etcd(&st);
        let text = m.render();
        assert!(!text.contains("3.5.17"), "{text}");
        assert!(
            text.contains("etcd_warden_etcd_alarm{alarm=\"NOSPACE\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn the_last_defragment_and_the_count_by_result() {
        let m = Metrics::default();
        let text = m.render();
        assert!(
            text.contains("etcd_warden_defrag_last_timestamp_seconds 0\n"),
            "{text}"
        );
        assert!(
            text.contains("etcd_warden_defrags_total{result=\"success\"} 0"),
            "{text}"
        );
        m.defrag()
            .ran(1_796_040_000, Duration::from_millis(1250), true);
        m.defrag()
            .ran(1_796_040_100, Duration::from_millis(500), false);
        let text = m.render();
        assert!(
            text.contains("etcd_warden_defrag_last_timestamp_seconds 1796040100\n"),
            "{text}"
        );
        assert!(
            text.contains("etcd_warden_defrag_last_duration_seconds 0.5\n"),
            "{text}"
        );
        assert!(
            text.contains("etcd_warden_defrags_total{result=\"success\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("etcd_warden_defrags_total{result=\"failure\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn names_types_labels_and_help_are_the_ones_dashboards_use() {
        let before = families(include_str!("../tests/fixtures/metrics-before.prom"));
        let mut now = families(&Metrics::default().render());
        for added in [
            "etcd_warden_build",
            "etcd_warden_failover_state",
            // Counters are keyed by their samples' names.
            "etcd_warden_forced_new_cluster_total",
            "etcd_warden_archives_total",
            "etcd_warden_etcd_db_size_bytes",
            "etcd_warden_etcd_db_size_in_use_bytes",
            "etcd_warden_etcd_alarm",
            "etcd_warden_defrag_last_timestamp_seconds",
            "etcd_warden_defrag_last_duration_seconds",
            "etcd_warden_defrags_total",
            "etcd_warden_etcd_hangs_total",
            "etcd_warden_etcd_hung",
        ] {
            assert!(now.remove(added).is_some(), "{added} missing");
        }
        assert_eq!(
            before.keys().collect::<Vec<_>>(),
            now.keys().collect::<Vec<_>>()
        );
        for (name, b) in &before {
            assert_eq!(Some(b), now.get(name), "{name}");
        }
    }
}
