//! etcd under its own account (`etcd.user`, `etcd` by default): Debian's
//! etcd-server package creates the user `etcd`; the daemon creates etcd's
//! data directory `etcd:etcd 0700`, which root without `CAP_DAC_OVERRIDE`
//! cannot write and which etcd should own. The daemon stays root (it needs Pacemaker's files
//! and the socket's group) and drops privileges in etcd's process alone,
//! between fork and exec (the standard library's `uid`/`gid` of a command):
//! the supplementary groups are cleared, then the gid and the uid are the
//! user's, so that etcd keeps no capability and no group of the daemon's.
//! etcd has the user's primary group only: files it must read (TLS keys)
//! are given to that group or to the user.
//!
//! Before each start it checks what etcd will need as that user, so that a
//! wrong owner is a start error naming the path and the command that fixes
//! it, instead of a "permission denied" in etcd's log: the data directory
//! (created `0700` and given to the user when missing), the member data in
//! it, the way to both, the generated configuration (group-readable), the
//! log file (owned by the user) and the TLS files.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::SuperviseError;
use crate::config::Settings;
use crate::config::host::{Access, Who, describe, user_name};

/// The account etcd's process becomes before exec.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AsUser {
    /// uid.
    pub(crate) uid: u32,
    /// Primary gid (the only group etcd keeps).
    pub(crate) gid: u32,
}

fn spawn_err(msg: String) -> SuperviseError {
    SuperviseError::Spawn(msg)
}

/// Prepare etcd's start as the configured user: `None` when etcd runs as
/// the daemon's own user (nothing to drop, nothing to check but the data
/// directory's existence, which etcd handles itself).
pub(crate) fn prepare(s: &Settings) -> Result<Option<AsUser>, SuperviseError> {
    let u = &s.etcd.user;
    if !u.drops() {
        return Ok(None);
    }
    let who = Who { u };
    data_dir(s, &who)?;
    // The configuration and the log live in the daemon's state directory.
    reach(&who, &s.state_dir, "the daemon's state directory", true)?;
    for tls in [&s.etcd.client_tls, &s.etcd.peer_tls].into_iter().flatten() {
        for f in [&tls.cert_file, &tls.key_file, &tls.trusted_ca_file] {
            if let Some(why) = who.cannot_read(f) {
                return Err(spawn_err(why));
            }
        }
    }
    Ok(Some(AsUser {
        uid: u.uid,
        gid: u.gid,
    }))
}

/// Make the generated configuration readable by the user's group (it holds
/// no secret, only paths, but the state directory is the daemon's).
pub(crate) fn share_config(s: &Settings, d: &AsUser) -> Result<(), SuperviseError> {
    let path = s.etcd_config_path();
    std::os::unix::fs::chown(&path, None, Some(d.gid))
        .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)))
        .map_err(|e| {
            spawn_err(format!(
                "cannot let etcd's group read {}: {e}",
                path.display()
            ))
        })
}

/// Give the log file to the user: etcd opens it by name as well.
pub(crate) fn give_log(log: &std::fs::File, path: &Path, d: &AsUser) -> Result<(), SuperviseError> {
    std::os::unix::fs::fchown(log, Some(d.uid), Some(d.gid)).map_err(|e| {
        spawn_err(format!(
            "cannot give {} to etcd's user: {e}",
            path.display()
        ))
    })
}

/// The data directory: created `0700` and owned by the user when missing;
/// otherwise it and the member data in it must be the user's.
fn data_dir(s: &Settings, who: &Who<'_>) -> Result<(), SuperviseError> {
    let dir = &s.etcd.data_dir;
    let u = who.u;
    if !dir.exists() {
        let parent = dir.parent().unwrap_or(Path::new("/"));
        if !parent.is_dir() {
            return Err(spawn_err(format!(
                "the directory {} that holds etcd's data directory {} does not exist (etcd-warden.service creates /var/lib/etcd-warden, the default's, as its StateDirectory=)",
                parent.display(),
                dir.display()
            )));
        }
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .and_then(|()| std::os::unix::fs::chown(dir, Some(u.uid), Some(u.gid)))
            .map_err(|e| spawn_err(format!("cannot create {}: {e}", dir.display())))?;
        tracing::info!(dir = %dir.display(), user = %u.name, "created etcd's data directory (mode 0700)");
    }
    reach(who, dir, "etcd's data directory", false)?;
    let member = dir.join("member");
    for p in [
        dir.clone(),
        member.clone(),
        member.join("snap"),
        member.join("snap/db"),
        member.join("wal"),
    ] {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.uid() != u.uid {
            return Err(spawn_err(format!(
                "{} is owned by {}, but etcd runs as {} (etcd.user) and must own its data: `chown -R {}: {}`",
                p.display(),
                user_name(m.uid()),
                u.name,
                u.name,
                dir.display()
            )));
        }
    }
    if !who.can(dir, Access::Write) {
        return Err(spawn_err(format!(
            "etcd's data directory {} ({}) is not writable by its owner {}: `chmod 0700 {}`",
            dir.display(),
            describe(dir),
            u.name,
            dir.display()
        )));
    }
    Ok(())
}

/// Every directory above `dir` (and `dir` itself) must let the user pass.
/// With `fix`, a directory of the daemon's own that blocks gets `o+x` (pass
/// through, no listing), as the unit's `StateDirectoryMode=0711` sets it.
fn reach(who: &Who<'_>, dir: &Path, what: &str, fix: bool) -> Result<(), SuperviseError> {
    let mut chain: Vec<PathBuf> = dir.ancestors().map(Path::to_path_buf).collect();
    chain.reverse();
    for p in chain {
        if who.can(&p, Access::Pass) {
            continue;
        }
        if fix && p == dir {
            let mode = std::fs::metadata(&p)
                .map(|m| m.mode() & 0o7777)
                .unwrap_or(0o700);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode | 0o001)).map_err(
                |e| spawn_err(format!("cannot let etcd pass through {}: {e}", p.display())),
            )?;
            tracing::info!(dir = %p.display(), "let etcd's user pass through (o+x) to its configuration and log");
            continue;
        }
        return Err(spawn_err(format!(
            "etcd runs as {} (etcd.user) but cannot reach {what} {}: {} ({}) blocks the way",
            who.u.name,
            dir.display(),
            p.display(),
            describe(&p)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunAs;

    fn nobody() -> RunAs {
        let u = nix::unistd::User::from_name("nobody").unwrap().unwrap();
        RunAs {
            name: "nobody".into(),
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
        }
    }

    #[test]
    fn mode_bits_decide_by_owner_group_then_others() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "x").unwrap();
        let u = nobody();
        let who = Who { u: &u };
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(!who.can(&f, Access::Read), "root's file, no bit for others");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(who.can(&f, Access::Read));
        assert!(!who.can(&f, Access::Write));
        std::os::unix::fs::chown(&f, Some(u.uid), None).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(who.can(&f, Access::Write), "the owner's bits");
    }

    #[test]
    fn a_data_dir_of_another_owner_is_refused_with_the_chown_to_run() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let data = d.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let u = nobody();
        let who = Who { u: &u };
        let mut s = crate::config::from_texts(&[(
            PathBuf::from("/c.toml"),
            format!(
                "node_name = \"a\"\ntopology = \"ha\"\n[etcd]\nuser = \"nobody\"\ndata_dir = {:?}\n[[nodes]]\nname = \"a\"\npeer_urls = [\"http://127.0.0.1:2380\"]\nclient_urls = [\"http://127.0.0.1:2379\"]\n",
                data
            ),
        )])
        .unwrap();
        let e = data_dir(&s, &who).unwrap_err().to_string();
        assert!(
            e.contains(&format!("chown -R nobody: {}", data.display())),
            "{e}"
        );
        // Missing: created 0700 and given to the user.
        s.etcd.data_dir = d.path().join("fresh");
        data_dir(&s, &who).unwrap();
        let m = std::fs::metadata(&s.etcd.data_dir).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o777), (u.uid, 0o700));
        // A root-owned member directory inside (a restore run as root).
        std::fs::create_dir(s.etcd.data_dir.join("member")).unwrap();
        let e = data_dir(&s, &who).unwrap_err().to_string();
        assert!(e.contains("member is owned by root"), "{e}");
    }
}
