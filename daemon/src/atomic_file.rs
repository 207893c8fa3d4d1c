//! The one way this daemon replaces a file: write a temp file beside it,
//! fsync it, rename it over the target. A reader sees the old or the new
//! contents, never a mix or a truncated file, even across a crash.

use std::io::Write;
use std::path::{Path, PathBuf};

/// How much a completed [`write`] survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replace {
    /// The contents are on disk before the rename, but the rename itself may
    /// be lost in a crash: the previous complete file then remains. For
    /// files rewritten every few seconds whose age tells a reader they are
    /// stale (the report), where a directory fsync would double the cost.
    Fast,
    /// The rename is on disk too (the directory is fsynced), and missing
    /// parent directories are created: for state that decisions are made on
    /// after a reboot (state files, etcd's configuration, the PID file).
    Durable,
}

/// A file that could not be replaced. Each message names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The path names no file.
    #[error("{} has no file name", path.display())]
    NoFileName {
        /// The path.
        path: PathBuf,
    },
    /// The parent directory could not be created or synced.
    #[error("cannot create or sync directory {}: {err}", dir.display())]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// The temp file could not be created.
    #[error("cannot create {}: {err}", tmp.display())]
    Create {
        /// The temp file.
        tmp: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// The temp file could not be written or synced.
    #[error("cannot write {}: {err}", tmp.display())]
    Write {
        /// The temp file.
        tmp: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// The temp file could not replace the target.
    #[error("cannot rename {} to {}: {err}", tmp.display(), path.display())]
    Rename {
        /// The temp file.
        tmp: PathBuf,
        /// The target.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
}

impl From<WriteError> for std::io::Error {
    /// The OS error's kind, with the message naming the file.
    fn from(e: WriteError) -> Self {
        let kind = match &e {
            WriteError::NoFileName { .. } => std::io::ErrorKind::InvalidInput,
            WriteError::Dir { err, .. }
            | WriteError::Create { err, .. }
            | WriteError::Write { err, .. }
            | WriteError::Rename { err, .. } => err.kind(),
        };
        std::io::Error::new(kind, e.to_string())
    }
}

/// Replace `path` with `data` via a temp file in the same directory (the
/// rename must not cross filesystems). The temp name is hidden and carries
/// the process id, so two writers never share one; it is removed on failure.
/// The file's mode is what the process umask leaves of 0666.
pub(crate) fn write(path: &Path, data: &[u8], how: Replace) -> Result<(), WriteError> {
    replace(path, data, how, None)
}

/// [`write`], with the file's mode set to `mode` whatever the umask: for
/// files other users read (the report), written by a service whose umask
/// keeps everything else private.
pub(crate) fn write_with_mode(
    path: &Path,
    data: &[u8],
    how: Replace,
    mode: u32,
) -> Result<(), WriteError> {
    replace(path, data, how, Some(mode))
}

fn replace(path: &Path, data: &[u8], how: Replace, mode: Option<u32>) -> Result<(), WriteError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| WriteError::NoFileName {
        path: path.to_path_buf(),
    })?;
    if how == Replace::Durable {
        std::fs::create_dir_all(&dir).map_err(|err| WriteError::Dir {
            dir: dir.clone(),
            err,
        })?;
    }
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> Result<(), WriteError> {
        let mut f = std::fs::File::create(&tmp).map_err(|err| WriteError::Create {
            tmp: tmp.clone(),
            err,
        })?;
        if let Some(mode) = mode {
            use std::os::unix::fs::PermissionsExt;
            // fchmod, unlike the mode given at creation, is not narrowed by
            // the umask; set before the rename, so the file never appears
            // under its name with another mode.
            f.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(|err| WriteError::Write {
                    tmp: tmp.clone(),
                    err,
                })?;
        }
        f.write_all(data)
            .and_then(|()| f.sync_all())
            .map_err(|err| WriteError::Write {
                tmp: tmp.clone(),
                err,
            })?;
        std::fs::rename(&tmp, path).map_err(|err| WriteError::Rename {
            tmp: tmp.clone(),
            path: path.to_path_buf(),
            err,
        })
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    if how == Replace::Durable {
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|err| WriteError::Dir { dir, err })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_leaves_no_temp_file() {
        for how in [Replace::Fast, Replace::Durable] {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("r.json");
            write(&p, b"one", how).unwrap();
            write(&p, b"two", how).unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
            assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        }
    }

    #[test]
    fn only_durable_creates_the_directory() {
        let d = tempfile::tempdir().unwrap();
        // Fast: an error naming the temp file, and nothing left behind.
        let e = write(&d.path().join("no/r.json"), b"x", Replace::Fast).unwrap_err();
        assert!(e.to_string().starts_with("cannot create "), "{e}");
        assert!(!d.path().join("no").exists());
        let p = d.path().join("a/b/state.json");
        write(&p, b"x", Replace::Durable).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
        let io: std::io::Error = write(Path::new("/"), b"x", Replace::Fast)
            .unwrap_err()
            .into();
        assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    }

    #[test]
    fn the_given_mode_holds_under_a_private_umask() {
        use nix::sys::stat::{Mode, umask};
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let shared = d.path().join("report.json");
        let private = d.path().join("state.json");
        // The shipped unit's umask; restored before any assertion can fail.
        let old = umask(Mode::from_bits_truncate(0o077));
        let r1 = write_with_mode(&shared, b"x", Replace::Fast, 0o644);
        let r2 = write(&private, b"x", Replace::Fast);
        umask(old);
        r1.unwrap();
        r2.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&shared), 0o644);
        assert_eq!(mode(&private), 0o600);
    }
}
