"""Python side of tests/cuda/run_serve_gpu.sh (posy serve on a GPU machine).

  serve_gpu.py make    BUNDLE WORK NAME...  random-weight model folders WORK/NAME
  serve_gpu.py check   URL DIR [--device cuda|cpu]
                                            /v1/embeddings vs transformers
  serve_gpu.py metrics FILE cuda|cpu        read a /metrics scrape strictly,
                                            print posy_engine_*, check captures
  serve_gpu.py api     API_EMBED DIR WORK DEVICE [--ld PATH]
                                            public-API path: api_embed DEVICE
                                            vs api_embed cpu vs transformers

`make` builds a BertModel from the carried all-MiniLM-L6-v2 config.json
(NAME minilm-l6), or that config with BERT-base sizes (NAME bert-base: hidden
768, 12 layers, 12 heads, intermediate 3072, same vocabulary and tokenizer),
sets its weights with e2e_vs_transformers.randomize (numpy-seeded, the same on
every machine), saves it as safetensors and copies in the carried tokenizer
and sentence-transformers files, so posy serves it like the real model.
The reference embedding follows those files: the pooling mode of
1_Pooling/config.json, L2-normalised when modules.json has a Normalize.
Every check prints its numbers and exits 1 when they miss the bar.
"""
import json, os, shutil, subprocess, sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
from e2e_common import cosines  # noqa: E402

BERT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
CARRIED = ["tokenizer.json", "tokenizer_config.json", "modules.json", "sentence_bert_config.json",
           "config_sentence_transformers.json", "1_Pooling/config.json"]
MIN_COS = 0.999
TEXTS = ["The quick brown fox jumps over the lazy dog near the river bank.", "hello", "A",
         "Embeddings turn text into vectors for search, clustering and deduplication.",
         "Ça va? Привет 你好 🙂 -- unicode, accents and emoji in one line.",
         " ".join(["a much longer input sentence with many words"] * 10),
         "def f(x): return x * 2  # code", "1234567890 3.14159 2026-11-29"]


def make(bundle, name, out):
    from transformers import BertConfig, BertModel
    import e2e_vs_transformers as E
    src = os.path.join(bundle, "model")
    cfg = BertConfig.from_pretrained(src)
    if name == "bert-base":
        for k, v in BERT_BASE.items():
            setattr(cfg, k, v)
    elif name != "minilm-l6":
        sys.exit(f"serve_gpu make: unknown model {name} (minilm-l6 or bert-base)")
    m = E.randomize(BertModel(cfg, add_pooling_layer=False).eval())
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    m.save_pretrained(out, safe_serialization=True)
    for f in CARRIED:
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), os.path.join(out, f))
    pool = json.load(open(os.path.join(out, "1_Pooling/config.json")))
    pool["word_embedding_dimension"] = cfg.hidden_size
    json.dump(pool, open(os.path.join(out, "1_Pooling/config.json"), "w"))
    print(f"serve_gpu make: {name}: hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers, "
          f"{sum(p.numel() for p in m.parameters()) / 1e6:.1f}M parameters -> {out}")


class Reference:
    """transformers fp32 on the same folder, pooled as its sentence-transformers files say."""

    def __init__(self, model_dir, device=None):
        import torch
        from tokenizers import Tokenizer
        from transformers import BertModel
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.torch = torch
        self.dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.m = BertModel.from_pretrained(model_dir, attn_implementation="eager",
                                           add_pooling_layer=False).eval().to(self.dev)
        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tok.no_padding()   # all-MiniLM's tokenizer.json pads to 128; posy never pads
        pool = json.load(open(os.path.join(model_dir, "1_Pooling/config.json")))
        self.cls = bool(pool.get("pooling_mode_cls_token"))
        mods = json.load(open(os.path.join(model_dir, "modules.json")))
        self.normalize = any("Normalize" in m.get("type", "") for m in mods)

    def embed_ids(self, ids):
        t = self.torch
        with t.no_grad():
            x = t.tensor(np.asarray(ids, dtype=np.int64))[None].to(self.dev)
            h = self.m(input_ids=x, token_type_ids=t.zeros_like(x)).last_hidden_state[0]
            v = h[0] if self.cls else h.mean(0)
            if self.normalize:
                v = t.nn.functional.normalize(v, dim=0)
        return v.float().cpu().numpy()

    def embed_text(self, s):
        return self.embed_ids(self.tok.encode(s).ids)


def check(url, model_dir, device):
    import requests
    ref = Reference(model_dir, device)
    got = []
    for t in TEXTS:   # one input per request, then all of them in one request
        r = requests.post(url + "/v1/embeddings", json={"input": t, "model": "m"}, timeout=60)
        r.raise_for_status()
        got.append(r.json()["data"][0]["embedding"])
    r = requests.post(url + "/v1/embeddings", json={"input": TEXTS, "model": "m"}, timeout=60)
    r.raise_for_status()
    data = sorted(r.json()["data"], key=lambda d: d["index"])
    got += [d["embedding"] for d in data]
    got = np.array(got, dtype=np.float32)
    want = np.stack([ref.embed_text(t) for t in TEXTS] * 2)
    c = cosines(got, want)
    ntok = [len(ref.tok.encode(t).ids) for t in TEXTS]
    print(f"serve_gpu check: {len(c)} embeddings ({len(TEXTS)} single requests + one batch of {len(TEXTS)}; "
          f"{min(ntok)}..{max(ntok)} tokens) vs transformers fp32 on {ref.dev}: min cosine {c.min():.6f}, "
          f"mean {c.mean():.6f}, max abs err {np.abs(got - want).max():.2e}")
    return c.min() >= MIN_COS


def metrics(path, device):
    from prom_util import parse
    samples, _ = parse(open(path).read())
    for k, v in samples.items():
        if k.startswith("posy_engine_"):
            print(f"  {k} {v:g}")
    caps = samples.get("posy_engine_graph_captures_total")
    if caps is None:
        print("serve_gpu metrics: posy_engine_graph_captures_total missing")
        return False
    g = {k[len("posy_engine_"):]: v for k, v in samples.items() if k.startswith("posy_engine_")}
    replays, eager, buckets, batches = (g["graph_replays_total"], g["eager_runs_total"], g["buckets_seen"],
                                        g["batches_total"])
    if device == "cuda":
        # The backend's rules: a bucket's first batch runs eagerly, its second is
        # captured, later ones replay; every batch was finished by scrape time.
        rules = [("captures > 0", caps > 0), ("replays > 0", replays > 0),
                 ("eager runs == buckets seen", eager == buckets),
                 ("captures <= buckets seen", caps <= buckets),
                 ("eager runs + replays == batches", eager + replays == batches),
                 ("padded tokens >= posy_tokens_total", g["padded_tokens_total"] >= samples["posy_tokens_total"])]
        print(f"serve_gpu metrics: {batches:g} batches, {g['device_seconds_total'] * 1e3 / max(batches, 1):.3f} ms "
              f"GPU per batch, padding {g['padded_tokens_total'] / max(samples['posy_tokens_total'], 1):.3f}x, "
              f"{buckets:g} buckets seen")
    else:
        nonzero = [k for k, v in sorted(g.items()) if v != 0]
        rules = [("every posy_engine_* is 0 on the CPU" + (f" ({', '.join(nonzero)} not)" if nonzero else ""),
                  not nonzero)]
    broken = [r for r, holds in rules if not holds]
    print(f"serve_gpu metrics: exposition well formed; {caps:g} graph captures, {replays:g} replays, "
          f"{g['graph_capture_seconds_total'] * 1e3:.2f} ms capturing; "
          + ("all of: " + ", ".join(r for r, _ in rules) if not broken else "BROKEN: " + ", ".join(broken)))
    return not broken


def api(api_embed, model_dir, work, device, ld):
    import e2e_vs_transformers as E
    hidden = json.load(open(os.path.join(model_dir, "config.json")))["hidden_size"]
    vocab = json.load(open(os.path.join(model_dir, "config.json")))["vocab_size"]
    seqs = E.sequences(vocab)
    os.makedirs(work, exist_ok=True)
    sp = os.path.join(work, "seqs.bin")
    E.write_seqs(sp, seqs)
    env = dict(os.environ)
    if ld:
        env["LD_LIBRARY_PATH"] = ld
    outs = {}
    for dev in dict.fromkeys([device, "cpu"]):
        o = os.path.join(work, f"api-{dev}.bin")
        r = subprocess.run([api_embed, model_dir, sp, o, dev, "4096"], env=env)
        if r.returncode:
            print(f"serve_gpu api: api_embed {dev} failed (exit {r.returncode})")
            return False
        outs[dev] = np.fromfile(o, dtype=np.float32).reshape(-1, hidden)
    ref = Reference(model_dir)
    want = np.stack([ref.embed_ids(s) for s in seqs])
    ok = True
    pairs = [("api_embed cpu vs transformers fp32", outs["cpu"], want)]
    if device != "cpu":
        pairs = [(f"api_embed {device} vs api_embed cpu", outs[device], outs["cpu"]),
                 (f"api_embed {device} vs transformers fp32", outs[device], want)] + pairs
    for name, a, b in pairs:
        c = cosines(a, b)
        w = int(np.argmin(c))
        print(f"serve_gpu api: {name}: {len(c)} sequences of 1..512 tokens, min cosine {c.min():.6f} "
              f"(len {len(seqs[w])}), mean {c.mean():.6f}")
        ok &= bool(c.min() >= MIN_COS)
    return ok


def main():
    a = sys.argv[1:]
    if a[:1] == ["make"] and len(a) >= 4:
        for name in a[3:]:   # one process: torch is imported once
            make(a[1], name, os.path.join(a[2], name))
        return 0
    if a[:1] == ["check"] and len(a) >= 3:
        dev = a[a.index("--device") + 1] if "--device" in a else None
        return 0 if check(a[1], a[2], dev) else 1
    if a[:1] == ["metrics"] and len(a) == 3:
        return 0 if metrics(a[1], a[2]) else 1
    if a[:1] == ["api"] and len(a) >= 5:
        ld = a[a.index("--ld") + 1] if "--ld" in a else ""
        return 0 if api(a[1], a[2], a[3], a[4], ld) else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
