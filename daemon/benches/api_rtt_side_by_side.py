# Side-by-side API round trip: two standalone daemons (baseline, new), one
# connection per request over the Unix socket (as the agent does), requests
# alternating between the two.
import json, os, socket, subprocess, sys, tempfile, time
N = int(os.environ.get("N", "1000"))
bins = {"baseline": sys.argv[1], "new": sys.argv[2]}
procs, socks, dirs = {}, {}, []
def req(path, raw):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    s.sendall(raw)
    out = b""
    while True:
        b = s.recv(65536)
        if not b: break
        out += b
    s.close()
    return out
status = b"GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
body = json.dumps({"action": "monitor", "depth": 0, "deadline_ms": 2000}).encode()
mon = b"POST /v1/action HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
try:
    for k, b in bins.items():
        d = tempfile.mkdtemp(prefix="rtt-"); dirs.append(d)
        procs[k] = subprocess.Popen([b, "daemon", "--standalone", d, "--autostart"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, RUST_LOG="warn"))
        socks[k] = os.path.join(d, "api.sock")
    for k in bins:
        t0 = time.time()
        while True:
            try:
                if b'"quorum":true' in req(socks[k], status): break
            except OSError: pass
            assert time.time() - t0 < 30, k
            time.sleep(0.05)
    for name, raw, ok in [("GET /v1/status", status, b'"quorum":true'), ("POST /v1/action monitor depth 0", mon, b'"success"')]:
        t = {k: [] for k in bins}
        for i in range(N + N // 10):
            order = list(bins) if i % 2 == 0 else list(reversed(list(bins)))
            for k in order:
                s = time.perf_counter(); out = req(socks[k], raw); e = time.perf_counter() - s
                assert ok in out, out
                if i >= N // 10: t[k].append(e)
        for k in bins:
            v = sorted(t[k]); p = lambda q: v[round((len(v) - 1) * q)] * 1000
            print(f"{name:<34} [{k:<8}] n={len(v)} p50={p(0.5):.3f} ms p90={p(0.9):.3f} ms p99={p(0.99):.3f} ms")
finally:
    for k, pr in procs.items():
        pr.terminate()
        try: pr.wait(15)
        except Exception: pr.kill()
