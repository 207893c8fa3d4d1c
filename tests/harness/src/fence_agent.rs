//! The fence agent of the namespace clusters, embedded in the harness and
//! installed into /usr/sbin (the only place pacemaker-fenced looks).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};

/// The agent's name (`type=` of the stonith resources).
pub const AGENT_NAME: &str = "fence_warden_testns";
/// Where it is installed.
pub const AGENT_PATH: &str = "/usr/sbin/fence_warden_testns";
/// The script; the same bytes for every cluster (the cluster is chosen by
/// the `harness_root` instance attribute, never by a global path).
pub const AGENT_SCRIPT: &str = include_str!("fence_warden_testns.sh");

/// Makes every fence of `node` in the cluster under `root` fail (`true`,
/// as with an unreachable BMC) or work again (`false`): the agent fails
/// `off` and `reboot` of a node whose directory holds `fence-fails`.
pub fn set_fails(root: &Path, node: &str, fails: bool) -> Result<()> {
    let switch = root.join(node).join("fence-fails");
    if fails {
        fs::write(&switch, b"set by a test\n")
            .with_context(|| format!("writing {}", switch.display()))
    } else {
        match fs::remove_file(&switch) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", switch.display()))
            }
            _ => Ok(()),
        }
    }
}

/// Installs the agent unless an identical copy is already there.
///
/// Written to a temporary file in /usr/sbin and renamed over the target, so
/// a fenced running the agent at the same moment (another cluster, another
/// test process) sees either the old or the new file, never half of one.
pub fn install() -> Result<()> {
    install_at(Path::new(AGENT_PATH))
}

fn install_at(path: &Path) -> Result<()> {
    if fs::read(path).is_ok_and(|cur| cur == AGENT_SCRIPT.as_bytes())
        && fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o777 == 0o755)
    {
        return Ok(());
    }
    let dir = path.parent().context("agent path has no parent")?;
    let tmp = tempfile::Builder::new()
        .prefix(".fence_warden_testns.")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    fs::write(tmp.path(), AGENT_SCRIPT)?;
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755))?;
    tmp.persist(path)
        .with_context(|| format!("installing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_is_idempotent_and_executable() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fence_x");
        install_at(&p).unwrap();
        install_at(&p).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), AGENT_SCRIPT);
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(
            fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }

    #[test]
    fn metadata_names_the_agent_and_its_parameter() {
        let out = std::process::Command::new("bash")
            .args(["-c", AGENT_SCRIPT, "fence_warden_testns", "metadata"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        let xml = String::from_utf8(out.stdout).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        assert_eq!(doc.root_element().attribute("name"), Some(AGENT_NAME));
        assert!(xml.contains("name=\"harness_root\""));
    }

    #[test]
    fn refuses_without_a_harness_root() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("agent");
        install_at(&p).unwrap();
        let mut child = std::process::Command::new(&p)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"action=off\nplug=node1\nharness_root=/nonexistent\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
    }
}
