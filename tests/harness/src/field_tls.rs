//! The field cluster's TLS, as docs/operations.md section 1 makes it: on
//! the first node, a CA and one key and certificate per node (both key
//! usages, the node's name and address as subject alternative names) and
//! one client certificate (`app`); each node's files copied to it (as
//! `scp` would), installed under `/etc/etcd-warden/tls`, and named by the
//! configuration's `[tls.client]` and `[tls.peer]`. The host plays the
//! client application: it reaches the nodes' etcd with `app`'s files.

use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result, ensure};

use crate::field::FieldCluster;

/// Where the runbook makes the certificates, on the first node (and where
/// each node gets its files).
pub const PKI_DIR: &str = "/root/pki";
/// Where each node keeps its TLS files.
pub const TLS_DIR: &str = "/etc/etcd-warden/tls";

/// A client's files on the host.
#[derive(Debug, Clone)]
pub struct HostTls {
    /// The CA certificate.
    pub ca: PathBuf,
    /// The client certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

impl FieldCluster {
    /// The documented commands that make the CA and every node's
    /// certificate, and `app`'s, on the first node.
    fn pki_script(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("{}={}", n.name, n.addr))
            .collect();
        let mut s = format!(
            "set -e
mkdir -p {PKI_DIR} && cd {PKI_DIR}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \\
    -keyout ca.key -out ca.crt -days 3650 -subj /CN=etcd-warden-ca
for n in {}; do
    name=${{n%%=*}} addr=${{n#*=}}
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \\
        -keyout \"$name.key\" -out \"$name.csr\" -subj \"/CN=$name\"
    printf 'subjectAltName = DNS:%s, IP:%s\\nextendedKeyUsage = serverAuth, clientAuth\\n' \\
        \"$name\" \"$addr\" > \"$name.ext\"
    openssl x509 -req -in \"$name.csr\" -CA ca.crt -CAkey ca.key -CAcreateserial \\
        -days 825 -extfile \"$name.ext\" -out \"$name.crt\"
done
",
            nodes.join(" ")
        );
        let _ = write!(
            s,
            "cd {PKI_DIR}
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \\
    -keyout app.key -out app.csr -subj /CN=app
printf 'extendedKeyUsage = clientAuth\\n' > app.ext
openssl x509 -req -in app.csr -CA ca.crt -CAkey ca.key -CAcreateserial \\
    -days 825 -extfile app.ext -out app.crt
"
        );
        s
    }

    /// Makes the PKI on the first node, copies each other node's files to
    /// it and `app`'s to the host.
    pub fn make_pki(&self) -> Result<()> {
        let first = self.nodes[0].name.clone();
        self.node_cmd_stdin(
            &first,
            &["bash", "-s"],
            &self.pki_script(),
            std::time::Duration::from_secs(120),
        )?
        .ok()
        .context("making the certificates on the first node")?;
        for n in self.nodes.iter().skip(1) {
            self.send_pki(&n.name)?;
        }
        fs::create_dir_all(self.inner_dir().join("tls"))?;
        self.refresh_host_tls("ca.crt")
    }

    /// Copies `ca.crt`, `NODE.crt` and `NODE.key` from the first node's
    /// PKI directory to node `name`'s (as `scp` would).
    pub(crate) fn send_pki(&self, name: &str) -> Result<()> {
        let (crt, key) = (format!("{name}.crt"), format!("{name}.key"));
        self.send_pki_files(name, &["ca.crt", &crt, &key])
    }

    /// Copies `files` from the first node's PKI directory to node `name`'s
    /// (as `scp` would).
    pub fn send_pki_files(&self, name: &str, files: &[&str]) -> Result<()> {
        let first = self.nodes[0].name.clone();
        fs::create_dir_all(self.pki_dir(name)?)?;
        for file in files {
            self.copy_in(
                name,
                &self.pki_path(&first, file)?,
                &format!("{PKI_DIR}/{file}"),
            )?;
        }
        Ok(())
    }

    /// Gives the host's client application new files from the first
    /// node's PKI directory: `ca` as the CA bundle it trusts, and `app.crt`
    /// and `app.key` as its identity (each replaced whole).
    pub fn refresh_host_tls(&self, ca: &str) -> Result<()> {
        let first = self.nodes[0].name.clone();
        let host = self.host_tls();
        for (file, to) in [
            (ca, &host.ca),
            ("app.crt", &host.cert),
            ("app.key", &host.key),
        ] {
            copy_whole(&self.pki_path(&first, file)?, to)
                .with_context(|| format!("copying {file} to the host"))?;
        }
        Ok(())
    }

    /// Section 1's commands that install node `name`'s TLS files from its
    /// PKI directory under [`TLS_DIR`].
    pub fn install_tls_files(&self, name: &str) -> Result<()> {
        self.node_sh_ok(name, &format!("set -e\n{}", install_tls_commands()))?;
        Ok(())
    }

    /// The PKI directory of `node`, seen from the host.
    fn pki_dir(&self, node: &str) -> Result<PathBuf> {
        Ok(self
            .node(node)?
            .dir
            .join("root")
            .join(PKI_DIR.trim_start_matches('/')))
    }

    /// A file of the PKI directory on `node`, seen from the host.
    fn pki_path(&self, node: &str, file: &str) -> Result<PathBuf> {
        let p = self.pki_dir(node)?.join(file);
        ensure!(p.exists(), "{node} has no {PKI_DIR}/{file}");
        Ok(p)
    }

    /// The client application's files on the host (`app`'s certificate).
    pub fn host_tls(&self) -> HostTls {
        let d = self.inner_dir().join("tls");
        HostTls {
            ca: d.join("ca.crt"),
            cert: d.join("app.crt"),
            key: d.join("app.key"),
        }
    }
}

/// The commands of section 1 that install a node's TLS files (after the
/// package, whose etcd-server dependency creates the `etcd` group).
pub(crate) fn install_tls_commands() -> String {
    format!(
        "install -d -m 0750 -g etcd {TLS_DIR}
install -m 0644 {PKI_DIR}/ca.crt {TLS_DIR}/ca.crt
install -m 0644 \"{PKI_DIR}/$(hostname).crt\" {TLS_DIR}/node.crt
install -m 0640 -g etcd \"{PKI_DIR}/$(hostname).key\" {TLS_DIR}/node.key"
    )
}

/// The configuration's TLS sections, both sides with the node's files.
pub(crate) fn tls_config() -> String {
    let side = |s: &str| {
        format!(
            "\n[tls.{s}]\ncert_file = \"{TLS_DIR}/node.crt\"\nkey_file = \"{TLS_DIR}/node.key\"\n\
             trusted_ca_file = \"{TLS_DIR}/ca.crt\"\nclient_cert_auth = true\n"
        )
    };
    format!("{}{}", side("client"), side("peer"))
}

/// Copies `from` to `to` through a temporary file beside `to` and a
/// rename, so that a reader (the host's client, between two calls) sees
/// the old file or the new one, never part.
fn copy_whole(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    let tmp = to.with_extension("copying");
    fs::copy(from, &tmp)?;
    fs::rename(&tmp, to)?;
    Ok(())
}
