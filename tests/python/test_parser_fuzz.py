"""Runs the libFuzzer targets of the parsers that read outside input
(tests/fuzz/run_fuzz.sh: gw_parse = HTTP request bodies, rpc = gRPC
messages, config = model-directory JSON files) for a bounded time each,
under ASan+UBSan with leak detection, all three at once to keep CI short.
Skipped when clang is absent.  POSY_PARSER_FUZZ_SECONDS sets the time per
fuzzer (default 12)."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ["gw_parse", "rpc", "config"]


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang (libFuzzer) not installed")
def test_parser_fuzz_bounded(tmp_path):
    secs = os.environ.get("POSY_PARSER_FUZZ_SECONDS", "12")
    script = os.path.join(ROOT, "tests", "fuzz", "run_fuzz.sh")
    procs = {}
    for t in TARGETS:
        env = dict(os.environ, FUZZ_DIR=str(tmp_path / t))
        procs[t] = subprocess.Popen([script, t, secs], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
    failed = []
    for t, p in procs.items():
        out = p.communicate(timeout=900)[0].decode(errors="replace")
        print("== fuzz_%s\n%s" % (t, out[-1500:]))
        # libFuzzer ends a clean run with "Done N runs in S second(s)"
        if p.returncode != 0 or "Done " not in out:
            failed.append("fuzz_%s (exit %d, inputs left in %s):\n%s" % (t, p.returncode, tmp_path / t, out[-3000:]))
    assert not failed, "\n\n".join(failed)
