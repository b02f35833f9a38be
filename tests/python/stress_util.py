"""A bounded HTTP stress client for posy's front (gw_server): raw sockets, so
that it can do what well-behaved client libraries never do.

Each client thread runs for a fixed time (and a fixed number of rounds at
most), picking one behaviour per round:

  ok          keep-alive connection, several requests, every answer checked
  pipeline    several requests written at once, all answers read in order
  cut_body    headers and part of the body, then close (or reset)
  cut_sent    a whole request, then close (or reset) at once
  cut_wait    a whole request, wait a little, then close (or reset)
  slow_read   a request with a big answer, tiny receive buffer, read a
              little, then close (or reset)
  get         GET /health, /metrics, /info on a keep-alive connection
  junk        garbage request lines, bad JSON, an HTTP/2 preface with
              garbage frames, an h2c upgrade

Only loopback.  `run_stress` returns a Counter of outcomes and a list of
protocol violations (answers that are not HTTP, wrong status for a good
request, ...).  Used by tests/python/test_serve_stress.py; runnable by hand:

    python3 tests/python/stress_util.py PORT [SECONDS] [THREADS]
"""
import collections
import json
import random
import socket
import struct
import sys
import threading
import time

TEXTS = ["hello world", "the quick brown fox jumps over the lazy dog", "posy stress test",
         "a somewhat longer sentence that has more tokens than the others do"]


def body_for(rng, n_inputs=None):
    n = n_inputs if n_inputs is not None else rng.choice([1, 1, 2, 8])
    inputs = [rng.choice(TEXTS) for _ in range(n)]
    r = rng.random()
    if r < 0.45:
        return "/v1/embeddings", json.dumps({"input": inputs, "model": "m"}).encode()
    if r < 0.9:
        return "/embed", json.dumps({"inputs": inputs}).encode()
    return "/tokenize", json.dumps({"inputs": inputs}).encode()


def request_bytes(path, body, close=False):
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n")
    return head.encode() + body


def connect(port, rcvbuf=None, timeout=20.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def abort(s, rng):
    """Close normally (FIN) or with a reset (RST), at random."""
    try:
        if rng.random() < 0.5:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    except OSError:
        pass


class Reader:
    """Reads HTTP/1.1 responses (Content-Length framed, as posy answers)."""

    def __init__(self, s):
        self.s = s
        self.buf = b""

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise ConnectionError("closed")
        self.buf += d

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise ValueError(f"not an HTTP status line: {lines[0]!r}")
        status = int(parts[1])
        hdrs = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        n = int(hdrs.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, hdrs, body


def check_ok(status, body, path, n_inputs, bad):
    """A good request gets 200 with n vectors, or 429/503 (load, drain)."""
    if status in (429, 503):
        return "refused"
    if status != 200:
        bad.append(f"{path}: status {status}: {body[:200]!r}")
        return "bad"
    try:
        doc = json.loads(body)
        vecs = doc["data"] if path == "/v1/embeddings" else doc
        if len(vecs) != n_inputs:
            bad.append(f"{path}: {len(vecs)} vectors for {n_inputs} inputs")
            return "bad"
    except (ValueError, KeyError, TypeError) as e:
        bad.append(f"{path}: bad JSON answer ({e}): {body[:200]!r}")
        return "bad"
    return "ok"


def b_ok(port, rng, out, bad):
    s = connect(port)
    try:
        r = Reader(s)
        for _ in range(rng.randint(1, 4)):
            n = rng.choice([1, 2, 8])
            path, body = body_for(rng, n)
            s.sendall(request_bytes(path, body))
            status, _, rb = r.response()
            out[check_ok(status, rb, path, n, bad)] += 1
    finally:
        s.close()


def b_pipeline(port, rng, out, bad):
    s = connect(port)
    try:
        reqs = [body_for(rng, 1) for _ in range(rng.randint(2, 5))]
        s.sendall(b"".join(request_bytes(p, b) for p, b in reqs))
        if rng.random() < 0.3:   # leave with answers still owed
            time.sleep(rng.random() * 0.05)
            abort(s, rng)
            out["pipeline_cut"] += 1
            return
        r = Reader(s)
        for p, _ in reqs:
            status, _, rb = r.response()
            out[check_ok(status, rb, p, 1, bad)] += 1
    finally:
        s.close()


def b_cut_body(port, rng, out, bad):
    s = connect(port)
    path, body = body_for(rng)
    raw = request_bytes(path, body)
    head_len = raw.index(b"\r\n\r\n") + 4
    s.sendall(raw[:rng.randint(head_len, len(raw) - 1)])
    time.sleep(rng.random() * 0.03)
    abort(s, rng)
    out["cut_body"] += 1


def b_cut_sent(port, rng, out, bad):
    s = connect(port)
    path, body = body_for(rng)
    s.sendall(request_bytes(path, body))
    abort(s, rng)
    out["cut_sent"] += 1


def b_cut_wait(port, rng, out, bad):
    s = connect(port)
    r = Reader(s)
    if rng.random() < 0.5:   # first a normal exchange on the same connection
        path, body = body_for(rng, 1)
        s.sendall(request_bytes(path, body))
        status, _, rb = r.response()
        out[check_ok(status, rb, path, 1, bad)] += 1
    path, body = body_for(rng)
    s.sendall(request_bytes(path, body))
    time.sleep(rng.random() * 0.08)
    abort(s, rng)
    out["cut_wait"] += 1


def b_slow_read(port, rng, out, bad):
    s = connect(port, rcvbuf=4096)
    path, body = body_for(rng, 64)
    s.sendall(request_bytes(path, body))
    time.sleep(rng.random() * 0.05)
    try:
        s.recv(rng.choice([1, 100, 2000]))
    except (socket.timeout, OSError):
        pass
    time.sleep(rng.random() * 0.05)
    abort(s, rng)
    out["slow_read"] += 1


def b_get(port, rng, out, bad):
    s = connect(port)
    try:
        r = Reader(s)
        for path in rng.sample(["/health", "/metrics", "/info", "/v1/models"], 2):
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            status, _, _ = r.response()
            if status not in (200, 503):
                bad.append(f"GET {path}: status {status}")
            out["get"] += 1
    finally:
        s.close()


def b_junk(port, rng, out, bad):
    s = connect(port)
    try:
        kind = rng.randrange(6)
        if kind == 4:   # HTTP/2 preface (h2o accepts prior-knowledge h2), then garbage frames
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(rng.randrange(256) for _ in range(64)))
        elif kind == 5:   # an h2c upgrade request, then leave
            _, body = body_for(rng, 1)
            s.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                      b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"
                      + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        elif kind == 0:
            s.sendall(b"\x00\xff garbage \r\n\r\n")
        elif kind == 1:
            s.sendall(request_bytes("/embed", b'{"inputs": ["unterminated'))
        elif kind == 2:
            s.sendall(request_bytes("/v1/embeddings", b'{"input": []}'))
        else:
            s.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n")
        try:
            Reader(s).response()
        except (ConnectionError, OSError, ValueError):
            pass
        out["junk"] += 1
    finally:
        s.close()


BEHAVIOURS = [(b_ok, 4), (b_pipeline, 2), (b_cut_body, 2), (b_cut_sent, 2), (b_cut_wait, 3),
              (b_slow_read, 1), (b_get, 1), (b_junk, 1)]


def client(port, seed, t_end, max_rounds, out, bad, errors):
    rng = random.Random(seed)
    fns = [f for f, w in BEHAVIOURS for _ in range(w)]
    for _ in range(max_rounds):
        if time.time() >= t_end:
            return
        fn = rng.choice(fns)
        try:
            fn(port, rng, out, bad)
        except (ConnectionError, socket.timeout, OSError) as e:
            # The server may close idle/draining connections; count, do not fail.
            errors[f"{fn.__name__}:{type(e).__name__}"] += 1
        except ValueError as e:
            bad.append(f"{fn.__name__}: {e}")


def run_stress(port, seconds=10.0, threads=16, max_rounds=400, seed=1):
    """Run the clients; returns (Counter outcomes, list violations, Counter errors)."""
    out, errors = collections.Counter(), collections.Counter()
    bad = []
    t_end = time.time() + seconds
    ts = [threading.Thread(target=client, args=(port, seed * 1000 + i, t_end, max_rounds, out, bad, errors),
                           daemon=True) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(seconds + 60)
    return out, bad, errors


if __name__ == "__main__":
    port = int(sys.argv[1])
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 10
    nthr = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    o, b, e = run_stress(port, secs, nthr)
    print("outcomes", dict(o))
    print("errors", dict(e))
    print("violations", len(b))
    for x in b[:20]:
        print("  ", x)
