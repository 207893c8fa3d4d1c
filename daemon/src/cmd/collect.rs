//! `etcd-warden collect`.

use std::process::ExitCode;

/// Arguments of `etcd-warden collect`.
#[derive(Debug, clap::Args)]
pub struct CollectArgs {}

/// Runs `etcd-warden collect`.
pub fn run(_args: CollectArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
