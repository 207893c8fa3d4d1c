//! The package in an operator's hands on a live pair, each scenario with a
//! writer of its own on both nodes, every acknowledged write checked, no
//! fence, and the longest time the cluster took no write printed (for
//! docs/benchmarks.md):
//!
//! - [`layout_upgrade`]: from the previous package, which kept etcd's data
//!   in `/var/lib/etcd/warden` (inside Debian's `/var/lib/etcd`), to this
//!   one. node-b first gets the package and a bare `systemctl restart
//!   etcd-warden` while etcd runs: nothing moves and etcd keeps running
//!   (adopted). Then each node as docs/operations.md says: standby, the
//!   package, a restart that moves the data (the same files, byte for
//!   byte), unstandby.
//! - [`remove_refused`]: `apt-get remove etcd-warden` on a node where
//!   Pacemaker runs etcd is refused with the command to run first, and
//!   nothing stops.
//! - [`purge_reinstall`]: `apt-get purge etcd-server` (which takes
//!   etcd-warden with it) is refused while etcd runs on the node; in
//!   standby it runs, etcd-server's postrm deletes `/var/lib/etcd`, and
//!   etcd's data, under `/var/lib/etcd-warden`, is byte for byte what it
//!   was; both packages are installed again, and the node rejoins.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use warden_harness::field::{FieldCluster, etcd_started_on};
use warden_integration::writer::longest_gap;

use super::upgrade::{GAP_BOUND, installed_version, repack, standby, unstandby};
use super::{
    ARCHIVE_DIR, DATA_DIR, assert_no_failed_action, assert_no_new_fence, begin, check_writes,
};

/// Where the previous package kept etcd's data, and its archives.
const OLD_DATA_DIR: &str = "/var/lib/etcd/warden";
/// See [`OLD_DATA_DIR`].
const OLD_ARCHIVE_DIR: &str = "/var/lib/etcd/warden.archive";
/// Where the scenarios put the package under test on a node.
const NEW_DEB: &str = "/root/etcd-warden_NEW_amd64.deb";

/// The package under test: `WARDEN_DEB`, or one built into `work`.
pub fn current(work: &Path) -> PathBuf {
    warden_integration::field::package(work).unwrap()
}

/// The package under test with the previous package's layout: its unit,
/// its defaults (etcd's data in /var/lib/etcd/warden), its maintainer
/// scripts and its Depends, copied from the commit before the data moved
/// (tests/integration/tests/field_support/previous/), and a lower version.
pub fn previous_package(deb: &Path, dir: &Path) -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/field_support/previous");
    repack(deb, dir, "etcd-warden_prev_amd64.deb", "~prev1", |tree| {
        let copy = |name: &str, dest: &str, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            let to = tree.join(dest);
            std::fs::copy(fixtures.join(name), &to).unwrap();
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        copy(
            "etcd-warden.service",
            "usr/lib/systemd/system/etcd-warden.service",
            0o644,
        );
        copy(
            "00-defaults.toml",
            "usr/lib/etcd-warden/config.d/00-defaults.toml",
            0o644,
        );
        for s in ["prerm", "postinst", "postrm"] {
            copy(s, &format!("DEBIAN/{s}"), 0o755);
        }
        let control = tree.join("DEBIAN/control");
        let text = std::fs::read_to_string(&control).unwrap();
        let text: String = text
            .replace(", pacemaker-cli-utils", "")
            .lines()
            .filter(|l| !l.starts_with("Suggests:"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&control, text).unwrap();
        let sums = std::process::Command::new("sh")
            .arg("-c")
            .arg("find . -path ./DEBIAN -prune -o -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0 md5sum > DEBIAN/md5sums")
            .current_dir(tree)
            .status()
            .unwrap();
        assert!(sums.success(), "md5sums of the previous package");
    })
}

/// Every file under `dir` with its SHA-256, relative to `dir`, sorted (an
/// empty text when `dir` holds none).
fn sums(c: &FieldCluster, node: &str, dir: &str) -> String {
    c.node_sh_ok(
        node,
        &format!(
            "cd {dir} 2>/dev/null || exit 0; find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum"
        ),
    )
    .unwrap()
    .stdout
}

/// [`sums`] of a data directory and of its archive directory; the data
/// directory must hold etcd's database.
fn data_and_archives(c: &FieldCluster, node: &str, data: &str, archive: &str) -> [String; 2] {
    let both = [sums(c, node, data), sums(c, node, archive)];
    assert!(both[0].contains("./member/snap/db"), "{node}: {}", both[0]);
    both
}

/// The node's clock, for `journalctl --since @…`.
fn node_now(c: &FieldCluster, node: &str) -> String {
    c.node_sh_ok(node, "date +%s.%N")
        .unwrap()
        .stdout
        .trim()
        .to_owned()
}

/// The journal of etcd-warden.service and of the move before it on
/// `node` since `since` (from [`node_now`]).
fn journal_since(c: &FieldCluster, node: &str, since: &str) -> String {
    c.node_sh_ok(
        node,
        &format!(
            "journalctl -u etcd-warden -u etcd-warden-migrate-data --no-pager -o cat --since @{since}"
        ),
    )
    .unwrap()
    .stdout
}

/// `systemctl restart etcd-warden`, waited for; returns the unit's journal
/// of the restart.
fn restart_daemon(c: &FieldCluster, node: &str) -> String {
    let since = node_now(c, node);
    c.node_sh_ok(node, "systemctl restart etcd-warden").unwrap();
    c.wait_unit_active(node, "etcd-warden.service", Duration::from_secs(60))
        .unwrap();
    journal_since(c, node, &since)
}

/// etcd's PID as the daemon recorded it.
fn etcd_pid(c: &FieldCluster, node: &str) -> String {
    c.node_sh_ok(node, "cut -d' ' -f1 /var/lib/etcd-warden/etcd.pid")
        .unwrap()
        .stdout
        .trim()
        .to_owned()
}

/// Installs the package under test (`deb`, copied to [`NEW_DEB`]) with
/// apt, as the docs say; every dependency is installed already, so apt
/// downloads nothing.
fn install_new(c: &FieldCluster, node: &str, deb: &Path) {
    c.copy_in(node, deb, NEW_DEB).unwrap();
    c.node_sh_ok(
        node,
        &format!("DEBIAN_FRONTEND=noninteractive apt-get install -y {NEW_DEB} </dev/null"),
    )
    .unwrap();
}

/// A scenario's end: writes through both nodes again, no fence, no failed
/// action, every acknowledged write present, and the longest time the
/// cluster took no write printed and within the upgrade procedure's bound.
fn finish(
    c: &FieldCluster,
    w: warden_integration::writer::Writer,
    fences: usize,
    start: Instant,
    label: &str,
) {
    let t = Instant::now();
    for n in ["node-a", "node-b"] {
        w.wait_ack_after(Some(n), t, Duration::from_secs(60))
            .unwrap();
    }
    assert_no_new_fence(c, fences, label);
    assert_no_failed_action(c);
    let gap = longest_gap(&w.acks(), None, start, Instant::now());
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "{label}: longest write gap {:.2} s; {n} acknowledged writes, all present",
        gap.as_secs_f64()
    );
    assert!(
        gap < GAP_BOUND,
        "{label}: the cluster took no write for {gap:?} (bound {GAP_BOUND:?})"
    );
}

/// From the previous package's layout to this package's, on a live pair
/// installed from [`previous_package`]; `deb` is the package under test.
pub fn layout_upgrade(c: &FieldCluster, deb: &Path) {
    let (w, fences) = begin(c, "/field-layout");
    let start = Instant::now();
    let old = installed_version(c, "node-a");

    // node-b: the package and a bare restart while etcd runs on the old
    // data. Nothing moves, etcd keeps running and the new daemon adopts it.
    let before = etcd_pid(c, "node-b");
    install_new(c, "node-b", deb);
    let journal = restart_daemon(c, "node-b");
    assert!(
        journal.contains(&format!("etcd's data stays in {OLD_DATA_DIR} for now")),
        "node-b: the restart under a running etcd does not say the data stays:\n{journal}"
    );
    assert_eq!(etcd_pid(c, "node-b"), before, "node-b: etcd was restarted");
    c.node_sh_ok("node-b", &format!("test -d {OLD_DATA_DIR}/member"))
        .unwrap();
    let m = c.crm_mon("node-a").unwrap();
    assert!(etcd_started_on(&m, "node-b"), "etcd stopped on node-b");

    for (node, peer) in [("node-a", "node-b"), ("node-b", "node-a")] {
        standby(c, node, peer);
        let before = data_and_archives(c, node, OLD_DATA_DIR, OLD_ARCHIVE_DIR);
        if node == "node-a" {
            install_new(c, node, deb);
        }
        let journal = restart_daemon(c, node);
        assert!(
            journal.contains(&format!("moved {OLD_DATA_DIR} to {DATA_DIR}")),
            "{node}: no move in the journal:\n{journal}"
        );
        eprintln!(
            "{node}: {}",
            journal.lines().find(|l| l.contains("moved")).unwrap_or("")
        );
        c.node_sh_ok(
            node,
            &format!("test ! -e {OLD_DATA_DIR} && test ! -e {OLD_ARCHIVE_DIR}"),
        )
        .unwrap();
        assert_eq!(
            data_and_archives(c, node, DATA_DIR, ARCHIVE_DIR),
            before,
            "{node}: the data or the archives changed in the move"
        );
        unstandby(c, node, peer);
    }
    for n in ["node-a", "node-b"] {
        assert_ne!(
            installed_version(c, n),
            old,
            "{n} still has the old package"
        );
    }
    finish(c, w, fences, start, "field_package layout upgrade");
}

/// `apt-get remove etcd-warden` on node-a while Pacemaker runs etcd there.
pub fn remove_refused(c: &FieldCluster) {
    let (w, fences) = begin(c, "/field-remove");
    let start = Instant::now();
    let pid = etcd_pid(c, "node-a");
    let out = c
        .node_sh(
            "node-a",
            "DEBIAN_FRONTEND=noninteractive apt-get remove -y etcd-warden </dev/null",
        )
        .unwrap();
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(!out.success(), "apt-get remove went through:\n{said}");
    assert!(
        said.contains("pcs node standby node-a"),
        "the refusal does not name the command to run first:\n{said}"
    );
    eprintln!(
        "apt-get remove on node-a refused:\n{}",
        said.lines()
            .filter(|l| l.starts_with("etcd-warden:") || l.contains("pcs node"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    c.node_sh_ok(
        "node-a",
        "dpkg-query -W -f='${Status}' etcd-warden | grep -qx 'install ok installed' && systemctl is-active etcd-warden",
    )
    .unwrap();
    assert_eq!(etcd_pid(c, "node-a"), pid, "etcd restarted on node-a");
    let m = c.crm_mon("node-b").unwrap();
    assert!(etcd_started_on(&m, "node-a"), "etcd stopped on node-a");
    finish(c, w, fences, start, "field_package apt-get remove refused");
}

/// A script that rebuilds `pkg`'s installed package from dpkg's database
/// (its files, maintainer scripts and fields) into `out`: the field nodes
/// reach no package archive, and this is the package that was installed.
fn repack_installed(pkg: &str, out: &str) -> String {
    format!(
        r#"set -e
d=$(mktemp -d)
mkdir "$d/DEBIAN"
# Directories as real directories, also where the host has a symlink
# (merged /usr: /lib -> usr/lib), as the package itself lists them.
while read -r f; do
    if [ -d "$f" ]; then mkdir -p "$d$f"
    elif [ -e "$f" ] || [ -L "$f" ]; then mkdir -p "$d$(dirname "$f")"; cp -a "$f" "$d$f"
    fi
done < /var/lib/dpkg/info/{pkg}.list
for s in preinst postinst prerm postrm conffiles; do
    if [ -f /var/lib/dpkg/info/{pkg}.$s ]; then cp -a /var/lib/dpkg/info/{pkg}.$s "$d/DEBIAN/$s"; fi
done
dpkg-query -W -f='Package: ${{Package}}\nVersion: ${{Version}}\nArchitecture: ${{Architecture}}\nMaintainer: ${{Maintainer}}\nInstalled-Size: ${{Installed-Size}}\nPre-Depends: ${{Pre-Depends}}\nDepends: ${{Depends}}\nSection: ${{Section}}\nPriority: ${{Priority}}\nDescription: ${{Description}}\n' {pkg} \
    | grep -v '^[A-Za-z-]*: *$' > "$d/DEBIAN/control"
dpkg-deb -Zgzip -b "$d" {out} >/dev/null
rm -rf "$d"
"#
    )
}

/// `apt-get purge etcd-server` on node-b, refused while etcd runs there,
/// then in standby; both packages installed again; `deb` is the package
/// under test.
pub fn purge_reinstall(c: &FieldCluster, deb: &Path) {
    let (node, peer) = ("node-b", "node-a");
    let (w, fences) = begin(c, "/field-purge");
    let start = Instant::now();
    let purge = "DEBIAN_FRONTEND=noninteractive apt-get purge -y etcd-server </dev/null";
    let out = c.node_sh(node, purge).unwrap();
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        !out.success(),
        "apt-get purge etcd-server went through on an active node:\n{said}"
    );
    assert!(said.contains(&format!("pcs node standby {node}")), "{said}");
    c.node_sh_ok(node, "test -d /var/lib/etcd && dpkg-query -W etcd-server")
        .unwrap();

    let server = "/root/etcd-server-reinstall.deb";
    c.node_sh_ok(node, &repack_installed("etcd-server", server))
        .unwrap();
    standby(c, node, peer);
    let uid = c.node_sh_ok(node, "id -u etcd").unwrap().stdout;
    let before = data_and_archives(c, node, DATA_DIR, ARCHIVE_DIR);
    c.node_sh_ok(node, purge).unwrap();
    // etcd-server's postrm ran (it deletes /var/lib/etcd), and it took
    // etcd-warden with it.
    c.node_sh_ok(
        node,
        "test ! -e /var/lib/etcd && ! dpkg-query -W -f='${Status}' etcd-warden 2>/dev/null | grep -q 'ok installed'",
    )
    .unwrap();
    assert_eq!(
        data_and_archives(c, node, DATA_DIR, ARCHIVE_DIR),
        before,
        "{node}: the purge changed etcd's data or the archives"
    );

    // Installed again as docs/operations.md says.
    c.copy_in(node, deb, NEW_DEB).unwrap();
    c.node_sh_ok(
        node,
        &format!(
            "set -e
             DEBIAN_FRONTEND=noninteractive apt-get install -y {server} {NEW_DEB} </dev/null
             systemctl disable --now etcd.service
             systemctl mask etcd.service
             systemctl reset-failed
             systemctl enable --now etcd-warden"
        ),
    )
    .unwrap();
    let uid_after = c.node_sh_ok(node, "id -u etcd").unwrap().stdout;
    eprintln!(
        "{node}: etcd's uid {} before the purge, {} after the reinstall",
        uid.trim(),
        uid_after.trim()
    );
    c.wait_unit_active(node, "etcd-warden.service", Duration::from_secs(60))
        .unwrap();
    assert_eq!(
        data_and_archives(c, node, DATA_DIR, ARCHIVE_DIR),
        before,
        "{node}: the reinstall changed etcd's data or the archives"
    );
    unstandby(c, node, peer);
    finish(
        c,
        w,
        fences,
        start,
        "field_package purge etcd-server and reinstall",
    );
}

/// The three scenarios in order on a pair of `suite`'s nodes of their own,
/// installed from [`previous_package`] (field_package, and field_suite's
/// package test).
pub fn from_previous_package(suite: &str) {
    let work = tempfile::tempdir().unwrap();
    let deb = current(work.path());
    let previous = previous_package(&deb, work.path());
    let (c, _cluster_work) =
        super::cluster_with(&super::FieldOptions::new(suite, &previous)).unwrap();
    super::scenario("layout upgrade", || layout_upgrade(&c, &deb));
    super::scenario("apt-get remove refused", || remove_refused(&c));
    super::scenario("purge etcd-server and reinstall", || {
        purge_reinstall(&c, &deb)
    });
}
