//! docs/operations.md, "Rotating TLS certificates", command for command on
//! a running pair (TLS on both of etcd's sides, client certificates
//! required, as section 1 installs it), with a writer through both nodes
//! that holds a client certificate of the same CA:
//!
//! - [`renew_leaf`]: each node's certificate renewed (same CA, same key)
//!   and moved into place; etcd presents the new one at the next
//!   handshake on both its ports, and nothing restarts: the same etcd
//!   process, the same member ids, no leave.
//! - [`rotate_ca`]: a new CA; both CAs trusted everywhere (a bundle), each
//!   node's etcd restarted through a standby; every certificate (the
//!   nodes' and the client's) signed by the new CA; the old CA dropped and
//!   each node's etcd restarted again. Afterwards etcd refuses a client
//!   certificate of the old CA and presents certificates of the new one.
//!
//! Both: every acknowledged write present, nobody fenced, no failed action,
//! and the longest time the pair took no write printed.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use warden_harness::field::FieldCluster;
use warden_harness::field_tls::{PKI_DIR, TLS_DIR};
use warden_integration::writer::{Writer, longest_gap};

use super::upgrade::{standby, unstandby};
use super::{
    assert_no_failed_action, assert_no_new_fence, begin, check_writes, member_id, members,
};

/// Runs a shell script on the node that keeps the PKI (node-a).
fn on_pki(c: &FieldCluster, script: &str) -> Result<()> {
    c.node_cmd_stdin(
        "node-a",
        &["bash", "-s"],
        &format!("set -e\ncd {PKI_DIR}\n{script}"),
        Duration::from_secs(120),
    )?
    .ok()
    .map(|_| ())
}

/// The runbook's renewal of `names`' certificates with CA `ca` (same keys).
fn sign_with(c: &FieldCluster, ca: &str, names: &[&str]) -> Result<()> {
    on_pki(
        c,
        &format!(
            "for name in {}; do
    openssl req -new -key \"$name.key\" -out \"$name.csr\" -subj \"/CN=$name\"
    openssl x509 -req -in \"$name.csr\" -CA {ca}.crt -CAkey {ca}.key -CAcreateserial \\
        -days 825 -extfile \"$name.ext\" -out \"$name.crt\"
done",
            names.join(" ")
        ),
    )
}

/// On `node`: its PKI file `file` installed as `TLS_DIR/dest` with one
/// rename, as the runbook does.
fn put_in_place(c: &FieldCluster, node: &str, file: &str, dest: &str) -> Result<()> {
    if node != "node-a" {
        c.send_pki_files(node, &[file])?;
    }
    c.node_sh_ok(
        node,
        &format!(
            "install -m 0644 {PKI_DIR}/{file} {TLS_DIR}/{dest}.new\nmv {TLS_DIR}/{dest}.new {TLS_DIR}/{dest}"
        ),
    )?;
    Ok(())
}

/// The serial of the certificate `node`'s etcd presents on `port` at a new
/// handshake, asked from `node` itself with its own certificate.
fn served_serial(c: &FieldCluster, node: &str, port: u16) -> Result<String> {
    let addr = &c.node(node)?.addr;
    let o = c.node_sh_ok(
        node,
        &format!(
            "openssl s_client -connect {addr}:{port} -CAfile {TLS_DIR}/ca.crt \
             -cert {TLS_DIR}/node.crt -key {TLS_DIR}/node.key </dev/null 2>/dev/null \
             | openssl x509 -noout -serial"
        ),
    )?;
    Ok(o.stdout.trim().to_owned())
}

/// The serial of a certificate file in the PKI directory of node-a.
fn file_serial(c: &FieldCluster, file: &str) -> Result<String> {
    let o = c.node_sh_ok(
        "node-a",
        &format!("openssl x509 -noout -serial -in {PKI_DIR}/{file}"),
    )?;
    Ok(o.stdout.trim().to_owned())
}

/// etcd's PID on `node` (the process backend's PID file).
fn etcd_pid(c: &FieldCluster, node: &str) -> Result<String> {
    Ok(c.node_sh_ok(node, "cat /var/lib/etcd-warden/etcd.pid")?
        .stdout
        .trim()
        .to_owned())
}

/// Waits until etcd on every node presents `file`'s certificate (by
/// serial) on both its ports: the next handshake reads the new file.
fn wait_presented(c: &FieldCluster, names: &[&str]) -> Result<()> {
    for name in names {
        let want = file_serial(c, &format!("{name}.crt"))?;
        for port in [2379, 2380] {
            let got = served_serial(c, name, port)?;
            ensure!(
                got == want,
                "{name}'s etcd presents {got} on port {port}, not its new certificate ({want})"
            );
        }
    }
    Ok(())
}

/// Whether etcd at `addr` presents a certificate that `ca` verifies, asked
/// from node `on` with `cert` and `key` (section 8's check).
pub fn verifies(c: &FieldCluster, on: &str, addr: &str, ca: &str, cert: &str, key: &str) -> bool {
    c.node_sh(
        on,
        &format!(
            "openssl s_client -connect {addr}:2379 -CAfile {ca} -cert {cert} -key {key} \
             </dev/null 2>&1 | grep -q 'Verify return code: 0 (ok)'"
        ),
    )
    .is_ok_and(|o| o.status.success())
}

/// Returns once a write was acknowledged through each node after now.
fn writes_through_both(w: &Writer) -> Instant {
    let now = Instant::now();
    for n in ["node-a", "node-b"] {
        w.wait_ack_after(Some(n), now, Duration::from_secs(60))
            .unwrap();
    }
    Instant::now()
}

/// A scenario's end: no fence since `fences`, no failed action, every
/// acknowledged write present on `reader`'s etcd. Returns how many, and
/// the longest time the pair took no write between `from` and `to`.
fn checked(
    c: &FieldCluster,
    w: Writer,
    fences: usize,
    what: &str,
    reader: &str,
    (from, to): (Instant, Instant),
) -> (usize, Duration) {
    assert_no_new_fence(c, fences, &format!("{what} must not fence anyone"));
    assert_no_failed_action(c);
    let gap = longest_gap(&w.acks(), None, from, to);
    (check_writes(c, w, reader).unwrap(), gap)
}

/// Each node's certificate renewed in place: no restart, no leave.
pub fn renew_leaf(c: &FieldCluster) {
    let (w, fences) = begin(c, "/field-tls-renew");
    let pids: Vec<String> = ["node-a", "node-b"]
        .iter()
        .map(|n| etcd_pid(c, n).unwrap())
        .collect();
    let ids: Vec<u64> = members(c, "node-a").unwrap().iter().map(|m| m.id).collect();
    let old = file_serial(c, "node-b.crt").unwrap();
    let t = Instant::now();
    sign_with(c, "ca", &["node-a", "node-b"]).unwrap();
    for n in ["node-a", "node-b"] {
        put_in_place(c, n, &format!("{n}.crt"), "node.crt").unwrap();
    }
    wait_presented(c, &["node-a", "node-b"]).unwrap();
    assert_ne!(
        file_serial(c, "node-b.crt").unwrap(),
        old,
        "a new certificate"
    );
    let end = writes_through_both(&w);
    for (n, pid) in ["node-a", "node-b"].iter().zip(&pids) {
        assert_eq!(&etcd_pid(c, n).unwrap(), pid, "etcd on {n} restarted");
    }
    let now: Vec<u64> = members(c, "node-a").unwrap().iter().map(|m| m.id).collect();
    assert_eq!(now, ids, "the members changed");
    let (acks, gap) = checked(c, w, fences, "a certificate renewal", "node-a", (t, end));
    eprintln!(
        "field_tls renew: both nodes' certificates renewed and presented in {:.1} s, the same \
         etcd processes and members; longest time without a write {:.2} s; {acks} acknowledged \
         writes, all present; no fence",
        end.duration_since(t).as_secs_f64(),
        gap.as_secs_f64()
    );
}

/// Each node through a standby and back: etcd restarts there and reads
/// its CA file again.
fn restart_each(c: &FieldCluster) {
    for (node, peer) in [("node-a", "node-b"), ("node-b", "node-a")] {
        standby(c, node, peer);
        unstandby(c, node, peer);
    }
}

/// The CA replaced under a running pair.
pub fn rotate_ca(c: &FieldCluster) {
    let (w, fences) = begin(c, "/field-tls-ca");
    let t = Instant::now();
    // The old CA's client certificate, kept to show it is refused at the end.
    on_pki(c, "cp app.crt app-old-ca.crt && cp app.key app-old-ca.key").unwrap();
    // 1. The new CA, and a bundle of both, trusted everywhere.
    on_pki(
        c,
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \\
    -keyout ca2.key -out ca2.crt -days 3650 -subj /CN=etcd-warden-ca-2
cat ca.crt ca2.crt > bundle.crt",
    )
    .unwrap();
    for n in ["node-a", "node-b"] {
        put_in_place(c, n, "bundle.crt", "ca.crt").unwrap();
    }
    c.refresh_host_tls("bundle.crt").unwrap();
    // 2. Each etcd restarted, through a standby, to read the bundle.
    restart_each(c);
    // 3. Every certificate signed by the new CA.
    sign_with(c, "ca2", &["node-a", "node-b", "app"]).unwrap();
    for n in ["node-a", "node-b"] {
        put_in_place(c, n, &format!("{n}.crt"), "node.crt").unwrap();
    }
    c.refresh_host_tls("bundle.crt").unwrap();
    wait_presented(c, &["node-a", "node-b"]).unwrap();
    // 4. The old CA dropped, and each etcd restarted again. The new CA
    // becomes the PKI's ca.crt, which section 1 installs on a new node.
    on_pki(
        c,
        "mv ca.crt ca-old.crt && mv ca.key ca-old.key
mv ca2.crt ca.crt && mv ca2.key ca.key",
    )
    .unwrap();
    for n in ["node-a", "node-b"] {
        put_in_place(c, n, "ca.crt", "ca.crt").unwrap();
    }
    c.refresh_host_tls("ca.crt").unwrap();
    restart_each(c);
    let end = writes_through_both(&w);

    refused_with_old_ca(c).unwrap();
    let pki = |f: &str| format!("{PKI_DIR}/{f}");
    for n in ["node-a", "node-b"] {
        let addr = &c.node(n).unwrap().addr;
        assert!(
            verifies(
                c,
                "node-a",
                addr,
                &pki("ca.crt"),
                &pki("app.crt"),
                &pki("app.key")
            ),
            "{n}'s etcd presents no certificate of the new CA"
        );
    }
    let (acks, gap) = checked(c, w, fences, "a CA rotation", "node-a", (t, end));
    eprintln!(
        "field_tls ca: the CA replaced in {:.1} s (two standby rounds); longest time without \
         a write {:.2} s; a client certificate of the old CA refused; {acks} acknowledged \
         writes, all present; no fence",
        end.duration_since(t).as_secs_f64(),
        gap.as_secs_f64()
    );
}

/// etcd on node-b refuses a client that presents the old CA's certificate
/// and accepts the new one.
fn refused_with_old_ca(c: &FieldCluster) -> Result<()> {
    let addr = c.node("node-b")?.addr.clone();
    let get = |cert: &str| {
        c.node_sh(
            "node-a",
            &format!(
                "ETCDCTL_API=3 etcdctl --endpoints=https://{addr}:2379 --cacert={PKI_DIR}/ca.crt \
                 --cert={PKI_DIR}/{cert}.crt --key={PKI_DIR}/{cert}.key --dial-timeout=3s \
                 --command-timeout=5s get /field-tls-ca --prefix --keys-only --limit=1"
            ),
        )
        .context("etcdctl on node-a")
    };
    let old = get("app-old-ca")?;
    ensure!(
        !old.status.success(),
        "etcd took a client certificate of the old CA: {}",
        old.stdout
    );
    let new = get("app")?;
    ensure!(
        new.status.success(),
        "etcd refused the new CA's client certificate: {}",
        new.stderr
    );
    Ok(())
}

/// docs/operations.md, "Moving a formed pair from http to https", on a
/// pair installed with http URLs (a cluster made with
/// `FieldOptions::tls` off), with a writer through both nodes that
/// switches to https with its client certificate when node-a's etcd does.
/// Afterwards: two voters, every peer and client URL https, every
/// acknowledged write present, nobody fenced.
pub fn http_to_https(c: &FieldCluster) {
    let (w, fences) = begin(c, "/field-tls-migrate");
    let t = Instant::now();
    // 1. The certificates, made and installed; nothing reads them yet.
    c.make_pki().unwrap();
    for n in ["node-a", "node-b"] {
        c.install_tls_files(n).unwrap();
    }
    // 2. node-b leaves; node-a goes on alone.
    standby(c, "node-b", "node-a");
    // 3. node-a's member announces its https peer URL.
    let id = member_id(c, "node-a", "node-a")
        .unwrap()
        .expect("node-a's member");
    let addr = c.node("node-a").unwrap().addr.clone();
    c.node_sh_ok(
        "node-a",
        &format!("etcd-warden etcdctl member update {id:x} --peer-urls=https://{addr}:2380"),
    )
    .unwrap();
    // 4. Both nodes' configuration: https and the TLS sections.
    for n in ["node-a", "node-b"] {
        c.write_config(n, true).unwrap();
    }
    // 5. node-a's daemon restarted: it restarts etcd with TLS; the client
    // moves to https with it.
    let pid = etcd_pid(c, "node-a").unwrap();
    c.node_sh_ok("node-a", "systemctl restart etcd-warden")
        .unwrap();
    warden_integration::field::use_host_tls(c);
    c.set_tls(true);
    let t_https = Instant::now();
    let first = w
        .wait_ack_after(Some("node-a"), t_https, Duration::from_secs(120))
        .unwrap();
    assert_ne!(
        etcd_pid(c, "node-a").unwrap(),
        pid,
        "node-a's daemon did not restart etcd"
    );
    // 6. node-b's daemon restarted, node-b back: a learner, then a voter.
    c.node_sh_ok("node-b", "systemctl restart etcd-warden")
        .unwrap();
    unstandby(c, "node-b", "node-a");
    let end = writes_through_both(&w);
    for m in members(c, "node-b").unwrap() {
        assert!(
            m.peer_urls
                .iter()
                .chain(&m.client_urls)
                .all(|u| u.starts_with("https://"))
                && !m.client_urls.is_empty(),
            "{} still announces http: {m:?}",
            m.name
        );
    }
    let (acks, gap) = checked(c, w, fences, "moving to https", "node-b", (t, end));
    eprintln!(
        "field_tls http -> https: done in {:.1} s; node-a's daemon restarted -> first write over https \
         {:.1} s; longest time without a write {:.2} s; {acks} acknowledged writes, all \
         present; no fence",
        end.duration_since(t).as_secs_f64(),
        first.at.duration_since(t_https).as_secs_f64(),
        gap.as_secs_f64()
    );
}
