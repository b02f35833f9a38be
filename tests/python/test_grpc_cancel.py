"""Worker-side cancellation: a chunk whose gRPC call is cancelled (client
cancel, or its deadline passes) while it waits in the worker's queue is
dropped by the scheduler, not computed.

The worker runs `--engine noop --noop-delay-us 1000000 --max-batch-seqs 1`:
every batch is one sequence and takes a second, so a first call holds the
engine while later calls wait queued.  The check is on the worker's Info
counters (sequences_run, sequences_dropped, cancelled), not on timing: the
cancelled calls' sequences must show up as dropped and never as run, and
calls that were not cancelled still complete.  The same for the messages
of an EmbedStream the client cancels.
"""
import threading
import time

import grpc
import pytest

from grpc_util import start_worker, stubs, vectors

DELAY_US = 1000000


@pytest.fixture
def worker():
    w = start_worker(None, "--engine", "noop", "--noop-delay-us", str(DELAY_US), "--max-batch-seqs", "1")
    yield w
    assert w.stop() == 0, w.text()


def req(n, rid):
    return stubs()[0].EmbedRequest(request_id=rid, ids=[101, 2000 + rid, 102] * n, lengths=[3] * n)


def info(stub):
    return stub.Info(stubs()[0].InfoRequest(), timeout=10)


def wait_for(pred, stub, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        i = info(stub)
        if pred(i):
            return i
        time.sleep(0.05)
    return info(stub)


def test_cancelled_and_expired_calls_are_dropped(worker):
    with grpc.insecure_channel(worker.addr) as ch:
        stub = stubs()[1].EmbedderStub(ch)
        before = info(stub)
        hold = stub.Embed.future(req(1, 1), timeout=60)       # occupies the engine for a second
        time.sleep(0.2)                                       # the hold call reaches the engine first
        cancelled = stub.Embed.future(req(4, 2), timeout=60)
        expired = stub.Embed.future(req(3, 3), timeout=0.3)
        kept = stub.Embed.future(req(1, 4), timeout=60)
        time.sleep(0.1)                                       # let the calls reach the worker's queue
        assert cancelled.cancel()
        with pytest.raises(grpc.RpcError) as e:
            expired.result()
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert vectors(hold.result()).shape[0] == 1
        assert vectors(kept.result()).shape[0] == 1
        after = wait_for(lambda i: i.sequences_dropped - before.sequences_dropped >= 7, stub)
        assert after.sequences_dropped - before.sequences_dropped == 7, after
        assert after.sequences_run - before.sequences_run == 2, after   # hold + kept only
        assert after.cancelled - before.cancelled == 2, after
        # the worker keeps serving
        assert vectors(stub.Embed(req(2, 5), timeout=30)).shape[0] == 2


def test_cancelled_stream_drops_its_queued_messages(worker):
    """An EmbedStream the client cancels: the messages still queued behind
    the one the engine runs are dropped (sequences_dropped), not run."""
    hold_open = threading.Event()

    def messages():
        yield req(1, 10)              # reaches the engine first
        time.sleep(0.2)
        yield req(4, 11)              # queued behind it
        yield req(3, 12)
        hold_open.wait(30)            # no half-close: the stream stays open until cancelled

    with grpc.insecure_channel(worker.addr) as ch:
        stub = stubs()[1].EmbedderStub(ch)
        before = info(stub)
        call = stub.EmbedStream(messages(), timeout=60)
        time.sleep(0.5)               # all three messages reach the worker; the first runs for a second
        assert call.cancel()
        hold_open.set()
        after = wait_for(lambda i: i.sequences_dropped - before.sequences_dropped >= 7, stub)
        assert after.sequences_dropped - before.sequences_dropped == 7, after
        assert after.sequences_run - before.sequences_run <= 1, after   # only the first, if it started
        # the worker keeps serving, streams included
        got = [r.request_id for r in stub.EmbedStream(iter([req(2, 13)]), timeout=30)]
        assert got == [13]
