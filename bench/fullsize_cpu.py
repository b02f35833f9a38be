#!/usr/bin/env python3
"""The CPU-only architectures at their real sizes: random-weight
EmbeddingGemma-300m and ModernBERT-base built by transformers from their
published configurations, embedded by posy's CPU engine (api_embed, the
public API) and by transformers fp32 on the same token ids, in the same
run with the same threads: min cosine (the CPU bar is 0.99999) and the
time of each (the forward passes alone: not loading, not tokenizing), as
a ratio.

Why: the committed fixtures are tiny (hidden 64); this is where head size
256, a 262k vocabulary, GQA 3:1, 24 / 22 layers and the sliding windows at
their real widths (EmbeddingGemma |q - k| < 257, ModernBERT |q - k| <= 64)
run -- the longer sequences here cross both windows.  Needs torch +
transformers (not in CI); a measurement and a check, run by hand:

  python3 bench/fullsize_cpu.py BUILD_DIR [WORK_DIR] [--threads N] [--models a,b]

Qwen3-Embedding-0.6B's shape (28 layers, GQA 2:1, a 2.4 GB fp32 folder) is
the third model: not CPU-only, but the decoders' CPU path at full size;
gte-Qwen2-1.5B's (28 layers, GQA 6:1, a 6.2 GB fp32 folder) the fourth,
gtr-t5-base's encoder (T5 v1.0, 12 layers, relative position bias) the
fifth, nomic-embed-text-v1.5's (NomicBERT: post-LN, rotary, SwiGLU) the
sixth, gte-base-en-v1.5's (GTE v1.5: post-LN with biases, GeGLU, NTK
rotary; its reference is the hub's remote code, run from the folder
POSY_GTE_REF names, eager attention) the seventh, all four run only when
--models names them.
--models picks some of embeddinggemma-300m, modernbert-base, qwen3-0.6b,
gte-qwen2-1.5b, gtr-t5-base, nomic-embed-text-v1.5, gte-base-en-v1.5.

BUILD_DIR holds api_embed (a Release build).  Exit 1 when a min cosine is
under 0.99999.
"""
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import transformers as T

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "cuda"))
from e2e_common import GTE_HUB, RemoteRef, gte_module, gte_new_model  # noqa: E402

SEQ_LENS = [7, 64, 300, 700]


def configs():
    gemma = T.Gemma3TextConfig(  # google/embeddinggemma-300m's config.json
        vocab_size=262144, hidden_size=768, intermediate_size=1152, num_hidden_layers=24, num_attention_heads=3,
        num_key_value_heads=1, head_dim=256, max_position_embeddings=2048, rms_norm_eps=1e-6,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        sliding_window=512, query_pre_attn_scalar=256, hidden_activation="gelu_pytorch_tanh",
        use_bidirectional_attention=True, attn_logit_softcapping=None, final_logit_softcapping=None,
        pad_token_id=0, bos_token_id=2, eos_token_id=1)
    modernbert = T.ModernBertConfig(  # answerdotai/ModernBERT-base's config.json
        vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12,
        max_position_embeddings=8192, norm_eps=1e-5, norm_bias=False, hidden_activation="gelu",
        local_attention=128, global_attn_every_n_layers=3, global_rope_theta=160000.0, local_rope_theta=10000.0,
        pad_token_id=50283, bos_token_id=50281, eos_token_id=50282, cls_token_id=50281, sep_token_id=50282)
    qwen3 = T.Qwen3Config(  # Qwen/Qwen3-Embedding-0.6B's config.json (causal; mean pooling here, as the reference)
        vocab_size=151669, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=32768, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=True)
    qwen2 = T.Qwen2Config(  # Alibaba-NLP/gte-Qwen2-1.5B-instruct's config.json (6.2 GB in fp32)
        vocab_size=151646, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
        num_key_value_heads=2, max_position_embeddings=131072, rms_norm_eps=1e-6, rope_theta=1000000.0,
        tie_word_embeddings=False)
    t5 = T.T5Config(  # sentence-transformers/gtr-t5-base's encoder (T5 v1.0: relu); n_positions 1024 here so that
        # the 700-token sequence runs (T5's relative bias has no length limit; the real config says 512)
        vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12, feed_forward_proj="relu",
        relative_attention_num_buckets=32, relative_attention_max_distance=128, layer_norm_epsilon=1e-6,
        n_positions=1024, is_encoder_decoder=False, use_cache=False, pad_token_id=0, eos_token_id=1)
    nomic = T.NomicBertConfig(  # nomic-ai/nomic-embed-text-v1.5's sizes (post-LN, rotary, SwiGLU, no biases)
        vocab_size=30528, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
        max_position_embeddings=8192, type_vocab_size=2, layer_norm_eps=1e-12,
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, pad_token_id=0)
    return {"embeddinggemma-300m": (T.Gemma3TextModel, gemma), "modernbert-base": (T.ModernBertModel, modernbert),
            "qwen3-0.6b": (T.Qwen3Model, qwen3), "gte-qwen2-1.5b": (T.Qwen2Model, qwen2),
            "gtr-t5-base": (T.T5EncoderModel, t5), "nomic-embed-text-v1.5": (T.NomicBertModel, nomic),
            # Alibaba-NLP/gte-base-en-v1.5's config.json: no class in transformers (cls None: the remote code)
            "gte-base-en-v1.5": (None, dict(GTE_HUB, vocab_size=30528, hidden_size=768, intermediate_size=3072,
                                            num_hidden_layers=12, num_attention_heads=12,
                                            max_position_embeddings=8192, type_vocab_size=0, hidden_act="gelu",
                                            layer_norm_eps=1e-12, rope_theta=500000.0,
                                            rope_scaling={"factor": 2.0, "type": "ntk"}, pack_qkv=True))}


def gte_folder(cfg, d):
    """gte-base-en-v1.5's shape, random, saved as the hub's checkpoint is;
    returns the fp32 reference (new-impl's NewModel, eager attention)."""
    from safetensors.torch import load_file, save_file
    mod = gte_module()
    if mod is None:
        sys.exit("gte-base-en-v1.5: set POSY_GTE_REF to a folder holding Alibaba-NLP/new-impl's modeling.py "
                 "and configuration.py")
    if not os.path.exists(os.path.join(d, "model.safetensors")):
        m = gte_new_model(mod, cfg).eval()
        with torch.no_grad():
            for n, p in m.named_parameters():
                if p.dim() > 1:
                    p.normal_(0.0, 0.03 if "embed" in n else 1.0 / p.shape[1] ** 0.5)
                elif n.endswith("weight"):  # its LayerNorms around their unit
                    p.normal_(1.0, 0.1)
        os.makedirs(d, exist_ok=True)
        save_file({k: v.contiguous() for k, v in m.state_dict().items()}, os.path.join(d, "model.safetensors"))
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
        st_files(d, cfg["hidden_size"])
    m = gte_new_model(mod, cfg).eval()
    m.load_state_dict(load_file(os.path.join(d, "model.safetensors")))
    return RemoteRef(m), cfg["vocab_size"]


def st_files(d, hidden):
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
              open(os.path.join(d, "modules.json"), "w"))
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(d, "2_Normalize"), exist_ok=True)
    json.dump({"word_embedding_dimension": hidden, "pooling_mode_mean_tokens": True},
              open(os.path.join(d, "1_Pooling", "config.json"), "w"))
    json.dump({"max_seq_length": 2048}, open(os.path.join(d, "sentence_bert_config.json"), "w"))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else os.cpu_count()
    if "--threads" in sys.argv:
        args = [a for a in args if a != str(threads)]
    only = sys.argv[sys.argv.index("--models") + 1].split(",") if "--models" in sys.argv else None
    if only:
        args = [a for a in args if a != sys.argv[sys.argv.index("--models") + 1]]
    build, work = args[0], args[1] if len(args) > 1 else "/tmp/posy-fullsize"
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    worst_all = 1.0
    for name, (cls, cfg) in configs().items():
        if (only and name not in only) or (not only and name in ("gte-qwen2-1.5b", "gtr-t5-base", "nomic-embed-text-v1.5",
                                                                 "gte-base-en-v1.5")):
            continue
        d = os.path.join(work, name)
        if cls is None:
            m, vocab = gte_folder(cfg, d)
        elif not os.path.exists(os.path.join(d, "model.safetensors")):
            m = cls(cfg).eval()
            with torch.no_grad():  # wider than the init so that layers matter; norms around their unit
                for n, p in m.named_parameters():
                    if p.dim() > 1:
                        p.normal_(0.0, 0.03 if "embed" in n else 1.0 / p.shape[1] ** 0.5)
                    elif "norm" in n:
                        p.normal_(0.0 if name.startswith("embeddinggemma") else 1.0, 0.1)
            m.save_pretrained(d, safe_serialization=True)
            st_files(d, getattr(cfg, "hidden_size", getattr(cfg, "d_model", 0)))
        if cls is not None:
            m = cls.from_pretrained(d, dtype=torch.float32).eval()
            m.config._attn_implementation = "eager"
            vocab = cfg.vocab_size
        seqs = [rng.integers(3, min(vocab, 50000), n).tolist() for n in SEQ_LENS]
        sb = os.path.join(work, name + ".seqs.bin")
        with open(sb, "wb") as f:
            f.write(struct.pack("<i", len(seqs)))
            f.write(struct.pack("<%di" % len(seqs), *[len(s) for s in seqs]))
            for s in seqs:
                f.write(struct.pack("<%di" % len(s), *s))
        t0 = time.perf_counter()
        ref = []
        with torch.no_grad():
            for s in seqs:
                h = m(input_ids=torch.tensor([s])).last_hidden_state[0].double().mean(0)
                ref.append((h / h.norm()).numpy())
        t_hf = time.perf_counter() - t0
        out = os.path.join(work, name + ".out.bin")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), POSY_LOG="warn")
        # one sequence a batch (budget = the longest), as transformers ran them
        cmd = [os.path.join(build, "api_embed"), d, sb, out, "cpu", str(max(SEQ_LENS))]
        subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm: page the weights in
        r = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
        t_posy = float(r.stdout.split("embedded in ")[1].split()[0])  # the embedding alone, as transformers' time
        got = np.fromfile(out, dtype=np.float32).reshape(len(seqs), -1).astype(np.float64)
        cos = [float(g @ r / np.linalg.norm(g) / np.linalg.norm(r)) for g, r in zip(got, ref)]
        worst_all = min(worst_all, min(cos))
        print(json.dumps({"model": name, "threads": threads, "lens": SEQ_LENS, "cosine": [round(c, 7) for c in cos],
                          "posy_s": round(t_posy, 3), "transformers_s": round(t_hf, 3),
                          "speedup": round(t_hf / t_posy, 2)}), flush=True)
    print("fullsize_cpu: %s (min cosine %.7f)" % ("PASS" if worst_all >= 0.99999 else "FAIL", worst_all))
    return 0 if worst_all >= 0.99999 else 1


if __name__ == "__main__":
    sys.exit(main())
