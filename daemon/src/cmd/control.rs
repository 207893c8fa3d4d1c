//! `etcd-warden` subcommand(s): Start, Stop.

use std::process::ExitCode;

/// Arguments: Ask the daemon to start etcd on this node.
#[derive(Debug, clap::Args)]
pub struct StartArgs {}

/// Ask the daemon to start etcd on this node.
pub fn run_start(_args: StartArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}

/// Arguments: Ask the daemon to stop etcd on this node.
#[derive(Debug, clap::Args)]
pub struct StopArgs {}

/// Ask the daemon to stop etcd on this node.
pub fn run_stop(_args: StopArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
