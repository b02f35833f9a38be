"""What the GPU end-to-end scripts (e2e_vs_transformers.py, e2e_qwen3.py)
share: the row-wise cosine, and the check of gpu_backend_e2e's output
files against the transformers reference -- one line per file, in the
format the run scripts grep ("<label> <suffix> vs transformers fp32: min
cosine ..."), and whether every file meets the bar.  No torch import, so it
can be tested anywhere."""
import os

import numpy as np


def cosines(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-30)


def check_outputs(label, prefix, suffixes, hidden, ref, seqs, bar=0.999, log=print):
    """Compare <prefix>.<suffix>.bin (float32 [n, hidden]) with ref for each
    suffix; a missing or short file fails.  Returns True when all pass."""
    ok = True
    for suf in suffixes:
        p = f"{prefix}.{suf}.bin"
        if not os.path.exists(p):
            log(f"{label} {suf}: missing output")
            ok = False
            continue
        got = np.fromfile(p, dtype=np.float32)
        if got.size != ref.size:
            log(f"{label} {suf}: {got.size} values, expected {ref.size}")
            ok = False
            continue
        got = got.reshape(-1, hidden)
        c = cosines(got, ref)
        worst = int(np.argmin(c))
        log(f"{label} {suf:9s} vs transformers fp32: min cosine {c.min():.6f} (len {len(seqs[worst])}), "
            f"mean {c.mean():.6f}, max abs err {np.abs(got - ref).max():.2e}")
        ok &= bool(c.min() >= bar)
    return ok
