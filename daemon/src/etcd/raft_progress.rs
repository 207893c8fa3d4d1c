//! The leader's raft progress of each member, read from etcd's expvar page
//! (`GET /debug/vars`, its `raft.status`).
//!
//! A learner that caught up from a snapshot serves no client request until
//! its member is published, and its first publish proposal is often applied
//! inside that snapshot, so it waits etcd's whole request timeout (about 7 s)
//! before it proposes again. Until then its Status does not answer. The
//! leader, though, knows how far the learner's log has come: the match index
//! it tracks for every member, and whether it replicates to it (a member it
//! cannot reach drops back to probing). This is that view, read live from
//! the leader on each pass, never kept. etcd's own check at `member promote`
//! stays the last word.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::TlsFiles;

/// The page is a few tens of KiB (memory statistics, the command line);
/// anything much larger is not etcd's.
const MAX_PAGE: u64 = 4 << 20;

/// Why the leader's raft progress could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProgressError {
    /// The client URL is not `http://host:port` or `https://host:port`.
    #[error("cannot read raft progress from {0:?}: not an http(s)://host:port URL")]
    Url(String),
    /// Connecting, TLS, writing or reading failed.
    #[error("reading raft progress from {url}: {source}")]
    Io {
        /// The client URL.
        url: String,
        /// What failed.
        source: std::io::Error,
    },
    /// No whole answer within the deadline.
    #[error("reading raft progress from {0}: no answer within {1:?}")]
    Timeout(String, Duration),
    /// The TLS files could not be used.
    #[error("TLS for raft progress: {0}")]
    Tls(String),
    /// The answer was not etcd's expvar page with a `raft.status`.
    #[error("raft progress from {url}: {why}")]
    Answer {
        /// The client URL.
        url: String,
        /// What was wrong with it.
        why: String,
    },
}

/// One member's replication state as the leader tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replication {
    /// The highest log index the leader knows the member holds.
    pub matched: u64,
    /// The leader streams entries to it (`StateReplicate`): it answered
    /// recently. A member the transport reported unreachable is probed
    /// instead, and one receiving a snapshot is in `StateSnapshot`.
    pub replicating: bool,
}

/// The leader's raft status: its commit index and each member's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftProgress {
    /// The member that answered.
    pub id: u64,
    /// Whether it is the leader (only a leader tracks progress).
    pub is_leader: bool,
    /// Its commit index.
    pub commit: u64,
    /// Progress by member id (empty unless it is the leader).
    pub members: BTreeMap<u64, Replication>,
}

impl RaftProgress {
    /// Whether the leader streams entries to member `id` and knows it holds
    /// every committed entry.
    pub fn in_sync(&self, id: u64) -> bool {
        self.is_leader
            && self
                .members
                .get(&id)
                .is_some_and(|r| r.replicating && r.matched >= self.commit)
    }

    /// From the expvar page's JSON.
    pub fn parse(body: &[u8]) -> Result<RaftProgress, String> {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        let st = v
            .get("raft.status")
            .filter(|s| !s.is_null())
            .ok_or("no raft.status (etcd has not started raft yet)")?;
        let hex = |k: &str| -> Result<u64, String> {
            let s = st
                .get(k)
                .and_then(|x| x.as_str())
                .ok_or(format!("raft.status has no {k}"))?;
            u64::from_str_radix(s, 16).map_err(|_| format!("raft.status {k} {s:?} is not hex"))
        };
        let id = hex("id")?;
        let commit = st
            .get("commit")
            .and_then(|x| x.as_u64())
            .ok_or("raft.status has no commit index")?;
        let is_leader = st.get("raftState").and_then(|x| x.as_str()) == Some("StateLeader");
        let mut members = BTreeMap::new();
        if let Some(p) = st.get("progress").and_then(|x| x.as_object()) {
            for (k, pr) in p {
                let mid = u64::from_str_radix(k, 16)
                    .map_err(|_| format!("progress key {k:?} is not a hex member id"))?;
                let matched = pr
                    .get("match")
                    .and_then(|x| x.as_u64())
                    .ok_or(format!("progress of {k} has no match index"))?;
                let replicating =
                    pr.get("state").and_then(|x| x.as_str()) == Some("StateReplicate");
                members.insert(
                    mid,
                    Replication {
                        matched,
                        replicating,
                    },
                );
            }
        }
        Ok(RaftProgress {
            id,
            is_leader,
            commit,
            members,
        })
    }
}

/// Reads `raft.status` from the member at `client_url` within `deadline`,
/// over TLS with `tls` when the URL says https.
pub(crate) async fn read(
    client_url: &str,
    tls: Option<&TlsFiles>,
    deadline: Duration,
) -> Result<RaftProgress, ProgressError> {
    match tokio::time::timeout(deadline, fetch(client_url, tls)).await {
        Ok(r) => r,
        Err(_) => Err(ProgressError::Timeout(client_url.to_string(), deadline)),
    }
}

/// [`read`] without client TLS files (an https URL is refused): for tools
/// outside the daemon, such as the failover bench's plain-etcd floor.
pub async fn read_plain(
    client_url: &str,
    deadline: Duration,
) -> Result<RaftProgress, ProgressError> {
    read(client_url, None, deadline).await
}

async fn fetch(client_url: &str, tls: Option<&TlsFiles>) -> Result<RaftProgress, ProgressError> {
    let bad_url = || ProgressError::Url(client_url.to_string());
    let (https, rest) = if let Some(r) = client_url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = client_url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(bad_url());
    };
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') {
        return Err(bad_url());
    }
    let io = |source| ProgressError::Io {
        url: client_url.to_string(),
        source,
    };
    let tcp = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(io)?;
    let page = if https {
        let tls = tls.ok_or_else(|| {
            ProgressError::Tls(format!(
                "{client_url} needs TLS, and no [tls.client] files are configured"
            ))
        })?;
        let (connector, name) = tls_connector(tls, authority)?;
        let stream = connector.connect(name, tcp).await.map_err(io)?;
        get(stream, authority).await.map_err(io)?
    } else {
        get(tcp, authority).await.map_err(io)?
    };
    let answer = |why: String| ProgressError::Answer {
        url: client_url.to_string(),
        why,
    };
    let split = page
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| answer("no HTTP header end".into()))?;
    let head = String::from_utf8_lossy(&page[..split]);
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(answer(format!("answered {status:?}")));
    }
    RaftProgress::parse(&page[split + 4..]).map_err(answer)
}

/// One HTTP/1.0 GET of the expvar page: the server closes the connection
/// after the answer, so the answer is everything read.
async fn get<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    authority: &str,
) -> std::io::Result<Vec<u8>> {
    let req = format!(
        "GET /debug/vars HTTP/1.0\r\nHost: {authority}\r\nAccept: application/json\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await?;
    s.flush().await?;
    let mut page = Vec::new();
    (&mut s).take(MAX_PAGE).read_to_end(&mut page).await?;
    Ok(page)
}

fn tls_connector(
    t: &TlsFiles,
    authority: &str,
) -> Result<
    (
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    ),
    ProgressError,
> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let bad = |what: &str, p: &std::path::Path, e: &dyn std::fmt::Display| {
        ProgressError::Tls(format!("{what} {}: {e}", p.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&t.trusted_ca_file)
        .map_err(|e| bad("CA file", &t.trusted_ca_file, &e))?
    {
        let c = c.map_err(|e| bad("CA file", &t.trusted_ca_file, &e))?;
        roots
            .add(c)
            .map_err(|e| bad("CA file", &t.trusted_ca_file, &e))?;
    }
    let certs = CertificateDer::pem_file_iter(&t.cert_file)
        .map_err(|e| bad("certificate", &t.cert_file, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("certificate", &t.cert_file, &e))?;
    let key = PrivateKeyDer::from_pem_file(&t.key_file).map_err(|e| bad("key", &t.key_file, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ProgressError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .map_err(|e| bad("certificate", &t.cert_file, &e))?;
    // The host part, without the port (and without an IPv6 literal's brackets).
    let host = match authority.rsplit_once(':') {
        Some((h, _)) => h,
        None => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| ProgressError::Tls(format!("server name {host:?}: {e}")))?;
    Ok((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The shape etcd 3.4 and 3.5 print (member ids in hex, indexes as numbers).
    const LEADER: &str = r#"{"cmdline": ["etcd"], "raft.status": {"id":"8e9e05c52164694d","term":3,"vote":"8e9e05c52164694d","commit":120,"lead":"8e9e05c52164694d","raftState":"StateLeader","applied":120,"progress":{"8e9e05c52164694d":{"match":120,"next":121,"state":"StateReplicate"},"a1":{"match":120,"next":121,"state":"StateReplicate"},"b2":{"match":119,"next":120,"state":"StateReplicate"},"c3":{"match":120,"next":121,"state":"StateProbe"},"d4":{"match":0,"next":1,"state":"StateSnapshot"}},"leadtransferee":"0"}}"#;

    #[test]
    fn a_member_is_in_sync_only_while_replicated_up_to_the_commit_index() {
        let p = RaftProgress::parse(LEADER.as_bytes()).expect("parses");
        assert!(p.is_leader);
        assert_eq!(p.commit, 120);
        assert_eq!(p.id, 0x8e9e05c52164694d);
        assert!(p.in_sync(0xa1));
        // One entry short.
        assert!(!p.in_sync(0xb2));
        // Reported unreachable: its match index is from before.
        assert!(!p.in_sync(0xc3));
        // Still receiving the snapshot.
        assert!(!p.in_sync(0xd4));
        // Not a member the leader tracks.
        assert!(!p.in_sync(0xe5));
    }

    #[test]
    fn a_follower_knows_no_progress() {
        let body = r#"{"raft.status": {"id":"a1","term":3,"vote":"0","commit":120,"lead":"8e","raftState":"StateFollower","applied":120,"progress":{},"leadtransferee":"0"}}"#;
        let p = RaftProgress::parse(body.as_bytes()).expect("parses");
        assert!(!p.is_leader);
        assert!(!p.in_sync(0xa1));
    }

    #[test]
    fn pages_without_a_raft_status_are_refused_with_the_reason() {
        for (body, why) in [
            ("not json", "not JSON"),
            (r#"{"cmdline": []}"#, "no raft.status"),
            (r#"{"raft.status": null}"#, "no raft.status"),
            (r#"{"raft.status": {"id": "zz", "commit": 1}}"#, "not hex"),
            (r#"{"raft.status": {"id": "a1"}}"#, "no commit index"),
            (
                r#"{"raft.status": {"id": "a1", "commit": 1, "progress": {"a1": {}}}}"#,
                "no match index",
            ),
        ] {
            let e = RaftProgress::parse(body.as_bytes()).expect_err(body);
            assert!(e.contains(why), "{body}: {e}");
        }
    }

    #[tokio::test]
    async fn urls_that_are_not_http_are_refused_before_connecting() {
        for url in [
            "unix:///run/etcd.sock",
            "127.0.0.1:2379",
            "http://",
            "http://h:1/x",
        ] {
            let e = read(url, None, Duration::from_secs(1))
                .await
                .expect_err(url);
            assert!(matches!(e, ProgressError::Url(_)), "{url}: {e}");
        }
    }
}
