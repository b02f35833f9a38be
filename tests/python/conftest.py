"""Shared fixtures for posy's end-to-end tests.

The tests drive the real `posy` binary on the real default model.  Both are
found through environment variables, with defaults relative to the repo:

    POSY_BIN    the posy binary        (default: build/posy)
    POSY_MODEL  the model directory    (default: models/all-MiniLM-L6-v2)

A missing binary or model is a test failure with a message saying how to
get it, never a skip: a CI run that silently skips proves nothing.
"""
import json
import os
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def _path_from_env(var, default):
    p = os.environ.get(var) or os.path.join(ROOT, default)
    return os.path.abspath(p)


@pytest.fixture(scope="session")
def posy_bin():
    p = _path_from_env("POSY_BIN", "build/posy")
    if not (os.path.isfile(p) and os.access(p, os.X_OK)):
        pytest.fail(f"posy binary not found at {p}: build it (scripts/dev.sh test) or set POSY_BIN",
                    pytrace=False)
    return p


@pytest.fixture(scope="session")
def posy_model():
    p = _path_from_env("POSY_MODEL", "models/all-MiniLM-L6-v2")
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        if not os.path.isfile(os.path.join(p, f)):
            pytest.fail(f"model file {os.path.join(p, f)} not found: run scripts/fetch-model.sh "
                        f"or set POSY_MODEL", pytrace=False)
    return p


class Posy:
    """Runs `posy embed` and parses its output."""

    def __init__(self, binary, model):
        self.binary = binary
        self.model = model

    def run(self, *args, input=None, timeout=600):
        """Run `posy <args>`; `input` is bytes or str for stdin."""
        if isinstance(input, str):
            input = input.encode("utf-8")
        return subprocess.run([self.binary, *args], input=input, capture_output=True,
                              timeout=timeout)

    def embed(self, *args, input=None, model=None, device="cpu"):
        """`posy embed --model M --device cpu <args>`; asserts success."""
        r = self.run("embed", "--model", model or self.model, "--device", device, *args,
                     input=input)
        assert r.returncode == 0, (f"posy embed {' '.join(args)} exited {r.returncode}:\n"
                                   f"{r.stderr.decode(errors='replace')}")
        return r

    def embed_jsonl(self, *args, input=None, **kw):
        """Vectors printed as JSON lines on stdout, as a float32 [n, dim] array."""
        r = self.embed(*args, input=input, **kw)
        rows = [json.loads(line) for line in r.stdout.decode("utf-8").splitlines()]
        return np.array(rows, dtype=np.float32).reshape(len(rows), -1)


@pytest.fixture(scope="session")
def posy(posy_bin, posy_model):
    return Posy(posy_bin, posy_model)


def assert_signal_free(r):
    """A negative return code means the process died of a signal (a crash)."""
    assert r.returncode >= 0, f"posy died of signal {-r.returncode}:\n{r.stderr.decode(errors='replace')}"
