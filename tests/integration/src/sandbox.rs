//! The shipped unit's sandbox without systemd: the same mount layout and
//! capability set, built from the unit file itself so that a test follows
//! the unit as it changes.
//!
//! What systemd does for `etcd-warden.service`, and what [`Unit::wrap`]
//! does in a mount namespace of its own (`unshare -m`):
//! - `ProtectSystem=strict`: every mount read-only, the API file systems
//!   (/proc, /sys, /dev) aside; `PrivateTmp=yes`: a writable /tmp of its
//!   own (a daemon binary under /tmp, as in a checkout there, bound back in
//!   read-only);
//! - `ReadWritePaths=`, `StateDirectory=`, `RuntimeDirectory=`: each path a
//!   writable bind mount of its own on top (a rename between two of them
//!   fails with EXDEV, as on a host);
//! - `StateDirectoryMode=`, `RuntimeDirectoryMode=`: the modes systemd sets
//!   at each start;
//! - `CapabilityBoundingSet=`, `NoNewPrivileges=`, `User=`/`Group=`: through
//!   `setpriv` before the exec of the daemon.
//!
//! The paths under /var/lib come from the node's own disk (a directory of
//! the node's work dir bound over them), so that they survive a fence like
//! a disk does and two nodes on one machine do not share them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where the unit's `ExecStart=` reads the configuration.
pub const CONFIG_DIR: &str = "/etc/etcd-warden";

/// The sandbox settings read from a unit file.
#[derive(Debug, Clone)]
pub struct Unit {
    /// The unit file read.
    pub path: PathBuf,
    /// `ReadWritePaths=` entries.
    pub read_write: Vec<PathBuf>,
    /// `StateDirectory=` under /var/lib, with `StateDirectoryMode=`.
    pub state: Vec<(PathBuf, String)>,
    /// `RuntimeDirectory=` under /run, with `RuntimeDirectoryMode=`.
    pub runtime: Vec<(PathBuf, String)>,
    /// `CapabilityBoundingSet=` (e.g. `CAP_CHOWN`).
    pub caps: Vec<String>,
    /// `NoNewPrivileges=yes`.
    pub no_new_privs: bool,
    /// `Group=`.
    pub group: String,
}

/// The shipped unit, in the repository.
pub fn shipped_unit() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../systemd/etcd-warden.service")
}

impl Unit {
    /// Read the `[Service]` settings the sandbox needs.
    pub fn read(path: &Path) -> Result<Unit> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the unit {}", path.display()))?;
        let mut values: Vec<(String, String)> = Vec::new();
        let mut in_service = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_service = line == "[Service]";
                continue;
            }
            if !in_service || line.starts_with('#') || line.is_empty() {
                continue;
            }
            if let Some((k, v)) = line.split_once('=') {
                values.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let all = |k: &str| -> Vec<String> {
            values
                .iter()
                .filter(|(key, _)| key == k)
                .flat_map(|(_, v)| v.split_whitespace().map(str::to_string))
                .collect()
        };
        let one = |k: &str, default: &str| -> String {
            values
                .iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| default.to_string())
        };
        if one("ProtectSystem", "no") != "strict" {
            bail!(
                "{}: the sandbox here models ProtectSystem=strict",
                path.display()
            );
        }
        let state_mode = one("StateDirectoryMode", "0755");
        let runtime_mode = one("RuntimeDirectoryMode", "0755");
        Ok(Unit {
            path: path.to_path_buf(),
            // A `-` prefix only lets a missing path pass; `+` is not used.
            read_write: all("ReadWritePaths")
                .into_iter()
                .map(|p| PathBuf::from(p.trim_start_matches('-')))
                .collect(),
            state: all("StateDirectory")
                .into_iter()
                .map(|d| (Path::new("/var/lib").join(d), state_mode.clone()))
                .collect(),
            runtime: all("RuntimeDirectory")
                .into_iter()
                .map(|d| (Path::new("/run").join(d), runtime_mode.clone()))
                .collect(),
            caps: all("CapabilityBoundingSet"),
            no_new_privs: one("NoNewPrivileges", "no") == "yes",
            group: one("Group", "root"),
        })
    }

    /// Paths the node's disk provides (mount points that must exist on the
    /// machine): the unit's paths under /var/lib, and the configuration
    /// directory [`CONFIG_DIR`] (read-only in the sandbox, as on a host; the
    /// test's own directories are under /tmp, which the sandbox replaces).
    pub fn disk_paths(&self) -> Vec<PathBuf> {
        self.read_write
            .iter()
            .chain(self.state.iter().map(|(p, _)| p))
            .filter(|p| p.starts_with("/var/lib"))
            .cloned()
            .chain(std::iter::once(PathBuf::from(CONFIG_DIR)))
            .collect()
    }

    /// The argv that runs `argv` in the sandbox, with the node's disk at
    /// `disk` (a directory tree mirroring the paths of [`Self::disk_paths`]).
    /// To be run as root inside the node.
    pub fn wrap(&self, disk: &Path, argv: &[&str]) -> Vec<String> {
        let list = |ps: &mut dyn Iterator<Item = &PathBuf>| {
            ps.map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let disk_paths = list(&mut self.disk_paths().iter());
        let writable = list(
            &mut self
                .read_write
                .iter()
                .chain(self.state.iter().map(|(p, _)| p))
                .chain(self.runtime.iter().map(|(p, _)| p)),
        );
        let modes = self
            .state
            .iter()
            .chain(self.runtime.iter())
            .map(|(p, m)| format!("mkdir -p {p} && chmod {m} {p}\n", p = p.display()))
            .collect::<String>();
        let caps = std::iter::once("-all".to_string())
            .chain(
                self.caps
                    .iter()
                    .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_ascii_lowercase())),
            )
            .collect::<Vec<_>>()
            .join(",");
        // PrivateTmp hides a binary under /tmp (a checkout there): its
        // directory is opened before the private /tmp is mounted and bound
        // back at the same path from the open descriptor, read-only.
        let (open_bin, bind_bin) = match argv.first().map(Path::new).and_then(Path::parent) {
            Some(dir) if dir.starts_with("/tmp") => (
                format!("exec 9<\"{}\"\n", dir.display()),
                format!(
                    "mkdir -p \"{d}\"\nmount --no-canonicalize --bind /proc/self/fd/9 \"{d}\"\n\
                     mount -o remount,bind,ro \"{d}\"\nexec 9<&-\n",
                    d = dir.display()
                ),
            ),
            _ => (String::new(), String::new()),
        };
        let script = format!(
            "set -eu\n\
             mount --make-rprivate /\n\
             # The node's disk behind the unit's paths under /var/lib and /etc/etcd-warden.\n\
             for p in {disk_paths}; do mkdir -p \"{disk}$p\"; mount --bind \"{disk}$p\" \"$p\"; done\n\
             {modes}\
             # ProtectSystem=strict: every mount read-only but /proc, /sys, /dev.\n\
             for m in $(awk '{{print $5}}' /proc/self/mountinfo | sort -u); do\n\
               case \"$m\" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue;; esac\n\
               # Hidden under a later mount (the node's own /run): not reachable.\n\
               [ -e \"$m\" ] || continue\n\
               mount -o remount,bind,ro \"$m\"\n\
             done\n\
             # ReadWritePaths=, StateDirectory=, RuntimeDirectory=: one writable mount each.\n\
             for p in {writable}; do mount --bind \"$p\" \"$p\"; mount -o remount,bind,rw \"$p\"; done\n\
             # PrivateTmp=yes.\n\
             {open_bin}\
             mount -t tmpfs -o mode=1777 sandbox-tmp /tmp\n\
             {bind_bin}\
             if touch /etc/.etcd-warden-sandbox-probe 2>/dev/null; then\n\
               echo 'sandbox: / is writable' >&2; exit 1\n\
             fi\n\
             exec \"$@\"\n",
            disk = disk.display(),
        );
        let mut out: Vec<String> = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            "etcd-warden-sandbox",
            "setpriv",
            "--bounding-set",
            &caps,
            "--reuid",
            "root",
            "--regid",
            &self.group,
            "--init-groups",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if self.no_new_privs {
            out.push("--no-new-privs".into());
        }
        out.push("--".into());
        out.extend(argv.iter().map(|s| s.to_string()));
        out
    }
}

/// The node's disk as a Debian host has it after `apt install etcd-server`:
/// `/var/lib/etcd` owned by `etcd:etcd`, mode 0700, nothing in it (the
/// unit keeps it writable for data an earlier package left there). The
/// machine gets the mount points that are missing (empty directories).
pub fn prepare_disk(unit: &Unit, disk: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for p in unit.disk_paths() {
        if !p.exists() {
            std::fs::create_dir_all(&p)
                .with_context(|| format!("cannot create the mount point {}", p.display()))?;
        }
        let d = disk.join(p.strip_prefix("/").unwrap_or(&p));
        std::fs::create_dir_all(&d)?;
    }
    let etcd = nix::unistd::User::from_name("etcd")?
        .context("no user etcd: install etcd-server (Debian's package creates it)")?;
    let lib_etcd = disk.join("var/lib/etcd");
    std::fs::create_dir_all(&lib_etcd)?;
    std::os::unix::fs::chown(&lib_etcd, Some(etcd.uid.as_raw()), Some(etcd.gid.as_raw()))?;
    std::fs::set_permissions(&lib_etcd, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_unit_reads() {
        let u = Unit::read(&shipped_unit()).unwrap();
        assert!(
            u.read_write.contains(&PathBuf::from("/var/lib/etcd")),
            "{u:?}"
        );
        assert_eq!(u.state[0].0, PathBuf::from("/var/lib/etcd-warden"));
        assert_eq!(u.runtime[0].0, PathBuf::from("/run/etcd-warden"));
        assert!(u.caps.iter().any(|c| c == "CAP_CHOWN"), "{u:?}");
        assert!(u.no_new_privs);
        let argv = u.wrap(Path::new("/d"), &["/bin/true"]);
        assert!(
            argv.iter().any(|a| a.starts_with("-all,+chown")),
            "{argv:?}"
        );
    }
}
