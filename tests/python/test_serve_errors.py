"""`posy serve` under bad input and bad clients.

Each malformed or unacceptable request gets its status code and a JSON error
in its route's dialect (OpenAI {"error":{"message","type","code"}}, TEI
{"error","error_type"}), and the server keeps answering good requests.  The
server runs the no-op engine (`--engine noop`): these checks are about the
HTTP front, and it makes them fast; `--noop-delay-us` holds requests in the
queue where a test needs that (admission, disconnects, draining).
"""
import concurrent.futures as cf
import json
import socket
import time

import pytest
import requests

from serve_util import Server

BODY_LIMIT = 1_000_000


@pytest.fixture(scope="module")
def server(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--engine", "noop", "--max-body-bytes", str(BODY_LIMIT),
               "--max-client-batch", "2048", "--request-timeout", "2")
    yield s
    assert s.stop() == 0, s.output()


def still_serving(server):
    r = requests.post(server.url + "/v1/embeddings", json={"input": "still here"}, timeout=10)
    assert r.status_code == 200, r.text
    assert len(r.json()["data"][0]["embedding"]) == 384


def check_openai_error(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    e = r.json()["error"]
    assert isinstance(e["message"], str) and e["message"]
    assert isinstance(e["type"], str) and isinstance(e["code"], str)
    return e


def check_tei_error(r, status):
    assert r.status_code == status, r.text
    j = r.json()
    assert isinstance(j["error"], str) and j["error"]
    assert j["error_type"] in ("Validation", "Overloaded", "Unhealthy", "Backend", "Tokenizer", "Empty")
    return j


def post_raw(server, path, body: bytes):
    return requests.post(server.url + path, data=body, headers={"Content-Type": "application/json"}, timeout=10)


# (body bytes, status, code) for /v1/embeddings
OPENAI_CASES = [
    (b'{"input": "a"', 400, "invalid_json"),                       # truncated JSON
    (b'{"input": ["a", "b"', 400, "invalid_json"),
    (b'{input: "a"}', 400, "invalid_json"),                         # malformed
    (b'', 400, "invalid_json"),
    (b'[1, 2, 3]', 400, "invalid_type"),
    (b'"just a string"', 400, "invalid_type"),
    (b'{"input": 5}', 400, "invalid_type"),
    (b'{"input": {"text": "a"}}', 400, "invalid_type"),
    (b'{"input": [1.5, 2]}', 400, "invalid_type"),
    (b'{"input": ["a", 1]}', 400, "invalid_type"),
    (b'{"input": [[1, 2], "a"]}', 400, "invalid_type"),
    (b'{"input": [[101, "x"]]}', 400, "invalid_type"),
    (b'{"input": "a", "dimensions": "8"}', 400, "invalid_type"),
    (b'{"input": "a", "encoding_format": 5}', 400, "invalid_type"),
    (b'{"input": "a", "model": 7}', 400, "invalid_type"),
    (b'{"input": [1e999]}', 400, "invalid_json"),                  # huge numbers
    (b'{"input": [123456789012345678901234567890]}', 400, "invalid_json"),
    (b'{"input": "a", "dimensions": 1e400}', 400, "invalid_json"),
    (b'{"input": [1000000000000]}', 422, "token_out_of_vocabulary"),
    (b'{"input": [[101, -1, 102]]}', 422, "token_out_of_vocabulary"),
    (b'{"input": [[101, 30522, 102]]}', 422, "token_out_of_vocabulary"),
    (b'{"input": "a", "dimensions": 100000000000}', 422, "invalid_dimensions"),
    (b'{"input": "a", "dimensions": 0}', 422, "invalid_dimensions"),
    (b'{"input": "a", "dimensions": 385}', 422, "invalid_dimensions"),
    (b'{"input": "a", "encoding_format": "int4"}', 422, "invalid_encoding_format"),
    (b'{"input": "\xff\xfe bad utf-8"}', 400, "invalid_json"),     # invalid UTF-8
    (b'{"input": "\xc3"}', 400, "invalid_json"),
    (b'{"input": "\\ud800"}', 400, "invalid_json"),               # lone surrogates
    (b'{"input": "x\\udc00y"}', 400, "invalid_json"),
    (b'{"input": "a\\u0000b"}', 400, "invalid_json"),
    (b'{"input": []}', 422, "empty_input"),                        # empty arrays
    (b'{"input": [[]]}', 422, "empty_input"),
    (b'{"input": [[101, 102], []]}', 422, "empty_input"),
    (b'{}', 422, "missing_input"),
    (b'{"input": null}', 422, "missing_input"),
    (b'{"input": "a", "prompt_name": "no-such-prompt"}', 422, "unknown_prompt"),
    (b'[' * 100000 + b']' * 100000, 400, "invalid_json"),          # deep nesting
    (b'{"a":' * 50000 + b'1' + b'}' * 50000, 400, "invalid_json"),
]


@pytest.mark.parametrize("body,status,code", OPENAI_CASES, ids=[f"{i}:{c[2]}" for i, c in enumerate(OPENAI_CASES)])
def test_openai_bad_requests(server, body, status, code):
    e = check_openai_error(post_raw(server, "/v1/embeddings", body), status)
    assert e["code"] == code, e


TEI_CASES = [
    (b'{"inputs": "a"', 400),
    (b'{"inputs": 5}', 400),
    (b'{"inputs": "a", "normalize": "yes"}', 400),
    (b'{"inputs": "a", "truncate": 1}', 400),
    (b'{"inputs": []}', 422),
    (b'{"inputs": "a", "truncation_direction": "Up"}', 422),
    (b'{"inputs": "a", "dimensions": 0}', 422),
    (b'{"inputs": "\\ud800"}', 400),
    (b'{"inputs": "a b c ' + b'word ' * 600 + b'"}', 422),          # too long, truncation off
    (b'{"input": "a"}', 422),                                      # OpenAI's field name on a TEI route
]


@pytest.mark.parametrize("route", ["/embed", "/"])
@pytest.mark.parametrize("body,status", TEI_CASES)
def test_tei_bad_requests(server, route, body, status):
    check_tei_error(post_raw(server, route, body), status)


def test_too_many_inputs(server):
    body = json.dumps({"input": ["a"] * 100_000}).encode()
    assert len(body) < BODY_LIMIT
    e = check_openai_error(post_raw(server, "/v1/embeddings", body), 422)
    assert e["code"] == "too_many_inputs" and "2048" in e["message"]
    check_tei_error(post_raw(server, "/embed", json.dumps({"inputs": ["a"] * 2049}).encode()), 422)
    ok = post_raw(server, "/embed", json.dumps({"inputs": ["a"] * 2048}).encode())
    assert ok.status_code == 200 and len(ok.json()) == 2048
    still_serving(server)


def test_oversized_body(server):
    body = json.dumps({"input": "x" * BODY_LIMIT}).encode()
    e = check_openai_error(post_raw(server, "/v1/embeddings", body), 413)
    assert e["code"] == "body_too_large"
    check_tei_error(post_raw(server, "/embed", json.dumps({"inputs": "y" * BODY_LIMIT}).encode()), 413)
    still_serving(server)


def raw_http(server, head: bytes, body: bytes = b""):
    """Send raw bytes, return (status line, headers dict, body) of the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sk:
        sk.sendall(head + body)
        data = b""
        while True:
            chunk = sk.recv(65536)
            if not chunk:
                break
            data += chunk
    head_part, _, rest = data.partition(b"\r\n\r\n")
    lines = head_part.decode().split("\r\n")
    hdrs = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    return lines[0], hdrs, rest


@pytest.mark.parametrize("path,openai", [("/v1/embeddings", True), ("/embed", False)])
def test_h2o_refusals_are_json_too(server, path, openai):
    """Bodies far over the limit are refused by h2o from the Content-Length
    alone, before posy's handler; posy's filter makes that answer JSON."""
    status, hdrs, body = raw_http(server, f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                  f"Content-Length: {BODY_LIMIT * 3 + 100000}\r\n\r\n".encode(), b'{"input": "')
    assert status.split()[1] == "413", status
    assert hdrs["content-type"] == "application/json" and int(hdrs["content-length"]) == len(body)
    j = json.loads(body)
    if openai:
        assert j["error"]["code"] == "body_too_large" and str(BODY_LIMIT) in j["error"]["message"]
    else:
        assert j["error_type"] == "Validation" and str(BODY_LIMIT) in j["error"]
    status, hdrs, body = raw_http(server, f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n".encode())
    assert status.split()[1] == "400" and hdrs["content-type"] == "application/json", status
    assert "error" in json.loads(body)
    still_serving(server)


def test_routes_and_methods(server):
    r = requests.get(server.url + "/no/such/route")
    assert r.status_code == 404 and "error" in r.json()
    check_openai_error(requests.get(server.url + "/v1/embeddings"), 405)
    check_tei_error(requests.get(server.url + "/embed"), 405)
    assert requests.post(server.url + "/health").status_code == 405


def test_slow_client_is_cut_off_and_others_are_served(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"in")
    t0 = time.time()
    for _ in range(5):                    # others are served while it dawdles
        still_serving(server)
    s.settimeout(10)
    try:
        while True:                       # --request-timeout 2: the server gives up on it
            if not s.recv(4096):
                break
    except (ConnectionResetError, socket.timeout):
        pass
    assert time.time() - t0 < 8
    s.close()
    still_serving(server)


def test_abrupt_disconnects(server):
    body = json.dumps({"input": ["some text"] * 50}).encode()
    req = (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body))
    for i in range(30):
        s = socket.create_connection(("127.0.0.1", server.port))
        if i % 3 == 0:
            s.sendall(req + body)         # whole request, then gone
        elif i % 3 == 1:
            s.sendall(req + body[:10])    # gone mid-body
        else:
            s.sendall(req[:20])           # gone mid-headers
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
        s.close()
    still_serving(server)
    t_end = time.time() + 5
    while server.metric("posy_http_active") > 0 and time.time() < t_end:
        time.sleep(0.05)
    assert server.metric("posy_http_active") == 0


def test_bad_requests_counted_in_metrics(server):
    text = requests.get(server.url + "/metrics").text
    assert 'posy_requests_total{route="/v1/embeddings",status="400"}' in text
    assert server.metric('posy_request_failures_total{reason="malformed_json"}') > 0
    assert server.metric('posy_request_failures_total{reason="validation"}') > 0


# ---- a slow (no-op) engine: requests wait in the queue --------------------

@pytest.fixture()
def slow_server(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--engine", "noop", "--noop-delay-us", "300000", "--max-batch-seqs", "1",
               "--max-concurrent", "4")
    yield s
    s.stop()


def test_overload_answers_429(slow_server):
    def one(i):
        return requests.post(slow_server.url + ("/v1/embeddings" if i % 2 else "/embed"),
                             json={"input" if i % 2 else "inputs": f"text {i}"}, timeout=30)
    with cf.ThreadPoolExecutor(10) as ex:
        rs = list(ex.map(one, range(10)))
    codes = sorted(r.status_code for r in rs)
    assert codes.count(200) >= 4 and codes.count(429) >= 1, codes
    for i, r in enumerate(rs):
        if r.status_code == 429:
            (check_openai_error if i % 2 else check_tei_error)(r, 429)
    assert requests.post(slow_server.url + "/embed", json={"inputs": "again"}).status_code == 200


def test_disconnected_clients_queued_work_is_dropped(slow_server):
    body = b'{"input": "x"}'
    req = b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    socks = [socket.create_connection(("127.0.0.1", slow_server.port)) for _ in range(4)]
    for s in socks:
        s.sendall(req)
    time.sleep(0.15)                      # all four accepted; one runs, three wait
    for s in socks:
        s.close()
    time.sleep(0.1)                       # the disconnect watch runs every 20 ms
    assert slow_server.metric('posy_request_failures_total{reason="client_disconnected"}') >= 3
    assert slow_server.metric("posy_queue_sequences") == 0
    t_end = time.time() + 5
    while slow_server.metric("posy_http_active") > 0 and time.time() < t_end:
        time.sleep(0.05)
    assert slow_server.metric("posy_batch_size_count") <= 2   # the dropped requests never ran


def test_sigterm_drains_every_accepted_request(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--engine", "noop", "--noop-delay-us", "100000", "--max-batch-seqs", "2")
    try:
        with cf.ThreadPoolExecutor(12) as ex:
            futs = [ex.submit(requests.post, s.url + "/embed", json={"inputs": [f"t{i}", f"u{i}"]}, timeout=30)
                    for i in range(12)]
            time.sleep(0.3)               # all accepted; most still queued (100 ms per batch)
            s.proc.send_signal(15)
            rs = [f.result() for f in futs]
        assert [r.status_code for r in rs] == [200] * 12
        assert all(len(r.json()) == 2 for r in rs)
        assert s.proc.wait(timeout=30) == 0, s.output()
        assert "draining" in s.output() and "stopped cleanly" in s.output()
        with pytest.raises(requests.ConnectionError):
            requests.post(s.url + "/embed", json={"inputs": "late"}, timeout=2)
    finally:
        s.stop()


# ---- the command line ------------------------------------------------------

def test_help_and_bad_flags(posy_bin, posy_model):
    import subprocess
    r = subprocess.run([posy_bin, "serve", "--help"], capture_output=True, timeout=10)
    assert r.returncode == 0
    for flag in ("--model", "--port", "--host", "--device", "--max-batch-tokens", "--max-batch-seqs",
                 "--max-concurrent", "--max-client-batch", "--max-body-bytes", "--engine", "POSY_PORT"):
        assert flag.encode() in r.stdout, flag
    for args, env, needle in [(["--frobnicate"], {}, b"--frobnicate"), (["--port", "http"], {}, b"--port"),
                              ([], {"POSY_MAX_CONCURRENT": "-3"}, b"POSY_MAX_CONCURRENT"),
                              (["--device", "tpu"], {}, b"--device"), (["--engine", "fast"], {}, b"--engine")]:
        import os
        r = subprocess.run([posy_bin, "serve", "--model", posy_model, *args], capture_output=True, timeout=10,
                           env={**os.environ, **env})
        assert r.returncode == 2 and needle in r.stderr, (args, env, r.stderr)
    r = subprocess.run([posy_bin, "serve", "--model", "/nonexistent-model-dir"], capture_output=True, timeout=10)
    assert r.returncode == 1 and b"/nonexistent-model-dir" in r.stderr


def test_serve_and_gateway_share_the_http_front_flags(posy_bin):
    """The front's flags are one table (cli_http_flags.h): same names, help and
    kinds in `posy serve` and `posy gateway`; --auto-truncate is a switch in
    both (the gateway once wanted a value), so a bare flag gets past parsing
    and the run fails on the model directory instead."""
    import subprocess

    def flag_lines(cmd):
        out = subprocess.run([posy_bin, cmd, "--help"], capture_output=True, timeout=10, text=True).stdout
        return {l.split()[0]: " ".join(l.split()[1:]) for l in out.splitlines() if l.startswith("  --")}
    serve, gw = flag_lines("serve"), flag_lines("gateway")
    front = ("--host", "--port", "--http-threads", "--tokenization-workers", "--max-concurrent",
             "--max-client-batch", "--max-body-bytes", "--request-timeout", "--drain-timeout", "--auto-truncate")
    for f in front:
        assert f in serve and f in gw and serve[f] == gw[f], (f, serve.get(f), gw.get(f))
    for cmd, extra in (("serve", []), ("gateway", ["--backend", "127.0.0.1:1"])):
        r = subprocess.run([posy_bin, cmd, "--auto-truncate", "--port", "0", *extra, "--model", "/nonexistent-model-dir"],
                           capture_output=True, timeout=10)
        assert r.returncode == 1 and b"/nonexistent-model-dir" in r.stderr, (cmd, r.returncode, r.stderr)
        r = subprocess.run([posy_bin, cmd, "--auto-truncate=2", *extra], capture_output=True, timeout=10)
        assert r.returncode == 2 and b"--auto-truncate" in r.stderr, (cmd, r.returncode, r.stderr)
        # "0 | 1" as --help writes it: the value as its own word too (it was "unknown flag '1'")
        for v in ("1", "0"):
            r = subprocess.run([posy_bin, cmd, "--auto-truncate", v, "--port", "0", *extra, "--model",
                                "/nonexistent-model-dir"], capture_output=True, timeout=10)
            assert r.returncode == 1 and b"/nonexistent-model-dir" in r.stderr, (cmd, v, r.returncode, r.stderr)
        r = subprocess.run([posy_bin, cmd, "--auto-truncate", "2", *extra], capture_output=True, timeout=10)
        assert r.returncode == 2 and b"unknown flag '2'" in r.stderr, (cmd, r.returncode, r.stderr)


def test_switch_value_as_its_own_word(posy_bin, posy_model):
    """`--auto-truncate 1` / `--auto-truncate 0` set what they say (the parse test above only sees
    them accepted), and a bare switch before another flag still means on."""
    for args, want in ((("--auto-truncate", "1"), True), (("--auto-truncate", "0"), False),
                       (("--auto-truncate", "--engine", "noop"), True)):
        extra = () if "--engine" in args else ("--engine", "noop")
        s = Server(posy_bin, posy_model, *args, *extra)
        try:
            assert requests.get(s.url + "/info").json()["auto_truncate"] is want, args
        finally:
            assert s.stop() == 0


def test_env_configures_the_server(posy_bin, posy_model):
    s = Server(posy_bin, posy_model, "--engine", "noop", env={"POSY_MAX_CLIENT_BATCH": "3", "POSY_MAX_BATCH_SEQS": "7"})
    try:
        info = requests.get(s.url + "/info").json()
        assert info["max_client_batch_size"] == 3 and info["max_batch_requests"] == 7
        assert info["max_batch_tokens"] == 16384   # no flag: the CPU's default (eng_batch_budget.c)
        assert requests.post(s.url + "/embed", json={"inputs": ["a"] * 4}).status_code == 422
        log = s.output()
        assert "all-MiniLM-L6-v2" in log and "384 dims" in log and "max_client_batch 3" in log
    finally:
        assert s.stop() == 0


def test_mutated_bodies_never_break_the_server(server):
    """300 random mutations (byte flips, cuts, splices) of valid bodies: every
    answer is a status from the table with a JSON body, and the server lives."""
    import random
    rng = random.Random(11)
    seeds = [json.dumps({"input": ["hello world", "second input"], "dimensions": 16}).encode(),
             json.dumps({"input": [[101, 7592, 102]], "encoding_format": "base64"}).encode(),
             json.dumps({"inputs": "a text", "truncate": True, "normalize": False}).encode()]
    for i in range(300):
        b = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(3)
            p = rng.randrange(len(b))
            if op == 0:
                b[p] = rng.randrange(256)
            elif op == 1:
                del b[p:p + rng.randint(1, 8)]
            else:
                b[p:p] = rng.choice([b"[", b"]", b"{", b"\"", b"\\u", b"\xff", b"1e999", b"-", b",", b"null"])
        path = "/v1/embeddings" if i % 2 else "/embed"
        r = post_raw(server, path, bytes(b))
        assert r.status_code in (200, 400, 413, 422), (bytes(b), r.status_code, r.text)
        j = r.json()
        if r.status_code != 200:
            assert "error" in j
    still_serving(server)
