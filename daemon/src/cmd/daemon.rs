//! `etcd-warden daemon`: run the host daemon.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments: Run the host daemon (supervises etcd, serves the local API).
#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// The main configuration file; `config.d/*.toml` next to it are
    /// drop-ins.
    #[arg(long, default_value = crate::config::DEFAULT_CONFIG, conflicts_with = "standalone")]
    pub config: PathBuf,
    /// Run a one-node setup with everything under DIR (no configuration
    /// needed).
    #[arg(long, value_name = "DIR")]
    pub standalone: Option<PathBuf>,
    /// With --standalone: serve /healthz, /readyz, /metrics, /status on this
    /// loopback address.
    #[arg(long, value_name = "ADDR", requires = "standalone")]
    pub http_addr: Option<String>,
    /// With --standalone: start etcd at once (otherwise it waits for
    /// `etcd-warden start` or the OCF agent, as under Pacemaker).
    #[arg(long, requires = "standalone")]
    pub autostart: bool,
    /// More logging (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Run the host daemon (supervises etcd, serves the local API).
pub fn run_daemon(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    crate::run::init_logging(args.verbose);
    let (settings, standalone) = match &args.standalone {
        Some(dir) => (
            crate::standalone::prepare(dir, args.http_addr.as_deref(), args.autostart)?,
            true,
        ),
        None => (crate::config::load(&args.config)?, false),
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
