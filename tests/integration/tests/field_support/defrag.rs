//! docs/operations.md, "Database size, alarms and defragmentation": `etcd-warden
//! defrag` on each node of a live pair, one after the other, with a writer
//! on both. The command asks the daemon, which takes the cluster's
//! defragmentation lock, defragments and releases the lock (the test
//! checks the lines that say so; the leadership handover on the leader is
//! not told apart). About 37 MB of values are
//! written and deleted first and the history compacted, so that most of
//! the file is free space (below the policy's 100 MB minimum, hence
//! `--below-threshold`, and the daemon's own checks leave it alone). Each
//! run prints its progress and the sizes, exits 0 and leaves the file
//! less than half its size; `etcd-warden status` then shows the
//! run in its `defrag` line; writes go on, nobody is fenced, no action
//! fails.

use std::time::{Duration, Instant};

use warden_harness::field::FieldCluster;

use super::{assert_no_failed_action, assert_no_new_fence, begin, check_writes, longest_write_gap};

/// What the command prints on a defragmentation that ran (docs/operations.md
/// shows the same lines).
const PROGRESS: &[&str] = &[
    "asking the daemon to defragment this node's etcd member",
    "took the defragmentation lock",
    "defragmenting the local member",
    "released the defragmentation lock",
];

/// 40 values of about 930 KB (etcd's request limit is 1.5 MiB), deleted
/// again, and the history compacted below the deletion: free space in
/// both members' files.
const FILL: &str = "set -e
    head -c 700000 /dev/urandom | base64 -w0 > /root/defrag-value
    for i in $(seq 1 40); do
        etcd-warden etcdctl put /field-defrag-fill/$i < /root/defrag-value > /dev/null
    done
    rm /root/defrag-value
    etcd-warden etcdctl del --prefix /field-defrag-fill > /dev/null
    rev=$(etcd-warden etcdctl get /field-defrag-fill -w json | grep -o '\"revision\":[0-9]*' | cut -d: -f2)
    etcd-warden etcdctl compact \"$rev\" > /dev/null";

/// The two sizes of `defragmented: A MiB -> B MiB in …`, in MiB.
fn sizes(done: &str) -> Option<(f64, f64)> {
    let rest = done.strip_prefix("defragmented: ")?;
    let (a, rest) = rest.split_once(" MiB -> ")?;
    let (b, _) = rest.split_once(" MiB")?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

pub fn defrag(c: &FieldCluster) {
    let (w, fences) = begin(c, "/field-defrag");
    c.node_sh_ok("node-a", FILL).unwrap();
    let start = Instant::now();
    let mut took = Vec::new();
    for node in ["node-a", "node-b"] {
        let t = Instant::now();
        let out = c
            .node_sh(node, "etcd-warden defrag --below-threshold")
            .unwrap();
        let said = format!("{}{}", out.stderr, out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "etcd-warden defrag on {node} did not defragment:\n{said}"
        );
        for line in PROGRESS {
            assert!(said.contains(line), "{node}: no {line:?} in:\n{said}");
        }
        let done = out
            .stdout
            .lines()
            .find(|l| l.starts_with("defragmented: "))
            .unwrap_or_else(|| panic!("{node}: no result line in:\n{said}"))
            .to_owned();
        let (before, after) =
            sizes(&done).unwrap_or_else(|| panic!("{node}: cannot read the sizes of {done:?}"));
        assert!(
            before > 30.0 && after < before / 2.0,
            "{node}: {done}: the filled and emptied file did not shrink"
        );
        let status = c.node_sh(node, "etcd-warden status").unwrap().stdout;
        let line = status
            .lines()
            .find(|l| l.starts_with("defrag "))
            .unwrap_or_else(|| panic!("{node}: etcd-warden status has no defrag line:\n{status}"));
        assert!(
            !line.contains("none by this daemon"),
            "{node}: status does not show the run: {line}"
        );
        took.push(format!(
            "{node} {:.1} s ({})",
            t.elapsed().as_secs_f64(),
            done.trim_start_matches("defragmented: ")
        ));
        w.wait_ack_after(Some(node), Instant::now(), Duration::from_secs(30))
            .unwrap();
    }
    let gap = longest_write_gap(&w, start);
    assert_no_new_fence(c, fences, "a defragmentation must not fence anyone");
    assert_no_failed_action(c);
    let acks = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_defrag: etcd-warden defrag {}; longest write gap {:.2} s; {acks} acknowledged writes, all present; no fence",
        took.join(", "),
        gap.as_secs_f64()
    );
}
