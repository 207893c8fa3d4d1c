//! One invocation of the agent: parse, ask the daemon, map the answer.

use std::path::Path;
use std::time::{Duration, Instant};

use warden_api::client::{Client, ClientError};
use warden_api::{Action, ActionReply, ActionRequest, Outcome, paths};

use crate::alone::{self, HostNode, Node};
use crate::budget::Budget;
use crate::invocation::{self, AgentParams, Env};
use crate::metadata;

/// The daemon, as the agent sees it: one request, one answer. A trait so
/// that unit tests can answer without a daemon.
pub trait Daemon {
    /// Sends `req` to the daemon listening on `socket`, waiting at most
    /// `timeout` for the answer.
    fn action(
        &self,
        socket: &Path,
        req: &ActionRequest,
        timeout: Duration,
    ) -> Result<ActionReply, ClientError>;
}

/// The real daemon, over its Unix socket.
#[derive(Debug, Clone, Copy, Default)]
pub struct SocketDaemon;

impl Daemon for SocketDaemon {
    fn action(
        &self,
        socket: &Path,
        req: &ActionRequest,
        timeout: Duration,
    ) -> Result<ActionReply, ClientError> {
        Client::new(socket).post(paths::ACTION, req, timeout)
    }
}

/// How the invocation ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// The result; its [`Outcome::ocf_code`] is the exit code.
    pub outcome: Outcome,
    /// The exit reason (printed as `ocf-exit-reason:` on stderr).
    pub reason: Option<String>,
    /// What goes to stdout (meta-data, usage).
    pub stdout: String,
    /// Log lines for stderr.
    pub warnings: Vec<String>,
}

impl Exit {
    fn new(outcome: Outcome, reason: Option<String>) -> Self {
        Exit {
            outcome,
            reason,
            stdout: String::new(),
            warnings: Vec::new(),
        }
    }

    fn fail(outcome: Outcome, reason: impl Into<String>) -> Self {
        Exit::new(outcome, Some(reason.into()))
    }

    fn print(text: String) -> Self {
        Exit {
            stdout: text,
            ..Exit::new(Outcome::Success, None)
        }
    }

    /// The process exit code.
    pub fn code(&self) -> u8 {
        // Every OCF code fits a byte; 1 (soft failure) if one ever did not.
        u8::try_from(self.outcome.ocf_code()).unwrap_or(1)
    }

    /// The stderr text: warnings, then the exit reason line. Pacemaker shows
    /// the line that starts with `prefix` as the exit reason in crm_mon; it
    /// must be a single line.
    pub fn stderr(&self, prefix: &str) -> String {
        let mut s = String::new();
        for w in &self.warnings {
            s.push_str("etcd-warden-agent: warning: ");
            s.push_str(&one_line(w));
            s.push('\n');
        }
        if let Some(r) = &self.reason {
            s.push_str(prefix);
            s.push_str(&one_line(r));
            s.push('\n');
        }
        s
    }
}

/// Pacemaker's default exit reason prefix (`OCF_EXIT_REASON_PREFIX`).
pub const EXIT_REASON_PREFIX: &str = "ocf-exit-reason:";

/// Keeps a reason on one line and short enough for crm_mon.
fn one_line(s: &str) -> String {
    const MAX: usize = 400;
    let mut out: String = s
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if out.len() > MAX {
        let mut cut = MAX;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

fn usage() -> String {
    format!(
        "usage: {} {{start|stop|monitor|notify|reload-agent|validate-all|meta-data|usage}}\n\
         The OCF resource agent ocf:etcd-warden:etcd; a thin client of the etcd-warden daemon.\n",
        crate::spec::AGENT_NAME
    )
}

/// Runs the action named by `args[0]` with the OCF environment `env` on
/// this host. `started` is when the process started: the action's timeout
/// counts from there.
pub fn run(args: &[String], env: &Env, daemon: &dyn Daemon, started: Instant) -> Exit {
    run_on(args, env, daemon, &HostNode, started)
}

/// As [`run`], with `node` standing for the system when the daemon is down.
pub fn run_on(
    args: &[String],
    env: &Env,
    daemon: &dyn Daemon,
    node: &dyn Node,
    started: Instant,
) -> Exit {
    let Some(name) = args.first().map(String::as_str) else {
        return Exit {
            stdout: usage(),
            ..Exit::fail(Outcome::InvalidArgs, "no action given")
        };
    };
    let (action, strict, waits) = match name {
        // meta-data needs nothing: no daemon, no parameters (ocf-tester runs
        // it as `nobody` and with binaries "missing").
        "meta-data" => return Exit::print(metadata::metadata()),
        "usage" | "help" => return Exit::print(usage()),
        // Actions that put etcd into a state are refused with a bad
        // configuration (6 is right there: no retry anywhere can fix it) and
        // wait for a daemon that is restarting.
        "start" => (Action::Start, true, true),
        // The agent reads its parameters at every call, so a changed one
        // needs no restart: checking it is all there is to do. `reload` is
        // not advertised (OCF 1.1 has `reload-agent`), but a controller that
        // cached the meta-data of an older agent declaring OCF 1.0 still
        // sends it, and failing it would restart etcd.
        "reload-agent" | "reload" => return reload(env),
        // Pacemaker calls these only for a promotable clone, which this
        // agent never is.
        "promote" | "demote" => return not_promotable(name),
        "validate-all" => (Action::ValidateAll, true, false),
        // Stop must succeed whenever possible (a failed stop means fencing),
        // so a bad parameter falls back to its default.
        "stop" => (Action::Stop, false, true),
        // Monitor waits only for a daemon that is being restarted (see
        // `call`); a stopped daemon is a failure at once.
        "monitor" => (Action::Monitor, false, true),
        "notify" => (Action::Notify, false, false),
        other => {
            return Exit::fail(
                Outcome::Unimplemented,
                format!(
                    "action '{other}' is not supported by ocf:{}:{}",
                    crate::spec::PROVIDER,
                    crate::spec::AGENT_NAME
                ),
            );
        }
    };

    let mut warnings = Vec::new();
    let params = if strict {
        match AgentParams::parse(env) {
            Ok(p) => p,
            Err(e) => return Exit::fail(Outcome::NotConfigured, e.to_string()),
        }
    } else {
        let (p, w) = AgentParams::parse_lenient(env);
        warnings.extend(w);
        p
    };
    let (timeout, w) = invocation::timeout(env, name);
    warnings.extend(w);
    let depth = if action == Action::Monitor {
        let (d, w) = invocation::check_level(env);
        warnings.extend(w);
        d
    } else {
        0
    };
    let budget = Budget::new(started, timeout);
    let mut req = ActionRequest {
        action,
        depth,
        deadline_ms: 0,
        params: invocation::passthrough_params(env),
        notify: invocation::notify_data(env),
        instance: env.get("OCF_RESOURCE_INSTANCE").cloned(),
    };
    if action == Action::Notify && req.notify.is_none() {
        // A notify without data (e.g. from ocf-tester) is still a notify.
        req.notify = Some(Default::default());
    }
    let wait = match action {
        _ if !waits => Duration::ZERO,
        // A daemon already found down is not waited for at every monitor:
        // etcd is judged at once.
        Action::Monitor if alone::daemon_known_down(&params.socket) => Duration::ZERO,
        // Leave a stop without the daemon half of the time.
        Action::Stop => params.daemon_wait.min(budget.client_left() / 2),
        _ => params.daemon_wait,
    };

    let mut exit = match call(daemon, &params.socket, &mut req, &budget, wait) {
        Ok(reply) => {
            alone::daemon_answered(&params.socket);
            from_reply(action, reply)
        }
        Err(e) if alone::daemon_is_down(&e) => {
            let failed = from_error(name, &params.socket, &budget, wait, e);
            without_daemon(action, node, &params, &budget, failed)
        }
        Err(e) => from_error(name, &params.socket, &budget, wait, e),
    };
    warnings.append(&mut exit.warnings);
    exit.warnings = warnings;
    exit
}

/// reload-agent: a changed parameter takes effect at the next call; a value
/// that can never work is refused as at start.
fn reload(env: &Env) -> Exit {
    match AgentParams::parse(env) {
        Ok(_) => Exit::new(Outcome::Success, None),
        Err(e) => Exit::fail(Outcome::NotConfigured, e.to_string()),
    }
}

fn not_promotable(action: &str) -> Exit {
    Exit::fail(
        Outcome::Unimplemented,
        format!(
            "{action}: ocf:{}:{} runs as an anonymous clone and has no promoted role; \
             configure it as `etcd-warden pcs-config` prints (a clone with notify=true and \
             interleave=true, not promotable)",
            crate::spec::PROVIDER,
            crate::spec::AGENT_NAME
        ),
    )
}

/// Sends the request, retrying only while the daemon is not listening (the
/// request never reached it, so a retry cannot repeat it) and `wait` lasts,
/// counted from the first failed attempt.
///
/// A stop or a start is also retried when the connection broke before an
/// answer (the daemon was killed by its watchdog or crashed while carrying
/// it out, and systemd restarts it). Either may be repeated: the restarted
/// daemon adopts the etcd the first one left (by its PID file, or by its
/// configuration when the daemon died before writing one) and carries on
/// from the records the first one wrote (a join, a force), so a stop that
/// finds etcd stopped and a start that finds it running succeed. A failed
/// stop means fencing; a failed start keeps etcd off the node until its
/// failure expires (`failure-timeout`) or an operator cleans it up.
///
/// A monitor retries only while the daemon is being restarted: its socket
/// file is still there (systemd keeps the runtime directory across a
/// restart, and a killed daemon never removed it) but nobody listens, or a
/// connection the killed daemon never accepted was reset. A monitor changes
/// nothing, so repeating it after a reset is harmless; without the retry, a
/// watchdog restart of the daemon (which leaves etcd serving) would fail a
/// monitor and make Pacemaker restart etcd. A missing socket (the daemon was
/// stopped) is reported at once.
fn call(
    daemon: &dyn Daemon,
    socket: &Path,
    req: &mut ActionRequest,
    budget: &Budget,
    wait: Duration,
) -> Result<ActionReply, ClientError> {
    // Poll for the socket often enough that a restarted daemon is used within
    // a fraction of a second.
    const POLL: Duration = Duration::from_millis(100);
    let monitor = req.action == Action::Monitor;
    let repeatable = matches!(req.action, Action::Stop | Action::Start);
    let mut wait_until: Option<Instant> = None;
    loop {
        let left = budget.client_left();
        if left.is_zero() {
            return Err(ClientError::Timeout(budget.timeout()));
        }
        req.deadline_ms = u64::try_from(budget.daemon_deadline().as_millis()).unwrap_or(u64::MAX);
        let result = daemon.action(socket, req, left);
        let restarting = match &result {
            Err(ClientError::Connect { .. }) => !monitor || socket.exists(),
            Err(ClientError::Io(_)) => repeatable || (monitor && socket.exists()),
            _ => false,
        };
        let until = *wait_until.get_or_insert_with(|| Instant::now() + wait);
        // Keep trying while the wait lasts and the budget still has room for
        // another attempt; otherwise report the error itself, which says
        // more than a timeout would.
        if restarting && Instant::now() < until && budget.client_left() > POLL {
            std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
            continue;
        }
        return result;
    }
}

/// The daemon is down (`failed` says how): monitor and stop judge and stop
/// etcd themselves, notify drops its hint; the rest fail as `failed`.
fn without_daemon(
    action: Action,
    node: &dyn Node,
    params: &AgentParams,
    budget: &Budget,
    failed: Exit,
) -> Exit {
    let down = failed.reason.clone().unwrap_or_default();
    let (outcome, reason) = match action {
        Action::Monitor => alone::monitor(
            node,
            &params.socket,
            params.daemon_down_grace,
            budget,
            &down,
        ),
        Action::Stop => alone::stop(node, &params.socket, budget, &down),
        // A hint the daemon reads again from the live cluster when it is
        // back; failing it would only add a failure to the record.
        Action::Notify => (
            Outcome::Success,
            format!("{down}; daemon down: the notification is dropped"),
        ),
        // validate-all checks this node: without its daemon, part of the
        // installation here is missing (5, never 6, which would stop the
        // resource on every node).
        Action::ValidateAll => {
            return Exit {
                outcome: Outcome::NotInstalled,
                ..failed
            };
        }
        _ => return failed,
    };
    Exit::new(outcome, Some(reason))
}

fn from_reply(action: Action, reply: ActionReply) -> Exit {
    let outcome = match (action, reply.outcome) {
        // OCF: a stop that finds nothing running has succeeded (7 is a
        // monitor result only).
        (Action::Stop, Outcome::NotRunning) => Outcome::Success,
        (_, o) => o,
    };
    let is_fine = matches!(
        outcome,
        Outcome::Success | Outcome::RunningPromoted | Outcome::NotRunning
    );
    let reason = match reply.reason {
        Some(r) if !r.trim().is_empty() => Some(r),
        // Every failure carries a reason, even when the daemon gave none.
        _ if !is_fine => Some(format!(
            "the etcd-warden daemon answered {:?} to {action:?} without a reason",
            reply.outcome
        )),
        _ => None,
    };
    Exit::new(outcome, reason)
}

fn from_error(
    action: &str,
    socket: &Path,
    budget: &Budget,
    wait: Duration,
    e: ClientError,
) -> Exit {
    let reason = match &e {
        ClientError::Connect { error: source, .. } => {
            let waited = if wait.is_zero() {
                String::new()
            } else {
                format!(" (kept trying for {} ms)", budget.elapsed().as_millis())
            };
            format!(
                "{action}: {} at {}: {source}{waited}; is etcd-warden running on this node?",
                warden_api::DAEMON_UNREACHABLE,
                socket.display()
            )
        }
        ClientError::Timeout(_) => format!(
            "{action}: gave up after {} ms of the {} ms timeout: the etcd-warden daemon did not \
             answer in time",
            budget.elapsed().as_millis(),
            budget.timeout().as_millis()
        ),
        ClientError::Status { status, message } => format!(
            "{action}: the etcd-warden daemon refused the request (HTTP {status}): {message}"
        ),
        ClientError::Io(_) | ClientError::Protocol(_) => format!("{action}: {e}"),
    };
    // Soft failure: Pacemaker retries or recovers in place. Never 6 here: an
    // unreachable or slow daemon is transient.
    Exit::fail(Outcome::Failed, reason)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    use super::*;

    /// Answers from a script and records what it was asked.
    struct Fake {
        answers: RefCell<Vec<Result<ActionReply, ClientError>>>,
        seen: RefCell<Vec<(ActionRequest, Duration)>>,
    }

    impl Fake {
        fn new(answers: Vec<Result<ActionReply, ClientError>>) -> Self {
            Fake {
                answers: RefCell::new(answers),
                seen: RefCell::new(Vec::new()),
            }
        }
        fn ok(outcome: Outcome, reason: Option<&str>) -> Self {
            Fake::new(vec![Ok(ActionReply {
                outcome,
                reason: reason.map(str::to_string),
            })])
        }
    }

    impl Daemon for Fake {
        fn action(
            &self,
            _socket: &Path,
            req: &ActionRequest,
            timeout: Duration,
        ) -> Result<ActionReply, ClientError> {
            self.seen.borrow_mut().push((req.clone(), timeout));
            self.answers.borrow_mut().remove(0)
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    }

    fn args(a: &str) -> Vec<String> {
        vec![a.to_string()]
    }

    fn refused() -> ClientError {
        ClientError::Connect {
            path: "/x".into(),
            error: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        }
    }

    #[test]
    fn meta_data_needs_no_daemon() {
        let d = Fake::new(vec![]);
        let e = run(&args("meta-data"), &env(&[]), &d, Instant::now());
        assert_eq!(e.code(), 0);
        assert!(e.stdout.contains("<resource-agent name=\"etcd\""));
        assert!(d.seen.borrow().is_empty());
    }

    #[test]
    fn unknown_and_missing_actions() {
        let d = Fake::new(vec![]);
        let e = run(&args("migrate_to"), &env(&[]), &d, Instant::now());
        assert_eq!(e.code(), 3);
        assert!(e.reason.unwrap().contains("migrate_to"));
        let e = run(&[], &env(&[]), &d, Instant::now());
        assert_eq!(e.code(), 2);
        assert!(e.stdout.starts_with("usage:"));
    }

    #[test]
    fn validate_all_rejects_bad_parameters_with_6_naming_them() {
        let d = Fake::new(vec![]);
        for (k, v, name) in [
            ("OCF_RESKEY_socket", "api.sock", "socket"),
            ("OCF_RESKEY_daemon_wait", "ten", "daemon_wait"),
        ] {
            let e = run(&args("validate-all"), &env(&[(k, v)]), &d, Instant::now());
            assert_eq!(e.code(), 6, "{k}");
            let reason = e.reason.clone().unwrap();
            assert!(reason.contains(&format!("'{name}'")), "{reason}");
            assert!(
                e.stderr(EXIT_REASON_PREFIX)
                    .contains("ocf-exit-reason:parameter")
            );
        }
        // Start refuses the same, before any request.
        let e = run(
            &args("start"),
            &env(&[("OCF_RESKEY_socket", "x")]),
            &d,
            Instant::now(),
        );
        assert_eq!(e.code(), 6);
        assert!(d.seen.borrow().is_empty());
    }

    #[test]
    fn validate_all_without_the_daemon_is_not_installed_here() {
        let d = Fake::new(vec![Err(refused())]);
        let e = run(&args("validate-all"), &env(&[]), &d, Instant::now());
        assert_eq!(e.code(), 5);
        assert!(e.reason.unwrap().contains("not reachable"));
        // What the daemon finds is passed on as it answers it.
        for (outcome, code) in [
            (Outcome::InvalidArgs, 2),
            (Outcome::NotInstalled, 5),
            (Outcome::Success, 0),
        ] {
            let d = Fake::ok(outcome, Some("why"));
            let e = run(&args("validate-all"), &env(&[]), &d, Instant::now());
            assert_eq!(e.code(), code, "{outcome:?}");
        }
    }

    #[test]
    fn reload_agent_checks_the_parameters_without_the_daemon() {
        let d = Fake::new(vec![]);
        for action in ["reload-agent", "reload"] {
            let e = run(
                &args(action),
                &env(&[("OCF_RESKEY_daemon_wait", "30")]),
                &d,
                Instant::now(),
            );
            assert_eq!(e.code(), 0, "{action}: {:?}", e.reason);
            let e = run(
                &args(action),
                &env(&[("OCF_RESKEY_daemon_wait", "soon")]),
                &d,
                Instant::now(),
            );
            assert_eq!(e.code(), 6, "{action}");
            assert!(e.reason.unwrap().contains("'daemon_wait'"));
        }
        assert!(d.seen.borrow().is_empty());
    }

    #[test]
    fn promote_and_demote_are_unimplemented() {
        let d = Fake::new(vec![]);
        for action in ["promote", "demote"] {
            let e = run(&args(action), &env(&[]), &d, Instant::now());
            assert_eq!(e.code(), 3, "{action}");
            let reason = e.reason.unwrap();
            assert!(reason.starts_with(&format!("{action}: ")), "{reason}");
            assert!(reason.contains("anonymous clone"), "{reason}");
        }
        assert!(d.seen.borrow().is_empty());
    }

    #[test]
    fn monitor_and_stop_fall_back_to_defaults_instead_of_failing() {
        let d = Fake::ok(Outcome::NotRunning, None);
        let e = run(
            &args("monitor"),
            &env(&[("OCF_RESKEY_daemon_wait", "ten")]),
            &d,
            Instant::now(),
        );
        assert_eq!(e.code(), 7);
        assert!(e.reason.is_none());
        assert!(e.stderr(EXIT_REASON_PREFIX).contains("daemon_wait"));
    }

    #[test]
    fn builds_the_request_from_the_environment() {
        let d = Fake::ok(Outcome::Success, None);
        let e = run(
            &args("monitor"),
            &env(&[
                ("OCF_RESKEY_CRM_meta_timeout", "20000"),
                ("OCF_CHECK_LEVEL", "10"),
                ("OCF_RESOURCE_INSTANCE", "etcd:0"),
                ("OCF_RESKEY_data_dir", "/var/lib/etcd"),
            ]),
            &d,
            Instant::now(),
        );
        assert_eq!(e.code(), 0);
        let seen = d.seen.borrow();
        let (req, timeout) = &seen[0];
        assert_eq!(req.action, Action::Monitor);
        assert_eq!(req.depth, 10);
        assert_eq!(req.instance.as_deref(), Some("etcd:0"));
        assert_eq!(req.params["data_dir"], "/var/lib/etcd");
        assert!(
            req.deadline_ms > 15_000 && req.deadline_ms <= 16_000,
            "{req:?}"
        );
        assert!(*timeout <= Duration::from_secs(18));
    }

    #[test]
    fn outcomes_map_through_the_api() {
        for (outcome, code) in [
            (Outcome::Success, 0),
            (Outcome::Failed, 1),
            (Outcome::NotRunning, 7),
            (Outcome::RunningPromoted, 8),
            (Outcome::Degraded, 190),
            (Outcome::NotConfigured, 6),
        ] {
            let d = Fake::ok(outcome, Some("why"));
            let e = run(&args("monitor"), &env(&[]), &d, Instant::now());
            assert_eq!(e.code(), code, "{outcome:?}");
        }
    }

    #[test]
    fn stop_of_a_stopped_resource_succeeds() {
        let d = Fake::ok(Outcome::NotRunning, None);
        let e = run(&args("stop"), &env(&[]), &d, Instant::now());
        assert_eq!(e.code(), 0);
    }

    #[test]
    fn failures_always_carry_a_reason() {
        let d = Fake::ok(Outcome::Failed, None);
        let e = run(&args("start"), &env(&[]), &d, Instant::now());
        assert_eq!(e.code(), 1);
        assert!(e.reason.unwrap().contains("without a reason"));
    }

    #[test]
    fn notify_forwards_the_lists() {
        let d = Fake::ok(Outcome::Success, None);
        let e = run(
            &args("notify"),
            &env(&[
                ("OCF_RESKEY_CRM_meta_notify_type", "post"),
                ("OCF_RESKEY_CRM_meta_notify_operation", "stop"),
                ("OCF_RESKEY_CRM_meta_notify_stop_uname", "nodeB"),
            ]),
            &d,
            Instant::now(),
        );
        assert_eq!(e.code(), 0);
        let n = d.seen.borrow()[0].0.notify.clone().unwrap();
        assert_eq!(n.kind, "post");
        assert_eq!(n.nodes["stop"], vec!["nodeB"]);
        // Without data it is still a notify with (empty) data.
        let d = Fake::ok(Outcome::Success, None);
        run(&args("notify"), &env(&[]), &d, Instant::now());
        assert!(d.seen.borrow()[0].0.notify.is_some());
    }

    #[test]
    fn start_waits_for_a_restarting_daemon_but_monitor_not_for_a_stopped_one() {
        let ok = || {
            Ok(ActionReply {
                outcome: Outcome::Success,
                reason: None,
            })
        };
        let d = Fake::new(vec![Err(refused()), Err(refused()), ok()]);
        let e = run(&args("start"), &env(&[]), &d, Instant::now());
        assert_eq!(e.code(), 0);
        assert_eq!(d.seen.borrow().len(), 3);

        let d = Fake::new(vec![Err(refused()), ok()]);
        let e = run(&args("monitor"), &env(&[]), &d, Instant::now());
        assert_eq!(e.code(), 1);
        assert_eq!(d.seen.borrow().len(), 1);
        assert!(e.reason.unwrap().contains("not reachable"));
    }

    #[test]
    fn monitor_waits_for_a_daemon_being_restarted() {
        // The socket file is there (kept across the restart): refused and
        // reset connections are retried until the new daemon answers.
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("api.sock");
        std::fs::write(&sock, "").unwrap();
        let reset = || {
            Err(ClientError::Io(std::io::Error::from(
                std::io::ErrorKind::ConnectionReset,
            )))
        };
        let running = Ok(ActionReply {
            outcome: Outcome::Success,
            reason: None,
        });
        let d = Fake::new(vec![reset(), Err(refused()), running]);
        let e = run(
            &args("monitor"),
            &env(&[("OCF_RESKEY_socket", sock.to_str().unwrap())]),
            &d,
            Instant::now(),
        );
        assert_eq!(e.code(), 0);
        assert_eq!(d.seen.borrow().len(), 3);

        // A start is sent again to the restarted daemon too, which finds
        // what the first one did (see `call`); a notify is not.
        let started = Ok(ActionReply {
            outcome: Outcome::Success,
            reason: None,
        });
        let d = Fake::new(vec![reset(), Err(refused()), started]);
        let e = run(
            &args("start"),
            &env(&[("OCF_RESKEY_socket", sock.to_str().unwrap())]),
            &d,
            Instant::now(),
        );
        assert_eq!(e.code(), 0, "{:?}", e.reason);
        assert_eq!(d.seen.borrow().len(), 3);
        assert!(
            d.seen
                .borrow()
                .iter()
                .all(|(r, _)| r.action == Action::Start)
        );
        let d = Fake::new(vec![reset()]);
        let e = run(
            &args("notify"),
            &env(&[("OCF_RESKEY_socket", sock.to_str().unwrap())]),
            &d,
            Instant::now(),
        );
        assert_eq!(d.seen.borrow().len(), 1, "{:?}", e.reason);
    }

    /// The daemon goes away in the middle of a stop (its watchdog killed
    /// it, or it crashed): the connection closes without an answer, and
    /// the stop is sent again to the restarted daemon, which finishes it,
    /// instead of failing (which would fence the node). Also while the
    /// socket file is briefly absent (a daemon that removed it on its way
    /// out).
    #[test]
    fn stop_is_sent_again_when_the_daemon_went_away_during_it() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("api.sock");
        let closed = || {
            Err(ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the connection closed before a complete answer",
            )))
        };
        let stopped = Ok(ActionReply {
            outcome: Outcome::Success,
            reason: None,
        });
        let d = Fake::new(vec![closed(), Err(refused()), stopped]);
        let e = run(
            &args("stop"),
            &env(&[("OCF_RESKEY_socket", sock.to_str().unwrap())]),
            &d,
            Instant::now(),
        );
        assert_eq!(e.code(), 0, "{:?}", e.reason);
        let seen = d.seen.borrow();
        assert_eq!(seen.len(), 3);
        assert!(seen.iter().all(|(r, _)| r.action == Action::Stop));

        // Bounded like any wait for the daemon: a daemon that never comes
        // back fails the stop with the error itself, before the timeout.
        stop_gives_up_in_time(
            closed,
            &[("OCF_RESKEY_socket", sock.to_str().unwrap())],
            "closed before a complete answer",
        );
    }

    /// [`super::run`] on a node where an etcd runs that no record names, so
    /// that what these tests see does not depend on the processes of the
    /// host they run on.
    fn run(args: &[String], env: &Env, daemon: &dyn Daemon, started: Instant) -> Exit {
        run_on(args, env, daemon, &UnrecordedEtcd, started)
    }

    /// A node where an etcd runs that no record names: without the daemon,
    /// monitor and stop cannot judge it.
    struct UnrecordedEtcd;

    impl Node for UnrecordedEtcd {
        fn is_running(&self, _pid: u32, _start_ticks: u64) -> bool {
            true
        }
        fn signal(&self, _etcd: &warden_api::EtcdRecord, _sig: alone::Sig) -> Result<(), String> {
            Ok(())
        }
        fn health(&self, _url: &str, _timeout: Duration) -> Result<String, String> {
            Err("not asked".into())
        }
        fn stop_unit(&self, _unit: &str, _timeout: Duration) -> Result<(), String> {
            Err("not asked".into())
        }
        fn boot_clock(&self) -> Duration {
            Duration::ZERO
        }
        fn etcd_processes(&self) -> Vec<u32> {
            vec![4242]
        }
    }

    /// A stop whose every attempt gets `error` fails within its 1 s
    /// timeout (more `env` beside it), with a reason containing `why`.
    fn stop_gives_up_in_time(
        error: impl Fn() -> Result<ActionReply, ClientError>,
        more: &[(&str, &str)],
        why: &str,
    ) {
        let d = Fake::new((0..100).map(|_| error()).collect());
        let mut pairs = vec![("OCF_RESKEY_CRM_meta_timeout", "1000")];
        pairs.extend_from_slice(more);
        let t0 = Instant::now();
        let e = run_on(&args("stop"), &env(&pairs), &d, &UnrecordedEtcd, t0);
        assert!(
            t0.elapsed() < Duration::from_millis(1000),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(e.code(), 1);
        let reason = e.reason.unwrap();
        assert!(reason.contains(why), "{reason}");
    }

    #[test]
    fn daemon_wait_is_bounded_by_the_timeout() {
        stop_gives_up_in_time(
            || Err(refused()),
            &[("OCF_RESKEY_daemon_wait", "60")],
            "not reachable",
        );
    }

    #[test]
    fn unreachable_daemon_is_a_failure_with_a_reason_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("api.sock");
        let t0 = Instant::now();
        let e = run(
            &args("monitor"),
            &env(&[("OCF_RESKEY_socket", sock.to_str().unwrap())]),
            &SocketDaemon,
            t0,
        );
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert_eq!(e.code(), 1);
        let stderr = e.stderr(EXIT_REASON_PREFIX);
        assert!(
            stderr.starts_with("ocf-exit-reason:monitor: the etcd-warden daemon is not reachable"),
            "{stderr}"
        );
    }

    #[test]
    fn a_daemon_that_never_answers_makes_the_agent_give_up_in_time() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("api.sock");
        // Accepts connections (the kernel's backlog does) but never answers.
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let t0 = Instant::now();
        let e = run(
            &args("monitor"),
            &env(&[
                ("OCF_RESKEY_socket", sock.to_str().unwrap()),
                ("OCF_RESKEY_CRM_meta_timeout", "1500"),
            ]),
            &SocketDaemon,
            t0,
        );
        let took = t0.elapsed();
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert!(took >= Duration::from_millis(1000), "{took:?}");
        assert_eq!(e.code(), 1);
        assert!(e.reason.unwrap().contains("gave up after"));
    }

    #[test]
    fn reasons_stay_on_one_line() {
        let e = Exit::fail(Outcome::Failed, "first\nsecond\r\n");
        assert_eq!(e.stderr("P:"), "P:first; second\n");
        let long = "x".repeat(1000);
        assert!(one_line(&long).chars().count() <= 401);
    }
}
