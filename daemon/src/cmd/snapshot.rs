//! `etcd-warden` subcommand(s): Snapshot.

use std::process::ExitCode;

/// Arguments: Save a verified etcd snapshot.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {}

/// Save a verified etcd snapshot.
pub fn run_snapshot(_args: SnapshotArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
