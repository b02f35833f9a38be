"""One `posy gateway` in front of three `posy worker`s on loopback.

- a 2,000-input request returns what `posy serve` returns, and every worker
  received chunks;
- under steady load, kill -9 of a worker loses no request; restarted, it
  takes work again;
- with every worker gone requests get 503 at once, and the gateway recovers
  when a worker returns;
- the gateway refuses workers that serve another model, and finds workers
  through DNS (--backend-dns).
"""
import os
import random
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest

from grpc_util import (POSY_BIN, POSY_MODEL, free_port, http_get, http_post, openai_vectors, start_gateway, start_serve,
                       start_worker, wait_serving, worker_requests, Proc)


def sentences(n, seed=0):
    rng = random.Random(seed)
    words = ("the a vector search engine fast slow embedding query document model token batch gateway "
             "worker chunk cluster Paris France capital blue green river mountain code python rust").split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 24))) + f" #{i}" for i in range(n)]


def close(a, b):
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, atol=2e-6, rtol=1e-5)


@pytest.fixture(scope="module")
def cluster():
    workers = [start_worker() for _ in range(3)]
    gw = start_gateway([w.addr for w in workers], "--chunk-tokens", "512")
    yield gw, workers
    gw.stop()
    for w in workers:
        w.stop()


@pytest.fixture(scope="module")
def serve_reference():
    """posy serve's vectors for a 2,000-input request (and texts)."""
    texts = sentences(2000)
    s = start_serve()
    try:
        st, body = http_post(s.port, "/v1/embeddings", {"input": texts, "model": "m"}, timeout=300)
    finally:
        s.stop()
    assert st == 200, body
    return texts, openai_vectors(body)


def test_2000_inputs_equal_posy_serve_and_reach_every_worker(cluster, serve_reference):
    gw, workers = cluster
    texts, ref = serve_reference
    before = [worker_requests(w.addr) for w in workers]
    st, body = http_post(gw.port, "/v1/embeddings", {"input": texts, "model": "m"}, timeout=300)
    assert st == 200, body
    close(openai_vectors(body), ref)
    assert body["usage"]["prompt_tokens"] > 2000
    after = [worker_requests(w.addr) for w in workers]
    for w, b, a in zip(workers, before, after):
        assert a > b, f"worker {w.addr} received no chunk ({b} -> {a})"
    st, metrics = http_get(gw.port, "/metrics")
    assert st == 200
    for w in workers:
        line = f'posy_gateway_worker_chunks_total{{worker="{w.addr}",result="ok"}} '
        assert line in metrics.decode(), metrics.decode()[-2000:]
        assert int(metrics.decode().split(line)[1].split()[0]) > 0


def test_tei_route_through_the_gateway(cluster, serve_reference):
    gw, _ = cluster
    texts, ref = serve_reference
    st, body = http_post(gw.port, "/embed", {"inputs": texts[:5]})
    assert st == 200, body
    close(np.array(body, dtype=np.float32), ref[:5])
    # TEI /similarity: cosines of the first text's vector with the others', from the workers' vectors
    st, sims = http_post(gw.port, "/similarity", {"inputs": {"source_sentence": texts[0], "sentences": texts[1:5]}})
    assert st == 200, sims
    want = [float(ref[0] @ v / np.linalg.norm(ref[0]) / np.linalg.norm(v)) for v in ref[1:5]]
    np.testing.assert_allclose(sims, want, atol=1e-5)


class Load:
    """Clients sending requests back to back; every answer is checked."""

    def __init__(self, port, texts, ref, n_clients=3, batch=16):
        self.port, self.texts, self.ref, self.batch = port, texts, ref, batch
        self.stop = threading.Event()
        self.ok = 0
        self.failures = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(n_clients)]
        for t in self.threads:
            t.start()

    def run(self, seed):
        rng = random.Random(seed)
        while not self.stop.is_set():
            i = rng.randrange(0, len(self.texts) - self.batch)
            try:
                st, body = http_post(self.port, "/v1/embeddings", {"input": self.texts[i:i + self.batch]}, timeout=60)
                good = st == 200 and np.allclose(openai_vectors(body), self.ref[i:i + self.batch], atol=2e-6, rtol=1e-5)
                err = None if good else f"status {st}: {str(body)[:200]}"
            except Exception as e:       # a dropped connection is a failure too
                err = repr(e)
            with self.lock:
                if err:
                    self.failures.append(err)
                else:
                    self.ok += 1

    def count(self):
        with self.lock:
            return self.ok

    def wait_for(self, n_more, timeout=60):
        target = self.count() + n_more
        deadline = time.time() + timeout
        while self.count() < target and time.time() < deadline:
            time.sleep(0.05)
        assert self.count() >= target, f"load stalled: {self.count()} < {target}; failures {self.failures[:3]}"

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def test_kill9_under_load_loses_nothing_and_restart_takes_work(cluster, serve_reference):
    gw, workers = cluster
    texts, ref = serve_reference
    load = Load(gw.port, texts, ref)
    try:
        load.wait_for(5)
        victim = workers[0]
        victim.kill9()
        load.wait_for(10)                       # the survivors carry the load
        restarted = start_worker(victim.port)   # same address: the gateway's channel reconnects
        workers[0] = restarted
        base = worker_requests(restarted.addr)
        deadline = time.time() + 60
        while worker_requests(restarted.addr) == base and time.time() < deadline:
            time.sleep(0.1)
        assert worker_requests(restarted.addr) > base, "restarted worker never received a chunk"
        load.wait_for(3)
    finally:
        load.finish()
    assert not load.failures, f"{len(load.failures)} client requests failed: {load.failures[:3]}"
    assert load.ok > 0


def test_all_workers_gone_503_then_recovery(cluster, serve_reference):
    gw, workers = cluster
    texts, ref = serve_reference
    for w in workers:
        w.kill9()
    # Every request answers 503 promptly (a hang would trip the client timeout).
    for _ in range(3):
        st, body = http_post(gw.port, "/v1/embeddings", {"input": texts[:4]}, timeout=5)
        assert st == 503, body
    st, body = http_post(gw.port, "/embed", {"inputs": texts[:2]}, timeout=5)
    assert st == 503, body
    assert http_get(gw.port, "/health")[0] == 503
    # One worker returns: the gateway serves again.
    workers[1] = start_worker(workers[1].port)
    deadline = time.time() + 30
    st = None
    while time.time() < deadline:
        st, body = http_post(gw.port, "/v1/embeddings", {"input": texts[:8]}, timeout=30)
        if st == 200:
            break
        time.sleep(0.1)
    assert st == 200, body
    close(openai_vectors(body), ref[:8])
    assert http_get(gw.port, "/health")[0] == 200
    workers[0] = start_worker(workers[0].port)
    workers[2] = start_worker(workers[2].port)


def test_gateway_refuses_a_worker_with_another_model(tmp_path):
    other = tmp_path / "other-model"
    other.mkdir()
    for f in os.listdir(POSY_MODEL):
        src = os.path.join(POSY_MODEL, f)
        if f != "config.json":
            os.symlink(src, other / f)
    cfg = open(os.path.join(POSY_MODEL, "config.json")).read()
    (other / "config.json").write_text(cfg + "\n")      # same model, other bytes: another fingerprint
    port = free_port()
    w = Proc([POSY_BIN, "worker", "--model", str(other), "--listen", f"127.0.0.1:{port}", "--device", "cpu",
              "--engine", "noop"], "worker-other")
    w.addr = f"127.0.0.1:{port}"
    try:
        wait_serving(w)
        r = subprocess.run([POSY_BIN, "gateway", "--model", POSY_MODEL, "--port", "0", "--backend", w.addr],
                           capture_output=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert w.addr.encode() in r.stderr and b"another model" in r.stderr
    finally:
        w.stop()


def test_dns_discovery(serve_reference):
    texts, ref = serve_reference
    w = start_worker()
    try:
        g = start_gateway([], dns=f"localhost:{w.port}")
        try:
            st, body = http_post(g.port, "/v1/embeddings", {"input": texts[:6]})
            assert st == 200, body
            close(openai_vectors(body), ref[:6])
        finally:
            g.stop()
    finally:
        w.stop()


def test_gateway_flag_errors():
    r = subprocess.run([POSY_BIN, "gateway", "--model", POSY_MODEL], capture_output=True, timeout=30)
    assert r.returncode == 2 and b"--backend" in r.stderr
    r = subprocess.run([POSY_BIN, "gateway", "--model", POSY_MODEL, "--backend", "127.0.0.1:1",
                        "--chunk-tokens", "zero"], capture_output=True, timeout=30)
    assert r.returncode == 2 and b"--chunk-tokens" in r.stderr
