"""Runs the tokenizer's libFuzzer target (tests/fuzz/fuzz_tok.c) for a
bounded time: tokenizer.json loading and encoding/decoding of arbitrary
bytes under ASan+UBSan with leak detection.  Skipped when clang is absent."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang (libFuzzer) not installed")
def test_tokenizer_fuzz_bounded():
    secs = os.environ.get("POSY_TOK_FUZZ_SECONDS", "20")
    p = subprocess.run([os.path.join(ROOT, "tests", "fuzz", "run_tok_fuzz.sh"), secs], cwd=ROOT,
                       capture_output=True, timeout=900)
    out = (p.stdout + p.stderr).decode(errors="replace")
    print(out[-3000:])
    assert p.returncode == 0, out[-3000:]
    assert "no crash" in out
