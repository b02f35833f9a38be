"""End-to-end GPU check of the decoders without Qwen3's q/k norm (Qwen2,
Mistral, Llama), and of Gemma 3 and ModernBERT, on posy's CUDA backend, against transformers fp32 on the
same random weights.

Each model is a real embedder's configuration with fewer layers, random
weights (torch.manual_seed; matrices N(0, 1/fan_in), embeddings N(0, 1),
norm weights 1 + 0.2 N(0, 1), biases 0.1 N(0, 1)), rounded to bf16 and saved
as a Hugging Face folder with its sentence-transformers files, so posy
loads it exactly as a user's download (config.json, safetensors, pooling):
  qwen2    Alibaba-NLP/gte-Qwen2-1.5B-instruct: hidden 1536, 12 heads, 2 KV
           heads, head_dim 128, bias on q/k/v, last-token pooling, causal
  mistral  intfloat/e5-mistral-7b-instruct: hidden 4096, 32 heads, 8 KV
           heads, intermediate 14336, sliding_window 4096, last token, causal
  llama    a Llama-3.2-1B shape (hidden 2048, 32 heads of 64, 8 KV heads,
           rope_theta 500000 without rope_scaling) with attention_bias,
           "is_causal": false and mean pooling (an LLM2Vec-style model)
  llama3   the same shape with Llama 3.2's rope scaling as its config.json
           writes it (top-level rope_theta and "rope_scaling": llama3, factor
           32, low / high 1 / 4), but original_max_position_embeddings 64
           instead of 8192, so that sequences of up to 512 tokens see every
           band move; no bias, causal, last-token pooling
tests/cuda/api_embed embeds the 68 sequences of e2e_vs_transformers.py
(1..512 tokens) on the GPU twice: each sequence alone (budget 1: the
one-query chain at <= 32 tokens, every bucket's eager run, capture and
replays) and packed into batches of <= 4096 tokens, several in flight.
Both must reach min cosine >= 0.999 against transformers (each sequence
alone, fp32, TF32 off, eager attention, explicit additive mask), and the
two runs >= 0.999 against each other.

  gemma3   google/embeddinggemma-300m (Gemma 3: head size 256, GQA 3:1,
           (1 + w) norms around attention and the MLP, gelu_tanh GLU, sliding
           layers |q - k| < 257 with their own rotary), 24 layers, mean
  modernbert answerdotai/ModernBERT-base (LayerNorms, GELU GLU, rotary
           alone, local layers |q - k| <= 64 every 2 of 3), 22 layers, mean
  nomic    nomic-ai/nomic-embed-text-v1.5 (NomicBERT: post-LayerNorm layers,
           rotary base 1000, SwiGLU, no linear biases, token types), 12
           layers, mean; config.json rewritten in Nomic's own keys (n_embd,
           rotary_emb_base, ...) after the reference, as the hub ships it
  gte      Alibaba-NLP/gte-base-en-v1.5 (GTE v1.5, model_type "new": NomicBERT's
           post-LayerNorm layer with biases on qkv / o / down, GELU(gate) *
           up, rotary base 500000 with fixed NTK scaling x2, no token types),
           12 layers, CLS pooling; the reference is the hub's remote code
           (transformers does not ship it): POSY_GTE_REF names a folder with
           Alibaba-NLP/new-impl's modeling.py and configuration.py.  On the
           GPU it runs with POSY_CUDA_GTE=1 (the backend's opt-in until a
           run has checked it).
  jina     jinaai/jina-embeddings-v2-base-en (JinaBERT v2: model_type bert with
           ALiBi, 12 heads, GeGLU, token types), 12 layers, mean pooling; its
           reference is the remote code from the folder POSY_JINA_REF names.
           CPU only (--device cpu): the CUDA backend refuses ALiBi.
The last five are referenced in their own mode (no explicit mask: theirs is
bidirectional with sliding windows); the sequences of up to 512 tokens
cross both windows.

usage: e2e_decoders.py BUILD_DIR WORK_DIR [qwen2|mistral|llama|llama3|gemma3|modernbert|nomic|gte ...] [--layers N]
       [--device cpu]
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import transformers as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import (GTE_HUB, JINA_HUB, RemoteRef, cosines, gte_new_model, jina_new_model,  # noqa: E402
                        nomic_hub_keys, remote_module)
from e2e_vs_transformers import sequences, write_seqs  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

MODELS = {
    "qwen2": (T.Qwen2Config, T.Qwen2Model, "last", True, 4,
              dict(hidden_size=1536, num_attention_heads=12, num_key_value_heads=2, intermediate_size=8960,
                   vocab_size=151646, rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=131072,
                   hidden_act="silu", use_sliding_window=False, tie_word_embeddings=False)),
    "mistral": (T.MistralConfig, T.MistralModel, "last", True, 2,
                dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                     vocab_size=32000, rope_theta=10000.0, rms_norm_eps=1e-5, max_position_embeddings=32768,
                     sliding_window=4096, hidden_act="silu", tie_word_embeddings=False)),
    "llama": (T.LlamaConfig, T.LlamaModel, "mean", False, 2,
              dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                   intermediate_size=8192, vocab_size=128256, rope_theta=500000.0, rms_norm_eps=1e-5,
                   max_position_embeddings=131072, hidden_act="silu", attention_bias=True, mlp_bias=False,
                   tie_word_embeddings=True)),
    "llama3": (T.LlamaConfig, T.LlamaModel, "last", True, 2,
               dict(hidden_size=2048, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                    intermediate_size=8192, vocab_size=128256, rms_norm_eps=1e-5,
                    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 64},
                    max_position_embeddings=131072, hidden_act="silu", attention_bias=False, mlp_bias=False,
                    tie_word_embeddings=True)),
    # google/embeddinggemma-300m's config.json: head size 256, GQA 3:1, sliding layers |q - k| < 257
    "gemma3": (T.Gemma3TextConfig, T.Gemma3TextModel, "mean", False, 24,
               dict(hidden_size=768, intermediate_size=1152, num_attention_heads=3, num_key_value_heads=1,
                    head_dim=256, vocab_size=262144, max_position_embeddings=2048, rms_norm_eps=1e-6,
                    rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                    sliding_window=512, query_pre_attn_scalar=256, hidden_activation="gelu_pytorch_tanh",
                    use_bidirectional_attention=True, attn_logit_softcapping=None, final_logit_softcapping=None,
                    pad_token_id=0, bos_token_id=2, eos_token_id=1)),
    # answerdotai/ModernBERT-base's config.json: LayerNorms, GELU GLU, local layers |q - k| <= 64
    "modernbert": (T.ModernBertConfig, T.ModernBertModel, "mean", False, 22,
                   dict(hidden_size=768, intermediate_size=1152, num_attention_heads=12, vocab_size=50368,
                        max_position_embeddings=8192, norm_eps=1e-5, norm_bias=False, hidden_activation="gelu",
                        local_attention=128, global_attn_every_n_layers=3, global_rope_theta=160000.0,
                        local_rope_theta=10000.0, pad_token_id=50283, bos_token_id=50281, eos_token_id=50282,
                        cls_token_id=50281, sep_token_id=50282)),
    # nomic-ai/nomic-embed-text-v1.5's sizes (its config.json in transformers' keys; Nomic's after the reference)
    "nomic": (T.NomicBertConfig, T.NomicBertModel, "mean", False, 12,
              dict(hidden_size=768, intermediate_size=3072, num_attention_heads=12, vocab_size=30528,
                   max_position_embeddings=8192, type_vocab_size=2, layer_norm_eps=1e-12,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, pad_token_id=0)),
    # Alibaba-NLP/gte-base-en-v1.5's config.json (remote code: the classes come from POSY_GTE_REF)
    "gte": (None, None, "cls", False, 12,
            dict(hidden_size=768, intermediate_size=3072, num_attention_heads=12, vocab_size=30528,
                 max_position_embeddings=8192, type_vocab_size=0, layer_norm_eps=1e-12, hidden_act="gelu",
                 rope_theta=500000.0, rope_scaling={"factor": 2.0, "type": "ntk"}, pack_qkv=True,
                 pad_token_id=0)),
    # jinaai/jina-embeddings-v2-base-en's config.json (remote code: the classes come from POSY_JINA_REF)
    "jina": (None, None, "mean", False, 12,
             dict(hidden_size=768, intermediate_size=3072, num_attention_heads=12, vocab_size=30528,
                  max_position_embeddings=8192, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0)),
}
# bidirectional by their own configuration (not "is_causal"), with sliding
# windows an explicit full mask would switch off: referenced in their own mode
REMOTE = {"gte": ("POSY_GTE_REF", "modeling", GTE_HUB, gte_new_model),
          "jina": ("POSY_JINA_REF", "modeling_bert", JINA_HUB, jina_new_model)}
OWN_MODE = ("gemma3", "modernbert", "nomic", "gte", "jina")


def nomic_hub_config(d):
    """config.json in the keys of Nomic's own modeling code, as
    nomic-embed-text-v1.5 ships it (what posy reads from a download)."""
    hub = nomic_hub_keys(json.load(open(os.path.join(d, "config.json"))))
    json.dump(hub, open(os.path.join(d, "config.json"), "w"), indent=2)


def log(*a):
    print(*a, flush=True)


def make_remote(name, kw, layers, d):
    """GTE / JinaBERT: the remote code's model of the hub's config.json
    keys, saved as the hub's checkpoints are (safetensors + that config)."""
    from safetensors.torch import save_file
    env, modname, hub, new_model = REMOTE[name]
    mod = remote_module(env, modname)
    if mod is None:
        sys.exit(f"{name}: set {env} to a folder holding the model's remote code ({modname}.py and its configuration)")
    c = dict(hub, **kw, num_hidden_layers=layers)
    m = new_model(mod, c).eval()
    os.makedirs(d, exist_ok=True)
    return m, c, lambda: (save_file({k: v.to(torch.bfloat16).contiguous() for k, v in m.state_dict().items()},
                                    os.path.join(d, "model.safetensors"), metadata={"format": "pt"}),
                          json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2))


def load_remote(name, d, dtype):
    """The saved GTE / JinaBERT folder in a fresh model of its remote code (fp32 or bf16), as a user's load."""
    from safetensors.torch import load_file
    env, modname, _, new_model = REMOTE[name]
    c = json.load(open(os.path.join(d, "config.json")))
    m = new_model(remote_module(env, modname), c)
    m.load_state_dict({k: v.float() for k, v in load_file(os.path.join(d, "model.safetensors")).items()})
    return m.to(dtype)


def make(name, layers, d):
    cfg_cls, model_cls, pooling, causal, _, kw = MODELS[name]
    torch.manual_seed(1234)
    if name in REMOTE:
        m, _, save = make_remote(name, kw, layers, d)
    else:
        m = model_cls(cfg_cls(**kw, num_hidden_layers=layers)).eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 1:  # norm weights (NomicBERT's embeddings.LayerNorm, GTE's attn_ln too) near 1, biases near 0
                p.copy_((1 + 0.2 * torch.randn_like(p)) if ("norm" in n.lower() or "_ln." in n) and n.endswith("weight")
                        else 0.1 * torch.randn_like(p))
            elif "embed_tokens" in n:
                p.normal_(0.0, 1.0)
            else:
                p.normal_(0.0, p.shape[1] ** -0.5)
            p.copy_(p.to(torch.bfloat16).float())
    if name in REMOTE:
        save()
    else:
        m.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    c = json.load(open(os.path.join(d, "config.json")))
    if not causal and name not in OWN_MODE:
        c["is_causal"] = False
    if "rope_theta" in kw.get("rope_parameters", {}) and name != "nomic":  # as Llama 3.2's own config.json: transformers < 5's keys
        rp = dict(c.pop("rope_parameters"))
        c["rope_theta"] = rp.pop("rope_theta")
        c["rope_scaling"] = rp
    json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
              open(os.path.join(d, "modules.json"), "w"))
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    json.dump({"word_embedding_dimension": kw["hidden_size"], "pooling_mode_mean_tokens": pooling == "mean",
               "pooling_mode_lasttoken": pooling == "last", "pooling_mode_cls_token": pooling == "cls"},
              open(os.path.join(d, "1_Pooling", "config.json"), "w"))
    json.dump({"max_seq_length": 512}, open(os.path.join(d, "sentence_bert_config.json"), "w"))
    return pooling, causal


@torch.no_grad()
def reference(d, seqs, pooling, causal, model_cls, dev, own_mode=False, dtype=torch.float32, name=None):
    if model_cls is None:  # GTE, JinaBERT: the hub's remote code
        m = RemoteRef(load_remote(name, d, dtype).to(dev).eval())
    else:
        m = model_cls.from_pretrained(d, dtype=dtype, attn_implementation="eager").to(dev).eval()
    out = []
    for s in seqs:
        n = len(s)
        mask = torch.zeros(1, 1, n, n, device=dev)
        if causal:
            mask = torch.triu(torch.full((1, 1, n, n), float("-inf"), device=dev), diagonal=1)
        if own_mode:
            mask = None
        h = m(input_ids=torch.from_numpy(s.astype(np.int64))[None].to(dev), attention_mask=mask).last_hidden_state[0]
        v = (h[-1] if pooling == "last" else h[0] if pooling == "cls" else h.mean(0)).double()
        out.append((v / v.norm()).cpu().numpy())
    # the explicit mask is the model's own mode
    s = seqs[20]
    h = m(input_ids=torch.from_numpy(s.astype(np.int64))[None].to(dev)).last_hidden_state[0]
    v = (h[-1] if pooling == "last" else h[0] if pooling == "cls" else h.mean(0)).double()
    diff = np.abs((v / v.norm()).cpu().numpy() - out[20]).max()
    assert diff < (1e-4 if dtype == torch.float32 else 1e-2), diff
    del m
    torch.cuda.empty_cache() if dev == "cuda" else None
    return np.stack(out)


def main():
    args = sys.argv[1:]
    layers, device = None, "cuda"
    if "--device" in args:  # cpu: a dry run of the script itself (api_embed's CPU engine)
        i = args.index("--device")
        device = args[i + 1]
        del args[i:i + 2]
    if "--layers" in args:
        i = args.index("--layers")
        layers = int(args[i + 1])
        del args[i:i + 2]
    build, root = args[0], args[1]
    names = args[2:] or list(MODELS)
    os.makedirs(root, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    ok = True
    for name in names:
        t0 = time.time()
        d = os.path.join(root, f"dec-{name}")
        L = layers or MODELS[name][4]
        pooling, causal = make(name, L, d)
        H = MODELS[name][5]["hidden_size"]
        seqs = sequences(MODELS[name][5]["vocab_size"])
        sp = os.path.join(root, f"dec-{name}-seqs.bin")
        write_seqs(sp, seqs)
        ref = reference(d, seqs, pooling, causal, MODELS[name][1], dev, name in OWN_MODE, name=name)
        # transformers' own bf16 run against its fp32: how far bf16 alone moves this model's vectors
        # (the yardstick for posy's bf16 figures below)
        c = cosines(reference(d, seqs, pooling, causal, MODELS[name][1], dev, name in OWN_MODE, torch.bfloat16,
                              name=name), ref)
        w = int(np.argmin(c))
        log(f"{name} {'its remote-code reference' if name in REMOTE else 'transformers'} bf16 vs its fp32: min cosine "
            f"{c.min():.6f} (len {len(seqs[w])}), mean {c.mean():.6f}")
        if name == "nomic":
            nomic_hub_config(d)
        log(f"{name}: {L} layers written and referenced in {time.time() - t0:.1f} s")
        outs = {}
        for label, budget in (("single", "1"), ("mix4096", "4096")):
            o = os.path.join(root, f"dec-{name}-{label}.bin")
            r = subprocess.run([os.path.join(build, "api_embed"), d, sp, o, device, budget])
            if r.returncode:
                log(f"{name} {label}: api_embed failed (exit {r.returncode})")
                ok = False
                continue
            outs[label] = np.fromfile(o, dtype=np.float32).reshape(-1, H)
            c = cosines(outs[label], ref)
            w = int(np.argmin(c))
            peer = "its remote-code reference" if name in REMOTE else "transformers"
            log(f"{name} {label} ({device}) vs {peer} fp32: min cosine {c.min():.6f} (len {len(seqs[w])}), "
                f"mean {c.mean():.6f}")
            ok &= bool(c.min() >= 0.999)
        if len(outs) == 2:
            c = cosines(outs["single"], outs["mix4096"])
            log(f"{name} single vs mix4096: min cosine {c.min():.6f}")
            ok &= bool(c.min() >= 0.999)
    log("e2e_decoders:", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
