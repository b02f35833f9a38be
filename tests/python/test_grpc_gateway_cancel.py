"""Gateway-side cancellation: when an HTTP client disconnects in the middle
of a request, the gateway cancels the request's gRPC calls and the worker
drops the chunks still queued instead of computing them.

One worker runs `--engine noop --noop-delay-us 1000000 --max-batch-seqs 1`
(one sequence per one-second batch); the gateway's `--chunk-tokens 8` makes
each input its own chunk, so a six-input request leaves five chunks queued
while the first runs.  The client closes its socket after sending; the
worker's Info counters must then show dropped sequences, and the engine must
not have run all six.  A later request through the gateway still succeeds.
"""
import json
import socket
import time

from grpc_util import http_post, start_gateway, start_worker, stubs

INPUTS = [f"input number {i}" for i in range(6)]


def info(addr):
    import grpc
    pb, pbg, _, _ = stubs()
    with grpc.insecure_channel(addr) as ch:
        return pbg.EmbedderStub(ch).Info(pb.InfoRequest(), timeout=5)


def test_client_disconnect_cancels_worker_chunks():
    w = start_worker(None, "--engine", "noop", "--noop-delay-us", "1000000", "--max-batch-seqs", "1")
    g = None
    try:
        g = start_gateway([w.addr], "--chunk-tokens", "8")
        before = info(w.addr)
        body = json.dumps({"inputs": INPUTS}).encode()
        s = socket.create_connection(("127.0.0.1", g.port), timeout=10)
        s.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.3)                       # the chunks reach the worker's queue
        s.close()
        end = time.time() + 30
        while time.time() < end:
            i = info(w.addr)
            if i.sequences_run + i.sequences_dropped - before.sequences_run - before.sequences_dropped >= 6:
                break
            time.sleep(0.1)
        dropped = i.sequences_dropped - before.sequences_dropped
        run = i.sequences_run - before.sequences_run
        assert dropped >= 1 and run + dropped == 6, (run, dropped, w.text(), g.text())
        assert run < 6
        status, resp = http_post(g.port, "/embed", {"inputs": ["still served"]})
        assert status == 200, resp
    finally:
        if g:
            assert g.stop() == 0, g.text()
        assert w.stop() == 0, w.text()


def test_chunk_timeout_cancels_worker_chunks():
    """A chunk the gateway stops waiting for (--chunk-timeout-ms) is cancelled
    on its worker through the call deadline: with one-second batches and a
    0.4 s chunk timeout no attempt can be answered in time, the request
    fails, and the worker drops the attempts still queued."""
    w = start_worker(None, "--engine", "noop", "--noop-delay-us", "1000000", "--max-batch-seqs", "1")
    g = None
    try:
        g = start_gateway([w.addr], "--chunk-tokens", "8", "--chunk-timeout-ms", "400")
        before = info(w.addr)
        status, _ = http_post(g.port, "/embed", {"inputs": INPUTS[:3]})
        assert status != 200
        end = time.time() + 30
        while time.time() < end and info(w.addr).sequences_dropped - before.sequences_dropped < 2:
            time.sleep(0.1)
        i = info(w.addr)
        assert i.sequences_dropped - before.sequences_dropped >= 2, (w.text(), g.text())
        assert i.cancelled - before.cancelled >= 3
    finally:
        if g:
            assert g.stop() == 0, g.text()
        assert w.stop() == 0, w.text()
