//! `etcd-warden snapshot save PATH` or `snapshot save --dir DIR [--keep N]`:
//! stream a snapshot from the local etcd member, verify it, then move it into
//! place.
//!
//! etcd appends the SHA-256 of the database to the snapshot stream. The
//! stream goes to `<target>.part` beside the target, created 0600 (a
//! snapshot holds every key, secrets included, as etcdctl's does), hashed on
//! the way; once complete, its checksum and bbolt header are checked, the
//! file is fsynced and read back from disk and checked again, and only then
//! renamed to the target. On any failure the `.part` file is removed, so a
//! file under the target name is always a whole, verified snapshot.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::target::Target;
use crate::etcd::{Connector, EtcdError};

/// Arguments: Save a verified etcd snapshot.
#[derive(Debug, clap::Args)]
pub(crate) struct SnapshotArgs {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: SnapshotCommand,
}

/// Snapshot subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SnapshotCommand {
    /// Save a snapshot to PATH, or into --dir under a name holding this
    /// node's name and the UTC time (verified before it gets that name;
    /// written 0600).
    Save(SaveArgs),
}

/// `snapshot save` arguments.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("destination").required(true).args(["path", "dir"])))]
pub(crate) struct SaveArgs {
    /// Where to write it (an existing file there is replaced, once the new
    /// snapshot is verified).
    pub(crate) path: Option<PathBuf>,
    /// Write into this directory (created 0700 if missing) as
    /// `etcd-warden-snapshot-<node>-<YYYYMMDDTHHMMSSZ>.db`.
    #[arg(long, value_name = "DIR", conflicts_with = "path")]
    pub(crate) dir: Option<PathBuf>,
    /// After a successful save into --dir, keep the newest N snapshots of
    /// this node that this command named there and remove older ones. Files
    /// with any other name are never touched.
    #[arg(long, value_name = "N", requires = "dir", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) keep: Option<u32>,
    /// Where etcd and its TLS settings are found.
    #[command(flatten)]
    pub(crate) target: Target,
    /// etcd client URL (default: this node's, from the configuration).
    #[arg(long)]
    pub(crate) endpoint: Option<String>,
}

pub(crate) use crate::snapshot_file::{Verifier, verify_file};

/// The `.part` file beside `target`: removed when dropped unless kept, so
/// that every failure (an error or a panic) leaves no partial snapshot.
struct PartFile {
    path: PathBuf,
    armed: bool,
}

impl PartFile {
    fn beside(target: &Path) -> anyhow::Result<(Self, std::fs::File)> {
        let mut name = target
            .file_name()
            .with_context(|| format!("{} does not name a file", target.display()))?
            .to_os_string();
        name.push(".part");
        let path = target.with_file_name(name);
        // A leftover of an interrupted save is ours and incomplete.
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", path.display())),
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        // The mode above is filtered by the umask, which can only narrow it;
        // set it explicitly anyway so the file is exactly 0600.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot chmod {}", path.display()))?;
        Ok((Self { path, armed: true }, file))
    }
}

impl Drop for PartFile {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Prints a progress line at most every `every`, so that a long save shows
/// that it moves and a short one prints nothing extra.
struct Progress {
    start: Instant,
    last: Instant,
    every: Duration,
}

impl Progress {
    fn new(every: Duration) -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            every,
        }
    }

    fn tick(&mut self, line: impl FnOnce(Duration) -> String) {
        if self.last.elapsed() >= self.every {
            self.last = Instant::now();
            eprintln!("{}", line(self.start.elapsed()));
        }
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

async fn fetch(
    connector: &Connector,
    endpoint: &str,
    target: &Path,
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
    let (mut part, mut file) = PartFile::beside(target)?;
    let mut v = Verifier::default();
    let mut progress = Progress::new(Duration::from_secs(5));
    while let Some(msg) = stream
        .message()
        .await
        .map_err(EtcdError::from)
        .context("the snapshot stream broke off")?
    {
        file.write_all(msg.blob())
            .with_context(|| format!("cannot write {}", part.path.display()))?;
        v.update(msg.blob());
        let (got, left) = (v.received(), msg.remaining_bytes());
        progress.tick(|t| {
            let total = got + left;
            format!(
                "snapshot: {} of {} received ({}%), {}s",
                mib(got),
                mib(total),
                (got * 100).checked_div(total).unwrap_or(100),
                t.as_secs()
            )
        });
    }
    if let Err(e) = v.finish() {
        bail!("etcd sent a bad snapshot: {e}");
    }
    file.sync_all()
        .with_context(|| format!("cannot fsync {}", part.path.display()))?;
    drop(file);
    // Read back what reached the disk before calling it a snapshot.
    if progress.start.elapsed() >= progress.every {
        eprintln!("snapshot: received; verifying what reached the disk");
    }
    let size = verify_file(&part.path).with_context(|| {
        format!(
            "the snapshot written to {} does not verify",
            part.path.display()
        )
    })?;
    std::fs::rename(&part.path, target)
        .with_context(|| format!("cannot move the snapshot to {}", target.display()))?;
    part.armed = false;
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot fsync {}", dir.display()))?;
    }
    Ok(size)
}

/// File names this command gives in `--dir`: a fixed prefix, the node name
/// (characters other than `[A-Za-z0-9._-]` replaced by `_`), the UTC time.
const PREFIX: &str = "etcd-warden-snapshot-";
const SUFFIX: &str = ".db";
/// `YYYYMMDDTHHMMSSZ`.
const STAMP_LEN: usize = 16;

fn file_node_name(node: &str) -> String {
    node.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn stamp(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// The name of a snapshot of `node` taken at `t`.
pub(crate) fn snapshot_name(node: &str, t: time::OffsetDateTime) -> String {
    format!("{PREFIX}{}-{}{SUFFIX}", file_node_name(node), stamp(t))
}

/// The time stamp of `name` when it is a name [`snapshot_name`] gives for
/// `node`; `None` for every other name.
fn stamp_of<'a>(name: &'a str, node: &str) -> Option<&'a str> {
    let rest = name
        .strip_prefix(PREFIX)?
        .strip_prefix(file_node_name(node).as_str())?
        .strip_prefix('-')?
        .strip_suffix(SUFFIX)?;
    let b = rest.as_bytes();
    let ok = b.len() == STAMP_LEN
        && b.iter().enumerate().all(|(i, c)| match i {
            8 => *c == b'T',
            15 => *c == b'Z',
            _ => c.is_ascii_digit(),
        });
    ok.then_some(rest)
}

/// The snapshots of `node` in `dir` that this command named, oldest first.
pub(crate) fn named_snapshots(dir: &Path, node: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut v: Vec<(String, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let e = e.with_context(|| format!("cannot list {}", dir.display()))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(s) = stamp_of(name, node)
            && e.file_type().is_ok_and(|t| t.is_file())
        {
            v.push((s.to_owned(), e.path()));
        }
    }
    v.sort();
    Ok(v.into_iter().map(|(_, p)| p).collect())
}

/// Keep the newest `keep` of `node`'s named snapshots in `dir`, never
/// `just_saved`; returns what was removed.
pub(crate) fn prune(
    dir: &Path,
    node: &str,
    keep: u32,
    just_saved: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let all = named_snapshots(dir, node)?;
    let excess = all.len().saturating_sub(keep as usize);
    let mut removed = Vec::new();
    for p in all.into_iter().take(excess) {
        if p == just_saved {
            continue;
        }
        std::fs::remove_file(&p).with_context(|| format!("cannot remove {}", p.display()))?;
        removed.push(p);
    }
    Ok(removed)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Save a verified etcd snapshot.
pub(crate) fn run_snapshot(args: SnapshotArgs) -> anyhow::Result<ExitCode> {
    let SnapshotCommand::Save(a) = args.command;
    // Without any configuration, --endpoint alone will do; a configuration
    // that is there but refused is an error either way.
    let (settings, endpoint) = match (a.target.settings(), a.endpoint) {
        (Ok(s), e) => {
            let endpoint = e.unwrap_or_else(|| s.local_client_url().to_string());
            (Some(s), endpoint)
        }
        (Err(e), Some(endpoint)) if crate::config::is_absent(&e, &a.target.config) => {
            (None, endpoint)
        }
        (Err(e), None) => return Err(e.context("give --endpoint or a configuration")),
        (Err(e), Some(_)) => return Err(e),
    };
    let connector = settings
        .as_ref()
        .map_or_else(Connector::plain, Connector::new);
    let node = match &settings {
        Some(s) => s.node_name.clone(),
        None => hostname(),
    };
    let path = match (&a.path, &a.dir) {
        (Some(p), _) => p.clone(),
        (None, Some(dir)) => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let p = dir.join(snapshot_name(&node, time::OffsetDateTime::now_utc()));
            if p.exists() {
                bail!(
                    "{} already exists: one snapshot per second at most",
                    p.display()
                );
            }
            p
        }
        (None, None) => bail!("give PATH or --dir"),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build the tokio runtime")?;
    let size = rt.block_on(fetch(&connector, &endpoint, &path, a.target.timeout()))?;
    println!(
        "snapshot saved to {} ({size} bytes, verified)",
        path.display()
    );
    if let (Some(dir), Some(keep)) = (&a.dir, a.keep) {
        for p in prune(dir, &node, keep, &path)? {
            println!("removed {} (--keep {keep})", p.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot_file::{VerifyError, verify};
    use sha2::{Digest, Sha256};
    use time::macros::datetime;

    fn sound(db_len: usize) -> Vec<u8> {
        let mut db = vec![7u8; db_len];
        db[16..20].copy_from_slice(&0xED0C_DAEDu32.to_le_bytes());
        let mut good = db.clone();
        good.extend_from_slice(&Sha256::digest(&db));
        good
    }

    #[test]
    fn verify_checks_size_checksum_and_magic() {
        let good = sound(4096);
        assert!(verify(&good).is_ok());
        let mut bad = good.clone();
        bad[100] ^= 1;
        assert!(matches!(verify(&bad), Err(VerifyError::Checksum)));
        let mut nomagic = vec![0u8; 4096];
        nomagic.extend_from_slice(&Sha256::digest(vec![0u8; 4096]));
        assert!(matches!(verify(&nomagic), Err(VerifyError::Magic)));
        assert!(matches!(verify(&[0u8; 10]), Err(VerifyError::TooShort(10))));
    }

    #[test]
    fn the_streaming_verifier_agrees_whatever_the_chunking() {
        let good = sound(3 * 4096 + 17);
        for chunk in [1, 7, 31, 32, 33, 4096, 100_000] {
            let mut v = Verifier::default();
            for c in good.chunks(chunk) {
                v.update(c);
            }
            assert_eq!(v.finish().unwrap(), good.len() as u64, "chunk {chunk}");
            let mut bad = good.clone();
            bad[5000] ^= 0x80;
            let mut v = Verifier::default();
            for c in bad.chunks(chunk) {
                v.update(c);
            }
            assert!(matches!(v.finish(), Err(VerifyError::Checksum)));
        }
    }

    #[test]
    fn names_carry_node_and_utc_time_and_only_ours_are_recognised() {
        let t = datetime!(2026-12-01 14:05:09 +02:00);
        let n = snapshot_name("nodeA", t);
        assert_eq!(n, "etcd-warden-snapshot-nodeA-20261201T120509Z.db");
        assert_eq!(stamp_of(&n, "nodeA"), Some("20261201T120509Z"));
        assert_eq!(stamp_of(&n, "nodeB"), None, "another node's");
        assert_eq!(stamp_of(&n, "node"), None, "a prefix of the name");
        assert_eq!(stamp_of(&format!("{n}.part"), "nodeA"), None);
        assert_eq!(
            stamp_of("etcd-warden-snapshot-nodeA-latest.db", "nodeA"),
            None
        );
        assert_eq!(
            snapshot_name("a/b c", t),
            "etcd-warden-snapshot-a_b_c-20261201T120509Z.db"
        );
    }

    #[test]
    fn retention_keeps_the_newest_of_ours_and_never_touches_others() {
        let d = tempfile::tempdir().unwrap();
        let touch = |n: &str| {
            std::fs::write(d.path().join(n), b"x").unwrap();
            d.path().join(n)
        };
        let times = [
            datetime!(2026-12-01 10:00:00 UTC),
            datetime!(2026-12-01 11:00:00 UTC),
            datetime!(2026-11-30 23:00:00 UTC),
            datetime!(2026-12-02 00:00:00 UTC),
        ];
        let ours: Vec<PathBuf> = times
            .iter()
            .map(|t| touch(&snapshot_name("n1", *t)))
            .collect();
        let others = [
            touch(&snapshot_name("n2", times[0])),
            touch("manual.db"),
            touch(&format!("{}.part", snapshot_name("n1", times[0]))),
            touch("etcd-warden-snapshot-n1-old.db"),
        ];
        let removed = prune(d.path(), "n1", 2, &ours[3]).unwrap();
        assert_eq!(removed, vec![ours[2].clone(), ours[0].clone()]);
        assert!(ours[1].exists() && ours[3].exists());
        for o in &others {
            assert!(o.exists(), "{} was removed", o.display());
        }
        // Never the snapshot just saved, even with an older time in its name.
        let removed = prune(d.path(), "n1", 1, &ours[1]).unwrap();
        assert!(removed.is_empty(), "{removed:?}");
    }

    #[test]
    fn a_part_file_is_0600_and_removed_unless_kept() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("snap.db");
        std::fs::write(d.path().join("snap.db.part"), b"leftover").unwrap();
        let (part, file) = PartFile::beside(&target).unwrap();
        assert_eq!(part.path, d.path().join("snap.db.part"));
        let mode = file.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read(&part.path).unwrap(), b"", "leftover replaced");
        drop(file);
        drop(part);
        assert!(!d.path().join("snap.db.part").exists());
    }
}
