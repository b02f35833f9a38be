"""The HTTP front (gw_server) under hostile load, on the sanitizer build.

`posy serve --engine noop` and `posy gateway` with two `posy worker --engine
noop` behind it, each with four event-loop threads, get at once:
  - wrk: many keep-alive connections, as fast as the loops answer (every
    answer crosses from a worker thread to a loop thread);
  - stress_util's clients: disconnects before the body is complete, right
    after sending, while waiting for the answer, pipelined requests (some
    abandoned), slow readers with tiny receive buffers, resets, junk.
Then: every call of a vanished client must have been freed
(posy_http_active back to 0), and SIGTERM in the middle of a second load
must drain and exit 0, with no sanitizer report in any process's log.

The binary is POSY_ASAN_BIN when set (scripts/dev.sh test builds
build-asan/posy and sets it), POSY_BIN otherwise; the sanitizer build runs
with halt_on_error=1 and leak detection on.  This is the scenario that
reproduced the heap-use-after-free in h2o's socket read (loop state built on
the main thread; see src/gateway/gw_loop.c) in 3 of 3 runs.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from serve_util import free_port
from stress_util import run_stress

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "AddressSanitizer:DEADLYSIGNAL", "pipe error")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def stress_bin(posy_bin):
    p = os.environ.get("POSY_ASAN_BIN")
    if p:
        p = os.path.abspath(p)
        assert os.access(p, os.X_OK), f"POSY_ASAN_BIN={p} is not an executable"
        return p
    return posy_bin


@pytest.fixture(scope="module")
def wrk():
    w = shutil.which("wrk")
    if not w:
        pytest.fail("wrk not found: scripts/install-deps.sh installs it", pytrace=False)
    return w


class Proc:
    """A posy process with stdout+stderr in a file, sanitizers armed."""

    def __init__(self, args, name):
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix=f"posy-stress-{name}-", suffix=".log", delete=False)
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = "halt_on_error=1:detect_leaks=1:abort_on_error=0"
        env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def text(self):
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")

    def check_alive(self):
        assert self.p.poll() is None, f"{self.name} died ({self.p.returncode}):\n{self.text()[-6000:]}"

    def stop(self, timeout=60):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise AssertionError(f"{self.name} did not exit {timeout}s after SIGTERM:\n{self.text()[-6000:]}")

    def assert_clean(self):
        t = self.text()
        for m in SANITIZER_MARKS:
            assert m not in t, f"{self.name}: '{m}' in its log:\n{t[-8000:]}"


def http_get(port, path):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.status, r.read().decode()


def wait_health(proc, port, timeout=60):
    t_end = time.time() + timeout
    while time.time() < t_end:
        proc.check_alive()
        try:
            if http_get(port, "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{proc.name} not healthy after {timeout}s:\n{proc.text()[-4000:]}")


def metric(port, name):
    for line in http_get(port, "/metrics")[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def start_wrk(wrk, port, seconds, conns=32):
    env = dict(os.environ, POSY_BENCH_BODY='{"input":"hello world, once more"}')
    return subprocess.Popen([wrk, "-t1", f"-c{conns}", f"-d{seconds}s", "-s",
                             os.path.join(ROOT, "bench", "bench_serve_post.lua"),
                             f"http://127.0.0.1:{port}/v1/embeddings"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)


def wrk_requests(out):
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[1] == "requests" and parts[0].isdigit():
            return int(parts[0])
    return 0


def hammer_then_sigterm(front, port, wrk, others=()):
    """Phase 1: wrk + hostile clients; phase 2: abandoned calls all freed;
    phase 3: SIGTERM under load, clean drain, clean exit."""
    w = start_wrk(wrk, port, 5)
    outcomes, violations, _ = run_stress(port, seconds=5, threads=8, seed=7)
    out = w.communicate(timeout=60)[0].decode(errors="replace")
    front.check_alive()
    for o in others:
        o.check_alive()
    assert not violations, violations[:10]
    assert outcomes["ok"] > 20, outcomes
    assert wrk_requests(out) > 100, out
    for k in ("cut_body", "cut_sent", "cut_wait", "slow_read", "pipeline_cut"):
        assert outcomes[k] > 0, (k, outcomes)
    # Every call of a client that left has been answered into the void and freed.
    t_end = time.time() + 20
    while metric(port, "posy_http_active") != 0 and time.time() < t_end:
        time.sleep(0.1)
    assert metric(port, "posy_http_active") == 0, front.text()[-3000:]

    w = start_wrk(wrk, port, 4)
    time.sleep(1.5)
    front.check_alive()
    rc = front.stop()
    w.communicate(timeout=60)
    assert rc == 0, f"{front.name} exited {rc}:\n{front.text()[-8000:]}"
    front.assert_clean()


def test_serve_survives_hostile_clients_and_sigterm(stress_bin, posy_model, wrk):
    port = free_port()
    srv = Proc([stress_bin, "serve", "--model", posy_model, "--host", "127.0.0.1", "--port", str(port),
                "--engine", "noop", "--noop-delay-us", "300", "--http-threads", "4",
                "--tokenization-workers", "2", "--request-timeout", "2", "--drain-timeout", "20"], "serve")
    try:
        wait_health(srv, port)
        hammer_then_sigterm(srv, port, wrk)
    finally:
        if srv.p.poll() is None:
            srv.p.kill()


def test_gateway_survives_hostile_clients_and_sigterm(stress_bin, posy_model, wrk):
    workers = []
    gw = None
    try:
        for i in range(2):
            wp = free_port()
            w = Proc([stress_bin, "worker", "--model", posy_model, "--listen", f"127.0.0.1:{wp}",
                      "--engine", "noop"], f"worker{i}")
            w.addr = f"127.0.0.1:{wp}"
            workers.append(w)
        port = free_port()
        backends = [a for w in workers for a in ("--backend", w.addr)]
        # Small chunks: a multi-input request is split over both workers.
        gw = Proc([stress_bin, "gateway", "--model", posy_model, "--host", "127.0.0.1", "--port", str(port),
                   "--http-threads", "4", "--tokenization-workers", "2", "--chunk-tokens", "32",
                   "--request-timeout", "2", "--drain-timeout", "20", *backends], "gateway")
        wait_health(gw, port)
        hammer_then_sigterm(gw, port, wrk, workers)
        for w in workers:
            assert w.stop() == 0, w.text()[-6000:]
            w.assert_clean()
    finally:
        for p in workers + ([gw] if gw else []):
            if p.p.poll() is None:
                p.p.kill()
