//! `etcd-warden start` / `stop`: ask the daemon to start or stop etcd, the
//! same request the OCF agent sends.

use std::process::ExitCode;

use warden_api::{Action, ActionReply, ActionRequest, Outcome, paths};

use super::target::Target;

/// Arguments: Ask the daemon to start etcd on this node.
#[derive(Debug, clap::Args)]
pub(crate) struct StartArgs {
    /// Where the daemon is.
    #[command(flatten)]
    pub(crate) target: Target,
}

/// Arguments: Ask the daemon to stop etcd on this node.
#[derive(Debug, clap::Args)]
pub(crate) struct StopArgs {
    /// Where the daemon is.
    #[command(flatten)]
    pub(crate) target: Target,
}

fn act(target: &Target, action: Action) -> anyhow::Result<ExitCode> {
    let timeout = target.timeout();
    let req = ActionRequest {
        action,
        depth: 0,
        // Leave the daemon room to answer before the client gives up.
        deadline_ms: u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_sub(500)
            .max(500),
        params: Default::default(),
        notify: None,
        instance: None,
    };
    let r: ActionReply = target.post(paths::ACTION, &req)?;
    match r.outcome {
        Outcome::Success => {
            println!("{action:?}: done");
            Ok(ExitCode::SUCCESS)
        }
        other => {
            eprintln!(
                "{action:?}: {other:?}{}",
                r.reason.map(|m| format!(": {m}")).unwrap_or_default()
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

/// Ask the daemon to start etcd on this node.
pub(crate) fn run_start(args: StartArgs) -> anyhow::Result<ExitCode> {
    act(&args.target, Action::Start)
}

/// Ask the daemon to stop etcd on this node.
pub(crate) fn run_stop(args: StopArgs) -> anyhow::Result<ExitCode> {
    act(&args.target, Action::Stop)
}
