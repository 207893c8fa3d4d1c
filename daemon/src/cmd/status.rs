//! `etcd-warden` subcommand(s): Status.

use std::process::ExitCode;

/// Arguments: Show this node's state and etcd's live view.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {}

/// Show this node's state and etcd's live view.
pub fn run_status(_args: StatusArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
