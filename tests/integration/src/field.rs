//! The field cluster's shared parts (nodes booted with systemd as PID 1,
//! the `.deb`, pcs, IPMI fencing; see `warden_harness::field`): the package
//! under test, the writers in the nodes' network namespaces, the final
//! checks, and the power-cut cycle the field tests and `failover-bench
//! --field` measure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, ensure};
use warden_harness::crm::CrmMon;
use warden_harness::field::{FieldCluster, FieldOptions};
use warden_harness::process;

use crate::bins;
use crate::gateway::{self, NetNs};
use crate::writer::{self, Writer};

/// The node image's suite: `WARDEN_FIELD_SUITE`, default Debian 13.
pub fn suite() -> String {
    std::env::var("WARDEN_FIELD_SUITE").unwrap_or_else(|_| "trixie".into())
}

/// The package every node installs: `WARDEN_DEB`, or one built by
/// dist/build-deb.sh (what `make deb` runs) from the binaries the other
/// tests run.
pub fn package(work: &Path) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("WARDEN_DEB") {
        return Ok(PathBuf::from(p));
    }
    let bindir = work.join("bin");
    std::fs::create_dir_all(&bindir)?;
    for (src, name) in [
        (bins::warden()?, "etcd-warden"),
        (bins::agent()?, "etcd-warden-agent"),
    ] {
        std::fs::copy(&src, bindir.join(name))
            .with_context(|| format!("copying {}", src.display()))?;
    }
    let out = Command::new(bins::workspace().join("dist/build-deb.sh"))
        .arg(&bindir)
        .arg(work.join("deb"))
        .output()
        .context("running dist/build-deb.sh")?;
    ensure!(
        out.status.success(),
        "build-deb.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(PathBuf::from(stdout.lines().last().unwrap_or("").trim()))
}

/// A field cluster on the default suite with a freshly built package; the
/// returned directory holds the package and must outlive the cluster.
pub fn cluster() -> Result<(FieldCluster, tempfile::TempDir)> {
    cluster_on(&suite())
}

/// A field cluster on `suite` with a freshly built package.
pub fn cluster_on(suite: &str) -> Result<(FieldCluster, tempfile::TempDir)> {
    cluster_with(&FieldOptions::new(suite, Path::new("")))
}

/// A field cluster as `opts` says, with a freshly built package (unless
/// `opts.deb` names one).
pub fn cluster_with(opts: &FieldOptions) -> Result<(FieldCluster, tempfile::TempDir)> {
    // A test runner's SIGTERM at its deadline ends the process without
    // unwinding: tear the nodes and BMCs down from a signal thread then.
    warden_harness::teardown_on_signals()?;
    let work = tempfile::tempdir()?;
    let mut opts = opts.clone();
    if opts.deb.as_os_str().is_empty() {
        opts.deb = package(work.path())?;
    }
    let start = Instant::now();
    let c = FieldCluster::start(&opts)?;
    if c.tls() {
        use_host_tls(&c);
    }
    eprintln!(
        "field: cluster ready in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok((c, work))
}

/// From now on the host reaches every node's etcd over https, with the
/// client application's certificate (`FieldCluster::host_tls`).
pub fn use_host_tls(c: &FieldCluster) {
    for n in &c.nodes {
        gateway::use_tls(n.client_addr(), c.host_tls());
    }
}

/// One writer per node, inside that node's network namespace, writing to
/// that node's etcd.
pub fn writer(c: &FieldCluster, prefix: &str) -> Result<Writer> {
    let mut targets = Vec::new();
    for n in &c.nodes {
        targets.push((
            n.name.clone(),
            NetNs::of_pid(n.netns_holder)?,
            n.client_addr(),
        ));
    }
    Writer::start(prefix, targets)
}

/// Stops the writer and checks every acknowledged write against what
/// `reader`'s etcd holds: present with its value and revision, and no
/// revision acknowledged twice.
pub fn check_writes(c: &FieldCluster, w: Writer, reader: &str) -> Result<usize> {
    let prefix = w.prefix().to_owned();
    let acks = w.finish();
    ensure!(!acks.is_empty(), "the writer got no acknowledgement at all");
    let n = c.node(reader)?;
    let addr = n.client_addr();
    let ns = NetNs::of_pid(n.netns_holder)?;
    let kvs = ns.run(move || gateway::range_prefix(addr, &prefix, Duration::from_secs(10)))?;
    writer::check_unique_revisions(&acks)?;
    writer::check_all_present(&acks, &kvs)?;
    Ok(acks.len())
}

/// The failed actions `node`'s crm_mon lists, one XML line each. A monitor
/// answering "degraded" (OCF 190, e.g. a sole voter waiting for its peer)
/// is listed there too but is a warning, not a failure: left out.
pub fn failed_actions(c: &FieldCluster, node: &str) -> Result<String> {
    Ok(c.node_sh_ok(
        node,
        "crm_mon -1 --output-as=xml | grep '<failure ' | grep -v 'exitcode=\"19[01]\"' || true",
    )?
    .stdout
    .trim()
    .to_owned())
}

/// etcd's member list as `node`'s etcd answers it.
pub fn members(c: &FieldCluster, node: &str) -> Result<Vec<gateway::Member>> {
    let n = c.node(node)?;
    let addr = n.client_addr();
    let ns = NetNs::of_pid(n.netns_holder)?;
    Ok(ns
        .run(move || gateway::member_list(addr, Duration::from_secs(5)))?
        .1)
}

/// The member id of node `name` as `viewer`'s etcd lists it, if listed.
pub fn member_id(c: &FieldCluster, viewer: &str, name: &str) -> Result<Option<u64>> {
    Ok(members(c, viewer)?
        .into_iter()
        .find(|m| m.name == name)
        .map(|m| m.id))
}

/// Waits until `node`'s etcd lists every node as a voter.
pub fn wait_all_voters(c: &FieldCluster, node: &str, timeout: Duration) -> Result<()> {
    let want: Vec<String> = c.nodes.iter().map(|n| n.name.clone()).collect();
    process::poll(
        "every node an etcd voter",
        timeout,
        Duration::from_millis(300),
        || match members(c, node) {
            Ok(ms) => {
                let ok = want
                    .iter()
                    .all(|w| ms.iter().any(|m| &m.name == w && !m.is_learner));
                if ok && ms.len() == want.len() {
                    Ok(())
                } else {
                    Err(format!(
                        "{:?}",
                        ms.iter()
                            .map(|m| format!(
                                "{}{}",
                                m.name,
                                if m.is_learner { "(learner)" } else { "" }
                            ))
                            .collect::<Vec<_>>()
                    ))
                }
            }
            Err(e) => Err(format!("{e:#}")),
        },
    )
}

/// When the last successful fence of `target` completed, as `viewer`'s
/// Pacemaker records it (crm_mon's `completed`, turned into a time by the
/// node's `date`: the nodes share the host's clock).
pub fn fence_completed_at(c: &FieldCluster, viewer: &str, target: &str) -> Option<SystemTime> {
    let m = c.crm_mon(viewer).ok()?;
    let done = m.fence_successes(target).first()?.completed.clone()?;
    ensure_date_text(&done)?;
    let out = c
        .node_sh_ok(viewer, &format!("date -d '{done}' +%s.%N"))
        .ok()?;
    let secs: f64 = out.stdout.trim().parse().ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs_f64(secs))
}

/// crm_mon's time text goes into a shell line: only the characters a
/// date has.
fn ensure_date_text(s: &str) -> Option<()> {
    s.chars()
        .all(|ch| ch.is_ascii_alphanumeric() || " :-+.".contains(ch))
        .then_some(())
}

/// The figures of one power cut (see [`power_cycle`]), each from the IPMI
/// power off unless said otherwise.
#[derive(Debug, Clone, Copy)]
pub struct PowerCycle {
    /// The victim's launcher gone (every process of the node dead).
    pub gone: Duration,
    /// The fence's success seen in the survivor's crm_mon.
    pub fenced: Duration,
    /// The victim dead (its launcher gone) → the survivor's first
    /// acknowledged write sent after that.
    pub crash_to_write: Duration,
    /// Fence completed (Pacemaker's record) → that write, when the record
    /// could be read.
    pub fence_to_write: Option<Duration>,
    /// IPMI power on → the victim's systemd `running`/`degraded`.
    pub on_to_booted: Duration,
    /// IPMI power on → every node an etcd voter again.
    pub rejoin_to_voter: Duration,
}

/// Cuts `node`'s power through its BMC; returns when its last process is
/// gone (the moment it is dead).
pub fn power_off(c: &FieldCluster, node: &str) -> Result<Instant> {
    let launcher = c
        .launcher(node)
        .with_context(|| format!("{node} is not powered"))?;
    let answer = c.ipmi_power(node, "off")?;
    eprintln!("field: ipmitool power off {node}: {answer}");
    ensure!(
        process::wait_gone(&[launcher], Duration::from_secs(10)).is_empty(),
        "{node}'s launcher survived the BMC's power off"
    );
    Ok(Instant::now())
}

/// Presses `node`'s power button over IPMI unless it is powered already (a
/// fence's reboot, or a boot in progress). A BMC that still reports "on"
/// for an ended launcher (a shutdown completed) is switched off first:
/// nothing of the node runs any more.
pub fn power_on(c: &FieldCluster, node: &str) -> Result<()> {
    process::poll(
        &format!("{node} powered on over IPMI"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            if c.launcher(node).is_some() {
                return Ok(());
            }
            let status = c.ipmi_power(node, "status").map_err(|e| format!("{e:#}"))?;
            let action = if status.ends_with("on") { "off" } else { "on" };
            c.ipmi_power(node, action).map_err(|e| format!("{e:#}"))?;
            Err(format!("{status}: power {action}"))
        },
    )
}

/// Waits until `viewer`'s Pacemaker records more successful fences of
/// `target` than the `before` it had; returns that crm_mon view.
pub fn wait_fenced(c: &FieldCluster, viewer: &str, target: &str, before: usize) -> Result<CrmMon> {
    c.wait_crm(
        viewer,
        &format!("{target} fenced"),
        Duration::from_secs(120),
        |m| m.fence_successes(target).len() > before,
    )
}

/// One power cut of `victim` on a healthy cluster whose writer `w` writes
/// to every node: its BMC powers it off over IPMI (every process of the
/// node dies at once); Pacemaker on the survivor fences it with
/// fence_ipmilan (stonith-action=off leaves it off); the survivor takes
/// writes; the node is powered on through IPMI, boots, archives its old
/// member directory, rejoins and becomes a voter; the victim writes again.
/// The acknowledged writes are checked by the caller ([`check_writes`]).
pub fn power_cycle(c: &FieldCluster, w: &Writer, victim: &str) -> Result<PowerCycle> {
    let survivor = c
        .nodes
        .iter()
        .find(|n| n.name != victim)
        .map(|n| n.name.clone())
        .context("no survivor")?;
    let t = Instant::now();
    w.wait_ack_after(Some(victim), t, Duration::from_secs(60))?;
    let fences_before = c.crm_mon(&survivor)?.fence_successes(victim).len();
    let archives_before = archives(c, victim)?;

    let cut = Instant::now();
    // The node is dead from here (its last process gone, seen within the
    // poll's 20 ms): writes acknowledged between the IPMI command and this
    // moment still had the peer, and prove nothing about the failover.
    let dead = power_off(c, victim)?;
    let gone = dead.duration_since(cut);

    let m = wait_fenced(c, &survivor, victim, fences_before)?;
    let fenced = cut.elapsed();
    let ev = m.fence_successes(victim)[0].clone();
    ensure!(
        ev.delegate == survivor,
        "the survivor must run the fence: {ev:?}"
    );
    let ack = w.wait_ack_after(Some(&survivor), dead, Duration::from_secs(120))?;
    ensure!(
        c.launcher(victim).is_none(),
        "{victim} is powered again already: the survivor's write proves nothing"
    );
    let fence_to_write =
        fence_completed_at(c, &survivor, victim).and_then(|f| ack.wall.duration_since(f).ok());

    // Power on over IPMI (stonith-action=off left it off; a fence that
    // rebooted it needs nothing).
    let on = Instant::now();
    power_on(c, victim)?;
    let state = c.wait_booted(victim, Duration::from_secs(180))?;
    let on_to_booted = on.elapsed();
    eprintln!("field: {victim} booted: {state}");
    wait_all_voters(c, &survivor, Duration::from_secs(300))?;
    let rejoin_to_voter = on.elapsed();
    c.wait_cluster_healthy(Duration::from_secs(300))?;

    // The old member directory was archived, not deleted.
    let archives_after = archives(c, victim)?;
    ensure!(
        archives_after.len() > archives_before.len(),
        "{victim} rejoined without archiving its old member directory (archives before: {archives_before:?}, after: {archives_after:?})"
    );
    let t = Instant::now();
    w.wait_ack_after(Some(victim), t, Duration::from_secs(60))?;
    Ok(PowerCycle {
        gone,
        fenced,
        crash_to_write: ack.at.duration_since(dead),
        fence_to_write,
        on_to_booted,
        rejoin_to_voter,
    })
}

/// Where the package keeps etcd's data on a field node, and its archives.
pub const DATA_DIR: &str = "/var/lib/etcd-warden/data";
/// See [`DATA_DIR`].
pub const ARCHIVE_DIR: &str = "/var/lib/etcd-warden/data.archive";

/// The entries of `node`'s archive directory ([`ARCHIVE_DIR`]).
pub fn archives(c: &FieldCluster, node: &str) -> Result<Vec<String>> {
    Ok(
        c.node_sh_ok(node, &format!("ls {ARCHIVE_DIR} 2>/dev/null || true"))?
            .stdout
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

/// Removes `node`'s archives (a benchmark's many cycles would pile them up;
/// a test never does this).
pub fn remove_archives(c: &FieldCluster, node: &str) -> Result<()> {
    c.node_sh_ok(node, &format!("rm -rf {ARCHIVE_DIR}/*"))?;
    Ok(())
}
