//! Live etcd checks and membership operations.
//!
//! Every call asks etcd now, under its own deadline. Nothing here caches an
//! answer: in two-node clusters a cached member health once hid a dead peer
//! and let a disruptive change through. The only thing kept between calls is
//! the gRPC channel (a connection, not an answer).
//!
//! Quorum is decided from a linearizable read or from Status with a leader,
//! never from MemberList answering: etcd 3.4 serves MemberList locally even
//! without a leader.

mod client;
pub mod conf;
pub mod ops;
pub mod raft_progress;
pub mod version;

use std::time::Duration;

use tonic::Code;

pub use client::{Connector, DEFRAG_LOCK_KEY, LiveEtcd, REVISION_KEY};
pub(crate) use client::{status_of_members, status_of_other_nodes};

/// A failed etcd call, typed by its gRPC status code (never by its text).
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No answer within the deadline (etcd hung, or a network partition).
    #[error("etcd did not answer within {0:?}")]
    Timeout(Duration),
    /// etcd is not reachable, or answered Unavailable (e.g. no leader).
    #[error("etcd is unavailable: {0}")]
    Unavailable(String),
    /// etcd refused because of its state (e.g. a learner not yet in sync).
    #[error("etcd refused the request in its current state: {0}")]
    FailedPrecondition(String),
    /// The member or key does not exist.
    #[error("etcd: not found: {0}")]
    NotFound(String),
    /// Authentication or permission failure.
    #[error("etcd denied access: {0}")]
    PermissionDenied(String),
    /// The TLS files could not be read.
    #[error("cannot read TLS file {path}: {source}")]
    TlsFile {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Anything else, with its gRPC code.
    #[error("etcd call failed ({code:?}): {message}")]
    Other {
        /// gRPC status code, when the error came from etcd.
        code: Option<Code>,
        /// The message.
        message: String,
    },
}

impl EtcdError {
    /// Whether this error says etcd could not be reached or answered too late.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, EtcdError::Timeout(_) | EtcdError::Unavailable(_))
    }
}

impl From<etcd_client::Error> for EtcdError {
    fn from(e: etcd_client::Error) -> Self {
        match e {
            etcd_client::Error::GRpcStatus(s) => {
                let message = s.message().to_string();
                match s.code() {
                    Code::Unavailable => EtcdError::Unavailable(message),
                    Code::DeadlineExceeded => EtcdError::Unavailable(message),
                    Code::FailedPrecondition => EtcdError::FailedPrecondition(message),
                    Code::NotFound => EtcdError::NotFound(message),
                    Code::PermissionDenied | Code::Unauthenticated => {
                        EtcdError::PermissionDenied(message)
                    }
                    code => EtcdError::Other {
                        code: Some(code),
                        message,
                    },
                }
            }
            // The cause (a refused connection, a certificate the peer does
            // not trust) is in the source chain, not in the top message.
            etcd_client::Error::TransportError(t) => EtcdError::Unavailable(with_sources(&t)),
            etcd_client::Error::IoError(io) => EtcdError::Unavailable(io.to_string()),
            other => EtcdError::Other {
                code: None,
                message: other.to_string(),
            },
        }
    }
}

/// `e`'s message followed by each source's that adds to it.
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let m = cause.to_string();
        if !out.contains(&m) {
            out.push_str(": ");
            out.push_str(&m);
        }
        next = cause.source();
    }
    out
}

/// One member's Status, as it answered just now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    /// The answering member's ID.
    pub member_id: u64,
    /// The leader it knows (0 = none).
    pub(crate) leader: u64,
    /// Raft term.
    pub(crate) raft_term: u64,
    /// Raft index.
    pub(crate) raft_index: u64,
    /// Whether it is a learner.
    pub(crate) is_learner: bool,
    /// Store revision in the response header.
    pub(crate) revision: i64,
    /// Cluster ID.
    pub cluster_id: u64,
    /// etcd version.
    pub version: String,
    /// Backend size in bytes.
    pub(crate) db_size: i64,
    /// Bytes of the backend in use (the rest is free space a defragment
    /// gives back).
    pub(crate) db_size_in_use: i64,
    /// Errors etcd itself reports (alarms such as NOSPACE).
    pub(crate) errors: Vec<String>,
}

impl MemberStatus {
    /// Whether this member knows a leader.
    pub fn has_leader(&self) -> bool {
        self.leader != 0
    }

    /// The database, version and alarms, as `/status` shows them.
    pub(crate) fn db(&self) -> warden_api::EtcdDb {
        warden_api::EtcdDb {
            version: self.version.clone(),
            db_size: self.db_size,
            db_size_in_use: self.db_size_in_use,
            alarms: self.alarms(),
        }
    }

    /// The active alarms (`NOSPACE`, `CORRUPT`): etcd lists each in the
    /// Status errors as `memberID:<id> alarm:<NAME> `.
    pub(crate) fn alarms(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .errors
            .iter()
            .flat_map(|e| e.split_whitespace())
            .filter_map(|w| w.strip_prefix("alarm:"))
            .map(str::to_string)
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// A member as MemberList reports it.
pub(crate) type Member = warden_api::Member;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_codes_map_to_typed_errors() {
        let e: EtcdError = etcd_client::Error::GRpcStatus(tonic::Status::new(
            Code::FailedPrecondition,
            "can only promote a learner member which is in sync with leader",
        ))
        .into();
        assert!(matches!(e, EtcdError::FailedPrecondition(_)));
        let e: EtcdError =
            etcd_client::Error::GRpcStatus(tonic::Status::new(Code::Unavailable, "x")).into();
        assert!(e.is_unreachable());
        let e: EtcdError =
            etcd_client::Error::GRpcStatus(tonic::Status::new(Code::NotFound, "x")).into();
        assert!(matches!(e, EtcdError::NotFound(_)));
        let e: EtcdError =
            etcd_client::Error::GRpcStatus(tonic::Status::new(Code::Internal, "x")).into();
        assert!(matches!(
            e,
            EtcdError::Other {
                code: Some(Code::Internal),
                ..
            }
        ));
    }

    #[test]
    fn a_message_keeps_the_causes_it_does_not_already_say() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let leaf = E("invalid peer certificate: UnknownIssuer", None);
        let mid = E("error trying to connect", Some(Box::new(leaf)));
        let top = E("transport error", Some(Box::new(mid)));
        assert_eq!(
            with_sources(&top),
            "transport error: error trying to connect: invalid peer certificate: UnknownIssuer"
        );
        let same = E(
            "transport error",
            Some(Box::new(E("transport error", None))),
        );
        assert_eq!(with_sources(&same), "transport error");
    }
}
