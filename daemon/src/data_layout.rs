//! etcd's data from where earlier packages kept it by default to where it
//! belongs now.
//!
//! Earlier packages put etcd's data directory at `/var/lib/etcd/warden` and
//! its archives at `/var/lib/etcd/warden.archive`, inside Debian's
//! `/var/lib/etcd`, which `etcd-server`'s postrm deletes (`rm -rf`) on
//! purge. The default is now `/var/lib/etcd-warden/data` (archives in
//! `/var/lib/etcd-warden/data.archive`), in a directory no other package
//! owns.
//!
//! The move is made by `etcd-warden migrate-data`, which
//! etcd-warden-migrate-data.service runs before the daemon, without the
//! daemon's sandbox (inside it each writable path is a mount of its own,
//! also for a command prefixed with `+`, and a rename between two mounts
//! fails). It moves
//! only when the configuration keeps the default paths, only by rename
//! (one filesystem: nothing is copied, nothing can be half-written), only
//! while no etcd holds the old data (etcd's database lock and the daemon's
//! PID file), and syncs both parent directories before it reports the move.
//! When etcd still runs on the old data (the daemon restarted while a
//! Pacemaker-owned etcd kept serving), nothing moves: the daemon uses the
//! old paths ([`effective`]) until it starts while etcd is stopped here.

use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::config::Settings;
use crate::config::default_archive_dir;

/// etcd's data directory in earlier packages' defaults.
pub(crate) const OLD_DATA_DIR: &str = "/var/lib/etcd/warden";
/// etcd's data directory in the defaults (daemon/config/00-defaults.toml).
pub(crate) const DATA_DIR: &str = "/var/lib/etcd-warden/data";

/// Where the data was and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The old data directory.
    pub(crate) old_data: PathBuf,
    /// The old archive directory.
    pub(crate) old_archive: PathBuf,
    /// The configured data directory.
    pub(crate) data: PathBuf,
    /// The configured archive directory.
    pub(crate) archive: PathBuf,
}

impl Layout {
    /// The move from the old default, when `s` keeps the default paths
    /// (a configured path is the operator's and never moved).
    pub(crate) fn of(s: &Settings) -> Option<Self> {
        let data = Path::new(DATA_DIR);
        (s.etcd.data_dir == data && s.failover.archive_dir == default_archive_dir(data))
            .then(|| Self::between(Path::new(OLD_DATA_DIR), data))
    }

    /// From `old` to `new`, each with its archive beside it.
    pub(crate) fn between(old: &Path, new: &Path) -> Self {
        Self {
            old_data: old.to_owned(),
            old_archive: default_archive_dir(old),
            data: new.to_owned(),
            archive: default_archive_dir(new),
        }
    }
}

/// What [`plan`] found.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Nothing in the old places.
    Nothing,
    /// The renames to make, in order, with etcd's database lock on the old
    /// data held until they are made.
    Move(Vec<(PathBuf, PathBuf)>, Option<Flock<File>>),
    /// etcd runs on the old data: it stays there for now (why).
    InUse(String),
    /// The new place is in the way (why, and what to do).
    Conflict(String),
}

/// A directory that exists and has an entry.
fn holds_data(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}

/// What moving the old layout needs now.
pub(crate) fn plan(l: &Layout, state_dir: &Path) -> Plan {
    let mut moves = Vec::new();
    for (from, to) in [(&l.old_data, &l.data), (&l.old_archive, &l.archive)] {
        if !holds_data(from) {
            continue;
        }
        if holds_data(to) {
            return Plan::Conflict(format!(
                "{} and {} both hold data, and only one can be etcd's: see which one is this node's current member (the newer files under member/snap), move the other aside (`mv {} {}.moved`, and delete it only once this node is an etcd voter again), then start the daemon",
                from.display(),
                to.display(),
                from.display(),
                from.display()
            ));
        }
        moves.push((from.clone(), to.clone()));
    }
    if moves.is_empty() {
        return Plan::Nothing;
    }
    match hold_old(&l.old_data, state_dir) {
        Ok(lock) => Plan::Move(moves, lock),
        Err(why) => Plan::InUse(why),
    }
}

/// etcd's database lock on the old data (`None` without a database), or
/// why etcd is running on it.
fn hold_old(old_data: &Path, state_dir: &Path) -> Result<Option<Flock<File>>, String> {
    let pid_file = state_dir.join("etcd.pid");
    if let Some((pid, start)) = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|t| crate::supervise::process::parse_pid_file(&t))
        && crate::supervise::same_process(pid, start)
    {
        return Err(format!(
            "etcd is running (pid {pid}, from {})",
            pid_file.display()
        ));
    }
    let db = old_data.join("member/snap/db");
    let Ok(f) = File::open(&db) else {
        return Ok(None);
    };
    match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            Err(format!("a process holds etcd's lock on {}", db.display()))
        }
        Err((_, e)) => Err(format!("cannot lock {}: {e}", db.display())),
    }
}

/// Make the renames, each synced in both parent directories before the
/// next. `Err` names the rename that failed and the OS error; the renames
/// made before it stay made (a next run makes the rest).
pub(crate) fn apply(moves: &[(PathBuf, PathBuf)]) -> Result<(), String> {
    for (from, to) in moves {
        let parent = to.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        // An empty directory in the way (a daemon's start made it).
        if to.is_dir() {
            std::fs::remove_dir(to)
                .map_err(|e| format!("cannot remove the empty {}: {e}", to.display()))?;
        }
        std::fs::rename(from, to)
            .map_err(|e| format!("cannot rename {} to {}: {e}", from.display(), to.display()))?;
        for dir in [parent, from.parent().unwrap_or(Path::new("/"))] {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| format!("cannot sync {}: {e}", dir.display()))?;
        }
    }
    Ok(())
}

/// Removes the old directories where they are empty (a daemon's start
/// made them; nothing was ever in them, or everything moved). A directory
/// with anything in it stays: `remove_dir` removes empty ones only.
pub(crate) fn tidy(l: &Layout) -> Vec<PathBuf> {
    [&l.old_data, &l.old_archive]
        .into_iter()
        .filter(|d| std::fs::remove_dir(d).is_ok())
        .cloned()
        .collect()
}

/// The steps that move the old layout by hand, for when [`apply`] cannot.
pub(crate) fn manual_steps(l: &Layout, node: &str) -> String {
    let (od, oa, d, a) = (
        l.old_data.display(),
        l.old_archive.display(),
        l.data.display(),
        l.archive.display(),
    );
    format!(
        "to move it by hand: `pcs node standby {node}` and wait until etcd has stopped on {node}; `systemctl stop etcd-warden`; `cp -a {od} {d} && sync`, and `cp -a {oa} {a} && sync` if {oa} exists; compare the copies (`diff -r {od} {d}`); `mv {od} {od}.moved` and `mv {oa} {oa}.moved` (delete them only once {node} is an etcd voter again); `systemctl start etcd-warden`; `pcs node unstandby {node}`. Or keep the data where it is with `[etcd] data_dir = \"{od}\"` in /etc/etcd-warden/config.d/10-data-dir.toml (purging etcd-server then deletes it)"
    )
}

/// Whether `dir` is Debian's `/var/lib/etcd` or inside it (component by
/// component: `/var/lib/etcd-warden` is not).
fn in_debian_etcd_dir(dir: &Path) -> bool {
    dir.starts_with("/var/lib/etcd")
}

/// The settings the daemon runs with: the old paths while the data is
/// still there (etcd kept running on it), the configured ones otherwise.
pub(crate) fn effective(mut s: Settings) -> Settings {
    let Some(l) = Layout::of(&s) else {
        for dir in [&s.etcd.data_dir, &s.failover.archive_dir] {
            if in_debian_etcd_dir(dir) {
                tracing::warn!(
                    dir = %dir.display(),
                    "{} is inside /var/lib/etcd, which purging etcd-server deletes (rm -rf); leave etcd.data_dir and failover.archive_dir at their defaults under /var/lib/etcd-warden to keep the data out of it",
                    dir.display()
                );
            }
        }
        return s;
    };
    if holds_data(&l.old_data) && !holds_data(&l.data) {
        tracing::warn!(
            old = %l.old_data.display(),
            new = %l.data.display(),
            "etcd's data is still in {} (etcd was running on it when the daemon started): using it there; it moves to {} when the daemon starts while etcd is stopped on this node",
            l.old_data.display(),
            l.data.display()
        );
        s.etcd.data_dir = l.old_data;
        s.failover.archive_dir = l.old_archive;
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn layout(root: &Path) -> Layout {
        std::fs::create_dir_all(root.join("old")).unwrap();
        std::fs::create_dir_all(root.join("new")).unwrap();
        Layout::between(&root.join("old/warden"), &root.join("new/data"))
    }

    fn member(dir: &Path) {
        std::fs::create_dir_all(dir.join("member/snap")).unwrap();
        std::fs::create_dir_all(dir.join("member/wal")).unwrap();
        std::fs::write(dir.join("member/snap/db"), b"bolt").unwrap();
    }

    #[test]
    fn the_old_data_and_archives_move_by_rename_with_their_contents() {
        let d = tempfile::tempdir().unwrap();
        let l = layout(d.path());
        member(&l.old_data);
        std::fs::create_dir_all(l.old_archive.join("1796036400-stale-data/member")).unwrap();
        // The daemon's start left an empty data directory in the new place.
        std::fs::create_dir_all(&l.data).unwrap();
        let Plan::Move(moves, lock) = plan(&l, d.path()) else {
            panic!("no move");
        };
        assert!(lock.is_some(), "the move holds etcd's database lock");
        assert_eq!(moves.len(), 2);
        apply(&moves).unwrap();
        drop(lock);
        assert_eq!(
            std::fs::read(l.data.join("member/snap/db")).unwrap(),
            b"bolt"
        );
        assert!(l.archive.join("1796036400-stale-data/member").is_dir());
        assert!(!l.old_data.exists() && !l.old_archive.exists());
        assert!(matches!(plan(&l, d.path()), Plan::Nothing));
    }

    #[test]
    fn paths_inside_debians_etcd_directory_are_recognised() {
        assert!(in_debian_etcd_dir(Path::new("/var/lib/etcd/warden")));
        assert!(in_debian_etcd_dir(Path::new("/var/lib/etcd")));
        assert!(!in_debian_etcd_dir(Path::new("/var/lib/etcd-warden/data")));
        assert!(!in_debian_etcd_dir(Path::new("/srv/etcd")));
    }

    #[test]
    fn only_empty_old_directories_are_tidied_away() {
        let d = tempfile::tempdir().unwrap();
        let l = layout(d.path());
        member(&l.old_data);
        std::fs::create_dir_all(&l.old_archive).unwrap();
        assert_eq!(tidy(&l), std::slice::from_ref(&l.old_archive));
        assert!(l.old_data.join("member/snap/db").exists());
    }

    #[test]
    fn nothing_moves_while_a_process_holds_etcds_lock() {
        let d = tempfile::tempdir().unwrap();
        let l = layout(d.path());
        member(&l.old_data);
        let held = Flock::lock(
            File::open(l.old_data.join("member/snap/db")).unwrap(),
            FlockArg::LockExclusive,
        )
        .unwrap();
        let Plan::InUse(why) = plan(&l, d.path()) else {
            panic!("moved under a running etcd");
        };
        assert!(why.contains("lock"), "{why}");
        drop(held);
        assert!(matches!(plan(&l, d.path()), Plan::Move(..)));
    }

    #[test]
    fn nothing_moves_while_the_pid_file_names_a_live_etcd() {
        let d = tempfile::tempdir().unwrap();
        let l = layout(d.path());
        member(&l.old_data);
        let me = std::process::id();
        let (_, start) = crate::supervise::proc_stat(me).unwrap();
        std::fs::write(d.path().join("etcd.pid"), format!("{me} {start}\n")).unwrap();
        let Plan::InUse(why) = plan(&l, d.path()) else {
            panic!("moved while the PID file's etcd runs");
        };
        assert!(why.contains(&format!("pid {me}")), "{why}");
    }

    #[test]
    fn data_in_both_places_is_a_conflict_and_nothing_moves() {
        let d = tempfile::tempdir().unwrap();
        let l = layout(d.path());
        member(&l.old_data);
        member(&l.data);
        let Plan::Conflict(why) = plan(&l, d.path()) else {
            panic!("no conflict");
        };
        assert!(
            why.contains("both hold data") && why.contains(".moved"),
            "{why}"
        );
        assert!(l.old_data.join("member/snap/db").exists());
    }

    #[test]
    fn an_archive_left_behind_by_an_interrupted_move_moves_on_its_own() {
        let d = tempfile::tempdir().unwrap();
        let l = layout(d.path());
        member(&l.data);
        std::fs::create_dir_all(l.old_archive.join("1-x")).unwrap();
        let Plan::Move(moves, _) = plan(&l, d.path()) else {
            panic!("no move");
        };
        assert_eq!(moves, [(l.old_archive.clone(), l.archive.clone())]);
    }

    #[test]
    fn a_rename_that_fails_says_which_and_why() {
        let d = tempfile::tempdir().unwrap();
        let e = apply(&[(d.path().join("missing"), d.path().join("to"))]).unwrap_err();
        assert!(e.contains("cannot rename") && e.contains("missing"), "{e}");
        let steps = manual_steps(&layout(d.path()), "node-a");
        assert!(
            steps.contains("pcs node standby node-a")
                && steps.contains("pcs node unstandby node-a"),
            "{steps}"
        );
    }
}
