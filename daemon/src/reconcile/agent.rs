//! The one place the OCF agent's actions are answered. With failover, start,
//! stop, monitor and notify go through `decide` (the same function the
//! daemon's own loop uses); without it (a standalone daemon, or a monitor
//! while Pacemaker's view cannot be read) the live check of the local etcd
//! answers, mapped to an outcome by [`live_outcome`] alone.

use std::time::Duration;

use warden_api::{Action, ActionReply, ActionRequest, Outcome};

use super::Reconciler;
use super::ports::{EtcdOps, Pacemaker, Ports, Probe, Supervisor};
use crate::etcd::conf::StartMode;
use crate::supervise::ProcState;

fn reply(outcome: Outcome, reason: Option<String>) -> ActionReply {
    ActionReply { outcome, reason }
}

/// A start without failover: a plain start, or, where the state file
/// says a restore or forced restart still owes its revision step, a start
/// that holds clients off until the revision has moved on.
async fn start_normal<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
    ports: &Ports<'_, P, E, S>,
    budget: Duration,
) -> Result<(), String> {
    let paths = super::paths_for(ports.settings);
    let owed = paths
        .read_state()
        .map_err(|e| e.to_string())?
        .revision_bump_owed;
    let Some(at_risk) = owed else {
        return ports
            .supervisor
            .start(StartMode::Normal, budget)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string());
    };
    ports
        .supervisor
        .start_moving_revision(at_risk, budget)
        .await
        .map_err(|e| e.to_string())?;
    super::revision_step::clear(&paths).map_err(|e| e.to_string())
}

/// Answer one agent action within `budget`: through the failover
/// reconciler when there is one and it handles the action, through the
/// live check of the local etcd otherwise.
pub(crate) async fn action<P: Pacemaker + ?Sized, E: EtcdOps, S: Supervisor>(
    failover: Option<&Reconciler>,
    ports: &Ports<'_, P, E, S>,
    req: &ActionRequest,
    budget: Duration,
) -> ActionReply {
    // Boxed: the reconciler's future holds a whole pass (gather, decide,
    // every step) and is many times larger than the live check below.
    // Inline, every action's future carried that size even without
    // failover, and each layer that moves the future (the owned task, its
    // cancellation wrapper, the task cell) copied it: the monitor's round
    // trip spent more time in memcpy than in routing.
    if let Some(f) = failover
        && let Some(r) = Box::pin(f.action(ports, req, budget)).await
    {
        return r;
    }
    let settings = ports.settings;
    match req.action {
        Action::Start => match start_normal(ports, budget).await {
            Ok(()) => reply(Outcome::Success, None),
            Err(e) => reply(Outcome::Failed, Some(e)),
        },
        Action::Stop => {
            let grace = settings.timeouts.stop_grace.min(budget.mul_f32(0.7));
            match ports.supervisor.stop(grace).await {
                Ok(_) => reply(Outcome::Success, None),
                Err(e) => reply(Outcome::Failed, Some(e.to_string())),
            }
        }
        Action::Monitor => {
            let limit = budget.min(
                settings
                    .timeouts
                    .probe_timeout
                    .max(Duration::from_millis(500)),
            );
            let p = ports.supervisor.probe(limit, req.depth >= 10).await;
            let (outcome, reason) = live_outcome(&p);
            reply(outcome, reason)
        }
        Action::ValidateAll => validate(ports.settings, req),
        Action::Promote | Action::Demote | Action::Notify | Action::Reload => {
            // Without failover these have no meaning for a plain clone: they
            // are accepted and logged.
            tracing::info!(action = ?req.action, notify = ?req.notify, "accepted");
            reply(Outcome::Success, None)
        }
    }
}

/// The monitor's outcome from a live probe of the local etcd.
pub(crate) fn live_outcome(p: &Probe) -> (Outcome, Option<String>) {
    match (&p.proc, &p.status, &p.read) {
        (ProcState::Stopped, _, _) => (Outcome::NotRunning, None),
        (ProcState::Running { .. }, Some(Ok(s)), read) => {
            if let Some(Err(e)) = read {
                (
                    Outcome::Failed,
                    Some(format!("linearizable read failed: {e}")),
                )
            } else if s.is_learner {
                (
                    Outcome::Degraded,
                    Some("the local member is a learner catching up".into()),
                )
            } else if !s.has_leader() {
                (Outcome::Failed, Some("etcd has no leader".into()))
            } else {
                (Outcome::Success, None)
            }
        }
        _ => (Outcome::Failed, live_reason(p)),
    }
}

/// What is wrong with the local etcd, as `/status` shows it: the process's
/// own trouble before the cluster's (a learner, no leader, a failed read).
pub(crate) fn live_reason(p: &Probe) -> Option<String> {
    match (&p.proc, &p.status, &p.read) {
        (ProcState::Stopped, _, _) => None,
        (ProcState::Died { pid, how }, _, _) => {
            Some(format!("etcd (pid {pid}) exited unexpectedly: {how}"))
        }
        (ProcState::Frozen { pid }, _, _) => Some(format!(
            "etcd (pid {pid}) is stopped by a signal and cannot answer"
        )),
        (ProcState::Hung { pid, silent_ms }, _, _) => Some(hung_reason(*pid, *silent_ms)),
        (ProcState::Running { pid }, Some(Err(e)), _) => {
            Some(format!("etcd (pid {pid}) is running but unhealthy: {e}"))
        }
        (ProcState::Running { .. }, Some(Ok(s)), _) if s.is_learner => {
            Some("the local member is a learner catching up".into())
        }
        (ProcState::Running { .. }, Some(Ok(s)), _) if !s.has_leader() => {
            Some("etcd has no leader".into())
        }
        (ProcState::Running { .. }, _, Some(Err(e))) => {
            Some(format!("linearizable read failed: {e}"))
        }
        _ => None,
    }
}

/// Why a hung etcd fails its monitor.
pub(crate) fn hung_reason(pid: u32, silent_ms: u64) -> String {
    format!(
        "etcd (pid {pid}) has not answered for {:.1} s while its process exists (hung: stopped by a signal, stuck in the kernel or live-locked)",
        silent_ms as f64 / 1000.0
    )
}

/// validate-all: the instance's node name, the configuration as it is on
/// disk now, the etcd binary it names. Each is a fact of this node, which
/// another node may not share, so none is `NotConfigured` (OCF 6 stops the
/// resource on every node): a parameter or configuration wrong here is
/// `InvalidArgs` (2), a program missing here `NotInstalled` (5). The
/// agent's own parameters, which are wrong everywhere alike, the agent
/// checks itself.
fn validate(settings: &crate::config::Settings, req: &ActionRequest) -> ActionReply {
    match validate_here(settings, req) {
        Ok(()) => reply(Outcome::Success, None),
        Err((outcome, why)) => reply(outcome, Some(why)),
    }
}

fn validate_here(
    settings: &crate::config::Settings,
    req: &ActionRequest,
) -> Result<(), (Outcome, String)> {
    if let Some(name) = req.params.get("node_name")
        && name != &settings.node_name
    {
        return Err((
            Outcome::InvalidArgs,
            format!(
                "parameter node_name={name:?} does not match this node's configured name {:?}",
                settings.node_name
            ),
        ));
    }
    // Re-read the configuration from disk: validate-all runs after an
    // operator edited it, before a restart would pick it up.
    let now = crate::config::reload(settings).map_err(|e| {
        (
            Outcome::InvalidArgs,
            format!("the configuration on this node: {e}"),
        )
    })?;
    if !now.etcd.binary.exists() {
        return Err((
            Outcome::NotInstalled,
            format!(
                "the etcd binary {} does not exist on this node",
                now.etcd.binary.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;

    /// A two-node configuration for node `n1` whose etcd binary is `binary`.
    fn conf(binary: &Path) -> String {
        format!(
            "node_name = \"n1\"\ntopology = \"two-node\"\n\
             [etcd]\nbinary = {:?}\n\
             [[nodes]]\nname = \"n1\"\npeer_urls = [\"http://127.0.0.1:12380\"]\n\
             client_urls = [\"http://127.0.0.1:12379\"]\n\
             [[nodes]]\nname = \"n2\"\npeer_urls = [\"http://127.0.0.1:22380\"]\n\
             client_urls = [\"http://127.0.0.1:22379\"]\n",
            binary.display().to_string()
        )
    }

    fn request(params: &[(&str, &str)]) -> ActionRequest {
        ActionRequest {
            action: warden_api::Action::ValidateAll,
            depth: 0,
            deadline_ms: 1000,
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            notify: None,
            instance: None,
        }
    }

    /// Each problem validate-all finds is one of this node: never OCF 6.
    #[test]
    fn validate_all_answers_node_local_codes() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("config.toml");
        // Any file that exists stands for the binary.
        std::fs::write(&main, conf(&main)).unwrap();
        let settings = crate::config::load(&main).unwrap();

        let r = validate(&settings, &request(&[]));
        assert_eq!(r.outcome, Outcome::Success, "{:?}", r.reason);
        let r = validate(&settings, &request(&[("node_name", "n1")]));
        assert_eq!(r.outcome, Outcome::Success, "{:?}", r.reason);

        let r = validate(&settings, &request(&[("node_name", "n2")]));
        assert_eq!(r.outcome, Outcome::InvalidArgs);
        assert_eq!(r.outcome.ocf_code(), 2);
        assert!(r.reason.unwrap().contains("node_name=\"n2\""));

        // The binary the file names now, not the one the daemon started with.
        let gone = dir.path().join("no-etcd");
        std::fs::write(&main, conf(&gone)).unwrap();
        let r = validate(&settings, &request(&[]));
        assert_eq!(r.outcome, Outcome::NotInstalled);
        assert_eq!(r.outcome.ocf_code(), 5);
        assert!(r.reason.unwrap().contains("no-etcd"));

        std::fs::write(&main, "node_name = 7\n").unwrap();
        let r = validate(&settings, &request(&[]));
        assert_eq!(r.outcome, Outcome::InvalidArgs);
        let reason = r.reason.unwrap();
        assert!(
            reason.starts_with("the configuration on this node: "),
            "{reason}"
        );
        assert!(reason.contains("config.toml"), "{reason}");
    }
}
