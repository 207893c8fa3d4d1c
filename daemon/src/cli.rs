//! Command-line parsing and dispatch. Each subcommand's arguments and code
//! live in its own module under [`crate::cmd`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cmd;

/// Keeps etcd available and safe on Pacemaker clusters, above all two-node ones.
#[derive(Debug, Parser)]
#[command(name = "etcd-warden", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build the PacemakerCluster report from crm_mon and write it.
    Collect(cmd::collect::CollectArgs),
    /// Evaluate a report into Healthy, Warning or Degraded.
    Health(cmd::health::HealthArgs),
}

/// Parse the command line, run the subcommand, and turn its result into the
/// process exit code. An error chain is printed once, here.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Collect(a) => cmd::collect::run(a),
        Command::Health(a) => cmd::health::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("etcd-warden: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
