//! `etcd-warden daemon`: run the host daemon.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments: Run the host daemon (supervises etcd, serves the local API).
///
/// Two modes, and each flag belongs to one of them (or both): a flag that
/// does not apply to the chosen mode is refused, never ignored.
#[derive(Debug, clap::Args)]
pub(crate) struct DaemonArgs {
    /// The main configuration file. The default path reads the installed
    /// layers (/usr/lib/etcd-warden/config.d/, this file,
    /// /etc/etcd-warden/config.d/, /run/etcd-warden/config.d/); another
    /// path reads that file and the config.d/ directory beside it.
    #[arg(long, value_name = "PATH", default_value = crate::config::DEFAULT_CONFIG, conflicts_with = "standalone")]
    pub(crate) config: PathBuf,
    /// Run a one-node setup with everything under DIR (no configuration
    /// needed).
    #[arg(long, value_name = "DIR", help_heading = "Standalone mode")]
    pub(crate) standalone: Option<PathBuf>,
    /// Serve /healthz, /readyz, /metrics, /status on this loopback address
    /// (requires --standalone; otherwise set api.http_addr in the
    /// configuration).
    // `conflicts_with` as well as `requires`: clap counts an explicit
    // --config (which conflicts with --standalone) as satisfying the
    // requirement, so without it `--config X --http-addr A` would parse and
    // the flag would be ignored.
    #[arg(
        long,
        value_name = "ADDR",
        requires = "standalone",
        conflicts_with = "config",
        help_heading = "Standalone mode"
    )]
    pub(crate) http_addr: Option<String>,
    /// Start etcd at once (requires --standalone; otherwise set autostart
    /// in the configuration). Without it etcd waits for `etcd-warden start`
    /// or the OCF agent, as under Pacemaker.
    #[arg(
        long,
        requires = "standalone",
        conflicts_with = "config",
        help_heading = "Standalone mode"
    )]
    pub(crate) autostart: bool,
    /// More logging (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
}

/// Run the host daemon (supervises etcd, serves the local API).
pub(crate) fn run_daemon(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    crate::logging::init_logging(args.verbose);
    let (settings, standalone) = match &args.standalone {
        Some(dir) => (
            crate::standalone::prepare(dir, args.http_addr.as_deref(), args.autostart)?,
            true,
        ),
        None => (
            crate::data_layout::effective(crate::config::load(&args.config)?),
            false,
        ),
    };
    // A current-thread runtime is plenty for a host daemon and keeps idle
    // CPU and memory low.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build the tokio runtime")?;
    let options = crate::run::Options {
        print_paths: standalone,
        ..Default::default()
    };
    let outcome = rt.block_on(async {
        let shutdown = crate::run::signals()?;
        crate::run::run_with(settings, options, shutdown).await
    });
    // A blocking task still in a command (crm_mon) is not waited for: the
    // shutdown already gave work its grace.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    outcome?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["etcd-warden", "daemon"].iter().chain(args))
    }

    #[test]
    fn standalone_flags_without_standalone_are_refused() {
        for args in [&["--http-addr", "127.0.0.1:9481"][..], &["--autostart"]] {
            let e = parse(args).unwrap_err();
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{args:?}"
            );
            assert!(e.to_string().contains("--standalone"), "{args:?}: {e}");
        }
        // With an explicit --config the flag is refused as well, naming it.
        for (args, flag) in [
            (
                &["--config", "/x/c.toml", "--http-addr", "127.0.0.1:9481"],
                "--http-addr",
            ),
            (
                &["--config", "/x/c.toml", "--autostart", "-v"],
                "--autostart",
            ),
        ] {
            let e = parse(&args[..]).unwrap_err();
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{args:?}"
            );
            let msg = e.to_string();
            assert!(
                msg.contains(flag) && msg.contains("--config"),
                "{args:?}: {msg}"
            );
        }
    }

    #[test]
    fn config_and_standalone_exclude_each_other() {
        let e = parse(&["--config", "/x/c.toml", "--standalone", "/tmp/s"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        // The default --config is no conflict.
        let Command::Daemon(a) = parse(&[
            "--standalone",
            "/tmp/s",
            "--autostart",
            "--http-addr",
            "127.0.0.1:1",
        ])
        .unwrap()
        .command
        else {
            panic!("not the daemon command");
        };
        assert!(a.autostart && a.standalone.is_some());
        let Command::Daemon(a) = parse(&["--config", "/x/c.toml", "-v"]).unwrap().command else {
            panic!("not the daemon command");
        };
        assert_eq!(a.config, std::path::PathBuf::from("/x/c.toml"));
    }
}
