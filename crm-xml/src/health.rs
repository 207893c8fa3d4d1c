//! The operator-side health check of a report: Healthy, Warning or Degraded
//! with one finding per problem. It finds what OpenShift's
//! cluster-etcd-operator degrades on and also what that check misses (quorum,
//! fencing disabled, recent failed fences and actions, a learner never
//! promoted). Staleness is computed from
//! the report's own `lastUpdated`, so restarting the checker cannot hide it.

use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;

use crate::report::{
    ClusterStatus, Condition, ConditionStatus, EtcdMember, EtcdRole, EtcdSection, NodeStatus,
    PacemakerSection, PmFailedAction, PmFenceEvent, Profile, Report,
};
use crate::timefmt::parse_k8s;
use Severity::{Degraded, Warning};

/// The overall verdict. Ordered: a worse verdict compares greater.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Verdict {
    /// Nothing to report.
    Healthy,
    /// Something an operator should look at.
    Warning,
    /// The cluster cannot be trusted to survive a failure.
    Degraded,
    /// The report could not be read.
    Unknown,
}

impl Verdict {
    /// The state word of the text's first line: `HEALTHY`, `WARNING`,
    /// `DEGRADED` or `UNKNOWN` (the monitoring plugin's OK, WARNING,
    /// CRITICAL and UNKNOWN, by the same exit codes).
    pub fn label(self) -> &'static str {
        match self {
            Self::Healthy => "HEALTHY",
            Self::Warning => "WARNING",
            Self::Degraded => "DEGRADED",
            Self::Unknown => "UNKNOWN",
        }
    }

    /// Process exit code: 0 healthy, 1 warning, 2 degraded, 3 unknown.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Healthy => 0,
            Self::Warning => 1,
            Self::Degraded => 2,
            Self::Unknown => 3,
        }
    }
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Severity {
    /// Worth a look.
    Warning,
    /// Degrades the cluster.
    Degraded,
}

/// One problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How bad.
    pub severity: Severity,
    /// Stable machine-readable code, e.g. `NodeOffline` (never derived from
    /// the message text, so rewording a message cannot change it).
    pub code: &'static str,
    /// What is wrong, for humans.
    pub message: String,
}

/// The evaluation of one report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evaluation {
    /// Worst severity, or Healthy.
    pub verdict: Verdict,
    /// The report's `lastUpdated`.
    pub last_updated: String,
    /// Seconds between `lastUpdated` and the evaluation time (negative if the
    /// report is from the future).
    pub age_seconds: i64,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// The counts the first text line carries as performance data (not
    /// part of the JSON).
    #[serde(skip)]
    pub perfdata: Perfdata,
}

/// The measurements of a report that monitoring graphs: the first text
/// line's performance data.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Perfdata {
    /// The staleness limit (seconds): past it the report degrades.
    pub stale_after: u64,
    /// Pacemaker member nodes.
    pub nodes: usize,
    /// Of which online.
    pub nodes_online: usize,
    /// etcd voters and learners, when the report has an etcd section.
    pub etcd_members: Option<(usize, usize)>,
}

impl Perfdata {
    fn of(report: &Report, th: &Thresholds) -> Self {
        let members = || report.pacemaker.nodes.iter().filter(|n| n.kind == "member");
        Self {
            stale_after: th.stale_after.as_secs(),
            nodes: members().count(),
            nodes_online: members().filter(|n| n.online).count(),
            etcd_members: report.etcd.as_ref().map(|e| {
                let learners = e
                    .members
                    .iter()
                    .filter(|m| m.role == EtcdRole::Learner)
                    .count();
                (e.members.len() - learners, learners)
            }),
        }
    }
}

/// Thresholds.
#[derive(Debug, Clone)]
pub struct Thresholds {
    /// A report older than this is stale (degrades).
    pub stale_after: Duration,
    /// Failed fences within this window are reported.
    pub failed_fence_window: Duration,
    /// Failed actions within this window are reported.
    pub failed_action_window: Duration,
    /// A learner not promoted within this is reported.
    pub learner_grace: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            stale_after: Duration::from_secs(5 * 60),
            failed_fence_window: Duration::from_secs(24 * 3600),
            failed_action_window: Duration::from_secs(5 * 60),
            learner_grace: Duration::from_secs(5 * 60),
        }
    }
}

fn cond<'a>(conds: &'a [Condition], kind: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.kind == kind)
}

fn not_true(conds: &[Condition], kind: &str) -> bool {
    cond(conds, kind).is_none_or(|c| c.status != ConditionStatus::True)
}

fn within(t: Option<&str>, now: OffsetDateTime, window: Duration) -> bool {
    // A time slightly in the future (clock skew between hosts) counts as recent.
    t.and_then(parse_k8s).is_some_and(|t| now - t <= window)
}

/// A report built under another profile than the one its reader expects:
/// its shape follows other rules (under `openshift` nodes with names the CRD
/// refuses are left out of the status and kubelet is judged everywhere;
/// under `generic` neither), so judging it would answer another question.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the report was built with the {found} profile, not {expected}")]
pub struct ProfileMismatch {
    /// The profile asked for.
    pub expected: Profile,
    /// The profile the report records.
    pub found: Profile,
}

/// Evaluate a report that must have been built under `profile` (see
/// [`evaluate`]); a report built under another profile is refused.
pub fn evaluate_as(
    report: &Report,
    profile: Profile,
    now: OffsetDateTime,
    th: &Thresholds,
) -> Result<Evaluation, ProfileMismatch> {
    if report.profile != profile {
        return Err(ProfileMismatch {
            expected: profile,
            found: report.profile,
        });
    }
    Ok(evaluate(report, now, th))
}

/// Evaluate a report at time `now`, by the rules of the profile it was
/// built with: the profile decides what the report holds (which nodes,
/// which resources), and every finding below follows from what it holds.
pub fn evaluate(report: &Report, now: OffsetDateTime, th: &Thresholds) -> Evaluation {
    let status = &report.status;
    let last = parse_k8s(&status.last_updated);
    let age_seconds = last.map_or(i64::MAX, |t| (now - t).whole_seconds());
    let mut f = Findings::default();
    f.freshness(status, last, age_seconds, now, th);
    // The conditions, the node count, the nodes and their resources.
    f.cluster_conditions(report);
    for n in &status.nodes {
        f.node(n);
    }
    // Beyond the conditions: quorum, fencing, recent failures and learners,
    // which a check of the conditions alone never sees.
    f.pacemaker(&report.pacemaker, now, th);
    if let Some(etcd) = &report.etcd {
        f.etcd(etcd, now, th);
    }
    let mut findings = f.0;
    findings.sort_by_key(|x| std::cmp::Reverse(x.severity));
    Evaluation {
        verdict: verdict_of(&findings),
        last_updated: status.last_updated.clone(),
        age_seconds,
        findings,
        perfdata: Perfdata::of(report, th),
    }
}

/// The worst finding decides the verdict (`findings` sorted worst first).
fn verdict_of(findings: &[Finding]) -> Verdict {
    match findings.first().map(|x| x.severity) {
        None => Verdict::Healthy,
        Some(Severity::Warning) => Verdict::Warning,
        Some(Severity::Degraded) => Verdict::Degraded,
    }
}

/// The findings of one evaluation, in the order they are found.
#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn push(&mut self, severity: Severity, code: &'static str, message: String) {
        self.0.push(Finding {
            severity,
            code,
            message,
        });
    }

    /// Whether the report is recent enough to judge the cluster by.
    fn freshness(
        &mut self,
        status: &ClusterStatus,
        last: Option<OffsetDateTime>,
        age_seconds: i64,
        now: OffsetDateTime,
        th: &Thresholds,
    ) {
        match last {
            None => self.push(
                Degraded,
                "StatusUnreadable",
                format!("lastUpdated {:?} is not a time", status.last_updated),
            ),
            Some(t) if now - t > th.stale_after => self.push(
                Degraded,
                "StatusStale",
                format!(
                    "report is stale: last updated {} ({}s ago, limit {}s)",
                    status.last_updated,
                    age_seconds,
                    th.stale_after.as_secs()
                ),
            ),
            Some(_) => {}
        }
    }

    /// The cluster's own conditions, its node count and the nodes the
    /// report left out.
    fn cluster_conditions(&mut self, report: &Report) {
        let status = &report.status;
        if status.conditions.is_empty() {
            self.push(
                Degraded,
                "NoConditions",
                "report has no cluster conditions".into(),
            );
        }
        self.node_count(&status.conditions);
        if not_true(&status.conditions, "InService") {
            self.push(
                Degraded,
                "ClusterInMaintenance",
                "cluster is in maintenance mode".into(),
            );
        }
        if status.nodes.is_empty() {
            self.push(Degraded, "NoNodes", "report lists no nodes".into());
        }
        for o in &report.pacemaker.omitted_nodes {
            self.push(
                Degraded,
                "NodeNotReported",
                format!("node {} is not in the status: {}", o.name, o.reason),
            );
        }
    }

    fn node_count(&mut self, conditions: &[Condition]) {
        match cond(conditions, "NodeCountAsExpected") {
            Some(c) if c.status != ConditionStatus::True => self.push(
                Degraded,
                "NodeCount",
                format!("{}: {}", c.reason, c.message),
            ),
            Some(_) => {}
            None => self.push(
                Degraded,
                "NodeCount",
                "NodeCountAsExpected condition missing".into(),
            ),
        }
    }

    /// One node: online, then its conditions, fencing and resources.
    fn node(&mut self, n: &NodeStatus) {
        let name = &n.node_name;
        if not_true(&n.conditions, "Online") {
            self.push(Degraded, "NodeOffline", format!("node {name} is offline"));
            // The rest follows from being offline.
            return;
        }
        self.node_conditions(n);
        if !not_true(&n.conditions, "FencingAvailable") && not_true(&n.conditions, "FencingHealthy")
        {
            self.push(
                Warning,
                "FencingAtRisk",
                format!(
                    "node {name}: fencing at risk (a device runs but not every device is healthy)"
                ),
            );
        }
        if not_true(&n.conditions, "Ready") {
            self.push(Warning, "NodePending", format!("node {name} is pending"));
        }
        self.node_resources(n);
    }

    fn node_conditions(&mut self, n: &NodeStatus) {
        let name = &n.node_name;
        for (kind, code, what) in [
            ("InService", "NodeInMaintenance", "is in maintenance mode"),
            ("Active", "NodeStandby", "is in standby mode"),
            (
                "Clean",
                "NodeUnclean",
                "is unclean (fencing/communication issue)",
            ),
            ("Member", "NodeNotMember", "is not a cluster member"),
            (
                "FencingAvailable",
                "FencingUnavailable",
                "has no running fence device",
            ),
        ] {
            if not_true(&n.conditions, kind) {
                let detail = cond(&n.conditions, kind)
                    .map(|c| c.message.as_str())
                    .unwrap_or("condition missing");
                self.push(Degraded, code, format!("node {name} {what} ({detail})"));
            }
        }
    }

    fn node_resources(&mut self, n: &NodeStatus) {
        let name = &n.node_name;
        for r in &n.resources {
            let why = match r.state() {
                "healthy" => continue,
                "failed" => "has failed".to_string(),
                state => format!("is {state}"),
            };
            self.push(
                Degraded,
                "ResourceUnhealthy",
                format!("node {name}: {:?} {why}", r.name),
            );
        }
    }

    /// Quorum, fencing and recent failures as Pacemaker reports them.
    fn pacemaker(&mut self, pm: &PacemakerSection, now: OffsetDateTime, th: &Thresholds) {
        if !pm.quorate {
            self.push(
                Degraded,
                "NoQuorum",
                "the reporting partition has no quorum".into(),
            );
        }
        if !pm.fencing_enabled {
            self.push(Degraded, "FencingDisabled", "fencing is disabled (stonith-enabled/fencing-enabled=false): a lost node is assumed down, which risks split brain".into());
        }
        for e in &pm.fence_history {
            self.fence_event(e, now, th);
        }
        for a in &pm.failed_actions {
            self.failed_action(a, now, th);
        }
    }

    fn fence_event(&mut self, e: &PmFenceEvent, now: OffsetDateTime, th: &Thresholds) {
        match e.status.as_str() {
            "failed" if within(e.completed.as_deref(), now, th.failed_fence_window) => self.push(
                Warning,
                "FenceFailed",
                format!(
                    "fencing ({}) of {} failed at {}{}",
                    e.action,
                    e.target,
                    e.completed.as_deref().unwrap_or("?"),
                    e.exit_reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            ),
            "pending" => self.push(
                Warning,
                "FencePending",
                format!("fencing ({}) of {} is in progress", e.action, e.target),
            ),
            _ => {}
        }
    }

    fn failed_action(&mut self, a: &PmFailedAction, now: OffsetDateTime, th: &Thresholds) {
        if !within(a.last_rc_change.as_deref(), now, th.failed_action_window) {
            return;
        }
        self.push(
            Warning,
            "FailedAction",
            format!(
                "{} {} failed on {} at {} (rc {}{})",
                a.resource,
                a.operation,
                a.node,
                a.last_rc_change.as_deref().unwrap_or("?"),
                a.rc.map_or_else(|| "?".into(), |r| r.to_string()),
                a.rc_text
                    .as_deref()
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default()
            ),
        );
    }

    /// Learners, the leader, alarms and daemons that wait for an operator.
    fn etcd(&mut self, etcd: &EtcdSection, now: OffsetDateTime, th: &Thresholds) {
        for m in &etcd.members {
            if m.role == EtcdRole::Learner {
                self.learner(m, now, th);
            }
        }
        if etcd.leader.is_none() && !etcd.members.is_empty() {
            self.push(Degraded, "EtcdNoLeader", "etcd reports no leader".into());
        }
        self.alarms(etcd);
        self.needs_operator(etcd);
    }

    fn learner(&mut self, m: &EtcdMember, now: OffsetDateTime, th: &Thresholds) {
        let since = m.learner_since.as_deref().and_then(parse_k8s);
        match since {
            Some(s) if now - s > th.learner_grace => self.push(
                Degraded,
                "LearnerNotPromoted",
                format!(
                    "etcd member {} ({}) has been a learner since {} ({}s)",
                    m.name,
                    m.id,
                    m.learner_since.as_deref().unwrap_or("?"),
                    (now - s).whole_seconds()
                ),
            ),
            Some(_) => {}
            None => self.push(
                Warning,
                "Learner",
                format!("etcd member {} ({}) is a learner", m.name, m.id),
            ),
        }
    }

    /// etcd's alarms hold for the whole cluster: NOSPACE refuses every
    /// write, CORRUPT means a member's data differs from its peers'.
    fn alarms(&mut self, etcd: &EtcdSection) {
        let mut alarms: Vec<&str> = etcd
            .nodes
            .values()
            .filter_map(|st| st.db.as_ref())
            .flat_map(|db| db.alarms.iter().map(String::as_str))
            .collect();
        alarms.sort_unstable();
        alarms.dedup();
        for alarm in alarms {
            self.push(Degraded, "EtcdAlarm", alarm_message(alarm));
        }
    }

    /// A daemon that refuses to go on by itself (no automatic answer is
    /// safe) needs a person: say why and what to run.
    fn needs_operator(&mut self, etcd: &EtcdSection) {
        for (node, st) in &etcd.nodes {
            if let Some(cmd) = &st.resolve_command {
                self.push(
                    Degraded,
                    "NeedsOperator",
                    format!(
                        "etcd-warden on {node} will not go on by itself: {}; resolve with: {cmd}",
                        st.reason.as_deref().unwrap_or("no reason recorded")
                    ),
                );
            }
        }
    }
}

/// What an active etcd alarm means and how to clear it.
pub fn alarm_message(alarm: &str) -> String {
    match alarm {
        "NOSPACE" => "etcd raised the NOSPACE alarm: the database reached its quota and every write is refused; compact the history (`etcd-warden etcdctl compact <revision>`), defragment each member one at a time (`etcd-warden defrag` on each node, or `etcd-warden etcdctl defrag`), then clear the alarm with `etcd-warden etcdctl alarm disarm`".into(),
        "CORRUPT" => "etcd raised the CORRUPT alarm: a member's data differs from its peers'; find the member with `etcd-warden etcdctl endpoint hashkv --cluster`, replace its data from a healthy member (see docs/operations.md), then clear the alarm with `etcd-warden etcdctl alarm disarm`".into(),
        other => format!("etcd raised the {other} alarm; clear its cause, then `etcd-warden etcdctl alarm disarm`"),
    }
}

/// Render an evaluation as text in the monitoring-plugin convention: a
/// first line `STATE - finding | perfdata` (the most severe finding, and
/// how many more), then one line per finding. STATE is the verdict's
/// [`Verdict::label`], whose exit code is the plugin's OK, WARNING,
/// CRITICAL or UNKNOWN.
pub fn to_text(e: &Evaluation) -> String {
    let summary = match e.findings.as_slice() {
        [] => format!(
            "report updated {}, {}s ago, no finding",
            e.last_updated, e.age_seconds
        ),
        [only] => only.message.clone(),
        [first, rest @ ..] => format!("{} (and {} more)", first.message, rest.len()),
    };
    let mut s = format!(
        "{} - {} | {}\n",
        e.verdict.label(),
        summary.replace('|', "/"),
        perfdata(e)
    );
    for f in &e.findings {
        s.push_str(&format!("{:?}: {}: {}\n", f.severity, f.code, f.message));
    }
    s
}

/// The performance data: `label=value[unit];warn;crit;min;max` each.
fn perfdata(e: &Evaluation) -> String {
    let p = &e.perfdata;
    let mut v = vec![
        format!("age={}s;;{}", e.age_seconds, p.stale_after),
        format!("nodes_online={};;;0;{}", p.nodes_online, p.nodes),
    ];
    if let Some((voters, learners)) = p.etcd_members {
        v.push(format!("etcd_voters={voters};;;0"));
        v.push(format!("etcd_learners={learners};;;0"));
    }
    v.push(format!("findings={};;;0", e.findings.len()));
    v.join(" ")
}
