"""The CPU fallback on a machine WITH a GPU, and the small decoder fixtures
on the GPU itself: each case says what `--device cuda` must do (run, and
match transformers at the GPU bar, cosine >= 0.999; or be refused with a
message naming why) and `--device auto` then (the GPU's vectors, or a
warning "the GPU backend cannot run this model (...); using the CPU" and
the CPU engine's vectors at the CPU bar, 0.99999).  References:
tests/fixtures/decoders/reference.json (transformers fp32).

  gemma3        Gemma 3 (head size 32, windows that bind): runs on the GPU
  modernbert    head size 16, which no GPU attention kernel takes: refused
                ("head_dim 16"), auto falls back
  gemma3 with POSY_CUDA_QWEN3=0 (the decoders' GPU off switch): refused,
                auto falls back
  t5            T5's encoder, which has no GPU path: refused, auto falls
                back
  static        a sentence-transformers StaticEmbedding model
                (tests/fixtures/static/st6): --device cuda refused ("runs on
                the CPU only"), auto runs it on the CPU without trying the
                GPU; its vectors (the ids sentence-transformers gave) must
                match sentence-transformers' at the CPU bar

Why: on a GPU machine `posy serve` picks the GPU by default, so a model the
GPU path cannot take must still serve, on the CPU, rather than fail or
return wrong vectors; CI has no GPU, so this is where the fallback itself
is exercised.

usage: e2e_cpu_fallback.py BUILD_DIR WORK_DIR    (BUILD_DIR holds api_embed)
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import write_seqs  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "decoders")
# (model, extra environment, what --device cuda must print when refused, or None: it runs)
CASES = [("gemma3", {}, None),
         ("modernbert", {}, "head_dim 16 unsupported"),
         ("gemma3", {"POSY_CUDA_QWEN3": "0"}, "POSY_CUDA_QWEN3=0"),
         ("t5", {}, "t5 encoders run on the CPU engine only")]


def cosines(got, want):
    """Row cosines; a zero row against a zero row (a static model's empty text) is 1, against any other 0
    -- never NaN, which would pass every `< bar` check."""
    ng, nw = np.linalg.norm(got, axis=1), np.linalg.norm(want, axis=1)
    both = (ng == 0) & (nw == 0)
    cos = (got * want).sum(1) / np.where(ng * nw > 0, ng * nw, 1.0)
    return np.where(both, 1.0, cos)


def cpu_only_case(api, work, label, model, ids, want, marker):
    """A model that runs on the CPU only: --device cuda refused ("runs on the CPU only"), auto runs it on the
    CPU without trying the GPU (its start-up line holds `marker` and "on cpu"), vectors at the CPU bar
    against `want`.  Returns the number of failures."""
    sb, out = os.path.join(work, label + "-seqs.bin"), os.path.join(work, label + ".bin")
    write_seqs(sb, ids)
    r = subprocess.run([api, model, sb, out, "cuda"], capture_output=True, text=True, timeout=300)
    msg = (r.stdout + r.stderr).strip().splitlines()
    ok = r.returncode != 0 and any("runs on the CPU only" in line for line in msg)
    print("%s --device cuda: rc %d, %s: %s" % (label, r.returncode, "refused as expected" if ok else "UNEXPECTED",
                                               msg[-1] if msg else ""))
    failed = not ok
    r = subprocess.run([api, model, sb, out, "auto"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print("%s --device auto: FAILED rc %d: %s" % (label, r.returncode, r.stderr.strip()[-400:]))
        return failed + 1
    got = np.fromfile(out, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)
    cos = cosines(got, np.asarray(want, dtype=np.float64))
    on_cpu = any(marker in line and "on cpu" in line for line in r.stderr.splitlines())
    tried_gpu = any("cuda backend" in line for line in r.stderr.splitlines())
    print("%s --device auto: on the CPU: %s, GPU tried: %s; min cosine vs sentence-transformers %.7f" %
          (label, "yes" if on_cpu else "no", "yes" if tried_gpu else "no", cos.min()))
    return failed + (not on_cpu or tried_gpu or cos.min() < 0.99999)


def static_case(api, work):
    model = os.path.join(ROOT, "..", "static", "st6")
    exp = json.load(open(os.path.join(model, "expected.json")))
    return cpu_only_case(api, work, "static", model, exp["ids"], exp["embeddings"], "static embedding model")


def main():
    build, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    ref = json.load(open(os.path.join(ROOT, "reference.json")))
    seqs = ref["sequences"]
    sb = os.path.join(work, "seqs.bin")
    write_seqs(sb, seqs)
    api = os.path.join(build, "api_embed")
    failed = static_case(api, work)
    for name, extra, refusal in CASES:
        label = name + "".join(" %s=%s" % kv for kv in extra.items())
        env = dict(os.environ, **extra)
        model = os.path.join(ROOT, name)
        out = os.path.join(work, name + ".bin")
        want = np.asarray(ref["models"][name]["bidirectional"], dtype=np.float64)
        r = subprocess.run([api, model, sb, out, "cuda"], capture_output=True, text=True, timeout=300, env=env)
        msg = (r.stdout + r.stderr).strip().splitlines()
        if refusal is None:
            if r.returncode != 0:
                print("%s --device cuda: FAILED rc %d: %s" % (label, r.returncode, msg[-1] if msg else ""))
                failed += 1
            else:
                cos = cosines(np.fromfile(out, dtype=np.float32).reshape(len(seqs), -1).astype(np.float64), want)
                print("%s --device cuda: ran on the GPU; min cosine vs transformers %.6f" % (label, cos.min()))
                failed += cos.min() < 0.999
        else:
            ok = r.returncode != 0 and any(refusal in line for line in msg)
            print("%s --device cuda: rc %d, %s: %s" % (label, r.returncode,
                                                        "refused as expected" if ok else "UNEXPECTED",
                                                        msg[-1] if msg else ""))
            failed += not ok
        r = subprocess.run([api, model, sb, out, "auto"], capture_output=True, text=True, timeout=300, env=env)
        if r.returncode != 0:
            print("%s --device auto: FAILED rc %d: %s" % (label, r.returncode, r.stderr.strip()[-400:]))
            failed += 1
            continue
        cos = cosines(np.fromfile(out, dtype=np.float32).reshape(len(seqs), -1).astype(np.float64), want)
        fell_back = any("cannot run this model" in line and "using the CPU" in line for line in r.stderr.splitlines())
        bar = 0.999 if refusal is None else 0.99999
        print("%s --device auto: fell back to the CPU: %s (expected %s); min cosine vs transformers %.7f (bar %g)" %
              (label, "yes" if fell_back else "no", "no" if refusal is None else "yes", cos.min(), bar))
        failed += cos.min() < bar or fell_back != (refusal is not None)
    print("e2e_cpu_fallback: %s" % ("PASS" if not failed else "FAIL (%d)" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
