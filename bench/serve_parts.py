#!/usr/bin/env python3
"""serve_parts: where one query's time goes in `posy serve`, one request at
a time over one keep-alive connection (the latency case: nothing queues).

    python3 bench/serve_parts.py URL [N] [--json]

Sends N (default 500, after 50 unmeasured) one-sentence /v1/embeddings
requests back to back and reads the server's own timing headers on each
answer: x-tokenization-time (parse + tokenize), x-queue-time (submitted ->
picked into a batch by the step thread), x-inference-time (batch formed ->
its result noticed: engine submit, forward, copies, the poll that sees it
done), x-total-time (arrival -> response written), all in ms; "rest" is
total minus the three (hand-offs between the loop, pool and step threads,
JSON out).  The client's round trip (http.client, this process) is printed
beside them: round trip minus total is the kernel's loopback and the
client.  Prints one table of medians and p90s in microseconds (and a JSON
line with --json).  Why: one connection's p50 on the H200 was ~5x the
forward's GPU time (docs/BENCHMARKS.md, "posy serve on the GPU"); this
says which part to work on.
"""
import http.client
import json
import statistics
import sys
import time
from urllib.parse import urlparse

PARTS = ("tokenization", "queue", "inference", "total")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    url = urlparse(args[0])
    n = int(args[1]) if len(args) > 1 else 500
    body = json.dumps({"input": "Sentence number 3 says something about topic 3 in plain English words.",
                       "model": "m"})
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    rows = {p: [] for p in PARTS + ("rest", "round trip")}
    for i in range(n + 50):
        t0 = time.perf_counter()
        conn.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        rtt = (time.perf_counter() - t0) * 1e6
        if r.status != 200:
            sys.exit(f"serve_parts: HTTP {r.status}")
        if i < 50:
            continue
        v = {p: float(r.getheader(f"x-{p}-time", "nan")) * 1e3 for p in PARTS}
        for p in PARTS:
            rows[p].append(v[p])
        rows["rest"].append(v["total"] - v["tokenization"] - v["queue"] - v["inference"])
        rows["round trip"].append(rtt)
    print(f"serve_parts: {n} sequential one-sentence requests, one connection, {url.geturl()}")
    print("| part | p50 µs | p90 µs |")
    print("|---|---|---|")
    for k, xs in rows.items():
        print(f"| {k} | {statistics.median(xs):.1f} | {pct(xs, 0.9):.1f} |")
    if "--json" in sys.argv:
        print(json.dumps({k: {"p50": statistics.median(xs), "p90": pct(xs, 0.9)} for k, xs in rows.items()}))


if __name__ == "__main__":
    main()
