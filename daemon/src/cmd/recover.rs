//! `etcd-warden` subcommand(s): Recover.

use std::process::ExitCode;

/// Arguments: Resolve a state the daemon refuses to fix on its own.
#[derive(Debug, clap::Args)]
pub struct RecoverArgs {}

/// Resolve a state the daemon refuses to fix on its own.
pub fn run_recover(_args: RecoverArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
