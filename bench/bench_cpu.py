#!/usr/bin/env python3
"""posy CPU against sentence-transformers (torch CPU) and ONNX Runtime.

All three embed the same ~64-token sentences with the same model and the
same number of threads, in the same run, one after another for each batch
size (so that a noisy neighbour hurts all three alike):

  * posy:   build/posy_bench_engine (the engine in-process; tokenization is
            timed inside the loop for the "e2e" column and left out for the
            "engine" column)
  * sentence-transformers: SentenceTransformer.encode (tokenizes inside)
  * ONNX Runtime: the Hugging Face model exported once with torch.onnx.export
            into the cache dir; tokenize (HF tokenizers) + session.run +
            mean pooling + L2 norm in numpy

Prints sentences/s at batch 1, 32 and 256, single-sentence latency (p50),
and the ratios.  This is a measurement script, not a test: it asserts
nothing about speed.

  python3 bench/bench_cpu.py [--threads 2] [--seconds 3] [--repeat 1] [--wait-policy passive]
                             [--posy-ab-env VAR=VALUE]

--posy-ab-env runs posy a second time in each round with VAR=VALUE in its
environment (e.g. POSY_CPU_SMALL_GEMM=0, the OpenBLAS-only engine) and adds
a table of the default build against that variant.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = (
    "time person year way day thing man world life hand part child eye woman place work week case "
    "point government company number group problem fact water room mother area money story month "
    "lot right study book job word business issue side kind head house service friend father power "
    "hour game line end member law car city community name president team minute idea kid body "
    "information back parent face others level office door health art war history party result "
    "change morning reason research girl guy moment air teacher force education embedding vector"
).split()


def copy_default_tokenizer(dst):
    """The default model's tokenizer files (the bert-base-uncased vocabulary), for the random-weight
    models the benches build; scripts/fetch-model.sh puts them in models/all-MiniLM-L6-v2."""
    import shutil
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        src = os.path.join(ROOT, "models", "all-MiniLM-L6-v2", f)
        if os.path.exists(src):
            shutil.copy(src, dst)


def report_round(r, n, unit, route, st, posy, diff, err, prec=0):
    """One timed round of a posy-vs-sentence-transformers bench: both rates, the ratio, the largest difference."""
    print(f"round {r}: sentence-transformers {n / st:,.{prec}f} {unit}/s, posy {route} {n / posy:,.{prec}f} "
          f"{unit}/s, ratio {st / posy:.2f}x; max |{diff} difference| {err:.2e}", flush=True)


def report_median(rows, n, unit, what, prec=0):
    """The median of report_round's (sentence-transformers, posy) seconds over the rounds."""
    st, posy = (float(statistics.median([x[i] for x in rows])) for i in range(2))
    print(f"median of {len(rows)}: sentence-transformers {n / st:,.{prec}f} {unit}/s, posy {n / posy:,.{prec}f} "
          f"{unit}/s, posy / sentence-transformers {st / posy:.2f}x ({what})")


def make_sentences(tokenizer_json, n, target, seed=7):
    """n sentences of `target` tokens (incl. [CLS]/[SEP]) each, give or take a word."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer_json)
    tok.no_padding()
    tok.no_truncation()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = []
        while len(tok.encode(" ".join(words)).ids) < target:
            words.append(rng.choice(WORDS))
        s = " ".join(words)
        out.append(s[0].upper() + s[1:] + ".")
    lens = [len(tok.encode(s).ids) for s in out]
    return out, sum(lens) / len(lens)


# ---- posy -----------------------------------------------------------------

def run_posy(bin_path, model, sent_file, threads, batch, seconds, latency_runs, env_kv=None):
    cmd = [bin_path, "--model", model, "--input", sent_file, "--threads", str(threads),
           "--batches", str(batch), "--seconds", str(seconds), "--latency-runs", str(latency_runs)]
    env = dict(os.environ)
    if env_kv:
        k, v = env_kv.split("=", 1)
        env[k] = v
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return json.loads(r.stdout)


# ---- sentence-transformers --------------------------------------------------

def timed_loop(fn, sentences, batch, seconds):
    """Sentences/s calling fn(list_of_batch) for at least `seconds`."""
    fn(sentences[:batch])                     # warm-up
    done, i, t0 = 0, 0, time.perf_counter()
    while True:
        chunk = [sentences[(i + k) % len(sentences)] for k in range(batch)]
        fn(chunk)
        done += batch
        i = (i + batch) % len(sentences)
        dt = time.perf_counter() - t0
        if dt >= seconds and done >= 2 * batch:
            return done / dt


def latency_ms(fn, sentences, runs):
    fn(sentences[:1])
    ts = []
    for r in range(runs):
        t0 = time.perf_counter()
        fn([sentences[r % len(sentences)]])
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


class STRunner:
    def __init__(self, model, threads):
        import torch
        from sentence_transformers import SentenceTransformer
        torch.set_num_threads(threads)
        self.m = SentenceTransformer(model, device="cpu").float().eval()
        self.max_len = self.m.max_seq_length

    def __call__(self, batch):
        return self.m.encode(batch, batch_size=len(batch), convert_to_numpy=True,
                             show_progress_bar=False)


# ---- ONNX Runtime -----------------------------------------------------------

def export_onnx(model, path):
    import torch
    from transformers import AutoModel

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    m = Wrap(AutoModel.from_pretrained(model).float().eval())
    ids = torch.ones(2, 16, dtype=torch.long)
    axes = {0: "batch", 1: "seq"}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(m, (ids, torch.ones_like(ids), torch.zeros_like(ids)), path,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                        "token_type_ids": axes, "last_hidden_state": axes},
                          opset_version=17, dynamo=False)


class ORTRunner:
    def __init__(self, model, onnx_path, threads, max_len, spin):
        import onnxruntime as ort
        from tokenizers import Tokenizer
        if not os.path.exists(onnx_path):
            print(f"exporting {model} to {onnx_path} ...", file=sys.stderr)
            export_onnx(model, onnx_path)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        self.s = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        self.tok = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
        self.tok.enable_truncation(max_len)
        self.tok.enable_padding()

    def __call__(self, batch):
        import numpy as np
        enc = self.tok.encode_batch(batch)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        h = self.s.run(None, {"input_ids": ids, "attention_mask": mask,
                              "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[:, :, None].astype(np.float32)
        v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


# ---- report -----------------------------------------------------------------

def fmt_table(rows, lat):
    out = ["| batch | posy engine (sent/s) | posy e2e (sent/s) | sentence-transformers (sent/s) "
           "| ONNX Runtime (sent/s) | posy e2e / ST | posy e2e / ORT |",
           "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['batch']} | {r['posy_engine']:.1f} | {r['posy_e2e']:.1f} | {r['st']:.1f} "
                   f"| {r['ort']:.1f} | {r['posy_e2e'] / r['st']:.2f}x | {r['posy_e2e'] / r['ort']:.2f}x |")
    out.append("")
    out.append("| single-sentence latency, p50 | posy (tokenize + step) | posy engine only "
               "| sentence-transformers | ONNX Runtime | ST / posy | ORT / posy |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    out.append(f"| ms | {lat['posy']:.2f} | {lat['posy_engine']:.2f} | {lat['st']:.2f} | {lat['ort']:.2f} "
               f"| {lat['st'] / lat['posy']:.2f}x | {lat['ort'] / lat['posy']:.2f}x |")
    return "\n".join(out)


def fmt_ab(rows, lat, env_kv):
    out = [f"| batch | posy engine (sent/s) | posy engine, {env_kv} | ratio | posy e2e (sent/s) "
           f"| posy e2e, {env_kv} | ratio |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['batch']} | {r['posy_engine']:.1f} | {r['posy_engine_b']:.1f} "
                   f"| {r['posy_engine'] / r['posy_engine_b']:.2f}x | {r['posy_e2e']:.1f} "
                   f"| {r['posy_e2e_b']:.1f} | {r['posy_e2e'] / r['posy_e2e_b']:.2f}x |")
    out.append("")
    out.append(f"| single-sentence p50 (ms) | posy | posy, {env_kv} | ratio (B / default) |")
    out.append("|---|---:|---:|---:|")
    out.append(f"| tokenize + step | {lat['posy']:.2f} | {lat['posy_b']:.2f} | {lat['posy_b'] / lat['posy']:.2f}x |")
    out.append(f"| step only | {lat['posy_engine']:.2f} | {lat['posy_engine_b']:.2f} "
               f"| {lat['posy_engine_b'] / lat['posy_engine']:.2f}x |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description="posy CPU vs sentence-transformers vs ONNX Runtime")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--bench-bin", default=os.path.join(ROOT, "build", "posy_bench_engine"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--seconds", type=float, default=3.0, help="minimum time per measurement")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; the best of each is kept")
    ap.add_argument("--latency-runs", type=int, default=50)
    ap.add_argument("--n-sentences", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/posy-bench"))
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--wait-policy", choices=["passive", "active"], default="passive",
                    help="idle threads sleep (passive) or spin (active), for all three: OpenMP "
                         "(posy, torch) via OMP_WAIT_POLICY, ONNX Runtime via allow_spinning. "
                         "Spinning collapses on a machine shared with other work.")
    ap.add_argument("--posy-ab-env", metavar="VAR=VALUE",
                    help="also run posy with this environment variable in each round and compare")
    args = ap.parse_args()
    # Read by libgomp when it loads: set before torch is imported and for posy's process.
    os.environ["OMP_WAIT_POLICY"] = args.wait_policy.upper()

    os.makedirs(args.cache, exist_ok=True)
    sentences, mean_tok = make_sentences(os.path.join(args.model, "tokenizer.json"),
                                         args.n_sentences, args.tokens)
    sent_file = os.path.join(args.cache, f"sentences_{args.tokens}.txt")
    with open(sent_file, "w") as f:
        f.write("\n".join(sentences) + "\n")

    st = STRunner(args.model, args.threads)
    ort_r = ORTRunner(args.model, os.path.join(args.cache, "minilm", "model.onnx"), args.threads,
                      st.max_len, args.wait_policy == "active")
    # The exported model must compute what sentence-transformers computes.
    import numpy as np
    a, b = st(sentences[:8]), ort_r(sentences[:8])
    cos_ort = float((a * b).sum(1).min())

    batches = [int(x) for x in args.batches.split(",")]
    rows = []
    for bsz in batches:
        best = {"batch": bsz, "posy_engine": 0.0, "posy_e2e": 0.0, "st": 0.0, "ort": 0.0,
                "posy_engine_b": 0.0, "posy_e2e_b": 0.0}
        for _ in range(args.repeat):
            p = run_posy(args.bench_bin, args.model, sent_file, args.threads, bsz, args.seconds, 1)
            t = p["throughput"][0]
            best["posy_engine"] = max(best["posy_engine"], t["engine_sentences_per_s"])
            best["posy_e2e"] = max(best["posy_e2e"], t["e2e_sentences_per_s"])
            if args.posy_ab_env:
                p = run_posy(args.bench_bin, args.model, sent_file, args.threads, bsz, args.seconds,
                             1, args.posy_ab_env)
                t = p["throughput"][0]
                best["posy_engine_b"] = max(best["posy_engine_b"], t["engine_sentences_per_s"])
                best["posy_e2e_b"] = max(best["posy_e2e_b"], t["e2e_sentences_per_s"])
            best["st"] = max(best["st"], timed_loop(st, sentences, bsz, args.seconds))
            best["ort"] = max(best["ort"], timed_loop(ort_r, sentences, bsz, args.seconds))
        rows.append(best)
        print(f"batch {bsz}: {best}", file=sys.stderr)

    p = run_posy(args.bench_bin, args.model, sent_file, args.threads, 1, 0.1, args.latency_runs)
    lat = {"posy": p["latency_ms"]["p50"], "posy_engine": p["latency_ms"]["engine_p50"],
           "st": latency_ms(st, sentences, args.latency_runs),
           "ort": latency_ms(ort_r, sentences, args.latency_runs)}
    if args.posy_ab_env:
        p = run_posy(args.bench_bin, args.model, sent_file, args.threads, 1, 0.1, args.latency_runs,
                     args.posy_ab_env)
        lat["posy_b"], lat["posy_engine_b"] = p["latency_ms"]["p50"], p["latency_ms"]["engine_p50"]

    import onnxruntime
    import sentence_transformers
    import torch
    print(f"model {os.path.basename(args.model)}, {len(sentences)} sentences of {mean_tok:.1f} tokens "
          f"(incl. [CLS]/[SEP]), threads {args.threads}, wait policy {args.wait_policy}, "
          f">= {args.seconds}s per cell, best of "
          f"{args.repeat}; torch {torch.__version__}, sentence-transformers "
          f"{sentence_transformers.__version__}, onnxruntime {onnxruntime.__version__}; "
          f"ORT export vs ST min cosine {cos_ort:.6f}; posy tokenizer alone "
          f"{p['tokenize_sentences_per_s']:.0f} sent/s\n")
    print(fmt_table(rows, lat))
    if args.posy_ab_env:
        print(f"\nposy against posy with {args.posy_ab_env} (same rounds):\n")
        print(fmt_ab(rows, lat, args.posy_ab_env))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "latency_ms": lat, "threads": args.threads,
                       "mean_tokens": mean_tok}, f, indent=1)


if __name__ == "__main__":
    main()
