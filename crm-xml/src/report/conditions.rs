//! How the report judges what crm_mon shows: which agents are which, what
//! the CRD accepts as names and addresses, and the conditions of a resource
//! from where its instances run.

use std::net::IpAddr;

use super::{Condition, ConditionStatus, FencingMethod};
use crate::model::{Instance, Primitive, Role};

pub(super) fn agent_matches(patterns: &[String], agent: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => agent.starts_with(prefix),
        None => agent == p,
    })
}

/// Method of a fence agent, from its type (not its resource id).
pub(crate) fn fencing_method(agent: &str) -> Option<FencingMethod> {
    let ty = agent.rsplit(':').next().unwrap_or(agent);
    match ty {
        "fence_redfish" => Some(FencingMethod::Redfish),
        "fence_ipmilan" | "fence_ipmilanplus" | "fence_ipmitool" | "fence_idrac" | "fence_ilo3"
        | "fence_ilo4" | "fence_ilo5" | "fence_imm" => Some(FencingMethod::Ipmi),
        _ => None,
    }
}

/// The CRD's address rule: canonical, global unicast, at most 39 characters.
pub fn valid_crd_address(s: &str) -> bool {
    let Ok(ip) = s.parse::<IpAddr>() else {
        return false;
    };
    if ip.to_string() != s || s.len() > 39 {
        return false;
    }
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            let seg0 = v6.segments()[0];
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (seg0 & 0xffc0) == 0xfe80)
        }
    }
}

/// RFC 1123 subdomain, as the CRD requires of `nodeName`.
pub fn valid_node_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// `fencingAgents[].name`: 1–300 of `[a-zA-Z0-9._-]`.
pub(super) fn valid_agent_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 300
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

pub(super) struct Cond<'a> {
    pub(super) kind: &'a str,
    pub(super) ok: bool,
    pub(super) true_reason: &'a str,
    pub(super) false_reason: &'a str,
    pub(super) message: String,
}

pub(super) fn cond(c: Cond<'_>, now: &str) -> Condition {
    Condition {
        kind: c.kind.to_owned(),
        status: if c.ok {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        reason: if c.ok { c.true_reason } else { c.false_reason }.to_owned(),
        message: c.message,
        last_transition_time: now.to_owned(),
    }
}

pub(super) fn is_true(conds: &[Condition], kind: &str) -> bool {
    conds
        .iter()
        .any(|c| c.kind == kind && c.status == ConditionStatus::True)
}

/// The resource's state on one node, as the conditions see it.
pub(super) struct Placement<'a> {
    pub(super) primitive: Option<&'a Primitive>,
    pub(super) running_here: bool,
    pub(super) desc: String,
}

pub(super) fn resource_conditions(
    p: &Placement<'_>,
    in_maintenance: bool,
    now: &str,
) -> Vec<Condition> {
    let (managed, enabled, operational, active, started, schedulable, maint) = match p.primitive {
        Some(r) => (
            r.managed,
            r.target_role != Some(Role::Stopped),
            !r.failed,
            p.running_here && r.active,
            p.running_here && r.role.is_running(),
            !r.blocked,
            r.maintenance,
        ),
        None => (false, false, true, false, false, false, false),
    };
    let in_service = !(maint || in_maintenance);
    let healthy = managed && enabled && operational && active && started && schedulable;
    let d = &p.desc;
    let role = p.primitive.map_or("absent", |r| r.role.as_str());
    let mk = |kind, ok, t, f, msg: String| {
        cond(
            Cond {
                kind,
                ok,
                true_reason: t,
                false_reason: f,
                message: msg,
            },
            now,
        )
    };
    vec![
        mk(
            "Healthy",
            healthy,
            "ResourceHealthy",
            "ResourceUnhealthy",
            format!("{d}: {}", if healthy { "healthy" } else { "not healthy" }),
        ),
        mk(
            "InService",
            in_service,
            "InService",
            "InMaintenance",
            if in_service {
                format!("{d} is in service")
            } else {
                format!("{d} is in maintenance")
            },
        ),
        mk(
            "Managed",
            managed,
            "Managed",
            "Unmanaged",
            format!("{d} is {}managed", if managed { "" } else { "not " }),
        ),
        mk(
            "Enabled",
            enabled,
            "Enabled",
            "Disabled",
            format!(
                "{d} is {}",
                if enabled {
                    "enabled"
                } else {
                    "disabled or not configured"
                }
            ),
        ),
        mk(
            "Operational",
            operational,
            "Operational",
            "Failed",
            format!("{d} has {}failed", if operational { "not " } else { "" }),
        ),
        mk(
            "Active",
            active,
            "Active",
            "Inactive",
            format!("{d} is {}active here", if active { "" } else { "not " }),
        ),
        mk(
            "Started",
            started,
            "Started",
            "Stopped",
            format!(
                "{d} role here: {}",
                if p.running_here { role } else { "Stopped" }
            ),
        ),
        mk(
            "Schedulable",
            schedulable,
            "Schedulable",
            "Unschedulable",
            format!(
                "{d} is {}",
                if schedulable {
                    "schedulable"
                } else {
                    "blocked or not configured"
                }
            ),
        ),
    ]
}

/// Find the instance of a class of resources on `node`; fall back to an
/// inactive instance (so its configuration flags still show).
pub(super) fn place<'a>(
    instances: &[Instance<'a>],
    patterns: &[String],
    node: &str,
    what: &str,
) -> Placement<'a> {
    let of_class: Vec<&Instance<'a>> = instances
        .iter()
        .filter(|i| agent_matches(patterns, &i.primitive.agent))
        .collect();
    if let Some(i) = of_class
        .iter()
        .find(|i| i.primitive.nodes.iter().any(|n| n == node))
    {
        return Placement {
            primitive: Some(i.primitive),
            running_here: true,
            desc: format!("{what} ({}) on {node}", i.primitive.id),
        };
    }
    if let Some(i) = of_class
        .iter()
        .find(|i| i.primitive.nodes.is_empty())
        .or(of_class.first())
    {
        return Placement {
            primitive: Some(i.primitive),
            running_here: false,
            desc: format!("{what} ({}) on {node}", i.primitive.id),
        };
    }
    Placement {
        primitive: None,
        running_here: false,
        desc: format!(
            "{what} (no resource with agent {} configured) on {node}",
            patterns.join(" or ")
        ),
    }
}
