//! The index of the last raft entry a stopped member's backend applied
//! (`consistent_index` in the `meta` bucket of `member/snap/db`), read from
//! the bbolt file itself: page header, meta pages, then the B+tree from the
//! root bucket down to the key.
//!
//! etcd may apply a committed entry to the backend before the write-ahead
//! log has persisted the commit index that covers it. When the process then
//! ends without a graceful stop (a power loss), the backend is ahead of the
//! log's persisted commit, and a forced restart, which keeps the log only up
//! to that commit, gives the applied entry's index to a new entry that this
//! backend then skips as applied.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

const PAGE_HEADER: usize = 16;
const ELEMENT: usize = 16;
const BRANCH_PAGE: u16 = 0x01;
const LEAF_PAGE: u16 = 0x02;
const META_PAGE: u16 = 0x04;
const BUCKET_LEAF: u32 = 0x01;
const MAGIC: u32 = 0xED0C_DAED;
/// Bytes of the meta page covered by its checksum.
const META_SUMMED: usize = 56;
/// Nested pages read before giving up (a damaged file must not loop).
const MAX_DEPTH: usize = 32;

/// What the backend of the data in `member` applied (its
/// `consistent_index`) and how many v3 requests its write-ahead log
/// commits past that index, or why either cannot be read: a backend
/// restored alone lacks those requests.
pub fn applied_and_lacking(member: &Path) -> Result<(u64, u64), String> {
    let applied = consistent_index(&member.join("snap").join("db"))?;
    let lacking = super::held::v3_requests_after(member, applied).ok_or_else(|| {
        format!(
            "the newest segments of {} do not reach back to index {applied}",
            member.join("wal").display()
        )
    })?;
    Ok((applied, lacking))
}

/// `consistent_index` of the backend at `db`, or why it cannot be read.
pub fn consistent_index(db: &Path) -> Result<u64, String> {
    let f = File::open(db).map_err(|e| format!("cannot open {}: {e}", db.display()))?;
    let r = Reader { f: &f };
    let (page_size, root) = r.meta()?;
    let meta = r
        .find(page_size, Node::Page(root), b"meta", true)?
        .ok_or("no meta bucket")?;
    let bucket = bucket(&meta)?;
    let v = r
        .find(page_size, bucket, b"consistent_index", false)?
        .ok_or("no consistent_index in the meta bucket")?;
    let bytes: [u8; 8] = v
        .as_slice()
        .try_into()
        .map_err(|_| format!("consistent_index holds {} bytes, not 8", v.len()))?;
    Ok(u64::from_be_bytes(bytes))
}

/// Where a B+tree node is: a page of the file, or a bucket inlined in its
/// parent's value (a leaf page without its own page id).
enum Node {
    Page(u64),
    Inline(Vec<u8>),
}

struct Reader<'a> {
    f: &'a File,
}

impl Reader<'_> {
    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, String> {
        let mut buf = vec![0; len];
        self.f
            .read_exact_at(&mut buf, offset)
            .map_err(|e| format!("cannot read {len} bytes at {offset}: {e}"))?;
        Ok(buf)
    }

    /// The page size and the root bucket's page, from the valid meta page
    /// of the newer transaction.
    fn meta(&self) -> Result<(u64, u64), String> {
        let first = self.read(0, PAGE_HEADER + 64)?;
        let page_size = u64::from(u32_at(&first, PAGE_HEADER + 8));
        if !(512..=65536).contains(&page_size) {
            return Err(format!("page size {page_size} is not a bbolt page size"));
        }
        let second = self.read(page_size, PAGE_HEADER + 64)?;
        [first, second]
            .iter()
            .filter_map(|p| valid_meta(p))
            .max_by_key(|&(txid, _)| txid)
            .map(|(_, root)| (page_size, root))
            .ok_or_else(|| "neither meta page is valid".into())
    }

    /// The whole page `id` (with its overflow pages).
    fn page(&self, page_size: u64, id: u64) -> Result<Vec<u8>, String> {
        let head = self.read(id * page_size, PAGE_HEADER)?;
        let overflow = u64::from(u32_at(&head, 12));
        let len = usize::try_from((overflow + 1) * page_size).map_err(|e| e.to_string())?;
        self.read(id * page_size, len)
    }

    /// The value of `key` under `node` (a bucket value when `bucket`).
    fn find(
        &self,
        page_size: u64,
        mut node: Node,
        key: &[u8],
        bucket: bool,
    ) -> Result<Option<Vec<u8>>, String> {
        for _ in 0..MAX_DEPTH {
            let page = match node {
                Node::Page(id) => self.page(page_size, id)?,
                Node::Inline(bytes) => bytes,
            };
            let flags = u16_at(&page, 8);
            let count = usize::from(u16_at(&page, 10));
            if flags & BRANCH_PAGE != 0 {
                node = Node::Page(branch_child(&page, count, key)?);
                continue;
            }
            if flags & LEAF_PAGE == 0 {
                return Err(format!("page flags {flags:#x} are neither branch nor leaf"));
            }
            return leaf_value(&page, count, key, bucket);
        }
        Err(format!("deeper than {MAX_DEPTH} pages"))
    }
}

/// A bucket's root node from its value in the parent.
fn bucket(value: &[u8]) -> Result<Node, String> {
    if value.len() < 16 {
        return Err("bucket value shorter than its header".into());
    }
    match u64_at(value, 0) {
        0 => Ok(Node::Inline(value[16..].to_vec())),
        root => Ok(Node::Page(root)),
    }
}

/// (txid, root bucket page) of a meta page whose magic and checksum hold.
fn valid_meta(page: &[u8]) -> Option<(u64, u64)> {
    if u16_at(page, 8) & META_PAGE == 0 {
        return None;
    }
    let m = page.get(PAGE_HEADER..PAGE_HEADER + 64)?;
    if u32_at(m, 0) != MAGIC || fnv64a(&m[..META_SUMMED]) != u64_at(m, META_SUMMED) {
        return None;
    }
    Some((u64_at(m, 48), u64_at(m, 16)))
}

/// The child of a branch page whose range holds `key`: the last element
/// whose key is not above it.
fn branch_child(page: &[u8], count: usize, key: &[u8]) -> Result<u64, String> {
    let mut child = None;
    for i in 0..count {
        let at = PAGE_HEADER + i * ELEMENT;
        let pos = at + u32_at(page, at) as usize;
        let ksize = u32_at(page, at + 4) as usize;
        let k = page
            .get(pos..pos + ksize)
            .ok_or("branch key past its page")?;
        if k > key && child.is_some() {
            break;
        }
        child = Some(u64_at(page, at + 8));
    }
    child.ok_or_else(|| "empty branch page".into())
}

/// The value of `key` in a leaf page, if there.
fn leaf_value(
    page: &[u8],
    count: usize,
    key: &[u8],
    bucket: bool,
) -> Result<Option<Vec<u8>>, String> {
    for i in 0..count {
        let at = PAGE_HEADER + i * ELEMENT;
        let flags = u32_at(page, at);
        let pos = at + u32_at(page, at + 4) as usize;
        let ksize = u32_at(page, at + 8) as usize;
        let vsize = u32_at(page, at + 12) as usize;
        let k = page.get(pos..pos + ksize).ok_or("leaf key past its page")?;
        if k == key && (flags & BUCKET_LEAF != 0) == bucket {
            let v = page
                .get(pos + ksize..pos + ksize + vsize)
                .ok_or("leaf value past its page")?;
            return Ok(Some(v.to_vec()));
        }
    }
    Ok(None)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_le_bytes)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_le_bytes)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// FNV-1a, 64 bits (bbolt's meta checksum).
fn fnv64a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv64a_matches_its_reference_values() {
        assert_eq!(fnv64a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_file_that_is_not_bbolt_is_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path().join("db");
        std::fs::write(&p, vec![7u8; 8192]).unwrap_or_else(|e| panic!("{e}"));
        let e = consistent_index(&p).unwrap_err();
        assert!(e.contains("page size") || e.contains("meta"), "{e}");
        assert!(consistent_index(&dir.path().join("none")).is_err());
    }
}
