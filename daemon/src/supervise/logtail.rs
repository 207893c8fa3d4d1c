//! etcd's log file, followed by offset and forwarded to tracing.
//!
//! The process backend points etcd's log (`log-outputs`) and its stdout and
//! stderr at a file instead of a pipe: a pipe dies with the daemon, and a Go
//! program writing to a broken pipe on fd 1 or 2 is killed by SIGPIPE, so an
//! etcd on a pipe cannot outlive a daemon restart. A file can; the daemon
//! reads what was appended since its last look.
//!
//! The file is kept bounded in two ways: at an etcd start (when no etcd holds
//! it) a file past the limit is renamed to `<file>.1`; while etcd runs, a file
//! past the limit is copied to `<file>.1` and truncated in place. Truncation
//! is safe because etcd (zap) and the inherited stdout/stderr descriptors all
//! write with `O_APPEND`: the next write lands at the new end, offset 0.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The longest line forwarded as it is; the rest of a longer line is
/// dropped (and the cut is marked), so a line without a newline cannot grow
/// the daemon's memory.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// The most one [`LogTail::poll`] reads; the rest waits for the next call,
/// so a burst of log output never stalls the caller for long.
const MAX_READ_PER_POLL: u64 = 1024 * 1024;

/// The size past which the file is rotated (64 MiB).
pub(crate) const ROTATE_BYTES: u64 = 64 * 1024 * 1024;

/// Follows one log file by offset. Copes with the file being truncated
/// (size below the offset: read again from 0), replaced (another inode at
/// the path: finish the old one, then read the new one from 0) and missing.
#[derive(Debug)]
pub(crate) struct LogTail {
    path: PathBuf,
    /// The file being read, with its (device, inode).
    file: Option<(File, (u64, u64))>,
    offset: u64,
    /// The start of a line whose newline has not been written yet.
    partial: Vec<u8>,
    /// The current line was cut at [`MAX_LINE`]: drop bytes until its end.
    cutting: bool,
}

impl LogTail {
    /// Follow `path` from its current end: what is in it now was written
    /// before this daemon looked (by an earlier etcd, or before a daemon
    /// restart) and stays in the file for whoever reads it.
    pub(crate) fn from_end(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let mut t = LogTail {
            path,
            file: None,
            offset: 0,
            partial: Vec::new(),
            cutting: false,
        };
        if let Ok(f) = File::open(&t.path)
            && let Ok(m) = f.metadata()
        {
            t.offset = m.len();
            t.file = Some((f, (m.dev(), m.ino())));
        }
        t
    }

    /// The followed file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Read what was appended since the last call and hand every complete
    /// line to `sink`. Returns the number of lines handed over.
    pub(crate) fn poll(&mut self, sink: &mut dyn FnMut(&str)) -> io::Result<usize> {
        let mut lines = 0;
        let at_path = match std::fs::metadata(&self.path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let same_file = match (&self.file, &at_path) {
            (Some((_, id)), Some(m)) => *id == (m.dev(), m.ino()),
            _ => false,
        };
        if !same_file {
            // Renamed away or deleted: what the old file got since the last
            // look (an etcd's last words) is still readable through the
            // descriptor; then start over on whatever is at the path now.
            if self.file.is_some() {
                lines += self.read_available(sink, u64::MAX)?;
                self.flush_partial(sink, &mut lines);
            }
            self.file = None;
            self.offset = 0;
            match File::open(&self.path) {
                Ok(f) => {
                    let m = f.metadata()?;
                    self.file = Some((f, (m.dev(), m.ino())));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(lines),
                Err(e) => return Err(e),
            }
        }
        if let Some((f, _)) = &self.file
            && f.metadata()?.len() < self.offset
        {
            // Truncated in place: the new content starts at 0.
            self.flush_partial(sink, &mut lines);
            self.offset = 0;
        }
        lines += self.read_available(sink, MAX_READ_PER_POLL)?;
        Ok(lines)
    }

    /// Read from the offset to the end of the open file (at most `limit`
    /// bytes) and split it into lines.
    fn read_available(&mut self, sink: &mut dyn FnMut(&str), limit: u64) -> io::Result<usize> {
        let Some((f, _)) = &self.file else {
            return Ok(0);
        };
        let mut lines = 0;
        let mut buf = vec![0u8; 64 * 1024];
        let mut read = 0u64;
        while read < limit {
            let n = f.read_at(&mut buf, self.offset)?;
            if n == 0 {
                break;
            }
            self.offset += n as u64;
            read += n as u64;
            for chunk in buf[..n].split_inclusive(|b| *b == b'\n') {
                let (body, ended) = match chunk.strip_suffix(b"\n") {
                    Some(b) => (b, true),
                    None => (chunk, false),
                };
                if !self.cutting {
                    let room = MAX_LINE - self.partial.len();
                    if body.len() > room {
                        self.partial.extend_from_slice(&body[..room]);
                        self.partial.extend_from_slice(b" [line cut]");
                        emit(&self.partial, sink);
                        lines += 1;
                        self.partial.clear();
                        self.cutting = true;
                    } else {
                        self.partial.extend_from_slice(body);
                    }
                }
                if ended {
                    if !self.cutting {
                        emit(&self.partial, sink);
                        lines += 1;
                    }
                    self.partial.clear();
                    self.cutting = false;
                }
            }
        }
        Ok(lines)
    }

    /// Hand over an unterminated last line (its file is going away).
    fn flush_partial(&mut self, sink: &mut dyn FnMut(&str), lines: &mut usize) {
        if !self.partial.is_empty() && !self.cutting {
            emit(&self.partial, sink);
            *lines += 1;
        }
        self.partial.clear();
        self.cutting = false;
    }

    /// Keep the file under `limit` while a writer holds it open: read what
    /// is there, copy the file to `<file>.1` and truncate it. Returns whether
    /// it did. Lines written between the copy and the truncation are lost
    /// (a window of one file copy, once per `limit` bytes).
    pub(crate) fn bound(&mut self, limit: u64, sink: &mut dyn FnMut(&str)) -> io::Result<bool> {
        let len = match std::fs::metadata(&self.path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        if len <= limit {
            return Ok(false);
        }
        self.poll(sink)?;
        std::fs::copy(&self.path, rotated(&self.path))?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)?
            .set_len(0)?;
        self.flush_partial(sink, &mut 0);
        self.offset = 0;
        Ok(true)
    }
}

/// `<file>.1`, the one older generation kept.
pub(crate) fn rotated(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".1");
    PathBuf::from(s)
}

/// Rename the file to `<file>.1` (replacing an older one) when it is larger
/// than `limit`. Only for when no writer holds it (before an etcd start).
pub(crate) fn rotate_if_larger(path: &Path, limit: u64) -> io::Result<bool> {
    match std::fs::metadata(path) {
        Ok(m) if m.len() > limit => {
            std::fs::rename(path, rotated(path))?;
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn emit(line: &[u8], sink: &mut dyn FnMut(&str)) {
    sink(&String::from_utf8_lossy(line));
}

/// Forward one of etcd's log lines (zap JSON, or a Go runtime message on
/// stderr) to tracing at etcd's own level.
pub(crate) fn forward(line: &str) {
    let level = serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("level").and_then(|l| l.as_str()).map(str::to_owned));
    match level.as_deref() {
        Some("error" | "fatal" | "panic" | "dpanic") => tracing::error!(target: "etcd", "{line}"),
        Some("warn") => tracing::warn!(target: "etcd", "{line}"),
        Some("debug") => tracing::debug!(target: "etcd", "{line}"),
        _ => tracing::info!(target: "etcd", "{line}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(p: &Path, s: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap();
        f.write_all(s.as_bytes()).unwrap();
    }

    fn collect(t: &mut LogTail) -> Vec<String> {
        let mut out = vec![];
        t.poll(&mut |l| out.push(l.to_string())).unwrap();
        out
    }

    #[test]
    fn starts_at_the_end_and_follows_appends_line_by_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etcd.log");
        append(&p, "old 1\nold 2\n");
        let mut t = LogTail::from_end(&p);
        assert!(collect(&mut t).is_empty());
        append(&p, "a\nb");
        assert_eq!(collect(&mut t), ["a"]);
        // The unterminated line waits for its newline.
        append(&p, "c\n");
        assert_eq!(collect(&mut t), ["bc"]);
        assert!(collect(&mut t).is_empty());
    }

    #[test]
    fn a_missing_file_is_followed_once_it_appears() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etcd.log");
        let mut t = LogTail::from_end(&p);
        assert!(collect(&mut t).is_empty());
        append(&p, "first\n");
        assert_eq!(collect(&mut t), ["first"]);
    }

    #[test]
    fn truncation_restarts_at_zero() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etcd.log");
        let mut t = LogTail::from_end(&p);
        append(&p, "one long line before\n");
        assert_eq!(collect(&mut t), ["one long line before"]);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(0)
            .unwrap();
        append(&p, "after\n");
        assert_eq!(collect(&mut t), ["after"]);
    }

    #[test]
    fn rotation_by_rename_finishes_the_old_file_then_reads_the_new() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etcd.log");
        append(&p, "x\n");
        let mut t = LogTail::from_end(&p);
        // Written after the last look, then the file is renamed away: the
        // last words are still forwarded, the new file from its start.
        append(&p, "last words\nno newline");
        assert!(rotate_if_larger(&p, 1).unwrap());
        assert!(!rotate_if_larger(&p, 1).unwrap(), "nothing left to rotate");
        append(&p, "new file\n");
        assert_eq!(collect(&mut t), ["last words", "no newline", "new file"]);
        assert_eq!(
            std::fs::read_to_string(rotated(&p)).unwrap(),
            "x\nlast words\nno newline"
        );
    }

    #[test]
    fn rotate_if_larger_keeps_a_small_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etcd.log");
        assert!(!rotate_if_larger(&p, 10).unwrap());
        append(&p, "short\n");
        assert!(!rotate_if_larger(&p, 10).unwrap());
        assert!(p.exists() && !rotated(&p).exists());
    }

    #[test]
    fn bound_copies_and_truncates_a_file_held_open_with_o_append() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etcd.log");
        // The writer keeps its descriptor, as etcd does.
        let mut w = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .unwrap();
        let mut t = LogTail::from_end(&p);
        w.write_all(b"0123456789\nabc\n").unwrap();
        let mut seen = vec![];
        assert!(!t.bound(100, &mut |l| seen.push(l.to_string())).unwrap());
        assert!(t.bound(5, &mut |l| seen.push(l.to_string())).unwrap());
        assert_eq!(seen, ["0123456789", "abc"]);
        assert_eq!(
            std::fs::read_to_string(rotated(&p)).unwrap(),
            "0123456789\nabc\n"
        );
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 0);
        // O_APPEND: the writer's next line starts at 0, not at a hole.
        w.write_all(b"after\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "after\n");
        assert_eq!(collect(&mut t), ["after"]);
    }

    #[test]
    fn an_overlong_line_is_cut_and_memory_stays_bounded() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etcd.log");
        let mut t = LogTail::from_end(&p);
        let long = "x".repeat(MAX_LINE * 3);
        append(&p, &long[..MAX_LINE / 2]);
        assert!(collect(&mut t).is_empty());
        append(&p, &long[MAX_LINE / 2..]);
        let got = collect(&mut t);
        assert_eq!(got.len(), 1);
        assert!(got[0].ends_with(" [line cut]"));
        assert_eq!(got[0].len(), MAX_LINE + " [line cut]".len());
        assert!(t.partial.capacity() <= 2 * MAX_LINE + 64);
        // The rest of the long line is dropped; the next line is whole.
        append(&p, "tail of it\nnext\n");
        assert_eq!(collect(&mut t), ["next"]);
    }

    #[test]
    fn a_large_burst_is_read_over_several_polls() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("etcd.log");
        let mut t = LogTail::from_end(&p);
        let line = format!("{}\n", "y".repeat(1023));
        append(&p, &line.repeat(2048)); // 2 MiB
        let first = collect(&mut t).len();
        assert!(first > 0 && first < 2048, "{first}");
        let second = collect(&mut t).len();
        assert_eq!(first + second, 2048);
    }
}
