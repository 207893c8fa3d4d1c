//! The local API: HTTP/1.1 with JSON bodies on a Unix socket (every
//! connection's SO_PEERCRED uid checked against an allow-list), and a
//! loopback-only TCP listener for /healthz, /readyz, /metrics, /status and
//! the leader event stream.
//!
//! Handlers never wait on etcd without a deadline, and the OCF actions are
//! bounded by the request's own `deadline_ms`.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::{TcpListener, UnixListener};
use tokio_util::sync::CancellationToken;
use warden_api::{Ack, ActionRequest, ApiError, ClusterEvent, paths};

use crate::core::Core;

type Body = BoxBody<Bytes, Infallible>;

/// The largest request body accepted.
const MAX_BODY: usize = 1024 * 1024;

/// The uids allowed on the Unix socket.
#[derive(Debug, Clone)]
pub struct AllowList {
    uids: BTreeSet<u32>,
    names: Vec<String>,
}

impl AllowList {
    /// Resolve user names to uids. Unknown names are skipped with a warning
    /// (e.g. `hacluster` on a machine without Pacemaker).
    pub fn resolve(names: &[String]) -> Self {
        let mut uids = BTreeSet::new();
        for n in names {
            let uid = match n.parse::<u32>() {
                Ok(uid) => Some(uid),
                Err(_) => match nix::unistd::User::from_name(n) {
                    Ok(Some(u)) => Some(u.uid.as_raw()),
                    _ => {
                        tracing::warn!(user = %n, "allowed user does not exist; ignored");
                        None
                    }
                },
            };
            uids.extend(uid);
        }
        AllowList {
            uids,
            names: names.to_vec(),
        }
    }

    /// Whether `uid` may use the API.
    pub fn allows(&self, uid: u32) -> bool {
        self.uids.contains(&uid)
    }
}

/// Bind the Unix socket: mode 0660, group `group` when it exists.
pub fn bind_unix(path: &Path, group: &str) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // A socket left by a previous instance blocks bind; anything that is
    // not a socket is not ours to remove.
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if meta.file_type().is_socket() {
            std::fs::remove_file(path)?;
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
    }
    let listener = UnixListener::bind(path)?;
    // Never world-accessible: owner and group only.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    match nix::unistd::Group::from_name(group) {
        Ok(Some(g)) => {
            if let Err(e) = nix::unistd::chown(path, None, Some(g.gid)) {
                tracing::warn!(group, error = %e, "cannot give the API socket to its group");
            }
        }
        _ => tracing::warn!(
            group,
            "group does not exist; the API socket keeps the daemon's group"
        ),
    }
    Ok(listener)
}

fn json<T: Serialize>(status: StatusCode, v: &T) -> Response<Body> {
    let body = serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec());
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

fn error(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    json(status, &ApiError { error: msg.into() })
}

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

async fn read_json<T: serde::de::DeserializeOwned>(
    req: Request<Incoming>,
) -> Result<T, Response<Body>> {
    let bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            return Err(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("cannot read the request body (limit {MAX_BODY} bytes): {e}"),
            ));
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            format!("malformed JSON request body: {e}"),
        )
    })
}

/// The leader change stream as server-sent events.
fn leader_events(core: &Core) -> Response<Body> {
    let rx = core.subscribe_leader();
    let first = futures_util::stream::once(async {
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(b": leader changes\n\n")))
    });
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    let data = serde_json::to_string(&ev).unwrap_or_default();
                    let frame =
                        Frame::data(Bytes::from(format!("event: leader\ndata: {data}\n\n")));
                    return Some((Ok::<_, Infallible>(frame), rx));
                }
                // A slow reader missed events; the next one still comes.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let body = BodyExt::boxed(StreamBody::new(futures_util::StreamExt::chain(first, rest)));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// The report, or 503 with the error and the etcd section alone.
async fn report(core: &Core) -> Response<Body> {
    match core.report(core.settings.timeouts.probe_timeout).await {
        Ok(r) => json(StatusCode::OK, &r),
        Err(partial) => json(StatusCode::SERVICE_UNAVAILABLE, &partial),
    }
}

/// Routes shared by both listeners.
async fn common(core: &Arc<Core>, method: &Method, path: &str) -> Option<Response<Body>> {
    let deadline = core.settings.timeouts.probe_timeout;
    Some(match (method, path) {
        (&Method::GET, "/healthz") => text(StatusCode::OK, "text/plain", "ok\n".into()),
        (&Method::GET, "/readyz") => match core.ready(deadline).await {
            Ok(()) => text(StatusCode::OK, "text/plain", "ready\n".into()),
            Err(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("not ready: {why}\n"),
            ),
        },
        (&Method::GET, "/metrics") => text(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            core.metrics.render(),
        ),
        (&Method::GET, "/events" | paths::EVENTS) => leader_events(core),
        _ => return None,
    })
}

async fn handle_unix(core: Arc<Core>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if let Some(r) = common(&core, &method, &path).await {
        return r;
    }
    let deadline = core.settings.timeouts.probe_timeout;
    match (&method, path.as_str()) {
        (&Method::POST, paths::ACTION) => {
            let req: ActionRequest = match read_json(req).await {
                Ok(r) => r,
                Err(resp) => return resp,
            };
            if req.deadline_ms == 0 {
                return error(
                    StatusCode::BAD_REQUEST,
                    "deadline_ms must be greater than 0",
                );
            }
            json(StatusCode::OK, &core.action(req).await)
        }
        (&Method::POST, paths::EVENT) => {
            let ev: ClusterEvent = match read_json(req).await {
                Ok(r) => r,
                Err(resp) => return resp,
            };
            tracing::info!(kind = %ev.kind, node = ?ev.node, task = ?ev.task, rc = ?ev.rc, desc = ?ev.desc, "cluster event");
            if let Some(f) = core.failover.get() {
                f.alert(&ev);
            }
            json(StatusCode::OK, &Ack { accepted: true })
        }
        (&Method::GET, paths::STATUS) => json(StatusCode::OK, &core.status_doc(deadline).await),
        (&Method::GET, paths::MEMBERS) => match core.etcd.member_list(deadline).await {
            Ok(ms) => json(StatusCode::OK, &ms),
            Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        },
        (&Method::GET, paths::REPORT) => report(&core).await,
        (_, paths::ACTION | paths::EVENT | paths::STATUS | paths::MEMBERS | paths::REPORT) => {
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{method} is not allowed on {path}"),
            )
        }
        _ => error(StatusCode::NOT_FOUND, format!("no route {method} {path}")),
    }
}

async fn handle_tcp(core: Arc<Core>, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if let Some(r) = common(&core, &method, &path).await {
        return r;
    }
    match (&method, path.as_str()) {
        (&Method::GET, "/status") => report(&core).await,
        _ => error(StatusCode::NOT_FOUND, format!("no route {method} {path}")),
    }
}

/// Serve the Unix socket until `shutdown`.
pub async fn serve_unix(
    listener: UnixListener,
    core: Arc<Core>,
    allow: AllowList,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let allow = Arc::new(allow);
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => r?,
            () = shutdown.cancelled() => return Ok(()),
        };
        let uid = stream.peer_cred().map(|c| c.uid()).ok();
        let core = core.clone();
        let allow = allow.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let permitted = uid.is_some_and(|u| allow.allows(u));
            if !permitted {
                tracing::warn!(
                    ?uid,
                    "refused an API connection from a uid outside the allow-list"
                );
            }
            let svc = service_fn(move |req| {
                let core = core.clone();
                let allow = allow.clone();
                async move {
                    if !permitted {
                        return Ok::<_, Infallible>(error(
                            StatusCode::FORBIDDEN,
                            format!(
                                "uid {} may not use the etcd-warden API (allowed: {})",
                                uid.map(|u| u.to_string())
                                    .unwrap_or_else(|| "unknown".into()),
                                allow.names.join(", ")
                            ),
                        ));
                    }
                    Ok(handle_unix(core, req).await)
                }
            });
            serve_conn(TokioIo::new(stream), svc, shutdown).await;
        });
    }
}

/// Serve the loopback TCP listener until `shutdown`.
pub async fn serve_tcp(
    listener: TcpListener,
    core: Arc<Core>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => r?,
            () = shutdown.cancelled() => return Ok(()),
        };
        let core = core.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let core = core.clone();
                async move { Ok::<_, Infallible>(handle_tcp(core, req).await) }
            });
            serve_conn(TokioIo::new(stream), svc, shutdown).await;
        });
    }
}

async fn serve_conn<I, S>(io: I, svc: S, shutdown: CancellationToken)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let conn = http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10))
        .serve_connection(io, svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "API connection ended with an error");
            }
        }
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(Duration::from_secs(2), conn).await;
        }
    }
}
