//! `etcd-warden check-config`: load the configuration as the daemon does,
//! check the files it names, and say OK in one line or exit 78 naming the
//! file, line and key (like `sshd -t`). Neither the daemon nor etcd is
//! needed.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::Settings;

/// Arguments: Check the configuration without starting anything.
#[derive(Debug, clap::Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct CheckConfigArgs {
    /// The main configuration file. The default path reads the installed
    /// layers (/usr/lib/etcd-warden/config.d/, this file,
    /// /etc/etcd-warden/config.d/, /run/etcd-warden/config.d/); another
    /// path reads that file and the config.d/ directory beside it.
    #[arg(long, value_name = "PATH", default_value = crate::config::DEFAULT_CONFIG)]
    pub(crate) config: PathBuf,
}

/// The exit codes, for `--help` and the man page.
const EXIT_STATUS: &str = "Exit status:
  0   the configuration is valid; one line on stdout says what was read
  78  the configuration is refused (EX_CONFIG); stderr names the file, the line and the key";

/// Check the configuration; print one line when it is valid.
pub(crate) fn run_check_config(args: CheckConfigArgs) -> anyhow::Result<ExitCode> {
    let settings = crate::config::check(&args.config)?;
    println!("{}", summary(&settings));
    Ok(ExitCode::SUCCESS)
}

/// `configuration OK: node a of 2 (two-node), read FILE, FILE`.
fn summary(s: &Settings) -> String {
    let read: Vec<String> = s.sources.iter().map(|p| p.display().to_string()).collect();
    format!(
        "configuration OK: node {} of {} ({}), read {}",
        s.node_name,
        s.nodes.len(),
        s.topology.as_str(),
        read.join(", ")
    )
}
