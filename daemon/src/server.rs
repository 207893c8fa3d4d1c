//! The local API: HTTP/1.1 with JSON bodies on a Unix socket (every
//! connection's SO_PEERCRED uid checked against an allow-list), and a
//! loopback-only TCP listener for /healthz, /readyz, /metrics, /status and
//! the leader event stream.
//!
//! Routing is axum's, one router definition for both listeners (the Unix
//! socket adds the agent's and CLI's routes), so both answer alike: 404 for
//! a path the listener does not serve, 405 for a wrong method on one it
//! does, always with an `{"error": …}` body. Each listener accepts at most
//! [`MAX_CONNECTIONS_UNIX`] / [`MAX_CONNECTIONS_TCP`] connections at once;
//! beyond that, new connections wait in the kernel's accept queue until one
//! ends (an agent's request carries its own deadline), so a flood of
//! scrapes never starves the agent's socket.
//!
//! Handlers never wait on etcd without a deadline, and the OCF actions are
//! bounded by the request's own `deadline_ms`.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower_service::Service;
use warden_api::{Ack, ActionRequest, ApiError, ClusterEvent, RecoverRequest, paths};

use crate::app::App;

/// The largest request body accepted.
const MAX_BODY: usize = 1024 * 1024;

/// Connections served at once on the Unix socket (the agent, the CLI, the
/// alert agent); more wait to be accepted.
pub(crate) const MAX_CONNECTIONS_UNIX: usize = 64;

/// Connections served at once on the TCP listener (scrapes, probes, event
/// streams); more wait to be accepted.
pub const MAX_CONNECTIONS_TCP: usize = 32;

/// The uids allowed on the Unix socket.
#[derive(Debug, Clone)]
pub(crate) struct AllowList {
    uids: BTreeSet<u32>,
    names: Vec<String>,
}

impl AllowList {
    /// Resolve user names to uids. Unknown names are skipped with a warning
    /// (e.g. `hacluster` on a machine without Pacemaker).
    pub(crate) fn resolve(names: &[String]) -> Self {
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
    pub(crate) fn allows(&self, uid: u32) -> bool {
        self.uids.contains(&uid)
    }
}

/// Bind the Unix socket: mode 0660, group `group` when it exists.
pub(crate) fn bind_unix(path: &Path, group: &str) -> std::io::Result<UnixListener> {
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

fn json<T: Serialize>(status: StatusCode, v: &T) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec());
    with_body(status, "application/json", Body::from(body))
}

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    json(status, &ApiError { error: msg.into() })
}

fn text(status: StatusCode, content_type: &str, body: String) -> Response {
    with_body(status, content_type, Body::from(body))
}

fn with_body(status: StatusCode, content_type: &str, body: Body) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(body)
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

async fn read_json<T: serde::de::DeserializeOwned>(req: Request) -> Result<T, Response> {
    let bytes = match axum::body::to_bytes(req.into_body(), MAX_BODY).await {
        Ok(b) => b,
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
async fn leader_events(State(app): State<Arc<App>>) -> Response {
    let rx = app.subscribe_leader();
    let first = futures_util::stream::once(async {
        Ok::<_, Infallible>(Bytes::from_static(b": leader changes\n\n"))
    });
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(ev) => {
                    let data = serde_json::to_string(&ev).unwrap_or_default();
                    let chunk = Bytes::from(format!("event: leader\ndata: {data}\n\n"));
                    return Some((Ok::<_, Infallible>(chunk), rx));
                }
                // A slow reader missed events; the next one still comes.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    let body = Body::from_stream(futures_util::StreamExt::chain(first, rest));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// The report, or 503 with the error and the etcd section alone.
async fn report(State(app): State<Arc<App>>) -> Response {
    match app.report(app.settings.timeouts.probe_timeout).await {
        Ok(r) => json(StatusCode::OK, &r),
        Err(partial) => json(StatusCode::SERVICE_UNAVAILABLE, &partial),
    }
}

async fn healthz() -> Response {
    text(StatusCode::OK, "text/plain", "ok\n".into())
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    match app.ready(app.settings.timeouts.probe_timeout).await {
        Ok(()) => text(StatusCode::OK, "text/plain", "ready\n".into()),
        Err(why) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            format!("not ready: {why}\n"),
        ),
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let (content_type, body) = app.metrics_text();
    text(StatusCode::OK, content_type, body)
}

async fn action(State(app): State<Arc<App>>, req: Request) -> Response {
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
    json(StatusCode::OK, &app.action(req).await)
}

/// `POST /v1/recover`: an operator's resolution, planned and (confirmed)
/// carried out by the daemon under its one-pass-at-a-time lock. A plan the
/// node refuses (wrong node, data in the way, etcd running) is a 409 with
/// the reason.
async fn recover(State(app): State<Arc<App>>, req: Request) -> Response {
    let req: RecoverRequest = match read_json(req).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    match app.recover(req).await {
        Ok(r) => json(StatusCode::OK, &r),
        Err(e) => error(StatusCode::CONFLICT, e),
    }
}

/// `POST /v1/defrag`: the defragmentation policy, asked by an operator
/// (`etcd-warden defrag`). A refusal is a 200 with `done: false` and the
/// reason: the request was understood and answered.
async fn defrag(State(app): State<Arc<App>>, req: Request) -> Response {
    let req: warden_api::DefragRequest = match read_json(req).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let mode = crate::defrag::policy::Mode::Manual {
        below_threshold: req.below_threshold,
    };
    json(StatusCode::OK, &app.defrag(mode).await)
}

/// `POST /v1/reload`. Its body (`{}`) is read before the answer: an answer
/// sent first ends the connection while the client may still be writing.
async fn reload(State(app): State<Arc<App>>, req: Request) -> Response {
    if let Err(resp) = read_json::<serde_json::Value>(req).await {
        return resp;
    }
    json(StatusCode::OK, &app.reload().await)
}

async fn event(State(app): State<Arc<App>>, req: Request) -> Response {
    let ev: ClusterEvent = match read_json(req).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    tracing::info!(kind = %ev.kind, node = ?ev.node, task = ?ev.task, rc = ?ev.rc, desc = ?ev.desc, "cluster event");
    if let Some(f) = app.failover.as_ref() {
        f.alert(&ev);
    }
    json(StatusCode::OK, &Ack { accepted: true })
}

async fn status(State(app): State<Arc<App>>) -> Response {
    json(
        StatusCode::OK,
        &app.status_doc(app.settings.timeouts.probe_timeout).await,
    )
}

async fn members(State(app): State<Arc<App>>) -> Response {
    match app
        .etcd
        .member_list(app.settings.timeouts.probe_timeout)
        .await
    {
        Ok(ms) => json(StatusCode::OK, &ms),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn no_route(method: Method, uri: Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("no route {method} {}", uri.path()),
    )
}

async fn wrong_method(method: Method, uri: Uri) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// Which listener a router serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    /// The Unix socket: every route (the agent's, the CLI's, the alert
    /// agent's), behind the allow-list.
    Unix,
    /// The loopback TCP listener: health, metrics, the report as
    /// `/status`, the event stream.
    Tcp,
}

/// The API's routes for `on`: the routes both listeners share, then the
/// listener's own; the same 404 and 405 answers on both.
pub(crate) fn router(app: Arc<App>, on: Listener) -> Router {
    let common = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/events", get(leader_events))
        .route(paths::EVENTS, get(leader_events));
    let own = match on {
        Listener::Unix => Router::new()
            .route(paths::ACTION, post(action))
            .route(paths::EVENT, post(event))
            .route(paths::RECOVER, post(recover))
            .route(paths::DEFRAG, post(defrag))
            .route(paths::RELOAD, post(reload))
            .route(paths::STATUS, get(status))
            .route(paths::MEMBERS, get(members))
            .route(paths::REPORT, get(report)),
        Listener::Tcp => Router::new().route("/status", get(report)),
    };
    common
        .merge(own)
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .with_state(app)
}

/// Serve the Unix socket until `shutdown`.
pub(crate) async fn serve_unix(
    listener: UnixListener,
    app: Arc<App>,
    allow: AllowList,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let allow = Arc::new(allow);
    let routes = router(app.clone(), Listener::Unix);
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS_UNIX));
    loop {
        let Some(permit) = slot(&limit, &shutdown, "the API socket").await else {
            return Ok(());
        };
        let (stream, _) = tokio::select! {
            r = listener.accept() => r?,
            () = shutdown.cancelled() => return Ok(()),
        };
        let uid = stream.peer_cred().map(|c| c.uid()).ok();
        let allow = allow.clone();
        let shutdown = shutdown.clone();
        let routes = routes.clone();
        app.work.spawn(async move {
            let _permit = permit;
            let permitted = uid.is_some_and(|u| allow.allows(u));
            if !permitted {
                tracing::warn!(
                    ?uid,
                    "refused an API connection from a uid outside the allow-list"
                );
            }
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let mut routes = routes.clone();
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
                    routes.call(req).await
                }
            });
            serve_conn(TokioIo::new(stream), svc, shutdown).await;
        });
    }
}

/// Serve the loopback TCP listener until `shutdown`.
pub(crate) async fn serve_tcp(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let routes = router(app.clone(), Listener::Tcp);
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS_TCP));
    loop {
        let Some(permit) = slot(&limit, &shutdown, "the HTTP listener").await else {
            return Ok(());
        };
        let (stream, _) = tokio::select! {
            r = listener.accept() => r?,
            () = shutdown.cancelled() => return Ok(()),
        };
        let shutdown = shutdown.clone();
        let routes = routes.clone();
        app.work.spawn(async move {
            let _permit = permit;
            let svc = service_fn(move |req: hyper::Request<Incoming>| {
                let mut routes = routes.clone();
                async move { routes.call(req).await }
            });
            serve_conn(TokioIo::new(stream), svc, shutdown).await;
        });
    }
}

/// A connection slot: at once while fewer than the limit are served,
/// otherwise when one ends; `None` on shutdown.
async fn slot(
    limit: &Arc<Semaphore>,
    shutdown: &CancellationToken,
    what: &str,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(p) = limit.clone().try_acquire_owned() {
        return Some(p);
    }
    tracing::warn!(
        listener = what,
        "connection limit reached: new connections wait until one ends"
    );
    tokio::select! {
        p = limit.clone().acquire_owned() => p.ok(),
        () = shutdown.cancelled() => None,
    }
}

async fn serve_conn<I, S>(io: I, svc: S, shutdown: CancellationToken)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<hyper::Request<Incoming>, Response = Response, Error = Infallible>
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
