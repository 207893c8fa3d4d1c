//! etcd's own rules for the values etcd-warden hands it, checked when the
//! configuration is loaded. etcd refuses to start on a breach and says so
//! only in its own log, after the daemon has started and the cluster
//! manager has begun to restart it; here the refusal names the file, line
//! and key instead, before anything starts (and `validate-all` reports it).
//!
//! The rules follow etcd 3.4 and 3.5 (`embed.Config.Validate`,
//! `types.NewURLs`): heartbeat and election timeout both above zero, the
//! election timeout at least 5 × the heartbeat and at most 50 s; URLs
//! `scheme://host:port` without a path, the scheme one of http, https, unix
//! and unixs, and a URL etcd listens on naming an IP address or
//! `localhost`.

use std::net::IpAddr;

use super::ConfigError;
use super::fragments::{Loc, NodeFragment, positive};
use super::settings::{
    ETCD_DEFAULT_ELECTION_MS, ETCD_DEFAULT_HEARTBEAT_MS, ETCD_MAX_ELECTION_MS,
    ETCD_MAX_QUOTA_BACKEND_BYTES, EtcdTuning,
};

/// A URL's scheme, as etcd knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
    Unix,
    Unixs,
}

impl Scheme {
    /// Whether the scheme needs TLS files.
    fn secure(self) -> bool {
        matches!(self, Scheme::Https | Scheme::Unixs)
    }

    /// Whether it is a TCP address another host can reach.
    fn tcp(self) -> bool {
        matches!(self, Scheme::Http | Scheme::Https)
    }
}

/// Check one URL as etcd does, for a URL it listens on and advertises.
fn check_url(u: &str) -> Result<Scheme, String> {
    let (scheme, rest) = u
        .split_once("://")
        .ok_or_else(|| format!("{u:?} must start with http://, https://, unix:// or unixs://"))?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        "unix" => Scheme::Unix,
        "unixs" => Scheme::Unixs,
        _ => {
            return Err(format!(
                "{u:?}: etcd accepts only the schemes http, https, unix and unixs"
            ));
        }
    };
    if rest.contains('/') {
        return Err(format!(
            "{u:?} has a path, which etcd refuses: write scheme://host:port"
        ));
    }
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("{u:?} has no port: write scheme://host:port"))?;
    port.parse::<u16>()
        .map_err(|_| format!("{u:?} has an invalid port {port:?}"))?;
    if host.is_empty() {
        return Err(format!("{u:?} has no host"));
    }
    if !scheme.tcp() {
        return Ok(scheme);
    }
    let ip = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().map(IpAddr::V6).ok(),
        None if host.contains(':') => {
            return Err(format!(
                "{u:?}: an IPv6 address must be written [addr]:port"
            ));
        }
        None => host.parse::<std::net::Ipv4Addr>().map(IpAddr::V4).ok(),
    };
    if ip.is_none() && host != "localhost" {
        return Err(format!(
            "{u:?}: etcd listens on this URL and accepts only an IP address or localhost as its host, not a name (\"expected IP in URL for binding\")"
        ));
    }
    Ok(scheme)
}

/// A node's URLs. Peer URLs are TCP (the other hosts dial them); the first
/// client URL is TCP too, because the daemon, its peer and the agent reach
/// etcd there; further client URLs may be Unix sockets.
pub(super) fn node_urls(n: &NodeFragment) -> Result<(), ConfigError> {
    for u in &n.peer_urls.value {
        let scheme = check_url(u).map_err(|m| n.peer_urls.invalid(m))?;
        if !scheme.tcp() {
            return Err(n.peer_urls.invalid(format!(
                "{u:?}: a peer URL must be http:// or https://: the other nodes cannot reach a Unix socket"
            )));
        }
    }
    for (i, u) in n.client_urls.value.iter().enumerate() {
        let scheme = check_url(u).map_err(|m| n.client_urls.invalid(m))?;
        if i == 0 && !scheme.tcp() {
            return Err(n.client_urls.invalid(format!(
                "{u:?}: the first client URL must be http:// or https://: the daemon and the resource agent reach etcd there"
            )));
        }
    }
    Ok(())
}

/// An https or unixs URL needs the TLS files of its side: etcd refuses to
/// serve it without a certificate, and the daemon could not dial it.
pub(super) fn urls_have_tls(
    nodes: &Loc<Vec<NodeFragment>>,
    client_tls: bool,
    peer_tls: bool,
) -> Result<(), ConfigError> {
    for n in &nodes.value {
        for (urls, have, side) in [
            (&n.client_urls, client_tls, "client"),
            (&n.peer_urls, peer_tls, "peer"),
        ] {
            let secure = urls
                .value
                .iter()
                .find(|u| check_url(u).is_ok_and(Scheme::secure));
            if let (Some(u), false) = (secure, have) {
                return Err(urls.invalid(format!(
                    "{u:?} needs TLS: set tls.{side}.cert_file, tls.{side}.key_file and tls.{side}.trusted_ca_file"
                )));
            }
        }
    }
    Ok(())
}

/// Heartbeat interval and election timeout as written (unset: etcd's
/// defaults apply, which satisfy every rule), checked together as etcd
/// checks them. The error points at the election timeout when it is
/// written, else at the heartbeat: the key that made the pair wrong.
pub(super) fn timing(
    heartbeat: Option<Loc<u64>>,
    election: Option<Loc<u64>>,
) -> Result<(Option<u64>, Option<u64>), ConfigError> {
    let hb = heartbeat.clone().map(positive).transpose()?;
    let el = election.clone().map(positive).transpose()?;
    let Some(blame) = election.as_ref().or(heartbeat.as_ref()) else {
        return Ok((None, None));
    };
    let (hb_ms, el_ms) = (
        hb.unwrap_or(ETCD_DEFAULT_HEARTBEAT_MS),
        el.unwrap_or(ETCD_DEFAULT_ELECTION_MS),
    );
    let describe = |v: Option<u64>, ms: u64| match v {
        Some(_) => format!("{ms} ms"),
        None => format!("{ms} ms, etcd's default"),
    };
    if el_ms < 5 * hb_ms {
        return Err(blame.invalid(format!(
            "etcd refuses an election timeout ({}) below 5 × the heartbeat interval ({}): set etcd.election_timeout_ms to at least {} or lower etcd.heartbeat_interval_ms",
            describe(el, el_ms),
            describe(hb, hb_ms),
            5 * hb_ms
        )));
    }
    if el_ms > ETCD_MAX_ELECTION_MS {
        return Err(blame.invalid(format!(
            "{el_ms} ms is longer than etcd accepts as an election timeout: at most {ETCD_MAX_ELECTION_MS} ms"
        )));
    }
    Ok((hb, el))
}

/// `quota-backend-bytes`: above zero (0 would silently mean etcd's 2 GiB
/// default) and at most the 8 GiB etcd documents as the maximum.
pub(super) fn quota(l: Loc<u64>) -> Result<u64, ConfigError> {
    let v = positive(l.clone())?;
    if v > ETCD_MAX_QUOTA_BACKEND_BYTES {
        return Err(l.invalid(format!(
            "{v} bytes is above {ETCD_MAX_QUOTA_BACKEND_BYTES} (8 GiB), the largest backend quota etcd supports for normal environments (it warns beyond, and snapshots and restores grow with it)"
        )));
    }
    Ok(v)
}

/// `failover.force_election_timeout_ms`: 0 keeps the normal election
/// timeout. A written value must be one etcd accepts (at least 5 × the
/// heartbeat) and must shorten the forced start (at most the election
/// timeout); the shipped default is brought into that range when the
/// start is written (see `etcd_conf`), so it never stops a configuration
/// that changes etcd's timing.
pub(super) fn forced_election(
    l: Loc<u64>,
    tuning: &EtcdTuning,
) -> Result<Option<u64>, ConfigError> {
    if l.value == 0 {
        return Ok(None);
    }
    if l.from_defaults {
        return Ok(Some(l.value));
    }
    let (hb, el) = (tuning.heartbeat_ms(), tuning.election_ms());
    if l.value < 5 * hb {
        return Err(l.invalid(format!(
            "{} ms is below 5 x the heartbeat interval ({hb} ms), which etcd refuses; use at least {} or 0 to keep the normal election timeout",
            l.value,
            5 * hb
        )));
    }
    if l.value > el {
        return Err(l.invalid(format!(
            "{} ms is longer than the election timeout ({el} ms): it exists to shorten the forced start, use at most {el} or 0",
            l.value
        )));
    }
    Ok(Some(l.value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_etcds_rules() {
        for ok in [
            "http://127.0.0.1:2379",
            "https://[::1]:2379",
            "http://localhost:2379",
            "unix://localhost:2379",
            "unixs://etcd.sock:0",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for (bad, needle) in [
            ("https://::1:2379", "[addr]:port"),
            ("tcp://127.0.0.1:2379", "schemes"),
            ("http://127.0.0.1", "no port"),
            ("127.0.0.1:2379", "must start with"),
            ("https://etcd-a.example:2379", "IP address or localhost"),
            ("https://127.0.0.1:2379/", "path"),
            ("http://127.0.0.1:99999", "invalid port"),
            ("unix://:2379", "no host"),
        ] {
            let e = check_url(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        assert_eq!(check_url("https://[::1]:2379"), Ok(Scheme::Https));
        assert!(Scheme::Unixs.secure() && !Scheme::Unixs.tcp());
    }
}
