"""--busy-poll-us on `posy serve` and `posy worker`: "auto" (the default) is
off on the CPU engine, an explicit value turns polling on (logged), answers
are unchanged by it, and bad values stop start-up with exit 2.  (Whether it
pays is a GPU benchmark: docs/BENCHMARKS.md; the polling loops themselves
are unit-tested in test_sched.c and test_gw_pool.c.)"""
import subprocess

import numpy as np
import pytest
import requests

from grpc_util import start_worker
from serve_util import Server

TEXTS = [f"sentence number {i} about the weather in city {i % 5}" for i in range(40)]


def vectors(url):
    out = []
    with requests.Session() as s:   # one keep-alive connection, one request at a time: the polled path
        for t in TEXTS:
            r = s.post(url + "/v1/embeddings", json={"input": t, "model": "m"}, timeout=30)
            assert r.status_code == 200, r.text
            out.append(r.json()["data"][0]["embedding"])
    return np.array(out, dtype=np.float32)


def test_serve_auto_is_off_on_the_cpu_and_polling_changes_no_answer(posy_bin, posy_model):
    auto = Server(posy_bin, posy_model, "--device", "cpu")
    try:
        want = vectors(auto.url)
        log = auto.output()
    finally:
        assert auto.stop() == 0
    assert "busy-poll" not in log
    polled = Server(posy_bin, posy_model, "--device", "cpu", env={"POSY_BUSY_POLL_US": "300"})
    try:
        got = vectors(polled.url)
        log = polled.output()
    finally:
        assert polled.stop() == 0
    assert "busy-poll 300 us after each request" in log
    np.testing.assert_array_equal(got, want)


def test_worker_flag():
    w = start_worker(None, "--busy-poll-us", "250")
    try:
        assert w.alive()
    finally:
        w.stop()
    assert "step thread busy-polls 250 us after each batch" in w.text()


@pytest.mark.parametrize("cmd", ["serve", "worker"])
@pytest.mark.parametrize("value", ["x", "-1", "1000001", ""])
def test_bad_values_exit_2(posy_bin, posy_model, cmd, value):
    r = subprocess.run([posy_bin, cmd, "--model", posy_model, "--busy-poll-us", value], capture_output=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert f"posy {cmd}: --busy-poll-us takes 'auto' or microseconds" in r.stderr.decode(), r.stderr
