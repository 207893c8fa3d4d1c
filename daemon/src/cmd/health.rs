//! `etcd-warden health --report FILE`: the operator-side check of a report.
//! Exit 0 healthy, 1 warning, 2 degraded, 3 unknown (report unreadable). The
//! evaluation is `crm_xml::health::evaluate`, usable by an operator in Rust.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crm_xml::health::{self, Thresholds, Verdict};
use crm_xml::report::Report;

/// Output format.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// One line for the verdict, one per finding.
    Text,
    /// The evaluation as JSON.
    Json,
}

/// Arguments: Evaluate a report into Healthy, Warning or Degraded.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// The report written by `etcd-warden collect`.
    #[arg(long, value_name = "FILE")]
    pub report: PathBuf,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,

    /// A report older than this (seconds, from its own lastUpdated) degrades.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub stale_after: u64,
}

/// Evaluate a report into Healthy, Warning or Degraded.
pub fn run_health(args: HealthArgs) -> anyhow::Result<ExitCode> {
    // Every failure is "unknown" (3), never the generic 1 that means Warning.
    let report = std::fs::read_to_string(&args.report)
        .map_err(|e| format!("cannot read {}: {e}", args.report.display()))
        .and_then(|t| Report::from_json(&t).map_err(|e| format!("{}: {e}", args.report.display())));
    let report = match report {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("etcd-warden: health: {msg}");
            if let Format::Json = args.format {
                println!(
                    "{}",
                    serde_json::json!({"verdict": "Unknown", "error": msg})
                );
            } else {
                println!("Unknown: {msg}");
            }
            return Ok(ExitCode::from(Verdict::Unknown.exit_code()));
        }
    };
    let th = Thresholds {
        stale_after: Duration::from_secs(args.stale_after),
        ..Thresholds::default()
    };
    let eval = health::evaluate(&report, time::OffsetDateTime::now_utc(), &th);
    match args.format {
        Format::Text => print!("{}", health::to_text(&eval)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&eval)?),
    }
    Ok(ExitCode::from(eval.verdict.exit_code()))
}
