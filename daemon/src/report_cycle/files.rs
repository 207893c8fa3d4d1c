//! The files a cycle reads: capped and checked for UTF-8 (the CIB and
//! Corosync's configuration may be named by an operator), and the previous
//! report, whose trouble is only a warning.

use std::io::Read;
use std::path::{Path, PathBuf};

use crm_xml::report::Report;

/// A file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It could not be opened.
    #[error("cannot open {}: {err}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// It could not be read.
    #[error("cannot read {}: {err}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        err: std::io::Error,
    },
    /// It is larger than the cap.
    #[error("{} is larger than {max} bytes (--max-output)", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        max: usize,
    },
    /// It is not UTF-8.
    #[error("{} is not UTF-8: {err}", path.display())]
    Utf8 {
        /// The file.
        path: PathBuf,
        /// Where the bad byte is.
        err: std::string::FromUtf8Error,
    },
}

/// Read a file, refusing more than `max` bytes and non-UTF-8 content.
pub(crate) fn read_capped(path: &Path, max: usize) -> Result<String, ReadError> {
    let file = std::fs::File::open(path).map_err(|err| ReadError::Open {
        path: path.to_path_buf(),
        err,
    })?;
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    file.take(limit)
        .read_to_end(&mut buf)
        .map_err(|err| ReadError::Read {
            path: path.to_path_buf(),
            err,
        })?;
    if buf.len() > max {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            max,
        });
    }
    String::from_utf8(buf).map_err(|err| ReadError::Utf8 {
        path: path.to_path_buf(),
        err,
    })
}

/// The previous report, if there is one. A missing file is normal (first
/// run); an unreadable or invalid one is a warning and ignored, because
/// refusing to write a fresh report would only make the status go stale.
pub(crate) fn read_previous(path: &Path, warn: &mut dyn FnMut(&str)) -> Option<Report> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            warn(&format!(
                "cannot read previous report {}: {e}",
                path.display()
            ));
            return None;
        }
    };
    match Report::from_json(&text) {
        Ok(r) => Some(r),
        Err(e) => {
            warn(&format!("previous report {} ignored: {e}", path.display()));
            None
        }
    }
}
