//! Checks before etcd starts and when the daemon starts, so that a host
//! that cannot work says why before anything fails half-way:
//!
//! - another etcd must not hold the ports or the data: Debian's etcd-server
//!   package enables its own `etcd.service` on install, on the same ports
//!   2379/2380, and an etcd started next to it fails with "address already
//!   in use" in its log while the daemon restarts it forever;
//! - archiving must work: it renames the member directory into the archive
//!   directory, which fails on a read-only path or across mounts (each
//!   `ReadWritePaths=` entry of a systemd unit is a mount of its own), and a
//!   node that cannot archive its stale data can never rejoin. A real rename
//!   of an empty probe directory, in the mount layout the daemon runs in,
//!   is the only check that sees what the rename will see.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::Path;

use super::SuperviseError;
use crate::config::Settings;

/// What to do about the distribution's etcd, in every refusal below.
const DISTRO_ETCD: &str = "if it is the distribution's etcd, stop and disable it: `systemctl disable --now etcd && systemctl mask etcd`";

/// Refuse to start etcd while another process listens on one of this
/// node's etcd ports or holds its database.
pub(crate) fn check_free(s: &Settings) -> Result<(), SuperviseError> {
    let local = s.local_node();
    for (kind, url) in local
        .peer_urls
        .iter()
        .map(|u| ("peer", u))
        .chain(local.client_urls.iter().map(|u| ("client", u)))
    {
        let Some(addr) = url_addr(url) else { continue };
        if let Err(e) = TcpListener::bind(addr)
            && e.kind() == std::io::ErrorKind::AddrInUse
        {
            return Err(SuperviseError::Spawn(format!(
                "another process already listens on etcd's {kind} address {addr} ({url}): etcd could not start there; {DISTRO_ETCD}"
            )));
        }
    }
    let db = s.etcd.data_dir.join("member/snap/db");
    if let Ok(f) = std::fs::File::open(&db) {
        match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockSharedNonblock) {
            // Free: released at once (the lock goes with the file).
            Ok(_lock) => {}
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(SuperviseError::Spawn(format!(
                    "another etcd holds the database {}: {DISTRO_ETCD}",
                    db.display()
                )));
            }
            Err(_) => {}
        }
    }
    Ok(())
}

/// `host:port` of an `http(s)://host:port[/…]` URL.
fn url_addr(url: &str) -> Option<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split('/').next()?;
    authority.to_socket_addrs().ok()?.next()
}

/// Name of the empty directory the probe renames.
const PROBE: &str = ".etcd-warden-rename-probe";

/// Rename an empty directory from the data directory into the archive
/// directory and back out, as archiving will. Creates the data directory
/// (for etcd's user, see [`super::user`]) and the archive directory when
/// missing. `Err` names both paths, the OS error and the fix.
pub(crate) fn archive_probe(s: &Settings) -> Result<(), String> {
    let data = &s.etcd.data_dir;
    let archive = &s.failover.archive_dir;
    let hint = format!(
        "archiving renames the member directory from {} into {}, so both must be writable and on one mount; under the systemd unit, keep both under one writable path (the defaults: /var/lib/etcd-warden/data and /var/lib/etcd-warden/data.archive, both in the unit's StateDirectory=etcd-warden)",
        data.display(),
        archive.display()
    );
    if !data.exists() {
        super::user::prepare(s).map_err(|e| format!("{e}; {hint}"))?;
        if !data.exists() {
            make_dir(data).map_err(|e| format!("cannot create {}: {e}; {hint}", data.display()))?;
        }
    }
    std::fs::create_dir_all(archive)
        .map_err(|e| format!("cannot create {}: {e}; {hint}", archive.display()))?;
    let (from, to) = (data.join(PROBE), archive.join(PROBE));
    // Left by a daemon killed half-way: empty directories of its own.
    let _ = std::fs::remove_dir(&from);
    let _ = std::fs::remove_dir(&to);
    std::fs::create_dir(&from)
        .map_err(|e| format!("cannot create {}: {e}; {hint}", from.display()))?;
    let moved = std::fs::rename(&from, &to);
    let _ = std::fs::remove_dir(&from);
    let _ = std::fs::remove_dir(&to);
    moved.map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}; {hint}",
            from.display(),
            to.display()
        )
    })
}

/// A data directory as etcd creates it: mode 0700.
fn make_dir(p: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_their_socket_address() {
        assert_eq!(
            url_addr("http://127.0.0.1:2380"),
            Some("127.0.0.1:2380".parse().unwrap())
        );
        assert_eq!(
            url_addr("https://[::1]:2379/"),
            Some("[::1]:2379".parse().unwrap())
        );
        assert_eq!(url_addr("unix://x"), None);
    }

    fn settings(dir: &Path, client: u16) -> Settings {
        crate::config::from_texts(&[(
            std::path::PathBuf::from("/c.toml"),
            format!(
                "node_name = \"a\"\ntopology = \"ha\"\n[etcd]\nuser = \"root\"\ndata_dir = {:?}\n[[nodes]]\nname = \"a\"\npeer_urls = [\"http://127.0.0.1:1\"]\nclient_urls = [\"http://127.0.0.1:{client}\"]\n",
                dir.join("data")
            ),
        )])
        .unwrap()
    }

    #[test]
    fn a_port_in_use_is_refused_naming_it_and_the_distributions_etcd() {
        let d = tempfile::tempdir().unwrap();
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = held.local_addr().unwrap().port();
        let e = check_free(&settings(d.path(), port))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
        assert!(e.contains("systemctl disable --now etcd"), "{e}");
        drop(held);
        check_free(&settings(d.path(), port)).unwrap();
    }

    #[test]
    fn a_locked_database_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = settings(d.path(), 1);
        let db = s.etcd.data_dir.join("member/snap/db");
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        std::fs::write(&db, "").unwrap();
        let f = std::fs::File::open(&db).unwrap();
        let held = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).unwrap();
        let e = check_free(&s).unwrap_err().to_string();
        assert!(e.contains("holds the database"), "{e}");
        drop(held);
        check_free(&s).unwrap();
    }

    #[test]
    fn the_archive_probe_renames_and_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let s = settings(d.path(), 1);
        archive_probe(&s).unwrap();
        assert!(s.etcd.data_dir.is_dir());
        assert_eq!(std::fs::read_dir(&s.etcd.data_dir).unwrap().count(), 0);
        assert_eq!(
            std::fs::read_dir(&s.failover.archive_dir).unwrap().count(),
            0
        );
    }
}
