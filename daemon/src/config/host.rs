//! The files a configuration names, checked on this host: the TLS
//! certificates, keys and CA bundles the daemon and etcd open (etcd as
//! `etcd.user`: [`Who`] checks a file's mode bits for a user), and the etcd
//! binary. Loading does not check them (a certificate may be provisioned
//! after the daemon starts, and the daemon reads them only when it connects
//! to etcd); `etcd-warden check-config` does, so that a path typed wrong is
//! found before a restart, with the file, line and key that name it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{Gid, Uid};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::fragments::{Fragment, Loc, TlsFilesFragment};
use super::{ConfigError, RunAs, Settings};

/// What a named file must hold.
#[derive(Debug, Clone, Copy)]
enum Holds {
    /// One or more PEM certificates (a certificate or a CA bundle).
    Certificates,
    /// A PEM private key.
    PrivateKey,
    /// An executable program.
    Program,
}

/// The files of a merged configuration, each with where it was written.
#[derive(Debug)]
pub(crate) struct Named {
    files: Vec<(Loc<PathBuf>, Holds)>,
}

impl Named {
    /// The files `merged` names.
    pub(crate) fn of(merged: &Fragment) -> Self {
        let tls = |t: &TlsFilesFragment| {
            [
                (t.cert_file.clone(), Holds::Certificates),
                (t.key_file.clone(), Holds::PrivateKey),
                (t.trusted_ca_file.clone(), Holds::Certificates),
            ]
        };
        let files = tls(&merged.tls.client)
            .into_iter()
            .chain(tls(&merged.tls.peer))
            .chain([(merged.etcd.binary.clone(), Holds::Program)])
            .filter_map(|(l, holds)| l.map(|l| (l, holds)))
            .collect();
        Named { files }
    }

    /// Check each file the validated `settings` use: it exists, this
    /// process can read it, and it holds what its key says.
    pub(crate) fn check(&self, settings: &Settings) -> Result<(), ConfigError> {
        let used: Vec<&PathBuf> = [&settings.etcd.client_tls, &settings.etcd.peer_tls]
            .into_iter()
            .flatten()
            .flat_map(|t| [&t.cert_file, &t.key_file, &t.trusted_ca_file])
            .chain([&settings.etcd.binary])
            .collect();
        let etcd = &settings.etcd.user;
        let who = Who { u: etcd };
        for (l, holds) in &self.files {
            if !used.contains(&&l.value) {
                continue;
            }
            check_file(&l.value, *holds).map_err(|m| l.invalid(m))?;
            // etcd opens the TLS files itself, as its own user.
            if !matches!(holds, Holds::Program)
                && etcd.drops()
                && let Some(why) = who.cannot_read(&l.value)
            {
                return Err(l.invalid(why));
            }
        }
        Ok(())
    }
}

/// Why `path` cannot serve as `holds`, if it cannot.
fn check_file(path: &Path, holds: Holds) -> Result<(), String> {
    match holds {
        Holds::Program => program(path),
        Holds::Certificates => {
            let certs = CertificateDer::pem_slice_iter(&read(path)?)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{} is not a PEM certificate file: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!("{} holds no PEM certificate", path.display()));
            }
            Ok(())
        }
        Holds::PrivateKey => PrivateKeyDer::from_pem_slice(&read(path)?)
            .map(drop)
            .map_err(|e| format!("{} holds no PEM private key: {e}", path.display())),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// An executable file.
fn program(path: &Path) -> Result<(), String> {
    std::fs::metadata(path).map_err(|e| {
        format!(
            "cannot use {}: {e} (install etcd, or set etcd.binary to where it is)",
            path.display()
        )
    })?;
    if executable(path) {
        Ok(())
    } else {
        Err(format!("{} is not an executable file", path.display()))
    }
}

/// Whether `p` is a file with an execute bit.
pub(crate) fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What a user may do with a file, by its mode bits.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Access {
    /// Read a file.
    Read,
    /// Write a file or directory.
    Write,
    /// Pass through a directory.
    Pass,
}

/// The user with its primary group, for permission checks by mode bits
/// (what the kernel checks for a process without capabilities).
#[derive(Debug)]
pub(crate) struct Who<'a> {
    /// The account.
    pub(crate) u: &'a RunAs,
}

impl Who<'_> {
    /// Whether the user may `a` the path.
    pub(crate) fn can(&self, p: &Path, a: Access) -> bool {
        let Ok(m) = std::fs::metadata(p) else {
            return false;
        };
        let bit = match a {
            Access::Read => 4,
            Access::Write => 2,
            Access::Pass => 1,
        };
        let mode = m.mode();
        let shift = if m.uid() == self.u.uid {
            6
        } else if m.gid() == self.u.gid {
            3
        } else {
            0
        };
        (mode >> shift) & bit != 0
    }

    /// Why etcd, run as this user, cannot read `f` (a TLS file), with the
    /// command that lets it; `None` when it can.
    pub(crate) fn cannot_read(&self, f: &Path) -> Option<String> {
        let name = &self.u.name;
        (!self.can(f, Access::Read)).then(|| {
            format!(
                "etcd runs as {name} (etcd.user) but cannot read {} ({}): give it the file, e.g. `chgrp {name} {} && chmod g+r {}`",
                f.display(),
                describe(f),
                f.display(),
                f.display()
            )
        })
    }
}

/// The name of user `uid`, or `uid N`.
pub(crate) fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| format!("uid {uid}"))
}

fn group_name(gid: u32) -> String {
    nix::unistd::Group::from_gid(Gid::from_raw(gid))
        .ok()
        .flatten()
        .map(|g| g.name)
        .unwrap_or_else(|| format!("gid {gid}"))
}

/// `mode 0700, etcd:etcd`.
pub(crate) fn describe(p: &Path) -> String {
    match std::fs::metadata(p) {
        Ok(m) => format!(
            "mode {:04o}, {}:{}",
            m.mode() & 0o7777,
            user_name(m.uid()),
            group_name(m.gid())
        ),
        Err(e) => format!("{e}"),
    }
}
