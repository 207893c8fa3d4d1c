//! `etcd-warden` subcommand(s): Health.

use std::process::ExitCode;

/// Arguments: Evaluate a report into Healthy, Warning or Degraded.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {}

/// Evaluate a report into Healthy, Warning or Degraded.
pub fn run_health(_args: HealthArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
