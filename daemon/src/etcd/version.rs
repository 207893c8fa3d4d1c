//! The etcd versions a member may start beside. etcd supports an upgrade
//! one minor release at a time, and its 3.5 → 3.6 guide requires every 3.5
//! member at a minimum patch release before the first 3.6 member starts
//! (the fixes for learners and members that upgraded 3.5 members left
//! behind). Before etcd starts here, the configured binary's version is
//! compared with the version each other node's running etcd reports; a
//! start that etcd's upgrade path does not allow is refused, naming the
//! node to upgrade first. etcd 3.6 is not obtainable on the test machines:
//! this rule is from etcd's documentation, and the tests check it against
//! etcd 3.4.23 and 3.5.30 and against version strings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::config::Settings;
use crate::etcd::Connector;

/// A release: major, minor, patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Major release.
    pub major: u64,
    /// Minor release.
    pub minor: u64,
    /// Patch release.
    pub patch: u64,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl Version {
    /// `3.5.30`, `v3.6.0`, `3.6.0-rc.1`, or etcd's `--version` output
    /// (`etcd Version: 3.4.23` on its first line).
    pub fn parse(text: &str) -> Option<Version> {
        let line = text.lines().next()?.trim();
        let word = line.rsplit(' ').next()?.trim_start_matches('v');
        let mut parts = word.split(['.', '-', '+']);
        let mut next = || parts.next()?.parse::<u64>().ok();
        Some(Version {
            major: next()?,
            minor: next()?,
            patch: next()?,
        })
    }
}

/// The patch release each 3.x minor needs on the release before it, before
/// the first member of that minor starts: etcd's upgrade guide for 3.5 →
/// 3.6 (3.5.32 in its current version; earlier versions of the guide named
/// 3.5.20 and 3.5.26).
const MINIMUM_BEFORE: &[((u64, u64), Version)] = &[(
    (3, 6),
    Version {
        major: 3,
        minor: 5,
        patch: 32,
    },
)];

/// Why a member of `local` may not start beside a running member of
/// `peer` on `peer_node`, or `None`.
pub fn refusal(local: Version, peer: Version, peer_node: &str) -> Option<String> {
    if local.major != peer.major {
        return Some(format!(
            "etcd {local} here and etcd {peer} on {peer_node} are of different major releases, which etcd does not run in one cluster"
        ));
    }
    if local.minor > peer.minor + 1 {
        return Some(format!(
            "etcd {local} here cannot start beside etcd {peer} on {peer_node}: etcd upgrades one minor release at a time; upgrade {peer_node} to {}.{} first",
            peer.major,
            peer.minor + 1
        ));
    }
    let needed = MINIMUM_BEFORE
        .iter()
        .find(|((major, minor), _)| (*major, *minor) == (local.major, local.minor))
        .map(|(_, v)| *v)?;
    (peer.minor + 1 == local.minor && peer < needed).then(|| {
        format!(
            "etcd {local} here cannot start beside etcd {peer} on {peer_node}: etcd's upgrade guide requires every {}.{} member at {needed} or later before the first {}.{} member starts; upgrade etcd on {peer_node} to {needed} or later first",
            peer.major, peer.minor, local.major, local.minor
        )
    })
}

/// Versions of binaries already asked, by path and modification time (a
/// package upgrade replaces the file).
type Asked = HashMap<(PathBuf, Option<SystemTime>), Version>;
static ASKED: Mutex<Option<Asked>> = Mutex::new(None);

/// The version of the etcd binary at `path` (`etcd --version`).
pub fn binary_version(path: &Path) -> Result<Version, String> {
    let key = (
        path.to_path_buf(),
        std::fs::metadata(path).and_then(|m| m.modified()).ok(),
    );
    let mut asked = ASKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = asked.as_ref().and_then(|a| a.get(&key)) {
        return Ok(*v);
    }
    let out = crate::tool::Cmd::new([path.as_os_str()])
        .arg("--version")
        .output(VERSION_DEADLINE, VERSION_OUTPUT)
        .map_err(|e| format!("cannot run {} --version: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v = Version::parse(&text).ok_or_else(|| {
        format!(
            "{} --version printed no version: {}",
            path.display(),
            text.trim()
        )
    })?;
    asked.get_or_insert_with(HashMap::new).insert(key, v);
    Ok(v)
}

/// How long `etcd --version` may take (it prints four lines).
const VERSION_DEADLINE: Duration = Duration::from_secs(10);

/// `etcd --version` prints a few hundred bytes.
const VERSION_OUTPUT: usize = 64 * 1024;

/// How long each other node's etcd is given to say its version.
const ASK_PEER: Duration = Duration::from_millis(500);

/// Refuses a start of the configured etcd beside a running member that
/// etcd's upgrade path does not allow it to join. Only a binary of a minor
/// release with a rule, or one two minors ahead, asks the other nodes; a
/// node whose etcd does not answer within a short bound is not asked again
/// (a stopped node is no objection, and a start must not wait on it).
pub(crate) async fn check_start(settings: &Settings, connector: &Connector) -> Result<(), String> {
    let binary = &settings.etcd.binary;
    let local = tokio::task::spawn_blocking({
        let binary = binary.clone();
        move || binary_version(&binary)
    })
    .await
    .map_err(|e| format!("asking etcd's version failed internally: {e}"))??;
    let has_rule = MINIMUM_BEFORE
        .iter()
        .any(|((major, minor), _)| (*major, *minor) == (local.major, local.minor));
    if !has_rule && local.minor < 6 {
        return Ok(());
    }
    for (node, st) in crate::etcd::status_of_other_nodes(settings, connector, ASK_PEER).await {
        let Some(peer) = Version::parse(&st.version) else {
            continue;
        };
        if let Some(why) = refusal(local, peer, &node) {
            return Err(why);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn versions_parse_from_etcd_output_and_status() {
        assert_eq!(
            v("etcd Version: 3.4.23\nGit SHA: Not provided"),
            v("3.4.23")
        );
        assert_eq!(v("v3.6.0-rc.1"), v("3.6.0"));
        assert_eq!(v("3.5.30").to_string(), "3.5.30");
        assert!(Version::parse("etcd Version: unknown").is_none());
        assert!(Version::parse("").is_none());
    }

    #[test]
    fn a_36_member_waits_for_every_35_member_at_the_guides_minimum() {
        let blocked = refusal(v("3.6.0"), v("3.5.16"), "node2").unwrap();
        assert!(blocked.contains("3.5.32"), "{blocked}");
        assert!(blocked.contains("upgrade etcd on node2"), "{blocked}");
        assert!(refusal(v("3.6.0"), v("3.5.32"), "node2").is_none());
        assert!(refusal(v("3.6.1"), v("3.6.0"), "node2").is_none());
        // The other direction, and releases without a rule.
        assert!(refusal(v("3.5.16"), v("3.6.0"), "node2").is_none());
        assert!(refusal(v("3.5.30"), v("3.4.23"), "node2").is_none());
        assert!(refusal(v("3.5.1"), v("3.5.30"), "node2").is_none());
    }

    #[test]
    fn a_skipped_minor_or_another_major_is_refused() {
        let skip = refusal(v("3.6.0"), v("3.4.23"), "node2").unwrap();
        assert!(skip.contains("upgrade node2 to 3.5 first"), "{skip}");
        assert!(refusal(v("3.7.0"), v("3.5.32"), "node2").is_some());
        assert!(refusal(v("4.0.0"), v("3.6.0"), "node2").is_some());
    }
}
