"""Helpers for the gRPC tests (test_grpc*.py): stubs generated from
proto/*.proto at test time with grpcio-tools, free ports, and starting /
stopping real `posy worker` and `posy gateway` processes.

Kept out of conftest.py on purpose: the gRPC suite needs nothing from the
other suites' fixtures, and they need nothing from it.
"""
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def env_path(var, default):
    return os.path.abspath(os.environ.get(var) or os.path.join(ROOT, default))


POSY_BIN = env_path("POSY_BIN", "build/posy")
POSY_MODEL = env_path("POSY_MODEL", "models/all-MiniLM-L6-v2")

_stubs = None


def stubs():
    """(posy_pb2, posy_pb2_grpc, health_pb2, health_pb2_grpc), generated once per run."""
    global _stubs
    if _stubs is None:
        from grpc_tools import protoc
        out = tempfile.mkdtemp(prefix="posy-stubs-")
        proto = os.path.join(ROOT, "proto")
        for name in ("posy.proto", "health.proto"):
            rc = protoc.main(["protoc", f"-I{proto}", f"--python_out={out}", f"--grpc_python_out={out}",
                              os.path.join(proto, name)])
            assert rc == 0, f"protoc failed on proto/{name}"
        sys.path.insert(0, out)
        _stubs = tuple(importlib.import_module(m) for m in ("posy_pb2", "posy_pb2_grpc", "health_pb2",
                                                              "health_pb2_grpc"))
    return _stubs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tokenizer():
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(POSY_MODEL, "tokenizer.json"))
    tok.enable_truncation(256)
    tok.no_padding()
    return tok


def embed_request(tok, texts, request_id=0):
    pb = stubs()[0]
    encs = tok.encode_batch(texts)
    ids = [i for e in encs for i in e.ids]
    return pb.EmbedRequest(request_id=request_id, ids=ids, lengths=[len(e.ids) for e in encs])


def vectors(resp):
    v = np.frombuffer(resp.vectors, dtype="<f4")
    return v.reshape(resp.count, resp.dim)


def posy_embed(texts):
    """Vectors from `posy embed` (JSON lines on stdout) for the same texts."""
    import json
    r = subprocess.run([POSY_BIN, "embed", "--model", POSY_MODEL, "--device", "cpu"],
                       input="\n".join(texts).encode() + b"\n", capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    rows = [json.loads(line) for line in r.stdout.decode().splitlines()]
    return np.array(rows, dtype=np.float32)


class Proc:
    """A posy subprocess with its log in a temp file."""

    def __init__(self, args, name):
        self.args = args
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix=f"posy-{name}-", suffix=".log", delete=False)
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

    def alive(self):
        return self.p.poll() is None

    def text(self):
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")

    def kill9(self):
        if self.alive():
            self.p.send_signal(signal.SIGKILL)
        self.p.wait(timeout=30)

    def stop(self, timeout=30):
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
            try:
                return self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def start_worker(port=None, *extra, wait=True, model=None):
    port = port or free_port()
    w = Proc([POSY_BIN, "worker", "--model", model or POSY_MODEL, "--listen", f"127.0.0.1:{port}", "--device", "cpu",
              "--threads", "1", *extra], f"worker-{port}")
    w.port = port
    w.addr = f"127.0.0.1:{port}"
    if wait:
        wait_serving(w)
    return w


def wait_serving(w, timeout=60):
    import grpc
    _, _, hpb, hgrpc = stubs()
    deadline = time.time() + timeout
    with grpc.insecure_channel(w.addr) as ch:
        stub = hgrpc.HealthStub(ch)
        while time.time() < deadline:
            assert w.alive(), f"{w.name} exited {w.p.returncode}:\n{w.text()}"
            try:
                if stub.Check(hpb.HealthCheckRequest(), timeout=1).status == hpb.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)
    raise AssertionError(f"{w.name} not serving after {timeout}s:\n{w.text()}")


# ---- HTTP side (posy serve / posy gateway) ----------------------------------

def http_post(port, path, body, timeout=120):
    """POST JSON; returns (status, parsed body)."""
    import json
    import urllib.error
    import urllib.request
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        data = e.read()
        try:
            return e.code, json.loads(data)
        except ValueError:
            return e.code, data


def http_get(port, path, timeout=10):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def openai_vectors(body):
    return np.array([d["embedding"] for d in sorted(body["data"], key=lambda d: d["index"])], dtype=np.float32)


def wait_http(proc, port, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.alive(), f"{proc.name} exited {proc.p.returncode}:\n{proc.text()}"
        try:
            if http_get(port, "/health", timeout=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{proc.name} not healthy after {timeout}s:\n{proc.text()}")


def start_serve(*extra):
    port = free_port()
    s = Proc([POSY_BIN, "serve", "--model", POSY_MODEL, "--host", "127.0.0.1", "--port", str(port),
              "--device", "cpu", *extra], f"serve-{port}")
    s.port = port
    wait_http(s, port)
    return s


def start_gateway(backends, *extra, wait=True, dns=None, model=None):
    port = free_port()
    args = [POSY_BIN, "gateway", "--model", model or POSY_MODEL, "--host", "127.0.0.1", "--port", str(port)]
    for b in backends:
        args += ["--backend", b]
    if dns:
        args += ["--backend-dns", dns]
    g = Proc(args + list(extra), f"gateway-{port}")
    g.port = port
    if wait:
        wait_http(g, port)
    return g


def worker_requests(addr):
    """Embed calls a worker has answered (Info counters)."""
    import grpc
    pb, pbg, _, _ = stubs()
    with grpc.insecure_channel(addr) as ch:
        return pbg.EmbedderStub(ch).Info(pb.InfoRequest(), timeout=5).requests
