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
    let (mut entry, mut snapshot) = (None, None);
    for (kind, data) in Records::new(f) {
        match kind {
            ENTRY_RECORD => match field_varint(&data, 3) {
                Some(i) => entry = Some(i),
                None => break,
            },
            SNAPSHOT_RECORD => snapshot = snapshot.max(field_varint(&data, 1)),
            _ => {}
        }
    }
    (entry, snapshot)
}

/// The records of one WAL segment in order (type and data), up to its
/// first zero frame, torn or unreadable record.
struct Records {
    r: BufReader<File>,
    left: u64,
    buf: Vec<u8>,
}

impl Records {
    fn new(f: File) -> Records {
        let left = f.metadata().map(|m| m.len()).unwrap_or(0);
        Records {
            r: BufReader::with_capacity(1 << 18, f),
            left,
            buf: Vec::new(),
        }
    }
}

impl Iterator for Records {
    type Item = (u64, Vec<u8>);

    fn next(&mut self) -> Option<(u64, Vec<u8>)> {
        let mut head = [0u8; 8];
        self.r.read_exact(&mut head).ok()?;
        let size = frame_size(u64::from_le_bytes(head))?;
        self.left = self.left.checked_sub(8)?;
        let total = size.record + size.padding;
        if total > self.left {
            self.left = 0;
            return None;
        }
        let n = usize::try_from(total).ok()?;
        self.buf.resize(n, 0);
        self.r.read_exact(&mut self.buf).ok()?;
        self.left -= total;
        let (kind, data) = self
            .buf
            .get(..n - usize::try_from(size.padding).ok()?)
            .and_then(record)?;
        Some((kind, data.to_vec()))
    }
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
    last_field(b, number, |v| match v {
        Value::Varint(x) => Some(x),
        _ => None,
    })
}

/// The bytes field `number` of a protobuf message.
fn field_bytes(b: &[u8], number: u64) -> Option<&[u8]> {
    last_field(b, number, |v| match v {
        Value::Bytes(x) => Some(x),
        _ => None,
    })
}

/// The last field `number` of a protobuf message that `pick` accepts;
/// `None` also when the message cannot be read to its end.
fn last_field<'a, T>(b: &'a [u8], number: u64, pick: impl Fn(Value<'a>) -> Option<T>) -> Option<T> {
    let mut rest = b;
    let mut found = None;
    while !rest.is_empty() {
        let (n, v) = next_field(&mut rest)?;
        if n == number {
            found = pick(v).or(found);
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
    // The metadata comes right after the CRC record; a few records is
    // all this reads.
    Records::new(File::open(wal.join(name)).ok()?)
        .take(4)
        .find(|(kind, _)| *kind == METADATA_RECORD)
        .and_then(|(_, data)| Some((field_varint(&data, 1)?, field_varint(&data, 2)?)))
}

/// WAL record type of raft's hard state (`raftpb.HardState`: term = 1,
/// vote = 2, commit = 3).
const STATE_RECORD: u64 = 3;

/// The log entries a `--force-new-cluster` of a member drops: etcd keeps
/// its log up to the commit index the member persisted and drops every
/// entry past it, and a write the peer acknowledged may be among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ForceDrop {
    /// Entries past the persisted commit index that carry a request (each
    /// was given at most one revision), or an upper bound when the log's
    /// tail is not all in the segments read.
    pub(crate) entries: u64,
    /// Whether this member led its last term: it voted for itself in that
    /// term, its log holds entries of that term and its persisted commit
    /// index covers the first of them. With two voters the peer could not
    /// lead that term (it lacked this member's vote), so it learnt of no
    /// commit past the one this leader persisted, if etcd was stopped
    /// cleanly (it saves each batch's commit index before it ends).
    pub(crate) led: bool,
    /// The commit index the log persisted: the force keeps the log up to
    /// it.
    pub(crate) commit: u64,
}

impl ForceDrop {
    /// How many revisions the peer may have acknowledged that the force
    /// drops, given whether etcd ended by a graceful stop.
    pub(crate) fn revisions_at_risk(&self, stopped_gracefully: bool) -> u64 {
        if self.led && stopped_gracefully {
            0
        } else {
            self.entries
        }
    }
}

/// What a forced restart of the data in `member` drops, read from the two
/// newest WAL segments. `None` when no segment can be read.
pub(crate) fn force_drop(member: &Path) -> Option<ForceDrop> {
    let (log, newest_start) = newest_segments(member)?;
    Some(log.drop_of_force(newest_start.saturating_sub(1)))
}

/// The two newest WAL segments of `member` read, and the first index the
/// newest one was cut for. `None` when no segment can be read.
fn newest_segments(member: &Path) -> Option<(Tail, u64)> {
    let wal = member.join("wal");
    let mut names: Vec<String> = std::fs::read_dir(&wal)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".wal"))
        .collect();
    names.sort();
    let newest_start = names
        .last()
        .and_then(|n| n.strip_suffix(".wal")?.split_once('-'))
        .and_then(|(_, i)| u64::from_str_radix(i, 16).ok())?;
    let mut log = Tail::default();
    for name in names.iter().rev().take(2).rev() {
        log.read(File::open(wal.join(name)).ok()?);
    }
    Some((log, newest_start))
}

/// How many entries of the data in `member` that the log commits past
/// `applied` carry a v3 request (one a backend applies: a key, a lease, a
/// compaction, an alarm or a member's attributes on 3.5): what a backend
/// that applied up to `applied` lacks. etcd 3.4 records the applied index
/// in its backend only with a change of keys, so its backend's index
/// trails the log's commit by the entries that carry none (membership
/// changes, a leader's empty entry, a v2 publish). `None` when the two
/// newest segments do not reach back to `applied` or cannot be read.
pub(crate) fn v3_requests_after(member: &Path, applied: u64) -> Option<u64> {
    let (log, _) = newest_segments(member)?;
    let commit = log.state.2;
    if log.entries.first().is_none_or(|e| e.0 > applied + 1) && commit > applied {
        return None;
    }
    let lacking = log.v3.iter().filter(|i| **i > applied && **i <= commit);
    Some(lacking.count() as u64)
}

/// What the newest segments say about the log's tail.
#[derive(Debug, Default)]
struct Tail {
    node: Option<u64>,
    /// The last hard state: term, vote, commit.
    state: (u64, u64, u64),
    /// The entries in log order (a rewritten index replaces the rest):
    /// index, term, whether it carries a request.
    entries: Vec<(u64, u64, bool)>,
    /// The indexes of the entries that carry a v3 request (an
    /// `InternalRaftRequest`, whose header is field 100), in log order.
    v3: Vec<u64>,
}

impl Tail {
    fn read(&mut self, f: File) {
        for (kind, data) in Records::new(f) {
            match kind {
                METADATA_RECORD => self.node = field_varint(&data, 1).or(self.node),
                STATE_RECORD => {
                    let get = |n| field_varint(&data, n).unwrap_or(0);
                    self.state = (get(1), get(2), get(3));
                }
                ENTRY_RECORD => self.entry(&data),
                _ => {}
            }
        }
    }

    /// raftpb.Entry: Type = 1 (0 is a normal entry), Term = 2, Index = 3,
    /// Data = 4.
    fn entry(&mut self, data: &[u8]) {
        let Some(index) = field_varint(data, 3) else {
            return;
        };
        let term = field_varint(data, 2).unwrap_or(0);
        let normal = field_varint(data, 1).unwrap_or(0) == 0;
        let carries = normal && field_bytes(data, 4).is_some_and(|d| !d.is_empty());
        let keep = self.entries.partition_point(|e| e.0 < index);
        self.entries.truncate(keep);
        self.entries.push((index, term, carries));
        let keep = self.v3.partition_point(|i| *i < index);
        self.v3.truncate(keep);
        let request = field_bytes(data, 4).filter(|_| normal);
        if request.is_some_and(|r| field_bytes(r, 100).is_some()) {
            self.v3.push(index);
        }
    }

    /// `before_newest`: the index before the newest segment's first, the
    /// log's end when the segments hold no entry.
    fn drop_of_force(&self, before_newest: u64) -> ForceDrop {
        let (term, vote, commit) = self.state;
        let last = self.entries.last().map_or(before_newest, |e| e.0);
        let whole = self.entries.first().is_some_and(|e| e.0 <= commit + 1);
        let entries = if whole {
            let past = self.entries.iter().filter(|e| e.0 > commit && e.2);
            past.count() as u64
        } else {
            last.saturating_sub(commit)
        };
        let first_of_term = self.entries.iter().find(|e| e.1 == term).map(|e| e.0);
        let led = self.node.is_some_and(|n| n == vote && n != 0)
            && first_of_term.is_some_and(|i| i <= commit);
        ForceDrop {
            entries,
            led,
            commit,
        }
    }
}

/// A WAL segment as etcd writes it, for tests: a CRC record, then one
/// entry record per index (term 7, carrying a request), then the
/// preallocated zeros.
#[cfg(test)]
pub(crate) fn write_test_segment(wal: &Path, seq: u64, start: u64, entries: &[u64]) {
    let records: Vec<TestRecord> = entries
        .iter()
        .map(|&i| TestRecord::Entry(i, 7, true))
        .collect();
    write_test_records(wal, seq, start, &records);
}

/// A record of a test segment.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) enum TestRecord {
    /// Metadata: the member id.
    Meta(u64),
    /// Hard state: term, vote, commit.
    State(u64, u64, u64),
    /// An entry: index, term, whether it carries a request.
    Entry(u64, u64, bool),
}

/// A WAL segment of `records` after a CRC record, padded frames as etcd
/// 3.1 and later write them, then the preallocated zeros.
#[cfg(test)]
pub(crate) fn write_test_records(wal: &Path, seq: u64, start: u64, records: &[TestRecord]) {
    fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn field(out: &mut Vec<u8>, number: u64, v: u64) {
        put_varint(out, number << 3);
        put_varint(out, v);
    }
    fn frame(out: &mut Vec<u8>, kind: u64, data: &[u8]) {
        let mut rec = Vec::new();
        field(&mut rec, 1, kind);
        field(&mut rec, 2, 0x1234_5678);
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
    for r in records {
        let mut d = Vec::new();
        let kind = match *r {
            TestRecord::Meta(node) => {
                field(&mut d, 1, node);
                field(&mut d, 2, 0xc1);
                METADATA_RECORD
            }
            TestRecord::State(term, vote, commit) => {
                field(&mut d, 1, term);
                field(&mut d, 2, vote);
                field(&mut d, 3, commit);
                STATE_RECORD
            }
            TestRecord::Entry(index, term, carries) => {
                field(&mut d, 1, 0);
                field(&mut d, 2, term);
                field(&mut d, 3, index);
                if carries {
                    put_varint(&mut d, (4 << 3) | 2);
                    put_varint(&mut d, 5);
                    d.extend_from_slice(b"value");
                }
                ENTRY_RECORD
            }
        };
        frame(&mut out, kind, &d);
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

    #[test]
    fn a_followers_tail_past_its_commit_is_at_risk() {
        use TestRecord::{Entry, Meta, State};
        let t = tempfile::tempdir().unwrap();
        let member = t.path().join("member");
        assert_eq!(force_drop(&member), None, "no log");
        // A follower (it voted for node 2) with entries 8..10 past its
        // commit index 7; 9 is a leader's empty entry.
        let mut recs = vec![Meta(1), State(3, 2, 4)];
        recs.extend((5..=8).map(|i| Entry(i, 3, true)));
        recs.extend([State(3, 2, 7), Entry(9, 3, false), Entry(10, 3, true)]);
        write_test_records(&member.join("wal"), 0, 0, &recs);
        let d = force_drop(&member).unwrap();
        assert_eq!(
            d,
            ForceDrop {
                entries: 2,
                led: false,
                commit: 7
            }
        );
        assert_eq!(d.revisions_at_risk(true), 2);
        // A rewritten index replaces the tail after it.
        recs.push(Entry(8, 3, false));
        write_test_records(&member.join("wal"), 0, 0, &recs);
        assert_eq!(force_drop(&member).unwrap().entries, 0);
    }

    #[test]
    fn a_leader_stopped_cleanly_puts_nothing_at_risk() {
        use TestRecord::{Entry, Meta, State};
        let t = tempfile::tempdir().unwrap();
        let member = t.path().join("member");
        let wal = member.join("wal");
        // Node 1 voted for itself in term 4, led it (entry 6 is its first),
        // and its commit index covers that entry: entries past it are its
        // own, never known committed by the peer.
        write_test_records(&wal, 0, 0, &[Meta(1), State(3, 2, 5), Entry(5, 3, true)]);
        write_test_records(
            &wal,
            1,
            6,
            &[
                Meta(1),
                State(4, 1, 6),
                Entry(6, 4, false),
                Entry(7, 4, true),
                Entry(8, 4, true),
            ],
        );
        let d = force_drop(&member).unwrap();
        assert_eq!(
            d,
            ForceDrop {
                entries: 2,
                led: true,
                commit: 6
            }
        );
        assert_eq!(d.revisions_at_risk(true), 0);
        assert_eq!(
            d.revisions_at_risk(false),
            2,
            "a killed leader may not have saved its commit"
        );
        // Before its commit covers its own term, an older leader's entries
        // past that commit may have been acknowledged.
        write_test_records(
            &wal,
            1,
            6,
            &[
                Meta(1),
                State(4, 1, 5),
                Entry(6, 4, false),
                Entry(7, 4, true),
            ],
        );
        assert_eq!(
            force_drop(&member).unwrap(),
            ForceDrop {
                entries: 1,
                led: false,
                commit: 5
            }
        );
        // A candidate of a term nobody led: no entry of that term.
        write_test_records(&wal, 1, 6, &[Meta(1), State(5, 1, 5), Entry(6, 4, true)]);
        assert!(!force_drop(&member).unwrap().led);
    }

    #[test]
    fn a_tail_reaching_past_the_segments_read_is_bounded_by_index() {
        use TestRecord::{Entry, Meta, State};
        let t = tempfile::tempdir().unwrap();
        let member = t.path().join("member");
        let wal = member.join("wal");
        // Each segment starts with the hard state at its cut.
        write_test_records(&wal, 0, 0, &[Meta(1), State(3, 2, 1)]);
        write_test_records(&wal, 1, 5, &[Meta(1), State(3, 2, 1), Entry(5, 3, true)]);
        write_test_records(&wal, 2, 9, &[Meta(1), State(3, 2, 1), Entry(9, 3, false)]);
        // Entries 2..4 and 6..8 are in no segment read: every index past
        // the commit counts.
        assert_eq!(force_drop(&member).unwrap().entries, 8);
        // Without a hard state in the segments read, the commit index is
        // unknown: all of the log counts.
        write_test_records(&wal, 1, 5, &[Meta(1), Entry(5, 3, true)]);
        write_test_records(&wal, 2, 9, &[Meta(1), Entry(9, 3, false)]);
        assert_eq!(force_drop(&member).unwrap().entries, 9);
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
        // A lone member leads its term and, stopped cleanly, has committed
        // its whole log: a force would drop nothing.
        let d = force_drop(&dir.join("member")).unwrap();
        assert!(d.led, "{d:?}");
        assert_eq!(d.revisions_at_risk(true), 0, "{d:?}");
    }
}
