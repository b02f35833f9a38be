"""End-to-end check of sentence-transformers Dense modules on posy's engine
(any device; the GPU is what it is for), against transformers + torch.

The random-weight all-MiniLM-L6 configuration of e2e_vs_transformers.py
(its Hugging Face folder) gets the Dense modules of
tests/fixtures/dense/{a,b} (a: 384 -> 96 Tanh -> 48 Identity, Normalize;
b: 384 -> 64 GELU -> 40 ReLU -> 24 Sigmoid, not normalised).  The reference
is transformers' BertModel fp32 (mean pooling), then each Dense layer in
torch with the module's own weights and activation, then the L2
normalisation when the model has it.  tests/cuda/api_embed embeds the 68
sequences of 1..512 tokens alone (budget 1) and packed (4096) through the
public API, which runs the Dense modules in the engine front after the
backend's pooling.  Bar: min cosine >= 0.999 on the GPU (bf16), 0.99999 on
the CPU; for b (unnormalised) also max |diff| <= 2% of max |ref| on the GPU.

usage: e2e_dense.py BUILD_DIR WORK_DIR [--device cpu]
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import cosines  # noqa: E402
from e2e_vs_transformers import CONFIGS, build, sequences, write_seqs  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "dense")
ACTS = {"torch.nn.modules.activation.Tanh": torch.tanh, "torch.nn.modules.linear.Identity": lambda x: x,
        "torch.nn.modules.activation.GELU": torch.nn.functional.gelu, "torch.nn.modules.activation.ReLU": torch.relu,
        "torch.nn.modules.activation.Sigmoid": torch.sigmoid}


def model_dir(hf, root, name):
    d = os.path.join(root, "dense-" + name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(hf):
        if f != "modules.json" and not os.path.exists(os.path.join(d, f)):
            os.symlink(os.path.abspath(os.path.join(hf, f)), os.path.join(d, f))
    src = os.path.join(FIX, name)
    for f in os.listdir(src):
        if not os.path.exists(os.path.join(d, f)):
            os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(d, f))
    mods = json.load(open(os.path.join(src, "modules.json")))
    layers = []
    for m in mods:
        if m["type"].endswith("Dense"):
            c = json.load(open(os.path.join(src, m["path"], "config.json")))
            w = load_file(os.path.join(src, m["path"], "model.safetensors"))
            layers.append((w["linear.weight"].double(), w.get("linear.bias"), ACTS[c["activation_function"]]))
    normalize = any(m["type"].endswith("Normalize") for m in mods)
    return d, layers, normalize


@torch.no_grad()
def reference(m, seqs, layers, normalize):
    out = []
    for s in seqs:
        ids = torch.from_numpy(s.astype(np.int64))[None]
        v = m(input_ids=ids, token_type_ids=torch.zeros_like(ids)).last_hidden_state[0].double().mean(0)
        for w, b, act in layers:
            v = act(w @ v + (b.double() if b is not None else 0))
        out.append((v / v.norm() if normalize else v).numpy())
    return np.stack(out)


def main():
    args = sys.argv[1:]
    device = "cuda"
    if "--device" in args:
        i = args.index("--device")
        device = args[i + 1]
        del args[i:i + 2]
    build_dir, root = args[0], args[1]
    os.makedirs(root, exist_ok=True)
    kw = CONFIGS["minilm-l6"]
    m, hf, _ = build("minilm-l6", kw, root)
    m = m.double().eval()
    seqs = sequences(kw["vocab_size"])
    sp = os.path.join(root, "dense-seqs.bin")
    write_seqs(sp, seqs)
    bar = 0.99999 if device == "cpu" else 0.999
    ok = True
    for name in ("a", "b"):
        d, layers, normalize = model_dir(hf, root, name)
        ref = reference(m, seqs, layers, normalize)
        dim = ref.shape[1]
        for label, budget in (("single", "1"), ("mix4096", "4096")):
            o = os.path.join(root, f"dense-{name}-{label}.bin")
            r = subprocess.run([os.path.join(build_dir, "api_embed"), d, sp, o, device, budget])
            if r.returncode:
                print(f"dense-{name} {label}: api_embed failed (exit {r.returncode})", flush=True)
                ok = False
                continue
            got = np.fromfile(o, dtype=np.float32).reshape(-1, dim)
            c = cosines(got, ref)
            diff = float(np.abs(got - ref).max() / np.abs(ref).max())
            good = c.min() >= bar and (normalize or diff <= (1e-4 if device == "cpu" else 0.02))
            print(f"dense-{name} {label} ({device}, {dim} dims) vs transformers + torch Dense: min cosine "
                  f"{c.min():.6f}, max |diff| / max |ref| {diff:.2e}{'' if good else '  FAIL'}", flush=True)
            ok &= bool(good)
    print("e2e_dense:", "PASS" if ok else "FAIL", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
