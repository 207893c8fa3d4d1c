//! The floor: what plain etcd, without etcd-warden, needs for the work a
//! failover and a rejoin do, on a copy of the same data directory.
//!
//! - forced restart: `etcd --force-new-cluster` on a copy of a member's data
//!   directory, timed from the spawn to the first acknowledged put;
//! - learner catch-up: on that standalone member, `member add --learner`,
//!   start the new member, and retry `member promote` every 100 ms: etcd
//!   refuses it until the learner is within 90 % of the leader's log, so the
//!   first success is the moment etcd would let it vote. Timed from the
//!   `member add`.
//! - learner in sync: in the same run, the moment the leader's raft progress
//!   shows the learner replicated up to the commit index, read every 20 ms.
//!   That is the rule etcd-warden promotes by: after a snapshot, the learner
//!   has the snapshot's index long before it has applied the snapshot and
//!   appended what came after it, and a voter promoted in between holds up
//!   every write until it has.
//!
//! Both run on 127.0.0.1 with leased ports, outside any namespace: they need
//! no Pacemaker and no cluster lock.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use etcd_client::{Client, ConnectOptions, MemberAddOptions};
use etcd_warden::etcd::raft_progress;
use warden_harness::{OnSignal, ports};

/// The floor's figures for one run.
#[derive(Debug, Clone, Copy)]
pub struct FloorRun {
    /// Spawn of `etcd --force-new-cluster` → first acknowledged put.
    pub forced_restart: Duration,
    /// `member add --learner` → `member promote` accepted (etcd's 90 % rule).
    pub learner_catch_up: Duration,
    /// `member add --learner` → the leader replicates to it up to the
    /// commit index (the rule etcd-warden promotes by).
    pub learner_in_sync: Duration,
}

/// etcd settings both the floor and the cluster under test use.
#[derive(Debug, Clone)]
pub struct Flags {
    /// The etcd binary.
    pub etcd: PathBuf,
    /// `--quota-backend-bytes`.
    pub quota_backend_bytes: u64,
    /// `--snapshot-count`.
    pub snapshot_count: u64,
}

/// An etcd process, killed (by PID) on drop, and by a signal that ends the
/// bench while it runs.
struct Proc {
    child: Child,
    on_signal: Option<OnSignal>,
}

impl Proc {
    fn new(child: Child) -> Self {
        let pid = child.id();
        let on_signal = i32::try_from(pid).ok().map(|pid| {
            OnSignal::new(move || {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            })
        });
        Self { child, on_signal }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        // Forgotten before the wait reaps it: until then the PID cannot
        // belong to another process.
        self.on_signal = None;
        let _ = self.child.wait();
    }
}

fn spawn(flags: &Flags, name: &str, dir: &Path, c: u16, p: u16, extra: &[String]) -> Result<Proc> {
    let log = std::fs::File::create(dir.with_extension("log"))
        .with_context(|| format!("creating the log of {name}"))?;
    let child = Command::new(&flags.etcd)
        .arg(format!("--name={name}"))
        .arg(format!("--data-dir={}", dir.display()))
        .arg(format!("--listen-client-urls=http://127.0.0.1:{c}"))
        .arg(format!("--advertise-client-urls=http://127.0.0.1:{c}"))
        .arg(format!("--listen-peer-urls=http://127.0.0.1:{p}"))
        .arg(format!(
            "--initial-advertise-peer-urls=http://127.0.0.1:{p}"
        ))
        .arg(format!(
            "--quota-backend-bytes={}",
            flags.quota_backend_bytes
        ))
        .arg(format!("--snapshot-count={}", flags.snapshot_count))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("spawning {}", flags.etcd.display()))?;
    Ok(Proc::new(child))
}

/// Copies a data directory (`cp -a`), the way a forced restart gets its own.
pub fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    let out = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .context("running cp")?;
    ensure!(
        out.status.success(),
        "cp -a {} {}: {}",
        from.display(),
        to.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// One floor run on a copy of `image` (a stopped member's data directory),
/// in `work` (created, and removed afterwards).
pub fn run(flags: &Flags, image: &Path, work: &Path, timeout: Duration) -> Result<FloorRun> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let res = run_in(flags, image, work, timeout);
    let _ = std::fs::remove_dir_all(work);
    res
}

fn run_in(flags: &Flags, image: &Path, work: &Path, timeout: Duration) -> Result<FloorRun> {
    let d1 = work.join("m1.etcd");
    copy_dir(image, &d1)?;
    let [c1, p1, c2, p2] = [
        ports::lease()?,
        ports::lease()?,
        ports::lease()?,
        ports::lease()?,
    ];
    let ep1 = format!("http://127.0.0.1:{}", c1.port());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;

    let t0 = Instant::now();
    let _m1 = spawn(
        flags,
        "m1",
        &d1,
        c1.port(),
        p1.port(),
        &["--force-new-cluster".into()],
    )?;
    let mut client = rt.block_on(async {
        let deadline = t0 + timeout;
        loop {
            if let Ok(mut c) = Client::connect(
                [ep1.as_str()],
                Some(
                    ConnectOptions::new()
                        .with_connect_timeout(Duration::from_millis(500))
                        .with_timeout(Duration::from_secs(2)),
                ),
            )
            .await
                && c.put("/floor/probe", "1", None).await.is_ok()
            {
                return Ok(c);
            }
            if Instant::now() > deadline {
                bail!(
                    "no write on the forced member within {timeout:?} (log: {})",
                    d1.with_extension("log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })?;
    let forced_restart = t0.elapsed();

    // The copied member advertises the peer URL of the node it came from;
    // a learner must reach it here.
    let d2 = work.join("m2.etcd");
    let (learner_catch_up, learner_in_sync) = rt.block_on(async {
        let ms = client.member_list().await.context("member list")?;
        let me = ms.members().first().context("no member")?;
        let (id1, name1) = (me.id(), me.name().to_string());
        let peer1 = format!("http://127.0.0.1:{}", p1.port());
        client
            .member_update(id1, [peer1.clone()])
            .await
            .context("member update")?;
        let peer2 = format!("http://127.0.0.1:{}", p2.port());
        let t1 = Instant::now();
        // etcd 3.5 may leave a membership change unanswered while the
        // previous one (the update above) is still being applied: ask again,
        // and look for the learner in case an unanswered add did land.
        let id2 = loop {
            match client
                .member_add(
                    [peer2.clone()],
                    Some(MemberAddOptions::new().with_is_learner()),
                )
                .await
            {
                Ok(add) => break add.member().context("member add without a member")?.id(),
                Err(e) => {
                    if let Ok(ms) = client.member_list().await
                        && let Some(m) =
                            ms.members().iter().find(|m| m.peer_urls().contains(&peer2))
                    {
                        break m.id();
                    }
                    if t1.elapsed() > timeout {
                        return Err(anyhow::Error::new(e).context("member add --learner"));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        let m2 = spawn(
            flags,
            "m2",
            &d2,
            c2.port(),
            p2.port(),
            &[
                format!(
                    "--initial-cluster={name1}={peer1},m2=http://127.0.0.1:{}",
                    p2.port()
                ),
                "--initial-cluster-state=existing".into(),
            ],
        )?;
        let (mut promoted, mut in_sync) = (None, None);
        let mut next_promote = Instant::now();
        loop {
            if in_sync.is_none()
                && let Ok(p) = raft_progress::read_plain(&ep1, Duration::from_millis(500)).await
                && p.in_sync(id2)
            {
                in_sync = Some(t1.elapsed());
            }
            if promoted.is_none() && Instant::now() >= next_promote {
                if client.member_promote(id2).await.is_ok() {
                    promoted = Some(t1.elapsed());
                }
                next_promote = Instant::now() + Duration::from_millis(100);
            }
            if let (Some(p), Some(s)) = (promoted, in_sync) {
                drop(m2);
                return Ok((p, s));
            }
            if t1.elapsed() > timeout {
                bail!(
                    "the learner was not in sync within {timeout:?} (promoted: {}, log: {})",
                    promoted.is_some(),
                    d2.with_extension("log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })?;
    Ok(FloorRun {
        forced_restart,
        learner_catch_up,
        learner_in_sync,
    })
}
