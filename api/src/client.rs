//! A small blocking HTTP/1.1 client over the daemon's Unix socket.
//!
//! The OCF agent runs as a fresh process for every monitor, so it must not
//! pay for an async runtime or a general HTTP stack: one request, one
//! connection, `Connection: close`, bounded by a deadline on every read and
//! write.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ApiError;

/// The largest answer the client accepts; a report of a large cluster is far
/// below this.
const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// What can go wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket is not there or nobody listens: the daemon is not running.
    // The OS error is part of the message and deliberately not a `#[source]`:
    // an error chain printed with `{:#}` would otherwise show it twice.
    #[error("cannot connect to the etcd-warden daemon at {path}: {error}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The deadline passed before the daemon answered.
    #[error("the etcd-warden daemon did not answer within {0:?}")]
    Timeout(Duration),
    /// Reading or writing failed after connecting.
    #[error("I/O error talking to the etcd-warden daemon: {0}")]
    Io(#[source] std::io::Error),
    /// The answer was not valid HTTP or JSON.
    #[error("malformed answer from the etcd-warden daemon: {0}")]
    Protocol(String),
    /// The daemon answered with an error status.
    #[error("the etcd-warden daemon refused the request ({status}): {message}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// The daemon's message.
        message: String,
    },
}

/// A client bound to one socket path.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
}

impl Client {
    /// A client for the daemon listening on `socket`.
    pub fn new(socket: impl AsRef<Path>) -> Self {
        Client {
            socket: socket.as_ref().to_path_buf(),
        }
    }

    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// GET `path` and decode the JSON answer.
    pub fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let body = self.request("GET", path, None, timeout)?;
        decode(&body)
    }

    /// GET `path` and return the raw body.
    pub fn get_raw(&self, path: &str, timeout: Duration) -> Result<Vec<u8>, ClientError> {
        self.request("GET", path, None, timeout)
    }

    /// POST `body` as JSON to `path` and decode the JSON answer.
    pub fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let payload = serde_json::to_vec(body).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let answer = self.request("POST", path, Some(&payload), timeout)?;
        decode(&answer)
    }

    /// One request; returns the body of a 2xx answer.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Vec<u8>, ClientError> {
        let deadline = Instant::now() + timeout;
        let stream = UnixStream::connect(&self.socket).map_err(|error| ClientError::Connect {
            path: self.socket.clone(),
            error,
        })?;
        exchange(stream, method, path, body, deadline, timeout)
    }
}

/// GET `path` from the plain-HTTP server at `addr` (`host:port`, as in a
/// URL; `host` is sent as the Host header), bounded by `timeout` from
/// resolving to the last byte. For short local reads such as etcd's
/// `/health`; the body of a 2xx answer is returned.
pub fn get_tcp(addr: &str, path: &str, timeout: Duration) -> Result<Vec<u8>, ClientError> {
    use std::net::ToSocketAddrs;
    let deadline = Instant::now() + timeout;
    let connect = |error: std::io::Error| ClientError::Connect {
        path: PathBuf::from(addr),
        error,
    };
    let target = addr
        .to_socket_addrs()
        .map_err(connect)?
        .next()
        .ok_or_else(|| connect(std::io::ErrorKind::NotFound.into()))?;
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ClientError::Timeout(timeout));
    }
    let stream =
        std::net::TcpStream::connect_timeout(&target, left).map_err(|e| match e.kind() {
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                ClientError::Timeout(timeout)
            }
            _ => connect(e),
        })?;
    exchange(stream, "GET", path, None, deadline, timeout)
}

/// A connected stream whose reads and writes can be bounded.
trait Timed: Read + Write {
    fn set_timeouts(&self, left: Duration) -> std::io::Result<()>;
}

impl Timed for UnixStream {
    fn set_timeouts(&self, left: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(left))
            .and_then(|()| self.set_write_timeout(Some(left)))
    }
}

impl Timed for std::net::TcpStream {
    fn set_timeouts(&self, left: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(left))
            .and_then(|()| self.set_write_timeout(Some(left)))
    }
}

/// One request on a connected `stream`, `Connection: close`; returns the
/// body of a 2xx answer.
fn exchange<S: Timed>(
    mut stream: S,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    deadline: Instant,
    timeout: Duration,
) -> Result<Vec<u8>, ClientError> {
    let body = body.unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    req.push_str("\r\n");
    set_deadline(&stream, deadline, timeout)?;
    stream
        .write_all(req.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| io_error(e, timeout))?;

    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        set_deadline(&stream, deadline, timeout)?;
        let n = stream.read(&mut chunk).map_err(|e| io_error(e, timeout))?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_RESPONSE {
            return Err(ClientError::Protocol(format!(
                "answer larger than {MAX_RESPONSE} bytes"
            )));
        }
        if let Some((status, body)) = complete_response(&buf)? {
            return finish(status, body);
        }
    }
    match complete_response(&buf)? {
        Some((status, body)) => finish(status, body),
        // The daemon closed the connection without answering: it went
        // away with the request (killed, crashed, or shut down). An I/O
        // error, not a malformed answer: a caller that may repeat the
        // request (a stop, a monitor) retries it on the restarted
        // daemon.
        None => Err(ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the connection closed before a complete answer",
        ))),
    }
}

fn finish(status: u16, body: Vec<u8>) -> Result<Vec<u8>, ClientError> {
    if (200..300).contains(&status) {
        return Ok(body);
    }
    let message = serde_json::from_slice::<ApiError>(&body)
        .map(|e| e.error)
        .unwrap_or_else(|_| String::from_utf8_lossy(&body).trim().to_string());
    Err(ClientError::Status { status, message })
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ClientError> {
    serde_json::from_slice(body).map_err(|e| ClientError::Protocol(e.to_string()))
}

fn set_deadline<S: Timed>(
    stream: &S,
    deadline: Instant,
    timeout: Duration,
) -> Result<(), ClientError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ClientError::Timeout(timeout));
    }
    stream.set_timeouts(left).map_err(ClientError::Io)
}

fn io_error(e: std::io::Error, timeout: Duration) -> ClientError {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            ClientError::Timeout(timeout)
        }
        _ => ClientError::Io(e),
    }
}

/// Parses `buf` as an HTTP/1.1 response; `None` while incomplete.
fn complete_response(buf: &[u8]) -> Result<Option<(u16, Vec<u8>)>, ClientError> {
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| ClientError::Protocol("answer header is not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| ClientError::Protocol(format!("bad status line {status_line:?}")))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| ClientError::Protocol(format!("bad Content-Length {value:?}")))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            && value.eq_ignore_ascii_case("chunked")
        {
            chunked = true;
        }
    }
    let body = &buf[head_end + 4..];
    if chunked {
        return Ok(dechunk(body)?.map(|b| (status, b)));
    }
    match length {
        Some(n) if body.len() >= n => Ok(Some((status, body[..n].to_vec()))),
        Some(_) => Ok(None),
        // Without a length the body ends when the connection closes; the
        // caller treats a close as completion.
        None => Ok(None),
    }
}

fn dechunk(mut body: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
    let mut out = Vec::new();
    loop {
        let Some(line_end) = body.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&body[..line_end])
            .map_err(|_| ClientError::Protocol("bad chunk size".into()))?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ClientError::Protocol(format!("bad chunk size {size_text:?}")))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(Some(out));
        }
        if body.len() < size + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_and_chunked() {
        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(complete_response(r).unwrap(), Some((200, b"{}".to_vec())));
        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n{}";
        assert_eq!(complete_response(r).unwrap(), None);
        let r = b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
        assert_eq!(complete_response(r).unwrap(), Some((404, b"{}".to_vec())));
        assert!(complete_response(b"garbage\r\n\r\n").is_err());
    }

    #[test]
    fn missing_socket_is_a_connect_error() {
        let c = Client::new("/nonexistent/etcd-warden.sock");
        let e = c
            .get_raw("/v1/status", Duration::from_millis(100))
            .unwrap_err();
        assert!(matches!(e, ClientError::Connect { .. }), "{e}");
    }

    /// A daemon that reads the request and goes away without answering (as
    /// one killed by its watchdog does) gives an I/O error, which the OCF
    /// agent may retry, not a malformed answer.
    #[test]
    fn a_connection_closed_without_an_answer_is_an_io_error() {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            // Read the request head, then close without a word.
            let mut r = std::io::BufReader::new(stream);
            let mut line = String::new();
            while r.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                line.clear();
            }
        });
        let e = Client::new(&path)
            .get_raw("/v1/status", Duration::from_secs(10))
            .unwrap_err();
        server.join().unwrap();
        match e {
            ClientError::Io(io) => assert_eq!(io.kind(), std::io::ErrorKind::UnexpectedEof),
            other => panic!("{other}"),
        }
    }
}
