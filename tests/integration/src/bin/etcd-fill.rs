//! `etcd-fill --endpoint http://127.0.0.1:2379 --db-size 1G [--prefix /fill]`:
//! brings a running etcd to a database size with a realistic mix (see
//! `warden_integration::fill`), printing progress and, last, how long it took.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use warden_integration::fill::{self, mib};

const USAGE: &str = "usage: etcd-fill --endpoint URL --db-size SIZE [--prefix PREFIX]\n  SIZE: bytes or K/M/G (binary units), e.g. 100M, 1G, 2G";

fn run() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut endpoint, mut size, mut prefix) = (None, None, "/fill".to_string());
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .with_context(|| format!("{name} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--endpoint" => endpoint = Some(value("--endpoint")?),
            "--db-size" => size = Some(fill::parse_size(&value("--db-size")?)?),
            "--prefix" => prefix = value("--prefix")?,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let endpoint = endpoint.with_context(|| format!("--endpoint is required\n{USAGE}"))?;
    let size = size.with_context(|| format!("--db-size is required\n{USAGE}"))?;
    let r = fill::fill(&endpoint, size, &prefix, None)?;
    println!(
        "filled {endpoint} to {} (in use {}) in {:.1} s: {} small keys, {} large values, {} sent",
        mib(r.db_size),
        mib(r.in_use),
        r.took.as_secs_f64(),
        r.small_keys,
        r.large_puts,
        mib(r.bytes)
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("etcd-fill: {e:#}");
            ExitCode::FAILURE
        }
    }
}
