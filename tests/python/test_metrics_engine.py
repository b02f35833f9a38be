"""The engine's counters in GET /metrics (posy_engine_*), and the whole
exposition read strictly (tests/python/prom_util.py).

On the CPU engine the graph counters exist and stay 0 (it runs no CUDA
graphs); with --engine noop (no engine counters) they are absent.  The GPU
side -- captures > 0 after traffic -- is checked by
tests/cuda/run_serve_gpu.sh on a GPU machine.
"""
import pytest
import requests

from prom_util import parse
from serve_util import Server, post_json

ENGINE = ["posy_engine_graph_captures_total", "posy_engine_graph_capture_seconds_total",
          "posy_engine_first_run_seconds_total",
          "posy_engine_graph_replays_total", "posy_engine_eager_runs_total", "posy_engine_buckets_seen",
          "posy_engine_batches_total", "posy_engine_padded_tokens_total", "posy_engine_device_seconds_total"]


def scrape(srv):
    r = requests.get(srv.url + "/metrics", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return parse(r.text)


def test_cpu_engine_counters_present_and_zero(posy_bin, posy_model):
    srv = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "1", "--tokenization-workers", "1")
    try:
        for body in ({"input": "one sentence"}, {"input": ["a", "b", "c d e f"]}):
            status, js = post_json(srv.url, "/v1/embeddings", body)
            assert status == 200, js
        samples, types = scrape(srv)
        for name in ENGINE:
            assert name in samples, f"{name} missing from /metrics"
            assert samples[name] == 0, f"{name} is {samples[name]} on the CPU engine"
        assert types["posy_engine_graph_captures_total"] == "counter"
        assert types["posy_engine_buckets_seen"] == "gauge"
        assert samples["posy_inputs_total"] == 4      # traffic went through this engine
    finally:
        assert srv.stop() == 0


def test_cpu_warmup_is_a_logged_no_op(posy_bin, posy_model):
    """--warmup warms the GPU's token buckets; on the CPU there are none: the
    server says so, starts, and serves as without it."""
    srv = Server(posy_bin, posy_model, "--device", "cpu", "--threads", "1", "--tokenization-workers", "1",
                 "--warmup")
    try:
        status, js = post_json(srv.url, "/v1/embeddings", {"input": "one sentence"})
        assert status == 200, js
        assert len(js["data"][0]["embedding"]) == 384
        assert "warm-up: nothing to warm on the cpu backend" in srv.output()
    finally:
        assert srv.stop() == 0


def test_noop_engine_has_no_engine_counters(posy_bin, posy_model):
    srv = Server(posy_bin, posy_model, "--engine", "noop", "--tokenization-workers", "1")
    try:
        status, js = post_json(srv.url, "/v1/embeddings", {"input": "x"})
        assert status == 200, js
        samples, _ = scrape(srv)
        assert not [s for s in samples if s.startswith("posy_engine_")]
        assert samples["posy_inputs_total"] == 1
    finally:
        assert srv.stop() == 0


@pytest.mark.parametrize("text, fragment", [
    ("# TYPE a_total counter\na_total 1\n", "no # HELP"),
    ("# HELP a x\n# TYPE a counter\na 1\n", "without _total"),
    ("# HELP a_total x\n# TYPE a_total counter\na_total 1\na_total 2\n", "duplicate"),
    ("# HELP g x\n# TYPE g gauge\ng{l=\"v\" 1\n", "malformed"),
    ("# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
     "cumulative"),
    ("b 1\n", "before its # TYPE"),
])
def test_the_reader_rejects_bad_exposition(text, fragment):
    with pytest.raises(AssertionError, match=fragment):
        parse(text)
