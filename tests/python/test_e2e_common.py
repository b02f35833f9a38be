"""The GPU end-to-end scripts' output check (tests/cuda/e2e_common.py) on
files made here: it runs on the H200 only inside those scripts, so its
pass/fail logic is pinned down where CI can run it."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
from e2e_common import check_outputs, cosines  # noqa: E402


def test_cosines_are_row_wise():
    a = np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32)
    b = np.array([[2.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    assert np.allclose(cosines(a, b), [1.0, 0.0])


def test_check_outputs_passes_close_files_and_fails_the_rest(tmp_path):
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((5, 8)).astype(np.float32)
    seqs = [[1] * n for n in (1, 3, 5, 7, 9)]
    prefix = str(tmp_path / "m")
    (ref + 1e-4 * rng.standard_normal(ref.shape).astype(np.float32)).tofile(prefix + ".good.bin")
    bad = ref.copy()
    bad[3] = -bad[3]
    bad.tofile(prefix + ".bad.bin")
    ref[:4].tofile(prefix + ".short.bin")
    lines = []
    assert check_outputs("m", prefix, ("good",), 8, ref, seqs, log=lines.append)
    assert "m good      vs transformers fp32: min cosine 1.000000" in lines[0]
    lines.clear()
    assert not check_outputs("m", prefix, ("good", "bad"), 8, ref, seqs, log=lines.append)
    assert "min cosine -1.000000 (len 7)" in lines[1]   # the worst row's sequence length
    assert not check_outputs("m", prefix, ("missing",), 8, ref, seqs, log=lines.append)
    assert lines[-1] == "m missing: missing output"
    assert not check_outputs("m", prefix, ("short",), 8, ref, seqs, log=lines.append)
    assert lines[-1] == "m short: 32 values, expected 40"
    # the bar is a parameter: 3% noise passes 0.99 and fails 0.99999
    (ref + 0.03 * rng.standard_normal(ref.shape).astype(np.float32)).tofile(prefix + ".noisy.bin")
    assert check_outputs("m", prefix, ("noisy",), 8, ref, seqs, bar=0.99, log=lines.append)
    assert not check_outputs("m", prefix, ("noisy",), 8, ref, seqs, bar=0.99999, log=lines.append)
