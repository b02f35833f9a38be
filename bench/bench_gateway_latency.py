#!/usr/bin/env python3
"""Gateway added latency: one-sentence requests, one at a time, sent
(a) straight to a worker over gRPC (ids tokenized beforehand, outside the
timing) and (b) to the gateway over HTTP/JSON (which parses, tokenizes,
calls the same worker and serializes).  p50/p99 of each and the difference
of medians = what the gateway adds per request.  Both clients are Python
(grpcio, http.client with keep-alive), so each side carries a similar
client cost; the difference is the gateway's.

  bench_gateway_latency.py --gateway HOST:PORT --worker HOST:PORT [-n 300]
"""
import argparse
import http.client
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from grpc_util import embed_request, stubs, tokenizer  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog near the river bank."


def pct(xs):
    a = np.array(xs) * 1e3
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("-n", type=int, default=300)
    a = ap.parse_args()
    import grpc
    pb, pbg, _, _ = stubs()
    req = embed_request(tokenizer(), [TEXT])
    direct = []
    with grpc.insecure_channel(a.worker) as ch:
        stub = pbg.EmbedderStub(ch)
        for i in range(a.n + 20):
            t = time.perf_counter()
            stub.Embed(req, timeout=30)
            if i >= 20:
                direct.append(time.perf_counter() - t)
    host, port = a.gateway.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = json.dumps({"input": TEXT, "model": "m"})
    via = []
    for i in range(a.n + 20):
        t = time.perf_counter()
        conn.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
        if i >= 20:
            via.append(time.perf_counter() - t)
    d50, d99 = pct(direct)
    g50, g99 = pct(via)
    print(f"Sequential one-sentence latency, {a.n} requests each (ms):\n")
    print("| path | p50 ms | p99 ms |")
    print("|---|---|---|")
    print(f"| worker direct (gRPC Embed, pre-tokenized) | {d50:.3f} | {d99:.3f} |")
    print(f"| through the gateway (HTTP JSON -> tokenize -> gRPC) | {g50:.3f} | {g99:.3f} |")
    print(f"| gateway added (difference of medians) | {g50 - d50:.3f} | |")


if __name__ == "__main__":
    main()
