//! `etcd-warden` subcommand(s): Daemon.

use std::process::ExitCode;

/// Arguments: Run the host daemon (supervises etcd, serves the local API).
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {}

/// Run the host daemon (supervises etcd, serves the local API).
pub fn run_daemon(_args: DaemonArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
