//! The Debian package as an operator gets it: built from this checkout's
//! binaries (the ones the other tests run; `WARDEN_DEB` names a prebuilt
//! package instead), its file list, its declared dependencies, lintian, and
//! an install and removal with apt and dpkg on a fresh minimal Debian 12 root
//! (tests/images/build-image.sh, cached under /var/cache/etcd-warden-test).
//!
//! Needs root (mmdebstrap, chroot, mounts), lintian and mmdebstrap (`make
//! deps` installs them) and Debian's archive through apt, which pulls the
//! package's dependencies (etcd-server, pacemaker, corosync) into the root.

// Tests may unwrap (clippy.toml allows it in #[test] functions; this
// extends that to the helpers of this file).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use warden_integration::bins;

/// The suite "a fresh Debian 12" means, and what the root holds beyond
/// minbase: man-db, to check that the pages render.
const SUITE: &str = "bookworm";
const IMAGE_PACKAGES: &[&str] = &["man-db"];

/// Every path the package must install (dpkg-deb -c, without the leading '.').
const EXPECTED: &[&str] = &[
    "/usr/bin/etcd-warden",
    "/usr/lib/ocf/resource.d/etcd-warden/etcd",
    "/usr/libexec/etcd-warden/alert",
    "/usr/lib/systemd/system/etcd-warden.service",
    "/usr/lib/systemd/system/etcd-warden-collect.service",
    "/usr/lib/systemd/system/etcd-warden-collect.timer",
    "/usr/lib/systemd/system/etcd-warden-snapshot.service",
    "/usr/lib/systemd/system/etcd-warden-snapshot.timer",
    "/usr/lib/systemd/system/etcd-warden-migrate-data.service",
    "/usr/share/doc/etcd-warden/examples/config.toml",
    "/usr/share/doc/etcd-warden/copyright",
    "/usr/share/doc/etcd-warden/changelog.gz",
    "/usr/share/man/man8/etcd-warden.8.gz",
    "/usr/share/man/man8/etcd-warden-daemon.8.gz",
    "/usr/share/man/man8/etcd-warden-status.8.gz",
    "/usr/share/man/man8/etcd-warden-members.8.gz",
    "/usr/share/man/man8/etcd-warden-snapshot.8.gz",
    "/usr/share/man/man8/etcd-warden-start.8.gz",
    "/usr/share/man/man8/etcd-warden-stop.8.gz",
    "/usr/share/man/man8/etcd-warden-collect.8.gz",
    "/usr/share/man/man8/etcd-warden-health.8.gz",
    "/usr/share/man/man8/etcd-warden-pcs-config.8.gz",
    "/usr/share/man/man8/etcd-warden-crm-config.8.gz",
    "/usr/share/man/man8/etcd-warden-alert.8.gz",
    "/usr/share/man/man8/etcd-warden-recover.8.gz",
    "/usr/share/man/man8/etcd-warden-defrag.8.gz",
    "/usr/share/man/man8/etcd-warden-reload.8.gz",
    "/usr/share/man/man8/etcd-warden-migrate-data.8.gz",
    "/usr/share/man/man8/etcd-warden-check-config.8.gz",
    "/usr/share/man/man8/etcd-warden-etcdctl.8.gz",
    "/usr/share/man/man8/etcd-warden-snapshot-save.8.gz",
    "/usr/share/man/man8/etcd-warden-recover-force-new-cluster.8.gz",
    "/usr/share/man/man8/etcd-warden-recover-keep-data-of.8.gz",
    "/usr/share/man/man8/etcd-warden-recover-restore-archive.8.gz",
    "/usr/share/man/man8/etcd-warden-recover-restore-snapshot.8.gz",
    "/usr/share/man/man7/ocf_etcd-warden_etcd.7.gz",
    "/usr/share/bash-completion/completions/etcd-warden",
    "/usr/share/zsh/vendor-completions/_etcd-warden",
    "/usr/share/fish/vendor_completions.d/etcd-warden.fish",
];

/// Runs `cmd` under `timeout` (a hung apt or debootstrap fails the test
/// instead of holding it), returning its output.
fn run(cmd: &mut Command, limit: Duration) -> Output {
    let mut t = Command::new("timeout");
    t.arg("--kill-after=10s")
        .arg(format!("{}s", limit.as_secs()))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => t.env(k, v),
            None => t.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        t.current_dir(d);
    }
    let out = t
        .output()
        .unwrap_or_else(|e| panic!("running {:?}: {e}", cmd.get_program()));
    if out.status.code() == Some(124) {
        panic!(
            "{cmd:?} did not finish within {} s:\n{}",
            limit.as_secs(),
            text(&out.stderr)
        );
    }
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn require_tools() {
    let uid = run(Command::new("id").arg("-u"), Duration::from_secs(5));
    assert_eq!(
        text(&uid.stdout).trim(),
        "0",
        "this test needs root (mmdebstrap, chroot, mounts)"
    );
    for tool in ["lintian", "mmdebstrap", "dpkg-shlibdeps", "unshare"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        assert!(
            found.status.success(),
            "{tool} is missing: run `make deps` (it installs dpkg-dev, lintian and mmdebstrap)"
        );
    }
}

/// The binaries the integration tests use, copied side by side (they may
/// come from different places through WARDEN_BIN_*), as BINDIR for
/// dist/build-deb.sh and `make install`.
fn bindir(out_dir: &Path) -> PathBuf {
    let dir = out_dir.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    for (src, name) in [
        (bins::warden().unwrap(), "etcd-warden"),
        (bins::agent().unwrap(), "etcd-warden-agent"),
    ] {
        std::fs::copy(&src, dir.join(name)).unwrap();
    }
    dir
}

/// The package under test: `WARDEN_DEB`, or one built by dist/build-deb.sh
/// from `bindir`.
fn package(bindir: &Path, out_dir: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("WARDEN_DEB") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "WARDEN_DEB={} is not a file", p.display());
        return p;
    }
    let start = Instant::now();
    let out = run(
        Command::new(bins::workspace().join("dist/build-deb.sh"))
            .arg(bindir)
            .arg(out_dir),
        Duration::from_secs(300),
    );
    assert!(
        out.status.success(),
        "build-deb.sh failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let deb = PathBuf::from(text(&out.stdout).lines().last().unwrap_or("").trim());
    eprintln!(
        "pkg_deb: built {} in {:.1} s",
        deb.display(),
        start.elapsed().as_secs_f64()
    );
    deb
}

/// The regular files and symlinks of a package (dpkg-deb -c), without the
/// leading '.'.
fn deb_files(deb: &Path) -> BTreeSet<String> {
    let out = run(
        Command::new("dpkg-deb").arg("-c").arg(deb),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "dpkg-deb -c: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('d'))
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| p.trim_start_matches('.').to_string())
        .collect()
}

/// Every file below `root`, as absolute paths inside it.
fn tree_files(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else {
                out.insert(format!("/{}", p.strip_prefix(root).unwrap().display()));
            }
        }
    }
    out
}

/// `make install` writes the package's tree (less the Debian changelog, plus
/// its manifest) and `make uninstall` removes every file of it again,
/// leaving an operator's configuration in place.
fn check_make_install_and_uninstall(deb: &Path, bindir: &Path, out_dir: &Path) {
    let dest = out_dir.join("destdir");
    let make = |target: &str| {
        let out = run(
            Command::new("make")
                .arg("-s")
                .arg("-C")
                .arg(bins::workspace())
                .arg(target)
                .arg(format!("DESTDIR={}", dest.display()))
                .arg("PREFIX=/usr")
                .arg(format!("BINDIR={}", bindir.display())),
            Duration::from_secs(300),
        );
        assert!(
            out.status.success(),
            "make {target}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    };
    make("install");
    let mut installed = tree_files(&dest);
    assert!(
        installed.remove("/usr/share/etcd-warden/install-manifest"),
        "no manifest: {installed:?}"
    );
    let mut packaged = deb_files(deb);
    packaged.remove("/usr/share/doc/etcd-warden/changelog.gz");
    assert_eq!(installed, packaged, "make install and the package differ");

    let config = dest.join("etc/etcd-warden/config.toml");
    std::fs::write(&config, "node_name = \"node-a\"\n").unwrap();
    make("uninstall");
    let left = tree_files(&dest);
    assert_eq!(
        left,
        BTreeSet::from(["/etc/etcd-warden/config.toml".to_string()]),
        "make uninstall left files behind (or removed the operator's)"
    );
}

fn check_contents(deb: &Path) {
    let out = run(
        Command::new("dpkg-deb").arg("-c").arg(deb),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "dpkg-deb -c: {}", text(&out.stderr));
    let listing = text(&out.stdout);
    let paths: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(|p| p.trim_start_matches('.'))
        .collect();
    let missing: Vec<&&str> = EXPECTED.iter().filter(|e| !paths.contains(e)).collect();
    assert!(
        missing.is_empty(),
        "missing from the package: {missing:?}\n{listing}"
    );
    // Executables are executable and owned by root.
    for l in listing.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f.get(1), Some(&"root/root"), "not root's: {l}");
        let path = f.get(5).unwrap_or(&"");
        if path.ends_with("/usr/bin/etcd-warden")
            || path.ends_with("resource.d/etcd-warden/etcd")
            || path.ends_with("libexec/etcd-warden/alert")
        {
            assert!(f[0].starts_with("-rwxr-xr-x"), "not 0755: {l}");
        }
    }
    // No node configuration: each node's differs and the operator writes it.
    assert!(
        !paths.contains(&"/etc/etcd-warden/config.toml"),
        "{listing}"
    );

    let depends = run(
        Command::new("dpkg-deb").arg("-f").arg(deb).arg("Depends"),
        Duration::from_secs(30),
    );
    let depends = text(&depends.stdout);
    for d in [
        "libc6",
        "etcd-server",
        "pacemaker",
        "pacemaker-cli-utils",
        "corosync",
        "procps",
    ] {
        assert!(
            depends
                .split(',')
                .any(|x| x.split_whitespace().next() == Some(d)),
            "Depends lacks {d}: {depends}"
        );
    }
    let suggests = run(
        Command::new("dpkg-deb").arg("-f").arg(deb).arg("Suggests"),
        Duration::from_secs(30),
    );
    assert_eq!(text(&suggests.stdout).trim(), "pcs | crmsh");
    check_maintainer_scripts(deb);
    let version = run(
        Command::new("dpkg-deb").arg("-f").arg(deb).arg("Version"),
        Duration::from_secs(30),
    );
    let version = text(&version.stdout).trim().to_string();
    assert!(
        deb.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("etcd-warden_{version}_")),
        "the file name {} does not carry the version {version}",
        deb.display()
    );
}

/// Every unit the package ships is handled by the maintainer scripts:
/// recorded (postinst), stopped on removal (prerm), forgotten on purge
/// (postrm).
fn check_maintainer_scripts(deb: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        Command::new("dpkg-deb").arg("-e").arg(deb).arg(dir.path()),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "dpkg-deb -e: {}", text(&out.stderr));
    let units: Vec<&str> = EXPECTED
        .iter()
        .filter_map(|p| p.strip_prefix("/usr/lib/systemd/system/"))
        .collect();
    for script in ["postinst", "prerm", "postrm"] {
        let body = std::fs::read_to_string(dir.path().join(script)).unwrap();
        for u in &units {
            assert!(body.contains(u), "{script} does not handle {u}");
        }
    }
}

fn check_lintian(deb: &Path) {
    let start = Instant::now();
    let out = run(
        Command::new("lintian")
            .args(["--tag-display-limit", "0", "--display-info"])
            .arg(deb),
        Duration::from_secs(600),
    );
    let report = text(&out.stdout);
    let errors: Vec<&str> = report.lines().filter(|l| l.starts_with("E:")).collect();
    eprintln!(
        "pkg_deb: lintian in {:.1} s: {} errors, {} warnings, {} info\n{report}{}",
        start.elapsed().as_secs_f64(),
        errors.len(),
        report.lines().filter(|l| l.starts_with("W:")).count(),
        report.lines().filter(|l| l.starts_with("I:")).count(),
        text(&out.stderr)
    );
    assert!(errors.is_empty(), "lintian reports errors:\n{report}");
    // lintian exits 2 when it could not check the package at all.
    assert_ne!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn deb_has_everything_passes_lintian_and_installs_on_fresh_debian() {
    require_tools();
    let dir = tempfile::tempdir().unwrap();
    let bindir = bindir(dir.path());
    let deb = package(&bindir, dir.path());
    check_contents(&deb);
    check_lintian(&deb);
    check_make_install_and_uninstall(&deb, &bindir, dir.path());

    let images = bins::workspace().join("tests/images");
    let start = Instant::now();
    let out = run(
        Command::new(images.join("build-image.sh"))
            .arg(SUITE)
            .args(IMAGE_PACKAGES),
        Duration::from_secs(1200),
    );
    assert!(
        out.status.success(),
        "build-image.sh failed:\n{}",
        text(&out.stderr)
    );
    let image = PathBuf::from(text(&out.stdout).trim());
    eprint!("{}", text(&out.stderr));
    eprintln!(
        "pkg_deb: image {} ready in {:.1} s",
        image.display(),
        start.elapsed().as_secs_f64()
    );

    let start = Instant::now();
    let out = run(
        Command::new(images.join("deb-install-test.sh"))
            .arg(&image)
            .arg(&deb),
        Duration::from_secs(1200),
    );
    let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
    eprintln!(
        "pkg_deb: install test in {:.1} s\n{report}",
        start.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "deb-install-test.sh failed:\n{report}"
    );
    // Every check ran (the script stops at the first failure).
    assert!(
        report.contains("ok: dpkg -r etcd-warden removed"),
        "{report}"
    );
}
