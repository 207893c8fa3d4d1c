//! How far a member directory's data goes, read from etcd's own files: the
//! raft index of its last log entry. Archives are ordered by it (with the
//! epoch and cluster of their state file), never by the clock.
//!
//! The read is bounded: the names of the snapshot files and of the WAL
//! segments (`<term>-<index>.snap`, `<seq>-<index>.wal`, hex of fixed
//! width), and the records of the newest WAL segment only, up to its used
//! end (a segment is preallocated, 64 MiB, and cut when full). Nothing is
//! decoded beyond each record's type and index.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

/// WAL record types (etcd's `wal/walpb`).
const ENTRY_RECORD: u64 = 2;
const SNAPSHOT_RECORD: u64 = 5;

/// The raft index of the newest entry `member` holds: the last entry of
/// its write-ahead log, or the index a snapshot (file or WAL record) or
/// the newest segment's name vouches for when that is further. `None`
/// when none of them names an index (no data, or a log never written).
pub(crate) fn last_index(member: &Path) -> Option<u64> {
    newest_snapshot_file(&member.join("snap")).max(wal_last_index(&member.join("wal")))
}

/// The index in the newest `<term>-<index>.snap` name.
fn newest_snapshot_file(snap: &Path) -> Option<u64> {
    std::fs::read_dir(snap)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (_term, index) = name.strip_suffix(".snap")?.split_once('-')?;
            u64::from_str_radix(index, 16).ok()
        })
        .max()
}

/// The last index the newest WAL segment holds or vouches for.
fn wal_last_index(wal: &Path) -> Option<u64> {
    let (name, start) = std::fs::read_dir(wal)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (_seq, index) = name.strip_suffix(".wal")?.split_once('-')?;
            Some((name.clone(), u64::from_str_radix(index, 16).ok()?))
        })
        .max()?;
    // A segment is named after the first entry it was cut for: the one
    // before is in an older segment.
    let before = start.checked_sub(1);
    let scanned = File::open(wal.join(name)).ok().map(scan_segment);
    let (entry, snapshot) = scanned.unwrap_or_default();
    // The last entry written is the log's end (an entry rewritten by a new
    // leader comes after the one it replaces).
    entry.or(before).max(snapshot)
}

/// The index of the last entry record and the highest snapshot record of
/// one segment, read up to its first zero frame, torn or unreadable record.
fn scan_segment(f: File) -> (Option<u64>, Option<u64>) {
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut r = BufReader::with_capacity(1 << 18, f);
    let (mut entry, mut snapshot) = (None, None);
    let mut pos: u64 = 0;
    let mut buf = Vec::new();
    loop {
        let mut head = [0u8; 8];
        if r.read_exact(&mut head).is_err() {
            break;
        }
        let Some(size) = frame_size(u64::from_le_bytes(head)) else {
            break;
        };
        pos += 8;
        let total = size.record + size.padding;
        if total > len.saturating_sub(pos) {
            break;
        }
        let Ok(n) = usize::try_from(total) else {
            break;
        };
        buf.resize(n, 0);
        if r.read_exact(&mut buf).is_err() {
            break;
        }
        pos += total;
        let Some((kind, data)) = buf.get(..n - size.padding as usize).and_then(record) else {
            break;
        };
        match kind {
            ENTRY_RECORD => match field_varint(data, 3) {
                Some(i) => entry = Some(i),
                None => break,
            },
            SNAPSHOT_RECORD => snapshot = snapshot.max(field_varint(data, 1)),
            _ => {}
        }
    }
    (entry, snapshot)
}

/// One frame's record and padding lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FrameSize {
    record: u64,
    padding: u64,
}

/// etcd's frame header: the record length in the low 56 bits; with the top
/// bit set, the padding to 8 bytes in the low 3 bits of the top byte. A
/// zero header is the preallocated rest of the segment.
fn frame_size(field: u64) -> Option<FrameSize> {
    let record = field & !(0xff << 56);
    let padding = if field >> 63 == 1 {
        (field >> 56) & 0x7
    } else {
        0
    };
    (record > 0).then_some(FrameSize { record, padding })
}

/// A WAL record (`walpb.Record`: type = 1, crc = 2, data = 3): its type and
/// data.
fn record(b: &[u8]) -> Option<(u64, &[u8])> {
    let (mut kind, mut data) = (None, &[][..]);
    let mut rest = b;
    while !rest.is_empty() {
        match next_field(&mut rest)? {
            (1, Value::Varint(v)) => kind = Some(v),
            (3, Value::Bytes(d)) => data = d,
            _ => {}
        }
    }
    Some((kind?, data))
}

/// The varint field `number` of a protobuf message (a raft entry's index is
/// field 3, a WAL snapshot's field 1).
fn field_varint(b: &[u8], number: u64) -> Option<u64> {
    let mut rest = b;
    let mut found = None;
    while !rest.is_empty() {
        if let (n, Value::Varint(v)) = next_field(&mut rest)?
            && n == number
        {
            found = Some(v);
        }
    }
    found
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The next protobuf field of `b` (number and value), advancing `b`.
fn next_field<'a>(b: &mut &'a [u8]) -> Option<(u64, Value<'a>)> {
    let key = varint(b)?;
    let value = match key & 7 {
        0 => Value::Varint(varint(b)?),
        1 | 5 => {
            let n = if key & 7 == 1 { 8 } else { 4 };
            *b = b.get(n..)?;
            Value::Fixed
        }
        2 => {
            let n = usize::try_from(varint(b)?).ok()?;
            let (d, rest) = (b.get(..n)?, b.get(n..)?);
            *b = rest;
            Value::Bytes(d)
        }
        _ => return None,
    };
    (key >> 3 > 0).then_some((key >> 3, value))
}

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// WAL record type of etcd's metadata (`etcdserverpb.Metadata`).
const METADATA_RECORD: u64 = 1;

/// The member id and cluster id of the data in `member`, from the
/// metadata record etcd writes at the head of every WAL segment
/// (`etcdserverpb.Metadata`: NodeID = 1, ClusterID = 2), read from the
/// newest segment. `None` when there is no segment or its head holds no
/// readable metadata.
pub(crate) fn ids(member: &Path) -> Option<(u64, u64)> {
    let wal = member.join("wal");
    let name = std::fs::read_dir(&wal)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".wal"))
        .max()?;
    let mut r = BufReader::new(File::open(wal.join(name)).ok()?);
    // The metadata comes right after the CRC record; a few records is
    // all this reads.
    for _ in 0..4 {
        let mut head = [0u8; 8];
        r.read_exact(&mut head).ok()?;
        let size = frame_size(u64::from_le_bytes(head))?;
        let n = usize::try_from(size.record + size.padding).ok()?;
        if n > 1 << 20 {
            return None;
        }
        let mut buf = vec![0u8; n];
        r.read_exact(&mut buf).ok()?;
        let (kind, data) = buf
            .get(..n - usize::try_from(size.padding).ok()?)
            .and_then(record)?;
        if kind == METADATA_RECORD {
            return Some((field_varint(data, 1)?, field_varint(data, 2)?));
        }
    }
    None
}

/// A WAL segment as etcd writes it, for tests: a CRC record, then one
/// entry record per index (padded frames, as etcd 3.1 and later write
/// them), then the preallocated zeros.
#[cfg(test)]
pub(crate) fn write_test_segment(wal: &Path, seq: u64, start: u64, entries: &[u64]) {
    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn frame(out: &mut Vec<u8>, kind: u64, data: &[u8]) {
        let mut rec = Vec::new();
        put_varint(&mut rec, 1 << 3);
        put_varint(&mut rec, kind);
        put_varint(&mut rec, 2 << 3);
        put_varint(&mut rec, 0x1234_5678);
        put_varint(&mut rec, (3 << 3) | 2);
        put_varint(&mut rec, data.len() as u64);
        rec.extend_from_slice(data);
        let pad = (8 - rec.len() % 8) % 8;
        let mut head = rec.len() as u64;
        if pad > 0 {
            head |= (0x80 | pad as u64) << 56;
        }
        out.extend_from_slice(&head.to_le_bytes());
        out.extend_from_slice(&rec);
        out.extend(std::iter::repeat_n(0, pad));
    }
    let mut out = Vec::new();
    frame(&mut out, 4, &[]);
    for &i in entries {
        // raftpb.Entry: Type = 1, Term = 2, Index = 3, Data = 4.
        let mut e = Vec::new();
        put_varint(&mut e, 1 << 3);
        put_varint(&mut e, 0);
        put_varint(&mut e, 2 << 3);
        put_varint(&mut e, 7);
        put_varint(&mut e, 3 << 3);
        put_varint(&mut e, i);
        put_varint(&mut e, (4 << 3) | 2);
        put_varint(&mut e, 5);
        e.extend_from_slice(b"value");
        frame(&mut out, ENTRY_RECORD, &e);
    }
    out.resize(out.len() + 4096, 0);
    std::fs::create_dir_all(wal).unwrap();
    std::fs::write(wal.join(format!("{seq:016x}-{start:016x}.wal")), out).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    #[test]
    fn the_newest_segment_holds_the_last_entry() {
        let t = tempfile::tempdir().unwrap();
        let member = t.path().join("member");
        assert_eq!(last_index(&member), None, "no data");
        let wal = member.join("wal");
        write_test_segment(&wal, 0, 0, &[1, 2, 3, 4]);
        assert_eq!(last_index(&member), Some(4));
        // A new leader's entries replace the tail: the last one written is
        // the end of the log.
        write_test_segment(&wal, 1, 5, &[5, 6, 7, 6]);
        assert_eq!(last_index(&member), Some(6));
        // A segment just cut holds no entry yet: the one before its first.
        write_test_segment(&wal, 2, 0x20, &[]);
        assert_eq!(last_index(&member), Some(0x1f));
        // A snapshot file further than the log (a learner's data).
        std::fs::create_dir_all(member.join("snap")).unwrap();
        std::fs::write(
            member.join("snap/0000000000000002-0000000000000100.snap"),
            b"x",
        )
        .unwrap();
        std::fs::write(member.join("snap/db"), b"x").unwrap();
        assert_eq!(last_index(&member), Some(0x100));
    }

    #[test]
    fn a_torn_tail_ends_the_scan() {
        let t = tempfile::tempdir().unwrap();
        let wal = t.path().join("member/wal");
        write_test_segment(&wal, 0, 0, &[1, 2, 3]);
        let seg = wal.join("0000000000000000-0000000000000000.wal");
        let mut data = std::fs::read(&seg).unwrap();
        let used = data.iter().rposition(|b| *b != 0).unwrap() + 1;
        // A frame announcing more than the file holds, then garbage.
        data[used..used + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        std::fs::write(&seg, &data).unwrap();
        assert_eq!(last_index(&t.path().join("member")), Some(3));
        data[used..used + 16].copy_from_slice(&[
            8, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ]);
        std::fs::write(&seg, &data).unwrap();
        assert_eq!(last_index(&t.path().join("member")), Some(3));
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    /// A one-member etcd on `dir`, stopped (SIGTERM) on drop.
    struct Etcd(std::process::Child, u16);

    impl Etcd {
        fn start(dir: &Path) -> Etcd {
            let (client, peer) = (free_port(), free_port());
            let child = Command::new("/usr/bin/etcd")
                .arg("--data-dir")
                .arg(dir)
                .arg(format!("--listen-client-urls=http://127.0.0.1:{client}"))
                .arg(format!("--advertise-client-urls=http://127.0.0.1:{client}"))
                .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
                .arg(format!(
                    "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
                ))
                .arg(format!("--initial-cluster=default=http://127.0.0.1:{peer}"))
                // Snapshots (and their WAL records) every few entries.
                .arg("--snapshot-count=25")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .unwrap();
            Etcd(child, client)
        }

        fn ctl(&self, args: &[&str]) -> Option<String> {
            let out = Command::new("/usr/bin/etcdctl")
                .env("ETCDCTL_API", "3")
                .arg(format!("--endpoints=http://127.0.0.1:{}", self.1))
                .args(args)
                .output()
                .unwrap();
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        }

        /// The raft index etcd reports, once it answers.
        fn raft_index(&self) -> u64 {
            let started = Instant::now();
            loop {
                if let Some(s) = self.ctl(&["endpoint", "status", "-w", "json"]) {
                    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
                    return v[0]["Status"]["raftIndex"].as_u64().unwrap();
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "etcd never answered"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }

        fn stop(mut self) {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            )
            .unwrap();
            self.0.wait().unwrap();
        }
    }

    impl Drop for Etcd {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_real_etcds_data_shows_its_raft_index() {
        // Fails, never skips, without etcd.
        assert!(
            Path::new("/usr/bin/etcd").exists(),
            "etcd is not installed at /usr/bin/etcd"
        );
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("etcd");
        let mut seen = 0;
        for round in 0..2 {
            let etcd = Etcd::start(&dir);
            etcd.raft_index();
            for i in 0..40 {
                etcd.ctl(&["put", &format!("/k{round}/{i}"), "v"]).unwrap();
            }
            let index = etcd.raft_index();
            etcd.stop();
            let read = last_index(&dir.join("member")).unwrap();
            assert_eq!(read, index, "round {round}");
            assert!(read > seen + 40, "{read} after {seen}");
            seen = read;
        }
    }

    #[test]
    fn a_real_etcds_ids_are_read_from_its_log() {
        // Fails, never skips, without etcd.
        assert!(
            Path::new("/usr/bin/etcd").exists(),
            "etcd is not installed at /usr/bin/etcd"
        );
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("etcd");
        assert_eq!(ids(&dir.join("member")), None, "no data");
        let etcd = Etcd::start(&dir);
        etcd.raft_index();
        let status = etcd.ctl(&["endpoint", "status", "-w", "json"]).unwrap();
        let v: serde_json::Value = serde_json::from_str(&status).unwrap();
        let header = &v[0]["Status"]["header"];
        let want = (
            header["member_id"].as_u64().unwrap(),
            header["cluster_id"].as_u64().unwrap(),
        );
        for i in 0..40 {
            etcd.ctl(&["put", &format!("/k/{i}"), "v"]).unwrap();
        }
        etcd.stop();
        // The newest segment after snapshots (every 25 entries) and cuts.
        assert_eq!(ids(&dir.join("member")), Some(want));
    }
}
