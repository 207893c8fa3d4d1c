//! Plans and their effects on a temporary state and data directory.

use super::*;
use std::os::unix::fs::PermissionsExt;

fn etcd() -> LocalEtcd {
    LocalEtcd {
        binary: "/nonexistent/etcd".into(),
        peer_urls: vec!["http://127.0.0.1:2380".into()],
        forces: true,
        owner: None,
    }
}

fn paths(t: &std::path::Path) -> LocalPaths {
    LocalPaths {
        data_dir: t.join("data"),
        state_file: t.join("state/failover.json"),
        run_dir: t.join("run"),
        archive_dir: t.join("data.archive"),
    }
}

fn req(what: RecoverWhat, node: &str) -> RecoverRequest {
    RecoverRequest {
        what,
        node: node.into(),
        archive: None,
        snapshot: None,
        confirm: true,
        allow_older_epoch: false,
    }
}

fn quiet(_: &str) {}

/// A local etcd in `dir/bin` whose restore tool (`etcdctl`) fails; the
/// tool's path.
fn failing_tool(dir: &Path) -> (LocalEtcd, std::path::PathBuf) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tool = bin.join("etcdctl");
    std::fs::write(&tool, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let local = LocalEtcd {
        binary: bin.join("etcd"),
        peer_urls: vec!["http://127.0.0.1:2380".into()],
        forces: true,
        owner: None,
    };
    (local, tool)
}

#[test]
fn plans_and_their_effects() {
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    // No data: nothing to force from.
    let force = req(RecoverWhat::ForceNewCluster, "a");
    assert!(plan(&force, "a", &p, &etcd()).is_err());
    // Only on the node whose data is kept.
    assert!(plan(&req(RecoverWhat::ForceNewCluster, "b"), "a", &p, &etcd()).is_err());
    std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
    std::fs::write(p.member_dir().join("snap/db"), b"x").unwrap();
    p.update_state(|s| {
        s.cluster_id = Some(1);
        s.member_id = Some(2);
        s.voters = vec!["a".into(), "b".into()];
    })
    .unwrap();
    let pl = plan(&force, "a", &p, &etcd()).unwrap();
    assert_eq!(pl.action, RecoverAction::MarkInSync);
    apply(&pl.action, &p, &mut quiet).unwrap();
    assert_eq!(p.in_sync(), Some(p.boot_id().unwrap()));
    // keep-data-of self raises the epoch.
    let keep = req(RecoverWhat::KeepDataOf, "a");
    let pl = plan(&keep, "a", &p, &etcd()).unwrap();
    apply(&pl.action, &p, &mut quiet).unwrap();
    assert_eq!(p.read_state().unwrap().epoch, 1);
    // keep-data-of the peer archives ours (never deletes) ...
    let pl = plan(&req(RecoverWhat::KeepDataOf, "b"), "a", &p, &etcd()).unwrap();
    assert!(pl.needs_etcd_stopped);
    apply(&pl.action, &p, &mut quiet).unwrap();
    assert!(!p.has_data());
    assert_eq!(p.archives().len(), 1);
    // ... and restore-archive brings it back with its epoch.
    let restore = req(RecoverWhat::RestoreArchive, "a");
    let pl = plan(&restore, "a", &p, &etcd()).unwrap();
    apply(&pl.action, &p, &mut quiet).unwrap();
    assert_eq!(std::fs::read(p.member_dir().join("snap/db")).unwrap(), b"x");
    assert_eq!(p.read_state().unwrap().epoch, 1);
}

/// A file that passes the snapshot check: a bbolt magic and the SHA-256
/// trailer etcd appends.
fn fake_snapshot(p: &Path) {
    use sha2::Digest;
    let mut db = vec![0u8; 4096];
    db[16..20].copy_from_slice(&0xED0C_DAEDu32.to_le_bytes());
    let sum = sha2::Sha256::digest(&db);
    db.extend_from_slice(&sum);
    std::fs::write(p, db).unwrap();
}

#[test]
fn restore_snapshot_plans_above_every_known_epoch_and_refuses_existing_data() {
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    let snap = t.path().join("s.db");
    let (local, tool) = failing_tool(t.path());
    let what = RecoverRequest {
        snapshot: Some(snap.clone()),
        ..req(RecoverWhat::RestoreSnapshot, "a")
    };
    let what_b = RecoverRequest {
        node: "b".into(),
        ..what.clone()
    };
    // Only the node itself restores.
    assert!(plan(&what_b, "a", &p, &local).is_err());
    // A file that is not a verified snapshot is refused before anything.
    std::fs::write(&snap, b"not a snapshot").unwrap();
    let e = plan(&what, "a", &p, &local).unwrap_err();
    assert!(
        format!("{e:#}").contains("not a sound etcd snapshot"),
        "{e:#}"
    );
    fake_snapshot(&snap);
    // Existing data is archived first, never deleted, and its epoch
    // counts.
    std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
    std::fs::write(p.member_dir().join("snap/db"), b"x").unwrap();
    p.update_state(|s| s.epoch = 4).unwrap();
    let pl = plan(&what, "a", &p, &local).unwrap();
    assert!(
        pl.describe[0].contains("nothing deleted"),
        "{:?}",
        pl.describe
    );
    let RecoverAction::RestoreSnapshot(r) = &pl.action else {
        panic!("{:?}", pl.action)
    };
    assert!(r.archive_first);
    assert_eq!(r.epoch, 5);
    // Archived (its epoch 4 goes with it), then a state file at 2: the
    // plan goes above both.
    p.archive("test", 1).unwrap();
    p.update_state(|s| s.epoch = 2).unwrap();
    let pl = plan(&what, "a", &p, &local).unwrap();
    assert!(pl.needs_etcd_stopped);
    let RecoverAction::RestoreSnapshot(r) = &pl.action else {
        panic!("{:?}", pl.action)
    };
    assert_eq!(r.epoch, 5);
    assert_eq!(r.tool, RestoreTool::Etcdctl(tool.clone()));
    assert_eq!(r.name, "a");
    let other = match plan(&what, "a", &p, &local).unwrap().action {
        RecoverAction::RestoreSnapshot(o) => o.token,
        a => panic!("{a:?}"),
    };
    assert_ne!(r.token, other, "every restore gets a fresh token");
    // A failing tool leaves the data directory without data and the
    // state file as it was.
    let e = apply(&pl.action, &p, &mut quiet).unwrap_err();
    assert!(e.to_string().contains("snapshot restore failed"), "{e}");
    assert!(!p.has_data());
    assert_eq!(p.read_state().unwrap().epoch, 2);
}

#[test]
fn restore_archive_picks_the_newest_data_and_never_an_older_epoch() {
    use crate::reconcile::archives::test_archive;
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    // Names out of order, as a clock stepped back leaves them.
    let older = test_archive(&p, 5000, 7, 2, 900);
    let newest_of_7 = test_archive(&p, 3000, 7, 3, 500);
    let other_cluster = test_archive(&p, 4000, 8, 4, 100);
    let restore = req(RecoverWhat::RestoreArchive, "a");
    // No cluster named: the newest data of all.
    let pl = plan(&restore, "a", &p, &etcd()).unwrap();
    assert_eq!(
        pl.action,
        RecoverAction::Restore {
            archive: other_cluster,
            then: AfterRestore::OweRevisions,
            raise_epoch: None,
            owner: None,
        }
    );
    // The state file names cluster 7 at epoch 3 (its data went
    // missing): the newest data of that cluster.
    p.write_state(&StateFile {
        cluster_id: Some(7),
        epoch: 3,
        formed: true,
        ..StateFile::default()
    })
    .unwrap();
    let pl = plan(&restore, "a", &p, &etcd()).unwrap();
    assert_eq!(
        pl.action,
        RecoverAction::Restore {
            archive: newest_of_7.clone(),
            then: AfterRestore::OweRevisions,
            raise_epoch: None,
            owner: None,
        }
    );
    assert!(
        pl.describe[0].contains("cluster 7, epoch 3, raft index 500"),
        "{:?}",
        pl.describe
    );
    // An archive of an older epoch than the state file names is refused,
    // naming both epochs and the override.
    let named = RecoverRequest {
        archive: Some(older.clone()),
        ..restore.clone()
    };
    let e = plan(&named, "a", &p, &etcd()).unwrap_err().to_string();
    assert!(e.contains("holds data of epoch 2"), "{e}");
    assert!(e.contains("names epoch 3"), "{e}");
    assert!(e.contains("--allow-older-epoch"), "{e}");
    // A forced restart not yet confirmed counts too.
    p.update_state(|s| s.pending_epoch = Some(4)).unwrap();
    let e = plan(&restore, "a", &p, &etcd()).unwrap_err().to_string();
    assert!(e.contains("names epoch 4"), "{e}");
    p.update_state(|s| s.pending_epoch = None).unwrap();
    let allowed = RecoverRequest {
        allow_older_epoch: true,
        ..named
    };
    assert_eq!(
        plan(&allowed, "a", &p, &etcd()).unwrap().action,
        RecoverAction::Restore {
            archive: older,
            then: AfterRestore::OweRevisions,
            // Above every epoch known here: the state file's 3, the
            // archives' 2, 3 and 4.
            raise_epoch: Some(5),
            owner: None,
        }
    );
    // Restored: the data and its state are back.
    apply(&pl.action, &p, &mut quiet).unwrap();
    assert_eq!(
        std::fs::read_to_string(p.member_dir().join("snap/db")).unwrap(),
        "7/3/500"
    );
    let st = p.read_state().unwrap();
    assert_eq!((st.cluster_id, st.epoch), (Some(7), 3));
}

#[test]
fn ids_from_the_restore_log() {
    let log = r#"{"level":"info","msg":"restoring snapshot","path":"s.db"}
{"level":"info","msg":"added member","cluster-id":"7f2d1c7a3b3e9f10","local-member-id":"0","added-peer-id":"8e9e05c52164694d","added-peer-peer-urls":["http://127.0.0.1:2380"]}"#;
    assert_eq!(logged_id(log, "cluster-id"), Some(0x7f2d_1c7a_3b3e_9f10));
    assert_eq!(logged_id(log, "added-peer-id"), Some(0x8e9e_05c5_2164_694d));
    assert_eq!(logged_id(log, "local-member-id"), None, "zero is no id");
    assert_eq!(logged_id("no json here", "cluster-id"), None);
    // etcdutl 3.5 logs in the console format: fields after the message.
    let console = "2026-12-05T11:27:12Z\tinfo\tmembership/cluster.go:421\tadded member\t{\"cluster-id\": \"c4407b4a588e694d\", \"local-member-id\": \"0\", \"added-peer-id\": \"a6b899a614adff8f\", \"added-peer-is-learner\": false}";
    assert_eq!(
        logged_id(console, "cluster-id"),
        Some(0xc440_7b4a_588e_694d)
    );
    assert_eq!(
        logged_id(console, "added-peer-id"),
        Some(0xa6b8_99a6_14ad_ff8f)
    );
    assert_eq!(logged_id(console, "local-member-id"), None);
}

/// `force-new-cluster` on a learner's data (the state file lists no voter
/// for this node): a restore of the newest backend here, never in a
/// topology that does not force, and from an archive of the same cluster
/// only where it holds a later raft index.
#[test]
fn force_on_a_learners_data_restores_the_newest_backend_in_two_node_clusters_only() {
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    let (local, _) = failing_tool(t.path());
    std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
    std::fs::write(p.member_dir().join("snap/db"), b"learner").unwrap();
    p.update_state(|s| {
        s.epoch = 16;
        s.cluster_id = Some(7);
        s.voters = vec!["b".into()];
    })
    .unwrap();
    let force = req(RecoverWhat::ForceNewCluster, "a");
    let pl = plan(&force, "a", &p, &local).unwrap();
    assert!(pl.stops_etcd && !pl.needs_etcd_stopped, "{pl:?}");
    let RecoverAction::RestoreSnapshot(r) = &pl.action else {
        panic!("{:?}", pl.action)
    };
    assert_eq!(r.source, RestoreSource::OwnBackend);
    assert!(r.archive_first);
    assert_eq!(r.epoch, 17);
    assert_eq!(
        r.revision,
        restore::RevisionStep::Daemon(crate::reconcile::revision_step::UNKNOWN_LOSS_REVISIONS)
    );
    assert!(
        pl.describe.iter().any(|l| l.contains("a learner's")),
        "{:?}",
        pl.describe
    );
    // An HA or arbiter cluster never forces.
    let ha = LocalEtcd {
        forces: false,
        ..local.clone()
    };
    let e = plan(&force, "a", &p, &ha).unwrap_err();
    assert!(e.to_string().contains("never forces"), "{e}");
    // A voter's data is a plain force (the in-sync marker).
    p.update_state(|s| s.voters = vec!["a".into(), "b".into()])
        .unwrap();
    assert_eq!(
        plan(&force, "a", &p, &local).unwrap().action,
        RecoverAction::MarkInSync
    );
}

/// A member directory without a log (a join that received no data) is no
/// data, so restore-archive goes ahead; it is moved into the archive
/// directory first, not merged with or left in the way of the archive.
#[test]
fn restore_archive_moves_a_member_directory_without_a_log_aside_first() {
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
    std::fs::write(p.member_dir().join("snap/db"), b"kept").unwrap();
    p.update_state(|s| {
        s.cluster_id = Some(1);
        s.member_id = Some(2);
        s.voters = vec!["a".into()];
    })
    .unwrap();
    let pl = plan(&req(RecoverWhat::KeepDataOf, "b"), "a", &p, &etcd()).unwrap();
    apply(&pl.action, &p, &mut quiet).unwrap();
    // A join began: a member directory without a write-ahead log.
    std::fs::create_dir_all(p.member_dir().join("wal")).unwrap();
    std::fs::create_dir_all(p.member_dir().join("snap")).unwrap();
    p.update_state(|s| s.joining = true).unwrap();
    assert!(!p.has_data());
    let pl = plan(&req(RecoverWhat::RestoreArchive, "a"), "a", &p, &etcd()).unwrap();
    assert!(
        pl.describe[0].contains("no write-ahead log"),
        "{:?}",
        pl.describe
    );
    let done = apply(&pl.action, &p, &mut quiet).unwrap();
    assert_eq!(done.len(), 3, "{done:?}");
    assert_eq!(
        std::fs::read(p.member_dir().join("snap/db")).unwrap(),
        b"kept"
    );
    let kept: Vec<_> = std::fs::read_dir(&p.archive_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("member/wal").is_dir())
        .collect();
    assert_eq!(kept.len(), 1, "the leftover is archived, not deleted");
}

/// Rewrites the state file an archive keeps.
fn set_archived_state(archive: &Path, f: impl FnOnce(&mut StateFile)) {
    let path = archive.join("state.json");
    let mut st: StateFile = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    f(&mut st);
    std::fs::write(&path, serde_json::to_vec(&st).unwrap()).unwrap();
}

/// A two-node archive that lists the peer's member is the operator's
/// choice once restored: the in-sync marker is set for this boot, and the
/// daemon forces a one-member cluster from it (as after
/// `force-new-cluster`), which moves the revision on; no move is owed at a
/// plain start, which could not commit it without the peer's member. A
/// one-member archive owes the move at its first start; an HA archive of
/// several voters neither.
#[test]
fn restore_archive_forces_from_a_pairs_data_and_owes_a_move_for_one_members() {
    use crate::reconcile::archives::test_archive;
    let restored = |voters: &[&str], forces: bool| {
        let t = tempfile::tempdir().unwrap();
        let p = paths(t.path());
        let a = test_archive(&p, 3000, 7, 3, 500);
        set_archived_state(&a, |s| {
            s.member_id = Some(11);
            s.voters = voters.iter().map(|v| (*v).to_owned()).collect();
        });
        let local = LocalEtcd { forces, ..etcd() };
        let pl = plan(&req(RecoverWhat::RestoreArchive, "a"), "a", &p, &local).unwrap();
        let RecoverAction::Restore { archive, then, .. } = &pl.action else {
            panic!("{:?}", pl.action)
        };
        assert_eq!(archive, &a);
        let then = *then;
        let lines = pl.describe.join("\n");
        let done = apply(&pl.action, &p, &mut quiet).unwrap().join("\n");
        let owed = p.read_state().unwrap().revision_bump_owed;
        let marker = p.valid_in_sync_marker();
        (then, lines, done, owed, marker, t)
    };
    let (then, lines, done, owed, marker, _t) = restored(&["a", "b"], true);
    assert_eq!(then, AfterRestore::ForceFromIt);
    assert!(
        lines.contains("as holding every acknowledged write"),
        "{lines}"
    );
    assert!(lines.contains("100000"), "{lines}");
    assert!(done.contains("in-sync marker set"), "{done}");
    assert_eq!(owed, None);
    assert!(marker.expect("a marker for this boot").operator);

    let (then, lines, _, owed, marker, _t) = restored(&["a"], true);
    assert_eq!(then, AfterRestore::OweRevisions);
    assert!(
        lines.contains("owe a move of the revision by 100000"),
        "{lines}"
    );
    assert_eq!(owed, Some(UNKNOWN_LOSS_REVISIONS));
    assert!(marker.is_none());

    let (then, _, _, owed, marker, _t) = restored(&["a", "b", "c"], false);
    assert_eq!(then, AfterRestore::Nothing);
    assert_eq!(owed, None);
    assert!(marker.is_none());
}

/// An archive of a member that left gracefully ends with its own removal:
/// etcd cannot run it alone, so its backend is restored as a new
/// one-member cluster, and the archive is left as it is.
#[test]
fn restore_archive_of_a_departed_member_restores_its_backend() {
    use crate::reconcile::archives::test_archive;
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    let (local, _tool) = failing_tool(t.path());
    let a = test_archive(&p, 3000, 7, 3, 500);
    set_archived_state(&a, |s| {
        s.departed = true;
        s.voters = vec!["b".into()];
    });
    let pl = plan(&req(RecoverWhat::RestoreArchive, "a"), "a", &p, &local).unwrap();
    let RecoverAction::RestoreSnapshot(r) = &pl.action else {
        panic!("{:?}", pl.action)
    };
    assert_eq!(
        r.source,
        RestoreSource::ArchivedBackend(a.join("member/snap/db"))
    );
    assert!(!r.archive_first);
    assert_eq!(r.epoch, 4, "above every epoch known here");
    let lines = pl.describe.join("\n");
    assert!(lines.contains("ends with its own removal"), "{lines}");
}

/// A data directory a restore creates (its volume replaced, or moved
/// away) is etcd's, `0700`, as the daemon's start would create it; one
/// that exists is left as it is.
#[test]
fn a_restore_creates_a_missing_data_directory_for_etcds_user() {
    use std::os::unix::fs::MetadataExt;
    let t = tempfile::tempdir().unwrap();
    let p = paths(t.path());
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    let owner = (nobody.uid.as_raw(), nobody.gid.as_raw());
    make_data_dir(&p, Some(owner)).unwrap();
    let m = std::fs::metadata(&p.data_dir).unwrap();
    assert_eq!(
        (m.uid(), m.gid(), m.mode() & 0o7777),
        (owner.0, owner.1, 0o700)
    );
    std::os::unix::fs::chown(&p.data_dir, Some(0), Some(0)).unwrap();
    make_data_dir(&p, Some(owner)).unwrap();
    assert_eq!(std::fs::metadata(&p.data_dir).unwrap().uid(), 0);
}
