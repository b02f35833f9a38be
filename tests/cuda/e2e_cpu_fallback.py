"""The models the CUDA backend does not run (gemma3_text, modernbert), on a
machine WITH a GPU: `--device cuda` must fail with a message naming the
model type and the way out, and `--device auto` must fall back to the CPU
engine and give transformers' vectors (tests/fixtures/decoders/reference.json,
cosine >= 0.99999, the CPU bar).

Why: on a GPU machine `posy serve` picks the GPU by default, so a model
whose GPU path is not written must still serve, on the CPU, rather than
fail or return wrong vectors; CI has no GPU, so this is where the fallback
itself is exercised.

usage: e2e_cpu_fallback.py BUILD_DIR WORK_DIR    (BUILD_DIR holds api_embed)
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "decoders")
MODELS = ["gemma3", "modernbert"]


def main():
    build, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ref = json.load(open(os.path.join(ROOT, "reference.json")))
    seqs = ref["sequences"]
    sb = os.path.join(work, "seqs.bin")
    with open(sb, "wb") as f:
        f.write(struct.pack("<i", len(seqs)))
        f.write(struct.pack("<%di" % len(seqs), *[len(s) for s in seqs]))
        for s in seqs:
            f.write(struct.pack("<%di" % len(s), *s))
    api = os.path.join(build, "api_embed")
    failed = 0
    for name in MODELS:
        model = os.path.join(ROOT, name)
        out = os.path.join(work, name + ".bin")
        r = subprocess.run([api, model, sb, out, "cuda"], capture_output=True, text=True, timeout=120)
        msg = (r.stdout + r.stderr).strip().splitlines()
        ok = r.returncode != 0 and any("CPU engine only" in line for line in msg)
        print("%s --device cuda: rc %d, %s: %s" % (name, r.returncode, "refused as expected" if ok else "UNEXPECTED",
                                                   msg[-1] if msg else ""))
        failed += not ok
        r = subprocess.run([api, model, sb, out, "auto"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print("%s --device auto: FAILED rc %d: %s" % (name, r.returncode, r.stderr.strip()[-400:]))
            failed += 1
            continue
        got = np.fromfile(out, dtype=np.float32).reshape(len(seqs), -1).astype(np.float64)
        want = np.asarray(ref["models"][name]["bidirectional"], dtype=np.float64)
        cos = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
        fell_back = any("cannot run this model" in line and "using the CPU" in line for line in r.stderr.splitlines())
        print("%s --device auto: fell back to the CPU: %s; min cosine vs transformers %.7f" %
              (name, "yes" if fell_back else "NO", cos.min()))
        failed += cos.min() < 0.99999 or not fell_back
    print("e2e_cpu_fallback: %s" % ("PASS" if not failed else "FAIL (%d)" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
