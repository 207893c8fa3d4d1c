//! Checking an etcd snapshot file: a bbolt database followed by the SHA-256
//! of that database, as `etcd-warden snapshot save` writes it and as
//! `recover restore-snapshot` reads it back before restoring it.

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use sha2::{Digest, Sha256};

/// Why a snapshot file is not trustworthy.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VerifyError {
    /// Too short to hold a database and its checksum.
    #[error("the snapshot is too short ({0} bytes)")]
    TooShort(u64),
    /// The SHA-256 trailer does not match.
    #[error("the snapshot's SHA-256 checksum does not match its contents")]
    Checksum,
    /// Not a bbolt database.
    #[error("the snapshot is not a bbolt database (bad magic)")]
    Magic,
}

/// Size of the SHA-256 trailer etcd appends.
const SUM_LEN: usize = 32;
/// One bbolt page at least.
const MIN_DB_LEN: u64 = 4096;

/// Checks a snapshot chunk by chunk, as it streams in or is read back: a
/// bbolt database followed by the SHA-256 of that database. Memory use is
/// constant, whatever the database size.
#[derive(Default)]
pub(crate) struct Verifier {
    hasher: Sha256,
    /// The last (up to) 32 bytes seen: the trailer, once the stream ends.
    tail: Vec<u8>,
    /// The first 20 bytes: the bbolt page header and the meta magic.
    head: Vec<u8>,
    len: u64,
}

impl Verifier {
    /// Bytes fed so far.
    pub(crate) fn received(&self) -> u64 {
        self.len
    }

    /// Feed the next bytes.
    pub(crate) fn update(&mut self, chunk: &[u8]) {
        self.len += chunk.len() as u64;
        if self.head.len() < 20 {
            let n = (20 - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..n]);
        }
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > SUM_LEN {
            let n = self.tail.len() - SUM_LEN;
            self.hasher.update(&self.tail[..n]);
            self.tail.drain(..n);
        }
    }

    /// The verdict on everything fed; the total size when sound.
    pub(crate) fn finish(self) -> Result<u64, VerifyError> {
        if self.len < MIN_DB_LEN + SUM_LEN as u64 {
            return Err(VerifyError::TooShort(self.len));
        }
        if self.hasher.finalize().as_slice() != self.tail.as_slice() {
            return Err(VerifyError::Checksum);
        }
        // bbolt page header (16 bytes), then the meta page's magic, little endian.
        let h = &self.head;
        if u32::from_le_bytes([h[16], h[17], h[18], h[19]]) != 0xED0C_DAED {
            return Err(VerifyError::Magic);
        }
        Ok(self.len)
    }
}

/// Check a snapshot as etcd sends it: a bbolt database followed by the
/// SHA-256 of that database.
#[cfg(test)]
pub(crate) fn verify(bytes: &[u8]) -> Result<(), VerifyError> {
    let mut v = Verifier::default();
    v.update(bytes);
    v.finish().map(|_| ())
}

/// Check a snapshot file on disk, reading it in chunks.
pub(crate) fn verify_file(path: &Path) -> anyhow::Result<u64> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut v = Verifier::default();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        v.update(&buf[..n]);
    }
    v.finish()
        .with_context(|| format!("{} is not a sound etcd snapshot", path.display()))
}
