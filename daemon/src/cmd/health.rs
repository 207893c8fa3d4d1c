//! `etcd-warden health`.

use std::process::ExitCode;

/// Arguments of `etcd-warden health`.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {}

/// Runs `etcd-warden health`.
pub fn run(_args: HealthArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
