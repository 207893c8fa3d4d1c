//! `etcd-warden snapshot save PATH`: stream a snapshot from the local etcd
//! member, verify it, then move it into place.
//!
//! etcd appends the SHA-256 of the database to the snapshot stream; the file
//! is only renamed to PATH once that checksum and the bbolt header check out.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sha2::{Digest, Sha256};

use super::target::Target;
use crate::etcd::{Connector, EtcdError};

/// Arguments: Save a verified etcd snapshot.
#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: SnapshotCommand,
}

/// Snapshot subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum SnapshotCommand {
    /// Save a snapshot to PATH (verified after writing).
    Save {
        /// Where to write it.
        path: PathBuf,
        /// Where etcd and its TLS settings are found.
        #[command(flatten)]
        target: Target,
        /// etcd client URL (default: this node's, from the configuration).
        #[arg(long)]
        endpoint: Option<String>,
    },
}

/// Why a snapshot file is not trustworthy.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// Too short to hold a database and its checksum.
    #[error("the snapshot is too short ({0} bytes)")]
    TooShort(usize),
    /// The SHA-256 trailer does not match.
    #[error("the snapshot's SHA-256 checksum does not match its contents")]
    Checksum,
    /// Not a bbolt database.
    #[error("the snapshot is not a bbolt database (bad magic)")]
    Magic,
}

/// Check a snapshot as etcd sends it: a bbolt database followed by the
/// SHA-256 of that database.
pub fn verify(bytes: &[u8]) -> Result<(), VerifyError> {
    // One 4 KiB page at least, plus the 32-byte checksum.
    if bytes.len() < 4096 + 32 {
        return Err(VerifyError::TooShort(bytes.len()));
    }
    let (db, sum) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(db).as_slice() != sum {
        return Err(VerifyError::Checksum);
    }
    // bbolt page header (16 bytes), then the meta page's magic, little endian.
    let magic = u32::from_le_bytes([db[16], db[17], db[18], db[19]]);
    if magic != 0xED0C_DAED {
        return Err(VerifyError::Magic);
    }
    Ok(())
}

async fn fetch(
    connector: &Connector,
    endpoint: &str,
    path: &Path,
    timeout: Duration,
) -> anyhow::Result<u64> {
    let mut client = connector
        .connect(&[endpoint.to_string()], timeout)
        .await
        .with_context(|| format!("cannot reach etcd at {endpoint}"))?;
    let mut stream = client
        .snapshot()
        .await
        .map_err(EtcdError::from)
        .context("etcd refused the snapshot")?;
    let part = path.with_extension("part");
    let mut file = std::fs::File::create(&part)
        .with_context(|| format!("cannot create {}", part.display()))?;
    let mut bytes = Vec::new();
    while let Some(msg) = stream
        .message()
        .await
        .map_err(EtcdError::from)
        .context("the snapshot stream broke off")?
    {
        bytes.extend_from_slice(msg.blob());
    }
    if let Err(e) = verify(&bytes) {
        let _ = std::fs::remove_file(&part);
        anyhow::bail!("etcd sent a bad snapshot: {e}");
    }
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", part.display()))?;
    drop(file);
    // Read back what reached the disk before calling it a snapshot.
    let written =
        std::fs::read(&part).with_context(|| format!("cannot read back {}", part.display()))?;
    if let Err(e) = verify(&written) {
        let _ = std::fs::remove_file(&part);
        anyhow::bail!(
            "the snapshot written to {} does not verify: {e}",
            part.display()
        );
    }
    std::fs::rename(&part, path)
        .with_context(|| format!("cannot move the snapshot to {}", path.display()))?;
    Ok(written.len() as u64)
}

/// Save a verified etcd snapshot.
pub fn run_snapshot(args: SnapshotArgs) -> anyhow::Result<ExitCode> {
    let SnapshotCommand::Save {
        path,
        target,
        endpoint,
    } = args.command;
    let settings = target.settings();
    let (connector, endpoint) = match (&settings, endpoint) {
        (Ok(s), e) => (
            Connector::new(s),
            e.unwrap_or_else(|| s.local_client_url().to_string()),
        ),
        (Err(_), Some(e)) => (Connector::plain(), e),
        (Err(e), None) => {
            return Err(anyhow::anyhow!("{e:#}").context("give --endpoint or a configuration"));
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build the tokio runtime")?;
    let size = rt.block_on(fetch(&connector, &endpoint, &path, target.timeout()))?;
    println!(
        "snapshot saved to {} ({size} bytes, verified)",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_checks_size_checksum_and_magic() {
        let mut db = vec![0u8; 4096];
        db[16..20].copy_from_slice(&0xED0C_DAEDu32.to_le_bytes());
        let mut good = db.clone();
        good.extend_from_slice(&Sha256::digest(&db));
        assert!(verify(&good).is_ok());
        let mut bad = good.clone();
        bad[100] ^= 1;
        assert!(matches!(verify(&bad), Err(VerifyError::Checksum)));
        let mut nomagic = vec![0u8; 4096];
        nomagic.extend_from_slice(&Sha256::digest(vec![0u8; 4096]));
        assert!(matches!(verify(&nomagic), Err(VerifyError::Magic)));
        assert!(matches!(verify(&[0u8; 10]), Err(VerifyError::TooShort(10))));
    }
}
