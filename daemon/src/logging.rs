//! The daemon's and the CLI's logging: journald under systemd, stderr
//! otherwise.

/// Log to journald when stderr is connected to it (systemd sets
/// JOURNAL_STREAM), formatted to stderr otherwise (coloured only on a
/// terminal, and not when NO_COLOR is set). Uses tracing-journald, the
/// tracing layer (systemd-journal-logger is a `log` backend).
pub(crate) fn init_logging(verbose: u8) {
    use tracing_subscriber::prelude::*;
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let journald = std::env::var_os("JOURNAL_STREAM")
        .and_then(|_| tracing_journald::layer().ok())
        .map(|l| l.with_syslog_identifier("etcd-warden".into()));
    // Colour only for a person at a terminal: a log file or a pipe to
    // another collector keeps plain text that grep and parsers read as is.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let fmt = journald.is_none().then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(colour)
            .with_target(true)
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(journald)
        .with(fmt)
        .try_init();
}
