//! The API's routing on both listeners (one router definition: 404 for a
//! path the listener does not serve, 405 for a wrong method, JSON errors),
//! the OpenMetrics exposition, and the per-listener connection limit.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;

/// A raw HTTP/1.1 request over TCP: the whole answer.
fn raw_tcp(port: u16, req: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(answer: &str) -> &str {
    answer.split_whitespace().nth(1).unwrap_or_default()
}

#[test]
fn wrong_methods_and_unknown_paths_are_answered_alike_on_both_listeners() {
    let d = Daemon::start(false);
    let sock = d.socket();
    // (request, socket's status, TCP's status, text in the error)
    let cases: &[(&[u8], &str, &str, &str)] = &[
        (
            b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            "405",
            "405",
            "POST is not allowed on /metrics",
        ),
        (
            b"DELETE /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "405",
            "405",
            "DELETE is not allowed on /healthz",
        ),
        (
            b"GET /nothing/here HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "404",
            "404",
            "no route GET /nothing/here",
        ),
    ];
    for (req, on_sock, on_tcp, msg) in cases {
        for (answer, code) in [
            (raw_unix(&sock, req), on_sock),
            (raw_tcp(d.http, req), on_tcp),
        ] {
            assert_eq!(status_of(&answer), *code, "{answer}");
            assert!(answer.contains(msg), "{answer}");
            assert!(answer.contains("application/json"), "{answer}");
        }
    }
    // The agent's routes are the socket's only: not served on TCP at all.
    let answer = raw_tcp(
        d.http,
        b"GET /v1/action HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&answer), "404", "{answer}");
    let answer = raw_unix(
        &sock,
        b"GET /v1/action HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&answer), "405", "{answer}");
}

#[test]
fn metrics_are_openmetrics_with_the_build_info() {
    let d = Daemon::start(true);
    let answer = raw_tcp(
        d.http,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&answer), "200", "{answer}");
    assert!(
        answer.contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{answer}"
    );
    assert!(answer.trim_end().ends_with("# EOF"), "{answer}");
    assert!(
        answer.contains(&format!(
            "etcd_warden_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{answer}"
    );
    // Standalone: no failover, so no failover state is 1.
    assert!(answer.contains("etcd_warden_failover_state{state=\"member\"} 0"));
}

#[test]
fn a_full_tcp_listener_makes_new_connections_wait_and_never_starves_the_socket() {
    let d = Daemon::start(false);
    // Fill the TCP listener's slots with connections that send nothing.
    let idle: Vec<TcpStream> = (0..etcd_warden::server::MAX_CONNECTIONS_TCP)
        .map(|_| TcpStream::connect(("127.0.0.1", d.http)).unwrap())
        .collect();
    // Each idle connection is accepted in turn; the last one's request
    // shows when all are.
    let mut waiting = TcpStream::connect(("127.0.0.1", d.http)).unwrap();
    waiting
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 512];
    let early = waiting.read(&mut buf);
    assert!(
        early.is_err(),
        "answered beyond the limit: {:?}",
        early.map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
    );
    // The agent's socket is served all the while.
    let answer = raw_unix(
        &d.socket(),
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status_of(&answer), "200", "{answer}");
    // One slot frees: the waiting request is answered.
    drop(idle);
    waiting
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut out = Vec::new();
    let _ = waiting.read_to_end(&mut out);
    let answer = String::from_utf8_lossy(&out);
    assert_eq!(status_of(&answer), "200", "{answer}");
}
